#include "sim/topology/disagg_cluster.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>

#include "common/error.hpp"

namespace servesim::sim {
namespace {
constexpr std::uint64_t kEmbeddingTag = 1ULL << 62;   // encode -> prefill transfers
}

DisaggregatedCluster::DisaggregatedCluster(DisaggShape shape) : shape_(std::move(shape)) {
  const int P = shape_.prefill.count, D = shape_.decode.count, E = shape_.encode.count;
  if (P < 1 || D < 1) throw Error("topology", "workers", "a disaggregated topology needs >= 1 prefill and >= 1 decode worker");
  if (!shape_.placement || !shape_.gpu || !shape_.handoff_bytes)
    throw Error("topology", "placement", "placement, GPU and handoff size are required");
  if (static_cast<int>(shape_.placement->workers().size()) != P + D + E)
    throw Error("topology", "placement", "places a different number of workers than the topology has");
  if (E > 0 && !shape_.encode.cost) throw Error("topology", "encode", "encode workers need a cost model");
  shape_.prefill.engine.role = WorkerRole::prefill_only;
  shape_.decode.engine.role = WorkerRole::decode_only;
  workers_.reserve(static_cast<std::size_t>(P + D));
  for (int i = 0; i < P; ++i)
    workers_.emplace_back(shape_.prefill.engine, *shape_.prefill.cost, shape_.prefill.kv_blocks, shape_.prefill.kv_demand,
                          shape_.seed + 7919ULL * std::uint64_t(i));
  for (int i = 0; i < D; ++i)
    workers_.emplace_back(shape_.decode.engine, *shape_.decode.cost, shape_.decode.kv_blocks, shape_.decode.kv_demand,
                          shape_.seed + 7919ULL * std::uint64_t(P + i));
  if (shape_.offload.enabled())   // prefill workers keep evicted prefix blocks in their tiers
    for (int i = 0; i < P; ++i)
      workers_[static_cast<std::size_t>(i)].scheduler().set_offload(std::make_shared<KvOffload>(
          shape_.offload, shape_.offload_block_bytes, shape_.prefill_gpus, shape_.offload_state_bytes));
  if (shape_.router == RouterPolicy::kv) {   // prefill workers by KV overlap; their caches reach the router as KV events
    KvRouterConfig kc = shape_.kv_router;
    kc.block_size = shape_.prefill.engine.block_size;
    kv_ = std::make_unique<KvRouter>(kc, shape_.seed);
    kv_logs_.resize(static_cast<std::size_t>(P));
    for (int i = 0; i < P; ++i) workers_[static_cast<std::size_t>(i)].scheduler().set_kv_event_log(&kv_logs_[static_cast<std::size_t>(i)]);
    prefill_mask_.assign(static_cast<std::size_t>(P + D), 0);
    std::fill(prefill_mask_.begin(), prefill_mask_.begin() + P, char(1));
  }
  routable_.assign(static_cast<std::size_t>(P + D), char(1));
  inbound_.assign(static_cast<std::size_t>(P + D), 0);
  encoders_.resize(static_cast<std::size_t>(E));
  watch_.resize(static_cast<std::size_t>(D));
  untouched_.assign(static_cast<std::size_t>(D), 0);
  rng_ = shape_.seed ^ 0x6a09e667f3bcc909ULL;
  // Each worker's lanes in each direction form one port per link kind: g GPUs × per-GPU bandwidth.
  if (!shape_.decode_gpu) shape_.decode_gpu = shape_.gpu;
  for (int k = 0; k < 2; ++k) {
    out_port_[k].assign(static_cast<std::size_t>(P + D + E), -1);
    in_port_[k].assign(static_cast<std::size_t>(P + D + E), -1);
  }
  for (int i = 0; i < P + D + E; ++i) {
    const WorkerSlot& w = shape_.placement->workers()[static_cast<std::size_t>(i)];
    const hw::InstanceSpec& inst = shape_.placement->instance_of(i);
    const hw::GpuSpec& gpu = gpu_of(i);
    if (gpu.nvlink_bw_bytes_per_s > 0) {
      const double c = w.gpus * nvlink_lane(gpu).bytes_per_s;
      out_port_[0][i] = net_.add_port(c, w.name + " nvlink out");
      in_port_[0][i] = net_.add_port(c, w.name + " nvlink in");
    }
    if (inst.efa_per_gpu_bytes_per_s > 0) {
      const double c = w.gpus * efa_lane(inst).bytes_per_s;
      out_port_[1][i] = net_.add_port(c, w.name + " efa out");
      in_port_[1][i] = net_.add_port(c, w.name + " efa in");
    }
  }
}

const hw::GpuSpec& DisaggregatedCluster::gpu_of(int worker) const {
  const int p = shape_.prefill.count, d = shape_.decode.count;
  return worker >= p && worker < p + d ? *shape_.decode_gpu : *shape_.gpu;
}

std::int32_t DisaggregatedCluster::new_handle(const workloads::RequestSpec& spec, double now_s) {
  std::int32_t h;
  if (!free_handles_.empty()) {
    h = free_handles_.back();
    free_handles_.pop_back();
  } else {
    h = static_cast<std::int32_t>(handles_.size());
    handles_.emplace_back();
  }
  Handle& x = handles_[static_cast<std::size_t>(h)];
  x = Handle{};
  x.spec = spec;
  x.sent_s = now_s;
  x.first_s = x.second_s = std::numeric_limits<double>::quiet_NaN();
  x.warmup = issued_++ < warmup_;
  return h;
}

// A router that compared only the workers' own queues would send every prefill that ends within
// one handoff delay to the same decode worker (none of them has arrived yet), and on equal loads
// always to the lowest-numbered one: 4 clients over 4 idle decode workers all on worker 0. The
// router counts what it has sent (as Dynamo's KV router counts its active blocks per worker, from
// its own routing decisions) and breaks ties in turn (Dynamo's KV router samples among equal costs;
// in turn gives the same spread without a draw: chosen, the decode pick is not in the reference).
int DisaggregatedCluster::pick(int first, int count) {
  int& cursor = cursor_[first == 0 ? 0 : 1];
  auto load = [&](int i) {
    return workers_[static_cast<std::size_t>(i)].outstanding() + inbound_[static_cast<std::size_t>(i)];
  };
  int best = -1;
  for (int pass = 0; pass < 2 && best < 0; ++pass)   // the routable workers; none: all of the role
    for (int k = 0; k < count; ++k) {
      const int i = first + (cursor + k) % count;
      if ((pass == 1 || routable_[static_cast<std::size_t>(i)]) && (best < 0 || load(i) < load(best))) best = i;
    }
  cursor = (best - first + 1) % count;
  return best;
}

void DisaggregatedCluster::schedule_tick(double t_s) { queue_.push(t_s, EventKind::custom, -1); }

void DisaggregatedCluster::set_routable(int w, bool on) {
  routable_.at(static_cast<std::size_t>(w)) = on ? 1 : 0;
  if (!kv_ || w >= shape_.prefill.count) return;
  bool any = false;
  for (int i = 0; i < shape_.prefill.count; ++i) any = any || routable_[static_cast<std::size_t>(i)];
  for (int i = 0; i < shape_.prefill.count; ++i)
    prefill_mask_[static_cast<std::size_t>(i)] = any ? routable_[static_cast<std::size_t>(i)] : char(1);
}

int DisaggregatedCluster::pick_prefill(const workloads::RequestSpec& spec, double now_s) {
  if (!kv_) return pick(0, shape_.prefill.count);
  for (int i = 0; i < shape_.prefill.count; ++i) {
    auto& log = kv_logs_[static_cast<std::size_t>(i)];
    kv_->events(i, now_s, log);
    log.clear();
  }
  return kv_->pick(workers_, spec, now_s, &prefill_mask_);
}

void DisaggregatedCluster::route(const workloads::RequestSpec& spec, double now_s) {
  const std::int32_t h = new_handle(spec, now_s);
  if (!encoders_.empty() && spec.vision_tiles > 0) {
    int e = 0;
    for (int i = 1; i < static_cast<int>(encoders_.size()); ++i)
      if (encoders_[static_cast<std::size_t>(i)].queue.size() < encoders_[static_cast<std::size_t>(e)].queue.size()) e = i;
    encoders_[static_cast<std::size_t>(e)].queue.push_back(h);
    wake_encoder(e, now_s);
    return;
  }
  to_prefill(h, now_s);
}

void DisaggregatedCluster::to_prefill(std::int32_t h, double now_s) {
  Handle& x = handles_[static_cast<std::size_t>(h)];
  const int p = pick_prefill(x.spec, now_s);
  x.prefill = p;
  x.pslot = workers_[static_cast<std::size_t>(p)].scheduler().add(x.spec, now_s, h, x.warmup);
  wake(p, now_s);
}

void DisaggregatedCluster::wake(int w, double now_s) {
  Worker& worker = workers_[static_cast<std::size_t>(w)];
  if (worker.busy() || worker.start_pending() || !worker.scheduler().has_work()) return;
  worker.set_start_pending(true);
  queue_.push(now_s, EventKind::step_start, w);
}

void DisaggregatedCluster::wake_encoder(int e, double now_s) {
  Encoder& enc = encoders_[static_cast<std::size_t>(e)];
  if (enc.busy || enc.queue.empty()) return;
  enc.batch.clear();
  int tiles = 0;
  // FIFO batch up to the tile cap (always at least one request).
  while (!enc.queue.empty()) {
    const int t = handles_[static_cast<std::size_t>(enc.queue.front())].spec.vision_tiles;
    if (!enc.batch.empty() && tiles + t > shape_.max_encode_tiles_per_step) break;
    tiles += t;
    enc.batch.push_back(enc.queue.front());
    enc.queue.pop_front();
  }
  enc.busy = true;
  const double s = shape_.encode.cost->encoder_seconds(tiles) + shape_.encode.engine.overhead_per_step_s();
  queue_.push(now_s + s, EventKind::custom, e);
}

void DisaggregatedCluster::encoder_end(int e, double now_s) {
  Encoder& enc = encoders_[static_cast<std::size_t>(e)];
  enc.busy = false;
  const int from = shape_.prefill.count + shape_.decode.count + e;
  for (std::int32_t h : enc.batch) {
    Handle& x = handles_[static_cast<std::size_t>(h)];
    x.spec.vision_tiles = 0;   // encoded: prefill only runs the LLM over the embeddings
    const int p = pick_prefill(x.spec, now_s);
    x.prefill = p;
    start_transfer(from, p, double(x.spec.vision_tokens) * shape_.embedding_bytes_per_token,
                   kEmbeddingTag | std::uint64_t(h), now_s);
  }
  enc.batch.clear();
  wake_encoder(e, now_s);
}

void DisaggregatedCluster::start_transfer(int from, int to, double bytes, std::uint64_t tag, double now_s,
                                          double extra_s) {
  const LaneSpec lane = shape_.placement->lane(from, to, gpu_of(from));
  const int k = lane.kind == LinkKind::nvlink ? 0 : 1;
  const TransferNetwork::PortId ports[2] = {out_port_[k][static_cast<std::size_t>(from)],
                                            in_port_[k][static_cast<std::size_t>(to)]};
  net_.start(now_s, bytes, lane.latency_s + extra_s, ports, tag);
  tstats_.max_in_flight = std::max(tstats_.max_in_flight, net_.active());
}

// Reservations the decode worker granted: start pulling those prompts' KV and state.
void DisaggregatedCluster::start_reserved_pulls(int d, double now_s) {
  const int w = shape_.prefill.count + d;
  VllmScheduler& sched = workers_[static_cast<std::size_t>(w)].scheduler();
  for (const Output& o : sched.outputs()) {
    if (o.kind != Output::kv_reserved) continue;
    const std::int32_t h = sched.request(o.slot).client;
    Handle& x = handles_[static_cast<std::size_t>(h)];
    x.pull_start_s = now_s;
    if (x.spec.input_tokens != handoff_tokens_) {
      handoff_tokens_ = x.spec.input_tokens;
      handoff_bytes_ = shape_.handoff_bytes(handoff_tokens_);
    }
    const double bytes = handoff_bytes_;
    tstats_.bytes += bytes;
    const double per_token = shape_.frontend ? shape_.frontend->disagg.pull_s_per_token : 0.0;
    start_transfer(x.prefill, w, bytes, std::uint64_t(h), now_s, per_token * double(x.spec.input_tokens));
  }
}

void DisaggregatedCluster::step_end(int w, double now_s) {
  Worker& worker = workers_[static_cast<std::size_t>(w)];
  const bool is_decode = w >= shape_.prefill.count;
  // A steady stretch another worker's event cut short resumes here: when nothing touched this
  // worker since (the step in flight still only moves every running request one token on), its
  // end and the next step's start run in place, as step_end() and step_start() would run them.
  if (is_decode && run_stretch(w, now_s, true)) return;
  if (is_decode) untouched_[static_cast<std::size_t>(w - shape_.prefill.count)] = 0;
  worker.finish_step(now_s);
  VllmScheduler& sched = worker.scheduler();
  if (!is_decode) {
    for (const Output& o : sched.outputs()) {
      if (o.kind != Output::handoff) continue;
      const std::int32_t h = sched.request(o.slot).client;
      Handle& x = handles_[static_cast<std::size_t>(h)];
      x.cached = sched.request(o.slot).cached_tokens;
      x.prefill_start_s = sched.request(o.slot).scheduled_s;
      x.prefill_done_s = now_s;
      if (kv_) kv_->finished(x.spec.id);   // its prefill is done: no longer the prefill worker's active work
      const int d = pick(shape_.prefill.count, shape_.decode.count) - shape_.prefill.count;
      x.decode = d;
      ++inbound_[static_cast<std::size_t>(shape_.prefill.count + d)];
      // The framework's way from the prefill's result to the decode worker (none: at once).
      const double delay = shape_.frontend ? shape_.frontend->disagg.handoff.sample(rng_) : 0.0;
      if (delay > 0) queue_.push(now_s + delay, EventKind::handoff, d, h);
      else handoff(h, d, now_s);
    }
    sched.clear_outputs();
    wake(w, now_s);
    return;
  }
  const int d = w - shape_.prefill.count;
  // Client-visible tokens: decode worker's generated count minus the prefill's sample and the
  // model's response preamble.
  const std::int64_t preamble = shape_.decode.engine.response_preamble_tokens;
  auto& watch = watch_[static_cast<std::size_t>(d)];
  std::size_t kept = 0;
  for (std::int32_t h : watch) {
    Handle& x = handles_[static_cast<std::size_t>(h)];
    const Request& r = sched.request(x.dslot);
    const std::int64_t visible = r.generated - 1 - preamble;
    if (visible >= 1 && std::isnan(x.first_s)) x.first_s = now_s;
    if (visible >= 2 && std::isnan(x.second_s)) x.second_s = now_s;
    if (visible < 2 && r.phase != Phase::finished) watch[kept++] = h;
  }
  watch.resize(kept);
  start_reserved_pulls(d, now_s);
  for (const Output& o : sched.outputs())
    if (o.kind == Output::finished) finish(sched.request(o.slot).client, now_s);
  sched.clear_outputs();
  if (!sched.has_work() && sched.has_pending_transfers() && sched.num_deferred() > 0) {
    // Idle with transfers waiting for room the finished requests still hold (async scheduling
    // defers their release to the next step, and none comes): the loop frees them now.
    sched.release_idle();
    start_reserved_pulls(d, now_s);
    sched.clear_outputs();
  }
  wake(w, now_s);
}

void DisaggregatedCluster::step_start(int w, double now_s) {
  Worker& worker = workers_[static_cast<std::size_t>(w)];
  const double seconds = worker.start_step(now_s);
  if (seconds < 0) return;
  const VllmScheduler& sched = worker.scheduler();
  const auto& pool = sched.pool();
  metrics_->add_worker_sample(w, now_s, seconds, sched.num_scheduled(), pool.utilization());
  if (w < shape_.prefill.count || !run_stretch(w, now_s + seconds, false)) queue_.push(now_s + seconds, EventKind::step_end, w);
}

// Steady decode on a decode worker whose clients' first two tokens are all timed: while the step
// in flight (ending at end_s) ends before any other event and any transfer's progress, its end
// (no output) and the next start (which would be the next event popped) run in place. True when
// at least one cycle ran (the step now in flight has its end queued). `resume`: at the end of a
// step formed by a stretch or a start; when nothing touched the worker since (untouched_), the
// stretch's cycles are those it had left, else none (the step's end runs through the heap).
bool DisaggregatedCluster::run_stretch(int w, double end_s, bool resume) {
  const int d = w - shape_.prefill.count;
  char& untouched = untouched_[static_cast<std::size_t>(d)];
  if (resume && !untouched) return false;
  untouched = 0;
  if (!steady_ || !watch_[static_cast<std::size_t>(d)].empty()) return false;
  Worker& worker = workers_[static_cast<std::size_t>(w)];
  const VllmScheduler& sched = worker.scheduler();
  const auto& pool = sched.pool();
  const double t_net = net_.next_event_s();   // no transfer starts during a stretch
  const int done = worker.run_steady(
      end_s, [&](double t) { return t_net > t && (queue_.empty() || queue_.top().time_s > t); }, [](double) {},
      [&](double t, double step_s) {
        metrics_->add_worker_sample(w, t, step_s, sched.num_scheduled(), pool.utilization());
      },
      resume);
  untouched = 1;
  if (done == 0) return false;
  steady_cycles_ += done;
  queue_.push(end_s, EventKind::step_end, w);
  return true;
}

// A prefilled request reaches decode worker d: it reserves the KV blocks and pulls the prompt's KV.
void DisaggregatedCluster::handoff(std::int32_t h, int d, double now_s) {
  Handle& x = handles_[static_cast<std::size_t>(h)];
  // The decode worker generates the client's OSL tokens after the prefill's (discarded) one.
  workloads::RequestSpec ds = x.spec;
  ds.output_tokens = x.spec.output_tokens + 1;
  ds.vision_tiles = 0;
  VllmScheduler& dsched = workers_[static_cast<std::size_t>(shape_.prefill.count + d)].scheduler();
  --inbound_[static_cast<std::size_t>(shape_.prefill.count + d)];
  untouched_[static_cast<std::size_t>(d)] = 0;
  x.handed_s = now_s;
  x.dslot = dsched.add_transferred(ds, now_s, now_s, h, x.warmup);
  start_reserved_pulls(d, now_s);
  dsched.clear_outputs();
}

void DisaggregatedCluster::transfer_done(std::uint64_t tag, double now_s) {
  const std::int32_t h = static_cast<std::int32_t>(tag & ~kEmbeddingTag);
  Handle& x = handles_[static_cast<std::size_t>(h)];
  if (tag & kEmbeddingTag) {
    const int p = x.prefill;
    x.pslot = workers_[static_cast<std::size_t>(p)].scheduler().add(x.spec, now_s, h, x.warmup);
    wake(p, now_s);
    return;
  }
  const double s = now_s - x.pull_start_s;
  x.pull_done_s = now_s;
  ++tstats_.handoffs;
  tstats_.seconds += s;
  tstats_.max_seconds = std::max(tstats_.max_seconds, s);
  workers_[static_cast<std::size_t>(x.prefill)].scheduler().release_handoff(x.pslot);
  wake(x.prefill, now_s);
  const int w = shape_.prefill.count + x.decode;
  untouched_[static_cast<std::size_t>(x.decode)] = 0;
  workers_[static_cast<std::size_t>(w)].scheduler().transfer_done(x.dslot, now_s);
  watch_[static_cast<std::size_t>(x.decode)].push_back(h);
  wake(w, now_s);
}

void DisaggregatedCluster::finish(std::int32_t h, double now_s) {
  Handle& x = handles_[static_cast<std::size_t>(h)];
  RequestRecord rec;
  rec.id = x.spec.id;
  rec.arrival_s = x.sent_s;
  rec.output_tokens = std::max<std::int64_t>(0, x.spec.output_tokens - shape_.decode.engine.response_preamble_tokens);
  rec.first_token_s = std::isnan(x.first_s) ? now_s : x.first_s;
  rec.second_token_s = rec.output_tokens >= 2 ? (std::isnan(x.second_s) ? now_s : x.second_s)
                                                 : std::numeric_limits<double>::quiet_NaN();
  rec.finish_s = now_s;
  rec.input_tokens = x.spec.input_tokens;
  rec.warmup = x.warmup;
  if (!x.warmup && !measuring_) {   // worker samples count from the first measured request on
    measuring_ = true;
    metrics_->measure_workers_from(x.sent_s);
  }
  metrics_->add(rec);
  if (!x.warmup) {   // its TTFT in parts (they add up to rec.first_token_s - x.sent_s)
    TtftParts& p = tstats_.ttft;
    ++p.requests;
    p.queue_s += x.prefill_start_s - x.sent_s;
    p.prefill_s += x.prefill_done_s - x.prefill_start_s;
    p.handoff_s += x.handed_s - x.prefill_done_s;
    p.reserve_s += x.pull_start_s - x.handed_s;
    p.transfer_s += x.pull_done_s - x.pull_start_s;
    p.first_step_s += rec.first_token_s - x.pull_done_s;
    p.ttft_s += rec.first_token_s - x.sent_s;
  }
  if (sink_) {   // the request as its client saw it
    Request r;
    r.id = x.spec.id;
    r.input_tokens = x.spec.input_tokens;
    r.output_tokens = x.spec.output_tokens;
    r.preamble_tokens = shape_.decode.engine.response_preamble_tokens;
    r.cached_tokens = x.cached;
    r.sent_s = x.sent_s;
    r.first_token_s = rec.first_token_s;
    r.finish_s = now_s;
    r.warmup = x.warmup;
    sink_->on_finished(r);
  }
  if (sessions_)   // the session's next turn, a think time after this answer
    if (auto next = sessions_->on_finished(x.spec.id, now_s)) {
      const double t = next->arrival_s;
      queue_.push(t, EventKind::session_turn, 0, turns_.put(std::move(*next)));
    }
  free_handles_.push_back(h);
  if (x.warmup && steady_warmup_ && issued_ < warmup_ && steady_warmup_->finished(now_s - x.sent_s, rec.first_token_s - x.sent_s)) {
    warmup_ = issued_;   // the requests sent so far are the warm-up
    workload_->end_warmup(issued_);
  }
  if (!x.warmup && precision_ && !precision_->precise() &&
      precision_->request_finished(x.sent_s, rec.first_token_s, now_s, rec.output_tokens))
    workload_->end_measured(issued_);
  if (clients_)
    if (auto next = clients_->on_complete(now_s)) route(*next, now_s);
}

double DisaggregatedCluster::run(workloads::Workload& workload, MetricsCollector& metrics, RequestSink* sink) {
  metrics_ = &metrics;
  sink_ = sink;
  for (Worker& w : workers_) w.scheduler().set_token_gaps(&metrics.token_gaps());
  sessions_ = dynamic_cast<workloads::SessionWorkload*>(&workload);
  warmup_ = workload.warmup_requests();
  workload_ = &workload;
  std::optional<workloads::RequestSpec> next_arrival;
  if (workload.concurrency() > 0) {
    clients_.emplace(workload);
    if (workload.warmup_until_steady()) steady_warmup_.emplace(workload.concurrency());
    if (workload.measure_until_precise())
      precision_.emplace(workload.concurrency(), workload.total_requests() - workload.warmup_requests());
    for (const auto& spec : clients_->start(0.0)) route(spec, 0.0);
  } else if ((next_arrival = workload.next())) {
    queue_.push(next_arrival->arrival_s, EventKind::arrival);
  }
  double now_s = 0;
  while (true) {
    const double t_net = net_.next_event_s();
    const double t_q = queue_.empty() ? std::numeric_limits<double>::infinity() : queue_.top().time_s;
    if (std::isinf(t_net) && std::isinf(t_q)) break;
    if (t_net <= t_q) {   // transfers first at a tie: a pull that lands now joins the next batch
      now_s = t_net;
      done_tags_.clear();
      net_.advance(t_net, done_tags_);
      for (std::uint64_t tag : done_tags_) transfer_done(tag, now_s);
      continue;
    }
    const Event e = queue_.pop();
    now_s = e.time_s;
    switch (e.kind) {
      case EventKind::arrival: {
        workloads::RequestSpec spec = std::move(*next_arrival);
        if ((next_arrival = workload.next())) queue_.push(std::max(next_arrival->arrival_s, now_s), EventKind::arrival);
        route(spec, now_s);
        break;
      }
      case EventKind::step_start: step_start(e.target, now_s); break;
      case EventKind::step_end: step_end(e.target, now_s); break;
      case EventKind::custom:
        if (e.target < 0) {
          if (controller_) controller_->tick(now_s, *this);
        } else {
          encoder_end(e.target, now_s);
        }
        break;
      case EventKind::handoff: handoff(static_cast<std::int32_t>(e.payload), e.target, now_s); break;
      case EventKind::session_turn: {
        const workloads::RequestSpec spec = turns_.take(static_cast<std::int32_t>(e.payload));
        route(spec, now_s);
        break;
      }
      default: break;
    }
  }
  // Every request the clients sent has answered: one left in flight is a request the run lost.
  if (const std::size_t open = handles_.size() - free_handles_.size(); open > 0)
    throw Error("simulate", "requests",
                std::to_string(open) + " requests never finished on the disaggregated topology (" +
                    std::to_string(shape_.decode.kv_blocks) + " KV blocks per decode worker, " +
                    std::to_string(shape_.prefill.kv_blocks) + " per prefill worker); this is a simulator defect, please report it with the command");
  return now_s;
}

}  // namespace servesim::sim
