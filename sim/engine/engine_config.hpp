// Engine knobs of one replica, by vLLM's names, plus the simulator's own timing terms.
#pragma once
#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "common/error.hpp"
#include "hwmodels/kernel_model.hpp"
#include "hwmodels/scaled_kernel_model.hpp"
#include "models/memory.hpp"
#include "models/model_spec.hpp"

namespace servesim::sim {

// What a worker does with a request (disaggregated topologies split the two halves).
enum class WorkerRole { aggregated, prefill_only, decode_only };
std::string_view to_string(WorkerRole r);

// Per-step CPU time of the engine core outside the GPU forward pass: schedule(), input
// preparation, update_from_output(). Serial with the GPU in vLLM's synchronous loop, overlapped
// with the previous step's forward under async scheduling. The engine profile's value
// (sim/data/engines) replaces this fallback.
inline constexpr double kDefaultStepOverheadS = 0.002;
// Extra per-step CPU time when CUDA graphs are off, on top of the kernel launches themselves
// (modelled from the measured eager launch cost, see Worker). None by default.
inline constexpr double kDefaultEagerOverheadS = 0.0;
// vLLM's largest CUDA-graph batch (tokens) by default: larger steps launch their kernels eagerly.
inline constexpr std::int64_t kDefaultMaxCudagraphCaptureSize = 512;

// Which engine's scheduling rules a replica follows (the profile's "engine"): vLLM v1's token
// budget with mixed batches and recompute preemption; SGLang's prefill-priority loop (a step is
// all-prefill or all-decode, one chunked request, new_token_ratio admission, retraction);
// TensorRT-LLM's in-flight batching under GUARANTEED_NO_EVICT (docs/engines.md).
enum class EngineKind : std::uint8_t { vllm, sglang, trtllm };
std::string_view to_string(EngineKind k);

// SGLang's scheduler constants (managers/schedule_policy.py, new_token_ratio_tracker.py, environ.py).
struct SglangPolicy {
  std::int64_t max_prefill_tokens = 16384;   // prompt tokens per prefill batch (a longer prompt still runs alone, chunked)
  double init_new_token_ratio = 0.7;         // min(0.7 x schedule_conservativeness, 1)
  double min_new_token_ratio_factor = 0.14;  // min ratio = init x this
  double new_token_ratio_decay_steps = 600;  // (init - min) / this per decode step
  std::int64_t clip_max_new_tokens = 4096;   // CLIP_MAX_NEW_TOKENS
  std::int64_t retract_decode_steps = 20;    // SGLANG_RETRACT_DECODE_STEPS: headroom kept after a retraction
  std::int64_t num_reserved_decode_tokens = 512;  // disaggregated decode server: KV reserved beyond the prompt
};

struct EngineConfig {
  EngineKind kind = EngineKind::vllm;
  SglangPolicy sglang;
  int max_num_seqs = models::kServeMaxNumSeqs;                       // `vllm serve` on >= 70 GiB GPUs
  std::int64_t max_num_batched_tokens = models::kServeMaxNumBatchedTokens;
  double gpu_memory_utilization = 0.9;
  int block_size = 16;
  hw::KernelTables kernel_tables;                 // whose kernel tables price the steps (the profile's engine release)
  hw::KernelScales kernel_scales;                 // a user calibration's factors on those tables (1: none)
  bool enable_prefix_caching = false;
  bool enable_chunked_prefill = true;
  std::int64_t long_prefill_token_threshold = 0;  // 0: off
  std::int64_t max_model_len = 0;                 // 0: the model's maximum
  bool enforce_eager = false;                     // CUDA graphs off
  bool moe_all_to_all = false;                    // MoE under attention DP: all-to-all dispatch / combine (Parallelism)
  models::DpPrefillMoe dp_prefill_moe = models::DpPrefillMoe::padded;  // the engine profile's (Parallelism::dp_prefill_moe)
  bool wide_ep_all_to_all = false;                // the engine profile's attention_dp.wide_ep_all_to_all (moe_all_to_all_for)
  std::int64_t max_cudagraph_capture_size = kDefaultMaxCudagraphCaptureSize;  // steps above run eagerly
  double step_overhead_s = kDefaultStepOverheadS;        // engine-core CPU per step (fixed part)
  double step_overhead_per_seq_s = 0;                    // ... plus this per scheduled request
  // GPU-side time added to every step's forward (a user calibration's step_gpu_ms: launch gaps, an
  // op outside the graphs, a synchronisation); unlike the engine core's time it never overlaps the GPU.
  double step_gpu_s = 0;
  // The shortest a step's forward may take whatever its kernels (a user calibration's
  // forward_floor_ms): a build that issues its forward, or part of it, from the host instead of
  // replaying a CUDA graph cannot finish a step before it has launched its kernels. A floor, not an
  // addition: the GPU's own time hides it once longer (TPOT flat at light load, the GPU's growth
  // reaching it at more sequences). 0: the launches the profile models alone.
  double forward_floor_s = 0;
  double eager_overhead_s = kDefaultEagerOverheadS;
  // The engine-core loop (vLLM EngineCoreProc): synchronous (schedule, run, update, repeat) or
  // async scheduling with a batch queue: batch N+1 is scheduled while batch N runs on the GPU.
  bool async_scheduling = false;
  int batch_queue_depth = 2;
  // The loop's one host thread schedules a batch and then issues its kernels (TensorRT-LLM's
  // PyExecutor: _prepare_and_schedule_batch, then _forward_step on the same thread): an eager
  // step's launches hold the host, so the next batch is formed only after them. false (vLLM's
  // engine core, whose workers issue the kernels): scheduling overlaps the previous launches.
  bool launches_on_scheduler_thread = false;
  // CUDA graphs: FULL_AND_PIECEWISE (uniform decode replays a full graph, mixed batches replay
  // piecewise graphs with attention/Mamba run eagerly), PIECEWISE, or NONE. Batches are padded up
  // to the next capture size; larger ones launch every kernel from the host.
  // FULL_DECODE_ONLY (SGLang, TRT-LLM): only uniform decode batches replay a graph, every other
  // step launches its kernels eagerly. Without padding (TRT-LLM's default) a decode batch whose
  // size is not a capture size runs eagerly too.
  std::string cudagraph_mode = "FULL_AND_PIECEWISE";
  bool cudagraph_padding = true;
  std::vector<std::int64_t> cudagraph_capture_sizes;     // ascending; empty: graphs off
  // Attention data-parallel ranks this engine stands for (lockstep_engine): each rank replays its
  // own share's graph, so a decode batch is judged by the busiest rank's share.
  int lockstep_dp = 1;
  // Host-side launch cost per kernel (compiled code; eager PyTorch for enforce_eager) and the
  // kernels run eagerly per attention / Mamba layer between piecewise graphs. 0: the cost
  // model's own eager launch estimate.
  double launch_per_kernel_s = 0, launch_per_kernel_eager_s = 0;
  int eager_kernels_per_attention_layer = 0, eager_kernels_per_mamba_layer = 0;
  // One block-FP8 dense linear issued outside a CUDA graph (vLLM's op: activation quantisation +
  // GEMM), measured per GPU; 0: one kernel launch like any other.
  double launch_per_fp8_block_linear_s = 0;
  std::string engine_profile;                            // profile that filled the unset knobs
  // Speculative decoding hook: draft tokens verified per decode step, and the probability that
  // the draft token at position i (0-based) is accepted given all before it were. Empty: 1.0.
  int num_speculative_tokens = 0;
  std::vector<double> acceptance_per_position;
  WorkerRole role = WorkerRole::aggregated;
  // Tokens the model samples before its first visible text (the model's response format, e.g.
  // gpt-oss's harmony header): the client's first and second tokens are the (K+1)-th and (K+2)-th.
  int response_preamble_tokens = 0;
  // Closed loops with a fixed answer length: each answer's length gets a normal spread of this
  // many tokens (sd), the engine profile's stand-in for what desynchronises measured clients.
  double closed_loop_osl_spread_tokens = 0;
  // ... at 16 clients and 1,024-token answers; the sd scales as (C / 16)^load x (OSL / 1024)^length.
  double closed_loop_osl_spread_load_exponent = 0, closed_loop_osl_spread_length_exponent = 0;

  double overhead_per_step_s() const { return step_overhead_s + (enforce_eager ? eager_overhead_s : 0.0); }
  // The knobs the memory planner reads, with the replica's KV cache dtype.
  models::EngineMemoryConfig memory_config(hw::Precision kv_cache_dtype) const {
    models::EngineMemoryConfig mc;
    mc.gpu_memory_utilization = gpu_memory_utilization;
    mc.max_num_seqs = max_num_seqs;
    mc.max_model_len = max_model_len;
    mc.max_num_batched_tokens = max_num_batched_tokens;
    mc.kv_cache_dtype = kv_cache_dtype;
    mc.block_size = block_size;
    mc.num_speculative_tokens = num_speculative_tokens;
    mc.cuda_graphs = !enforce_eager;
    mc.planner = kind == EngineKind::sglang ? models::MemoryPlanner::sglang
                 : kind == EngineKind::trtllm ? models::MemoryPlanner::trtllm
                                              : models::MemoryPlanner::vllm;
    mc.cuda_graph_max_bs = enforce_eager || cudagraph_capture_sizes.empty() ? 0 : max_cudagraph_capture_size / (1 + num_speculative_tokens);
    return mc;
  }
};

// GPUs of one node of `gpu`: its first catalogue instance's; without one, 4 on a GPU of a wider NVLink
// domain (an NVL72 rack's compute tray: GB300), else 8 (an HGX board).
int node_gpus(const hw::GpuSpec& gpu);

// Whether an MoE layer of `m` laid out as `par` on `gpu` exchanges its tokens by all-to-all
// (models::Parallelism::moe_all_to_all): asked for (engine.moe_all_to_all, --moe-all-to-all), or the
// engine's wide expert-parallel path (EngineProfile::wide_ep_all_to_all) once an expert-parallel
// group spans more than one node, where all-gathering every rank's batch is what the engines' wide-EP
// dispatch (SGLang's DeepEP, TensorRT-LLM's MNNVL / DeepEP all-to-all) exists to avoid.
// The all-to-all sends a token to the ranks holding whole experts: MoE TP x EP layouts keep the
// all-gather (the engines' wide-EP paths run moe TP 1), and asking for it there is an Error.
inline bool moe_all_to_all_for(const EngineConfig& e, const models::ModelSpec& m, const models::Parallelism& par,
                               const hw::GpuSpec& gpu) {
  if (m.experts == 0 || par.dp <= 1) return false;
  if (e.moe_all_to_all && par.hybrid_ep())
    throw Error("engine.moe_all_to_all", "",
                "all-to-all dispatch sends tokens to ranks of whole experts; expert parallel size " + std::to_string(par.ep) +
                    " of tp x dp = " + std::to_string(par.moe_group()) + " shards each expert " + std::to_string(par.moe_tp()) +
                    " ways (MoE TP x EP), which exchanges by all-gather + reduce-scatter: set expert parallel size " +
                    std::to_string(par.moe_group()) + " or drop the all-to-all");
  return e.moe_all_to_all || (e.wide_ep_all_to_all && par.ep > 1 && !par.hybrid_ep() && par.moe_group() > node_gpus(gpu));
}

// `par` with the engine's attention-DP rules for its MoE layers: the exchange (moe_all_to_all_for)
// and what a prefill step's ranks run (EngineConfig::dp_prefill_moe). What every step-cost model of
// a run is built on (simulate, deployments, `servesim step --engine`).
inline models::Parallelism with_engine_rules(models::Parallelism par, const EngineConfig& e, const models::ModelSpec& m,
                                             const hw::GpuSpec& gpu) {
  par.moe_all_to_all = moe_all_to_all_for(e, m, par, gpu);
  par.dp_prefill_moe = e.dp_prefill_moe;
  return par;
}

// An attention data-parallel group of `dp` engine cores (vLLM --data-parallel-size with MoE) runs
// in lockstep: every rank waits for the busiest one at the MoE layers' collectives, and the DP
// coordinator spreads requests over ranks by load. servesim runs the group as one engine whose
// scheduler sees the union of the ranks: dp times one rank's sequences, token budget and
// CUDA-graph batch sizes (each rank pads its own share; without padding, TRT-LLM's ranks all run
// the graph of the busiest rank's share, the others padded with dummy requests, reference B3/B4),
// while one request's prefill chunk stays within a rank's budget. The step cost charges the busiest rank's share (models::StepCostModel).
// The KV pool is dp times one rank's (the caller scales the block count).
// SGLang gives each rank's scheduler chunked_prefill_size / dp (ServerArgs._handle_data_parallelism:
// chunked_prefill_size //= dp_size with enable_dp_attention) and its own max_prefill_tokens
// (reference sglang-trtllm-engines.md A1, A6): the union's chunk budget stays chunked_prefill_size,
// a prompt's chunk is a rank's share of it, and the union admits dp ranks' worth of prompt tokens.
inline EngineConfig lockstep_engine(EngineConfig e, int dp) {
  if (dp <= 1) return e;
  if (e.kind == EngineKind::sglang) {
    e.max_num_batched_tokens = std::max<std::int64_t>(e.block_size, e.max_num_batched_tokens / dp);
    e.sglang.max_prefill_tokens *= dp;
  }
  const std::int64_t rank_budget = e.max_num_batched_tokens;
  e.long_prefill_token_threshold =
      e.long_prefill_token_threshold > 0 ? std::min(e.long_prefill_token_threshold, rank_budget) : rank_budget;
  e.lockstep_dp = dp;
  e.max_num_seqs *= dp;
  e.max_num_batched_tokens *= dp;
  e.max_cudagraph_capture_size *= dp;
  for (auto& size : e.cudagraph_capture_sizes) size *= dp;
  return e;
}

}  // namespace servesim::sim
