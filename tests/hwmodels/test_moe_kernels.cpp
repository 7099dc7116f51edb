// vLLM's fused-MoE kernel per GPU, checkpoint format and layout (hwmodels/data/moe_kernels.json),
// one calibration family per kernel, the rejected Hopper ModelOpt FP8 rows, the bytes of the
// 4-bit formats, and MoE decode time against the HBM bound of the touched experts.
#include <algorithm>
#include <cmath>
#include <string>

#include <gtest/gtest.h>

#include "common/error.hpp"
#include "hwmodels/calibration.hpp"
#include "hwmodels/kernel_model.hpp"
#include "hwmodels/moe_kernels.hpp"
#include "hwmodels/work.hpp"

using namespace servesim::hw;

namespace {
const GpuSpec& gpu(const char* n) { return Catalog::global().gpu(n); }
const char* kAll[] = {"H100", "H200", "B200", "GB200", "B300", "GB300"};
bool has(std::string_view s, std::string_view what) { return s.find(what) != std::string_view::npos; }
// MiniMax-M2.5's routed experts: hidden 3072, inter 1536, top-8 of 256, SwiGLU.
MoeShape minimax(double tokens, int ep = 1) { return {tokens, 3072, 1536, 8, 256, 1, ep, 0, true}; }
}  // namespace

// Bytes per parameter with the scales: INT4 group 32 (bf16 scale) = 4 + 16/32 bits, MXFP4 = 4 +
// 8/32 bits, FP8 128x128 block = 8 + 32/16384 bits.
TEST(MoeKernels, FourBitAndBlockFormatBytes) {
  EXPECT_DOUBLE_EQ(element_bytes(Precision::int4), 0.5625);
  EXPECT_DOUBLE_EQ(element_bytes(Precision::mxfp4), 0.53125);
  EXPECT_DOUBLE_EQ(element_bytes(Precision::nvfp4), 0.5625);
  EXPECT_DOUBLE_EQ(element_bytes(Precision::fp8_block), 1.000244140625);
  // One Kimi-K2.5 expert (hidden 7168, inter 2048, gate + up + down) in INT4 group 32:
  // 3 x 7168 x 2048 = 44,040,192 params x 0.5625 B = 24,772,608 B. Eight touched experts and
  // nothing else (activations are the remainder: 1 token in/out and 8 slots of gate/up/down).
  MoeShape kimi{1, 7168, 2048, 8, 384, 1, 1, 0, true};
  MoeRouting r{8, 8};
  const double act = 1 * 7168 * 2 * 2 + 8 * 2 * 2048 * 2 * 2;
  EXPECT_DOUBLE_EQ(moe_work(kimi, r, Precision::int4).bytes, 8 * 24772608.0 + act);
  // One gpt-oss-120b expert (2880 x 2880, gated) in MXFP4: 24,883,200 params x 0.53125 = 13,219,200 B.
  MoeShape oss{1, 2880, 2880, 4, 128, 1, 1, 0, true};
  EXPECT_DOUBLE_EQ(moe_work(oss, {1, 1}, Precision::mxfp4).bytes - moe_work(oss, {1, 1}, Precision::bf16).bytes,
                   13219200.0 - 2 * 24883200.0);
  EXPECT_EQ(parse_precision("INT4"), Precision::int4);
  EXPECT_EQ(parse_precision("fp8_block"), Precision::fp8_block);
  EXPECT_EQ(math_precision(Precision::int4), Precision::bf16);
  EXPECT_EQ(math_precision(Precision::fp8_block), Precision::fp8);
  EXPECT_FALSE(gpu("H200").native(Precision::int4));
  EXPECT_TRUE(gpu("H200").native(Precision::fp8_block));
}

// The table: Hopper FP8 block = Triton at EP 1, FlashInfer CUTLASS at EP > 1 (what AIC recorded
// vLLM dispatching); Blackwell = FlashInfer TRTLLM; MXFP4 = OpenAI Triton on Hopper, TRTLLM on
// Blackwell (MXFP8 activations: the serving rows' choice); INT4 = Marlin everywhere; NVFP4 on
// Hopper = Marlin W4A16.
TEST(MoeKernels, KernelPerArchitectureFormatAndLayout) {
  const auto& h200 = gpu("H200");
  const auto& b200 = gpu("B200");
  EXPECT_EQ(moe_kernel_rule(h200, Precision::fp8_block, 1).families.front(), "moe_fp8_block_triton");
  EXPECT_EQ(moe_kernel_rule(h200, Precision::fp8_block, 4).families.front(), "moe_fp8_block_cutlass");
  EXPECT_EQ(moe_kernel_rule(b200, Precision::fp8_block, 1).families.front(), "moe_fp8_block_trtllm");
  EXPECT_EQ(moe_kernel_rule(b200, Precision::fp8, 1).families.front(), "moe_fp8_trtllm");
  EXPECT_EQ(moe_kernel_rule(h200, Precision::mxfp4, 1).families.front(), "moe_mxfp4_w4a16_oai_triton");
  EXPECT_EQ(moe_kernel_rule(gpu("GB300"), Precision::mxfp4, 1).families.front(), "moe_mxfp4_w4a8_trtllm");
  for (const char* n : kAll) {
    const auto& km = kernel_model(gpu(n));
    const bool hopper = gpu(n).arch == "hopper";
    EXPECT_TRUE(has(km.moe(minimax(64), Precision::int4).kernel, "Marlin")) << n;
    EXPECT_TRUE(has(km.moe(minimax(64), Precision::nvfp4).kernel, hopper ? "Marlin W4A16" : "TRTLLM")) << n;
    EXPECT_TRUE(has(km.moe(minimax(64), Precision::fp8_block).kernel, hopper ? "Triton" : "TRTLLM")) << n;
    EXPECT_TRUE(has(km.moe(minimax(64, 4), Precision::fp8_block).kernel, hopper ? "CUTLASS" : "TRTLLM")) << n;
    EXPECT_TRUE(has(km.moe(minimax(64), Precision::mxfp4).kernel, hopper ? "triton_kernels" : "TRTLLM")) << n;
    // Every rule's families exist on every GPU (a renamed family would silently fall to the roofline).
    const Calibration c = Calibration::embedded(gpu(n));
    for (const auto& rule : moe_kernel_rules())
      if (std::find(rule.arch.begin(), rule.arch.end(), gpu(n).arch) != rule.arch.end()) {
        EXPECT_NE(c.family(rule.families.front()), nullptr) << n << " " << rule.families.front();
      }
  }
  GpuSpec ampere;
  ampere.name = "X", ampere.arch = "ampere";
  EXPECT_THROW(moe_kernel_rule(ampere, Precision::fp8, 1), servesim::Error);
}

// fp8 (ModelOpt per-tensor) and fp8_block are separate families, one kernel library each; the
// Hopper ModelOpt FlashInfer rows are rejected (reason in the data) and never used, Blackwell's kept.
TEST(MoeKernels, SeparateFamiliesPerKernelAndRejectedRows) {
  for (const char* n : kAll) {
    const Calibration c = Calibration::embedded(gpu(n));
    for (const auto& [name, f] : c.families()) {
      if (!name.starts_with("moe_")) continue;
      std::string lib;
      for (const auto& s : f.samples) {
        const std::string l = moe_kernel_library(f.kernels[size_t(s.kernel)]);
        if (lib.empty()) lib = l;
        EXPECT_EQ(l, lib) << n << " " << name;  // never two kernel libraries in one family
      }
      EXPECT_TRUE(name.ends_with("_" + lib)) << n << " " << name;
    }
    const bool hopper = gpu(n).arch == "hopper";
    const auto* modelopt = c.family(hopper ? "moe_fp8_cutlass" : "moe_fp8_trtllm");
    ASSERT_NE(modelopt, nullptr) << n;
    EXPECT_EQ(modelopt->rejected.empty(), !hopper) << n;
    ASSERT_NE(c.family(hopper ? "moe_fp8_block_triton" : "moe_fp8_block_trtllm"), nullptr) << n;
  }
  // H200, MiniMax shape at 64 tokens: the per-tensor FP8 MoE is timed on the Triton FP8 rows
  // (0.61-0.89 ms measured there), not the rejected 3.7 ms ModelOpt rows.
  const auto& km = kernel_model(gpu("H200"));
  const OpTime fp8 = km.moe(minimax(64), Precision::fp8);
  EXPECT_TRUE(has(fp8.kernel, "rejected")) << fp8.kernel;
  EXPECT_NEAR(fp8.seconds, km.moe(minimax(64), Precision::fp8_block).seconds, 0.02 * fp8.seconds);
}

// MoE decode costs at least the touched experts' weights streamed once at the datasheet HBM
// bandwidth and, for the measured shapes, at most 1.6x that: MiniMax-M2.5's experts at 64 tokens
// touch 256 (1 - (1 - 8/256)^64) = 222.4 experts of 3 x 3072 x 1536 params each.
TEST(MoeKernels, DecodeWithinBandwidthBound) {
  const double touched = 256 * (1 - std::pow(1 - 8.0 / 256, 64));
  EXPECT_NEAR(moe_routing_expected(minimax(64)).touched, touched, 1e-9);
  struct Case { const char* gpu; Precision p; double max_ratio; };
  for (Case c : {Case{"H100", Precision::fp8_block, 1.6}, Case{"H200", Precision::fp8_block, 1.6},
                 Case{"H200", Precision::fp8, 1.6}, Case{"H200", Precision::bf16, 1.6},
                 Case{"B200", Precision::fp8_block, 1.6}, Case{"B200", Precision::nvfp4, 1.6},
                 Case{"H200", Precision::int4, 2.2}, Case{"H200", Precision::mxfp4, 2.2}}) {
    const auto& g = gpu(c.gpu);
    const double bound = touched * 3 * 3072 * 1536 * element_bytes(c.p) / g.hbm_bw_bytes_per_s;
    const double t = kernel_model(g).moe(minimax(64), c.p).seconds;
    EXPECT_GE(t, bound) << c.gpu << " " << to_string(c.p);
    EXPECT_LE(t, c.max_ratio * bound) << c.gpu << " " << to_string(c.p) << " " << t / bound;
  }
}
