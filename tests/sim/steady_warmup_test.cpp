// The closed loop's steady warm-up (sim/engine/steady_warmup.hpp): the rule on round means a
// person can follow, the clients' spread start, and a closed loop whose measured requests after
// it read what a run ten times as long reads.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "common/error.hpp"
#include "common/splitmix.hpp"
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

// The measured phase's length rule (MeasuredPrecision): numbers a person can check by hand.
TEST(MeasuredPrecision, MinimumIsTwoHundredTenBatchesOrTheDrainBound) {
  EXPECT_EQ(PrecisionRule::batch_requests(1), 20);
  EXPECT_EQ(PrecisionRule::batch_requests(64), 64);
  EXPECT_EQ(PrecisionRule::min_requests(1, 1000), 200);    // one client: no drain term
  EXPECT_EQ(PrecisionRule::min_requests(2, 1000), 200);    // 2 x 1000 / (2 + 10) = 166.7
  EXPECT_EQ(PrecisionRule::min_requests(8, 1000), 445);    // 8 x 1000 / (8 + 10) = 444.4
  EXPECT_EQ(PrecisionRule::min_requests(32, 1000), 762);   // 32 x 1000 / 42 = 761.9
  EXPECT_EQ(PrecisionRule::min_requests(128, 1024), 1280); // ten rounds of 128: past the maximum
  EXPECT_DOUBLE_EQ(PrecisionRule::t975(9), 2.262);
  EXPECT_NEAR(PrecisionRule::t975(40), 2.021, 0.001);
  EXPECT_NEAR(PrecisionRule::t975(120), 1.980, 0.001);
}

TEST(MeasuredPrecision, ADeterministicLoopStopsAtTheMinimum) {
  MeasuredPrecision p(1, 1000);
  std::int64_t at = 0;
  for (int i = 0; i < 1000 && !at; ++i)
    if (p.finished(0.030, 0.005)) at = p.completions();
  EXPECT_EQ(at, 200);
  ASSERT_EQ(p.half_widths().size(), 4u);
  for (double h : p.half_widths()) EXPECT_LE(h, 1e-12);   // zero but for rounding
}

TEST(MeasuredPrecision, ANoisyLoopRunsLongerAndStopsWithinTheTolerance) {
  // TTFT uniform in 20..60 ms (sd 11.5 ms, 29 % of the mean): a batch of 20 has a mean of sd
  // 2.6 ms, so ten batches give a half-width of about 2.26 x 2.6 / sqrt(10) = 1.9 ms, 4.6 % of
  // 40 ms; 2 % needs about (4.6 / 2)^2 x 10 = 53 batches, past the minimum of 200 requests.
  std::uint64_t k = 0;
  const auto uniform = [&k] { return unit_interval(splitmix64(++k)); };
  MeasuredPrecision p(1, 100000);
  std::int64_t at = 0;
  for (int i = 0; i < 100000 && !at; ++i)
    if (p.finished(0.020 + 0.040 * uniform(), 0.005 * (1 + 0.001 * uniform()))) at = p.completions();
  EXPECT_GT(at, 600);
  EXPECT_LT(at, 2000);
  EXPECT_LE(p.half_widths()[0], PrecisionRule::kTtftTolerance);
  EXPECT_LE(p.half_widths()[2], PrecisionRule::kTtftTolerance);
  EXPECT_LE(p.half_widths()[1], PrecisionRule::kTolerance);
  EXPECT_LE(p.half_widths()[3], PrecisionRule::kTolerance);
  // TTFT uniform in 0..100 ms: 1,000 requests (50 batches) give a half-width of about
  // 2.01 x 28.9 / sqrt(20) / sqrt(50) = 1.8 ms, 3.7 % of 50 ms: it is still measuring at its
  // maximum, where the workload stops it.
  MeasuredPrecision never(1, 1000);
  bool stopped = false;
  for (int i = 0; i < 1000; ++i) stopped = stopped || never.finished(0.1 * uniform(), 0.005);
  EXPECT_FALSE(stopped);
}

// The rule inside a simulation: one client of 1000 + 200 tokens without a frontend is the same
// request again and again, and stops at 200 measured of at most 1,000; lengths that vary
// (normal, sd 400 and 100 tokens) keep it measuring longer.
SimResult precise_loop(int clients, double isl_sd, double osl_sd) {
  nlohmann::json w = {{"concurrency", clients}, {"requests", 1000}, {"warmup_requests", 32 * clients}, {"warmup_until_steady", true},
                      {"measure_until_precise", true}, {"isl", 1000}, {"osl", 200}};
  if (isl_sd > 0) w["isl"] = {{"kind", "normal"}, {"mean", 1000}, {"stddev", isl_sd}};
  if (osl_sd > 0) w["osl"] = {{"kind", "normal"}, {"mean", 200}, {"stddev", osl_sd}};
  const nlohmann::json j = {{"model", "llama-3.1-8b"}, {"gpu", "h200"}, {"gpus", 1}, {"tp", 1}, {"precision", "fp8"},
                            {"frontend", {{"client", {{"warmup_barrier", false}}}}}, {"workload", w}};
  return simulate(parse_scenario(j.dump(), "test"));
}

TEST(MeasuredPrecision, SimulatedLoopsStopWhenPrecise) {
  EXPECT_EQ(precise_loop(1, 0, 0).summary.request_count, 200);
  const std::int64_t noisy = precise_loop(1, 400, 100).summary.request_count;
  EXPECT_GT(noisy, 200);
  EXPECT_LE(noisy, 1000);
}

TEST(MeasuredPrecision, NeedsAClosedLoop) {
  workloads::WorkloadConfig c;
  c.arrival = workloads::Arrival::poisson;
  c.rate_per_s = 1;
  c.measure_until_precise = true;
  EXPECT_THROW(workloads::validate(c), Error);
}

}  // namespace
}  // namespace servesim::sim
