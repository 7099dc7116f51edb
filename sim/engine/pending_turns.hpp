// Session turns waiting out their think time: each held in a recycled slot whose index the
// session_turn event carries (both cluster kinds schedule turns this way).
#pragma once
#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

#include "workloads/request.hpp"

namespace servesim::sim {

class PendingTurns {
 public:
  // Holds a turn until its event; returns the slot the event names.
  std::int32_t put(workloads::RequestSpec spec) {
    std::int32_t k;
    if (!free_.empty()) {
      k = free_.back();
      free_.pop_back();
    } else {
      k = static_cast<std::int32_t>(slots_.size());
      slots_.emplace_back();
    }
    slots_[static_cast<std::size_t>(k)] = std::move(spec);
    return k;
  }
  // The turn of slot k, which becomes free.
  workloads::RequestSpec take(std::int32_t k) {
    free_.push_back(k);
    return std::move(slots_[static_cast<std::size_t>(k)]);
  }

 private:
  std::vector<workloads::RequestSpec> slots_;
  std::vector<std::int32_t> free_;
};

}  // namespace servesim::sim
