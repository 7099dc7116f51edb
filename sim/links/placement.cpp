#include "sim/links/placement.hpp"

#include <algorithm>

#include "common/error.hpp"

namespace servesim::sim {

Placement::Placement(const std::vector<std::pair<std::string, int>>& workers, const hw::InstanceSpec& instance,
                     int nodes) {
  groups_.push_back({instance, nodes});
  std::vector<WorkerNeed> need;
  for (const auto& [name, g] : workers) need.push_back({name, g, 0});
  place(need);
}

Placement::Placement(const std::vector<WorkerNeed>& workers, const std::vector<NodeGroup>& groups) : groups_(groups) {
  if (groups_.empty()) throw Error("topology", "nodes", "no node group to place the workers on");
  place(workers);
}

void Placement::place(const std::vector<WorkerNeed>& workers) {
  if (workers.empty()) throw Error("topology", "workers", "has no workers");
  int first = 0;
  for (const auto& g : groups_) {
    if (g.instance.gpus < 1) throw Error("instance " + g.instance.name, "gpus", "must be >= 1");
    if (g.nodes < 1) throw Error(g.nodes_flag, "", "must be >= 1");
    group_first_.push_back(first);
    first += g.nodes;
  }
  nodes_ = first;
  std::vector<int> total(groups_.size(), 0);
  for (const auto& w : workers) {
    if (w.gpus < 1) throw Error("topology", w.name, "a worker needs at least one GPU");
    if (w.group < 0 || w.group >= static_cast<int>(groups_.size())) throw Error("topology", w.name, "unknown node group");
    total[static_cast<std::size_t>(w.group)] += w.gpus;
  }
  std::vector<int> free;
  for (const auto& g : groups_) free.insert(free.end(), static_cast<std::size_t>(g.nodes), g.instance.gpus);
  for (const auto& w : workers) {
    const NodeGroup& grp = groups_[static_cast<std::size_t>(w.group)];
    const int per_node = grp.instance.gpus, lo = group_first_[static_cast<std::size_t>(w.group)], hi = lo + grp.nodes;
    const auto no_fit = [&](const std::string& why) {
      throw Error(grp.nodes_flag, "", "the topology needs " + std::to_string(total[static_cast<std::size_t>(w.group)]) +
                                     " GPUs of " + grp.instance.name + " (" + why + ") but " + std::to_string(grp.nodes) +
                                     " x " + grp.instance.name + " has " + std::to_string(grp.nodes * per_node) +
                                     "; raise " + grp.nodes_flag + " or shrink the workers");
    };
    WorkerSlot s{w.name, w.gpus};
    s.group = w.group;
    if (w.gpus <= per_node) {
      auto it = std::find_if(free.begin() + lo, free.begin() + hi, [&](int f) { return f >= w.gpus; });
      if (it == free.begin() + hi) no_fit(w.name + " (" + std::to_string(w.gpus) + " GPUs) finds no node with room");
      s.first_node = static_cast<int>(it - free.begin());
      s.first_gpu = per_node - *it;
      s.nodes = 1;
      *it -= w.gpus;
    } else {
      const int span = (w.gpus + per_node - 1) / per_node;
      int start = -1;
      for (int n = lo; n + span <= hi && start < 0; ++n)
        if (std::all_of(free.begin() + n, free.begin() + n + span, [&](int f) { return f == per_node; })) start = n;
      if (start < 0) no_fit(w.name + " needs " + std::to_string(span) + " empty nodes");
      s.first_node = start;
      s.nodes = span;
      int left = w.gpus;
      for (int n = start; n < start + span; ++n) {
        free[static_cast<std::size_t>(n)] -= std::min(left, per_node);
        left -= per_node;
      }
    }
    workers_.push_back(s);
  }
  used_.assign(free.size(), false);
  for (std::size_t g = 0; g < groups_.size(); ++g)
    for (int n = group_first_[g]; n < group_first_[g] + groups_[g].nodes; ++n)
      if (free[static_cast<std::size_t>(n)] < groups_[g].instance.gpus) {
        used_[static_cast<std::size_t>(n)] = true;
        ++nodes_used_;
      }
}

int Placement::gpus_used() const {
  int g = 0;
  for (const auto& w : workers_) g += w.gpus;
  return g;
}

double Placement::usd_per_hour_used() const {
  double usd = 0;
  for (std::size_t g = 0; g < groups_.size(); ++g)
    for (int n = group_first_[g]; n < group_first_[g] + groups_[g].nodes; ++n)
      if (used_[static_cast<std::size_t>(n)]) {
        if (!groups_[g].instance.usd_per_hour) return 0;
        usd += *groups_[g].instance.usd_per_hour;
      }
  return usd;
}

// Domains never span groups: different instance types do not share NVLink.
int Placement::domain_of(int node) const {
  std::size_t g = 0;
  while (g + 1 < groups_.size() && node >= group_first_[g + 1]) ++g;
  const auto& inst = groups_[g].instance;
  const int per_domain = std::max(1, inst.nvlink_domain_gpus / std::max(1, inst.gpus));
  return group_first_[g] * 100000 + (node - group_first_[g]) / per_domain;
}

bool Placement::same_nvlink_domain(int a, int b) const {
  const auto& wa = workers_.at(a);
  const auto& wb = workers_.at(b);
  const int d = domain_of(wa.first_node);
  return domain_of(wa.first_node + wa.nodes - 1) == d && domain_of(wb.first_node) == d &&
         domain_of(wb.first_node + wb.nodes - 1) == d;
}

LaneSpec Placement::lane(int a, int b, const hw::GpuSpec& gpu) const {
  if (same_nvlink_domain(a, b)) return nvlink_lane(gpu);
  const LaneSpec x = efa_lane(instance_of(a)), y = efa_lane(instance_of(b));
  return {LinkKind::efa, std::min(x.bytes_per_s, y.bytes_per_s), std::max(x.latency_s, y.latency_s)};
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
    if (groups_.size() > 1) s += " (" + groups_[static_cast<std::size_t>(w.group)].instance.name + ")";
  }
  return s;
}

}  // namespace servesim::sim
