// `servesim validate FILE|DIR`: predictions against measured serving runs (sim/validate/):
// a silicon-sample CSV, an aiperf artefact folder, or a folder of them. Prints the error table,
// writes every point to --output (.csv or .json), draws predicted vs measured with --plot
// through python/servesim.
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <memory>
#include <optional>
#include <sstream>

#include <boost/process.hpp>

#include "common/error.hpp"
#include "common/json_reader.hpp"
#include "common/files.hpp"
#include "common/text.hpp"
#include "models/model_spec.hpp"
#include "sim/cli/commands.hpp"
#include "sim/cli/plot_runner.hpp"
#include "sim/calibration.hpp"
#include "sim/validate/calibrate_e2e.hpp"
#include "sim/validate/transfer.hpp"
#include "sim/validate/validate.hpp"

#include "sim/api/api.hpp"

namespace servesim::cli {
namespace {

struct ValidateOpts {
  std::string path, scenario, output, plot, statistic = "avg", write_bands, harness = "aic", calibration;
  int band_min_points = 8;
  double osl_spread_pct = 0;
  std::string backends, modes, gpus, models;
  std::vector<std::string> model_files;
  bool engine_any = false, lock_fraction = false, leave_one_model_out = false, leave_one_release_out = false;
  bool no_resent_prompts = false;
  int requests_per_client = 10, warmup_per_client = 2, threads = 0, seeds = 1;
  std::int64_t seed = 1;
  Format format = Format::table;
};

bool ends_with_ci(const std::string& s, const char* ext) {
  const std::string l = text::lower(s), e = ext;
  return l.size() > e.size() && l.compare(l.size() - e.size(), e.size(), e) == 0;
}


// The source tree's commit (git describe), or "unknown" when the binary runs away from its tree.
// git runs through Boost.Process with an argument vector: no shell parses the path.
std::string source_commit() {
#ifdef SERVESIM_SOURCE_DIR
  namespace bp = boost::process;
  try {
    std::string git;   // first "git" on PATH
    std::stringstream dirs(std::getenv("PATH") ? std::getenv("PATH") : "");
    for (std::string d; git.empty() && std::getline(dirs, d, ':');)
      if (!d.empty() && ::access((d + "/git").c_str(), X_OK) == 0) git = d + "/git";
    if (git.empty()) return "unknown";
    bp::ipstream out;
    bp::child c(bp::exe = git, bp::args = std::vector<std::string>{"-C", SERVESIM_SOURCE_DIR, "describe", "--always", "--dirty", "--abbrev=12"},
                bp::std_in < bp::null, bp::std_out > out, bp::std_err > bp::null);
    std::string s;
    std::getline(out, s);
    c.wait();
    while (!s.empty() && (s.back() == '\n' || s.back() == '\r')) s.pop_back();
    if (c.exit_code() == 0 && !s.empty()) return s;
  } catch (const std::exception&) {   // git missing or cannot start: the commit is unknown
  }
#endif
  return "unknown";
}

void run_validate(const ValidateOpts& o) {
  namespace fs = std::filesystem;
  namespace v = sim::validate;
  v::Options opt;
  opt.backends = api::option_list(o.backends, "--backend");
  opt.modes = api::option_list(o.modes, "--mode");
  opt.gpus = api::option_list(o.gpus, "--gpu");
  opt.models = api::option_list(o.models, "--model");
  opt.engine_any = o.engine_any;
  opt.lock_fraction = o.lock_fraction;
  opt.requests_per_client = o.requests_per_client;
  opt.warmup_per_client = o.warmup_per_client;
  opt.statistic = text::lower(o.statistic);
  opt.threads = o.threads;
  if (o.seed < 0) throw Error("--seed", "", "must be >= 0, got " + std::to_string(o.seed));
  opt.seed = static_cast<std::uint64_t>(o.seed);
  opt.harness = text::lower(o.harness);
  opt.infer_resent_prompts = !o.no_resent_prompts;
  opt.osl_spread_pct = o.osl_spread_pct;
  if (!std::isfinite(opt.osl_spread_pct) || opt.osl_spread_pct < 0 || opt.osl_spread_pct > 50)
    throw Error("--osl-spread", "", "must be a percentage from 0 to 50");
  if (opt.harness != "aic" && opt.harness != "serve") throw Error("--harness", "", "unknown '" + o.harness + "'; known: aic, serve");
  if (opt.requests_per_client < 1) throw Error("--requests-per-client", "", "must be >= 1");
  if (opt.warmup_per_client < 0) throw Error("--warmup-per-client", "", "must be >= 0");
  if (opt.statistic != "avg" && opt.statistic != "p50") throw Error("--statistic", "", "unknown '" + o.statistic + "'; known: avg, p50");
  if (!o.scenario.empty()) {
    opt.base = read_json_file(o.scenario);
    if (!opt.base.is_object()) throw Error(o.scenario, "", "expected a JSON object (a scenario file)");
  }
  v::check_base_scenario(opt, o.scenario.empty() ? "--seed" : o.scenario);
  // Flag ranges and output paths before the run, so a bad one does not waste it.
  if (o.seeds < 1 || o.seeds > 100) throw Error("--seeds", "", "must be 1..100 runs");
  if (!o.write_bands.empty() && o.band_min_points < 1) throw Error("--band-min-points", "", "must be >= 1");
  if (!o.output.empty()) {
    if (!ends_with_ci(o.output, ".csv") && !ends_with_ci(o.output, ".json"))
      throw Error("--output", "", "'" + o.output + "': give a .csv or .json file");
    check_writable_target(o.output, "--output");
  }
  if (!o.plot.empty()) check_writable_target(o.plot, "--plot");
  if (!o.write_bands.empty()) check_writable_target(o.write_bands, "--write-bands");
  for (const auto& [flag, out] : {std::pair<const char*, std::string>{"--output", o.output}, {"--write-bands", o.write_bands}}) {
    std::error_code ec;
    if (!out.empty() && fs::equivalent(out, o.path, ec))
      throw Error(flag, "", out + " is the input; give another file");
  }

  if (!o.calibration.empty()) {
    if (!opt.base.is_object()) opt.base = nlohmann::json::object();
    opt.base["calibration"] = fs::absolute(o.calibration).string();
    (void)sim::load_calibration(o.calibration);   // a bad profile fails once, here
  }
  for (const auto& f : o.model_files) models::load_model_file(f);   // read now: a bad file fails before the run
  opt.model_files = o.model_files;
  memory_hint = "the input's points and their requests (--requests-per-client); split the input";
  if (o.leave_one_model_out && o.leave_one_release_out)
    throw Error("--leave-one-release-out", "", "give one of --leave-one-model-out and --leave-one-release-out");
  const bool transfer = o.leave_one_model_out || o.leave_one_release_out;
  if (transfer && (o.seeds > 1 || o.lock_fraction))
    throw Error(o.leave_one_model_out ? "--leave-one-model-out" : "--leave-one-release-out", "",
                "runs every point once per fitted-parameter combination; not combined with --seeds or --lock-fraction");
  v::CsvReadStats csv;
  // A benchmark client's results (vllm bench serve JSON, SGLang bench_serving JSONL) as calibrate e2e
  // reads them, their setup from a servesim_run.json beside them.
  std::vector<v::MeasuredPoint> points = v::read_measured(o.path, v::BenchSetup{}, opt.statistic, &csv);
  std::optional<v::TransferReport> tr;
  if (transfer) tr = v::leave_one_out(points, opt, o.leave_one_model_out ? v::GroupBy::model : v::GroupBy::release);
  v::Report rep = tr ? tr->out_of_fit : v::run(o.seeds > 1 ? points : std::move(points), opt);
  rep.csv = csv;
  nlohmann::json j = v::to_json(rep, opt);
  j["source"] = o.path;
  if (tr) j["transfer"] = v::to_json(*tr);
  std::string across;
  if (o.seeds > 1) {
    j["across_seeds"] = v::across_seeds(points, opt, o.seeds, j["by_gpu"]);
    across = v::across_seeds_text(j["across_seeds"]);
  }

  // --output, --plot (chart and data) and --write-bands appear together or not at all.
  AtomicFiles files;
  const auto dump = [](const nlohmann::json& x, int indent) { return x.dump(indent, ' ', false, nlohmann::json::error_handler_t::replace); };
  std::string extra;
  if (!o.output.empty()) {
    files.write(o.output, ends_with_ci(o.output, ".csv") ? v::to_csv(rep) : dump(j, 2) + "\n");
    extra += "Points: " + o.output + "\n";
  }
  if (!o.plot.empty()) {
    const std::string base = ends_with_ci(o.plot, ".png") ? o.plot.substr(0, o.plot.size() - 4) : o.plot;
    const std::string data = base + "-validate.json";
    const std::string tmp = files.write(data, dump(j, -1) + "\n");
    run_plotter({"--validation", tmp, "-o", files.reserve(o.plot)});   // argument vector: no shell parses a path
    j["plot"] = o.plot;
    extra += "Chart: " + o.plot + " (predicted vs measured, log-log, one colour per GPU); data: " + data + "\n";
  }
  if (!o.write_bands.empty()) {
    int ran = 0;
    for (const auto& p : rep.points) ran += p.unmodellable.empty();
    std::string filters;
    for (const auto& [flag, val] : {std::pair<const char*, std::string>{"--backend", o.backends}, {"--mode", o.modes},
                                    {"--gpu", o.gpus}, {"--model", o.models}})
      if (!val.empty()) filters += std::string(" ") + flag + " " + val;
    for (const auto& f : o.model_files) filters += " --model-file " + fs::path(f).filename().string();
    const std::string commit = source_commit();
    const std::string file = fs::path(o.path).filename().string();
    nlohmann::json meta = {
        {"summary", "residuals of " + std::to_string(ran) + " simulated points of " + file + filters + " (servesim " + commit + ")"},
        {"source_file", file},
        {"filters", filters.empty() ? "none" : filters.substr(1)},
        {"rows", rep.csv.rows},
        {"points", rep.points.size()},
        {"points_simulated", ran},
        {"statistic", opt.statistic},
        {"requests_per_client", opt.requests_per_client},
        {"warmup_per_client", opt.warmup_per_client},
        {"osl_spread_pct", opt.osl_spread_pct},
        {"servesim_commit", commit},
        {"method", "ratio measured / predicted per (GPU, agg or disagg, metric, load regime) and per (GPU, agg or disagg, "
                   "metric) over all loads; "
                   "band = prediction x [10th, 90th percentile] of the ratio; cells under min_points residuals give no band"},
        {"command", "servesim validate " + file + filters + " --write-bands FILE"}};
    if (tr) {
      meta["method"] = meta["method"].get<std::string>() + "; residuals out of fit: each " + v::to_string(tr->by) +
                       " predicted with the engine parameters refitted on every other " + v::to_string(tr->by) +
                       "; each model x GPU weighs 1 in a cell (its runs share one bias); a cell of fewer than " +
                       std::to_string(v::kBandMinModels) + " models gives way to the kind's cell of all loads, then the engine's cell of every GPU widened to the hull of it, "
                       "the kind's own cell of all loads and the engine's every-GPU cell of the load regime; "
                       "band percentiles: those of the table's `percentiles`";
      meta["command"] = "servesim validate " + file + filters + " --leave-one-" + v::to_string(tr->by) + "-out --write-bands FILE";
    }
    const auto table = tr ? v::transfer_bands(*tr, o.band_min_points, meta) : v::bands_of(rep, o.band_min_points, meta);
    files.write(o.write_bands, v::to_json(table).dump(2) + "\n");
    extra += "Bands: " + o.write_bands + " (" + std::to_string(table.cells.size()) + " cells from " + std::to_string(ran) +
             " points; embed it as sim/data/prediction_bands.json)\n";
  }
  files.commit();
  emit(o.format, j,
       "servesim validate " + o.path + "\n" + (tr ? v::to_text(*tr) + "\nOut of fit, every point:\n" : "") + v::to_text(rep, opt) +
           across + extra);
}

}  // namespace

void add_validate_command(CLI::App& app) {
  auto o = std::make_shared<ValidateOpts>();
  auto* c = app.add_subcommand("validate",
                               "Predictions against measured serving runs: a silicon-sample CSV or aiperf artefact folder(s); "
                               "signed and absolute % errors of TTFT, TPOT and output tok/s per model x GPU x engine x mode");
  c->add_option("path", o->path, "CSV (AIConfigurator silicon-sample layout) or aiperf artefact folder")->required();
  c->add_option("--backend", o->backends, "Engines to keep, comma-separated (vllm, trtllm, sglang; default all)");
  c->add_option("--mode", o->modes, "Modes to keep: agg, disagg (default both)");
  c->add_option("--gpu", o->gpus, "GPUs to keep, comma-separated (h100, h200, b200, ...)");
  c->add_option("--model", o->models, "Models to keep: substrings of model_path, comma-separated");
  c->add_option("--model-file", o->model_files,
                "Add a model (servesim model JSON or Hugging Face config.json, named by its file) before resolving model_path (repeatable)")
      ->check(CLI::ExistingFile);
  c->add_flag("--engine-any", o->engine_any, "Run trtllm/sglang points with servesim's vLLM engine instead of their own (sglang / trtllm profiles)");
  c->add_option("--scenario", o->scenario, "Scenario JSON whose engine, frontend, router, kv_cache_dtype, seed and workload.dataset apply to every CSV point")
      ->check(CLI::ExistingFile);
  c->add_option("--calibration", o->calibration,
                "A calibration profile (servesim calibrate e2e --output) applied to every point where it transfers")
      ->check(profile_file());
  c->add_option("--harness", o->harness,
                "Engine flags of CSV points: aic (default: AIConfigurator's generated vllm serve flags, e.g. "
                "max_num_batched_tokens = batch + ISL + 1500, and an FP8 KV cache for FP8 deployments on Blackwell) or serve (vllm "
                "serve's defaults)");
  c->add_flag("--no-resent-prompts", o->no_resent_prompts,
              "Under --harness aic, keep the generated flags for every vLLM point, also for a run set whose measured cycles are "
              "shorter than prefilling its prompts can take (by default such a set runs vllm serve's defaults with aiperf's "
              "100 re-sent prompts)");
  c->add_option("--requests-per-client", o->requests_per_client, "Measured requests per client (default 10: C x 10 per point)");
  c->add_option("--warmup-per-client", o->warmup_per_client, "Warm-up requests per client (default 2, as aiperf's C x 2)");
  c->add_option("--osl-spread", o->osl_spread_pct,
                "Normal spread of each CSV point's output length, % of its OSL, in place of the engine profile's "
                "closed-loop spread (default 0: the harness's fixed OSL, which the profile's spread then varies); "
                "shows where a run sits between the clients' lockstep and spread-out orbits");
  c->add_flag("--leave-one-model-out", o->leave_one_model_out,
              "Transfer error: refit the fitted engine parameters on every other model, predict each model with its refit, "
              "and report in-fit against out-of-fit errors per model (bands from --write-bands are then out of fit)");
  c->add_flag("--leave-one-release-out", o->leave_one_release_out,
              "The same, leaving out one engine release at a time");
  c->add_flag("--lock-fraction", o->lock_fraction,
              "Also run every closed-loop point with fixed answer lengths (the clients' train) and with a 200-token spread "
              "(spread out), and print where the measured and predicted TTFT sit between the two (3 runs a point)");
  c->add_option("--statistic", o->statistic, "Simulated statistic compared with the measurement: avg (default) or p50");
  c->add_option("--seed", o->seed, "Random seed of every run")->check(int64_range());
  c->add_option("--seeds", o->seeds,
                "Run every point at N seeds (--seed, --seed + 1, ...) and add the per-GPU median |error| of each metric at "
                "each seed, with their min / median / max; tables, --output, --plot and --write-bands stay the first seed's "
                "(default 1)");
  add_threads_option(*c, o->threads);
  c->add_option("--output", o->output, "Write every point (measured, predicted, errors, reasons) to FILE.csv or FILE.json");
  c->add_option("--plot", o->plot, "Write the predicted-vs-measured chart to FILE.png");
  c->add_option("--write-bands", o->write_bands,
                "Write the prediction-band table (residuals per GPU, metric, load regime) to FILE.json");
  c->add_option("--band-min-points", o->band_min_points, "Residuals a band cell needs (default 8)");
  add_format_option(*c, o->format);
  c->callback([o] { run_validate(*o); });
}

}  // namespace servesim::cli
