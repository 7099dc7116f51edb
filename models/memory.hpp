// Memory of one replica per GPU, with vLLM's gpu_memory_utilization semantics: the KV/state
// cache gets util × total − (weights + peak activations + non-torch memory).
#pragma once
#include <cstdint>
#include <string>

#include "hwmodels/catalog.hpp"
#include "models/model_spec.hpp"

namespace servesim::models {

struct EngineMemoryConfig { double gpu_memory_utilization = 0.9; int max_num_seqs = 256;
  std::int64_t max_model_len = 0 /*0: model max*/; std::int64_t max_num_batched_tokens = 8192;
  hw::Precision kv_cache_dtype = hw::Precision::bf16; int block_size = 16;
  int num_speculative_tokens = 0;   // MTP draft tokens; > 0 loads the MTP weights and widens conv state
  bool cuda_graphs = true;          // vLLM default (not --enforce-eager)
};

// Bytes per weight element as stored in the checkpoint (NVFP4: 4 bit + one FP8 scale per 16).
double weight_bytes_per_param(hw::Precision p);

struct WeightBreakdown {            // per GPU, bytes
  double quantized = 0;             // linear layers stored in the requested precision (incl. scales)
  double high_precision = 0;        // kept in BF16: embeddings, LM head, router, norms, Mamba conv/A/D/dt, excluded layers
  double vision = 0;                // vision encoder + projector (BF16)
  double mtp = 0;                   // MTP layers when speculative decoding is on
  double total() const { return quantized + high_precision + vision + mtp; }
};

struct MemoryPlan {                 // per GPU unless named total
  double weight_bytes = 0, activation_bytes = 0, reserve_bytes = 0, kv_bytes_per_token = 0, state_bytes_per_seq = 0;
  double cache_bytes = 0;           // what is left for KV blocks + Mamba state slots
  std::int64_t kv_capacity_tokens = 0;  // for the whole replica (tokens of context it can hold)
  std::int64_t num_kv_blocks = 0;   // kv_capacity_tokens / block_size
  int state_slots = 0;              // Mamba state slots set aside first: min(max_num_seqs, what fits)
  int max_concurrent_seqs(std::int64_t context_tokens) const;   // state + KV of that context each

  // Breakdown.
  WeightBreakdown weights;          // per GPU
  double gpu_total_bytes = 0;       // usable HBM the driver reports
  double budget_bytes = 0;          // gpu_memory_utilization × total
  double cuda_graph_bytes = 0, nccl_bytes = 0, context_bytes = 0;  // parts of reserve_bytes
  double conv_state_bytes_per_seq = 0, ssm_state_bytes_per_seq = 0; // per GPU, parts of state_bytes_per_seq
  int gpus = 1;                     // tp × pp
  std::int64_t max_model_len = 0;   // resolved
  int block_size = 16;
  std::string weight_precision, kv_precision, weight_note;  // e.g. "NVFP4 dequantised to ... (Marlin W4A16)"
};

// Throws Error when the weights, activations and reserve exceed the budget, saying by how much.
MemoryPlan plan_memory(const ModelSpec&, const hw::GpuSpec&, hw::Precision weights,
                       const Parallelism&, const EngineMemoryConfig&);

// Per-token KV bytes for the whole replica (all attention layers, no replication) and per GPU
// under TP (KV heads replicated when kv_heads < tp; PP splits layers).
double kv_bytes_per_token(const ModelSpec&, hw::Precision kv_dtype);
double kv_bytes_per_token_per_gpu(const ModelSpec&, hw::Precision kv_dtype, const Parallelism&);
// Mamba conv state (model dtype, conv_kernel-1+spec tokens rows) and fp32 SSM state per sequence,
// whole replica (tp = 1) or per GPU (groups replicated when groups % tp != 0).
double conv_state_bytes_per_seq(const ModelSpec&, const Parallelism& = {}, int spec_tokens = 0);
double ssm_state_bytes_per_seq(const ModelSpec&, const Parallelism& = {});

}  // namespace servesim::models
