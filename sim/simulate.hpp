// Entry points: run one scenario, or a sweep of it over concurrency or request rate on a
// thread pool. Results are plain values, with a column-oriented view for Python/pandas.
#pragma once
#include <algorithm>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "models/memory.hpp"
#include "models/step_cost.hpp"
#include "sim/engine/cluster.hpp"
#include "sim/engine/worker.hpp"
#include "workloads/frontend.hpp"
#include "sim/metrics.hpp"
#include "sim/scenario.hpp"
#include "sim/session_metrics.hpp"
#include "sim/topology/disagg_cluster.hpp"

namespace servesim::sim {

class Deployment;

// What a scenario's shape resolves to, built once and shared read-only by every run of it:
// catalogue entries, the memory plan of one replica and its step-cost model.
struct Prepared {
  const models::ModelSpec* model = nullptr;
  const hw::GpuSpec* gpu = nullptr;
  models::MemoryPlan plan;
  std::shared_ptr<const models::StepCostModel> cost;
  EngineConfig engine;           // the profile's defaults applied; max_model_len and block_size resolved from the plan
  workloads::FrontendConfig frontend;   // client + API-server path (aggregated runs)
  OffloadConfig offload;                // KV offload tiers (aggregated runs without a topology)
  int replicas = 1;
  // With a "topology" object: the deployment every run uses (then plan/cost/replicas are unused).
  std::shared_ptr<const Deployment> deployment;
};
// Why tensor parallelism `tp` cannot split `m` (its attention, KV or Mamba heads), or "" where it can.
std::string tp_split_error(const models::ModelSpec& m, int tp);

// Looks the model and GPU up, checks the parallel shape against the model (heads divisible by
// TP, experts by EP) and plans memory; throws Error naming the scenario field at fault.
Prepared prepare(const Scenario& s);
// The scenario's engine knobs with its engine profile's defaults for this model and GPU filled in.
EngineConfig resolved_engine(const Scenario& s, const models::ModelSpec& m, const hw::GpuSpec& gpu);
// The run's KV cache dtype: the scenario's, or where it said "auto" the engine profile's rule for
// this model and GPU (EngineProfile::auto_kv_cache_dtype: SGLang keeps a DSA model's cache in BF16
// on Hopper and FP8 on Blackwell).
hw::Precision kv_cache_dtype_of(const Scenario& s, const models::ModelSpec& m, const hw::GpuSpec& gpu);
// The frontend: the profile's API-server priors, then the scenario's "frontend" object.
workloads::FrontendConfig resolved_frontend(const Scenario& s);

struct SimResult {
  MetricsCollector metrics;      // per-request records only when keep_records
  Summary summary;
  std::vector<WorkerStats> workers;
  double end_s = 0;              // simulated time at the last response
  std::uint64_t events = 0;      // events processed
  std::int64_t kv_blocks = 0;    // per replica (disaggregated: per decode worker) capacity
  models::MemoryPlan plan;       // per replica (disaggregated: a decode worker's)
  int gpus = 0;                  // GPUs the run used
  std::string deployment;        // with a "topology": workers, shapes and placement in one line
  bool disaggregated = false;
  TransferStats transfers;       // disaggregated: KV + Mamba-state handoffs (and embeddings)
  double wall_s = 0;             // host time the run took (not part of any result figure)
  EngineConfig engine;           // the engine knobs the run used (profile defaults applied)
  std::string calibration;       // the step-cost model's provenance (kernel tables)
  // Closed-loop cohorts: prefill tokens summed over steps, and those of requests that shared their
  // step with another request released by the same event (the same step end, or the start).
  std::int64_t prefill_tokens = 0, cohort_prefill_tokens = 0;
  double cohort_fraction() const { return prefill_tokens > 0 ? double(cohort_prefill_tokens) / double(prefill_tokens) : 0.0; }
  bool cohort_locked() const { return cohort_fraction() >= 0.5; }
  // Closed-loop train: measured prompts admitted, and those that waited while another prompt's
  // prefill ran; the prefill duty is the share of time the prefilling workers spent in steps
  // carrying prefill, i.e. how often a prompt arriving at a random time would meet one. A run is in the
  // train orbit (README, "Where the TTFT error comes from": each round's prompts queue one behind
  // another's prefill) when at least half the prompts waited and at least twice as many as chance.
  std::int64_t prompts = 0, prompts_behind_prefill = 0;
  double prefill_step_s = 0;     // summed over replicas
  std::int64_t prompt_tokens = 0, prompt_tokens_cached = 0;   // admitted prompts (warm-up included); prefix-cache hits
  double prefix_hit_fraction() const { return prompt_tokens > 0 ? double(prompt_tokens_cached) / double(prompt_tokens) : 0.0; }
  std::vector<TurnSummary> turns;   // multi-turn sessions: per turn index
  OffloadConfig offload;                       // the tiers the run had
  std::vector<OffloadTierStats> offload_stats; // per tier, summed over replicas
  // KV router: prompt blocks routed, and those it expected the chosen replica to hold.
  std::int64_t routed_blocks = 0, routed_overlap_blocks = 0;
  std::int64_t routed_offload_blocks = 0;      // the KV router expected these in the chosen replica's offload tiers
  double behind_prefill_fraction() const { return prompts > 0 ? double(prompts_behind_prefill) / double(prompts) : 0.0; }
  double prefill_duty() const {   // over the workers that prefill (a disaggregated decode worker does not)
    const auto n = std::count_if(workers.begin(), workers.end(), [](const WorkerStats& w) { return w.prefill_step_s > 0; });
    return end_s > 0 && n > 0 ? std::min(1.0, prefill_step_s / (end_s * double(n))) : 0.0;
  }
  bool prefill_train() const {
    return is_prefill_train(behind_prefill_fraction(), prefill_duty());
  }
};

// The aggregated replicas of a prepared scenario (no topology), as simulate() runs them.
ClusterShape cluster_shape(const Prepared& p, const Scenario& s, std::uint64_t seed);

// Runs the scenario's workload. keep_records keeps every request for --export's JSONL.
// progress(finished, total), if given, is called every 16384 finished requests (warm-up included).
using Progress = std::function<void(std::int64_t, std::int64_t)>;
SimResult simulate(const Scenario& s, bool keep_records = false, const Progress& progress = {});
SimResult simulate(const Prepared& p, const Scenario& s, const workloads::WorkloadConfig& w, bool keep_records = false,
                   const Progress& progress = {});
// The aiperf profile_export_aiperf.json document of a run, with the scenario as input_config;
// with a topology also "topology" and, disaggregated, "kv_transfer" statistics; and
// "prediction_band": the bands of its TTFT, ITL and output throughput (sim/validate/run_bands.hpp).
nlohmann::json aiperf_json(const Scenario& s, const SimResult& r);

// "What ran": the one block simulate, sweep, plan, search and recommend print (text header and
// JSON) so that every output names the resolved model, checkpoint and KV-cache precision, engine
// profile and knobs, memory plan at the run's context, and the calibration behind the step costs.
struct WhatRan {
  std::string model;
  std::string deployment;        // GPUs and shapes in one line
  const EngineConfig* engine = nullptr;
  const models::MemoryPlan* plan = nullptr;   // a replica's (disaggregated: a decode worker's)
  std::int64_t context_tokens = 0;            // prompt + answer of the run's traffic
  std::string calibration;
};
nlohmann::json what_ran_json(const WhatRan& w);
// The same as text lines ("ran: ..."), read back from the JSON so both say the same.
std::string what_ran_text(const nlohmann::json& j);
// " (hybrid: raised from R ...)" after a KV block size a hybrid model's page raised from the
// engine's R tokens (vLLM unifies the attention page with the Mamba state page); "" otherwise.
std::string hybrid_block_note(int requested_block_size, int block_size);
// A disaggregated run's mean TTFT in parts, ms (queue, prefill, handoff, reserve_wait, transfer,
// first_decode_step, and ttft, their sum), and the line simulate prints ("" without requests).
nlohmann::json ttft_parts_ms(const TtftParts& p);
std::string ttft_parts_text(const TtftParts& p);
// The block of one simulated scenario.
nlohmann::json what_ran_json(const Scenario& s, const SimResult& r);
// The same before a run: the scenario as prepared (a topology's decode worker's memory plan).
nlohmann::json what_ran_json(const Scenario& s, const Prepared& p);
nlohmann::json what_ran_json(const Scenario& s, const std::string& deployment, const EngineConfig& engine,
                             const models::MemoryPlan& plan, const std::string& calibration);

struct SweepSpec {
  enum class Axis { concurrency, request_rate } axis = Axis::concurrency;
  std::vector<double> values;    // one point per value, in this order
};
// Runs every point on `threads` threads (<= 0: all cores). Results are in point order and do
// not depend on the thread count. `progress(done, total)` is called from worker threads.
std::vector<SimResult> sweep(const Scenario& base, const SweepSpec& spec, int threads,
                             const std::function<void(int, int)>& progress = {});
// The workload of one sweep point.
workloads::WorkloadConfig sweep_point(const workloads::WorkloadConfig& base, SweepSpec::Axis axis, double value);

// Column-oriented results: names[i] heads data[i]; one row per point.
struct Columns {
  std::vector<std::string> names;
  std::vector<std::vector<double>> data;
  const std::vector<double>& operator[](std::string_view name) const;
};
// `gpus` divides the per-GPU throughput unless a result names its own (topology runs). Disaggregated
// runs add kv_transfers, kv_transfer_ms_avg, kv_transfer_ms_max, kv_transfer_max_in_flight.
// With `base` (the swept scenario) every point also carries its prediction band
// (sim/validate/bands.hpp): time_to_first_token_ms_{avg,p50}_band_{lo,hi},
// inter_token_latency_ms_{avg,p50}_band_{lo,hi}, output_token_throughput_band_{lo,hi} (NaN: no band).
Columns sweep_columns(const SweepSpec& spec, const std::vector<SimResult>& results, int gpus,
                      const Scenario* base = nullptr);
std::string to_csv(const Columns& c);
nlohmann::json to_json(const Columns& c);   // {name: [values...]}, NaN as null

// Scenario from JSON text, for bindings: parse_scenario(text, "scenario").
Scenario scenario_from_json(const std::string& json_text);

}  // namespace servesim::sim
