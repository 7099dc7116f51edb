// vLLM's hybrid KV cache layout, checked against figures worked out by hand from vLLM's rules
// (kv_cache_interface.py, kv_cache_utils.py, Platform._align_hybrid_block_size).
#include <gtest/gtest.h>

#include "common/error.hpp"
#include "hwmodels/catalog.hpp"
#include "models/kv_cache.hpp"
#include "models/memory.hpp"
#include "models/min_gpus.hpp"

using namespace servesim;
using namespace servesim::models;

namespace {
// 9.5 GiB of KV memory per GPU: the worked example's figure (2 x H100 80GB, TP2, FP8 KV).
constexpr double kExampleBytes = 10'200'547'328.0;
}  // namespace

TEST(KvCache, NemotronSuperTp2Fp8WorkedExample) {
  const auto L = kv_cache_layout(model("nemotron-3-super"), {2, 1, 1}, hw::Precision::fp8, 0, 16, kExampleBytes);
  // Mamba page per rank: conv 3 rows x (8192 + 2*8*128)/2 channels x 2 B = 30,720 B;
  // SSM 64 heads x 64 x 128 x 4 B (fp32) = 2,097,152 B.
  EXPECT_DOUBLE_EQ(L.state_page_bytes, 30720.0 + 2097152.0);
  // Attention: 1 KV head per rank x (128 + 128) x 1 B = 256 B per token per layer.
  EXPECT_DOUBLE_EQ(L.attn_bytes_per_token, 256.0);
  // 16 * cdiv(2,127,872, 16 * 256) = 16 * 520.
  EXPECT_EQ(L.block_size, 8320);
  EXPECT_DOUBLE_EQ(L.page_bytes, 8320.0 * 256);
  // 8 attention + 40 Mamba layers: group_size 8 (40 >= 1.5 * 8): 1 attention + 5 Mamba groups.
  EXPECT_EQ(L.group_size, 8);
  EXPECT_EQ(L.tensors, 8);
  EXPECT_EQ(L.demand.full_groups, 1);
  EXPECT_EQ(L.demand.state_groups, 5);
  EXPECT_EQ(L.groups.size(), 6u);
  // 10,200,547,328 // 2,129,920 = 4789; // 8 = 598; block 0 is the null block.
  EXPECT_EQ(L.num_blocks, 598);
  EXPECT_EQ(L.usable_blocks(), 597);
  // 9216 tokens: cdiv(9216, 8320) = 2 attention blocks + 5 state blocks = 7; 597 / 7 = 85.
  EXPECT_EQ(L.blocks_per_request(9216), 7);
  EXPECT_EQ(L.max_requests(9216), 85);
  // Up to 8320 tokens one attention block: 6 blocks, 99 sequences.
  EXPECT_EQ(L.blocks_per_request(8320), 6);
  EXPECT_EQ(L.max_requests(8320), 99);
}

TEST(KvCache, MtpAddsItsAttentionLayerAndKStateBlocksPerGroup) {
  const auto& m = model("nemotron-3-super");
  // K = 1: conv gains a row (4 x 5120 x 2 B): page 2,138,112 B; block 16 * cdiv(2,138,112, 4096) = 8352;
  // the MTP attention layer makes 9: group_size 9, 1 + 5 groups; 10,200,547,328 // 2,138,112 // 9 = 530;
  // per sequence cdiv(9216 + 1, 8352) = 2 + 5 * (1 + 1) = 12; 529 / 12 = 44.
  const auto k1 = kv_cache_layout(m, {2, 1, 1}, hw::Precision::fp8, 1, 16, kExampleBytes);
  EXPECT_DOUBLE_EQ(k1.state_page_bytes, 2138112.0);
  EXPECT_EQ(k1.block_size, 8352);
  EXPECT_EQ(k1.group_size, 9);
  EXPECT_EQ(k1.demand.state_groups, 5);
  EXPECT_EQ(k1.num_blocks, 530);
  EXPECT_EQ(k1.blocks_per_request(9216), 12);
  EXPECT_EQ(k1.max_requests(9216), 44);
  // K = 3: page 2,158,592 B, block 8432, 525 blocks, 2 + 5 * 4 = 22 per sequence, 23 sequences.
  const auto k3 = kv_cache_layout(m, {2, 1, 1}, hw::Precision::fp8, 3, 16, kExampleBytes);
  EXPECT_DOUBLE_EQ(k3.state_page_bytes, 2158592.0);
  EXPECT_EQ(k3.block_size, 8432);
  EXPECT_EQ(k3.num_blocks, 525);
  EXPECT_EQ(k3.blocks_per_request(9216), 22);
  EXPECT_EQ(k3.max_requests(9216), 23);
}

TEST(KvCache, AttentionOnlyModelsKeepBlockSize16AndOneGroup) {
  // Llama 3.1 70B at TP8, BF16 KV: 1 KV head per rank x 256 x 2 B = 512 B per token per layer, 80 layers.
  const auto L = kv_cache_layout(model("llama-3.1-70b"), {8, 1, 1}, hw::Precision::bf16, 0, 16, 1e10);
  EXPECT_EQ(L.block_size, 16);
  EXPECT_TRUE(L.uniform_type);
  EXPECT_EQ(L.demand.state_groups, 0);
  EXPECT_EQ(L.tensors, 80);
  EXPECT_DOUBLE_EQ(L.bytes_per_block, 16.0 * 512 * 80);
  EXPECT_EQ(L.num_blocks, std::int64_t(1e10 / (16.0 * 512 * 80)));
  EXPECT_EQ(L.blocks_per_request(1000), 63);  // cdiv(1000, 16)
  EXPECT_EQ(L.blocks_per_request(1024), 64);
}

TEST(KvCache, SlidingWindowGroupsFreeBlocksLeftBehind) {
  KvDemand d;
  d.full_groups = 1;
  d.windows = {64};
  // 1000 computed tokens, slots to 1001: full group cdiv(1001, 16) = 63; the window group skips
  // floor((1000 - 64 + 1) / 16) = 58 blocks and holds 5.
  EXPECT_EQ(d.token_blocks(1000, 1001, 16), 63 + 5);
  EXPECT_EQ(d.token_blocks(10, 20, 16), 2 + 2);  // still inside the window
}

TEST(KvCache, AReservationCapsASlidingWindowAtItsWindow) {
  KvDemand d;
  d.windows = {64};
  EXPECT_EQ(d.reserved_blocks(300, 0, 32), 10 + 2);            // cdiv(300, 32) + cdiv(64, 32)
  EXPECT_EQ(d.reserved_blocks(300, 100, 32), 10 + 6);          // + a chunked context's 100: cdiv(164, 32)
  EXPECT_EQ(d.reserved_blocks(40, 0, 32), 2 + 2);              // a sequence shorter than the window: cdiv(40, 32)
  d.windows = {1000};
  EXPECT_EQ(d.reserved_blocks(300, 0, 32), 10 + 10);
}

TEST(KvCache, PipelineStagesHoldTheirOwnLayersOfEachGroup) {
  // PP 2 on Super: the grouping is global (vLLM merges all stages); each stage allocates as many
  // tensors as its fullest group has layers there, so blocks grow vs group_size tensors.
  const auto& m = model("nemotron-3-super");
  const auto pp1 = kv_cache_layout(m, {2, 1, 1}, hw::Precision::fp8, 0, 16, kExampleBytes);
  const auto pp2 = kv_cache_layout(m, {2, 2, 1}, hw::Precision::fp8, 0, 16, kExampleBytes);
  EXPECT_EQ(pp2.block_size, pp1.block_size);
  EXPECT_EQ(pp2.group_size, pp1.group_size);
  EXPECT_LT(pp2.tensors, pp1.tensors);
  EXPECT_EQ(pp2.num_blocks, std::int64_t(kExampleBytes / pp2.page_bytes) / pp2.tensors);
}

TEST(KvCache, OneKvDtypeRule) {
  EXPECT_EQ(resolve_kv_cache_dtype("", hw::Precision::fp8, "x"), hw::Precision::fp8);
  EXPECT_EQ(resolve_kv_cache_dtype("auto", hw::Precision::nvfp4, "x"), hw::Precision::fp8);
  EXPECT_EQ(resolve_kv_cache_dtype("AUTO", hw::Precision::bf16, "x"), hw::Precision::bf16);
  EXPECT_EQ(resolve_kv_cache_dtype("bf16", hw::Precision::fp8, "x"), hw::Precision::bf16);
  EXPECT_THROW(resolve_kv_cache_dtype("nvfp4", hw::Precision::fp8, "x"), Error);
  EXPECT_THROW(resolve_kv_cache_dtype("fp6", hw::Precision::fp8, "x"), Error);
}

TEST(KvCache, PlanConcurrencySaysWhichBoundBinds) {
  const auto& gpu = hw::Catalog::global().gpu("h100");
  EngineMemoryConfig cfg;
  cfg.kv_cache_dtype = hw::Precision::fp8;
  const auto p = plan_memory(model("nemotron-3-super"), gpu, hw::Precision::fp8, {2, 1, 1}, cfg);
  EXPECT_EQ(p.block_size, 8320);
  EXPECT_EQ(p.num_kv_blocks, p.kv.num_blocks - 1);
  // num_blocks from the plan's own cache bytes by the same rule.
  EXPECT_EQ(p.kv.num_blocks, std::int64_t(p.cache_bytes / (8320.0 * 256)) / 8);
  const auto c = p.concurrency(9216);
  EXPECT_EQ(c.blocks_per_seq, 7);
  EXPECT_EQ(c.by_cache, p.num_kv_blocks / 7);
  EXPECT_EQ(c.seqs, int(c.by_cache));
  EXPECT_EQ(c.bound, "KV cache");
  // A short context is capped by max_num_seqs, and says so.
  cfg.max_num_seqs = 16;
  const auto q = plan_memory(model("nemotron-3-super"), gpu, hw::Precision::fp8, {2, 1, 1}, cfg).concurrency(1024);
  EXPECT_GT(q.by_cache, 16);
  EXPECT_EQ(q.seqs, 16);
  EXPECT_EQ(q.bound, "max_num_seqs");
}
