#include "sim/engine/cluster.hpp"

#include <algorithm>

#include "common/splitmix.hpp"

namespace servesim::sim {

namespace {
KvRouterConfig kv_router_for(KvRouterConfig c, int block_size) {
  c.block_size = block_size;
  return c;
}
}  // namespace

AggregatedCluster::AggregatedCluster(const ClusterShape& shape, const EngineConfig& cfg,
                                     const models::StepCostModel& cost, const workloads::FrontendConfig* frontend)
    : router_(shape.router, kv_router_for(shape.kv_router, cfg.block_size), shape.seed),
      rng_(splitmix64(shape.seed ^ 0x66726f6e74656e64ULL)) {
  workers_.reserve(static_cast<std::size_t>(shape.replicas));
  for (int i = 0; i < shape.replicas; ++i)
    workers_.emplace_back(cfg, cost, shape.kv_blocks, shape.kv_demand, shape.seed + 7919ULL * std::uint64_t(i));
  if (shape.offload.enabled())
    for (Worker& w : workers_)
      w.scheduler().set_offload(std::make_shared<KvOffload>(shape.offload, shape.offload_block_bytes, shape.gpus_per_replica,
                                                            shape.offload_state_bytes));
  if (router_.wants_kv_events()) {   // the KV router learns each replica's cache from its KV events
    kv_logs_.resize(workers_.size());
    for (std::size_t i = 0; i < workers_.size(); ++i) workers_[i].scheduler().set_kv_event_log(&kv_logs_[i]);
  }
  queue_.reserve(static_cast<std::size_t>(shape.replicas) * 4 + 16);
  warmup_barrier_ = frontend && frontend->client.warmup_barrier;
  if (frontend && frontend->enabled) {
    frontend_ = *frontend;
    api_free_s_.assign(static_cast<std::size_t>(shape.replicas),
                       std::vector<ApiProcess>(static_cast<std::size_t>(std::max(1, frontend->api.api_server_count))));
    out_factor_max_ = workloads::lognormal_factor_bound(frontend->api.cv);
    api_next_.assign(static_cast<std::size_t>(shape.replicas), 0);
  }
}

// A client sends `spec` at t_s (the warm-up flag follows the send order).
void AggregatedCluster::send(workloads::RequestSpec spec, double t_s, std::int64_t cohort) {
  const bool warmup = issued_++ < warmup_;
  if (!frontend_) {
    route(spec, t_s, t_s, cohort, warmup);
    return;
  }
  std::int32_t p;
  if (!free_pending_.empty()) {
    p = free_pending_.back();
    free_pending_.pop_back();
  } else {
    p = static_cast<std::int32_t>(pending_.size());
    pending_.emplace_back();
  }
  Pending& x = pending_[static_cast<std::size_t>(p)];
  x.spec = std::move(spec);
  x.sent_s = t_s;
  x.cohort = cohort;
  x.warmup = warmup;
  // (client.request_latency_s is not on this path: the client sees it, the engine does not; MetricsSink adds it.)
  queue_.push(t_s + frontend_->client.network.sample(rng_), EventKind::api_arrival, 0, p);
}

void AggregatedCluster::route(const workloads::RequestSpec& spec, double now_s, double sent_s, std::int64_t cohort,
                              bool warmup) {
  const int w = router_.pick(workers_, &spec, now_s);
  VllmScheduler& sched = workers_[static_cast<std::size_t>(w)].scheduler();
  const std::int32_t slot = sched.add(spec, now_s, /*client=*/0, warmup);
  Request& r = sched.request(slot);
  r.sent_s = sent_s;
  r.cohort = cohort;
  wake(w, now_s);
}

// The replica's API server takes the request in FIFO order: handling + tokenisation, then the IPC hop.
void AggregatedCluster::api_arrival(std::int32_t p, double now_s) {
  Pending& x = pending_[static_cast<std::size_t>(p)];
  const int w = router_.pick(workers_, &x.spec, now_s);
  x.worker = w;
  router_.on_the_way(w);
  auto& servers = api_free_s_[static_cast<std::size_t>(w)];
  ApiProcess& proc = servers[static_cast<std::size_t>(api_next_[static_cast<std::size_t>(w)]++ % std::int64_t(servers.size()))];
  const double done = start_after(proc, now_s) + frontend_->request_in_s(x.spec.input_tokens, rng_);
  proc.free_s = done;
  proc.pending = false;
  queue_.push(done + frontend_->api.ipc_s, EventKind::engine_arrival, w, p);
}

void AggregatedCluster::engine_arrival(std::int32_t p, double now_s) {
  Pending& x = pending_[static_cast<std::size_t>(p)];
  const int w = x.worker;
  router_.arrived(w);
  VllmScheduler& sched = workers_[static_cast<std::size_t>(w)].scheduler();
  const std::int32_t slot = sched.add(x.spec, now_s, /*client=*/0, x.warmup);
  Request& r = sched.request(slot);
  r.sent_s = x.sent_s;
  r.cohort = x.cohort;
  free_pending_.push_back(p);
  wake(w, now_s);
}

// When the client sees the tokens of a step that ended at now_s on worker w: the API server's
// output handler (FIFO; its processes split the step's requests), the IPC hop, the network. The
// handler's work is booked on the process at the step's end and the hop added after it: booked at
// now_s + ipc, a request reaching the process before that would queue behind output work that has
// not arrived yet (one hop of wait on every request while anything decodes). The sum is the same.
EmitTime AggregatedCluster::emit_time(int w, double now_s, int requests) {
  if (!frontend_ || requests <= 0) return EmitTime{now_s};
  auto& servers = api_free_s_[static_cast<std::size_t>(w)];
  const int k = static_cast<int>(servers.size());
  const double arrive = now_s;
  const double hop_s = frontend_->api.ipc_s;
  const workloads::ApiServerConfig& api = frontend_->api;
  EmitTime emit;
  if (k == 1 && api.cv > 0) {
    // One process: the batch starts at max(arrive, busy until) and ends at that + out_s x factor,
    // which is also when the step's last chunk leaves it (it ends after arrive). Both draws are
    // taken here in stream order; their values are computed only when needed.
    ApiProcess& p = servers[0];
    p.free_s = start_after(p, arrive);
    p.out_s = api.output_step_s + api.output_s_per_request * double(requests);
    p.state = rng_;
    p.pending = true;
    rng_ += 2 * 0x9e3779b97f4a7c15ULL;   // the two uniforms of its lognormal factor
    emit.at_s = p.free_s + hop_s;
    emit.out_s = p.out_s;
    emit.out_cv = api.cv;
    emit.out_state = p.state;
  } else {
    double done = arrive;
    for (int j = 0; j < k; ++j) {
      const int share = requests / k + (j < requests % k ? 1 : 0);
      if (share == 0) continue;
      ApiProcess& p = servers[static_cast<std::size_t>(j)];
      p.free_s = start_after(p, arrive) + frontend_->step_out_s(share, rng_);
      p.pending = false;
      done = std::max(done, p.free_s);
    }
    emit.at_s = done + hop_s;
  }
  // The network hop is drawn here in stream order, its value computed only if a token is timed.
  emit.hop = &frontend_->client.network;
  emit.state = rng_;
  frontend_->client.network.skip(rng_);
  return emit;
}

double AggregatedCluster::busy_until(const ApiProcess& p) const {
  if (!p.pending) return p.free_s;
  std::uint64_t st = p.state;
  return p.free_s + p.out_s * workloads::lognormal_factor(frontend_->api.cv, st);
}

double AggregatedCluster::start_after(const ApiProcess& p, double t_s) const {
  if (p.pending) {
    // The pending batch ends by t_s whatever its factor (workloads::lognormal_bounded): then
    // max(t_s, end) is t_s without computing the draw.
    if (p.free_s + p.out_s * out_factor_max_ <= t_s && workloads::lognormal_bounded(p.state)) return t_s;
  }
  return std::max(t_s, busy_until(p));
}

// A client saw its last token at t_s: it sends its next request at once (aiperf), unless the
// warm-up phase is over and still draining, in which case it waits for the measured phase, which
// starts every client together when the last warm-up response is back.
void AggregatedCluster::client_done(double t_s, std::int64_t cohort, const Request& r) {
  const bool was_warmup = r.warmup;
  if (was_warmup) ++warm_done_;
  if (was_warmup && steady_warmup_ && issued_ < warmup_ && steady_warmup_->finished(r.finish_s - r.sent_s, r.first_token_s - r.sent_s)) {
    warmup_ = issued_;   // the requests sent so far are the warm-up
    workload_->end_warmup(issued_);
  }
  if (!was_warmup && precision_ && !precision_->precise() &&
      precision_->request_finished(r.sent_s, r.first_token_s, r.finish_s, r.output_tokens - r.preamble_tokens))
    workload_->end_measured(issued_);
  if (barrier_ && !profiling_started_) {
    if (issued_ < warmup_) {
      if (auto next = workload_->next()) send(std::move(*next), t_s, cohort);
      return;
    }
    if (warm_done_ < warmup_) return;   // parked until the warm-up phase completes
    profiling_started_ = true;
    const std::int64_t start = ++release_seq_;
    for (int k = 0; k < workload_->concurrency(); ++k) {
      auto next = workload_->next();
      if (!next) break;
      send(std::move(*next), t_s, start);
    }
    return;
  }
  if (auto next = clients_->on_complete(t_s)) send(std::move(*next), t_s, cohort);
}

// An idle worker with work gets a step_start event at the current time, queued after every
// event already pending at this instant, so simultaneous arrivals join the same batch.
void AggregatedCluster::wake(int w, double now_s) {
  Worker& worker = workers_[static_cast<std::size_t>(w)];
  if (worker.busy() || worker.start_pending() || !worker.scheduler().has_work()) return;
  worker.set_start_pending(true);
  if (!queue_.empty() && queue_.top().time_s <= now_s)
    queue_.push(now_s, EventKind::step_start, w);
  else
    immediate_.push_back(w);
}

void AggregatedCluster::step_start(int w, double now_s) {
  Worker& worker = workers_[static_cast<std::size_t>(w)];
  const double seconds = worker.start_step(now_s);
  if (seconds < 0) return;
  kv_events(w, now_s);
  const VllmScheduler& sched = worker.scheduler();
  const auto& pool = sched.pool();
  sink_->on_step(w, now_s, seconds, sched.num_scheduled(), pool.utilization());
  double end_s = now_s + seconds;
  // Steady decode: while the step in flight ends before any other event and the cycle after it
  // only moves every running request one token on, run its end and the next start here, in the
  // order the events would have run them (no heap, no pass over the running list per step).
  // With a KV-aware router every step's KV events are read; steps run through the heap there.
  if (steady_ && kv_logs_.empty() && immediate_head_ == immediate_.size())
    steady_cycles_ += worker.run_steady(
        end_s, [this](double t) { return queue_.empty() || queue_.top().time_s > t; },
        [&](double t) {
          events_ += 2;   // the step's end and the next one's start
          emit_time(w, t, sched.num_emitting());   // the frontend's draws, in stream order
          ++release_seq_;
        },
        [&](double t, double step_s) { sink_->on_step(w, t, step_s, sched.num_scheduled(), pool.utilization()); });
  queue_.push(end_s, EventKind::step_end, w);
}

void AggregatedCluster::step_end(int w, double now_s) {
  Worker& worker = workers_[static_cast<std::size_t>(w)];
  VllmScheduler& sched = worker.scheduler();
  EmitTime emit = emit_time(w, now_s, sched.num_emitting());
  worker.finish_step(now_s, emit);
  const std::int64_t release = ++release_seq_;
  kv_events(w, now_s);
  for (const Output& o : sched.outputs()) {
    if (o.kind == Output::first_token) router_.first_token(sched.request(o.slot).id);
    if (o.kind != Output::finished) continue;
    const Request& r = sched.request(o.slot);
    router_.finished(r.id);
    sink_->on_finished(r);
    if (clients_) client_done(r.finish_s, release, r);
    if (sessions_) session_done(r);
  }
  sched.clear_outputs();
  wake(w, now_s);
}

void AggregatedCluster::schedule_tick(double t_s) { queue_.push(t_s, EventKind::custom, -1); }

void AggregatedCluster::set_routable(int w, bool on) {
  if (routable_.empty()) {
    routable_.assign(workers_.size(), 1);
    router_.set_routable(&routable_);
  }
  routable_[static_cast<std::size_t>(w)] = on ? 1 : 0;
}

void AggregatedCluster::kv_events(int w, double now_s) {
  if (!kv_logs_.empty()) router_.kv_events(w, now_s, kv_logs_[static_cast<std::size_t>(w)]);
}

// A session's answer reached its client: its next turn is sent after the think time.
void AggregatedCluster::session_done(const Request& r) {
  auto next = sessions_->on_finished(r.id, r.finish_s);
  if (!next) return;
  const double t = next->arrival_s;
  queue_.push(t, EventKind::session_turn, 0, turns_.put(std::move(*next)));
}

double AggregatedCluster::run(workloads::Workload& workload, RequestSink& sink) {
  workload_ = &workload;
  sink_ = &sink;
  for (Worker& w : workers_) w.scheduler().set_token_gaps(sink.token_gaps());
  sessions_ = dynamic_cast<workloads::SessionWorkload*>(&workload);
  warmup_ = workload.warmup_requests();
  double now_s = 0;
  if (workload.concurrency() > 0) {
    clients_.emplace(workload);
    barrier_ = warmup_ > 0 && warmup_barrier_;
    profiling_started_ = !barrier_;
    if (!barrier_ && workload.warmup_until_steady()) steady_warmup_.emplace(workload.concurrency());
    if (workload.measure_until_precise())
      precision_.emplace(workload.concurrency(), workload.total_requests() - workload.warmup_requests());
    // Every client starts at t = 0 (the warm-up phase, when there is one, with at most as many clients as warm-up requests).
    const std::int64_t first = barrier_ ? std::min<std::int64_t>(warmup_, workload.concurrency()) : workload.concurrency();
    for (std::int64_t k = 0; k < first; ++k) {
      auto spec = workload.next();
      if (!spec) break;
      spec->arrival_s = 0;
      send(std::move(*spec), 0.0, 0);
    }
  } else if ((next_arrival_ = workload.next())) {
    queue_.push(next_arrival_->arrival_s, EventKind::arrival);
  }
  for (;;) {
    if (immediate_head_ < immediate_.size()) {  // due now, ahead of anything queued for now
      const int w = immediate_[immediate_head_++];
      if (immediate_head_ == immediate_.size()) immediate_.clear(), immediate_head_ = 0;
      ++events_;
      step_start(w, now_s);
      continue;
    }
    if (queue_.empty()) break;
    const Event e = queue_.pop();
    ++events_;
    now_s = e.time_s;
    switch (e.kind) {
      case EventKind::arrival: {
        workloads::RequestSpec spec = std::move(*next_arrival_);
        if ((next_arrival_ = workload.next())) queue_.push(std::max(next_arrival_->arrival_s, now_s), EventKind::arrival);
        send(std::move(spec), now_s, -1);
        break;
      }
      case EventKind::custom:
        if (controller_) controller_->tick(now_s, *this);
        break;
      case EventKind::session_turn: {
        send(turns_.take(static_cast<std::int32_t>(e.payload)), now_s, -1);
        break;
      }
      case EventKind::api_arrival:
        api_arrival(static_cast<std::int32_t>(e.payload), now_s);
        break;
      case EventKind::engine_arrival:
        engine_arrival(static_cast<std::int32_t>(e.payload), now_s);
        break;
      case EventKind::step_start:
        step_start(e.target, now_s);
        break;
      case EventKind::step_end:
        step_end(e.target, now_s);
        break;
      default:
        break;
    }
  }
  return now_s;
}

}  // namespace servesim::sim
