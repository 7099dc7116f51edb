// Placement of a topology's workers on instances (one type, or one group of nodes per instance
// type when roles run on different GPUs). Workers never share GPUs;
// a worker that fits in one node stays inside it (first fit, in the order given); a larger one
// takes whole consecutive nodes (PP stages across nodes). What stays inside one NVLink domain
// (a node, or an NVL72 UltraServer) talks over NVLink; anything else pays EFA, at the smaller
// per-GPU NIC share and the larger latency of the two ends' instances.
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
  int group = 0;         // index of its node group (instance type)
};

// Nodes of one instance type; groups are numbered in order, their nodes consecutively.
struct NodeGroup {
  hw::InstanceSpec instance;
  int nodes = 1;
  std::string nodes_flag = "--nodes";   // the flag that set `nodes`, named when the workers do not fit
};
struct WorkerNeed {
  std::string name;
  int gpus = 1;
  int group = 0;         // the NodeGroup it must be placed on
};

class Placement {
 public:
  // Throws Error("--nodes", ...) when the workers do not fit, saying what they need.
  Placement(const std::vector<std::pair<std::string, int>>& workers, const hw::InstanceSpec& instance, int nodes);
  // Workers on several node groups (e.g. prefill on p6-b200 nodes, decode on p5en nodes).
  Placement(const std::vector<WorkerNeed>& workers, const std::vector<NodeGroup>& groups);

  const std::vector<WorkerSlot>& workers() const { return workers_; }
  const hw::InstanceSpec& instance() const { return groups_.front().instance; }   // first group's
  const hw::InstanceSpec& instance_of(int worker) const { return groups_.at(workers_.at(worker).group).instance; }
  const std::vector<NodeGroup>& groups() const { return groups_; }
  int nodes() const { return nodes_; }             // instances given
  int nodes_used() const { return nodes_used_; }   // instances holding at least one worker
  int gpus_used() const;
  double usd_per_hour_used() const;                // summed over the nodes used (0 if a price is missing)

  // True when every GPU of workers a and b lies in one NVLink domain.
  bool same_nvlink_domain(int a, int b) const;
  // The lane a handoff from worker a to worker b takes: NVLink of `gpu` (the GPU both run on)
  // inside a domain, else EFA at min(per-GPU NIC share) and max(latency) of the two instances.
  LaneSpec lane(int a, int b, const hw::GpuSpec& gpu) const;
  std::string describe() const;                    // "prefill-0: node 0 GPUs 0-7; ..."

 private:
  void place(const std::vector<WorkerNeed>& workers);
  int domain_of(int node) const;
  std::vector<WorkerSlot> workers_;
  std::vector<NodeGroup> groups_;   // copies: callers may pass temporaries
  std::vector<int> group_first_;    // first node of each group
  std::vector<bool> used_;          // per node
  int nodes_ = 0, nodes_used_ = 0;
};

}  // namespace servesim::sim
