// A simulation scenario: model, GPU, parallelism, precision, vLLM engine knobs by their vLLM
// names, router, workload and seed, read from JSON and validated at the edge (errors name the
// file and the field). The CLI's flags build the same JSON, so there is one path to validate.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "hwmodels/catalog.hpp"
#include "models/model_spec.hpp"
#include "sim/engine/engine_config.hpp"
#include "sim/router/router.hpp"
#include "workloads/workload.hpp"

namespace servesim::sim {

struct Scenario {
  std::string source = "scenario";         // file (or "--flags") named in errors
  std::string model = "nemotron-3-super";
  std::string gpu = "h200";
  int gpus = 8;                            // whole cluster: replicas = gpus / (tp × pp)
  models::Parallelism par{8, 1, 1};
  hw::Precision precision = hw::Precision::fp8;
  hw::Precision kv_cache_dtype = hw::Precision::bf16;
  EngineConfig engine;
  RouterPolicy router = RouterPolicy::round_robin;
  std::uint64_t seed = 0;                  // overrides the workload's seed
  workloads::WorkloadConfig workload;
  nlohmann::json json;                     // the scenario as read (echoed in outputs)

  int gpus_per_replica() const { return par.tp * par.pp; }
  int replicas() const { return gpus / gpus_per_replica(); }
};

// Parses and validates the scenario JSON text. `file` names it in errors; relative paths in the
// workload (traces, schedules) resolve against its folder.
Scenario parse_scenario(std::string_view json_text, const std::string& file);
Scenario load_scenario(const std::string& path);
// The JSON of a file; every parse failure (syntax, numbers out of range) as servesim::Error.
nlohmann::json read_scenario_file(const std::string& path);
// The embedded default (sim/data/default_scenario.json) as JSON, for flags to override.
nlohmann::json default_scenario_json();
// Field names a scenario accepts at the top level and under "engine".
const std::vector<std::string>& scenario_keys();
const std::vector<std::string>& engine_keys();

}  // namespace servesim::sim
