#include "sim/simulate.hpp"

#include "sim/parallel.hpp"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <sstream>
#include <thread>

#include "common/error.hpp"
#include "common/table.hpp"
#include "common/text.hpp"
#include "sim/decoding/mtp.hpp"
#include "common/json_reader.hpp"
#include "sim/engine/cluster.hpp"
#include "sim/calibration.hpp"
#include "sim/engine/engine_profile.hpp"
#include "sim/engine/metrics_sink.hpp"
#include "sim/router/kv_router.hpp"
#include "sim/kv_offload_setup.hpp"
#include "sim/topology/deployment.hpp"
#include "sim/validate/run_bands.hpp"
#include "workloads/multimodal.hpp"

namespace servesim::sim {
namespace {

// MTP drafts from the engine knobs: acceptance per position (positions not given accept, as the
// scheduler's hook reads them), draft cost from the model's MTP layers.
MtpConfig mtp_of(const Scenario& s, const models::ModelSpec& m) {
  MtpConfig c;
  const int k = s.engine.num_speculative_tokens;
  if (k <= 0) return c;
  const double frac = draft_cost_fraction(m);
  if (!(frac > 0))
    throw Error(s.source, "engine.num_speculative_tokens", m.name + " has no MTP layers to draft with");
  c.draft_tokens = k;
  c.acceptance = s.engine.acceptance_per_position;
  c.acceptance.resize(static_cast<std::size_t>(k), 1.0);
  c.draft_cost_fraction = frac;
  c.seed = s.workload.seed;
  c.validate(s.source + ": engine");
  return c;
}

// An instance by name, or the first catalogue instance carrying `gpu`.
const hw::InstanceSpec& instance_for(const Scenario& s, const std::string& name, const std::string& gpu,
                                     const std::string& field) {
  const auto& cat = hw::Catalog::global();
  try {
    if (!name.empty()) return cat.instance(name);
    const std::string want = cat.gpu(gpu).name;
    for (const auto& i : cat.instances())
      if (text::iequals(i.gpu, want)) return i;
    throw Error(s.source, field, "no catalogue instance carries " + want + "; known instances: " + text::join(cat.instance_names()));
  } catch (const Error& e) {
    throw Error(s.source, field, e.reason());
  }
}

// The layout of each disaggregated role as the scenario gives it (role_parallelism).
models::Parallelism prefill_parallelism(const Scenario& s) {
  return role_parallelism(s, s.topology.prefill_tp, s.topology.prefill_dp, s.topology.prefill_ep);
}
models::Parallelism decode_parallelism(const Scenario& s) {
  return role_parallelism(s, s.topology.decode_tp, s.topology.decode_dp, s.topology.decode_ep);
}

std::shared_ptr<const Deployment> make_deployment(const Scenario& s, const models::ModelSpec& m) {
  const TopologySpec& t = s.topology;
  DeploymentSpec d;
  d.model = &m;
  d.instance = &instance_for(s, t.instance, s.gpu, "topology.instance");
  d.gpu = &hw::Catalog::global().gpu(d.instance->gpu);
  d.weights = s.precision;
  d.kv_dtype = kv_cache_dtype_of(s, m, *d.gpu);
  d.engine = resolved_engine(s, m, *d.gpu);
  d.frontend = resolved_frontend(s);
  d.mtp = mtp_of(s, m);
  d.router = s.router;
  d.kv_router = s.kv_router;
  d.seed = s.workload.seed;
  TopologyChoice c;
  c.agg = s.par;
  c.prefill = prefill_parallelism(s);
  c.decode = decode_parallelism(s);
  c.encode = role_parallelism(s, t.encode_tp, 0, 0);
  if (t.disaggregated) {
    c.kind = TopologyChoice::Kind::disaggregated;
    c.prefill_workers = t.prefill_workers;
    c.decode_workers = t.decode_workers;
    c.encode_workers = t.encode_workers;
    if (!t.prefill_instance.empty() || !t.prefill_gpu.empty())
      d.prefill_instance = &instance_for(s, t.prefill_instance, t.prefill_gpu, "topology.prefill_instance");
    if (!t.decode_instance.empty() || !t.decode_gpu.empty())
      d.decode_instance = &instance_for(s, t.decode_instance, t.decode_gpu, "topology.decode_instance");
    d.prefill_nodes = t.prefill_nodes;
    d.decode_nodes = t.decode_nodes;
  } else {
    c.replicas = t.replicas;
  }
  if (!s.kv_offload_json.is_null()) {   // beside each aggregated replica's or prefill worker's pool
    if (!d.engine.enable_prefix_caching)
      throw Error(s.source, "kv_offload", "offload tiers hold prefix-cache blocks: turn engine.enable_prefix_caching on "
                                          "(--enable-prefix-caching; vLLM leaves it off for hybrid models)");
    const hw::InstanceSpec& inst = t.disaggregated && d.prefill_instance ? *d.prefill_instance : *d.instance;
    const models::Parallelism& par = t.disaggregated ? c.prefill : c.agg;
    d.offload = resolve_offload(s.kv_offload_json, hw::Catalog::global().gpu(inst.gpu), &inst, par.gpus(), s.source);
  }
  auto build = [&](int nodes) {
    d.nodes = nodes;
    try {
      return std::make_shared<const Deployment>(c, d);
    } catch (const Error& e) {
      throw Error(s.source, "topology", (e.where().empty() ? "" : e.where() + ": ") + e.reason());
    }
  };
  if (t.nodes > 0) return build(t.nodes);
  // The fewest nodes that hold the workers (first fit may need more than GPUs / GPUs per node).
  const int per = d.instance->gpus;
  const int gpus = t.disaggregated ? c.prefill_workers * c.prefill.gpus() + c.decode_workers * c.decode.gpus() +
                                         c.encode_workers * c.encode.gpus()
                                   : std::max(1, t.replicas) * c.agg.gpus();
  const int lo = std::max(1, (gpus + per - 1) / per);
  for (int n = lo; n < lo + 8; ++n) {
    try {
      d.nodes = n;
      return std::make_shared<const Deployment>(c, d);
    } catch (const Error& e) {
      if (e.where() != "--nodes") throw Error(s.source, "topology", (e.where().empty() ? "" : e.where() + ": ") + e.reason());
    }
  }
  return build(lo + 8);
}

}  // namespace

EngineConfig resolved_engine(const Scenario& s, const models::ModelSpec& m, const hw::GpuSpec& gpu) {
  EngineConfig e = s.engine;
  const nlohmann::json given = s.json.is_object() && s.json.contains("engine") ? s.json.at("engine") : nlohmann::json();
  const EngineProfile& prof = engine_profile(s.engine_profile, s.source, "engine_profile");
  apply_profile(prof, m, gpu, given, e, s.par.tp);
  if (e.moe_all_to_all) {
    // The exchange it prices is between the attention-DP ranks of an MoE layer: a run without them
    // (a dense model, DP 1: validate --scenario gives it to every point) has none to change, and
    // its engine line does not claim one.
    int dp = s.par.dp;
    if (s.topology.present && s.topology.disaggregated) dp = std::max({dp, prefill_parallelism(s).dp, decode_parallelism(s).dp});
    if (m.experts == 0 || dp <= 1) e.moe_all_to_all = false;
  }
  if (s.calibration) {   // the parts of a user's calibration that transfer to this GPU and engine
    const AppliedCalibration a = applicable(*s.calibration, gpu.name, prof.name, m.name, std::string(hw::to_string(s.precision)));
    apply_to_engine(a, e);
  }
  return e;
}

hw::Precision kv_cache_dtype_of(const Scenario& s, const models::ModelSpec& m, const hw::GpuSpec& gpu) {
  if (!s.kv_cache_dtype_auto) return s.kv_cache_dtype;
  return engine_profile(s.engine_profile, s.source, "engine_profile").auto_kv_cache_dtype(m, gpu, s.precision);
}

workloads::FrontendConfig resolved_frontend(const Scenario& s) {
  const EngineProfile& prof = engine_profile(s.engine_profile, s.source, "engine_profile");
  workloads::FrontendConfig f = profile_frontend(prof);
  if (s.frontend_json.is_object()) f = workloads::parse_frontend(JsonReader(s.frontend_json, s.source, "frontend"), f);
  if (s.calibration) {
    std::string gpu = s.gpu;
    try {
      gpu = hw::Catalog::global().gpu(s.gpu).name;
    } catch (const Error&) {   // prepare() names the bad GPU
    }
    const AppliedCalibration a = applicable(*s.calibration, gpu, prof.name, "", "");
    f.api.request.mean_s += a.request_overhead_ms * 1e-3;
    f.client.request_latency_s += a.request_latency_ms * 1e-3;
    f.client.first_token_floor_s = std::max(f.client.first_token_floor_s, a.first_token_floor_ms * 1e-3);
    f.disagg.handoff.mean_s *= a.handoff_scale;
    f.disagg.pull_s_per_token *= a.handoff_scale;
  }
  return f;
}

namespace {
bool divides(int parts, int n) { return n == 0 || n % parts == 0; }
}  // namespace

std::string tp_split_error(const models::ModelSpec& m, int tp) {
  if (!divides(tp, m.heads)) return std::to_string(tp) + " does not divide the " + std::to_string(m.heads) + " attention heads of " + m.name;
  if (m.kv_heads > 0 && !divides(tp, m.kv_heads) && tp % m.kv_heads != 0)
    return std::to_string(tp) + " and the " + std::to_string(m.kv_heads) + " KV heads of " + m.name + " do not divide one another";
  if (!divides(tp, m.mamba_heads)) return std::to_string(tp) + " does not divide the " + std::to_string(m.mamba_heads) + " Mamba heads of " + m.name;
  return "";
}

Prepared prepare(const Scenario& s) {
  Prepared p;
  const std::string& f = s.source;
  try {
    p.model = &scenario_model(s);
  } catch (const Error& e) {
    throw Error(f, "model", e.reason());
  }
  try {
    p.gpu = &hw::Catalog::global().gpu(s.gpu);
  } catch (const Error& e) {
    throw Error(f, "gpu", e.reason());
  }
  const models::ModelSpec& m = *p.model;
  if (const std::string why = tp_split_error(m, s.par.tp); !why.empty()) throw Error(f, "tensor_parallel_size", why);
  if (s.par.dp > 1 && m.count(models::LayerKind::moe) == 0)
    throw Error(f, "data_parallel_size", "attention data parallelism shares MoE layers across ranks, and " + m.name +
                                             " has none: serve it as more replicas instead");
  if (s.par.ep > 1 && !divides(s.par.ep, m.experts))
    throw Error(f, "expert_parallel_size", std::to_string(s.par.ep) + " does not divide the " +
                                               std::to_string(m.experts) + " experts of " + m.name);
  if (s.par.pp > static_cast<int>(m.layers.size()))
    throw Error(f, "pipeline_parallel_size", "more stages than the " + std::to_string(m.layers.size()) + " layers");
  if (s.topology.disaggregated) {
    for (const auto& [role, par] : {std::pair{"prefill", prefill_parallelism(s)}, std::pair{"decode", decode_parallelism(s)}}) {
      if (par.dp > 1 && m.count(models::LayerKind::moe) == 0)
        throw Error(f, std::string("topology.") + role + "_dp",
                    "attention data parallelism shares MoE layers across ranks, and " + m.name +
                        " has none: give the role more workers instead");
      if (par.ep > 1 && !divides(par.ep, m.experts))
        throw Error(f, std::string("topology.") + role + "_ep",
                    std::to_string(par.ep) + " does not divide the " + std::to_string(m.experts) + " experts of " + m.name);
    }
  }
  p.engine = resolved_engine(s, m, *p.gpu);
  p.frontend = resolved_frontend(s);
  if (!s.workload.multimodal.empty() && !m.has_vision)
    throw Error(f, "workload.multimodal", m.name + " has no vision encoder (text only): images and video need a vision model");
  if (s.engine.max_model_len > m.max_context && m.max_context > 0)
    throw Error(f, "engine.max_model_len", std::to_string(s.engine.max_model_len) + " exceeds " + m.name +
                                               "'s max_position_embeddings (" + std::to_string(m.max_context) +
                                               "), which vLLM refuses");
  if (s.topology.present) {
    p.deployment = make_deployment(s, m);
    p.offload = p.deployment->offload();
    return p;
  }

  const hw::Precision kv_dtype = kv_cache_dtype_of(s, m, *p.gpu);
  try {
    p.plan = models::plan_memory(m, *p.gpu, s.precision, s.par, p.engine.memory_config(kv_dtype));
  } catch (const Error& e) {
    throw Error(f, e.field().empty() ? "model" : e.field(), e.reason());
  }
  p.engine.max_model_len = p.plan.max_model_len;
  p.engine.block_size = p.plan.block_size;
  p.engine.max_num_seqs = p.plan.max_num_seqs;   // SGLang's planner caps the running requests by its token pool
  if (p.plan.num_kv_blocks < 1)
    throw Error(f, "gpu_memory_utilization", "no memory left for a single KV block of " + m.name + " on " +
                                                 std::to_string(s.gpus_per_replica()) + " x " + p.gpu->name);
  if (p.engine.kind == EngineKind::vllm && !p.engine.enable_chunked_prefill && p.engine.max_num_batched_tokens < p.plan.max_model_len)
    throw Error(f, "engine.max_num_batched_tokens",
                "without chunked prefill it must be >= max_model_len (" + std::to_string(p.plan.max_model_len) + "), as vLLM requires");
  p.replicas = s.replicas();
  if (!s.kv_offload_json.is_null()) {
    if (!p.engine.enable_prefix_caching)
      throw Error(f, "kv_offload", "offload tiers hold prefix-cache blocks: turn engine.enable_prefix_caching on "
                                   "(--enable-prefix-caching; vLLM leaves it off for hybrid models)");
    const hw::InstanceSpec* inst = nullptr;
    for (const auto& i : hw::Catalog::global().instances())
      if (!inst && text::iequals(i.gpu, p.gpu->name)) inst = &i;
    p.offload = resolve_offload(s.kv_offload_json, *p.gpu, inst, s.gpus_per_replica(), f);
  }
  const models::Parallelism par = with_engine_rules(s.par, p.engine, m, *p.gpu);
  auto cost = models::make_step_cost(m, *p.gpu, s.precision, par, kv_dtype, p.engine.kernel_tables,
                                     p.engine.kernel_scales);
  const MtpConfig mtp = mtp_of(s, m);
  if (mtp.enabled()) p.cost = std::make_shared<MtpStepCost>(std::move(cost), mtp);
  else p.cost = std::move(cost);
  return p;
}

namespace {
SimResult run_prepared(const Prepared& p, const Scenario& s, const workloads::WorkloadConfig& w, bool keep_records,
                       const Progress& progress);
}  // namespace

SimResult simulate(const Prepared& p, const Scenario& s, const workloads::WorkloadConfig& w, bool keep_records,
                   const Progress& progress) {
  try {
    return run_prepared(p, s, w, keep_records, progress);
  } catch (const Error& e) {
    // A trace request that the engine refuses: name the trace file and line.
    if (!w.trace_file.empty() && e.where().rfind("trace line ", 0) == 0)
      throw Error(w.trace_file, e.where().substr(6), e.field() + ": " + e.reason());
    throw;
  }
}

namespace {
// One worker's counters: kept per worker and summed into the run's closed-loop and cache figures.
void add_worker(SimResult& r, const WorkerStats& ws) {
  r.workers.push_back(ws);
  r.prefill_tokens += ws.prefill_tokens;
  r.cohort_prefill_tokens += ws.cohort_prefill_tokens;
  r.prompts += ws.prompts;
  r.prompts_behind_prefill += ws.prompts_behind_prefill;
  r.prefill_step_s += ws.prefill_step_s;
  r.prompt_tokens += ws.prompt_tokens;
  r.prompt_tokens_cached += ws.prompt_tokens_cached;
}

SimResult run_prepared(const Prepared& p, const Scenario& s, const workloads::WorkloadConfig& w, bool keep_records,
                       const Progress& progress) {
  const auto t0 = std::chrono::steady_clock::now();
  SimResult r{MetricsCollector(keep_records)};
  if (progress) {
    const std::int64_t total = w.requests + w.warmup_requests;
    r.metrics.set_progress([progress, total](std::int64_t n) { progress(n, total); });
  }
  r.metrics.set_input_config(s.json);
  if (p.deployment) {
    const Deployment& d = *p.deployment;
    for (const auto& w : d.placement().workers())
      if (!d.disaggregated() || w.name.rfind("encode", 0) != 0) r.metrics.add_replica(w.name);
    const PointResult pr = d.run(w, r.metrics);
    r.summary = pr.summary;
    for (const auto& ws : pr.workers) add_worker(r, ws);
    r.engine = p.engine;
    r.calibration = d.calibration();
    r.transfers = pr.transfers;
    r.turns = pr.turns;
    r.offload = p.offload;
    r.offload_stats = pr.offload;
    r.routed_blocks = pr.routed_blocks;
    r.routed_overlap_blocks = pr.routed_overlap_blocks;
    r.routed_offload_blocks = pr.routed_offload_blocks;
    r.end_s = pr.end_s;
    r.kv_blocks = d.kv_blocks();
    r.plan = d.memory_plan();
    r.gpus = d.gpus();
    r.deployment = d.describe();
    r.disaggregated = d.disaggregated();
    r.wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    return r;
  }
  for (int i = 0; i < p.replicas; ++i) r.metrics.add_replica("replica-" + std::to_string(i));
  AggregatedCluster cluster(cluster_shape(p, s, w.seed), lockstep_engine(p.engine, p.plan.dp), *p.cost, &p.frontend);
  auto workload = workloads::make_workload(closed_loop_lengths(w, p.engine));   // Deployment::run does its own
  MetricsSink sink(r.metrics, p.frontend.client);
  if (const auto* sessions = dynamic_cast<const workloads::SessionWorkload*>(workload.get())) {
    SessionSink turns(sink, *sessions);
    r.end_s = cluster.run(*workload, turns);
    r.turns = turns.summary();
  } else {
    r.end_s = cluster.run(*workload, sink);
  }
  if (const KvRouter* kv = cluster.router().kv_router()) {
    r.routed_blocks = kv->routed_blocks();
    r.routed_overlap_blocks = kv->routed_overlap_blocks();
    r.routed_offload_blocks = kv->routed_offload_blocks();
  }
  r.events = cluster.events_processed();
  r.kv_blocks = p.plan.num_kv_blocks * p.plan.dp;
  r.plan = p.plan;
  r.gpus = p.replicas * s.gpus_per_replica();
  for (const Worker& worker : cluster.workers()) add_worker(r, worker.stats());
  r.offload = p.offload;
  for (const Worker& worker : cluster.workers()) {
    const KvOffload* o = worker.scheduler().offload();
    if (!o) continue;
    r.offload_stats.resize(o->stats().size());
    for (std::size_t t = 0; t < o->stats().size(); ++t) r.offload_stats[t] += o->stats()[t];
  }
  r.engine = p.engine;
  r.calibration = p.cost->provenance();
  r.summary = r.metrics.summary();
  r.wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return r;
}
}  // namespace

ClusterShape cluster_shape(const Prepared& p, const Scenario& s, std::uint64_t seed) {
  ClusterShape shape;
  shape.replicas = p.replicas;
  shape.kv_blocks = p.plan.num_kv_blocks * p.plan.dp;  // one pool per attention data-parallel rank
  shape.kv_demand = p.plan.kv.demand;
  shape.router = s.router;
  shape.kv_router = s.kv_router;
  shape.offload = p.offload;
  shape.offload_block_bytes = p.plan.kv.bytes_per_block;
  shape.offload_state_bytes = double(p.plan.kv.demand.state_groups) * p.plan.kv.bytes_per_block;
  shape.gpus_per_replica = s.gpus_per_replica();
  if (p.offload.enabled())
    shape.kv_router.offload_block_cost = offload_block_costs(p.offload, p.plan.kv.bytes_per_block, *p.cost, p.plan.block_size,
                                                             p.engine.max_num_batched_tokens);
  shape.seed = seed;
  return shape;
}

SimResult simulate(const Scenario& s, bool keep_records, const Progress& progress) {
  const Prepared p = prepare(s);
  return simulate(p, s, s.workload, keep_records, progress);
}

nlohmann::json what_ran_json(const WhatRan& w) {
  nlohmann::json j;
  j["model"] = w.model;
  if (!w.deployment.empty()) j["deployment"] = w.deployment;
  if (w.plan) {
    j["checkpoint_precision"] = w.plan->weight_precision;
    if (!w.plan->weight_note.empty()) j["weight_note"] = w.plan->weight_note;
    j["kv_cache_dtype"] = w.plan->kv_precision;
  }
  if (w.engine) {
    const EngineConfig& e = *w.engine;
    j["engine"] = {{"profile", e.engine_profile},
                   {"async_scheduling", e.async_scheduling},
                   {"max_num_seqs", e.max_num_seqs},
                   {"max_num_batched_tokens", e.max_num_batched_tokens},
                   {"max_model_len", e.max_model_len > 0 || !w.plan ? e.max_model_len : w.plan->max_model_len},
                   {"enforce_eager", e.enforce_eager},
                   {"cudagraph_mode", e.enforce_eager ? std::string("NONE") : e.cudagraph_mode},
                   {"max_cudagraph_capture_size", e.enforce_eager ? 0 : e.max_cudagraph_capture_size},
                   {"cudagraph_capture_sizes", e.enforce_eager ? std::vector<std::int64_t>{} : e.cudagraph_capture_sizes},
                   {"enable_prefix_caching", e.enable_prefix_caching},
                   {"moe_all_to_all", e.moe_all_to_all},
                   {"num_speculative_tokens", e.num_speculative_tokens}};
    if (e.num_speculative_tokens > 0) j["engine"]["mtp_acceptance"] = e.acceptance_per_position;
  }
  if (w.plan) {
    const models::Concurrency c = w.plan->concurrency(w.context_tokens);
    j["memory"] = {{"kv_blocks", w.plan->num_kv_blocks},
                   {"block_size", w.plan->block_size},
                   {"requested_block_size", w.plan->kv.requested_block_size},
                   {"data_parallel_ranks", w.plan->dp},
                   {"context_tokens", w.context_tokens},
                   {"max_concurrent_seqs", c.seqs},
                   {"bound", c.bound}};
  }
  j["calibration"] = w.calibration;
  return j;
}

nlohmann::json ttft_parts_ms(const TtftParts& p) {
  const double n = p.requests > 0 ? 1e3 / double(p.requests) : NAN;
  return {{"requests", p.requests},
          {"queue", p.queue_s * n},
          {"prefill", p.prefill_s * n},
          {"handoff", p.handoff_s * n},
          {"reserve_wait", p.reserve_s * n},
          {"transfer", p.transfer_s * n},
          {"first_decode_step", p.first_step_s * n},
          {"ttft", p.ttft_s * n}};
}

std::string ttft_parts_text(const TtftParts& p) {
  if (p.requests == 0) return "";
  const double n = 1e3 / double(p.requests);
  char b[400];
  std::snprintf(b, sizeof b,
                "TTFT avg in parts (%lld measured requests): queue %.2f + prefill %.2f + handoff %.2f + wait for decode KV room "
                "%.2f + KV transfer %.2f + first decode step %.2f = %.2f ms\n",
                static_cast<long long>(p.requests), p.queue_s * n, p.prefill_s * n, p.handoff_s * n, p.reserve_s * n,
                p.transfer_s * n, p.first_step_s * n, p.ttft_s * n);
  return b;
}

std::string hybrid_block_note(int requested_block_size, int block_size) {
  if (block_size == requested_block_size) return "";
  return " (hybrid model: raised from " + std::to_string(requested_block_size) +
         " so one attention page holds a Mamba state page; servesim memory explains)";
}

// ", MTP 3 drafts a step (acceptance 0.7, 0.7, 0.7)" for an engine line that drafts; "" otherwise.
static std::string mtp_text(const nlohmann::json& e) {
  const int k = e.value("num_speculative_tokens", 0);
  if (k <= 0) return "";
  std::string acc;
  for (const auto& a : e.value("mtp_acceptance", nlohmann::json::array())) {
    char b[32];
    std::snprintf(b, sizeof b, "%s%.3g", acc.empty() ? "" : ", ", a.get<double>());
    acc += b;
  }
  return ", MTP " + std::to_string(k) + (k == 1 ? " draft" : " drafts") + " a step" + (acc.empty() ? "" : " (acceptance " + acc + ")");
}

std::string what_ran_text(const nlohmann::json& j) {
  auto str = [&](const nlohmann::json& o, const char* k) { return o.contains(k) ? o[k].get<std::string>() : std::string("-"); };
  std::string out = "ran: " + str(j, "model");
  if (j.contains("checkpoint_precision"))
    out += ", " + (j.contains("weight_note") ? str(j, "weight_note") : str(j, "checkpoint_precision") + " weights") +
           ", KV cache " + str(j, "kv_cache_dtype");
  if (j.contains("deployment")) out += "; " + str(j, "deployment");
  out += "\n";
  if (j.contains("engine")) {
    const auto& e = j["engine"];
    const auto sizes = e["cudagraph_capture_sizes"].get<std::vector<std::int64_t>>();
    std::string graphs = e["enforce_eager"].get<bool>() ? std::string("off (enforce_eager)")
                                                        : str(e, "cudagraph_mode") + ", " + std::to_string(sizes.size()) +
                                                              " sizes up to " + std::to_string(e["max_cudagraph_capture_size"].get<std::int64_t>()) + " tokens";
    out += "  engine " + str(e, "profile") + ": max_num_seqs " + std::to_string(e["max_num_seqs"].get<int>()) +
           ", max_num_batched_tokens " + std::to_string(e["max_num_batched_tokens"].get<std::int64_t>()) +
           ", max_model_len " + std::to_string(e["max_model_len"].get<std::int64_t>()) + ", CUDA graphs " + graphs +
           ", prefix caching " + (e["enable_prefix_caching"].get<bool>() ? "on" : "off") +
           (e["async_scheduling"].get<bool>() ? ", async scheduling" : ", synchronous scheduling") +
           (e.value("moe_all_to_all", false) ? ", MoE all-to-all exchange" : "") + mtp_text(e) + "\n";
  }
  if (j.contains("memory")) {
    const auto& m = j["memory"];
    out += "  memory: " + std::to_string(m["kv_blocks"].get<std::int64_t>()) + " KV blocks x " +
           std::to_string(m["block_size"].get<int>()) + " tokens" +
           (m.contains("requested_block_size")
                ? hybrid_block_note(m["requested_block_size"].get<int>(), m["block_size"].get<int>())
                : std::string()) +
           (m["data_parallel_ranks"].get<int>() > 1 ? " per attention-DP rank" : "") + " per replica; " +
           std::to_string(m["max_concurrent_seqs"].get<int>()) + " sequences of " +
           std::to_string(m["context_tokens"].get<std::int64_t>()) + " tokens at once (bound: " + str(m, "bound") + ")\n";
  }
  out += "  calibration: " + str(j, "calibration") + "\n";
  return out;
}

nlohmann::json what_ran_json(const Scenario& s, const SimResult& r) {
  return what_ran_json(s, r.deployment, r.engine, r.plan, r.calibration);
}

nlohmann::json what_ran_json(const Scenario& s, const Prepared& p) {
  if (p.deployment)
    return what_ran_json(s, p.deployment->describe(), p.engine, p.deployment->memory_plan(), p.deployment->calibration());
  return what_ran_json(s, "", p.engine, p.plan, p.cost->provenance());
}

nlohmann::json what_ran_json(const Scenario& s, const std::string& deployment, const EngineConfig& engine,
                             const models::MemoryPlan& plan, const std::string& calibration) {
  WhatRan w;
  w.model = s.model;
  w.deployment = deployment.empty()
                     ? std::to_string(s.gpus) + " x " + s.gpu + " as " + std::to_string(s.replicas()) + " replica(s) of " + s.par.label()
                     : deployment;
  // The MoE exchange the run's layouts take (an engine's wide-EP all-to-all is not a knob it was given).
  EngineConfig shown = engine;
  {
    const models::ModelSpec& m = scenario_model(s);
    const hw::GpuSpec& g = hw::Catalog::global().gpu(s.gpu);
    shown.moe_all_to_all = s.topology.present && s.topology.disaggregated
                               ? moe_all_to_all_for(engine, m, prefill_parallelism(s), g) ||
                                     moe_all_to_all_for(engine, m, decode_parallelism(s), g)
                               : moe_all_to_all_for(engine, m, s.par, g);
  }
  w.engine = &shown;
  w.plan = &plan;
  // A request that carries the media holds its vision tokens in the cache too (as search and recommend
  // size memory): the plan's sequences are counted at that longest context.
  const std::int64_t vision = s.workload.multimodal.empty() ? 0 : workloads::vision_work(s.workload.multimodal).tokens;
  w.context_tokens = std::int64_t(std::llround(s.workload.isl.expected_mean() + s.workload.osl.expected_mean())) + vision;
  w.calibration = calibration;
  if (s.calibration) {   // a user's profile on top of the tables (--calibration)
    const validate::RunKind k = validate::run_kind(s, SimResult{});   // its GPU and engine build: the scenario's
    const CalibrationProfile& c = *s.calibration;   // named by what it was fitted on, not by its file
    // The build the run resolved (engine.engine_profile), as the run applied it: the engine's name
    // alone resolves to its newest build, which a profile of an older one does not apply to.
    const AppliedCalibration a = applicable(c, k.gpu, engine.engine_profile, s.model, std::string(hw::to_string(s.precision)));
    w.calibration += "; user calibration fitted on " + c.model + ", " + c.gpu + ", " +
                     (c.engine_profile.empty() ? c.engine : c.engine_profile) + measured_releases(c) + ": " +
                     a.what;   // as the header has it: the values, what is held at its priors, what is left out and why
  }
  return what_ran_json(w);
}

nlohmann::json aiperf_json(const Scenario& s, const SimResult& r) {
  nlohmann::json j = r.metrics.aiperf_json();
  j["what_ran"] = what_ran_json(s, r);
  j["prediction_band"] = validate::run_bands(s, r);
  if (s.workload.arrival != workloads::Arrival::concurrency && s.workload.rate_per_s > 0)
    j["load"] = load_json(r.summary, s.workload.rate_per_s);   // offered vs served, the queue at the end
  if (s.calibration) {
    const validate::RunKind k = validate::run_kind(s, r);
    j["calibration"] = to_json(applicable(*s.calibration, k.gpu, r.engine.engine_profile, s.model, std::string(hw::to_string(s.precision))), *s.calibration);
  }
  j["engine"] = {{"profile", r.engine.engine_profile},
                 {"async_scheduling", r.engine.async_scheduling},
                 {"cudagraph_mode", r.engine.cudagraph_mode},
                 {"max_cudagraph_capture_size", r.engine.max_cudagraph_capture_size},
                 {"max_num_seqs", r.engine.max_num_seqs},
                 {"max_num_batched_tokens", r.engine.max_num_batched_tokens},
                 {"gpu_memory_utilization", r.engine.gpu_memory_utilization},
                 {"enable_prefix_caching", r.engine.enable_prefix_caching}};
  j["cohorts"] = {{"prefill_tokens", r.prefill_tokens},
                  {"prefill_tokens_released_together", r.cohort_prefill_tokens},
                  {"fraction", r.cohort_fraction()},
                  {"cohort_locked", r.cohort_locked()},
                  {"prompts", r.prompts},
                  {"prompts_behind_prefill", r.prompts_behind_prefill},
                  {"behind_prefill_fraction", r.behind_prefill_fraction()},
                  {"prefill_duty", r.prefill_duty()},
                  {"prefill_train", r.prefill_train()}};
  j["prefix_cache"] = {{"prompt_tokens", r.prompt_tokens},
                       {"cached_tokens", r.prompt_tokens_cached},
                       {"hit_fraction", r.prefix_hit_fraction()}};
  {   // overall and per replica (KV-aware routing's effect shows per replica)
    nlohmann::json per = nlohmann::json::array();
    for (const auto& w : r.workers)
      per.push_back(w.prompt_tokens > 0 ? double(w.prompt_tokens_cached) / double(w.prompt_tokens) : 0.0);
    j["prefix_cache_hit_rate"] = {{"overall", r.prefix_hit_fraction()}, {"per_replica", per}};
    j["router"] = {{"kind", std::string(to_string(s.router))}};
    if (s.router == RouterPolicy::kv)
      j["router"].update({{"overlap_score_weight", s.kv_router.overlap_score_weight},
                          {"router_temperature", s.kv_router.router_temperature},
                          {"kv_event_delay_ms", 1e3 * s.kv_router.kv_event_delay_s},
                          {"routed_blocks", r.routed_blocks},
                          {"expected_overlap_blocks", r.routed_overlap_blocks},
                          {"expected_offload_blocks", r.routed_offload_blocks},
                          {"offload_aware", s.kv_router.offload_aware}});
  }
  if (r.offload.enabled()) {   // per tier: capacity, what moved in, hits and bytes onboarded (per GPU)
    nlohmann::json tiers = nlohmann::json::array();
    std::int64_t tier_hits = 0;
    for (std::size_t t = 0; t < r.offload.tiers.size(); ++t) {
      const OffloadTier& c = r.offload.tiers[t];
      const OffloadTierStats x = t < r.offload_stats.size() ? r.offload_stats[t] : OffloadTierStats{};
      tier_hits += x.hit_tokens;
      tiers.push_back({{"tier", c.name},
                       {"capacity_gib_per_replica", c.capacity_bytes / (1024.0 * 1024.0 * 1024.0)},
                       {"capacity_blocks", x.capacity_blocks},
                       {"bytes_per_s", c.bytes_per_s},
                       {"latency_us", 1e6 * c.latency_s},
                       {"blocks_stored", x.stored_blocks},
                       {"hit_blocks", x.hit_blocks},
                       {"hit_tokens", x.hit_tokens},
                       {"hit_rate", r.prompt_tokens > 0 ? double(x.hit_tokens) / double(r.prompt_tokens) : 0.0},
                       {"onboard_transfers", x.transfers},
                       {"bytes_moved_per_gpu", x.bytes_onboarded},
                       {"onboard_seconds", x.seconds},
                       {"source", c.source}});
    }
    j["offload"] = {{"overlap", r.offload.overlap},
                    {"gpu_hit_rate", r.prompt_tokens > 0 ? double(r.prompt_tokens_cached - tier_hits) / double(r.prompt_tokens) : 0.0},
                    {"tiers", tiers}};
  }
  if (!r.turns.empty()) {
    nlohmann::json turns = nlohmann::json::array();
    for (const auto& t : r.turns)
      turns.push_back({{"turn", t.turn + 1},
                       {"requests", t.requests},
                       {"prompt_tokens_avg", t.prompt_tokens_avg},
                       {"prefix_cache_hit_rate", t.hit_fraction()},
                       {"time_to_first_token_ms", {{"avg", t.ttft_ms.avg}, {"p50", t.ttft_ms.p50}, {"p90", t.ttft_ms.p90}}},
                       {"inter_token_latency_ms", {{"avg", t.itl_ms.avg}, {"p50", t.itl_ms.p50}, {"p90", t.itl_ms.p90}}}});
    j["sessions"] = {{"per_turn", turns}};
  }
  if (!r.deployment.empty()) j["topology"] = {{"deployment", r.deployment}, {"gpus", r.gpus}};
  if (r.disaggregated) {
    const TransferStats& t = r.transfers;
    j["kv_transfer"] = {{"handoffs", t.handoffs},
                        {"bytes", t.bytes},
                        {"avg_ms", t.handoffs > 0 ? 1e3 * t.seconds / double(t.handoffs) : 0.0},
                        {"max_ms", 1e3 * t.max_seconds},
                        {"max_in_flight", t.max_in_flight},
                        {"ttft_parts_ms_avg", ttft_parts_ms(t.ttft)}};
  }
  return j;
}

workloads::WorkloadConfig sweep_point(const workloads::WorkloadConfig& base, SweepSpec::Axis axis, double value) {
  workloads::WorkloadConfig w = base;
  if (axis == SweepSpec::Axis::concurrency) {
    if (!(value >= 1 && value <= 1e6 && value == std::floor(value)))
      throw Error("--concurrency", "", "sweep values must be whole numbers of clients >= 1, got " + std::to_string(value));
    w.arrival = workloads::Arrival::concurrency;
    w.concurrency = static_cast<int>(value);
    if (w.concurrency > w.requests + w.warmup_requests)
      throw Error("--concurrency", "", std::to_string(w.concurrency) + " clients but " + std::to_string(w.requests) +
                                           " requests (+" + std::to_string(w.warmup_requests) +
                                           " warm-up) per point: give --requests of at least the largest concurrency");
  } else {
    if (!(value > 0 && std::isfinite(value)))
      throw Error("--request-rate", "", "sweep rates must be > 0 requests/s, got " + std::to_string(value));
    if (w.arrival == workloads::Arrival::concurrency || w.arrival == workloads::Arrival::schedule)
      w.arrival = workloads::Arrival::poisson;
    w.rate_per_s = value;
  }
  return w;
}

std::vector<SimResult> sweep(const Scenario& base, const SweepSpec& spec, int threads,
                             const std::function<void(int, int)>& progress) {
  const Prepared p = prepare(base);   // catalogue lookups and cost tables once, single-threaded
  const int n = static_cast<int>(spec.values.size());
  std::vector<workloads::WorkloadConfig> points;
  for (double v : spec.values) points.push_back(sweep_point(base.workload, spec.axis, v));
  std::vector<std::optional<SimResult>> out(static_cast<std::size_t>(n));
  parallel_for(n, threads, [&](int i) {
    out[static_cast<std::size_t>(i)].emplace(simulate(p, base, points[static_cast<std::size_t>(i)]));
  }, "--threads", progress);
  std::vector<SimResult> results;
  results.reserve(out.size());
  for (auto& r : out) results.push_back(std::move(*r));
  return results;
}

const std::vector<double>& Columns::operator[](std::string_view name) const {
  for (std::size_t i = 0; i < names.size(); ++i)
    if (names[i] == name) return data[i];
  throw Error("columns", std::string(name), "no such column");
}

Columns sweep_columns(const SweepSpec& spec, const std::vector<SimResult>& results, int gpus, const Scenario* base) {
  Columns c;
  auto col = [&](std::string name, auto get) {
    c.names.push_back(std::move(name));
    std::vector<double> v;
    for (const auto& r : results) v.push_back(get(r));
    c.data.push_back(std::move(v));
  };
  std::size_t i = 0;
  col(spec.axis == SweepSpec::Axis::concurrency ? "concurrency" : "request_rate", [&](const SimResult&) { return spec.values[i++]; });
  col("request_count", [](const SimResult& r) { return double(r.summary.request_count); });
  col("benchmark_duration_s", [](const SimResult& r) { return r.summary.duration_s; });
  col("request_throughput", [](const SimResult& r) { return r.summary.request_throughput_per_s; });
  col("served_requests_per_s", [](const SimResult& r) { return served_rps(r.summary); });   // the load window's (metrics.hpp)
  col("in_flight_at_last_send", [](const SimResult& r) { return double(r.summary.in_flight_at_end); });
  col("overloaded", [&](const SimResult& r) {   // rate sweeps only: 1 when the queue grew, NaN when too short to tell
    const auto o = overloaded(r.summary);
    return spec.axis == SweepSpec::Axis::concurrency || !o ? NAN : double(*o);
  });
  col("output_token_throughput", [](const SimResult& r) { return r.summary.output_token_throughput_per_s; });
  col("output_token_throughput_per_gpu",
      [&](const SimResult& r) { return r.summary.output_token_throughput_per_s / (r.gpus > 0 ? r.gpus : gpus); });
  col("output_token_throughput_per_user_avg", [](const SimResult& r) { return r.summary.output_token_throughput_per_user.avg; });
  for (const char* stat : {"avg", "p50", "p90", "p99"}) {
    auto pick = [stat](const Stats& s) {
      std::string k = stat;
      return k == "avg" ? s.avg : k == "p50" ? s.p50 : k == "p90" ? s.p90 : s.p99;
    };
    col(std::string("time_to_first_token_ms_") + stat, [&](const SimResult& r) { return pick(r.summary.ttft_ms); });
    col(std::string("inter_token_latency_ms_") + stat, [&](const SimResult& r) { return pick(r.summary.itl_ms); });
    col(std::string("token_gap_ms_") + stat, [&](const SimResult& r) { return pick(r.summary.token_gap_ms); });
    col(std::string("request_latency_ms_") + stat, [&](const SimResult& r) { return pick(r.summary.request_latency_ms); });
  }
  auto mean_over = [](const SimResult& r, auto get) {
    double s = 0;
    for (const auto& rep : r.summary.replicas) s += get(rep);
    return r.summary.replicas.empty() ? NAN : s / double(r.summary.replicas.size());
  };
  col("busy_fraction", [&](const SimResult& r) { return mean_over(r, [](const ReplicaSummary& x) { return x.busy_fraction; }); });
  col("mean_batch_size", [&](const SimResult& r) { return mean_over(r, [](const ReplicaSummary& x) { return x.mean_batch_size; }); });
  col("mean_kv_utilization", [&](const SimResult& r) { return mean_over(r, [](const ReplicaSummary& x) { return x.mean_kv_utilization; }); });
  col("preemptions", [](const SimResult& r) {
    double s = 0;
    for (const auto& w : r.workers) s += double(w.preemptions);
    return s;
  });
  if (base) {   // prediction bands of each point's kind (GPU, aggregated or disaggregated, load regime)
    std::vector<validate::RunKind> kinds;
    std::vector<const validate::BandTable*> tables;   // a calibrated point's own bands, as simulate prints them
    for (std::size_t k = 0; k < results.size(); ++k) {
      Scenario sk = *base;
      try {
        sk.workload = sweep_point(base->workload, spec.axis, spec.values[k]);
      } catch (const Error&) {   // a run outside any sweep (no rate): its own workload
      }
      kinds.push_back(validate::run_kind(sk, results[k]));
      tables.push_back(&validate::run_band_table(sk, results[k], kinds.back()));
    }
    auto band_cols = [&](const std::string& name, const char* metric, auto value) {
      for (const bool hi : {false, true}) {
        std::size_t k = 0;
        col(name + (hi ? "_band_hi" : "_band_lo"), [&](const SimResult& r) {
          const auto& kind = kinds[k];
          const validate::Band b = validate::band_for(*tables[k++], kind.gpu, kind.engine, kind.mode, metric, kind.regime, value(r));
          return hi ? b.hi : b.lo;
        });
      }
    };
    for (const char* stat : {"avg", "p50"}) {
      const bool avg = std::string(stat) == "avg";
      band_cols(std::string("time_to_first_token_ms_") + stat, "ttft",
                [avg](const SimResult& r) { return avg ? r.summary.ttft_ms.avg : r.summary.ttft_ms.p50; });
      band_cols(std::string("inter_token_latency_ms_") + stat, "itl",
                [avg](const SimResult& r) { return avg ? r.summary.itl_ms.avg : r.summary.itl_ms.p50; });
    }
    band_cols("output_token_throughput", "output_tps", [](const SimResult& r) { return r.summary.output_token_throughput_per_s; });
  }
  if (std::any_of(results.begin(), results.end(), [](const SimResult& r) { return r.disaggregated; })) {
    // The mean TTFT in its parts (they add up to the mean TTFT; ttft_parts_ms in sim/simulate.hpp).
    for (const char* part : {"queue", "prefill", "handoff", "reserve_wait", "transfer", "first_decode_step"})
      col(std::string("ttft_") + part + "_ms_avg", [part](const SimResult& r) {
        return r.disaggregated ? ttft_parts_ms(r.transfers.ttft)[part].get<double>() : NAN;
      });
    col("kv_transfers", [](const SimResult& r) { return double(r.transfers.handoffs); });
    col("kv_transfer_ms_avg", [](const SimResult& r) {
      return r.transfers.handoffs > 0 ? 1e3 * r.transfers.seconds / double(r.transfers.handoffs) : NAN;
    });
    col("kv_transfer_ms_max", [](const SimResult& r) { return 1e3 * r.transfers.max_seconds; });
    col("kv_transfer_max_in_flight", [](const SimResult& r) { return double(r.transfers.max_in_flight); });
  }
  return c;
}

std::string to_csv(const Columns& c) {
  std::ostringstream o;
  o.precision(10);
  for (std::size_t i = 0; i < c.names.size(); ++i) o << (i ? "," : "") << c.names[i];
  o << "\n";
  const std::size_t rows = c.data.empty() ? 0 : c.data[0].size();
  for (std::size_t r = 0; r < rows; ++r) {
    for (std::size_t i = 0; i < c.names.size(); ++i) {
      if (i) o << ",";
      const double v = c.data[i][r];
      if (std::isfinite(v)) o << v;
    }
    o << "\n";
  }
  return o.str();
}

nlohmann::json to_json(const Columns& c) {
  nlohmann::json j = nlohmann::json::object();
  for (std::size_t i = 0; i < c.names.size(); ++i) {
    nlohmann::json a = nlohmann::json::array();
    for (double v : c.data[i]) a.push_back(std::isfinite(v) ? nlohmann::json(v) : nlohmann::json(nullptr));
    j[c.names[i]] = std::move(a);
  }
  return j;
}

Scenario scenario_from_json(const std::string& json_text) { return parse_scenario(json_text, "scenario"); }

}  // namespace servesim::sim
