// Layer code paths that vLLM runs differently from the textbook layer, checked against the kernel
// model by hand: expert parallelism inside one TP group (no exchange of its own) and MiniMax-M2's
// per_layer QK-norm (a variance all-reduce across the TP ranks).
#include <gtest/gtest.h>

#include <string>

#include "hwmodels/catalog.hpp"
#include "hwmodels/kernel_model.hpp"
#include "models/model_spec.hpp"
#include "models/step_cost.hpp"
#include "tests/models/step_parts.hpp"

using namespace servesim;
using namespace servesim::models;
using servesim::models::test_util::decode;
using servesim::models::test_util::part;

namespace {
const hw::GpuSpec& gpu(const char* name) { return hw::Catalog::global().gpu(name); }

bool has_part_containing(const StepTime& t, const std::string& text) {
  for (const auto& p : t.parts)
    if (p.op.find(text) != std::string::npos) return true;
  return false;
}
}  // namespace

// vLLM --enable-expert-parallel without attention DP (EP = TP): every rank holds every token after
// the attention all-reduce, runs its own experts on the tokens routed to them, and the block's TP
// all-reduce sums the partial outputs. No all-to-all: the collectives are those of plain TP.
TEST(VllmLayerPaths, ExpertParallelInsideOneTpGroupAddsNoExchange) {
  const ModelSpec& m = model("mixtral-8x7b");
  const auto ep = make_step_cost(m, gpu("h200"), hw::Precision::bf16, {4, 1, 4, 1});
  const auto tp = make_step_cost(m, gpu("h200"), hw::Precision::bf16, {4, 1, 1, 1});
  const StepTime a = ep->breakdown(decode(32, 2000));
  const StepTime b = tp->breakdown(decode(32, 2000));
  EXPECT_FALSE(has_part_containing(a, "all-to-all"));
  EXPECT_DOUBLE_EQ(part(a, "TP all-reduce after each block"), part(b, "TP all-reduce after each block"));
  double comm_a = 0, comm_b = 0;
  for (const auto& p : a.parts) comm_a += p.kind == "collectives" ? p.seconds : 0;
  for (const auto& p : b.parts) comm_b += p.kind == "collectives" ? p.seconds : 0;
  EXPECT_DOUBLE_EQ(comm_a, comm_b);
  // The steps differ only by the routed experts' kernel (whole experts on a quarter of the GPUs
  // against every expert's quarter).
  EXPECT_NEAR(a.seconds - part(a, "routed experts (fused MoE)"), b.seconds - part(b, "routed experts (fused MoE)"), 1e-12);
}

// MiniMax-M2 normalises q and k over the whole projection (qk_norm_type per_layer): under TP each
// norm is a reduction kernel, an all-reduce of one FP32 value per token, and a normalising kernel.
TEST(VllmLayerPaths, PerLayerQkNormAllReducesItsVarianceAcrossTp) {
  const ModelSpec& m = model("minimax-m2.5");
  ASSERT_TRUE(m.qk_norm && m.qk_norm_per_layer);
  const auto& g = gpu("b200");
  const auto& km = hw::kernel_model(g);
  const int layers = m.count(LayerKind::attention) + m.count(LayerKind::sliding_attention);
  const int seqs = 16;
  for (int tp : {1, 2, 4}) {
    const auto sc = make_step_cost(m, g, hw::Precision::fp8_block, {tp, 1, 1, 1});
    const StepTime t = sc->breakdown(decode(seqs, 1500));
    const double q = double(seqs) * (m.heads / tp) * m.head_dim, k = double(seqs) * std::max(1, m.kv_heads / tp) * m.head_dim;
    double want = 0;
    if (tp == 1) {
      want = km.memory_bound(q * 4).seconds + km.memory_bound(k * 4).seconds;
    } else {
      const double ar = km.tp_all_reduce(seqs * 4.0, tp).seconds;  // one FP32 sum of squares per token
      want = km.memory_bound(q * 2).seconds + ar + km.memory_bound(q * 4).seconds + km.memory_bound(k * 2).seconds + ar +
             km.memory_bound(k * 4).seconds;
      EXPECT_GT(ar, 0);
    }
    double got = 0;
    for (const auto& p : t.parts)
      if (p.op.rfind("QK-norm over the whole projection", 0) == 0) got += p.seconds;
    EXPECT_NEAR(got, layers * want, 1e-9 * layers) << "tp " << tp;
    EXPECT_EQ(has_part_containing(t, "all-reduce of its variance"), tp > 1) << "tp " << tp;
  }
}
