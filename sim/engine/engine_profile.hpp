// Named engine profiles: what `vllm serve` of one release does by default, read from
// sim/data/engines/<name>.json (embedded). A profile fills every engine knob a scenario leaves
// unset (max_num_seqs / max_num_batched_tokens by GPU class, gpu_memory_utilization, prefix
// caching by model kind, async scheduling, CUDA-graph capture sizes) and carries the engine's
// host-side costs and API-server priors, plus the TP all-reduce switch points by GPU and size.
#pragma once
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "hwmodels/catalog.hpp"
#include "models/model_spec.hpp"
#include "sim/engine/engine_config.hpp"
#include "workloads/frontend.hpp"
#include "workloads/workload.hpp"

namespace servesim::sim {

struct GpuClassDefaults {
  std::string label;
  double min_memory_gib = 0;
  std::vector<std::string> exclude_names;   // lower-case substrings of the GPU name
  int max_num_seqs = 256;
  std::int64_t max_num_batched_tokens = 2048;
  // Decode-only graph engines (SGLang cuda_graph_max_bs): the largest graph batch by the smallest
  // TP it applies from ({1: 256, 4: 512}); empty: the profile's cuda_graphs.max_capture_size.
  std::map<int, std::int64_t> cuda_graph_max_bs;
  std::int64_t graph_max_bs(int tp) const;
};

struct CudaGraphPolicy {
  // FULL_AND_PIECEWISE | PIECEWISE | NONE (vLLM, sizes in tokens) | FULL_DECODE_ONLY (SGLang,
  // TRT-LLM: sizes are decode batch sizes; `padding` off runs a batch of another size eagerly)
  std::string mode = "FULL_AND_PIECEWISE";
  bool padding = true;
  int max_capture_tokens_per_seq = 2;       // max size = min(max_num_seqs * (1 + K) * this, max_capture_size)
  std::int64_t max_capture_size = 512;
  std::vector<std::int64_t> small_sizes{1, 2, 4};
  std::int64_t step = 8, large_from = 256, large_step = 16;
};

// [small_sizes] + range(step, min(max + 1, large_from), step) + range(large_from, max + 1, large_step).
std::vector<std::int64_t> capture_size_list(const CudaGraphPolicy& g, std::int64_t max_size);

// One TP all-reduce implementation, in the order vLLM's CudaCommunicator tries them.
enum class AllReduceImpl { custom_one_stage, custom_two_stage, symm_mem_multimem, symm_mem_two_shot, nccl };
const char* to_string(AllReduceImpl a);

struct AllReducePolicy {
  std::vector<int> custom_world_sizes{2, 4, 6, 8};
  double custom_max_bytes = 8 << 20;
  struct OneStage { int max_world_size; double below_bytes; };  // below_bytes 0 = any size
  std::vector<OneStage> custom_one_stage;
  bool symm_mem = true;
  // By compute capability ("9.0") then world size: caps on the custom kernel with symm-mem on, and
  // the torch symmetric-memory kernel's own limit; world sizes that use multimem (else two-shot).
  std::map<std::string, std::map<int, double>> custom_max_with_symm, symm_mem_max;
  std::map<std::string, std::vector<int>> multimem_world_sizes;
};

struct HostCosts {                 // engine-level host-side costs (fitted or measured)
  double step_cpu_s = kDefaultStepOverheadS;
  double step_cpu_per_seq_s = 0;
  double launch_per_kernel_s = 27.6e-6;        // torch.compile'd code, host-launched
  double launch_per_kernel_eager_s = 23.1e-6;  // enforce_eager
  int eager_kernels_per_attention_layer = 2;   // piecewise graphs: attention runs eagerly
  int eager_kernels_per_mamba_layer = 3;
  // Outside a CUDA graph, one block-FP8 dense linear (vLLM's block-FP8 linear op: activation
  // quantisation + GEMM) costs its measured eager call instead of one kernel launch; by GPU name
  // (lower case), absent where none was measured (then one kernel launch).
  std::map<std::string, double> launch_per_fp8_block_linear_s;
};

struct EngineProfile {
  std::string name, engine, version, description;
  EngineKind kind = EngineKind::vllm;          // from "engine"
  SglangPolicy sglang;                         // "scheduler" (SGLang profiles)
  // KV page size by compute capability ("block_size_by_compute_capability"; SGLang: 1 with FA3 on
  // Hopper, 64 with trtllm_mha on Blackwell); others use block_size.
  std::map<std::string, int> block_size_by_cc;
  int block_size_for(const hw::GpuSpec& gpu) const;
  // KV cache dtype of a DSA model (index_topk > 0: DeepSeek-V3.2, GLM-5) when the KV dtype is left
  // "auto", by compute capability ("dsa_kv_cache_dtype_by_compute_capability"; SGLang's NSA
  // backend: BF16 on Hopper, FP8 on SM >= 10 whatever the checkpoint declares).
  std::map<std::string, hw::Precision> dsa_kv_dtype_by_cc;
  // The KV dtype "auto" means on this engine: the rule above for a DSA model on a GPU it names,
  // else the checkpoint's (models::checkpoint_kv_dtype of the weights).
  hw::Precision auto_kv_cache_dtype(const models::ModelSpec& m, const hw::GpuSpec& gpu, hw::Precision weights) const;
  // The engine release whose kernel tables price the steps ("kernel_tables" in the file; default
  // this profile's engine and version).
  hw::KernelTables kernel_tables;
  std::vector<GpuClassDefaults> gpu_classes;   // first match wins
  double gpu_memory_utilization = 0.9;
  int block_size = 16;
  bool enable_chunked_prefill = true;
  bool prefix_caching_decoder = true, prefix_caching_hybrid = false;
  // "async_scheduling": true / false, or {"decoder": ..., "hybrid": ...} by model kind (hybrid:
  // Mamba or Gated DeltaNet layers; "hybrid" defaults to "decoder").
  bool async_scheduling = false, async_scheduling_hybrid = false;
  int batch_queue_depth = 2;
  bool launches_on_scheduler_thread = false;   // engine_core.launches_on_scheduler_thread (EngineConfig)
  // Closed loops of fixed lengths do not stay in lockstep in this engine's measured runs: a
  // normal spread of this many tokens (sd) in each answer's length stands for what moves the
  // clients apart (sim/README.md, "Closed-loop desynchronisation"). 0: fixed lengths stay fixed.
  double closed_loop_osl_spread_tokens = 0;
  // The sd grows as (clients / 16)^load_exponent x (OSL / 1024)^length_exponent (0: constant).
  double closed_loop_osl_spread_load_exponent = 0, closed_loop_osl_spread_length_exponent = 0;
  CudaGraphPolicy graphs;
  AllReducePolicy all_reduce;
  // "attention_dp": {"prefill_moe_tokens": "padded" | "gathered" | "summed"}: what an MoE layer under
  // attention DP runs in a step with prefill work (models::DpPrefillMoe; default padded).
  models::DpPrefillMoe dp_prefill_moe = models::DpPrefillMoe::padded;
  // "attention_dp": {"wide_ep_all_to_all": true}: an MoE layer whose EP group is wider than its top_k
  // exchanges tokens by all-to-all (EngineConfig::moe_all_to_all_for).
  bool wide_ep_all_to_all = false;
  // "layouts": the parallel layouts the engine launches (check_layout). moe_tp_x_ep: an expert-
  // parallel size between 1 and tp x dp, each expert group's experts tensor-sharded over the rest
  // (TensorRT-LLM's moe_tensor_parallel_size x moe_expert_parallel_size, SGLang's --ep-size below
  // --tp-size; vLLM's expert parallelism spans the whole group). attention_dp_with_tp: attention TP
  // inside an attention-DP rank (TensorRT-LLM's attention DP runs each rank's attention on one GPU).
  bool moe_tp_x_ep = false, attention_dp_with_tp = true;
  HostCosts host;
  nlohmann::json api_server;                   // API-server priors (workloads::ApiServerConfig)
  std::vector<std::string> sources, unverified;
  nlohmann::json json;                         // the file as read

  const GpuClassDefaults& gpu_class(const hw::GpuSpec& gpu) const;
  // vLLM's cudagraph_capture_sizes for these knobs (ascending); empty when graphs are off.
  std::vector<std::int64_t> capture_sizes(int max_num_seqs, int num_speculative_tokens,
                                          std::int64_t max_num_batched_tokens, bool enforce_eager) const;
  // The same on a GPU at tensor parallel `tp` with the GPU class's defaults (SGLang's graph batch
  // sizes depend on both); decode-only graph engines give batch sizes x (1 + K).
  std::vector<std::int64_t> capture_sizes(const hw::GpuSpec& gpu, int tp, int max_num_seqs, int k) const;
  // The all-reduce vLLM runs for `bytes` (bf16 payload) on `tp` GPUs of one node.
  AllReduceImpl all_reduce_for(const hw::GpuSpec& gpu, int tp, double bytes, bool bf16 = true) const;
  // Payload sizes at which the choice changes, as (upper bound exclusive, impl) from 0 upward.
  std::vector<std::pair<double, AllReduceImpl>> all_reduce_switch_points(const hw::GpuSpec& gpu, int tp) const;
};

// Whether the engine of profile `p` launches layout `par` (EngineProfile::moe_tp_x_ep,
// attention_dp_with_tp); check_layout: an Error(where, ep_field or dp_field) saying why not and what
// it runs instead.
bool launches_layout(const EngineProfile& p, const models::Parallelism& par);
void check_layout(const EngineProfile& p, const models::Parallelism& par, const std::string& where,
                  const std::string& ep_field = "expert_parallel_size", const std::string& dp_field = "data_parallel_size");

// Profile names ("vllm-0.11", ...), oldest first.
std::vector<std::string> engine_profile_names();
// "vllm" = the newest vLLM profile; "vllm-0.16" = the newest profile at or below 0.16 (behaviour
// did not change in between); exact names as listed. Error (where, field) with the known names.
const EngineProfile& engine_profile(const std::string& name, const std::string& where = "--engine",
                                    const std::string& field = "");
inline constexpr const char* kNewestEngine = "vllm";
EngineKind engine_kind(const std::string& engine, const std::string& where = "", const std::string& field = "");
// The engine's batch formation in a few words ("mixed batches, preempt newest", ...).
std::string scheduler_summary(EngineKind k);

// Compute capability of a catalogue GPU ("9.0" Hopper, "10.0" Blackwell, "10.3" Blackwell Ultra).
std::string compute_capability(const hw::GpuSpec& gpu);

// Fills every knob the scenario's "engine" object does not name (`given`: its JSON, may be null)
// from the profile, for this model and GPU; then derives the capture sizes.
// `tp`: the replica's tensor parallel size (SGLang's cuda_graph_max_bs depends on it).
void apply_profile(const EngineProfile& p, const models::ModelSpec& m, const hw::GpuSpec& gpu,
                   const nlohmann::json& given, EngineConfig& cfg, int tp = 1);
// What a deployment's emitted launch files take from the engine a prediction ran (api::emit_deployment):
// {"engine" (the profile), "engine_kind", "max_model_len", "max_num_seqs", "max_num_batched_tokens",
// "gpu_memory_utilization", "cuda_graph_max_bs", "enable_chunked_prefill", "enable_prefix_caching"}.
nlohmann::json launch_knobs(const EngineConfig& e);

// Engine names ("vllm", "sglang", "trtllm") of the profiles, in that order where present.
std::vector<std::string> engine_names();

// The profile's API-server priors as a frontend (client terms at their priors); a scenario's
// "frontend" object goes on top of it (sim::resolved_frontend).
workloads::FrontendConfig profile_frontend(const EngineProfile& p);

// The closed-loop spread's sd (tokens) of a run of `concurrency` clients asking `osl`-token answers:
// closed_loop_osl_spread_tokens at 16 clients and 1,024 tokens, scaled by the two exponents; 0 when off.
inline constexpr double kSpreadReferenceConcurrency = 16, kSpreadReferenceOsl = 1024;
double closed_loop_osl_sd(const EngineConfig& e, double concurrency, double osl);
// The law in words, with `clients` and `osl` as given ("C", "OSL" or figures): "6 x (C/16)^0.25 x
// (OSL/1024)^0.25"; a constant sd alone when both exponents are 0.
std::string closed_loop_osl_sd_formula(double tokens, double load_exponent, double length_exponent,
                                       const std::string& clients, const std::string& osl);
// Whether a run draws its fixed answer lengths with the engine's closed-loop spread (measured
// closed loops do not stay in lockstep: sim/README.md, "Closed-loop desynchronisation"): a closed
// loop of two or more clients, a fixed OSL, no trace, closed_loop_osl_spread_tokens > 0, and
// room for 6 sd under max_model_len (with a fixed ISL).
bool spreads_closed_loop(const workloads::WorkloadConfig& w, const EngineConfig& e);
// The workload a run really draws: with the spread, each answer's length from a normal of that sd
// around the asked length; otherwise `w` unchanged.
workloads::WorkloadConfig closed_loop_lengths(const workloads::WorkloadConfig& w, const EngineConfig& e);

}  // namespace servesim::sim
