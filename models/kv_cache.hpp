// vLLM v1's KV cache layout of one replica, as vLLM allocates it
// (vllm/v1/kv_cache_interface.py, vllm/v1/core/kv_cache_utils.py, single_type_kv_cache_manager.py):
//
// 1. Every layer that keeps a cache has a spec: token-indexed kinds (full attention, MLA,
//    sliding-window attention) cost `bytes_per_token` per token; state kinds (Mamba-2, linear
//    attention) cost one `state_bytes` page per request whatever its length.
// 2. Hybrid models share one block pool, so pages must be equal: the attention block size is
//    raised to attn_block_size = a * cdiv(state_page, a * attn_bytes_per_token) and the state
//    page is padded up to the attention page.
// 3. Layers of equal spec are bucketed; group_size = min layers per bucket (max if max < 1.5 min);
//    each bucket splits into cdiv(n, group_size) groups. A block id costs group_size pages on every
//    GPU (one tensor per group position), so num_blocks = available // page // group_size, and
//    block 0 is vLLM's null block.
// 4. A request holds, per full-attention group, cdiv(tokens + lookahead, block_size) blocks; per
//    sliding-window group only the blocks still inside the window; per state group 1 + K blocks
//    (K speculative tokens) while it runs. All are freed when it finishes or is preempted.
//
// A new layer kind plugs in by returning its spec from layer_cache_spec().
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "hwmodels/catalog.hpp"
#include "models/model_spec.hpp"

namespace servesim::models {

enum class CacheKind { full_attention, mla, sliding_window, state };
std::string_view to_string(CacheKind k);
inline bool token_indexed(CacheKind k) { return k != CacheKind::state; }

// What one layer keeps per request, per GPU.
struct LayerCacheSpec {
  CacheKind kind = CacheKind::full_attention;
  std::string label;              // "attention", "mamba", ...
  double bytes_per_token = 0;     // token kinds: one token of one layer (vLLM page for block_size 1)
  double state_bytes = 0;         // state kinds: one request's state of one layer (conv + SSM)
  std::int64_t window = 0;        // sliding_window: tokens attended to
  int alignment = 16;             // token kinds: smallest block size of the attention kernel
  bool same_spec(const LayerCacheSpec& o) const {
    return kind == o.kind && label == o.label && bytes_per_token == o.bytes_per_token && state_bytes == o.state_bytes &&
           window == o.window;
  }
};

// The spec of one layer of `kind` on one GPU, or nullopt for layers that keep no cache (MLP, MoE).
// `spec_tokens` (K) widens the Mamba conv state by K rows as vLLM's newest NemotronH does.
std::optional<LayerCacheSpec> layer_cache_spec(const ModelSpec& m, LayerKind kind, const Parallelism& par,
                                               hw::Precision kv_dtype, int spec_tokens);

// What a request holds, as block counts; independent of the model (the scheduler's view).
struct KvDemand {
  int full_groups = 1;                  // full-attention and MLA groups: all blocks of the sequence
  std::vector<std::int64_t> windows;    // sliding-window groups (window tokens each): blocks in the window
  int state_groups = 0;                 // Mamba / linear-attention groups: 1 + K blocks while running
  // Token-indexed blocks a request holds once `end` tokens (lookahead included) have slots and
  // `computed` tokens are in the cache (sliding windows free blocks that left the window).
  std::int64_t token_blocks(std::int64_t computed, std::int64_t end, int block_size) const;
  // Blocks an engine that reserves a whole sequence up front holds for `end` tokens (TensorRT-LLM's
  // GUARANTEED_NO_EVICT, KVCacheManager::getRemainingBlocksToCompletion): every block in a full
  // group, and in a sliding-window group min(end, window + transient) tokens' worth, the window's
  // blocks reused in a cycle (transient: the temporary attention window of a chunked context).
  std::int64_t reserved_blocks(std::int64_t end, std::int64_t transient, int block_size) const;
  int state_blocks(int lookahead) const { return state_groups * (1 + lookahead); }
  bool simple() const { return full_groups == 1 && windows.empty(); }  // one block per block-sized position
};

struct KvCacheGroup {
  LayerCacheSpec spec;
  int layers = 0;                 // layers of this group (the last group of a bucket may be short)
};

struct KvCacheLayout {
  int block_size = 16;            // tokens per block of the token-indexed groups (after unification)
  int requested_block_size = 16;  // the engine's block_size before hybrid unification
  int alignment = 16;             // a in a * cdiv(state_page, a * attn_bytes_per_token)
  double page_bytes = 0;          // one layer's block on one GPU (state pages padded up to it)
  double attn_bytes_per_token = 0;// token kinds, one layer (0: no token-indexed layers)
  double state_page_bytes = 0;    // unpadded state page (0: no state layers)
  int group_size = 0;             // layers per group
  int tensors = 0;                // group positions on the heaviest pipeline stage (= group_size at pp 1)
  bool uniform_type = true;       // all layers full attention: one group, pages may differ per layer
  double bytes_per_block = 0;     // what one block id costs on one GPU
  std::vector<KvCacheGroup> groups;
  KvDemand demand;
  int lookahead = 0;              // speculative tokens K
  std::int64_t num_blocks = 0;    // vLLM's num_gpu_blocks, the null block included
  double available_bytes = 0;     // per GPU, what the blocks were carved from

  std::int64_t usable_blocks() const { return num_blocks > 0 ? num_blocks - 1 : 0; }
  // Blocks one running request of `tokens` tokens holds: token groups (with K lookahead) + state.
  std::int64_t blocks_per_request(std::int64_t tokens) const;
  // Requests of `tokens` tokens the pool holds at once: usable blocks / blocks_per_request.
  std::int64_t max_requests(std::int64_t tokens) const;
  // "1 attention group + 5 mamba groups of 8 layers"
  std::string describe() const;
};

// Layers [begin, end) that pipeline stage `stage` holds (vLLM: even split, remainder to the last stages).
std::pair<int, int> stage_layers(int layers, int pp, int stage);
// Mamba groups on one GPU (vLLM extra_groups_for_head_shards: replicated up to TP when TP does not divide them).
int mamba_groups_per_gpu(const ModelSpec& m, int tp);
// Bytes of one KV cache element (FP8 1, BF16 2).
double kv_dtype_bytes(hw::Precision p);

// The layout for a model on one replica shape with `available_bytes_per_gpu` of cache memory.
// `block_size` is the engine's (vLLM default 16). Pipeline stages share the grouping (vLLM
// merges all stages' layers) and each holds the tensors of its own layers; the heaviest stage
// sets the block count. Throws Error when the pages cannot be unified (as vLLM does).
KvCacheLayout kv_cache_layout(const ModelSpec& m, const Parallelism& par, hw::Precision kv_dtype, int spec_tokens,
                              int block_size, double available_bytes_per_gpu);

}  // namespace servesim::models
