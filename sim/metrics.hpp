// What a benchmark client would report, with aiperf's metric definitions and tags:
// TTFT, TTST, ITL = (latency - TTFT) / (OSL - 1), request latency, throughputs, goodput under an
// SLO, each with avg/min/max/std and exact percentiles (numpy "linear"), plus per-replica busy
// fraction, batch size and KV utilisation. Exports in aiperf's profile_export_* layouts.
#pragma once
#include <algorithm>
#include <functional>
#include <cmath>
#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "common/stats.hpp"  // percentile_sorted
#include "sim/token_gaps.hpp"

namespace servesim::sim {

struct RequestRecord {                  // what a client saw for one request (absolute seconds)
  std::uint64_t id = 0;
  double arrival_s = 0, first_token_s = 0;
  double second_token_s = std::numeric_limits<double>::quiet_NaN();  // NaN if OSL == 1
  double finish_s = 0;
  std::int64_t input_tokens = 0, output_tokens = 0;
  bool warmup = false;
};

// Latency objectives for goodput (aiperf --goodput); 0 = no limit on that metric. A request is
// good when it meets every limit; OSL-1 requests have no ITL and pass the ITL limit.
struct Slo {
  double ttft_ms = 0, itl_ms = 0, latency_ms = 0;
  bool any() const { return ttft_ms > 0 || itl_ms > 0 || latency_ms > 0; }
};

// Distribution summary of one metric over the measured requests.
struct Stats {
  std::int64_t count = 0;
  double avg = NAN, min = NAN, max = NAN, std = NAN;   // std: population (numpy ddof=0)
  double p1 = NAN, p5 = NAN, p10 = NAN, p25 = NAN, p50 = NAN, p75 = NAN, p90 = NAN, p95 = NAN, p99 = NAN;
};
// Exact statistics of `values` (sorted in place); percentiles interpolate linearly between
// order statistics like numpy.percentile's default.
Stats compute_stats(std::vector<double>& values);

struct ReplicaSummary {
  std::string name;
  std::int64_t steps = 0;
  double busy_s = 0;
  double busy_fraction = 0;        // busy time / benchmark duration, capped at 1
  double mean_batch_size = 0;      // sequences per step, weighted by step time
  int max_batch_size = 0;
  double mean_kv_utilization = 0;  // fraction of KV blocks in use, weighted by step time
  double max_kv_utilization = 0;
};

struct Summary {
  double start_s = 0, end_s = 0, duration_s = 0;       // benchmark window
  std::int64_t request_count = 0, warmup_request_count = 0;
  std::int64_t total_input_tokens = 0, total_output_tokens = 0;
  double request_throughput_per_s = 0;                  // request_count / duration
  // The load window: the later half of the measured send span, from the first measured send +
  // span / 2 to the last send. The first half fills the server; in the second a server that keeps
  // up starts (first token) and answers requests as fast as they are sent, and an overloaded one
  // starts them at its capacity while the rest wait. Counted in it: requests sent, started (first
  // token), answered (last token) and their output tokens; at its start and at the last send, the
  // requests waiting for their first token (sent, no token yet) and those in flight (sent, not
  // answered). sent - started = waiting_at_end - waiting_at_open, exactly. send_gap_cv: the
  // coefficient of variation of the gaps between measured sends (1 for Poisson arrivals).
  double load_from_s = 0, load_window_s = 0;   // window start, seconds after the first measured send; length
  std::int64_t load_sent = 0, load_started = 0, load_answered = 0, load_answered_tokens = 0;
  std::int64_t waiting_at_open = 0, waiting_at_end = 0, in_flight_at_open = 0, in_flight_at_end = 0;
  double send_gap_cv = 0;
  double output_token_throughput_per_s = 0;             // total output tokens / duration
  // A closed loop's steady output tokens/s: the measured sends after the first one over the
  // measured send span, times the mean measured answer. While the measured requests are sent
  // every client has one in flight and sends its next as an answer ends, so sends then count
  // answers at the full load; the duration above also holds the warm-up requests still in flight
  // at the first measured send and the drain after the last, about one request latency in which
  // the measured requests are not all of the load (N clients, R requests: about N / R low).
  // 0 with fewer than two send times.
  double steady_output_tps = 0;
  Stats ttft_ms, ttst_ms, itl_ms, request_latency_ms;   // ITL and TTST over requests with OSL > 1
  Stats output_token_throughput_per_user;               // tokens/s/user: (OSL-1)/(latency-TTFT)
  // The gaps between streamed tokens from each request's second on (sim/token_gaps.hpp): ms.
  Stats token_gap_ms;
  Stats input_sequence_length, output_sequence_length;  // tokens
  bool has_slo = false;
  Slo slo;
  std::int64_t good_request_count = 0;
  double goodput_per_s = 0;                             // good requests / duration
  std::vector<ReplicaSummary> replicas;
};

// An open loop offered more than it serves: over the load window the queue of requests waiting
// for their first token grew (sent - started) by more than a tenth of the requests sent in it (the
// rate is over 1 / 0.9 = 1.11 x the rate it starts them at) and by more than 3 standard
// deviations of the count of sends in the window (3 x max(1, send_gap_cv) x sqrt(sent): Poisson
// arrivals, scaled for burstier ones), the noise a stable server absorbs; or, when the window opens
// at least one p90 request latency after the first send (a server that keeps up has then filled),
// the requests in flight grew (sent - answered) by more than max(0.1 x sent, 3 x cv x sqrt(sent +
// in flight at its start)): every request starts, but the batch grows and answers fall behind.
// Needs >= 20 sends in the window; nullopt when the run is too short to tell.
std::optional<bool> overloaded(const Summary& s);
double overload_allowance(const Summary& s);   // the queue growth the rule allows: max(0.1 x sent, 3 x cv x sqrt(sent))
double in_flight_allowance(const Summary& s);  // the in-flight growth it allows: max(0.1 x sent, 3 x cv x sqrt(sent + in flight at open))
bool in_flight_judged(const Summary& s);       // the window opens >= one p90 request latency after the first send
// The open loop's load in JSON: offered (the configured rate), sent, started and served rates over
// the load window, the queue and the requests in flight at its start and at the last send, the
// allowance and "overloaded" (null: too short to tell).
nlohmann::json load_json(const Summary& s, double offered_rps);
double served_rps(const Summary& s);   // answers per second over the load window (0: none)
double started_rps(const Summary& s);  // first tokens per second over the load window (0: none)
// One line when overloaded ("" otherwise): offered vs served rate and the queue at the end.
std::string overload_line(const Summary& s, double offered_rps);
// plan / search / recommend, open loop: n rows whose next smaller copy count could not keep up.
std::string overload_note(int rows);

class MetricsCollector {
 public:
  // keep_records: also keep every RequestRecord (with warm-up ones) for the per-request export.
  // Without it 32 bytes are kept per measured request: latency, TTFT, TTST (3 doubles), ISL, OSL
  // (2 x int32), in vectors (amortised growth may reserve up to twice that).
  // The default (no records) is not explicit, so an aggregate holding one (SimResult{}) can be
  // value-initialised; the bool stays explicit (no implicit conversion from a flag).
  MetricsCollector() : MetricsCollector(false) {}
  explicit MetricsCollector(bool keep_records);

  void add(const RequestRecord& r);                      // O(1) amortised
  // Called with the number of finished requests (warm-up included) every 16384 of them, so a
  // long run can show progress.
  void set_progress(std::function<void(std::int64_t)> f) { progress_ = std::move(f); }
  std::int64_t request_count() const { return static_cast<std::int64_t>(latency_s_.size()); }

  // Workers: register replicas (optional; indices grow on demand), then report every step. O(1).
  int add_replica(std::string name);
  // One engine step on `replica` that ran `step_s` seconds from `start_s` with `batch_seqs`
  // sequences and `kv_utilization` (0..1) of its KV blocks in use. Steps that start before
  // measure_workers_from() are ignored (warm-up).
  void add_worker_sample(int replica, double start_s, double step_s, int batch_seqs, double kv_utilization) {
    if (replica < 0) return;
    if (static_cast<std::size_t>(replica) >= replicas_.size()) add_replicas_up_to(replica);
    if (start_s < worker_from_s_) return;
    ReplicaAcc& a = replicas_[static_cast<std::size_t>(replica)];
    ++a.steps;
    a.busy_s += step_s;
    a.batch_time += step_s * batch_seqs;
    a.kv_time += step_s * kv_utilization;
    a.max_batch = std::max(a.max_batch, batch_seqs);
    a.max_kv = std::max(a.max_kv, kv_utilization);
  }
  void measure_workers_from(double t_s) { worker_from_s_ = t_s; }
  // The workers' schedulers report the measured requests' token gaps here (VllmScheduler::set_token_gaps).
  TokenGaps& token_gaps() { return token_gaps_; }
  const TokenGaps& token_gaps() const { return token_gaps_; }

  // The configuration echoed under "input_config" in the aiperf JSON (the engine passes it).
  void set_input_config(const nlohmann::json& config);

  // Window defaults (NaN): first measured arrival .. last measured finish, as aiperf's
  // benchmark_duration (first request sent .. last response received).
  Summary summary(double benchmark_start_s = NAN, double benchmark_end_s = NAN, const Slo* slo = nullptr) const;

  // profile_export_aiperf.json layout: {"records": {tag: {"unit", "avg", "p1"..."p99", "min",
  // "max", "std"}}, "input_config", "was_cancelled", "error_summary", "start_time", "end_time"} plus
  // "benchmark_duration" and "replicas".
  nlohmann::json aiperf_json(double benchmark_start_s, double benchmark_end_s, const Slo* slo = nullptr) const;
  nlohmann::json aiperf_json(const Slo* slo = nullptr) const;

  // Writes DIR/profile_export.jsonl (one line per request, needs keep_records),
  // DIR/profile_export_aiperf.json and DIR/profile_export_aiperf.csv. Creates DIR; Error on I/O.
  void export_dir(const std::string& dir, const Slo* slo = nullptr,
                  double benchmark_start_s = NAN, double benchmark_end_s = NAN) const;

  const std::vector<RequestRecord>& records() const { return records_; }

 private:
  std::function<void(std::int64_t)> progress_;
  struct ReplicaAcc {
    std::string name;
    std::int64_t steps = 0;
    double busy_s = 0, batch_time = 0, kv_time = 0, max_kv = 0;
    int max_batch = 0;
  };
  bool keep_records_;
  std::vector<double> latency_s_, ttft_s_, ttst_s_;   // ttst NaN when OSL == 1
  std::vector<std::int32_t> isl_, osl_;
  double first_arrival_s_ = INFINITY, last_finish_s_ = -INFINITY, last_arrival_s_ = -INFINITY;
  std::vector<double> finish_s_;   // per measured request, for the load window
  std::int64_t warmup_count_ = 0;
  std::vector<RequestRecord> records_;
  std::vector<ReplicaAcc> replicas_;
  void add_replicas_up_to(int replica);   // named "replica <k>"
  double worker_from_s_ = -INFINITY;
  TokenGaps token_gaps_;
  std::string input_config_;   // serialised JSON ("" = none); keeps nlohmann out of this header
};

// Metric tags, headers and units as aiperf names them, in its export order.
struct MetricInfo { const char* tag; const char* header; const char* unit; };
const std::vector<MetricInfo>& aiperf_metric_infos();

}  // namespace servesim::sim
