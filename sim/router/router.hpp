// Picks the replica for each arriving request (aggregated topologies).
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace servesim::sim {

class Worker;

enum class RouterPolicy {
  round_robin,         // replicas in turn
  least_outstanding,   // fewest requests queued or running (ties: lowest index)
  least_kv_load,       // lowest fraction of KV blocks held or needed by queued prompts
};
std::string_view to_string(RouterPolicy p);
// "round_robin" | "least_outstanding" | "least_kv_load" (also "rr", "lor", "kv"); Error lists them.
RouterPolicy parse_router(std::string_view s, const std::string& where);

class Router {
 public:
  explicit Router(RouterPolicy p) : policy_(p) {}
  int pick(const std::vector<Worker>& workers);

 private:
  RouterPolicy policy_;
  std::uint64_t next_ = 0;
};

}  // namespace servesim::sim
