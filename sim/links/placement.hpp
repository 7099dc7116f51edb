// Placement of a topology's workers on `nodes` instances of one type. Workers never share GPUs;
// a worker that fits in one node stays inside it (first fit, in the order given); a larger one
// takes whole consecutive nodes (PP stages across nodes). What stays inside one NVLink domain
// (a node, or an NVL72 UltraServer) talks over NVLink; anything else pays EFA.
#pragma once
#include <string>
#include <vector>

#include "hwmodels/catalog.hpp"
#include "sim/links/link.hpp"

namespace servesim::sim {

struct WorkerSlot {
  std::string name;      // "prefill-0", "decode-1", "replica-0", ...
  int gpus = 1;          // TP × PP (× DP for attention-DP engines)
  int first_node = 0;    // first instance it occupies
  int nodes = 1;         // instances it spans
  int first_gpu = 0;     // GPU index inside first_node
};

class Placement {
 public:
  // Throws Error("--nodes", ...) when the workers do not fit, saying what they need.
  Placement(const std::vector<std::pair<std::string, int>>& workers, const hw::InstanceSpec& instance, int nodes);

  const std::vector<WorkerSlot>& workers() const { return workers_; }
  const hw::InstanceSpec& instance() const { return instance_; }
  int nodes() const { return nodes_; }             // instances given
  int nodes_used() const { return nodes_used_; }   // instances holding at least one worker
  int gpus_used() const;

  // True when every GPU of workers a and b lies in one NVLink domain.
  bool same_nvlink_domain(int a, int b) const;
  // The lane a handoff from worker a to worker b takes (NVLink inside a domain, else EFA).
  LaneSpec lane(int a, int b, const hw::GpuSpec& gpu) const;
  std::string describe() const;                    // "prefill-0: node 0 GPUs 0-7; ..."

 private:
  int domain_of(int node) const;
  std::vector<WorkerSlot> workers_;
  hw::InstanceSpec instance_;   // a copy: callers may pass temporaries
  int nodes_ = 0, nodes_used_ = 0;
};

}  // namespace servesim::sim
