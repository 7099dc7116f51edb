// SLO capacity planning read off a concurrency sweep, the way the reference deployment sizes
// itself: per topology, the rightmost swept concurrency whose TTFT and ITL (at one statistic)
// are both under the SLO lines; the output tokens/s one copy of that topology serves there;
// copies = ceil(target / that); GPUs, instances and $/hour; and which side limits it.
// A "replica" here is one copy of the topology exactly as it was swept (for an aggregated
// topology: its engine replicas behind the router; for xPyD: x prefill + y decode workers).
#pragma once
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "workloads/workload.hpp"

namespace servesim::sim {

enum class Statistic { p50, p90, p99 };
std::string_view to_string(Statistic s);
Statistic parse_statistic(std::string_view s, const std::string& where = "--statistic");

// One swept point of one topology, in the units the charts use.
struct SweepRow {
  std::string topology;
  int concurrency = 0;
  double ttft_ms[3] = {0, 0, 0};   // p50, p90, p99
  double itl_ms[3] = {0, 0, 0};
  double gap_ms[3] = {0, 0, 0};    // the gaps between streamed tokens (Summary::token_gap_ms)
  double output_tps = 0;           // whole topology, output tokens/s
  double output_tps_per_gpu = 0;
  double output_tps_per_user = 0;
  // The run's prompts queued behind each other's prefill (simulate's PREFILL TRAIN): its TTFT
  // percentiles are set by that queue, not by the load alone.
  bool prefill_train = false;
  // An open loop's steady window (sim::overloaded): answers served per second, requests in flight
  // at the last send, and whether the queue grew (the point cannot meet any SLO for long).
  double served_rps = 0;
  std::int64_t in_flight_at_end = 0;
  bool overloaded = false;
  // Share of the admitted prompt tokens the prefix cache served (0 with prefix caching off).
  double prefix_hit = 0;
  // A worker's KV cache filled (its peak use >= kKvFull of the blocks): prompts waited for room
  // (TensorRT-LLM's reservations) or running requests were preempted, so a TTFT over the SLO there
  // asks for KV memory per worker, not prefill compute.
  bool kv_full = false;
};
inline constexpr double kKvFull = 0.99;

// The ITL side of an SLO at statistic index `s` (p50, p90, p99): a request's mean inter-token
// latency, and, with a limit on it (gap_ms > 0), the gap between streamed tokens: a decode stalled
// by the prefill steps it shares or waits out breaks the second where the mean hides it.
inline bool itl_side_ok(const SweepRow& r, int s, double itl_ms, double gap_ms) {
  return r.itl_ms[s] <= itl_ms && (gap_ms <= 0 || r.gap_ms[s] <= gap_ms);
}
// The ITL side broken by the token gap alone: the mean ITL held (PlanRow / SearchScore::gap_only).
inline bool gap_alone_breaks(const SweepRow& r, int s, double itl_ms, double gap_ms) {
  return !itl_side_ok(r, s, itl_ms, gap_ms) && r.itl_ms[s] <= itl_ms;
}

// The steady-state rule of every capacity point (plan, search, recommend): a closed loop of
// `clients` whose first requests ask for spread shares of their answers (client k of N:
// ceil(k / N x its answer), so the clients' cycles start spread as in a loop that has run long),
// a warm-up sent without aiperf's phase barrier that ends when the loop is steady
// (sim/engine/steady_warmup.hpp: batch means of latency and TTFT over rounds of N completions),
// at most kWarmupRoundsPerClient requests per client, then `requests` measured requests, by
// default measured until mean and p90 TTFT (2 %) and ITL (1 %) are precise
// (sim/engine/steady_warmup.hpp, MeasuredPrecision), at most
// max(kMinMeasuredRequests, kMeasuredRoundsPerClient x clients).
// `servesim simulate --concurrency C --warmup-requests 32C --warmup-until-steady
// --measure-until-precise --requests N` runs the same point.
constexpr int kWarmupRoundsPerClient = 32;
constexpr int kMeasuredRoundsPerClient = 8;
constexpr std::int64_t kMinMeasuredRequests = 1000;
std::int64_t capacity_requests(int clients, std::optional<std::int64_t> requests);
workloads::WorkloadConfig capacity_workload(int clients, std::optional<std::int64_t> requests, std::uint64_t seed,
                                            std::int64_t isl, std::int64_t osl);
// The rule in words, for headers and JSON.
std::string capacity_rule(std::optional<std::int64_t> requests);
// Column-oriented sweep: topology, concurrency, ttft_{p50,p90,p99}_ms, itl_{..}_ms, output_tps,
// output_tps_per_gpu, output_tps_per_user (what python/servesim/plot.py reads).
nlohmann::json sweep_columns(const std::vector<SweepRow>& rows);
// One row as JSON and back (what plan_point / search_run hand over); `where` names the caller in
// the Error a malformed row gets.
nlohmann::json to_json(const SweepRow& r);
SweepRow sweep_row_from_json(const nlohmann::json& j, const char* where);

struct PlanSlo {
  double ttft_ms = 0;
  double itl_ms = 0;
  Statistic statistic = Statistic::p90;
  double target_tps = 0;           // output tokens/s the whole deployment must serve
  double target_rps = 0;           // > 0 when the target was given as requests/s (errors name --target-rps)
  double gap_ms = 0;               // on the gap between streamed tokens (--gap-ms), at `statistic`; 0: none
  double headroom = 0;             // spare capacity (--headroom): target_tps above is the target x (1 + headroom)
  void validate() const;           // throws Error naming the flag
};

// Spare capacity over the target, % ({"lo", "hi"}; "hi" null where no failing point bounds it):
// `capacity` is what `copies` copies were sized to serve under both SLOs. Open loop, they met the SLO
// at the sized rate R (R / copies each) and `fewer` copies failed (R / fewer each), so one copy
// serves between R / copies and R / fewer and the copies between capacity and capacity x copies /
// fewer; fewer 0 (closed loop, or none failed): the lower end only (the next swept concurrency
// failed, so copies x one copy's throughput at its SLO point is a lower bound).
nlohmann::json spare_pct(double capacity, double target, double copies, double fewer);

// --headroom: spare capacity as a fraction of the load target, 0..10 (0.2: size for 1.2 x the
// target). Throws Error naming --headroom.
void check_headroom(double headroom);
// "48 requests/s (40 + 20 % headroom)" style: the target and what it is sized for, in words.
std::string headroom_text(double headroom);

// What one copy of a topology costs.
struct TopologyUnit {
  std::string name;                // "aggregated", "disaggregated-1p1d", ...
  int gpus = 0;                    // GPUs of one copy
  int instances = 1;               // instances one copy occupies when placed alone
  int gpus_per_instance = 8;
  std::optional<double> usd_per_instance_hour;
};

enum class LimitedBy { none, ttft, itl, both };
std::string_view to_string(LimitedBy l);
// What to do about it: "add prefill capacity" for TTFT, "add decode capacity" for ITL, ...; a TTFT
// broken where a KV cache was full (SweepRow::kv_full) asks for KV memory per worker instead.
// An ITL side broken by the gap between streamed tokens alone (gap_only: the requests' mean ITL held)
// asks for prompts off the decode's steps: disaggregated prefill or smaller chunks.
std::string_view advice(LimitedBy l, bool kv_full = false, bool gap_only = false);

struct PlanRow {
  std::string name;
  bool feasible = false;           // some swept point meets both SLOs
  int max_concurrency = 0;         // 0 when none does
  double tps_per_replica = 0;
  std::int64_t replicas = 0, gpus = 0, instances = 0;   // 64-bit: a huge target must not wrap
  std::optional<double> usd_per_hour;
  LimitedBy limited_by = LimitedBy::none;   // the SLO broken at the next swept concurrency
  bool prefill_train = false;      // the point read (or, when none passes, the first) ran in a PREFILL TRAIN
  bool kv_full = false;            // the point whose TTFT broke the SLO had a full KV cache (SweepRow::kv_full)
  bool gap_only = false;           // its ITL side broke on the token gap alone (--gap-ms; the mean ITL held)
  nlohmann::json to_json() const;
};

// Sizes `row` as `copies` copies of `u`: GPUs, instances and $/hour (copies > 10^9 throw Error).
// At least one copy, however small the target.
void size_copies(PlanRow& row, const TopologyUnit& u, double copies, const PlanSlo& slo);

// --target-rps, before any run: a rate from 10^-6 to 10^7 requests/s and, open loop, one the copy
// search's first point (one copy offered the whole rate: a warm-up of max(100, 10 s x rate) and
// --requests or max(1000, 60 s x rate) measured requests) can hold in 10^7 requests. Throws Error
// naming --target-rps.
void check_target_rps(double rps, bool open_loop, std::optional<std::int64_t> requests);
// The same for the rate the copies are sized for, rps x (1 + headroom): an error only --headroom
// makes names --headroom and both rates.
void check_sized_rps(double rps, double headroom, bool open_loop, std::optional<std::int64_t> requests);

// Open-loop steady-state rule (plan --arrival): a copy offered `rate` requests/s runs a warm-up of
// max(100, 10 s x rate) requests, then max(1000, 60 s x rate) measured requests (unless given).
workloads::WorkloadConfig open_loop_workload(double rate, workloads::Arrival arrival, double burstiness,
                                             std::optional<std::int64_t> requests, std::uint64_t seed, std::int64_t isl,
                                             std::int64_t osl);
std::string open_loop_rule(std::optional<std::int64_t> requests);

// The fewest copies k in 1..2^20 whose point(k) meets the SLO (passes), k doubling from 1, then
// bisection between the last failing and the first passing k (the SLO is taken to hold at every
// rate below one that meets it). `hopeless(k, row)` may stop the doubling early (e.g. a copy that
// fails with under one request in flight: more copies cannot help). Every evaluated point is kept
// in `tried`, in evaluation order; `copies` 0: none passed; `fewer`: the largest failing k below
// `copies` (0: none).
struct CopiesSearch {
  std::int64_t copies = 0, fewer = 0;
  std::vector<std::pair<std::int64_t, SweepRow>> tried;
  const SweepRow* at(std::int64_t k) const;
};
CopiesSearch fewest_copies(const std::function<SweepRow(std::int64_t)>& point, const std::function<bool(const SweepRow&)>& passes,
                           const std::function<bool(std::int64_t, const SweepRow&)>& hopeless = {});

// One row per unit, in the order given; rows of a unit's name that are absent throw Error.
std::vector<PlanRow> plan_capacity(const std::vector<SweepRow>& sweep, const std::vector<TopologyUnit>& units,
                                   const PlanSlo& slo);

}  // namespace servesim::sim
