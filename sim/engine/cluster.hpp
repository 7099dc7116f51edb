// The aggregated topology: N identical replicas behind a router, fed by a workload (closed loop
// with N clients as aiperf --concurrency, or open loop by arrival time), driven by one event
// queue. With a frontend (workloads/frontend.hpp) a request travels client -> network -> the
// replica's API server (FIFO: request handling + tokenisation) -> engine core, and each step's
// tokens travel back through the API server's output handler (FIFO, per request per step) and the
// network before the client sees them. Closed-loop clients start together; with warm-up requests
// and aiperf's barrier the measured phase starts all clients together again once every warm-up
// response is back. Finished requests go to a RequestSink (metrics); the engine never computes
// statistics.
#pragma once
#include <cstdint>
#include <optional>
#include <vector>

#include "models/step_cost.hpp"
#include "sim/engine/event_queue.hpp"
#include "sim/engine/pending_turns.hpp"
#include "sim/engine/steady_warmup.hpp"
#include "sim/engine/worker.hpp"
#include "sim/router/router.hpp"
#include "workloads/frontend.hpp"
#include "workloads/sessions.hpp"
#include "workloads/workload.hpp"

namespace servesim::sim {

class RequestSink {
 public:
  virtual ~RequestSink() = default;
  virtual void on_finished(const Request& r) = 0;   // the last token reached the client
  // A step began on `worker`: its duration, sequences and the KV pool's fill (0..1).
  virtual void on_step(int /*worker*/, double /*start_s*/, double /*step_s*/, int /*seqs*/, double /*kv_util*/) {}
  // Where the workers count the gaps between streamed tokens (null: nowhere).
  virtual TokenGaps* token_gaps() { return nullptr; }
};

class AggregatedCluster;
// Takes replicas in and out of routing as a run goes (sim/studies/planner.hpp): ticked at the
// times it asks for with AggregatedCluster::schedule_tick().
class FleetController {
 public:
  virtual ~FleetController() = default;
  virtual void tick(double now_s, AggregatedCluster& cluster) = 0;
};

struct ClusterShape {
  int replicas = 1;
  std::int64_t kv_blocks = 0;   // per replica, usable blocks of the memory plan's pool
  models::KvDemand kv_demand;   // what a request holds in it (attention groups, state groups)
  RouterPolicy router = RouterPolicy::round_robin;
  KvRouterConfig kv_router;     // RouterPolicy::kv (its block_size is the engine's)
  // KV offload tiers per replica (sim/scheduler/kv_offload.hpp): one block id and the state pages
  // a hybrid hit brings along, in bytes on one GPU, and the replica's GPUs.
  OffloadConfig offload;
  double offload_block_bytes = 0, offload_state_bytes = 0;
  int gpus_per_replica = 1;
  std::uint64_t seed = 0;
};

class AggregatedCluster {
 public:
  // `frontend` null (or disabled): requests reach the engine the instant the client sends them
  // and tokens reach the client the instant the step ends (its client.warmup_barrier still applies).
  AggregatedCluster(const ClusterShape& shape, const EngineConfig& cfg, const models::StepCostModel& cost,
                    const workloads::FrontendConfig* frontend = nullptr);

  // Runs the workload to the last response. Returns the simulated time at the end.
  double run(workloads::Workload& workload, RequestSink& sink);

  const std::vector<Worker>& workers() const { return workers_; }
  const Router& router() const { return router_; }
  // Fleet control: replicas out of routing finish what they hold and get nothing new.
  void set_controller(FleetController* c) { controller_ = c; }
  void schedule_tick(double t_s);
  void set_routable(int w, bool on);
  bool routable(int w) const { return routable_.empty() || routable_[static_cast<std::size_t>(w)]; }
  std::uint64_t events_processed() const { return events_; }
  // Steady decode stretches (docs/speed.md) run in place (default) or, off, every step through
  // the event heap and the scheduler's passes: the same results either way.
  void set_steady_stretches(bool on) { steady_ = on; }
  // Step cycles run in place so far (each one step's end and the next one's start).
  std::int64_t steady_cycles_run() const { return steady_cycles_; }
  // Warm-up requests whose responses completed (closed loop).
  std::int64_t warmup_completed() const { return warm_done_; }

 private:
  struct Pending {                       // a request between its client and the engine core
    workloads::RequestSpec spec;
    double sent_s = 0;
    std::int64_t cohort = -1;
    bool warmup = false;
    int worker = 0;
  };
  void send(workloads::RequestSpec spec, double t_s, std::int64_t cohort);
  void route(const workloads::RequestSpec& spec, double now_s, double sent_s, std::int64_t cohort, bool warmup);
  void api_arrival(std::int32_t p, double now_s);
  void engine_arrival(std::int32_t p, double now_s);
  EmitTime emit_time(int w, double now_s, int requests);
  void client_done(double t_s, std::int64_t cohort, const Request& r);
  void wake(int w, double now_s);
  void step_end(int w, double now_s);
  void step_start(int w, double now_s);
  void kv_events(int w, double now_s);
  void session_done(const Request& r);

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
  // Multi-turn sessions: the next turns announced (one per session at most), by event payload.
  workloads::SessionWorkload* sessions_ = nullptr;
  PendingTurns turns_;
  std::vector<std::vector<KvEvent>> kv_logs_;           // per replica, drained into the KV router
  FleetController* controller_ = nullptr;
  std::vector<char> routable_;                          // empty: every replica
  std::int64_t issued_ = 0, warmup_ = 0;
  std::uint64_t events_ = 0;
  bool steady_ = true;
  std::int64_t steady_cycles_ = 0;
  // Frontend.
  std::optional<workloads::FrontendConfig> frontend_;
  std::vector<Pending> pending_;
  std::vector<std::int32_t> free_pending_;
  // One API-server process: busy until free_s, or, while an output batch's draw is pending (a
  // single process with a random output cost), until free_s + out_s x that draw's lognormal
  // factor, computed only when a later event could start before it ends (bound_s says when not).
  struct ApiProcess {
    double free_s = 0, out_s = 0;
    std::uint64_t state = 0;
    bool pending = false;
  };
  double busy_until(const ApiProcess& p) const;
  double start_after(const ApiProcess& p, double t_s) const;   // max(t_s, busy_until(p))
  std::vector<std::vector<ApiProcess>> api_free_s_;      // per replica, per API-server process
  double out_factor_max_ = 0;                            // workloads::lognormal_factor_bound(api cv)
  std::vector<std::int64_t> api_next_;                   // per replica: round-robin over its processes
  std::uint64_t rng_ = 0;
  // Closed-loop bookkeeping: cohorts (the event that released a client) and aiperf's warm-up barrier.
  std::int64_t release_seq_ = 0;
  std::int64_t warm_done_ = 0;
  std::optional<SteadyWarmup> steady_warmup_;   // the warm-up ends when the loop is steady
  std::optional<MeasuredPrecision> precision_;  // the measured phase ends when its figures are precise
  bool warmup_barrier_ = false, barrier_ = false, profiling_started_ = false;
};

}  // namespace servesim::sim
