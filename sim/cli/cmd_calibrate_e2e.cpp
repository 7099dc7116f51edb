// `servesim calibrate e2e INPUT... --output PROFILE.json`: fit a calibration profile on a user's own
// measured serving runs (sim/validate/calibrate_e2e.hpp) and write it for --calibration.
#include <filesystem>
#include <memory>

#include "common/error.hpp"
#include "common/files.hpp"
#include "common/text.hpp"
#include "models/model_spec.hpp"
#include "sim/cli/commands.hpp"
#include "sim/validate/calibrate_e2e.hpp"

#include "sim/api/api.hpp"

namespace servesim::cli {

void add_calibrate_e2e_command(CLI::App& calibrate) {
  struct Opts {
    std::vector<std::string> inputs, model_files;
    std::string output, parameters, harness = "aic";
    sim::validate::BenchSetup setup;
    int folds = 5, threads = 0;
    double train_fraction = 0;
    bool shrink = false, no_shrink = false;
    std::uint64_t seed = 1;
    Format format = Format::table;
  };
  auto o = std::make_shared<Opts>();
  auto* c = calibrate.add_subcommand(
      "e2e", "Fit servesim to your own measured serving runs (aiperf folders, vllm bench serve JSON, SGLang bench_serving "
             "JSONL, silicon-sample CSV): kernel-family time factors of this GPU and engine build, host costs, the "
             "closed-loop spread, each with its prior and uncertainty, and the cross-validated error before and after");
  c->add_option("inputs", o->inputs, "Measured runs: aiperf artefact folders, *.json (vllm bench serve --save-result), *.jsonl "
                                     "(SGLang bench_serving), *.csv (silicon-sample rows)")
      ->required();
  c->add_option("--output", o->output, "Write the calibration profile to FILE.json (for --calibration)")->required();
  c->add_option("--model", o->setup.model, "Model of bench results that do not name it (servesim list models)");
  c->add_option("--model-file", o->model_files, "Add a model (servesim model JSON or HF config.json) before resolving names");
  c->add_option("--gpu", o->setup.gpu, "GPU of bench results (servesim list gpus)");
  c->add_option("--tp", o->setup.tp, "Tensor parallel size of bench results");
  c->add_option("--precision", o->setup.precision, "Weight precision of bench results (bf16, fp8, fp8_block, nvfp4, ...)");
  c->add_option("--engine", o->setup.engine, "Engine profile of bench results (vllm-0.19, sglang-0.5, ...; default: the server an SGLang bench_serving record names in backend, else vllm)");
  c->add_option("--parameters", o->parameters,
                "Fit only these (comma-separated): " + sim::calibration_parameter_names() +
                    " (default: every one the points inform (moe_scale on MoE models, mixer_scale on Mamba / linear-attention hybrids whose mixers this GPU's tables do not time, communication_scale with TP > 1) but request_overhead_ms, request_latency_ms, decode_attention_scale and handoff_scale (custom_allreduce_scale only on vLLM Hopper points spanning TP <= 2 and >= 4); spread_factor chosen from a grid from 12 points on)")
      // An empty list would read as "not given", i.e. silently as the default set.
      ->check(CLI::Validator([](std::string& v) { return v.find_first_not_of(" \t,") == std::string::npos ? "give at least one parameter name" : ""; }, "NAMES"));
  c->add_option("--folds", o->folds, "Cross-validation folds (default 5; at most one per point)")->check(CLI::Range(1, 50));
  c->add_option("--train-fraction", o->train_fraction,
                "Fit on a random share of the points (e.g. 0.33) and report the error of the others before and after");
  auto* no_shrink = c->add_flag(
      "--no-shrink", o->no_shrink,
      "Leave a fit that does not pass the cross-validation gate to the gate alone (per metric: applied or the priors). By default a "
      "fit of 12 points or more that does not pass it in both TTFT and TPOT is tried shrunk toward the priors (each parameter by "
      "a weight from its points' curvature against its prior's) at strengths 2, 4, 8 and 16, and the weakest that passes applies");
  c->add_flag("--shrink", o->shrink, "The default (shrinkage where the fit does not pass the gate); kept for scripts that name it")
      ->excludes(no_shrink);
  c->add_option("--harness", o->harness, "Engine flags of CSV points: aic (default) or serve (as validate)");
  add_threads_option(*c, o->threads);
  c->add_option("--seed", o->seed, "Random seed of every run and of the fold split");
  add_format_option(*c, o->format);
  c->callback([o] {
    namespace v = sim::validate;
    check_writable_target(o->output, "--output");
    for (const auto& f : o->model_files) models::load_model_file(f);   // read now: a bad file fails before the run
    std::vector<v::MeasuredPoint> pts;
    for (const auto& in : o->inputs) {
      auto p = v::read_measured(in, o->setup);
      pts.insert(pts.end(), std::make_move_iterator(p.begin()), std::make_move_iterator(p.end()));
    }
    v::Options opt;
    opt.model_files = o->model_files;
    opt.threads = o->threads;
    opt.seed = o->seed;
    opt.harness = text::lower(o->harness);
    if (opt.harness != "aic" && opt.harness != "serve") throw Error("--harness", "", "unknown '" + o->harness + "'; known: aic, serve");
    v::E2eOptions e;
    e.folds = o->folds;
    e.only = api::option_list(o->parameters, "--parameters");
    e.train_fraction = o->train_fraction;
    e.shrink = !o->no_shrink;
    const v::E2eResult r = v::calibrate_e2e(pts, opt, e);
    sim::CalibrationProfile prof = r.profile;
    prof.file = std::filesystem::path(o->output).filename().string();
    write_file_atomic(o->output, to_json(prof).dump(2) + "\n");
    nlohmann::json j = r.report;
    j["output"] = o->output;
    emit(o->format, j, r.text + "Profile: " + o->output + " (use it with --calibration " + o->output + ")\n");
  });
}

}  // namespace servesim::cli
