// Step-cost models shared by the deployments of one study. A step-cost model depends only on the
// model, the GPU, the weight and KV-cache precisions, the worker's parallelism, the kernel tables
// and the kernel factors; configurations that differ only in engine knobs (max_num_seqs,
// max_num_batched_tokens, prefix caching) or in worker counts run the same one. Building one reads
// and fits the kernel families it asks for and fills its per-shape tables (milliseconds); a cached
// model returns the bits a fresh one would, since it is built from the same inputs and is never
// changed after construction. Safe to share between threads.
#pragma once
#include <memory>
#include <mutex>
#include <vector>

#include "hwmodels/kernel_model.hpp"
#include "hwmodels/scaled_kernel_model.hpp"
#include "models/step_cost.hpp"

namespace servesim::sim {

class StepCostCache {
 public:
  // The model make_step_cost would build from these inputs, built once. `m` and `gpu` must outlive
  // the cache (the models refer to them).
  std::shared_ptr<const models::StepCostModel> get(const models::ModelSpec& m, const hw::GpuSpec& gpu, hw::Precision weights,
                                                   const models::Parallelism& par, hw::Precision kv_cache_dtype,
                                                   const hw::KernelTables& tables, const hw::KernelScales& scales);
  std::size_t size() const;

 private:
  struct Key {
    const models::ModelSpec* model;
    const hw::GpuSpec* gpu;
    hw::Precision weights, kv;
    int tp, pp, ep, dp;
    bool moe_all_to_all;
    models::DpPrefillMoe dp_prefill_moe;
    hw::KernelTables tables;
    hw::KernelScales scales;
    bool operator==(const Key&) const = default;
  };
  mutable std::mutex mu_;
  std::vector<std::pair<Key, std::shared_ptr<const models::StepCostModel>>> entries_;
};

}  // namespace servesim::sim
