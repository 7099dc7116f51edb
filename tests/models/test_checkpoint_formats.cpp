// The checkpoint's quantisation format read from HF quantization_config and the catalogue, the
// format a requested precision runs in, and the weights of INT4 (W4A16 group 32) and MXFP4 experts.
#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "common/embedded.hpp"
#include "common/error.hpp"
#include "hwmodels/catalog.hpp"
#include "hwmodels/work.hpp"
#include "models/memory.hpp"
#include "models/model_spec.hpp"
#include "models/step_cost.hpp"

using namespace servesim;
using namespace servesim::models;

namespace {
// A small qwen3_moe config with the given quantization_config.
ModelSpec with_quant(const nlohmann::json& q) {
  nlohmann::json c = {{"model_type", "qwen3_moe"}, {"hidden_size", 256}, {"intermediate_size", 512},
                      {"moe_intermediate_size", 128}, {"num_hidden_layers", 2}, {"num_attention_heads", 4},
                      {"num_key_value_heads", 2}, {"head_dim", 64}, {"num_experts", 8}, {"num_experts_per_tok", 2},
                      {"vocab_size", 1000}, {"tie_word_embeddings", false}, {"quantization_config", q}};
  return import_hf_config(c.dump(), "test.json", "q");
}
}  // namespace

TEST(CheckpointFormats, ReadFromQuantizationConfig) {
  EXPECT_EQ(with_quant({{"quant_method", "fp8"}, {"weight_block_size", {128, 128}}}).checkpoint_precision, "fp8_block");
  EXPECT_EQ(with_quant({{"quant_method", "fp8"}}).checkpoint_precision, "fp8");
  EXPECT_EQ(with_quant({{"quant_method", "mxfp4"}}).checkpoint_precision, "mxfp4");
  const nlohmann::json int4 = {{"quant_method", "compressed-tensors"},
                               {"config_groups", {{"group_0", {{"weights", {{"num_bits", 4}, {"type", "int"}, {"group_size", 32}}}}}}}};
  const ModelSpec k = with_quant(int4);
  EXPECT_EQ(k.checkpoint_precision, "int4");
  EXPECT_EQ(k.checkpoint_group_size, 32);
  const nlohmann::json block = {{"quant_method", "compressed-tensors"},
                                {"config_groups", {{"group_0", {{"weights", {{"num_bits", 8}, {"type", "float"}, {"strategy", "block"}}}}}}}};
  EXPECT_EQ(with_quant(block).checkpoint_precision, "fp8_block");
  // The catalogue: MiniMax-M2.5 and DeepSeek-V3 are 128x128 block FP8, gpt-oss MXFP4, Kimi-K2.5 INT4 group 32.
  EXPECT_EQ(model("minimax-m2.5").checkpoint_precision, "fp8_block");
  EXPECT_EQ(model("deepseek-v3").checkpoint_precision, "fp8_block");
  EXPECT_EQ(checkpoint_weight_precision(model("gpt-oss-120b")), hw::Precision::mxfp4);
  EXPECT_EQ(checkpoint_weight_precision(model("kimi-k2.5")), hw::Precision::int4);
  EXPECT_EQ(model("kimi-k2.5").checkpoint_group_size, 32);
  EXPECT_EQ(checkpoint_format_label(model("kimi-k2.5")), "INT4 weight-only (W4A16), group 32, routed experts only");
  EXPECT_EQ(checkpoint_format_label(model("minimax-m2.5")), "FP8 128x128 block");
  // A run names the checkpoint it loads: the catalogue's, another published one, or a what-if.
  EXPECT_EQ(checkpoint_format_label(model("minimax-m2.5"), hw::Precision::fp8_block), "FP8 128x128 block");
  EXPECT_EQ(checkpoint_format_label(model("minimax-m2.5"), hw::Precision::nvfp4), "the published NVFP4 one, routed experts only");
  EXPECT_EQ(checkpoint_format_label(model("minimax-m2.5"), hw::Precision::bf16),
            "FP8 128x128 block, run as bf16, a format not among the published fp8_block, nvfp4");
  // GLM-5's FP8 checkpoint is 128x128 block FP8 (zai-org/GLM-5-FP8's quantization_config: quant_method
  // fp8, weight_block_size [128, 128]); the entry's default is the BF16 one.
  EXPECT_EQ(checkpoint_format_label(model("glm-5"), hw::Precision::fp8_block), "the published FP8 128x128 block one");
}

// "fp8" asked of a block-FP8 checkpoint runs that checkpoint; a per-tensor FP8 model stays per tensor.
TEST(CheckpointFormats, RequestedPrecisionRunsTheCheckpointsScaling) {
  EXPECT_EQ(checkpoint_format(model("minimax-m2.5"), hw::Precision::fp8), hw::Precision::fp8_block);
  EXPECT_EQ(checkpoint_format(model("minimax-m2.5"), hw::Precision::nvfp4), hw::Precision::nvfp4);
  EXPECT_EQ(checkpoint_format(model("nemotron-3-super"), hw::Precision::fp8), hw::Precision::fp8);
  // KV "auto": FP8 for ModelOpt FP8/NVFP4 checkpoints, the model dtype for block-FP8, MXFP4, INT4.
  EXPECT_EQ(checkpoint_kv_dtype(hw::Precision::fp8), hw::Precision::fp8);
  EXPECT_EQ(checkpoint_kv_dtype(hw::Precision::fp8_block), hw::Precision::bf16);
  EXPECT_EQ(checkpoint_kv_dtype(hw::Precision::int4), hw::Precision::bf16);
}

// Kimi-K2.5 INT4 at TP8: the routed experts (60 MoE layers x 384 experts x 3 x 7168 x 2048 / 8)
// at 0.5 + 2/32 bytes per parameter; everything else stays BF16.
TEST(CheckpointFormats, Int4RoutedExpertsWeighFourAndAHalfBits) {
  const auto& k = model("kimi-k2.5");
  EXPECT_DOUBLE_EQ(weight_bytes_per_param(hw::Precision::int4, 32), 0.5625);
  EXPECT_DOUBLE_EQ(weight_bytes_per_param(hw::Precision::int4, 128), 0.515625);
  EXPECT_DOUBLE_EQ(weight_bytes_per_param(hw::Precision::mxfp4), 0.53125);
  const auto& gpu = hw::Catalog::global().gpu("h200");
  const auto p = plan_memory(k, gpu, hw::Precision::int4, {8, 1, 1}, {});
  const double routed = double(k.count(LayerKind::moe)) * k.experts * 3.0 * 7168 * 2048 / 8;
  EXPECT_NEAR(p.weights.quantized, routed * 0.5625, 1);
  EXPECT_NE(p.weight_note.find("Marlin W4A16"), std::string::npos);
}

// NVIDIA's NVFP4 checkpoint of MiniMax-M2.5 quantises the routed experts only (hf_quant_config.json
// exclude_modules: every self_attn and router): its attention projections are costed and weighed as
// BF16. Per layer they hold q 3072x6144 + k, v 3072x1024 each + o 6144x3072 = 44,040,192 parameters.
TEST(CheckpointFormats, MiniMaxNvfp4KeepsItsAttentionInBf16) {
  const auto& m = model("minimax-m2.5");
  EXPECT_TRUE(quantizes_experts_only(m, hw::Precision::nvfp4));
  EXPECT_FALSE(quantizes_experts_only(m, hw::Precision::fp8_block));
  EXPECT_FALSE(quantizes_experts_only(m, hw::Precision::bf16));
  const auto& gpu = hw::Catalog::global().gpu("b200");
  // At TP4 each GPU holds a quarter of them (12 query and 2 KV heads per GPU).
  const double attn = 62.0 * (3072.0 * 6144 * 2 + 3072.0 * 1024 * 2) / 4;
  const auto fp4 = plan_memory(m, gpu, hw::Precision::nvfp4, {4, 1, 1}, {});
  const auto bf16 = plan_memory(m, gpu, hw::Precision::bf16, {4, 1, 1}, {});
  // The NVFP4 checkpoint keeps the attention projections in BF16 on top of what BF16 weights keep
  // there anyway (embeddings, LM head, router, norms).
  EXPECT_NEAR(fp4.weights.high_precision - bf16.weights.high_precision, attn * 2, 1);
  // One prefill step of 4096 tokens: the attention GEMMs take as long as at BF16, the experts do not.
  StepBatch b;
  b.prefill_seqs = 1;
  b.prefill_tokens = 4096;
  b.prefill_attention_pairs = 4096.0 * 4097 / 2;
  const auto c4 = make_step_cost(m, gpu, hw::Precision::nvfp4, {4, 1, 1}, hw::Precision::fp8)->breakdown(b);
  const auto c16 = make_step_cost(m, gpu, hw::Precision::bf16, {4, 1, 1}, hw::Precision::fp8)->breakdown(b);
  auto part = [](const StepTime& t, const std::string& op) {
    for (const auto& p : t.parts)
      if (p.op == op) return p.seconds;
    return 0.0;
  };
  EXPECT_GT(part(c4, "QKV + O GEMM"), 0);
  EXPECT_DOUBLE_EQ(part(c4, "QKV + O GEMM"), part(c16, "QKV + O GEMM"));
  EXPECT_LT(part(c4, "routed experts (fused MoE)"), part(c16, "routed experts (fused MoE)"));
}

// The same from a Hugging Face config: a ModelOpt NVFP4 MoE checkpoint that ignores whole self_attn
// blocks quantises its routed experts only; one that ignores only lm_head or single projections does not.
TEST(CheckpointFormats, Nvfp4MoeCheckpointIgnoringSelfAttnQuantisesExpertsOnly) {
  const nlohmann::json nvfp4 = {
      {"quant_method", "modelopt"}, {"quant_algo", "NVFP4"},
      {"ignore", {"lm_head", "model.layers.0.self_attn*", "model.layers.0.mlp.gate"}},
      {"config_groups", {{"group_0", {{"weights", {{"num_bits", 4}, {"type", "float"}, {"group_size", 16}}}}}}}};
  const ModelSpec q = with_quant(nvfp4);
  EXPECT_EQ(q.checkpoint_precision, "nvfp4");
  EXPECT_TRUE(q.quantized_experts_only);
  nlohmann::json all = nvfp4;
  all["ignore"] = {"lm_head"};
  EXPECT_FALSE(with_quant(all).quantized_experts_only);
  // Single projections left out (DeepSeek-V3.1's NVFP4: q_a / q_b / kv_a / kv_b, o_proj quantised)
  // are not a routed-experts-only checkpoint.
  nlohmann::json some = nvfp4;
  some["ignore"] = {"lm_head", "model.layers.0.self_attn.q_proj", "model.layers.0.self_attn.k_proj"};
  EXPECT_FALSE(with_quant(some).quantized_experts_only);
}

// A catalogue entry's experts-only format must be one of its published checkpoints.
TEST(CheckpointFormats, ExpertsOnlyCheckpointMustBePublished) {
  nlohmann::json j = nlohmann::json::parse(servesim::data::get("models/data/minimax-m2.5.json"));
  j["experts_only_checkpoints"] = {{"int4", "a source"}};
  try {
    parse_model_json(j.dump(), "bad.json");
    FAIL() << "accepted an unpublished format";
  } catch (const Error& e) {
    const std::string w = e.what();
    EXPECT_NE(w.find("bad.json"), std::string::npos) << w;
    EXPECT_NE(w.find("experts_only_checkpoints"), std::string::npos) << w;
    EXPECT_NE(w.find("not one of checkpoint_precisions"), std::string::npos) << w;
  }
}

// NVIDIA's NVFP4 DeepSeek checkpoints leave q_a_proj, q_b_proj, kv_a_proj_with_mqa and kv_b_proj of
// every layer out of quantisation (DeepSeek-V3.1 / V3.2 hf_quant_config.json exclude_modules; o_proj
// and the experts are NVFP4). At TP8 one MLA layer holds on each GPU q_a 7168 x 1536 and kv_a
// 7168 x 576 (replicated), q_b 1536 x (16 heads x 192) and kv_b 512 x (16 x 256): 11,010,048 +
// 4,128,768 + 4,718,592 + 2,097,152 = 21,954,560 parameters, stored at 2 bytes instead of 0.5625 and
// multiplied as BF16 GEMMs.
TEST(CheckpointFormats, DeepSeekNvfp4KeepsItsMlaLowRankProjectionsInBf16) {
  const auto& m = model("deepseek-r1");
  const auto p = mla_bf16_projections(m, hw::Precision::nvfp4);
  EXPECT_TRUE(p.q_a && p.q_b && p.kv_a && p.kv_b);
  EXPECT_FALSE(p.o);
  EXPECT_FALSE(mla_bf16_projections(m, hw::Precision::fp8_block).any());   // DeepSeek's own block-FP8 checkpoint
  EXPECT_TRUE(mla_bf16_projections(model("deepseek-v3"), hw::Precision::nvfp4).any());
  EXPECT_DOUBLE_EQ(mla_bf16_params(m, p, 8), 21954560.0);
  EXPECT_EQ(checkpoint_format_label(m, hw::Precision::nvfp4), "the published NVFP4 one, MLA low-rank projections BF16");

  ModelSpec all4 = m;   // the same model with every projection NVFP4
  all4.mla_bf16_checkpoints.clear();
  const auto& gpu = hw::Catalog::global().gpu("b200");
  const auto kept = plan_memory(m, gpu, hw::Precision::nvfp4, {8, 1, 1}, {});
  const auto none = plan_memory(all4, gpu, hw::Precision::nvfp4, {8, 1, 1}, {});
  EXPECT_NEAR(kept.weights.high_precision - none.weights.high_precision, 61 * 21954560.0 * 2, 1);
  EXPECT_NEAR(none.weights.quantized - kept.weights.quantized, 61 * 21954560.0 * 0.5625, 1);

  // A decode step of 8 sequences: the projections row is three BF16 GEMMs and one NVFP4 one (o_proj
  // 2,048 -> 7168) a layer; the absorption row is kv_b's two halves at BF16.
  StepBatch b;
  b.decode_seqs = 8;
  b.decode_context_tokens = 8 * 1536;
  const auto t = make_step_cost(m, gpu, hw::Precision::nvfp4, {8, 1, 1}, hw::Precision::fp8)->breakdown(b);
  auto part = [&](const std::string& op) {
    for (const auto& x : t.parts)
      if (x.op == op) return x.seconds;
    return 0.0;
  };
  const auto& km = hw::kernel_model(gpu);
  const auto bf16 = hw::Precision::bf16, fp4 = hw::Precision::nvfp4;
  const double proj = km.gemm(8, 1536, 7168, bf16).seconds + km.gemm(8, 16 * 192, 1536, bf16).seconds +
                      km.gemm(8, 576, 7168, bf16).seconds + km.gemm(8, 7168, 16 * 128, fp4).seconds;
  EXPECT_NEAR(part("q_a/q_b + kv_a + o_proj GEMM"), 61 * proj, 1e-9);
  const double absorb = km.gemm(8, 16 * 512, 128, bf16).seconds + km.gemm(8, 16 * 128, 512, bf16).seconds;
  EXPECT_NEAR(part("W_UK / W_UV absorption GEMM (decode)"), 61 * absorb, 1e-9);
}

// The same read from a Hugging Face checkpoint: single self_attn projections in the ModelOpt
// exclude list of an MLA model are kept in BF16; a model without MLA records nothing.
TEST(CheckpointFormats, MlaProjectionsLeftOutOfQuantisationAreReadFromTheCheckpoint) {
  nlohmann::json c = nlohmann::json::parse(servesim::data::get("models/data/deepseek-v3.json"))["hf_config"];
  c.erase("quantization_config");
  const std::string quant = R"({"quantization": {"quant_algo": "NVFP4", "kv_cache_quant_algo": "FP8", "exclude_modules":
      ["lm_head", "model.layers.0.self_attn.q_a_proj", "model.layers.0.self_attn.kv_b_proj", "model.layers.61*"]}})";
  const ModelSpec d = import_hf_config(c.dump(), "ds.json", "ds", quant);
  EXPECT_EQ(d.checkpoint_precision, "nvfp4");
  const auto p = mla_bf16_projections(d, hw::Precision::nvfp4);
  EXPECT_TRUE(p.q_a && p.kv_b);
  EXPECT_FALSE(p.q_b || p.kv_a || p.o);
  EXPECT_NE(p.source.find("hf_quant_config.json exclude_modules"), std::string::npos) << p.source;
  EXPECT_DOUBLE_EQ(mla_bf16_params(d, p, 1), 7168.0 * 1536 + 512.0 * 128 * 256);
  const nlohmann::json nvfp4 = {
      {"quant_method", "modelopt"}, {"quant_algo", "NVFP4"},
      {"ignore", {"lm_head", "model.layers.0.self_attn.q_proj"}},
      {"config_groups", {{"group_0", {{"weights", {{"num_bits", 4}, {"type", "float"}, {"group_size", 16}}}}}}}};
  EXPECT_TRUE(with_quant(nvfp4).mla_bf16_checkpoints.empty());
}

// A catalogue entry's BF16 MLA projections name known projections of a published checkpoint.
TEST(CheckpointFormats, MlaBf16ProjectionsMustBeKnownAndPublished) {
  nlohmann::json j = nlohmann::json::parse(servesim::data::get("models/data/deepseek-r1.json"));
  auto fails = [&](const nlohmann::json& bad, const std::string& says) {
    nlohmann::json k = j;
    k["mla_bf16_checkpoints"] = bad;
    try {
      parse_model_json(k.dump(), "bad.json");
      ADD_FAILURE() << "accepted " << bad.dump();
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(says), std::string::npos) << e.what();
    }
  };
  fails({{"int4", {{"projections", {"q_a_proj"}}, {"source", "s"}}}}, "not one of checkpoint_precisions");
  fails({{"nvfp4", {{"projections", {"q_proj"}}, {"source", "s"}}}}, "unknown MLA projection");
  fails({{"nvfp4", {{"projections", {"q_a_proj"}}, {"source", ""}}}}, "source");
}

// The hybrid Nemotron NVFP4 checkpoints keep the attention projections and the Mamba mixer just
// before each attention layer in BF16; the step cost runs those GEMMs at BF16 as the memory plan
// weighs them: the attention row equals BF16's, and the Mamba row is the k kept layers at BF16 plus
// the other n - k at NVFP4 (the same model with the rule off: every projection NVFP4).
TEST(CheckpointFormats, NemotronNvfp4KeepsAttentionAndItsMambaNeighbourInBf16) {
  const auto& m = model("nemotron-3-nano");
  ModelSpec all4 = m;
  all4.hf_model_type = "nemotron_h_all_nvfp4";  // no exclusions
  int n = 0, k = 0;
  for (std::size_t i = 0; i < m.layers.size(); ++i) {
    if (m.layers[i] != LayerKind::mamba) continue;
    ++n;
    if (kept_high_precision(m, i, hw::Precision::nvfp4)) ++k;
  }
  ASSERT_GT(k, 0);
  ASSERT_LT(k, n);
  const auto& gpu = hw::Catalog::global().gpu("b200");
  StepBatch b;
  b.prefill_seqs = 1;
  b.prefill_tokens = 2048;
  b.prefill_attention_pairs = 2048.0 * 2049 / 2;
  auto part = [](const StepTime& t, const std::string& op) {
    for (const auto& p : t.parts)
      if (p.op == op) return p.seconds;
    return 0.0;
  };
  const auto mixed = make_step_cost(m, gpu, hw::Precision::nvfp4, {1, 1, 1}, hw::Precision::fp8)->breakdown(b);
  const auto fp4 = make_step_cost(all4, gpu, hw::Precision::nvfp4, {1, 1, 1}, hw::Precision::fp8)->breakdown(b);
  const auto bf16 = make_step_cost(m, gpu, hw::Precision::bf16, {1, 1, 1}, hw::Precision::fp8)->breakdown(b);
  EXPECT_DOUBLE_EQ(part(mixed, "QKV + O GEMM"), part(bf16, "QKV + O GEMM"));
  EXPECT_LT(part(fp4, "QKV + O GEMM"), part(bf16, "QKV + O GEMM"));
  const double want = part(fp4, "in_proj + out_proj GEMM") * (n - k) / n + part(bf16, "in_proj + out_proj GEMM") * k / n;
  EXPECT_NEAR(part(mixed, "in_proj + out_proj GEMM"), want, want * 1e-12);
}
