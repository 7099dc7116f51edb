// `servesim plan`: a concurrency sweep of each topology (run on the fly, points in parallel),
// then the SLO capacity plan read off it (sim/api/plan.cpp): the rightmost concurrency under the
// TTFT and ITL lines, the output tokens/s one copy of the topology serves there, copies for the
// target, GPUs, instances, $/hour and the limiting side. --plot draws the charts through
// python/servesim.
#include <algorithm>
#include <cstdio>
#include <cmath>
#include <memory>
#include <sstream>

#include "common/error.hpp"
#include "common/files.hpp"
#include "common/table.hpp"
#include "common/text.hpp"
#include "hwmodels/catalog.hpp"
#include "sim/api/api.hpp"
#include "sim/cli/commands.hpp"
#include "sim/studies/plan.hpp"
#include "sim/validate/bands.hpp"
#include "sim/cli/plot_runner.hpp"
#include "sim/simulate.hpp"

namespace servesim::cli {
namespace {

struct PlanOpts {
  api::PlanArgs args;
  std::string plot, emit_dir;
  Format format = Format::table;
  bool quiet = false;
};

std::string str(const nlohmann::json& v) { return v.get<std::string>(); }
std::string num(const nlohmann::json& v) { return std::to_string(v.get<std::int64_t>()); }
// A figure, or "-" where it is undefined (NaN / null), as `simulate` prints it.
std::string val(const nlohmann::json& v, int decimals) {
  return v.is_number() && std::isfinite(v.get<double>()) ? fixed(v.get<double>(), decimals) : "-";
}

void run_plan(const PlanOpts& o) {
  api::DeploymentSet set;
  if (!o.emit_dir.empty()) set.prepare(o.emit_dir, true);   // before the run, as the --plot paths
  if (!o.plot.empty()) {   // before the run, so a bad path does not waste it
    const PlotPaths p = plot_paths(o.plot);
    for (const auto& f : {p.chart, p.base + "-throughput.png", p.base + "-sweep.json", p.base + "-plan.json"})
      check_writable_target(f, "--plot");
  }
  const auto bar = progress_bar(o.quiet, "points");
  std::function<void(int, int)> progress;
  if (bar) progress = [bar](int done, int total) { bar(done, total); };
  nlohmann::json j = api::plan(o.args, progress);
  const nlohmann::json& sweep = j["sweep"];

  // The emitted deployments, the chart data and the charts appear together or not at all: the
  // files go to temporaries, the plotter reads the JSON ones and writes both PNGs atomically, then
  // the set is renamed into place.
  std::string emitted;
  if (!o.emit_dir.empty()) {
    for (const auto& t : j["topologies"]) {
      if (!t["feasible"].get<bool>()) continue;   // nothing meets the SLO: no deployment to stand up
      set.add(t["emit"], o.emit_dir + "/" + str(t["name"]));
      emitted += (emitted.empty() ? "" : ", ") + o.emit_dir + "/" + str(t["name"]) + "/";
    }
  }
  if (!o.plot.empty()) {
    const PlotPaths p = plot_paths(o.plot);
    j["plot"] = p.chart;
    const std::string sweep_tmp = set.files().write(p.base + "-sweep.json", sweep.dump());
    const std::string plan_tmp = set.files().write(p.base + "-plan.json", j.dump());
    draw_charts(sweep_tmp, plan_tmp, p.chart);
  }
  const nlohmann::json files = set.commit();
  if (!o.emit_dir.empty()) j["emitted"] = files;
  const std::string stat = str(j["statistic"]);
  const bool open = j.contains("open_loop");
  std::string out;
  if (j.contains("ran")) out += "Ran the " + str(j["ran"]) + "\n";
  out += "Model " + str(j["model"]) + " (" + str(j["precision"]) + " weights, KV " + str(j["kv_cache_dtype"]) + ") on " +
         num(j["nodes"]) + " x " + str(j["instance"]) + " (" + str(j["gpu"]) + "); ISL " + num(j["isl"]) + " / OSL " +
         num(j["osl"]) +
         (j.value("vision_tokens_per_request", 0) > 0
              ? "; + " + num(j["vision_tokens_per_request"]) + " vision tokens on " + fixed(100 * j["image_fraction"].get<double>(), 0) +
                    " % of requests"
              : std::string()) +
         "\n" + defaults_line(j["defaults"]);
  for (const auto& t : j["topologies"]) out += sim::what_ran_text(t["what_ran"]);
  if (j.contains("calibration")) out += "Calibration: " + str(j["calibration"]["summary"]) + "\n";
  out += "Capacity read: " + str(j["method"]) + "; SLO statistic " + stat + "\n";
  Table sw({"topology", "concurrency", "TTFT " + stat + " ms", "ITL " + stat + " ms", "gap " + stat + " ms", "output tok/s",
            "tok/s/GPU", "tok/s/user"});
  const auto& c = sweep["columns"];
  bool any_full = false;
  for (std::size_t i = 0; i < c["topology"].size(); ++i) {
    // A value with its prediction band "(lo-hi)" when the column has one (p50 and throughput);
    // "-" where the value is undefined (NaN / null).
    auto banded = [&](const std::string& name, int digits) {
      std::string t = val(c[name][i], digits);
      if (c.contains(name + "_band_lo") && c[name + "_band_lo"][i].is_number())
        t += " (" + fixed(c[name + "_band_lo"][i].get<double>(), digits) + "-" + fixed(c[name + "_band_hi"][i].get<double>(), digits) + ")";
      return t;
    };
    const bool train = c.contains("prefill_train") && c["prefill_train"][i].get<bool>();
    const bool full = c.contains("kv_full") && c["kv_full"][i].get<bool>();
    any_full |= full;
    sw.add_row({str(c["topology"][i]), num(c["concurrency"][i]),
                banded("ttft_" + stat + "_ms", 1) + (train ? " TRAIN" : full ? " KV full" : ""),
                banded("itl_" + stat + "_ms", 2), val(c["gap_" + stat + "_ms"][i], 2), banded("output_tps", 0),
                val(c["output_tps_per_gpu"][i], 1), val(c["output_tps_per_user"][i], 1)});
  }
  bool any_train = false;
  for (std::size_t i = 0; c.contains("prefill_train") && i < c["prefill_train"].size(); ++i) any_train |= c["prefill_train"][i].get<bool>();
  out += std::string(open ? "\nSweep (closed loop over concurrency, for the charts; the plan below is read open loop)\n" : "\nSweep\n") +
         sw.render() +
         "(a-b): prediction band, " +
         (str(j["prediction_band"]["source"]).rfind("cross-validated", 0) == 0 ? "the " + str(j["prediction_band"]["source"])
                                                                                : sim::validate::band_legend()) +
         "; none shown: no measured runs of this kind\n"
         "concurrency: clients of one copy of the topology, output tok/s that copy's; tok/s/user: mean over requests of "
         "1 / ITL (aiperf's); gap: the gaps between a request's streamed tokens from its second on, over every request "
         "(ITL is each request's mean gap; --gap-ms sets an SLO on it)\n" +
         (any_train ? "TRAIN: the point ran in a PREFILL TRAIN (most prompts queued behind another's prefill), so its TTFT is that "
                      "queue's; a closed loop can hold it for hundreds of rounds (docs/capacity-planning.md)\n"
                    : std::string()) +
         (any_full ? "KV full: a worker's KV cache was full at that point (its peak use at 99 % of the blocks): prompts waited "
                     "for room, or running requests were preempted, and TTFT holds that wait\n"
                   : std::string());
  // A plan "replica" is one copy of the topology as swept (all its engine replicas or workers):
  // the same word recommend uses.
  Table pt({"topology", open ? "req/s per copy" : "clients per copy", "tok/s per copy", "copies", "GPUs", "instances",
            "$/hour", "spare %", "limited by"});
  for (std::size_t k = 0; k < j["topologies"].size(); ++k) {
    const auto& r = j["topologies"][k];
    std::string at = "-";
    if (r["feasible"].get<bool>())
      at = open ? fixed(j["open_loop"][k]["rate_per_copy"].get<double>(), 2) + " (" +
                      val(j["open_loop"][k]["ttft_ms"], 0) + " / " + val(j["open_loop"][k]["itl_ms"], 1) + " ms)"
                : num(r["max_concurrency"]);
    pt.add_row({str(r["name"]), at,
                fixed(r["tps_per_replica"].get<double>(), 0), num(r["replicas"]), num(r["gpus"]), num(r["instances"]),
                r["usd_per_hour"].is_null() ? "-" : fixed(r["usd_per_hour"].get<double>(), 2),
                r.contains("spare_pct") ? spare_cell(r["spare_pct"]) : "-",
                str(r["advice"]) + (r.value("prefill_train", false) ? "; read in a PREFILL TRAIN: TTFT is the start-up queue of prompts, check open loop" : "")});
  }
  char slo_line[512];
  // The load as given: the rate (--target-rps, open or closed loop) with the tok/s it makes, else the tok/s.
  const std::string target = (j["target"].contains("requests_per_s")
                                  ? compact(j["target"]["requests_per_s"].get<double>()) + " requests/s x OSL " + num(j["osl"]) + " = "
                                  : std::string()) + compact(j["target"]["output_tps"].get<double>()) + " output tok/s" +
                           sized_text(j["target"].value("headroom", 0.0), j["target"].value("sized_output_tps", 0.0),
                                      j["target"].value("sized_requests_per_s", 0.0));
  std::snprintf(slo_line, sizeof slo_line, "\nPlan: SLO TTFT %s <= %g ms, ITL %s <= %g ms%s; target %s%s\n",
                stat.c_str(), j["ttft_ms"].get<double>(), stat.c_str(), j["itl_ms"].get<double>(),
                gap_slo_text(stat, j.value("gap_ms", 0.0)).c_str(), target.c_str(),
                open ? (" (" + str(j["arrival"]) +
                        " arrivals; req/s per copy: the rate one copy of the topology is offered, with its TTFT / ITL)").c_str()
                     : " (clients per copy: the most clients one copy of the topology serves under both SLOs)");
  out += slo_line + pt.render() + spare_legend(open);
  bool unpriced = false;
  for (const auto& r : j["topologies"]) unpriced = unpriced || r["usd_per_hour"].is_null();
  if (unpriced) out += unpriced_note({str(j["instance"])});
  if (open) {
    int overloaded = 0;
    for (const auto& d : j["open_loop"])
      overloaded += d.contains("one_copy_fewer") && d["one_copy_fewer"].value("overloaded", false);
    if (overloaded > 0) out += sim::overload_note(overloaded);
  }
  if (!o.plot.empty()) {
    const std::string base = plot_paths(o.plot).base;
    out += "Charts: " + plot_paths(o.plot).chart + " (TTFT and ITL vs concurrency), " + base + "-throughput.png (tok/s per GPU vs per user)\n"
           "Data:   " + base + "-sweep.json, " + base + "-plan.json\n";
  }
  if (!o.emit_dir.empty())
    out += emitted.empty() ? "Deployment files: none (no topology meets the SLO)\n" : "Deployment files: " + emitted + "\n";
  emit(o.format, j, out);
}

}  // namespace

std::string gap_ms_help() {
  return "SLO on the gap between a request's streamed tokens, at --statistic over every gap from each request's second "
         "token on (ms; default 0: none): a decode that shares or waits out a prompt's prefill step stalls for it, which "
         "the per-request mean ITL hides";
}

std::string headroom_help() {
  return "Spare capacity, a fraction of the load target: every deployment is sized to meet both SLOs at the target x "
         "(1 + this), e.g. 0.2 for 20 % spare (default 0); $ per million output tokens and joules per token stay at the target";
}

std::string sized_text(double headroom, double sized_tps, double sized_rps) {
  if (!(headroom > 0)) return "";
  return " (sized for " + (sized_rps > 0 ? compact(sized_rps) + " requests/s, " : std::string()) + compact(sized_tps) +
         " output tok/s: " + sim::headroom_text(headroom) + ")";
}

std::string spare_cell(const nlohmann::json& p) {
  const std::string lo = fixed(std::max(0.0, p["lo"].get<double>()), 0);
  return p["hi"].is_null() ? ">= " + lo : lo + "-" + fixed(p["hi"].get<double>(), 0);
}

std::string unpriced_note(const std::vector<std::string>& instances) {
  std::vector<std::string> unpriced;
  const auto& cat = hw::Catalog::global();
  for (const auto& names : instances)
    for (std::string rest = names; !rest.empty();) {   // "a" or "a + b" (prefill + decode)
      const auto plus = rest.find('+');
      std::string part = rest.substr(0, plus);
      rest = plus == std::string::npos ? "" : rest.substr(plus + 1);
      part.erase(0, part.find_first_not_of(' '));
      part.erase(part.find_last_not_of(' ') + 1);
      const bool priced = std::any_of(cat.instances().begin(), cat.instances().end(),
                                      [&](const hw::InstanceSpec& i) { return i.name == part && i.usd_per_hour; });
      if (!part.empty() && !priced && std::find(unpriced.begin(), unpriced.end(), part) == unpriced.end()) unpriced.push_back(part);
    }
  if (unpriced.empty()) return "";
  return "$/hour -: no source in the catalogue prices " + text::join(unpriced) + " (servesim list instances); --price " +
         unpriced.front() + "=USD_PER_HOUR sets one\n";
}

std::string spare_legend(bool open_loop) {
  return open_loop ? "spare %: capacity under both SLOs over the target, as the copy search brackets it: at least the rate the "
                     "copies were sized for, less than the copies x the rate one copy fewer failed at per copy (--headroom sizes "
                     "for more)\n"
                   : "spare %: capacity under both SLOs over the target, at least (the copies x one copy's throughput at its "
                     "highest concurrency under the SLO; --headroom sizes for more)\n";
}

std::string gap_slo_text(const std::string& statistic, double gap_ms) {
  if (!(gap_ms > 0)) return "";
  std::ostringstream s;
  s << ", token gap " << statistic << " <= " << gap_ms << " ms";
  return s.str();
}

void add_plan_command(CLI::App& app) {
  auto o = std::make_shared<PlanOpts>();
  auto* c = app.add_subcommand("plan", "Sweep topologies over concurrency and plan replicas, GPUs and $/hour against TTFT/ITL SLOs "
                                       "(no model flags: the reference study)");
  c->add_option("--model", o->args.model, "Model name (servesim list models) or its Hugging Face id");
  c->add_option("--model-file", o->args.model_file, "A servesim model JSON or a Hugging Face config.json instead of --model");
  c->add_option("--instance", o->args.instance, "Instance type (servesim list instances)");
  c->add_option("--nodes", o->args.nodes, "Instances the topology is placed on");
  c->add_option("--precision", o->args.precision, "Weight precision: bf16, fp8, nvfp4, int8 (default: the checkpoint's)");
  c->add_option("--kv-cache-dtype", o->args.kv_cache_dtype, "KV cache dtype: auto (the checkpoint's), bf16, fp8");
  c->add_option("--topology", o->args.topology, "agg, disagg or both (default both)");
  c->add_option("--tp,--tensor-parallel-size", o->args.tp, "TP of every worker (default: the minimum that fits)");
  c->add_option("--pp,--pipeline-parallel-size", o->args.pp, "PP of every worker");
  c->add_option("--ep,--expert-parallel-size", o->args.ep, "EP of every worker");
  c->add_option("--dp,--data-parallel-size", o->args.dp, "Attention data-parallel ranks of every worker (MoE models; a worker's GPUs = tp x pp x dp)");
  c->add_option("--replicas", o->args.replicas, "Aggregated replicas (default: as many as the nodes hold)");
  c->add_option("--prefill-workers", o->args.prefill_workers, "Disaggregated prefill workers");
  c->add_option("--decode-workers", o->args.decode_workers, "Disaggregated decode workers");
  c->add_option("--encode-workers", o->args.encode_workers, "Vision encode workers (0: prefill runs the encoder)");
  c->add_option("--prefill-tp", o->args.prefill_tp, "TP of prefill workers");
  c->add_option("--decode-tp", o->args.decode_tp, "TP of decode workers");
  c->add_option("--prefill-dp", o->args.prefill_dp, "Attention data-parallel ranks of prefill workers (default --dp)");
  c->add_option("--decode-dp", o->args.decode_dp, "Attention data-parallel ranks of decode workers (default --dp)");
  c->add_option("--prefill-instance", o->args.prefill_instance, "Disaggregated: instance type of prefill workers (default --instance)");
  c->add_option("--decode-instance", o->args.decode_instance, "Disaggregated: instance type of decode workers (default --instance)");
  c->add_option("--prefill-nodes", o->args.prefill_nodes, "Nodes of the prefill instance type (default: the fewest that hold them)");
  c->add_option("--decode-nodes", o->args.decode_nodes, "Nodes of the decode instance type (default: the fewest that hold them)");
  c->add_option("--isl", o->args.isl, "Input tokens per request");
  c->add_option("--osl", o->args.osl, "Output tokens per request");
  c->add_option("--images", o->args.images, "Images per request that carries them: WIDTHxHEIGHT[:COUNT],... (vision models)");
  c->add_option("--image-fraction", o->args.image_fraction,
                "Share of requests that carry --images (default 1: every request), chosen per request from the seed");
  c->add_option("--concurrency", o->args.concurrency, "Closed-loop clients to sweep (default 1,2,4,...,256, then on while a topology still meets both SLOs, up to 4096)");
  c->add_option("--requests", o->args.requests, "Measured requests per point (default: until TTFT and ITL are precise, max(1000, 8 x concurrency) at most, after a steady warm-up)");
  c->add_option("--seed", o->args.seed, "Random seed")->check(int64_range());
  c->add_option("--router", o->args.router, "round_robin, least_outstanding or least_kv_load");
  c->add_option("--max-num-seqs", o->args.max_num_seqs, "vLLM max_num_seqs");
  c->add_option("--max-num-batched-tokens", o->args.max_num_batched_tokens, "vLLM max_num_batched_tokens");
  c->add_option("--gpu-memory-utilization", o->args.gpu_memory_utilization, "vLLM gpu_memory_utilization");
  c->add_option("--num-speculative-tokens", o->args.num_speculative_tokens, "MTP draft tokens per step (0: off)");
  c->add_option("--mtp-acceptance", o->args.mtp_acceptance, "MTP acceptance: one rate or one per draft position (default 0.7)");
  c->add_option("--ttft-ms", o->args.ttft_ms, "SLO on time to first token (ms)");
  c->add_option("--itl-ms", o->args.itl_ms, "SLO on inter-token latency (ms)");
  c->add_option("--gap-ms", o->args.gap_ms, gap_ms_help());
  c->add_option("--headroom", o->args.headroom, headroom_help());
  c->add_option("--statistic", o->args.statistic, "Statistic the SLO applies to: p50, p90 (default) or p99");
  c->add_option("--target-tps", o->args.target_tps, "Output tokens/s the deployment must serve");
  c->add_option("--target-rps", o->args.target_rps, "Requests/s the deployment must serve (target tok/s = rate x OSL)");
  c->add_option("--arrival", o->args.arrival,
                "Open-loop plan: poisson, gamma or constant arrivals at --target-rps; each topology gets the fewest copies "
                "that meet both SLOs at that rate (default: closed loop over --concurrency)");
  c->add_option("--burstiness", o->args.burstiness, "Gamma arrivals' shape (1 = Poisson, 0.25 = CV 2)");
  c->add_option("--calibration", o->args.calibration,
                "A calibration profile (servesim calibrate e2e --output): applied on the GPU and engine build it was fitted on "
                "(the plan then runs that build), its bands from the profile's cross-validated residuals")
      ->check(profile_file());
  c->add_option("--engine", o->args.engine,
                "Engine profile the topologies run on: vllm, sglang, trtllm or a release (servesim list engines; default the newest "
                "vLLM, or the --calibration profile's build); --emit writes that engine's launch files and Dynamo workers");
  c->add_option("--plot", o->plot, "Write the charts FILE.png and FILE-throughput.png, and their data FILE-sweep.json and FILE-plan.json");
  c->add_option("--emit", o->emit_dir, "Write each feasible topology's deployment files (vllm serve, Dynamo manifest, aiperf sweep, NCCL check) to DIR/<topology>/");
  add_threads_option(*c, o->args.threads);
  add_format_option(*c, o->format);
  add_quiet_flag(*c, o->quiet);
  c->callback([o] { run_plan(*o); });
}

}  // namespace servesim::cli
