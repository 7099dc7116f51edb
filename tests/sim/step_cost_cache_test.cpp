// Step-cost models shared between the deployments of one study (sim/topology/step_cost_cache.hpp):
// one model per (GPU, precisions, parallelism, kernel tables, factors), returning the bits a model
// built for one deployment alone returns, and deployments running on shared models giving the
// results of deployments that build their own.
#include <gtest/gtest.h>

#include "hwmodels/catalog.hpp"
#include "models/model_spec.hpp"
#include "sim/topology/deployment.hpp"
#include "sim/topology/step_cost_cache.hpp"

namespace servesim::sim {
namespace {

DeploymentSpec spec(std::shared_ptr<StepCostCache> cache) {
  DeploymentSpec s;
  s.model = &models::model("llama-3.1-8b");
  s.instance = &hw::Catalog::global().instance("p5.48xlarge");
  s.gpu = &hw::Catalog::global().gpu(s.instance->gpu);
  s.weights = hw::Precision::fp8;
  s.kv_dtype = hw::Precision::fp8;
  s.step_costs = std::move(cache);
  return s;
}

workloads::WorkloadConfig closed(int clients) {
  workloads::WorkloadConfig w;
  w.arrival = workloads::Arrival::concurrency;
  w.concurrency = clients;
  w.requests = 4 * clients;
  w.warmup_requests = clients;
  w.isl = workloads::LengthDist::fixed_at(700);
  w.osl = workloads::LengthDist::fixed_at(60);
  return w;
}

TEST(StepCostCache, OneModelPerInputsWithTheBitsOfAFreshOne) {
  StepCostCache cache;
  const auto& m = models::model("llama-3.1-8b");
  const auto& g = hw::Catalog::global().gpu("h100");
  const hw::KernelTables tables;
  const auto a = cache.get(m, g, hw::Precision::fp8, {2, 1, 1}, hw::Precision::fp8, tables, {});
  EXPECT_EQ(cache.get(m, g, hw::Precision::fp8, {2, 1, 1}, hw::Precision::fp8, tables, {}), a);   // the same object
  EXPECT_NE(cache.get(m, g, hw::Precision::fp8, {1, 1, 1}, hw::Precision::fp8, tables, {}), a);   // another TP
  EXPECT_NE(cache.get(m, g, hw::Precision::bf16, {2, 1, 1}, hw::Precision::bf16, tables, {}), a); // another precision
  hw::KernelScales slower;
  slower.gemm = 1.25;
  EXPECT_NE(cache.get(m, g, hw::Precision::fp8, {2, 1, 1}, hw::Precision::fp8, tables, slower), a);
  EXPECT_EQ(cache.size(), 4u);
  const auto fresh = models::make_step_cost(m, g, hw::Precision::fp8, {2, 1, 1}, hw::Precision::fp8, tables, {});
  models::StepBatch b;
  b.decode_seqs = 24;
  b.decode_context_tokens = 24 * 900;
  b.prefill_seqs = 1;
  b.prefill_tokens = 512;
  b.prefill_attention_pairs = 512.0 * 513 / 2;
  EXPECT_EQ(a->seconds(b), fresh->seconds(b));
  EXPECT_EQ(a->provenance(), fresh->provenance());
}

// An aggregated TP2 replica under three max_num_seqs and a 1P1D with TP1 prefill and TP2 decode
// need two step models between them (TP1, TP2), and run as deployments that build their own.
TEST(StepCostCache, DeploymentsOnSharedModelsGiveTheResultsOfOwnModels) {
  auto cache = std::make_shared<StepCostCache>();
  TopologyChoice agg;
  agg.agg = {2, 1, 1};
  agg.replicas = 1;
  for (int seqs : {16, 64, 256}) {
    DeploymentSpec shared = spec(cache), own = spec(nullptr);
    shared.engine.max_num_seqs = own.engine.max_num_seqs = seqs;
    const auto a = Deployment(agg, shared).run(closed(32));
    const auto b = Deployment(agg, own).run(closed(32));
    EXPECT_EQ(a.summary.ttft_ms.p50, b.summary.ttft_ms.p50);
    EXPECT_EQ(a.summary.itl_ms.p90, b.summary.itl_ms.p90);
    EXPECT_EQ(a.end_s, b.end_s);
  }
  EXPECT_EQ(cache->size(), 1u);
  TopologyChoice pd;
  pd.kind = TopologyChoice::Kind::disaggregated;
  pd.prefill = pd.encode = {1, 1, 1};
  pd.decode = {2, 1, 1};
  const auto a = Deployment(pd, spec(cache)).run(closed(16));
  const auto b = Deployment(pd, spec(nullptr)).run(closed(16));
  EXPECT_EQ(a.summary.ttft_ms.p50, b.summary.ttft_ms.p50);
  EXPECT_EQ(a.summary.itl_ms.p90, b.summary.itl_ms.p90);
  EXPECT_EQ(a.end_s, b.end_s);
  EXPECT_EQ(a.transfers.handoffs, b.transfers.handoffs);
  EXPECT_EQ(cache->size(), 2u);   // the TP1 prefill model added; the TP2 decode one shared with the replicas
}

}  // namespace
}  // namespace servesim::sim
