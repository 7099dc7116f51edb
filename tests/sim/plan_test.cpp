// The SLO capacity planner on a sweep built by hand, and its points against `simulate`.
#include <gtest/gtest.h>

#include "common/error.hpp"
#include "sim/api/api.hpp"
#include "sim/simulate.hpp"
#include "sim/studies/plan.hpp"
#include "sim/topology/deployment.hpp"

namespace servesim::sim {
namespace {

SweepRow row(const std::string& topo, int c, double ttft_p50, double itl_p50, double tps) {
  SweepRow r;
  r.topology = topo;
  r.concurrency = c;
  r.ttft_ms[0] = ttft_p50;
  r.ttft_ms[1] = ttft_p50 * 1.5;
  r.ttft_ms[2] = ttft_p50 * 2;
  r.itl_ms[0] = itl_p50;
  r.itl_ms[1] = itl_p50 * 1.2;
  r.itl_ms[2] = itl_p50 * 1.4;
  r.output_tps = tps;
  return r;
}

std::vector<SweepRow> sweep() {
  return {
      // aggregated: TTFT crosses 600 ms first (at 64), ITL still fine.
      row("aggregated", 16, 300, 40, 300), row("aggregated", 32, 500, 60, 560),
      row("aggregated", 64, 900, 80, 950),
      // disaggregated: TTFT fine, ITL crosses 100 ms at 128.
      row("disaggregated-1p1d", 32, 200, 50, 600), row("disaggregated-1p1d", 64, 250, 90, 1100),
      row("disaggregated-1p1d", 128, 300, 130, 1500),
  };
}

std::vector<TopologyUnit> units() {
  return {{"aggregated", 16, 2, 8, 63.3}, {"disaggregated-1p1d", 16, 2, 8, 63.3}};
}

TEST(Plan, ReplicasAndLimitingSideByHand) {
  const PlanSlo slo{600, 100, Statistic::p50, 10000};
  const auto rows = plan_capacity(sweep(), units(), slo);
  ASSERT_EQ(rows.size(), 2u);
  // aggregated: rightmost under both lines is 32 at 560 tok/s; ceil(10000 / 560) = 18 copies of
  // 16 GPUs = 288 GPUs on 36 instances = $2278.80/h; TTFT breaks next.
  EXPECT_EQ(rows[0].max_concurrency, 32);
  EXPECT_DOUBLE_EQ(rows[0].tps_per_replica, 560);
  EXPECT_EQ(rows[0].replicas, 18);
  EXPECT_EQ(rows[0].gpus, 288);
  EXPECT_EQ(rows[0].instances, 36);
  EXPECT_NEAR(*rows[0].usd_per_hour, 36 * 63.3, 1e-9);
  EXPECT_EQ(rows[0].limited_by, LimitedBy::ttft);
  // disaggregated: 64 at 1100 tok/s -> ceil(9.09) = 10 copies, 160 GPUs; ITL breaks next.
  EXPECT_EQ(rows[1].max_concurrency, 64);
  EXPECT_EQ(rows[1].replicas, 10);
  EXPECT_EQ(rows[1].gpus, 160);
  EXPECT_EQ(rows[1].limited_by, LimitedBy::itl);
  EXPECT_EQ(advice(LimitedBy::itl), "ITL limits it: add decode capacity");
}

// A TTFT broken where a worker's KV cache was full asks for KV memory, not prefill: the point at 64
// clients (TTFT over the line) had a full cache; an ITL break does not read it.
TEST(Plan, ATtftBrokenAtAFullKvCacheAsksForMemory) {
  auto rows_in = sweep();
  rows_in[2].kv_full = true;   // aggregated at 64: TTFT 900 ms > 600
  rows_in[5].kv_full = true;   // disaggregated at 128: ITL breaks, TTFT does not
  const auto rows = plan_capacity(rows_in, units(), PlanSlo{600, 100, Statistic::p50, 10000});
  EXPECT_TRUE(rows[0].kv_full);
  EXPECT_EQ(rows[0].to_json()["advice"],
            "TTFT limits it: a KV cache is full and prompts wait for room: add KV memory per worker (more GPUs per worker, "
            "an FP8 KV cache where it is 16-bit)");
  EXPECT_FALSE(rows[1].kv_full);
  EXPECT_EQ(rows[1].to_json()["advice"], "ITL limits it: add decode capacity");
  EXPECT_EQ(advice(LimitedBy::ttft), "TTFT limits it: add prefill capacity");
  // A sweep row reads it from the run: a replica whose peak KV use reached 99 % of its blocks.
  Summary s;
  s.replicas.resize(2);
  s.replicas[1].max_kv_utilization = 0.995;
  EXPECT_TRUE(sweep_row("aggregated", 8, s, 8).kv_full);
  s.replicas[1].max_kv_utilization = 0.95;
  EXPECT_FALSE(sweep_row("aggregated", 8, s, 8).kv_full);
  EXPECT_TRUE(sweep_row_from_json(to_json(rows_in[2]), "test").kv_full);
}

// With --gap-ms the ITL side also reads the gap between streamed tokens: an aggregated copy whose
// gap at the SLO statistic is a prompt's prefill step (120 ms at 32 clients, mean ITL 60 ms) stops at
// 16 clients; disaggregated, whose gaps are decode steps, keeps 64. The advice names the stall.
TEST(Plan, AGapSloStopsTheCopyWhosePrefillStallsItsDecodes) {
  auto rows_in = sweep();
  for (auto& r : rows_in)
    for (int k = 0; k < 3; ++k) r.gap_ms[k] = r.itl_ms[k] * 1.1;   // gaps of decode steps
  rows_in[1].gap_ms[0] = 120;   // aggregated at 32: prefill steps among its gaps
  PlanSlo slo{600, 100, Statistic::p50, 10000};
  slo.gap_ms = 100;
  const auto rows = plan_capacity(rows_in, units(), slo);
  EXPECT_EQ(rows[0].max_concurrency, 16);
  EXPECT_EQ(rows[0].replicas, 34);   // ceil(10000 / 300)
  EXPECT_EQ(rows[0].limited_by, LimitedBy::itl);
  EXPECT_TRUE(rows[0].gap_only);
  EXPECT_EQ(rows[0].to_json()["advice"],
            "the token gap limits it: prompts' prefill steps stall the decodes: disaggregate prefill, or chunk prompts "
            "smaller (--max-num-batched-tokens)");
  EXPECT_EQ(rows[1].max_concurrency, 64);   // 99 ms of gap at 64 clients (90 x 1.1) passes; 143 at 128 does not
  EXPECT_EQ(rows[1].limited_by, LimitedBy::itl);
  EXPECT_FALSE(rows[1].gap_only);           // its mean ITL broke too (130 ms)
  // Without a limit the gap is not read.
  slo.gap_ms = 0;
  EXPECT_EQ(plan_capacity(rows_in, units(), slo)[0].max_concurrency, 32);
  // A sweep row carries the run's gap percentiles; they survive the JSON a remote point returns.
  Summary s;
  s.token_gap_ms.p50 = 11;
  s.token_gap_ms.p90 = 12;
  s.token_gap_ms.p99 = 95;
  const SweepRow r = sweep_row_from_json(to_json(sweep_row("aggregated", 8, s, 8)), "test");
  EXPECT_EQ(r.gap_ms[0], 11);
  EXPECT_EQ(r.gap_ms[2], 95);
  slo.gap_ms = -1;
  EXPECT_THROW(slo.validate(), Error);
}

TEST(Plan, StatisticMovesTheLines) {
  // At p99 (2x TTFT, 1.4x ITL): aggregated 16 -> 600 ms passes, 32 -> 1000 fails on TTFT.
  // disaggregated 32 -> ITL 70 passes, 64 -> ITL 126 fails.
  const PlanSlo slo{600, 100, Statistic::p99, 10000};
  const auto rows = plan_capacity(sweep(), units(), slo);
  EXPECT_EQ(rows[0].max_concurrency, 16);
  EXPECT_EQ(rows[0].replicas, 34);   // ceil(10000 / 300)
  EXPECT_EQ(rows[1].max_concurrency, 32);
  EXPECT_EQ(rows[1].limited_by, LimitedBy::itl);
}

TEST(Plan, NothingUnderTheLinesAndNothingAbove) {
  const PlanSlo tight{100, 100, Statistic::p50, 1000};
  const auto rows = plan_capacity(sweep(), units(), tight);
  EXPECT_FALSE(rows[0].feasible);
  EXPECT_EQ(rows[0].replicas, 0);
  EXPECT_EQ(rows[0].limited_by, LimitedBy::ttft);   // 300 ms at the lowest point
  const PlanSlo loose{5000, 500, Statistic::p50, 1000};
  const auto all = plan_capacity(sweep(), units(), loose);
  EXPECT_EQ(all[1].max_concurrency, 128);
  EXPECT_EQ(all[1].limited_by, LimitedBy::none);
  EXPECT_EQ(all[1].replicas, 1);
}

TEST(Plan, SmallUnitsPackIntoInstances) {
  // A 4-GPU copy on 8-GPU instances: 3 copies = 12 GPUs = 2 instances.
  const std::vector<SweepRow> s = {row("agg-tp4", 8, 100, 20, 400)};
  const auto rows = plan_capacity(s, {{"agg-tp4", 4, 1, 8, std::nullopt}}, {600, 100, Statistic::p50, 1000});
  EXPECT_EQ(rows[0].replicas, 3);
  EXPECT_EQ(rows[0].instances, 2);
  EXPECT_FALSE(rows[0].usd_per_hour.has_value());
}

TEST(Plan, BadInputIsAnError) {
  EXPECT_THROW(plan_capacity(sweep(), {{"nope", 8, 1, 8, {}}}, {600, 100, Statistic::p50, 1}), Error);
  EXPECT_THROW(plan_capacity(sweep(), units(), {0, 100, Statistic::p50, 1}), Error);
  EXPECT_THROW(parse_statistic("p75"), Error);
  EXPECT_EQ(parse_statistic("P90"), Statistic::p90);
}

TEST(Plan, SweepColumnsCarryWhatThePlotReads) {
  const auto c = sweep_columns(sweep());
  for (const char* k : {"topology", "concurrency", "ttft_p50_ms", "ttft_p90_ms", "ttft_p99_ms", "itl_p50_ms",
                        "itl_p90_ms", "itl_p99_ms", "output_tps_per_gpu", "output_tps_per_user"}) {
    ASSERT_TRUE(c.contains(k)) << k;
    EXPECT_EQ(c[k].size(), 6u) << k;
  }
}

}  // namespace
}  // namespace servesim::sim

// `plan` runs the engine `simulate` runs (the newest vLLM profile: async scheduling, host costs,
// the API-server path, the closed-loop spread): one of its sweep points equals `simulate` of the
// same deployment, router, seed and request counts (the steady-state rule: clients started at
// spread phases, a warm-up that ends when the loop is steady, at most 32 C, without aiperf's phase
// barrier, then measured until precise, max(1000, 8 C) at most).
namespace servesim::sim {
namespace {

TEST(Plan, PointEqualsSimulateOfTheSameDeployment) {
  api::PlanArgs a;
  a.model = "llama-3.1-8b";
  a.instance = "p5en.48xlarge";
  a.nodes = 1;
  a.precision = "fp8";
  a.tp = 1;
  a.topology = "agg";
  a.concurrency = "16";
  a.isl = 1000;
  a.osl = 100;
  a.ttft_ms = 600;
  a.itl_ms = 100;
  a.target_tps = 1000;
  const nlohmann::json row = api::plan_point(a, 0);
  nlohmann::json j = {{"model", "llama-3.1-8b"}, {"gpu", "h200"}, {"gpus", 8}, {"tp", 1}, {"precision", "fp8"},
                      {"router", "least_outstanding"}, {"seed", 0},
                      {"topology", {{"kind", "agg"}, {"instance", "p5en.48xlarge"}, {"nodes", 1}}},
                      {"frontend", {{"client", {{"warmup_barrier", false}}}}},
                      {"workload", {{"concurrency", 16}, {"requests", 1000}, {"warmup_requests", 512}, {"warmup_until_steady", true}, {"measure_until_precise", true}, {"isl", 1000}, {"osl", 100}}}};
  const SimResult r = simulate(parse_scenario(j.dump(), "test"));
  EXPECT_DOUBLE_EQ(row["ttft_ms"][0].get<double>(), r.summary.ttft_ms.p50);
  EXPECT_DOUBLE_EQ(row["itl_ms"][0].get<double>(), r.summary.itl_ms.p50);
  EXPECT_DOUBLE_EQ(row["output_tps"].get<double>(), r.summary.steady_output_tps);   // a capacity point reads the steady rate
  EXPECT_TRUE(r.engine.async_scheduling);
  EXPECT_GT(r.engine.closed_loop_osl_spread_tokens, 0);
}

}  // namespace
}  // namespace servesim::sim
