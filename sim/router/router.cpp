#include "sim/router/router.hpp"

#include "common/error.hpp"
#include "common/text.hpp"
#include "sim/engine/worker.hpp"

namespace servesim::sim {

std::string_view to_string(RouterPolicy p) {
  switch (p) {
    case RouterPolicy::round_robin: return "round_robin";
    case RouterPolicy::least_outstanding: return "least_outstanding";
    case RouterPolicy::least_kv_load: return "least_kv_load";
  }
  return "?";
}

RouterPolicy parse_router(std::string_view s, const std::string& where) {
  std::string v = text::lower(s);
  if (v == "round_robin" || v == "round-robin" || v == "rr") return RouterPolicy::round_robin;
  if (v == "least_outstanding" || v == "least-outstanding" || v == "lor") return RouterPolicy::least_outstanding;
  if (v == "least_kv_load" || v == "least-kv-load" || v == "kv") return RouterPolicy::least_kv_load;
  throw Error(where, "router", "unknown router '" + std::string(s) + "'; known: round_robin, least_outstanding, least_kv_load");
}

int Router::pick(const std::vector<Worker>& workers) {
  const int n = static_cast<int>(workers.size());
  if (n == 1) return 0;
  int best = 0;
  switch (policy_) {
    case RouterPolicy::round_robin:
      return static_cast<int>(next_++ % static_cast<std::uint64_t>(n));
    case RouterPolicy::least_outstanding:
      for (int i = 1; i < n; ++i)
        if (workers[i].outstanding() < workers[best].outstanding()) best = i;
      return best;
    case RouterPolicy::least_kv_load:
      for (int i = 1; i < n; ++i)
        if (workers[i].kv_load() < workers[best].kv_load()) best = i;
      return best;
  }
  return best;
}

}  // namespace servesim::sim
