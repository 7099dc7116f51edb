// Model catalogue, memory planner, minimum-GPU search and step cost, against hand-computed figures.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <sstream>

#include "common/error.hpp"
#include "hwmodels/catalog.hpp"
#include "models/memory.hpp"
#include "models/min_gpus.hpp"
#include "models/model_spec.hpp"
#include "models/step_cost.hpp"
#include "tests/models/step_parts.hpp"

using namespace servesim;
using namespace servesim::models;

namespace {
std::string fixture(const std::string& name) {
  std::ifstream in(std::string(SERVESIM_SOURCE_DIR) + "/tests/models/data/" + name);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}
constexpr double MiB = 1024.0 * 1024.0, KiB = 1024.0;
}  // namespace

TEST(ModelCatalog, PublishedParameterCountsWithinTwoPercent) {
  for (const auto& name : model_names()) {
    const auto& m = model(name);
    ASSERT_GT(m.published_total_params, 0) << name;
    // Within 2%, or within the rounding of a figure published to the billion ("A17B").
    const double tol_total = std::max(0.02, m.published_params_rounding / m.published_total_params);
    const double tol_active = std::max(0.02, m.published_params_rounding / m.published_active_params);
    EXPECT_NEAR(total_params(m) / m.published_total_params, 1.0, tol_total) << name;
    EXPECT_NEAR(active_params_as_published(m) / m.published_active_params, 1.0, tol_active) << name;
  }
}

TEST(ModelCatalog, SuperParametersByHand) {
  const auto& m = model("Nemotron-3-Super");
  const double H = 4096, V = 131072;
  const double mamba = H * (2 * 8192 + 2 * 8 * 128 + 128) + 10240 * 4 + 10240 + 3 * 128 + 8192 + 8192 * H + H;
  const double attn = H * 4096 + 2 * H * 256 + 4096 * H + H;
  const double moe = 512 * 2 * 1024 * 2688.0 + 2 * H * 5376 + 2 * H * 1024 + H * 512 + 512 + H;
  EXPECT_DOUBLE_EQ(total_params(m), 2 * V * H + H + 40 * mamba + 8 * attn + 40 * moe);
  EXPECT_DOUBLE_EQ(active_params(m), total_params(m) - 40 * (512 - 22) * 2 * 1024 * 2688.0);
}

TEST(ModelCatalog, KvAndStateBytesOfEveryNemotron) {
  struct Row { const char* name; int attn, kv, mamba, heads, hd, dstate; std::int64_t conv_dim; };
  const Row rows[] = {{"nemotron-h-8b", 4, 8, 24, 128, 64, 128, 8192 + 2 * 8 * 128},
                      {"nemotron-h-56b", 10, 8, 54, 256, 64, 256, 16384 + 2 * 8 * 256},
                      {"nemotron-3-nano", 6, 2, 23, 64, 64, 128, 4096 + 2 * 8 * 128},
                      {"nemotron-3-super", 8, 2, 40, 128, 64, 128, 8192 + 2 * 8 * 128},
                      {"nemotron-3-ultra", 12, 2, 48, 256, 64, 128, 16384 + 2 * 8 * 128},
                      {"nemotron-3.5-super-vl", 8, 2, 40, 128, 64, 128, 8192 + 2 * 8 * 128}};
  for (const auto& r : rows) {
    const auto& m = model(r.name);
    EXPECT_DOUBLE_EQ(kv_bytes_per_token(m, hw::Precision::bf16), r.attn * 2.0 * r.kv * 128 * 2) << r.name;
    EXPECT_DOUBLE_EQ(kv_bytes_per_token(m, hw::Precision::fp8), r.attn * 2.0 * r.kv * 128) << r.name;
    EXPECT_DOUBLE_EQ(ssm_state_bytes_per_seq(m), double(r.mamba) * r.heads * r.hd * r.dstate * 4) << r.name;
    EXPECT_DOUBLE_EQ(conv_state_bytes_per_seq(m), double(r.mamba) * 3 * r.conv_dim * 2) << r.name;
  }
  // models.md §4.4 figures: Super 8 KiB/token, 160 MiB SSM; Nano 6 KiB, 46 MiB.
  EXPECT_DOUBLE_EQ(kv_bytes_per_token(model("nemotron-3-super"), hw::Precision::bf16), 8 * KiB);
  EXPECT_DOUBLE_EQ(ssm_state_bytes_per_seq(model("nemotron-3-super")), 160 * MiB);
  EXPECT_DOUBLE_EQ(ssm_state_bytes_per_seq(model("nemotron-3-nano")), 46 * MiB);
}

// The KV bytes per token of catalogue entries of the layer kinds above, by hand from their configs:
// full-attention layers x (K + V) x KV heads x head_dim x 2 bytes (BF16); MLA caches the latent and
// the rope key once per layer, and DeepSeek-V3.2's indexer an FP8 key of 128 plus its FP32 scale.
TEST(ModelCatalog, KvBytesOfEntriesByHand) {
  EXPECT_DOUBLE_EQ(kv_bytes_per_token(model("qwen3-30b-a3b"), hw::Precision::bf16), 48 * 2.0 * 4 * 128 * 2);
  EXPECT_DOUBLE_EQ(kv_bytes_per_token(model("llama-3.1-405b"), hw::Precision::bf16), 126 * 2.0 * 8 * 128 * 2);
  EXPECT_DOUBLE_EQ(kv_bytes_per_token(model("llama-3.3-70b"), hw::Precision::bf16), 80 * 2.0 * 8 * 128 * 2);
  EXPECT_DOUBLE_EQ(kv_bytes_per_token(model("qwen3.5-27b"), hw::Precision::bf16), 16 * 2.0 * 4 * 256 * 2);
  EXPECT_DOUBLE_EQ(kv_bytes_per_token(model("kimi-k2"), hw::Precision::bf16), 61 * (512.0 + 64) * 2);
  EXPECT_DOUBLE_EQ(kv_bytes_per_token(model("deepseek-v3.2"), hw::Precision::bf16), 61 * ((512.0 + 64) * 2 + 128 + 4));
}

TEST(Importer, BlockTypeSpellingAndInfinity) {
  const auto m = import_hf_config(fixture("tiny-nemotron-h-blocktype.json"), "tiny.json", "tiny");
  ASSERT_EQ(m.layers.size(), 4u);
  EXPECT_EQ(m.layers[0], LayerKind::mamba);
  EXPECT_EQ(m.layers[2], LayerKind::attention);
  EXPECT_EQ(m.moe_width(), 2048);
  EXPECT_EQ(m.mamba_conv_dim(), 16384 + 2 * 8 * 128);
}

TEST(Importer, MalformedNamesFileFieldReason) {
  try {
    import_hf_config(fixture("bad-pattern.json"), "bad-pattern.json", "bad");
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.where(), "bad-pattern.json");
    EXPECT_EQ(e.field(), "hybrid_override_pattern");
    EXPECT_NE(e.reason().find("'X'"), std::string::npos);
  }
  EXPECT_THROW(import_hf_config(R"({"model_type":"gpt2","hidden_size":1,"vocab_size":1})", "x.json", "x"), Error);
}

TEST(Memory, CacheIsBudgetMinusTheRest) {
  const auto& gpu = hw::Catalog::global().gpu("h200");
  const auto p = plan_memory(model("nemotron-3-super"), gpu, hw::Precision::bf16, {8, 1, 1}, {});
  EXPECT_NEAR(p.cache_bytes, 0.9 * gpu.hbm_usable_bytes - p.weight_bytes - p.activation_bytes - p.reserve_bytes, 1);
  // vLLM charges the budget only the non-torch memory that grows while it loads (NCCL buffers,
  // 392 MB at 8 GPUs); the CUDA context and the graphs (captured after the cache) use the headroom.
  EXPECT_DOUBLE_EQ(p.reserve_bytes, 392e6);
  EXPECT_DOUBLE_EQ(p.context_bytes + p.cuda_graph_bytes, 552402944 + 2.5 * 1024 * 1024 * 1024);
  EXPECT_GT(gpu.hbm_usable_bytes - p.budget_bytes, p.context_bytes + p.cuda_graph_bytes);
  // TP 8 with 2 KV heads: one head per GPU (replicated), 8 layers x K,V x 128 x 2 B.
  EXPECT_DOUBLE_EQ(p.kv_bytes_per_token, 8 * 2 * 1 * 128 * 2.0);
  EXPECT_DOUBLE_EQ(p.ssm_state_bytes_per_seq, 40.0 * 16 * 64 * 128 * 4);
  // BF16 weights are 2 bytes per parameter, sharded 8 ways (router, latent projections replicated).
  EXPECT_GT(p.weight_bytes, 2 * total_params(model("nemotron-3-super")) / 8);
  // + replicated latent projections (40 x 2 x 4096 x 1024 x 2 B = 0.67 GB) and routers: under 3%.
  EXPECT_LT(p.weight_bytes, 1.03 * 2 * total_params(model("nemotron-3-super")) / 8);
  // One shared block pool: every block id costs group_size pages and the pool fits the cache.
  EXPECT_LE(double(p.kv.num_blocks) * p.kv.bytes_per_block, p.cache_bytes);
  EXPECT_GT(double(p.kv.num_blocks + 1) * p.kv.bytes_per_block, p.cache_bytes);
  const auto c = p.concurrency(262144);
  EXPECT_LE(std::int64_t(c.seqs) * c.blocks_per_seq, p.num_kv_blocks);
  EXPECT_EQ(c.blocks_per_seq, (262144 + p.block_size - 1) / p.block_size + 5);  // + 1 state block per Mamba group
}

TEST(Memory, Nvfp4CarriesBlockScalesAndCannotFitSaysByHowMuch) {
  EXPECT_DOUBLE_EQ(weight_bytes_per_param(hw::Precision::nvfp4), 0.5625);
  const auto& h100 = hw::Catalog::global().gpu("H100");
  try {
    plan_memory(model("nemotron-3-ultra"), h100, hw::Precision::bf16, {1, 1, 1}, {});
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("by"), std::string::npos);
  }
}

TEST(MinGpus, DefaultPolicyReproducesTheVendorTable) {
  const ServingPolicy pol;  // headroom
  const auto& m = model("nemotron-3.5-super-vl");
  for (const char* g : {"B200", "B300", "H200", "H100", "GB200", "GB300"})
    for (auto p : {hw::Precision::bf16, hw::Precision::nvfp4}) {
      const auto r = min_gpus(m, hw::Catalog::global().gpu(g), p, pol);
      EXPECT_EQ(r.min_gpus, vendor_min_gpus(g, p)) << g << " " << hw::to_string(p);
    }
}

TEST(MinGpus, ConcurrencyPolicyAgreesOnHopperBf16AndB300Nvfp4) {
  const auto& m = model("nemotron-3.5-super-vl");
  ServingPolicy pol;
  pol.kind = PolicyKind::vllm;
  auto n = [&](const char* g, hw::Precision p) { return min_gpus(m, hw::Catalog::global().gpu(g), p, pol).min_gpus; };
  EXPECT_EQ(n("H100", hw::Precision::bf16), 16);
  // H200 BF16 at TP4: 66.3 GiB of cache per GPU (139.80 GiB measured total, the CUDA context and
  // graphs outside the budget) holds 63 of the 64 sequences of 262,144 tokens: 8 GPUs.
  EXPECT_EQ(n("H200", hw::Precision::bf16), 8);
  EXPECT_EQ(n("B300", hw::Precision::nvfp4), 1);
}

TEST(StepCost, RooflineLimits) {
  const auto& gpu = hw::Catalog::global().gpu("H200");
  const auto& m = model("nemotron-3-super");
  const auto cost = make_step_cost(m, gpu, hw::Precision::bf16, {8, 1, 1});
  StepBatch d;
  d.decode_seqs = 256;
  d.decode_context_tokens = 256 * 4096;
  // 256 tokens x 22 experts touch every expert: the step reads all weights at least once.
  const auto plan = plan_memory(m, gpu, hw::Precision::bf16, {8, 1, 1}, {});
  EXPECT_GE(cost->seconds(d), plan.weight_bytes / gpu.hbm_bw_bytes_per_s);
  StepBatch p;
  p.prefill_seqs = 4;
  p.prefill_tokens = 4 * 8192;
  p.prefill_attention_pairs = 4 * 8192.0 * 8193 / 2;
  EXPECT_GE(cost->seconds(p), 2 * active_params(m) * p.prefill_tokens / 8 / gpu.bf16_flops);
  EXPECT_NEAR(cost->breakdown(p).seconds, cost->seconds(p), 1e-12);
}

// CUDA-graph padding: a decode of 9 sequences replays the graph of 16 with 7 dummy sequences. The
// dense layers compute 16 rows; the dummies' identical tokens all take the same top-k experts, so
// the routed experts cost what 9 real tokens + 1 cost (Qwen3-235B-A22B, block FP8, TP2 on H200:
// top-8 of 128 experts; 16 random tokens touch ~82 experts, 10 ~60).
TEST(StepCost, GraphPaddingAddsOneTokenOfExperts) {
  using servesim::models::test_util::part;
  const auto& m = servesim::models::model("qwen3-235b-a22b");
  const auto& gpu = servesim::hw::Catalog::global().gpu("h200");
  const auto cost = servesim::models::make_step_cost(m, gpu, servesim::hw::Precision::fp8_block, {2, 1, 1});
  auto batch = [](int seqs, int padding) {
    servesim::models::StepBatch b = servesim::models::test_util::decode(seqs, 1024);
    b.decode_context_tokens = 9 * 1024;   // the real sequences' KV only
    b.graph_padding_seqs = padding;
    return b;
  };
  const auto padded = cost->breakdown(batch(16, 7)), ten = cost->breakdown(batch(10, 0)), sixteen = cost->breakdown(batch(16, 0));
  const std::string experts = "routed experts (fused MoE)";
  EXPECT_DOUBLE_EQ(part(padded, experts), part(ten, experts));
  EXPECT_LT(part(padded, experts), 0.9 * part(sixteen, experts));
  EXPECT_DOUBLE_EQ(part(padded, "QKV + O GEMM"), part(sixteen, "QKV + O GEMM"));   // dense rows: all 16
  EXPECT_DOUBLE_EQ(cost->seconds(batch(16, 7)), padded.seconds);
}
