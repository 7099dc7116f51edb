// Layer code paths that vLLM runs differently from the textbook layer, checked against the kernel
// model by hand: expert parallelism inside one TP group (no exchange of its own), MiniMax-M2's
// per_layer QK-norm (a variance all-reduce across the TP ranks), cold KV reads and gpt-oss's
// sliding-window layers.
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
using servesim::models::test_util::prefill;
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

// Decode attention reads each sequence's KV cold; AIC's table read one KV cache, resident in L2
// while it fits (hw::cold_weights: 0.54 us + 0.093 us per MB on the H200, up to 3/4 of its 60 MiB).
// Llama-3.1-8B, TP1, BF16 KV (8 KV heads x 128 x 2 x 2 bytes = 4 KiB per token per layer), one
// sequence: from 1,000 to 3,000 tokens (4.1 and 12.3 MB per layer, both resident in the table)
// the 32 layers' row grows by the table's per-token slope plus 0.093 us per MB of the extra KV.
TEST(VllmLayerPaths, DecodeAttentionReadsItsKvCold) {
  const ModelSpec& m = model("llama-3.1-8b");
  const auto& h200 = gpu("h200");
  const auto& km = hw::kernel_model(h200);
  const auto cost = make_step_cost(m, h200, hw::Precision::bf16, {1, 1, 1, 1}, hw::Precision::bf16);
  const std::string row = "decode attention (KV read)";
  const double grow = part(cost->breakdown(decode(1, 3000)), row) - part(cost->breakdown(decode(1, 1000)), row);
  const double slope = (km.attention_decode(64, 8192, 32, 8, 128, hw::Precision::bf16).seconds -
                        km.attention_decode(1, 1, 32, 8, 128, hw::Precision::bf16).seconds) / (64.0 * 8192.0);
  const double kv_per_token = 8 * 128 * 2 * 2.0;
  ASSERT_NEAR(km.cold_weights("attention_decode").seconds(kv_per_token * 3000), 0.54e-6 + 0.093e-6 * kv_per_token * 3000 / 1e6, 1e-15);
  EXPECT_NEAR(grow, 32 * (slope * 2000 + 0.093e-6 * kv_per_token * 2000 / 1e6), 1e-10);
  // Past 3/4 of the L2 (64 sequences of 3,000 tokens: 786 MB a layer) nothing is added, and the
  // one-token-per-sequence part's fixed 0.54 us comes off again.
  const double big = part(cost->breakdown(decode(64, 3000)), row);
  const double table = 32 * (km.attention_decode(64, 1, 32, 8, 128, hw::Precision::bf16).seconds + slope * 64 * 3000);
  EXPECT_NEAR(big, table - 32 * km.cold_weights("attention_decode").seconds(64 * (kv_per_token + 2 * 2 * 32 * 128)), 1e-10);
}

// gpt-oss-120b alternates full and 128-token sliding-window attention (18 + 18 layers of 64 query
// and 8 KV heads of 64). A fresh 8,192-token prompt: the full layers run the full-attention row at
// 8,192 tokens, the sliding layers the table's windowed kernel at the length with the step's
// windowed pairs (8,192 x 128, as a chunk's tokens each see 128 keys: 128 + (8,192 x 128 - 128 x
// 129 / 2) / 128 = 8,255.5 tokens, between the curve's points at 8,192 and 16,384). Decode: the
// sliding layers read at most 128 tokens a sequence, and the row's bytes say so.
TEST(VllmLayerPaths, SlidingLayersRunTheWindowedKernel) {
  const ModelSpec& m = model("gpt-oss-120b");
  ASSERT_EQ(m.sliding_window, 128);
  ASSERT_EQ(m.count(LayerKind::sliding_attention), 18);
  const auto& h200 = gpu("h200");
  const auto& km = hw::kernel_model(h200);
  const auto bf16 = hw::Precision::bf16;
  const auto cost = make_step_cost(m, h200, hw::Precision::mxfp4, {1, 1, 1, 1}, bf16);
  const StepTime t = cost->breakdown(prefill(1, 8192));
  const double sw = 128 + (8192.0 * 128 - 128.0 * 129 / 2) / 128;
  const double w0 = km.attention_prefill(1, 8192, 64, 8, 64, bf16, 128).seconds;
  const double w1 = km.attention_prefill(1, 16384, 64, 8, 64, bf16, 128).seconds;
  const double want = 18 * km.attention_prefill(1, 8192, 64, 8, 64, bf16).seconds + 18 * (w0 + (w1 - w0) * (sw - 8192) / 8192);
  EXPECT_NEAR(part(t, "prefill attention (flash)"), want, 1e-12);
  // Decode, 64 sequences at 5,000 tokens: 18 layers read 5,000 tokens, 18 read 128 (2 KiB a token).
  const StepTime d = cost->breakdown(decode(64, 5000));
  for (const auto& p : d.parts)
    if (p.op.rfind("decode attention", 0) == 0) {
      const double kv = 8 * 64 * 2 * 2.0, q = 64 * 64 * 2 * 2.0;  // K+V per token, q in + out per sequence
      EXPECT_NEAR(p.hbm_bytes, 18 * 64 * (5000 * kv + q) + 18 * 64 * (128 * kv + q), 0.01 * 18 * 64 * 5000 * kv);
    }
}
