#include "sim/studies/planner.hpp"

#include <algorithm>
#include <cstdio>
#include <chrono>
#include <cmath>

#include "common/error.hpp"
#include "common/json_reader.hpp"
#include "common/table.hpp"
#include "common/text.hpp"
#include "sim/engine/cluster.hpp"
#include "sim/engine/metrics_sink.hpp"
#include "sim/simulate.hpp"
#include "sim/topology/deployment.hpp"
#include "sim/topology/disagg_cluster.hpp"
#include "workloads/multimodal.hpp"

namespace servesim::sim {
namespace {

// Per interval (by the time a request was sent): TTFT / ITL samples and the requests within the SLO.
class IntervalStats {
 public:
  IntervalStats(double interval_s, std::size_t n, double ttft_ms, double itl_ms)
      : interval_(interval_s), ttft_ms_(ttft_ms), itl_ms_(itl_ms), ttft_(n), itl_(n), good_(n, 0) {}
  // One request as its client saw it: sent, first and last token, client-visible answer tokens.
  void add(double sent_s, double first_s, double finish_s, std::int64_t visible) {
    const std::size_t k = std::min(ttft_.size() - 1, static_cast<std::size_t>(std::max(0.0, sent_s / interval_)));
    const double ttft = 1e3 * (first_s - sent_s);
    const double itl = visible > 1 ? 1e3 * (finish_s - first_s) / double(visible - 1) : 0.0;
    ttft_[k].push_back(ttft);
    if (visible > 1) itl_[k].push_back(itl);
    if ((ttft_ms_ <= 0 || ttft <= ttft_ms_) && (itl_ms_ <= 0 || itl <= itl_ms_)) ++good_[k];
  }
  void fill(std::vector<PlannerInterval>& out) {
    for (std::size_t k = 0; k < out.size() && k < ttft_.size(); ++k) {
      out[k].requests = static_cast<std::int64_t>(ttft_[k].size());
      out[k].good = good_[k];
      if (!ttft_[k].empty()) out[k].ttft_p90_ms = compute_stats(ttft_[k]).p90;
      if (!itl_[k].empty()) out[k].itl_p90_ms = compute_stats(itl_[k]).p90;
    }
  }

 private:
  double interval_, ttft_ms_, itl_ms_;
  std::vector<std::vector<double>> ttft_, itl_;
  std::vector<std::int64_t> good_;
};

class IntervalSink : public RequestSink {   // aggregated replicas' finished requests into IntervalStats
 public:
  IntervalSink(RequestSink& inner, IntervalStats& stats) : inner_(&inner), stats_(&stats) {}
  void on_finished(const Request& r) override {
    inner_->on_finished(r);
    stats_->add(r.sent_s, r.first_token_s, r.finish_s, r.output_tokens - r.preamble_tokens);
  }
  void on_step(int w, double a, double b, int c, double d) override { inner_->on_step(w, a, b, c, d); }
  TokenGaps* token_gaps() override { return inner_->token_gaps(); }

 private:
  RequestSink* inner_;
  IntervalStats* stats_;
};

// Counts arrivals and their prompt and answer tokens per interval as the workload yields them
// (Dynamo's planner reads the frontend's counts; the next request is yielded when the previous one
// arrives, so an interval's count is complete when it ends).
class CountingWorkload final : public workloads::Workload {
 public:
  CountingWorkload(workloads::Workload& w, double interval_s, std::size_t n)
      : w_(&w), interval_(interval_s), counts_(n, 0), in_(n, 0), out_(n, 0) {}
  std::optional<workloads::RequestSpec> next() override {
    auto r = w_->next();
    if (r) {
      const std::size_t k = std::min(counts_.size() - 1, static_cast<std::size_t>(r->arrival_s / interval_));
      ++counts_[k];
      in_[k] += r->input_tokens;
      out_[k] += r->output_tokens;
    }
    return r;
  }
  int concurrency() const override { return 0; }
  std::int64_t warmup_requests() const override { return 0; }
  std::int64_t total_requests() const override { return w_->total_requests(); }
  std::int64_t count(std::size_t k) const { return k < counts_.size() ? counts_[k] : 0; }
  std::int64_t input_tokens(std::size_t k) const { return k < in_.size() ? in_[k] : 0; }
  std::int64_t output_tokens(std::size_t k) const { return k < out_.size() ? out_[k] : 0; }

 private:
  workloads::Workload* w_;
  double interval_;
  std::vector<std::int64_t> counts_, in_, out_;
};

// What the planner drives: workers in and out of routing, and what it reads of them.
class Fleet {
 public:
  virtual ~Fleet() = default;
  virtual void set_routable(int w, bool on) = 0;
  virtual void schedule_tick(double t_s) = 0;
  virtual const Worker& worker(int w) const = 0;
};
template <class Cluster>
class FleetOf final : public Fleet {
 public:
  explicit FleetOf(Cluster& c) : c_(&c) {}
  void set_routable(int w, bool on) override { c_->set_routable(w, on); }
  void schedule_tick(double t_s) override { c_->schedule_tick(t_s); }
  const Worker& worker(int w) const override { return c_->workers()[static_cast<std::size_t>(w)]; }

 private:
  Cluster* c_;
};

enum class RoleKind : std::uint8_t { replica, prefill, decode };

// A role's workers: indices [first, first + count) of the cluster's workers.
struct RoleState {
  RoleKind kind = RoleKind::replica;
  int first = 0, count = 0, gpus = 1, min = 1, max = 1;
  double capacity_rps = 0, startup_s = 0;
  double isl_mean = 1, osl_mean = 1;        // the profile's lengths: capacity in tokens/s = capacity_rps x these
  double queue_sum = 0, kv_sum = 0;         // load rule: the interval's samples
  int samples = 0;
};

// Dynamo's planner over the roles: throughput rule (constant predictor) or load rule.
class Planner {
 public:
  enum class State : std::uint8_t { off, starting, ready, draining };
  Planner(const PlannerSpec& spec, const CountingWorkload& arrivals, std::vector<RoleState> roles,
          std::vector<PlannerInterval>& timeline)
      : spec_(spec), arrivals_(&arrivals), roles_(std::move(roles)), timeline_(&timeline) {
    int n = 0;
    for (const auto& r : roles_) n = std::max(n, r.first + r.count);
    state_.assign(static_cast<std::size_t>(n), State::off);
    ready_at_.assign(static_cast<std::size_t>(n), 0.0);
  }

  // Workers a role needs for a load of `rps` requests/s of `isl` / `osl` tokens (throughput rule).
  int wanted(const RoleState& r, double rps, double isl, double osl) const {
    double need = rps / r.capacity_rps;
    if (r.kind == RoleKind::prefill) need *= isl / r.isl_mean;   // prompt tokens/s against one worker's
    if (r.kind == RoleKind::decode) need *= osl / r.osl_mean;    // answer tokens/s against one worker's
    return std::clamp(static_cast<int>(std::ceil(need - 1e-9)), r.min, r.max);
  }
  // The fleet at t = 0: each role sized for the profile's opening rate, already warm.
  void start(Fleet& f) {
    for (const auto& r : roles_) {
      const int n = wanted(r, spec_.profile.rate_at(0), r.isl_mean, r.osl_mean);
      for (int i = 0; i < r.count; ++i) {
        state_[static_cast<std::size_t>(r.first + i)] = i < n ? State::ready : State::off;
        f.set_routable(r.first + i, i < n);
      }
    }
    next_cadence_ = cadence_after(0);
    f.schedule_tick(next_cadence_);
  }
  void tick(double now_s, Fleet& f) {
    account(now_s, &f);
    for (std::size_t w = 0; w < state_.size(); ++w)   // workers whose weights are loaded take requests
      if (state_[w] == State::starting && ready_at_[w] <= now_s + 1e-12) {
        state_[w] = State::ready;
        f.set_routable(static_cast<int>(w), true);
      }
    if (std::fabs(now_s - next_cadence_) > 1e-9) return;   // a start-up tick
    if (spec_.rule == PlannerSpec::Rule::load && on_grid(now_s, spec_.metric_interval_s)) sample(f);
    if (on_grid(now_s, spec_.interval_s)) adjust(now_s, f);
    next_cadence_ = cadence_after(now_s);
    if (now_s + 1e-9 < spec_.profile.duration_s) f.schedule_tick(next_cadence_);
  }
  // GPU time since the last call; drained workers with nothing left are released (f null: the
  // run is over, nothing to release).
  void account(double now_s, const Fleet* f) {
    int gpus = 0;
    for (const auto& r : roles_) gpus += held(r) * r.gpus;
    gpu_s_ += double(gpus) * (now_s - last_s_);
    if (static_cast<std::size_t>(gpus) >= seconds_at_gpus_.size()) seconds_at_gpus_.resize(static_cast<std::size_t>(gpus) + 1, 0.0);
    seconds_at_gpus_[static_cast<std::size_t>(gpus)] += now_s - last_s_;
    last_s_ = now_s;
    for (std::size_t w = 0; w < state_.size() && f; ++w)
      if (state_[w] == State::draining && f->worker(static_cast<int>(w)).outstanding() == 0) state_[w] = State::off;
  }
  double gpu_seconds() const { return gpu_s_; }
  const std::vector<double>& seconds_at_gpus() const { return seconds_at_gpus_; }

 private:
  static bool on_grid(double t, double step) {
    const double k = t / step;
    return std::fabs(k - std::round(k)) * step < 1e-9;
  }
  // The next time after t on the adjustment grid or (load rule) the metric grid.
  double cadence_after(double t) const {
    double next = (std::floor(t / spec_.interval_s + 1e-9) + 1) * spec_.interval_s;
    if (spec_.rule == PlannerSpec::Rule::load)
      next = std::min(next, (std::floor(t / spec_.metric_interval_s + 1e-9) + 1) * spec_.metric_interval_s);
    return next;
  }
  // Load rule: queued prefill per ready worker (in prompts of the profile's mean length) and mean
  // KV-cache utilisation of the ready workers, per role.
  void sample(const Fleet& f) {
    for (auto& r : roles_) {
      double queued = 0, kv = 0;
      int n = 0;
      for (int i = r.first; i < r.first + r.count; ++i) {
        if (state_[static_cast<std::size_t>(i)] != State::ready) continue;
        const Worker& w = f.worker(i);
        queued += double(w.scheduler().waiting_tokens());
        kv += w.scheduler().pool().utilization();
        ++n;
      }
      if (n == 0) continue;
      r.queue_sum += queued / double(n) / r.isl_mean;
      r.kv_sum += kv / double(n);
      ++r.samples;
    }
  }
  int rule_load(const RoleState& r, int up) const {
    if (r.samples == 0) return up;   // nothing ready to read: hold
    const double q = r.queue_sum / r.samples, kv = r.kv_sum / r.samples;
    const bool reads_queue = r.kind != RoleKind::decode, reads_kv = r.kind != RoleKind::prefill;
    const bool grow = (reads_queue && q > spec_.queue_up) || (reads_kv && kv > spec_.kv_up);
    const bool shrink = (!reads_queue || q < spec_.queue_down) && (!reads_kv || kv < spec_.kv_down);
    return std::clamp(up + (grow ? 1 : shrink ? -1 : 0), r.min, r.max);
  }
  void adjust(double now_s, Fleet& f) {
    const auto k = static_cast<std::size_t>(std::llround(now_s / spec_.interval_s));
    if (k == 0 || k > timeline_->size()) return;
    PlannerInterval& iv = (*timeline_)[k - 1];
    const std::int64_t n = arrivals_->count(k - 1);
    const double observed = double(n) / spec_.interval_s;
    const double isl = n > 0 ? double(arrivals_->input_tokens(k - 1)) / double(n) : 0.0;
    const double osl = n > 0 ? double(arrivals_->output_tokens(k - 1)) / double(n) : 0.0;
    iv.observed_rps = observed;
    iv.roles.assign(roles_.size(), RoleInterval{});
    iv.workers_ready = iv.workers_held = 0;
    for (std::size_t ri = 0; ri < roles_.size(); ++ri) {
      RoleState& r = roles_[ri];
      int up = 0;
      for (int i = r.first; i < r.first + r.count; ++i) {
        const State st = state_[static_cast<std::size_t>(i)];
        up += st == State::ready || st == State::starting;
      }
      const int want = spec_.rule == PlannerSpec::Rule::load ? rule_load(r, up) : wanted(r, observed, isl, osl);
      for (int i = r.first; i < r.first + r.count && up < want; ++i)   // start workers
        if (state_[static_cast<std::size_t>(i)] == State::off) {
          state_[static_cast<std::size_t>(i)] = State::starting;
          ready_at_[static_cast<std::size_t>(i)] = now_s + r.startup_s;
          f.schedule_tick(now_s + r.startup_s);
          ++up;
        }
      for (int i = r.first + r.count; i-- > r.first && up > want;)   // the newest first: cancel starts, then drain
        if (state_[static_cast<std::size_t>(i)] == State::starting) state_[static_cast<std::size_t>(i)] = State::off, --up;
      for (int i = r.first + r.count; i-- > r.first && up > want;)
        if (state_[static_cast<std::size_t>(i)] == State::ready) {
          state_[static_cast<std::size_t>(i)] = State::draining;
          f.set_routable(i, false);
          --up;
        }
      RoleInterval& ro = iv.roles[ri];
      ro.held = held(r);
      for (int i = r.first; i < r.first + r.count; ++i) ro.ready += state_[static_cast<std::size_t>(i)] == State::ready;
      if (r.samples > 0) ro.queue = r.queue_sum / r.samples, ro.kv_utilization = r.kv_sum / r.samples;
      r.queue_sum = r.kv_sum = 0;
      r.samples = 0;
      iv.workers_ready += ro.ready;
      iv.workers_held += ro.held;
    }
  }
  int held(const RoleState& r) const {
    int n = 0;
    for (int i = r.first; i < r.first + r.count; ++i) n += state_[static_cast<std::size_t>(i)] != State::off;
    return n;
  }

  const PlannerSpec& spec_;
  const CountingWorkload* arrivals_;
  std::vector<RoleState> roles_;
  std::vector<PlannerInterval>* timeline_;
  std::vector<State> state_;
  std::vector<double> ready_at_;
  double gpu_s_ = 0, last_s_ = 0, next_cadence_ = 0;
  std::vector<double> seconds_at_gpus_;
};

class AggregatedControl final : public FleetController {
 public:
  explicit AggregatedControl(Planner& p) : p_(&p) {}
  void tick(double now_s, AggregatedCluster& c) override {
    FleetOf<AggregatedCluster> f(c);
    p_->tick(now_s, f);
  }

 private:
  Planner* p_;
};

class DisaggregatedControl final : public DisaggFleetController {
 public:
  explicit DisaggregatedControl(Planner& p) : p_(&p) {}
  void tick(double now_s, DisaggregatedCluster& c) override {
    FleetOf<DisaggregatedCluster> f(c);
    p_->tick(now_s, f);
  }

 private:
  Planner* p_;
};

const hw::InstanceSpec* instance_of(const hw::GpuSpec& gpu) {
  for (const auto& i : hw::Catalog::global().instances())
    if (text::iequals(i.gpu, gpu.name)) return &i;
  return nullptr;
}

}  // namespace

PlannerSpec planner_spec(const nlohmann::json& args, const std::string& where) {
  const JsonReader j(args, where);
  static const std::vector<std::string> known = {
      "load_profile", "peak_rps",   "trough_fraction", "hours",           "arrivals",      "adjustment_interval",
      "ttft_ms",      "itl_ms",     "min_workers",     "max_workers",     "replica_rps",   "prefill_rps",
      "decode_rps",   "storage_gbps", "startup_extra_s", "fixed_fleet",   "rule",          "metric_interval",
      "kv_scale_up",  "kv_scale_down", "queue_scale_up", "queue_scale_down", "reserved_price", "reserved_discount"};
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
  // Every request of the day is simulated and kept (about 110 bytes each, as a run's measured
  // requests): at most 10^7, a run's own limit, counted before anything is allocated.
  if (const double n = spec.profile.requests_between(0, spec.profile.duration_s); n > 1e7) {
    char got[32];
    std::snprintf(got, sizeof got, "%.3g", n);
    j.fail(text::lower(profile) == "diurnal" ? "peak_rps" : "load_profile",
           std::string("the day sends about ") + got + " requests, more than 10^7 (every one is simulated and kept, about 110 bytes " +
               "each); give a lower rate or a shorter day, or plan a slice of it");
  }
  const std::string arr = text::lower(j.string_or("arrivals", "poisson"));
  if (arr != "poisson" && arr != "uniform") j.fail("arrivals", "expected poisson or uniform, got '" + arr + "'");
  spec.poisson = arr == "poisson";
  const std::string rule = text::lower(j.string_or("rule", "throughput"));
  if (rule != "throughput" && rule != "load") j.fail("rule", "expected throughput or load, got '" + rule + "'");
  spec.rule = rule == "load" ? PlannerSpec::Rule::load : PlannerSpec::Rule::throughput;
  spec.interval_s = j.number_in("adjustment_interval", 180, 1, 86400);
  spec.metric_interval_s = j.number_in("metric_interval", 10, 0.1, 86400);
  if (spec.metric_interval_s > spec.interval_s) j.fail("metric_interval", "must not exceed the adjustment interval");
  spec.kv_up = j.number_in("kv_scale_up", 0.9, 0, 1);
  spec.kv_down = j.number_in("kv_scale_down", 0.5, 0, 1);
  if (spec.kv_down > spec.kv_up) j.fail("kv_scale_down", "must not exceed kv_scale_up");
  spec.queue_up = j.number_in("queue_scale_up", 5.0, 0, 1e6);
  spec.queue_down = j.number_in("queue_scale_down", 0.2, 0, 1e6);
  if (spec.queue_down > spec.queue_up) j.fail("queue_scale_down", "must not exceed queue_scale_up");
  spec.ttft_ms = j.number_in("ttft_ms", 0, 0, 1e9);
  spec.itl_ms = j.number_in("itl_ms", 0, 0, 1e9);
  if (!(spec.ttft_ms > 0) && !(spec.itl_ms > 0)) j.fail("ttft_ms", "give the SLO: ttft_ms and/or itl_ms");
  for (const char* k : {"min_workers", "max_workers"})   // a worker count: 1.5 is none
    if (const double v = j.number_or(k, 0); v != std::floor(v)) j.fail(k, "must be a whole number of workers, got " + compact(v));
  spec.min_workers = static_cast<int>(j.number_in("min_workers", 1, 0, 1e6));
  spec.max_workers = static_cast<int>(j.number_in("max_workers", 0, 0, 1e6));
  spec.replica_rps = j.number_in("replica_rps", 0, 0, 1e7);
  spec.prefill_rps = j.number_in("prefill_rps", 0, 0, 1e7);
  spec.decode_rps = j.number_in("decode_rps", 0, 0, 1e7);
  spec.storage_bytes_per_s = 1e9 * j.number_in("storage_gbps", 10, 1e-6, 1e6);
  spec.startup_extra_s = j.number_in("startup_extra_s", 0, 0, 1e6);
  spec.run_fixed_fleet = j.boolean_or("fixed_fleet", true);
  // Given, a reserved price must be one (0 or less had been taken for "not given").
  spec.reserved_usd_per_gpu_hour = j.has("reserved_price") && !args.at("reserved_price").is_null()
                                       ? j.number_in("reserved_price", 0, 1e-6, 1e6) : 0;
  spec.reserved_discount = j.has("reserved_discount") && !args.at("reserved_discount").is_null()
                               ? j.number_in("reserved_discount", 0, 0, 1) : -1;
  if (spec.reserved_usd_per_gpu_hour > 0 && spec.reserved_discount >= 0)
    j.fail("reserved_discount", "give a reserved price or a discount, not both");
  return spec;
}

namespace {
// The request rate at which the scenario (one replica, or a topology) keeps p90 TTFT and p90 ITL
// within the SLO: open-loop Poisson runs of 2,000 requests, bisected.
double bisect_rps(const Scenario& s, double ttft_ms, double itl_ms, const std::string& what) {
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
    if (hi > 1e5) throw Error("planner", "replica_rps", "one " + what + " meets the SLO at every rate tried; give a tighter SLO");
  }
  for (int i = 0; i < 8; ++i) {
    const double mid = 0.5 * (lo + hi);
    (meets(mid) ? lo : hi) = mid;
  }
  if (!(lo > 0))
    throw Error("planner", "slo", "one " + what + " misses the SLO even at " + fixed(hi, 3) + " requests/s: loosen it or use a larger worker");
  return lo;
}
}  // namespace

double profile_replica_rps(const Scenario& base, double ttft_ms, double itl_ms) {
  Scenario s = base;
  s.gpus = s.gpus_per_replica();
  return bisect_rps(s, ttft_ms, itl_ms, "replica");
}

std::pair<double, double> profile_role_rps(const Scenario& base, double ttft_ms, double itl_ms, double prefill_rps,
                                           double decode_rps) {
  double pr = prefill_rps, dr = decode_rps;
  int others = 4;   // workers of the other role: enough that they never bind
  for (int round = 0; round < 3; ++round) {
    Scenario s = base;
    s.topology.nodes = s.topology.prefill_nodes = s.topology.decode_nodes = 0;
    if (!(prefill_rps > 0)) {
      s.topology.prefill_workers = 1;
      s.topology.decode_workers = others;
      pr = bisect_rps(s, ttft_ms, itl_ms, "prefill worker (with " + std::to_string(others) + " decode workers)");
    }
    if (!(decode_rps > 0)) {
      s.topology.prefill_workers = others;
      s.topology.decode_workers = 1;
      dr = bisect_rps(s, ttft_ms, itl_ms, "decode worker (with " + std::to_string(others) + " prefill workers)");
    }
    const int need = static_cast<int>(std::ceil(2 * std::max(pr / dr, dr / pr)));
    if (others >= need || (prefill_rps > 0 && decode_rps > 0)) break;
    others = need;
  }
  return {pr, dr};
}

void check_planner_roles(const Scenario& s, const PlannerSpec& spec) {
  const bool disagg = s.topology.present && s.topology.disaggregated;
  if (!disagg && (spec.prefill_rps > 0 || spec.decode_rps > 0))
    throw Error(spec.prefill_rps > 0 ? "--prefill-rps" : "--decode-rps", "",
                "applies to a disaggregated topology's workers (--topology disagg); aggregated replicas take --replica-rps");
  if (disagg && spec.replica_rps > 0)
    throw Error("--replica-rps", "", "applies to aggregated replicas; a disaggregated topology takes --prefill-rps and --decode-rps");
}

PlannerResult run_planner(const Scenario& s0, const PlannerSpec& spec) {
  const auto t0 = std::chrono::steady_clock::now();
  const bool disagg = s0.topology.present && s0.topology.disaggregated;
  if (s0.topology.present && !disagg)
    throw Error(s0.source, "topology", "the planner scales aggregated replicas (gpus / tensor_parallel_size, no topology) or a "
                                       "disaggregated topology's prefill and decode workers");
  if (disagg && s0.topology.encode_workers > 0)
    throw Error(s0.source, "topology.encode_workers", "the planner scales prefill and decode workers; run encode on prefill (0)");
  if (!(spec.interval_s >= 1 && spec.interval_s <= 86400)) throw Error("--adjustment-interval", "", "must be 1..86400 s");
  if (!(spec.profile.duration_s > 0)) throw Error("--load-profile", "", "the profile covers no time");
  if (spec.min_workers < 0 || (disagg && spec.min_workers < 1))
    throw Error("--min-workers", "", disagg ? "must be >= 1 (a disaggregated topology needs a worker of each role)" : "must be >= 0");
  if (!(spec.storage_bytes_per_s > 0)) throw Error("--storage-gbps", "", "must be > 0");
  if (spec.max_workers > 0 && spec.min_workers > spec.max_workers)
    throw Error("--min-workers", "", std::to_string(spec.min_workers) + " is more than --max-workers " + std::to_string(spec.max_workers) +
                                         "; give a floor at most the ceiling");
  PlannerResult out;
  out.disaggregated = disagg;
  if (disagg) {
    const auto [pr, dr] = profile_role_rps(s0, spec.ttft_ms, spec.itl_ms, spec.prefill_rps, spec.decode_rps);
    out.roles = {{"prefill", 0, 0, 0, pr, spec.prefill_rps > 0, 0}, {"decode", 0, 0, 0, dr, spec.decode_rps > 0, 0}};
  } else {
    const double rr = spec.replica_rps > 0 ? spec.replica_rps : profile_replica_rps(s0, spec.ttft_ms, spec.itl_ms);
    out.roles = {{"replica", 0, 0, 0, rr, spec.replica_rps > 0, 0}};
  }
  // The profile's mean lengths as its requests carry them: a prompt counts the vision tokens of the
  // share of requests that carry media (as the arrivals' prompt tokens the planner reads do), so a
  // prefill worker's capacity in tokens/s is its request rate at the mix it was profiled on.
  const auto& mm = s0.workload.multimodal;
  const double vision = mm.empty() ? 0.0 : double(workloads::vision_work(mm).tokens) * std::clamp(mm.fraction, 0.0, 1.0);
  out.mean_vision_tokens = vision;
  for (auto& r : out.roles) {
    // A worker count past 10^6 (a given capacity of 1e-300 requests/s) is no fleet, and no int.
    if (!(spec.profile.peak() / r.capacity_rps <= 1e6))
      throw Error(r.name == "replica" ? "--replica-rps" : "--" + r.name + "-rps", "",
                  compact(r.capacity_rps) + " requests/s per worker would need more than 10^6 workers at the peak of " +
                      compact(spec.profile.peak()) + " requests/s; give one worker's capacity");
    r.mean_prompt_tokens = s0.workload.isl.expected_mean() + vision;
    r.mean_answer_tokens = s0.workload.osl.expected_mean();
    r.peak_workers = std::max(1, static_cast<int>(std::ceil(spec.profile.peak() / r.capacity_rps - 1e-9)));
    r.max_workers = spec.max_workers > 0 ? std::max(spec.max_workers, r.peak_workers) : 2 * r.peak_workers;
  }

  Scenario s = s0;
  if (disagg) {
    s.topology.nodes = s.topology.prefill_nodes = s.topology.decode_nodes = 0;
    s.topology.prefill_workers = out.roles[0].max_workers;
    s.topology.decode_workers = out.roles[1].max_workers;
  } else {
    s.gpus = out.roles[0].max_workers * s.gpus_per_replica();
  }
  const Prepared p = prepare(s);
  out.what_ran = disagg ? what_ran_json(s, p)
                        : what_ran_json(s, "replicas of " + std::to_string(s.gpus_per_replica()) + " x " + s.gpu + " (" + s.par.label() + ") scaled by the planner",
                                        p.engine, p.plan, p.cost->provenance());
  std::vector<RoleState> states;
  int first = 0;
  for (auto& r : out.roles) {
    const WorkerRole role = r.name == "prefill" ? WorkerRole::prefill_only : r.name == "decode" ? WorkerRole::decode_only
                                                                                               : WorkerRole::aggregated;
    r.gpus_per_worker = disagg ? p.deployment->role_gpus(role) : s.gpus_per_replica();
    const double weights = disagg ? p.deployment->role_weight_bytes(role) : p.plan.weight_bytes;
    r.startup_s = weights * double(r.gpus_per_worker) / spec.storage_bytes_per_s + spec.startup_extra_s;
    RoleState st;
    st.kind = role == WorkerRole::prefill_only ? RoleKind::prefill : role == WorkerRole::decode_only ? RoleKind::decode : RoleKind::replica;
    st.first = first;
    st.count = r.max_workers;
    st.gpus = r.gpus_per_worker;
    st.min = std::min(spec.min_workers, r.max_workers);
    st.max = r.max_workers;
    st.capacity_rps = r.capacity_rps;
    st.startup_s = r.startup_s;
    st.isl_mean = std::max(1.0, r.mean_prompt_tokens);
    st.osl_mean = std::max(1.0, r.mean_answer_tokens);
    states.push_back(st);
    first += r.max_workers;
  }
  if (const hw::InstanceSpec* inst = instance_of(*p.gpu)) {
    out.instance = inst->name;
    if (inst->usd_per_hour) out.usd_per_gpu_hour = *inst->usd_per_hour / double(inst->gpus);
  }
  const std::size_t n = static_cast<std::size_t>(std::ceil(spec.profile.duration_s / spec.interval_s - 1e-9));
  out.timeline.resize(n);
  for (std::size_t k = 0; k < n; ++k) {
    const double a = double(k) * spec.interval_s, b = std::min(spec.profile.duration_s, a + spec.interval_s);
    out.timeline[k].start_s = a;
    out.timeline[k].offered_rps = spec.profile.requests_between(a, b) / (b - a);
  }

  // One run of the day: planned (the planner in the loop) or the fixed fleet (each role's peak count).
  auto run = [&](bool planned, std::vector<PlannerInterval>& timeline, double* gpu_s) {
    workloads::ProfileWorkload base(spec.profile, s.workload.isl, s.workload.osl, s.workload.seed, spec.poisson, s.workload.multimodal);
    CountingWorkload counted(base, spec.interval_s, n);
    IntervalStats stats(spec.interval_s, n, spec.ttft_ms, spec.itl_ms);
    Planner planner(spec, counted, states, timeline);
    if (disagg) {
      MetricsCollector metrics(true);
      DisaggregatedControl control(planner);
      p.deployment->run_disaggregated(counted, metrics, [&](DisaggregatedCluster& c) {
        FleetOf<DisaggregatedCluster> f(c);
        if (planned) {
          c.set_controller(&control);
          planner.start(f);
        } else {
          for (std::size_t ri = 0; ri < states.size(); ++ri)
            for (int i = out.roles[ri].peak_workers; i < states[ri].count; ++i) c.set_routable(states[ri].first + i, false);
        }
      });
      for (const RequestRecord& r : metrics.records())
        stats.add(r.arrival_s, r.first_token_s, r.finish_s, r.output_tokens);
      if (planned) {
        // GPU time over the profile's span (the last answers drain a few seconds past it).
        planner.account(spec.profile.duration_s, nullptr);
        *gpu_s = planner.gpu_seconds();
        out.seconds_at_gpus = planner.seconds_at_gpus();
      }
    } else {
      ClusterShape shape = cluster_shape(p, s, s.workload.seed);
      if (!planned) shape.replicas = out.roles[0].peak_workers;
      AggregatedCluster cluster(shape, lockstep_engine(p.engine, p.plan.dp), *p.cost, &p.frontend);
      MetricsCollector metrics;
      MetricsSink msink(metrics, p.frontend.client);
      IntervalSink sink(msink, stats);
      AggregatedControl control(planner);
      if (planned) {
        cluster.set_controller(&control);
        FleetOf<AggregatedCluster> f(cluster);
        planner.start(f);
      }
      cluster.run(counted, sink);
      if (planned) {   // GPU time over the profile's span (the last answers drain a few seconds past it)
        planner.account(spec.profile.duration_s, nullptr);
        *gpu_s = planner.gpu_seconds();
        out.seconds_at_gpus = planner.seconds_at_gpus();
      }
    }
    stats.fill(timeline);
    std::int64_t req = 0, good = 0;
    for (const auto& iv : timeline) req += iv.requests, good += iv.good;
    return std::pair{req, good};
  };
  double gpu_s = 0;
  const auto [req, good] = run(true, out.timeline, &gpu_s);
  out.requests = req;
  out.slo_attainment = req > 0 ? double(good) / double(req) : 0;
  out.gpu_hours = gpu_s / 3600;
  out.fixed_fleet_gpu_hours = 0;
  for (const auto& r : out.roles) out.fixed_fleet_gpu_hours += double(r.peak_workers * r.gpus_per_worker) * spec.profile.duration_s / 3600;
  if (spec.reserved_usd_per_gpu_hour > 0 || spec.reserved_discount >= 0) {
    if (!out.usd_per_gpu_hour)
      throw Error("--reserved-price", "", "the catalogue has no on-demand price for " + p.gpu->name +
                                          " instances; give one with --price INSTANCE=USD");
    const double reserved = spec.reserved_usd_per_gpu_hour > 0 ? spec.reserved_usd_per_gpu_hour
                                                                : *out.usd_per_gpu_hour * (1 - spec.reserved_discount);
    out.reserved = price_reserved_split(out.seconds_at_gpus, reserved, *out.usd_per_gpu_hour);
    out.reserved->reserved_source = spec.reserved_usd_per_gpu_hour > 0
                                        ? "--reserved-price"
                                        : "--reserved-discount " + fixed(100 * spec.reserved_discount, 1) + " % off on-demand";
    out.reserved->on_demand_source = out.instance + " on-demand, catalogue";
  }
  if (spec.run_fixed_fleet) {
    std::vector<PlannerInterval> fixed_tl = out.timeline;
    const auto [freq, fgood] = run(false, fixed_tl, nullptr);
    out.fixed_fleet_slo_attainment = freq > 0 ? double(fgood) / double(freq) : 0;
  }
  out.wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return out;
}

ReservedSplit price_reserved_split(const std::vector<double>& seconds_at_gpus, double reserved, double on_demand) {
  ReservedSplit out;
  out.reserved_usd_per_gpu_hour = reserved;
  out.on_demand_usd_per_gpu_hour = on_demand;
  double span_s = 0;
  for (double x : seconds_at_gpus) span_s += x;
  out.span_h = span_s / 3600;
  for (std::size_t r = 0; r < seconds_at_gpus.size(); ++r) {
    if (r > 0 && !(seconds_at_gpus[r] > 0)) continue;   // not a level held: never the cheapest
    ReservedOption o;
    o.reserved_gpus = static_cast<int>(r);
    o.reserved_usd = double(r) * out.span_h * reserved;
    for (std::size_t g = r + 1; g < seconds_at_gpus.size(); ++g) o.on_demand_gpu_hours += double(g - r) * seconds_at_gpus[g] / 3600;
    o.on_demand_usd = o.on_demand_gpu_hours * on_demand;
    o.total_usd = o.reserved_usd + o.on_demand_usd;
    if (out.options.empty() || o.total_usd < out.options[out.best].total_usd - 1e-9) out.best = out.options.size();
    out.options.push_back(o);
  }
  return out;
}

nlohmann::json to_json(const ReservedSplit& x) {
  nlohmann::json opts = nlohmann::json::array();
  for (const auto& o : x.options)
    opts.push_back({{"reserved_gpus", o.reserved_gpus}, {"reserved_usd", o.reserved_usd},
                    {"on_demand_gpu_hours", o.on_demand_gpu_hours}, {"on_demand_usd", o.on_demand_usd}, {"total_usd", o.total_usd}});
  return {{"span_h", x.span_h}, {"reserved_usd_per_gpu_hour", x.reserved_usd_per_gpu_hour},
          {"reserved_source", x.reserved_source}, {"on_demand_usd_per_gpu_hour", x.on_demand_usd_per_gpu_hour},
          {"on_demand_source", x.on_demand_source}, {"options", opts}, {"best", opts.empty() ? nlohmann::json(nullptr) : opts[x.best]}};
}

nlohmann::json to_json(const PlannerResult& r, const PlannerSpec& spec) {
  nlohmann::json tl = nlohmann::json::array();
  auto num = [](double v) { return std::isfinite(v) ? nlohmann::json(v) : nlohmann::json(nullptr); };
  for (const auto& iv : r.timeline) {
    nlohmann::json x = {{"start_s", iv.start_s},
                        {"offered_rps", iv.offered_rps},
                        {"observed_rps", iv.observed_rps},
                        {"workers_ready", iv.workers_ready},
                        {"workers_held", iv.workers_held},
                        {"requests", iv.requests},
                        {"slo_attainment", iv.requests > 0 ? num(double(iv.good) / double(iv.requests)) : nlohmann::json(nullptr)},
                        {"ttft_p90_ms", num(iv.ttft_p90_ms)},
                        {"itl_p90_ms", num(iv.itl_p90_ms)}};
    for (std::size_t ri = 0; ri < r.roles.size(); ++ri) {   // per role: "prefill_ready", "decode_held", ...
      const RoleInterval ro = ri < iv.roles.size() ? iv.roles[ri] : RoleInterval{};
      const std::string& name = r.roles[ri].name;
      x[name + "_ready"] = ro.ready;
      x[name + "_held"] = ro.held;
      if (spec.rule == PlannerSpec::Rule::load) {
        x[name + "_queue"] = num(ro.queue);
        x[name + "_kv_utilization"] = num(ro.kv_utilization);
      }
    }
    tl.push_back(x);
  }
  nlohmann::json roles = nlohmann::json::array();
  for (const auto& x : r.roles)
    roles.push_back({{"name", x.name}, {"gpus_per_worker", x.gpus_per_worker}, {"capacity_rps", x.capacity_rps},
                     {"capacity_given", x.capacity_given}, {"peak_workers", x.peak_workers}, {"max_workers", x.max_workers},
                     {"startup_s", x.startup_s}, {"mean_prompt_tokens", x.mean_prompt_tokens},
                     {"mean_answer_tokens", x.mean_answer_tokens}});
  nlohmann::json j = {{"rule", spec.rule == PlannerSpec::Rule::load ? "load" : "throughput"},
                      {"disaggregated", r.disaggregated},
                      {"roles", roles},
                      {"mean_vision_tokens_per_request", r.mean_vision_tokens},
                      {"adjustment_interval_s", spec.interval_s},
                      {"slo", {{"ttft_ms", spec.ttft_ms}, {"itl_ms", spec.itl_ms}}},
                      {"requests", r.requests},
                      {"gpu_hours", r.gpu_hours},
                      {"fixed_fleet_gpu_hours", r.fixed_fleet_gpu_hours},
                      {"slo_attainment", r.slo_attainment},
                      {"fixed_fleet_slo_attainment", num(r.fixed_fleet_slo_attainment)},
                      {"timeline", tl}};
  if (spec.rule == PlannerSpec::Rule::load)
    j["load_rule"] = {{"metric_interval_s", spec.metric_interval_s}, {"kv_scale_up", spec.kv_up}, {"kv_scale_down", spec.kv_down},
                      {"queue_scale_up", spec.queue_up}, {"queue_scale_down", spec.queue_down}};
  if (!r.disaggregated) {   // one role: its figures at the top level too
    j["replica_rps"] = r.roles[0].capacity_rps;
    j["gpus_per_worker"] = r.roles[0].gpus_per_worker;
    j["peak_workers"] = r.roles[0].peak_workers;
    j["startup_s"] = r.roles[0].startup_s;
  }
  j["seconds_at_gpus"] = r.seconds_at_gpus;
  j["what_ran"] = r.what_ran;
  if (r.reserved) j["reserved_split"] = to_json(*r.reserved);
  if (r.usd_per_gpu_hour) {
    j["usd_per_gpu_hour"] = *r.usd_per_gpu_hour;
    j["usd"] = r.gpu_hours * *r.usd_per_gpu_hour;
    j["fixed_fleet_usd"] = r.fixed_fleet_gpu_hours * *r.usd_per_gpu_hour;
    j["instance"] = r.instance;
  }
  return j;
}

nlohmann::json planner_input_config(const Scenario& s, const nlohmann::json& args) {
  return {{"scenario", s.json}, {"planner", args}};
}

}  // namespace servesim::sim
