// FLOPs and HBM bytes of each op family for a shape: the roofline numerators shared by the fit
// (measured points) and the predictions (queries), so both see the same physics.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "hwmodels/catalog.hpp"
#include "hwmodels/fit.hpp"

namespace servesim::hw {

struct Work {
  double flops = 0;
  double bytes = 0;
};

// Bytes per element of a weight / activation in `p`, scales included: nvfp4 one fp8 scale per 16
// values (0.5625), mxfp4 one E8M0 per 32 (0.53125), int4 one bf16 per group of 32 (0.5625),
// fp8_block one fp32 per 128x128 block (1.000244).
double element_bytes(Precision p);

// C[m,n] = A[m,k]·B[k,n] with activations in `act` and weights in `weights`, bf16 output.
Work gemm_work(double m, double n, double k, Precision weights, Precision act);
// Experts distinct experts touched by `tokens` slots routed with power-law exponent `skew` (0 = uniform).
double experts_touched(int experts, double tokens, double skew);
// How `tokens` slots land on `experts`: balanced = even split; skewed = Zipf(skew) over expert rank
// with largest-remainder rounding, as the measurement script routes them.
struct Routing {
  double max_tokens = 0;  // slots of the busiest expert
  double active = 0;      // experts with at least one slot
};
Routing route(int experts, double tokens, double skew);
// Weights of the `active` experts read once; activations in, outputs out.
Work grouped_gemm_work(double active, double tokens, double n, double k, Precision weights, Precision act);
// Query-key pairs of one sequence of `seq` new tokens under the causal mask: s² / 2, or about
// s·w - w² / 2 when each query sees at most `window` keys (0: no window).
double causal_pairs(double seq, double window);
// Causal prefill: QK^T and PV over the lower triangle (capped at `window` keys per query when > 0);
// K and V written to the cache at `kv_bytes` per element.
Work attention_prefill_work(double batch, double seq, double heads, double kv_heads, double head_dim,
                            double kv_bytes = 2, double window = 0);
// One query per sequence against `context` cached tokens (the last `window` when > 0), KV read at
// `kv_bytes` per element (bf16 2, fp8 1).
Work attention_decode_work(double batch, double context, double heads, double kv_heads, double head_dim,
                           double kv_bytes = 2, double window = 0);
// Bidirectional (ViT) attention: every query against every key of its sequence.
// ViT attention (bidirectional): FLOPs of whole FlashAttention tiles run in whole waves over the
// GPU's `sms` (0: no wave quantisation); the tile sizes of the architecture's kernel.
// vLLM's custom all-reduce picks its one-stage kernel for 2 GPUs, below 512 KiB on up to 4 and
// below 256 KiB on more (csrc/custom_all_reduce.cuh), the two-stage kernel above: two kernels
// whose times step at the switch, fitted apart.
bool custom_ar_one_shot(int gpus, double bytes);
struct EncoderTiles { double q = 128, kv = 128; };
EncoderTiles encoder_tiles(const std::string& arch);
Work encoder_attention_work(double batch, double seq, double heads, double head_dim, int sms, EncoderTiles tiles);

// A fused MoE layer on one GPU (rank 0 of its TP or EP group): `tokens` enter the layer; each picks
// `topk` of `experts` global experts; the rank holds experts/ep experts of inter/tp width.
struct MoeShape {
  double tokens = 0, hidden = 0, inter = 0;
  int topk = 0, experts = 0, tp = 1, ep = 1;
  double skew = 0;     // 0 balanced; > 0 power-law exponent of the per-expert load (rank 0 the heaviest)
  bool gated = true;   // SwiGLU (gate + up + down) or a non-gated MLP (up + down, e.g. ReLU^2)
};
// How the rank's experts are hit: slots routed to it and distinct local experts touched.
struct MoeRouting {
  double slots = 0;    // token-slots computed on this rank
  double touched = 0;  // distinct local experts with at least one slot (their weights are streamed)
  // Kernels that pad each touched expert's slots to whole blocks of block_m rows (vLLM's fused
  // Marlin MoE, marlin_block_m): the padded slots computed; 0 for a kernel without such padding.
  double padded = 0;
  int block_m = 0;     // their block: padded / block_m blocks, each streaming its expert's weights
};
// vLLM's fused Marlin MoE token block (fused_marlin_moe.py): the first of 8, 16, 32, 48, 64 with
// tokens x topk / local_experts / block < 0.9 (mean slots per local expert under 0.9 blocks), else
// 64. moe_align_block_size then pads every touched expert's slots to a multiple of it, and each
// block runs the expert's full GEMMs: the kernel's math follows the padded slots.
int marlin_block_m(double tokens, int topk, int local_experts);
// Expected routing of a serving batch: each token draws top-k distinct experts, uniform (balanced:
// touched = E_local (1 - (1 - k/E)^T)) or with power-law expert popularity (rank 0 holding the most
// popular experts).
// block_m > 0: also the expected padded slots (each local expert's load binomial over the tokens).
MoeRouting moe_routing_expected(const MoeShape& s, int block_m = 0);
// Routing of AIC's moe measurements: balanced = round-robin (slot j to expert j mod E), so a rank
// touches min(E_local, slots) experts; power law = AIC's generator: per-expert loads drawn
// independently from a power law with exponent `skew`, scaled to tokens x topk slots, the EP group
// with the largest load measured (mean of 32 seeded draws, deterministic per routing).
// block_m > 0: also the padded slots of those loads (balanced: the local slots split as evenly as
// whole slots allow).
MoeRouting moe_routing_measured(const MoeShape& s, int block_m = 0);
// One power-law routing of a measured fused-MoE row: what moe_routing_measured(s, block_m) gives
// for s.skew > 0, keyed by the fields it depends on.
struct PowerLawRouting {
  int experts = 0;
  double tokens = 0;
  int topk = 0, ep = 0;
  double skew = 0;
  int block_m = 0;
  MoeRouting routing;
};
// The power-law routings of every measured fused-MoE row of the embedded tables, drawn at build
// time (hwmodels/precompute/, run by CMake) and compiled into the binary, sorted by key:
// moe_routing_measured looks a row up here before drawing (the draws are half of reading a GPU's
// MoE tables). Empty in the generator itself.
std::span<const PowerLawRouting> precomputed_power_law_routings();
// The routing drawn afresh, never looked up: what a table entry must equal bit for bit.
MoeRouting power_law_routing_drawn(const MoeShape& s, int block_m);
// Every power-law routing this process drew (found in no table), sorted by key: the generator's output.
std::vector<PowerLawRouting> power_law_routings_drawn();
// How many lookups found no table entry so far in this process (then drew or took the memo).
std::size_t power_law_routing_table_misses();
// Weights of the touched experts at `weights` bytes/param, tokens in/out in bf16, the intermediate
// activations written and read once; FLOPs 2 x slots x (3 or 2) x hidden x inter/tp. Where the
// routing has padded slots (block-padded kernels): FLOPs over the padded slots (the math of whole
// blocks) and the weights of an expert read once per block of it.
Work moe_work(const MoeShape& s, const MoeRouting& r, Precision weights);
Features moe_features(const MoeShape& s, const MoeRouting& r);
// The BF16 activations of every token-slot of the layer (tokens x topk x hidden x 2 bytes), on all
// ranks together: vLLM's fused MoE routes, permutes and un-permutes every slot on each rank, whatever
// rank's experts compute it, so this cost does not shrink with EP (B300 NVFP4 TRTLLM-gen, hidden
// 7168, top-8 of 256, 16,384 tokens: 3.37 ms at EP 1, 1.70 ms at EP 64, 64x fewer local FLOPs).
double moe_dispatch_bytes(const MoeShape& s);

// Gated DeltaNet core of one layer (without conv1d and projections): chunked delta rule over all
// tokens (prefill) or one recurrent step per sequence (decode); fp32 state k_dim x v_dim per value head.
Work gdn_work(bool decode, double batch, double seq, double k_heads, double v_heads, double head_k, double head_v);
Features gdn_features(double batch, double seq, double k_heads, double v_heads, double head_k, double head_v);
// Mamba-2 SSD with chunk 128: intra-chunk CB^T and its product with x, plus state passing.
Work mamba_scan_work(double batch, double seqlen, double heads, double head_dim, double d_state, double groups);
// Selective state update: reads and writes the fp32 state of every head.
Work mamba_step_work(double batch, double heads, double head_dim, double d_state, double groups);
Work conv1d_work(double tokens, double channels, double kernel, bool decode);

// Log-space shape coordinates of each family (fit.hpp Features): what "a nearby shape" means.
Features gemm_features(double m, double n, double k);
Features grouped_gemm_features(int experts, double tokens, const Routing& r, double n, double k, double skew,
                               bool fp8 = false);
Features attention_features(double batch, double len, double heads, double kv_heads, double head_dim);
Features mamba_scan_features(double batch, double seqlen, double heads, double head_dim, double d_state, double groups);
Features mamba_step_features(double batch, double heads, double head_dim, double d_state, double groups);
// `batch`: sequences the prefill tokens are split into (varlen conv; 1 for one sequence).
Features conv1d_features(double tokens, double channels, double kernel, double batch = 1);
Features bytes_features(double bytes);

}  // namespace servesim::hw
