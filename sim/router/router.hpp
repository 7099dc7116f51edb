// Picks the replica for each arriving request (aggregated topologies; a disaggregated topology's
// prefill workers with the KV-aware policy).
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "sim/scheduler/kv_pool.hpp"
#include "workloads/request.hpp"

namespace servesim { class JsonReader; }

namespace servesim::sim {

class Worker;
class KvRouter;

enum class RouterPolicy {
  round_robin,         // replicas in turn
  least_outstanding,   // fewest requests queued, running or on their way (ties: in turn)
  least_kv_load,       // lowest fraction of KV blocks held or needed by queued prompts
  kv,                  // Dynamo's KV-aware router: cached prefix blocks against active blocks (sim/router/kv_router.hpp)
};
std::string_view to_string(RouterPolicy p);
// "round_robin" | "least_outstanding" | "least_kv_load" | "kv" (also "rr", "lor", "kv_aware"); Error lists them.
RouterPolicy parse_router(std::string_view s, const std::string& where);

// Dynamo KV router knobs (its names): cost = overlap_score_weight x prefill blocks + active decode
// blocks per worker, softmax-sampled at router_temperature (0: the cheapest, ties at random). The
// router sees each worker's cached blocks through KV events that reach it kv_event_delay_s late.
struct KvRouterConfig {
  double overlap_score_weight = 1.0;
  double router_temperature = 0.0;
  double kv_event_delay_s = 0.0;
  int block_size = 16;                 // the engine's (set by the cluster)
  // A block in a worker's offload tier t counts as offload_block_cost[t] of a block to prefill
  // (its onboarding time / its prefill time, set by the cluster); empty: tiers unseen.
  std::vector<double> offload_block_cost;
  bool offload_aware = true;           // "offload_aware": false hides the tiers from the router
};
// The scenario's "router" value: a name, or {"kind": name, "overlap_score_weight", "router_temperature", "kv_event_delay_ms"}.
RouterPolicy parse_router_json(const JsonReader& j, KvRouterConfig& kv);

class Router {
 public:
  explicit Router(RouterPolicy p, const KvRouterConfig& kv = {}, std::uint64_t seed = 0);
  ~Router();
  Router(Router&&) noexcept;
  Router& operator=(Router&&) noexcept;

  int pick(const std::vector<Worker>& workers) { return pick(workers, nullptr, 0.0); }
  // `spec` (may be null for the load-only policies) is the request to place, now_s the time.
  int pick(const std::vector<Worker>& workers, const workloads::RequestSpec* spec, double now_s);
  RouterPolicy policy() const { return policy_; }
  // Replicas the router may pick (null: all): a fleet controller takes replicas in and out.
  void set_routable(const std::vector<char>* mask) { routable_ = mask; }
  // A request picked for worker w that reaches its scheduler later (the API server's handling and
  // IPC hop): counted in w's load from the pick until arrived(w).
  void on_the_way(int w);
  void arrived(int w);
  // KV-aware only (no-ops otherwise): what the router learns after a pick.
  bool wants_kv_events() const { return kv_ != nullptr; }
  void kv_events(int worker, double now_s, std::vector<KvEvent>& events);   // consumed (cleared)
  void first_token(std::uint64_t request_id);
  void finished(std::uint64_t request_id);
  const KvRouter* kv_router() const { return kv_.get(); }

 private:
  RouterPolicy policy_;
  std::uint64_t next_ = 0;
  std::unique_ptr<KvRouter> kv_;
  const std::vector<char>* routable_ = nullptr;
  std::vector<std::int64_t> on_the_way_;   // per worker: picked, not yet at its scheduler
  template <class Ok, class Load>
  int least(int n, const Ok& ok, const Load& load) const;
};

}  // namespace servesim::sim
