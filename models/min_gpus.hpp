// Minimum number of GPUs of a type that serve a model at a precision under a default serving
// policy derived from how vLLM serves (see ServingPolicy and policy_text()).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "hwmodels/catalog.hpp"
#include "models/memory.hpp"
#include "models/model_spec.hpp"

namespace servesim::models {

struct ServingPolicy {
  EngineMemoryConfig engine;         // vLLM defaults
  int nvlink_domain = 8;             // TP within one node (powers of two); PP across nodes beyond
  int max_gpus = 64;
  // Concurrency the cache must hold at the advertised context (see policy_text()).
  int required_seqs = 0;             // 0: derived (see .cpp)
  std::int64_t required_context = 0; // 0: model's max_model_len
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
// The default policy as a README paragraph.
std::string policy_text();

}  // namespace servesim::models
