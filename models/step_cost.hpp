// Cost of one forward pass of one replica, from per-layer-kind coefficient tables built once per
// (model, GPU, precision, parallelism) on top of hw::kernel_model(); seconds() is O(layer kinds).
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "hwmodels/catalog.hpp"
#include "hwmodels/kernel_model.hpp"
#include "hwmodels/scaled_kernel_model.hpp"
#include "models/model_spec.hpp"

namespace servesim::models {

// One forward pass of one replica, summarised by running sums a scheduler keeps (O(1) to build).
struct StepBatch {
  int decode_seqs = 0;                      // sequences generating this step
  std::int64_t decode_context_tokens = 0;   // sum of their context lengths (KV read by attention)
  int tokens_per_decode_seq = 1;            // 1 + speculative (MTP) tokens verified per sequence
  // Of decode_seqs, the dummy sequences a CUDA-graph replay pads the batch with (up to the next
  // capture size). Dense layers compute them; their tokens are identical, so a MoE layer's router
  // sends them all to the same top-k experts: they add one token's experts, not their count's.
  int graph_padding_seqs = 0;
  int prefill_seqs = 0;                     // sequences with a prefill chunk this step
  std::int64_t prefill_tokens = 0;          // sum of chunk lengths
  double prefill_attention_pairs = 0;       // sum over chunks of causal query-key pairs: c*p + c*(c+1)/2 (c chunk, p prior context)
  int vision_tiles = 0;                     // 512x512 tiles / frames through the vision encoder this step
};

// One line of a step breakdown: a group of ops of one kind over all layers of the replica.
struct StepPart {
  std::string kind;      // "mamba", "attention", "moe", "mlp", "lm_head", "sampler", "collectives", "vision", "embed/norm"
  std::string op;        // e.g. "in_proj+out_proj GEMM", "SSD scan", "grouped GEMM (routed)"
  double seconds = 0;    // summed over layers (and PP stages, which run one after another for one batch)
  std::string bound;     // compute | memory | launch | communication
  std::string source;    // measured | interpolated | transferred | roofline
  int layers = 0;        // how many layers contribute
  std::string kernel;    // the kernel vLLM runs for it on this GPU and precision ("" unknown)
  double hbm_bytes = 0;  // HBM bytes the row must move (weights touched, KV, state, activations), all layers; 0 for collectives
  std::string table;     // the kernel table that timed it (hw::OpTime::table; "" roofline)
};
struct StepTime {
  double seconds = 0;
  std::vector<StepPart> parts;   // filled by StepCostModel::breakdown only
};

// A pure-decode step (no prefill, no vision) with its context sum left open: the terms of
// StepCostModel::seconds() that do not read the context, summed in its order before the one that
// does (`head`) and listed after it (`tail`), and what that one needs besides the context. Filled by
// decode_split(); decode_seconds(split, c) is seconds() of the batch with decode_context_tokens = c,
// bit for bit, without evaluating the other terms again.
struct DecodeSplit {
  bool valid = false;        // false: the model has no such form for this batch (call seconds())
  int seqs = 0, shared_seqs = 0, tokens_per_seq = 1;   // decode sequences, the busiest DP rank's share
  double dec_tokens = 0;     // the rank's decode tokens
  double per_seq_s = 0, cold_base_s = 0;   // the context-free parts of the context's term
  double head = 0;
  static constexpr int kMaxTail = 12;
  double tail[kMaxTail] = {};
  int tails = 0;
};

class StepCostModel {
 public:
  virtual ~StepCostModel() = default;
  virtual double seconds(const StepBatch& b) const = 0;   // GPU time of the step; hot path, O(layer kinds), no allocation
  virtual double encoder_seconds(int vision_tiles) const = 0;  // vision encoder alone (encode workers)
  // The same figure with a per-kind breakdown, for `servesim step` (not for hot loops).
  virtual StepTime breakdown(const StepBatch& b) const = 0;
  virtual std::string provenance() const = 0;             // kernel model provenance
  // CPU time to launch one forward's kernels eagerly (no CUDA graph): kernels per forward x the
  // measured eager launch cost per kernel. A graph replay's launch gaps are already inside the
  // graph-replay kernel times that seconds() sums. 0 when unknown.
  virtual double eager_launch_seconds() const { return 0; }
  // Kernels one forward launches, and the attention / Mamba layers whose ops run eagerly between
  // piecewise CUDA graphs. Zeros when unknown. `fp8_block_linears`: the dense linear layers among
  // `kernels` whose weights are 128x128 block FP8 (one count each): outside a CUDA graph vLLM issues
  // each as its block-FP8 linear op (activation quantisation + GEMM through the op's Python path),
  // whose measured eager cost per call the engine profile gives (host.launch_us_per_fp8_block_linear).
  struct LaunchCounts { int kernels = 0, attention_layers = 0, mamba_layers = 0, fp8_block_linears = 0; };
  virtual LaunchCounts launch_counts() const { return {}; }
  // The step of a pure-decode batch of this shape with its context left open (DecodeSplit); the
  // default has none (valid false).
  virtual DecodeSplit decode_split(const StepBatch&) const { return {}; }
  virtual double decode_seconds(const DecodeSplit&, std::int64_t /*context_tokens*/) const { return 0; }
};

// `tables`: the engine release whose kernel tables price the ops (hw::kernel_model); `scales`: a
// user calibration's factors on them (hw::scaled_kernel_model).
std::unique_ptr<StepCostModel> make_step_cost(const ModelSpec&, const hw::GpuSpec&, hw::Precision weights,
                                              const Parallelism&, hw::Precision kv_cache_dtype = hw::Precision::bf16,
                                              const hw::KernelTables& tables = {}, const hw::KernelScales& scales = {});
// Bytes a prefill->decode handoff moves for one sequence of `context_tokens` (KV of attention layers
// + Mamba conv/SSM state), for the whole replica.
double handoff_bytes(const ModelSpec&, std::int64_t context_tokens, hw::Precision kv_cache_dtype);

}  // namespace servesim::models
