// api: `servesim plan` — a concurrency sweep of each topology on instances (points in parallel),
// then the SLO capacity plan read off it. The study can also run point by point (plan_point)
// so that the points may be computed elsewhere and joined by plan_finish.
#include <algorithm>
#include <filesystem>
#include <atomic>
#include <cstdlib>
#include <memory>
#include <mutex>
#include <sstream>
#include <set>
#include <thread>

#include "common/error.hpp"
#include "common/text.hpp"
#include "hwmodels/catalog.hpp"
#include "models/min_gpus.hpp"
#include "models/model_spec.hpp"
#include "sim/api/api.hpp"
#include "models/memory.hpp"
#include "sim/calibration.hpp"
#include "sim/engine/engine_profile.hpp"
#include "sim/resolve.hpp"
#include "sim/parallel.hpp"
#include "sim/simulate.hpp"
#include "sim/studies/plan.hpp"
#include "sim/topology/deployment.hpp"
#include "sim/validate/validate.hpp"

namespace servesim::api {
namespace {

// What was given (unset options null), as a plan's `input_config`; never the thread count.
nlohmann::json plan_input_config(const PlanArgs& a) {
  auto opt = [](const auto& v) { return v ? nlohmann::json(*v) : nlohmann::json(nullptr); };
  auto str = [](const std::string& v) { return v.empty() ? nlohmann::json(nullptr) : nlohmann::json(v); };
  nlohmann::json j = {{"model", str(a.model)}, {"instance", str(a.instance)}, {"nodes", a.nodes}, {"precision", str(a.precision)},
                      {"kv_cache_dtype", str(a.kv_cache_dtype)}, {"topology", a.topology}, {"concurrency", str(a.concurrency)},
                      {"statistic", a.statistic}, {"mtp_acceptance", str(a.mtp_acceptance)}, {"router", a.router},
                      {"prefill_instance", str(a.prefill_instance)}, {"decode_instance", str(a.decode_instance)},
                      {"prefill_nodes", a.prefill_nodes}, {"decode_nodes", a.decode_nodes},
                      {"prefill_workers", a.prefill_workers}, {"decode_workers", a.decode_workers},
                      {"encode_workers", a.encode_workers}, {"tp", opt(a.tp)}, {"pp", opt(a.pp)}, {"ep", opt(a.ep)},
                      {"prefill_tp", opt(a.prefill_tp)}, {"decode_tp", opt(a.decode_tp)},
                      {"dp", opt(a.dp)}, {"prefill_dp", opt(a.prefill_dp)}, {"decode_dp", opt(a.decode_dp)}, {"replicas", opt(a.replicas)},
                      {"max_num_seqs", opt(a.max_num_seqs)}, {"num_speculative_tokens", opt(a.num_speculative_tokens)},
                      {"seed", a.seed}, {"isl", opt(a.isl)}, {"osl", opt(a.osl)}, {"requests", opt(a.requests)},
                      {"max_num_batched_tokens", opt(a.max_num_batched_tokens)},
                      {"gpu_memory_utilization", opt(a.gpu_memory_utilization)}, {"ttft_ms", opt(a.ttft_ms)},
                      {"itl_ms", opt(a.itl_ms)}, {"gap_ms", a.gap_ms}, {"target_tps", opt(a.target_tps)}, {"target_rps", opt(a.target_rps)},
                      {"headroom", a.headroom},
                      {"burstiness", opt(a.burstiness)}, {"arrival", str(a.arrival)}, {"calibration", str(a.calibration)}, {"engine", str(a.engine)},
                      {"images", str(a.images)}, {"image_fraction", opt(a.image_fraction)}};
  if (!a.model_file.empty()) j["model_file"] = a.model_file;
  return j;
}

// The reference study (MISSION.md) when no model is named.
std::string apply_reference(PlanArgs& o) {
  if (!o.model.empty() || !o.model_file.empty()) return "";
  o.model = "nemotron-3.5-super-vl";
  if (o.instance.empty()) o.instance = "p5en.48xlarge";
  if (o.nodes == 0) o.nodes = 2;
  if (o.precision.empty()) o.precision = "bf16";
  if (!o.isl) o.isl = 4000;
  if (!o.osl) o.osl = 500;
  if (!o.ttft_ms) o.ttft_ms = 600;
  if (!o.itl_ms) o.itl_ms = 100;
  if (!o.target_tps && !o.target_rps) o.target_tps = 10000;
  // Says what runs: the reference's values where the user gave none, the user's where they did.
  const auto num = [](double v) { std::ostringstream s; s << v; return s.str(); };
  return "reference study: " + o.model + " on " + std::to_string(o.nodes) + " x " + o.instance + ", " + o.precision +
         ", aggregated vs 1P1D disaggregated, ISL " + std::to_string(*o.isl) + " / OSL " + std::to_string(*o.osl) +
         ", SLO TTFT " + num(*o.ttft_ms) + " ms / ITL " + num(*o.itl_ms) + " ms, target " +
         (o.target_rps ? num(*o.target_rps) + " requests/s" : num(*o.target_tps) + " output tok/s");
}

// Everything the points share: the deployments (memory plans, cost models) and the axis.
struct Study {
  PlanArgs o;
  std::string ran;
  sim::PlanSlo slo;
  sim::DeploymentSpec spec;
  std::vector<std::unique_ptr<sim::Deployment>> deps;
  std::vector<sim::TopologyChoice> topos;   // one per deployment, as built
  std::vector<int> conc;
  bool auto_concurrency = false;
  std::vector<std::string> notes;           // what the resolver chose (sim/resolve.hpp), for the header
  std::optional<workloads::Arrival> arrival; // open loop (--arrival with --target-rps)
  workloads::MultimodalConfig media;         // --images on --image-fraction of the requests

  explicit Study(PlanArgs args) : o(std::move(args)) {
    ran = apply_reference(o);
    // With a model named, the traffic and the SLO are the user's to give (no model: the reference study).
    const auto required = [](const char* flag, bool given, const char* what) {
      if (!given) throw Error(flag, "", std::string("required with --model: ") + what);
    };
    required("--isl", o.isl.has_value(), "input tokens per request");
    required("--osl", o.osl.has_value(), "output tokens per request");
    required("--ttft-ms", o.ttft_ms.has_value(), "the SLO on time to first token, e.g. 600");
    required("--itl-ms", o.itl_ms.has_value(), "the SLO on inter-token latency, e.g. 100");
    sim::check_headroom(o.headroom);
    if (o.target_rps) {
      sim::check_sized_rps(*o.target_rps, o.headroom, !o.arrival.empty(), o.requests);
      if (o.target_tps) throw Error("--target-rps", "", "give --target-tps or --target-rps, not both");
    }
    required("--target-tps", o.target_tps.has_value() || o.target_rps.has_value(),
             "output tokens/s the deployment must serve (or --target-rps requests/s)");
    if (!o.arrival.empty()) {
      if (!o.target_rps) throw Error("--arrival", "", "needs --target-rps R: the open-loop plan offers R requests/s to the deployment");
      arrival = workloads::parse_arrival(o.arrival, "--arrival");
    }
    if (o.burstiness && (!arrival || *arrival != workloads::Arrival::gamma))
      throw Error("--burstiness", "", "shapes gamma arrivals only: give --arrival gamma");
    if (o.burstiness && !(*o.burstiness > 0)) throw Error("--burstiness", "", "must be > 0");
    required("--instance", !o.instance.empty(), "the instance type to lay the topologies on (servesim list instances)");
    required("--nodes", o.nodes != 0, "how many instances the topologies are laid on");
    if (o.nodes < 1) throw Error("--nodes", "", "must be >= 1");
    if (*o.isl < 1) throw Error("--isl", "", "must be >= 1");
    if (*o.osl < 2) throw Error("--osl", "", "must be >= 2: inter-token latency, which the ITL SLO bounds, needs two output tokens");
    if (o.requests && *o.requests < 1) throw Error("--requests", "", "must be >= 1");
    if (o.seed < 0) throw Error("--seed", "", "must be >= 0");
    slo.ttft_ms = *o.ttft_ms;
    slo.itl_ms = *o.itl_ms;
    slo.gap_ms = o.gap_ms;
    slo.statistic = sim::parse_statistic(o.statistic);
    // Sized for the target x (1 + headroom): what every copy count below is read against.
    slo.headroom = o.headroom;
    slo.target_tps = (o.target_rps ? *o.target_rps * double(*o.osl) : *o.target_tps) * (1 + o.headroom);
    slo.target_rps = o.target_rps.value_or(0) * (1 + o.headroom);
    slo.validate();

    const auto& cat = hw::Catalog::global();
    spec.model = &resolve_model(o.model, o.model_file);
    media = images_option(o.images);
    if (o.image_fraction) {
      workloads::check_fraction(*o.image_fraction);
      if (media.empty()) throw Error("--image-fraction", "", "needs --images: the images that share of requests carries");
      media.fraction = *o.image_fraction;
    }
    if (!media.empty() && !spec.model->has_vision)
      throw Error("--images", "", "model " + spec.model->name + " has no vision encoder (text only)");
    spec.instance = &cat.instance(o.instance);
    spec.gpu = &cat.gpu(spec.instance->gpu);
    spec.nodes = o.nodes;
    if (!o.prefill_instance.empty()) spec.prefill_instance = &cat.instance(o.prefill_instance);
    if (!o.decode_instance.empty()) spec.decode_instance = &cat.instance(o.decode_instance);
    spec.prefill_nodes = o.prefill_nodes;
    spec.decode_nodes = o.decode_nodes;
    // GPU, precision and the default worker shape by the rule every subcommand shares (sim/resolve.hpp).
    sim::ResolveInput in;
    in.instance = o.instance;
    in.precision = o.precision;
    if (o.tp) in.tp = o.tp;
    if (o.tp && o.pp) in.pp = o.pp;
    in.one_replica = true;
    const sim::Resolved r = sim::resolve(*spec.model, in);
    for (const auto& n : r.notes)
      if (n.rfind("TP", 0) != 0 || (!o.tp || !o.prefill_tp || !o.decode_tp)) notes.push_back(n);
    spec.weights = r.precision;
    spec.kv_dtype = models::resolve_kv_cache_dtype(o.kv_cache_dtype, spec.weights, "--kv-cache-dtype");
    if (o.kv_cache_dtype.empty() || text::iequals(o.kv_cache_dtype, "auto"))
      notes.push_back("KV " + std::string(hw::to_string(spec.kv_dtype)) + " (the checkpoint's)");
    spec.seed = static_cast<std::uint64_t>(o.seed);
    spec.router = sim::parse_router(o.router, "--router");
    // The engine `simulate` runs: the newest vLLM profile's defaults for this model and GPU (async
    // scheduling, host costs, graphs, the closed-loop spread), the knobs given here on top, and its
    // API-server path for aggregated deployments.
    nlohmann::json given = nlohmann::json::object();
    if (o.max_num_seqs) given["max_num_seqs"] = spec.engine.max_num_seqs = *o.max_num_seqs;
    if (o.max_num_batched_tokens) given["max_num_batched_tokens"] = spec.engine.max_num_batched_tokens = *o.max_num_batched_tokens;
    if (o.gpu_memory_utilization) given["gpu_memory_utilization"] = spec.engine.gpu_memory_utilization = *o.gpu_memory_utilization;
    // With a calibration the plan runs the engine build it was fitted on (as a scenario naming one does).
    std::string engine_name = "vllm";
    if (!o.calibration.empty()) {
      spec.calibration = std::make_shared<const sim::CalibrationProfile>(sim::load_calibration(o.calibration));
      if (!spec.calibration->engine_profile.empty()) {
        try {
          engine_name = sim::engine_profile(spec.calibration->engine_profile).name;
        } catch (const Error&) {   // a build this binary has no profile of: the newest, and the header says nothing applies
        }
      }
    }
    if (!o.engine.empty()) engine_name = sim::engine_profile(o.engine, "--engine").name;   // over the calibration's build
    const sim::EngineProfile& profile = sim::engine_profile(engine_name);
    sim::apply_profile(profile, *spec.model, *spec.gpu, given, spec.engine);
    spec.frontend = sim::profile_frontend(profile);
    spec.frontend->client.warmup_barrier = false;   // the steady-state rule (sim/studies/plan.hpp)
    if (o.num_speculative_tokens && *o.num_speculative_tokens > 0)
      spec.mtp = sim::make_mtp(*spec.model, *o.num_speculative_tokens, mtp_acceptance_list(o.mtp_acceptance), spec.seed,
                               "--mtp-acceptance");

    // Default worker shape: the smallest that serves the model on this GPU (models/min_gpus).
    models::Parallelism base;
    if (!o.tp || !o.prefill_tp || !o.decode_tp) {
      const auto mg = models::min_gpus(*spec.model, *spec.gpu, spec.weights);
      if (mg.min_gpus == 0)
        throw Error("--model", "", spec.model->name + " does not fit on " + spec.gpu->name + " at " +
                                       std::string(hw::to_string(spec.weights)) + ": " + mg.note);
      base = mg.par;
    }
    auto shaped = [&](std::optional<int> tp, std::optional<int> dp) {
      models::Parallelism p = base;
      if (tp) p.tp = *tp;
      if (o.pp) p.pp = *o.pp;
      if (o.ep) p.ep = *o.ep;
      if (dp) {
        if (*dp < 1 || *dp > 64) throw Error("--dp", "", "attention data-parallel ranks must be between 1 and 64, got " + std::to_string(*dp));
        p.dp = *dp;
        if (*dp > 1 && !o.pp) p.pp = 1;   // attention DP runs without pipeline stages (the smallest shape's PP dropped)
      }
      return p;
    };
    const std::string t = text::lower(o.topology);
    if (t != "agg" && t != "disagg" && t != "both" && t != "aggregated" && t != "disaggregated")
      throw Error("--topology", "", "unknown topology '" + o.topology + "'; known: agg, disagg, both");
    if (t == "agg" || t == "aggregated" || t == "both") {
      sim::TopologyChoice a;
      a.agg = shaped(o.tp, o.dp);
      if (o.replicas) a.replicas = *o.replicas;
      topos.push_back(a);
    }
    if (t == "disagg" || t == "disaggregated" || t == "both") {
      sim::TopologyChoice d;
      d.kind = sim::TopologyChoice::Kind::disaggregated;
      d.prefill = shaped(o.prefill_tp ? o.prefill_tp : o.tp, o.prefill_dp ? o.prefill_dp : o.dp);
      d.decode = shaped(o.decode_tp ? o.decode_tp : o.tp, o.decode_dp ? o.decode_dp : o.dp);
      d.encode = shaped(o.tp, std::nullopt);
      d.prefill_workers = o.prefill_workers;
      d.decode_workers = o.decode_workers;
      d.encode_workers = o.encode_workers;
      topos.push_back(d);
    }
    for (const auto& tc : topos) {   // layouts the engine launches (vLLM: EP 1 or TP x DP)
      auto check = [&](const models::Parallelism& p) { sim::check_layout(profile, p, "command line", "--ep", "--dp"); };
      if (tc.kind == sim::TopologyChoice::Kind::aggregated) {
        check(tc.agg);
      } else {
        check(tc.prefill);
        check(tc.decode);
      }
    }
    for (const auto& tc : topos) deps.push_back(std::make_unique<sim::Deployment>(tc, spec));

    auto_concurrency = o.concurrency.empty();
    for (const auto& s : option_list(auto_concurrency ? std::string("1,2,4,8,16,32,64,128,256") : o.concurrency, "--concurrency")) {
      char* end = nullptr;
      const long v = std::strtol(s.c_str(), &end, 10);
      if (!end || *end || v < 1 || v > 100000) throw Error("--concurrency", "", "'" + s + "' is not a client count >= 1");
      conc.push_back(static_cast<int>(v));
    }
    if (conc.empty()) throw Error("--concurrency", "", "is empty");
  }

  int points() const { return static_cast<int>(deps.size() * conc.size()); }

  sim::SweepRow run(int k) const {
    if (k < 0 || k >= points()) throw Error("plan_point", "index", "must be in [0, " + std::to_string(points()) + ")");
    return run_at(static_cast<std::size_t>(k) / conc.size(), conc[static_cast<std::size_t>(k) % conc.size()]);
  }

  // Whether a swept point is under the SLO lines (TTFT; ITL, and the token gap with --gap-ms).
  bool passes(const sim::SweepRow& r) const {
    const int i = static_cast<int>(slo.statistic);
    // a growing queue fails in time
    return r.ttft_ms[i] <= slo.ttft_ms && sim::itl_side_ok(r, i, slo.itl_ms, slo.gap_ms) && !r.overloaded;
  }

  sim::SweepRow run_at(std::size_t dep, int c) const {
    const auto& d = *deps[dep];
    workloads::WorkloadConfig wc = sim::capacity_workload(c, o.requests, spec.seed, *o.isl, *o.osl);
    wc.multimodal = media;
    const sim::PointResult pr = d.run(wc);
    return sim::sweep_row(d.name(), c, pr, d.gpus());
  }

  // Open loop: the fewest copies of topology `dep` that meet both SLOs when the target rate is
  // split evenly over them (doubling from 1, then bisection; the SLO is taken to hold at every
  // rate below one that meets it). detail gets the copy's rate and figures.
  sim::PlanRow open_loop_row(std::size_t dep, nlohmann::json& detail) const {
    const sim::Deployment& d = *deps[dep];
    const sim::TopologyUnit u = d.unit();
    const double rps = slo.target_rps;   // the rate the copies are sized for
    auto point = [&](std::int64_t k) {
      const double rate = rps / double(k);
      workloads::WorkloadConfig wc =
          sim::open_loop_workload(rate, *arrival, o.burstiness.value_or(1.0), o.requests, spec.seed, *o.isl, *o.osl);
      wc.multimodal = media;
      const sim::PointResult pr = d.run(wc);
      return sim::sweep_row(d.name(), 0, pr.summary, d.gpus(), true);
    };
    const sim::CopiesSearch cs = sim::fewest_copies(point, [&](const sim::SweepRow& r) { return passes(r); });
    sim::PlanRow row;
    row.name = d.name();
    const int st = static_cast<int>(slo.statistic);
    if (cs.copies == 0) {
      detail = {{"name", d.name()}, {"feasible", false}, {"copies_tried", cs.tried.back().first}};
      row.limited_by = sim::LimitedBy::none;
      return row;
    }
    const std::int64_t hi = cs.copies, lo = cs.fewer;
    const sim::SweepRow& at_hi = *cs.at(hi);
    const sim::SweepRow at_lo = lo >= 1 ? *cs.at(lo) : sim::SweepRow{};
    row.feasible = true;
    // A copy that keeps up (not overloaded) serves its share of the offered rate: target / copies
    // (40 req/s x 600 tokens over 1 copy = 24,000 tok/s). aiperf's output_tps counts the ramp-up
    // and the drain in its time, so it reads lower; it stays in the detail.
    row.tps_per_replica = slo.target_tps / double(hi);
    sim::size_copies(row, u, double(hi), slo);
    if (lo >= 1) {   // what one copy fewer breaks
      const bool t = at_lo.ttft_ms[st] > slo.ttft_ms || at_lo.overloaded, i = !sim::itl_side_ok(at_lo, st, slo.itl_ms, slo.gap_ms);
      row.limited_by = t && i ? sim::LimitedBy::both : t ? sim::LimitedBy::ttft : i ? sim::LimitedBy::itl : sim::LimitedBy::none;
      row.gap_only = sim::gap_alone_breaks(at_lo, st, slo.itl_ms, slo.gap_ms);
    }
    detail = {{"name", d.name()}, {"feasible", true}, {"copies", hi}, {"rate_per_copy", rps / double(hi)},
              {"ttft_ms", at_hi.ttft_ms[st]}, {"itl_ms", at_hi.itl_ms[st]}, {"gap_ms", at_hi.gap_ms[st]},
              {"output_tps_per_copy", slo.target_tps / double(hi)},
              {"output_tps_per_copy_aiperf", at_hi.output_tps}};
    if (lo >= 1)
      detail["one_copy_fewer"] = {{"copies", lo}, {"rate_per_copy", rps / double(lo)}, {"ttft_ms", at_lo.ttft_ms[st]},
                                  {"itl_ms", at_lo.itl_ms[st]}, {"gap_ms", at_lo.gap_ms[st]}, {"served_rps_per_copy", at_lo.served_rps},
                                  {"in_flight_at_last_send", at_lo.in_flight_at_end}, {"overloaded", at_lo.overloaded}};
    detail["served_rps_per_copy"] = at_hi.served_rps;
    detail["overloaded"] = at_hi.overloaded;
    return row;
  }

  // The deployment description api::emit_deployment reads, for topology i sized by its plan row.
  nlohmann::json emit_desc(std::size_t i, const sim::PlanRow& row, const std::vector<sim::SweepRow>& rows) const {
    const sim::Deployment& d = *deps[i];
    const sim::TopologyChoice& tc = topos[i];
    const auto& cat = hw::Catalog::global();
    const std::int64_t copies = std::max<std::int64_t>(1, row.replicas);
    nlohmann::json j;
    j["name"] = spec.model->name + "-" + d.name();
    j["model"] = spec.model->name;
    j["precision"] = text::lower(std::string(hw::to_string(spec.weights)));
    j["kv_cache_dtype"] = text::lower(std::string(hw::to_string(spec.kv_dtype)));
    if (const std::string from = models::quantized_on_load_from(*spec.model, spec.weights); !from.empty() && spec.engine.kind == sim::EngineKind::vllm)
      j["checkpoint"] = from;   // no such checkpoint is published: vLLM quantizes this one as it loads
    j.update(sim::launch_knobs(spec.engine));   // the engine the plan ran: its launch files, Dynamo workers and scenario
    j["max_model_len"] = spec.engine.max_model_len > 0 ? spec.engine.max_model_len : spec.model->max_context;
    if (spec.mtp.enabled()) {   // MTP on the decode-carrying workers, at the acceptance the plan assumed
      j["num_speculative_tokens"] = spec.mtp.draft_tokens;
      j["mtp_acceptance"] = spec.mtp.acceptance;
    }
    j["kind"] = d.disaggregated() ? "disaggregated" : "aggregated";
    j["copies"] = copies;
    j["describe"] = d.describe() + ", " + std::to_string(copies) + (copies == 1 ? " copy" : " copies");
    const hw::InstanceSpec& pi = spec.prefill_instance ? *spec.prefill_instance : *spec.instance;
    const hw::InstanceSpec& di = spec.decode_instance ? *spec.decode_instance : *spec.instance;
    auto worker = [&](const char* role, int count, const models::Parallelism& p, const hw::InstanceSpec& in) {
      return nlohmann::json{{"role", role}, {"count", count * copies}, {"tp", p.tp}, {"pp", p.pp}, {"ep", p.ep}, {"dp", p.dp},
                            {"instance", in.name}, {"gpu", cat.gpu(in.gpu).name}};
    };
    nlohmann::json w = nlohmann::json::array();
    if (!d.disaggregated()) {
      w.push_back(worker("aggregated", int(d.placement().workers().size()), tc.agg, *spec.instance));
    } else {
      if (tc.encode_workers > 0) w.push_back(worker("encode", tc.encode_workers, tc.encode, pi));
      w.push_back(worker("prefill", tc.prefill_workers, tc.prefill, pi));
      w.push_back(worker("decode", tc.decode_workers, tc.decode, di));
    }
    j["workers"] = w;
    nlohmann::json inst = nlohmann::json::object();
    if (d.mixed_instances()) {
      // Per node group: the nodes one copy's workers occupy, times the copies.
      std::vector<std::set<int>> used(d.placement().groups().size());
      for (const auto& ws : d.placement().workers())
        for (int n = ws.first_node; n < ws.first_node + ws.nodes; ++n) used[std::size_t(ws.group)].insert(n);
      for (std::size_t k = 0; k < used.size(); ++k) {
        const std::string& name = d.placement().groups()[k].instance.name;
        inst[name] = inst.value(name, std::int64_t{0}) + std::int64_t(used[k].size()) * copies;
      }
    } else {
      inst[spec.instance->name] = std::max<std::int64_t>(1, row.instances);
    }
    j["instances"] = inst;
    j["isl"] = *o.isl;
    j["osl"] = *o.osl;
    j["images"] = nlohmann::json::array();
    for (const auto& x : media.images) j["images"].push_back({{"width", x.width_px}, {"height", x.height_px}, {"count", x.count}});
    j["image_fraction"] = media.fraction;
    j["vision"] = spec.model->has_vision;
    j["has_encode_workers"] = d.disaggregated() && tc.encode_workers > 0;
    std::vector<sim::SweepRow> mine;
    for (const auto& r : rows)
      if (r.topology == d.name()) mine.push_back(r);
    // The client counts this topology was simulated at (the sweep goes on past 256 while it meets
    // both SLOs), so aiperf-sweep.sh measures every point of predicted.csv.
    nlohmann::json simulated = nlohmann::json::array();
    for (const auto& r : mine) simulated.push_back(r.concurrency);
    j["concurrency"] = mine.empty() ? nlohmann::json(conc) : simulated;
    j["predicted"] = sim::sweep_columns(mine);
    j["predicted_axis"] = "clients_per_copy";
    j["slo"] = {{"ttft_ms", slo.ttft_ms}, {"itl_ms", slo.itl_ms}, {"gap_ms", slo.gap_ms},
                {"statistic", std::string(sim::to_string(slo.statistic))}};
    j["router"] = std::string(sim::to_string(spec.router));
    j["seed"] = spec.seed;
    if (arrival && row.feasible)
      j["rate_per_copy"] = slo.target_rps / double(copies), j["arrival"] = workloads::arrival_name(*arrival);
    if (spec.calibration) j["calibration"] = std::filesystem::absolute(spec.calibration->file).string();   // re-run as predicted
    return j;
  }

  nlohmann::json finish(const std::vector<sim::SweepRow>& rows) const {
    std::vector<sim::TopologyUnit> units;
    for (const auto& d : deps) units.push_back(d->unit());
    std::vector<sim::PlanRow> plan;
    nlohmann::json open = nlohmann::json::array();
    if (arrival) {
      for (std::size_t i = 0; i < deps.size(); ++i) {
        nlohmann::json detail;
        plan.push_back(open_loop_row(i, detail));
        open.push_back(detail);
      }
    } else {
      plan = sim::plan_capacity(rows, units, slo);
    }
    nlohmann::json j;
    if (!ran.empty()) j["ran"] = ran;
    j["model"] = spec.model->name;
    j["instance"] = spec.instance->name;
    j["nodes"] = o.nodes;
    j["gpu"] = spec.gpu->name;
    j["precision"] = std::string(hw::to_string(spec.weights));
    if (const std::string from = models::quantized_on_load_from(*spec.model, spec.weights); !from.empty() && spec.engine.kind == sim::EngineKind::vllm)
      j["checkpoint"] = from;   // no such checkpoint is published: vLLM quantizes this one as it loads
    j["kv_cache_dtype"] = std::string(hw::to_string(spec.kv_dtype));
    j["defaults"] = notes;
    j["isl"] = *o.isl;
    j["osl"] = *o.osl;
    j["vision_tokens_per_request"] = workloads::vision_work(media).tokens;
    j["image_fraction"] = media.fraction;
    j["slo"] = {{"ttft_ms", slo.ttft_ms}, {"itl_ms", slo.itl_ms}, {"gap_ms", slo.gap_ms},
                {"statistic", std::string(sim::to_string(slo.statistic))}};
    j["ttft_ms"] = slo.ttft_ms;   // flat copies for python/servesim/plot.py
    j["itl_ms"] = slo.itl_ms;
    j["gap_ms"] = slo.gap_ms;
    j["statistic"] = std::string(sim::to_string(slo.statistic));
    j["target"] = {{"output_tps", slo.target_tps / (1 + slo.headroom)}};
    if (o.target_rps) j["target"]["requests_per_s"] = *o.target_rps;   // the rate it came from, open or closed loop
    if (slo.headroom > 0) {   // the copies are sized for the target x (1 + headroom)
      j["target"]["headroom"] = slo.headroom;
      j["target"]["sized_output_tps"] = slo.target_tps;
      if (o.target_rps) j["target"]["sized_requests_per_s"] = slo.target_rps;
    }
    j["method"] = arrival ? sim::open_loop_rule(o.requests) : sim::capacity_rule(o.requests);
    j["input_config"] = plan_input_config(o);
    if (arrival) {
      j["arrival"] = workloads::arrival_name(*arrival);
      j["open_loop"] = open;
    }
    j["topologies"] = nlohmann::json::array();
    for (std::size_t i = 0; i < plan.size(); ++i) {
      auto r = plan[i].to_json();
      if (arrival && plan[i].feasible && plan[i].replicas == 1 && plan[i].limited_by == sim::LimitedBy::none)
        r["advice"] = "one copy meets both SLOs at the whole rate";
      if (plan[i].feasible) {   // spare capacity over the target, as recommend's
        const nlohmann::json fewer = arrival ? open[i].value("one_copy_fewer", nlohmann::json()) : nlohmann::json();
        r["spare_pct"] = sim::spare_pct(double(plan[i].replicas) * plan[i].tps_per_replica, slo.target_tps / (1 + slo.headroom),
                                        double(plan[i].replicas), fewer.is_object() ? fewer["copies"].get<double>() : 0.0);
      }
      r["gpus_per_replica"] = units[i].gpus;
      r["instances_per_replica"] = units[i].instances;
      r["deployment"] = deps[i]->describe();
      // A request that carries the media holds its vision tokens in the cache too (as simulate,
      // search and recommend count them).
      const std::int64_t ctx = *o.isl + *o.osl + (media.empty() ? 0 : workloads::vision_work(media).tokens);
      r["kv_cache"] = kv_cache_json(deps[i]->memory_plan(), ctx);
      const std::string user = deps[i]->user_calibration();
      sim::WhatRan w{spec.model->name, deps[i]->describe(), &spec.engine, &deps[i]->memory_plan(), ctx,
                     deps[i]->calibration() + (user.empty() ? "" : "; user calibration: " + user)};
      r["what_ran"] = sim::what_ran_json(w);
      r["emit"] = emit_desc(i, plan[i], rows);
      j["topologies"].push_back(r);
    }
    if (spec.calibration) {
      const sim::Deployment& d = *deps.front();
      j["calibration"] = sim::to_json(sim::applicable(*spec.calibration, spec.gpu->name, spec.engine.engine_profile, spec.model->name,
                                                        std::string(hw::to_string(spec.weights))),
                                      *spec.calibration);
      j["calibration"]["summary"] = d.user_calibration();
    }
    j["sweep"] = {{"columns", sim::sweep_columns(rows)}};
    add_bands(rows, j);
    return j;
  }

  // Prediction bands of the p50 TTFT/ITL and of the output throughput of every swept point, by
  // the point's kind: the GPU and the load regime (clients per serving replica or decode worker).
  void add_bands(const std::vector<sim::SweepRow>& rows, nlohmann::json& j) const {
    namespace v = sim::validate;
    nlohmann::json& c = j["sweep"]["columns"];
    const std::string gpu = text::lower(spec.gpu->name);
    const std::string engine =
        sim::engine_profile(spec.engine.engine_profile.empty() ? sim::kNewestEngine : spec.engine.engine_profile).engine;
    // A calibrated plan on the GPU, engine build and model its profile was fitted on takes the
    // profile's cross-validated bands (as simulate does); any other the validated ones.
    const bool own = deps.front()->calibrated_on(gpu);
    const v::BandTable& table = own ? spec.calibration->bands : v::embedded_bands();
    std::vector<std::string> regimes, modes;
    for (const auto& r : rows) {
      int serving = 1;
      bool disaggregated = false;
      for (const auto& d : deps)
        if (d->name() == r.topology) {
          int n = 0;
          for (const auto& w : d->placement().workers())
            n += w.name.rfind(d->disaggregated() ? "decode" : "replica", 0) == 0;
          serving = std::max(1, n);
          disaggregated = d->disaggregated();
        }
      regimes.push_back(v::load_regime(double(r.concurrency) / serving, spec.engine.max_num_seqs));
      modes.push_back(v::band_mode(disaggregated));
    }
    auto band_cols = [&](const std::string& name, const char* metric, auto value) {
      nlohmann::json lo = nlohmann::json::array(), hi = nlohmann::json::array();
      for (std::size_t i = 0; i < rows.size(); ++i) {
        const v::Band b = v::band_for(table, gpu, engine, modes[i], metric, regimes[i], value(rows[i]));
        lo.push_back(b.present ? nlohmann::json(b.lo) : nlohmann::json(nullptr));
        hi.push_back(b.present ? nlohmann::json(b.hi) : nlohmann::json(nullptr));
      }
      c[name + "_band_lo"] = std::move(lo);
      c[name + "_band_hi"] = std::move(hi);
    };
    band_cols("ttft_p50_ms", "ttft", [](const sim::SweepRow& r) { return r.ttft_ms[0]; });
    band_cols("itl_p50_ms", "itl", [](const sim::SweepRow& r) { return r.itl_ms[0]; });
    band_cols("output_tps", "output_tps", [](const sim::SweepRow& r) { return r.output_tps; });
    c["load_regime"] = regimes;
    j["prediction_band"] = {{"gpu", gpu}, {"columns", "*_band_lo, *_band_hi (null: no measured runs of this kind)"},
                            {"source", own ? "cross-validated residuals of the calibration " + spec.calibration->file
                                           : v::embedded_bands().meta.value("summary", std::string("none embedded"))}};
  }
};

nlohmann::json row_json(const sim::SweepRow& r) { return sim::to_json(r); }

sim::SweepRow row_from(const nlohmann::json& j) { return sim::sweep_row_from_json(j, "plan_finish"); }

}  // namespace

nlohmann::json plan(const PlanArgs& a, const std::function<void(int, int)>& progress) {
  const Study st(a);
  const int n = st.points();
  std::vector<sim::SweepRow> rows(static_cast<std::size_t>(n));
  sim::parallel_for(n, a.threads, [&](int k) { rows[static_cast<std::size_t>(k)] = st.run(k); }, "--threads", progress);
  if (st.auto_concurrency) {
    // Without --concurrency, a topology still under both SLO lines at its highest point is swept
    // on (x1.5, x4/3 alternately) until a line is crossed or 4096 clients: the plan then reads
    // the capacity where the SLO binds, not where the default list happened to stop.
    std::vector<std::size_t> dep_of(rows.size());
    for (std::size_t k = 0; k < rows.size(); ++k) dep_of[k] = k / st.conc.size();
    std::vector<int> last(st.deps.size(), st.conc.back());
    for (;;) {
      std::vector<std::pair<std::size_t, int>> todo;
      for (std::size_t d = 0; d < st.deps.size(); ++d) {
        const sim::SweepRow* top = nullptr;
        for (std::size_t k = 0; k < rows.size(); ++k)
          if (dep_of[k] == d && rows[k].concurrency == last[d]) top = &rows[k];
        if (!top || !st.passes(*top) || last[d] >= 4096) continue;
        const int next = (last[d] & (last[d] - 1)) == 0 ? last[d] * 3 / 2 : last[d] * 4 / 3;   // 256 -> 384 -> 512 -> 768
        todo.emplace_back(d, next);
        last[d] = next;
      }
      if (todo.empty()) break;
      std::vector<sim::SweepRow> more(todo.size());
      sim::parallel_for(static_cast<int>(todo.size()), a.threads, [&](int k) {
        more[static_cast<std::size_t>(k)] = st.run_at(todo[static_cast<std::size_t>(k)].first, todo[static_cast<std::size_t>(k)].second);
      }, "--threads");
      for (std::size_t k = 0; k < todo.size(); ++k) {
        rows.push_back(more[k]);
        dep_of.push_back(todo[k].first);
      }
    }
    // Topology by topology, concurrency ascending, as with a given list.
    std::vector<std::size_t> order(rows.size());
    for (std::size_t k = 0; k < order.size(); ++k) order[k] = k;
    std::stable_sort(order.begin(), order.end(), [&](std::size_t x, std::size_t y) {
      return dep_of[x] != dep_of[y] ? dep_of[x] < dep_of[y] : rows[x].concurrency < rows[y].concurrency;
    });
    std::vector<sim::SweepRow> sorted;
    for (std::size_t k : order) sorted.push_back(rows[k]);
    rows = std::move(sorted);
  }
  return st.finish(rows);
}

int plan_points(const PlanArgs& a) { return Study(a).points(); }

nlohmann::json plan_point(const PlanArgs& a, int index) { return row_json(Study(a).run(index)); }

nlohmann::json plan_finish(const PlanArgs& a, const nlohmann::json& rows) {
  const Study st(a);
  if (!rows.is_array() || static_cast<int>(rows.size()) != st.points())
    throw Error("plan_finish", "rows", "expected " + std::to_string(st.points()) + " rows from plan_point, in index order");
  std::vector<sim::SweepRow> r;
  for (const auto& x : rows) r.push_back(row_from(x));
  return st.finish(r);
}

}  // namespace servesim::api
