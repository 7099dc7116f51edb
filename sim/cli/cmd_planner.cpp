// `servesim planner`: a day of traffic (a diurnal curve scaled to a peak, or a CSV of time ->
// request rate) through aggregated replicas, or the prefill and decode workers of a disaggregated
// topology, scaled by Dynamo's planner rules, as one
// simulation (sim/studies/planner.hpp). Prints workers and SLO attainment over time, GPU-hours and
// $ against a fixed fleet sized for the peak; --plot draws load, workers and p90 TTFT / ITL.
#include <algorithm>
#include <cmath>
#include <limits>

#include "common/error.hpp"
#include "common/files.hpp"
#include "common/table.hpp"
#include "common/text.hpp"
#include "hwmodels/catalog.hpp"
#include "sim/api/api.hpp"
#include "sim/simulate.hpp"
#include "sim/cli/commands.hpp"
#include "sim/cli/plot_runner.hpp"
#include "sim/studies/planner.hpp"
#include "workloads/multimodal.hpp"

namespace servesim::cli {
namespace {

struct PlannerOpts {
  std::shared_ptr<ScenarioFlags> flags;
  std::string load_profile = "diurnal", arrivals = "poisson", rule = "throughput", plot, emit_dir;
  double peak_rps = 0, trough_fraction = 0.2, hours = 24, interval_s = 180, ttft_ms = 0, itl_ms = 0;
  double replica_rps = 0, prefill_rps = 0, decode_rps = 0, storage_gbps = 10, startup_extra_s = 0;
  double reserved_price = std::numeric_limits<double>::quiet_NaN(), reserved_discount = -1;   // NaN: not given
  double metric_interval = 10, kv_up = 0.9, kv_down = 0.5, queue_up = 5.0, queue_down = 0.2;
  int min_workers = 1, max_workers = 0;
  bool no_fixed_fleet = false, quiet = false;
  Format format = Format::table;
};

std::string val(double v, int d) { return std::isfinite(v) ? fixed(v, d) : "-"; }

// What the planner found, as Dynamo's planner is configured: the rule, the interval, the SLO and,
// per role, the fewest and most workers the day held (its autoscaling bounds), the opening fleet
// and one worker's capacity; the most GPUs held at once is the GPU budget.
nlohmann::json planner_bounds(const sim::PlannerResult& r, const sim::PlannerSpec& spec) {
  nlohmann::json roles = nlohmann::json::array();
  for (std::size_t ri = 0; ri < r.roles.size(); ++ri) {
    int lo = r.roles[ri].peak_workers, hi = 0;
    for (const auto& iv : r.timeline)
      if (ri < iv.roles.size()) lo = std::min(lo, iv.roles[ri].held), hi = std::max(hi, iv.roles[ri].held);
    const int opening = !r.timeline.empty() && ri < r.timeline.front().roles.size() ? r.timeline.front().roles[ri].held : lo;
    roles.push_back({{"name", r.roles[ri].name}, {"gpus_per_worker", r.roles[ri].gpus_per_worker},
                     {"capacity_rps", r.roles[ri].capacity_rps}, {"capacity_given", r.roles[ri].capacity_given},
                     {"min_workers", std::max(lo, 0)}, {"max_workers", std::max(hi, lo)}, {"opening_workers", opening},
                     {"fixed_fleet_workers", r.roles[ri].peak_workers}, {"startup_s", r.roles[ri].startup_s}});
  }
  int budget = 0;
  for (std::size_t g = 0; g < r.seconds_at_gpus.size(); ++g)
    if (r.seconds_at_gpus[g] > 0) budget = int(g);
  const bool load = spec.rule == sim::PlannerSpec::Rule::load;
  nlohmann::json p = {{"rule", load ? "load" : "throughput"}, {"adjustment_interval_s", spec.interval_s},
                      {"ttft_ms", spec.ttft_ms}, {"itl_ms", spec.itl_ms}, {"statistic", "p90"},
                      {"min_workers", spec.min_workers}, {"max_gpu_budget", budget}, {"roles", roles},
                      {"slo_attainment", r.slo_attainment}, {"gpu_hours", r.gpu_hours},
                      {"fixed_fleet_gpu_hours", r.fixed_fleet_gpu_hours}, {"peak_rps", spec.profile.peak()}};
  if (load)
    p.update({{"metric_interval_s", spec.metric_interval_s}, {"queue_scale_up", spec.queue_up}, {"queue_scale_down", spec.queue_down},
              {"kv_scale_up", spec.kv_up}, {"kv_scale_down", spec.kv_down}});
  return p;
}

// The deployment the planner scaled, as the emitter takes it: the engine as simulated, one worker
// entry per role with the opening fleet as its count.
nlohmann::json planner_deployment(const sim::Scenario& s, const sim::PlannerResult& r, const nlohmann::json& bounds) {
  const sim::Prepared p = sim::prepare(s);
  const sim::EngineConfig e = sim::resolved_engine(s, *p.model, *p.gpu);
  const auto& cat = hw::Catalog::global();
  const std::string inst = !s.topology.instance.empty() ? cat.instance(s.topology.instance).name : r.instance;
  if (inst.empty()) throw Error("--emit", "", "no catalogue instance holds " + p.gpu->name + " GPUs: give --instance");
  // Unset: vLLM's default, the model's max_position_embeddings (as the simulated workers ran).
  const std::int64_t max_len = e.max_model_len > 0 ? e.max_model_len : p.engine.max_model_len > 0 ? p.engine.max_model_len
                                                                                                  : p.model->max_context;
  nlohmann::json d = {{"name", s.model + "-planner"}, {"model", s.model},
                      {"precision", text::lower(std::string(hw::to_string(s.precision)))},
                      {"kv_cache_dtype", text::lower(std::string(hw::to_string(s.kv_cache_dtype)))},
                      {"max_model_len", max_len}, {"max_num_seqs", e.max_num_seqs},
                      {"max_num_batched_tokens", e.max_num_batched_tokens}, {"gpu_memory_utilization", e.gpu_memory_utilization},
                      {"engine", e.engine_profile}, {"engine_kind", std::string(sim::to_string(e.kind))},
                      {"enable_chunked_prefill", e.enable_chunked_prefill}, {"enable_prefix_caching", e.enable_prefix_caching},
                      {"kind", r.disaggregated ? "disaggregated" : "aggregated"}, {"copies", 1},
                      {"router", std::string(sim::to_string(s.router))}, {"vision", p.model->has_vision},
                      {"has_encode_workers", false}, {"seed", s.seed}};
  d["isl"] = std::max<std::int64_t>(1, std::llround(s.workload.isl.mean));
  d["osl"] = std::max<std::int64_t>(1, std::llround(s.workload.osl.mean));
  nlohmann::json workers = nlohmann::json::array();
  for (const auto& b : bounds["roles"]) {
    const std::string name = b["name"];
    const int tp = name == "prefill" && s.topology.prefill_tp > 0 ? s.topology.prefill_tp
                   : name == "decode" && s.topology.decode_tp > 0 ? s.topology.decode_tp
                                                                  : s.par.tp;
    const bool whole = name == "replica";
    workers.push_back({{"role", whole ? "aggregated" : name}, {"count", std::max(1, b["opening_workers"].get<int>())}, {"tp", tp},
                       {"pp", whole ? s.par.pp : 1}, {"ep", whole ? s.par.ep : 1}, {"dp", whole ? s.par.dp : 1},
                       {"instance", inst}, {"gpu", p.gpu->name}});
  }
  d["workers"] = workers;
  d["instances"] = {{inst, 1}};
  d["describe"] = std::string(r.disaggregated ? "prefill and decode workers" : "aggregated replicas") + " of " + s.model + " on " +
                  p.gpu->name + " scaled by Dynamo's planner (" + bounds["rule"].get<std::string>() + " rule)";
  return d;
}

void run(const PlannerOpts& o) {
  if (!o.plot.empty()) check_writable_target(o.plot, "--plot");
  api::DeploymentSet set;
  if (!o.emit_dir.empty()) set.prepare(o.emit_dir, false);   // a bad folder is refused before the day is simulated
  nlohmann::json a = {{"load_profile", o.load_profile}, {"peak_rps", o.peak_rps}, {"trough_fraction", o.trough_fraction},
                      {"hours", o.hours}, {"arrivals", o.arrivals}, {"adjustment_interval", o.interval_s},
                      {"ttft_ms", o.ttft_ms}, {"itl_ms", o.itl_ms}, {"min_workers", o.min_workers},
                      {"max_workers", o.max_workers}, {"replica_rps", o.replica_rps}, {"storage_gbps", o.storage_gbps},
                      {"startup_extra_s", o.startup_extra_s}, {"fixed_fleet", !o.no_fixed_fleet},
                      {"prefill_rps", o.prefill_rps}, {"decode_rps", o.decode_rps}, {"rule", o.rule},
                      {"metric_interval", o.metric_interval}, {"kv_scale_up", o.kv_up}, {"kv_scale_down", o.kv_down},
                      {"queue_scale_up", o.queue_up}, {"queue_scale_down", o.queue_down}};
  if (!std::isnan(o.reserved_price)) a["reserved_price"] = o.reserved_price;
  if (o.reserved_discount >= 0) a["reserved_discount"] = o.reserved_discount;
  const sim::PlannerSpec spec = sim::planner_spec(a, "planner");
  const sim::Scenario s = scenario_from_flags(*o.flags);
  sim::check_planner_roles(s, spec);
  const sim::PlannerResult r = sim::run_planner(s, spec);
  nlohmann::json j = sim::to_json(r, spec);
  j["input_config"] = sim::planner_input_config(s, a);
  if (!o.emit_dir.empty()) {
    const nlohmann::json bounds = planner_bounds(r, spec);
    set.add_planner(planner_deployment(s, r, bounds), bounds, o.emit_dir);
    j["planner_bounds"] = bounds;
  }
  if (!o.plot.empty()) {
    AtomicFiles scratch;   // discarded: the data file is the plotter's input only
    const std::string data = scratch.write(o.plot + ".json", j.dump());
    run_python_module("servesim.planner_plot", {data, o.plot}, "--plot");
  }
  if (!o.emit_dir.empty()) j["emitted"] = set.commit();
  const bool load = spec.rule == sim::PlannerSpec::Rule::load;
  std::string out = "servesim planner: " + s.model + " on " + s.gpu + (r.disaggregated ? ", disaggregated" : "") + ", " +
                    (load ? "load" : "throughput") + " rule, adjustment every " + fixed(spec.interval_s, 0) + " s, SLO TTFT " +
                    val(spec.ttft_ms, 0) + " ms / ITL " + val(spec.itl_ms, 0) + " ms\n" + sim::what_ran_text(j["what_ran"]);
  if (load)
    out += "load rule: metrics every " + fixed(spec.metric_interval_s, 0) + " s; one worker more above, one fewer below: queued prefill " +
           fixed(spec.queue_up, 2) + " / " + fixed(spec.queue_down, 2) + " prompts per worker (prefill" +
           (r.disaggregated ? "" : ", replicas") + "), KV-cache utilisation " + fixed(spec.kv_up, 2) + " / " + fixed(spec.kv_down, 2) +
           " (decode" + (r.disaggregated ? "" : ", replicas") + ")\n";
  for (const auto& x : r.roles)
    out += "one " + (x.name == "replica" ? std::string("worker") : x.name + " worker") + " (" + std::to_string(x.gpus_per_worker) +
           " GPU" + (x.gpus_per_worker > 1 ? "s" : "") + ") serves " + fixed(x.capacity_rps, 3) + " requests/s within the SLO (p90, " +
           (x.capacity_given ? std::string("given") : std::string("profiled by simulation")) + "); peak " +
           fixed(spec.profile.peak(), 2) + " requests/s" +
           // A short --hours window of the diurnal curve may end before its peak.
           (o.peak_rps > 0 && spec.profile.peak() < 0.99 * o.peak_rps
                ? " (the most the simulated hours reach; --peak-rps " + compact(o.peak_rps) + " falls outside them)"
                : std::string()) +
           " -> fixed fleet " + std::to_string(x.peak_workers) + "; start-up " +
           fixed(x.startup_s, 1) + " s (weights at " + fixed(o.storage_gbps, 1) + " GB/s)\n";
  if (r.disaggregated && !load && !r.roles.empty()) {   // what the token rates are divided by
    const auto& mm = s.workload.multimodal;
    out += "mean prompt " + fixed(r.roles[0].mean_prompt_tokens, 0) + " tokens" +
           (r.mean_vision_tokens > 0 ? " (text " + fixed(s.workload.isl.expected_mean(), 0) + " + " + fixed(100 * mm.fraction, 0) +
                                           " % of requests x " + std::to_string(workloads::vision_work(mm).tokens) + " vision tokens)"
                                     : std::string()) +
           ", mean answer " + fixed(r.roles[0].mean_answer_tokens, 0) +
           " tokens: prefill workers = ceil(prompt tokens/s / (capacity x mean prompt)), decode the same in answer tokens\n";
  }
  out += "\n";
  std::vector<std::string> head = {"hour", "offered rps", "observed rps"};
  for (const auto& x : r.roles) {
    const std::string n = x.name == "replica" ? "workers" : x.name;
    head.push_back(n);
    head.push_back(n + " held");
    if (load) head.push_back(x.name == "decode" ? "KV util" : x.name == "prefill" ? "queue" : "queue / KV");
  }
  for (const char* h : {"requests", "SLO met", "TTFT p90 ms", "ITL p90 ms"}) head.push_back(h);
  Table t(head);
  const std::size_t every = std::max<std::size_t>(1, static_cast<std::size_t>(std::llround(3600 / spec.interval_s)));
  for (std::size_t k = 0; k < r.timeline.size(); k += every) {
    const auto& x = r.timeline[k];
    std::vector<std::string> row = {fixed(x.start_s / 3600, 2), fixed(x.offered_rps, 2), fixed(x.observed_rps, 2)};
    for (std::size_t ri = 0; ri < r.roles.size(); ++ri) {
      const sim::RoleInterval ro = ri < x.roles.size() ? x.roles[ri] : sim::RoleInterval{};
      row.push_back(std::to_string(ro.ready));
      row.push_back(std::to_string(ro.held));
      if (load)
        row.push_back(r.roles[ri].name == "decode"    ? val(ro.kv_utilization, 2)
                      : r.roles[ri].name == "prefill" ? val(ro.queue, 2)
                                                      : val(ro.queue, 2) + " / " + val(ro.kv_utilization, 2));
    }
    row.push_back(std::to_string(x.requests));
    row.push_back(x.requests > 0 ? fixed(100.0 * double(x.good) / double(x.requests), 1) + "%" : "-");
    row.push_back(val(x.ttft_p90_ms, 1));
    row.push_back(val(x.itl_p90_ms, 2));
    t.add_row(row);
  }
  out += t.render() + "(the first interval of each hour; --format json has every interval)\n\n";
  out += "requests " + std::to_string(r.requests) + ", SLO met by " + fixed(100 * r.slo_attainment, 2) + "% (fixed fleet: " +
         (std::isfinite(r.fixed_fleet_slo_attainment) ? fixed(100 * r.fixed_fleet_slo_attainment, 2) + "%" : std::string("-")) + ")\n";
  // Short runs hold a fraction of a GPU-hour: two decimals below 1, one below 1000.
  auto amount = [](double v) { return fixed(v, v < 1 ? 2 : v < 1000 ? 1 : 0); };
  const double saved = 1 - r.gpu_hours / r.fixed_fleet_gpu_hours;
  out += "GPU-hours " + amount(r.gpu_hours) + " against " + amount(r.fixed_fleet_gpu_hours) + " for the fixed fleet (" +
         (saved >= 0 ? fixed(100 * saved, 1) + "% saved)" : fixed(-100 * saved, 1) + "% more than the fixed fleet)");
  if (r.usd_per_gpu_hour)
    out += "; $" + amount(r.gpu_hours * *r.usd_per_gpu_hour) + " against $" + amount(r.fixed_fleet_gpu_hours * *r.usd_per_gpu_hour) +
           " at " + r.instance + " on-demand ($" + fixed(*r.usd_per_gpu_hour, 2) + " per GPU-hour)";
  if (r.usd_per_gpu_hour && !r.instance.empty()) {
    // GPUs come in whole instances: the fleet's peak on nodes, as a purchase or a reservation counts them.
    const auto& inst = hw::Catalog::global().instance(r.instance);
    int peak = 0;
    for (std::size_t g = 0; g < r.seconds_at_gpus.size(); ++g)
      if (r.seconds_at_gpus[g] > 0) peak = int(g);
    const int nodes = (peak + inst.gpus - 1) / inst.gpus;
    if (nodes > 0 && inst.usd_per_hour) {
      const double held_usd = nodes * *inst.usd_per_hour * spec.profile.duration_s / 3600;
      out += "\n(priced per GPU-hour; the peak of " + std::to_string(peak) + " GPUs takes " + std::to_string(nodes) + " whole " +
             r.instance + " node" + (nodes > 1 ? "s" : "") + ": $" + amount(held_usd) + " over the " +
             compact(spec.profile.duration_s / 3600) + " h if held throughout)";
      // The period's $ over its answers (requests x the mean answer), as recommend's $/M output tok is at the peak around the clock.
      const double mtok = double(r.requests) * (r.roles.empty() ? 0.0 : r.roles.front().mean_answer_tokens) / 1e6;
      if (mtok > 0)
        out += "\n$ per million output tokens over the period (" + compact(mtok) + " M tokens: " + std::to_string(r.requests) +
               " requests x " + fixed(r.roles.front().mean_answer_tokens, 0) + "): $" + fixed(r.gpu_hours * *r.usd_per_gpu_hour / mtok, 2) +
               " scaled per GPU-hour, $" + fixed(held_usd / mtok, 2) + " on the whole node" + (nodes > 1 ? "s" : "") + " held throughout";
    }
  }
  if (r.reserved) {   // reserved baseline + on-demand above it, with the arithmetic
    const sim::ReservedSplit& x = *r.reserved;
    out += "\n\nreserved + on-demand over " + fixed(x.span_h, 2) + " h: reserved $" + fixed(x.reserved_usd_per_gpu_hour, 3) +
           " per GPU-hour (" + x.reserved_source + "), on-demand $" + fixed(x.on_demand_usd_per_gpu_hour, 3) + " (" +
           x.on_demand_source + ")\n";
    Table rt({"reserved GPUs", "reserved $", "on-demand GPU-hours above", "on-demand $", "total $", ""});
    for (std::size_t i = 0; i < x.options.size(); ++i) {
      const auto& op = x.options[i];
      rt.add_row({std::to_string(op.reserved_gpus),
                  std::to_string(op.reserved_gpus) + " x " + fixed(x.span_h, 2) + " h x " + fixed(x.reserved_usd_per_gpu_hour, 3) +
                      " = " + fixed(op.reserved_usd, 2),
                  fixed(op.on_demand_gpu_hours, 3),
                  fixed(op.on_demand_gpu_hours, 3) + " x " + fixed(x.on_demand_usd_per_gpu_hour, 3) + " = " + fixed(op.on_demand_usd, 2),
                  fixed(op.total_usd, 2), i == x.best ? "cheapest" : ""});
    }
    const auto& b = x.options[x.best];
    out += rt.render() + "cheapest: reserve " + std::to_string(b.reserved_gpus) + " GPUs and rent " + fixed(b.on_demand_gpu_hours, 1) +
           " GPU-hours on demand for the peaks: $" + fixed(b.reserved_usd, 2) + " + $" + fixed(b.on_demand_usd, 2) + " = $" +
           fixed(b.total_usd, 2) + " (all on demand: $" + fixed(x.options.front().total_usd, 2) + ")";
  }
  out += "\nsimulated in " + fixed(r.wall_s, 1) + " s\n";
  if (j.contains("planner_bounds")) {
    out += "Deployment files: " + o.emit_dir + (o.emit_dir.back() == '/' ? "" : "/") + " (Dynamo manifest with the Planner service; bounds per role:";
    for (const auto& b : j["planner_bounds"]["roles"])
      out += " " + b["name"].get<std::string>() + " " + b["min_workers"].dump() + ".." + b["max_workers"].dump() + ",";
    out += " at most " + j["planner_bounds"]["max_gpu_budget"].dump() + " GPUs; planner.json)\n";
  }
  emit(o.format, j, out);
}

}  // namespace

void add_planner_command(CLI::App& app) {
  auto o = std::make_shared<PlannerOpts>();
  CLI::App* c = app.add_subcommand("planner", "A day of load through replicas (or prefill and decode workers) that Dynamo's planner scales: workers, SLO "
                                              "attainment and GPU-hours against a fixed fleet sized for the peak");
  o->flags = add_scenario_flags(*c);
  auto* g = "Planner";
  c->add_option("--load-profile", o->load_profile, "diurnal (built in) or a CSV of time_s (or time_h) and rps")->group(g);
  c->add_option("--peak-rps", o->peak_rps, "Peak request rate (the diurnal curve's; a CSV is rescaled to it when given)")->group(g);
  c->add_option("--trough-fraction", o->trough_fraction, "Diurnal trough as a fraction of the peak (default 0.2)")->group(g);
  c->add_option("--hours", o->hours, "Hours of the diurnal profile (default 24)")->group(g);
  c->add_option("--arrivals", o->arrivals, "poisson (default) or uniform (evenly spaced at the rate)")->group(g);
  c->add_option("--adjustment-interval", o->interval_s, "Seconds between planner decisions (default 180)")->group(g);
  c->add_option("--ttft-ms", o->ttft_ms, "SLO on time to first token (ms)")->group(g);
  c->add_option("--itl-ms", o->itl_ms, "SLO on inter-token latency (ms)")->group(g);
  c->add_option("--min-workers", o->min_workers, "Fewest workers (default 1)")->group(g);
  c->add_option("--max-workers", o->max_workers, "Most workers (default twice the peak fleet)")->group(g);
  c->add_option("--rule", o->rule, "throughput (default: Dynamo's SLA planner, workers = load / one worker's capacity) or load "
                                   "(one worker more or fewer on queued prefill and KV-cache utilisation thresholds)")->group(g);
  c->add_option("--replica-rps", o->replica_rps, "Requests/s one worker serves within the SLO (default: profiled by simulation)")->group(g);
  c->add_option("--prefill-rps", o->prefill_rps, "--topology disagg: requests/s one prefill worker serves within the SLO (default: profiled)")->group(g);
  c->add_option("--decode-rps", o->decode_rps, "--topology disagg: requests/s one decode worker serves within the SLO (default: profiled)")->group(g);
  c->add_option("--metric-interval", o->metric_interval, "Load rule: seconds between metric samples (default 10)")->group(g);
  c->add_option("--kv-scale-up", o->kv_up, "Load rule: add a decode worker (replica) above this mean KV-cache utilisation (default 0.9)")->group(g);
  c->add_option("--kv-scale-down", o->kv_down, "Load rule: remove one below it (default 0.5)")->group(g);
  c->add_option("--queue-scale-up", o->queue_up, "Load rule: add a prefill worker (replica) above this many queued prompts per worker "
                                                 "(queued prompt tokens / mean prompt; default 5)")->group(g);
  c->add_option("--queue-scale-down", o->queue_down, "Load rule: remove one below it (default 0.2)")->group(g);
  c->add_option("--storage-gbps", o->storage_gbps, "Weight loading bandwidth per starting worker, GB/s (default 10: FSx for Lustre, "
                                                   "10 TiB at 1,000 MB/s per TiB)")->group(g);
  c->add_option("--startup-extra-s", o->startup_extra_s, "Start-up time beyond reading the weights (default 0)")->group(g);
  c->add_option("--reserved-price", o->reserved_price, "Reserved (committed) price per GPU-hour in $: prices the cheapest reserved "
                                                       "baseline + on-demand peaks (the catalogue has on-demand prices only)")->group(g);
  c->add_option("--reserved-discount", o->reserved_discount, "... or the reserved discount on the on-demand price, 0..1 (e.g. 0.4)")->group(g);
  c->add_flag("--no-fixed-fleet", o->no_fixed_fleet, "Skip simulating the peak-sized fixed fleet")->group(g);
  c->add_option("--plot", o->plot, "Chart (.png) of load, workers and p90 TTFT / ITL over time")->group(g);
  static const CLI::Validator named([](std::string& v) { return v.empty() ? std::string("give a folder name") : ""; }, "DIR");
  c->add_option("--emit", o->emit_dir, "Write the Dynamo manifest with its Planner service (the rule and the per-role autoscaling "
                                       "bounds the day needed), planner.json and the engine script to DIR")->check(named)->group(g);
  add_format_option(*c, o->format);
  add_quiet_flag(*c, o->quiet);
  c->callback([o] { run(*o); });
}

}  // namespace servesim::cli
