#include "sim/router/router.hpp"

#include <algorithm>

#include "common/error.hpp"
#include "common/json_reader.hpp"
#include "common/text.hpp"
#include "sim/engine/worker.hpp"
#include "sim/router/kv_router.hpp"

namespace servesim::sim {

std::string_view to_string(RouterPolicy p) {
  switch (p) {
    case RouterPolicy::round_robin: return "round_robin";
    case RouterPolicy::least_outstanding: return "least_outstanding";
    case RouterPolicy::least_kv_load: return "least_kv_load";
    case RouterPolicy::kv: return "kv";
  }
  return "?";
}

RouterPolicy parse_router(std::string_view s, const std::string& where) {
  std::string v = text::lower(s);
  if (v == "round_robin" || v == "round-robin" || v == "rr") return RouterPolicy::round_robin;
  if (v == "least_outstanding" || v == "least-outstanding" || v == "lor") return RouterPolicy::least_outstanding;
  if (v == "least_kv_load" || v == "least-kv-load") return RouterPolicy::least_kv_load;
  if (v == "kv" || v == "kv_aware" || v == "kv-aware") return RouterPolicy::kv;
  throw Error(where, "router", "unknown router '" + std::string(s) + "'; known: round_robin, least_outstanding, least_kv_load, kv");
}

RouterPolicy parse_router_json(const JsonReader& j, KvRouterConfig& kv) {
  if (j.json().at("router").is_string()) return parse_router(j.string("router"), j.file());
  const JsonReader r = j.object("router");
  for (const auto& item : r.json().items())
    if (item.key() != "kind" && item.key() != "overlap_score_weight" && item.key() != "router_temperature" &&
        item.key() != "kv_event_delay_ms" && item.key() != "offload_aware")
      r.fail(item.key(), "unknown field; known: kind, overlap_score_weight, router_temperature, kv_event_delay_ms, offload_aware");
  const RouterPolicy p = parse_router(r.string("kind"), j.file());
  if (p != RouterPolicy::kv)
    for (const char* k : {"overlap_score_weight", "router_temperature", "kv_event_delay_ms", "offload_aware"})
      if (r.has(k)) r.fail(k, "applies to the kv router only");
  kv.offload_aware = r.boolean_or("offload_aware", kv.offload_aware);
  kv.overlap_score_weight = r.number_in("overlap_score_weight", kv.overlap_score_weight, 0, 1e6);
  kv.router_temperature = r.number_in("router_temperature", kv.router_temperature, 0, 1e6);
  kv.kv_event_delay_s = 1e-3 * r.number_in("kv_event_delay_ms", 1e3 * kv.kv_event_delay_s, 0, 1e9);
  return p;
}

Router::Router(RouterPolicy p, const KvRouterConfig& kv, std::uint64_t seed) : policy_(p) {
  if (p == RouterPolicy::kv) kv_ = std::make_unique<KvRouter>(kv, seed);
}
Router::~Router() = default;
Router::Router(Router&&) noexcept = default;
Router& Router::operator=(Router&&) noexcept = default;

// The routable worker of least load, scanning from the one after the last pick (ties in turn).
template <class Ok, class Load>
int Router::least(int n, const Ok& ok, const Load& load) const {
  int best = -1;
  for (int k = 0; k < n; ++k) {
    const int i = static_cast<int>((next_ + static_cast<std::uint64_t>(k)) % static_cast<std::uint64_t>(n));
    if (ok(i) && (best < 0 || load(i) < load(best))) best = i;
  }
  return best;
}

int Router::pick(const std::vector<Worker>& workers, const workloads::RequestSpec* spec, double now_s) {
  const int n = static_cast<int>(workers.size());
  const std::vector<char>* mask = routable_;
  if (mask && std::find(mask->begin(), mask->end(), char(1)) == mask->end()) mask = nullptr;   // none: any
  auto ok = [&](int i) { return !mask || (*mask)[static_cast<std::size_t>(i)]; };
  if (kv_ && spec) return kv_->pick(workers, *spec, now_s, mask);
  if (n == 1) return 0;
  int best = -1;
  switch (policy_) {
    case RouterPolicy::round_robin:
      for (int k = 0; k < n; ++k) {
        const int i = static_cast<int>(next_++ % static_cast<std::uint64_t>(n));
        if (ok(i)) return i;
      }
      return 0;
    // The least loaded, ties in turn from the last pick (a scan from index 0 sent every tie to
    // replica 0: with the API server between the pick and the scheduler, a burst of arrivals all
    // went to it).
    case RouterPolicy::least_outstanding:
    case RouterPolicy::kv:   // without a request to place
      best = least(n, ok, [&](int i) {
        const std::size_t u = static_cast<std::size_t>(i);
        return workers[u].outstanding() + (u < on_the_way_.size() ? on_the_way_[u] : 0);
      });
      break;
    case RouterPolicy::least_kv_load:
      best = least(n, ok, [&](int i) { return workers[static_cast<std::size_t>(i)].kv_load(); });
      break;
  }
  best = std::max(best, 0);
  next_ = static_cast<std::uint64_t>(best) + 1;
  return best;
}

void Router::on_the_way(int w) {
  const std::size_t u = static_cast<std::size_t>(w);
  if (on_the_way_.size() <= u) on_the_way_.resize(u + 1, 0);
  ++on_the_way_[u];
}
void Router::arrived(int w) {
  const std::size_t u = static_cast<std::size_t>(w);
  if (u < on_the_way_.size() && on_the_way_[u] > 0) --on_the_way_[u];
}

void Router::kv_events(int worker, double now_s, std::vector<KvEvent>& events) {
  if (kv_) kv_->events(worker, now_s, events);
  events.clear();
}
void Router::first_token(std::uint64_t id) {
  if (kv_) kv_->first_token(id);
}
void Router::finished(std::uint64_t id) {
  if (kv_) kv_->finished(id);
}

}  // namespace servesim::sim
