// Readers of measured serving runs: the silicon-sample CSV (with repeat merging) and aiperf
// artefact folders.
#include <climits>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <algorithm>
#include <cctype>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <tuple>

#include "common/csv.hpp"
#include "common/error.hpp"
#include "common/files.hpp"
#include "common/json_reader.hpp"
#include "common/text.hpp"
#include "models/model_spec.hpp"
#include "sim/validate/validate.hpp"

namespace servesim::sim::validate {
namespace {

double median(std::vector<double> v) {
  if (v.empty()) return NAN;
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

// A whole number written as "4" or "4.0", at most `max`; blank is 0.
int whole(const std::string& s, const std::string& file, int line_no, const std::string& column, int max = 1000000000) {
  if (s.empty()) return 0;
  char* end = nullptr;
  const double v = text::decimal(s) ? std::strtod(s.c_str(), &end) : NAN;
  if (!end || *end || !(v >= 0) || v != std::floor(v) || v > max)
    throw Error(file, "line " + std::to_string(line_no) + ": " + column,
                "expected a whole number in 0.." + std::to_string(max) + ", got '" + s + "'");
  return static_cast<int>(v);
}

// Measured latencies: 1 us to 1 day, in milliseconds (anything else is not a measurement).
constexpr double kMinMs = 1e-3, kMaxMs = 86400e3;

double positive(const std::string& s, const std::string& file, int line_no, const std::string& column) {
  char* end = nullptr;
  const double v = text::decimal(s) ? std::strtod(s.c_str(), &end) : NAN;
  if (s.empty() || !end || *end || !(v >= kMinMs && v <= kMaxMs))
    throw Error(file, "line " + std::to_string(line_no) + ": " + column,
                "expected milliseconds from 0.001 (1 us) to 86400000 (1 day), got '" + s + "'");
  return v;
}

}  // namespace

int parse_concurrency(const std::string& data_source, const std::string& id) {
  auto digits_at = [](const std::string& s, std::size_t pos) {
    std::size_t e = pos;
    while (e < s.size() && std::isdigit(static_cast<unsigned char>(s[e]))) ++e;
    if (e == pos || e - pos > 9) return 0;
    return std::stoi(s.substr(pos, e - pos));
  };
  std::size_t start = 0;
  while (start <= data_source.size()) {
    std::size_t end = data_source.find(';', start);
    if (end == std::string::npos) end = data_source.size();
    std::string f = data_source.substr(start, end - start);
    const auto b = f.find_first_not_of(' ');
    f = b == std::string::npos ? "" : f.substr(b);
    static const std::string key = "silicon_concurrency=";
    if (f.rfind(key, 0) == 0) {
      const int c = digits_at(f, key.size());
      if (c > 0 && key.size() + std::to_string(c).size() == f.find_last_not_of(' ') + 1) return c;
    }
    start = end + 1;
  }
  for (std::size_t pos = id.find("_c"); pos != std::string::npos; pos = id.find("_c", pos + 1)) {
    const int c = digits_at(id, pos + 2);
    const std::size_t after = pos + 2 + (c > 0 ? std::to_string(c).size() : 0);
    if (c > 0 && after < id.size() && id[after] == '_') return c;
  }
  return 0;
}

bool parse_id_layout(const std::string& id, int* tp, int* ep) {
  // "_tp<N>" then optionally "_<digits>", then "_ep<M>" and optionally "_<digits>", then "_" or end.
  auto number = [&](std::size_t& pos) {
    std::size_t e = pos;
    while (e < id.size() && std::isdigit(static_cast<unsigned char>(id[e]))) ++e;
    if (e == pos || e - pos > 4) return -1;
    const int v = std::stoi(id.substr(pos, e - pos));
    pos = e;
    return v;
  };
  auto skip_suffix = [&](std::size_t& pos, const char* next) {  // an optional "_<digits>" not followed by `next`
    if (pos < id.size() && id[pos] == '_' && id.compare(pos + 1, std::strlen(next), next) != 0) {
      std::size_t q = pos + 1;
      if (number(q) >= 0) pos = q;
    }
  };
  for (std::size_t at = id.find("_tp"); at != std::string::npos; at = id.find("_tp", at + 1)) {
    std::size_t pos = at + 3;
    const int t = number(pos);
    if (t < 1) continue;
    skip_suffix(pos, "ep");
    if (id.compare(pos, 3, "_ep") != 0) continue;
    pos += 3;
    const int e = number(pos);
    if (e < 1) continue;
    skip_suffix(pos, "");
    if (pos != id.size() && id[pos] != '_') continue;
    *tp = t, *ep = e;
    return true;
  }
  return false;
}

std::vector<MeasuredPoint> read_silicon_csv(const std::string& path, CsvReadStats* stats) {
  text::CsvRecords in(read_input_file(path, kMaxTraceFileBytes), path);   // a regular file of sane size
  std::vector<std::string> header, f;
  int line_no = 1;
  if (!in.next(header, line_no)) throw Error(path, "", "empty file (expected a header line)");
  std::map<std::string, std::size_t> col;
  for (std::size_t i = 0; i < header.size(); ++i)
    if (!col.emplace(header[i], i).second)
      throw Error(path, "header", "column '" + header[i] + "' appears twice (columns " + std::to_string(col[header[i]] + 1) + " and " +
                                      std::to_string(i + 1) + "); keep one");
  for (const char* need : {"id", "silicon_data_source", "backend", "model_path", "system", "mode", "isl", "osl",
                           "silicon_ttft_ms", "silicon_tpot_ms"})
    if (!col.count(need))
      throw Error(path, "header", std::string("no column '") + need +
                                      "' (expected the silicon-sample layout: id, silicon_data_source, backend, model_path, "
                                      "system, precision, mode, isl, osl, ..., silicon_ttft_ms, silicon_tpot_ms)");
  const std::size_t c_id = col["id"], c_src = col["silicon_data_source"], c_ttft = col["silicon_ttft_ms"],
                    c_tpot = col["silicon_tpot_ms"];

  struct Acc {
    MeasuredPoint p;
    std::vector<double> ttft, tpot;
  };
  std::vector<Acc> points;
  std::map<std::string, std::size_t> index;   // dedup key -> point
  int rows = 0;
  while (in.next(f, line_no)) {
    if (f.size() != header.size())
      throw Error(path, "line " + std::to_string(line_no),
                  std::to_string(f.size()) + " fields, the header has " + std::to_string(header.size()));
    ++rows;
    auto get = [&](const char* name) -> std::string {
      auto it = col.find(name);
      return it == col.end() ? std::string() : f[it->second];
    };
    auto num = [&](const char* name) { return whole(get(name), path, line_no, name, 65536); };
    const int conc = parse_concurrency(f[c_src], f[c_id]);
    {
      // A concurrency written but not a client count is an error in the file, not "none recorded"
      // (nor silently replaced by the id's _c<N>_).
      const auto at = f[c_src].find("silicon_concurrency=");
      if (at != std::string::npos && parse_concurrency(f[c_src], "") == 0) {
        const std::string v = f[c_src].substr(at + 20, f[c_src].find(';', at) - at - 20);
        throw Error(path, "line " + std::to_string(line_no) + ": silicon_data_source",
                    "silicon_concurrency=" + v + ": expected a whole number of clients >= 1");
      }
    }
    // An aggregated row whose columns give TP e x e with MoE TP e x EP e (no attention DP) is TP e
    // EP e: the dumps wrote the MoE grid's product as tp_size. Of the calibration CSV's 286 such
    // rows (SGLang and TRT-LLM; DeepSeek-R1/V3 and Qwen3.5-397B-A17B on H100, H200, B200, B300), the
    // 72 with a twin measuring the same TTFT and TPOT to the last digit all share it with a TP e
    // EP e row (MoE TP 1) of another dump, 55 of them equal in every other column (17 name the
    // other of DeepSeek-R1 / V3), and no twin has another layout; Qwen3.5-397B-A17B's twinless
    // TP4 MoE TP2 x EP2 B300 rows predict TPOT within -6 % median as TP2 EP2. Such a row merges
    // with its twin (the key takes the layout it runs).
    // The same with attention DP: TP 1, DP e x e, MoE TP e x EP e (TensorRT-LLM; DeepSeek-R1 and
    // gpt-oss-120b on B200 and H200, 47 rows) is DP e EP e on e GPUs, its batch_size the clients
    // over e x e: the 18 with a DP e EP e row at the same clients measure its TTFT and TPOT to the
    // last digit (DeepSeek-R1 B200 FP4 at 64 clients of 1,024 + 1,024 tokens: 1,085.46 ms and
    // 12.289 ms, as DP8 EP8 at batch 8; their ids name TP e EP e), and 2 another run of it. A
    // batch_size of a rank's share (clients / (e x e)) becomes the twin's (clients / e).
    const int grid_e = num("moe_ep_size");
    const bool grid_moe = get("mode") == "agg" && grid_e > 1 && num("moe_tp_size") == grid_e;
    const bool moe_grid = grid_moe && num("tp_size") == grid_e * grid_e && num("attention_dp_size") <= 1;
    const bool dp_grid = grid_moe && num("tp_size") <= 1 && num("attention_dp_size") == grid_e * grid_e;
    std::string key;
    for (std::size_t i = 0; i < f.size(); ++i) {
      if (i == c_id || i == c_src || i == c_ttft || i == c_tpot) continue;
      if (moe_grid && header[i] == "tp_size") key += std::to_string(grid_e);
      else if ((moe_grid || dp_grid) && header[i] == "moe_tp_size") key += "1";
      else if (dp_grid && header[i] == "attention_dp_size") key += std::to_string(grid_e);
      else if (dp_grid && header[i] == "batch_size" && std::int64_t(num("batch_size")) * grid_e * grid_e == conc)
        key += std::to_string(num("batch_size") * grid_e);   // a rank's share of the clients, as its twin's
      else key += f[i];
      key += '\x1f';
    }
    key += std::to_string(conc);
    const double ttft = positive(f[c_ttft], path, line_no, "silicon_ttft_ms");
    const double tpot = positive(f[c_tpot], path, line_no, "silicon_tpot_ms");
    auto [it, fresh] = index.emplace(key, points.size());
    if (fresh && points.size() >= kMaxPoints) {
      index.erase(it);
      throw Error(path, "line " + std::to_string(line_no),
                  "more than " + std::to_string(kMaxPoints) + " distinct points (rows that differ beyond id and the "
                  "measured figures; about 5 KB of memory each when simulated); split the file");
    }
    if (!fresh) {
      Acc& a = points[it->second];
      a.ttft.push_back(ttft);
      a.tpot.push_back(tpot);
      ++a.p.merged;
      continue;
    }
    Acc a;
    MeasuredPoint& p = a.p;
    p.id = f[c_id];
    p.source = path + ":" + std::to_string(line_no);
    {
      // `source_file=NAME` (the first field), or a bare first field ("db-dump/2026-04-27").
      const std::string& src = f[c_src];
      const auto at = src.find("source_file=");
      const std::size_t from = at == std::string::npos ? 0 : at + 12;
      const auto end = src.find(';', from);
      std::string v = src.substr(from, end == std::string::npos ? std::string::npos : end - from);
      v.erase(0, v.find_first_not_of(" \t"));
      v.erase(v.find_last_not_of(" \t") + 1);
      p.source_file = v;
    }
    p.backend = get("backend");
    p.backend_version = get("backend_version");
    p.model_path = get("model_path");
    p.system = get("system");
    p.precision = get("precision");
    p.mode = get("mode");
    p.gemm_quant = get("gemm_quant_mode");
    p.moe_quant = get("moe_quant_mode");
    p.isl = whole(get("isl"), path, line_no, "isl");
    p.osl = whole(get("osl"), path, line_no, "osl");
    if (p.isl < 1 || p.osl < 1) throw Error(path, "line " + std::to_string(line_no) + ": isl/osl", "must be >= 1");
    p.concurrency = conc;
    p.tp = num("tp_size");
    p.pp = num("pp_size");
    p.attention_dp = num("attention_dp_size");
    p.columns_dp = p.attention_dp;
    p.batch_size = num("batch_size");
    p.moe_tp = num("moe_tp_size");
    p.moe_ep = num("moe_ep_size");
    p.prefill_workers = num("prefill_num_workers");
    p.prefill_tp = num("prefill_tp_size");
    p.prefill_pp = num("prefill_pp_size");
    p.prefill_dp = num("prefill_attention_dp_size");
    p.prefill_moe_ep = num("prefill_moe_ep_size");
    p.decode_workers = num("decode_num_workers");
    p.decode_tp = num("decode_tp_size");
    p.decode_pp = num("decode_pp_size");
    p.decode_dp = num("decode_attention_dp_size");
    p.decode_moe_ep = num("decode_moe_ep_size");
    int itp = 0, iep = 0;
    const bool id_layout = parse_id_layout(p.id, &itp, &iep);
    const std::string columns =
        "columns TP" + std::to_string(p.tp) + " DP" + std::to_string(p.attention_dp) + " EP" + std::to_string(p.moe_ep);
    if (p.mode == "agg" && p.attention_dp > 1 && id_layout && itp == p.tp && iep != p.moe_ep) {
      p.layout_note = "id names TP" + std::to_string(itp) + " EP" + std::to_string(iep) + "; " + columns + ": the id's layout is run";
      p.attention_dp = 1;
      p.moe_ep = iep;
      p.layout_rewrite = LayoutRewrite::from_id;
    } else if (p.mode == "agg" && !id_layout && p.attention_dp > 1 && p.attention_dp == p.tp && p.moe_ep == p.tp * p.attention_dp) {
      p.layout_note = columns + ", the pattern of the rows whose id names TP" + std::to_string(p.tp) + " EP" + std::to_string(p.tp) +
                      ": TP" + std::to_string(p.tp) + " EP" + std::to_string(p.tp) + " is run";
      p.attention_dp = 1;
      p.moe_ep = p.tp;
      p.layout_rewrite = LayoutRewrite::from_pattern;
    }
    if (moe_grid) {
      p.layout_note = columns + " MoE TP" + std::to_string(grid_e) + ": tp_size is the MoE grid's TP" +
                      std::to_string(grid_e) + " x EP" + std::to_string(grid_e) + ", TP" + std::to_string(grid_e) + " EP" +
                      std::to_string(grid_e) + " is run";
      p.tp = grid_e;
      p.moe_tp = 1;
      p.layout_rewrite = LayoutRewrite::from_moe_grid;
    }
    if (dp_grid) {
      p.layout_note = columns + " MoE TP" + std::to_string(grid_e) + ": attention_dp_size is the MoE grid's TP" +
                      std::to_string(grid_e) + " x EP" + std::to_string(grid_e) + ", DP" + std::to_string(grid_e) + " EP" +
                      std::to_string(grid_e) + " is run";
      p.attention_dp = p.columns_dp = grid_e;
      if (std::int64_t(p.batch_size) * grid_e * grid_e == conc) p.batch_size *= grid_e;
      p.moe_tp = 1;
      p.layout_rewrite = LayoutRewrite::from_moe_grid;
    }
    a.ttft.push_back(ttft);
    a.tpot.push_back(tpot);
    points.push_back(std::move(a));
  }
  if (rows == 0) throw Error(path, "", "no data rows");
  CsvReadStats st;
  st.rows = rows;
  std::vector<MeasuredPoint> out;
  out.reserve(points.size());
  for (auto& a : points) {
    MeasuredPoint p = std::move(a.p);
    p.ttft_ms = median(a.ttft);
    p.tpot_ms = median(a.tpot);
    std::set<std::pair<double, double>> runs;
    for (std::size_t i = 0; i < a.ttft.size(); ++i) runs.emplace(a.ttft[i], a.tpot[i]);
    p.runs = static_cast<int>(runs.size());
    if (p.runs > 1) {
      std::vector<double> t, d;
      for (const auto& [x, y] : runs) {
        t.push_back(x);
        d.push_back(y);
      }
      auto spread = [](std::vector<double> v) { return (*std::max_element(v.begin(), v.end()) - *std::min_element(v.begin(), v.end())) / median(v); };
      p.ttft_rerun_spread = spread(t);
      p.tpot_rerun_spread = spread(d);
    }
    // The CSV records no throughput. In a closed loop each of C clients finishes one request of
    // OSL tokens every TTFT + (OSL - 1) x TPOT (aiperf's ITL definition), so by Little's law the
    // output throughput is C x OSL / that latency.
    if (p.concurrency > 0) {
      p.output_tps = double(p.concurrency) * double(p.osl) / ((p.ttft_ms + double(p.osl - 1) * p.tpot_ms) / 1e3);
      p.output_tps_derived = true;
    }
    st.layout_from_id += p.layout_rewrite == LayoutRewrite::from_id ? 1 : 0;
    st.layout_from_pattern += p.layout_rewrite == LayoutRewrite::from_pattern ? 1 : 0;
    st.layout_from_moe_grid += p.layout_rewrite == LayoutRewrite::from_moe_grid ? 1 : 0;
    if (p.merged > 1) {
      ++st.merged_points;
      st.merged_rows += p.merged - 1;
    }
    out.push_back(std::move(p));
  }
  st.points = static_cast<int>(out.size());
  if (stats) *stats = st;
  return out;
}

namespace {

// A metric object from an aiperf JSON: under "records" (servesim, older aiperf) or at the top level.
const nlohmann::json* metric(const nlohmann::json& doc, const char* tag) {
  if (doc.contains("records") && doc["records"].is_object() && doc["records"].contains(tag)) return &doc["records"][tag];
  if (doc.contains(tag) && doc[tag].is_object()) return &doc[tag];
  return nullptr;
}

double stat_of(const nlohmann::json* m, const std::string& stat) {
  if (!m || !m->contains(stat) || !(*m)[stat].is_number()) return NAN;
  return (*m)[stat].get<double>();
}

// A JSON number at a path of keys, or NaN.
double number_at(const nlohmann::json& j, std::initializer_list<const char*> keys) {
  const nlohmann::json* x = &j;
  for (const char* k : keys) {
    if (!x->is_object() || !x->contains(k)) return NAN;
    x = &(*x)[k];
  }
  return x->is_number() ? x->get<double>() : NAN;
}

}  // namespace

nlohmann::json measured_lengths(std::vector<std::int64_t> v) {
  if (v.empty()) return nullptr;
  std::sort(v.begin(), v.end());
  if (v.front() == v.back()) return v.front();
  nlohmann::json values = nlohmann::json::array();
  const std::size_t n = std::min(v.size(), kMeasuredLengthValues);
  for (std::size_t i = 0; i < n; ++i) values.push_back(v[std::min(v.size() - 1, (2 * i + 1) * v.size() / (2 * n))]);
  return {{"kind", "empirical"}, {"values", std::move(values)}};
}

bool runs_drawn_lengths(const nlohmann::json& s) {
  if (!s.is_object() || !s.contains("workload") || !s["workload"].is_object()) return false;
  const auto& w = s["workload"];
  return (w.contains("isl") && w["isl"].is_object()) || (w.contains("osl") && w["osl"].is_object());
}

namespace {

// The per-request figures of an aiperf folder's measured (non-warm-up) records, for combining two
// streams of one run; empty when the folder has no profile_export.jsonl or a record lacks one.
struct Records {
  std::vector<double> ttft, itl;
  bool complete = true;
};

MeasuredPoint read_aiperf_folder(const std::string& dir, const std::string& statistic, Records* records);

}  // namespace

MeasuredPoint read_aiperf_dir(const std::string& dir, const std::string& statistic) {
  return read_aiperf_folder(dir, statistic, nullptr);
}

namespace {

MeasuredPoint read_aiperf_folder(const std::string& dir, const std::string& statistic, Records* records) {
  namespace fs = std::filesystem;
  const fs::path base(dir);
  const fs::path agg = base / "profile_export_aiperf.json";
  if (!fs::is_directory(base)) throw Error(dir, "", "not a folder (expected an aiperf artefact folder or a CSV file)");
  if (!fs::exists(agg)) {
    std::error_code ec;
    if (fs::is_symlink(fs::symlink_status(agg, ec)))
      throw Error(agg.string(), "", "a symbolic link to a missing file (" + fs::read_symlink(agg, ec).string() + "); restore the export");
    throw Error(dir, "", "no profile_export_aiperf.json (expected an aiperf artefact folder)");
  }
  const nlohmann::json doc = read_json_file(agg.string());
  if (!doc.is_object()) throw Error(agg.string(), "", "expected a JSON object");

  MeasuredPoint p;
  p.id = base.filename().empty() ? base.parent_path().filename().string() : base.filename().string();
  p.source = dir;
  p.backend = "vllm";
  const std::string stat = statistic == "p50" ? "p50" : "avg";
  p.ttft_ms = stat_of(metric(doc, "time_to_first_token"), stat);
  p.tpot_ms = stat_of(metric(doc, "inter_token_latency"), stat);
  p.output_tps = stat_of(metric(doc, "output_token_throughput"), "avg");
  if (!std::isfinite(p.ttft_ms) && !std::isfinite(p.tpot_ms) && !std::isfinite(p.output_tps))
    throw Error(agg.string(), "time_to_first_token", "no TTFT, ITL or output throughput recorded");
  // The CSV reader's bounds: a latency from 1 us to 1 day, a throughput above 0 and below 10^9 tok/s.
  for (const auto& [v, tag, lo, hi] : {std::tuple{p.ttft_ms, "time_to_first_token", kMinMs, kMaxMs},
                                       std::tuple{p.tpot_ms, "inter_token_latency", kMinMs, kMaxMs},
                                       std::tuple{p.output_tps, "output_token_throughput", 1e-6, 1e9}})
    if (!std::isnan(v) && !(v >= lo && v <= hi)) {
      char b[160];
      std::snprintf(b, sizeof b, "%g is not a measurement (expected %g to %g %s)", v, lo, hi,
                    std::string(tag) == "output_token_throughput" ? "tok/s" : "ms");
      throw Error(agg.string(), std::string(tag) + "." + (std::string(tag) == "output_token_throughput" ? "avg" : stat), b);
    }

  // Measured and warm-up requests from the per-request records, and the measured ones' lengths.
  std::int64_t profiling = 0, warmup = 0;
  std::vector<std::int64_t> request_isl, request_osl;
  bool lengths_complete = true;
  const fs::path jl = base / "profile_export.jsonl";
  if (fs::exists(jl)) {
    std::istringstream in(read_input_file(jl.string(), kMaxTraceFileBytes));
    std::string line;
    int n = 0;
    while (std::getline(in, line)) {
      ++n;
      if (line.empty()) continue;
      nlohmann::json r;
      try {
        r = parse_json(line, jl.string());   // depth-limited
      } catch (const Error& e) {
        throw Error(jl.string(), "line " + std::to_string(n), e.reason());
      }
      // A request record is an object with "metadata" or "metrics"; anything else is not a request.
      if (!r.is_object() || !(r.contains("metadata") || r.contains("metrics")))
        throw Error(jl.string(), "line " + std::to_string(n),
                    "not a request record (expected an object with \"metadata\" or \"metrics\"), got " + brief(r));
      // aiperf writes both as objects; a record whose metadata is a list or a number is not one of its requests.
      for (const char* k : {"metadata", "metrics"})
        if (r.contains(k) && !r[k].is_object())
          throw Error(jl.string(), "line " + std::to_string(n) + ": " + k,
                      "expected an object (aiperf's per-request " + std::string(k) + "), got " + brief(r[k]));
      bool is_warmup = false;
      if (r.contains("metadata") && r["metadata"].contains("benchmark_phase")) {
        const auto& ph = r["metadata"]["benchmark_phase"];
        if (!ph.is_string())
          throw Error(jl.string(), "line " + std::to_string(n) + ": metadata.benchmark_phase",
                      "expected a string (\"profiling\" or \"warmup\"), got " + brief(ph));
        is_warmup = ph.get<std::string>() == "warmup";
      }
      (is_warmup ? warmup : profiling) += 1;
      if (!is_warmup) {   // the measured requests' lengths (aiperf's per-request metrics)
        const double a = number_at(r, {"metrics", "input_sequence_length", "value"}), b = number_at(r, {"metrics", "output_sequence_length", "value"});
        auto whole = [](double x) { return x >= 1 && x <= 1e8 && x == std::floor(x); };
        if (whole(a) && whole(b)) request_isl.push_back(std::int64_t(a)), request_osl.push_back(std::int64_t(b));
        else lengths_complete = false;
      }
      if (records && !is_warmup) {
        const double t = number_at(r, {"metrics", "time_to_first_token", "value"}),
                     i = number_at(r, {"metrics", "inter_token_latency", "value"});
        if (std::isfinite(t) && t >= kMinMs && t <= kMaxMs) records->ttft.push_back(t);
        else records->complete = false;
        if (std::isfinite(i) && i >= kMinMs && i <= kMaxMs) records->itl.push_back(i);
        else records->complete = false;
      }
    }
  } else if (records) {
    records->complete = false;
  }

  // The run's setup: the sidecar, else a servesim scenario as input_config.
  const fs::path side = base / "servesim_run.json";
  nlohmann::json s;
  std::string where;
  if (fs::exists(side)) {
    where = side.string();
    s = read_json_file(where);
    if (!s.is_object()) throw Error(where, "", "expected a JSON object");
  } else if (doc.contains("input_config") && doc["input_config"].is_object() && doc["input_config"].contains("model") &&
             doc["input_config"].contains("workload")) {
    where = agg.string() + ": input_config";
    s = doc["input_config"];
  } else {
    throw Error(dir, "servesim_run.json",
                "missing: the folder needs the run's setup (a servesim_run.json with model, gpu, tp, precision, engine "
                "flags, isl, osl, concurrency) unless profile_export_aiperf.json's input_config is a servesim scenario");
  }
  // What the run served, never the default scenario's: a sidecar of {"gpu": "h200", "tp": 2} had
  // run Nemotron 3 Super in FP8 as four TP2 replicas of the default eight GPUs.
  if (!s.contains("model") && !s.contains("model_file")) {
    const nlohmann::json ic = doc.value("input_config", nlohmann::json::object());
    const nlohmann::json* names = ic.is_object() && ic.contains("endpoint") && ic["endpoint"].is_object() && ic["endpoint"].contains("model_names")
                                      ? &ic["endpoint"]["model_names"] : nullptr;
    if (!names || !names->is_array() || names->empty() || !(*names)[0].is_string())
      throw Error(where, "model", "missing: the model the run served (servesim list models) or a model_file; aiperf's "
                                  "input_config.endpoint.model_names names none");
    // The served name, a catalogue name or a Hugging Face id: the scenario resolves it (a quantised
    // repository's id runs its checkpoint where the sidecar names no precision).
    s["model"] = (*names)[0].get<std::string>();
  }
  if (!s.contains("gpu")) throw Error(where, "gpu", "missing: the GPU the run served on (servesim list gpus)");
  if (!s.contains("gpus") && !s.contains("topology")) {   // one server: its own GPUs
    auto size = [&](const char* a, const char* b) {
      for (const char* k : {a, b})
        if (s.contains(k) && s[k].is_number_integer() && s[k].get<std::int64_t>() >= 1 && s[k].get<std::int64_t>() <= 1024)
          return s[k].get<std::int64_t>();
      return std::int64_t{1};
    };
    s["gpus"] = size("tensor_parallel_size", "tp") * size("pipeline_parallel_size", "pp") * size("data_parallel_size", "dp");
  }
  if (s.contains("model_file")) {
    if (!s["model_file"].is_string()) throw Error(where, "model_file", "expected a file name");
    // A file of the artefact folder only (the folder may come from anywhere: it never makes
    // servesim open /etc/passwd), and for this point only: the catalogue is never changed.
    fs::path mf = s["model_file"].get<std::string>();
    if (mf.is_relative()) mf = base / mf;
    std::error_code ec;
    const fs::path real = fs::weakly_canonical(mf, ec), root = fs::weakly_canonical(base, ec);
    const auto rel = real.lexically_relative(root);
    if (ec || rel.empty() || *rel.begin() == ".." || rel.is_absolute())
      throw Error(where, "model_file", "'" + s["model_file"].get<std::string>() + "' is outside the artefact folder " + dir +
                                           "; put the model file in the folder");
    const auto& m = models::load_model_file(real.string());
    s["model_file"] = real.string();
    s.erase("model");
    p.model_path = m.name;
  }
  if (s.contains("backend")) {
    if (!s["backend"].is_string()) throw Error(where, "backend", "expected a name (vllm, trtllm, sglang)");
    p.backend = text::lower(s["backend"].get<std::string>());
    s.erase("backend");
  }
  if (s.contains("stream")) {   // one of two runs sent at once (artifacts/rR-text, rR-images)
    const auto& st = s["stream"];
    const std::string part = st.is_object() && st.contains("part") && st["part"].is_string() ? st["part"].get<std::string>() : "";
    if (part != "text" && part != "images")
      throw Error(where, "stream.part", "expected \"text\" or \"images\" (the half of an open-loop check this folder holds), got " +
                                            brief(st.is_object() && st.contains("part") ? st["part"] : st));
    if (!st.contains("with") || !st["with"].is_string() || st["with"].get<std::string>().empty() ||
        st["with"].get<std::string>().find('/') != std::string::npos)
      throw Error(where, "stream.with", "expected the other half's folder name (e.g. \"r40.000-images\"), got " +
                                            brief(st.contains("with") ? st["with"] : nlohmann::json()));
    p.stream_part = part;
    p.stream_with = st["with"].get<std::string>();
    // This half's own request counts (the top level holds the whole stream's); aiperf's records, when
    // the folder has them, count them below.
    for (const char* k : {"requests", "warmup_requests"})
      if (st.contains(k)) {
        if (!st[k].is_number_integer() || st[k].get<std::int64_t>() < 0 || st[k].get<std::int64_t>() > 1000000000)
          throw Error(where, std::string("stream.") + k, "expected a whole number of requests in 0..1000000000, got " + brief(st[k]));
        s[k] = st[k];
      }
    s.erase("stream");
  }
  if (!s.contains("workload") || !s["workload"].is_object()) s["workload"] = nlohmann::json::object();
  nlohmann::json& w = s["workload"];
  // The sidecar's load is the run's: a client count (closed loop) or a rate (open loop), never both,
  // and it replaces the other kind the emitted scenario may carry (an open-loop plan's scenario has
  // its rate; its closed-loop sweep's folders say their clients).
  // The load shortcuts, checked here so that a hand-edited sidecar is named with its field (the
  // scenario reader would name workload.<field> of a folder, or a request count aiperf's records replace).
  {
    auto whole_in = [&](const char* k, std::int64_t lo, std::int64_t hi, const char* what) {
      if (!s.contains(k)) return;
      const auto& v = s[k];
      const bool ok = v.is_number_integer() ? v.get<std::int64_t>() >= lo && v.get<std::int64_t>() <= hi
                      : v.is_number_float() && std::isfinite(v.get<double>()) && v.get<double>() == std::floor(v.get<double>()) &&
                            v.get<double>() >= double(lo) && v.get<double>() <= double(hi);
      if (!ok) throw Error(where, k, std::string("expected ") + what + " (a whole number in " + std::to_string(lo) + ".." + std::to_string(hi) + "), got " + brief(v));
      s[k] = static_cast<std::int64_t>(v.get<double>());
    };
    whole_in("concurrency", 1, 1000000, "the run's clients");
    whole_in("requests", 1, 1000000000, "the measured requests");
    whole_in("warmup_requests", 0, 1000000000, "the warm-up requests");
    whole_in("isl", 1, 100000000, "the prompt tokens");
    whole_in("osl", 1, 100000000, "the answer tokens");
    if (s.contains("request_rate") && !(s["request_rate"].is_number() && s["request_rate"].get<double>() >= 1e-6 && s["request_rate"].get<double>() <= 1e9))
      throw Error(where, "request_rate", "expected the requests/s aiperf sent (a number from 1e-6 to 1e9), got " + brief(s["request_rate"]));
    if (s.contains("arrival")) {
      const std::string a = s["arrival"].is_string() ? text::lower(s["arrival"].get<std::string>()) : "";
      if (a != "poisson" && a != "gamma" && a != "constant")
        throw Error(where, "arrival", "expected poisson (aiperf's --request-rate), gamma or constant, got " + brief(s["arrival"]));
      if (!s.contains("request_rate") && !(s.contains("workload") && s["workload"].is_object() && s["workload"].contains("request_rate")))
        throw Error(where, "arrival", "given without request_rate: arrivals belong to an open-loop run");
    }
  }
  if (s.contains("concurrency") && s.contains("request_rate"))
    throw Error(where, "request_rate", "set with concurrency: a run is closed loop (concurrency: clients) or open loop "
                                       "(request_rate: requests/s), not both; keep the one aiperf was given");
  if (s.contains("concurrency"))
    for (const char* k : {"request_rate", "arrival", "burstiness"}) w.erase(k);
  if (s.contains("request_rate")) w.erase("concurrency");
  for (const char* k : {"isl", "osl", "concurrency", "request_rate", "arrival", "burstiness", "requests", "warmup_requests"})
    if (s.contains(k)) {
      w[k] = s[k];
      s.erase(k);
    }
  // What the sidecar leaves out comes from aiperf's own record of the run.
  const nlohmann::json ic = doc.value("input_config", nlohmann::json::object());
  if (!w.contains("concurrency") && !w.contains("request_rate")) {
    const double c = number_at(ic, {"loadgen", "concurrency"});
    if (std::isnan(c)) throw Error(where, "concurrency", "missing (and aiperf's input_config.loadgen.concurrency is absent)");
    if (!(c >= 1 && c <= 1e6) || c != std::floor(c))
      throw Error(agg.string(), "input_config.loadgen.concurrency", brief(ic["loadgen"]["concurrency"]) + " is not a client count in 1..1000000");
    w["concurrency"] = static_cast<std::int64_t>(c);
  }
  // Range-checked before any conversion (llround of 1e300 is undefined). Requests of lengths of their
  // own (aiperf's --synthetic-input-tokens-stddev, --output-tokens-stddev, a dataset file) run those
  // lengths, every measured request's as recorded; the point shows their mean.
  auto length = [&](const char* key, const char* tag) {
    if (w.contains(key)) return;
    const auto& each = std::string_view(key) == "isl" ? request_isl : request_osl;
    // Not where the workload makes lengths its own way: a trace's or sessions' lengths, or vision
    // tokens that input_sequence_length counts and the run's images add again.
    const bool own = w.contains("trace") || w.contains("sessions") || w.contains("multimodal");
    if (!own && lengths_complete && !each.empty() && std::int64_t(each.size()) == profiling) {
      nlohmann::json d = measured_lengths(each);
      if (d.is_object()) {
        double sum = 0;
        for (auto x : each) sum += double(x);
        (std::string_view(key) == "isl" ? p.isl : p.osl) = std::llround(sum / double(each.size()));
        w[key] = std::move(d);
        return;
      }
    }
    const double v = stat_of(metric(doc, tag), "avg");
    if (std::isnan(v)) throw Error(where, key, std::string("missing (and the export records no ") + tag + ")");
    if (!(v >= 1 && v <= 1e8)) {
      char b[64];
      std::snprintf(b, sizeof b, "%g", v);
      throw Error(agg.string(), std::string(tag) + ".avg", std::string(b) + " is not a token count (1..100000000)");
    }
    w[key] = static_cast<std::int64_t>(std::llround(v));
  };
  length("isl", "input_sequence_length");
  length("osl", "output_sequence_length");
  if (profiling > 0) w["requests"] = profiling;
  if (fs::exists(jl) && profiling > 0) w["warmup_requests"] = warmup;
  if (!w.contains("requests")) {
    const double n = stat_of(metric(doc, "request_count"), "avg");
    if (n >= 1 && n <= 1e9) w["requests"] = static_cast<std::int64_t>(n);
  }
  p.scenario = s;
  // Fields for grouping and display.
  auto text_or = [&](const char* k, const char* d) {
    if (!s.contains(k)) return std::string(d);
    if (!s[k].is_string()) throw Error(where, k, "expected a name, got " + brief(s[k]));
    return s[k].get<std::string>();
  };
  if (p.model_path.empty()) p.model_path = text_or("model", "");
  p.system = text_or("gpu", "");
  p.precision = text_or("precision", "");
  if (p.precision.empty() || text::iequals(p.precision, "auto")) {   // the scenario's default: the checkpoint's
    p.precision = "auto";
    try {
      const models::ModelSpec& m = models::model(p.model_path);
      const std::string named = models::id_checkpoint_precision(p.model_path, m);   // as parse_scenario
      p.precision = named.empty() ? m.checkpoint_precision : named;
    } catch (const Error&) {   // a model the scenario check names
    }
  }
  const bool disagg = s.contains("topology") && s["topology"].is_object() &&
                      text::lower(s["topology"].value("kind", std::string("agg"))).rfind("disagg", 0) == 0;
  p.mode = disagg ? "disagg" : "agg";
  auto int_of = [&](const nlohmann::json& j, const char* a, const char* b, int d) {
    if (j.contains(a) && j[a].is_number_integer()) return j[a].get<int>();
    if (j.contains(b) && j[b].is_number_integer()) return j[b].get<int>();
    return d;
  };
  p.tp = int_of(s, "tensor_parallel_size", "tp", 1);
  p.pp = int_of(s, "pipeline_parallel_size", "pp", 1);
  p.moe_ep = int_of(s, "expert_parallel_size", "ep", 1);
  if (w["isl"].is_number_integer()) p.isl = w["isl"].get<std::int64_t>();   // else the drawn lengths' mean (above), or 0
  if (w["osl"].is_number_integer()) p.osl = w["osl"].get<std::int64_t>();
  // A client count as the run gave it (shown with the point); the scenario check names a bad one.
  p.concurrency = w.contains("concurrency") && w["concurrency"].is_number_integer() &&
                          w["concurrency"].get<std::int64_t>() >= 0 && w["concurrency"].get<std::int64_t>() <= INT32_MAX
                      ? w["concurrency"].get<int>() : 0;
  p.request_rate = w.contains("request_rate") && w["request_rate"].is_number() ? w["request_rate"].get<double>() : 0;
  p.requests = w.contains("requests") && w["requests"].is_number_integer() ? w["requests"].get<std::int64_t>() : 0;
  p.warmup_requests = w.contains("warmup_requests") && w["warmup_requests"].is_number_integer() ? w["warmup_requests"].get<std::int64_t>() : -1;
  return p;
}

double mean_of(const std::vector<double>& v) {
  double s = 0;
  for (const double x : v) s += x;
  return v.empty() ? NAN : s / double(v.size());
}

// The two halves of an open-loop check (text-only and with images, sent at once) as the one
// stream the plan simulated: the requests and warm-up of both; TTFT and ITL of every measured
// request of both when both folders hold per-request records, else the two figures weighted by
// their requests; output tok/s the sum (the two ran over the same time).
MeasuredPoint combine_streams(const MeasuredPoint& a, const Records& ra, const MeasuredPoint& b, const Records& rb,
                              const std::string& statistic) {
  if (a.stream_part == b.stream_part)
    throw Error(b.source, "servesim_run.json: stream.part",
                "both " + a.id + " and " + b.id + " say they hold the " + a.stream_part + " half; one holds \"text\", the other \"images\"");
  if (a.stream_part != "text") return combine_streams(b, rb, a, ra, statistic);   // the text half first
  const MeasuredPoint& text = a;
  const double rate_a = a.scenario["workload"].value("request_rate", NAN), rate_b = b.scenario["workload"].value("request_rate", NAN);
  if (!(std::abs(rate_a - rate_b) <= 1e-9 * std::max(std::abs(rate_a), 1.0)))
    throw Error(b.source, "servesim_run.json: request_rate",
                "the two halves describe different streams (" + a.id + " and " + b.id + "); each half's servesim_run.json "
                "holds the whole stream's rate");
  MeasuredPoint p = text;
  const std::int64_t na = std::max<std::int64_t>(a.requests, 0), nb = std::max<std::int64_t>(b.requests, 0);
  p.requests = na + nb;
  p.warmup_requests = a.warmup_requests >= 0 && b.warmup_requests >= 0 ? a.warmup_requests + b.warmup_requests : -1;
  p.scenario["workload"]["requests"] = p.requests;
  if (p.warmup_requests >= 0) p.scenario["workload"]["warmup_requests"] = p.warmup_requests;
  p.id = text.id.substr(0, text.id.size() - 5);   // "rR-text" -> "rR"
  p.source = a.source + " + " + b.source;
  p.stream_part.clear();
  const bool records = ra.complete && rb.complete && !ra.ttft.empty() && !rb.ttft.empty() &&
                       std::int64_t(ra.ttft.size()) == na && std::int64_t(rb.ttft.size()) == nb;
  if (records) {
    std::vector<double> t = ra.ttft, i = ra.itl;
    t.insert(t.end(), rb.ttft.begin(), rb.ttft.end());
    i.insert(i.end(), rb.itl.begin(), rb.itl.end());
    p.ttft_ms = statistic == "p50" ? median(t) : mean_of(t);
    p.tpot_ms = statistic == "p50" ? median(i) : mean_of(i);
    p.stream_note = "one stream of " + std::to_string(p.requests) + " requests (" + a.id + " + " + b.id + "): TTFT and ITL " +
                    (statistic == "p50" ? "p50" : "avg") + " of both folders' " + std::to_string(t.size()) +
                    " per-request records; output tok/s their sum";
  } else {
    auto weighted = [&](double x, double y) {
      if (na + nb == 0 || !std::isfinite(x) || !std::isfinite(y)) return double(NAN);
      return (double(na) * x + double(nb) * y) / double(na + nb);
    };
    p.ttft_ms = weighted(a.ttft_ms, b.ttft_ms);
    p.tpot_ms = weighted(a.tpot_ms, b.tpot_ms);
    p.stream_note = "one stream of " + std::to_string(p.requests) + " requests (" + a.id + " + " + b.id + "): TTFT and ITL " +
                    (statistic == "p50" ? "p50" : "avg") + " are the two folders' figures weighted by their requests (" +
                    std::to_string(na) + " and " + std::to_string(nb) + "; no per-request records in both" +
                    (statistic == "p50" ? ": a weighted mean of two medians, not the median of the stream" : "") +
                    "); output tok/s their sum";
  }
  p.output_tps = std::isfinite(a.output_tps) && std::isfinite(b.output_tps) ? a.output_tps + b.output_tps : NAN;
  return p;
}

}  // namespace

std::vector<MeasuredPoint> read_points(const std::string& path, const std::string& statistic, CsvReadStats* csv) {
  namespace fs = std::filesystem;
  if (!fs::exists(path)) throw Error(path, "", "no such file or folder (expected a silicon-sample CSV or an aiperf artefact folder)");
  if (!fs::is_directory(path)) return read_silicon_csv(path, csv);
  if (fs::exists(fs::path(path) / "profile_export_aiperf.json")) {
    MeasuredPoint p = read_aiperf_dir(path, statistic);
    if (!p.stream_part.empty())
      throw Error(path, "servesim_run.json: stream",
                  "this folder holds the " + p.stream_part + " half of one open-loop stream (its other half: " + p.stream_with +
                  "); validate the folder holding both (e.g. artifacts), which reads the pair as one stream");
    return {p};
  }
  // A folder of artefact folders: entries that are not folders (a symbolic-link loop is none) are
  // skipped; a subfolder that cannot be looked into (no permission) or read is listed with its
  // reason, never dropped and never stopping the others.
  std::vector<fs::path> subs;
  std::map<fs::path, std::string> blocked;   // subfolder -> why it cannot be looked into
  std::error_code ec;
  for (auto it = fs::directory_iterator(path, ec); !ec && it != fs::directory_iterator(); it.increment(ec)) {
    std::error_code e1, e2;
    if (!it->is_directory(e1)) continue;
    // A dangling link in place of the export is listed (with why), not skipped as "no export".
    const bool has = fs::exists(fs::symlink_status(it->path() / "profile_export_aiperf.json", e2));
    if (has) subs.push_back(it->path());
    else if (e2 && e2 != std::errc::no_such_file_or_directory) {
      subs.push_back(it->path());
      blocked[it->path()] = "cannot look into the folder (" + e2.message() + "); its run is not read";
    }
  }
  if (ec) throw Error(path, "", "cannot list the folder: " + ec.message());
  std::sort(subs.begin(), subs.end());
  if (subs.empty()) throw Error(path, "", "no profile_export_aiperf.json in the folder or its subfolders (expected aiperf artefacts; an emitted aiperf-sweep.sh writes each deployment's runs to artifacts/<deployment>, the folder its last line names)");
  std::vector<MeasuredPoint> out;
  std::vector<Records> recs;
  std::map<std::string, std::size_t> by_name;
  // The same run under two names (a symbolic link to a sibling) would count twice: read under the
  // folder's own name (or the first link's), and the other names listed.
  std::map<fs::path, std::string> seen;   // canonical folder -> the name it is read under
  for (const bool links : {false, true})
    for (const auto& s : subs) {
      std::error_code e;
      if (fs::is_symlink(fs::symlink_status(s, e)) != links) continue;
      const fs::path real = fs::canonical(s, e);
      if (!e) seen.emplace(real, s.filename().string());
    }
  for (const auto& s : subs) {
    Records r;
    try {
      if (const auto b = blocked.find(s); b != blocked.end()) throw Error(s.string(), "", b->second);
      std::error_code e;
      const fs::path real = fs::canonical(s, e);
      if (const auto at = seen.find(real); !e && at != seen.end() && at->second != s.filename().string())
        throw Error(s.string(), "", "the same folder as " + at->second + " (a symbolic link): read once, under " + at->second);
      out.push_back(read_aiperf_folder(s.string(), statistic, &r));
    } catch (const Error& e) {
      MeasuredPoint p;
      p.id = s.filename().string();
      p.source = s.string();
      p.unreadable = e.what();
      out.push_back(std::move(p));
      r = Records{};
    }
    recs.push_back(std::move(r));
    by_name[s.filename().string()] = out.size() - 1;
  }
  // The halves of an open-loop check: one point per pair; a half without its partner is listed
  // with why, never compared as if it were the whole load.
  std::vector<MeasuredPoint> joined;
  for (std::size_t i = 0; i < out.size(); ++i) {
    MeasuredPoint& p = out[i];
    if (p.stream_part.empty()) {
      joined.push_back(std::move(p));
      continue;
    }
    const auto it = by_name.find(p.stream_with);
    const bool partner = it != by_name.end() && out[it->second].unreadable.empty() && out[it->second].stream_with == p.id;
    if (partner && it->second < i) continue;   // read with its partner
    if (!partner) {
      MeasuredPoint q;
      q.id = p.id;
      q.source = p.source;
      q.unreadable = Error(p.source, "servesim_run.json: stream",
                           "the " + p.stream_part + " half of an open-loop stream without its other half " + p.stream_with +
                               (it == by_name.end() ? " (no such folder beside it)" : " (not readable, or not this folder's partner)") +
                               ": one half is not the load the plan simulated; rerun the pair or restore the folder").what();
      joined.push_back(std::move(q));
      continue;
    }
    try {
      joined.push_back(combine_streams(p, recs[i], out[it->second], recs[it->second], statistic));
    } catch (const Error& e) {
      MeasuredPoint q;
      q.id = p.id;
      q.source = p.source;
      q.unreadable = e.what();
      joined.push_back(std::move(q));
    }
  }
  return joined;
}

}  // namespace servesim::sim::validate
