// `servesim plan`: a concurrency sweep of each topology (run on the fly, points in parallel),
// then the SLO capacity plan read off it: the rightmost concurrency under the TTFT and ITL lines,
// the output tokens/s one copy of the topology serves there, copies for the target, GPUs,
// instances, $/hour and the limiting side. --plot draws the charts through python/servesim.
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <climits>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>

#include "common/error.hpp"
#include "common/table.hpp"
#include "common/text.hpp"
#include "hwmodels/catalog.hpp"
#include "models/min_gpus.hpp"
#include "models/model_spec.hpp"
#include "sim/cli/commands.hpp"
#include "sim/studies/plan.hpp"
#include "sim/topology/deployment.hpp"

namespace servesim::cli {
namespace {

struct PlanOpts {
  std::string model, instance, precision, kv_cache_dtype, topology = "both", concurrency = "1,2,4,8,16,32,64,128,256";
  std::string statistic = "p50", plot, mtp_acceptance, router = "least_outstanding";
  int nodes = 0, prefill_workers = 1, decode_workers = 1, encode_workers = 0, threads = 0;
  std::optional<int> tp, pp, ep, prefill_tp, decode_tp, replicas, max_num_seqs, mtp_tokens;
  std::int64_t isl = 0, osl = 0, seed = 0;
  std::optional<std::int64_t> requests, max_num_batched_tokens;
  std::optional<double> util;
  double ttft_ms = 0, itl_ms = 0, target_tps = 0;
  Format format = Format::table;
};

// The reference study (MISSION.md) when no model is named.
void apply_reference(PlanOpts& o, std::string& ran) {
  if (!o.model.empty()) return;
  o.model = "nemotron-3.5-super-vl";
  if (o.instance.empty()) o.instance = "p5en.48xlarge";
  if (o.nodes == 0) o.nodes = 2;
  if (o.precision.empty()) o.precision = "bf16";
  if (o.isl == 0) o.isl = 4000;
  if (o.osl == 0) o.osl = 500;
  if (o.ttft_ms == 0) o.ttft_ms = 600;
  if (o.itl_ms == 0) o.itl_ms = 100;
  if (o.target_tps == 0) o.target_tps = 10000;
  ran = "reference study: nemotron-3.5-super-vl on 2 x p5en.48xlarge (16 H200), BF16, aggregated vs 1P1D "
        "disaggregated, ISL 4000 / OSL 500, SLO TTFT 600 ms / ITL 100 ms, target 10000 output tok/s";
}

std::string self_dir() {
  char buf[4096];
  const ssize_t n = readlink("/proc/self/exe", buf, sizeof(buf) - 1);
  if (n <= 0) return ".";
  std::string p(buf, static_cast<std::size_t>(n));
  return p.substr(0, p.find_last_of('/'));
}

void run_plan(PlanOpts o) {
  std::string ran;
  apply_reference(o, ran);
  if (o.instance.empty()) throw Error("--instance", "", "required (servesim list instances)");
  if (o.nodes < 1) throw Error("--nodes", "", "must be >= 1");
  if (o.isl < 1) throw Error("--isl", "", "must be >= 1");
  if (o.osl < 1) throw Error("--osl", "", "must be >= 1");
  sim::PlanSlo slo{o.ttft_ms, o.itl_ms, sim::parse_statistic(o.statistic), o.target_tps};
  slo.validate();

  const auto& cat = hw::Catalog::global();
  sim::DeploymentSpec spec;
  spec.model = &models::model(o.model);
  spec.instance = &cat.instance(o.instance);
  spec.gpu = &cat.gpu(spec.instance->gpu);
  spec.nodes = o.nodes;
  spec.weights = hw::parse_precision(o.precision.empty() ? "bf16" : o.precision);
  spec.kv_dtype = o.kv_cache_dtype.empty() || text::iequals(o.kv_cache_dtype, "auto")
                      ? models::checkpoint_kv_dtype(spec.weights)
                      : hw::parse_precision(o.kv_cache_dtype, "--kv-cache-dtype");
  spec.seed = static_cast<std::uint64_t>(o.seed);
  spec.router = sim::parse_router(o.router, "--router");
  if (o.max_num_seqs) spec.engine.max_num_seqs = *o.max_num_seqs;
  if (o.max_num_batched_tokens) spec.engine.max_num_batched_tokens = *o.max_num_batched_tokens;
  if (o.util) spec.engine.gpu_memory_utilization = *o.util;
  if (o.mtp_tokens && *o.mtp_tokens > 0) {
    spec.mtp.draft_tokens = *o.mtp_tokens;
    for (const auto& s : text::split_csv(o.mtp_acceptance.empty() ? "0.7" : o.mtp_acceptance)) {
      try {
        spec.mtp.acceptance.push_back(std::stod(s));
      } catch (const std::exception&) {
        throw Error("--mtp-acceptance", "", "'" + s + "' is not a number");
      }
    }
    spec.mtp.draft_cost_fraction = sim::draft_cost_fraction(*spec.model);
    spec.mtp.seed = spec.seed;
    spec.mtp.validate("--mtp-acceptance");
  }

  // Default worker shape: the smallest that serves the model on this GPU (models/min_gpus).
  models::Parallelism base;
  if (!o.tp || !o.prefill_tp || !o.decode_tp) {
    const auto mg = models::min_gpus(*spec.model, *spec.gpu, spec.weights);
    if (mg.min_gpus == 0)
      throw Error("--model", "", spec.model->name + " does not fit on " + spec.gpu->name + " at " +
                                     std::string(hw::to_string(spec.weights)) + ": " + mg.note);
    base = mg.par;
  }
  auto shaped = [&](std::optional<int> tp) {
    models::Parallelism p = base;
    if (tp) p.tp = *tp;
    if (o.pp) p.pp = *o.pp;
    if (o.ep) p.ep = *o.ep;
    return p;
  };
  std::vector<sim::TopologyChoice> topos;
  const std::string t = text::lower(o.topology);
  if (t != "agg" && t != "disagg" && t != "both" && t != "aggregated" && t != "disaggregated")
    throw Error("--topology", "", "unknown topology '" + o.topology + "'; known: agg, disagg, both");
  if (t == "agg" || t == "aggregated" || t == "both") {
    sim::TopologyChoice a;
    a.agg = shaped(o.tp);
    if (o.replicas) a.replicas = *o.replicas;
    topos.push_back(a);
  }
  if (t == "disagg" || t == "disaggregated" || t == "both") {
    sim::TopologyChoice d;
    d.kind = sim::TopologyChoice::Kind::disaggregated;
    d.prefill = shaped(o.prefill_tp ? o.prefill_tp : o.tp);
    d.decode = shaped(o.decode_tp ? o.decode_tp : o.tp);
    d.encode = shaped(o.tp);
    d.prefill_workers = o.prefill_workers;
    d.decode_workers = o.decode_workers;
    d.encode_workers = o.encode_workers;
    topos.push_back(d);
  }
  std::vector<std::unique_ptr<sim::Deployment>> deps;
  for (const auto& tc : topos) deps.push_back(std::make_unique<sim::Deployment>(tc, spec));

  std::vector<int> conc;
  for (const auto& s : text::split_csv(o.concurrency)) {
    char* end = nullptr;
    const long v = std::strtol(s.c_str(), &end, 10);
    if (!end || *end || v < 1 || v > 100000) throw Error("--concurrency", "", "'" + s + "' is not a client count >= 1");
    conc.push_back(static_cast<int>(v));
  }
  if (conc.empty()) throw Error("--concurrency", "", "is empty");

  // Every (topology, concurrency) point is independent: run them on all cores, results by index.
  struct Task { int topo, c; };
  std::vector<Task> tasks;
  for (int i = 0; i < static_cast<int>(deps.size()); ++i)
    for (int c : conc) tasks.push_back({i, c});
  std::vector<sim::SweepRow> rows(tasks.size());
  std::vector<sim::PointResult> results(tasks.size());
  std::atomic<std::size_t> next{0};
  std::exception_ptr failure;
  std::mutex fail_mu;
  auto work = [&] {
    for (std::size_t k; (k = next++) < tasks.size();) {
      try {
        const auto& d = *deps[static_cast<std::size_t>(tasks[k].topo)];
        workloads::WorkloadConfig wc;
        wc.arrival = workloads::Arrival::concurrency;
        wc.concurrency = tasks[k].c;
        wc.requests = o.requests ? *o.requests : std::max<std::int64_t>(200, 8LL * tasks[k].c);
        wc.warmup_requests = tasks[k].c;
        wc.seed = spec.seed;
        wc.isl = workloads::LengthDist::fixed_at(o.isl);
        wc.osl = workloads::LengthDist::fixed_at(o.osl);
        results[k] = d.run(wc);
        rows[k] = sim::sweep_row(d.name(), tasks[k].c, results[k].summary, d.gpus());
      } catch (...) {
        std::lock_guard<std::mutex> g(fail_mu);
        if (!failure) failure = std::current_exception();
      }
    }
  };
  const int threads = o.threads > 0 ? o.threads : std::max(1u, std::thread::hardware_concurrency());
  std::vector<std::thread> pool;
  for (int i = 0; i < std::min<int>(threads, static_cast<int>(tasks.size())); ++i) pool.emplace_back(work);
  for (auto& th : pool) th.join();
  if (failure) std::rethrow_exception(failure);

  std::vector<sim::TopologyUnit> units;
  for (const auto& d : deps) units.push_back(d->unit());
  const auto plan = sim::plan_capacity(rows, units, slo);

  nlohmann::json j;
  if (!ran.empty()) j["ran"] = ran;
  j["model"] = spec.model->name;
  j["instance"] = spec.instance->name;
  j["nodes"] = o.nodes;
  j["precision"] = std::string(hw::to_string(spec.weights));
  j["isl"] = o.isl;
  j["osl"] = o.osl;
  j["slo"] = {{"ttft_ms", slo.ttft_ms}, {"itl_ms", slo.itl_ms}, {"statistic", std::string(sim::to_string(slo.statistic))}};
  j["ttft_ms"] = slo.ttft_ms;   // flat copies for python/servesim/plot.py
  j["itl_ms"] = slo.itl_ms;
  j["statistic"] = std::string(sim::to_string(slo.statistic));
  j["target"] = {{"output_tps", slo.target_tps}};
  j["topologies"] = nlohmann::json::array();
  for (std::size_t i = 0; i < plan.size(); ++i) {
    auto r = plan[i].to_json();
    r["gpus_per_replica"] = units[i].gpus;
    r["instances_per_replica"] = units[i].instances;
    r["deployment"] = deps[i]->describe();
    j["topologies"].push_back(r);
  }
  nlohmann::json sweep;
  sweep["columns"] = sim::sweep_columns(rows);
  j["sweep"] = sweep;

  if (!o.plot.empty()) {
    const std::string base = o.plot.size() > 4 && text::lower(o.plot.substr(o.plot.size() - 4)) == ".png"
                                 ? o.plot.substr(0, o.plot.size() - 4) : o.plot;
    const std::string sweep_path = base + "-sweep.json", plan_path = base + "-plan.json";
    std::ofstream(sweep_path) << sweep.dump();
    std::ofstream(plan_path) << j.dump();
    const std::string cmd = "PYTHONPATH='" + self_dir() + "/python' MPLBACKEND=Agg /usr/bin/python3 -m servesim.plot '" +
                            sweep_path + "' --plan '" + plan_path + "' -o '" + o.plot + "' >/dev/null";
    if (std::system(cmd.c_str()) != 0) throw Error("--plot", "", "python3 -m servesim.plot failed writing " + o.plot);
    j["plot"] = o.plot;
  }

  std::string out;
  if (!ran.empty()) out += "Ran the " + ran + "\n";
  out += "Model " + spec.model->name + " (" + std::string(hw::to_string(spec.weights)) + ") on " +
         std::to_string(o.nodes) + " x " + spec.instance->name + "; ISL " + std::to_string(o.isl) + " / OSL " +
         std::to_string(o.osl) + "\n";
  for (const auto& d : deps) out += "  " + d->describe() + "\n";
  Table sw({"topology", "concurrency", "TTFT " + o.statistic + " ms", "ITL " + o.statistic + " ms", "output tok/s",
            "tok/s/GPU", "tok/s/user"});
  const int s = static_cast<int>(slo.statistic);
  for (const auto& r : rows)
    sw.add_row({r.topology, std::to_string(r.concurrency), fixed(r.ttft_ms[s], 1), fixed(r.itl_ms[s], 2),
                fixed(r.output_tps, 0), fixed(r.output_tps_per_gpu, 1), fixed(r.output_tps_per_user, 1)});
  out += "\nSweep\n" + sw.render();
  Table pt({"topology", "max concurrency", "tok/s per replica", "replicas", "GPUs", "instances", "$/hour", "limited by"});
  for (const auto& r : plan)
    pt.add_row({r.name, r.feasible ? std::to_string(r.max_concurrency) : "-", fixed(r.tps_per_replica, 0),
                std::to_string(r.replicas), std::to_string(r.gpus), std::to_string(r.instances),
                r.usd_per_hour ? fixed(*r.usd_per_hour, 2) : "-", std::string(sim::advice(r.limited_by))});
  char slo_line[256];
  std::snprintf(slo_line, sizeof slo_line, "\nPlan: SLO TTFT %s <= %g ms, ITL %s <= %g ms; target %g output tok/s\n",
                o.statistic.c_str(), slo.ttft_ms, o.statistic.c_str(), slo.itl_ms, slo.target_tps);
  out += slo_line + pt.render();
  if (!o.plot.empty()) out += "Chart: " + o.plot + "\n";
  emit(o.format, j, out);
}

}  // namespace

void add_plan_command(CLI::App& app) {
  auto o = std::make_shared<PlanOpts>();
  auto* c = app.add_subcommand("plan", "Sweep topologies over concurrency and plan replicas, GPUs and $/hour against TTFT/ITL SLOs "
                                       "(no model flags: the reference study)");
  c->add_option("--model", o->model, "Model name (servesim list models)");
  c->add_option("--instance", o->instance, "Instance type (servesim list instances)");
  c->add_option("--nodes", o->nodes, "Instances the topology is placed on");
  c->add_option("--precision", o->precision, "Weight precision: bf16, fp8, nvfp4, int8");
  c->add_option("--kv-cache-dtype", o->kv_cache_dtype, "KV cache dtype: auto (the checkpoint's), bf16, fp8");
  c->add_option("--topology", o->topology, "agg, disagg or both (default both)");
  c->add_option("--tp,--tensor-parallel-size", o->tp, "TP of every worker (default: the minimum that fits)");
  c->add_option("--pp,--pipeline-parallel-size", o->pp, "PP of every worker");
  c->add_option("--ep,--expert-parallel-size", o->ep, "EP of every worker");
  c->add_option("--replicas", o->replicas, "Aggregated replicas (default: as many as the nodes hold)");
  c->add_option("--prefill-workers", o->prefill_workers, "Disaggregated prefill workers");
  c->add_option("--decode-workers", o->decode_workers, "Disaggregated decode workers");
  c->add_option("--encode-workers", o->encode_workers, "Vision encode workers (0: prefill runs the encoder)");
  c->add_option("--prefill-tp", o->prefill_tp, "TP of prefill workers");
  c->add_option("--decode-tp", o->decode_tp, "TP of decode workers");
  c->add_option("--isl", o->isl, "Input tokens per request");
  c->add_option("--osl", o->osl, "Output tokens per request");
  c->add_option("--concurrency", o->concurrency, "Closed-loop clients to sweep (default 1,2,4,...,256)");
  c->add_option("--requests", o->requests, "Measured requests per point (default max(200, 8 x concurrency))");
  c->add_option("--seed", o->seed, "Random seed");
  c->add_option("--router", o->router, "round_robin, least_outstanding or least_kv_load");
  c->add_option("--max-num-seqs", o->max_num_seqs, "vLLM max_num_seqs");
  c->add_option("--max-num-batched-tokens", o->max_num_batched_tokens, "vLLM max_num_batched_tokens");
  c->add_option("--gpu-memory-utilization", o->util, "vLLM gpu_memory_utilization");
  c->add_option("--num-speculative-tokens", o->mtp_tokens, "MTP draft tokens per step (0: off)");
  c->add_option("--mtp-acceptance", o->mtp_acceptance, "MTP acceptance: one rate or one per draft position (default 0.7)");
  c->add_option("--ttft-ms", o->ttft_ms, "SLO on time to first token (ms)");
  c->add_option("--itl-ms", o->itl_ms, "SLO on inter-token latency (ms)");
  c->add_option("--statistic", o->statistic, "Statistic the SLO applies to: p50, p90 or p99");
  c->add_option("--target-tps", o->target_tps, "Output tokens/s the deployment must serve");
  c->add_option("--plot", o->plot, "Write the charts to FILE.png (and FILE-throughput.png)");
  c->add_option("--threads", o->threads, "Worker threads (default: all cores); results do not depend on it");
  add_format_option(*c, o->format);
  c->callback([o] { run_plan(*o); });
}

}  // namespace servesim::cli
