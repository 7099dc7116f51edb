// When a closed loop has reached its steady state: the warm-up rule of every capacity point
// (plan, search, recommend; sim/studies/plan.hpp).
//
// N clients that start together send their prompts as one train and then run in near lockstep;
// the answers' spread desynchronises them only slowly (at 32-128 clients a fixed warm-up of 32
// requests per client still reads a mean TTFT 15-20 % above a run of 1,000 rounds). So the
// clients start at independent phases of their cycle (each one's first request asks for a uniform
// 1..its answer tokens: WorkloadConfig::warmup_until_steady), and the warm-up ends as soon as the
// loop is steady, read in rounds of R = max(N, kMinRoundRequests) warm-up completions in
// completion order: per round, the mean latency (sent -> last token) and the mean time to first
// token. By Little's law a closed loop's throughput is N / mean latency, so a round's mean latency
// is also its completion rate. The loop is steady at the end of round j when
//   - j >= kMinRounds (every client has completed about kMinRounds requests), and
//   - each of the last kWindowRounds rounds has its mean latency within kLatencyBand of the
//     window's mean latency and its mean TTFT within kTtftBand of the window's mean TTFT (batch
//     means with no drift: the start-up train's long first tokens show as rounds whose TTFT
//     falls by more than that).
// The caller's fixed warm-up (kWarmupRoundsPerClient x N requests) stays the upper bound: a loop
// that never settles warms up exactly as long as before.
#pragma once
#include <cmath>
#include <cstdint>
#include <vector>

namespace servesim::sim {

struct SteadyRule {
  static constexpr int kMinRounds = 4;
  static constexpr int kWindowRounds = 3;
  static constexpr double kLatencyBand = 0.02, kTtftBand = 0.10;
  static constexpr std::int64_t kMinRoundRequests = 32;
};

class SteadyWarmup {
 public:
  explicit SteadyWarmup(int clients);
  // A warm-up request finished: its latency and time to first token (seconds, from its send).
  // True once the loop is steady (and every call after that).
  bool finished(double latency_s, double ttft_s);
  std::int64_t round_requests() const { return round_; }
  std::int64_t completions() const { return done_; }

 private:
  std::int64_t round_ = 1, done_ = 0;
  double sum_latency_ = 0, sum_ttft_ = 0;
  std::vector<double> latency_, ttft_;   // per finished round, its means
  bool steady_ = false;
};

// When a closed loop's measured phase has read its figures to a stated precision: the length
// rule of every capacity point whose measured request count is not given (sim/studies/plan.hpp).
//
// Measured requests are read in batches of B = max(N, kMinBatchRequests) completions, in
// completion order (one batch spans at least a round of the N clients, so batch means are close
// to independent). Once at least min_requests() have finished, at the end of every batch k the
// 95 % confidence interval of each figure the capacity rule reads is estimated from the k batches
// (half-width = t(0.975, k-1) x sd / sqrt(k)): the batch-means method for the mean TTFT and the
// mean ITL; for their p90s, the same interval on the share of each batch at or under the whole
// run's p90 (0.9 +- h), read back as half the distance between the run's quantiles at 0.9 - h and
// 0.9 + h (a p90 that sits in a gap between two modes, such as prompts that met another's
// prefill or not, reads wide). The run stops sending when the half-widths are within kTolerance
// (ITL) and kTtftTolerance (TTFT) of their point estimates; the requests in flight then finish
// and are measured too. `max_requests` (the fixed count, max(1000, 8 x clients)) stays the upper
// bound: a loop that never settles is measured exactly as long as before. TTFT is the noisiest
// figure: at 4-64 clients the 1,000 requests of the fixed count read its mean only to 1.0-1.7 %
// (95 %), so its tolerance is 2 %; ITL reads to under 0.1 %.
//
// min_requests() = max(kMinRequests, kMinBatches x B, ceil(N x M / (N + kTolerance x M))) for
// M = max_requests and N > 1. The last term keeps the throughput within kTolerance of a run of
// M: a closed loop's window (first measured send .. last measured finish) carries about one
// request latency of start and drain beyond R / N rounds, so its tokens/s read about
// 1 / (1 + N / R) of the steady rate, and N / R - N / M <= kTolerance at R >= N M / (N + kTolerance M).
// A 1-client loop has no such term (no phases to spread) and of a deterministic workload
// converges at once: it stops at kMinRequests.
struct PrecisionRule {
  static constexpr double kTolerance = 0.01, kTtftTolerance = 0.02;
  static constexpr int kMinBatches = 10;
  static constexpr std::int64_t kMinBatchRequests = 20;
  static constexpr std::int64_t kMinRequests = 200;
  static std::int64_t batch_requests(int clients);
  static std::int64_t min_requests(int clients, std::int64_t max_requests);
  // Student's t quantile t(0.975, df), df >= 1 (a table to df 30, then the Cornish-Fisher
  // expansion in 1/df, within 0.001 there).
  static double t975(int df);
};

class MeasuredPrecision {
 public:
  MeasuredPrecision(int clients, std::int64_t max_requests);
  // A measured request finished: its TTFT and ITL (seconds; ITL NaN for a one-token answer).
  // True once every figure is within the tolerance (and every call after that).
  bool finished(double ttft_s, double itl_s);
  // The same from a request's times (seconds) and its answer's tokens: TTFT = first - sent, ITL =
  // (finish - first) / (tokens - 1), none for a one-token answer.
  bool request_finished(double sent_s, double first_s, double finish_s, std::int64_t output_tokens) {
    return finished(first_s - sent_s, output_tokens > 1 ? (finish_s - first_s) / double(output_tokens - 1) : std::nan(""));
  }
  std::int64_t batch_requests() const { return batch_; }
  std::int64_t min_requests() const { return min_; }
  std::int64_t completions() const { return std::int64_t(ttft_.size()); }
  bool precise() const { return precise_; }
  // At the last check: relative 95 % half-widths of mean TTFT, mean ITL, p90 TTFT, p90 ITL
  // (half-width / point estimate; 0 where the figure is 0 or absent). Empty before the first check.
  const std::vector<double>& half_widths() const { return half_; }

 private:
  bool check();
  std::int64_t batch_, min_;
  std::vector<double> ttft_, itl_;   // every measured request's, in completion order
  std::vector<double> sorted_[2];   // TTFT's and ITL's (NaN left out) of the first checked_ requests, ascending
  std::size_t checked_ = 0;
  std::vector<double> half_;
  bool precise_ = false;
};

}  // namespace servesim::sim
