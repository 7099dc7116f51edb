#include "hwmodels/calibration.hpp"

#include <algorithm>
#include <bit>
#include <charconv>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <memory>
#include <mutex>
#include <tuple>

#include "common/embedded.hpp"
#include "common/error.hpp"
#include "common/json_reader.hpp"
#include "common/text.hpp"
#include "hwmodels/work.hpp"

namespace servesim::hw {

namespace {
// Fused-MoE kernel families fitted with FamilyFit's robust local plane: in their measured tables
// whole shape series run several-fold apart from the series next to them in every coordinate (Hopper
// FlashInfer CUTLASS FP8 block, top-8 of 256, balanced: hidden 7,168 x inter 2,048 takes 9.43 ms for
// 16,384 tokens at EP 64 and 14.86 ms at EP 4, a rank time EP barely divides, where hidden 6,144 takes
// 0.64 and 4.42 ms), and a plain weighted plane carries that series' ratio onto its neighbours.
constexpr std::string_view kRobustPlaneFamilies[] = {"moe_fp8_block_cutlass"};
constexpr std::size_t kMaxPointsPerFile = 20000;
}  // namespace

std::uint64_t shape_key(std::initializer_list<double> fields) {
  std::uint64_t h = 1469598103934665603ull;
  for (double f : fields) {
    std::uint64_t bits;
    std::memcpy(&bits, &f, sizeof bits);
    for (int i = 0; i < 8; ++i) h = (h ^ ((bits >> (8 * i)) & 0xff)) * 1099511628211ull;
  }
  return h;
}

namespace {
// Point `i`, a row of values under `cols`, as an object (null values left out).
nlohmann::json row_object(nlohmann::json& row, const std::vector<std::string>& cols, const std::string& file, size_t i) {
  if (!row.is_array() || row.size() != cols.size())
    throw Error(file, "points[" + std::to_string(i) + "]",
                "expected " + std::to_string(cols.size()) + " values (one per entry of 'columns'), got " +
                    (row.is_array() ? std::to_string(row.size()) : std::string("no list")));
  nlohmann::json obj = nlohmann::json::object();
  for (size_t c = 0; c < row.size(); ++c)
    if (!row[c].is_null()) obj[cols[c]] = std::move(row[c]);
  return obj;
}
}  // namespace

void expand_point_rows(nlohmann::json& doc, const std::string& file) {
  auto cols = doc.find("columns");
  auto pts = doc.find("points");
  if (cols == doc.end() || pts == doc.end() || !cols->is_array() || !pts->is_array()) return;
  std::vector<std::string> names;
  for (const auto& c : *cols) {
    if (!c.is_string()) throw Error(file, "columns", "expected a list of field names");
    names.push_back(c.get<std::string>());
  }
  for (size_t i = 0; i < pts->size(); ++i)
    if (auto& row = (*pts)[i]; row.is_array()) row = row_object(row, names, file, i);
}

MoeDtype moe_dtype(std::string_view d, const std::string& where) {
  if (d == "bf16") return {Precision::bf16, Precision::bf16};
  if (d == "fp8") return {Precision::fp8, Precision::fp8};
  if (d == "fp8_block") return {Precision::fp8_block, Precision::fp8};
  if (d == "nvfp4") return {Precision::nvfp4, Precision::nvfp4};
  if (d == "int4_wo") return {Precision::int4, Precision::bf16};
  if (d == "mxfp4_w4a16") return {Precision::mxfp4, Precision::bf16};
  if (d == "mxfp4_w4a8") return {Precision::mxfp4, Precision::fp8};
  throw Error(where, "dtype", "unknown MoE dtype '" + std::string(d) +
                                  "' (known: bf16, fp8, fp8_block, nvfp4, int4_wo, mxfp4_w4a16, mxfp4_w4a8)");
}

MoeDtype moe_family_dtype(std::string_view family) {
  // Longest names first: "fp8_block" before "fp8", "mxfp4_w4a16" before a shorter prefix.
  for (const char* d : {"mxfp4_w4a16", "mxfp4_w4a8", "fp8_block", "int4_wo", "nvfp4", "bf16", "fp8"}) {
    const std::string prefix = std::string("moe_") + d;
    if (family == prefix || family.starts_with(prefix + "_")) return moe_dtype(d, std::string(family));
  }
  return {};
}

std::string moe_kernel_library(std::string_view k) {
  auto has = [&](const char* s) { return k.find(s) != std::string_view::npos; };
  if (has("oaitriton")) return "oai_triton";
  if (has("marlin")) return "marlin";
  if (has("flashinfer_trtllm")) return "trtllm";
  if (has("flashinfer_cutlass")) return "cutlass";
  if (has("triton")) return "triton";
  // Other releases' names: vLLM 0.14-0.22 "vllm_fused_moe" (Triton fused_moe), TensorRT-LLM's
  // "moe_torch_flow_cutlass" (its CUTLASS MoE).
  if (has("fused_moe")) return "triton";
  if (has("cutlass")) return "cutlass";
  return "";
}

std::uint64_t attention_group(double kv_bytes, double window) { return shape_key({kv_bytes, window}); }
std::uint64_t encoder_attention_group(double head_dim) { return shape_key({-1, head_dim}); }

double bus_factor(std::string_view op, int n) {
  double f = n > 1 ? double(n - 1) / n : 0;
  if (op == "all_reduce") return 2 * f;
  if (op == "send_recv") return 1;
  return f;  // all_gather, reduce_scatter, all_to_all
}

namespace {

// A measured time in ms (1 ns to about 3 hours), or a shape or size: a whole number from 1 to
// 2^40 (no kernel of a serving engine is timed beyond that; 1e15 rows is a typo, not a shape).
template <class Reader>
double positive(const Reader& r, std::string_view key) {
  double v = r.number(key);
  if (v <= 0) r.fail(key, "must be > 0");
  if (key == "ms" || key == "ms_eager") {
    if (!(v >= 1e-6 && v <= 1e7)) r.fail(key, "must be a time from 1e-06 ms (1 ns) to 1e+07 ms, got " + brief(r.json()[std::string(key)]));
  } else if (!(v <= 1099511627776.0) || (v != std::floor(v) && key != "bytes")) {   // a mean message size may be fractional
    r.fail(key, "must be a whole number from 1 to 2^40, got " + brief(r.json()[std::string(key)]));
  }
  return v;
}

template <class Reader>
Precision dtype_of(const Reader& p) {
  std::string d = p.string("dtype");
  if (d == "fp8_block") return Precision::fp8;
  if (d != "bf16" && d != "fp8" && d != "nvfp4") p.fail("dtype", "expected bf16, fp8, fp8_block or nvfp4, got '" + d + "'");
  return parse_precision(d);
}

template <class Reader>
double kv_bytes_of(const Reader& p) {
  std::string d = p.string_or("kv_dtype", "bf16");
  if (d != "bf16" && d != "fp8") p.fail("kv_dtype", "expected bf16 or fp8, got '" + d + "'");
  return d == "fp8" ? 1 : 2;
}

// The calibration family of one measured point of a file of `family`: the file's family with the
// point's dtype, phase, mode or collective, and for a fused MoE the kernel library of its `kid`.
template <class Reader>
std::string point_name(const std::string& family, const Reader& p, const std::vector<std::string>& kernels) {
  std::string name = family;
  if (family == "gemm") {
    const Precision d = dtype_of(p);
    name += "_" + (p.string("dtype") == "fp8_block" ? std::string("fp8_block") : std::string(to_string(d)));
  } else if (family == "grouped_gemm") {
    name += "_" + std::string(to_string(dtype_of(p)));
  } else if (family == "moe") {
    const std::string d = p.string("dtype");
    moe_dtype(d, p.file());
    name += "_" + d;
    // One fused-MoE family per kernel: vLLM picks the kernel per GPU, format and layout
    // (hwmodels/data/moe_kernels.json), and kernels of one dtype differ several-fold.
    if (p.has("kid"))
      if (const auto kid = p.integer("kid"); kid >= 0 && kid < std::int64_t(kernels.size()))
        if (std::string lib = moe_kernel_library(kernels[size_t(kid)]); !lib.empty()) name += "_" + lib;
  } else if (family == "gdn") {
    const std::string phase = p.string("phase");
    if (phase != "context" && phase != "generation") p.fail("phase", "expected context or generation");
    name += phase == "generation" ? "_decode" : "_prefill";
  } else if (family == "conv1d") {
    const std::string mode = p.string("mode");
    if (mode != "prefill" && mode != "decode") p.fail("mode", "expected prefill or decode");
    name += "_" + mode;
  } else if (family == "nccl") {
    const std::string op = p.string("op");
    static const char* ops[] = {"all_reduce", "all_gather", "reduce_scatter", "all_to_all", "send_recv"};
    if (std::none_of(std::begin(ops), std::end(ops), [&](const char* o) { return op == o; }))
      p.fail("op", "expected all_reduce, all_gather, reduce_scatter, all_to_all or send_recv");
    name += "_" + op;
  }
  return name;
}

// Roofline terms of one measured point (named by point_name), on `g`'s datasheet peaks. `marlin`:
// the point was timed by vLLM's fused Marlin MoE (its math over block-padded slots, marlin_block_m).
template <class Reader>
void to_sample(const std::string& family, const Reader& p, const GpuSpec& g, Sample& s, bool marlin) {
  Work w;
  auto at = [&](Precision prec) { return g.dense_flops(prec) > 0 ? g.dense_flops(prec) : g.bf16_flops; };
  double peak = g.bf16_flops;
  if (family == "gemm") {
    Precision d = dtype_of(p);
    w = gemm_work(positive(p, "m"), positive(p, "n"), positive(p, "k"), d, d);
    peak = at(d);
    s.key = shape_key({p.number("n"), p.number("k")});
    s.x = gemm_features(p.number("m"), p.number("n"), p.number("k"));
  } else if (family == "grouped_gemm") {
    Precision d = dtype_of(p);
    std::string routing = p.string_or("routing", "balanced");
    if (routing != "balanced" && routing != "skewed") p.fail("routing", "expected balanced or skewed");
    double skew = routing == "balanced" ? 0 : p.number_or("skew", 1.2);
    int experts = static_cast<int>(positive(p, "experts"));
    // The routing the run recorded; files without it get the same split recomputed.
    Routing r = route(experts, positive(p, "tokens"), skew);
    r.max_tokens = p.number_or("max_expert_tokens", r.max_tokens);
    r.active = p.number_or("active_experts", r.active);
    if (r.max_tokens < 1 || r.active < 1) p.fail("max_expert_tokens", "max_expert_tokens and active_experts must be >= 1");
    w = grouped_gemm_work(r.active, p.number("tokens"), positive(p, "n"), positive(p, "k"), d, d);
    peak = at(d);
    s.key = shape_key({double(experts), p.number("n"), p.number("k"), skew});
    s.x = grouped_gemm_features(experts, p.number("tokens"), r, p.number("n"), p.number("k"), skew, d != Precision::bf16);
  } else if (family == "attention_prefill" || family == "attention_decode") {
    const bool prefill = family == "attention_prefill";
    const double kvb = kv_bytes_of(p), win = p.number_or("window", 0);
    const char* len = prefill ? "seq" : "context";
    w = prefill ? attention_prefill_work(positive(p, "batch"), positive(p, len), positive(p, "heads"),
                                         positive(p, "kv_heads"), positive(p, "head_dim"), kvb, win)
                : attention_decode_work(positive(p, "batch"), positive(p, len), positive(p, "heads"),
                                        positive(p, "kv_heads"), positive(p, "head_dim"), kvb, win);
    s.key = shape_key({p.number("batch"), p.number("heads"), p.number("kv_heads"), p.number("head_dim"), kvb, win});
    s.group = attention_group(kvb, win);
    s.x = attention_features(p.number("batch"), p.number(len), p.number("heads"), p.number("kv_heads"), p.number("head_dim"));
  } else if (family == "encoder_attention") {
    w = encoder_attention_work(positive(p, "batch"), positive(p, "seq"), positive(p, "heads"), positive(p, "head_dim"), g.sms,
                               encoder_tiles(g.arch));
    s.key = shape_key({p.number("batch"), p.number("heads"), p.number("head_dim")});
    s.group = encoder_attention_group(p.number("head_dim"));
    s.x = attention_features(p.number("batch"), p.number("seq"), p.number("heads"), p.number("heads"), p.number("head_dim"));
  } else if (family == "moe") {
    const std::string d = p.string("dtype");
    const MoeDtype md = moe_dtype(d, p.file());
    MoeShape m;
    m.tokens = positive(p, "tokens"), m.hidden = positive(p, "hidden"), m.inter = positive(p, "inter");
    m.topk = int(positive(p, "topk")), m.experts = int(positive(p, "experts"));
    m.tp = int(positive(p, "tp")), m.ep = int(positive(p, "ep"));
    m.skew = p.number_or("skew", 0), m.gated = p.number_or("gated", 1) != 0;
    const MoeRouting r =
        moe_routing_measured(m, marlin ? marlin_block_m(m.tokens, m.topk, m.experts / std::max(1, m.ep)) : 0);
    w = moe_work(m, r, md.weights);
    peak = at(md.math);
    s.key = shape_key({m.hidden, m.inter, double(m.topk), double(m.experts), double(m.tp), double(m.ep), m.skew});
    s.x = moe_features(m, r);
    s.dispatch_s = moe_dispatch_bytes(m) / g.hbm_bw_bytes_per_s;
  } else if (family == "gdn") {
    const bool decode = p.string("phase") == "generation";
    w = gdn_work(decode, positive(p, "batch"), positive(p, "seq"), positive(p, "k_heads"), positive(p, "v_heads"),
                 positive(p, "head_k_dim"), positive(p, "head_v_dim"));
    s.key = shape_key({p.number("k_heads"), p.number("v_heads"), p.number("head_k_dim"), p.number("head_v_dim")});
    s.x = gdn_features(p.number("batch"), p.number("seq"), p.number("k_heads"), p.number("v_heads"), p.number("head_k_dim"),
                       p.number("head_v_dim"));
  } else if (family == "mamba_scan") {
    w = mamba_scan_work(positive(p, "batch"), positive(p, "seqlen"), positive(p, "heads"), positive(p, "head_dim"),
                        positive(p, "d_state"), positive(p, "groups"));
    s.key = shape_key({p.number("heads"), p.number("head_dim"), p.number("d_state"), p.number("groups")});
    s.x = mamba_scan_features(p.number("batch"), p.number("seqlen"), p.number("heads"), p.number("head_dim"),
                              p.number("d_state"), p.number("groups"));
  } else if (family == "mamba_step") {
    w = mamba_step_work(positive(p, "batch"), positive(p, "heads"), positive(p, "head_dim"), positive(p, "d_state"),
                        positive(p, "groups"));
    s.key = shape_key({p.number("heads"), p.number("head_dim"), p.number("d_state"), p.number("groups")});
    s.x = mamba_step_features(p.number("batch"), p.number("heads"), p.number("head_dim"), p.number("d_state"),
                              p.number("groups"));
  } else if (family == "conv1d") {
    const std::string mode = p.string("mode");
    // "tokens" counts every token of the call (batch × per-sequence tokens); decode has one per sequence.
    double tokens = mode == "decode" ? positive(p, "batch") : positive(p, "tokens");
    w = conv1d_work(tokens, positive(p, "channels"), positive(p, "kernel"), mode == "decode");
    s.key = shape_key({p.number("channels"), p.number("kernel")});
    s.x = conv1d_features(tokens, p.number("channels"), p.number("kernel"), mode == "decode" ? 1 : p.number_or("batch", 1));
  } else if (family == "elementwise" || family == "copy") {
    // elementwise "bytes" is read + write traffic; copy "bytes" is the buffer, moved twice.
    w.bytes = positive(p, "bytes") * (family == "copy" ? 2 : 1);
    s.key = family == "copy" ? 0 : shape_key({double(std::hash<std::string>{}(p.string_or("op", "")) & 0xffffff)});
    s.group = s.key;  // one op kind never stands in for another
    s.x = bytes_features(p.number("bytes"));
  } else if (family == "custom_all_reduce") {
    int gpus = static_cast<int>(p.integer("gpus"));
    if (gpus < 2) p.fail("gpus", "must be >= 2");
    // One series per kernel (one- or two-stage, by vLLM's size rule): no interpolation across the switch.
    s.key = shape_key({double(gpus), custom_ar_one_shot(gpus, positive(p, "bytes")) ? 1.0 : 2.0});
    s.group = s.key;
    s.x = bytes_features(positive(p, "bytes"));
    s.memory_s = positive(p, "bytes") * bus_factor("all_reduce", gpus) / g.nvlink_bw_bytes_per_s;
    return;
  } else if (family == "nccl") {
    const std::string op = p.string("op");
    int gpus = static_cast<int>(p.integer("gpus"));
    if (gpus < 2) p.fail("gpus", "must be >= 2");
    s.key = shape_key({double(gpus)});
    s.group = s.key;
    s.x = bytes_features(positive(p, "bytes"));
    s.compute_s = 0;
    s.memory_s = positive(p, "bytes") * bus_factor(op, gpus) / g.nvlink_bw_bytes_per_s;
    return;
  } else {
    throw Error(p.file(), "family", "unknown family '" + family + "' (known: gemm, grouped_gemm, attention_prefill, "
                                    "attention_decode, encoder_attention, moe, gdn, mamba_scan, mamba_step, conv1d, "
                                    "elementwise, copy, nccl, custom_all_reduce)");
  }
  s.compute_s = w.flops / peak;
  s.memory_s = w.bytes / g.hbm_bw_bytes_per_s;
}

double median(std::vector<double> v) {
  if (v.empty()) return -1;
  std::sort(v.begin(), v.end());
  size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

}  // namespace

namespace {

// One row of the reducer's layout ("[v, v, ...]" under "columns") read in place, without building
// a JSON object: the same accessors as JsonReader for the values a row holds, numbers (JSON's
// grammar, parsed to the same double: correctly rounded either way), strings without escapes and
// nulls. Anything else (an escape, true/false, a nested value, a number out of range) or a field
// the caller would refuse throws RowReader::Slow, and the caller reads that row through
// JsonReader, whose error names the field: read this way, a row gives what JsonReader gives.
class RowReader {
 public:
  struct Slow {};
  RowReader(std::string_view row, const std::vector<std::string>& columns, const std::string& file)
      : columns_(columns), file_(file) {
    if (row.size() < 2 || row.front() != '[' || row.back() != ']') throw Slow{};
    values_.reserve(columns.size());
    std::size_t i = 1;
    const std::size_t end = row.size() - 1;
    for (;;) {
      while (i < end && is_space(row[i])) ++i;
      if (i >= end) break;
      std::size_t j = i;
      Value v;
      if (row[i] == '"') {
        j = row.find('"', i + 1);
        if (j == std::string_view::npos || j >= end) throw Slow{};
        v.text = row.substr(i + 1, j - i - 1);
        if (v.text.find('\\') != std::string_view::npos) throw Slow{};
        for (char c : v.text)
          if (static_cast<unsigned char>(c) < 0x20 || static_cast<unsigned char>(c) >= 0x80) throw Slow{};  // JsonReader checks UTF-8
        v.kind = Kind::string;
        ++j;
      } else {
        while (j < end && row[j] != ',' && !is_space(row[j])) ++j;
        const std::string_view tok = row.substr(i, j - i);
        if (tok == "null") v.kind = Kind::null;
        else number_token(tok, v);
      }
      values_.push_back(v);
      while (j < end && is_space(row[j])) ++j;
      if (j < end && row[j] != ',') throw Slow{};
      i = j + 1;
      if (j >= end) break;
      if (i >= end) throw Slow{};  // a trailing comma
    }
    if (values_.size() != columns.size()) throw Slow{};
  }

  bool has(std::string_view key) const {
    const Value* v = find(key);
    return v && v->kind != Kind::null;
  }
  double number(std::string_view key) const {
    const Value* v = find(key);
    if (!v || (v->kind != Kind::integer && v->kind != Kind::real)) throw Slow{};
    return v->kind == Kind::integer ? double(v->integer) : v->real;
  }
  double number_or(std::string_view key, double fallback) const { return has(key) ? number(key) : fallback; }
  std::int64_t integer(std::string_view key) const {
    const Value* v = find(key);
    if (v && v->kind == Kind::integer) return v->integer;
    if (v && v->kind == Kind::real && v->real == std::floor(v->real) && std::fabs(v->real) < 9e15)
      return static_cast<std::int64_t>(v->real);
    throw Slow{};
  }
  std::string string(std::string_view key) const {
    const Value* v = find(key);
    if (!v || v->kind != Kind::string) throw Slow{};
    return std::string(v->text);
  }
  std::string string_or(std::string_view key, std::string fallback) const {
    return has(key) ? string(key) : std::move(fallback);
  }
  [[noreturn]] void fail(std::string_view, const std::string&) const { throw Slow{}; }
  const std::string& file() const { return file_; }
  nlohmann::json json() const { throw Slow{}; }  // only ever asked for an error message

  enum class Kind : std::uint8_t { null, integer, real, string };
  struct Value {
    Kind kind = Kind::null;
    std::int64_t integer = 0;
    double real = 0;
    std::string_view text;
  };
  const std::vector<Value>& values() const { return values_; }  // one per column

 private:
  static bool is_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }
  static bool digit(char c) { return c >= '0' && c <= '9'; }
  // A JSON number: -?(0|[1-9][0-9]*)(.[0-9]+)?([eE][+-]?[0-9]+)?; an integer that fits int64 stays one.
  static void number_token(std::string_view t, Value& v) {
    std::size_t k = 0;
    if (k < t.size() && t[k] == '-') ++k;
    if (k >= t.size() || !digit(t[k])) throw Slow{};
    if (t[k] == '0') ++k;
    else while (k < t.size() && digit(t[k])) ++k;
    bool real = false;
    if (k < t.size() && t[k] == '.') {
      real = true, ++k;
      if (k >= t.size() || !digit(t[k])) throw Slow{};
      while (k < t.size() && digit(t[k])) ++k;
    }
    if (k < t.size() && (t[k] == 'e' || t[k] == 'E')) {
      real = true, ++k;
      if (k < t.size() && (t[k] == '+' || t[k] == '-')) ++k;
      if (k >= t.size() || !digit(t[k])) throw Slow{};
      while (k < t.size() && digit(t[k])) ++k;
    }
    if (k != t.size()) throw Slow{};
    const char* first = t.data();
    if (!real) {
      const auto r = std::from_chars(first, t.data() + t.size(), v.integer);
      if (r.ec != std::errc() || r.ptr != t.data() + t.size()) throw Slow{};
      v.kind = Kind::integer;
      return;
    }
    const auto r = std::from_chars(first, t.data() + t.size(), v.real);
    if (r.ec != std::errc() || r.ptr != t.data() + t.size() || !std::isfinite(v.real)) throw Slow{};
    v.kind = Kind::real;
  }
  // The last column of that name (a later column overwrites an earlier one in row_object).
  const Value* find(std::string_view key) const {
    for (std::size_t c = columns_.size(); c-- > 0;)
      if (columns_[c] == key) return &values_[c];
    return nullptr;
  }
  const std::vector<std::string>& columns_;
  const std::string& file_;
  std::vector<Value> values_;
};


// ---- The packed tables (pack_embedded_tables, written at build time) ----
// Layout, native byte order, every section 8-byte aligned: magic, file count; per file its path
// and its record's size; then the records: the text's size, the header's text, the row count, the
// family names and each row's name (2 bytes), then per column its name, cell width (1, 2 or 4
// bytes), dictionary (16-byte entries: kind, string length, the value's 8 bytes or the string's
// offset in the column's pool), its cells and its string pool.
constexpr std::uint64_t kPackMagic = 0x316b6361705f7773ull;

struct PackOut {
  std::string b;
  template <class T>
  void put(T v) { b.append(reinterpret_cast<const char*>(&v), sizeof v); }
  void bytes(std::string_view t) { b.append(t); align(); }
  void text(std::string_view t) { put(std::uint32_t(t.size())), bytes(t); }
  void align() { b.resize((b.size() + 7) & ~std::size_t(7), '\0'); }
};

struct PackIn {
  struct Bad {};
  std::string_view b;
  std::size_t at = 0;
  const char* bytes(std::size_t n) {
    if (n > b.size() - at) throw Bad{};
    const char* p = b.data() + at;
    at += n;
    return p;
  }
  template <class T>
  T get() {
    T v;
    std::memcpy(&v, bytes(sizeof v), sizeof v);
    return v;
  }
  void align() { at = std::min(b.size(), (at + 7) & ~std::size_t(7)); }
  std::string_view text() {
    const auto n = get<std::uint32_t>();
    const std::string_view t(bytes(n), n);
    align();
    return t;
  }
};

struct PackedEntry {  // one dictionary entry
  RowReader::Kind kind;
  std::uint8_t pad[3];
  std::uint32_t length;  // a string's
  std::uint64_t value;   // integer or double bits; a string's offset in the pool
};
static_assert(sizeof(PackedEntry) == 16);

struct PackedColumn {
  std::string_view name;
  unsigned width = 1;
  const char* cells = nullptr;
  const char* dict = nullptr;
  std::string_view pool;
  PackedEntry cell(std::size_t row) const {
    std::uint32_t i = 0;
    if (width == 1) i = static_cast<unsigned char>(cells[row]);
    else if (width == 2) { std::uint16_t v; std::memcpy(&v, cells + 2 * row, 2); i = v; }
    else std::memcpy(&i, cells + 4 * row, 4);
    PackedEntry e;
    std::memcpy(&e, dict + sizeof(PackedEntry) * i, sizeof e);
    return e;
  }
};

struct PackedFile {
  std::size_t text_size = 0;
  std::string_view header;  // split_rows's header
  std::size_t rows = 0;
  std::vector<std::string_view> names;  // point_name of the rows
  const char* name_ids = nullptr;       // 2 bytes per row
  std::vector<PackedColumn> columns;
  std::uint16_t name_id(std::size_t row) const {
    std::uint16_t v;
    std::memcpy(&v, name_ids + 2 * row, 2);
    return v;
  }
};

PackedFile read_packed_file(std::string_view record) {
  PackIn in{record};
  PackedFile f;
  f.text_size = in.get<std::uint64_t>();
  f.header = in.text();
  f.rows = in.get<std::uint32_t>();
  const auto names = in.get<std::uint32_t>();
  const auto cols = in.get<std::uint32_t>();
  in.align();
  for (std::uint32_t i = 0; i < names; ++i) f.names.push_back(in.text());
  f.name_ids = in.bytes(2 * f.rows);
  in.align();
  for (std::uint32_t c = 0; c < cols; ++c) {
    PackedColumn col;
    col.name = in.text();
    col.width = in.get<std::uint32_t>();
    const auto entries = in.get<std::uint32_t>();
    if (col.width != 1 && col.width != 2 && col.width != 4) throw PackIn::Bad{};
    col.dict = in.bytes(sizeof(PackedEntry) * entries);
    col.cells = in.bytes(col.width * f.rows);
    in.align();
    col.pool = in.text();
    f.columns.push_back(col);
  }
  return f;
}

bool g_read_packed = true;

// The compiled pack's records by embedded path (empty when there is none or it does not read); a
// record is read when its file is (read_packed_file).
const std::map<std::string_view, std::string_view, std::less<>>& packed_index() {
  static const auto index = [] {
    std::map<std::string_view, std::string_view, std::less<>> out;
    try {
      PackIn in{packed_tables()};
      if (in.b.empty() || in.get<std::uint64_t>() != kPackMagic) return out;
      const auto files = in.get<std::uint64_t>();
      std::vector<std::pair<std::string_view, std::uint64_t>> dir;
      for (std::uint64_t i = 0; i < files; ++i) {
        const std::string_view path = in.text();
        dir.emplace_back(path, in.get<std::uint64_t>());
      }
      for (const auto& [path, size] : dir) out.emplace(path, std::string_view(in.bytes(size), size));
    } catch (const PackIn::Bad&) {
      out.clear();
    }
    return out;
  }();
  return index;
}

// One row of a packed file, with RowReader's accessors and the same values: RowReader read them
// at build time. A field it cannot give throws RowReader::Slow, and the caller reads the row's text.
class PackedRow {
 public:
  using Slow = RowReader::Slow;
  using Kind = RowReader::Kind;
  PackedRow(const PackedFile& f, std::size_t row, const std::string& file) : f_(f), row_(row), file_(file) {}
  bool has(std::string_view key) const {
    const PackedColumn* c = find(key);
    return c && c->cell(row_).kind != Kind::null;
  }
  double number(std::string_view key) const {
    const PackedEntry e = entry(key);
    if (e.kind == Kind::integer) return double(std::bit_cast<std::int64_t>(e.value));
    if (e.kind == Kind::real) return std::bit_cast<double>(e.value);
    throw Slow{};
  }
  double number_or(std::string_view key, double fallback) const { return has(key) ? number(key) : fallback; }
  std::int64_t integer(std::string_view key) const {
    const PackedEntry e = entry(key);
    if (e.kind == Kind::integer) return std::bit_cast<std::int64_t>(e.value);
    if (const double v = std::bit_cast<double>(e.value); e.kind == Kind::real && v == std::floor(v) && std::fabs(v) < 9e15)
      return static_cast<std::int64_t>(v);
    throw Slow{};
  }
  std::string string(std::string_view key) const {
    const PackedColumn* c = find(key);
    if (!c) throw Slow{};
    const PackedEntry e = c->cell(row_);
    if (e.kind != Kind::string) throw Slow{};
    return std::string(c->pool.substr(e.value, e.length));
  }
  std::string string_or(std::string_view key, std::string fallback) const {
    return has(key) ? string(key) : std::move(fallback);
  }
  [[noreturn]] void fail(std::string_view, const std::string&) const { throw Slow{}; }
  const std::string& file() const { return file_; }
  nlohmann::json json() const { throw Slow{}; }

 private:
  // The last column of that name, as RowReader::find.
  const PackedColumn* find(std::string_view key) const {
    for (std::size_t c = f_.columns.size(); c-- > 0;)
      if (f_.columns[c].name.size() == key.size() && std::memcmp(f_.columns[c].name.data(), key.data(), key.size()) == 0)
        return &f_.columns[c];
    return nullptr;
  }
  PackedEntry entry(std::string_view key) const {
    const PackedColumn* c = find(key);
    if (!c) throw Slow{};
    return c->cell(row_);
  }
  const PackedFile& f_;
  std::size_t row_;
  const std::string& file_;
};

// One parsed calibration file: its header and its points, either as objects (json["points"]) or,
// in the reducer's layout ("columns" and one row per point), as the text of each row, parsed when
// its family is fitted.
struct Doc {
  nlohmann::json json;
  std::string owned;                   // the file's text when it is not embedded data
  std::vector<std::string> columns;    // row layout
  // "[v, v, ...]" per point, into the embedded text or `owned`; of a packed file, split only when a
  // row has to be read from its text (rows_of).
  mutable std::vector<std::string_view> rows;
  const PackedFile* packed = nullptr;  // the file's rows as the build read them (&pack), or none
  PackedFile pack;
  std::string_view text;               // the embedded text of a packed file
  std::string file, family, origin, runtime;
  std::vector<std::string> kernels;
  std::map<std::string, std::string> rejected;  // kernel -> why its timings are not used
  bool declared = false;
  FitMethod method = FitMethod::nearest_log;
};

struct PointRef {
  const Doc* doc;
  std::size_t index;
};

// The reducer's layout: `"points": [` last, one flat row ("[...]", no nested brackets) per point.
// Fills the header (the text without "points") and the rows; false for any other layout.
bool split_rows(std::string_view text, std::string& header, std::vector<std::string_view>& rows) {
  const auto at = text.rfind("\"points\"");
  if (at == std::string_view::npos) return false;
  std::size_t i = text.find('[', at);
  if (i == std::string_view::npos || text.find_first_not_of(" \t\r\n:", at + 8) != i) return false;
  ++i;
  rows.clear();
  for (;;) {
    i = text.find_first_not_of(" \t\r\n,", i);
    if (i == std::string_view::npos) return false;
    if (text[i] == ']') break;
    if (text[i] != '[') return false;
    std::size_t j = i + 1;
    for (bool quoted = false; j < text.size(); ++j) {
      if (text[j] == '"') quoted = !quoted;
      else if (!quoted && (text[j] == '[' || text[j] == '{')) return false;
      else if (!quoted && text[j] == ']') break;
    }
    if (j >= text.size()) return false;
    rows.push_back(text.substr(i, j + 1 - i));
    i = j + 1;
  }
  if (rows.empty()) return false;   // no rows: nothing to defer, the whole document is read
  if (text.find_first_not_of(" \t\r\n}", i + 1) != std::string_view::npos) return false;
  const auto comma = text.find_last_not_of(" \t\r\n", at - 1);
  if (comma == std::string_view::npos || (text[comma] != ',' && text[comma] != '{')) return false;
  header.assign(text.substr(0, text[comma] == ',' ? comma : comma + 1));
  header += "}";
  return true;
}

// The fields of one row that name its family (point_name), as an object: split at the commas
// outside quotes, strings unquoted, numbers parsed.
nlohmann::json naming_fields(std::string_view row, const std::vector<std::string>& columns) {
  static const std::string_view keep[] = {"dtype", "kid", "phase", "mode", "op"};
  nlohmann::json out = nlohmann::json::object();
  std::size_t c = 0, start = 1;
  bool quoted = false;
  for (std::size_t i = 1; i < row.size() && c < columns.size(); ++i) {
    if (row[i] == '"') quoted = !quoted;
    if (quoted || (row[i] != ',' && row[i] != ']')) continue;
    if (std::find(std::begin(keep), std::end(keep), columns[c]) != std::end(keep)) {
      std::string_view v = row.substr(start, i - start);
      v.remove_prefix(std::min(v.find_first_not_of(' '), v.size()));
      if (v.size() >= 2 && v.front() == '"') out[columns[c]] = std::string(v.substr(1, v.size() - 2));
      else if (v != "null") out[columns[c]] = parse_json(v, "row");
    }
    ++c, start = i + 1;
  }
  return out;
}

// A family named by a file of family `stem` ("gemm" names gemm_bf16, gemm_fp8, ...).
bool names(std::string_view stem, std::string_view family) {
  return family == stem || (family.size() > stem.size() && family.starts_with(stem) && family[stem.size()] == '_');
}

FitMethod parse_method(const JsonReader& root) {
  const std::string m = root.string("method");
  for (FitMethod f : {FitMethod::nearest_log, FitMethod::local_linear, FitMethod::local_linear_series,
                      FitMethod::monotone_interp, FitMethod::least_squares})
    if (m == to_string(f)) return f;
  root.fail("method", "expected local-linear-log-interp, local-linear-series-log-interp, nearest-log-interp, "
                      "monotone-log-interp or least-squares");
  return FitMethod::nearest_log;
}


// One embedded file's pack record (layout above kPackMagic); false when a row or the header is
// not read in place, so the file is left to its text.
bool pack_file(const std::string& file, std::string_view text, std::string& out) {
  std::string header;
  std::vector<std::string_view> rows;
  if (!split_rows(text, header, rows)) return false;
  struct Column {
    std::map<std::tuple<RowReader::Kind, std::uint64_t, std::string_view>, std::uint32_t> index;
    std::vector<PackedEntry> dict;
    std::vector<std::uint32_t> cells;
    std::string pool;
  };
  std::vector<std::string> columns, kernels, names;
  std::map<std::string, std::uint16_t, std::less<>> name_index;
  std::vector<std::uint16_t> ids;
  std::vector<Column> cols;
  try {
    const nlohmann::json h = parse_json(header, file);
    const std::string family = JsonReader(h, file).string("family");
    for (const auto& c : h.at("columns")) columns.push_back(c.get<std::string>());
    if (h.contains("kernels"))
      for (const auto& k : h.at("kernels")) kernels.push_back(k.get<std::string>());
    cols.resize(columns.size());
    for (const std::string_view row : rows) {
      const RowReader r(row, columns, file);
      const std::string name = point_name(family, r, kernels);
      if (r.has("kid"))
        if (const auto kid = r.integer("kid"); kid < 0 || kid >= std::int64_t(kernels.size())) return false;
      const auto [it, added] = name_index.emplace(name, std::uint16_t(names.size()));
      if (added) names.push_back(name);
      if (names.size() > 0xffff) return false;
      ids.push_back(it->second);
      for (std::size_t c = 0; c < columns.size(); ++c) {
        const RowReader::Value& v = r.values()[c];
        const std::uint64_t bits = v.kind == RowReader::Kind::integer ? std::bit_cast<std::uint64_t>(v.integer)
                                   : v.kind == RowReader::Kind::real  ? std::bit_cast<std::uint64_t>(v.real)
                                                                      : 0;
        Column& col = cols[c];
        const auto [e, fresh] = col.index.emplace(std::make_tuple(v.kind, bits, v.text), std::uint32_t(col.dict.size()));
        if (fresh) {
          PackedEntry entry{v.kind, {}, std::uint32_t(v.text.size()), bits};
          if (v.kind == RowReader::Kind::string) entry.value = col.pool.size(), col.pool += v.text;
          col.dict.push_back(entry);
        }
        col.cells.push_back(e->second);
      }
    }
  } catch (...) {  // RowReader::Slow, a field point_name refuses, a header that does not read
    return false;
  }
  PackOut o;
  o.put(std::uint64_t(text.size()));
  o.text(header);
  o.put(std::uint32_t(rows.size())), o.put(std::uint32_t(names.size())), o.put(std::uint32_t(columns.size()));
  o.align();
  for (const auto& n : names) o.text(n);
  o.bytes(std::string_view(reinterpret_cast<const char*>(ids.data()), 2 * ids.size()));
  for (std::size_t c = 0; c < columns.size(); ++c) {
    const Column& col = cols[c];
    const std::uint32_t width = col.dict.size() <= 0x100 ? 1 : col.dict.size() <= 0x10000 ? 2 : 4;
    o.text(columns[c]);
    o.put(width), o.put(std::uint32_t(col.dict.size()));
    for (const PackedEntry& e : col.dict) o.put(e);
    for (const std::uint32_t i : col.cells) {
      if (width == 1) o.put(std::uint8_t(i));
      else if (width == 2) o.put(std::uint16_t(i));
      else o.put(i);
    }
    o.align();
    o.text(col.pool);
  }
  out = std::move(o.b);
  return true;
}

}  // namespace

// The files of a calibration folder, read when a family they name is first asked for: a file is
// parsed and its points named (phase 1), then a family's points become samples and are fitted
// (phase 2). Fitting one family reads nothing of another, so the result is the same as reading
// every file up front.
struct Calibration::Lazy {
  std::mutex mu;
  std::map<std::string, FamilyCalibration, std::less<>> families;
  std::map<std::string, std::string> env;  // file -> "gpu, runtime, date, source"
  std::vector<std::string> env_list;
  // Files not parsed yet, by stem (= their "family"), in path order.
  std::map<std::string, std::vector<std::pair<std::string, std::string_view>>, std::less<>> unread;
  std::vector<std::unique_ptr<Doc>> docs;
  std::map<std::string, std::vector<PointRef>, std::less<>> unfitted;  // named, not yet sampled and fitted
  bool packed = false;  // embedded files: rows from the compiled pack where it holds them

  // Calls use(RowReader) on row `i` of a file in the reducer's layout; false (use not finished)
  // when the file has no rows or the row needs JsonReader (RowReader::Slow, or an Error to be
  // reported with JsonReader's field names).
  template <class Use>
  static bool read_row(const Doc& d, std::size_t i, const Use& use) {
    if (d.columns.empty()) return false;
    try {
      if (d.packed) use(PackedRow(*d.packed, i, d.file));
      else use(RowReader(d.rows[i], d.columns, d.file));
      return true;
    } catch (const RowReader::Slow&) {
    } catch (const Error&) {
    }
    return false;
  }
  // The rows' text, split the first time a packed file's row has to be read from it.
  static const std::vector<std::string_view>& rows_of(const Doc& d) {
    if (d.packed && d.rows.empty()) {
      std::string header;
      if (!split_rows(d.text, header, d.rows)) throw Error(d.file, "points", "the packed rows do not match the file");
    }
    return d.rows;
  }

  void read(const std::string& file, std::string_view text, bool owned = false, bool packed = false) {
    auto doc = std::make_unique<Doc>();
    Doc& d = *doc;
    d.file = file;
    if (owned) text = d.owned = std::string(text);
    std::string header;
    if (packed)
      if (const auto& index = packed_index(); !index.empty())
        if (const auto it = index.find(file); it != index.end()) try {
            d.pack = read_packed_file(it->second);
            if (d.pack.text_size == text.size()) d.packed = &d.pack, d.text = text;
          } catch (const PackIn::Bad&) {  // left to the text
          }
    if (d.packed || split_rows(text, header, d.rows)) {
      d.json = d.packed ? parse_json(d.packed->header, file) : parse_json(header, file);
      const auto cols = d.json.find("columns");
      if (cols == d.json.end() || !cols->is_array()) throw Error(file, "columns", "expected a list of field names");
      for (const auto& col : *cols) {
        if (!col.is_string()) throw Error(file, "columns", "expected a list of field names");
        d.columns.push_back(col.get<std::string>());
      }
      d.json["points"] = nlohmann::json::array();
    } else {
      d.rows.clear();
      d.json = parse_json(text, file);
      expand_point_rows(d.json, file);
    }
    JsonReader root(d.json, file);
    d.family = root.string("family");
    d.origin = root.string_or("kernels_from", "torch");
    if (d.origin != "torch" && d.origin != "vllm") root.fail("kernels_from", "expected torch or vllm");
    if (root.has("env")) {
      JsonReader e = root.object("env");
      d.runtime = e.has("runtime") ? e.string("runtime") : "torch " + e.string_or("torch", "?");
      env[file] = file + ": " + e.string_or("gpu", "?") + ", " + d.runtime + ", " + e.string_or("date", "?") +
                  (e.has("source") ? ", " + e.string("source") : std::string());
    }
    if (root.has("kernels")) {
      const auto& ks = root.json().at("kernels");
      if (!ks.is_array()) root.fail("kernels", "expected a list of kernel names, got " + brief(ks));
      for (std::size_t i = 0; i < ks.size(); ++i) {
        if (!ks[i].is_string()) root.fail("kernels[" + std::to_string(i) + "]", "expected a kernel name, got " + brief(ks[i]));
        d.kernels.push_back(ks[i].get<std::string>());
      }
    }
    if (root.has("rejected_kernels")) {
      JsonReader rk = root.object("rejected_kernels");
      for (const auto& [k, v] : rk.json().items()) {
        if (!v.is_string()) rk.fail(k, "expected the reason as a string");
        d.rejected[k] = v.get<std::string>();
      }
    }
    d.declared = root.has("method");
    if (d.declared) d.method = parse_method(root);
    const auto points = root.array("points");
    const std::size_t n = d.columns.empty() ? points.size() : d.packed ? d.packed->rows : d.rows.size();
    // The cross-validated fit takes time quadratic in a family's points (10,000 about 1 s, 300,000
    // about 15 min): a file beyond the limit is refused, not left to run for hours.
    if (n > kMaxPointsPerFile)
      root.fail("points", std::to_string(n) + " points, more than " + std::to_string(kMaxPointsPerFile) +
                              " per file (the fit's time grows with the square of the points); thin the sweep");
    FamilyCalibration* last_fam = nullptr;  // a packed file's family of the row before
    std::vector<PointRef>* last_refs = nullptr;
    for (std::size_t i = 0; i < n; ++i) {
      std::string name;
      int kid = -1;
      if (d.packed) {  // named at build time; the kernel index checked there
        if (d.packed->name_id(i) >= d.packed->names.size()) throw Error(file, "points", "the packed rows do not match the file");
        const PackedRow p(*d.packed, i, file);
        kid = p.has("kid") ? int(p.integer("kid")) : -1;
        if (last_fam && d.packed->name_id(i) == d.packed->name_id(i - 1)) {  // the same family as the row before
          if (kid >= 0)
            if (auto it = d.rejected.find(d.kernels[size_t(kid)]); it != d.rejected.end()) last_fam->rejected = it->second;
          last_refs->push_back({&d, i});
          continue;
        }
        name = d.packed->names[d.packed->name_id(i)];
      }
      const auto name_point = [&](const auto& p) {
        name = point_name(d.family, p, d.kernels);
        kid = -1;
        if (p.has("kid")) {
          kid = int(p.integer("kid"));
          if (kid < 0 || kid >= int(d.kernels.size())) p.fail("kid", "must index the file's 'kernels' list");
        }
      };
      if (!d.packed && !read_row(d, i, name_point)) {
        nlohmann::json fields;
        if (!d.columns.empty()) fields = naming_fields(d.rows[i], d.columns);
        name_point(d.columns.empty() ? points[i] : JsonReader(fields, file, "points[" + std::to_string(i) + "]"));
      }
      // A vLLM measurement shadows this project's PyTorch run of the same family.
      if (auto it = families.find(name); it != families.end() && it->second.origin != d.origin) {
        if (d.origin == "torch") {
          name += "_torch";
        } else {
          auto node = families.extract(it);
          node.key() = name + "_torch";
          node.mapped().family = node.key();
          families.insert(std::move(node));
          auto refs = unfitted.extract(name);
          refs.key() = name + "_torch";
          unfitted.insert(std::move(refs));
        }
      }
      auto& fam = families[name];
      fam.family = name;
      fam.origin = d.origin;
      fam.runtime = d.runtime;
      if (fam.kernels.empty()) fam.kernels = d.kernels;
      fam.declared = d.declared;
      fam.fit_method = d.method;
      if (fam.file.empty()) fam.file = file;
      if (kid >= 0)
        if (auto it = d.rejected.find(d.kernels[size_t(kid)]); it != d.rejected.end()) fam.rejected = it->second;
      auto& refs = unfitted[name];
      refs.push_back({&d, i});
      last_fam = &fam, last_refs = &refs;
    }
    docs.push_back(std::move(doc));
  }

  // Parses every unread file that names `family` (every file when `family` is empty).
  void read_for(std::string_view family) {
    for (auto it = unread.begin(); it != unread.end();) {
      if (!family.empty() && !names(it->first, family)) { ++it; continue; }
      for (const auto& [file, text] : it->second) read(file, text, false, packed);
      it = unread.erase(it);
    }
  }

  // Turns a named family's points into samples and fits it.
  void fit(const std::string& name, const GpuSpec& gpu) {
    auto node = unfitted.extract(name);
    if (node.empty()) return;
    FamilyCalibration& f = families.at(name);
    f.samples.reserve(node.mapped().size());
    const Doc* last = nullptr;
    std::vector<char> marlin_kid;  // per kernel of the doc: vLLM's fused Marlin MoE (block-padded math)
    for (const PointRef& ref : node.mapped()) {
      const Doc& d = *ref.doc;
      if (&d != last) {  // what depends on the file, not the row
        last = &d;
        marlin_kid.assign(d.kernels.size(), 0);
        for (std::size_t k = 0; k < d.kernels.size(); ++k)
          marlin_kid[k] = d.family == "moe" && moe_kernel_library(d.kernels[k]) == "marlin";
        f.options.robust_plane = std::find(std::begin(kRobustPlaneFamilies), std::end(kRobustPlaneFamilies), name) !=
                                 std::end(kRobustPlaneFamilies);
        // NCCL collectives only: vLLM's all-reduce switches implementation by size within one table
        // (B200, 8 GPUs: 25.8 us at 256 KiB, 17.2 us at 1 MiB), and the measured serving runs agree
        // with the slower rows (gpt-oss-120b TP 8 at 64 clients: TPOT 15 % low without them).
        f.options.size_envelope = d.family == "nccl";
        f.prior_compute = name.find("fp8") != std::string::npos && gpu.priors.gemm_fp8 > 0 ? gpu.priors.gemm_fp8
                                                                                           : gpu.priors.gemm_bf16;
        f.prior_memory = d.family == "nccl" || d.family == "custom_all_reduce" ? gpu.priors.nccl_busbw : gpu.priors.memory;
      }
      Sample s;
      const auto sample = [&](const auto& p) {
        s = Sample{};
        const int kid = p.has("kid") ? int(p.integer("kid")) : -1;
        to_sample(d.family, p, gpu, s, kid >= 0 && marlin_kid[size_t(kid)]);
        s.seconds = positive(p, "ms") * 1e-3;
        if (p.has("ms_eager")) s.eager_seconds = positive(p, "ms_eager") * 1e-3;
        s.kernel = kid;
        if (d.family == "moe")
          f.moe_shapes.push_back({p.number("hidden"), p.number("inter"), p.number("topk"), p.number("experts"),
                                  p.number_or("gated", 1) != 0 ? 1.0 : 0.0});
      };
      if (!read_row(d, ref.index, sample)) {
        const std::string where = "points[" + std::to_string(ref.index) + "]";
        nlohmann::json row;
        if (!d.columns.empty()) {
          row = parse_json(rows_of(d)[ref.index], d.file);
          row = row_object(row, d.columns, d.file, ref.index);
        }
        sample(JsonReader(d.columns.empty() ? d.json.at("points")[ref.index] : row, d.file, where));
      }
      f.samples.push_back(s);
    }
    std::sort(f.moe_shapes.begin(), f.moe_shapes.end());
    f.moe_shapes.erase(std::unique(f.moe_shapes.begin(), f.moe_shapes.end()), f.moe_shapes.end());
    fit_family(f);
  }

  FamilyCalibration* get(std::string_view name, const GpuSpec& gpu) {
    read_for(name);
    auto it = families.find(name);
    if (it == families.end()) return nullptr;
    fit(it->first, gpu);
    return &it->second;
  }

  void load_all(const GpuSpec& gpu) {
    read_for({});
    while (!unfitted.empty()) fit(unfitted.begin()->first, gpu);
    docs.clear();  // every point is a sample now
    if (env_list.size() != env.size()) {
      env_list.clear();
      for (const auto& [file, e] : env) env_list.push_back(e);
    }
  }

  static void fit_family(FamilyCalibration& f) {
    if (f.declared) {  // fitted with the file's method; cross-validated by validate()
      f.fit = FamilyFit(f.samples, f.fit_method, f.prior_compute, f.prior_memory, f.options);
      return;
    }
    // The method with the lowest held-out median wins; p90 breaks ties within half a percent.
    const FitMethod methods[] = {FitMethod::least_squares, FitMethod::monotone_interp, FitMethod::nearest_log};
    CrossValidation cvs[3];
    int b = 0;
    for (int i = 0; i < 3; ++i) {
      cvs[i] = cross_validate(f.samples, methods[i], f.prior_compute, f.prior_memory, 4, f.options);
      if (i && (std::fabs(cvs[i].median - cvs[b].median) < 0.005 ? cvs[i].p90 < cvs[b].p90 : cvs[i].median < cvs[b].median))
        b = i;
    }
    int o = b == 0 ? 1 : 0;  // the best of the others, for the report
    for (int i = 0; i < 3; ++i)
      if (i != b && cvs[i].median < cvs[o].median) o = i;
    f.cv_other = cvs[o];
    f.other_method = methods[o];
    f.cv = cvs[b];
    f.fit = FamilyFit(f.samples, methods[b], f.prior_compute, f.prior_memory, f.options);
    // The bound measured shapes are reproduced to by the surface itself (without returning the
    // stored measurement; nearest-shape interpolation leaves the point out).
    for (const auto& s : f.samples)
      f.fit_max_error = std::max(f.fit_max_error, std::fabs(f.fit.predict(s, nullptr, true) - s.seconds) / s.seconds);
    std::vector<double> over;
    for (const auto& s : f.samples)
      if (s.eager_seconds >= 2 * s.seconds) over.push_back(s.eager_seconds - s.seconds);  // launch-bound points
    f.eager_overhead_s = median(over);
  }
};

Calibration::Calibration(const GpuSpec& gpu) : gpu_(&gpu), lazy_(std::make_unique<Lazy>()) {}
Calibration::~Calibration() = default;
Calibration::Calibration(Calibration&&) noexcept = default;
Calibration& Calibration::operator=(Calibration&&) noexcept = default;

bool Calibration::empty() const {
  std::lock_guard<std::mutex> lock(lazy_->mu);
  return lazy_->families.empty() && lazy_->unread.empty();
}

const FamilyCalibration* Calibration::family(std::string_view name) const {
  std::lock_guard<std::mutex> lock(lazy_->mu);
  const FamilyCalibration* f = lazy_->get(name, *gpu_);
  return f;
}

std::vector<std::string> Calibration::family_names(std::string_view prefix, bool usable_only) const {
  std::lock_guard<std::mutex> lock(lazy_->mu);
  lazy_->read_for(prefix);
  std::vector<std::string> out;
  for (auto it = lazy_->families.lower_bound(prefix); it != lazy_->families.end() && it->first.starts_with(prefix); ++it)
    if (!usable_only || it->second.rejected.empty()) out.push_back(it->first);
  return out;
}

const FamilyCalibration* Calibration::header(std::string_view name) const {
  std::lock_guard<std::mutex> lock(lazy_->mu);
  lazy_->read_for(name);
  auto it = lazy_->families.find(name);
  return it == lazy_->families.end() ? nullptr : &it->second;
}

const std::map<std::string, FamilyCalibration, std::less<>>& Calibration::headers() const {
  std::lock_guard<std::mutex> lock(lazy_->mu);
  lazy_->read_for({});
  return lazy_->families;
}

const std::map<std::string, FamilyCalibration, std::less<>>& Calibration::families() const {
  std::lock_guard<std::mutex> lock(lazy_->mu);
  lazy_->load_all(*gpu_);
  return lazy_->families;
}

const std::vector<std::string>& Calibration::env() const {
  std::lock_guard<std::mutex> lock(lazy_->mu);
  lazy_->load_all(*gpu_);
  return lazy_->env_list;
}

void Calibration::validate() {
  for (auto& [name, cf] : families()) {
    auto& f = const_cast<FamilyCalibration&>(cf);  // this object's own family, every one fitted
    if (f.pooled) continue;
    // The reported error pools all five folds (every point predicted once by a fit on the other
    // 80 %): one fold's 20 % leaves p90 to a handful of points and to which ones they are (H100
    // NCCL all-to-all, 63 points: p90 under 20 % on three folds, 32 % and 66 % on the other two).
    f.cv = cross_validate(f.samples, f.fit.method(), f.prior_compute, f.prior_memory, kAllFolds, f.options);
    if (f.declared)  // the other interpolation for comparison (least squares alone is far off on these grids)
      f.other_method = f.fit_method == FitMethod::nearest_log           ? FitMethod::local_linear
                       : f.fit_method == FitMethod::local_linear_series ? FitMethod::local_linear
                                                                        : FitMethod::nearest_log;
    f.cv_other = cross_validate(f.samples, f.other_method, f.prior_compute, f.prior_memory, kAllFolds,
                                {.robust_plane = false, .size_envelope = f.options.size_envelope});
    if (f.declared)  // the others' bound was taken at load (fit_family)
      for (const auto& s : f.samples)
        f.fit_max_error = std::max(f.fit_max_error, std::fabs(f.fit.predict(s, nullptr, true) - s.seconds) / s.seconds);
    f.pooled = true;
  }
}

void Calibration::add_file(const std::string& path, std::string_view text) {
  const auto slash = path.find_last_of('/');
  std::string stem = path.substr(slash == std::string::npos ? 0 : slash + 1);
  if (stem.ends_with(".json")) stem.resize(stem.size() - 5);
  lazy_->unread[stem].emplace_back(path, text);
}

namespace {
std::string gpu_prefix(const GpuSpec& gpu) { return "hwmodels/calibration/" + text::lower(gpu.name) + "/"; }
}  // namespace

Calibration Calibration::embedded(const GpuSpec& gpu, std::string_view release) {
  Calibration c(gpu);
  c.lazy_->packed = g_read_packed;
  const std::string prefix = gpu_prefix(gpu);
  for (auto path : data::list(prefix)) {
    const std::string_view rest = path.substr(prefix.size());
    const auto slash = rest.find('/');
    const std::string_view folder = slash == std::string_view::npos ? std::string_view() : rest.substr(0, slash);
    // The base folder is the GPU's own files and its vllm/ (0.24) tables; a release is its folder.
    const bool base = folder.empty() || folder == "vllm";
    if (release.empty() ? base : folder == release) c.add_file(std::string(path), data::get(path));
  }
  return c;
}

std::vector<std::string> Calibration::embedded_releases(const GpuSpec& gpu) {
  const std::string prefix = gpu_prefix(gpu);
  std::vector<std::string> out;
  for (auto path : data::list(prefix)) {
    const std::string_view rest = path.substr(prefix.size());
    const auto slash = rest.find('/');
    if (slash == std::string_view::npos || rest.substr(0, slash) == "vllm") continue;
    std::string folder(rest.substr(0, slash));
    if (out.empty() || out.back() != folder) out.push_back(std::move(folder));
  }
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

Calibration Calibration::from_dir(const std::string& dir, const GpuSpec& gpu) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) throw Error(dir, "", "not a directory of calibration JSON files");
  std::vector<std::string> files;
  for (const auto& e : fs::directory_iterator(dir, ec))
    if (e.is_regular_file() && e.path().extension() == ".json") files.push_back(e.path().string());
  std::sort(files.begin(), files.end());
  if (files.empty()) throw Error(dir, "", "no *.json calibration files");
  Calibration c(gpu);
  for (const auto& f : files) c.lazy_->read(f, read_json_file(f).dump(), true);  // parsed now: bad input fails here
  c.lazy_->load_all(gpu);
  return c;
}


std::string pack_embedded_tables() {
  std::vector<std::pair<std::string_view, std::string>> records;
  for (const auto& [path, text] : data::all_files()) {
    if (!path.starts_with("hwmodels/calibration/") || !path.ends_with(".json")) continue;
    std::string record;
    if (pack_file(std::string(path), text, record)) records.emplace_back(path, std::move(record));
  }
  PackOut o;
  o.put(kPackMagic), o.put(std::uint64_t(records.size()));
  for (const auto& [path, record] : records) o.text(path), o.put(std::uint64_t(record.size()));
  for (const auto& [path, record] : records) o.b += record;  // each a multiple of 8 bytes
  return std::move(o.b);
}

std::vector<std::string> packed_table_files() {
  std::vector<std::string> out;
  for (const auto& [path, f] : packed_index()) out.emplace_back(path);
  return out;
}

void read_packed_tables(bool on) { g_read_packed = on; }

LaunchOverhead Calibration::launch_overhead(bool graph_floor) const {
  LaunchOverhead o;
  // The per-kernel CPU cost comes from the single-kernel Mamba state update, whose eager timing
  // (plain triton.testing.do_bench) exposes the launch; the other files time eager calls behind
  // a 256 MB L2 flush that hides most of it (see their "about"). Without it: the smallest median.
  const auto* step = family("mamba_step");
  if (step && step->eager_overhead_s > 0) {
    o.eager_per_kernel_s = step->eager_overhead_s;
  } else {
    std::vector<double> eager;
    for (const auto& [name, f] : families())
      if (f.eager_overhead_s > 0) eager.push_back(f.eager_overhead_s);
    if (eager.empty()) return o;
    o.eager_per_kernel_s = *std::min_element(eager.begin(), eager.end());
  }
  if (graph_floor) {
    double floor = INFINITY;
    for (const auto& [name, f] : families())
      for (const auto& s : f.samples) floor = std::min(floor, s.seconds);
    o.graph_per_kernel_s = floor;
  }
  o.source = "measured on " + gpu_->name + ": eager (triton.testing.do_bench) minus CUDA-graph replay time of launch-bound points";
  return o;
}

}  // namespace servesim::hw
