// Memory planner: weights by precision, KV per token, Mamba state per sequence, activations and
// engine reserve per GPU, following vLLM's gpu_memory_utilization accounting.
#include "models/memory.hpp"

#include <algorithm>
#include <cmath>

#include "common/error.hpp"
#include "common/table.hpp"
#include "common/text.hpp"
#include "hwmodels/work.hpp"

namespace servesim::models {
namespace {

constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;

double dtype_bytes(hw::Precision p) { return kv_dtype_bytes(p); }

std::pair<int, int> stage_range(int layers, int pp, int stage) { return stage_layers(layers, pp, stage); }

int groups_per_gpu(const ModelSpec& m, int tp) { return mamba_groups_per_gpu(m, tp); }

double kv_heads_per_gpu(const ModelSpec& m, int tp) {
  return std::max(1.0, double(m.kv_heads) / tp);  // replicated when kv_heads < tp
}

// Routed-expert weights of one MoE block on one GPU: experts / ep of them, each inter / moe_tp
// wide, which is the whole over tp x dp whatever the split (TP, EP or both).
double routed_expert_params(const ModelSpec& m, const Parallelism& par) {
  return double(m.experts) * (m.moe_gated ? 3 : 2) * double(m.moe_width()) * double(m.moe_intermediate) / par.moe_group();
}

// One block's weights on one GPU: (quantisable linear params, params kept in BF16).
std::pair<double, double> block_weights(const ModelSpec& m, std::size_t layer, const Parallelism& par) {
  const LayerKind k = m.layers[layer];
  const double H = double(m.hidden), tp = par.tp;
  switch (k) {
    case LayerKind::mamba: {
      const double di = double(m.mamba_d_inner()) / tp, g = groups_per_gpu(m, par.tp), nh = double(m.mamba_heads) / tp;
      const double conv = di + 2 * g * m.d_state;
      const double lin = H * (2 * di + 2 * g * m.d_state + nh) + di * H;
      const double small = conv * (m.conv_kernel + 1) + 3 * nh + di + H;  // conv w+b, A, D, dt_bias, norms
      return {lin, small};
    }
    case LayerKind::attention:
    case LayerKind::sliding_attention: {
      const double q = double(m.heads) * m.head_dim / tp, kv = kv_heads_per_gpu(m, par.tp) * m.head_dim;
      double small = H + (m.attention_sinks ? double(m.heads) / tp : 0) + (m.attention_bias ? q + 2 * kv + H : 0);
      if (m.qk_norm) small += m.qk_norm_per_layer ? q + kv : 2.0 * m.head_dim;
      return {H * q * (m.attn_output_gate ? 2 : 1) + q * H + 2 * H * kv, small};
    }
    case LayerKind::mla: {
      // q_a / kv_a (and the DSA indexer) replicated; q_b, kv_b, o_proj sharded by heads.
      const double h = double(m.heads) / tp, ql = m.q_lora_rank, kl = m.kv_lora_rank;
      const double q = ql > 0 ? H * ql + ql * h * m.qk_head_dim() : H * h * m.qk_head_dim();
      double lin = q + H * (kl + m.qk_rope_head_dim) + kl * h * (m.qk_nope_head_dim + m.v_head_dim) + h * m.v_head_dim * H;
      if (m.index_topk > 0) lin += (ql > 0 ? ql : H) * double(m.index_heads) * m.index_head_dim + H * m.index_head_dim + H * m.index_heads;
      return {lin, H + ql + kl + (m.index_topk > 0 ? 2.0 * m.index_head_dim : 0)};
    }
    case LayerKind::linear_attention: {
      const double kd = double(m.lin_key_dim()) / tp, vd = double(m.lin_value_dim()) / tp, nv = double(m.lin_value_heads) / tp;
      return {H * (2 * kd + 2 * vd) + H * 2 * nv + vd * H,
              (2 * kd + vd) * m.lin_conv_kernel + 2 * nv + m.lin_value_head_dim + H};
    }
    case LayerKind::mlp: return {(m.mlp_gated ? 3 : 2) * H * double(m.mlp_width(layer)) / tp, H};
    case LayerKind::moe: {
      // Experts split over tp x dp: experts / ep per rank, each sharded moe_tp ways (EP 1: all of
      // them sharded; EP tp x dp: whole ones); latent projections and the router are replicated;
      // the shared expert is TP-sharded within the attention rank. A local expert's biases: its
      // up-projection shard's and the whole down-projection output's.
      const double routed = routed_expert_params(m, par);
      const double local = double(m.experts) / par.expert_groups();
      const double biases = m.moe_bias ? local * ((m.moe_gated ? 2 : 1) * double(m.moe_intermediate) / par.moe_tp() + double(m.moe_width())) : 0;
      const double shared = m.shared_experts > 0 ? (m.moe_gated ? 3 : 2) * H * double(m.shared_intermediate * m.shared_experts) / tp : 0;
      const double latent = m.moe_latent > 0 ? 2 * H * double(m.moe_latent) : 0;
      return {routed + shared + latent, H * m.experts + m.experts + H + (m.shared_expert_gate ? H : 0) + biases};
    }
  }
  return {0, 0};
}

}  // namespace

// NVFP4 checkpoints of the hybrid Nemotron models keep the attention projections and the Mamba
// mixer just before each attention layer in BF16 (Nano NVFP4 hf_quant_config exclude_modules).
bool kept_high_precision(const ModelSpec& m, std::size_t i, hw::Precision p) {
  if (quantizes_experts_only(m, p)) return m.layers[i] != LayerKind::moe;
  if (p != hw::Precision::nvfp4 || m.hf_model_type != "nemotron_h") return false;
  if (m.layers[i] == LayerKind::attention) return true;
  if (m.layers[i] == LayerKind::mamba) {
    for (std::size_t j = i + 1; j < m.layers.size(); ++j) {
      if (m.layers[j] == LayerKind::attention) return j == i + 1 || (j == i + 2 && m.layers[i + 1] != LayerKind::mamba);
      if (m.layers[j] == LayerKind::mamba) return false;
    }
  }
  return false;
}

ModelSpec::MlaBf16Projections mla_bf16_projections(const ModelSpec& m, hw::Precision p) {
  if (p == hw::Precision::bf16 || quantizes_experts_only(m, p)) return {};
  const std::string f(hw::to_string(p));
  for (const auto& [fmt, proj] : m.mla_bf16_checkpoints)
    if (text::iequals(fmt, f)) return proj;
  return {};
}

double mla_bf16_params(const ModelSpec& m, const ModelSpec::MlaBf16Projections& p, int tp) {
  const double H = double(m.hidden), h = double(m.heads) / tp, ql = double(m.q_lora_rank), kl = double(m.kv_lora_rank);
  double n = 0;
  if (ql > 0) n += (p.q_a ? H * ql : 0) + (p.q_b ? ql * h * m.qk_head_dim() : 0);
  if (p.kv_a) n += H * (kl + m.qk_rope_head_dim);
  if (p.kv_b) n += kl * h * (m.qk_nope_head_dim + m.v_head_dim);
  if (p.o) n += h * m.v_head_dim * H;
  return n;
}

int serve_max_num_seqs(const hw::GpuSpec& gpu) {
  const bool big = gpu.hbm_usable_bytes >= 70.0 * kGiB && text::lower(gpu.name).find("a100") == std::string::npos;
  return big ? kServeMaxNumSeqs : 256;
}

std::int64_t serve_max_num_batched_tokens(const hw::GpuSpec& gpu) {
  return serve_max_num_seqs(gpu) == kServeMaxNumSeqs ? kServeMaxNumBatchedTokens : 2048;
}

hw::Precision checkpoint_kv_dtype(hw::Precision w) {
  // ModelOpt FP8 / NVFP4 (and W8A8) checkpoints declare an FP8 KV cache; block-FP8, MXFP4 and INT4
  // checkpoints declare none, so vLLM's "auto" is the model dtype.
  return w == hw::Precision::fp8 || w == hw::Precision::nvfp4 || w == hw::Precision::int8 ? hw::Precision::fp8
                                                                                         : hw::Precision::bf16;
}

hw::Precision resolve_kv_cache_dtype(std::string_view requested, hw::Precision weights, const std::string& where) {
  if (requested.empty() || text::iequals(requested, "auto")) return checkpoint_kv_dtype(weights);
  const hw::Precision p = hw::parse_precision(requested, where);
  if (p != hw::Precision::bf16 && p != hw::Precision::fp8)
    throw Error(where, "", "KV cache dtype " + std::string(requested) + " is not one vLLM runs; valid: auto, bf16, fp8");
  return p;
}

hw::Precision checkpoint_weight_precision(const ModelSpec& m) {
  return hw::parse_precision(m.checkpoint_precision, m.name + ": checkpoint_precision");
}

hw::Precision checkpoint_format(const ModelSpec& m, hw::Precision requested) {
  const hw::Precision c = checkpoint_weight_precision(m);
  return requested == hw::Precision::fp8 && c == hw::Precision::fp8_block ? c : requested;
}

hw::Precision resolve_weight_precision(const ModelSpec& m, std::string_view requested, const std::string& where) {
  if (requested.empty() || text::iequals(requested, "auto")) return checkpoint_weight_precision(m);
  return checkpoint_format(m, hw::parse_precision(requested, where));
}

bool quantizes_experts_only(const ModelSpec& m, std::string_view format) {
  if (text::iequals(format, "bf16")) return false;
  if (m.quantized_experts_only) return true;
  for (const auto& [fmt, source] : m.experts_only_checkpoints)
    if (text::iequals(fmt, format)) return true;
  return false;
}

bool quantizes_experts_only(const ModelSpec& m, hw::Precision p) { return quantizes_experts_only(m, hw::to_string(p)); }

namespace {
std::string format_words(const std::string& c, int group) {
  if (c == "int4") return "INT4 weight-only (W4A16), group " + std::to_string(group > 0 ? group : 32);
  return c == "fp8" ? "FP8 per-tensor" : c == "fp8_block" ? "FP8 128x128 block" : c == "nvfp4" ? "NVFP4"
       : c == "mxfp4" ? "MXFP4" : c == "int8" ? "INT8" : c == "bf16" ? "BF16" : c;
}
}  // namespace

std::string checkpoint_format_label(const ModelSpec& m) {
  return format_words(m.checkpoint_precision, m.checkpoint_group_size) + (m.quantized_experts_only ? ", routed experts only" : "");
}

std::string checkpoint_format_label(const ModelSpec& m, hw::Precision p) {
  const std::string f(hw::to_string(p));
  if (m.checkpoint_precision.empty() || text::iequals(f, m.checkpoint_precision)) return checkpoint_format_label(m);
  for (const auto& c : m.checkpoint_precisions)
    if (text::iequals(c, f))
      return "the published " + format_words(c, 0) + " one" + (quantizes_experts_only(m, f) ? ", routed experts only" : "") +
             (mla_bf16_projections(m, p).any() ? ", MLA low-rank projections BF16" : "");
  if (m.checkpoint_precisions.empty()) return checkpoint_format_label(m) + ", run as " + f;
  return checkpoint_format_label(m) + ", run as " + f + ", a format not among the published " + text::join(m.checkpoint_precisions);
}

std::string quantized_on_load_from(const ModelSpec& m, hw::Precision p) {
  if (p != hw::Precision::fp8) return "";
  auto published = [&](const std::string& f) {
    return text::iequals(m.checkpoint_precision, f) ||
           std::any_of(m.checkpoint_precisions.begin(), m.checkpoint_precisions.end(), [&](const auto& c) { return text::iequals(c, f); });
  };
  return !published("fp8") && !published("fp8_block") && published("bf16") ? "bf16" : "";
}

double weight_bytes_per_param(hw::Precision p, int group) {
  // Scales included (hw::element_bytes): NVFP4 one FP8 scale per 16 values, MXFP4 one E8M0 per 32,
  // FP8 block one FP32 per 128x128, INT4 one BF16 per group (32 unless the checkpoint says otherwise).
  if (p == hw::Precision::int4 && group > 0) return 0.5 + 2.0 / group;
  if (p == hw::Precision::bf16 || p == hw::Precision::fp8 || p == hw::Precision::int8) return dtype_bytes(p);
  return hw::element_bytes(p);
}

double kv_bytes_per_token_layer(const ModelSpec& m, LayerKind k, hw::Precision kv, int tp) {
  switch (k) {
    case LayerKind::attention:
    case LayerKind::sliding_attention: return 2.0 * kv_heads_per_gpu(m, tp) * m.head_dim * dtype_bytes(kv);
    case LayerKind::mla: {
      double b = double(m.mla_latent_dim()) * dtype_bytes(kv);
      if (m.index_topk > 0) b += m.index_head_dim + 4.0 * std::ceil(m.index_head_dim / 128.0);
      return b;
    }
    default: return 0;
  }
}

std::int64_t kv_window_tokens(const ModelSpec& m, LayerKind k) {
  return k == LayerKind::sliding_attention ? m.sliding_window : 0;
}

double linear_conv_state_bytes_per_layer(const ModelSpec& m, int tp, int spec_tokens) {
  return double(m.lin_conv_kernel - 1 + spec_tokens) * double(m.lin_conv_dim()) / tp * 2.0;  // model dtype (bf16)
}

double linear_recurrent_state_bytes_per_layer(const ModelSpec& m, int tp) {
  return double(m.lin_value_heads) / tp * m.lin_key_head_dim * m.lin_value_head_dim * (m.lin_state_fp32 ? 4.0 : 2.0);
}

namespace {
// Sum over the layers of the worst pipeline stage of f(kind).
template <class F> double worst_stage(const ModelSpec& m, int pp, F f) {
  double worst = 0;
  for (int s = 0; s < pp; ++s) {
    auto [b, e] = stage_range(int(m.layers.size()), pp, s);
    double sum = 0;
    for (int i = b; i < e; ++i) sum += f(m.layers[std::size_t(i)]);
    worst = std::max(worst, sum);
  }
  return worst;
}
bool unbounded_kv(const ModelSpec& m, LayerKind k) { return keeps_kv(k) && kv_window_tokens(m, k) == 0; }
}  // namespace

double kv_bytes_per_token(const ModelSpec& m, hw::Precision kv) {
  double sum = 0;
  for (auto k : m.layers)
    if (unbounded_kv(m, k)) sum += kv_bytes_per_token_layer(m, k, kv, 1);
  return sum;
}

double kv_bytes_per_token_per_gpu(const ModelSpec& m, hw::Precision kv, const Parallelism& par) {
  return worst_stage(m, par.pp, [&](LayerKind k) { return unbounded_kv(m, k) ? kv_bytes_per_token_layer(m, k, kv, par.tp) : 0.0; });
}


double conv_state_bytes_per_seq(const ModelSpec& m, const Parallelism& par, int spec_tokens) {
  const double conv = double(m.mamba_d_inner()) / par.tp +
                      (m.count(LayerKind::mamba) ? 2.0 * groups_per_gpu(m, par.tp) * m.d_state : 0.0);
  return worst_stage(m, par.pp, [&](LayerKind k) {
    if (k == LayerKind::mamba) return (m.conv_kernel - 1 + spec_tokens) * conv * 2.0;  // model dtype (bf16)
    if (k == LayerKind::linear_attention) return linear_conv_state_bytes_per_layer(m, par.tp, spec_tokens);
    return 0.0;
  });
}

double ssm_state_bytes_per_seq(const ModelSpec& m, const Parallelism& par) {
  const double mamba = double(m.mamba_heads) / par.tp * m.mamba_head_dim * m.d_state * (m.ssm_state_fp32 ? 4.0 : 2.0);
  return worst_stage(m, par.pp, [&](LayerKind k) {
    if (k == LayerKind::mamba) return mamba;
    if (k == LayerKind::linear_attention) return linear_recurrent_state_bytes_per_layer(m, par.tp);
    return 0.0;
  });
}

Concurrency MemoryPlan::concurrency(std::int64_t context_tokens) const {
  Concurrency c;
  c.context_tokens = context_tokens;
  c.max_num_seqs = max_num_seqs * dp;
  c.blocks_per_seq = kv.blocks_per_request(context_tokens);
  c.by_cache = kv.max_requests(context_tokens) * dp;
  c.seqs = int(std::min<std::int64_t>(c.by_cache, c.max_num_seqs));
  c.bound = c.by_cache < c.max_num_seqs ? "KV cache" : "max_num_seqs";
  return c;
}

MemoryPlan plan_memory(const ModelSpec& m, const hw::GpuSpec& gpu, hw::Precision wp, const Parallelism& par,
                       const EngineMemoryConfig& cfg) {
  if (par.tp < 1) throw Error("--tp", "", "tensor parallel size must be >= 1, got " + std::to_string(par.tp));
  if (par.pp < 1) throw Error("--pp", "", "pipeline parallel size must be >= 1, got " + std::to_string(par.pp));
  if (par.ep < 1) throw Error("--ep", "", "expert parallel size must be >= 1, got " + std::to_string(par.ep));
  // Engine knobs a planner would otherwise turn into negative activations or state slots.
  if (cfg.max_num_seqs < 1) throw Error("--max-num-seqs", "", "must be >= 1, got " + std::to_string(cfg.max_num_seqs));
  if (cfg.max_num_batched_tokens < cfg.max_num_seqs)
    throw Error("--max-num-batched-tokens", "", "must be >= max_num_seqs (" + std::to_string(cfg.max_num_seqs) +
                                                    "), as vLLM requires; got " + std::to_string(cfg.max_num_batched_tokens));
  if (cfg.num_speculative_tokens < 0 || cfg.num_speculative_tokens > 16)
    throw Error("--num-speculative-tokens", "", "must be between 0 and 16, got " + std::to_string(cfg.num_speculative_tokens));
  if (cfg.block_size < 1) throw Error("--block-size", "", "must be >= 1");
  if (par.pp > int(m.layers.size())) throw Error("--pp", "", "more pipeline stages than layers");
  if (m.kv_layers() > 0 && m.heads % par.tp != 0)
    throw Error("--tp", "", "tensor parallel size " + std::to_string(par.tp) + " does not divide " +
                                std::to_string(m.heads) + " attention heads of " + m.name);
  if (m.count(LayerKind::mamba) > 0 && m.mamba_heads % par.tp != 0)
    throw Error("--tp", "", "tensor parallel size " + std::to_string(par.tp) + " does not divide " +
                                std::to_string(m.mamba_heads) + " Mamba heads of " + m.name);
  if (m.count(LayerKind::linear_attention) > 0 && (m.lin_key_heads % par.tp != 0 || m.lin_value_heads % par.tp != 0))
    throw Error("--tp", "", "tensor parallel size " + std::to_string(par.tp) + " does not divide the " +
                                std::to_string(m.lin_key_heads) + " key heads and " + std::to_string(m.lin_value_heads) +
                                " value heads of the Gated DeltaNet layers of " + m.name);
  if (par.dp < 1) throw Error("--dp", "", "attention data parallel size must be >= 1, got " + std::to_string(par.dp));
  if (par.ep > 1 && m.experts % par.ep != 0)
    throw Error("--ep", "", "expert parallel size does not divide " + std::to_string(m.experts) + " experts");
  if (par.dp > 1 && m.count(LayerKind::moe) == 0)
    throw Error("--dp", "", "attention data parallelism needs MoE layers to share (" + m.name +
                                " has none): serve a dense model as " + std::to_string(par.dp) + " replicas instead");
  if (par.dp > 1 && par.pp > 1)
    throw Error("--dp", "", "attention data parallelism with pipeline stages is not modelled; use --pp 1");
  if (par.ep > 1 && par.moe_group() % par.ep != 0)
    throw Error("--ep", "", "expert parallel size " + std::to_string(par.ep) + " does not divide the " +
                                std::to_string(par.moe_group()) + " GPUs (tp x dp) an MoE layer spans");
  const bool auto_fraction = cfg.planner == MemoryPlanner::sglang && cfg.gpu_memory_utilization == 0;
  if (!auto_fraction && !(cfg.gpu_memory_utilization > 0 && cfg.gpu_memory_utilization <= 1))
    throw Error("--gpu-memory-utilization", "", "must be in (0, 1]");

  MemoryPlan plan;
  plan.gpus = par.gpus();
  plan.dp = par.dp;
  plan.block_size = cfg.block_size;
  plan.max_model_len = cfg.max_model_len > 0 ? cfg.max_model_len : m.max_context;
  plan.weight_precision = std::string(hw::to_string(wp));
  plan.kv_precision = std::string(hw::to_string(cfg.kv_cache_dtype));
  if (wp == hw::Precision::nvfp4 && !gpu.native(hw::Precision::nvfp4))
    plan.weight_note = "NVFP4 weights kept 4-bit in HBM, run through vLLM's Marlin W4A16 kernels (no native FP4 on " + gpu.name + ")";
  else if (wp == hw::Precision::int4)
    plan.weight_note = "INT4 weights (group " + std::to_string(m.checkpoint_group_size > 0 ? m.checkpoint_group_size : 32) +
                       ", BF16 scales) kept 4-bit in HBM, run through vLLM's Marlin W4A16 kernels (BF16 math)";
  else if (wp == hw::Precision::mxfp4)
    plan.weight_note = "MXFP4 weights (E8M0 scale per 32) kept 4-bit in HBM, BF16 math (W4A16)";
  else if (wp == hw::Precision::fp8_block)
    plan.weight_note = "fp8_block weights (FP8 with 128x128 block scales), native on " + gpu.name;
  else
    plan.weight_note = std::string(hw::to_string(wp)) + " weights, native on " + gpu.name;

  // Weights: the heaviest pipeline stage (embeddings on the first, LM head on the last).
  const double wb = weight_bytes_per_param(wp, m.checkpoint_group_size);
  const double H = double(m.hidden), V = double(m.vocab);
  for (int s = 0; s < par.pp; ++s) {
    WeightBreakdown w;
    auto [b, e] = stage_range(int(m.layers.size()), par.pp, s);
    for (int i = b; i < e; ++i) {
      auto [lin, small] = block_weights(m, std::size_t(i), par);
      if (kept_high_precision(m, std::size_t(i), wp)) {
        w.high_precision += (lin + small) * 2;
      } else if (quantizes_experts_only(m, wp) && m.layers[i] == LayerKind::moe) {
        // Only the routed experts are quantised (gpt-oss, Kimi-K2.5): shared expert, latent
        // projections and router stay BF16.
        const double routed = routed_expert_params(m, par);
        w.quantized += routed * wb;
        w.high_precision += (lin - routed + small) * 2;
      } else {
        // MLA projections the checkpoint keeps in BF16 (NVIDIA's NVFP4 DeepSeek: q_a, q_b, kv_a, kv_b).
        const double hp = m.layers[i] == LayerKind::mla ? mla_bf16_params(m, mla_bf16_projections(m, wp), par.tp) : 0;
        w.quantized += (lin - hp) * wb;
        w.high_precision += (hp + small) * 2;
      }
    }
    // Vocab-parallel embedding and LM head (BF16 in every checkpoint: excluded from quantisation).
    if (s == 0) w.high_precision += V * H / par.tp * 2;
    if (s == par.pp - 1) w.high_precision += ((m.tied_embeddings && par.pp == 1) ? 0 : V * H / par.tp * 2) + H * 2;
    if (s == 0 && m.has_vision) w.vision = m.vision.params() / par.tp * 2;  // BF16, TP-sharded encoder
    if (s == par.pp - 1 && cfg.num_speculative_tokens > 0) w.mtp = mtp_params(m) / par.tp * wb;
    if (w.total() > plan.weights.total()) plan.weights = w;
  }
  plan.weight_bytes = plan.weights.total();

  // Peak activations of vLLM's profile run: a forward pass of max_num_batched_tokens tokens plus
  // the sampler over max_num_seqs dummy requests (fp32 logits, then softmax/probs).
  const double T = double(cfg.max_num_batched_tokens);
  double widest = 0;  // largest per-GPU intermediate of any block, elements per token
  if (m.count(LayerKind::mamba)) widest = std::max(widest, (2.0 * m.mamba_d_inner() + 2.0 * m.groups * m.d_state + m.mamba_heads) / par.tp);
  if (m.count(LayerKind::mlp)) widest = std::max(widest, (m.mlp_gated ? 2.0 : 1.0) * double(m.mlp_intermediate) / par.tp);
  if (m.count(LayerKind::attention) + m.count(LayerKind::sliding_attention))
    widest = std::max(widest, (double(m.heads) * (m.attn_output_gate ? 2 : 1) + 2 * kv_heads_per_gpu(m, par.tp) * par.tp) * m.head_dim / par.tp);
  if (m.count(LayerKind::mla))  // prefill decompresses k/v per head: q, k (nope + rope), v
    widest = std::max(widest, double(m.heads) * (2.0 * m.qk_head_dim() + m.v_head_dim) / par.tp);
  if (m.count(LayerKind::linear_attention))
    widest = std::max(widest, (2.0 * m.lin_key_dim() + 2.0 * m.lin_value_dim() + 2.0 * m.lin_value_heads) / par.tp);
  if (m.count(LayerKind::moe)) {
    // fused_moe: intermediate caches of tokens·top_k rows (up-projection output + activation).
    // With attention data parallelism the MoE sees every rank's tokens (all-gathered).
    widest = std::max(widest, par.dp * m.top_k * (2.0 * double(m.moe_intermediate) / par.moe_tp() + double(m.moe_width())));
  }
  const double residual = 3.0 * T * H * 2;  // residual, normed input, block output (bf16)
  const double sampler = 2.0 * double(cfg.max_num_seqs) * V * 4;
  plan.activation_bytes = residual + T * widest * 2 + sampler;

  // What vLLM charges to the gpu_memory_utilization budget besides weights and the activation
  // peak is the non-torch memory that grows while it loads and profiles (gpu_worker
  // determine_available_memory: non_torch_increase), i.e. the NCCL / custom all-reduce buffers:
  // 342 MB at 2 GPUs, 392 MB at 4-8 (aiconfigurator memory model, hardware.md §1.3). The CUDA
  // context exists before vLLM's starting snapshot and the CUDA graphs are captured after the KV
  // cache is allocated (their estimate is subtracted only with VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS),
  // so both live in the (1 - utilization) headroom, reported against it (`memory`), not taken
  // from the budget: the context as measured (0.51 GiB on an H200), the graphs at 2.5 GiB (the
  // graphs-and-allocator part of aiconfigurator's 3.5 GiB "other"; a prior). Measured serving
  // rows that fill the cache agree: Kimi-K2.5 NVFP4 on TP4 EP4 B200 at 64 clients x (8192 + 1024)
  // tokens measures TTFT 1.3 s; with the 3.5 GiB in the budget the cache held 50 such sequences
  // and the run preempted (8.1 s), now 61 (1.5 s).
  plan.reserve_bytes = plan.gpus == 1 ? 0 : (plan.gpus == 2 ? 342e6 : 392e6);
  plan.context_bytes = 552402944;  // measured: an H200's CUDA context (hwmodels/measure/results/h200_memory.json)
  plan.cuda_graph_bytes = cfg.cuda_graphs ? 2.5 * kGiB : 0;

  plan.gpu_total_bytes = gpu.hbm_usable_bytes;
  plan.planner = cfg.planner;
  plan.memory_fraction = auto_fraction ? sglang_mem_fraction_static(gpu.hbm_usable_bytes, cfg.max_num_batched_tokens,
                                                                    cfg.cuda_graph_max_bs, par.tp, par.pp,
                                                                    cfg.num_speculative_tokens > 0)
                                       : cfg.gpu_memory_utilization;
  std::string charged;   // what the error names besides the weights
  switch (cfg.planner) {
    case MemoryPlanner::vllm:
      plan.budget_bytes = plan.memory_fraction * gpu.hbm_usable_bytes;
      plan.cache_bytes = plan.budget_bytes - plan.weight_bytes - plan.activation_bytes - plan.reserve_bytes;
      charged = " + activations " + human_bytes(plan.activation_bytes) + " + reserve " + human_bytes(plan.reserve_bytes);
      break;
    case MemoryPlanner::sglang:
      // profile_max_num_token: rest = free memory after loading - total x (1 - fraction); the
      // free memory already lacks the CUDA context and the communicators' buffers.
      plan.budget_bytes = plan.memory_fraction * gpu.hbm_usable_bytes;
      plan.cache_bytes = plan.budget_bytes - plan.weight_bytes - plan.context_bytes - plan.reserve_bytes;
      charged = " + CUDA context " + human_bytes(plan.context_bytes) + " + reserve " + human_bytes(plan.reserve_bytes);
      break;
    case MemoryPlanner::trtllm:
      // KvCacheCreator._cal_max_memory: (total - peak) x free_gpu_memory_fraction, the peak measured
      // by a warm-up forward of max_num_tokens with its CUDA graphs captured.
      plan.peak_bytes = plan.weight_bytes + plan.activation_bytes + plan.cuda_graph_bytes + plan.context_bytes + plan.reserve_bytes;
      plan.budget_bytes = gpu.hbm_usable_bytes - plan.peak_bytes;
      plan.cache_bytes = plan.memory_fraction * plan.budget_bytes;
      charged = " + activations " + human_bytes(plan.activation_bytes) + " + CUDA graphs " + human_bytes(plan.cuda_graph_bytes) +
                " + CUDA context " + human_bytes(plan.context_bytes) + " + reserve " + human_bytes(plan.reserve_bytes);
      break;
  }
  if (plan.cache_bytes <= 0) {
    const double short_by = cfg.planner == MemoryPlanner::trtllm ? -plan.budget_bytes : -plan.cache_bytes;
    throw Error(m.name, "", "does not fit on " + std::to_string(plan.gpus) + "x " + gpu.name + " at " +
                                plan.weight_precision + " (tp " + std::to_string(par.tp) + ", pp " + std::to_string(par.pp) +
                                "): per GPU weights " + human_bytes(plan.weight_bytes) + charged + " exceed the " +
                                (cfg.planner == MemoryPlanner::trtllm ? "GPU's " + human_bytes(gpu.hbm_usable_bytes)
                                                                      : "budget " + human_bytes(plan.budget_bytes)) +
                                " by " + human_bytes(short_by));
  }
  plan.kv_bytes_per_token = kv_bytes_per_token_per_gpu(m, cfg.kv_cache_dtype, par);
  plan.conv_state_bytes_per_seq = conv_state_bytes_per_seq(m, par, cfg.num_speculative_tokens);
  plan.ssm_state_bytes_per_seq = ssm_state_bytes_per_seq(m, par);
  plan.state_bytes_per_seq = plan.conv_state_bytes_per_seq + plan.ssm_state_bytes_per_seq;
  // One block pool for attention KV and Mamba state, laid out as vLLM does (kv_cache.hpp).
  plan.kv = kv_cache_layout(m, par, cfg.kv_cache_dtype, cfg.num_speculative_tokens, cfg.block_size, plan.cache_bytes);
  plan.block_size = plan.kv.block_size;
  plan.num_kv_blocks = plan.kv.usable_blocks();
  plan.max_num_seqs = cfg.max_num_seqs;
  if (cfg.planner == MemoryPlanner::sglang)
    plan.max_num_seqs = int(std::min<std::int64_t>(
        cfg.max_num_seqs, sglang_max_running_requests(plan.num_kv_blocks * plan.block_size, plan.max_model_len)));
  return plan;
}

std::string_view to_string(MemoryPlanner p) {
  switch (p) {
    case MemoryPlanner::vllm: return "vllm";
    case MemoryPlanner::sglang: return "sglang";
    case MemoryPlanner::trtllm: return "trtllm";
  }
  return "?";
}

double sglang_mem_fraction_static(double total_bytes, std::int64_t chunked_prefill_size, std::int64_t cuda_graph_max_bs,
                                  int tp, int pp, bool speculative) {
  const double mib = 1024.0 * 1024.0;
  const double total = total_bytes / mib;
  double reserved = 512 + double(std::max<std::int64_t>(chunked_prefill_size, 2048)) * 1.5 + double(cuda_graph_max_bs) * 2 +
                    double(tp) * double(pp) / 8 * 1024;
  if (speculative) reserved += 2 * 1024;
  if (total > 60 * 1024) reserved = std::max(reserved, 10.0 * 1024);
  return std::round((total - reserved) / total * 1000) / 1000;
}

std::int64_t sglang_max_running_requests(std::int64_t max_total_tokens, std::int64_t context_len) {
  const std::int64_t by_pool = std::min<std::int64_t>(
      std::max<std::int64_t>(context_len > 0 ? std::int64_t(double(max_total_tokens) / double(context_len) * 512) : 4096, 2048), 4096);
  return std::max<std::int64_t>(1, std::min(by_pool, max_total_tokens / 2));
}

}  // namespace servesim::models
