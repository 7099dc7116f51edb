// Model families beyond Nemotron/Llama/Mixtral: MLA, sliding-window attention, Gated DeltaNet,
// QK-norm, nested text_config, declared quantisation, the new catalogue entries and HF-id lookup.
// Every figure is a hand formula over the fixture's numbers.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include "common/error.hpp"
#include "hwmodels/catalog.hpp"
#include "models/kv_cache.hpp"
#include "models/memory.hpp"
#include "models/model_spec.hpp"
#include "models/step_cost.hpp"

using namespace servesim;
using namespace servesim::models;

namespace {
std::string path(const std::string& name) { return std::string(SERVESIM_SOURCE_DIR) + "/tests/models/data/" + name; }
std::string fixture(const std::string& name) {
  std::ifstream in(path(name));
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}
ModelSpec load(const std::string& name) { return import_hf_config(fixture(name), name, name); }
double mlp3(double in, double inter) { return 3 * in * inter; }
// MLA block of the fixtures: H 256, 8 heads, q_lora 96, kv_lora 64, nope 32, rope 16, v 32.
double mla_block(double H, double h, double ql, double kl, double nope, double rope, double v) {
  return H * ql + ql + ql * h * (nope + rope) + H * (kl + rope) + kl + kl * h * (nope + v) + h * v * H + H;
}
double step_part(const StepCostModel& c, const StepBatch& b, const std::string& op_prefix) {
  double s = 0;
  for (const auto& p : c.breakdown(b).parts)
    if (p.op.rfind(op_prefix, 0) == 0) s += p.seconds;
  return s;
}
}  // namespace

TEST(Families, DeepSeekV3MlaParamsKvAndPrecision) {
  const auto m = load("tiny-deepseek-v3.json");
  ASSERT_EQ(m.layers.size(), 8u);
  EXPECT_EQ(m.count(LayerKind::mla), 4);
  EXPECT_EQ(m.count(LayerKind::mlp), 1);
  EXPECT_EQ(m.count(LayerKind::moe), 3);
  EXPECT_EQ(m.layers[1], LayerKind::mlp);  // first_k_dense_replace 1
  EXPECT_EQ(m.layers[3], LayerKind::moe);
  const double H = 256, mla = mla_block(H, 8, 96, 64, 32, 16, 32);
  const double moe = 16 * mlp3(H, 128) + mlp3(H, 128) + H * 16 + 16 + H;
  const double total = 2 * 1000 * H + H + 4 * mla + (mlp3(H, 512) + H) + 3 * moe;
  EXPECT_DOUBLE_EQ(total_params(m), total);
  EXPECT_DOUBLE_EQ(active_params(m), total - 3 * (16 - 4) * mlp3(H, 128));
  EXPECT_DOUBLE_EQ(mtp_params(m), 2 * H * H + 3 * H + mla + moe);
  // Latent KV: (kv_lora_rank + rope) elements per token and layer, the same on every TP rank.
  EXPECT_DOUBLE_EQ(kv_bytes_per_token(m, hw::Precision::bf16), 4 * (64 + 16) * 2.0);
  EXPECT_DOUBLE_EQ(kv_bytes_per_token_per_gpu(m, hw::Precision::fp8, {8, 1, 1}), 4 * (64 + 16) * 1.0);
  EXPECT_DOUBLE_EQ(kv_bytes_per_token_per_gpu(m, hw::Precision::bf16, {2, 2, 1}), 2 * (64 + 16) * 2.0);
  EXPECT_EQ(m.checkpoint_precision, "fp8_block");  // quant_method fp8 + weight_block_size [128, 128]
  EXPECT_FALSE(m.quantized_experts_only);
}

TEST(Families, GlmDsaIndexerParamsAndCache) {
  const auto m = load("tiny-glm-dsa.json");
  const double H = 256;
  const double indexer = 96.0 * 4 * 128 + H * 128 + 2 * 128 + H * 4;
  const double mla = mla_block(H, 8, 96, 64, 32, 16, 32) + indexer;
  EXPECT_DOUBLE_EQ(layer_params(m, LayerKind::mla), mla);
  // Latent (bf16) + the indexer's FP8 key and one FP32 scale per 128 per token and layer.
  EXPECT_DOUBLE_EQ(kv_bytes_per_token_layer(m, LayerKind::mla, hw::Precision::bf16), 80 * 2.0 + 128 + 4);
  EXPECT_DOUBLE_EQ(kv_bytes_per_token(m, hw::Precision::bf16), 3 * (80 * 2.0 + 132));
}

TEST(Families, GptOssSlidingWindowSinksAndMxfp4) {
  const auto m = load("tiny-gpt-oss.json");
  EXPECT_EQ(m.count(LayerKind::sliding_attention), 2);
  EXPECT_EQ(m.count(LayerKind::attention), 2);
  EXPECT_EQ(m.sliding_window, 128);
  EXPECT_TRUE(m.attention_sinks);
  const double H = 128, q = 8 * 32, kv = 2 * 32;
  const double attn = H * q + 2 * H * kv + q * H + H + (q + 2 * kv + H) + 8;  // + biases + sinks
  const double expert = mlp3(H, 128) + 2 * 128 + H;                            // + gate_up and down biases
  const double moe = 8 * expert + H * 8 + 8 + H;
  EXPECT_DOUBLE_EQ(total_params(m), 2 * 1000 * H + H + 4 * (attn + moe));
  EXPECT_DOUBLE_EQ(active_params(m), total_params(m) - 4 * (8 - 2) * expert);
  // Full layers hold KV per token; sliding layers hold at most window + one block per sequence.
  const double per_layer = 2 * 2 * 32 * 2.0;
  EXPECT_DOUBLE_EQ(kv_bytes_per_token(m, hw::Precision::bf16), 2 * per_layer);
  // In vLLM's block pool the sliding layers form their own group with the window.
  const auto spec = layer_cache_spec(m, LayerKind::sliding_attention, {1, 1, 1}, hw::Precision::bf16, 0);
  ASSERT_TRUE(spec.has_value());
  EXPECT_EQ(spec->kind, CacheKind::sliding_window);
  EXPECT_EQ(spec->window, 128);
  EXPECT_DOUBLE_EQ(spec->bytes_per_token, per_layer);
  EXPECT_EQ(kv_window_tokens(m, LayerKind::sliding_attention), 128);
  EXPECT_EQ(kv_window_tokens(m, LayerKind::attention), 0);
  EXPECT_EQ(m.checkpoint_precision, "mxfp4");
  EXPECT_TRUE(m.quantized_experts_only);
}

TEST(Families, SlidingLayersDecodeCostStopsGrowingPastTheWindow) {
  auto swa = load("tiny-gpt-oss.json");
  auto full = swa;
  for (auto& k : full.layers)
    if (k == LayerKind::sliding_attention) k = LayerKind::attention;
  const auto& gpu = hw::Catalog::global().gpu("h200");
  const auto cs = make_step_cost(swa, gpu, hw::Precision::bf16, {1, 1, 1});
  const auto cf = make_step_cost(full, gpu, hw::Precision::bf16, {1, 1, 1});
  auto at = [](const StepCostModel& c, std::int64_t ctx) {
    StepBatch b;
    b.decode_seqs = 4;
    b.decode_context_tokens = 4 * ctx;
    return step_part(c, b, "decode attention");
  };
  // Past the window only the 2 full layers read more: half the growth of the all-full stack.
  const double grow_swa = at(*cs, 4096) - at(*cs, 1024), grow_full = at(*cf, 4096) - at(*cf, 1024);
  ASSERT_GT(grow_full, 0);
  EXPECT_NEAR(grow_swa / grow_full, 0.5, 1e-9);
}

TEST(Families, Qwen35NestedGatedDeltaNetStateAndSiblingQuant) {
  const auto& m = load_model_file(path("tiny-qwen3.5-moe_config.json"));
  EXPECT_EQ(m.name, "tiny-qwen3.5-moe");
  EXPECT_EQ(m.hf_model_type, "qwen3_5_moe");
  EXPECT_EQ(m.count(LayerKind::linear_attention), 3);
  EXPECT_EQ(m.count(LayerKind::attention), 1);
  EXPECT_EQ(m.count(LayerKind::moe), 4);
  EXPECT_EQ(m.mtp_layers, 1);
  EXPECT_EQ(m.checkpoint_precision, "nvfp4");  // from the sibling hf_quant_config.json
  EXPECT_EQ(m.checkpoint_kv_precision, "fp8");
  ASSERT_TRUE(m.has_vision);
  EXPECT_EQ(m.vision.layers, 2);
  const double H = 256, kd = 4 * 32, vd = 8 * 32, nv = 8;
  const double gdn = H * (2 * kd + 2 * vd) + H * 2 * nv + (2 * kd + vd) * 4 + 2 * nv + 32 + vd * H + H;
  const double attn = H * 512 * 2 + 2 * H * 128 + 512 * H + H + 2 * 64;  // gated q, QK-norm
  const double moe = 16 * mlp3(H, 64) + mlp3(H, 64) + H * 16 + 16 + H + H;  // + shared-expert gate
  EXPECT_DOUBLE_EQ(layer_params(m, LayerKind::linear_attention), gdn);
  EXPECT_DOUBLE_EQ(total_params(m), 2 * 1000 * H + H + 3 * gdn + attn + 4 * moe);
  // State per sequence: conv (kernel-1) x (2 key_dim + value_dim) bf16, recurrent value heads x
  // key_dim x value_dim fp32, per Gated DeltaNet layer; KV only for the full-attention layer.
  EXPECT_DOUBLE_EQ(conv_state_bytes_per_seq(m), 3 * 3 * (2 * kd + vd) * 2);
  EXPECT_DOUBLE_EQ(ssm_state_bytes_per_seq(m), 3 * nv * 32 * 32 * 4);
  EXPECT_DOUBLE_EQ(ssm_state_bytes_per_seq(m, {2, 1, 1}), 3 * (nv / 2) * 32 * 32 * 4);
  EXPECT_DOUBLE_EQ(kv_bytes_per_token(m, hw::Precision::bf16), 2 * 2 * 64 * 2.0);
  const auto gdn_spec = layer_cache_spec(m, LayerKind::linear_attention, {1, 1, 1}, hw::Precision::bf16, 0);
  ASSERT_TRUE(gdn_spec.has_value());
  EXPECT_EQ(gdn_spec->kind, CacheKind::state);
  EXPECT_DOUBLE_EQ(gdn_spec->state_bytes, 3 * (2 * kd + vd) * 2 + nv * 32 * 32 * 4);
  const auto mla = layer_cache_spec(load("tiny-deepseek-v3.json"), LayerKind::mla, {8, 1, 1}, hw::Precision::fp8, 0);
  ASSERT_TRUE(mla.has_value());
  EXPECT_EQ(mla->kind, CacheKind::mla);
  EXPECT_DOUBLE_EQ(mla->bytes_per_token, 64 + 16);  // not sharded by TP
  // The spec is not in the catalogue: a file is not a name.
  EXPECT_THROW(model("tiny-qwen3.5-moe"), Error);
}

TEST(Families, Qwen3DenseMinimaxLlama4Kimi) {
  const auto q = load("tiny-qwen3.json");
  EXPECT_TRUE(q.qk_norm);
  EXPECT_DOUBLE_EQ(total_params(q), 1000 * 128.0 + 128 + 2 * ((128 * 256 + 2 * 128 * 128 + 256 * 128 + 128 + 2 * 64) + mlp3(128, 384) + 128));

  const auto mm = load("tiny-minimax-m2.json");
  const double attn = 128 * 128 + 2 * 128 * 64 + 128 * 128 + 128 + 128 + 64;  // per_layer QK-norm over q and k
  EXPECT_DOUBLE_EQ(layer_params(mm, LayerKind::attention), attn);
  EXPECT_EQ(mm.mtp_layers, 3);
  EXPECT_DOUBLE_EQ(mtp_params(mm), 3 * (2 * 128.0 * 128 + 3 * 128 + attn + layer_params(mm, LayerKind::moe)));

  const auto l4 = load("tiny-llama4.json");
  using K = LayerKind;
  const std::vector<K> want{K::sliding_attention, K::mlp, K::sliding_attention, K::moe,
                            K::sliding_attention, K::mlp, K::attention, K::moe};
  EXPECT_EQ(l4.layers, want);
  EXPECT_TRUE(l4.chunked_attention);
  EXPECT_EQ(l4.sliding_window, 512);
  EXPECT_EQ(l4.mlp_intermediate, 256);
  EXPECT_DOUBLE_EQ(layer_params(l4, K::moe), 4 * mlp3(128, 64) + mlp3(128, 64) + 128 * 4 + 4 + 128);

  const auto k = load("tiny-kimi-k25.json");
  EXPECT_EQ(k.count(K::mla), 2);
  EXPECT_EQ(k.checkpoint_precision, "int4");
  EXPECT_TRUE(k.quantized_experts_only);
  ASSERT_TRUE(k.has_vision);
  EXPECT_EQ(k.vision.patch, 14);
  EXPECT_EQ(k.vision.tile_pixels, 448);
}

TEST(Families, NestedConfigErrorsNameTheNestedField) {
  try {
    load("tiny-qwen3-vl-missing.json");
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.field(), "text_config.hidden_size");
  }
  try {
    load("tiny-gemma4.json");
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.field(), "text_config.global_head_dim");
    EXPECT_EQ(e.reason().rfind("unsupported: ", 0), 0u) << e.reason();
    EXPECT_EQ(std::string(e.what()).find('\n'), std::string::npos);
  }
  try {
    import_hf_config(R"({"model_type":"deepseek_v4","hidden_size":8,"vocab_size":8})", "v4.json", "v4");
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.field(), "compress_ratios");
    EXPECT_NE(e.reason().find("hyper-connections"), std::string::npos);
  }
}

// A ModelOpt quantization file given in place of the model's config says which file to give.
TEST(Families, QuantConfigInPlaceOfTheModelConfigSaysWhichFileToGive) {
  try {
    load_model_file(path("tiny-qwen3.5-moe_hf_quant_config.json"));
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.field(), "model_type");
    EXPECT_NE(e.reason().find("quantization config (hf_quant_config.json)"), std::string::npos) << e.reason();
    EXPECT_EQ(std::string(e.what()).find('\n'), std::string::npos);
  }
}

TEST(Families, MlaDecodeReadsTheLatentAndDsaCapsIt) {
  const auto& gpu = hw::Catalog::global().gpu("h200");
  const auto ds = load("tiny-deepseek-v3.json");
  const auto glm = load("tiny-glm-dsa.json");  // index_topk 256
  const auto cd = make_step_cost(ds, gpu, hw::Precision::bf16, {1, 1, 1});
  const auto cg = make_step_cost(glm, gpu, hw::Precision::bf16, {1, 1, 1});
  auto attn = [](const StepCostModel& c, std::int64_t ctx) {
    StepBatch b;
    b.decode_seqs = 8;
    b.decode_context_tokens = 8 * ctx;
    return step_part(c, b, "decode attention over the latent");
  };
  EXPECT_GT(attn(*cd, 8192), attn(*cd, 1024));
  EXPECT_DOUBLE_EQ(attn(*cg, 8192), attn(*cg, 1024));  // both past index_topk: the same 256 tokens
  {
    // Absorbed decode streams one latent of kv_lora_rank + rope = 64 + 16 elements per cached token
    // and layer (bf16), not a K and a V: 4 layers x 8 seqs x 8192 tokens x 80 x 2 bytes, plus the
    // queries and outputs (8 heads x 40 x 2 x 2 bytes per sequence).
    StepBatch b;
    b.decode_seqs = 8;
    b.decode_context_tokens = 8 * 8192;
    double bytes = 0;
    for (const auto& p : cd->breakdown(b).parts)
      if (p.op.rfind("decode attention over the latent", 0) == 0) bytes = p.hbm_bytes;
    EXPECT_NEAR(bytes, 4 * (8.0 * 8192 * 80 * 2 + 8 * 8 * 40 * 2 * 2.0), 1);
  }
  StepBatch b;
  b.decode_seqs = 8;
  b.decode_context_tokens = 8 * 8192;
  EXPECT_GT(step_part(*cg, b, "DSA indexer"), 0);
  b.prefill_seqs = 1;
  b.prefill_tokens = 512;
  b.prefill_attention_pairs = 512.0 * 513 / 2;
  EXPECT_GT(step_part(*cd, b, "kv_b_proj decompression"), 0);
  EXPECT_GT(step_part(*cd, b, "prefill attention (un-absorbed"), 0);
}

// A DSA indexer is kernels of its own each layer, whatever the context: its logits kernel's launch
// (the attention table at one cached token), eight elementwise passes over the indexer query
// (norm, RoPE, two rotations, two FP8 quantisations, head weights, cache write) and a top-k that
// reads the FP32 logits once. Tiny GLM: 3 MLA layers, 4 indexer heads x 128.
TEST(Families, DsaIndexerPaysItsKernelsEveryLayer) {
  const auto& gpu = hw::Catalog::global().gpu("h200");
  const auto& km = hw::kernel_model(gpu);
  const auto glm = load("tiny-glm-dsa.json");
  const auto cg = make_step_cost(glm, gpu, hw::Precision::bf16, {1, 1, 1});
  StepBatch b;
  b.decode_seqs = 8;
  b.decode_context_tokens = 8 * 8192;
  const double passes = 8 * km.memory_bound(8.0 * 4 * 128 * 2).seconds;   // 8 tokens x 4 heads x 128 x bf16
  const double topk = km.memory_bound(8.0 * 8192 * 4).seconds;             // 65,536 fp32 logits
  EXPECT_NEAR(step_part(*cg, b, "DSA indexer norm"), 3 * (passes + topk), 1e-12);
  EXPECT_GE(step_part(*cg, b, "DSA indexer logits"), 3 * km.attention_decode(8, 1, 4, 1, 128).seconds);
  // One token of context still launches every kernel.
  b.decode_context_tokens = 8;
  EXPECT_NEAR(step_part(*cg, b, "DSA indexer norm"), 3 * (passes + km.memory_bound(8.0 * 4).seconds), 1e-12);
}

TEST(Families, CatalogueEntriesByHand) {
  // DeepSeek-V3: 61 MLA layers, 3 dense (18432), 58 MoE (256 x 2048, 1 shared), vocab 129280.
  const auto& d = model("deepseek-v3");
  const double H = 7168;
  const double mla = mla_block(H, 128, 1536, 512, 128, 64, 128);
  const double moe = 256 * mlp3(H, 2048) + mlp3(H, 2048) + H * 256 + 256 + H;
  const double total = 2 * 129280 * H + H + 61 * mla + 3 * (mlp3(H, 18432) + H) + 58 * moe;
  EXPECT_DOUBLE_EQ(total_params(d), total);
  EXPECT_NEAR(total / 671e9, 1, 0.02);
  EXPECT_DOUBLE_EQ(active_params(d), total - 58 * 248 * mlp3(H, 2048));
  EXPECT_DOUBLE_EQ(kv_bytes_per_token(d, hw::Precision::fp8), 61 * 576.0);
  EXPECT_EQ(d.checkpoint_precision, "fp8_block");

  // gpt-oss-120b: 36 layers alternating sliding (128) / full, 128 experts top 4 with biases.
  const auto& g = model("gpt-oss-120b");
  const double Hg = 2880, q = 64 * 64, kv = 8 * 64;
  const double attn = Hg * q + 2 * Hg * kv + q * Hg + Hg + (q + 2 * kv + Hg) + 64;
  const double expert = mlp3(Hg, 2880) + 2 * 2880 + Hg;
  const double gt = 2 * 201088 * Hg + Hg + 36 * (attn + 128 * expert + Hg * 128 + 128 + Hg);
  EXPECT_DOUBLE_EQ(total_params(g), gt);
  EXPECT_NEAR(gt / 116.83e9, 1, 0.002);
  EXPECT_NEAR((gt - 36 * 124 * expert - 201088 * Hg) / 5.13e9, 1, 0.01);  // without the input embedding
  EXPECT_EQ(g.count(LayerKind::sliding_attention), 18);

  // Qwen3.5-397B-A17B: 45 Gated DeltaNet + 15 gated attention, 512 experts top 10 + shared.
  const auto& w = model("qwen3.5-397b-a17b");
  const double Hq = 4096, kd = 16 * 128, vd = 64 * 128;
  const double gdn = Hq * (2 * kd + 2 * vd) + Hq * 128 + (2 * kd + vd) * 4 + 128 + 128 + vd * Hq + Hq;
  const double fa = Hq * 8192 * 2 + 2 * Hq * 512 + 8192 * Hq + Hq + 512;
  const double wm = 512 * mlp3(Hq, 1024) + mlp3(Hq, 1024) + Hq * 512 + 512 + Hq + Hq;
  EXPECT_DOUBLE_EQ(total_params(w), 2 * 248320 * Hq + Hq + 45 * gdn + 15 * fa + 60 * wm);
  EXPECT_DOUBLE_EQ(ssm_state_bytes_per_seq(w, {8, 1, 1}), 45 * 8 * 128 * 128 * 4.0);
  EXPECT_DOUBLE_EQ(conv_state_bytes_per_seq(w, {8, 1, 1}), 45 * 3 * (2 * kd + vd) / 8 * 2.0);
}

TEST(Families, HfIdAliases) {
  ASSERT_NE(model_by_hf_id("openai/gpt-oss-120b"), nullptr);
  EXPECT_EQ(model_by_hf_id("openai/gpt-oss-120b")->name, "gpt-oss-120b");
  EXPECT_EQ(model_by_hf_id("nvidia/Llama-3.1-8B-Instruct-FP8")->name, "llama-3.1-8b");
  EXPECT_EQ(model_by_hf_id("moonshotai/Kimi-K2.5")->name, "kimi-k2.5");
  EXPECT_EQ(model_by_hf_id("zhipuai/GLM-5")->name, "glm-5");
  EXPECT_EQ(model_by_hf_id("Qwen/Qwen3-32B-FP8")->name, "qwen3-32b");
  EXPECT_EQ(model_by_hf_id("deepseek-ai/DeepSeek-R1/")->name, "deepseek-r1");
  EXPECT_EQ(model_by_hf_id("nobody/nothing"), nullptr);
}

// A Hugging Face id as a run or a user writes it: Meta's older "Meta-Llama" repository names, a
// re-release dated -2507, another organisation's quantised copy, a Nemotron checkpoint; the
// checkpoint a quantised repository's id names, in the format the model publishes.
// A config.json where a user keeps it names the Hugging Face id its path shows, so that a run's
// model_path finds it (validate / calibrate e2e --model-file): the hub cache's snapshot folder
// (named after the repository, not the hash), a clone's ORG/NAME folder, a file ORG--NAME_config.json.
TEST(Families, AConfigFileNamesTheIdItsPathShows) {
  const auto root = std::filesystem::temp_directory_path() / "servesim_hf_paths";
  const std::string text = fixture("tiny-qwen3.json");
  struct Case { std::string file, name, id; };
  for (const Case& c : {Case{"hub/models--acme--Tiny-Q3/snapshots/0123abcd/config.json", "Tiny-Q3", "acme/Tiny-Q3"},
                        Case{"clone/acme/Tiny-Q3b/config.json", "Tiny-Q3b", "acme/Tiny-Q3b"},
                        Case{"flat/acme--Tiny-Q3c_config.json", "acme--Tiny-Q3c", "acme/Tiny-Q3c"}}) {
    const auto f = root / c.file;
    std::filesystem::create_directories(f.parent_path());
    std::ofstream(f) << text;
    const ModelSpec& m = load_model_file(f.string());
    EXPECT_EQ(m.name, c.name);
    ASSERT_EQ(m.hf_ids.size(), 1u) << c.file;
    EXPECT_EQ(m.hf_ids[0], c.id);
  }
}

TEST(Families, ModelsFoundByTheIdsRunsName) {
  auto found = [](const char* id) { const ModelSpec* m = find_model(id); return m ? m->name : std::string("none"); };
  EXPECT_EQ(found("llama-3.1-70b"), "llama-3.1-70b");
  EXPECT_EQ(found("meta-llama/Meta-Llama-3.1-70B-Instruct"), "llama-3.1-70b");
  EXPECT_EQ(found("RedHatAI/Meta-Llama-3.1-70B-Instruct-FP8-dynamic"), "llama-3.1-70b");
  EXPECT_EQ(found("Qwen/Qwen3-235B-A22B-Thinking-2507"), "qwen3-235b-a22b");
  EXPECT_EQ(found("nvidia/NVIDIA-Nemotron-3-Super-120B-A12B-FP8"), "nemotron-3-super");
  EXPECT_EQ(found("Qwen/Qwen3-30B-A3B-FP8"), "qwen3-30b-a3b");
  EXPECT_EQ(found("nobody/nothing"), "none");
  EXPECT_EQ(model("meta-llama/Llama-3.3-70B-Instruct").name, "llama-3.3-70b");
  EXPECT_THROW(model("nobody/nothing"), Error);

  const auto& q = model("qwen3-235b-a22b");   // publishes bf16, fp8_block, nvfp4
  EXPECT_EQ(id_checkpoint_precision("Qwen/Qwen3-235B-A22B-FP8", q), "fp8_block");
  EXPECT_EQ(id_checkpoint_precision("nvidia/Qwen3-235B-A22B-NVFP4", q), "nvfp4");
  EXPECT_EQ(id_checkpoint_precision("Qwen/Qwen3-235B-A22B", q), "");
  const auto& l = model("llama-3.1-70b");     // publishes bf16 and per-tensor fp8
  EXPECT_EQ(id_checkpoint_precision("nvidia/Llama-3.1-70B-Instruct-FP8", l), "fp8");
  EXPECT_EQ(id_checkpoint_precision("RedHatAI/Meta-Llama-3.1-70B-Instruct-FP8-dynamic", l), "fp8");
  EXPECT_EQ(id_checkpoint_precision("nvidia/Llama-3.1-70B-Instruct-FP4", l), "nvfp4");
}

TEST(Families, CheckpointPrecisionSizesWeights) {
  // An FP8 checkpoint is sized at one byte per quantised weight without asking.
  const auto& d = model("deepseek-v3");
  EXPECT_EQ(checkpoint_weight_precision(d), hw::Precision::fp8_block);
  EXPECT_EQ(checkpoint_weight_precision(model("gpt-oss-120b")), hw::Precision::mxfp4);
  EXPECT_EQ(checkpoint_weight_precision(model("qwen3-32b")), hw::Precision::bf16);
  // gpt-oss keeps attention in BF16: only routed experts are 4-bit.
  const auto& g = model("gpt-oss-120b");
  const auto& gpu = hw::Catalog::global().gpu("b200");
  const auto p = plan_memory(g, gpu, hw::Precision::nvfp4, {1, 1, 1}, {});
  const double H = 2880, q = 64 * 64, kv = 8 * 64;
  const double routed = 36 * 128 * (3 * H * 2880.0);
  EXPECT_NEAR(p.weights.quantized, routed * weight_bytes_per_param(hw::Precision::nvfp4), 1);
  EXPECT_GT(p.weights.high_precision, 36 * (2 * H * q + 2 * H * kv) * 2.0);
}

TEST(Families, ReadmeListsEveryCatalogueModel) {
  std::ifstream in(std::string(SERVESIM_SOURCE_DIR) + "/README.md");
  std::stringstream ss;
  ss << in.rdbuf();
  const std::string readme = ss.str();
  for (const auto& name : model_names()) {
    const auto& m = model(name);
    std::string kinds;
    for (auto k : all_layer_kinds())
      if (int c = m.count(k); c > 0) kinds += (kinds.empty() ? "" : " ") + std::to_string(c) + std::string(1, pattern_char(k));
    const std::string row = "| " + name + " | " + std::to_string(m.layers.size()) + " (" + kinds + ") |";
    EXPECT_NE(readme.find(row), std::string::npos) << "README's model table lacks or misstates: " << row;
  }
}

// Every catalogue entry against the publisher's figures, written here with their source (not read
// from the entry): total within 2 %; active within 2 % counted the way the publisher counts it
// (all / without the input embedding / without the embedding and LM head), or within the rounding
// of a figure published only to the billion.
TEST(Families, EveryCatalogueEntryWithinTwoPercentOfItsPublishedFigures) {
  enum Counts { all, no_input_embedding, no_embeddings };
  struct Row { const char* name; double total, active; Counts counts; double rounding; const char* source; };
  const Row rows[] = {
      {"deepseek-r1", 671e9, 37e9, no_input_embedding, 0, "DeepSeek-R1 model card: 671B total, 37B activated"},
      {"deepseek-v3", 671e9, 37e9, no_input_embedding, 0, "DeepSeek-V3 model card / tech report: 671B total, 37B activated"},
      {"glm-5", 744e9, 40e9, no_embeddings, 0, "Z.ai GLM-5 announcement: 744B total, 40B active"},
      {"gpt-oss-120b", 116.83e9, 5.13e9, no_input_embedding, 0, "gpt-oss model card: 116.83B total, 5.13B active per token"},
      {"kimi-k2.5", 1.04e12, 32e9, no_input_embedding, 0, "Kimi K2 model card: 1.04T total, 32B activated"},
      {"llama-3.1-70b", 70.6e9, 70.6e9, all, 0, "Llama 3.1 model card: 70.6B"},
      {"llama-3.1-8b", 8.03e9, 8.03e9, all, 0, "Llama 3.1 model card: 8.03B"},
      {"minimax-m2.5", 230e9, 10e9, no_embeddings, 0, "MiniMax-M2 model card: 230B total, 10B active"},
      {"mixtral-8x7b", 46.7e9, 12.9e9, all, 0, "Mistral's Mixtral announcement: 46.7B total, 12.9B active"},
      {"nemotron-3-nano", 31.6e9, 3.58e9, all, 0, "Nemotron 3 Nano model card: 31.6B total, 3.5-3.6B active with embeddings"},
      {"nemotron-3-super", 120.6e9, 12.7e9, all, 0, "Nemotron 3 Super model card: 120.6B total, 12.7B active"},
      {"nemotron-3-ultra", 550e9, 55e9, all, 0, "Megatron-Bridge docs: 550B total, 55B active"},
      {"nemotron-h-56b", 56e9, 56e9, all, 0, "Nemotron-H-56B model card: 56B"},
      {"nemotron-h-8b", 8e9, 8e9, all, 0, "Nemotron-H-8B: 8B"},
      {"qwen3-235b-a22b", 235e9, 22e9, all, 0, "Qwen3-235B-A22B model card: 235B total, 22B activated"},
      {"qwen3-32b", 32.8e9, 32.8e9, all, 0, "Qwen3-32B model card: 32.8B"},
      {"qwen3.5-397b-a17b", 397e9, 17e9, all, 0.5e9, "Qwen3.5-397B-A17B model card: 397B total, 17B activated (to the billion)"},
      {"deepseek-v3.2", 671e9, 37e9, no_input_embedding, 0, "DeepSeek-V3 figures, 671B total, 37B activated (V3.2 adds the 0.85B indexer)"},
      {"gpt-oss-20b", 20.91e9, 3.61e9, no_input_embedding, 0, "gpt-oss model card: 20.91B total, 3.61B active per token"},
      {"kimi-k2", 1.04e12, 32e9, no_input_embedding, 0, "Kimi K2 model card: 1.04T total, 32B activated"},
      {"llama-3.1-405b", 405e9, 405e9, all, 0, "Llama 3.1 model card: 405B"},
      {"llama-3.3-70b", 70.6e9, 70.6e9, all, 0, "Llama 3.3 model card: 70.6B (the Llama 3.1 70B architecture)"},
      {"llama-4-maverick", 400e9, 17e9, all, 0, "Llama 4 model card: Maverick 400B total, 17B active"},
      {"llama-4-scout", 109e9, 17e9, all, 0, "Llama 4 model card: Scout 109B total, 17B active"},
      {"mixtral-8x22b", 141e9, 39e9, all, 0, "Mistral's Mixtral 8x22B announcement: 141B total, 39B active"},
      {"qwen3-30b-a3b", 30.5e9, 3.3e9, all, 0, "Qwen3-30B-A3B model card: 30.5B total, 3.3B activated"},
      {"qwen3-8b", 8.2e9, 8.2e9, all, 0, "Qwen3-8B model card: 8.2B"},
      {"qwen3-coder-480b-a35b", 480e9, 35e9, all, 0, "Qwen3-Coder-480B-A35B-Instruct model card: 480B total, 35B activated"},
      {"qwen3.5-122b-a10b", 122e9, 10e9, all, 0.5e9, "Qwen3.5-122B-A10B model card: 122B total, 10B activated (to the billion)"},
      {"qwen3.5-27b", 27e9, 27e9, all, 0.5e9, "Qwen3.5-27B model card: 27B (to the billion)"},
      {"qwen3.5-35b-a3b", 35e9, 3e9, all, 0.5e9, "Qwen3.5-35B-A3B model card: 35B total, 3B activated (to the billion)"},
  };
  std::set<std::string> seen;
  for (const auto& r : rows) {
    SCOPED_TRACE(std::string(r.name) + " (" + r.source + ")");
    const auto& m = model(r.name);
    seen.insert(m.name);
    const double emb = double(m.vocab) * m.hidden;
    const double active = active_params(m) - (r.counts != all ? emb : 0) - (r.counts == no_embeddings && !m.tied_embeddings ? emb : 0);
    EXPECT_NEAR(total_params(m) / r.total, 1.0, std::max(0.02, r.rounding / r.total));
    EXPECT_NEAR(active / r.active, 1.0, std::max(0.02, r.rounding / r.active));
  }
  for (const auto& n : model_names()) {
    if (!model(n).estimate) {
      EXPECT_TRUE(seen.count(model(n).name)) << n << " has no published figures in this test";
    }
  }
}

// SGLang's DSA prefill on Hopper (KernelTables::dsa_sparse_mla_prefill): a prompt past index_topk is
// attended by FlashMLA's sparse kernel, absorbed MQA over the latent with the TP-local heads padded
// to 64. The fixture's 8 heads become 64, each (query, picked token) pair costs QK^T over
// kv_lora_rank + rope = 80 and PV over kv_lora_rank = 64: (80 + 64) / (2 x 256) of a 256-wide MQA
// pair of the attention table. A chunk of 513 tokens after 512 cached: every query reads index_topk
// = 256 tokens, 513 x 256 = 131,328 pairs = 512 x 513 / 2, so the table's causal 512-token row
// times it exactly.
TEST(Families, DsaSparsePrefillOnHopperPadsHeadsToSixtyFour) {
  const auto glm = load("tiny-glm-dsa.json");  // index_topk 256, 8 heads, 3 MLA layers
  ASSERT_EQ(glm.count(LayerKind::mla), 3);
  const auto& h200 = hw::Catalog::global().gpu("h200");
  hw::KernelTables sparse{"sglang", "0.5"};
  sparse.dsa_sparse_mla_prefill = true;
  const auto c = make_step_cost(glm, h200, hw::Precision::bf16, {1, 1, 1}, hw::Precision::bf16, sparse);
  StepBatch b;
  b.prefill_seqs = 1;
  b.prefill_tokens = 513;
  b.prefill_attention_pairs = 513.0 * 512 + 513.0 * 514 / 2;
  const auto& km = hw::kernel_model(h200, sparse);
  const double row = km.attention_prefill(1, 512, 64, 1, 256, hw::Precision::bf16).seconds;
  EXPECT_NEAR(step_part(*c, b, "prefill attention (sparse MLA"), 3 * row * (80.0 + 64) / 512, 1e-12);
  {
    // A fresh prompt reads 1 + 2 + ... + k, then k a query: with index_topk 3, 13 tokens read
    // 1 + 2 + 3 x 11 = 36 pairs = 8 x 9 / 2, the table's causal 8-token row.
    ModelSpec k3 = glm;
    k3.index_topk = 3;
    const auto c3 = make_step_cost(k3, h200, hw::Precision::bf16, {1, 1, 1}, hw::Precision::bf16, sparse);
    StepBatch f;
    f.prefill_seqs = 1;
    f.prefill_tokens = 13;
    f.prefill_attention_pairs = 13.0 * 14 / 2;
    const double row8 = km.attention_prefill(1, 8, 64, 1, 256, hw::Precision::bf16).seconds;
    EXPECT_NEAR(step_part(*c3, f, "prefill attention (sparse MLA"), 3 * row8 * (80.0 + 64) / 512, 1e-12);
  }
  EXPECT_EQ(step_part(*c, b, "prefill attention (un-absorbed"), 0);
  // Absorbed: W_UK / W_UV instead of kv_b_proj's decompression.
  EXPECT_EQ(step_part(*c, b, "kv_b_proj decompression"), 0);
  EXPECT_GT(step_part(*c, b, "W_UK / W_UV absorption GEMM (sparse prefill)"), 0);
  // A prompt within index_topk (200 tokens) attends every token: un-absorbed MHA, as before.
  StepBatch s;
  s.prefill_seqs = 1;
  s.prefill_tokens = 200;
  s.prefill_attention_pairs = 200.0 * 201 / 2;
  EXPECT_EQ(step_part(*c, s, "prefill attention (sparse MLA"), 0);
  EXPECT_GT(step_part(*c, s, "prefill attention (un-absorbed"), 0);
  // Four 200-token prompts in one step are four short prompts, not one of 400: still dense.
  s.prefill_seqs = 4;
  s.prefill_tokens = 800;
  s.prefill_attention_pairs = 4 * 200.0 * 201 / 2;
  EXPECT_EQ(step_part(*c, s, "prefill attention (sparse MLA"), 0);
  // Not on Blackwell, and not where the profile leaves it off.
  const auto cb = make_step_cost(glm, hw::Catalog::global().gpu("b200"), hw::Precision::bf16, {1, 1, 1}, hw::Precision::bf16, sparse);
  EXPECT_EQ(step_part(*cb, b, "prefill attention (sparse MLA"), 0);
  const auto cv = make_step_cost(glm, h200, hw::Precision::bf16, {1, 1, 1});
  EXPECT_EQ(step_part(*cv, b, "prefill attention (sparse MLA"), 0);
  EXPECT_GT(step_part(*cv, b, "prefill attention (un-absorbed"), 0);
}

// Llama-Nemotron's searched stack (nemotron-nas): each layer's block_configs entry keeps or drops
// its attention and gives its FFN a width of its own, int(2 x ffn_mult x hidden / 3) rounded up to
// 256. Tiny fixture, hidden 768, 12 heads of 64, n_heads_in_group 4 (3 KV heads):
// L0 attention + FFN 1.0 (512), L1 FFN 0.5 (256) alone, L2 attention alone, L3 attention + FFN
// 1.3125 (672 -> 768).
TEST(Families, NemotronNasLayersOfTheirOwnWidths) {
  const auto m = load("tiny-nemotron-nas.json");
  using K = LayerKind;
  ASSERT_EQ(m.layers, (std::vector<K>{K::attention, K::mlp, K::mlp, K::attention, K::attention, K::mlp}));
  EXPECT_EQ(m.kv_heads, 3);
  EXPECT_EQ(m.mlp_intermediate, 768);
  EXPECT_EQ(m.layer_mlp_widths, (std::vector<std::int64_t>{0, 512, 256, 0, 0, 768}));
  EXPECT_EQ(m.mlp_width_counts(), (std::vector<std::pair<std::int64_t, int>>{{512, 1}, {256, 1}, {768, 1}}));
  const double H = 768, q = 768, kv = 3 * 64;
  const double attn = H * q + 2 * H * kv + q * H + H;
  const double mlps = (mlp3(H, 512) + H) + (mlp3(H, 256) + H) + (mlp3(H, 768) + H);
  EXPECT_DOUBLE_EQ(total_params(m), 2 * 1000 * H + H + 3 * attn + mlps);
  EXPECT_DOUBLE_EQ(kv_bytes_per_token(m, hw::Precision::bf16), 3 * 2 * kv * 2.0);
  // Weights: against the same stack at 768 everywhere, 3 x 768 x (256 + 512) BF16 weights fewer.
  auto wide = m;
  wide.layer_mlp_widths.clear();
  const auto& gpu = hw::Catalog::global().gpu("h100");
  const double w = plan_memory(m, gpu, hw::Precision::bf16, {1, 1, 1}, {}).weights.total();
  const double ww = plan_memory(wide, gpu, hw::Precision::bf16, {1, 1, 1}, {}).weights.total();
  EXPECT_DOUBLE_EQ(ww - w, 3 * H * (256 + 512) * 2.0);
  // A step's MLP row: each block at its own width, the sum of the three uniform stacks' rows / 3.
  StepBatch b;
  b.decode_seqs = 8;
  b.decode_context_tokens = 8 * 1024;
  auto mlp_row = [&](const ModelSpec& s) { return step_part(*make_step_cost(s, gpu, hw::Precision::bf16, {1, 1, 1}), b, "up + down GEMM"); };
  double uniform = 0;
  for (std::int64_t width : {512, 256, 768}) {
    auto u = wide;
    u.mlp_intermediate = width;
    uniform += mlp_row(u) / 3;
  }
  EXPECT_NEAR(mlp_row(m), uniform, 1e-12);
}

TEST(Families, NemotronNasRefusesWhatItDoesNotModel) {
  const std::string text = fixture("tiny-nemotron-nas.json");
  auto refused = [&](const std::string& from, const std::string& to, const std::string& words) {
    std::string t = text;
    const auto at = t.find(from);
    ASSERT_NE(at, std::string::npos) << from;
    t.replace(at, from.size(), to);
    try {
      import_hf_config(t, "nas.json", "nas");
      FAIL() << words;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(words), std::string::npos) << e.what();
    }
  };
  refused("\"replace_with_linear\": false", "\"replace_with_linear\": true",
          "block_configs[0].attention.replace_with_linear: unsupported: attention replaced by one linear layer");
  refused("\"n_heads_in_group\": 4", "\"n_heads_in_group\": 6", "attention layers of different KV head counts (2 and 3)");
  refused("\"n_heads_in_group\": 4", "\"n_heads_in_group\": 5", "n_heads_in_group: must divide num_attention_heads (12)");
}

// Xiaomi MiMo: Qwen2's decoder with q / k / v biases and one multi-token-prediction layer of it.
TEST(Families, MimoIsQwen2WithMtpLayers) {
  const auto m = load("tiny-mimo.json");
  EXPECT_EQ(m.count(LayerKind::attention), 2);
  EXPECT_EQ(m.count(LayerKind::mlp), 2);
  EXPECT_FALSE(m.qk_norm);
  EXPECT_TRUE(m.attention_bias);
  const double H = 256, q = 4 * 64, kv = 2 * 64;
  const double attn = H * q + 2 * H * kv + q * H + H + (q + 2 * kv + H);
  EXPECT_DOUBLE_EQ(total_params(m), 2 * 1000 * H + H + 2 * (attn + mlp3(H, 512) + H));
  EXPECT_EQ(m.mtp_layers, 1);
  EXPECT_DOUBLE_EQ(mtp_params(m), 2 * H * H + 3 * H + attn + mlp3(H, 512) + H);
}
