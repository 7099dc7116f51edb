// The scheduler's block pool for a hybrid (Mamba + attention) model, as vLLM allocates it:
// attention blocks as the sequence grows, 1 + K state blocks per Mamba group while a request
// runs, all freed on finish or preemption. Figures from the worked example (Nemotron 3 Super,
// TP2, FP8 KV, 9.5 GiB per GPU): 597 usable blocks of 8320 tokens, 5 Mamba groups.
#include <gtest/gtest.h>

#include <algorithm>

#include "hwmodels/catalog.hpp"
#include "models/kv_cache.hpp"
#include "models/model_spec.hpp"
#include "sim/engine/cluster.hpp"
#include "sim/metrics.hpp"
#include "sim/scheduler/vllm_scheduler.hpp"
#include "workloads/workload.hpp"

namespace servesim::sim {
namespace {

class FlatCost : public models::StepCostModel {
 public:
  double seconds(const models::StepBatch& b) const override { return 0.01 + 1e-6 * double(b.prefill_tokens); }
  double encoder_seconds(int) const override { return 0; }
  models::StepTime breakdown(const models::StepBatch& b) const override { return {seconds(b), {}}; }
  std::string provenance() const override { return "flat test cost"; }
};

struct Sink : RequestSink {
  std::int64_t finished = 0, output_tokens = 0;
  int max_seqs = 0;
  void on_finished(const Request& r) override {
    ++finished;
    output_tokens += r.generated;
  }
  void on_step(int, double, double, int seqs, double) override { max_seqs = std::max(max_seqs, seqs); }
};

workloads::WorkloadConfig closed(int clients, std::int64_t requests, std::int64_t isl, std::int64_t osl) {
  workloads::WorkloadConfig w;
  w.arrival = workloads::Arrival::concurrency;
  w.concurrency = clients;
  w.requests = requests;
  w.isl = workloads::LengthDist::fixed_at(isl);
  w.osl = workloads::LengthDist::fixed_at(osl);
  w.seed = 5;
  return w;
}

struct Result {
  Sink sink;
  std::int64_t peak = 0, capacity = 0, preemptions = 0;
};

Result run(const models::KvCacheLayout& kv, const workloads::WorkloadConfig& w, int spec_tokens = 0) {
  FlatCost cost;
  EngineConfig cfg;
  cfg.block_size = kv.block_size;
  cfg.num_speculative_tokens = spec_tokens;
  ClusterShape shape;
  shape.kv_blocks = kv.usable_blocks();
  shape.kv_demand = kv.demand;
  AggregatedCluster c(shape, cfg, cost);
  Result r;
  auto workload = workloads::make_workload(w);
  c.run(*workload, r.sink);
  const auto& s = c.workers()[0].scheduler();
  r.peak = s.pool().peak_used();
  r.capacity = s.pool().capacity();
  r.preemptions = s.preemptions();
  return r;
}

models::KvCacheLayout example(int spec_tokens = 0) {
  return models::kv_cache_layout(models::model("nemotron-3-super"), {2, 1, 1}, hw::Precision::fp8, spec_tokens, 16,
                                 10'200'547'328.0);
}

TEST(HybridPool, RunsExactlyTheSequencesTheLayoutHolds) {
  // 9000-token prompts and 216 output tokens: 9216 tokens, 2 attention + 5 state blocks each
  // from the second prefill chunk on; 597 / 7 = 85 run at once, never more, no preemption.
  const auto kv = example();
  ASSERT_EQ(kv.max_requests(9216), 85);
  const Result r = run(kv, closed(120, 300, 9000, 216));
  EXPECT_EQ(r.sink.finished, 300);
  EXPECT_EQ(r.sink.output_tokens, 300 * 216);
  EXPECT_EQ(r.sink.max_seqs, 85);
  EXPECT_EQ(r.preemptions, 0);
  EXPECT_LE(r.peak, r.capacity);
  EXPECT_GE(r.peak, 85 * 7 - 2);  // full but for the blocks no request fits in
}

TEST(HybridPool, StateBlocksAreFreedWhenRequestsFinish) {
  // 32 clients of 8192 + 1024 tokens (the acceptance shape) fit 85 at once: all 32 run together.
  const auto kv = example();
  const Result r = run(kv, closed(32, 96, 8192, 1024));
  EXPECT_EQ(r.sink.finished, 96);
  EXPECT_EQ(r.sink.max_seqs, 32);
  EXPECT_EQ(r.preemptions, 0);
  EXPECT_EQ(r.peak, 32 * 7);  // 2 attention + 5 state blocks each, nothing leaked across 3 rounds
}

TEST(HybridPool, MtpHoldsOnePlusKStateBlocksPerGroup) {
  // K = 1: 12 blocks per 9216-token request, 529 usable: 44 at once.
  const auto kv = example(1);
  ASSERT_EQ(kv.max_requests(9216), 44);
  const Result r = run(kv, closed(60, 150, 9000, 216), 1);
  EXPECT_EQ(r.sink.finished, 150);
  EXPECT_EQ(r.sink.output_tokens, 150 * 216);
  EXPECT_EQ(r.sink.max_seqs, 44);
  EXPECT_LE(r.peak, r.capacity);
}

TEST(HybridPool, PreemptionFreesStateBlocksToo) {
  // Sequences that cross into a third attention block (8320 * 2 < 17000) outgrow the pool:
  // the scheduler preempts by recompute and every token still comes out once.
  const auto kv = example();
  const Result r = run(kv, closed(100, 200, 8000, 9000));
  EXPECT_EQ(r.sink.finished, 200);
  EXPECT_EQ(r.sink.output_tokens, 200 * 9000);
  EXPECT_GT(r.preemptions, 0);
  EXPECT_LE(r.peak, r.capacity);
}

}  // namespace
}  // namespace servesim::sim
