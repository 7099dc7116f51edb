#include "sim/studies/plan.hpp"

#include <algorithm>
#include <cmath>

#include "common/error.hpp"
#include "common/text.hpp"

#include <cstdio>

namespace servesim::sim {

std::string_view to_string(Statistic s) {
  switch (s) {
    case Statistic::p50: return "p50";
    case Statistic::p90: return "p90";
    case Statistic::p99: return "p99";
  }
  return "p50";
}

Statistic parse_statistic(std::string_view s, const std::string& where) {
  for (Statistic v : {Statistic::p50, Statistic::p90, Statistic::p99})
    if (text::iequals(s, to_string(v))) return v;
  throw Error(where, "", "unknown statistic '" + std::string(s) + "'; known: p50, p90, p99");
}

namespace {
std::string g(double v) {
  char b[32];
  std::snprintf(b, sizeof b, "%.4g", v);
  return b;
}
}  // namespace

nlohmann::json sweep_columns(const std::vector<SweepRow>& rows) {
  nlohmann::json c = nlohmann::json::object();
  const char* stats[3] = {"p50", "p90", "p99"};
  auto col = [&](const std::string& key, auto get) {
    nlohmann::json a = nlohmann::json::array();
    for (const auto& r : rows) a.push_back(get(r));
    c[key] = std::move(a);
  };
  col("topology", [](const SweepRow& r) { return r.topology; });
  col("concurrency", [](const SweepRow& r) { return r.concurrency; });
  for (int i = 0; i < 3; ++i) {
    col(std::string("ttft_") + stats[i] + "_ms", [i](const SweepRow& r) { return r.ttft_ms[i]; });
    col(std::string("itl_") + stats[i] + "_ms", [i](const SweepRow& r) { return r.itl_ms[i]; });
    col(std::string("gap_") + stats[i] + "_ms", [i](const SweepRow& r) { return r.gap_ms[i]; });
  }
  col("output_tps", [](const SweepRow& r) { return r.output_tps; });
  col("output_tps_per_gpu", [](const SweepRow& r) { return r.output_tps_per_gpu; });
  col("output_tps_per_user", [](const SweepRow& r) { return r.output_tps_per_user; });
  col("prefill_train", [](const SweepRow& r) { return r.prefill_train; });
  col("overloaded", [](const SweepRow& r) { return r.overloaded; });
  col("kv_full", [](const SweepRow& r) { return r.kv_full; });
  return c;
}

nlohmann::json to_json(const SweepRow& r) {
  return {{"topology", r.topology}, {"concurrency", r.concurrency},
          {"ttft_ms", {r.ttft_ms[0], r.ttft_ms[1], r.ttft_ms[2]}}, {"itl_ms", {r.itl_ms[0], r.itl_ms[1], r.itl_ms[2]}},
          {"gap_ms", {r.gap_ms[0], r.gap_ms[1], r.gap_ms[2]}},
          {"output_tps", r.output_tps}, {"output_tps_per_gpu", r.output_tps_per_gpu},
          {"output_tps_per_user", r.output_tps_per_user}, {"prefill_train", r.prefill_train},
          {"served_rps", r.served_rps}, {"in_flight_at_end", r.in_flight_at_end}, {"overloaded", r.overloaded},
          {"prefix_cache_hit_rate", r.prefix_hit}, {"kv_full", r.kv_full}};
}

SweepRow sweep_row_from_json(const nlohmann::json& j, const char* where) {
  try {
    SweepRow r;
    r.topology = j.at("topology").get<std::string>();
    r.concurrency = j.at("concurrency").get<int>();
    for (std::size_t i = 0; i < 3; ++i) {
      r.ttft_ms[i] = j.at("ttft_ms").at(i).get<double>();
      r.itl_ms[i] = j.at("itl_ms").at(i).get<double>();
      r.gap_ms[i] = j.at("gap_ms").at(i).get<double>();
    }
    r.output_tps = j.at("output_tps").get<double>();
    r.output_tps_per_gpu = j.at("output_tps_per_gpu").get<double>();
    r.output_tps_per_user = j.at("output_tps_per_user").get<double>();
    r.prefill_train = j.value("prefill_train", false);
    r.served_rps = j.value("served_rps", 0.0);
    r.in_flight_at_end = j.value("in_flight_at_end", std::int64_t{0});
    r.overloaded = j.value("overloaded", false);
    r.prefix_hit = j.value("prefix_cache_hit_rate", 0.0);
    r.kv_full = j.value("kv_full", false);
    return r;
  } catch (const nlohmann::json::exception& e) {
    throw Error(where, "rows", std::string("not a row a simulated point returned: ") + e.what());
  }
}

std::int64_t capacity_requests(int clients, std::optional<std::int64_t> requests) {
  return requests ? *requests : std::max<std::int64_t>(kMinMeasuredRequests, std::int64_t{kMeasuredRoundsPerClient} * clients);
}

workloads::WorkloadConfig capacity_workload(int clients, std::optional<std::int64_t> requests, std::uint64_t seed,
                                            std::int64_t isl, std::int64_t osl) {
  workloads::WorkloadConfig wc;
  wc.arrival = workloads::Arrival::concurrency;
  wc.concurrency = clients;
  wc.requests = capacity_requests(clients, requests);
  wc.warmup_requests = std::int64_t{kWarmupRoundsPerClient} * clients;
  wc.warmup_until_steady = true;
  wc.measure_until_precise = !requests;
  wc.seed = seed;
  wc.isl = workloads::LengthDist::fixed_at(isl);
  wc.osl = workloads::LengthDist::fixed_at(osl);
  return wc;
}

std::string capacity_rule(std::optional<std::int64_t> requests) {
  return "closed loop, clients started at spread phases, each point after a warm-up that ends when the loop is steady "
         "(at most " + std::to_string(kWarmupRoundsPerClient) + " requests per client) without a phase barrier, then " +
         (requests ? std::to_string(*requests) + " measured requests"
                   : "measured requests until the 95 % intervals of mean and p90 TTFT are within 2 % and of ITL within 1 % "
                     "(at least 200, at most max(" + std::to_string(kMinMeasuredRequests) + ", " +
                         std::to_string(kMeasuredRoundsPerClient) + " x clients))");
}

void PlanSlo::validate() const {
  if (!(ttft_ms > 0)) throw Error("--ttft-ms", "", "must be > 0");
  if (!(itl_ms > 0)) throw Error("--itl-ms", "", "must be > 0");
  if (!(target_tps > 0) || !std::isfinite(target_tps)) throw Error("--target-tps", "", "must be a finite number > 0");
  if (!std::isfinite(ttft_ms)) throw Error("--ttft-ms", "", "must be finite");
  if (!std::isfinite(itl_ms)) throw Error("--itl-ms", "", "must be finite");
  if (!(gap_ms >= 0) || !std::isfinite(gap_ms)) throw Error("--gap-ms", "", "must be a finite number >= 0 (0: no limit)");
}

std::string_view to_string(LimitedBy l) {
  switch (l) {
    case LimitedBy::none: return "none";
    case LimitedBy::ttft: return "ttft";
    case LimitedBy::itl: return "itl";
    case LimitedBy::both: return "ttft+itl";
  }
  return "none";
}

std::string_view advice(LimitedBy l, bool kv_full, bool gap_only) {
  if (gap_only && l == LimitedBy::itl)
    return "the token gap limits it: prompts' prefill steps stall the decodes: disaggregate prefill, or chunk prompts "
           "smaller (--max-num-batched-tokens)";
  if (gap_only && l == LimitedBy::both)
    return "TTFT and the token gap both limit it: add prefill capacity on workers of its own (disaggregated)";
  if (kv_full && l == LimitedBy::ttft)
    return "TTFT limits it: a KV cache is full and prompts wait for room: add KV memory per worker (more GPUs per worker, "
           "an FP8 KV cache where it is 16-bit)";
  if (kv_full && l == LimitedBy::both)
    return "TTFT and ITL both limit it: a KV cache is full and prompts wait for room: add KV memory per worker, and decode "
           "capacity";
  switch (l) {
    case LimitedBy::none: return "meets both SLOs at the highest swept concurrency: extend --concurrency";
    case LimitedBy::ttft: return "TTFT limits it: add prefill capacity";
    case LimitedBy::itl: return "ITL limits it: add decode capacity";
    case LimitedBy::both: return "TTFT and ITL both limit it: add prefill and decode capacity";
  }
  return "";
}

nlohmann::json PlanRow::to_json() const {
  nlohmann::json j;
  j["name"] = name;
  j["feasible"] = feasible;
  j["max_concurrency"] = max_concurrency;
  j["tps_per_replica"] = tps_per_replica;
  j["replicas"] = replicas;
  j["gpus"] = gpus;
  j["instances"] = instances;
  j["usd_per_hour"] = usd_per_hour ? nlohmann::json(*usd_per_hour) : nlohmann::json(nullptr);
  j["limited_by"] = std::string(to_string(limited_by));
  j["prefill_train"] = prefill_train;
  j["kv_full"] = kv_full;
  j["gap_only"] = gap_only;
  j["advice"] = std::string(advice(limited_by, kv_full, gap_only));
  return j;
}

void size_copies(PlanRow& row, const TopologyUnit& u, double copies, const PlanSlo& slo) {
  // Past 10^9 copies the answer means nothing (and GPU counts would leave 64-bit range).
  if (copies > 1e9)
    throw Error(slo.target_rps > 0 ? "--target-rps" : "--target-tps", "",
                (slo.target_rps > 0 ? g(slo.target_rps) + " requests/s (" + g(slo.target_tps) + " output tok/s)" : g(slo.target_tps) + " output tok/s") +
                    " needs " + g(copies) + " copies of " + u.name + " (" + g(row.tps_per_replica) +
                    " tok/s each): more than 10^9; give a smaller target");
  copies = std::max(1.0, copies);   // any load, however small, takes one copy
  row.replicas = static_cast<std::int64_t>(copies);
  row.gpus = row.replicas * u.gpus;
  const std::int64_t per = std::max(1, u.gpus_per_instance);
  row.instances = u.gpus <= per ? (row.gpus + per - 1) / per : row.replicas * u.instances;
  if (u.usd_per_instance_hour) row.usd_per_hour = static_cast<double>(row.instances) * *u.usd_per_instance_hour;
}

nlohmann::json spare_pct(double capacity, double target, double copies, double fewer) {
  nlohmann::json j = {{"lo", 100.0 * (capacity / target - 1)}, {"hi", nullptr}};
  if (fewer >= 1) j["hi"] = 100.0 * (capacity * copies / fewer / target - 1);
  return j;
}

void check_headroom(double headroom) {
  if (!(headroom >= 0 && headroom <= 10))
    throw Error("--headroom", "", "must be a fraction of the load target from 0 to 10, e.g. 0.2 to size for 1.2 x the target, got " + g(headroom));
}

std::string headroom_text(double headroom) {
  return g(100 * headroom) + " % headroom";
}

void check_target_rps(double rps, bool open_loop, std::optional<std::int64_t> requests) {
  if (!(rps >= 1e-6 && rps <= 1e7))
    throw Error("--target-rps", "", "must be a finite number > 0: a request rate from 1e-06 to 10^7 requests/s, got " + g(rps));
  if (!open_loop) return;
  const double n = std::max(100.0, std::ceil(10 * rps)) + (requests ? double(*requests) : std::max(1000.0, std::ceil(60 * rps)));
  if (n > 1e7)
    throw Error("--target-rps", "", g(rps) + " requests/s open loop: the copy search starts with one copy offered the whole rate, " +
                                        g(n) + " requests (a warm-up of max(100, 10 s x rate), then " +
                                        (requests ? std::string("--requests") : std::string("max(1000, 60 s x rate)")) +
                                        "), more than 10^7; give a rate up to " + std::to_string(std::int64_t(std::floor(requests ? (1e7 - double(*requests)) / 10 : 1e7 / 70))) +
                                        " requests/s, or drop --arrival for the closed-loop reading");
}

void check_sized_rps(double rps, double headroom, bool open_loop, std::optional<std::int64_t> requests) {
  check_headroom(headroom);
  check_target_rps(rps, open_loop, requests);   // the rate as given
  try {
    check_target_rps(rps * (1 + headroom), open_loop, requests);
  } catch (const Error& e) {
    throw Error("--headroom", "", "sizes for " + g(rps * (1 + headroom)) + " requests/s (--target-rps " + g(rps) + " x " +
                                      g(1 + headroom) + "), past what --target-rps takes: " + e.reason());
  }
}

workloads::WorkloadConfig open_loop_workload(double rate, workloads::Arrival arrival, double burstiness,
                                             std::optional<std::int64_t> requests, std::uint64_t seed, std::int64_t isl,
                                             std::int64_t osl) {
  workloads::WorkloadConfig wc;
  wc.arrival = arrival;
  wc.rate_per_s = rate;
  wc.burstiness = burstiness;
  wc.requests = requests ? *requests : std::max<std::int64_t>(1000, std::int64_t(std::ceil(60 * rate)));
  wc.warmup_requests = std::max<std::int64_t>(100, std::int64_t(std::ceil(10 * rate)));
  wc.seed = seed;
  wc.isl = workloads::LengthDist::fixed_at(isl);
  wc.osl = workloads::LengthDist::fixed_at(osl);
  return wc;
}

std::string open_loop_rule(std::optional<std::int64_t> requests) {
  return "open loop, each copy offered the rate sized for (the target, plus any --headroom) / copies after a warm-up of max(100, 10 s x rate) requests, then " +
         (requests ? std::to_string(*requests) : std::string("max(1000, 60 s x rate)")) +
         " measured requests; copies: the fewest that meet both SLOs (doubling, then bisection)";
}

const SweepRow* CopiesSearch::at(std::int64_t k) const {
  for (const auto& [n, r] : tried)
    if (n == k) return &r;
  return nullptr;
}

CopiesSearch fewest_copies(const std::function<SweepRow(std::int64_t)>& point, const std::function<bool(const SweepRow&)>& passes,
                           const std::function<bool(std::int64_t, const SweepRow&)>& hopeless) {
  constexpr std::int64_t kMaxCopies = std::int64_t{1} << 20;
  CopiesSearch out;
  auto eval = [&](std::int64_t k) -> const SweepRow& {
    out.tried.emplace_back(k, point(k));
    return out.tried.back().second;
  };
  std::int64_t hi = 1, lo = 0;
  for (;;) {
    const SweepRow& r = eval(hi);
    if (passes(r)) break;
    if (hi >= kMaxCopies || (hopeless && hopeless(hi, r))) return out;
    lo = hi;
    hi *= 2;
  }
  while (hi - lo > 1) {
    const std::int64_t mid = lo + (hi - lo) / 2;
    if (passes(eval(mid))) hi = mid;
    else lo = mid;
  }
  out.copies = hi;
  out.fewer = lo;
  return out;
}

std::vector<PlanRow> plan_capacity(const std::vector<SweepRow>& sweep, const std::vector<TopologyUnit>& units,
                                   const PlanSlo& slo) {
  slo.validate();
  const int s = static_cast<int>(slo.statistic);
  std::vector<PlanRow> out;
  for (const auto& u : units) {
    std::vector<const SweepRow*> pts;
    for (const auto& r : sweep)
      if (r.topology == u.name) pts.push_back(&r);
    if (pts.empty()) throw Error("plan", u.name, "has no sweep points");
    std::stable_sort(pts.begin(), pts.end(),
                     [](const SweepRow* a, const SweepRow* b) { return a->concurrency < b->concurrency; });
    auto ttft_ok = [&](const SweepRow* r) { return r->ttft_ms[s] <= slo.ttft_ms; };
    auto itl_ok = [&](const SweepRow* r) { return itl_side_ok(*r, s, slo.itl_ms, slo.gap_ms); };
    PlanRow row;
    row.name = u.name;
    int best = -1;   // rightmost point under both lines
    for (int i = 0; i < static_cast<int>(pts.size()); ++i)
      if (ttft_ok(pts[i]) && itl_ok(pts[i])) best = i;
    // The limiting side: what the next swept point (or the first, if none passes) breaks.
    const int probe = best + 1;
    if (probe < static_cast<int>(pts.size())) {
      const bool t = !ttft_ok(pts[probe]), i = !itl_ok(pts[probe]);
      row.limited_by = t && i ? LimitedBy::both : t ? LimitedBy::ttft : i ? LimitedBy::itl : LimitedBy::none;
      row.kv_full = t && pts[probe]->kv_full;
      row.gap_only = gap_alone_breaks(*pts[probe], s, slo.itl_ms, slo.gap_ms);
    }
    row.prefill_train = pts[best >= 0 ? best : 0]->prefill_train ||
                        (probe < static_cast<int>(pts.size()) && pts[probe]->prefill_train);
    if (best >= 0 && pts[best]->output_tps > 0) {
      row.feasible = true;
      row.max_concurrency = pts[best]->concurrency;
      row.tps_per_replica = pts[best]->output_tps;
      size_copies(row, u, std::ceil(slo.target_tps / row.tps_per_replica - 1e-9), slo);
    }
    out.push_back(std::move(row));
  }
  return out;
}

}  // namespace servesim::sim
