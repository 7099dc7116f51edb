// The aggregated topology: N identical replicas behind a router, fed by a workload (closed loop
// with N clients as aiperf --concurrency, or open loop by arrival time), driven by one event
// queue. Finished requests go to a RequestSink (metrics); the engine never computes statistics.
#pragma once
#include <cstdint>
#include <optional>
#include <vector>

#include "models/step_cost.hpp"
#include "sim/engine/event_queue.hpp"
#include "sim/engine/worker.hpp"
#include "sim/router/router.hpp"
#include "workloads/workload.hpp"

namespace servesim::sim {

class RequestSink {
 public:
  virtual ~RequestSink() = default;
  virtual void on_finished(const Request& r) = 0;   // the last token reached the client
  // A step began on `worker`: its duration, sequences and the KV pool's fill (0..1).
  virtual void on_step(int /*worker*/, double /*start_s*/, double /*step_s*/, int /*seqs*/, double /*kv_util*/) {}
};

struct ClusterShape {
  int replicas = 1;
  std::int64_t kv_blocks = 0;   // per replica, usable blocks of the memory plan's pool
  models::KvDemand kv_demand;   // what a request holds in it (attention groups, state groups)
  RouterPolicy router = RouterPolicy::round_robin;
  std::uint64_t seed = 0;
};

class AggregatedCluster {
 public:
  AggregatedCluster(const ClusterShape& shape, const EngineConfig& cfg, const models::StepCostModel& cost);

  // Runs the workload to the last response. Returns the simulated time at the end.
  double run(workloads::Workload& workload, RequestSink& sink);

  const std::vector<Worker>& workers() const { return workers_; }
  std::uint64_t events_processed() const { return events_; }

 private:
  void route(const workloads::RequestSpec& spec, double now_s);
  void wake(int w, double now_s);
  void step_end(int w, double now_s);
  void step_start(int w, double now_s);

  std::vector<Worker> workers_;
  Router router_;
  EventQueue queue_;
  // Step starts due now while no queued event is due now or earlier: they would be the next
  // events popped in this order anyway, so they skip the heap (one push + pop per engine step).
  std::vector<std::int32_t> immediate_;
  std::size_t immediate_head_ = 0;
  workloads::Workload* workload_ = nullptr;
  std::optional<workloads::ClosedLoopClients> clients_;
  RequestSink* sink_ = nullptr;
  std::optional<workloads::RequestSpec> next_arrival_;  // open loop: the one request announced
  std::int64_t issued_ = 0, warmup_ = 0;
  std::uint64_t events_ = 0;
};

}  // namespace servesim::sim
