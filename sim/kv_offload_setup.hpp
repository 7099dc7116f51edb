// The scenario's "kv_offload" object (CLI --kv-offload cpu:GIB[,disk:GIB]) resolved against the
// GPU and instance: tier capacities per replica, and each tier's bandwidth and latency from
// sim/data/kv_offload_links.json (host link per GPU kind, local NVMe), unless the object names them.
#pragma once
#include <string>

#include <nlohmann/json.hpp>

#include "hwmodels/catalog.hpp"
#include "sim/scheduler/kv_offload.hpp"

namespace servesim::sim {

// {"cpu_gib", "disk_gib", "overlap", "cpu_bytes_per_s", "cpu_latency_us", "disk_bytes_per_s",
// "disk_latency_us"}; null: no offload. `instance` (may be null) bounds the host tier by the
// replica's share of host memory. Errors name `file` and the field.
OffloadConfig resolve_offload(const nlohmann::json& j, const hw::GpuSpec& gpu, const hw::InstanceSpec* instance,
                              int replica_gpus, const std::string& file);
// "cpu:100,disk:2000" -> {"cpu_gib": 100, "disk_gib": 2000}.
nlohmann::json parse_offload_flag(const std::string& text);

}  // namespace servesim::sim
