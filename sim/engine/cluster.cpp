#include "sim/engine/cluster.hpp"

namespace servesim::sim {

AggregatedCluster::AggregatedCluster(const ClusterShape& shape, const EngineConfig& cfg,
                                     const models::StepCostModel& cost)
    : router_(shape.router) {
  workers_.reserve(static_cast<std::size_t>(shape.replicas));
  for (int i = 0; i < shape.replicas; ++i)
    workers_.emplace_back(cfg, cost, shape.kv_blocks, shape.kv_demand, shape.seed + 7919ULL * std::uint64_t(i));
  queue_.reserve(static_cast<std::size_t>(shape.replicas) * 4 + 16);
}

void AggregatedCluster::route(const workloads::RequestSpec& spec, double now_s) {
  const bool warmup = issued_++ < warmup_;
  const int w = router_.pick(workers_);
  workers_[static_cast<std::size_t>(w)].scheduler().add(spec, now_s, /*client=*/0, warmup);
  wake(w, now_s);
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
  queue_.push(now_s + seconds, EventKind::step_end, w);
  const auto& pool = worker.scheduler().pool();
  sink_->on_step(w, now_s, seconds, worker.scheduler().num_scheduled(),
                 pool.capacity() > 0 ? double(pool.used()) / double(pool.capacity()) : 0.0);
}

void AggregatedCluster::step_end(int w, double now_s) {
  Worker& worker = workers_[static_cast<std::size_t>(w)];
  worker.finish_step(now_s);
  VllmScheduler& sched = worker.scheduler();
  for (const Output& o : sched.outputs()) {
    if (o.kind != Output::finished) continue;
    sink_->on_finished(sched.request(o.slot));
    if (clients_) {
      if (auto next = clients_->on_complete(now_s)) route(*next, now_s);
    }
  }
  sched.clear_outputs();
  wake(w, now_s);
}

double AggregatedCluster::run(workloads::Workload& workload, RequestSink& sink) {
  workload_ = &workload;
  sink_ = &sink;
  warmup_ = workload.warmup_requests();
  double now_s = 0;
  if (workload.concurrency() > 0) {
    clients_.emplace(workload);
    for (const auto& spec : clients_->start(0.0)) route(spec, 0.0);
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
        route(spec, now_s);
        break;
      }
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
