// Timestamped events in a binary heap. Ties on time break on insertion order (a sequence
// number), so a run is a pure function of its inputs whatever the platform's heap does.
#pragma once
#include <cstdint>
#include <algorithm>
#include <vector>

namespace servesim::sim {

enum class EventKind : std::uint32_t {
  arrival,        // a request reaches the router (open loop)
  step_start,     // an idle worker forms its next batch
  step_end,       // a worker's forward pass completes
  transfer_done,  // a KV/state handoff reached its decode worker (disaggregated topologies)
  custom,         // owned by a topology built on top of the engine
  api_arrival,    // a client's request reaches the API server (payload: pending request)
  engine_arrival, // the API server handed a request to a worker's engine core (target: worker)
  handoff,        // disaggregated: a prefill's result reached its decode worker (target: decode index, payload: request)
  session_turn,   // a multi-turn session's next turn is sent (payload: the topology's pending turn)
};

struct Event {
  double time_s = 0;
  std::uint64_t seq = 0;      // insertion order: the tie-breaker
  EventKind kind = EventKind::arrival;
  std::int32_t target = 0;    // worker index (or topology-defined)
  std::int64_t payload = 0;   // request slot (or topology-defined)
};

class EventQueue {
 public:
  void reserve(std::size_t n) { heap_.reserve(n); }
  void push(double time_s, EventKind kind, std::int32_t target = 0, std::int64_t payload = 0) {
    heap_.push_back(Event{time_s, next_seq_++, kind, target, payload});
    std::push_heap(heap_.begin(), heap_.end(), Later{});
  }
  bool empty() const { return heap_.empty(); }
  std::size_t size() const { return heap_.size(); }
  const Event& top() const { return heap_.front(); }
  Event pop() {
    std::pop_heap(heap_.begin(), heap_.end(), Later{});
    Event e = heap_.back();
    heap_.pop_back();
    return e;
  }

 private:
  struct Later {  // max-heap comparator that puts the earliest (time, seq) on top
    bool operator()(const Event& a, const Event& b) const {
      return a.time_s > b.time_s || (a.time_s == b.time_s && a.seq > b.seq);
    }
  };
  std::vector<Event> heap_;
  std::uint64_t next_seq_ = 0;
};

}  // namespace servesim::sim
