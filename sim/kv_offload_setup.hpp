// The scenario's "kv_offload" object (CLI --kv-offload cpu:GIB[,disk:GIB]) resolved against the
// GPU and instance: tier capacities per replica, and each tier's bandwidth and latency from
// sim/data/kv_offload_links.json (host link per GPU kind, local NVMe), unless the object names them.
#pragma once
#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

#include "hwmodels/catalog.hpp"
#include "models/step_cost.hpp"
#include "sim/scheduler/kv_offload.hpp"

namespace servesim::sim {

// {"cpu_gib", "disk_gib", "overlap", "cpu_bytes_per_s", "cpu_latency_us", "disk_bytes_per_s",
// "disk_latency_us"}; null: no offload. `instance` (may be null) bounds the host tier by the
// replica's share of host memory. Errors name `file` and the field.
OffloadConfig resolve_offload(const nlohmann::json& j, const hw::GpuSpec& gpu, const hw::InstanceSpec* instance,
                              int replica_gpus, const std::string& file);
// `servesim memory --kv-offload`: per tier its capacity (bytes per replica, block ids and tokens, as
// KvOffload sizes it), link bandwidth, latency and source, and the onboarding of one
// `context_tokens` prompt's whole blocks (+ the Mamba state pages of a hybrid hit): latency +
// bytes / bandwidth, bytes on one GPU. `block_bytes_per_gpu`: one block id on one GPU;
// `state_bytes_per_gpu`: the state pages a hit brings along (0 without Mamba layers).
nlohmann::json offload_memory_json(const OffloadConfig& c, double block_bytes_per_gpu, double state_bytes_per_gpu,
                                   int block_size, int replica_gpus, std::int64_t context_tokens);
// What the KV router counts a block in each tier as, in blocks to prefill: its onboarding time
// (block bytes on one GPU / the tier's bandwidth) over its prefill time (a full chunk of
// `chunk_tokens` prefilled from an empty cache, per block of `block_size`), at most 1.
std::vector<double> offload_block_costs(const OffloadConfig& c, double block_bytes_per_gpu, const models::StepCostModel& cost,
                                        int block_size, std::int64_t chunk_tokens);
// "cpu:100,disk:2000" -> {"cpu_gib": 100, "disk_gib": 2000}.
nlohmann::json parse_offload_flag(const std::string& text);

}  // namespace servesim::sim
