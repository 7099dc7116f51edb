// A day of traffic with Dynamo's planner in the loop (`servesim planner`): one simulation in
// which, every adjustment interval, the planner sizes each role's fleet (aggregated replicas, or
// the prefill and decode workers of a disaggregated topology separately), starts workers that take
// requests only after loading their weights from storage, and drains the ones it no longer needs
// (they finish what they hold). Two rules, as Dynamo's planners have them:
//   throughput (SLA planner): the next interval's load is the last one's (the constant predictor):
//     prefill workers = ceil(prompt tokens/s / what one prefill worker serves within the SLO),
//     decode workers = ceil(answer tokens/s / what one decode worker serves within the SLO)
//     (aggregated: requests/s / one replica's), each capacity profiled beforehand by simulation;
//   load: one worker more when the interval's mean queued prefill per worker (prefill, replicas)
//     or KV-cache utilisation (decode, replicas) passes its scale-up threshold, one fewer when it
//     is below its scale-down threshold.
// Reported: workers of each role over time, SLO attainment per interval and over the day,
// GPU-hours and $ against a fixed fleet sized for the peak.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "sim/scenario.hpp"
#include "workloads/load_profile.hpp"

namespace servesim::sim {

struct PlannerSpec {
  enum class Rule : std::uint8_t { throughput, load };
  workloads::LoadProfile profile;
  Rule rule = Rule::throughput;
  bool poisson = true;                  // arrivals: Poisson at the profile's rate, else evenly spaced
  double interval_s = 180;              // adjustment interval
  double ttft_ms = 0, itl_ms = 0;       // SLO per request (attainment: both met); the profile's capacity uses their p90
  int min_workers = 1;
  int max_workers = 0;                  // 0: twice the peak fleet
  double replica_rps = 0;               // requests/s one replica serves within the SLO; 0: profiled by simulation
  double prefill_rps = 0, decode_rps = 0;   // the same for one prefill / decode worker (disaggregated)
  // Load rule: metrics sampled every metric_interval_s and averaged over the adjustment interval;
  // queued prefill per worker in prompts (queued prompt tokens / the profile's mean prompt).
  double metric_interval_s = 10;
  double kv_up = 0.9, kv_down = 0.5, queue_up = 5.0, queue_down = 0.2;
  double storage_bytes_per_s = 10e9;    // weights read at start-up (per worker)
  double startup_extra_s = 0;           // engine start beyond reading weights (graphs, compile)
  bool run_fixed_fleet = true;          // also simulate the peak-sized fixed fleet
  // Reserved capacity plus on-demand for the peaks: a reserved GPU-hour's price, or a discount on
  // the on-demand one (the catalogue has no reserved prices); neither: no split.
  double reserved_usd_per_gpu_hour = 0;
  double reserved_discount = -1;        // 0..1
};

// The cheapest split of a day's GPU demand into reserved GPUs (paid for the whole span) and
// on-demand GPU-hours above them. Cost(R) = R x span x reserved + sum over time of
// max(0, GPUs held - R) x on-demand; piecewise linear in R with its corners at the levels held,
// so the levels (and 0) are the candidates.
struct ReservedOption {
  int reserved_gpus = 0;
  double reserved_usd = 0, on_demand_gpu_hours = 0, on_demand_usd = 0, total_usd = 0;
};
struct ReservedSplit {
  double span_h = 0, reserved_usd_per_gpu_hour = 0, on_demand_usd_per_gpu_hour = 0;
  std::string reserved_source, on_demand_source;
  std::vector<ReservedOption> options;  // by reserved GPUs, ascending
  std::size_t best = 0;                 // the cheapest (fewest GPUs on a tie)
};
// `seconds_at_gpus[g]`: time during which g GPUs were held.
ReservedSplit price_reserved_split(const std::vector<double>& seconds_at_gpus, double reserved_usd_per_gpu_hour,
                                   double on_demand_usd_per_gpu_hour);

// One role's workers at the end of an interval and, for the load rule, the interval's mean metrics.
struct RoleInterval {
  int ready = 0, held = 0;
  double queue = NAN, kv_utilization = NAN;   // mean over the interval's samples (load rule)
};

struct PlannerInterval {
  double start_s = 0;
  double offered_rps = 0;               // the profile's mean over the interval
  double observed_rps = 0;              // arrivals / interval
  int workers_ready = 0, workers_held = 0;   // taking requests; holding GPUs (ready + starting + draining), at its end
  std::int64_t requests = 0, good = 0;  // requests that arrived in it; of those, within the SLO
  double ttft_p90_ms = NAN, itl_p90_ms = NAN;
  std::vector<RoleInterval> roles;      // as PlannerResult::roles
};

// A role the planner scales: aggregated replicas, or disaggregated prefill / decode workers.
struct PlannerRole {
  std::string name;                     // "replica" | "prefill" | "decode"
  int gpus_per_worker = 0, peak_workers = 0, max_workers = 0;
  double capacity_rps = 0;              // requests/s one worker serves within the SLO (the other role ample)
  bool capacity_given = false;
  double startup_s = 0;
  // The profile's mean prompt (text + the image share's vision tokens) and answer: what the
  // throughput rule divides a role's token rate by.
  double mean_prompt_tokens = 0, mean_answer_tokens = 0;
};

struct PlannerResult {
  std::vector<PlannerRole> roles;       // replica; or prefill, decode
  bool disaggregated = false;
  double mean_vision_tokens = 0;        // per request on average: vision tokens x the share carrying media
  double gpu_hours = 0, fixed_fleet_gpu_hours = 0;
  std::optional<double> usd_per_gpu_hour;
  double slo_attainment = 0, fixed_fleet_slo_attainment = NAN;
  std::int64_t requests = 0;
  std::vector<PlannerInterval> timeline;
  std::vector<double> seconds_at_gpus;  // the planned fleet: time during which [g] GPUs were held
  std::optional<ReservedSplit> reserved;
  double wall_s = 0;
  std::string instance;                 // the GPU's first catalogue instance (its price, the emitted node selector)
  nlohmann::json what_ran;              // model, precisions, engine knobs, a worker's memory plan, calibration
};

// The spec from named options (the CLI's flags with underscores: load_profile "diurnal" or a CSV
// path, peak_rps, trough_fraction, hours, arrivals "poisson"|"uniform", adjustment_interval,
// ttft_ms, itl_ms, min_workers, max_workers, replica_rps, prefill_rps, decode_rps, storage_gbps,
// startup_extra_s, fixed_fleet, rule "throughput"|"load", metric_interval, kv_scale_up,
// kv_scale_down, queue_scale_up, queue_scale_down); errors name `where` and the option.
PlannerSpec planner_spec(const nlohmann::json& args, const std::string& where);
PlannerResult run_planner(const Scenario& s, const PlannerSpec& spec);
// What a user gives (CLI, Python): a role's capacity for a role the topology has not (--prefill-rps
// or --decode-rps on aggregated replicas, --replica-rps on a disaggregated topology) is refused,
// never silently unused.
void check_planner_roles(const Scenario& s, const PlannerSpec& spec);
nlohmann::json to_json(const PlannerResult& r, const PlannerSpec& spec);
// What was given, as the result's `input_config`: the scenario (one worker's shape, the lengths)
// and the planner's options.
nlohmann::json planner_input_config(const Scenario& s, const nlohmann::json& args);
nlohmann::json to_json(const ReservedSplit& x);
// One replica's request rate within the SLO (p90 TTFT and ITL): open-loop Poisson runs of the
// scenario's lengths on one replica, bisected.
double profile_replica_rps(const Scenario& s, double ttft_ms, double itl_ms);
// A disaggregated topology's one prefill worker's and one decode worker's request rates within the
// SLO, each profiled as profile_replica_rps with enough workers of the other role that they never
// bind (twice the ratio of the two rates, at least 4). Given rates (> 0) are kept.
std::pair<double, double> profile_role_rps(const Scenario& s, double ttft_ms, double itl_ms, double prefill_rps = 0,
                                           double decode_rps = 0);

}  // namespace servesim::sim
