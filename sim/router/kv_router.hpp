// Dynamo's KV-aware router (lib/llm/src/kv_router): the router keeps, per worker, the set of
// cached block hashes it learnt from the workers' KV events (stored / removed, reaching it
// kv_event_delay_s after the engine changed its cache), and its own count of each worker's active
// work: prompt tokens still to prefill and blocks of requests in flight. A request of B prompt
// blocks whose first `overlap` blocks a worker holds costs that worker
//     logit = overlap_score_weight x (active prefill tokens + new prefill tokens) / block_size
//           + (active blocks + B)
// Blocks that follow the overlap in the worker's KV offload tiers (read from the worker's tiers,
// fresh) are new prefill at offload_block_cost[tier] of a block each: onboarding instead of
// prefilling them. The router takes the cheapest worker (router_temperature 0; ties at random) or samples
// softmax(-logit / range / temperature). Block hashes are chained over the engine's block size,
// so a hybrid model's 8,320-token blocks make overlap coarse.
#pragma once
#include <cstdint>
#include <deque>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "sim/router/router.hpp"

namespace servesim::sim {

class KvRouter {
 public:
  KvRouter(const KvRouterConfig& c, std::uint64_t seed);
  // `routable` (may be null: all) marks the replicas it may choose.
  int pick(const std::vector<Worker>& workers, const workloads::RequestSpec& spec, double now_s,
           const std::vector<char>* routable = nullptr);
  void events(int worker, double now_s, const std::vector<KvEvent>& events);
  void first_token(std::uint64_t id);
  void finished(std::uint64_t id);

  // Leading blocks of `keys` (at most `limit`) that the router believes `worker` holds at now_s.
  std::int64_t overlap(int worker, const std::vector<std::uint64_t>& keys, std::int64_t limit, double now_s);
  // Prompt blocks of routed requests, and those the router expected to be cached where it sent them.
  std::int64_t routed_blocks() const { return routed_blocks_; }
  std::int64_t routed_overlap_blocks() const { return overlap_blocks_; }
  std::int64_t routed_offload_blocks() const { return offload_blocks_; }   // expected in the chosen worker's tiers

 private:
  struct PendingEvent { double visible_s; std::uint64_t key; bool stored; };
  struct WorkerView {
    std::unordered_map<std::uint64_t, std::int32_t> cached;   // key -> stored count (a key is stored once per worker)
    std::deque<PendingEvent> pending;
    double prefill_tokens = 0;
    double blocks = 0;
  };
  struct Active { int worker; double prefill_tokens; double blocks; bool prefilling; };
  void apply_due(WorkerView& v, double now_s);
  void ensure(std::size_t n);

  KvRouterConfig c_;
  std::uint64_t rng_;
  std::vector<WorkerView> views_;
  std::unordered_map<std::uint64_t, Active> active_;
  std::vector<std::uint64_t> keys_;
  std::vector<double> logits_;
  std::int64_t routed_blocks_ = 0, overlap_blocks_ = 0, offload_blocks_ = 0;
};

}  // namespace servesim::sim
