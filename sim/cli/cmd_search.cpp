// `servesim search`: enumerate configurations (GPU, precision, TP/PP/EP, aggregated or xPyD,
// engine knobs), prune what cannot fit or cannot win, simulate the rest's concurrency sweeps and
// report the Pareto frontier per topology family and the best configuration under the SLO
// (sim/api/search.cpp). Table, JSON or CSV; --plot draws the frontier chart through
// python/servesim; a progress bar goes to stderr when it is a terminal.
#include <algorithm>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <set>
#include <sstream>

#include "common/error.hpp"
#include "common/files.hpp"
#include "common/table.hpp"
#include "common/text.hpp"
#include "hwmodels/catalog.hpp"
#include "models/memory.hpp"
#include "sim/api/api.hpp"
#include "sim/metrics.hpp"
#include "sim/simulate.hpp"
#include "sim/studies/plan.hpp"
#include "sim/cli/commands.hpp"
#include "sim/validate/bands.hpp"
#include "sim/cli/plot_runner.hpp"

namespace servesim::cli {
namespace {

std::string str(const nlohmann::json& v) { return v.is_string() ? v.get<std::string>() : v.dump(); }
std::string num(const nlohmann::json& v) { return v.is_null() ? "-" : std::to_string(v.get<std::int64_t>()); }
std::string usd(const nlohmann::json& v) { return v.is_null() ? "-" : fixed(v.get<double>(), 2); }
std::string fixed_g(double v) {
  char b[64];
  std::snprintf(b, sizeof b, "%.6g", v);
  return b;
}

std::string q(const std::string& s) { return text::csv_field(s); }

// One CSV row per configuration: what it is, its bounds, and its score when simulated.
std::string configurations_csv(const nlohmann::json& j) {
  auto val = [&](const nlohmann::json& v) -> std::string {
    if (v.is_null()) return "";
    if (v.is_string()) return q(v.get<std::string>());
    if (v.is_boolean()) return v.get<bool>() ? "true" : "false";
    if (v.is_number_float()) {
      char b[64];
      std::snprintf(b, sizeof b, "%.6g", v.get<double>());
      return b;
    }
    return v.dump();
  };
  const char* cfg_cols[] = {"index", "label", "family", "kind", "gpu", "decode_gpu", "instance", "decode_instance", "precision", "kv_cache_dtype",
                            "tp", "pp", "ep", "dp", "prefill_workers", "prefill_tp", "prefill_ep", "decode_workers", "decode_tp",
                            "decode_ep", "max_num_seqs", "max_num_batched_tokens", "num_speculative_tokens", "gpus", "status"};
  const char* bound_cols[] = {"ttft_lb_ms", "itl_lb_ms", "tps_ub_slo", "reason"};
  const char* score_cols[] = {"feasible", "slo_concurrency", "tps_per_copy", "tps_per_gpu", "tps_per_user", "ttft_ms",
                              "itl_ms", "gap_ms", "copies", "total_gpus", "instances", "usd_per_hour", "limited_by"};
  std::string out;
  for (const char* c : cfg_cols) out += std::string(c) + ",";
  for (const char* c : bound_cols) out += std::string("bound_") + c + ",";
  for (const char* c : score_cols) out += std::string(c) + ",";
  out.back() = '\n';
  for (const auto& c : j["configurations"]) {
    std::string line;
    for (const char* k : cfg_cols) line += val(c[k]) + ",";
    for (const char* k : bound_cols) line += val(c["bound"][k]) + ",";
    for (const char* k : score_cols) line += (c["score"].is_null() ? "" : val(c["score"][k])) + ",";
    line.back() = '\n';
    out += line;
  }
  return out;
}

// Prefix caching at a winner, as a table cell: the share of prompt tokens served from the cache,
// "off", or why it cannot hit (a hybrid model's block longer than the shared prefix).
std::string prefix_cell(bool on, std::int64_t block, double hit, std::int64_t shared) {
  if (!on) return "off";
  if (shared > 0 && block > shared) return "0% (block " + std::to_string(block) + " > prefix)";
  return fixed(100 * hit, 1) + "%";
}

// The same in a sentence, under the table: what the hit rate means for this traffic.
// Nothing when the traffic has no shared prefix and prefix caching was not asked for.
std::string prefix_sentence(const std::string& label, bool on, std::int64_t block, double hit, std::int64_t shared,
                            std::int64_t isl, bool asked) {
  if (shared <= 0 && !asked) return "";
  const std::string b = std::to_string(block), p = std::to_string(shared);
  if (!on)
    return shared > 0 ? label + ": prefix caching off (vLLM's default for hybrid Mamba models; --prefix-caching on,off tries "
                                "both): the " + p + "-token shared prefix is prefilled for every request\n"
                      : std::string();
  if (shared <= 0)
    return label + ": prefix caching on, but every prompt is distinct (no --shared-prefix-tokens), so nothing can hit\n";
  if (block > shared)
    return label + ": prefix caching on, but a hit is a whole KV block of " + b + " tokens (the hybrid model's block, sized to "
           "hold a Mamba state page) and the shared prefix is " + p + " tokens: no prompt can ever hit, so 0 % is vLLM's "
           "behaviour here, not a short run\n";
  const std::int64_t cacheable = shared / block * block;
  return label + ": prefix caching on: " + fixed(100 * hit, 1) + "% of prompt tokens came from the cache (each prompt can hit " +
         std::to_string(cacheable) + " of its " + std::to_string(isl) + " text tokens: the " + p + "-token prefix in whole " + b +
         "-token blocks)\n";
}

// Why a search or recommend has no answer: the space (nothing fits or can meet the SLO, with the
// first such reason), the SLO, or the goal.
std::string why_no_answer(const nlohmann::json& j) {
  const auto& n = j["counts"];
  bool meets = false;
  for (const auto& f : j["frontiers"])
    for (const auto& p : f["frontier"]) meets = meets || p["meets_slo"].get<bool>();
  auto first_reason = [&](const char* status) {
    for (const auto& c : j["configurations"])
      if (c["status"] == status && c["bound"]["reason"].is_string() && !c["bound"]["reason"].get<std::string>().empty())
        return " (e.g. " + c["label"].get<std::string>() + ": " + c["bound"]["reason"].get<std::string>() + ")";
    return std::string();
  };
  const std::string obj = str(j["objective"]["kind"]);
  if (n["simulated"].get<int>() == 0)
    return "\nNo configuration was simulated: " + std::to_string(n["does_not_fit"].get<int>()) + " do not fit" +
           first_reason("does_not_fit") + ", " + std::to_string(n["cannot_meet_slo"].get<int>()) + " cannot meet the SLO" +
           first_reason("cannot_meet_slo") + ".\n";
  if (meets && obj == "total_gpus")
    return "\nSome configurations meet the SLO, but none within --total-gpus " + fixed(j["objective"]["total_gpus"].get<double>(), 0) + ".\n";
  if (meets && obj == "target_tps") return "\nSome configurations meet the SLO, but none serves the target with at most 10^9 copies.\n";
  return j.contains("arrival") ? "\nNo simulated configuration meets the SLO at the offered rate with any number of copies tried.\n"
                               : "\nNo simulated configuration meets the SLO at any swept concurrency.\n";
}

}  // namespace

void write_atomically(const std::string& path, const std::string& text) { api::write_file_atomically(path, text); }

// Terminal progress bar on stderr (only when stderr is a terminal).
SearchBar::SearchBar() : tty_(::isatty(2) != 0) {}
void SearchBar::update(int simulated, int pending, int pruned, int total) {
  if (!tty_ || total <= 0) return;
  const int done = simulated + pruned;
  const int width = 30, fill = int(double(width) * done / total);
  std::fprintf(stderr, "\r[%s%s] %d/%d configurations (%d simulated, %d pruned, %d pending)  ",
               std::string(std::size_t(fill), '#').c_str(), std::string(std::size_t(width - fill), '.').c_str(), done, total,
               simulated, pruned, pending);
  std::fflush(stderr);
  shown_ = true;
}
SearchBar::~SearchBar() {
  if (shown_) std::fprintf(stderr, "\n");
}

// The header of a winner's `ran:` block: the block is one copy, as simulated, while the table's GPUs
// and $ are all copies ("1 x replica TP1 (1 GPUs)" under a 7-GPU answer had read as the answer).
std::string as_run(const nlohmann::json& copies, const nlohmann::json& gpus) {
  const std::int64_t n = copies.is_number_integer() ? copies.get<std::int64_t>() : 1;
  return n > 1 ? ", as run: one of its " + std::to_string(n) + " copies (" + num(gpus) + " GPUs in all), as simulated for the table's latencies\n"
               : std::string(", as run:\n");
}

// The load to serve in words: "20 requests/s x OSL 100 = 2000 output tok/s" where it came from
// --target-rps (open loop or read closed loop), else the output tok/s given.
std::string target_text(const nlohmann::json& j) {
  const auto& o = j["objective"];
  const std::string tps = compact(o["target_tps"].get<double>()) + " output tok/s";
  const std::string sized = sized_text(o.value("headroom", 0.0), o.value("sized_tps", 0.0), o.value("sized_rps", 0.0));
  if (!o.contains("target_rps")) return tps + sized;
  return compact(o["target_rps"].get<double>()) + " requests/s x OSL " + std::to_string(j["osl"].get<std::int64_t>()) + " = " + tps + sized;
}

// The objective in words, naming every load the user gave (it printed "objective target_tps" to a
// user who had asked for 40 requests/s, and "2000 output tok/s" to one who had asked for 20
// requests/s read closed loop).
std::string objective_text(const nlohmann::json& j) {
  const auto& o = j["objective"];
  const std::string kind = str(o["kind"]);
  if (kind == "total_gpus") return "the most output tok/s within " + fixed(o["total_gpus"].get<double>(), 0) + " GPUs";
  if (kind != "target_tps") return "the most output tok/s per GPU under the SLO";
  std::string s = "the cheapest deployment serving " + target_text(j);
  if (j.contains("arrival")) s += ", " + str(j["arrival"]) + " arrivals (open loop)";
  else if (o.contains("target_rps")) s += ", read off closed-loop concurrency sweeps (--arrival: open loop)";
  return s;
}

std::string search_table(const nlohmann::json& j) {
  std::string out;
  const auto& n = j["counts"];
  const std::string stat = str(j["statistic"]);
  char line[512];
  std::snprintf(line, sizeof line,
                "Search: %s, ISL %lld / OSL %lld%s; SLO TTFT %s <= %g ms, ITL %s <= %g ms%s; objective: %s\n",
                str(j["model"]).c_str(), (long long)j["isl"].get<std::int64_t>(), (long long)j["osl"].get<std::int64_t>(),
                j["vision_tokens_per_request"].get<std::int64_t>() > 0
                    ? (" + " + std::to_string(j["vision_tokens_per_request"].get<std::int64_t>()) + " vision tokens" +
                       (j.value("image_fraction", 1.0) < 1 ? " on " + fixed(100 * j["image_fraction"].get<double>(), 0) + " % of requests" : std::string()))
                          .c_str() : "",
                stat.c_str(), j["ttft_ms"].get<double>(), stat.c_str(), j["itl_ms"].get<double>(),
                gap_slo_text(stat, j.value("gap_ms", 0.0)).c_str(), objective_text(j).c_str());
  out += line;
  out += "Capacity read: " + str(j["method"]) + "; SLO statistic " + stat + " (--statistic)\n";
  if (j.contains("calibration")) out += "Calibration: " + str(j["calibration"]["summary"]) + "\n";
  // The resolved space: GPU types (with the instance each stands for), precisions, and the KV
  // dtypes: the checkpoint's (models::checkpoint_kv_dtype) unless --kv-cache-dtype adds others.
  std::vector<std::string> gpus, precisions, kvs;
  bool kv_searched = false;  // a candidate whose KV dtype is not its precision's checkpoint one (--kv-cache-dtype)
  auto add_once = [](std::vector<std::string>& v, const std::string& x) {
    if (std::find(v.begin(), v.end(), x) == v.end()) v.push_back(x);
  };
  for (const auto& c : j["configurations"]) {
    add_once(gpus, str(c["gpu"]) + " (" + str(c["instance"]) + ")");
    add_once(precisions, str(c["precision"]));
    add_once(kvs, str(c["kv_cache_dtype"]));
    kv_searched |= str(c["kv_cache_dtype"]) !=
                   hw::to_string(models::checkpoint_kv_dtype(hw::parse_precision(str(c["precision"]), "precision")));
  }
  out += "Space: " + text::join(gpus, ", ") + "; precisions " + text::join(precisions, ", ") +
         (kv_searched ? "; KV cache " + text::join(kvs, ", ") + " (--kv-cache-dtype; labels name a KV dtype other than the checkpoint's)\n"
                      : std::string("; KV cache the checkpoint's (fp8 for fp8/nvfp4 weights, else bf16)\n"));
  {   // prefix caching as searched, and the traffic's shared prefix it can save
    std::vector<std::string> pcs;
    for (const auto& c : j["configurations"]) add_once(pcs, str(c.value("prefix_caching", nlohmann::json("default"))));
    const std::int64_t shared = j.value("shared_prefix_tokens", std::int64_t{0});
    if (pcs != std::vector<std::string>{"default"} || shared > 0)
      out += "Prefix caching: " + text::join(pcs, ", ") + " (default: the engine's, off for hybrid Mamba models); shared prefix " +
             (shared > 0 ? std::to_string(shared) + " tokens of every prompt (--shared-prefix-tokens)\n"
                         : std::string("none: every prompt is distinct, so nothing can hit (--shared-prefix-tokens)\n"));
  }
  std::snprintf(line, sizeof line,
                "%d configurations: %d simulated (%d points), %d do not fit, %d cannot meet the SLO, %d cannot win%s\n",
                n["configurations"].get<int>(), n["simulated"].get<int>(), n["points_simulated"].get<int>(),
                n["does_not_fit"].get<int>(), n["cannot_meet_slo"].get<int>(), n["cannot_win"].get<int>(),
                j["pruning"].get<bool>() ? "" : " (pruning off)");
  out += line;

  // Open loop: a point is a number of copies offered the target rate, not a client count.
  const bool open = j.contains("arrival");
  // Open loop: the frontier's tok/s/GPU is aiperf's (output over the benchmark's duration, its ramp
  // and drain counted), the best row's the rate served (target / copies / GPUs a copy).
  Table fr({"family", "configuration", open ? "copies" : "clients", "tok/s/user", open ? "aiperf tok/s/GPU" : "tok/s/GPU", "meets SLO"});
  for (const auto& f : j["frontiers"])
    for (const auto& p : f["frontier"])
      fr.add_row({str(f["family"]), str(p["label"]), num(p["concurrency"]), fixed(p["output_tps_per_user"].get<double>(), 1),
                  fixed(p["output_tps_per_gpu"].get<double>(), 1), p["meets_slo"].get<bool>() ? "yes" : "no"});
  out += std::string("\nPareto frontier per family (output tok/s per GPU vs per user") +
         (open ? "; aiperf's tok/s/GPU: the output over the benchmark's whole duration, its ramp and drain counted, so below "
                 "the served rate of the best row)\n"
               : ")\n") +
         fr.render();

  // With a gap SLO (--gap-ms) the best row shows the gap it was read at.
  const bool gap = j.value("gap_ms", 0.0) > 0;
  std::vector<std::string> head{"best under the SLO", open ? "req/s per copy" : "clients per copy", "TTFT ms", "ITL ms"};
  if (gap) head.push_back("gap ms");
  head.insert(head.end(), {open ? "served tok/s/GPU" : "tok/s/GPU", "copies", "GPUs", "instances", "$/hour", "limited by"});
  Table bt(head);
  auto add_best = [&](const nlohmann::json& b) {
    const auto& s = b["score"];
    std::vector<std::string> row{str(b["label"]), open ? fixed(s.value("rate_per_copy", 0.0), 2) : num(s["slo_concurrency"]),
                                 fixed(s["ttft_ms"].get<double>(), 1) + (s.value("prefill_train", false) ? " TRAIN" : ""),
                                 fixed(s["itl_ms"].get<double>(), 2)};
    if (gap) row.push_back(fixed(s.value("gap_ms", 0.0), 2));
    row.insert(row.end(), {fixed(s["tps_per_gpu"].get<double>(), 1), num(s["copies"]), num(s["total_gpus"]), num(s["instances"]),
                           usd(s["usd_per_hour"]),
                           str(s["limited_by"]) + (s.value("kv_full", false) ? " (KV full)" : "") +
                               (s.value("gap_only", false) ? " (token gap)" : "")});
    bt.add_row(row);
  };
  if (j["best"].is_null()) {
    out += why_no_answer(j);
  } else {
    add_best(j["best"]);
    out += "\n" + bt.render();
    if (j["best"]["score"].value("prefill_train", false))
      out += "TRAIN: read at a point that ran in a PREFILL TRAIN (most prompts queued behind another's prefill): its TTFT is "
             "that queue's; raise --requests or check the winner open loop (docs/capacity-planning.md)\n";
    if (j["best"]["score"].value("one_copy_fewer_overloaded", false)) out += sim::overload_note(1);
    const auto& bst = j["best"];
    if (bst.contains("bound"))
      out += prefix_sentence(str(bst["label"]), bst["bound"]["prefix_caching"].get<bool>(), bst["bound"]["block_tokens"].get<std::int64_t>(),
                             bst["score"]["prefix_cache_hit_rate"].get<double>(), j.value("shared_prefix_tokens", std::int64_t{0}),
                             j["isl"].get<std::int64_t>(), str(bst["prefix_caching"]) != "default");
    out += "Best" + as_run(bst["score"]["copies"], bst["score"]["total_gpus"]) + sim::what_ran_text(bst["what_ran"]);
  }
  return out;
}

namespace {

// The search on a Dask cluster (--dask ADDRESS): python/servesim/dask_search.py connects to the
// scheduler and runs the same C++ rounds with the candidates simulated on the workers; the report
// comes back as JSON and is printed, written and emitted here exactly as a local one.
nlohmann::json search_on_dask(const api::SearchArgs& a, bool recommend, const std::string& address, double timeout_s) {
  namespace fs = std::filesystem;
  std::error_code ec;
  fs::path dir = fs::temp_directory_path(ec);
  if (ec) dir = ".";
  static int serial = 0;
  dir /= "servesim-dask-" + std::to_string(::getpid()) + "-" + std::to_string(++serial);
  if (!fs::create_directories(dir, ec) || ec) throw Error("--dask", "", "cannot create a scratch folder " + dir.string());
  struct Cleanup {
    fs::path d;
    ~Cleanup() {
      std::error_code e;
      fs::remove_all(d, e);
    }
  } cleanup{dir};
  const std::string args_file = (dir / "args.json").string(), report_file = (dir / "report.json").string();
  write_atomically(args_file, api::search_args_json(a).dump());
  std::ostringstream t;
  t << timeout_s;
  // "--scheduler=ADDR": an address that starts with '-' is never taken for an option.
  std::vector<std::string> argv{"--scheduler=" + address, "--timeout", t.str(), "--args", args_file, "-o", report_file};
  if (recommend) argv.push_back("--recommend");
  run_python_module("servesim.dask_search", argv, "--dask");
  std::ifstream in(report_file);
  std::stringstream ss;
  ss << in.rdbuf();
  const auto j = nlohmann::json::parse(ss.str(), nullptr, false);
  if (!in || j.is_discarded() || !j.is_object()) throw Error("--dask", "", "the Dask run wrote no readable report");
  return j;
}

// Options of `search` and `recommend` beyond the search arguments.
struct SearchOpts {
  api::SearchArgs args;
  std::string output, plot, emit, dask;
  double dask_timeout_s = 10;
  Format format = Format::table;
  bool no_prune = false, no_ep = false, same_gpu = false, dask_given = false, quiet = false;
};

// The search's rounds, on the Dask cluster of --dask or here (with a progress bar).
nlohmann::json run_rounds(SearchOpts& o, bool recommend) {
  memory_hint = "the search space (--gpu, --precision, --tp, --pd-ratios, --max-num-seqs, --max-num-batched-tokens lists), "
                "--concurrency and --requests; give shorter lists";
  o.args.prune = !o.no_prune;
  o.args.expert_parallel = !o.no_ep;
  o.args.mixed_gpus = !o.same_gpu;
  if (o.dask_given) {
    if (o.dask.empty()) throw Error("--dask", "", "give the Dask scheduler's address (e.g. tcp://10.0.0.5:8786)");
    nlohmann::json j = search_on_dask(o.args, recommend, o.dask, o.dask_timeout_s);
    j["input_config"] = api::search_input_config(o.args);
    return j;
  }
  SearchBar bar;
  api::SearchProgressFn progress;
  if (!o.quiet) progress = [&bar](int s, int p, int r, int t) { bar.update(s, p, r, t); };
  return recommend ? api::recommend(o.args, progress) : api::search(o.args, progress);
}

// recommend --plot X.png also writes X-cost.png: $/hour per GPU type, cheapest first.
std::string cost_chart_path(const std::string& plot) {
  const std::string low = text::lower(plot);
  const std::string base = low.size() > 4 && low.substr(low.size() - 4) == ".png" ? plot.substr(0, plot.size() - 4) : plot;
  return base + "-cost.png";
}

// The output paths, checked before the search runs so a bad one does not waste it.
void check_targets(const SearchOpts& o, api::DeploymentSet& set, bool recommend) {
  if (!o.output.empty()) check_writable_target(o.output, "--output");
  if (!o.plot.empty()) check_writable_target(o.plot, "--plot");
  // recommend's second chart, in the same folder: a folder of its name would fail only after the run.
  if (recommend && !o.plot.empty()) {
    const std::string cost = cost_chart_path(o.plot);
    if (std::error_code ec; std::filesystem::is_directory(std::filesystem::status(cost, ec)))
      throw Error("--plot", "", cost + ": is a folder, not a file (recommend --plot " + o.plot + " also writes the $/hour chart " +
                                    cost + "); give another chart name");
  }
  if (!o.emit.empty()) set.prepare(o.emit, recommend);
}

// --output and --plot, staged into the set (they appear with the emitted files or not at all).
// The chart's data goes to a temporary file of its own (never a name the user could own).
void stage_outputs(const SearchOpts& o, nlohmann::json& j, api::DeploymentSet& set, const std::string& output_text) {
  if (!o.output.empty()) {
    set.files().write(o.output, output_text);
    j["output"] = o.output;
  }
  if (!o.plot.empty()) {
    AtomicFiles scratch;   // discarded: the data file is the plotter's input only
    const std::string data = scratch.write(o.plot + ".search.json", j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
    const std::string chart = set.files().reserve(o.plot);
    std::vector<std::string> args{"--search", data, "-o", chart};   // argument vector: no shell parses a path
    if (j.contains("recommendations")) {   // recommend: the manager's chart beside the frontier
      const std::string cost = cost_chart_path(o.plot);
      args.insert(args.end(), {"--cost", set.files().reserve(cost)});
      j["cost_plot"] = cost;
    }
    run_plotter(args);
    j["plot"] = o.plot;
  }
}

bool ends_csv(const std::string& path) {
  const std::string low = text::lower(path);
  return low.size() > 4 && low.substr(low.size() - 4) == ".csv";
}

void run_search(SearchOpts& o) {
  api::DeploymentSet set;
  check_targets(o, set, false);
  nlohmann::json j = run_rounds(o, false);
  if (!o.emit.empty() && j["best"].is_null()) throw Error("--emit", "", "no configuration meets the SLO: nothing to emit");
  if (!o.output.empty()) j["output"] = o.output;
  stage_outputs(o, j, set, o.output.empty() ? "" : ends_csv(o.output) ? configurations_csv(j) : j.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) + "\n");
  if (!o.emit.empty()) set.add(j["best"]["deployment"], o.emit);
  const nlohmann::json files = set.commit();
  if (!o.emit.empty()) j["emitted"] = files;
  std::string text = search_table(j);
  if (!o.output.empty()) text += "Data: " + o.output + "\n";
  if (!o.plot.empty()) text += "Chart: " + o.plot + " (Pareto frontier per family, SLO marked)\n";
  if (j.contains("emitted")) text += "Deployment files of the best configuration: " + o.emit + (o.emit.back() == '/' ? " (" : "/ (") + std::to_string(j["emitted"].size()) + " files)\n";
  emit(o.format, j, text);
}

std::string recommend_text(const nlohmann::json& j) {
  std::string out;
  char line[512];
  const std::string stat = str(j["statistic"]);
  std::snprintf(line, sizeof line, "Pre-purchase: %s, ISL %lld / OSL %lld, %s under TTFT %s <= %g ms, ITL %s <= %g ms%s\n",
                str(j["model"]).c_str(), (long long)j["isl"].get<std::int64_t>(), (long long)j["osl"].get<std::int64_t>(),
                target_text(j).c_str(), stat.c_str(), j["ttft_ms"].get<double>(), stat.c_str(), j["itl_ms"].get<double>(),
                gap_slo_text(stat, j.value("gap_ms", 0.0)).c_str());
  out += line;
  if (j["vision_tokens_per_request"].get<std::int64_t>() > 0)
    out += "Images: + " + std::to_string(j["vision_tokens_per_request"].get<std::int64_t>()) + " vision tokens on " +
           fixed(100 * j.value("image_fraction", 1.0), 0) + " % of requests\n";
  const bool open = j.contains("arrival");
  if (open)
    out += "Offered load: " + compact(j["target_rps"].get<double>()) + " requests/s" +
           (j["objective"].value("headroom", 0.0) > 0 ? " (the target + " + sim::headroom_text(j["objective"]["headroom"].get<double>()) + ")" : "") +
           ", " + str(j["arrival"]) + " arrivals (open loop), split evenly over each configuration's copies\n";
  out += "Capacity read: " + str(j["method"]) + "; SLO statistic " + stat + " (--statistic)\n";
  if (j.contains("calibration")) out += "Calibration: " + str(j["calibration"]["summary"]) + "\n";
  const auto& n = j["counts"];
  std::snprintf(line, sizeof line, "%d configurations: %d simulated, %d do not fit, %d cannot meet the SLO, %d cannot win\n",
                n["configurations"].get<int>(), n["simulated"].get<int>(), n["does_not_fit"].get<int>(),
                n["cannot_meet_slo"].get<int>(), n["cannot_win"].get<int>());
  out += line;
  const std::int64_t shared = j.value("shared_prefix_tokens", std::int64_t{0});
  if (shared > 0) out += "Shared prefix: every prompt starts with the same " + std::to_string(shared) + " tokens (--shared-prefix-tokens)\n";
  std::vector<std::string> cols = {"GPU", "instance", "cheapest configuration", "GPUs", "nodes", "$/hour", "$/M output tok",
                                   "kW (TDP max)", "J/tok (max)", open ? "req/s per copy" : "clients per copy",
                                   "TTFT " + stat + " ms", "ITL " + stat + " ms", open ? "served tok/s" : "capacity tok/s", "spare %", "limited by"};
  const bool gap = j.value("gap_ms", 0.0) > 0;   // a gap SLO (--gap-ms): the gap each row was read at
  if (gap) cols.insert(cols.begin() + 12, "gap " + stat + " ms");
  if (shared > 0) cols.push_back("prefix hit");
  // One GPU type per row first; prefill on one type and decode on another in a table of their own
  // (the five cheapest; every row in --format json).
  Table t(cols), mixed(cols);
  int trains = 0, fulls = 0, unbounded = 0, mixed_rows = 0, mixed_shown = 0, overloaded = 0, gap_rows = 0;
  std::string prefix_notes;
  for (const auto& r : j["recommendations"]) {
    overloaded += r.value("one_copy_fewer_overloaded", false);
    const bool pair = str(r["gpu"]).find('+') != std::string::npos;
    mixed_rows += pair;
    if (pair && ++mixed_shown > 5) continue;
    Table& into = pair ? mixed : t;
    // A figure with its prediction band "(lo-hi)" when its kind has one.
    auto banded = [&](const char* key, const char* band, int digits) {
      std::string s = fixed(r[key].get<double>(), digits);
      const auto& b = r["band"][band];
      if (b.contains("lo")) s += " (" + fixed(b["lo"].get<double>(), digits) + "-" + fixed(b["hi"].get<double>(), digits) + ")";
      return s;
    };
    const std::string lim = str(r.value("limited_by", nlohmann::json("none")));
    unbounded += !open && lim == "none";
    std::vector<std::string> row = {str(r["gpu"]), str(r["instance"]), str(r["label"]) + (r.contains("calibration") && r.value("calibrated", false) ? " (calibrated)" : ""),
                  num(r["gpus"]), num(r["nodes"]), usd(r["usd_per_hour"]), usd(r["usd_per_million_output_tokens"]),
                  fixed(r["power_watts"].get<double>() / 1e3, 1), fixed(r["joules_per_output_token"].get<double>(), 2),
                  open ? fixed(r["rate_per_copy"].get<double>(), 2) : num(r["slo_concurrency"]),
                  banded("ttft_ms", "ttft_ms", 1) + (r.value("prefill_train", false) ? " TRAIN" : ""), banded("itl_ms", "itl_ms", 2),
                  banded("capacity_tps", "capacity_tps", 0), spare_cell(r["spare_pct"]),
                  lim == "none" && !open ? "none (upper bound)"
                                         : lim + (r.value("kv_full", false) ? " (KV full)" : "") + (r.value("gap_only", false) ? " (token gap)" : "")};
    if (gap) row.insert(row.begin() + 12, fixed(r.value("gap_ms", 0.0), 2));
    if (shared > 0)
      row.push_back(prefix_cell(r["prefix_caching"].get<bool>(), r["prefix_block_tokens"].get<std::int64_t>(),
                                r["prefix_cache_hit_rate"].get<double>(), shared));
    into.add_row(row);
    if (!pair)
      prefix_notes += prefix_sentence(str(r["gpu"]) + " " + str(r["label"]), r["prefix_caching"].get<bool>(),
                                      r["prefix_block_tokens"].get<std::int64_t>(), r["prefix_cache_hit_rate"].get<double>(), shared,
                                      j["isl"].get<std::int64_t>(), str(r["prefix_caching_setting"]) != "default");
    trains += r.value("prefill_train", false);
    fulls += r.value("kv_full", false);
    gap_rows += r.value("gap_only", false);
  }
  out += "\n" + t.render();
  if (mixed_rows > 0)
    out += "\nPrefill on one GPU type, decode on another (" + std::string(mixed_rows > 5 ? "the 5 cheapest of " : "") +
           std::to_string(mixed_rows) + "; --same-gpu leaves them out, --format json lists all)\n" + mixed.render();
  if (unbounded > 0)
    out += "none (upper bound): " + std::to_string(unbounded) + " row(s) still meet both SLOs at the highest swept concurrency, so "
           "one copy could serve more and their GPUs and $ are an upper bound: extend --concurrency (e.g. 1,2,4,...,512) or "
           "size open loop (--arrival poisson)\n";
  out += spare_legend(open);
  out += "limited by: the SLO the next swept concurrency (open loop: one copy fewer) breaks; ttft: add prefill capacity, "
         "itl: add decode capacity" +
         std::string(fulls > 0 ? "; (KV full): a worker's KV cache was full there and prompts waited for room, so add KV "
                                 "memory per worker (more GPUs per worker, an FP8 KV cache where it is 16-bit) rather than prefill"
                               : "") +
         std::string(gap_rows > 0 ? "; (token gap): the mean ITL held and the gap between streamed tokens broke: prompts' "
                                    "prefill steps stall the decodes, so disaggregate prefill or chunk prompts smaller "
                                    "(--max-num-batched-tokens)"
                                  : "") + "\n";
  if (overloaded > 0) out += sim::overload_note(overloaded);
  out += prefix_notes;
  if (trains > 0)
    out += "TRAIN: " + std::to_string(trains) + " row(s) read at a point that ran in a PREFILL TRAIN (most prompts queued "
           "behind another's prefill): their TTFT is that queue's; raise --requests or check the winner open loop "
           "(docs/capacity-planning.md)\n";
  if (!j["recommendations"].empty() && j["recommendations"][0].contains("what_ran")) {
    const auto& best = j["recommendations"][0];
    out += "Cheapest" + as_run(best["copies"], best["gpus"]) + sim::what_ran_text(best["what_ran"]);
  }
  if (j["recommendations"].empty()) out += why_no_answer(j);
  out += "$/M output tok: $/hour / (the target's output tokens/s x 3,600) x 10^6, the target held around the clock "
         "(output tokens only, prompt tokens not counted; --target-rps R: R x OSL output tokens/s)\n";
  std::vector<std::string> unpriced;   // instances no source prices (the GB300 NVL72 tray)
  for (const auto& r : j["recommendations"])
    if (r["usd_per_hour"].is_null()) unpriced.push_back(str(r["instance"]));
  out += unpriced_note(unpriced);
  out += "Power: every GPU at its datasheet TDP, an upper bound (no measured power curve; host power excluded).\n"
         "(a-b): prediction band, " + sim::validate::band_legend() + ", applied to the " + stat +
         " figure; none shown: no measured runs of this kind\n";
  return out;
}

void run_recommend(SearchOpts& o) {
  api::DeploymentSet set;
  check_targets(o, set, true);
  nlohmann::json j = run_rounds(o, true);
  std::string out_text;
  if (!o.output.empty()) {
    if (ends_csv(o.output)) {
      std::string csv = "gpu,instance,configuration,kind,precision,copies,gpus,nodes,usd_per_hour,usd_per_million_output_tokens,"
                        "power_watts_tdp_upper_bound,joules_per_output_token_upper_bound,capacity_tps,ttft_ms,itl_ms,gap_ms,"
                        "ttft_headroom_pct,itl_headroom_pct,spare_pct_lo,spare_pct_hi,load_regime,ttft_band_lo,ttft_band_hi,"
                        "itl_band_lo,itl_band_hi,capacity_tps_band_lo,capacity_tps_band_hi\n";
      for (const auto& r : j["recommendations"]) {
        // Band bounds (empty: no measured runs of the point's kind).
        std::string bands = q(str(r["band"]["load_regime"]));
        for (const char* k : {"ttft_ms", "itl_ms", "capacity_tps"})
          for (const char* e : {"lo", "hi"}) {
            const auto& v = r["band"][k];
            bands += "," + (v.contains(e) ? fixed_g(v[e].get<double>()) : std::string());
          }
        csv += q(str(r["gpu"])) + "," + q(str(r["instance"])) + "," + q(str(r["label"])) + "," + q(str(r["kind"])) + "," +
               q(str(r["precision"])) + "," + num(r["copies"]) + "," + num(r["gpus"]) + "," + num(r["nodes"]) + "," +
               usd(r["usd_per_hour"]) + "," + usd(r["usd_per_million_output_tokens"]) + "," +
               fixed(r["power_watts"].get<double>(), 0) + "," + fixed(r["joules_per_output_token"].get<double>(), 4) + "," +
               fixed(r["capacity_tps"].get<double>(), 1) + "," + fixed(r["ttft_ms"].get<double>(), 2) + "," +
               fixed(r["itl_ms"].get<double>(), 3) + "," + fixed(r.value("gap_ms", 0.0), 3) + "," +
               fixed(r["ttft_headroom_pct"].get<double>(), 1) + "," +
               fixed(r["itl_headroom_pct"].get<double>(), 1) + "," + fixed(r["spare_pct"]["lo"].get<double>(), 1) + "," +
               (r["spare_pct"]["hi"].is_null() ? std::string() : fixed(r["spare_pct"]["hi"].get<double>(), 1)) + "," + bands + "\n";
      }
      out_text = csv;
    } else {
      out_text = j.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
    }
  }
  stage_outputs(o, j, set, out_text);
  // What a user deploys: the recommendation (the cheapest row, whatever its GPUs) in recommended/,
  // and the cheapest of every other single GPU type in best-<instance>/ (catalogue names:
  // file-safe); mixed-GPU rows other than the recommendation are left out. index.json says what each is.
  nlohmann::json index = nlohmann::json::array();
  if (!o.emit.empty() && !j["recommendations"].empty()) {
    const auto& recs = j["recommendations"];
    std::set<std::string> gpus;
    for (std::size_t i = 0; i < recs.size(); ++i) {
      const auto& r = recs[i];
      const bool pair = str(r["gpu"]).find('+') != std::string::npos;
      if (i > 0 && (pair || gpus.count(str(r["gpu"])))) continue;
      gpus.insert(str(r["gpu"]));
      const std::string folder = i == 0 ? "recommended" : "best-" + str(r["instance"]);
      set.add(r["deployment"], o.emit + "/" + folder);
      index.push_back({{"folder", folder},
                       {"what", i == 0 ? "the recommendation: the cheapest deployment that meets both SLOs at the target"
                                       : "the cheapest deployment on " + str(r["gpu"]) + " (" + str(r["instance"]) + "), for comparison"},
                       {"gpu", r["gpu"]}, {"instance", r["instance"]}, {"configuration", r["label"]}, {"copies", r["copies"]},
                       {"gpus", r["gpus"]}, {"nodes", r["nodes"]}, {"usd_per_hour", r["usd_per_hour"]},
                       {"usd_per_million_output_tokens", r["usd_per_million_output_tokens"]}});
    }
    set.put_index(o.emit, {{"emitted_by", "servesim recommend"},
                           {"question", {{"model", j["model"]}, {"isl", j["isl"]}, {"osl", j["osl"]}, {"ttft_ms", j["ttft_ms"]},
                                         {"itl_ms", j["itl_ms"]}, {"statistic", j["statistic"]}}},
                           {"folders", index}});
  }
  const nlohmann::json files = set.commit();
  if (!o.emit.empty()) j["emitted"] = files, j["emitted_index"] = index;
  std::string text = recommend_text(j);
  if (!o.output.empty()) text += "Data: " + o.output + "\n";
  if (!o.plot.empty())
    text += "Charts: " + o.plot + " (Pareto frontier per family, SLO marked); " + str(j["cost_plot"]) +
            " ($/hour of the cheapest deployment per GPU type, cheapest first: the one for a manager)\n";
  if (!o.emit.empty()) {
    const std::string dir = o.emit + (o.emit.back() == '/' ? "" : "/");
    text += "Deployment files (" + dir + "index.json says what each folder is):\n";
    for (const auto& e : index)
      text += "  " + dir + str(e["folder"]) + "/  " + str(e["configuration"]) + ", " + num(e["copies"]) + (e["copies"].get<std::int64_t>() == 1 ? " copy on " : " copies on ") +
              num(e["nodes"]) + " x " + str(e["instance"]) + ", $" + usd(e["usd_per_hour"]) + "/hour" +
              (str(e["folder"]) == "recommended" ? "  <- the recommendation" : "") + "\n";
  }
  emit(o.format, j, text);
}

}  // namespace

void add_search_options(CLI::App& c, api::SearchArgs& a) {
  c.add_option("--model", a.model, "Model name (servesim list models) or its Hugging Face id");
  c.add_option("--model-file", a.model_file, "A servesim model JSON or a Hugging Face config.json instead of --model");
  c.add_option("--gpu", a.gpus, "GPU or instance types to search, comma-separated (e.g. h100,h200,b200,b300)");
  c.add_option("--precision", a.precisions, "Weight precisions to try (default: bf16, fp8, nvfp4 where the GPU computes in them, and the formats the model is published in, 4-bit weight-only ones through Marlin W4A16 on any GPU)");
  c.add_option("--topology", a.topology, "agg, disagg or both (default both)");
  c.add_option("--tp", a.tp, "Tensor-parallel sizes to try (default 1,2,4,8, those one instance of a GPU given holds)");
  c.add_option("--pp", a.pp, "Pipeline-parallel sizes to try, aggregated (default 1)");
  c.add_option("--dp", a.dp, "Attention data-parallel ranks to try, aggregated MoE replicas within a node (default 1,2,4,8)");
  c.add_option("--decode-dp", a.decode_dp, "Attention data-parallel ranks to try for disaggregated decode workers of MoE models, "
                                           "within a node, e.g. 1,2,4,8 (default 1: none; each value multiplies the disaggregated candidates)");
  c.add_option("--ep", a.ep, "MoE models: expert-parallel sizes to try where they divide a layout's TP x DP, e.g. 1,2,4,8 (default: 1 and "
                             "TP x DP; sizes between run MoE TP x EP, which TensorRT-LLM and SGLang launch and vLLM does not)");
  c.add_option("--pd-ratios", a.pd_ratios, "Disaggregated prefill:decode worker counts (default 1:1,1:2,2:1,1:3,3:1)");
  c.add_option("--max-num-seqs", a.max_num_seqs, "max_num_seqs values to try (SGLang max_running_requests, TRT-LLM max_batch_size; default: each engine's)");
  c.add_option("--max-num-batched-tokens", a.max_num_batched_tokens, "max_num_batched_tokens values to try (SGLang chunked_prefill_size, TRT-LLM max_num_tokens; default: each engine's)");
  c.add_option("--kv-cache-dtype", a.kv_cache_dtypes,
               "KV-cache dtypes to try: auto (the checkpoint's: FP8 for FP8/NVFP4 ModelOpt checkpoints, else BF16), "
               "bf16, fp8; comma-separated (default auto)");
  c.add_option("--prefix-caching", a.prefix_caching,
               "Prefix caching to try: on, off or on,off (default: the engine's, vLLM: on, off for hybrid Mamba models); "
               "it matters with --shared-prefix-tokens");
  c.add_option("--shared-prefix-tokens", a.shared_prefix_tokens,
               "Tokens every prompt starts with (a system prompt, tool definitions; at most --isl): what prefix caching can save")
      ->check(CLI::Range(std::int64_t{0}, std::int64_t{1} << 30));
  c.add_option("--gpu-memory-utilization", a.gpu_memory_utilization,
               "vLLM gpu_memory_utilization, SGLang mem_fraction_static, TRT-LLM free_gpu_memory_fraction (default: each engine's)");
  c.add_option("--engine", a.engines,
               "Engine profiles to rank across, comma-separated: vllm, sglang, trtllm or releases (servesim list engines; default vllm)");
  c.add_option("--isl", a.isl, "Input text tokens per request");
  c.add_option("--osl", a.osl, "Output tokens per request");
  c.add_option("--images", a.images, "Images per request: WIDTHxHEIGHT[:COUNT],... (vision models)");
  c.add_option("--image-fraction", a.image_fraction,
               "Share of requests that carry --images (default 1: every request), chosen per request from the seed");
  c.add_option("--concurrency", a.concurrency, "Clients per decode-carrying worker to sweep (default 1,2,4,...,128)");
  c.add_option("--requests", a.requests, "Measured requests per point (default: until TTFT and ITL are precise, max(1000, 8 x clients) at most, after a steady warm-up)");
  c.add_option("--seed", a.seed, "Random seed")->check(int64_range());
  c.add_option("--router", a.router, "round_robin, least_outstanding or least_kv_load");
  c.add_option("--ttft-ms", a.ttft_ms, "SLO on time to first token (ms)");
  c.add_option("--itl-ms", a.itl_ms, "SLO on inter-token latency (ms)");
  c.add_option("--gap-ms", a.gap_ms, gap_ms_help());
  c.add_option("--num-speculative-tokens", a.num_speculative_tokens,
               "MTP draft tokens a decode step to try, comma-separated (default 0: off; models with MTP layers), e.g. 0,1,3");
  c.add_option("--mtp-acceptance", a.mtp_acceptance,
               "MTP acceptance: one rate or one per draft position (default 0.7), for the candidates that draft");
  c.add_option("--statistic", a.statistic, "Statistic the SLO applies to: p50, p90 (default) or p99");
  // NaN stands for "not given" in SearchArgs: a NaN given on the command line is refused here.
  static const CLI::Validator finite(
      [](std::string& v) -> std::string {
        char* end = nullptr;
        const double x = std::strtod(v.c_str(), &end);
        return std::isfinite(x) ? "" : "must be a finite number, got " + v;
      },
      "NUMBER");
  c.add_option("--total-gpus", a.total_gpus, "Objective: the most output tok/s from at most N GPUs")->check(finite);
  c.add_option("--target-tps", a.target_tps, "Objective: the cheapest deployment serving X output tok/s")->check(finite);
  c.add_option("--target-rps", a.target_rps, "Objective: the cheapest deployment serving R requests/s (x OSL tok/s)")->check(finite);
  c.add_option("--headroom", a.headroom, headroom_help());
  c.add_option("--calibration", a.calibration,
               "A calibration profile (servesim calibrate e2e --output): applied to the candidates on the GPU and engine build it "
               "was fitted on (without --engine the search runs that build), with bands from its cross-validated residuals; "
               "candidates on other GPUs run uncalibrated")
      ->check(profile_file());
  c.add_option("--arrival", a.arrival,
               "Open-loop search: poisson, gamma or constant arrivals at --target-rps; each candidate gets the fewest copies "
               "that meet both SLOs at that rate (default: closed loop over --concurrency)");
  c.add_option("--burstiness", a.burstiness, "Gamma arrivals' shape (1 = Poisson, 0.25 = CV 2)");
  add_threads_option(c, a.threads);
}

namespace {
// The options `search` and `recommend` share beyond the search arguments; `output` and `emit` are
// the command's own help texts.
void add_run_options(CLI::App& c, SearchOpts& o, const char* output, const char* plot, const char* emit) {
  add_search_options(c, o.args);
  c.add_flag("--no-prune", o.no_prune, "Simulate every configuration that fits (no analytic pruning)");
  c.add_flag("--no-expert-parallel", o.no_ep, "MoE models: only TP-sharded experts (no EP = TP variants)");
  c.add_flag("--same-gpu", o.same_gpu, "Disaggregated: prefill and decode on the same GPU type only");
  // An empty name would read as "not given" and silently write nothing.
  static const CLI::Validator named([](std::string& v) { return v.empty() ? std::string("give a file or folder name") : ""; }, "PATH");
  c.add_option("--output", o.output, output)->check(named);
  c.add_option("--plot", o.plot, plot)->check(named);
  c.add_option("--emit", o.emit, emit)->check(named);
  c.add_option_function<std::string>("--dask", [&o](const std::string& v) { o.dask = v, o.dask_given = true; }, "Simulate the candidates on the Dask cluster whose scheduler is at ADDRESS (e.g. tcp://10.0.0.5:8786); "
                                 "same result as the local run");
  c.add_option("--dask-timeout", o.dask_timeout_s, "Seconds to wait for the Dask scheduler before giving up (default 10)")
      ->check(CLI::Range(0.1, 3600.0));
  add_format_option(c, o.format);
  add_quiet_flag(c, o.quiet);
}
}  // namespace

void add_search_command(CLI::App& app) {
  auto o = std::make_shared<SearchOpts>();
  auto* c = app.add_subcommand("search", "Search GPUs, precisions, parallel layouts, agg/disagg splits and engine knobs: "
                                         "Pareto frontiers and the best configuration under TTFT/ITL SLOs");
  add_run_options(*c, *o, "Write the result: FILE.csv (one row per configuration) or FILE.json",
                  "Write the Pareto chart (SLO marked) to FILE.png",
                  "Write the best configuration's deployment files (vllm serve, Dynamo manifest, aiperf sweep, NCCL check) to DIR");
  c->callback([o] { run_search(*o); });
}

void add_recommend_command(CLI::App& app) {
  auto o = std::make_shared<SearchOpts>();
  auto* c = app.add_subcommand("recommend", "Pre-purchase table: for a load target and SLOs, the cheapest deployment per GPU "
                                            "type and instance ($/hour, $ per million output tokens, power, latency headroom, spare capacity)");
  add_run_options(*c, *o, "Write the table: FILE.csv or FILE.json (the whole result)",
                  "Write the Pareto chart (SLO marked) to FILE.png and the $/hour of the cheapest deployment per GPU type to "
                  "FILE-cost.png (the chart for a manager)",
                  "Write the deployment files of the recommendation to DIR/recommended/ and of the cheapest deployment on each other GPU type to DIR/best-<instance>/, with DIR/index.json saying what each is");
  c->callback([o] { run_recommend(*o); });
}

}  // namespace servesim::cli
