// vLLM v1's KV cache layout: per-layer specs, hybrid block-size unification, layer groups and
// the block count of the shared pool (see kv_cache.hpp for the rules and their vLLM sources).
#include "models/kv_cache.hpp"

#include <algorithm>
#include <cmath>

#include "common/error.hpp"
#include "models/memory.hpp"

namespace servesim::models {
namespace {

std::int64_t cdiv(std::int64_t a, std::int64_t b) { return (a + b - 1) / b; }

}  // namespace

std::string_view to_string(CacheKind k) {
  switch (k) {
    case CacheKind::full_attention: return "full attention";
    case CacheKind::mla: return "MLA";
    case CacheKind::sliding_window: return "sliding window";
    case CacheKind::state: return "state";
  }
  return "?";
}

std::pair<int, int> stage_layers(int layers, int pp, int stage) {
  const int base = layers / pp, extra = layers % pp;
  const int begin = stage * base + std::max(0, stage - (pp - extra));
  const int size = base + (stage >= pp - extra ? 1 : 0);
  return {begin, begin + size};
}

int mamba_groups_per_gpu(const ModelSpec& m, int tp) {
  const int total = (m.groups % tp == 0) ? m.groups : tp;
  return std::max(1, total / tp);
}

double kv_dtype_bytes(hw::Precision p) {
  switch (p) {
    case hw::Precision::bf16: return 2;
    case hw::Precision::fp8: return 1;
    case hw::Precision::int8: return 1;
    case hw::Precision::nvfp4: return 0.5;
    case hw::Precision::fp8_block: return 1;
    case hw::Precision::mxfp4:
    case hw::Precision::int4: return 0.5;
  }
  return 2;
}

std::optional<LayerCacheSpec> layer_cache_spec(const ModelSpec& m, LayerKind kind, const Parallelism& par,
                                               hw::Precision kv_dtype, int spec_tokens) {
  switch (kind) {
    case LayerKind::attention: {
      // FullAttentionSpec: block_size x kv_heads_per_rank x (head + head_v) x dtype; KV heads are
      // replicated when there are fewer than TP ranks.
      LayerCacheSpec s;
      s.kind = CacheKind::full_attention;
      s.label = "attention";
      const double kv_heads = std::max(1.0, double(m.kv_heads) / par.tp);
      s.bytes_per_token = kv_heads * 2.0 * m.head_dim * kv_dtype_bytes(kv_dtype);
      s.alignment = 16;  // FlashAttention's smallest block (vLLM's hybrid alignment)
      return s;
    }
    case LayerKind::mamba: {
      // MambaSpec (mamba2_state_shape): conv state (conv_kernel - 1 + K) x conv_dim / TP in the model
      // dtype (BF16), SSM state (heads / TP, head_dim, d_state) in float32 (NemotronH's
      // mamba_ssm_cache_dtype) or BF16.
      LayerCacheSpec s;
      s.kind = CacheKind::state;
      s.label = "mamba";
      const double conv_dim = double(m.mamba_d_inner()) / par.tp + 2.0 * mamba_groups_per_gpu(m, par.tp) * m.d_state;
      const double conv = (m.conv_kernel - 1 + spec_tokens) * conv_dim * 2.0;
      const double ssm = double(m.mamba_heads) / par.tp * m.mamba_head_dim * m.d_state * (m.ssm_state_fp32 ? 4.0 : 2.0);
      s.state_bytes = conv + ssm;
      return s;
    }
    case LayerKind::mla: {
      // MLACommonBackend's spec: one latent (kv_lora_rank + rope) per token on every TP rank, plus
      // the DSA indexer's key cache where the model has one (memory.hpp kv_bytes_per_token_layer).
      LayerCacheSpec s;
      s.kind = CacheKind::mla;
      s.label = "mla";
      s.bytes_per_token = kv_bytes_per_token_layer(m, kind, kv_dtype, par.tp);
      s.alignment = 16;
      return s;
    }
    case LayerKind::sliding_attention: {
      // SlidingWindowSpec (chunked local attention sized the same way): attention's page, the window.
      LayerCacheSpec s;
      s.kind = CacheKind::sliding_window;
      s.label = m.chunked_attention ? "chunked attention" : "sliding attention";
      s.bytes_per_token = kv_bytes_per_token_layer(m, kind, kv_dtype, par.tp);
      s.window = kv_window_tokens(m, kind);
      s.alignment = 16;
      return s;
    }
    case LayerKind::linear_attention: {
      // Gated DeltaNet's MambaSpec: conv state + recurrent state per request (memory.hpp).
      LayerCacheSpec s;
      s.kind = CacheKind::state;
      s.label = "linear attention";
      s.state_bytes = linear_conv_state_bytes_per_layer(m, par.tp, spec_tokens) + linear_recurrent_state_bytes_per_layer(m, par.tp);
      return s;
    }
    case LayerKind::mlp:
    case LayerKind::moe: return std::nullopt;
  }
  return std::nullopt;
}

std::int64_t KvDemand::token_blocks(std::int64_t computed, std::int64_t end, int block_size) const {
  if (end <= 0) return 0;
  const std::int64_t all = cdiv(end, block_size);
  std::int64_t n = full_groups * all;
  // SlidingWindowManager.remove_skipped_blocks: tokens before computed - window + 1 are skipped.
  for (std::int64_t w : windows) {
    const std::int64_t skipped = std::max<std::int64_t>(0, computed - w + 1) / block_size;
    n += all - std::min(all, skipped);
  }
  return n;
}

std::int64_t KvDemand::reserved_blocks(std::int64_t end, std::int64_t transient, int block_size) const {
  if (end <= 0) return 0;
  std::int64_t n = full_groups * cdiv(end, block_size);
  for (std::int64_t w : windows) n += cdiv(std::min(end, w + transient), block_size);
  return n;
}

std::int64_t KvCacheLayout::blocks_per_request(std::int64_t tokens) const {
  return demand.token_blocks(tokens, tokens + lookahead, block_size) + demand.state_blocks(lookahead);
}

std::int64_t KvCacheLayout::max_requests(std::int64_t tokens) const {
  const std::int64_t per = blocks_per_request(tokens);
  return per > 0 ? usable_blocks() / per : 0;
}

std::string KvCacheLayout::describe() const {
  if (uniform_type) return "1 group of " + std::to_string(group_size) + " attention layers";
  std::vector<std::pair<std::string, int>> counts;  // label -> groups, token-indexed kinds first
  std::vector<KvCacheGroup> ordered(groups);
  std::stable_sort(ordered.begin(), ordered.end(),
                   [](const KvCacheGroup& x, const KvCacheGroup& y) { return token_indexed(x.spec.kind) > token_indexed(y.spec.kind); });
  for (const auto& g : ordered) {
    auto it = std::find_if(counts.begin(), counts.end(), [&](const auto& c) { return c.first == g.spec.label; });
    if (it == counts.end()) counts.push_back({g.spec.label, 1});
    else ++it->second;
  }
  std::string s;
  for (const auto& [label, n] : counts) s += (s.empty() ? "" : " + ") + std::to_string(n) + " " + label;
  return s + " groups of " + std::to_string(group_size) + " layers";
}

KvCacheLayout kv_cache_layout(const ModelSpec& m, const Parallelism& par, hw::Precision kv_dtype, int spec_tokens,
                              int block_size, double available_bytes_per_gpu) {
  if (block_size < 1) throw Error("block_size", "", "must be >= 1");
  KvCacheLayout L;
  L.requested_block_size = L.block_size = block_size;
  L.lookahead = spec_tokens;
  L.available_bytes = available_bytes_per_gpu;

  // Every cache-keeping layer with its pipeline stage; the MTP layers (loaded for speculative
  // decoding) sit on the last stage and get their own caches.
  struct Layer { LayerCacheSpec spec; int stage; };
  std::vector<Layer> layers;
  const int n = int(m.layers.size());
  for (int s = 0; s < par.pp; ++s) {
    const auto [b, e] = stage_layers(n, par.pp, s);
    for (int i = b; i < e; ++i)
      if (auto spec = layer_cache_spec(m, m.layers[std::size_t(i)], par, kv_dtype, spec_tokens)) layers.push_back({*spec, s});
  }
  if (spec_tokens > 0)
    for (int r = 0; r < m.mtp_layers; ++r)
      for (LayerKind k : m.mtp_pattern)
        if (auto spec = layer_cache_spec(m, k, par, kv_dtype, spec_tokens)) layers.push_back({*spec, par.pp - 1});
  if (layers.empty()) {
    L.demand.full_groups = 0;
    return L;
  }

  // Buckets of equal spec, in layer order.
  std::vector<std::vector<int>> buckets;  // indices into layers
  for (int i = 0; i < int(layers.size()); ++i) {
    auto it = std::find_if(buckets.begin(), buckets.end(),
                           [&](const auto& b) { return layers[std::size_t(b[0])].spec.same_spec(layers[std::size_t(i)].spec); });
    if (it == buckets.end()) buckets.push_back({i});
    else it->push_back(i);
  }

  L.uniform_type = std::all_of(layers.begin(), layers.end(), [](const Layer& l) { return l.spec.kind == CacheKind::full_attention; });
  if (L.uniform_type) {
    // One group of every layer; a block id holds each layer's page (pages may differ per layer).
    std::vector<double> stage_bytes(std::size_t(par.pp), 0.0);
    std::vector<int> stage_count(std::size_t(par.pp), 0);
    for (const auto& l : layers) {
      stage_bytes[std::size_t(l.stage)] += l.spec.bytes_per_token;
      ++stage_count[std::size_t(l.stage)];
    }
    const auto worst = std::size_t(std::max_element(stage_bytes.begin(), stage_bytes.end()) - stage_bytes.begin());
    L.group_size = int(layers.size());
    L.tensors = stage_count[worst];
    L.attn_bytes_per_token = layers[0].spec.bytes_per_token;
    L.page_bytes = block_size * L.attn_bytes_per_token;
    L.bytes_per_block = block_size * stage_bytes[worst];
    L.groups.push_back({layers[0].spec, L.group_size});
    L.demand.full_groups = 1;
  } else {
    // Uniform page size: token kinds must agree on bytes per token (vLLM raises otherwise).
    double attn = 0, state = 0;
    int align = 0;
    for (const auto& l : layers) {
      if (token_indexed(l.spec.kind)) {
        if (attn > 0 && l.spec.bytes_per_token != attn)
          throw Error(m.name, "kv_cache",
                      "layers keep different KV bytes per token (" + std::to_string(attn) + " and " +
                          std::to_string(l.spec.bytes_per_token) + "); vLLM's hybrid allocator needs one page size");
        attn = l.spec.bytes_per_token;
        align = std::max(align, l.spec.alignment);
      } else {
        state = std::max(state, l.spec.state_bytes);
      }
    }
    L.attn_bytes_per_token = attn;
    L.state_page_bytes = state;
    if (attn > 0 && state > 0) {
      // Platform._align_hybrid_block_size: a = max(kernel block, block_size).
      L.alignment = std::max(align, block_size);
      const auto a = std::int64_t(L.alignment);
      const std::int64_t attn_block = a * cdiv(std::int64_t(std::ceil(state)), std::int64_t(std::llround(a * attn)));
      L.block_size = int(std::max<std::int64_t>(block_size, attn_block));
      L.page_bytes = L.block_size * attn;
    } else if (attn > 0) {
      L.page_bytes = block_size * attn;
    } else {
      L.page_bytes = state;  // attention-free: one block is one request's state
    }
    // Grouping: min layers per bucket, or max when max < 1.5 min.
    int lo = 1 << 30, hi = 0;
    for (const auto& b : buckets) {
      lo = std::min(lo, int(b.size()));
      hi = std::max(hi, int(b.size()));
    }
    L.group_size = (hi < 1.5 * lo) ? hi : lo;
    L.demand = KvDemand{0, {}, 0};
    std::vector<std::vector<int>> per_stage;  // [group][stage] layers
    for (const auto& b : buckets) {
      const int ng = int(cdiv(std::int64_t(b.size()), L.group_size));
      for (int g = 0; g < ng; ++g) {
        std::vector<int> stages(std::size_t(par.pp), 0);
        int count = 0;
        for (std::size_t j = std::size_t(g); j < b.size(); j += std::size_t(ng)) {  // layers[g::num_groups]
          ++stages[std::size_t(layers[std::size_t(b[j])].stage)];
          ++count;
        }
        const LayerCacheSpec& spec = layers[std::size_t(b[0])].spec;
        L.groups.push_back({spec, count});
        per_stage.push_back(stages);
        switch (spec.kind) {
          case CacheKind::full_attention:
          case CacheKind::mla: ++L.demand.full_groups; break;
          case CacheKind::sliding_window: L.demand.windows.push_back(spec.window); break;
          case CacheKind::state: ++L.demand.state_groups; break;
        }
      }
    }
    // Each stage allocates as many tensors as its fullest group has layers there (group_size at pp 1).
    L.tensors = 0;
    for (int s = 0; s < par.pp; ++s)
      for (const auto& g : per_stage) L.tensors = std::max(L.tensors, g[std::size_t(s)]);
    L.bytes_per_block = L.page_bytes * L.tensors;
  }
  if (L.uniform_type) L.demand.windows.clear();
  // get_num_blocks: available // page // group_size (the min over ranks: the heaviest stage).
  if (L.bytes_per_block > 0 && available_bytes_per_gpu > 0)
    L.num_blocks = std::int64_t(std::floor(std::floor(available_bytes_per_gpu / (L.bytes_per_block / L.tensors)) / L.tensors));
  return L;
}

}  // namespace servesim::models
