#include "sim/router/kv_router.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

#include "common/splitmix.hpp"
#include "sim/engine/worker.hpp"

namespace servesim::sim {
namespace {
constexpr double kOff = std::numeric_limits<double>::max();   // a replica out of routing
}  // namespace

KvRouter::KvRouter(const KvRouterConfig& c, std::uint64_t seed)
    : c_(c), rng_(splitmix64(seed ^ 0x6b76726f75746572ULL)) {}

void KvRouter::ensure(std::size_t n) {
  if (views_.size() < n) views_.resize(n);
}

void KvRouter::apply_due(WorkerView& v, double now_s) {
  while (!v.pending.empty() && v.pending.front().visible_s <= now_s) {
    const PendingEvent& e = v.pending.front();
    if (e.stored) {
      ++v.cached[e.key];
    } else if (auto it = v.cached.find(e.key); it != v.cached.end() && --it->second <= 0) {
      v.cached.erase(it);
    }
    v.pending.pop_front();
  }
}

void KvRouter::events(int worker, double now_s, const std::vector<KvEvent>& events) {
  ensure(static_cast<std::size_t>(worker) + 1);
  WorkerView& v = views_[static_cast<std::size_t>(worker)];
  for (const KvEvent& e : events) v.pending.push_back({now_s + c_.kv_event_delay_s, e.key, e.stored});
  apply_due(v, now_s);
}

std::int64_t KvRouter::overlap(int worker, const std::vector<std::uint64_t>& keys, std::int64_t limit, double now_s) {
  ensure(static_cast<std::size_t>(worker) + 1);
  WorkerView& v = views_[static_cast<std::size_t>(worker)];
  apply_due(v, now_s);
  std::int64_t n = 0;
  for (std::uint64_t k : keys) {
    if (n >= limit || !v.cached.count(k)) break;
    ++n;
  }
  return n;
}

int KvRouter::pick(const std::vector<Worker>& workers, const workloads::RequestSpec& spec, double now_s,
                   const std::vector<char>* routable) {
  const int n = static_cast<int>(workers.size());
  ensure(static_cast<std::size_t>(n));
  const std::int64_t bs = std::max(1, c_.block_size);
  block_keys(spec.prefix_hashes, spec.hash_block_tokens, spec.input_tokens, static_cast<int>(bs), keys_);
  const std::int64_t limit = (spec.input_tokens - 1) / bs;   // the engine recomputes the last token
  const double request_blocks = double((spec.input_tokens + bs - 1) / bs);
  logits_.assign(static_cast<std::size_t>(n), 0.0);
  std::vector<std::int64_t> overlaps(static_cast<std::size_t>(n), 0), offloaded(static_cast<std::size_t>(n), 0);
  std::vector<double> new_tokens(static_cast<std::size_t>(n), 0.0);
  for (int w = 0; w < n; ++w) {
    const std::int64_t o = overlap(w, keys_, limit, now_s);
    overlaps[static_cast<std::size_t>(w)] = o;
    // The blocks after the overlap that the worker's tiers hold: onboarded at their cost, not prefilled.
    double saved = 0;
    const KvOffload* off = workers[static_cast<std::size_t>(w)].scheduler().offload();
    if (off && c_.offload_aware && !c_.offload_block_cost.empty())
      for (std::int64_t i = o; i < limit && i < static_cast<std::int64_t>(keys_.size()); ++i) {
        const int t = off->tier(keys_[static_cast<std::size_t>(i)]);
        if (t < 0) break;
        const double cost = c_.offload_block_cost[std::min<std::size_t>(static_cast<std::size_t>(t), c_.offload_block_cost.size() - 1)];
        saved += double(bs) * (1 - cost);
        ++offloaded[static_cast<std::size_t>(w)];
      }
    new_tokens[static_cast<std::size_t>(w)] = double(spec.input_tokens - o * bs) - saved;
    const WorkerView& v = views_[static_cast<std::size_t>(w)];
    const double prefill_blocks = (v.prefill_tokens + new_tokens[static_cast<std::size_t>(w)]) / double(bs);
    logits_[static_cast<std::size_t>(w)] = c_.overlap_score_weight * prefill_blocks + v.blocks + request_blocks;
    if (routable && !(*routable)[static_cast<std::size_t>(w)]) logits_[static_cast<std::size_t>(w)] = kOff;
  }
  auto draw = [&]() {
    const std::uint64_t z = splitmix64(rng_);
    rng_ += 0x9e3779b97f4a7c15ULL;
    return unit_interval(z);
  };
  const double lo = *std::min_element(logits_.begin(), logits_.end());
  double hi = lo;
  for (double x : logits_)
    if (x != kOff) hi = std::max(hi, x);
  int best = 0;
  if (c_.router_temperature <= 0 || hi == lo) {   // the cheapest; ties uniformly at random
    int ties = 0;
    for (int w = 0; w < n; ++w)
      if (logits_[static_cast<std::size_t>(w)] == lo) ++ties;
    int k = std::min(ties - 1, static_cast<int>(draw() * ties));
    for (int w = 0; w < n; ++w)
      if (logits_[static_cast<std::size_t>(w)] == lo && k-- == 0) {
        best = w;
        break;
      }
  } else {   // softmax over -logit / (hi - lo) / temperature
    double sum = 0;
    for (double& x : logits_) sum += (x = x == kOff ? 0.0 : std::exp(-(x - lo) / (hi - lo) / c_.router_temperature));
    double u = draw() * sum;
    best = n - 1;
    for (int w = 0; w < n; ++w) {
      u -= logits_[static_cast<std::size_t>(w)];
      if (u < 0) {
        best = w;
        break;
      }
    }
  }
  const std::int64_t o = overlaps[static_cast<std::size_t>(best)];
  WorkerView& v = views_[static_cast<std::size_t>(best)];
  const Active a{best, new_tokens[static_cast<std::size_t>(best)], request_blocks, true};
  v.prefill_tokens += a.prefill_tokens;
  v.blocks += a.blocks;
  active_[spec.id] = a;
  routed_blocks_ += static_cast<std::int64_t>(request_blocks);
  overlap_blocks_ += o;
  offload_blocks_ += offloaded[static_cast<std::size_t>(best)];
  return best;
}

void KvRouter::first_token(std::uint64_t id) {
  auto it = active_.find(id);
  if (it == active_.end() || !it->second.prefilling) return;
  views_[static_cast<std::size_t>(it->second.worker)].prefill_tokens -= it->second.prefill_tokens;
  it->second.prefilling = false;
}

void KvRouter::finished(std::uint64_t id) {
  auto it = active_.find(id);
  if (it == active_.end()) return;
  first_token(id);
  views_[static_cast<std::size_t>(it->second.worker)].blocks -= it->second.blocks;
  active_.erase(it);
}

}  // namespace servesim::sim
