#include "sim/studies/planner.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>

#include "common/error.hpp"
#include "common/json_reader.hpp"
#include "common/table.hpp"
#include "common/text.hpp"
#include "sim/engine/cluster.hpp"
#include "sim/engine/metrics_sink.hpp"
#include "sim/simulate.hpp"

namespace servesim::sim {
namespace {

// A request is within the SLO when its TTFT and its ITL are.
bool within(const Request& r, double ttft_ms, double itl_ms) {
  const double ttft = 1e3 * (r.first_token_s - r.sent_s);
  const std::int64_t visible = r.output_tokens - r.preamble_tokens;
  const double itl = visible > 1 ? 1e3 * (r.finish_s - r.first_token_s) / double(visible - 1) : 0.0;
  return (ttft_ms <= 0 || ttft <= ttft_ms) && (itl_ms <= 0 || itl <= itl_ms);
}

// Per interval (by the time a request was sent): its TTFT / ITL and whether it met the SLO.
class IntervalSink : public RequestSink {
 public:
  IntervalSink(RequestSink& inner, double interval_s, std::size_t n, double ttft_ms, double itl_ms)
      : inner_(&inner), interval_(interval_s), ttft_ms_(ttft_ms), itl_ms_(itl_ms), ttft_(n), itl_(n), good_(n, 0) {}
  void on_finished(const Request& r) override {
    inner_->on_finished(r);
    const std::size_t k = std::min(ttft_.size() - 1, static_cast<std::size_t>(std::max(0.0, r.sent_s / interval_)));
    ttft_[k].push_back(1e3 * (r.first_token_s - r.sent_s));
    const std::int64_t visible = r.output_tokens - r.preamble_tokens;
    if (visible > 1) itl_[k].push_back(1e3 * (r.finish_s - r.first_token_s) / double(visible - 1));
    if (within(r, ttft_ms_, itl_ms_)) ++good_[k];
  }
  void on_step(int w, double a, double b, int c, double d) override { inner_->on_step(w, a, b, c, d); }
  void fill(std::vector<PlannerInterval>& out) {
    for (std::size_t k = 0; k < out.size() && k < ttft_.size(); ++k) {
      out[k].requests = static_cast<std::int64_t>(ttft_[k].size());
      out[k].good = good_[k];
      if (!ttft_[k].empty()) out[k].ttft_p90_ms = compute_stats(ttft_[k]).p90;
      if (!itl_[k].empty()) out[k].itl_p90_ms = compute_stats(itl_[k]).p90;
    }
  }

 private:
  RequestSink* inner_;
  double interval_, ttft_ms_, itl_ms_;
  std::vector<std::vector<double>> ttft_, itl_;
  std::vector<std::int64_t> good_;
};

// Counts arrivals per interval as the workload yields them (Dynamo's planner reads the frontend's
// request count; the next request is yielded when the previous one arrives, so an interval's
// count is complete when it ends).
class CountingWorkload final : public workloads::Workload {
 public:
  CountingWorkload(workloads::Workload& w, double interval_s, std::size_t n) : w_(&w), interval_(interval_s), counts_(n, 0) {}
  std::optional<workloads::RequestSpec> next() override {
    auto r = w_->next();
    if (r) ++counts_[std::min(counts_.size() - 1, static_cast<std::size_t>(r->arrival_s / interval_))];
    return r;
  }
  int concurrency() const override { return 0; }
  std::int64_t warmup_requests() const override { return 0; }
  std::int64_t total_requests() const override { return w_->total_requests(); }
  std::int64_t count(std::size_t k) const { return k < counts_.size() ? counts_[k] : 0; }

 private:
  workloads::Workload* w_;
  double interval_;
  std::vector<std::int64_t> counts_;
};

// The SLA planner: throughput-based scaling with the constant predictor.
class Planner final : public FleetController {
 public:
  enum class State : std::uint8_t { off, starting, ready, draining };
  Planner(const PlannerSpec& spec, const CountingWorkload& arrivals, int replicas, int gpus, double replica_rps,
          double startup_s, std::vector<PlannerInterval>& timeline)
      : spec_(spec), arrivals_(&arrivals), state_(static_cast<std::size_t>(replicas), State::off),
        ready_at_(static_cast<std::size_t>(replicas), 0.0), gpus_(gpus), replica_rps_(replica_rps), startup_s_(startup_s),
        timeline_(&timeline) {}

  int wanted(double rps) const {
    const int max = spec_.max_workers > 0 ? spec_.max_workers : static_cast<int>(state_.size());
    return std::clamp(static_cast<int>(std::ceil(rps / replica_rps_ - 1e-9)), spec_.min_workers, std::min(max, int(state_.size())));
  }
  // The fleet at t = 0: sized for the profile's opening rate, already warm.
  void start(AggregatedCluster& c) {
    const int n = wanted(spec_.profile.rate_at(0));
    for (int w = 0; w < static_cast<int>(state_.size()); ++w) {
      state_[static_cast<std::size_t>(w)] = w < n ? State::ready : State::off;
      c.set_routable(w, w < n);
    }
    c.schedule_tick(spec_.interval_s);
  }
  void tick(double now_s, AggregatedCluster& c) override {
    account(now_s, c);
    // Workers whose weights are loaded take requests.
    for (std::size_t w = 0; w < state_.size(); ++w)
      if (state_[w] == State::starting && ready_at_[w] <= now_s + 1e-12) {
        state_[w] = State::ready;
        c.set_routable(static_cast<int>(w), true);
      }
    const double k_real = now_s / spec_.interval_s;
    const auto k = static_cast<std::size_t>(std::llround(k_real));
    if (std::fabs(k_real - double(k)) > 1e-9 || k == 0) return;   // a start-up tick, not an adjustment
    const double observed = double(arrivals_->count(k - 1)) / spec_.interval_s;
    PlannerInterval& iv = (*timeline_)[k - 1];
    iv.observed_rps = observed;
    const int want = wanted(observed);
    int up = count(State::ready) + count(State::starting);
    for (std::size_t w = 0; w < state_.size() && up < want; ++w)   // start workers
      if (state_[w] == State::off) {
        state_[w] = State::starting;
        ready_at_[w] = now_s + startup_s_;
        c.schedule_tick(ready_at_[w]);
        ++up;
      }
    for (std::size_t w = state_.size(); w-- > 0 && up > want;) {   // the newest first: cancel starts, then drain
      if (state_[w] == State::starting) state_[w] = State::off, --up;
    }
    for (std::size_t w = state_.size(); w-- > 0 && up > want;)
      if (state_[w] == State::ready) {
        state_[w] = State::draining;
        c.set_routable(static_cast<int>(w), false);
        --up;
      }
    iv.workers_ready = count(State::ready);
    iv.workers_held = held();
    if (now_s + 1e-9 < spec_.profile.duration_s) c.schedule_tick(now_s + spec_.interval_s);
  }
  // GPU time since the last call; drained workers with nothing left are released.
  void account(double now_s, AggregatedCluster& c) {
    gpu_s_ += double(held()) * double(gpus_) * (now_s - last_s_);
    last_s_ = now_s;
    for (std::size_t w = 0; w < state_.size(); ++w)
      if (state_[w] == State::draining && c.workers()[w].outstanding() == 0) state_[w] = State::off;
  }
  double gpu_seconds() const { return gpu_s_; }
  int held() const { return static_cast<int>(state_.size()) - count(State::off); }

 private:
  int count(State s) const { return static_cast<int>(std::count(state_.begin(), state_.end(), s)); }
  const PlannerSpec& spec_;
  const CountingWorkload* arrivals_;
  std::vector<State> state_;
  std::vector<double> ready_at_;
  int gpus_;
  double replica_rps_, startup_s_;
  std::vector<PlannerInterval>* timeline_;
  double gpu_s_ = 0, last_s_ = 0;
};

const hw::InstanceSpec* instance_of(const hw::GpuSpec& gpu) {
  for (const auto& i : hw::Catalog::global().instances())
    if (text::iequals(i.gpu, gpu.name)) return &i;
  return nullptr;
}

}  // namespace

PlannerSpec planner_spec(const nlohmann::json& args, const std::string& where) {
  const JsonReader j(args, where);
  static const std::vector<std::string> known = {"load_profile", "peak_rps", "trough_fraction", "hours", "arrivals",
                                                 "adjustment_interval", "ttft_ms", "itl_ms", "min_workers", "max_workers",
                                                 "replica_rps", "storage_gbps", "startup_extra_s", "fixed_fleet"};
  for (const auto& item : args.items())
    if (std::find(known.begin(), known.end(), item.key()) == known.end())
      j.fail(item.key(), "unknown option; known: " + text::join(known));
  PlannerSpec spec;
  const std::string profile = j.string_or("load_profile", "diurnal");
  const double peak = j.number_or("peak_rps", 0);
  if (text::lower(profile) == "diurnal") {
    if (!(peak > 0)) j.fail("peak_rps", "the diurnal profile needs its peak request rate (> 0)");
    spec.profile = workloads::diurnal_profile(peak, j.number_in("trough_fraction", 0.2, 0, 1), 4, j.number_in("hours", 24, 1e-3, 8784));
  } else {
    spec.profile = workloads::read_load_profile_csv(profile, peak);
  }
  const std::string arr = text::lower(j.string_or("arrivals", "poisson"));
  if (arr != "poisson" && arr != "uniform") j.fail("arrivals", "expected poisson or uniform, got '" + arr + "'");
  spec.poisson = arr == "poisson";
  spec.interval_s = j.number_in("adjustment_interval", 180, 1, 86400);
  spec.ttft_ms = j.number_in("ttft_ms", 0, 0, 1e9);
  spec.itl_ms = j.number_in("itl_ms", 0, 0, 1e9);
  if (!(spec.ttft_ms > 0) && !(spec.itl_ms > 0)) j.fail("ttft_ms", "give the SLO: ttft_ms and/or itl_ms");
  spec.min_workers = static_cast<int>(j.number_in("min_workers", 1, 0, 1e6));
  spec.max_workers = static_cast<int>(j.number_in("max_workers", 0, 0, 1e6));
  spec.replica_rps = j.number_in("replica_rps", 0, 0, 1e7);
  spec.storage_bytes_per_s = 1e9 * j.number_in("storage_gbps", 10, 1e-6, 1e6);
  spec.startup_extra_s = j.number_in("startup_extra_s", 0, 0, 1e6);
  spec.run_fixed_fleet = j.boolean_or("fixed_fleet", true);
  return spec;
}

double profile_replica_rps(const Scenario& base, double ttft_ms, double itl_ms) {
  Scenario s = base;
  s.gpus = s.gpus_per_replica();
  const Prepared p = prepare(s);
  auto meets = [&](double rps) {
    workloads::WorkloadConfig w = s.workload;
    w.arrival = workloads::Arrival::poisson;
    w.rate_per_s = rps;
    w.requests = 2000;   // long enough for the queue to settle at the rate
    w.warmup_requests = 0;
    const SimResult r = simulate(p, s, w);
    return (ttft_ms <= 0 || r.summary.ttft_ms.p90 <= ttft_ms) && (itl_ms <= 0 || r.summary.itl_ms.p90 <= itl_ms);
  };
  double lo = 0, hi = 0.125;
  while (meets(hi)) {
    lo = hi;
    hi *= 2;
    if (hi > 1e5) throw Error("planner", "replica_rps", "one replica meets the SLO at every rate tried; give a tighter SLO");
  }
  for (int i = 0; i < 8; ++i) {
    const double mid = 0.5 * (lo + hi);
    (meets(mid) ? lo : hi) = mid;
  }
  if (!(lo > 0))
    throw Error("planner", "slo", "one replica misses the SLO even at " + fixed(hi, 3) + " requests/s: loosen it or use a larger replica");
  return lo;
}

PlannerResult run_planner(const Scenario& s0, const PlannerSpec& spec) {
  const auto t0 = std::chrono::steady_clock::now();
  if (s0.topology.present) throw Error(s0.source, "topology", "the planner scales aggregated replicas (gpus / tensor_parallel_size)");
  if (!(spec.interval_s >= 1 && spec.interval_s <= 86400)) throw Error("--adjustment-interval", "", "must be 1..86400 s");
  if (!(spec.profile.duration_s > 0)) throw Error("--load-profile", "", "the profile covers no time");
  if (spec.min_workers < 0) throw Error("--min-workers", "", "must be >= 0");
  if (!(spec.storage_bytes_per_s > 0)) throw Error("--storage-gbps", "", "must be > 0");
  PlannerResult out;
  out.replica_rps = spec.replica_rps > 0 ? spec.replica_rps : profile_replica_rps(s0, spec.ttft_ms, spec.itl_ms);
  out.peak_workers = std::max(1, static_cast<int>(std::ceil(spec.profile.peak() / out.replica_rps - 1e-9)));
  const int replicas = spec.max_workers > 0 ? std::max(spec.max_workers, out.peak_workers) : 2 * out.peak_workers;

  Scenario s = s0;
  s.gpus = replicas * s.gpus_per_replica();
  const Prepared p = prepare(s);
  out.gpus_per_worker = s.gpus_per_replica();
  out.startup_s = p.plan.weight_bytes * double(out.gpus_per_worker) / spec.storage_bytes_per_s + spec.startup_extra_s;
  if (const hw::InstanceSpec* inst = instance_of(*p.gpu); inst && inst->usd_per_hour) {
    out.usd_per_gpu_hour = *inst->usd_per_hour / double(inst->gpus);
    out.instance = inst->name;
  }
  const std::size_t n = static_cast<std::size_t>(std::ceil(spec.profile.duration_s / spec.interval_s - 1e-9));
  out.timeline.resize(n);
  for (std::size_t k = 0; k < n; ++k) {
    const double a = double(k) * spec.interval_s, b = std::min(spec.profile.duration_s, a + spec.interval_s);
    out.timeline[k].start_s = a;
    out.timeline[k].offered_rps = spec.profile.requests_between(a, b) / (b - a);
  }

  auto run = [&](bool planned, std::vector<PlannerInterval>& timeline, double* gpu_s) {
    ClusterShape shape = cluster_shape(p, s, s.workload.seed);
    if (!planned) shape.replicas = out.peak_workers;
    AggregatedCluster cluster(shape, lockstep_engine(p.engine, p.plan.dp), *p.cost, &p.frontend);
    workloads::ProfileWorkload base(spec.profile, s.workload.isl, s.workload.osl, s.workload.seed, spec.poisson);
    CountingWorkload counted(base, spec.interval_s, n);
    MetricsCollector metrics;
    MetricsSink msink(metrics);
    IntervalSink sink(msink, spec.interval_s, n, spec.ttft_ms, spec.itl_ms);
    Planner planner(spec, counted, shape.replicas, out.gpus_per_worker, out.replica_rps, out.startup_s, timeline);
    if (planned) {
      cluster.set_controller(&planner);
      planner.start(cluster);
    }
    const double end_s = cluster.run(counted, sink);
    sink.fill(timeline);
    if (planned) {
      (void)end_s;   // GPU time over the profile's span (the last answers drain a few seconds past it)
      planner.account(spec.profile.duration_s, cluster);
      *gpu_s = planner.gpu_seconds();
    }
    std::int64_t req = 0, good = 0;
    for (const auto& iv : timeline) req += iv.requests, good += iv.good;
    return std::pair{req, good};
  };
  double gpu_s = 0;
  const auto [req, good] = run(true, out.timeline, &gpu_s);
  out.requests = req;
  out.slo_attainment = req > 0 ? double(good) / double(req) : 0;
  out.gpu_hours = gpu_s / 3600;
  out.fixed_fleet_gpu_hours = double(out.peak_workers * out.gpus_per_worker) * spec.profile.duration_s / 3600;
  if (spec.run_fixed_fleet) {
    std::vector<PlannerInterval> fixed_tl = out.timeline;
    const auto [freq, fgood] = run(false, fixed_tl, nullptr);
    out.fixed_fleet_slo_attainment = freq > 0 ? double(fgood) / double(freq) : 0;
  }
  out.wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return out;
}

nlohmann::json to_json(const PlannerResult& r, const PlannerSpec& spec) {
  nlohmann::json tl = nlohmann::json::array();
  auto num = [](double v) { return std::isfinite(v) ? nlohmann::json(v) : nlohmann::json(nullptr); };
  for (const auto& iv : r.timeline)
    tl.push_back({{"start_s", iv.start_s},
                  {"offered_rps", iv.offered_rps},
                  {"observed_rps", iv.observed_rps},
                  {"workers_ready", iv.workers_ready},
                  {"workers_held", iv.workers_held},
                  {"requests", iv.requests},
                  {"slo_attainment", iv.requests > 0 ? num(double(iv.good) / double(iv.requests)) : nlohmann::json(nullptr)},
                  {"ttft_p90_ms", num(iv.ttft_p90_ms)},
                  {"itl_p90_ms", num(iv.itl_p90_ms)}});
  nlohmann::json j = {{"replica_rps", r.replica_rps},
                      {"gpus_per_worker", r.gpus_per_worker},
                      {"peak_workers", r.peak_workers},
                      {"startup_s", r.startup_s},
                      {"adjustment_interval_s", spec.interval_s},
                      {"slo", {{"ttft_ms", spec.ttft_ms}, {"itl_ms", spec.itl_ms}}},
                      {"requests", r.requests},
                      {"gpu_hours", r.gpu_hours},
                      {"fixed_fleet_gpu_hours", r.fixed_fleet_gpu_hours},
                      {"slo_attainment", r.slo_attainment},
                      {"fixed_fleet_slo_attainment", num(r.fixed_fleet_slo_attainment)},
                      {"timeline", tl}};
  if (r.usd_per_gpu_hour) {
    j["usd_per_gpu_hour"] = *r.usd_per_gpu_hour;
    j["usd"] = r.gpu_hours * *r.usd_per_gpu_hour;
    j["fixed_fleet_usd"] = r.fixed_fleet_gpu_hours * *r.usd_per_gpu_hour;
    j["instance"] = r.instance;
  }
  return j;
}

}  // namespace servesim::sim
