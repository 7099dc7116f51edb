// Published latency curves: the engines' NVLink all-reduce kernel and NCCL scaling to n GPUs.
#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include "hwmodels/catalog.hpp"
#include "hwmodels/kernel_model.hpp"
#include "hwmodels/published.hpp"
#include "models/model_spec.hpp"
#include "models/step_cost.hpp"

using namespace servesim;

TEST(NvlinkAllReduce, ReturnsThePublishedPointsAndInterpolatesLogLog) {
  const auto& h200 = hw::Catalog::global().gpu("H200");
  auto t = hw::nvlink_allreduce(h200, 8, 131072);
  ASSERT_TRUE(t);
  EXPECT_TRUE(t->exact_table);
  EXPECT_NEAR(t->seconds, 6.4e-6, 1e-12);
  EXPECT_NEAR(hw::nvlink_allreduce(h200, 8, 2097152)->seconds, 30.5e-6, 1e-12);
  // Halfway in log(bytes) between 128 KiB (6.4 us) and 512 KiB (17.8 us): the geometric mean.
  EXPECT_NEAR(hw::nvlink_allreduce(h200, 8, 262144)->seconds, std::sqrt(6.4e-6 * 17.8e-6), 1e-12);
  // Below the smallest message: latency-bound floor. Above 8 MiB: not this kernel.
  EXPECT_NEAR(hw::nvlink_allreduce(h200, 8, 64)->seconds, 3.4e-6, 1e-12);
  EXPECT_FALSE(hw::nvlink_allreduce(h200, 8, 16.0 * 1024 * 1024));
  EXPECT_FALSE(hw::nvlink_allreduce(h200, 1, 4096));
}

TEST(NvlinkAllReduce, OtherCountsAndGpusUseTheirArchitecturesTables) {
  // H200 x2 has no table of its own: Hopper's 2-GPU table (H100, same NVLink 4).
  auto t = hw::nvlink_allreduce(hw::Catalog::global().gpu("H200"), 2, 2048);
  ASSERT_TRUE(t);
  EXPECT_FALSE(t->exact_table);
  EXPECT_NEAR(t->seconds, 2.8e-6, 1e-12);
  // 4 GPUs on Hopper: the 8-GPU table (more GPUs never make the kernel faster).
  EXPECT_NEAR(hw::nvlink_allreduce(hw::Catalog::global().gpu("H100"), 4, 2048)->seconds, 3.4e-6, 1e-12);
  // GB300 (Blackwell Ultra, no table of its count 2): falls back within the Blackwell family.
  EXPECT_TRUE(hw::nvlink_allreduce(hw::Catalog::global().gpu("GB300"), 2, 2048));
}

TEST(NvlinkAllReduce, DecodeStepPaysOneKernelPerBlock) {
  const auto& gpu = hw::Catalog::global().gpu("H200");
  const auto& m = models::model("nemotron-3-super");
  const auto cost = models::make_step_cost(m, gpu, hw::Precision::fp8, {8, 1, 1});
  models::StepBatch d;
  d.decode_seqs = 32;
  d.decode_context_tokens = 32 * 4096;
  double allreduce = 0;
  for (const auto& part : cost->breakdown(d).parts)
    if (part.kind == std::string("collectives")) allreduce += part.seconds;
  // vLLM's TP all-reduce after every block: 256 KiB on 8 H200s is at the custom all-reduce's
  // limit (< 256 KiB), so torch symmetric memory (multimem) runs it.
  const auto per_block = hw::kernel_model(gpu).tp_all_reduce(32.0 * m.hidden * 2, 8);
  EXPECT_EQ(per_block.kernel, "torch symm-mem multimem all-reduce");
  EXPECT_NEAR(allreduce, double(m.layers.size()) * per_block.seconds, 1e-12);
}

TEST(NcclScaling, PublishedRatioCarriesTheTwoGpuMeasurementToEight) {
  const auto& h200 = hw::Catalog::global().gpu("H200");
  const auto& km = hw::kernel_model(h200);
  // 64 MiB: H100 x8 325 us over H100 x2 255 us (published; H200 x8 behaves like H100 x8).
  const double bytes = 67108864;
  auto ratio = hw::nccl_allreduce_scaling(h200, 8, bytes);
  ASSERT_TRUE(ratio);
  EXPECT_NEAR(*ratio, 325.0 / 255.0, 1e-12);
  // The H200 now has its own 8-GPU NCCL measurement (NCCL 2.29.2): the measurement is used.
  const auto eight_t = km.collective(hw::Collective::all_reduce, bytes, {8, 1, nullptr});
  const double eight = eight_t.seconds;
  EXPECT_EQ(eight_t.source, hw::Source::measured);
  // 4 GPUs: halfway in log2(GPUs) between 2 (ratio 1) and 8.
  EXPECT_NEAR(*hw::nccl_allreduce_scaling(h200, 4, bytes), std::sqrt(325.0 / 255.0), 1e-12);
  // Never faster than moving the ring's bus bytes over NVLink.
  EXPECT_GE(eight, bytes * 2.0 * 7 / 8 / h200.nvlink_bw_bytes_per_s);
  EXPECT_FALSE(hw::nccl_allreduce_scaling(h200, 2, bytes));
}
