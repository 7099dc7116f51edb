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

}  // namespace servesim::sim
