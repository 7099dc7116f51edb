// A user's calibration: what `servesim calibrate e2e` learned from their own measured runs about
// their cluster, engine build and model, as a few named physical parameters (kernel-family time
// factors, host costs, the closed-loop spread), each with its prior, fitted value and uncertainty,
// and the cross-validated residuals its bands come from. A scenario names one ("calibration": FILE
// or an object; --calibration FILE); a run applies the parts that transfer to it and says which.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "hwmodels/scaled_kernel_model.hpp"
#include "sim/engine/engine_config.hpp"
#include "sim/validate/bands.hpp"

namespace servesim::sim {

// What a profile's parameter may hold: a factor in [kMinFactor, kMaxFactor], a time in [0, kMaxMs] ms.
constexpr double kMinFactor = 0.05, kMaxFactor = 20, kMaxMs = 10000;

struct CalibratedParameter {
  std::string name;         // gemm_scale, moe_scale, attention_scale, communication_scale, prefill_scale,
                            // decode_scale, decode_attention_scale, custom_allreduce_scale, mixer_scale, step_cpu_factor, step_gpu_ms,
                            // forward_floor_ms, step_overhead_factor, request_overhead_ms, request_latency_ms,
                            // first_token_floor_ms, spread_factor, handoff_scale
  double prior = 0, value = 0, sd = 0;   // sd: one standard deviation of the fitted value
  std::string unit;         // "x" (a factor) or "ms"
  std::string scope;        // what it transfers to: "gpu+engine" (this GPU, its node, this engine build)
};

struct CalibrationProfile {
  std::string file;                            // where it was read ("" inline)
  std::string gpu, engine, engine_profile, model;   // what it was fitted on (catalogue names, lower case)
  // The weight precisions of the points it was fitted on (bf16, fp8, fp8_block, nvfp4, ...; sorted);
  // empty in a profile written before it was recorded (then no precision check is made).
  std::vector<std::string> precisions;
  // The engine releases its points name (backend_version: "0.18.0", "1.2.0rc6.post2"; sorted), where
  // one engine profile serves several; empty where no point names one.
  std::vector<std::string> releases;
  int points = 0;                              // measured points it was fitted on
  std::vector<CalibratedParameter> parameters;
  hw::KernelScales kernels;                    // from the *_scale parameters
  double step_cpu_factor = 1;                  // on the profile's engine-core time per step (fixed part)
  double step_overhead_factor = 1;             // on the profile's engine-core time per scheduled request
  double step_gpu_ms = 0;                      // GPU-side time added to every step's forward
  double forward_floor_ms = 0;                 // the shortest a step's forward takes (kernels issued from the host)
  double request_overhead_ms = 0;              // added to the API server's time per request (serial: queues)
  double request_latency_ms = 0;               // latency per request the client sees and the engine does not (no queue)
  double first_token_floor_ms = 0;             // the shortest first token the client sees: TTFT = max(simulated, floor)
  double spread_factor = 1;                    // on the profile's closed-loop answer-length spread
  double handoff_scale = 1;                    // on the profile's disaggregated handoff (framework path and KV pull per token)
  nlohmann::json cross_validation;             // k-fold error before / after per metric
  validate::BandTable bands;                   // from the cross-validated residuals
  const CalibratedParameter* parameter(const std::string& name) const;
};

// The profile's JSON layout (what calibrate e2e writes) and back; errors name `file` and the field.
CalibrationProfile parse_calibration(const nlohmann::json& j, const std::string& file);
// The parameters a profile may carry, comma-separated (for messages).
std::string calibration_parameter_names();
nlohmann::json to_json(const CalibrationProfile& p);
CalibrationProfile load_calibration(const std::string& path);
// " (measured: release 0.18.0)" / " (measured: releases 0.17.0, 0.18.0)": the releases a profile's
// points name, for its headers; "" where none does.
std::string measured_releases(const CalibrationProfile& p);

// What of a profile applies to a run of `model` in `precision` on `gpu` under the engine profile
// `engine_profile` (vllm-0.19, sglang-0.5, ...): every parameter on the GPU and engine build it was
// fitted on (any model), none elsewhere; in a weight precision it was not fitted on, not the factors
// of the GEMM and MoE kernels that precision picks (gemm_scale, moe_scale, prefill_scale,
// decode_scale: a build's FP8 GEMMs against the FP8 tables say nothing of its BF16 or NVFP4 ones);
// `summary` says what applied, what was left out and why. "" (precision or model): not checked. A
// scenario that names a calibration and no engine profile runs the calibration's.
struct AppliedCalibration {
  bool any = false;
  hw::KernelScales kernels;
  double step_cpu_factor = 1, step_overhead_factor = 1, step_gpu_ms = 0, forward_floor_ms = 0, request_overhead_ms = 0,
         request_latency_ms = 0, first_token_floor_ms = 0, spread_factor = 1, handoff_scale = 1;
  bool bands = false;                          // the profile's bands stand for this run's predictions
  std::vector<std::string> applied, dropped;   // parameter names
  std::string summary;                         // one line for a report's header
  std::string head, what;                      // its two parts: "calibration FILE (fitted on ...)" and what applies
};
AppliedCalibration applicable(const CalibrationProfile& p, const std::string& gpu, const std::string& engine_profile,
                              const std::string& model, const std::string& precision);
// The engine-side parts of an applied calibration on an engine configuration: the kernel factors,
// the host's time per step and per request, the GPU's added time per step, the forward's floor and
// the closed loop's spread.
void apply_to_engine(const AppliedCalibration& a, EngineConfig& e);
// Whether a parameter is a factor on the kernels a weight precision picks (left out in another precision).
bool precision_bound(const std::string& parameter);
nlohmann::json to_json(const AppliedCalibration& a, const CalibrationProfile& p);

}  // namespace servesim::sim
