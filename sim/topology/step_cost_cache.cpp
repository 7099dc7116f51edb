#include "sim/topology/step_cost_cache.hpp"

namespace servesim::sim {

std::shared_ptr<const models::StepCostModel> StepCostCache::get(const models::ModelSpec& m, const hw::GpuSpec& gpu,
                                                                hw::Precision weights, const models::Parallelism& par,
                                                                hw::Precision kv_cache_dtype, const hw::KernelTables& tables,
                                                                const hw::KernelScales& scales) {
  const Key key{&m, &gpu, weights, kv_cache_dtype, par.tp, par.pp, par.ep, par.dp, par.moe_all_to_all, par.dp_prefill_moe, tables, scales};
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (const auto& [k, v] : entries_)
      if (k == key) return v;
  }
  // Built outside the lock so threads building different models do not wait for each other; two
  // threads building the same one keep the first (they are equal).
  std::shared_ptr<const models::StepCostModel> built =
      models::make_step_cost(m, gpu, weights, par, kv_cache_dtype, tables, scales);
  std::lock_guard<std::mutex> lock(mu_);
  for (const auto& [k, v] : entries_)
    if (k == key) return v;
  entries_.emplace_back(key, built);
  return built;
}

std::size_t StepCostCache::size() const {
  std::lock_guard<std::mutex> lock(mu_);
  return entries_.size();
}

}  // namespace servesim::sim
