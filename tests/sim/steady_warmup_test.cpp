// The closed loop's steady warm-up (sim/engine/steady_warmup.hpp): the rule on round means a
// person can follow, the clients' spread start, and a closed loop whose measured requests after
// it read what a run ten times as long reads.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "common/error.hpp"
#include "sim/engine/steady_warmup.hpp"
#include "sim/scenario.hpp"
#include "sim/simulate.hpp"
#include "workloads/workload.hpp"

namespace servesim::sim {
namespace {

// Feeds rounds of `per_round` completions, every one of round j with latency lat[j] and TTFT
// ttft[j]; returns the completion count at which the rule first says steady (0: never).
std::int64_t steady_at(int clients, const std::vector<double>& lat, const std::vector<double>& ttft) {
  SteadyWarmup s(clients);
  for (std::size_t j = 0; j < lat.size(); ++j)
    for (std::int64_t i = 0; i < s.round_requests(); ++i)
      if (s.finished(lat[j], ttft[j])) return s.completions();
  return 0;
}

TEST(SteadyWarmup, RoundsAreTheClientsOrThirtyTwoCompletions) {
  EXPECT_EQ(SteadyWarmup(128).round_requests(), 128);
  EXPECT_EQ(SteadyWarmup(16).round_requests(), 32);
  EXPECT_EQ(SteadyWarmup(1).round_requests(), 32);
}

TEST(SteadyWarmup, AFlatLoopIsSteadyAfterTheFewestRounds) {
  // Every round alike: steady at the end of round 4 (kMinRounds), 4 x 32 completions at 16 clients.
  EXPECT_EQ(steady_at(16, std::vector<double>(10, 4.0), std::vector<double>(10, 0.1)), 4 * 32);
  EXPECT_EQ(steady_at(128, std::vector<double>(10, 4.0), std::vector<double>(10, 0.1)), 4 * 128);
}

TEST(SteadyWarmup, TheStartUpTrainKeepsItWarmingUp) {
  // TTFT 1.0, 0.2, then 0.1 s: at round 4 the window (0.2, 0.1, 0.1) has mean 0.133 and 0.2 is
  // 50 % off it (band 10 %); at round 5 the window is 0.1 x 3: steady after 5 rounds.
  EXPECT_EQ(steady_at(128, std::vector<double>(10, 4.0), {1.0, 0.2, 0.1, 0.1, 0.1, 0.1, 0.1, 0.1, 0.1, 0.1}), 5 * 128);
  // TTFT still falling by 10 % a round: (0.1, 0.09, 0.081) has mean 0.0903, and 0.1 is 10.7 %
  // above it: never steady while the fall lasts.
  std::vector<double> falling{1.0};
  for (int j = 1; j < 10; ++j) falling.push_back(falling.back() * 0.9);
  EXPECT_EQ(steady_at(128, std::vector<double>(10, 4.0), falling), 0);
}

TEST(SteadyWarmup, LatencyMustHoldWithinTwoPercent) {
  // Latency 4.0 / 4.2 s by turns: the window's mean is 4.067 or 4.133, and every round is 1.6 %
  // or 3.2 % off it; a 3.2 % round is always in the window: never steady.
  std::vector<double> lat;
  for (int j = 0; j < 12; ++j) lat.push_back(j % 2 ? 4.2 : 4.0);
  EXPECT_EQ(steady_at(16, lat, std::vector<double>(12, 0.1)), 0);
  // 4.0 / 4.1 s: 0.8 % or 1.6 % off, within 2 %: steady at round 4.
  lat.clear();
  for (int j = 0; j < 12; ++j) lat.push_back(j % 2 ? 4.1 : 4.0);
  EXPECT_EQ(steady_at(16, lat, std::vector<double>(12, 0.1)), 4 * 32);
}

TEST(SteadyWarmup, ClientsStartAtIndependentPhases) {
  workloads::WorkloadConfig c;
  c.concurrency = 1000;
  c.requests = 20;
  c.warmup_requests = 2000;
  c.warmup_until_steady = true;
  c.isl = workloads::LengthDist::fixed_at(10);
  c.osl = workloads::LengthDist::fixed_at(100);
  auto w = workloads::make_workload(c);
  EXPECT_TRUE(w->warmup_until_steady());
  // Each client's first request asks for a uniform 1..100 tokens: mean 50.5, sd 28.9, so the
  // mean of 1,000 is within 3 sd / sqrt(1000) = 2.7 tokens of 50.5; then whole answers.
  double sum = 0;
  for (int k = 0; k < 1000; ++k) {
    const std::int64_t n = w->next()->output_tokens;
    ASSERT_GE(n, 1);
    ASSERT_LE(n, 100);
    sum += double(n);
  }
  EXPECT_NEAR(sum / 1000, 50.5, 2.7);
  for (int k = 0; k < 6; ++k) EXPECT_EQ(w->next()->output_tokens, 100);
  // The warm-up ends after 1,006 sent: 20 measured follow, 1,026 in all.
  w->end_warmup(1006);
  EXPECT_EQ(w->warmup_requests(), 1006);
  EXPECT_EQ(w->total_requests(), 1026);
  int more = 0;
  while (w->next()) ++more;
  EXPECT_EQ(more, 20);
}

TEST(SteadyWarmup, NeedsAClosedLoopWithoutTheBarrier) {
  workloads::WorkloadConfig c;
  c.arrival = workloads::Arrival::poisson;
  c.rate_per_s = 1;
  c.warmup_requests = 10;
  c.warmup_until_steady = true;
  EXPECT_THROW(workloads::validate(c), Error);
  const nlohmann::json j = {{"model", "llama-3.1-8b"}, {"gpu", "h200"}, {"gpus", 1}, {"tp", 1}, {"precision", "fp8"},
                            {"workload", {{"concurrency", 4}, {"requests", 40}, {"warmup_requests", 64}, {"warmup_until_steady", true},
                                          {"isl", 100}, {"osl", 10}}}};
  try {
    parse_scenario(j.dump(), "s.json");
    FAIL() << "a barrier with a steady warm-up was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("warmup_barrier false"), std::string::npos) << e.what();
  }
}

// Llama-3.1-8B FP8 on one H200, 32 clients of 1000 + 200 tokens: the steady warm-up stops well
// short of 32 requests per client, and its 1,000 measured requests read p50 TTFT within 5 % and
// throughput within 2 % of 10,000 measured after 128 rounds of the fixed warm-up; Little's law
// holds on the measured window (clients = throughput x mean latency, within 4 %: the last cycle
// drains with fewer clients, about C / N = 3.2 % of the window).
SimResult closed_loop(bool steady, std::int64_t warmup, std::int64_t requests) {
  nlohmann::json w = {{"concurrency", 32}, {"requests", requests}, {"warmup_requests", warmup}, {"isl", 1000}, {"osl", 200}};
  if (steady) w["warmup_until_steady"] = true;
  const nlohmann::json j = {{"model", "llama-3.1-8b"}, {"gpu", "h200"}, {"gpus", 1}, {"tp", 1}, {"precision", "fp8"},
                            {"frontend", {{"client", {{"warmup_barrier", false}}}}}, {"workload", w}};
  return simulate(parse_scenario(j.dump(), "test"));
}

TEST(SteadyWarmup, MeasuresWhatALongRunMeasures) {
  const SimResult s = closed_loop(true, 32 * 32, 1000);
  const SimResult l = closed_loop(false, 128 * 32, 10000);
  EXPECT_EQ(s.summary.request_count, 1000);
  EXPECT_GE(s.summary.warmup_request_count, 4 * 32);    // at least kMinRounds rounds
  EXPECT_LT(s.summary.warmup_request_count, 12 * 32);   // and far short of the cap (32 per client)
  EXPECT_NEAR(s.summary.ttft_ms.p50, l.summary.ttft_ms.p50, 0.05 * l.summary.ttft_ms.p50);
  EXPECT_NEAR(s.summary.output_token_throughput_per_s, l.summary.output_token_throughput_per_s,
              0.02 * l.summary.output_token_throughput_per_s);
  EXPECT_NEAR(s.summary.request_throughput_per_s * s.summary.request_latency_ms.avg * 1e-3, 32.0, 0.04 * 32);
}

}  // namespace
}  // namespace servesim::sim
