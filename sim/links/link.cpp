#include "sim/links/link.hpp"

#include "common/error.hpp"

namespace servesim::sim {
namespace {
// Point-to-point GPU latency prior: NVIDIA aiconfigurator systems/*.yaml `p2p_latency: 10 µs`
// (reference/hardware.md §1.3). Not a measurement of ours; replaced once NVLink p2p is calibrated.
constexpr double kNvlinkP2pLatencyS = 10e-6;
}  // namespace

std::string_view to_string(LinkKind k) { return k == LinkKind::nvlink ? "nvlink" : "efa"; }

LaneSpec nvlink_lane(const hw::GpuSpec& gpu) {
  if (!(gpu.nvlink_bw_bytes_per_s > 0))
    throw Error("gpu " + gpu.name, "nvlink_bw_bytes_per_s", "must be > 0 for an NVLink transfer");
  return {LinkKind::nvlink, gpu.nvlink_bw_bytes_per_s, kNvlinkP2pLatencyS};
}

LaneSpec efa_lane(const hw::InstanceSpec& instance) {
  if (!(instance.efa_per_gpu_bytes_per_s > 0))
    throw Error("instance " + instance.name, "efa_per_gpu_bytes_per_s",
                "must be > 0 for a transfer between nodes (the instance has no EFA figures)");
  return {LinkKind::efa, instance.efa_per_gpu_bytes_per_s, instance.efa_latency_s};
}

double transfer_seconds(double bytes, const LaneSpec& lane, int lanes) {
  if (lanes < 1) throw Error("transfer", "lanes", "must be >= 1");
  return lane.latency_s + bytes / (lane.bytes_per_s * lanes);
}

}  // namespace servesim::sim
