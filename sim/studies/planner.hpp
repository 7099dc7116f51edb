// A day of traffic with Dynamo's SLA planner in the loop (`servesim planner`): one simulation in
// which, every adjustment interval, the planner predicts the next interval's request rate (the
// last interval's arrivals: Dynamo's constant predictor), sizes the fleet by throughput (workers =
// ceil(rate / what one replica serves within the SLO, profiled beforehand by simulation)), starts
// workers that take requests only after loading their weights from storage, and drains the ones
// it no longer needs (they finish what they hold). Reported: workers over time, SLO attainment per
// interval and over the day, GPU-hours and $ against a fixed fleet sized for the peak.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "sim/scenario.hpp"
#include "workloads/load_profile.hpp"

namespace servesim::sim {

struct PlannerSpec {
  workloads::LoadProfile profile;
  bool poisson = true;                  // arrivals: Poisson at the profile's rate, else evenly spaced
  double interval_s = 180;              // adjustment interval
  double ttft_ms = 0, itl_ms = 0;       // SLO per request (attainment: both met); the profile's capacity uses their p90
  int min_workers = 1;
  int max_workers = 0;                  // 0: twice the peak fleet
  double replica_rps = 0;               // requests/s one replica serves within the SLO; 0: profiled by simulation
  double storage_bytes_per_s = 10e9;    // weights read at start-up (per worker)
  double startup_extra_s = 0;           // engine start beyond reading weights (graphs, compile)
  bool run_fixed_fleet = true;          // also simulate the peak-sized fixed fleet
};

struct PlannerInterval {
  double start_s = 0;
  double offered_rps = 0;               // the profile's mean over the interval
  double observed_rps = 0;              // arrivals / interval
  int workers_ready = 0, workers_held = 0;   // taking requests; holding GPUs (ready + starting + draining), at its end
  std::int64_t requests = 0, good = 0;  // requests that arrived in it; of those, within the SLO
  double ttft_p90_ms = NAN, itl_p90_ms = NAN;
};

struct PlannerResult {
  double replica_rps = 0;               // profiled (or given) capacity of one replica within the SLO
  int gpus_per_worker = 0, peak_workers = 0;
  double startup_s = 0;
  double gpu_hours = 0, fixed_fleet_gpu_hours = 0;
  std::optional<double> usd_per_gpu_hour;
  double slo_attainment = 0, fixed_fleet_slo_attainment = NAN;
  std::int64_t requests = 0;
  std::vector<PlannerInterval> timeline;
  double wall_s = 0;
  std::string instance;
};

// The spec from named options (the CLI's flags with underscores: load_profile "diurnal" or a CSV
// path, peak_rps, trough_fraction, hours, arrivals "poisson"|"uniform", adjustment_interval,
// ttft_ms, itl_ms, min_workers, max_workers, replica_rps, storage_gbps, startup_extra_s,
// fixed_fleet); errors name `where` and the option.
PlannerSpec planner_spec(const nlohmann::json& args, const std::string& where);
PlannerResult run_planner(const Scenario& s, const PlannerSpec& spec);
nlohmann::json to_json(const PlannerResult& r, const PlannerSpec& spec);
// One replica's request rate within the SLO (p90 TTFT and ITL): open-loop Poisson runs of the
// scenario's lengths on one replica, bisected.
double profile_replica_rps(const Scenario& s, double ttft_ms, double itl_ms);

}  // namespace servesim::sim
