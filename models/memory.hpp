// Memory of one replica per GPU, with vLLM's gpu_memory_utilization semantics: the KV/state
// cache gets util × total − (weights + peak activations + non-torch memory).
#pragma once
#include <cstdint>
#include <string>
#include <string_view>

#include "hwmodels/catalog.hpp"
#include "models/kv_cache.hpp"
#include "models/model_spec.hpp"

namespace servesim::models {

// vLLM's `vllm serve` defaults on GPUs with >= 70 GiB that are not A100 (every GPU in the
// catalogue): max_num_seqs 1024, max_num_batched_tokens 8192 (EngineArgs.get_batch_defaults).
inline constexpr int kServeMaxNumSeqs = 1024;
inline constexpr std::int64_t kServeMaxNumBatchedTokens = 8192;
// The same rule by GPU class: smaller GPUs (and A100) get 256 sequences / 2048 tokens.
int serve_max_num_seqs(const hw::GpuSpec& gpu);
std::int64_t serve_max_num_batched_tokens(const hw::GpuSpec& gpu);

// Whose memory plan sizes the KV pool (docs/engines.md):
// - vllm: gpu_memory_utilization x total - (weights + activation peak + non-torch memory);
// - sglang: mem_fraction_static x total - (weights + non-torch memory), mem_fraction_static by
//   SGLang's heuristic (ServerArgs._handle_gpu_memory_settings) when gpu_memory_utilization is 0;
//   the activation peak and the CUDA graphs live in the (1 - fraction) headroom;
// - trtllm: free_gpu_memory_fraction (gpu_memory_utilization) x (total - the warm-up's peak:
//   weights + activations of max_num_batched_tokens + CUDA graphs + non-torch memory).
enum class MemoryPlanner : std::uint8_t { vllm, sglang, trtllm };
std::string_view to_string(MemoryPlanner p);

struct EngineMemoryConfig { double gpu_memory_utilization = 0.9; int max_num_seqs = kServeMaxNumSeqs;
  std::int64_t max_model_len = 0 /*0: model max*/; std::int64_t max_num_batched_tokens = kServeMaxNumBatchedTokens;
  hw::Precision kv_cache_dtype = hw::Precision::bf16; int block_size = 16;
  int num_speculative_tokens = 0;   // MTP draft tokens; > 0 loads the MTP weights, adds their KV and K state blocks
  bool cuda_graphs = true;          // vLLM default (not --enforce-eager)
  MemoryPlanner planner = MemoryPlanner::vllm;
  std::int64_t cuda_graph_max_bs = 0;  // SGLang's heuristic reserves 2 MiB per graph batch size
};

// SGLang's mem_fraction_static when not given (ServerArgs._handle_gpu_memory_settings): reserved
// MiB = 512 + max(chunked_prefill_size, 2048) x 1.5 + cuda_graph_max_bs x 2 + tp x pp / 8 x 1024
// (+ 2 GiB with speculative decoding), at least 10 GiB on GPUs above 60 GiB; fraction =
// round((total - reserved) / total, 3), total in MiB.
double sglang_mem_fraction_static(double total_bytes, std::int64_t chunked_prefill_size, std::int64_t cuda_graph_max_bs,
                                  int tp, int pp, bool speculative);
// SGLang's request-slot pool (model_runner: max_num_reqs = min(max(tokens / context_len x 512, 2048),
// 4096)) and the scheduler's cap max_total_tokens / 2.
std::int64_t sglang_max_running_requests(std::int64_t max_total_tokens, std::int64_t context_len);

// The one KV-cache dtype rule: the checkpoint's (BF16 checkpoints keep BF16; FP8 and NVFP4
// checkpoints ship FP8 KV scales, so vLLM runs FP8 KV) unless `requested` names one. `requested`
// is what --kv-cache-dtype / "kv_cache_dtype" said ("" or "auto": the checkpoint's); `where` names
// the flag or field in errors.
hw::Precision checkpoint_kv_dtype(hw::Precision weights);
hw::Precision resolve_kv_cache_dtype(std::string_view requested, hw::Precision weights, const std::string& where);

// The weight precision a checkpoint's declared format is sized and costed at: bf16, fp8, int8 and
// nvfp4 as themselves; int4 (group 32 + a BF16 scale: 4.5 bits, the same bytes as NVFP4's 4 bits +
// an FP8 scale per 16) and mxfp4 (4.25 bits) as nvfp4.
hw::Precision checkpoint_weight_precision(const ModelSpec&);
// The format a requested precision runs in: "fp8" on a 128x128 block-FP8 checkpoint is that
// checkpoint (fp8_block); anything else as requested.
hw::Precision checkpoint_format(const ModelSpec& m, hw::Precision requested);
// The one weight-precision rule of every subcommand, scenario and Python call: `requested` ("" or
// "auto": the checkpoint's) in the checkpoint's format; `where` names the flag or field in errors.
hw::Precision resolve_weight_precision(const ModelSpec& m, std::string_view requested, const std::string& where);
// Whether weights in precision `p` quantise only the routed experts (attention, dense MLPs, shared
// experts and the router in BF16): the checkpoint says so (quantized_experts_only: gpt-oss, Kimi-K2.5)
// or `p` is a published format that does (experts_only_checkpoints: MiniMax-M2.5's NVFP4).
bool quantizes_experts_only(const ModelSpec& m, hw::Precision p);
// The same for a format named as in checkpoint_precisions ("nvfp4"); an unknown name matches nothing.
bool quantizes_experts_only(const ModelSpec& m, std::string_view format);
// Whether layer i's linear weights (its MoE layer's router and shared expert aside) stay BF16 at
// weight precision p: every non-MoE layer of a routed-experts-only checkpoint, and in the NVFP4
// checkpoints of the hybrid Nemotron models the attention projections and the Mamba mixer just
// before each attention layer (Nano NVFP4 hf_quant_config exclude_modules). Memory and step cost
// both follow it.
bool kept_high_precision(const ModelSpec& m, std::size_t i, hw::Precision p);
// The MLA projections that weights in precision p keep in BF16 (mla_bf16_checkpoints: NVIDIA's
// NVFP4 DeepSeek checkpoints keep q_a, q_b, kv_a and kv_b); none at BF16 or where only the routed
// experts are quantised (every projection is BF16 there already). Memory and step cost both follow it.
ModelSpec::MlaBf16Projections mla_bf16_projections(const ModelSpec& m, hw::Precision p);
// Parameters of those projections in one MLA layer on one GPU of a TP group of tp (q_a and kv_a
// replicated; q_b, kv_b and o_proj sharded by heads, as block_weights counts them).
double mla_bf16_params(const ModelSpec& m, const ModelSpec::MlaBf16Projections& p, int tp);
// The checkpoint's format in words ("FP8 128x128 block", "INT4 weight-only (W4A16), group 32, routed experts only").
std::string checkpoint_format_label(const ModelSpec& m);
// The checkpoint a run at weight precision p loads, in words: the catalogue's when p is its format,
// "the published NVFP4 one, routed experts only" when p names another published checkpoint, else
// the catalogue's, "run as nvfp4" (a what-if conversion).
std::string checkpoint_format_label(const ModelSpec& m, hw::Precision p);
// The published checkpoint vLLM loads to run the model at `p` when that format itself is not
// published: FP8 from the BF16 checkpoint (vLLM quantizes it as it loads, `--quantization fp8`).
// Empty when `p` is published (or its checkpoint is unknown), and for formats vLLM cannot make on load.
std::string quantized_on_load_from(const ModelSpec& m, hw::Precision p);

// Bytes per weight element as stored in the checkpoint (NVFP4: 4 bit + one FP8 scale per 16).
// Bytes per weight, scales included; `group`: an INT4 checkpoint's scale group (0 = 32).
double weight_bytes_per_param(hw::Precision p, int group = 0);

struct WeightBreakdown {            // per GPU, bytes
  double quantized = 0;             // linear layers stored in the requested precision (incl. scales)
  double high_precision = 0;        // kept in BF16: embeddings, LM head, router, norms, Mamba conv/A/D/dt, excluded layers
  double vision = 0;                // vision encoder + projector (BF16)
  double mtp = 0;                   // MTP layers when speculative decoding is on
  double total() const { return quantized + high_precision + vision + mtp; }
};

// How many sequences of a context run at once on the replica (all attention data-parallel ranks),
// and which bound binds.
struct Concurrency {
  std::int64_t context_tokens = 0;
  std::int64_t blocks_per_seq = 0;  // attention blocks (with K lookahead) + state blocks (1 + K per group)
  std::int64_t by_cache = 0;        // usable blocks / blocks_per_seq
  int max_num_seqs = 0;             // the engine's cap
  int seqs = 0;                     // min of the two
  std::string bound;                // "KV cache" or "max_num_seqs"
};

struct MemoryPlan {                 // per GPU unless named total
  // reserve_bytes: non-torch memory charged to the budget (the NCCL / custom all-reduce buffers;
  // JSON also names it nccl_bytes).
  double weight_bytes = 0, activation_bytes = 0, reserve_bytes = 0, kv_bytes_per_token = 0, state_bytes_per_seq = 0;
  double cache_bytes = 0;           // what is left for the KV cache block pool
  KvCacheLayout kv;                 // vLLM's layout of that pool: block size, groups, num_blocks
  std::int64_t num_kv_blocks = 0;   // usable blocks the scheduler allocates from (kv.num_blocks - the null block)
  int max_num_seqs = 0;             // the engine's cap on running sequences
  Concurrency concurrency(std::int64_t context_tokens) const;
  int max_concurrent_seqs(std::int64_t context_tokens) const { return concurrency(context_tokens).seqs; }

  // Breakdown.
  WeightBreakdown weights;          // per GPU
  double gpu_total_bytes = 0;       // usable HBM the driver reports
  double budget_bytes = 0;          // gpu_memory_utilization × total
  double cuda_graph_bytes = 0, context_bytes = 0;  // outside the budget: in the (1 - utilization) headroom
  double conv_state_bytes_per_seq = 0, ssm_state_bytes_per_seq = 0; // per GPU, parts of state_bytes_per_seq
  int gpus = 1;                     // tp × pp × dp
  int dp = 1;                       // attention data-parallel ranks: each has its own num_kv_blocks
                                    // pool and max_num_seqs; concurrency() counts the whole replica
  std::int64_t max_model_len = 0;   // resolved
  int block_size = 16;              // = kv.block_size (hybrid models: raised to match the state page)
  MemoryPlanner planner = MemoryPlanner::vllm;
  double memory_fraction = 0;       // the fraction applied: gpu_memory_utilization, SGLang's mem_fraction_static
                                    // (its heuristic's when not given) or TRT-LLM's free_gpu_memory_fraction
  double peak_bytes = 0;            // trtllm: the warm-up's peak the fraction applies to what is left of
  std::string weight_precision, kv_precision, weight_note;  // e.g. "NVFP4 dequantised to ... (Marlin W4A16)"
};

// Throws Error when the weights, activations and reserve exceed the budget, saying by how much.
MemoryPlan plan_memory(const ModelSpec&, const hw::GpuSpec&, hw::Precision weights,
                       const Parallelism&, const EngineMemoryConfig&);

// Per-kind cache formulas, clean functions of the spec (a hybrid block pool builds on these).
// Bytes one token adds to one layer of kind `k` on one GPU under tensor parallel `tp` (0 for kinds
// without KV): GQA 2 x kv heads (replicated when kv_heads < tp) x head_dim; MLA kv_lora_rank +
// qk_rope_head_dim elements on every rank (not sharded, as vLLM), plus the DSA indexer's FP8 key
// and FP32 scale (index_head_dim + 4 bytes per 128) when the model has one.
double kv_bytes_per_token_layer(const ModelSpec&, LayerKind k, hw::Precision kv_dtype, int tp = 1);
// Tokens of KV a layer of kind `k` keeps per sequence: the window (or chunk) for sliding layers,
// 0 for unbounded (full attention, MLA) and kinds without KV.
std::int64_t kv_window_tokens(const ModelSpec&, LayerKind k);
// Gated DeltaNet state per sequence and layer on one GPU: the conv state ((kernel - 1 + spec
// tokens) x conv_dim / tp, model dtype) and the recurrent state (value heads / tp x key_dim x
// value_dim, fp32 unless the config says otherwise).
double linear_conv_state_bytes_per_layer(const ModelSpec&, int tp = 1, int spec_tokens = 0);
double linear_recurrent_state_bytes_per_layer(const ModelSpec&, int tp = 1);
// Per-token KV bytes of the unbounded KV layers (full attention, MLA) for the whole replica (no
// replication) and per GPU under TP (KV heads replicated when kv_heads < tp; PP splits layers).
// Windowed layers hold at most their window (kv_window_tokens) per sequence.
double kv_bytes_per_token(const ModelSpec&, hw::Precision kv_dtype);
double kv_bytes_per_token_per_gpu(const ModelSpec&, hw::Precision kv_dtype, const Parallelism&);
// Recurrent state per sequence, whole replica (tp = 1) or per GPU (worst pipeline stage): Mamba
// conv state (model dtype, conv_kernel-1+spec tokens rows; groups replicated when groups % tp != 0)
// plus Gated DeltaNet conv states; Mamba SSM state plus Gated DeltaNet recurrent states.
double conv_state_bytes_per_seq(const ModelSpec&, const Parallelism& = {}, int spec_tokens = 0);
double ssm_state_bytes_per_seq(const ModelSpec&, const Parallelism& = {});

}  // namespace servesim::models
