// The gaps between streamed tokens (sim/token_gaps.hpp): the histogram's figures against numpy's
// percentiles of a list written out by hand, and the engine's gaps against its steps summed by
// hand: a lone request's every gap is one decode step, and a prompt's prefill chunks stall the
// decode that shares their steps.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "sim/engine/cluster.hpp"
#include "sim/engine/metrics_sink.hpp"
#include "sim/metrics.hpp"
#include "sim/token_gaps.hpp"
#include "tests/sim/flat_cost.hpp"
#include "workloads/workload.hpp"

namespace servesim::sim {
namespace {

TEST(TokenGaps, PercentilesAreNumpysOverTheGaps) {
  // 90 gaps of 10 ms and 10 of 100 ms. numpy.percentile (linear): p50 at position 49.5 -> 10 ms;
  // p90 at 89.1, between the 90th (10 ms) and 91st (100 ms) smallest: 10 + 0.1 x 90 = 19 ms; p99
  // at 98.01 -> 100 ms. Mean 19 ms exactly.
  TokenGaps g;
  g.add(0.010, 60);
  g.add(0.100, 10);
  g.add(0.010, 30);
  const Stats s = g.stats_ms();
  EXPECT_EQ(s.count, 100);
  EXPECT_NEAR(s.avg, 19.0, 1e-9);
  EXPECT_DOUBLE_EQ(s.min, 10.0);
  EXPECT_DOUBLE_EQ(s.max, 100.0);
  EXPECT_NEAR(s.p50, 10.0, 10.0 * 5e-4);   // a bin's middle: within 0.05 %
  EXPECT_NEAR(s.p90, 19.0, 19.0 * 5e-4);
  EXPECT_NEAR(s.p99, 100.0, 100.0 * 5e-4);
}

TEST(TokenGaps, AnEmptyRunHasNoFigures) {
  const Stats s = TokenGaps{}.stats_ms();
  EXPECT_EQ(s.count, 0);
  EXPECT_TRUE(std::isnan(s.p50));
  EXPECT_TRUE(std::isnan(s.avg));
}

// Requests at set times (an open loop of a list).
class ListWorkload final : public workloads::Workload {
 public:
  explicit ListWorkload(std::vector<workloads::RequestSpec> r) : r_(std::move(r)) {}
  std::optional<workloads::RequestSpec> next() override {
    if (i_ == r_.size()) return std::nullopt;
    return r_[i_++];
  }
  int concurrency() const override { return 0; }
  std::int64_t warmup_requests() const override { return 0; }
  std::int64_t total_requests() const override { return static_cast<std::int64_t>(r_.size()); }

 private:
  std::vector<workloads::RequestSpec> r_;
  std::size_t i_ = 0;
};

workloads::RequestSpec spec(std::uint64_t id, double at_s, std::int64_t input, std::int64_t output) {
  workloads::RequestSpec s;
  s.id = id;
  s.arrival_s = at_s;
  s.input_tokens = input;
  s.output_tokens = output;
  return s;
}

// A step of 4 ms + 20 us a prefill token + 50 us a decoding sequence: sums by hand.
class ChunkCost : public models::StepCostModel {
 public:
  double seconds(const models::StepBatch& b) const override {
    return 0.004 + 2e-5 * double(b.prefill_tokens) + 5e-5 * b.decode_seqs;
  }
  double encoder_seconds(int) const override { return 0; }
  models::StepTime breakdown(const models::StepBatch& b) const override { return {seconds(b), {}}; }
  std::string provenance() const override { return "chunk test cost"; }
};

Stats gaps_of(const models::StepCostModel& cost, const EngineConfig& cfg, workloads::Workload& w) {
  ClusterShape shape;
  shape.kv_blocks = 10000;
  AggregatedCluster c(shape, cfg, cost);
  MetricsCollector m;
  MetricsSink sink(m);
  c.run(w, sink);
  return m.summary().token_gap_ms;
}

Stats gaps_of(const models::StepCostModel& cost, const EngineConfig& cfg, std::vector<workloads::RequestSpec> r) {
  ListWorkload w(std::move(r));
  return gaps_of(cost, cfg, w);
}

TEST(TokenGaps, ALoneRequestsGapsAreItsDecodeSteps) {
  // 10 ms steps, no host time: a 50-token answer streams 48 gaps after its second token, each one
  // step; three such requests one after another, 144.
  EngineConfig cfg;
  cfg.step_overhead_s = 0;
  cfg.step_overhead_per_seq_s = 0;
  testing::FlatCost cost;
  const Stats s = gaps_of(cost, cfg, {spec(1, 0, 100, 50), spec(2, 1.0, 100, 50), spec(3, 2.0, 100, 50)});
  EXPECT_EQ(s.count, 3 * 48);
  EXPECT_NEAR(s.min, 10.0, 1e-9);
  EXPECT_NEAR(s.max, 10.0, 1e-9);
  EXPECT_NEAR(s.p99, 10.0, 1e-9);
}

TEST(TokenGaps, TheWarmUpsGapsAreNotCounted) {
  // One client, 5 warm-up and 10 measured requests of 20 tokens: 10 x 18 gaps.
  EngineConfig cfg;
  testing::FlatCost cost;
  workloads::WorkloadConfig c;
  c.concurrency = 1;
  c.requests = 10;
  c.warmup_requests = 5;
  c.isl = workloads::LengthDist::fixed_at(50);
  c.osl = workloads::LengthDist::fixed_at(20);
  auto w = workloads::make_workload(c);
  EXPECT_EQ(gaps_of(cost, cfg, *w).count, 10 * 18);
}

TEST(TokenGaps, APromptsPrefillChunksStallTheDecodeThatSharesTheirSteps) {
  // Request 1 decodes 100 tokens; request 2's 3,000-token prompt arrives at 0.2 s and prefills in
  // chunks under a 1,024-token budget beside request 1's decode (1,023 + 1,023 + 954 tokens). Each
  // of those three steps is one of request 1's gaps: 4 ms + 20 us x 1,023 + 50 us = 24.51 ms (twice)
  // and 4 + 19.08 + 0.05 = 23.13 ms; its other gaps are plain decode steps of 4.05 ms, or 4.1 ms
  // beside request 2's decode. Request 2's 2-token answer has no gap after its second token. aiperf's
  // ITL of request 1, (latency - TTFT) / 99, hides them: (96 x 4.05 + 2 x 24.51 + 23.13 + ...) / 99 is
  // under 5 ms.
  EngineConfig cfg;
  cfg.step_overhead_s = 0;
  cfg.step_overhead_per_seq_s = 0;
  cfg.max_num_batched_tokens = 1024;
  ChunkCost cost;
  const Stats s = gaps_of(cost, cfg, {spec(1, 0, 10, 100), spec(2, 0.2, 3000, 2)});
  EXPECT_EQ(s.count, 98);
  EXPECT_NEAR(s.max, 4.0 + 0.02 * 1023 + 0.05, 1e-9);
  EXPECT_NEAR(s.min, 4.05, 1e-9);
  EXPECT_NEAR(s.p50, 4.05, 4.05 * 5e-4);
  // Sorted: 94 x 4.05, 4.1, 23.13, 24.51, 24.51. p99 at position 0.99 x 97 = 96.03: the 97th and
  // 98th smallest, both 24.51 ms; p95 at 92.15: 4.05 ms.
  EXPECT_NEAR(s.p99, 24.51, 24.51 * 5e-4);
  EXPECT_NEAR(s.p95, 4.05, 4.05 * 5e-4);
}

}  // namespace
}  // namespace servesim::sim
