// api: `servesim search` and `servesim recommend` — the configuration search of
// sim/studies/search.hpp driven by flags, run in rounds on a thread pool (or, through
// SearchSession and search_run, on any other executor such as a Dask cluster).
#include <algorithm>
#include <filesystem>
#include <atomic>
#include <cmath>
#include <cstdlib>
#include <mutex>
#include <thread>

#include "common/error.hpp"
#include "common/text.hpp"
#include "hwmodels/catalog.hpp"
#include "models/model_spec.hpp"
#include "sim/api/api.hpp"
#include "sim/calibration.hpp"
#include "sim/engine/engine_profile.hpp"
#include "sim/parallel.hpp"
#include "sim/studies/search.hpp"
#include "sim/validate/run_bands.hpp"
#include "sim/validate/validate.hpp"

namespace servesim::api {
namespace {

long parse_int(const std::string& s, const char* flag, long lo, long hi) {
  char* end = nullptr;
  const long v = std::strtol(s.c_str(), &end, 10);
  if (s.empty() || !end || *end || v < lo || v > hi)
    throw Error(flag, "", "'" + s + "' is not a whole number in " + std::to_string(lo) + ".." + std::to_string(hi));
  return v;
}

template <class T>
std::vector<T> int_list(const std::string& csv, const char* flag, long lo, long hi) {
  std::vector<T> out;
  for (const auto& s : option_list(csv, flag)) {   // a value given twice is one candidate, not two identical ones
    const T v = static_cast<T>(parse_int(s, flag, lo, hi));
    if (std::find(out.begin(), out.end(), v) == out.end()) out.push_back(v);
  }
  if (out.empty()) throw Error(flag, "", "is empty");
  return out;
}

// A GPU name (its first catalogue instance) or an instance name.
const hw::InstanceSpec* instance_of(const std::string& name) {
  const auto& cat = hw::Catalog::global();
  for (const auto& i : cat.instances())
    if (text::iequals(i.name, name)) return &i;
  for (const auto& g : cat.gpus())
    if (text::iequals(g.name, name)) {
      for (const auto& i : cat.instances())
        if (text::iequals(i.gpu, g.name)) return &i;
      throw Error("--gpu", "", "no catalogue instance carries " + g.name + "; known instances: " +
                                   text::join(cat.instance_names()));
    }
  throw Error("--gpu", "", "unknown GPU or instance '" + name + "'; known GPUs: " + text::join(cat.gpu_names()) +
                               "; instances: " + text::join(cat.instance_names()));
}

std::unique_ptr<sim::Search> make_search(const SearchArgs& a, bool per_instance) {
  const auto required = [](const char* flag, bool given, const char* what) {
    if (!given) throw Error(flag, "", std::string("required: ") + what);
  };
  required("--model", !a.model.empty() || !a.model_file.empty(), "the model to serve (servesim list models), or --model-file");
  required("--gpu", !a.gpus.empty(), "GPU or instance types to search, e.g. h200 or h100,h200,b200");
  required("--isl", a.isl != 0, "input tokens per request");
  required("--osl", a.osl != 0, "output tokens per request");
  required("--ttft-ms", a.ttft_ms != 0, "the SLO on time to first token, e.g. 600");
  required("--itl-ms", a.itl_ms != 0, "the SLO on inter-token latency, e.g. 100");
  const auto given = [](double v) { return !std::isnan(v); };
  const int loads = given(a.total_gpus) + given(a.target_tps) + given(a.target_rps);
  if (loads > 1) {   // named as given: the error is about the flags the user wrote
    std::string both;
    for (const auto& [flag, v] : {std::pair{"--total-gpus", a.total_gpus}, {"--target-tps", a.target_tps}, {"--target-rps", a.target_rps}})
      if (given(v)) both += (both.empty() ? "" : " and ") + std::string(flag);
    throw Error(both, "", "one load to size for: give one of --total-gpus, --target-tps, --target-rps");
  }
  if (per_instance && !given(a.target_tps) && !given(a.target_rps))
    throw Error("--target-tps", "", "required: the load to size for (--target-tps output tok/s or --target-rps requests/s)");

  sim::SearchSpace sp;
  sp.model = &resolve_model(a.model, a.model_file);
  for (const auto& g : option_list(a.gpus, "--gpu")) {
    const hw::InstanceSpec* i = instance_of(g);
    if (std::find(sp.instances.begin(), sp.instances.end(), i) == sp.instances.end()) sp.instances.push_back(i);
  }
  for (const auto& p : option_list(a.precisions, "--precision")) {
    const hw::Precision x = hw::parse_precision(p, "--precision");
    if (std::find(sp.precisions.begin(), sp.precisions.end(), x) == sp.precisions.end()) sp.precisions.push_back(x);
  }
  // A quantised repository's Hugging Face id (nvidia/Llama-3.3-70B-Instruct-FP8) is the checkpoint the
  // user serves: searched alone unless --precision names others.
  if (sp.precisions.empty() && a.model_file.empty())
    if (const std::string named = models::id_checkpoint_precision(a.model, *sp.model); !named.empty())
      sp.precisions.push_back(hw::parse_precision(named, "--model"));
  sp.tp = int_list<int>(a.tp, "--tp", 1, 72);
  if (a.tp == SearchArgs{}.tp) {   // the default list: the sizes one instance of some GPU given holds
    std::vector<int> held;
    for (int t : sp.tp)
      if (std::any_of(sp.instances.begin(), sp.instances.end(),
                      [&](const hw::InstanceSpec* i) { return t <= i->gpus && t <= i->nvlink_domain_gpus; }))
        held.push_back(t);
    if (!held.empty()) sp.tp = held;
  }
  sp.pp = int_list<int>(a.pp, "--pp", 1, 64);
  sp.dp = int_list<int>(a.dp, "--dp", 1, 64);
  sp.decode_dp = int_list<int>(a.decode_dp, "--decode-dp", 1, 64);
  sp.expert_parallel = a.expert_parallel;
  if (!a.ep.empty()) {
    if (!a.expert_parallel)
      throw Error("--ep", "", "give --ep (the expert-parallel sizes to try) or --no-expert-parallel (EP 1 only), not both");
    sp.ep = int_list<int>(a.ep, "--ep", 1, 1024);
  }
  const std::string t = text::lower(a.topology);
  if (t != "agg" && t != "disagg" && t != "both" && t != "aggregated" && t != "disaggregated")
    throw Error("--topology", "", "unknown topology '" + a.topology + "'; known: agg, disagg, both");
  sp.aggregated = t == "agg" || t == "aggregated" || t == "both";
  sp.disaggregated = t == "disagg" || t == "disaggregated" || t == "both";
  sp.mixed_gpus = a.mixed_gpus;
  sp.pd_ratios.clear();
  for (const auto& r : option_list(a.pd_ratios, "--pd-ratios")) {
    const auto c = r.find(':');
    if (c == std::string::npos) throw Error("--pd-ratios", "", "'" + r + "' is not PREFILL:DECODE workers, e.g. 1:2");
    const std::pair<int, int> pd{int(parse_int(r.substr(0, c), "--pd-ratios", 1, 64)), int(parse_int(r.substr(c + 1), "--pd-ratios", 1, 64))};
    if (std::find(sp.pd_ratios.begin(), sp.pd_ratios.end(), pd) == sp.pd_ratios.end()) sp.pd_ratios.push_back(pd);
  }
  if (sp.pd_ratios.empty() && sp.disaggregated) throw Error("--pd-ratios", "", "is empty");
  // Knobs not given: each engine's default for the GPU (0).
  sp.engines = option_list(text::lower(a.engines), "--engine");
  if (!a.calibration.empty()) {
    sp.calibration = std::make_shared<const sim::CalibrationProfile>(sim::load_calibration(a.calibration));
    // Without an engine named, the search runs the build the calibration was fitted on (as
    // simulate does with a scenario that names one): every candidate on the same build.
    const std::string& build = sp.calibration->engine_profile;
    if (!build.empty() && sp.engines == std::vector<std::string>{"vllm"} && sp.calibration->engine == "vllm") {
      try {
        sp.engines = {sim::engine_profile(build).name};
      } catch (const Error&) {   // a build this binary has no profile of: the newest, and the report says nothing applies
      }
    }
  }
  sp.max_num_seqs = a.max_num_seqs.empty() ? std::vector<int>{0} : int_list<int>(a.max_num_seqs, "--max-num-seqs", 1, 1 << 20);
  sp.max_num_batched_tokens = a.max_num_batched_tokens.empty()
                                  ? std::vector<std::int64_t>{0}
                                  : int_list<std::int64_t>(a.max_num_batched_tokens, "--max-num-batched-tokens", 16, 1 << 24);
  sp.kv_cache_dtypes = option_list(text::lower(a.kv_cache_dtypes), "--kv-cache-dtype");
  if (sp.kv_cache_dtypes.empty()) throw Error("--kv-cache-dtype", "", "is empty; give auto, bf16 or fp8 (comma-separated)");
  for (const auto& k : sp.kv_cache_dtypes)
    if (k != "auto" && k != "bf16" && k != "fp8")
      throw Error("--kv-cache-dtype", "", "unknown KV-cache dtype '" + k + "'; known: auto (the checkpoint's), bf16, fp8");
  if (!a.prefix_caching.empty()) {
    sp.prefix_caching.clear();
    for (const auto& v : option_list(text::lower(a.prefix_caching), "--prefix-caching")) {
      const int x = v == "on" || v == "true" || v == "1" ? 1 : v == "off" || v == "false" || v == "0" ? 0 : -2;
      if (x < 0) throw Error("--prefix-caching", "", "unknown value '" + v + "'; give on, off or on,off");
      if (std::find(sp.prefix_caching.begin(), sp.prefix_caching.end(), x) == sp.prefix_caching.end()) sp.prefix_caching.push_back(x);
    }
    if (sp.prefix_caching.empty()) throw Error("--prefix-caching", "", "is empty; give on, off or on,off");
  }
  if (!a.num_speculative_tokens.empty())
    sp.speculative_tokens = int_list<int>(a.num_speculative_tokens, "--num-speculative-tokens", 0, 16);
  if (!a.mtp_acceptance.empty()) {
    if (a.num_speculative_tokens.empty())
      throw Error("--mtp-acceptance", "", "needs --num-speculative-tokens: the MTP draft counts to try (e.g. 0,1,3)");
    sp.mtp_acceptance = mtp_acceptance_list(a.mtp_acceptance);
  }
  if (!std::isnan(a.gpu_memory_utilization) && !(a.gpu_memory_utilization > 0 && a.gpu_memory_utilization <= 1))
    throw Error("--gpu-memory-utilization", "", "must be in (0, 1]; leave it out for each engine's default");
  sp.gpu_memory_utilization = std::isnan(a.gpu_memory_utilization) ? -1 : a.gpu_memory_utilization;   // -1: the engine's
  if (!a.router.empty()) sp.router = sim::parse_router(a.router, "--router");

  sim::SearchTraffic tr;
  tr.isl = a.isl;
  tr.osl = a.osl;
  tr.multimodal = images_option(a.images);
  if (a.image_fraction) {
    workloads::check_fraction(*a.image_fraction);
    if (tr.multimodal.empty()) throw Error("--image-fraction", "", "needs --images: the images that share of requests carries");
    tr.multimodal.fraction = *a.image_fraction;
  }
  if (!tr.multimodal.empty() && !sp.model->has_vision)
    throw Error("--images", "", "model " + sp.model->name + " has no vision encoder");
  tr.shared_prefix_tokens = a.shared_prefix_tokens;
  tr.concurrency = int_list<int>(a.concurrency, "--concurrency", 1, 100000);
  tr.requests = a.requests;
  if (a.seed < 0) throw Error("--seed", "", "must be >= 0");
  tr.seed = static_cast<std::uint64_t>(a.seed);

  sim::SearchGoal g;
  g.ttft_ms = a.ttft_ms;
  g.itl_ms = a.itl_ms;
  g.gap_ms = a.gap_ms;
  g.statistic = sim::parse_statistic(a.statistic);
  // Loads beyond what 10^9 copies of anything could serve are refused later, by the bounds; here
  // only what is no load at all.
  if (given(a.total_gpus)) {
    if (!(a.total_gpus >= 1 && a.total_gpus <= 1e9) || a.total_gpus != std::floor(a.total_gpus))
      throw Error("--total-gpus", "", "must be a whole number of GPUs in 1..1000000000");
    g.objective = sim::SearchObjective::total_gpus;
    g.total_gpus = a.total_gpus;
  } else if (given(a.target_tps)) {
    if (!(a.target_tps > 0) || !std::isfinite(a.target_tps)) throw Error("--target-tps", "", "must be a finite number > 0 (output tok/s)");
    g.objective = sim::SearchObjective::target_tps;
    g.target_tps = a.target_tps;
  } else if (given(a.target_rps)) {
    sim::check_sized_rps(a.target_rps, a.headroom, !a.arrival.empty(), a.requests);
    if (!std::isfinite(a.target_rps * double(a.osl))) throw Error("--target-rps", "", "must be a finite number > 0 (requests/s)");
    g.objective = sim::SearchObjective::target_tps;
    g.target_tps = a.target_rps * double(a.osl);
    g.target_rps = a.target_rps;
    g.target_flag = "--target-rps";
  }
  if (!a.arrival.empty()) {
    if (!given(a.target_rps))
      throw Error("--arrival", "", "needs --target-rps R: the open-loop search offers R requests/s to each candidate's copies");
    tr.arrival = workloads::parse_arrival(a.arrival, "--arrival");
    tr.rate = a.target_rps * (1 + a.headroom);   // offered to each candidate: the rate it is sized for
  }
  if (a.burstiness) {
    if (!tr.arrival || *tr.arrival != workloads::Arrival::gamma) throw Error("--burstiness", "", "shapes gamma arrivals only: give --arrival gamma");
    if (!(*a.burstiness > 0) || !std::isfinite(*a.burstiness)) throw Error("--burstiness", "", "must be a finite number > 0");
    tr.burstiness = *a.burstiness;
  }
  g.headroom = a.headroom;
  g.per_instance = per_instance;
  return std::make_unique<sim::Search>(std::move(sp), std::move(tr), g, a.prune);
}

nlohmann::json rows_json(const std::vector<sim::SweepRow>& rows) {
  nlohmann::json a = nlohmann::json::array();
  for (const auto& r : rows) a.push_back(sim::to_json(r));
  return a;
}

std::vector<sim::SweepRow> rows_from(const nlohmann::json& j) {
  std::vector<sim::SweepRow> out;
  for (const auto& x : j) out.push_back(sim::sweep_row_from_json(x, "search"));
  return out;
}

// Runs the rounds on `threads` threads; the rounds themselves do not depend on the thread count.
nlohmann::json run_local(sim::Search& s, int threads, const SearchProgressFn& progress) {
  const int nt = threads > 0 ? threads : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  auto report = [&] {
    if (!progress) return;
    const auto p = s.progress();
    progress(p.simulated, p.pending, p.pruned, p.total);
  };
  for (std::vector<int> round; !(round = s.next_round()).empty();) {
    report();
    std::vector<std::vector<sim::SweepRow>> out(round.size());
    // Boost.Asio workers (sim/parallel.hpp): a thread that cannot start is one error line; a
    // failing configuration's error is the lowest-index one at any thread count.
    sim::parallel_for(int(round.size()), nt, [&](int k) { out[std::size_t(k)] = s.run(round[std::size_t(k)]); }, "--threads");
    for (std::size_t k = 0; k < round.size(); ++k) s.add(round[k], std::move(out[k]));
  }
  report();
  return s.report();
}

}  // namespace

nlohmann::json search(const SearchArgs& a, const SearchProgressFn& progress) {
  auto s = make_search(a, false);
  nlohmann::json rep = run_local(*s, a.threads, progress);
  rep["input_config"] = search_input_config(a);
  return rep;
}

struct SearchSession::Impl {
  std::unique_ptr<sim::Search> s;
  nlohmann::json given;
};
SearchSession::SearchSession(const SearchArgs& a, bool per_instance) : impl_(std::make_unique<Impl>()) {
  impl_->s = make_search(a, per_instance);
  impl_->given = search_input_config(a);
}
SearchSession::~SearchSession() = default;
std::vector<int> SearchSession::next_round() { return impl_->s->next_round(); }
void SearchSession::add(int index, const nlohmann::json& rows) { impl_->s->add(index, rows_from(rows)); }
nlohmann::json SearchSession::report() const {
  nlohmann::json rep = impl_->s->report();
  rep["input_config"] = impl_->given;
  return rep;
}
int SearchSession::configurations() const { return int(impl_->s->configs().size()); }
nlohmann::json SearchSession::run(int index) const { return rows_json(impl_->s->run(index)); }

nlohmann::json search_args_json(const SearchArgs& a) {
  nlohmann::json j = {{"model", a.model}, {"gpus", a.gpus}, {"precision", a.precisions}, {"topology", a.topology},
                      {"tp", a.tp}, {"pp", a.pp}, {"dp", a.dp}, {"decode_dp", a.decode_dp}, {"ep", a.ep}, {"pd_ratios", a.pd_ratios}, {"max_num_seqs", a.max_num_seqs},
                      {"max_num_batched_tokens", a.max_num_batched_tokens}, {"kv_cache_dtype", a.kv_cache_dtypes}, {"concurrency", a.concurrency},
                      {"prefix_caching", a.prefix_caching}, {"shared_prefix_tokens", a.shared_prefix_tokens},
                      {"num_speculative_tokens", a.num_speculative_tokens}, {"mtp_acceptance", a.mtp_acceptance},
                      {"statistic", a.statistic}, {"router", a.router}, {"images", a.images}, {"image_fraction", a.image_fraction ? nlohmann::json(*a.image_fraction) : nlohmann::json(nullptr)},
                      {"arrival", a.arrival}, {"burstiness", a.burstiness ? nlohmann::json(*a.burstiness) : nlohmann::json(nullptr)}, {"isl", a.isl},
                      {"osl", a.osl}, {"seed", a.seed}, {"ttft_ms", a.ttft_ms}, {"itl_ms", a.itl_ms}, {"gap_ms", a.gap_ms},
                      {"total_gpus", a.total_gpus}, {"target_tps", a.target_tps}, {"target_rps", a.target_rps}, {"headroom", a.headroom},
                      {"gpu_memory_utilization", a.gpu_memory_utilization}, {"threads", a.threads},
                      {"prune", a.prune}, {"expert_parallel", a.expert_parallel}, {"mixed_gpus", a.mixed_gpus},
                      {"engine", a.engines}, {"calibration", a.calibration.empty() ? std::string()
                                                                   : std::filesystem::absolute(a.calibration).string()}};
  j["requests"] = a.requests ? nlohmann::json(*a.requests) : nlohmann::json(nullptr);
  if (!a.model_file.empty()) j["model_file"] = std::filesystem::absolute(a.model_file).string();  // read where the search runs
  return j;
}

nlohmann::json search_input_config(const SearchArgs& a) {
  nlohmann::json j = search_args_json(a);
  j.erase("threads");   // results do not depend on it, and carry no trace of it
  for (auto& [k, v] : j.items())   // unset numbers (NaN) are null, as JSON and Python read them back
    if (v.is_number_float() && !std::isfinite(v.get<double>())) v = nullptr;
  return j;
}

// The pre-purchase table from a per-instance search report: for each instance type (set), the
// cheapest deployment that serves the target under the SLO, what it costs and draws.
nlohmann::json recommend_table(const nlohmann::json& rep) {
  // The calibration's own bands (read back from its file, so a report from any executor works).
  std::optional<sim::CalibrationProfile> profile;
  if (rep.contains("calibration") && rep["calibration"].value("file", std::string()) != "")
    profile = sim::load_calibration(rep["calibration"]["file"].get<std::string>());
  const sim::validate::BandTable* cal_bands = profile ? &profile->bands : nullptr;
  const auto& cat = hw::Catalog::global();
  const double target = rep["objective"]["target_tps"].get<double>();
  nlohmann::json rows = nlohmann::json::array();
  for (const auto& b : rep["best_per_instance"]) {
    const auto& s = b["score"];
    nlohmann::json r;
    r["label"] = b["label"];
    r["kind"] = b["kind"];
    r["gpu"] = b["decode_gpu"].is_null() || b["decode_gpu"] == b["gpu"] ? b["gpu"].get<std::string>()
                                                                         : b["gpu"].get<std::string>() + "+" + b["decode_gpu"].get<std::string>();
    r["instance"] = b["decode_instance"].is_null() || b["decode_instance"] == b["instance"]
                        ? b["instance"].get<std::string>()
                        : b["instance"].get<std::string>() + "+" + b["decode_instance"].get<std::string>();
    r["precision"] = b["precision"];
    r["copies"] = s["copies"];
    r["gpus"] = s["total_gpus"];
    r["nodes"] = s["instances"];
    r["usd_per_hour"] = s["usd_per_hour"];
    r["usd_per_million_output_tokens"] =
        s["usd_per_hour"].is_null() ? nlohmann::json(nullptr) : nlohmann::json(s["usd_per_hour"].get<double>() / (target * 3600.0) * 1e6);
    // Power: every GPU at its datasheet TDP (an upper bound; host power not included).
    double watts = 0;
    std::string source;
    for (const auto& [inst, nodes] : s["nodes_by_instance"].items()) {
      const auto& g = cat.gpu(cat.instance(inst).gpu);
      (void)nodes;
      const double gpus_here = b["decode_instance"].is_null() || b["decode_instance"] == b["instance"]
                                   ? s["total_gpus"].get<double>()
                                   : (inst == b["instance"].get<std::string>()
                                          ? b["prefill_workers"].get<double>() * b["prefill_tp"].get<double>() * s["copies"].get<double>()
                                          : b["decode_workers"].get<double>() * b["decode_tp"].get<double>() *
                                                b.value("decode_dp", 1.0) * s["copies"].get<double>());
      watts += gpus_here * g.tdp_watts;
      const auto it = g.sources.find("tdp_watts");
      source += (source.empty() ? "" : "; ") + g.name + " " + std::to_string(int(g.tdp_watts)) + " W" +
                (it != g.sources.end() ? " (" + it->second + ")" : "");
    }
    r["power_watts"] = watts;
    r["joules_per_output_token"] = watts / target;
    r["power_basis"] = "upper bound: every GPU at its datasheet TDP (no measured power curve given; host power not included)";
    r["power_source"] = source;
    r["capacity_tps"] = s["copies"].get<double>() * s["tps_per_copy"].get<double>();
    r["spare_pct"] = sim::spare_pct(r["capacity_tps"].get<double>(), target, s["copies"].get<double>(),
                                    s.contains("rate_per_copy") ? double(s.value("fewer_copies", std::int64_t{0})) : 0.0);
    r["slo_concurrency"] = s["slo_concurrency"];
    if (s.contains("rate_per_copy")) r["rate_per_copy"] = s["rate_per_copy"], r["in_flight_per_copy"] = s["in_flight_per_copy"];
    r["limited_by"] = s["limited_by"];
    r["kv_full"] = s.value("kv_full", false);
    r["ttft_ms"] = s["ttft_ms"];
    r["itl_ms"] = s["itl_ms"];
    r["ttft_headroom_pct"] = 100.0 * (1.0 - s["ttft_ms"].get<double>() / rep["ttft_ms"].get<double>());
    r["itl_headroom_pct"] = 100.0 * (1.0 - s["itl_ms"].get<double>() / rep["itl_ms"].get<double>());
    r["gap_ms"] = s.value("gap_ms", 0.0);
    r["gap_only"] = s.value("gap_only", false);
    if (rep.value("gap_ms", 0.0) > 0) r["gap_headroom_pct"] = 100.0 * (1.0 - r["gap_ms"].get<double>() / rep["gap_ms"].get<double>());
    // Prediction bands, as simulate, sweep and plan give them: the point's kind is the GPU and the
    // load regime of clients per serving replica (aggregated: the copy is one replica) or per
    // decode worker. TTFT is the prefill GPU's, ITL and throughput the decode GPU's.
    {
      namespace v = sim::validate;
      const bool disagg = b["kind"] == "disaggregated";
      const std::string pgpu = b["gpu"].get<std::string>();
      const std::string dgpu = disagg ? b["decode_gpu"].get<std::string>() : pgpu;
      // Open loop: the requests in flight per copy (rate x latency, Little's law) stand for its clients.
      const double clients = (s.contains("in_flight_per_copy") ? s["in_flight_per_copy"].get<double>() : s["slo_concurrency"].get<double>()) /
                             (disagg ? std::max(1, b["decode_workers"].get<int>()) : 1);
      const int seqs = b["max_num_seqs"].get<int>();
      const std::string mode = v::band_mode(disagg);
      // A role the calibration was fitted on takes the profile's cross-validated bands (as simulate does).
      const auto& own = b.contains("calibration_bands") ? b["calibration_bands"] : nlohmann::json();
      const bool own_p = own.is_object() && own["prefill"].get<bool>(), own_d = own.is_object() && own["decode"].get<bool>();
      const v::BandTable& cal = cal_bands ? *cal_bands : v::embedded_bands();
      const std::string engine = sim::engine_profile(b["engine"].get<std::string>()).engine;
      const std::string regime = v::load_regime(clients, seqs);
      auto band = [&](bool mine, const std::string& gpu, const char* metric, double value) {
        return v::band_for(mine ? cal : v::embedded_bands(), text::lower(gpu), engine, mode, metric, regime, value);
      };
      const v::Band tb = band(own_p, pgpu, "ttft", s["ttft_ms"].get<double>());
      const v::Band ib = band(own_d, dgpu, "itl", s["itl_ms"].get<double>());
      const v::Band cb = band(own_d, dgpu, "output_tps", r["capacity_tps"].get<double>());
      r["band"] = {{"ttft_ms", v::band_json(tb)}, {"itl_ms", v::band_json(ib)}, {"capacity_tps", v::band_json(cb)},
                   {"load_regime", v::load_regime(clients, seqs)}, {"clients_per_replica", clients}};
      r["band_note"] = "prediction band: " + v::band_legend() + ", applied to the " + rep["statistic"].get<std::string>() +
                       " figure; " +
                       (own_p || own_d ? "cross-validated residuals of the calibration " + rep["calibration"]["file"].get<std::string>()
                                       : v::embedded_bands().meta.value("summary", std::string("no band table embedded")));
      if (b.contains("calibration")) r["calibration"] = b["calibration"], r["calibrated"] = b["calibrated"];
    }
    r["prefill_train"] = s["prefill_train"];
    r["prefix_caching"] = b["bound"]["prefix_caching"];   // as the engine resolved it
    r["prefix_caching_setting"] = b["prefix_caching"];    // as searched: default (the engine's), on, off
    r["prefix_block_tokens"] = b["bound"]["block_tokens"];
    r["prefix_cache_hit_rate"] = s["prefix_cache_hit_rate"];
    r["what_ran"] = b["what_ran"];
    r["describe"] = b["describe"];
    r["deployment"] = b["deployment"];
    r["index"] = b["index"];
    rows.push_back(std::move(r));
  }
  std::stable_sort(rows.begin(), rows.end(), [](const nlohmann::json& x, const nlohmann::json& y) {
    const double a = x["usd_per_hour"].is_null() ? 1e300 : x["usd_per_hour"].get<double>();
    const double b = y["usd_per_hour"].is_null() ? 1e300 : y["usd_per_hour"].get<double>();
    return a < b;
  });
  return rows;
}

nlohmann::json recommend(const SearchArgs& a, const SearchProgressFn& progress) {
  auto s = make_search(a, true);
  nlohmann::json rep = run_local(*s, a.threads, progress);
  rep["recommendations"] = recommend_table(rep);
  rep["input_config"] = search_input_config(a);
  return rep;
}

nlohmann::json search_run(const SearchArgs& a, int index) {
  // Enumeration alone (no bounds): cheap enough to redo on the machine that runs the candidate.
  const auto s = make_search(a, false);
  return rows_json(s->run(index));
}

}  // namespace servesim::api
