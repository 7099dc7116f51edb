// `servesim calibrate e2e`: fit a few named physical parameters of one cluster (GPU and engine
// build) and model on the user's own measured serving points, with priors from the shipped
// calibration and regularisation toward them, and write a calibration profile (sim/calibration.hpp).
//
// The fit is a robust (soft L1) weighted least squares in log space: every point's TTFT and TPOT
// residual ln(predicted / measured) over what one point may miss by (TTFT 20 %, TPOT 8 %: reruns'
// repeatability and what no parameter absorbs), plus each parameter's distance from its prior over
// the prior's width (kernel factors 20 %, host terms 30 % or 10 ms). Few
// points move the parameters little; many move them more. Gauss-Newton with numeric derivatives
// (each evaluation simulates every point); the uncertainty is the inverse Hessian's diagonal.
#pragma once
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "sim/calibration.hpp"
#include "sim/validate/validate.hpp"

namespace servesim::sim::validate {

// The setup of measured points whose files do not carry it (vllm bench serve / SGLang bench_serving
// results): flags or a servesim_run.json sidecar beside the file.
struct BenchSetup {
  std::string model, gpu, precision, engine;   // engine: a profile name (vllm-0.19, sglang-0.5, ...)
  int tp = 0, pp = 1;
  // From a servesim_run.json beside the file: its "engine" knobs (max_num_seqs, num_speculative_tokens,
  // ...) and kv_cache_dtype, as a scenario file names them; the run is simulated with them.
  nlohmann::json engine_knobs;
  std::string kv_cache_dtype;
  // Its "isl" / "osl" when the lengths the run's dataset drew are not in the result (vLLM's random
  // dataset with --random-range-ratio records none): a number or a scenario's length distribution.
  nlohmann::json isl_lengths, osl_lengths;
};

// Measured runs one calibration takes: the fit simulates every run about 40 times (Gauss-Newton steps
// over each cross-validation fold), about 0.25 s of CPU per run on one core for a 1k-token Llama 8B
// point, so 1,000 runs are minutes; a sweep of an aiperf or bench script is tens.
inline constexpr std::size_t kMaxCalibrationRuns = 1000;

// `vllm bench serve --save-result` JSON (mean_ttft_ms, mean_tpot_ms / mean_itl_ms, output_throughput,
// max_concurrency or request_rate, total_input_tokens / total_output_tokens / completed) or SGLang
// bench_serving JSONL (one such record per line). Refuses, with the file and field, a record without a
// concurrency or rate, without lengths, or whose setup (model, GPU, TP) is unknown.
std::vector<MeasuredPoint> read_bench_results(const std::string& path, const BenchSetup& flags);

// Any input calibrate e2e takes: a silicon-sample CSV, an aiperf artefact folder (or a folder of
// them), a vllm bench JSON or an SGLang JSONL.
std::vector<MeasuredPoint> read_measured(const std::string& path, const BenchSetup& flags, const std::string& statistic = "avg",
                                         CsvReadStats* csv = nullptr);

struct E2eOptions {
  int folds = 5;                         // k-fold cross-validation (at most one fold per point)
  int iterations = 4;                    // Gauss-Newton steps of the final fit (folds take one fewer)
  std::vector<std::string> only;         // parameters to fit (empty: every one the points can inform)
  // In (0, 1): fit on a random share of the points only and report the error of the others, before
  // and after (the "measure a few, predict the rest" check); 0: fit on all.
  double train_fraction = 0;
  // Where the fit of 12 points or more does not pass the gate in both metrics, try it shrunk toward
  // the priors (shrink_weight) at strengths 2, 4, 8 and 16, and apply the weakest whose nested folds
  // pass, before the gate's keep-or-take per metric. On by default (--no-shrink: the gate alone).
  bool shrink = true;
};

// The share of its fitted distance from the prior a parameter keeps at shrinkage `strength` c, given
// the points' curvature h and the prior's p (the diagonal of the fit's J'J, data rows and prior rows):
// the posterior mean with the likelihood counted 1 / c as much, (h + p) / (h + c p). 1 at c = 1; h = 0
// (points that do not inform it): 1 / c; h = p at c = 4: 0.4.
double shrink_weight(double h, double p, double strength);

struct E2eResult {
  CalibrationProfile profile;
  nlohmann::json report;                 // parameters, cross-validation before / after, points
  std::string text;
};

// Fits and cross-validates. Every point must be modellable and on one GPU and one engine (Error,
// naming the point, otherwise).
E2eResult calibrate_e2e(const std::vector<MeasuredPoint>& points, const Options& o, const E2eOptions& e);

}  // namespace servesim::sim::validate
