#include "sim/links/placement.hpp"

#include <algorithm>

#include "common/error.hpp"

namespace servesim::sim {

Placement::Placement(const std::vector<std::pair<std::string, int>>& workers, const hw::InstanceSpec& instance,
                     int nodes)
    : instance_(instance), nodes_(nodes) {
  const int per_node = instance.gpus;
  if (per_node < 1) throw Error("instance " + instance.name, "gpus", "must be >= 1");
  if (nodes < 1) throw Error("--nodes", "", "must be >= 1");
  if (workers.empty()) throw Error("topology", "workers", "has no workers");
  int total = 0;
  for (const auto& [name, g] : workers) {
    if (g < 1) throw Error("topology", name, "a worker needs at least one GPU");
    total += g;
  }
  const auto no_fit = [&](const std::string& why) {
    throw Error("--nodes", "", "the topology needs " + std::to_string(total) + " GPUs (" + why + ") but " +
                                   std::to_string(nodes) + " x " + instance.name + " has " +
                                   std::to_string(nodes * per_node) + "; raise --nodes or shrink the workers");
  };
  std::vector<int> free(nodes, per_node);
  for (const auto& [name, g] : workers) {
    WorkerSlot s{name, g};
    if (g <= per_node) {
      auto it = std::find_if(free.begin(), free.end(), [&](int f) { return f >= g; });
      if (it == free.end()) no_fit(name + " (" + std::to_string(g) + " GPUs) finds no node with room");
      s.first_node = static_cast<int>(it - free.begin());
      s.first_gpu = per_node - *it;
      s.nodes = 1;
      *it -= g;
    } else {
      const int span = (g + per_node - 1) / per_node;
      int start = -1;
      for (int n = 0; n + span <= nodes && start < 0; ++n)
        if (std::all_of(free.begin() + n, free.begin() + n + span, [&](int f) { return f == per_node; })) start = n;
      if (start < 0) no_fit(name + " needs " + std::to_string(span) + " empty nodes");
      s.first_node = start;
      s.nodes = span;
      int left = g;
      for (int n = start; n < start + span; ++n) {
        free[n] -= std::min(left, per_node);
        left -= per_node;
      }
    }
    workers_.push_back(s);
  }
  for (int n = 0; n < nodes; ++n)
    if (free[n] < per_node) nodes_used_ = n + 1;
}

int Placement::gpus_used() const {
  int g = 0;
  for (const auto& w : workers_) g += w.gpus;
  return g;
}

int Placement::domain_of(int node) const {
  const int per_domain = std::max(1, instance_.nvlink_domain_gpus / std::max(1, instance_.gpus));
  return node / per_domain;
}

bool Placement::same_nvlink_domain(int a, int b) const {
  const auto& wa = workers_.at(a);
  const auto& wb = workers_.at(b);
  const int d = domain_of(wa.first_node);
  return domain_of(wa.first_node + wa.nodes - 1) == d && domain_of(wb.first_node) == d &&
         domain_of(wb.first_node + wb.nodes - 1) == d;
}

LaneSpec Placement::lane(int a, int b, const hw::GpuSpec& gpu) const {
  return same_nvlink_domain(a, b) ? nvlink_lane(gpu) : efa_lane(instance_);
}

std::string Placement::describe() const {
  std::string s;
  for (const auto& w : workers_) {
    if (!s.empty()) s += "; ";
    s += w.name + ": ";
    if (w.nodes == 1)
      s += "node " + std::to_string(w.first_node) + " GPUs " + std::to_string(w.first_gpu) + "-" +
           std::to_string(w.first_gpu + w.gpus - 1);
    else
      s += "nodes " + std::to_string(w.first_node) + "-" + std::to_string(w.first_node + w.nodes - 1);
  }
  return s;
}

}  // namespace servesim::sim
