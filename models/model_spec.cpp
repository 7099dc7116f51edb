// Model catalogue, parameter counts and Hugging Face config.json import.
#include "models/model_spec.hpp"

#include <algorithm>
#include <fstream>
#include <memory>
#include <mutex>
#include <shared_mutex>
#include <optional>
#include <sstream>

#include "common/embedded.hpp"
#include "common/error.hpp"
#include "common/files.hpp"
#include "common/json_reader.hpp"
#include "common/text.hpp"

namespace servesim::models {

std::string_view to_string(LayerKind k) {
  switch (k) {
    case LayerKind::mamba: return "mamba";
    case LayerKind::attention: return "attention";
    case LayerKind::mlp: return "mlp";
    case LayerKind::moe: return "moe";
    case LayerKind::mla: return "mla";
    case LayerKind::sliding_attention: return "sliding_attention";
    case LayerKind::linear_attention: return "linear_attention";
  }
  return "?";
}

std::string_view to_string(DpPrefillMoe p) {
  switch (p) {
    case DpPrefillMoe::padded: return "padded";
    case DpPrefillMoe::gathered: return "gathered";
    case DpPrefillMoe::summed: return "summed";
  }
  return "?";
}

const std::vector<LayerKind>& all_layer_kinds() {
  static const std::vector<LayerKind> k{LayerKind::mamba, LayerKind::attention, LayerKind::mlp, LayerKind::moe,
                                        LayerKind::mla, LayerKind::sliding_attention, LayerKind::linear_attention};
  return k;
}

char pattern_char(LayerKind k) {
  switch (k) {
    case LayerKind::mamba: return 'M';
    case LayerKind::attention: return '*';
    case LayerKind::mlp: return '-';
    case LayerKind::moe: return 'E';
    case LayerKind::mla: return 'L';
    case LayerKind::sliding_attention: return 'S';
    case LayerKind::linear_attention: return 'G';
  }
  return '?';
}

bool keeps_kv(LayerKind k) {
  return k == LayerKind::attention || k == LayerKind::sliding_attention || k == LayerKind::mla;
}
bool is_mixer(LayerKind k) { return k != LayerKind::mlp && k != LayerKind::moe; }

int ModelSpec::count(LayerKind k) const { return int(std::count(layers.begin(), layers.end(), k)); }
int ModelSpec::kv_layers() const { return int(std::count_if(layers.begin(), layers.end(), keeps_kv)); }

double VisionEncoderSpec::params() const {
  const double h = hidden, f = mlp_intermediate;
  const double block = 4 * h * h + 4 * h + 2 * h * f + f + h + 4 * h;  // qkv+o (+bias), fc1/fc2 (+bias), 2 LayerNorms
  const double patch_embed = 3.0 * patch * patch * h + h + double(patches_per_tile()) * h;  // + position embedding
  // Pixel shuffle (0.5) concatenates 2x2 patches: projector input 4*h, MLP to the LLM width.
  const double proj = projector_intermediate > 0
                          ? 4 * h * double(projector_intermediate) + double(projector_intermediate) * double(llm_hidden)
                          : 0;
  return layers * block + patch_embed + proj;
}

namespace {
double mlp_params(std::int64_t in, std::int64_t inter, bool gated) { return (gated ? 3.0 : 2.0) * double(in) * double(inter); }
// One routed expert (weights + biases when the checkpoint has them).
double expert_params(const ModelSpec& m) {
  double p = mlp_params(m.moe_width(), m.moe_intermediate, m.moe_gated);
  if (m.moe_bias) p += (m.moe_gated ? 2.0 : 1.0) * double(m.moe_intermediate) + double(m.moe_width());
  return p;
}
double gqa_params(const ModelSpec& m) {
  const double H = double(m.hidden);
  const double q = double(m.heads) * m.head_dim, kv = double(m.kv_heads) * m.head_dim;
  double p = H * q * (m.attn_output_gate ? 2 : 1) + 2 * H * kv + q * H + H;
  if (m.attention_bias) p += q + 2 * kv + H;
  if (m.qk_norm) p += m.qk_norm_per_layer ? q + kv : 2.0 * m.head_dim;
  if (m.attention_sinks) p += m.heads;
  return p;
}
}  // namespace

double layer_params(const ModelSpec& m, LayerKind k) {
  const double H = double(m.hidden);
  switch (k) {
    case LayerKind::mamba: {
      const double di = double(m.mamba_d_inner()), conv = double(m.mamba_conv_dim());
      const double in_proj = H * (2 * di + 2.0 * m.groups * m.d_state + m.mamba_heads);
      return in_proj + conv * m.conv_kernel + conv /*conv bias*/ + 3.0 * m.mamba_heads /*A, D, dt_bias*/ +
             di /*gated norm*/ + di * H /*out_proj*/ + H /*pre-norm*/;
    }
    case LayerKind::attention:
    case LayerKind::sliding_attention: return gqa_params(m);
    case LayerKind::mla: {
      // vLLM deepseek_v2.py DeepseekV2MLAAttention: q_a_proj + q_a_layernorm + q_b_proj (or q_proj),
      // kv_a_proj_with_mqa + kv_a_layernorm, kv_b_proj, o_proj; plus the DSA indexer (wq_b, wk,
      // k_norm LayerNorm, weights_proj) where index_topk is set.
      const double h = m.heads, qk = m.qk_head_dim(), ql = m.q_lora_rank, kl = m.kv_lora_rank;
      const double q = ql > 0 ? H * ql + ql + ql * h * qk : H * h * qk;
      double p = q + H * (kl + m.qk_rope_head_dim) + kl + kl * h * (m.qk_nope_head_dim + m.v_head_dim) +
                 h * m.v_head_dim * H + H;
      if (m.index_topk > 0)
        p += (ql > 0 ? ql : H) * double(m.index_heads) * m.index_head_dim + H * m.index_head_dim + 2.0 * m.index_head_dim +
             H * m.index_heads;
      return p;
    }
    case LayerKind::linear_attention: {
      // vLLM qwen3_next.py Qwen3NextGatedDeltaNet: in_proj_qkvz (q, k, v, z), in_proj_ba (beta, a per
      // value head), depthwise conv1d over q/k/v (no bias), dt_bias and A_log per value head, the
      // gated RMSNorm over one value head, out_proj.
      const double kd = double(m.lin_key_dim()), vd = double(m.lin_value_dim()), nv = m.lin_value_heads;
      return H * (2 * kd + 2 * vd) + H * 2 * nv + double(m.lin_conv_dim()) * m.lin_conv_kernel + 2 * nv +
             m.lin_value_head_dim + vd * H + H;
    }
    case LayerKind::mlp: return mlp_params(m.hidden, m.mlp_intermediate, m.mlp_gated) + H;
    case LayerKind::moe: {
      const double routed = double(m.experts) * expert_params(m);
      const double shared = m.shared_experts > 0 ? mlp_params(m.hidden, m.shared_intermediate * m.shared_experts, m.moe_gated) : 0;
      const double latent = m.moe_latent > 0 ? 2 * H * double(m.moe_latent) : 0;
      return routed + shared + latent + H * m.experts /*router*/ + m.experts /*score bias*/ + H +
             (m.shared_expert_gate ? H : 0);
    }
  }
  return 0;
}

namespace {
double embedding_params(const ModelSpec& m) {
  return double(m.vocab) * double(m.hidden) * (m.tied_embeddings ? 1 : 2) + double(m.hidden) /*final norm*/;
}
}  // namespace

double total_params(const ModelSpec& m) {
  double p = embedding_params(m);
  for (std::size_t i = 0; i < m.layers.size(); ++i)
    p += m.layers[i] == LayerKind::mlp ? mlp_params(m.hidden, m.mlp_width(i), m.mlp_gated) + double(m.hidden) : layer_params(m, m.layers[i]);
  return p;
}

std::vector<std::pair<std::int64_t, int>> ModelSpec::mlp_width_counts() const {
  std::vector<std::pair<std::int64_t, int>> out;
  for (std::size_t i = 0; i < layers.size(); ++i) {
    if (layers[i] != LayerKind::mlp) continue;
    const std::int64_t w = mlp_width(i);
    auto it = std::find_if(out.begin(), out.end(), [w](const auto& e) { return e.first == w; });
    if (it == out.end()) out.emplace_back(w, 1);
    else ++it->second;
  }
  return out;
}

double active_params(const ModelSpec& m) {
  double p = total_params(m);
  if (m.experts > 0) p -= double(m.experts - m.top_k) * expert_params(m) * m.count(LayerKind::moe);
  return p;
}

double active_params_as_published(const ModelSpec& m) {
  const double table = double(m.vocab) * double(m.hidden);
  if (m.published_active_counts == "no_input_embedding") return active_params(m) - (m.tied_embeddings ? 0 : table);
  if (m.published_active_counts == "no_embeddings") return active_params(m) - table * (m.tied_embeddings ? 1 : 2);
  return active_params(m);
}

double mtp_params(const ModelSpec& m) {
  if (m.mtp_layers == 0) return 0;
  // One MTP layer: eh_proj (2H -> H), two input norms, its blocks, a final norm; embeddings and
  // LM head are shared with the base model. Nemotron 3 has one layer applied at every depth;
  // DeepSeek-V3 has one, MiniMax-M2 three with their own weights.
  double p = 2.0 * m.hidden * m.hidden + 3.0 * m.hidden;
  for (auto k : m.mtp_pattern) p += layer_params(m, k);
  return p * m.mtp_layers;
}

// ---------------------------------------------------------------------------------------------
// Import.

namespace {

// Marks the MLA projection a module name ends in ("q_a_proj", "kv_a_proj_with_mqa", ...); false for
// any other name.
bool mark_mla_projection(ModelSpec::MlaBf16Projections& p, const std::string& name) {
  if (name == "q_a_proj") return p.q_a = true;
  if (name == "q_b_proj") return p.q_b = true;
  if (name == "kv_a_proj_with_mqa") return p.kv_a = true;
  if (name == "kv_b_proj") return p.kv_b = true;
  if (name == "o_proj") return p.o = true;
  return false;
}

std::vector<LayerKind> parse_pattern(const JsonReader& j, const std::string& key) {
  std::vector<LayerKind> out;
  const std::string pat = j.string(key);
  for (char c : pat) {
    switch (c) {
      case 'M': out.push_back(LayerKind::mamba); break;
      case '*': out.push_back(LayerKind::attention); break;
      case '-': out.push_back(LayerKind::mlp); break;
      case 'E': out.push_back(LayerKind::moe); break;
      default: j.fail(key, std::string("unknown block type '") + c + "' (expected M, *, - or E)");
    }
  }
  return out;
}

std::vector<LayerKind> parse_block_types(const JsonReader& j, const std::string& key) {
  std::vector<LayerKind> out;
  const auto& arr = j.json().at(key);
  if (!arr.is_array()) j.fail(key, "expected an array of block types");
  for (std::size_t i = 0; i < arr.size(); ++i) {
    const std::string s = arr[i].is_string() ? text::lower(arr[i].get<std::string>()) : "";
    if (s == "mamba") out.push_back(LayerKind::mamba);
    else if (s == "attention") out.push_back(LayerKind::attention);
    else if (s == "mlp") out.push_back(LayerKind::mlp);
    else if (s == "moe") out.push_back(LayerKind::moe);
    else j.fail(key + "[" + std::to_string(i) + "]", "unknown block type " + brief(arr[i]) + " (expected mamba, attention, mlp or moe)");
  }
  return out;
}

// Architecture counts (layers, heads, widths of one head, experts) are at most 2^24: a bigger one
// is no model and would overflow the int arithmetic of shapes.
constexpr std::int64_t kMaxCount = std::int64_t{1} << 24;

int positive(const JsonReader& j, const std::string& key) {
  const auto v = j.integer(key);
  if (v <= 0) j.fail(key, "must be positive, got " + std::to_string(v));
  if (v > kMaxCount) j.fail(key, "must be at most 2^24, got " + std::to_string(v));
  return int(v);
}
// An optional count in [lo, hi] (default `def` when absent).
int count_or(const JsonReader& j, const std::string& key, std::int64_t def, std::int64_t lo, std::int64_t hi) {
  const auto v = j.integer_or(key, def);
  if (v < lo || v > hi)
    j.fail(key, "must be between " + std::to_string(lo) + " and " + std::to_string(hi) + ", got " + std::to_string(v));
  return int(v);
}
std::int64_t positive64(const JsonReader& j, const std::string& key) {
  const auto v = j.integer(key);
  if (v <= 0) j.fail(key, "must be positive, got " + std::to_string(v));
  if (v > (std::int64_t{1} << 32)) j.fail(key, "must be at most 2^32, got " + std::to_string(v));
  return v;
}

void read_attention(ModelSpec& m, const JsonReader& j) {
  m.heads = positive(j, "num_attention_heads");
  m.kv_heads = j.has("num_key_value_heads") ? positive(j, "num_key_value_heads") : m.heads;
  m.head_dim = j.has("head_dim") ? positive(j, "head_dim") : int(m.hidden / m.heads);
  if (m.heads % m.kv_heads != 0) j.fail("num_key_value_heads", "must divide num_attention_heads");
}

[[noreturn]] void unsupported(const JsonReader& j, const std::string& key, const std::string& feature) {
  j.fail(key, "unsupported: " + feature);
}

// HF layer_types ("full_attention", "sliding_attention", "linear_attention", ...) as mixers.
std::vector<LayerKind> parse_layer_types(const JsonReader& j, int n) {
  const auto& arr = j.json().at("layer_types");
  if (!arr.is_array()) j.fail("layer_types", "expected an array of layer types");
  if (int(arr.size()) != n)
    j.fail("layer_types", "has " + std::to_string(arr.size()) + " entries but num_hidden_layers is " + std::to_string(n));
  std::vector<LayerKind> out;
  for (std::size_t i = 0; i < arr.size(); ++i) {
    const std::string s = arr[i].is_string() ? arr[i].get<std::string>() : brief(arr[i]);
    if (s == "full_attention") out.push_back(LayerKind::attention);
    else if (s == "sliding_attention") out.push_back(LayerKind::sliding_attention);
    else if (s == "linear_attention") out.push_back(LayerKind::linear_attention);
    else
      j.fail("layer_types[" + std::to_string(i) + "]",
             "unsupported layer type \"" + s + "\" (supported: full_attention, sliding_attention, linear_attention)");
  }
  return out;
}

// Interleaves mixers with FFN blocks: ffn(i) says layer i's feed-forward kind.
template <class F> void stack(ModelSpec& m, const std::vector<LayerKind>& mixers, F ffn) {
  for (std::size_t i = 0; i < mixers.size(); ++i) {
    m.layers.push_back(mixers[i]);
    m.layers.push_back(ffn(int(i)));
  }
}

std::vector<LayerKind> all_full(int n) { return std::vector<LayerKind>(std::size_t(n), LayerKind::attention); }

void read_mla(ModelSpec& m, const JsonReader& j) {
  m.heads = positive(j, "num_attention_heads");
  m.kv_heads = m.heads;  // MLA caches one latent per token; the heads all read it
  m.q_lora_rank = count_or(j, "q_lora_rank", 0, 0, kMaxCount);
  m.kv_lora_rank = positive(j, "kv_lora_rank");
  m.qk_nope_head_dim = positive(j, "qk_nope_head_dim");
  m.qk_rope_head_dim = positive(j, "qk_rope_head_dim");
  m.v_head_dim = positive(j, "v_head_dim");
  m.head_dim = m.qk_head_dim();
  if (j.has("index_topk")) {
    m.index_topk = positive(j, "index_topk");
    m.index_heads = positive(j, "index_n_heads");
    m.index_head_dim = positive(j, "index_head_dim");
  }
}

// Routed experts with the usual DeepSeek/Qwen names; `experts_key` differs per family.
void read_moe(ModelSpec& m, const JsonReader& j, const std::string& experts_key, const std::string& inter_key) {
  m.experts = positive(j, experts_key);
  m.top_k = positive(j, j.has("num_experts_per_tok") ? "num_experts_per_tok" : "experts_per_token");
  m.moe_intermediate = positive64(j, inter_key);
  m.moe_gated = true;
  if (m.top_k > m.experts) j.fail("num_experts_per_tok", "exceeds the number of experts");
}

// Quantisation the checkpoint declares: quantization_config (fp8, mxfp4, compressed-tensors,
// modelopt) and a sibling hf_quant_config.json (ModelOpt: quant_algo, kv_cache_quant_algo).
void read_quantization(ModelSpec& m, const JsonReader* q, std::string_view hf_quant_json, const std::string& file) {
  auto from_groups = [&](const JsonReader& qc) -> std::string {
    if (!qc.has("config_groups")) return "";
    for (const auto& [name, g] : qc.json().at("config_groups").items()) {
      if (!g.is_object() || !g.contains("weights") || !g["weights"].is_object()) continue;
      const auto& w = g["weights"];
      const int bits = w.value("num_bits", 0);
      const std::string type = w.contains("type") && w["type"].is_string() ? w["type"].get<std::string>() : "";
      const int group = w.contains("group_size") && w["group_size"].is_number_integer() ? w["group_size"].get<int>() : 0;
      if (bits == 4 && type == "int") {
        m.checkpoint_group_size = group;
        return "int4";
      }
      if (bits == 4 && type == "float") return group == 32 ? "mxfp4" : "nvfp4";
      if (bits == 8 && type == "float") return w.value("strategy", std::string()) == "block" ? "fp8_block" : "fp8";
      if (bits == 8 && type == "int") return "int8";
      qc.fail("config_groups", "unsupported weight format: " + std::to_string(bits) + "-bit " + type);
    }
    return "";
  };
  auto ignores = [&](const JsonReader& qc, const char* key, const char* needle) {
    if (!qc.has(key) || !qc.json().at(key).is_array()) return false;
    for (const auto& e : qc.json().at(key))
      if (e.is_string() && e.get<std::string>().find(needle) != std::string::npos) return true;
    return false;
  };
  // An NVFP4 MoE checkpoint that keeps whole attention blocks out of quantisation ("...self_attn*",
  // not single projections as DeepSeek-V3.1's NVFP4 does) and, where the model has shared experts,
  // those too: NVIDIA's MiniMax-M2.5, Kimi-K2.x, GLM-5.1, Qwen3.5 NVFP4 (routed experts only).
  auto experts_only_nvfp4 = [&](const JsonReader& qc, const char* key) {
    if (m.count(LayerKind::moe) == 0 || !qc.has(key) || !qc.json().at(key).is_array()) return false;
    bool attention = false, shared = m.shared_experts == 0 && m.shared_intermediate == 0;
    for (const auto& e : qc.json().at(key)) {
      if (!e.is_string()) continue;
      const std::string x = e.get<std::string>();
      const auto at = x.find("self_attn");
      if (at != std::string::npos) {
        const std::string rest = x.substr(at + 9);
        if (rest.empty() || rest == "*" || rest == ".*" || rest == ".*.*") attention = true;
      }
      if (x.find("shared_expert") != std::string::npos) shared = true;
    }
    return attention && shared;
  };
  // Single MLA projections a quantised checkpoint leaves out (NVIDIA's NVFP4 DeepSeek-V3.1 / V3.2:
  // model.layers.N.self_attn.q_a_proj, ...): those GEMMs run and are stored in BF16.
  auto mla_bf16_from = [&](const JsonReader& qc, const char* key, const char* what) {
    if (m.quantized_experts_only || m.checkpoint_precision == "bf16" || m.count(LayerKind::mla) == 0 || !qc.has(key) ||
        !qc.json().at(key).is_array())
      return;
    ModelSpec::MlaBf16Projections p;
    for (const auto& e : qc.json().at(key)) {
      if (!e.is_string()) continue;
      const std::string x = e.get<std::string>();
      const auto at = x.find("self_attn.");
      if (at != std::string::npos) mark_mla_projection(p, x.substr(at + 10));
    }
    if (!p.any()) return;
    p.source = file + what;
    std::erase_if(m.mla_bf16_checkpoints, [&](const auto& c) { return c.first == m.checkpoint_precision; });
    m.mla_bf16_checkpoints.emplace_back(m.checkpoint_precision, p);
  };
  if (q) {
    const std::string method = text::lower(q->string_or("quant_method", ""));
    std::string fmt;
    // quant_method fp8 with weight_block_size: 128x128 block scales (DeepSeek-V3, MiniMax-M2.5,
    // Qwen3-FP8), which vLLM runs with other kernels than per-tensor FP8.
    if (method == "fp8") fmt = q->has("weight_block_size") ? "fp8_block" : "fp8";
    else if (method == "mxfp4") fmt = "mxfp4";
    else if (method == "compressed-tensors" || method == "modelopt") {
      fmt = from_groups(*q);
      if (fmt.empty() && q->has("quant_algo")) fmt = text::lower(q->string("quant_algo"));
      if (fmt.empty()) q->fail("quant_method", "no weight format in config_groups or quant_algo");
    } else if (!method.empty()) {
      unsupported(*q, "quant_method", "quantisation method \"" + method + "\" (supported: fp8, mxfp4, compressed-tensors, modelopt)");
    }
    if (fmt == "w4a16" || fmt == "int4_awq") fmt = "int4";
    if (!fmt.empty()) m.checkpoint_precision = fmt;
    // gpt-oss keeps attention and the router in BF16 (modules_to_not_convert); Kimi-K2.5's INT4
    // ignores self_attn, shared experts and dense MLPs: only routed experts are 4-bit.
    if ((fmt == "mxfp4" || fmt == "int4") &&
        (ignores(*q, "modules_to_not_convert", "self_attn") || ignores(*q, "ignore", "self_attn")))
      m.quantized_experts_only = true;
    if (fmt == "nvfp4" && experts_only_nvfp4(*q, "ignore")) m.quantized_experts_only = true;
    mla_bf16_from(*q, "ignore", " (quantization_config.ignore)");
  }
  if (!hf_quant_json.empty()) {
    const auto doc = parse_json(hf_quant_json, file + " (hf_quant_config.json)");
    JsonReader h(doc, file + " (hf_quant_config.json)");
    if (h.has("quantization")) {
      const auto qq = h.object("quantization");
      std::string algo = text::lower(qq.string_or("quant_algo", ""));
      if (algo == "mixed_precision" && qq.has("quantized_layers") && qq.json().at("quantized_layers").is_object()) {
        // ModelOpt mixed precision: per-layer formats. Sized at the 4-bit format when any layer has
        // it (the routed/dense MLPs, which hold most weights), else FP8; the mix goes in the note.
        int fp4 = 0, fp8 = 0;
        for (const auto& [layer, cfg] : qq.json().at("quantized_layers").items()) {
          const std::string a = cfg.is_object() && cfg.contains("quant_algo") && cfg["quant_algo"].is_string()
                                    ? text::lower(cfg["quant_algo"].get<std::string>()) : "";
          if (a.find("nvfp4") != std::string::npos) ++fp4;
          else if (a.find("fp8") != std::string::npos) ++fp8;
        }
        algo = fp4 > 0 ? "nvfp4" : "fp8";
        m.note += std::string(m.note.empty() ? "" : "; ") + "mixed-precision checkpoint (" + std::to_string(fp8) + " layers FP8, " +
                  std::to_string(fp4) + " NVFP4): weights sized as " + algo;
      }
      if (algo == "nvfp4" || algo == "fp8") m.checkpoint_precision = algo;
      else if (algo == "w4a16_awq" || algo == "int4_awq") m.checkpoint_precision = "int4";
      else if (!algo.empty()) unsupported(qq, "quant_algo", "\"" + algo + "\" (supported: NVFP4, FP8, W4A16_AWQ)");
      if (text::lower(qq.string_or("kv_cache_quant_algo", "")) == "fp8") m.checkpoint_kv_precision = "fp8";
      if (m.checkpoint_precision == "nvfp4" && experts_only_nvfp4(qq, "exclude_modules")) m.quantized_experts_only = true;
      mla_bf16_from(qq, "exclude_modules", " (hf_quant_config.json exclude_modules)");
    }
  }
}

// A vision tower the existing ViT spec can express (patch embed, pre-norm blocks, a 2x2 merge and
// an MLP projector): Qwen3-VL / Qwen3.5 (vision_config.depth ...) and Kimi-K2.5's MoonViT (vt_*).
// Native-resolution towers are costed per 32x32-patch tile (256 LLM tokens after the 2x2 merge).
bool read_vision(ModelSpec& m, const JsonReader& v) {
  VisionEncoderSpec e;
  if (v.has("depth") && v.has("num_heads")) {  // Qwen3-VL, Qwen3.5
    e.name = "ViT (" + v.string_or("model_type", "qwen3_vl") + " vision_config)";
    e.layers = positive(v, "depth");
    e.hidden = positive(v, "hidden_size");
    e.mlp_intermediate = positive(v, "intermediate_size");
    e.heads = positive(v, "num_heads");
    e.patch = positive(v, "patch_size");
  } else if (v.has("vt_num_hidden_layers")) {  // Kimi-K2.5 MoonViT
    e.name = "MoonViT (vision_config)";
    e.layers = positive(v, "vt_num_hidden_layers");
    e.hidden = positive(v, "vt_hidden_size");
    e.mlp_intermediate = positive(v, "vt_intermediate_size");
    e.heads = positive(v, "vt_num_attention_heads");
    e.patch = positive(v, "patch_size");
  } else {
    return false;
  }
  e.tile_pixels = 32 * e.patch;
  e.tokens_per_tile = 256;
  e.max_tiles = 12;
  e.thumbnail = false;
  e.projector_intermediate = 4LL * e.hidden;  // merger: LayerNorm, Linear(4h -> 4h), GELU, Linear(4h -> LLM)
  e.llm_hidden = m.hidden;
  m.vision = e;
  m.has_vision = true;
  return true;
}

// Llama-Nemotron's neural-architecture-searched stack (vLLM nemotron_nas.py, DeciLM): each
// layer's block_configs entry gives its attention (no_op: none; else GQA of n_heads_in_group query
// heads per KV head) and its FFN (no_op: none; else a SwiGLU MLP of
// _ffn_mult_to_intermediate_size(ffn_mult, hidden) = int(2 x ffn_mult x hidden / 3) rounded up to
// a multiple of 256). Linear replacements, sparsified blocks and attention windows are refused.
void import_nemotron_nas(ModelSpec& m, const JsonReader& j) {
  m.heads = positive(j, "num_attention_heads");
  m.head_dim = j.has("head_dim") ? positive(j, "head_dim") : int(m.hidden / m.heads);
  m.attention_bias = j.boolean_or("attention_bias", false);
  m.mlp_gated = true;
  const int n = positive(j, "num_hidden_layers");
  const std::vector<JsonReader> blocks = j.array("block_configs");
  if (int(blocks.size()) != n)
    j.fail("block_configs", "has " + std::to_string(blocks.size()) + " entries but num_hidden_layers is " + std::to_string(n));
  std::vector<std::int64_t> widths;
  for (const JsonReader& b : blocks) {
    for (const char* part : {"attention", "ffn"}) {
      const JsonReader c = b.object(part);
      if (c.boolean_or("no_op", false)) continue;
      if (c.boolean_or("replace_with_linear", false))
        unsupported(c, "replace_with_linear", std::string(part) + " replaced by one linear layer (nemotron-nas)");
      if (c.has("sparsify")) unsupported(c, "sparsify", "sparsified blocks (nemotron-nas)");
      if (std::string(part) == "attention") {
        if (c.has("window_length")) unsupported(c, "window_length", "attention windows of a nemotron-nas layer");
        const int g = positive(c, "n_heads_in_group");
        if (m.heads % g != 0) c.fail("n_heads_in_group", "must divide num_attention_heads (" + std::to_string(m.heads) + ")");
        if (m.kv_heads != 0 && m.kv_heads != m.heads / g)
          unsupported(c, "n_heads_in_group", "attention layers of different KV head counts (" + std::to_string(m.kv_heads) + " and " +
                                                 std::to_string(m.heads / g) + ")");
        m.kv_heads = m.heads / g;
        m.layers.push_back(LayerKind::attention);
        widths.push_back(0);
      } else {
        const double mult = c.number("ffn_mult");
        if (!(mult > 0 && mult <= 1024)) c.fail("ffn_mult", "must be a positive multiple of the hidden size (at most 1024)");
        std::int64_t w = std::int64_t(2 * mult * double(m.hidden) / 3);
        if (w % 256 != 0) w += 256 - w % 256;
        m.layers.push_back(LayerKind::mlp);
        widths.push_back(w);
        m.mlp_intermediate = std::max(m.mlp_intermediate, w);
      }
    }
  }
  if (m.kv_heads == 0) j.fail("block_configs", "no layer has attention (every attention block is no_op)");
  // One width everywhere: the plain stack.
  bool uniform = true;
  for (std::size_t i = 0; i < widths.size(); ++i)
    if (m.layers[i] == LayerKind::mlp && widths[i] != m.mlp_intermediate) uniform = false;
  if (!uniform) m.layer_mlp_widths = std::move(widths);
}

// The language model of one config object (the top level, or a VLM's text_config).
void import_text(ModelSpec& m, const JsonReader& j, const std::string& type, const JsonReader* outer) {
  m.hidden = positive64(j, "hidden_size");
  m.vocab = positive64(j, "vocab_size");
  const bool tie_default = outer ? outer->boolean_or("tie_word_embeddings", false) : false;
  m.tied_embeddings = j.boolean_or("tie_word_embeddings", tie_default);
  m.max_context = j.integer_or("max_position_embeddings", 0);
  if (m.max_context < 0 || m.max_context > (std::int64_t{1} << 31))
    j.fail("max_position_embeddings", "must be between 0 and 2^31, got " + std::to_string(m.max_context));
  auto layers_n = [&] { return positive(j, "num_hidden_layers"); };
  auto mtp_from = [&](const char* key, std::vector<LayerKind> pattern) {
    m.mtp_layers = count_or(j, key, 0, 0, 64);
    if (m.mtp_layers > 0) m.mtp_pattern = std::move(pattern);
  };
  if (type == "nemotron_h") {
    if (j.has("hybrid_override_pattern")) m.layers = parse_pattern(j, "hybrid_override_pattern");
    else if (j.has("layers_block_type")) m.layers = parse_block_types(j, "layers_block_type");
    else j.fail("hybrid_override_pattern", "missing: nemotron_h needs hybrid_override_pattern or layers_block_type");
    if (j.has("num_hidden_layers") && j.integer("num_hidden_layers") != std::int64_t(m.layers.size()))
      j.fail("num_hidden_layers", "is " + std::to_string(j.integer("num_hidden_layers")) + " but the layer pattern has " +
                                      std::to_string(m.layers.size()) + " blocks");
    if (m.count(LayerKind::attention) > 0) read_attention(m, j);
    if (m.count(LayerKind::mamba) > 0) {
      m.mamba_heads = positive(j, "mamba_num_heads");
      m.mamba_head_dim = positive(j, "mamba_head_dim");
      m.d_state = positive(j, "ssm_state_size");
      m.groups = positive(j, "n_groups");
      m.conv_kernel = positive(j, "conv_kernel");
      m.chunk_size = count_or(j, "chunk_size", 128, 1, kMaxCount);
      m.ssm_state_fp32 = text::lower(j.string_or("mamba_ssm_cache_dtype", "float32")) == "float32";
    }
    if (m.count(LayerKind::mlp) > 0) m.mlp_intermediate = positive64(j, "intermediate_size");
    if (m.count(LayerKind::moe) > 0) {
      m.experts = positive(j, "n_routed_experts");
      m.top_k = positive(j, "num_experts_per_tok");
      m.moe_intermediate = positive64(j, "moe_intermediate_size");
      m.shared_experts = count_or(j, "n_shared_experts", 0, 0, 1024);
      if (m.shared_experts > 0) m.shared_intermediate = positive64(j, "moe_shared_expert_intermediate_size");
      m.moe_latent = j.integer_or("moe_latent_size", 0);
    }
    // ReLU² non-gated MLPs and experts (vLLM nemotron_h.py).
    m.mlp_gated = m.moe_gated = false;
    m.mtp_layers = count_or(j, "num_nextn_predict_layers", 0, 0, 64);
    if (m.mtp_layers > 0) {
      if (j.has("mtp_hybrid_override_pattern")) m.mtp_pattern = parse_pattern(j, "mtp_hybrid_override_pattern");
      else if (j.has("mtp_layers_block_type")) m.mtp_pattern = parse_block_types(j, "mtp_layers_block_type");
      else m.mtp_pattern = {LayerKind::attention, LayerKind::moe};
    }
  } else if (type == "llama" || type == "qwen3" || type == "qwen3_vl_text" || type == "mimo") {
    read_attention(m, j);
    m.mlp_intermediate = positive64(j, "intermediate_size");
    m.mlp_gated = true;
    const int n = layers_n();
    auto mixers = all_full(n);
    if (type == "mimo") {
      // Xiaomi MiMo (vLLM mimo.py): Qwen2's decoder (biases on q, k, v) and multi-token-prediction
      // layers of one such decoder layer each (mimo_mtp.py).
      m.attention_bias = j.boolean_or("attention_bias", true);
      mtp_from("num_nextn_predict_layers", {LayerKind::attention, LayerKind::mlp});
    }
    if (type != "llama") {
      if (type != "mimo") m.qk_norm = true;  // Qwen3: RMSNorm over each q and k head
      // Qwen3 with use_sliding_window: layers from max_window_layers on use the window (HF qwen3).
      if (j.boolean_or("use_sliding_window", false) && j.has("sliding_window")) {
        m.sliding_window = positive64(j, "sliding_window");
        for (int i = count_or(j, "max_window_layers", n, 0, n); i < n; ++i) mixers[std::size_t(i)] = LayerKind::sliding_attention;
      }
    }
    stack(m, mixers, [](int) { return LayerKind::mlp; });
  } else if (type == "mixtral" || type == "qwen3_moe" || type == "qwen3_vl_moe_text") {
    read_attention(m, j);
    const int n = layers_n();
    auto mixers = all_full(n);
    if (type == "mixtral") {
      read_moe(m, j, "num_local_experts", "intermediate_size");
      if (j.has("sliding_window")) {  // Mistral-style window on every layer
        m.sliding_window = positive64(j, "sliding_window");
        mixers.assign(std::size_t(n), LayerKind::sliding_attention);
      }
    } else {
      m.qk_norm = true;
      read_moe(m, j, "num_experts", "moe_intermediate_size");
      if (j.integer_or("decoder_sparse_step", 1) != 1 || (j.has("mlp_only_layers") && !j.json().at("mlp_only_layers").empty()))
        unsupported(j, "decoder_sparse_step", "dense layers between MoE layers in a Qwen3 MoE stack");
    }
    stack(m, mixers, [](int) { return LayerKind::moe; });
  } else if (type == "gpt_oss") {
    read_attention(m, j);
    m.attention_bias = j.boolean_or("attention_bias", true);
    m.attention_sinks = true;  // a learned sink logit per head (vLLM gpt_oss.py)
    read_moe(m, j, "num_local_experts", "intermediate_size");
    m.moe_bias = true;  // gate_up_proj and down_proj biases
    m.response = {"harmony", 3};  // <|channel|>analysis<|message|> before the first text
    const int n = layers_n();
    auto mixers = j.has("layer_types") ? parse_layer_types(j, n) : all_full(n);
    if (std::count(mixers.begin(), mixers.end(), LayerKind::sliding_attention) > 0) m.sliding_window = positive64(j, "sliding_window");
    stack(m, mixers, [](int) { return LayerKind::moe; });
  } else if (type == "minimax_m2") {
    read_attention(m, j);
    m.qk_norm = j.boolean_or("use_qk_norm", false);
    m.qk_norm_per_layer = text::lower(j.string_or("qk_norm_type", "per_layer")) == "per_layer";
    read_moe(m, j, "num_local_experts", "intermediate_size");
    if (j.integer_or("shared_intermediate_size", 0) > 0) {
      m.shared_experts = 1;
      m.shared_intermediate = j.integer("shared_intermediate_size");
    }
    stack(m, all_full(layers_n()), [](int) { return LayerKind::moe; });
    if (j.boolean_or("use_mtp", false)) {
      m.mtp_layers = count_or(j, "num_mtp_modules", 1, 0, 64);
      m.mtp_pattern = {LayerKind::attention, LayerKind::moe};
    }
  } else if (type == "deepseek_v3" || type == "deepseek_v32" || type == "kimi_k2" || type == "glm_moe_dsa") {
    read_mla(m, j);
    m.mlp_intermediate = positive64(j, "intermediate_size");
    m.mlp_gated = true;
    read_moe(m, j, "n_routed_experts", "moe_intermediate_size");
    m.shared_experts = count_or(j, "n_shared_experts", 0, 0, 1024);
    m.shared_intermediate = m.moe_intermediate;
    if (j.integer_or("moe_layer_freq", 1) != 1) unsupported(j, "moe_layer_freq", "dense layers between MoE layers (moe_layer_freq != 1)");
    const int n = layers_n();
    if (j.has("layer_types")) {
      for (const auto& t : j.json().at("layer_types"))
        if (!t.is_string() || (t != "full_attention" && t != "deepseek_sparse_attention"))
          unsupported(j, "layer_types", "layer type " + brief(t) + " in an MLA stack");
    }
    const int dense = count_or(j, "first_k_dense_replace", 0, 0, n);
    stack(m, std::vector<LayerKind>(std::size_t(n), LayerKind::mla),
          [&](int i) { return i < dense ? LayerKind::mlp : LayerKind::moe; });
    mtp_from("num_nextn_predict_layers", {LayerKind::mla, LayerKind::moe});
  } else if (type == "qwen3_next" || type == "qwen3_5_text" || type == "qwen3_5_moe_text") {
    read_attention(m, j);
    m.qk_norm = true;
    m.attn_output_gate = j.boolean_or("attn_output_gate", true);
    m.lin_key_heads = positive(j, "linear_num_key_heads");
    m.lin_value_heads = positive(j, "linear_num_value_heads");
    m.lin_key_head_dim = positive(j, "linear_key_head_dim");
    m.lin_value_head_dim = positive(j, "linear_value_head_dim");
    m.lin_conv_kernel = positive(j, "linear_conv_kernel_dim");
    if (m.lin_value_heads % m.lin_key_heads != 0) j.fail("linear_num_value_heads", "must be a multiple of linear_num_key_heads");
    // vLLM's mamba_ssm_cache_dtype follows the config's mamba_ssm_dtype (float32 for Qwen3.5).
    m.lin_state_fp32 = text::lower(j.string_or("mamba_ssm_dtype", "float32")) == "float32";
    const int n = layers_n();
    std::vector<LayerKind> mixers;
    if (j.has("layer_types")) mixers = parse_layer_types(j, n);
    else {
      const int every = positive(j, "full_attention_interval");
      for (int i = 0; i < n; ++i) mixers.push_back((i + 1) % every == 0 ? LayerKind::attention : LayerKind::linear_attention);
    }
    const bool moe = type != "qwen3_5_text";
    if (moe) {
      read_moe(m, j, "num_experts", "moe_intermediate_size");
      m.shared_intermediate = j.integer_or("shared_expert_intermediate_size", 0);
      m.shared_experts = m.shared_intermediate > 0 ? 1 : 0;
      m.shared_expert_gate = m.shared_experts > 0;
      if (j.integer_or("decoder_sparse_step", 1) != 1 || (j.has("mlp_only_layers") && !j.json().at("mlp_only_layers").empty()))
        unsupported(j, "mlp_only_layers", "dense layers between MoE layers in a Qwen3.5 MoE stack");
    } else {
      m.mlp_intermediate = positive64(j, "intermediate_size");
      m.mlp_gated = true;
    }
    const LayerKind ffn = moe ? LayerKind::moe : LayerKind::mlp;
    stack(m, mixers, [&](int) { return ffn; });
    mtp_from(j.has("mtp_num_hidden_layers") ? "mtp_num_hidden_layers" : "num_nextn_predict_layers", {LayerKind::attention, ffn});
  } else if (type == "llama4_text") {
    read_attention(m, j);
    m.mlp_intermediate = positive64(j, "intermediate_size_mlp");
    m.mlp_gated = true;
    read_moe(m, j, "num_local_experts", "intermediate_size");
    m.shared_experts = 1;
    m.shared_intermediate = m.moe_intermediate;
    const int n = layers_n();
    const int step = count_or(j, "interleave_moe_layer_step", 1, 1, kMaxCount);
    if (step < 1) j.fail("interleave_moe_layer_step", "must be positive");
    // Chunked local attention on the RoPE layers, global NoPE attention on every 4th (vLLM llama4.py
    // no_rope_layers default); the chunk caps the KV a layer keeps, like a window.
    auto mixers = all_full(n);
    if (j.has("attention_chunk_size")) {
      m.sliding_window = positive64(j, "attention_chunk_size");
      m.chunked_attention = true;
      const bool listed = j.has("no_rope_layers") && j.json().at("no_rope_layers").is_array() &&
                          int(j.json().at("no_rope_layers").size()) == n;
      for (int i = 0; i < n; ++i) {
        const bool rope = listed ? j.json().at("no_rope_layers")[std::size_t(i)] != 0 : (i + 1) % 4 != 0;
        if (rope) mixers[std::size_t(i)] = LayerKind::sliding_attention;
      }
    }
    stack(m, mixers, [&](int i) { return (i + 1) % step == 0 ? LayerKind::moe : LayerKind::mlp; });
  } else if (type == "gemma4_text" || type == "gemma3_text" || type == "gemma4" || type == "gemma3") {
    if (j.has("global_head_dim"))
      unsupported(j, "global_head_dim", "per-layer-type attention shapes (Gemma's full-attention layers use head_dim " +
                                            std::to_string(j.integer("global_head_dim")) + " and other KV heads than its sliding layers)");
    unsupported(j, "model_type", "model_type \"" + type + "\" (Gemma's sandwich norms and per-layer embeddings)");
  } else if (type == "deepseek_v4" || type == "deepseek_ref") {
    unsupported(j, "compress_ratios", "DeepSeek-V4's compressed sparse attention and hyper-connections (compress_ratios, hc_mult)");
  } else if (type == "kimi_linear") {
    unsupported(j, "linear_attn_config", "Kimi Delta Attention (kimi_linear) mixers");
  } else if (type == "nemotron-nas") {
    import_nemotron_nas(m, j);
  } else if (type == "minimax_m3") {
    unsupported(j, "model_type", "model_type \"minimax_m3\" (its attention layout is not published in vLLM)");
  } else if (type == "mimo_v2_flash" || type == "step3p7") {
    unsupported(j, "model_type", "model_type \"" + type + "\" (no block mapping for this family)");
  } else {
    j.fail("model_type", "unsupported model_type \"" + type +
                             "\" (supported: nemotron_h, nemotron-nas, llama, mimo, mixtral, qwen3, qwen3_moe, gpt_oss, minimax_m2, "
                             "deepseek_v3, deepseek_v32, kimi_k2, glm_moe_dsa, qwen3_next, qwen3_5, qwen3_5_moe, llama4, and VLMs with a text_config)");
  }
}

// The text_config model types vLLM maps a VLM's language model to.
std::string text_type(const JsonReader& outer, const JsonReader& tc) {
  if (tc.has("model_type")) return tc.string("model_type");
  const std::string t = outer.string("model_type");
  if (t == "llama4") return "llama4_text";
  return t + "_text";
}

}  // namespace

ModelSpec import_hf_config(std::string_view json_text, const std::string& file, const std::string& name,
                           std::string_view hf_quant_json) {
  const auto doc = parse_json(python_json_words(json_text, PythonWords::null), file);
  if (!doc.is_object()) throw Error(file, "", "expected a JSON object (a Hugging Face config.json)");
  JsonReader top(doc, file);
  ModelSpec m;
  m.name = name;
  m.display_name = name;
  m.source = "Hugging Face config.json (" + file + ")";
  const bool nested = doc.contains("text_config") && doc.at("text_config").is_object();
  const JsonReader j = nested ? top.object("text_config") : top;
  std::string type = nested ? text_type(top, j) : top.string("model_type");
  m.hf_model_type = nested ? top.string_or("model_type", type) : type;
  // Kimi-K2.5's text_config says kimi_k2 or deepseek_v3: both DeepSeek-V3 stacks.
  import_text(m, j, type, nested ? &top : nullptr);
  if (nested) {
    if (top.has("vision_config") && !read_vision(m, top.object("vision_config")))
      m.note = "vision tower not modelled (its layout is not one the ViT spec expresses): text-only";
  }
  const JsonReader* qp = nullptr;
  std::optional<JsonReader> qr;
  if (top.has("quantization_config")) qr.emplace(top.object("quantization_config"));
  else if (nested && j.has("quantization_config")) qr.emplace(j.object("quantization_config"));
  if (qr) qp = &*qr;
  read_quantization(m, qp, hf_quant_json, file);
  if (m.layers.empty()) j.fail("num_hidden_layers", "the model has no layers");
  if (m.count(LayerKind::mamba) > 0 && m.mamba_heads % m.groups != 0) j.fail("n_groups", "must divide mamba_num_heads");
  return m;
}

ModelSpec parse_model_json(std::string_view json_text, const std::string& file) {
  const auto doc = parse_json(json_text, file);
  JsonReader j(doc, file);
  const std::string name = j.string("name");
  const std::string hf = j.object("hf_config").json().dump();
  const std::string quant = j.has("hf_quant_config") ? j.object("hf_quant_config").json().dump() : std::string();
  ModelSpec m = import_hf_config(hf, file + ": hf_config", name, quant);
  m.display_name = j.string_or("display_name", name);
  m.source = j.string("source");
  if (j.has("note")) m.note = j.string("note");
  m.estimate = j.boolean_or("estimate", false);
  m.advertised_context = j.integer_or("advertised_context", 0);
  m.published_total_params = j.number_or("published_total_params", 0);
  m.published_active_params = j.number_or("published_active_params", 0);
  m.published_active_counts = j.string_or("published_active_counts", "all");
  m.published_params_rounding = j.number_or("published_params_rounding", 0);
  if (m.published_active_counts != "all" && m.published_active_counts != "no_input_embedding" &&
      m.published_active_counts != "no_embeddings")
    j.fail("published_active_counts", "\"" + m.published_active_counts + "\" (expected all, no_input_embedding or no_embeddings)");
  auto strings = [&](const char* key) {
    std::vector<std::string> out;
    if (!j.has(key)) return out;
    const auto& a = j.json().at(key);
    if (!a.is_array()) j.fail(key, "expected an array of strings");
    for (const auto& e : a) {
      if (!e.is_string()) j.fail(key, "expected an array of strings, got " + brief(e));
      out.push_back(e.get<std::string>());
    }
    return out;
  };
  if (j.has("generation_config")) {
    const auto g = j.object("generation_config");
    m.sampling.temperature = g.number_or("temperature", 1.0);
    m.sampling.top_k = int(g.integer_or("top_k", 0));
    m.sampling.top_p = g.number_or("top_p", 1.0);
    m.sampling.source = g.string("source");
    if (!(m.sampling.temperature >= 0)) g.fail("temperature", "must be >= 0");
    if (!(m.sampling.top_p > 0 && m.sampling.top_p <= 1)) g.fail("top_p", "must be in (0, 1]");
  }
  m.hf_ids = strings("hf_ids");
  m.checkpoint_precisions = strings("checkpoint_precisions");
  if (j.has("experts_only_checkpoints")) {
    const auto e = j.object("experts_only_checkpoints");
    for (const auto& [fmt, src] : e.json().items()) {
      if (!src.is_string() || src.get<std::string>().empty())
        e.fail(fmt, "expected the source that shows the format quantises only the routed experts (a non-empty string)");
      if (std::find(m.checkpoint_precisions.begin(), m.checkpoint_precisions.end(), fmt) == m.checkpoint_precisions.end())
        e.fail(fmt, "not one of checkpoint_precisions");
      m.experts_only_checkpoints.emplace_back(fmt, src.get<std::string>());
    }
  }
  if (j.has("mla_bf16_checkpoints")) {
    const auto e = j.object("mla_bf16_checkpoints");
    for (const auto& [fmt, body] : e.json().items()) {
      if (std::find(m.checkpoint_precisions.begin(), m.checkpoint_precisions.end(), fmt) == m.checkpoint_precisions.end())
        e.fail(fmt, "not one of checkpoint_precisions");
      const auto c = e.object(fmt);
      ModelSpec::MlaBf16Projections p;
      if (!c.has("projections") || !c.json().at("projections").is_array())
        c.fail("projections", "expected an array of MLA projection names");
      for (const auto& e : c.json().at("projections"))
        if (!e.is_string() || !mark_mla_projection(p, e.get<std::string>()))
          c.fail("projections", "unknown MLA projection " + brief(e) + " (valid: q_a_proj, q_b_proj, kv_a_proj_with_mqa, kv_b_proj, o_proj)");
      p.source = c.string("source");
      if (!p.any()) c.fail("projections", "expected at least one projection");
      if (p.source.empty()) c.fail("source", "expected the file that shows the projections stay BF16 (a non-empty string)");
      m.mla_bf16_checkpoints.emplace_back(fmt, p);
    }
  }
  if (j.has("vision")) {
    const auto v = j.object("vision");
    m.has_vision = true;
    m.vision.name = v.string("name");
    m.vision.layers = int(v.integer("layers"));
    m.vision.hidden = int(v.integer("hidden"));
    m.vision.mlp_intermediate = int(v.integer("mlp_intermediate"));
    m.vision.heads = int(v.integer("heads"));
    m.vision.patch = int(v.integer("patch"));
    m.vision.tile_pixels = int(v.integer("tile_pixels"));
    m.vision.tokens_per_tile = int(v.integer("tokens_per_tile"));
    m.vision.max_tiles = int(v.integer("max_tiles"));
    m.vision.thumbnail = v.boolean_or("thumbnail", true);
    m.vision.projector_intermediate = v.integer_or("projector_intermediate", 0);
    m.vision.llm_hidden = m.hidden;
    if (m.vision.layers <= 0 || m.vision.hidden <= 0 || m.vision.heads <= 0 || m.vision.patch <= 0)
      v.fail("layers", "vision encoder sizes must be positive");
  }
  return m;
}

// ---------------------------------------------------------------------------------------------
// Catalogue.

namespace {
// Entries are never erased or overwritten (running simulations hold references to them); the
// lock lets add_model_file run while other threads look models up (the Python bindings release
// the GIL around simulations). An embedded entry is parsed when first asked for (a run names one
// model; parsing the 32 entries had been 5 % of a 64-request run's start-up), named until then by
// its file's stem, which its "name" must equal.
struct Entry {
  std::string name;
  std::string path;            // embedded: parsed from data::get(path) on first use
  std::once_flag once;
  std::unique_ptr<ModelSpec> spec;
  const ModelSpec& get() {
    std::call_once(once, [&] {
      if (spec) return;
      auto m = std::make_unique<ModelSpec>(parse_model_json(data::get(path), path));
      if (m->name != name) throw Error(path, "name", "'" + m->name + "' differs from the file's stem '" + name + "'");
      spec = std::move(m);
    });
    return *spec;
  }
};
struct Registry {
  std::vector<std::unique_ptr<Entry>> models;
  std::size_t builtin = 0;   // the first `builtin` entries are the embedded catalogue
  std::shared_mutex mu;
  Registry() {
    for (auto path : data::list("models/data/")) {
      if (!path.ends_with(".json")) continue;
      auto e = std::make_unique<Entry>();
      e->path = std::string(path);
      const auto slash = path.find_last_of('/');
      e->name = std::string(path.substr(slash == std::string_view::npos ? 0 : slash + 1));
      e->name.resize(e->name.size() - 5);
      models.push_back(std::move(e));
    }
    // By name: "deepseek-v3" before "deepseek-v3.2" (the files sort the other way, '.' before 'j').
    std::sort(models.begin(), models.end(), [](const auto& a, const auto& b) { return a->name < b->name; });
    builtin = models.size();
  }
};
Registry& registry() {
  static Registry r;
  return r;
}
}  // namespace

std::vector<std::string> model_names() {
  std::vector<std::string> out;
  std::shared_lock lock(registry().mu);
  for (const auto& e : registry().models) out.push_back(e->name);
  return out;
}

const ModelSpec& model(std::string_view name) {
  if (const ModelSpec* m = find_model(name)) return *m;
  throw Error("--model", "", "unknown model \"" + std::string(name) + "\" (known: " + text::join(model_names()) +
                                 ", or a Hugging Face id one of them lists: servesim model NAME)");
}

namespace {
std::string read_text(const std::string& path) { return read_input_file(path, kMaxJsonFileBytes); }
ModelSpec read_model_file_unchecked(const std::string& path);

// The hf_quant_config.json next to a config: "<dir>/hf_quant_config.json" for "<dir>/config.json",
// "<prefix>hf_quant_config.json" for "<prefix>config.json".
std::string sibling_quant_config(const std::string& path) {
  const auto slash = path.find_last_of('/');
  const std::string dir = slash == std::string::npos ? "" : path.substr(0, slash + 1);
  const std::string base = slash == std::string::npos ? path : path.substr(slash + 1);
  std::vector<std::string> candidates;
  if (base.ends_with("config.json")) candidates.push_back(dir + base.substr(0, base.size() - 11) + "hf_quant_config.json");
  candidates.push_back(dir + "hf_quant_config.json");
  for (const auto& c : candidates) {
    if (c == path) continue;
    std::ifstream in(c);
    if (in) return read_text(c);
  }
  return "";
}

// A model's name goes into results, terminals, emitted scripts and manifests: 1-128 characters
// of valid UTF-8 without control characters.
void check_model_name(const std::string& name, const std::string& path) {
  if (name.empty()) throw Error(path, "name", "must not be empty (it names the model in results and emitted deployments)");
  if (name.size() > 128) throw Error(path, "name", "must be at most 128 characters, got " + std::to_string(name.size()));
  for (const char ch : name)
    if (static_cast<unsigned char>(ch) < 0x20 || ch == 0x7f)
      throw Error(path, "name", "must not contain control characters (byte " + std::to_string(static_cast<unsigned char>(ch)) + ")");
  if (const auto at = text::invalid_utf8_at(name); at != std::string::npos)
    throw Error(path, "name", "is not valid UTF-8 (byte " + std::to_string(at) + ")");
}

ModelSpec read_model_file(const std::string& path) {
  ModelSpec m = read_model_file_unchecked(path);
  check_model_name(m.name, path);
  return m;
}

ModelSpec read_model_file_unchecked(const std::string& path) {
  const std::string text = read_text(path);
  const auto doc = parse_json(python_json_words(text, PythonWords::null), path);
  if (doc.is_object() && doc.contains("hf_config")) return parse_model_json(text, path);
  // A ModelOpt quantization file given in place of the model's config: say which file to give.
  if (doc.is_object() && doc.contains("quantization") && doc.contains("producer") && !doc.contains("model_type"))
    throw Error(path, "model_type",
                "this is a quantization config (hf_quant_config.json), not a model config: give the model's "
                "config.json (an hf_quant_config.json beside it, or <name>_hf_quant_config.json for "
                "<name>_config.json, is read with it)");
  // An HF config: named after its folder when it is "config.json", else after the file stem; the
  // Hugging Face id the path shows names it too (a run's model_path): ORG/NAME of a folder
  // ".../ORG/NAME/config.json", of the hub cache's ".../models--ORG--NAME/snapshots/HASH/config.json"
  // (named NAME, not after the hash) and of a file "ORG--NAME_config.json".
  const auto slash = path.find_last_of('/');
  std::string stem = slash == std::string::npos ? path : path.substr(slash + 1);
  std::string hf_id;
  auto parts_of = [](std::string p) {
    std::vector<std::string> out;
    for (std::size_t at; (at = p.find_last_of('/')) != std::string::npos; p.resize(at)) out.insert(out.begin(), p.substr(at + 1));
    out.insert(out.begin(), p);
    return out;
  };
  if (stem == "config.json" && slash != std::string::npos && slash > 0) {
    const auto dirs = parts_of(path.substr(0, slash));
    stem = dirs.back();
    if (dirs.size() >= 2) hf_id = dirs[dirs.size() - 2] + "/" + stem;
    if (dirs.size() >= 3 && dirs[dirs.size() - 2] == "snapshots" && dirs[dirs.size() - 3].starts_with("models--")) {
      const std::string repo = dirs[dirs.size() - 3].substr(8);
      if (const auto sep = repo.find("--"); sep != std::string::npos) stem = repo.substr(sep + 2), hf_id = repo.substr(0, sep) + "/" + stem;
    }
  } else {
    if (stem.ends_with(".json")) stem.resize(stem.size() - 5);
    if (stem.ends_with("_config")) stem.resize(stem.size() - 7);
    if (const auto sep = stem.find("--"); sep != std::string::npos && sep > 0) hf_id = stem.substr(0, sep) + "/" + stem.substr(sep + 2);
  }
  ModelSpec m = import_hf_config(text, path, stem, sibling_quant_config(path));
  if (m.hf_ids.empty() && !hf_id.empty()) m.hf_ids.push_back(hf_id);
  return m;
}
}  // namespace

const ModelSpec& add_model_file(const std::string& path) {
  ModelSpec m = read_model_file(path);
  auto& r = registry();
  std::unique_lock lock(r.mu);
  for (std::size_t i = 0; i < r.models.size(); ++i)
    if (text::iequals(r.models[i]->name, m.name))
      throw Error(path, "name",
                  "the model '" + m.name + "' is already in the catalogue" +
                      (i < r.builtin ? std::string(" (built in)") : std::string(" (added earlier)")) +
                      "; a model file never replaces one: give it another name (its \"name\", or the file's stem for a "
                      "Hugging Face config)");
  auto e = std::make_unique<Entry>();
  e->name = m.name;
  e->spec = std::make_unique<ModelSpec>(std::move(m));
  r.models.push_back(std::move(e));
  return *r.models.back()->spec;
}

const ModelSpec& load_model_file(const std::string& path) {
  // Specs keep stable addresses for the life of the process (step-cost models hold references);
  // a changed file is read again into a new entry.
  static std::mutex mu;
  static std::vector<std::pair<std::string, std::unique_ptr<ModelSpec>>> cache;
  const std::string text = read_text(path);
  const std::string key = path + '\n' + text;
  std::lock_guard<std::mutex> lock(mu);
  for (const auto& [k, spec] : cache)
    if (k == key) return *spec;
  cache.emplace_back(key, std::make_unique<ModelSpec>(read_model_file(path)));
  return *cache.back().second;
}

const ModelSpec* model_by_hf_id(std::string_view hf_id) {
  std::string id = text::lower(hf_id);
  while (id.ends_with("/")) id.pop_back();
  std::vector<std::string> tries{id};
  for (const char* suffix : {"-fp8", "-nvfp4", "-fp4"})
    if (id.ends_with(suffix)) tries.push_back(id.substr(0, id.size() - std::string_view(suffix).size()));
  std::shared_lock lock(registry().mu);
  for (const auto& t : tries)
    for (const auto& e : registry().models) {
      const ModelSpec& m = e->get();
      for (const auto& h : m.hf_ids)
        if (text::lower(h) == t) return &m;
    }
  return nullptr;
}

std::vector<std::string> model_name_candidates(std::string_view id) {
  std::vector<std::string> names{std::string(id)};
  std::string base = text::lower(id.substr(id.find_last_of('/') == std::string_view::npos ? 0 : id.find_last_of('/') + 1));
  auto add = [&] {
    if (!base.empty() && std::find(names.begin(), names.end(), base) == names.end()) names.push_back(base);
  };
  add();
  if (base.starts_with("meta-") && base.size() > 5) base.erase(0, 5), add();
  auto date = [](std::string_view b) {   // "-2507": a four-digit release date
    return b.size() > 5 && b[b.size() - 5] == '-' &&
           std::all_of(b.end() - 4, b.end(), [](char c) { return c >= '0' && c <= '9'; });
  };
  for (bool again = true; again;) {
    again = false;
    if (date(base)) {
      base.resize(base.size() - 5), add(), again = true;
      continue;
    }
    for (const char* suffix : {"-instruct", "-fp8", "-nvfp4", "-fp4", "-bf16", "-hf", "-dynamic", "-base", "-8k", "-thinking",
                               "-chat", "-w8a8", "-w4a16", "-awq", "-int4"})
      if (base.ends_with(suffix) && base.size() > std::string_view(suffix).size()) {
        base.resize(base.size() - std::string_view(suffix).size()), add(), again = true;
        break;
      }
  }
  return names;
}

const ModelSpec* find_model(std::string_view name_or_id) {
  auto by_name = [](std::string_view n) -> const ModelSpec* {
    std::shared_lock lock(registry().mu);
    for (const auto& e : registry().models)
      if (text::iequals(e->name, n)) return &e->get();
    return nullptr;
  };
  if (const ModelSpec* m = by_name(name_or_id)) return m;
  if (const ModelSpec* m = model_by_hf_id(name_or_id)) return m;
  for (const auto& n : model_name_candidates(name_or_id))
    if (const ModelSpec* m = by_name(n)) return m;
  return nullptr;
}

std::string id_checkpoint_precision(std::string_view id, const ModelSpec& m) {
  const std::string l = text::lower(id.substr(id.find_last_of('/') == std::string_view::npos ? 0 : id.find_last_of('/') + 1));
  auto names = [&](std::string_view tag) { return l.ends_with(tag) || l.find(std::string(tag) + "-") != std::string::npos; };
  if (names("-nvfp4") || names("-fp4")) return "nvfp4";
  if (names("-fp8")) {
    const auto& pub = m.checkpoint_precisions;
    const bool block = std::find(pub.begin(), pub.end(), "fp8_block") != pub.end();
    const bool tensor = std::find(pub.begin(), pub.end(), "fp8") != pub.end();
    return block && !tensor ? "fp8_block" : "fp8";
  }
  return "";
}

}  // namespace servesim::models
