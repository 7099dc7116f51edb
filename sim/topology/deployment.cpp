#include "sim/topology/deployment.hpp"

#include "sim/router/kv_router.hpp"

#include <algorithm>
#include <cmath>

#include "common/error.hpp"
#include "sim/engine/cluster.hpp"
#include "sim/engine/engine_profile.hpp"
#include "sim/engine/metrics_sink.hpp"
#include "sim/kv_offload_setup.hpp"

namespace servesim::sim {
namespace {

int gpus_of(const models::Parallelism& p) { return p.gpus(); }

std::string shape(const models::Parallelism& p) { return p.label(); }

// The engine as its memory plan resolved it: hybrid models run the unified attention block size;
// an attention data-parallel group runs as one lockstep engine (sim/engine/engine_config.hpp).
EngineConfig with_block_size(EngineConfig e, const models::MemoryPlan& plan) {
  e.block_size = plan.block_size;
  e.max_num_seqs = plan.max_num_seqs;   // SGLang's planner caps the running requests by its token pool
  return lockstep_engine(e, plan.dp);
}
// The block pool of a worker: one per attention data-parallel rank.
std::int64_t pool_blocks(const models::MemoryPlan& plan) { return plan.num_kv_blocks * plan.dp; }

// Offload tiers of the workers that have them, summed per tier.
std::vector<OffloadTierStats> offload_stats(const std::vector<Worker>& workers) {
  std::vector<OffloadTierStats> out;
  for (const Worker& w : workers)
    if (const KvOffload* o = w.scheduler().offload()) {
      out.resize(o->stats().size());
      for (std::size_t t = 0; t < o->stats().size(); ++t) out[t] += o->stats()[t];
    }
  return out;
}

// Passes nothing on (the disaggregated path reports to its MetricsCollector itself).
class NullSink final : public RequestSink {
 public:
  void on_finished(const Request&) override {}
};

}  // namespace

std::string TopologyChoice::name() const {
  if (kind == Kind::aggregated) return "aggregated";
  std::string s = "disaggregated-";
  if (encode_workers > 0) s += std::to_string(encode_workers) + "e";
  return s + std::to_string(prefill_workers) + "p" + std::to_string(decode_workers) + "d";
}

EngineConfig Deployment::engine_for(WorkerRole role) const {
  const hw::GpuSpec* g = role == WorkerRole::prefill_only && prefill_gpu_   ? prefill_gpu_
                         : role == WorkerRole::decode_only && decode_gpu_ ? decode_gpu_
                                                                          : spec_.gpu;
  return engine_for(role, *g);
}

EngineConfig Deployment::engine_for(WorkerRole role, const hw::GpuSpec& gpu) const {
  EngineConfig e = spec_.engine;
  if (spec_.calibration) {   // the parts of a user's calibration that transfer to this role's GPU and engine build
    const AppliedCalibration a = applicable(*spec_.calibration, gpu.name, e.engine_profile, spec_.model->name, std::string(hw::to_string(spec_.weights)));
    apply_to_engine(a, e);
  }
  e.role = role;
  if (e.max_model_len <= 0) e.max_model_len = spec_.model->max_context;   // vLLM: the config's max_position_embeddings
  const bool decodes = role != WorkerRole::prefill_only;
  if (decodes && spec_.mtp.enabled()) {
    e.num_speculative_tokens = spec_.mtp.draft_tokens;
    e.acceptance_per_position.clear();
    for (int i = 0; i < spec_.mtp.draft_tokens; ++i) e.acceptance_per_position.push_back(spec_.mtp.acceptance_at(i));
  } else {
    e.num_speculative_tokens = 0;
    e.acceptance_per_position.clear();
  }
  return e;
}

std::shared_ptr<const models::StepCostModel> Deployment::step_cost(const hw::GpuSpec& gpu, const models::Parallelism& role_par,
                                                                   const EngineConfig& e) const {
  const models::Parallelism par = with_engine_rules(role_par, e, *spec_.model, gpu);
  if (spec_.step_costs)
    return spec_.step_costs->get(*spec_.model, gpu, spec_.weights, par, spec_.kv_dtype, e.kernel_tables, e.kernel_scales);
  return models::make_step_cost(*spec_.model, gpu, spec_.weights, par, spec_.kv_dtype, e.kernel_tables, e.kernel_scales);
}

Deployment::Pool Deployment::make_pool(const models::Parallelism& par, bool decodes, const hw::GpuSpec& gpu) const {
  Pool p;
  p.par = par;
  const EngineConfig e = engine_for(decodes ? WorkerRole::aggregated : WorkerRole::prefill_only, gpu);
  // A role whose TP differs from the aggregated one was given as --prefill-tp / --decode-tp: an
  // error about its TP names that flag.
  const bool own_tp = topo_.kind == TopologyChoice::Kind::disaggregated && par.tp != topo_.agg.tp;
  std::shared_ptr<const models::StepCostModel> inner;
  try {
    p.plan = models::plan_memory(*spec_.model, gpu, spec_.weights, par, e.memory_config(spec_.kv_dtype));
    inner = step_cost(gpu, par, e);
  } catch (const Error& err) {
    if (own_tp && err.where() == "--tp") throw Error(decodes ? "--decode-tp" : "--prefill-tp", err.field(), err.reason());
    throw;
  }
  if (decodes && spec_.mtp.enabled())
    p.cost = std::make_shared<MtpStepCost>(std::move(inner), spec_.mtp);
  else
    p.cost = std::move(inner);
  return p;
}

Deployment::Deployment(const TopologyChoice& topo, const DeploymentSpec& spec) : topo_(topo), spec_(spec) {
  if (!spec_.model || !spec_.instance || !spec_.gpu) throw Error("deployment", "", "model, instance and GPU are required");
  spec_.mtp.validate("--mtp");
  name_ = topo_.name();
  std::vector<std::pair<std::string, int>> workers;
  if (topo_.kind == TopologyChoice::Kind::aggregated) {
    const int g = gpus_of(topo_.agg);
    replicas_ = topo_.replicas > 0 ? topo_.replicas : spec_.nodes * spec_.instance->gpus / std::max(1, g);
    if (replicas_ < 1)
      throw Error("--nodes", "", "one aggregated replica needs " + std::to_string(g) + " GPUs; " +
                                     std::to_string(spec_.nodes) + " x " + spec_.instance->name + " has " +
                                     std::to_string(spec_.nodes * spec_.instance->gpus));
    for (int i = 0; i < replicas_; ++i) workers.emplace_back("replica-" + std::to_string(i), g);
    placement_ = std::make_unique<Placement>(workers, *spec_.instance, spec_.nodes);
    agg_ = make_pool(topo_.agg, true, *spec_.gpu);
  } else {
    if (topo_.prefill_workers < 1 || topo_.decode_workers < 1)
      throw Error("--prefill-workers", "", "a disaggregated topology needs at least one prefill and one decode worker");
    const hw::InstanceSpec& pi = spec_.prefill_instance ? *spec_.prefill_instance : *spec_.instance;
    const hw::InstanceSpec& di = spec_.decode_instance ? *spec_.decode_instance : *spec_.instance;
    const auto& cat = hw::Catalog::global();
    prefill_gpu_ = pi.name == spec_.instance->name ? spec_.gpu : &cat.gpu(pi.gpu);
    decode_gpu_ = di.name == spec_.instance->name ? spec_.gpu : &cat.gpu(di.gpu);
    // Workers in the cluster's order: prefill..., decode..., encode... (encoders with prefill).
    const bool mixed = pi.name != di.name;
    std::vector<WorkerNeed> need;
    for (int i = 0; i < topo_.prefill_workers; ++i) need.push_back({"prefill-" + std::to_string(i), gpus_of(topo_.prefill), 0});
    for (int i = 0; i < topo_.decode_workers; ++i) need.push_back({"decode-" + std::to_string(i), gpus_of(topo_.decode), mixed ? 1 : 0});
    for (int i = 0; i < topo_.encode_workers; ++i) need.push_back({"encode-" + std::to_string(i), gpus_of(topo_.encode), 0});
    std::vector<NodeGroup> groups;
    if (!mixed) {
      groups.push_back({pi, spec_.nodes});
    } else {
      // The fewest nodes of each type that hold that role's workers (whole nodes for wide ones).
      auto fewest = [](int workers, int per_worker, int per_node) {
        return per_worker >= per_node ? workers * ((per_worker + per_node - 1) / per_node)
                                      : (workers + per_node / per_worker - 1) / (per_node / per_worker);
      };
      const int pn = spec_.prefill_nodes > 0 ? spec_.prefill_nodes
                     : fewest(topo_.prefill_workers, gpus_of(topo_.prefill), pi.gpus) +
                           (topo_.encode_workers > 0 ? fewest(topo_.encode_workers, gpus_of(topo_.encode), pi.gpus) : 0);
      const int dn = spec_.decode_nodes > 0 ? spec_.decode_nodes : fewest(topo_.decode_workers, gpus_of(topo_.decode), di.gpus);
      groups.push_back({pi, pn, spec_.prefill_nodes > 0 ? "--prefill-nodes" : "--nodes"});
      groups.push_back({di, dn, spec_.decode_nodes > 0 ? "--decode-nodes" : "--nodes"});
    }
    placement_ = std::make_unique<Placement>(need, groups);
    prefill_ = make_pool(topo_.prefill, false, *prefill_gpu_);
    decode_ = make_pool(topo_.decode, true, *decode_gpu_);
    if (topo_.encode_workers > 0) {
      if (!spec_.model->has_vision)
        throw Error("--encode-workers", "", "model " + spec_.model->name + " has no vision encoder");
      encode_.par = topo_.encode;
      encode_.cost = step_cost(*prefill_gpu_, topo_.encode, engine_for(WorkerRole::prefill_only));
    }
  }
  frontend_ = spec_.frontend;
  if (frontend_ && spec_.calibration) {   // per request before the engine: the first GPU a request meets
    const AppliedCalibration a =
        applicable(*spec_.calibration, (prefill_gpu_ ? prefill_gpu_ : spec_.gpu)->name, spec_.engine.engine_profile, "", "");
    frontend_->api.request.mean_s += a.request_overhead_ms * 1e-3;
    frontend_->client.request_latency_s += a.request_latency_ms * 1e-3;
    frontend_->client.first_token_floor_s = std::max(frontend_->client.first_token_floor_s, a.first_token_floor_ms * 1e-3);
  }
}

std::string Deployment::calibration() const {
  std::string s = (disaggregated() ? decode_.cost : agg_.cost)->provenance();
  const std::string u = user_calibration();
  return u.empty() ? s : s + "; " + u;
}

std::string Deployment::user_calibration() const {
  if (!spec_.calibration) return "";
  std::vector<const hw::GpuSpec*> gpus = {prefill_gpu_ ? prefill_gpu_ : spec_.gpu};
  if (decode_gpu_ && decode_gpu_ != gpus[0]) gpus.push_back(decode_gpu_);
  std::string out;
  for (const hw::GpuSpec* g : gpus) {
    const AppliedCalibration a = applicable(*spec_.calibration, g->name, spec_.engine.engine_profile, spec_.model->name, std::string(hw::to_string(spec_.weights)));
    out += (out.empty() ? "" : "; ") + std::string(gpus.size() > 1 ? g->name + " workers: " : "") + a.summary;
  }
  return out;
}

bool Deployment::calibrated_on(const std::string& gpu) const {
  return spec_.calibration && applicable(*spec_.calibration, gpu, spec_.engine.engine_profile, spec_.model->name, std::string(hw::to_string(spec_.weights))).bands;
}

TopologyUnit Deployment::unit() const {
  TopologyUnit u;
  u.name = name_;
  u.gpus = gpus();
  u.instances = placement_->nodes_used();
  u.gpus_per_instance = spec_.instance->gpus;
  u.usd_per_instance_hour = spec_.instance->usd_per_hour;
  if (mixed_instances()) {
    // Instance types differ per role: a copy is a whole set of nodes, priced as the mean of them.
    u.gpus_per_instance = 1;
    const double usd = placement_->usd_per_hour_used();
    u.usd_per_instance_hour = usd > 0 ? std::optional<double>(usd / u.instances) : std::nullopt;
  }
  return u;
}

std::string Deployment::describe() const {
  std::string s = name_ + ": ";
  if (topo_.kind == TopologyChoice::Kind::aggregated)
    s += std::to_string(replicas_) + " x replica " + shape(topo_.agg);
  else {
    if (topo_.encode_workers > 0) s += std::to_string(topo_.encode_workers) + " x encode " + shape(topo_.encode) + ", ";
    s += std::to_string(topo_.prefill_workers) + " x prefill " + shape(topo_.prefill) + ", " +
         std::to_string(topo_.decode_workers) + " x decode " + shape(topo_.decode);
  }
  std::string on;
  if (mixed_instances()) {
    for (const auto& g : placement_->groups()) on += (on.empty() ? "" : " + ") + std::to_string(g.nodes) + " x " + g.instance.name;
  } else {
    on = std::to_string(placement_->nodes_used()) + " x " + spec_.instance->name;
  }
  return s + " on " + on + " (" + std::to_string(gpus()) + (gpus() == 1 ? " GPU; " : " GPUs; ") + placement_->describe() + ")";
}

PointResult Deployment::run(const workloads::WorkloadConfig& wc) const {
  MetricsCollector metrics;
  return run(wc, metrics);
}

PointResult Deployment::run(const workloads::WorkloadConfig& given, MetricsCollector& metrics) const {
  const workloads::WorkloadConfig wc =
      closed_loop_lengths(given, engine_for(disaggregated() ? WorkerRole::decode_only : WorkerRole::aggregated));
  auto workload = workloads::make_workload(wc);
  PointResult out;
  if (topo_.kind == TopologyChoice::Kind::aggregated) {
    ClusterShape shape;
    shape.replicas = replicas_;
    shape.kv_blocks = pool_blocks(agg_.plan);
    shape.kv_demand = agg_.plan.kv.demand;
    shape.router = spec_.router;
    shape.kv_router = spec_.kv_router;
    shape.seed = spec_.seed;
    shape.offload = spec_.offload;
    shape.offload_block_bytes = agg_.plan.kv.bytes_per_block;
    shape.offload_state_bytes = double(agg_.plan.kv.demand.state_groups) * agg_.plan.kv.bytes_per_block;
    shape.gpus_per_replica = agg_.par.gpus();
    if (spec_.offload.enabled())
      shape.kv_router.offload_block_cost = offload_block_costs(spec_.offload, agg_.plan.kv.bytes_per_block, *agg_.cost,
                                                               agg_.plan.block_size, spec_.engine.max_num_batched_tokens);
    AggregatedCluster cluster(shape, with_block_size(engine_for(WorkerRole::aggregated), agg_.plan), *agg_.cost,
                              frontend_ ? &*frontend_ : nullptr);
    MetricsSink sink = frontend_ ? MetricsSink(metrics, frontend_->client) : MetricsSink(metrics);
    if (const auto* sessions = dynamic_cast<const workloads::SessionWorkload*>(workload.get())) {
      SessionSink turns(sink, *sessions);
      out.end_s = cluster.run(*workload, turns);
      out.turns = turns.summary();
    } else {
      out.end_s = cluster.run(*workload, sink);
    }
    for (const Worker& w : cluster.workers()) out.workers.push_back(w.stats());
    out.offload = offload_stats(cluster.workers());
    if (const KvRouter* kv = cluster.router().kv_router())
      out.routed_blocks = kv->routed_blocks(), out.routed_overlap_blocks = kv->routed_overlap_blocks(),
      out.routed_offload_blocks = kv->routed_offload_blocks();
  } else {
    return run_disaggregated(*workload, metrics, nullptr);
  }
  out.summary = metrics.summary();
  return out;
}

PointResult Deployment::run_disaggregated(workloads::Workload& workload, MetricsCollector& metrics,
                                          const std::function<void(DisaggregatedCluster&)>& setup) const {
  if (!disaggregated()) throw Error("topology", "kind", "a disaggregated topology was expected");
  PointResult out;
  DisaggShape shape;
  shape.prefill = {topo_.prefill_workers, with_block_size(engine_for(WorkerRole::prefill_only), prefill_.plan),
                   prefill_.cost.get(), pool_blocks(prefill_.plan), prefill_.plan.kv.demand};
  shape.decode = {topo_.decode_workers, with_block_size(engine_for(WorkerRole::decode_only), decode_.plan),
                  decode_.cost.get(), pool_blocks(decode_.plan), decode_.plan.kv.demand};
  shape.encode = {topo_.encode_workers, engine_for(WorkerRole::prefill_only), encode_.cost.get(), 0, {}};
  shape.router = spec_.router;
  shape.kv_router = spec_.kv_router;
  shape.max_encode_tiles_per_step = std::max<int>(1, int(spec_.engine.max_num_batched_tokens / 256));
  shape.placement = placement_.get();
  shape.gpu = prefill_gpu_;
  shape.decode_gpu = decode_gpu_;
  const models::ModelSpec* m = spec_.model;
  const hw::Precision kv = spec_.kv_dtype;
  shape.handoff_bytes = [m, kv](std::int64_t n) { return models::handoff_bytes(*m, n, kv); };
  shape.frontend = frontend_ && frontend_->enabled ? &*frontend_ : nullptr;
  shape.embedding_bytes_per_token = 2.0 * double(m->hidden);   // BF16 embeddings into the LLM
  shape.offload = spec_.offload;
  shape.offload_block_bytes = prefill_.plan.kv.bytes_per_block;
  shape.offload_state_bytes = double(prefill_.plan.kv.demand.state_groups) * prefill_.plan.kv.bytes_per_block;
  shape.prefill_gpus = prefill_.par.gpus();
  if (spec_.offload.enabled())
    shape.kv_router.offload_block_cost = offload_block_costs(spec_.offload, prefill_.plan.kv.bytes_per_block, *prefill_.cost,
                                                             prefill_.plan.block_size, spec_.engine.max_num_batched_tokens);
  shape.seed = spec_.seed;
  DisaggregatedCluster cluster(std::move(shape));
  if (setup) setup(cluster);
  if (const auto* sessions = dynamic_cast<const workloads::SessionWorkload*>(&workload)) {
    NullSink none;
    SessionSink turns(none, *sessions);
    out.end_s = cluster.run(workload, metrics, &turns);
    out.turns = turns.summary();
  } else {
    out.end_s = cluster.run(workload, metrics);
  }
  out.offload = offload_stats(cluster.workers());
  out.transfers = cluster.transfers();
  for (const Worker& w : cluster.workers()) out.workers.push_back(w.stats());
  if (const KvRouter* kvr = cluster.kv_router())
    out.routed_blocks = kvr->routed_blocks(), out.routed_overlap_blocks = kvr->routed_overlap_blocks(),
    out.routed_offload_blocks = kvr->routed_offload_blocks();
  out.summary = metrics.summary();
  return out;
}

int Deployment::role_gpus(WorkerRole role) const {
  const Pool& p = !disaggregated() ? agg_ : role == WorkerRole::prefill_only ? prefill_ : decode_;
  return p.par.gpus();
}

double Deployment::role_weight_bytes(WorkerRole role) const {
  const Pool& p = !disaggregated() ? agg_ : role == WorkerRole::prefill_only ? prefill_ : decode_;
  return p.plan.weight_bytes;
}

SweepRow sweep_row(const std::string& topology, int concurrency, const Summary& s, int gpus, bool open_loop) {
  SweepRow r;
  r.topology = topology;
  r.concurrency = concurrency;
  r.ttft_ms[0] = s.ttft_ms.p50;
  r.ttft_ms[1] = s.ttft_ms.p90;
  r.ttft_ms[2] = s.ttft_ms.p99;
  r.itl_ms[0] = s.itl_ms.p50;
  r.itl_ms[1] = s.itl_ms.p90;
  r.itl_ms[2] = s.itl_ms.p99;
  r.gap_ms[0] = s.token_gap_ms.p50;
  r.gap_ms[1] = s.token_gap_ms.p90;
  r.gap_ms[2] = s.token_gap_ms.p99;
  // A closed loop's capacity is its steady rate, not the measured window's (which holds the
  // start and the drain: Summary::steady_output_tps).
  r.output_tps = !open_loop && s.steady_output_tps > 0 ? s.steady_output_tps : s.output_token_throughput_per_s;
  r.output_tps_per_gpu = gpus > 0 ? r.output_tps / gpus : 0;
  r.output_tps_per_user = s.output_token_throughput_per_user.avg;
  r.served_rps = served_rps(s);
  r.in_flight_at_end = s.in_flight_at_end;
  r.overloaded = open_loop && overloaded(s).value_or(false);
  r.kv_full = std::any_of(s.replicas.begin(), s.replicas.end(),
                          [](const ReplicaSummary& x) { return x.max_kv_utilization >= kKvFull; });
  return r;
}

SweepRow sweep_row(const std::string& topology, int concurrency, const PointResult& p, int gpus, bool open_loop) {
  SweepRow r = sweep_row(topology, concurrency, p.summary, gpus, open_loop);
  r.prefill_train = !r.kv_full && is_prefill_train(p.workers, p.end_s);
  std::int64_t all = 0, cached = 0;   // as simulate's prefix-cache line sums them
  for (const auto& w : p.workers) all += w.prompt_tokens, cached += w.prompt_tokens_cached;
  r.prefix_hit = all > 0 ? double(cached) / double(all) : 0.0;
  return r;
}

}  // namespace servesim::sim
