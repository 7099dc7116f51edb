// A simulation scenario: model, GPU, parallelism, precision, vLLM engine knobs by their vLLM
// names, router, workload and seed, read from JSON and validated at the edge (errors name the
// file and the field). The CLI's flags build the same JSON, so there is one path to validate.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "hwmodels/catalog.hpp"
#include "models/model_spec.hpp"
#include "sim/engine/engine_config.hpp"
#include "sim/router/router.hpp"
#include "workloads/workload.hpp"

namespace servesim::sim {

struct CalibrationProfile;

// Optional "topology" object: the run as a deployment on instances (sim/topology/deployment.hpp)
// instead of `gpus` / (tp × pp) aggregated replicas.
struct TopologySpec {
  bool present = false;
  bool disaggregated = false;              // "kind": "agg" | "disagg"
  std::string instance;                    // "" = the first catalogue instance of `gpu`
  int nodes = 0;                           // 0 = the fewest that hold the workers
  int replicas = 0;                        // aggregated: 0 = as many as the nodes hold
  int prefill_workers = 1, decode_workers = 1, encode_workers = 0;
  int prefill_tp = 0, decode_tp = 0, encode_tp = 0;   // 0 = tensor_parallel_size
  // Attention data-parallel ranks of a prefill / decode worker (0 = data_parallel_size) and its
  // expert parallelism (0 = the scenario's: EP on spans the role's TP x DP GPUs; else 1 or TP x DP).
  int prefill_dp = 0, decode_dp = 0, prefill_ep = 0, decode_ep = 0;
  // Roles on other GPU types: an instance name, or a GPU name (its first catalogue instance).
  std::string prefill_instance, decode_instance, prefill_gpu, decode_gpu;
  int prefill_nodes = 0, decode_nodes = 0;           // 0 = the fewest that hold the role
};

struct Scenario {
  std::string source = "scenario";         // file (or "--flags") named in errors
  std::string model = "nemotron-3-super";   // catalogue name (the model file's name when model_file is set)
  std::string model_file;                  // a servesim model JSON or HF config.json, resolved against the scenario's folder
  std::string gpu = "h200";
  int gpus = 8;                            // whole cluster: replicas = gpus / (tp × pp)
  models::Parallelism par{8, 1, 1};
  hw::Precision precision = hw::Precision::fp8;
  hw::Precision kv_cache_dtype = hw::Precision::fp8;   // "auto": the checkpoint's (models::resolve_kv_cache_dtype)
  bool kv_cache_dtype_auto = true;         // "auto" (or absent): the engine's rule applies (kv_cache_dtype_of)
  EngineConfig engine;                     // knobs the scenario gives; prepare() fills the rest from the profile
  std::string engine_profile = "vllm";     // "engine_profile": vllm (newest), vllm-0.12, ...
  nlohmann::json frontend_json;            // "frontend" object (null: the profile's priors)
  nlohmann::json kv_offload_json;          // "kv_offload" object (null: no offload tiers; sim/kv_offload_setup.hpp)
  RouterPolicy router = RouterPolicy::round_robin;
  KvRouterConfig kv_router;                // "router": {"kind": "kv", ...}
  std::uint64_t seed = 0;                  // overrides the workload's seed
  workloads::WorkloadConfig workload;
  TopologySpec topology;
  // A user's calibration (sim/calibration.hpp), applied where it transfers (resolved_engine / _frontend).
  std::shared_ptr<const CalibrationProfile> calibration;
  nlohmann::json json;                     // the scenario as read (echoed in outputs)

  int gpus_per_replica() const { return par.gpus(); }
  int replicas() const { return gpus / gpus_per_replica(); }
};

// Parses and validates the scenario JSON text. `file` names it in errors; relative paths in the
// workload (traces, schedules) resolve against its folder.
// The layout of a disaggregated role: the scenario's, with the role's own TP, DP and EP where the
// topology gives them (0 = the scenario's). EP on (the role's or the scenario's) spans the role's
// TP x DP GPUs: one MoE group per worker.
models::Parallelism role_parallelism(const Scenario& s, int tp, int dp, int ep);

Scenario parse_scenario(std::string_view json_text, const std::string& file);
// The scenario's model: its model file's, else the catalogue's by name (throws Error when unknown).
const models::ModelSpec& scenario_model(const Scenario& s);
// An "engine" object of knobs as a scenario file names them (fields, ranges), checked alone: Error
// naming `file` and the field (a bench result's servesim_run.json).
void check_engine_knobs(const nlohmann::json& engine, const std::string& file);
Scenario load_scenario(const std::string& path);
// The JSON of a file; every parse failure (syntax, numbers out of range) as servesim::Error.
nlohmann::json read_scenario_file(const std::string& path);
// The embedded default (sim/data/default_scenario.json) as JSON, for flags to override.
nlohmann::json default_scenario_json();
// Field names a scenario accepts at the top level and under "engine".
const std::vector<std::string>& scenario_keys();
const std::vector<std::string>& engine_keys();
const std::vector<std::string>& topology_keys();

}  // namespace servesim::sim
