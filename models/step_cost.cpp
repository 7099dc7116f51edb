// Step cost: per-layer-kind time curves tabulated once from hw::kernel_model() on a power-of-two
// grid of token counts, then read with O(1) interpolation in the hot path.
#include "models/step_cost.hpp"

#include <algorithm>
#include <array>
#include <bit>
#include <cmath>
#include <cstdint>

#include "common/error.hpp"
#include "hwmodels/kernel_model.hpp"
#include "hwmodels/published.hpp"
#include "hwmodels/sampler.hpp"
#include "models/memory.hpp"

namespace servesim::models {
namespace {

// Elementwise kernels a DSA (DeepSeek sparse attention) indexer runs a layer besides its three
// projection GEMMs, its logits kernel and its top-k (SGLang's NSA indexer, decode and prefill): the
// key's LayerNorm, RoPE, the Hadamard rotation of the query and of the key, the FP8 quantisation of
// each, the head-weight scaling and the write of the key into the indexer's cache.
constexpr double kDsaIndexerPasses = 8;
// FlashMLA's sparse prefill kernel on Hopper takes query heads in multiples of 64; fewer TP-local
// heads (GLM-5 at TP8: 8) are padded with zero heads that it computes all the same.
constexpr std::int64_t kDsaSparseHeadMultiple = 64;
// The head width of the attention-table rows that time it (MQA, one KV head).
constexpr int kDsaSparseTableHeadDim = 256;

using hw::KernelModel;
using hw::OpTime;

// y(x) on x = 0, 1, 2, 4, ..., 2^(N-2); linear between points, linear extrapolation beyond.
struct Curve {
  static constexpr int N = 22;  // up to 2^20 tokens
  std::array<double, N> y{};
  template <class F> void fill(F f) {
    y[0] = 0;
    for (int i = 1; i < N; ++i) y[i] = f(std::int64_t(1) << (i - 1));
  }
  double operator()(double x) const {
    if (x <= 0) return 0;
    if (x <= 1) return y[1] * x;
    // i = min(N - 2, 1 + floor(log2(x))), read off the exponent bits. Within 2^-39 below a power of
    // two log2 may round up to the integer: those x take the library's log2 as before, so every
    // x gets the segment (and the bits) it always got.
    int i = N - 2;
    if (x < 0x1p19) {
      const auto bits = std::bit_cast<std::uint64_t>(x);
      const int e = int(bits >> 52) - 1022;   // x in [2^(e-1), 2^e): 1 + floor(log2(x)) = e
      i = (bits & 0xfffffffffffffULL) >= 0xfffffffffe000ULL ? std::min(N - 2, 1 + int(std::floor(std::log2(x)))) : e;
    }
    const double x0 = std::bit_cast<double>(std::uint64_t(i - 1 + 1023) << 52), x1 = 2 * x0;
    return y[i] + (y[i + 1] - y[i]) * (x - x0) / (x1 - x0);
  }
};

// The TP all-reduce after a block, as vLLM runs it (custom / symmetric memory / NCCL by size).
OpTime tp_allreduce(const KernelModel& km, const hw::GpuSpec&, int tp, double bytes) {
  return km.tp_all_reduce(bytes, tp);
}

// Several ops of one breakdown row: FLOPs and bytes add up; bound, source and kernel of the first.
OpTime sum(std::initializer_list<OpTime> ops) {
  OpTime t = *ops.begin();
  for (auto it = ops.begin() + 1; it != ops.end(); ++it) t.flops += it->flops, t.bytes += it->bytes;
  return t;
}

// The busiest attention data-parallel rank's share of a replica step: vLLM's DP coordinator
// balances requests over ranks by load, so a rank runs ceil(n / dp) of the decodes and of the
// prefill chunks (at the average chunk length), and every rank waits for the busiest one at the
// MoE layers' collectives.
// The busiest rank's context tokens: its `shared` of the `seqs` decode sequences at their average.
std::int64_t shared_context(std::int64_t context_tokens, int shared, int seqs) {
  return std::int64_t(std::llround(double(context_tokens) * shared / seqs));
}

StepBatch rank_share(const StepBatch& b, int dp) {
  if (dp <= 1) return b;
  auto share = [dp](int n) { return (n + dp - 1) / dp; };
  StepBatch r = b;
  r.decode_seqs = share(b.decode_seqs);
  r.graph_padding_seqs = share(b.graph_padding_seqs);
  if (b.decode_seqs > 0) r.decode_context_tokens = shared_context(b.decode_context_tokens, r.decode_seqs, b.decode_seqs);
  r.prefill_seqs = share(b.prefill_seqs);
  if (b.prefill_seqs > 0) {
    const double f = double(r.prefill_seqs) / b.prefill_seqs;
    r.prefill_tokens = std::int64_t(std::llround(double(b.prefill_tokens) * f));
    r.prefill_attention_pairs = b.prefill_attention_pairs * f;
  }
  r.vision_tiles = share(b.vision_tiles);
  return r;
}

// The DP group of one TP rank: dp GPUs strided by tp; over EFA when tp x dp leaves the NVLink
// domain (on the catalogue's first instance of that GPU).
hw::CommGroup dp_group(const hw::GpuSpec& gpu, const Parallelism& par) {
  hw::CommGroup g{par.dp, 1, nullptr};
  if (par.dp <= 1 || par.moe_group() <= gpu.nvlink_domain) return g;
  for (const auto& inst : hw::Catalog::global().instances())
    if (inst.gpu == gpu.name) {
      g.instance = &inst;
      if (par.moe_group() <= inst.nvlink_domain_gpus) return g;  // one NVLink domain across trays (NVL72)
      g.nodes = (par.moe_group() + inst.gpus - 1) / inst.gpus;
      break;
    }
  if (!g.instance)
    throw Error("--dp", "", "tp x dp = " + std::to_string(par.moe_group()) + " GPUs leave one NVLink domain of " + gpu.name +
                                " and the catalogue has no instance of it to span nodes with");
  if (par.dp % g.nodes != 0)
    throw Error("--dp", "", "attention data parallel size " + std::to_string(par.dp) + " does not split over the " +
                                std::to_string(g.nodes) + " nodes that tp x dp = " + std::to_string(par.moe_group()) + " GPUs take");
  return g;
}

struct Part {  // a kind's figures for the breakdown
  const char* kind;
  const char* op;
  double seconds;
  OpTime sample;
  int layers;
};

class Model final : public StepCostModel {
 public:
  Model(const ModelSpec& m, const hw::GpuSpec& gpu, hw::Precision wp, const Parallelism& par, hw::Precision kv,
        const hw::KernelTables& tables, const hw::KernelScales& scales)
      : m_(m), gpu_(gpu),
        scaled_(scales.identity() ? nullptr : hw::scaled_kernel_model(hw::kernel_model(gpu, tables), scales)),
        km_(scaled_ ? *scaled_ : hw::kernel_model(gpu, tables)), wp_(wp),
        dp_(quantizes_experts_only(m, wp) ? hw::Precision::bf16 : wp), par_(par), kv_(kv), dp_group_(dp_group(gpu, par)) {
    const int tp = par.tp;
    n_mamba_ = m.count(LayerKind::mamba);
    n_full_ = m.count(LayerKind::attention);
    n_swa_ = m.count(LayerKind::sliding_attention);
    n_attn_ = n_full_ + n_swa_;
    n_mla_ = m.count(LayerKind::mla);
    n_gdn_ = m.count(LayerKind::linear_attention);
    n_mlp_ = m.count(LayerKind::mlp);
    n_moe_ = m.count(LayerKind::moe);
    {
      // Kernels one forward launches, counted from vLLM's nemotron_h / llama / mixtral forward
      // code (norm, projections, mixer, activation; fused residual adds not counted separately).
      const int per_moe = 6 + (m.shared_experts > 0 ? 3 : 0) + (m.moe_latent > 0 ? 2 : 0);
      const int blocks = int(m.layers.size());
      const int kernels = n_mamba_ * 6 + n_attn_ * (5 + (m.qk_norm ? (m.qk_norm_per_layer ? (tp > 1 ? 6 : 2) : 1) : 0)) + n_mla_ * (9 + (m.index_topk > 0 ? 4 : 0)) +
                          n_gdn_ * 7 + n_mlp_ * 4 + n_moe_ * per_moe +
                          (tp > 1 ? blocks : 0) + (par.ep > 1 || par.dp > 1 ? 2 * n_moe_ : 0) + 5;  // + final norm, LM head, sampler
      eager_launch_s_ = kernels * hw::launch_overhead(gpu, false).eager_per_kernel_s;
      // MLA runs eagerly between piecewise graphs like attention, Gated DeltaNet like Mamba.
      launch_counts_ = {kernels, n_attn_ + n_mla_, n_mamba_ + n_gdn_};
    }
    const std::int64_t H = m.hidden;
    auto gemm = [&](std::int64_t M, std::int64_t n, std::int64_t k) { return km_.gemm(M, n, k, dp_).seconds; };
    auto gemm16 = [&](std::int64_t M, std::int64_t n, std::int64_t k) { return km_.gemm(M, n, k, hw::Precision::bf16).seconds; };
    // Layers whose projections the checkpoint keeps in BF16 while the rest run at dp_ (the hybrid
    // Nemotron NVFP4 checkpoints: attention and the Mamba mixer before it), as the memory plan weighs them.
    if (dp_ != hw::Precision::bf16)
      for (std::size_t i = 0; i < m.layers.size(); ++i) {
        if (!kept_high_precision(m, i, wp)) continue;
        if (m.layers[i] == LayerKind::mamba) ++n_mamba_hp_;
        if (m.layers[i] == LayerKind::attention || m.layers[i] == LayerKind::sliding_attention) ++n_attn_hp_;
      }
    if (dp_ == hw::Precision::fp8_block) launch_counts_.fp8_block_linears = fp8_block_linears();
    if (n_mamba_) {
      const std::int64_t di = m.mamba_d_inner() / tp, g = std::max(1, m.groups / tp);
      const std::int64_t in_n = 2 * di + 2 * g * m.d_state + m.mamba_heads / tp;
      conv_ch_ = di + 2 * g * m.d_state;
      mamba_in_n_ = in_n;
      mheads_ = m.mamba_heads / tp;
      mgroups_ = int(g);
      mamba_lin_.fill([&](std::int64_t M) { return gemm(M, in_n, H) + gemm(M, H, di); });
      if (n_mamba_hp_) mamba_lin_hp_.fill([&](std::int64_t M) { return gemm16(M, in_n, H) + gemm16(M, H, di); });
      mamba_step_.fill([&](std::int64_t B) {
        return km_.mamba_step(int(B), mheads_, m.mamba_head_dim, m.d_state, mgroups_).seconds +
               km_.conv1d(B, conv_ch_, m.conv_kernel, true).seconds;
      });
      mamba_scan_.fill([&](std::int64_t T) {
        return km_.mamba_scan(1, T, mheads_, m.mamba_head_dim, m.d_state, mgroups_).seconds +
               km_.conv1d(T, conv_ch_, m.conv_kernel, false).seconds;
      });
    }
    if (n_attn_) {
      aheads_ = m.heads / tp;
      akv_ = std::max(1, m.kv_heads / tp);
      attn_lin_.fill([&](std::int64_t M) {
        return gemm(M, std::int64_t(aheads_ * (m.attn_output_gate ? 2 : 1) + 2 * akv_) * m.head_dim, H) +
               gemm(M, H, std::int64_t(aheads_) * m.head_dim);
      });
      if (n_attn_hp_)
        attn_lin_hp_.fill([&](std::int64_t M) {
          return gemm16(M, std::int64_t(aheads_ * (m.attn_output_gate ? 2 : 1) + 2 * akv_) * m.head_dim, H) +
                 gemm16(M, H, std::int64_t(aheads_) * m.head_dim);
        });
      if (m.qk_norm || m.attn_output_gate) {
        // Per-head RMSNorm of q and k (read + write, bf16) and the sigmoid output gate (read q-wide
        // gate and output, write output).
        const double qk = double(aheads_ + akv_) * m.head_dim * (m.qk_norm ? 4 : 0);
        const double gate = m.attn_output_gate ? double(aheads_) * m.head_dim * 6 : 0;
        attn_elt_.fill([&](std::int64_t M) {
          if (m.qk_norm && m.qk_norm_per_layer)
            return qk_norm_per_layer(double(M)).seconds + (gate > 0 ? km_.memory_bound(double(M) * gate).seconds : 0.0);
          return km_.memory_bound(double(M) * (qk + gate)).seconds;
        });
      }
      // Decode attention streams the KV of every context token (at the KV dtype's bytes): a fixed
      // part plus a per-token slope. Sliding-window layers use the same slope over at most the
      // window's tokens (eval caps the reads).
      const double t_small = km_.attention_decode(1, 1, aheads_, akv_, m.head_dim, kv_).seconds;
      const double t_big = km_.attention_decode(64, 8192, aheads_, akv_, m.head_dim, kv_).seconds;
      attn_dec_base_ = t_small;
      attn_dec_per_token_ = std::max(0.0, (t_big - t_small) / (64.0 * 8192.0));
      attn_dec_per_seq_.fill([&](std::int64_t B) { return km_.attention_decode(int(B), 1, aheads_, akv_, m.head_dim, kv_).seconds; });
      // The table timed each KV resident in L2 when it fits (hw::cold_weights); a step reads it cold.
      // The per-sequence part above carries the term at one token per sequence; decode_cold_s tops
      // it up to the step's real KV bytes.
      attn_cold_ = km_.cold_weights("attention_decode");
      attn_kv_bytes_per_token_ = (kv_ == hw::Precision::bf16 ? 2.0 : 1.0) * 2 * akv_ * m.head_dim;
      attn_q_bytes_per_seq_ = 2.0 * 2 * aheads_ * m.head_dim;
      // Prefill attention against causal query-key pairs: one sequence of S tokens has S(S+1)/2.
      attn_pre_.fill([&](std::int64_t S) { return km_.attention_prefill(1, S, aheads_, akv_, m.head_dim, kv_).seconds; });
      // Sliding layers: one sequence of S tokens under the window (the tables time windows; a
      // windowed kernel does not run as fast as full attention over the same number of pairs).
      // Chunked local attention (Llama-4) runs full attention within each chunk: attn_pre_ by pairs.
      if (n_swa_ && !m.chunked_attention)
        attn_pre_swa_.fill([&](std::int64_t S) {
          return km_.attention_prefill(1, S, aheads_, akv_, m.head_dim, kv_, int(m.sliding_window)).seconds;
        });
    }
    if (n_mla_) {
      // Multi-head latent attention (vLLM MLACommonImpl): q_a/kv_a projections replicated, q_b and
      // o_proj sharded by heads. Decode runs absorbed: q_nope through W_UK into the latent, MQA over
      // the cached latent (one 576-wide KV head: kv_lora_rank + rope), out through W_UV, so the
      // latent is streamed once per layer. Prefill runs un-absorbed: kv_b_proj decompresses k/v of
      // the chunk, then MHA with qk_head_dim-wide heads.
      mheads_mla_ = m.heads / tp;
      const std::int64_t h = mheads_mla_, ql = m.q_lora_rank, kl = m.kv_lora_rank, rope = m.qk_rope_head_dim;
      const std::int64_t qk = m.qk_head_dim(), nope = m.qk_nope_head_dim, v = m.v_head_dim;
      // Projections the checkpoint keeps in BF16 (NVIDIA's NVFP4 DeepSeek: q_a, q_b, kv_a, kv_b) run as BF16 GEMMs.
      mla_hp_ = mla_bf16_projections(m, wp);
      const auto pg = [&](bool hp) { return [&, hp](std::int64_t M, std::int64_t n, std::int64_t k) { return hp ? gemm16(M, n, k) : gemm(M, n, k); }; };
      const auto q_a = pg(mla_hp_.q_a), q_b = pg(mla_hp_.q_b), kv_a = pg(mla_hp_.kv_a), kv_b = pg(mla_hp_.kv_b), o = pg(mla_hp_.o);
      mla_lin_.fill([&](std::int64_t M) {
        double t = (ql > 0 ? q_a(M, ql, H) + q_b(M, h * qk, ql) : gemm(M, h * qk, H)) + kv_a(M, kl + rope, H) +
                   o(M, H, h * v);
        if (m.index_topk > 0)  // DSA indexer projections (wq_b, wk, weights_proj)
          t += gemm(M, std::int64_t(m.index_heads) * m.index_head_dim, ql > 0 ? ql : H) + gemm(M, m.index_head_dim, H) +
               km_.gemm(M, m.index_heads, H, hw::Precision::bf16).seconds;
        return t;
      });
      // Absorbed decode: W_UK (nope -> latent) and W_UV (latent -> v) per head, batched over heads.
      // W_UK / W_UV are kv_b_proj's halves.
      mla_absorb_.fill([&](std::int64_t M) { return kv_b(M, h * kl, nope) + kv_b(M, h * v, kl); });
      mla_kvb_.fill([&](std::int64_t M) { return kv_b(M, h * (nope + v), kl); });
      // The tables' work streams K and V (2 x head_dim elements per token and KV head); the latent
      // is one vector of kl + rope elements serving as both, so it is queried with head_dim
      // (kl + rope) / 2: the same bytes per cached token (decode is bound by them).
      const int lat = int(kl + rope + 1) / 2;
      // Both through vLLM's measured attention tables on this GPU (decode: h query heads over one
      // latent KV head of kv_lora_rank + rope elements at the KV dtype; prefill: MHA of qk_head_dim).
      const double t_small = km_.attention_decode(1, 1, int(h), 1, lat, kv_).seconds;
      const double t_big = km_.attention_decode(64, 8192, int(h), 1, lat, kv_).seconds;
      mla_dec_per_token_ = std::max(0.0, (t_big - t_small) / (64.0 * 8192.0));
      mla_dec_per_seq_.fill([&](std::int64_t B) { return km_.attention_decode(int(B), 1, int(h), 1, lat, kv_).seconds; });
      // Un-absorbed prefill is MHA whose QK^T runs at qk_head_dim and PV at v_head_dim; the tables
      // time heads of one width for both, so the query takes their mean (the same FLOPs per pair).
      const int pre_dim = int(qk + v + 1) / 2;
      mla_pre_.fill([&](std::int64_t S) { return km_.attention_prefill(1, S, int(h), int(h), pre_dim, kv_).seconds; });
      if (m.index_topk > 0) {
        // The DSA indexer scores every cached token (index_heads x index_head_dim, one key head) and
        // attention then reads only index_topk of them: costed as an MQA pass of the indexer's shape.
        const double i_small = km_.attention_decode(1, 1, m.index_heads, 1, m.index_head_dim).seconds;
        const double i_big = km_.attention_decode(64, 8192, m.index_heads, 1, m.index_head_dim).seconds;
        idx_dec_per_token_ = std::max(0.0, (i_big - i_small) / (64.0 * 8192.0));
        idx_dec_per_seq_.fill([&](std::int64_t B) { return km_.attention_decode(int(B), 1, m.index_heads, 1, m.index_head_dim).seconds; });
        idx_pre_.fill([&](std::int64_t S) { return km_.attention_prefill(1, S, m.index_heads, 1, m.index_head_dim).seconds; });
        // Around the logits kernel the indexer runs kDsaIndexerPasses elementwise kernels a layer, each
        // one pass over a token's indexer query (index_heads x index_head_dim BF16), and a top-k
        // kernel that reads the FP32 logits of every (query, cached token) pair once.
        idx_elt_.fill([&](std::int64_t M) {
          return kDsaIndexerPasses * km_.memory_bound(double(M) * m.index_heads * m.index_head_dim * 2).seconds;
        });
        idx_topk_.fill([&](std::int64_t P) { return km_.memory_bound(double(P) * 4).seconds; });
        // KernelTables::dsa_sparse_mla_prefill: on Hopper a prompt longer than index_topk is
        // attended by FlashMLA's sparse kernel in the absorbed form, MQA over the cached latent
        // (QK^T over kv_lora_rank + rope, PV over kv_lora_rank) of the index_topk tokens each query
        // picked, its query heads padded up to a multiple of 64. Timed on the attention table's MQA
        // rows of 64-multiple heads at head_dim 256 (QK^T and PV at 256 each), scaled by the
        // absorbed pair's FLOPs over theirs: (kl + rope + kl) / (2 x 256).
        if (tables.dsa_sparse_mla_prefill && gpu.arch == "hopper") {
          dsa_sparse_heads_ = int((h + kDsaSparseHeadMultiple - 1) / kDsaSparseHeadMultiple * kDsaSparseHeadMultiple);
          const double flops = double(kl + rope + kl) / (2.0 * kDsaSparseTableHeadDim);
          dsa_sparse_pre_.fill([&, flops](std::int64_t S) {
            return km_.attention_prefill(1, S, dsa_sparse_heads_, 1, kDsaSparseTableHeadDim, hw::Precision::bf16).seconds * flops;
          });
        }
      }
    }
    if (n_gdn_) {
      // Gated DeltaNet (vLLM qwen3_next.py): in_proj_qkvz + in_proj_ba and out_proj GEMMs; the
      // recurrent state (value heads x key_dim x value_dim per sequence) is read and written once
      // per decode token and scanned in chunks in prefill: both timed by vLLM's measured Gated
      // DeltaNet kernels on this GPU (KernelModel::gdn), the causal conv1d by its own table.
      gheads_ = m.lin_value_heads / tp;
      ggroups_ = std::max(1, m.lin_key_heads / tp);
      gconv_ = m.lin_conv_dim() / tp;
      const std::int64_t in_n = (2 * m.lin_key_dim() + 2 * m.lin_value_dim() + 2 * m.lin_value_heads) / tp;
      gdn_lin_.fill([&](std::int64_t M) { return gemm(M, in_n, H) + gemm(M, H, m.lin_value_dim() / tp); });
      gdn_step_.fill([&](std::int64_t B) {
        return km_.gdn(true, int(B), 1, ggroups_, gheads_, m.lin_key_head_dim, m.lin_value_head_dim).seconds +
               km_.conv1d(B, gconv_, m.lin_conv_kernel, true).seconds;
      });
      gdn_scan_.fill([&](std::int64_t T) {
        return km_.gdn(false, 1, T, ggroups_, gheads_, m.lin_key_head_dim, m.lin_value_head_dim).seconds +
               km_.conv1d(T, gconv_, m.lin_conv_kernel, false).seconds;
      });
    }
    if (n_mlp_) {   // one block's time: the mean over the blocks where their widths differ (nemotron-nas)
      const auto widths = m.mlp_width_counts();
      mlp_.fill([&](std::int64_t M) {
        double t = 0;   // a share of exactly 1 where the widths are one
        for (const auto& [w, n] : widths) t += (gemm(M, (m.mlp_gated ? 2 : 1) * (w / tp), H) + gemm(M, H, w / tp)) * (double(n) / n_mlp_);
        return t;
      });
    }
    if (n_moe_) {
      local_experts_ = m.experts / par.expert_groups();
      moe_routed_.fill([&](std::int64_t tokens) { return km_.moe(moe_shape(double(tokens)), wp_).seconds; });
      const std::int64_t Is = m.shared_intermediate * m.shared_experts / tp;
      moe_dense_.fill([&](std::int64_t M) {
        double t = km_.gemm(M, m.experts, H, hw::Precision::bf16).seconds;  // router (kept in high precision)
        if (Is > 0) t += gemm(M, (m.moe_gated ? 2 : 1) * Is, H) + gemm(M, H, Is);
        if (m.moe_latent > 0) t += gemm(M, m.moe_latent, H) + gemm(M, H, m.moe_latent);
        return t;
      });
      if (par.dp > 1) moe_a2a_.fill([&](std::int64_t M) { return moe_exchange(double(M)).seconds; });
      if (par.dp > 1 && par.dp_prefill_moe == DpPrefillMoe::summed && !par.moe_all_to_all)
        moe_summed_.fill([&](std::int64_t S) { return moe_summed_exchange(double(S)).seconds; });
      // EP without attention DP (EP = TP) has no exchange of its own: every TP rank already holds
      // all tokens after the attention all-reduce, runs the experts it owns on the tokens routed to
      // them (vLLM's expert_map), and the block's TP all-reduce sums the partial outputs (vLLM uses
      // all2all kernels only when dp_size > 1).
    }
    lm_head_.fill([&](std::int64_t M) { return km_.gemm(M, m.vocab / tp, H, hw::Precision::bf16).seconds; });
    sampling_ = hw::sampling_mode(m.sampling.temperature, m.sampling.top_k < m.vocab ? m.sampling.top_k : 0, m.sampling.top_p);
    sampler_.fill([&](std::int64_t R) { return hw::sampler(gpu, m.vocab, double(R), sampling_).seconds; });
    norms_.fill([&](std::int64_t M) { return km_.memory_bound(double(M) * H * 2 * 3).seconds; });
    if (tp > 1) {
      allreduce_.fill([&](std::int64_t M) { return tp_allreduce(km_, gpu, tp, double(M) * H * 2).seconds; });
    }
    if (par.pp > 1) {
      p2p_.fill([&](std::int64_t M) { return km_.transfer(double(M) * H * 2, false, nullptr).seconds; });
    }
    if (m.has_vision) {
      const auto& v = m.vision;
      const std::int64_t P = v.patches_per_tile(), h = v.hidden, f = v.mlp_intermediate;
      const int vh = std::max(1, v.heads / tp);
      vision_.fill([&](std::int64_t tiles) {
        const std::int64_t M = tiles * P;
        auto g16 = [&](std::int64_t Mx, std::int64_t n, std::int64_t k) { return km_.gemm(Mx, n, k, hw::Precision::bf16).seconds; };
        double layer = g16(M, 3 * h / tp, h) + g16(M, h, h / tp) + g16(M, f / tp, h) + g16(M, h, f / tp) +
                       km_.encoder_attention(int(tiles), P, vh, int(h / v.heads)).seconds;
        double t = v.layers * layer + g16(M, h, 3 * v.patch * v.patch);
        const std::int64_t out = tiles * v.tokens_per_tile;
        if (v.projector_intermediate > 0)
          t += g16(out, v.projector_intermediate / tp, 4 * h) + g16(out, v.llm_hidden, v.projector_intermediate / tp);
        return t;
      });
    }
  }

  double seconds(const StepBatch& b) const override { return eval(b, nullptr); }
  // Only the attention layers' decode term reads the context (MLA's terms do too: not split).
  DecodeSplit decode_split(const StepBatch& b) const override {
    DecodeSplit s;
    if (n_attn_ && !n_mla_ && b.decode_seqs > 0 && b.tokens_per_decode_seq > 0 && b.prefill_seqs == 0 &&
        b.prefill_tokens == 0 && b.prefill_attention_pairs == 0 && b.vision_tiles == 0)
      eval(b, nullptr, &s);
    return s;
  }
  double decode_seconds(const DecodeSplit& s, std::int64_t context_tokens) const override {
    const std::int64_t c = par_.dp > 1 ? shared_context(context_tokens, s.shared_seqs, s.seqs) : context_tokens;
    double total = s.head + attn_decode_s(s.per_seq_s, s.cold_base_s, s.dec_tokens, c, s.tokens_per_seq);
    for (int i = 0; i < s.tails; ++i) total += s.tail[i];
    return total;
  }
  double encoder_seconds(int tiles) const override { return m_.has_vision ? vision_(tiles) : 0.0; }

  StepTime breakdown(const StepBatch& b) const override {
    StepTime t;
    t.seconds = eval(b, &t.parts);
    return t;
  }
  std::string provenance() const override { return km_.provenance(); }
  double eager_launch_seconds() const override { return eager_launch_s_; }
  LaunchCounts launch_counts() const override { return launch_counts_; }

 private:
  // One MoE layer's token exchange across the attention-DP group, for M tokens a rank
  // (Parallelism::moe_all_to_all). The engines' default: every rank all-gathers the group's hidden
  // states (ranks padded to the busiest) and reduce-scatters the expert outputs back. All-to-all
  // (DeepEP-style): a rank sends each token to the ranks of its top-k experts, FP8 on the way out
  // (with one FP32 scale per 128 values) and BF16 outputs back, (dp - 1) / dp of the copies leaving
  // the rank under uniform routing; each is one all-to-all of that per-rank send buffer (the
  // collective tables' convention). The routed experts stay priced on the gathered tokens either
  // way: the local experts' slots are the same, the kernel's dispatch term an upper bound.
  OpTime moe_exchange(double M) const {
    const double W = double(m_.moe_width());
    auto both = [](const OpTime& a, const OpTime& b) {   // one after the other: their times add
      OpTime t = sum({a, b});
      t.seconds = a.seconds + b.seconds;
      return t;
    };
    if (par_.moe_all_to_all) {
      const double copies = M * double(m_.top_k) * double(par_.dp - 1) / double(par_.dp);
      return both(km_.collective(hw::Collective::all_to_all, copies * W * (1.0 + 4.0 / 128), dp_group_),
                  km_.collective(hw::Collective::all_to_all, copies * W * 2, dp_group_));
    }
    const double bytes = double(par_.dp) * M * W * 2;
    return both(km_.collective(hw::Collective::all_gather, bytes, dp_group_),
                km_.collective(hw::Collective::reduce_scatter, bytes, dp_group_));
  }

  // One MoE layer's exchange of S tokens in all (every rank's own) by SGLang's SUM_LEN mode: each
  // rank writes its tokens into a zeroed buffer of S and all-reduces it (the gather), and the expert
  // outputs are all-reduced back before each rank takes its slice.
  OpTime moe_summed_exchange(double S) const {
    const double bytes = S * double(m_.moe_width()) * 2;
    const OpTime one = km_.collective(hw::Collective::all_reduce, bytes, dp_group_);
    OpTime t = sum({one, one});
    t.seconds = 2 * one.seconds;
    return t;
  }

  // The whole step; when `parts` is given, also one line per op group with what bounds it; when
  // `split` is, the terms around the decode attention's (decode_split()).
  double eval(const StepBatch& replica_batch, std::vector<StepPart>* parts, DecodeSplit* split = nullptr) const {
    // With attention data parallelism every layer but the routed experts runs on the busiest
    // rank's share; the routed experts see all ranks' tokens, padded to that share (or not, or only
    // the rank's own under all-to-all: below).
    const StepBatch b = rank_share(replica_batch, par_.dp);
    const double dec_tokens = double(b.decode_seqs) * b.tokens_per_decode_seq;
    const double M = dec_tokens + double(b.prefill_tokens);
    // The routed experts: every rank's tokens, CUDA-graph padding counted as one token (identical
    // dummy tokens all take the same top-k experts).
    const double pad = double(std::min(b.graph_padding_seqs, b.decode_seqs)) * b.tokens_per_decode_seq;
    double M_moe = double(par_.dp) * (M - pad + (pad > 0 ? b.tokens_per_decode_seq : 0));
    // A step with prefill work on an engine that does not pad its ranks (Parallelism::dp_prefill_moe):
    // the MoE layers run, and exchange, the ranks' own tokens, their sum S.
    const bool unpadded = par_.dp > 1 && par_.dp_prefill_moe != DpPrefillMoe::padded && b.prefill_tokens > 0;
    const double S = double(replica_batch.decode_seqs) * replica_batch.tokens_per_decode_seq + double(replica_batch.prefill_tokens);
    if (unpadded) M_moe = S;
    // All-to-all dispatch (Parallelism::moe_all_to_all): a rank's fused-MoE kernel routes, permutes and
    // computes the slots dispatched to it, M x top_k on average under balanced routing (what its own M
    // tokens send out), not the group's gathered tokens: the table is read at the rank's own tokens.
    if (par_.moe_all_to_all) M_moe = M - pad + (pad > 0 ? b.tokens_per_decode_seq : 0);
    if (M <= 0 && b.vision_tiles == 0) return 0;
    const double logits = dec_tokens + b.prefill_seqs;
    double total = 0;
    bool tail = false;   // the terms after the decode attention's, recorded into `split`
    auto add = [&](const char* kind, const char* op, double s, int layers, auto sample) {
      if (tail) {
        if (split->tails == DecodeSplit::kMaxTail) split->valid = false;
        else split->tail[split->tails++] = s;
      }
      total += s;
      if (parts && s > 0) {
        OpTime o = sample();
        parts->push_back({kind, op, s, std::string(hw::to_string(o.bound)), std::string(hw::to_string(o.source)), layers,
                          std::string(o.kernel), o.bound == hw::Bound::communication ? 0.0 : o.bytes * layers,
                          std::string(o.table)});
      }
    };
    const auto Mi = std::int64_t(std::max(1.0, M));
    const std::int64_t H = m_.hidden;
    if (n_mamba_) {
      const double lin = (n_mamba_ - n_mamba_hp_) * mamba_lin_(M) + (n_mamba_hp_ ? n_mamba_hp_ * mamba_lin_hp_(M) : 0.0);
      add("mamba", "in_proj + out_proj GEMM", lin, n_mamba_, [&] {
        return sum({km_.gemm(Mi, mamba_in_n_, H, dp_), km_.gemm(Mi, H, m_.mamba_d_inner() / par_.tp, dp_)});
      });
      if (b.decode_seqs > 0)
        add("mamba", "state update + conv1d (decode)", n_mamba_ * mamba_step_(dec_tokens), n_mamba_,
            [&] {
              return sum({km_.mamba_step(int(dec_tokens), mheads_, m_.mamba_head_dim, m_.d_state, mgroups_),
                          km_.conv1d(std::int64_t(dec_tokens), conv_ch_, m_.conv_kernel, true)});
            });
      if (b.prefill_tokens > 0)
        add("mamba", "SSD chunked scan + conv1d (prefill)", n_mamba_ * mamba_scan_(double(b.prefill_tokens)), n_mamba_,
            [&] {
              return sum({km_.mamba_scan(1, b.prefill_tokens, mheads_, m_.mamba_head_dim, m_.d_state, mgroups_),
                          km_.conv1d(b.prefill_tokens, conv_ch_, m_.conv_kernel, false)});
            });
    }
    if (n_attn_) {
      add("attention", "QKV + O GEMM", (n_attn_ - n_attn_hp_) * attn_lin_(M) + (n_attn_hp_ ? n_attn_hp_ * attn_lin_hp_(M) : 0.0), n_attn_,
          [&] {
            const hw::Precision p = n_attn_hp_ == n_attn_ ? hw::Precision::bf16 : dp_;
            return sum({km_.gemm(Mi, std::int64_t(aheads_ * (m_.attn_output_gate ? 2 : 1) + 2 * akv_) * m_.head_dim, H, p),
                        km_.gemm(Mi, H, std::int64_t(aheads_) * m_.head_dim, p)});
          });
      if (attn_elt_active())
        add("attention",
            m_.attn_output_gate ? "QK-norm + output gate"
            : m_.qk_norm_per_layer ? (par_.tp > 1 ? "QK-norm over the whole projection (+ TP all-reduce of its variance)"
                                                  : "QK-norm over the whole projection")
                                   : "QK-norm",
            n_attn_ * attn_elt_(M), n_attn_, [&] {
              return m_.qk_norm_per_layer ? qk_norm_per_layer(M) : km_.memory_bound(M * double(aheads_ + akv_) * m_.head_dim * 4);
            });
      if (b.decode_seqs > 0) {
        const double per_seq = attn_dec_per_seq_(dec_tokens), cold_base = decode_cold_base_s(dec_tokens);
        const double t = attn_decode_s(per_seq, cold_base, dec_tokens, b.decode_context_tokens, b.tokens_per_decode_seq);
        if (split)
          *split = DecodeSplit{true, replica_batch.decode_seqs, b.decode_seqs, b.tokens_per_decode_seq, dec_tokens, per_seq,
                               cold_base, total};
        add("attention", n_swa_ ? "decode attention (KV read; sliding layers capped at the window)" : "decode attention (KV read)",
            t, n_attn_, [&] {
              const auto avg = std::max<std::int64_t>(1, b.decode_context_tokens / std::max(1, b.decode_seqs));
              const OpTime f = km_.attention_decode(b.decode_seqs, avg, aheads_, akv_, m_.head_dim, kv_);
              if (!n_swa_) return f;   // sliding layers read at most the window
              return layer_mix(f, km_.attention_decode(b.decode_seqs, std::min<std::int64_t>(avg, m_.sliding_window), aheads_,
                                                       akv_, m_.head_dim, kv_));
            });
        tail = split != nullptr;
      }
      if (b.prefill_tokens > 0) {
        // Equivalent single-sequence length with the same number of causal pairs; a sliding layer's
        // query sees at most `window` keys.
        const double pairs = std::max(0.0, b.prefill_attention_pairs);
        const double S = pair_length(pairs);
        const double pairs_w = std::min(pairs, double(b.prefill_tokens) * double(m_.sliding_window));
        const double Sw = !n_swa_ ? 0 : m_.chunked_attention ? pair_length(pairs_w) : window_length(pairs_w);
        const double swa = !n_swa_ ? 0 : m_.chunked_attention ? attn_pre_(Sw) : attn_pre_swa_(Sw);
        add("attention", "prefill attention (flash)", n_full_ * attn_pre_(S) + n_swa_ * swa, n_attn_, [&] {
          const OpTime t = km_.attention_prefill(1, std::int64_t(std::max(1.0, S)), aheads_, akv_, m_.head_dim, kv_);
          if (!n_swa_) return t;
          return layer_mix(t, km_.attention_prefill(1, std::int64_t(std::max(1.0, Sw)), aheads_, akv_, m_.head_dim, kv_,
                                                    m_.chunked_attention ? 0 : int(m_.sliding_window)));
        });
      }
    }
    if (n_mla_) {
      const std::int64_t h = mheads_mla_;
      const int lat = int(m_.mla_latent_dim() + 1) / 2;  // as in the constructor
      add("mla", m_.index_topk > 0 ? "q/kv/o + DSA indexer projections GEMM" : "q_a/q_b + kv_a + o_proj GEMM", n_mla_ * mla_lin_(M),
          n_mla_, [&] {
            const std::int64_t ql = m_.q_lora_rank;
            OpTime t = ql > 0 ? sum({km_.gemm(Mi, ql, H, mla_p(mla_hp_.q_a)), km_.gemm(Mi, h * m_.qk_head_dim(), ql, mla_p(mla_hp_.q_b))})
                              : km_.gemm(Mi, h * m_.qk_head_dim(), H, dp_);
            return sum({t, km_.gemm(Mi, m_.kv_lora_rank + m_.qk_rope_head_dim, H, mla_p(mla_hp_.kv_a)),
                        km_.gemm(Mi, H, h * m_.v_head_dim, mla_p(mla_hp_.o))});
          });
      double idx_pairs = 0;   // (query, cached token) pairs the DSA indexer scores this step
      if (b.decode_seqs > 0) {
        // Absorbed: each query reads the latent of its context (index_topk of it under DSA).
        double ctx_reads = double(b.decode_context_tokens) * b.tokens_per_decode_seq;
        if (m_.index_topk > 0) {
          add("mla", "DSA indexer logits over the context (decode)",
              n_mla_ * (idx_dec_per_seq_(dec_tokens) + idx_dec_per_token_ * ctx_reads), n_mla_,
              [&] { return km_.attention_decode(b.decode_seqs, std::max<std::int64_t>(1, b.decode_context_tokens / b.decode_seqs),
                                                m_.index_heads, 1, m_.index_head_dim); });
          idx_pairs = ctx_reads;
          ctx_reads = std::min(ctx_reads, dec_tokens * double(m_.index_topk));
        }
        add("mla", "W_UK / W_UV absorption GEMM (decode)", n_mla_ * mla_absorb_(dec_tokens), n_mla_,
            [&] {
              const auto D = std::int64_t(std::max(1.0, dec_tokens));
              return sum({km_.gemm(D, h * m_.kv_lora_rank, m_.qk_nope_head_dim, mla_p(mla_hp_.kv_b)),
                          km_.gemm(D, h * m_.v_head_dim, m_.kv_lora_rank, mla_p(mla_hp_.kv_b))});
            });
        add("mla", "decode attention over the latent (absorbed, MQA)",
            n_mla_ * (mla_dec_per_seq_(dec_tokens) + mla_dec_per_token_ * ctx_reads), n_mla_, [&] {
              const auto avg = std::max<std::int64_t>(1, b.decode_context_tokens / std::max(1, b.decode_seqs));
              return km_.attention_decode(b.decode_seqs, avg, int(h), 1, lat, kv_);
            });
      }
      if (b.prefill_tokens > 0) {
        const double pairs = std::max(0.0, b.prefill_attention_pairs);
        const double T = double(b.prefill_tokens);
        // A chunk whose context passes index_topk (one sequence's share of the pairs) takes the
        // sparse path where the engine runs it (dsa_sparse_heads_ set), else un-absorbed MHA.
        const bool sparse = dsa_sparse_heads_ > 0 && pair_length(pairs / std::max(1, b.prefill_seqs)) > double(m_.index_topk);
        if (sparse)
          add("mla", "W_UK / W_UV absorption GEMM (sparse prefill)", n_mla_ * mla_absorb_(T), n_mla_, [&] {
            return sum({km_.gemm(b.prefill_tokens, h * m_.kv_lora_rank, m_.qk_nope_head_dim, mla_p(mla_hp_.kv_b)),
                        km_.gemm(b.prefill_tokens, h * m_.v_head_dim, m_.kv_lora_rank, mla_p(mla_hp_.kv_b))});
          });
        else
          add("mla", "kv_b_proj decompression GEMM (prefill)", n_mla_ * mla_kvb_(T), n_mla_,
              [&] { return km_.gemm(b.prefill_tokens, h * (m_.qk_nope_head_dim + m_.v_head_dim), m_.kv_lora_rank, mla_p(mla_hp_.kv_b)); });
        if (m_.index_topk > 0)
          add("mla", "DSA indexer (prefill)", n_mla_ * idx_pre_(pair_length(pairs)), n_mla_,
              [&] { return km_.attention_prefill(1, b.prefill_tokens, m_.index_heads, 1, m_.index_head_dim); });
        idx_pairs += pairs;
        const int seqs = std::max(1, b.prefill_seqs);
        const double attended = m_.index_topk > 0 ? seqs * topk_pairs(pairs / seqs, T / seqs, double(m_.index_topk)) : pairs;
        if (sparse)
          add("mla", "prefill attention (sparse MLA over the latent, heads padded)", n_mla_ * dsa_sparse_pre_(pair_length(attended)),
              n_mla_, [&] {
                return km_.attention_prefill(1, std::int64_t(std::max(1.0, pair_length(attended))), dsa_sparse_heads_, 1,
                                             kDsaSparseTableHeadDim, hw::Precision::bf16);
              });
        else
          add("mla", "prefill attention (un-absorbed MHA)", n_mla_ * mla_pre_(pair_length(attended)), n_mla_, [&] {
            return km_.attention_prefill(1, std::int64_t(std::max(1.0, pair_length(attended))), int(h), int(h), m_.qk_head_dim(), kv_);
          });
      }
      if (m_.index_topk > 0)
        add("mla", "DSA indexer norm / RoPE / rotation / FP8 quant / cache write + top-k", n_mla_ * (idx_elt_(M) + idx_topk_(idx_pairs)),
            n_mla_, [&] {
              return sum({km_.memory_bound(std::max(1.0, M) * m_.index_heads * m_.index_head_dim * 2),
                          km_.memory_bound(std::max(1.0, idx_pairs) * 4)});
            });
    }
    if (n_gdn_) {
      add("linear_attention", "in_proj + out_proj GEMM", n_gdn_ * gdn_lin_(M), n_gdn_,
          [&] {
            const std::int64_t in_n = (2 * m_.lin_key_dim() + 2 * m_.lin_value_dim() + 2 * m_.lin_value_heads) / par_.tp;
            return sum({km_.gemm(Mi, in_n, H, dp_), km_.gemm(Mi, H, m_.lin_value_dim() / par_.tp, dp_)});
          });
      if (b.decode_seqs > 0)
        add("linear_attention", "Gated DeltaNet state update + conv1d (decode)", n_gdn_ * gdn_step_(dec_tokens), n_gdn_, [&] {
          return sum({km_.gdn(true, int(dec_tokens), 1, ggroups_, gheads_, m_.lin_key_head_dim, m_.lin_value_head_dim),
                      km_.conv1d(std::int64_t(dec_tokens), gconv_, m_.lin_conv_kernel, true)});
        });
      if (b.prefill_tokens > 0)
        add("linear_attention", "Gated DeltaNet chunked scan + conv1d (prefill)", n_gdn_ * gdn_scan_(double(b.prefill_tokens)),
            n_gdn_, [&] {
              return sum({km_.gdn(false, 1, b.prefill_tokens, ggroups_, gheads_, m_.lin_key_head_dim, m_.lin_value_head_dim),
                          km_.conv1d(b.prefill_tokens, gconv_, m_.lin_conv_kernel, false)});
            });
    }
    if (n_mlp_)
      add("mlp", "up + down GEMM", n_mlp_ * mlp_(M), n_mlp_,
          [&] {   // the mean block where their widths differ: its seconds, FLOPs and bytes
            OpTime t;
            bool first = true;
            for (const auto& [w, n] : m_.mlp_width_counts()) {
              const std::int64_t I = w / par_.tp;
              const OpTime g = km_.gemm(Mi, (m_.mlp_gated ? 2 : 1) * I, H, dp_), d = km_.gemm(Mi, H, I, dp_);
              const double share = double(n) / n_mlp_;
              if (first) t = g, t.seconds = t.flops = t.bytes = t.cold_weights_s = 0, first = false;
              t.seconds += (g.seconds + d.seconds) * share, t.flops += (g.flops + d.flops) * share;
              t.bytes += (g.bytes + d.bytes) * share, t.cold_weights_s += (g.cold_weights_s + d.cold_weights_s) * share;
            }
            return t;
          });
    if (n_moe_) {
      add("moe", "routed experts (fused MoE)", n_moe_ * moe_routed_(M_moe), n_moe_,
          [&] { return km_.moe(moe_shape(M_moe), wp_); });
      add("moe", "router + shared expert + latent GEMM", n_moe_ * moe_dense_(M), n_moe_,
          [&] {
            OpTime t = km_.gemm(Mi, m_.experts, H, hw::Precision::bf16);
            const std::int64_t Is = m_.shared_intermediate * m_.shared_experts / par_.tp;
            if (Is > 0) t = sum({t, km_.gemm(Mi, (m_.moe_gated ? 2 : 1) * Is, H, dp_), km_.gemm(Mi, H, Is, dp_)});
            if (m_.moe_latent > 0) t = sum({t, km_.gemm(Mi, m_.moe_latent, H, dp_), km_.gemm(Mi, H, m_.moe_latent, dp_)});
            return t;
          });
      if (par_.dp > 1) {
        if (par_.moe_all_to_all)   // each rank sends its own tokens: unpadded either way
          add("collectives", "MoE all-to-all dispatch + combine across DP ranks", n_moe_ * moe_a2a_(M), n_moe_,
              [&] { return moe_exchange(M); });
        else if (unpadded && par_.dp_prefill_moe == DpPrefillMoe::summed)
          add("collectives", "MoE gather + reduce across DP ranks (two all-reduces of every rank's tokens)",
              n_moe_ * moe_summed_(S), n_moe_, [&] { return moe_summed_exchange(S); });
        else {
          const double Mx = unpadded ? S / par_.dp : M;   // per-rank sizes: the gathered buffer holds S tokens
          add("collectives", "MoE all-gather + reduce-scatter across DP ranks", n_moe_ * moe_a2a_(Mx), n_moe_,
              [&] { return moe_exchange(Mx); });
        }
      }
    }
    const int blocks = int(m_.layers.size());
    add("embed/norm", "RMSNorm + residual", blocks * norms_(M), blocks, [&] { return km_.memory_bound(M * H * 6); });
    add("lm_head", "LM head GEMM", lm_head_(logits), 1,
        [&] { return km_.gemm(std::int64_t(std::max(1.0, logits)), m_.vocab / par_.tp, H, hw::Precision::bf16); });
    add("sampler", sampler_op(sampling_), sampler_(logits), 1, [&] { return hw::sampler(gpu_, m_.vocab, logits, sampling_); });
    if (par_.tp > 1)
      add("collectives", "TP all-reduce after each block", blocks * allreduce_(M), blocks, [&] {
        return tp_allreduce(km_, gpu_, par_.tp, M * H * 2);
      });
    if (par_.pp > 1)
      add("collectives", "PP activation send/recv", (par_.pp - 1) * p2p_(M), par_.pp - 1,
          [&] { return km_.transfer(M * H * 2, false, nullptr); });
    if (m_.has_vision && b.vision_tiles > 0)
      add("vision", "ViT encoder + projector", vision_(b.vision_tiles), m_.vision.layers,
          [&] { return km_.encoder_attention(b.vision_tiles, m_.vision.patches_per_tile(), m_.vision.heads, m_.vision.hidden / m_.vision.heads); });
    return total;
  }

  // The routed experts of one MoE layer on one GPU for `tokens` tokens entering it: experts / ep
  // of them, each inter / moe_tp wide (EP 1: inter / (tp x dp); EP tp x dp: whole experts; MoE TP
  // x EP in between); balanced routing.
  hw::MoeShape moe_shape(double tokens) const {
    hw::MoeShape s;
    s.tokens = std::max(1.0, tokens);
    s.hidden = double(m_.moe_width());
    s.inter = double(m_.moe_intermediate);
    s.topk = m_.top_k;
    s.experts = m_.experts;
    s.tp = par_.moe_tp();
    s.ep = par_.expert_groups();
    s.gated = m_.moe_gated;
    return s;
  }

  static const char* sampler_op(hw::SamplingMode m) {
    switch (m) {
      case hw::SamplingMode::greedy: return "sampler: greedy (argmax)";
      case hw::SamplingMode::random: return "sampler: temperature + random draw";
      case hw::SamplingMode::top_k: return "sampler: top-k (torch.topk) + random draw";
      case hw::SamplingMode::top_p: return "sampler: top-p (vocabulary sort) + random draw";
      case hw::SamplingMode::top_k_top_p: return "sampler: top-k + top-p (vocabulary sort) + random draw";
    }
    return "sampler";
  }

  const ModelSpec& m_;
  const hw::GpuSpec& gpu_;
  std::unique_ptr<KernelModel> scaled_;   // a calibration's kernel factors over the tables (null: none)
  const KernelModel& km_;
  hw::Precision wp_;  // routed experts
  ModelSpec::MlaBf16Projections mla_hp_;  // MLA projections the checkpoint keeps in BF16
  hw::Precision mla_p(bool kept_bf16) const { return kept_bf16 ? hw::Precision::bf16 : dp_; }
  hw::Precision dp_;  // every other GEMM: BF16 when the checkpoint quantises routed experts only (gpt-oss, Kimi K2.5, MiniMax-M2.5 NVFP4)
  Parallelism par_;
  hw::Precision kv_;
  hw::CommGroup dp_group_;  // the GPUs holding one TP rank's slot in every DP rank
  // Causal-pair count -> the single-sequence length with as many pairs.
  static double pair_length(double pairs) { return (std::sqrt(1 + 8 * std::max(0.0, pairs)) - 1) / 2; }
  // Query-key pairs a chunk attends when each query reads at most k keys (DSA's index_topk): the
  // chunk's c queries sit at positions p + 1 ... p + c, p the cached tokens before it, recovered
  // from its causal pairs c x p + c(c + 1)/2; query j reads min(j, k). A fresh prompt of T > k
  // tokens: T x k - k(k - 1)/2.
  static double topk_pairs(double pairs, double c, double k) {
    if (c <= 0) return 0;
    const double lo = std::max(0.0, (pairs - c * (c + 1) / 2) / c) + 1, hi = lo + c - 1;
    if (lo >= k) return c * k;
    const double last = std::min(hi, k);  // queries lo ... last read every key before them
    return (lo + last) * (last - lo + 1) / 2 + std::max(0.0, hi - k) * k;
  }
  // The single sequence with as many query-key pairs under the sliding window: S(S+1)/2 up to the
  // window, then S x window - window(window-1)/2 (each later query sees `window` keys).
  double window_length(double pairs) const {
    const double w = double(m_.sliding_window), full = w * (w + 1) / 2;
    return pairs <= full ? pair_length(pairs) : w + (pairs - full) / w;
  }
  // A breakdown row's op over full and sliding layers: FLOPs and bytes per layer averaged over the
  // n_full_ full and n_swa_ sliding ones (the row multiplies them by n_attn_).
  OpTime layer_mix(OpTime full, const OpTime& sliding) const {
    full.flops = (n_full_ * full.flops + n_swa_ * sliding.flops) / n_attn_;
    full.bytes = (n_full_ * full.bytes + n_swa_ * sliding.bytes) / n_attn_;
    return full;
  }
  bool attn_elt_active() const { return m_.qk_norm || m_.attn_output_gate; }
  // Dense linear layers of one forward that run at the block-FP8 format (the step's dp_ GEMMs, as
  // priced below): attention QKV + O, MLA's projections (q_a + q_b or q, kv_a, o, kv_b, the DSA
  // indexer's wq_b and wk), Mamba and Gated DeltaNet in + out, MLP gate_up + down, shared-expert
  // and latent pairs. Routers stay BF16 and routed experts run inside the fused MoE.
  int fp8_block_linears() const {
    const int per_mla = (m_.q_lora_rank > 0 ? 2 : 1) + 3 + (m_.index_topk > 0 ? 2 : 0);
    const int per_moe = (m_.shared_experts > 0 && m_.shared_intermediate > 0 ? 2 : 0) + (m_.moe_latent > 0 ? 2 : 0);
    return 2 * (n_attn_ - n_attn_hp_) + per_mla * n_mla_ + 2 * (n_mamba_ - n_mamba_hp_) + 2 * n_gdn_ + 2 * n_mlp_ +
           per_moe * n_moe_;
  }
  // MiniMax-M2's per_layer QK-norm (vLLM MiniMaxText01RMSNormTP): q and k are each normalised over
  // the whole projection in FP32, so under TP the sum of squares is all-reduced across the ranks
  // (M FP32 values per norm) between a reduction kernel and a normalising kernel; with TP 1 each norm
  // is one fused kernel. Bytes: read bf16 q/k for the reduction, read again and write the result.
  OpTime qk_norm_per_layer(double M) const {
    const double q = M * double(aheads_) * m_.head_dim, k = M * double(akv_) * m_.head_dim;
    auto total = [](std::initializer_list<OpTime> ops) {  // sum() keeps the first op's time; these run in sequence
      OpTime t = sum(ops);
      t.seconds = 0;
      for (const auto& o : ops) t.seconds += o.seconds;
      return t;
    };
    if (par_.tp == 1) return total({km_.memory_bound(q * 4), km_.memory_bound(k * 4)});
    const OpTime ar = tp_allreduce(km_, gpu_, par_.tp, M * 4);
    return total({km_.memory_bound(q * 2), ar, km_.memory_bound(q * 4), km_.memory_bound(k * 2), ar, km_.memory_bound(k * 4)});
  }

  int n_mamba_ = 0, n_attn_ = 0, n_full_ = 0, n_swa_ = 0, n_mla_ = 0, n_gdn_ = 0, n_mlp_ = 0, n_moe_ = 0;
  int mheads_mla_ = 0, gheads_ = 0, ggroups_ = 0;
  std::int64_t gconv_ = 0;
  double mla_dec_per_token_ = 0, idx_dec_per_token_ = 0;
  Curve attn_elt_, mla_lin_, mla_absorb_, mla_kvb_, mla_dec_per_seq_, mla_pre_, idx_pre_, gdn_lin_, gdn_step_, gdn_scan_;
  Curve dsa_sparse_pre_;        // sparse MLA prefill over index_topk latents a query (KernelTables::dsa_sparse_mla_prefill)
  int dsa_sparse_heads_ = 0;    // its padded query heads; 0: prefill runs un-absorbed MHA
  Curve idx_dec_per_seq_, idx_elt_, idx_topk_;
  double eager_launch_s_ = 0;
  LaunchCounts launch_counts_;
  int mheads_ = 0, mgroups_ = 0, aheads_ = 0, akv_ = 0, local_experts_ = 0;
  std::int64_t conv_ch_ = 0, mamba_in_n_ = 0;
  double attn_dec_base_ = 0, attn_dec_per_token_ = 0;
  hw::ColdWeights attn_cold_;
  double attn_kv_bytes_per_token_ = 0, attn_q_bytes_per_seq_ = 0;  // K + V at the KV dtype; q in + out, BF16
  // The attention layers' decode term at `ctx` context tokens of the (busiest rank's) batch,
  // per_seq = attn_dec_per_seq_(dec_tokens), cold_base = decode_cold_base_s(dec_tokens): sliding
  // layers read at most the window per sequence (the batch's average context, capped); sinks add
  // one logit per head and query. A kind without layers adds nothing (not 0 x its term).
  double attn_decode_s(double per_seq, double cold_base, double dec_tokens, std::int64_t ctx, int tokens_per_seq) const {
    const double ctx_reads = double(ctx) * tokens_per_seq + (m_.attention_sinks ? dec_tokens : 0);
    double full = 0, swa = 0;
    if (n_full_) full = n_full_ * (per_seq + attn_dec_per_token_ * ctx_reads + decode_cold_s(dec_tokens, ctx_reads, cold_base));
    if (n_swa_) {
      const double swa_reads = std::min(ctx_reads, dec_tokens * double(m_.sliding_window));
      swa = n_swa_ * (per_seq + attn_dec_per_token_ * swa_reads + decode_cold_s(dec_tokens, swa_reads, cold_base));
    }
    return full + swa;
  }
  // One decode-attention layer's cold-KV term at `reads` KV tokens for `seqs` query tokens, less
  // what the per-sequence table (one KV token each) already holds (`base`, decode_cold_base_s).
  double decode_cold_base_s(double seqs) const {
    return attn_cold_.max_bytes <= 0 ? 0 : attn_cold_.seconds(attn_kv_bytes_per_token_ * seqs + attn_q_bytes_per_seq_ * seqs);
  }
  double decode_cold_s(double seqs, double reads, double base) const {
    if (attn_cold_.max_bytes <= 0) return 0;
    return attn_cold_.seconds(attn_kv_bytes_per_token_ * reads + attn_q_bytes_per_seq_ * seqs) - base;
  }
  int n_mamba_hp_ = 0, n_attn_hp_ = 0;  // layers of that kind whose projections stay BF16 (kept_high_precision)
  Curve mamba_lin_hp_, attn_lin_hp_;
  Curve mamba_lin_, mamba_step_, mamba_scan_, attn_lin_, attn_dec_per_seq_, attn_pre_, attn_pre_swa_, mlp_, moe_routed_, moe_dense_,
      moe_a2a_, moe_summed_, lm_head_, sampler_, norms_, allreduce_, p2p_, vision_;
  hw::SamplingMode sampling_ = hw::SamplingMode::random;  // the model's generation_config defaults
};

}  // namespace

std::unique_ptr<StepCostModel> make_step_cost(const ModelSpec& m, const hw::GpuSpec& gpu, hw::Precision weights,
                                              const Parallelism& par, hw::Precision kv_cache_dtype,
                                              const hw::KernelTables& tables, const hw::KernelScales& scales) {
  EngineMemoryConfig probe;  // validates the shape (divisibility) with the planner's checks
  (void)probe;
  // A TP group's all-reduces run over NVLink; wider groups span nodes, which vLLM serves with
  // pipeline parallelism across nodes instead (and so does servesim).
  if (par.tp > gpu.nvlink_domain)
    throw Error("--tp", "", "tensor parallel size " + std::to_string(par.tp) + " exceeds the NVLink domain of " + gpu.name +
                                " (" + std::to_string(gpu.nvlink_domain) + " GPUs); keep TP within it and span nodes with --pp");
  return std::make_unique<Model>(m, gpu, weights, par, kv_cache_dtype, tables, scales);
}

double handoff_bytes(const ModelSpec& m, std::int64_t context_tokens, hw::Precision kv_cache_dtype) {
  double kv = 0;  // windowed layers hand over only their window
  for (auto k : m.layers) {
    const std::int64_t w = kv_window_tokens(m, k);
    kv += kv_bytes_per_token_layer(m, k, kv_cache_dtype, 1) * double(w > 0 ? std::min(w, context_tokens) : context_tokens);
  }
  return kv + conv_state_bytes_per_seq(m) + ssm_state_bytes_per_seq(m);
}

}  // namespace servesim::models
