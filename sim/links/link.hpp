// Point-to-point links a KV/state handoff can take: NVLink inside an NVLink domain, EFA between
// nodes. A lane is one GPU's share of the link in one direction; a worker of g GPUs has g lanes.
#pragma once
#include <string_view>

#include "hwmodels/catalog.hpp"

namespace servesim::sim {

enum class LinkKind { nvlink, efa };
std::string_view to_string(LinkKind k);

struct LaneSpec {
  LinkKind kind = LinkKind::efa;
  double bytes_per_s = 0;   // one GPU, one direction
  double latency_s = 0;     // paid once per transfer before bytes flow
};

// NVLink/NVSwitch lane of one GPU: datasheet per-direction bandwidth, NCCL p2p latency prior.
LaneSpec nvlink_lane(const hw::GpuSpec& gpu);
// EFA lane of one GPU on `instance`: its per-GPU NIC share and the instance's latency prior.
LaneSpec efa_lane(const hw::InstanceSpec& instance);

// Uncontended time to move `bytes` over `lanes` parallel lanes: latency + bytes / (lanes × bw).
double transfer_seconds(double bytes, const LaneSpec& lane, int lanes = 1);

}  // namespace servesim::sim
