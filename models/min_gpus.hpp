// Minimum number of GPUs of a type that serve a model at a precision under a default serving
// policy derived from how vLLM serves (see ServingPolicy and policy_text()).
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "hwmodels/catalog.hpp"
#include "models/memory.hpp"
#include "models/model_spec.hpp"

namespace servesim::models {

// headroom (default): vLLM's memory plan with a KV/state cache of at least 2x the weights and
// Hopper serving NVFP4 requests from the FP8 checkpoint. vllm: a fixed concurrency x context target.
enum class PolicyKind { headroom, vllm };
PolicyKind parse_policy(std::string_view s, const std::string& where = "--policy");

struct ServingPolicy {
  PolicyKind kind = PolicyKind::headroom;
  EngineMemoryConfig engine;         // vLLM defaults (kv_cache_dtype is replaced by the checkpoint's)
  int nvlink_domain = 8;             // TP within one node (powers of two); PP across nodes beyond
  int max_gpus = 64;
  int required_seqs = 64;            // vllm: concurrent sequences the cache must hold ...
  std::int64_t required_context = 0; // ... each at this context (0: max_model_len = config's max_position_embeddings)
  double headroom_cache_to_weights = 2.0; // headroom: KV/state cache >= this × weights (per GPU)
};

struct MinGpuResult {
  std::string gpu;
  hw::Precision precision = hw::Precision::bf16;
  int min_gpus = 0;                  // 0: does not fit within max_gpus
  Parallelism par;                   // the shape found
  MemoryPlan plan;                   // its memory plan
  std::string run_as;                // how the checkpoint runs on this GPU (e.g. NVFP4 via Marlin W4A16)
  std::string note;                  // why smaller shapes fail
};

// Searches tp ∈ {1,2,4,8 ≤ nvlink domain} then pp ∈ {2,3,...} nodes; first shape whose plan holds the policy.
MinGpuResult min_gpus(const ModelSpec&, const hw::GpuSpec&, hw::Precision, const ServingPolicy& = {});
// The table for the GPUs the vendor lists (B200, B300, H200, H100, GB200, GB300) × {bf16, nvfp4}.
std::vector<MinGpuResult> min_gpu_table(const ModelSpec&, const std::vector<hw::Precision>& precisions,
                                        const ServingPolicy& = {});
// The vendor's published minimum (MISSION.md) for nemotron-3.5-super-vl, 0 when not listed.
int vendor_min_gpus(std::string_view gpu, hw::Precision p);
// The policy as a README paragraph.
std::string policy_text(PolicyKind k = PolicyKind::headroom);

}  // namespace servesim::models
