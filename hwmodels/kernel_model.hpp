// Time of one GPU kernel or collective on one GPU type: a roofline (FLOPs / peak, bytes /
// bandwidth, launch latency) shaped by efficiency surfaces fitted on real kernel runs.
// Returns GPU time only; CPU launch/scheduling overhead is a separate term added by sim/.
#pragma once
#include <cstdint>
#include <compare>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "hwmodels/calibration.hpp"
#include "hwmodels/catalog.hpp"
#include "hwmodels/work.hpp"

namespace servesim::hw {

enum class Bound { compute, memory, launch, communication };
enum class Source { measured, interpolated, transferred, roofline };
std::string_view to_string(Bound b);
std::string_view to_string(Source s);

struct OpTime {
  double seconds = 0;
  Bound bound = Bound::compute;
  Source source = Source::roofline;
  double flops = 0;  // useful FLOPs of the op (0 for pure data movement)
  double bytes = 0;  // HBM bytes it must move; for collectives the bytes as nccl-tests counts them
  std::string_view kernel;  // the kernel vLLM runs for it (from the measurement nearest the query); "" unknown
  // Part of `seconds`: what reading the weights cold adds to a table that timed them resident in
  // L2 (cold_weights). A serving step meets every layer's weights cold.
  double cold_weights_s = 0;
  // The table that timed it: a release's ("vLLM 0.19.0 table", "SGLang 0.5.14 table", "vLLM 0.14.0
  // table (nearest measured: 0.14.0 for 0.12)"), else the runtime of the GPU's own or the reference
  // GPU's table ("vLLM 0.24.0", "NCCL 2.29.2", "torch 2.11.0+cu130"; `source` says transferred); ""
  // for a roofline prior.
  std::string_view table;
};

// Weights a kernel table's method left in L2, paid back. AIConfigurator's collectors (the "vllm"
// tables) replay each op on 6 weight copies (dense GEMMs) or on one (fused MoE, NVFP4 and block-FP8
// GEMMs; decode attention's one paged KV cache); copies x bytes within 3/4 of the measuring GPU's
// L2 stay resident between replays. In a serving step the same layer's weights (and a sequence's
// KV) return only after the whole model has streamed through HBM.
// Measured on the H200 (hwmodels/measure/measure_l2_reuse.py, results/h200_l2_reuse*.json: cold
// minus resident, CUDA-graph replay): a dense GEMM pays 0.54 us + 0.093 us per MB of weights (52
// points, 1-47 MB, m 1-64, residual sd 0.44 us), decode attention the same within 0.47 us (37
// points of 0.1-34 MB of KV; its own fit 0.74 + 0.077 us per MB), an MoE layer's expert GEMMs
// 1.74 us (6 points, 14-44 MB); nothing once copies x bytes pass 3/4 of the L2 (117 + 26 points:
// medians 0.01 and 0.00 us). The per-MB term scales with HBM bandwidth (H200 4.8 TB/s).
// One table's term: fixed + per-byte x the op's HBM bytes (weights and activations, or KV) while
// they fit (bytes <= max_bytes: copies x bytes within 3/4 of the L2), else nothing.
struct ColdWeights {
  double fixed_s = 0, per_byte_s = 0, max_bytes = 0;
  double seconds(double bytes) const { return bytes > 0 && bytes <= max_bytes ? fixed_s + per_byte_s * bytes : 0; }
};
// `family`/`origin`: the calibration family that timed the op (this project's own runs rotate their
// operands past L2: nothing); `table_l2_bytes`: the L2 of the GPU that measured it (0 = unknown:
// nothing); `hbm_bw_bytes_per_s`: the GPU the op runs on.
ColdWeights cold_weights(std::string_view family, std::string_view origin, double table_l2_bytes,
                         double hbm_bw_bytes_per_s);

enum class Collective { all_reduce, all_gather, reduce_scatter, all_to_all, send_recv };
std::string_view to_string(Collective c);
Collective parse_collective(std::string_view s, const std::string& where = "--op");

// Where a collective's GPUs sit: all inside one NVLink domain, or spread over `nodes` instances.
struct CommGroup {
  int gpus = 1;
  int nodes = 1;                          // > 1 crosses EFA
  const InstanceSpec* instance = nullptr; // required when nodes > 1
};

class KernelModel {
 public:
  virtual ~KernelModel() = default;

  // C[m,n] = A[m,k] · B[k,n]; weights B in `p` (nvfp4 on a GPU without it: dequantised path).
  virtual OpTime gemm(std::int64_t m, std::int64_t n, std::int64_t k, Precision p) const = 0;
  // `tokens` routed token-slots over `experts` local experts, per-expert weight [k,n].
  // skew = 0 balanced; > 0 power-law routing exponent.
  virtual OpTime grouped_gemm(int experts, std::int64_t tokens, std::int64_t n, std::int64_t k,
                              Precision p, double skew = 0) const = 0;
  // Causal self-attention over `batch` sequences of `seq` new tokens (bf16 activations), K/V
  // written to a cache of `kv` (bf16 or fp8); `window` > 0: sliding-window attention.
  virtual OpTime attention_prefill(int batch, std::int64_t seq, int heads, int kv_heads, int head_dim,
                                   Precision kv = Precision::bf16, int window = 0) const = 0;
  // One query token per sequence against `context` cached tokens read from a `kv` cache.
  virtual OpTime attention_decode(int batch, std::int64_t context, int heads, int kv_heads, int head_dim,
                                  Precision kv = Precision::bf16, int window = 0) const = 0;
  // Bidirectional ViT attention over `batch` sequences of `seq` patches (MHA, bf16).
  virtual OpTime encoder_attention(int batch, std::int64_t seq, int heads, int head_dim) const = 0;
  // One fused MoE layer (routing + expert GEMMs + activation + combine) on one GPU, weights in `p`
  // (vLLM's kernel for that precision on this GPU; NVFP4 on Hopper = Marlin W4A16).
  virtual OpTime moe(const MoeShape& shape, Precision p) const = 0;
  // hw::cold_weights of this GPU's table of `family` (its origin and measuring GPU's L2); nothing
  // for a family measured nowhere.
  virtual ColdWeights cold_weights(std::string_view family) const = 0;
  // Gated DeltaNet core of one layer (prefill: chunked; decode: one recurrent step per sequence),
  // TP-local heads, without conv1d and projections.
  virtual OpTime gdn(bool decode, int batch, std::int64_t seq, int k_heads, int v_heads, int head_k_dim,
                     int head_v_dim) const = 0;
  // The all-reduce of a tensor-parallel group of `gpus` inside one node as vLLM runs it
  // (tensor_model_parallel_all_reduce): custom one-/two-shot below its size switch, torch
  // symmetric memory, then NCCL (the kernel named per vLLM's size rules, vllm-engine.md §4).
  virtual OpTime tp_all_reduce(double bytes, int gpus) const = 0;
  // Mamba-2 chunked SSD scan (prefill); heads/groups per GPU.
  virtual OpTime mamba_scan(int batch, std::int64_t seqlen, int heads, int head_dim, int d_state,
                            int groups) const = 0;
  // Mamba-2 single-token selective state update (decode); fp32 state.
  virtual OpTime mamba_step(int batch, int heads, int head_dim, int d_state, int groups) const = 0;
  // Depthwise causal conv1d over `tokens` tokens of `channels` (prefill), or its 1-token update.
  virtual OpTime conv1d(std::int64_t tokens, std::int64_t channels, int kernel, bool decode) const = 0;
  // A memory-bound elementwise / norm op moving `bytes` (read + write).
  virtual OpTime memory_bound(double bytes) const = 0;
  // A collective of `bytes` (as nccl-tests counts them) over `group`.
  virtual OpTime collective(Collective op, double bytes, const CommGroup& group) const = 0;
  // Point-to-point transfer of `bytes` over NVLink (same node) or EFA (different nodes).
  virtual OpTime transfer(double bytes, bool cross_node, const InstanceSpec* instance) const = 0;

  // Where this GPU's surfaces come from ("measured on H200 ..." / "transferred from H200 ...").
  virtual std::string provenance() const = 0;
};

// CPU-side cost of launching kernels, measured next to the kernels (eager minus CUDA-graph time).
// sim/ adds eager_per_kernel_s per kernel for steps run eagerly; a graph replay costs about
// graph_per_kernel_s per kernel on the GPU instead (the smallest measured time of any point:
// `graph_floor` false leaves it 0 and reads only the family the eager cost comes from).
LaunchOverhead launch_overhead(const GpuSpec& gpu, bool graph_floor = true);

// The calibrated model for a GPU of the catalogue: measured surfaces when a calibration folder
// exists for it, otherwise the H200 surfaces transferred with that GPU's priors. Cached.
const KernelModel& kernel_model(const GpuSpec& gpu);

// Whose kernel tables price the ops: an engine ("vllm", "sglang", "trtllm") and the release its
// profile names ("0.24", "0.14", "0.5.14", "1.3.0rc20"). The model reads, family by family, the
// first table that timed it: that engine's measured releases on the GPU nearest first (the builds
// of the asked version and older releases, newest first; then newer ones, oldest first; for vLLM
// those older than its 0.24 tables), then the GPU's vLLM 0.24 tables and this project's runs, then
// the H200's (transferred). Release folders are discovered from the embedded files
// (hwmodels/calibration/<gpu>/<engine>-<version>/). provenance() and OpTime::table say which.
struct KernelTables {
  std::string engine = "vllm";
  std::string version = "0.24";
  // Block-FP8 GEMMs from the release tables' own fp8_block rows ("block_fp8_gemm": "fp8_block rows"
  // in a profile's kernel_tables), where that release's collector timed them as kernels; otherwise
  // (the default) on the per-tensor FP8 rows with the block format's bytes, as vLLM 0.24's eagerly
  // timed fp8_block rows sit on a launch floor (hwmodels/README.md, Block-FP8 GEMMs).
  bool block_fp8_gemm_rows = false;
  // On Blackwell GPUs, a one-row FP8 GEMM (m = 1: one sequence decoding) priced at most at the
  // same shape's m = 2 time ("fp8_gemm_m1": "at most the m = 2 row" in a profile's kernel_tables). vLLM 0.24's
  // per-tensor FP8 rows on Blackwell take a flat ~13 us more at m = 1 than at m = 2..16 (B200: a
  // median 2.2x, B300 2.5x, at every n x k down to 256 x 256); the same collector's vLLM 0.19 rows
  // of those GPUs, 0.14-0.22 on GB200/GB300 and SGLang 0.5.14's CUTLASS FP8 rows measure
  // m = 1 = m = 2 within 1-3 % (hwmodels/README.md, One-row FP8 GEMMs). Per-tensor FP8 and
  // block-FP8 priced on those rows.
  bool fp8_gemm_m1_at_most_m2 = false;
  // DSA (DeepSeek sparse attention: GLM-5, DeepSeek-V3.2) prompts longer than index_topk prefilled on
  // Hopper by FlashMLA's sparse kernel: absorbed MQA over the latent of the index_topk tokens each
  // query picked, query heads padded to a multiple of 64 ("dsa_prefill": "sparse MLA" in a profile's
  // kernel_tables; models/step_cost.cpp). Off: un-absorbed MHA over the same pairs. The step model
  // reads it; the kernel tables do not depend on it.
  bool dsa_sparse_mla_prefill = false;
  // A fused MoE layer at MoE tensor parallelism t (EP 1) timed on the release table's expert-parallel
  // rows at EP t ("moe_tp": "ep rows" in a profile's kernel_tables): the same per-rank expert FLOPs
  // and weight bytes (every expert at inter / t, or E / t experts at the full inter). TensorRT-LLM
  // 1.3.0rc20's CUTLASS MoE rows at MoE TP carry a per-token-slot cost that TP does not divide (H200,
  // DeepSeek's 7168 x 2048, top-8 of 256, 8,192 tokens: TP1 10.40 / TP8 4.98 / TP16 4.58 ms, EP8
  // 1.28; SGLang 0.5.14's and vLLM 0.19's TP8 and EP8 rows within 0.9-1.1x of each other), which
  // the serving rows at MoE TP8 do not show (hwmodels/README.md, TensorRT-LLM's MoE at MoE TP).
  // Only where the engine's own release table timed that shape at EP t; vLLM 0.24's tables and
  // other engines' are read as before.
  bool moe_tp_on_ep_rows = false;
  // Fused-MoE families of other engines' tables that time a kernel this engine runs
  // ("moe_same_kernel": {"families": [...]} in a profile's kernel_tables; say which kernel and why
  // in the profile). Where the release's own table never timed a layer's shape (no row of its
  // hidden, inter, top-k, experts and gating at any layout), the first of this GPU's other tables
  // (vLLM 0.24's, then the other releases') whose listed family of the layer's weight format timed
  // it prices the layer as measured there (a MoE-TP layer on its EP rows under moe_tp_on_ep_rows);
  // `moe_same_kernel_scaled` ("scale": "own table's ratio") multiplies that by the release table's
  // time over the family's at the shapes both timed (geometric mean, at the layer's tokens and
  // layout). TensorRT-LLM's MXFP4 x MXFP8 MoE on Blackwell: its 1.3.0rc23 table timed two other
  // models' shapes, SGLang 0.5.14's FlashInfer TRTLLM-gen rows (TensorRT-LLM's trtllm-gen kernels)
  // gpt-oss's (hwmodels/README.md, A MoE shape a release table lacks).
  std::vector<std::string> moe_same_kernel;
  bool moe_same_kernel_scaled = false;
  // Fused-MoE families of the release tables tried first, in this order, for a layer of their weight
  // format ("moe_first": [...] in a profile's kernel_tables), where a release table timed the layer
  // with more than one kernel (SGLang 0.5.14's MXFP4 MoE on Blackwell: MXFP4 x BF16 and MXFP4 x MXFP8
  // activations, the same FlashInfer TRTLLM-gen kernels). Without it, a table's named families in
  // name order.
  std::vector<std::string> moe_first;
  auto operator<=>(const KernelTables&) const = default;   // a kernel model per GPU and tables (kernel_model())
};
const KernelModel& kernel_model(const GpuSpec& gpu, const KernelTables& tables);

// Weight-only formats as vLLM runs them on `gpu`: 4-bit weights (+ scales) dequantised in the
// kernel, BF16 activations and BF16 math — INT4 and MXFP4 everywhere (Marlin / W4A16), NVFP4
// where the GPU has no FP4 tensor cores.
bool weight_only(const GpuSpec& gpu, Precision p);

}  // namespace servesim::hw
