// MoE TP x EP (TensorRT-LLM's moe_tensor_parallel_size x moe_expert_parallel_size, SGLang's --ep-size
// below --tp-size): ep groups of experts, each expert sharded over the group's other tp x dp / ep GPUs.
#include <gtest/gtest.h>

#include <string>

#include "common/error.hpp"
#include "hwmodels/catalog.hpp"
#include "hwmodels/kernel_model.hpp"
#include "models/memory.hpp"
#include "models/model_spec.hpp"
#include "models/step_cost.hpp"
#include "tests/models/step_parts.hpp"

using namespace servesim;
using namespace servesim::models;
using servesim::models::test_util::decode;
using servesim::models::test_util::h200;
using servesim::models::test_util::part;

TEST(MoeTpEp, TheLayoutNamesItsGroups) {
  const Parallelism p{8, 1, 4, 1};
  EXPECT_TRUE(p.hybrid_ep());
  EXPECT_EQ(p.expert_groups(), 4);
  EXPECT_EQ(p.moe_tp(), 2);
  EXPECT_EQ(p.label(), "TP8 EP4 (MoE TP2)");
  const Parallelism dp{1, 1, 2, 4};   // DP4 with MoE TP2 x EP2
  EXPECT_TRUE(dp.hybrid_ep());
  EXPECT_EQ(dp.moe_tp(), 2);
  EXPECT_FALSE((Parallelism{1, 1, 4, 4}).hybrid_ep());   // EP = tp x dp: whole experts
  EXPECT_EQ((Parallelism{8, 1, 1, 1}).moe_tp(), 8);       // EP 1: every expert sharded 8 ways
}

// Whatever the split, a GPU holds 1 / (tp x dp) of the routed-expert weights: TP8 EP1 (every expert
// sharded 8 ways), TP8 EP8 (16 whole experts of Qwen3-235B's 128) and TP8 EP4 (32 experts, each
// half) hold the same bytes.
TEST(MoeTpEp, EveryGpuHoldsItsShareOfTheRoutedExperts) {
  const ModelSpec& m = model("qwen3-235b-a22b");
  EngineMemoryConfig cfg;
  const double tp = plan_memory(m, h200(), hw::Precision::fp8, {8, 1, 1, 1}, cfg).weights.quantized;
  const double ep = plan_memory(m, h200(), hw::Precision::fp8, {8, 1, 8, 1}, cfg).weights.quantized;
  const double both = plan_memory(m, h200(), hw::Precision::fp8, {8, 1, 4, 1}, cfg).weights.quantized;
  EXPECT_DOUBLE_EQ(both, tp);
  EXPECT_DOUBLE_EQ(both, ep);
}

// gpt-oss-120b's expert biases (128 experts; up-projection bias 2 x 2,880 gate + up, down-projection
// bias 2,880; 36 MoE blocks; BF16): a rank holds its experts' biases, the up-projection's sharded
// with the expert. On 4 GPUs: EP4 32 x (5,760 + 2,880) = 276,480 values a block; MoE TP2 x EP2
// 64 x (2,880 + 2,880) = 368,640; EP1 (TP4) 128 x (1,440 + 2,880) = 552,960. By hand, the BF16
// weights differ by (368,640 - 276,480) x 36 x 2 = 6,635,520 bytes and (552,960 - 368,640) x 36 x 2
// = 13,271,040 bytes.
TEST(MoeTpEp, ExpertBiasesFollowTheExpertsOfEachRank) {
  const ModelSpec& m = model("gpt-oss-120b");
  ASSERT_EQ(m.experts, 128);
  ASSERT_EQ(m.moe_intermediate, 2880);
  ASSERT_EQ(m.moe_width(), 2880);
  ASSERT_EQ(m.count(LayerKind::moe), 36);
  EngineMemoryConfig cfg;
  auto bf16 = [&](Parallelism p) { return plan_memory(m, h200(), hw::Precision::mxfp4, p, cfg).weights.high_precision; };
  EXPECT_DOUBLE_EQ(bf16({4, 1, 2, 1}) - bf16({4, 1, 4, 1}), 6635520.0);
  EXPECT_DOUBLE_EQ(bf16({4, 1, 1, 1}) - bf16({4, 1, 2, 1}), 13271040.0);
}

// The routed experts of a decode step run as a fused-MoE layer of experts / ep experts, each
// inter / moe_tp wide: the step's MoE row is the kernel model's layer of that shape.
TEST(MoeTpEp, TheStepRunsEachRanksExpertsAtTheirWidth) {
  const ModelSpec& m = model("qwen3-235b-a22b");
  const auto cost = make_step_cost(m, h200(), hw::Precision::fp8, {8, 1, 4, 1});
  const StepTime t = cost->breakdown(decode(32, 2000));
  hw::MoeShape s;
  s.tokens = 32;
  s.hidden = double(m.moe_width());
  s.inter = double(m.moe_intermediate);
  s.topk = m.top_k;
  s.experts = m.experts;
  s.tp = 2;
  s.ep = 4;
  s.gated = m.moe_gated;
  const double layer = hw::kernel_model(h200()).moe(s, hw::Precision::fp8).seconds;
  EXPECT_NEAR(part(t, "routed experts (fused MoE)"), m.count(LayerKind::moe) * layer, 1e-12);
}

TEST(MoeTpEp, AnEpThatDoesNotDivideTheGroupIsRefused) {
  EngineMemoryConfig cfg;
  try {
    plan_memory(model("mixtral-8x7b"), h200(), hw::Precision::bf16, {2, 1, 8, 2}, cfg);
    FAIL() << "accepted EP 8 over 4 GPUs";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("does not divide the 4 GPUs"), std::string::npos) << e.what();
  }
}
