// Metric definitions follow aiperf (tags, units, per-request formulas); see metrics.hpp.
#include "sim/metrics.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include <nlohmann/json.hpp>

namespace servesim::sim {

double overload_allowance(const Summary& s) {
  const double sent = double(s.load_sent);
  return std::max(0.1 * sent, 3 * std::max(1.0, s.send_gap_cv) * std::sqrt(sent));
}

double in_flight_allowance(const Summary& s) {
  const double sent = double(s.load_sent);
  return std::max(0.1 * sent, 3 * std::max(1.0, s.send_gap_cv) * std::sqrt(sent + double(s.in_flight_at_open)));
}

bool in_flight_judged(const Summary& s) { return s.load_from_s >= s.request_latency_ms.p90 * 1e-3; }

std::optional<bool> overloaded(const Summary& s) {
  if (s.load_sent < 20 || s.load_window_s <= 0) return std::nullopt;
  if (double(s.waiting_at_end - s.waiting_at_open) > overload_allowance(s)) return true;
  return in_flight_judged(s) && double(s.in_flight_at_end - s.in_flight_at_open) > in_flight_allowance(s);
}

double served_rps(const Summary& s) { return s.load_window_s > 0 ? double(s.load_answered) / s.load_window_s : 0.0; }
double started_rps(const Summary& s) { return s.load_window_s > 0 ? double(s.load_started) / s.load_window_s : 0.0; }

nlohmann::json load_json(const Summary& s, double offered_rps) {
  const auto o = overloaded(s);
  const bool w = s.load_window_s > 0;
  auto rate = [&](double x) { return w ? nlohmann::json(x) : nlohmann::json(nullptr); };
  return {{"offered_requests_per_s", offered_rps},
          {"window", "the later half of the measured sends: first send + span / 2 to the last send"},
          {"window_from_s", s.load_from_s},
          {"window_s", s.load_window_s},
          {"sent_requests_per_s", rate(double(s.load_sent) / s.load_window_s)},
          {"started_requests_per_s", rate(started_rps(s))},
          {"served_requests_per_s", rate(served_rps(s))},
          {"served_output_tokens_per_s", rate(double(s.load_answered_tokens) / s.load_window_s)},
          {"waiting_at_window_start", s.waiting_at_open},
          {"waiting_at_last_send", s.waiting_at_end},
          {"in_flight_at_window_start", s.in_flight_at_open},
          {"in_flight_at_last_send", s.in_flight_at_end},
          {"send_gap_cv", s.send_gap_cv},
          {"steady_output_tokens_per_s", s.steady_output_tps},
          {"queue_growth_allowed", overload_allowance(s)},
          {"in_flight_growth_allowed", in_flight_judged(s) ? nlohmann::json(in_flight_allowance(s)) : nlohmann::json(nullptr)},
          {"overloaded", o ? nlohmann::json(*o) : nlohmann::json(nullptr)}};
}

std::string overload_line(const Summary& s, double offered_rps) {
  if (!overloaded(s).value_or(false)) return "";
  char buf[1024];
  std::snprintf(buf, sizeof buf,
                "OVERLOADED: offered %.4g requests/s; over the later half of the sends (%.1f s from %.1f s after the first) "
                "%.3f sent, %.3f started and %.3f served per second; requests waiting for their first token grew from %lld "
                "to %lld (allowed %.0f: max(10 %% of %lld sent, 3 x %.2f x sqrt(sent))) and those in flight from %lld to %lld "
                "(allowed %.0f: max(10 %% of sent, 3 x %.2f x sqrt(sent + in flight at the start))), so latency grows with "
                "the run's length: lower the rate or add capacity",
                offered_rps, s.load_window_s, s.load_from_s, double(s.load_sent) / s.load_window_s, started_rps(s),
                served_rps(s), static_cast<long long>(s.waiting_at_open), static_cast<long long>(s.waiting_at_end),
                overload_allowance(s), static_cast<long long>(s.load_sent), std::max(1.0, s.send_gap_cv),
                static_cast<long long>(s.in_flight_at_open), static_cast<long long>(s.in_flight_at_end), in_flight_allowance(s),
                std::max(1.0, s.send_gap_cv));
  return buf;
}

std::string overload_note(int rows) {
  return "OVERLOADED below: for " + std::to_string(rows) +
         " row(s) one copy fewer served less than its share of the offered rate (its queue grew over the run, so its TTFT "
         "only grows with time): counted as failing the SLO, whatever its percentiles read\n";
}

Stats compute_stats(std::vector<double>& values) {
  Stats s;
  s.count = static_cast<std::int64_t>(values.size());
  if (values.empty()) return s;
  // Fixed lengths (and one request's values) come in order: only a sort finds nothing to move.
  // `<=` sends a NaN to the sort, as before.
  bool ascending = true;
  for (std::size_t i = 1; i < values.size() && ascending; ++i) ascending = values[i - 1] <= values[i];
  if (!ascending) sort_values(values);
  double sum = 0;
  for (double x : values) sum += x;
  s.avg = sum / static_cast<double>(values.size());
  double ss = 0;
  for (double x : values) ss += (x - s.avg) * (x - s.avg);
  s.std = std::sqrt(ss / static_cast<double>(values.size()));
  s.min = values.front();
  s.max = values.back();
  s.p1 = percentile_sorted(values, 1);
  s.p5 = percentile_sorted(values, 5);
  s.p10 = percentile_sorted(values, 10);
  s.p25 = percentile_sorted(values, 25);
  s.p50 = percentile_sorted(values, 50);
  s.p75 = percentile_sorted(values, 75);
  s.p90 = percentile_sorted(values, 90);
  s.p95 = percentile_sorted(values, 95);
  s.p99 = percentile_sorted(values, 99);
  return s;
}

MetricsCollector::MetricsCollector(bool keep_records) : keep_records_(keep_records) {}

void MetricsCollector::add(const RequestRecord& r) {
  if (keep_records_) records_.push_back(r);
  if (progress_) {
    const std::int64_t n = warmup_count_ + static_cast<std::int64_t>(latency_s_.size()) + 1;
    if ((n & 0x3FFF) == 0) progress_(n);
  }
  if (r.warmup) {
    ++warmup_count_;
    return;
  }
  latency_s_.push_back(r.finish_s - r.arrival_s);
  ttft_s_.push_back(r.first_token_s - r.arrival_s);
  ttst_s_.push_back(r.output_tokens > 1 ? r.second_token_s - r.first_token_s : NAN);
  auto clamp32 = [](std::int64_t x) { return static_cast<std::int32_t>(std::clamp<std::int64_t>(x, 0, INT32_MAX)); };
  isl_.push_back(clamp32(r.input_tokens));
  osl_.push_back(clamp32(r.output_tokens));
  first_arrival_s_ = std::min(first_arrival_s_, r.arrival_s);
  last_finish_s_ = std::max(last_finish_s_, r.finish_s);
  last_arrival_s_ = std::max(last_arrival_s_, r.arrival_s);
  finish_s_.push_back(r.finish_s);
}

int MetricsCollector::add_replica(std::string name) {
  replicas_.push_back(ReplicaAcc{});
  replicas_.back().name = std::move(name);
  return static_cast<int>(replicas_.size()) - 1;
}

void MetricsCollector::add_replicas_up_to(int replica) {
  const std::size_t old = replicas_.size();
  replicas_.resize(static_cast<std::size_t>(replica) + 1);
  for (std::size_t k = old; k < replicas_.size(); ++k) replicas_[k].name = "replica " + std::to_string(k);
}

void MetricsCollector::set_input_config(const nlohmann::json& config) { input_config_ = config.dump(); }

Summary MetricsCollector::summary(double start_s, double end_s, const Slo* slo) const {
  Summary s;
  const std::size_t n = latency_s_.size();
  s.start_s = std::isnan(start_s) ? (n ? first_arrival_s_ : 0.0) : start_s;
  s.end_s = std::isnan(end_s) ? (n ? last_finish_s_ : 0.0) : end_s;
  s.duration_s = std::max(0.0, s.end_s - s.start_s);
  s.request_count = static_cast<std::int64_t>(n);
  s.warmup_request_count = warmup_count_;
  std::vector<double> lat, ttft, ttst, itl, per_user, isl, osl;
  lat.reserve(n);
  ttft.reserve(n);
  isl.reserve(n);
  osl.reserve(n);
  for (std::size_t i = 0; i < n; ++i) {
    lat.push_back(latency_s_[i] * 1e3);
    ttft.push_back(ttft_s_[i] * 1e3);
    isl.push_back(isl_[i]);
    osl.push_back(osl_[i]);
    s.total_input_tokens += isl_[i];
    s.total_output_tokens += osl_[i];
    if (osl_[i] > 1) {
      // aiperf: ITL = (request_latency - TTFT) / (OSL - 1); per-user throughput is its inverse.
      const double decode_s = latency_s_[i] - ttft_s_[i];
      itl.push_back(decode_s * 1e3 / (osl_[i] - 1));
      if (decode_s > 0) per_user.push_back((osl_[i] - 1) / decode_s);
      if (!std::isnan(ttst_s_[i])) ttst.push_back(ttst_s_[i] * 1e3);
    }
  }
  s.request_latency_ms = compute_stats(lat);
  s.ttft_ms = compute_stats(ttft);
  s.ttst_ms = compute_stats(ttst);
  s.itl_ms = compute_stats(itl);
  s.output_token_throughput_per_user = compute_stats(per_user);
  s.token_gap_ms = token_gaps_.stats_ms();
  s.input_sequence_length = compute_stats(isl);
  s.output_sequence_length = compute_stats(osl);
  if (s.duration_s > 0) {
    s.request_throughput_per_s = static_cast<double>(n) / s.duration_s;
    s.output_token_throughput_per_s = static_cast<double>(s.total_output_tokens) / s.duration_s;
  }
  if (n > 0) {   // the load window: the later half of the measured sends
    std::vector<double> sent(n);
    for (std::size_t i = 0; i < n; ++i) sent[i] = finish_s_[i] - latency_s_[i];
    const double from = first_arrival_s_ + 0.5 * (last_arrival_s_ - first_arrival_s_), to = last_arrival_s_;
    s.load_from_s = from - first_arrival_s_;
    s.load_window_s = to - from;
    for (std::size_t i = 0; i < n; ++i) {
      const double first_token = sent[i] + ttft_s_[i];
      const bool in = finish_s_[i] > from && finish_s_[i] <= to;
      s.load_sent += sent[i] > from;
      s.load_started += first_token > from && first_token <= to;
      s.load_answered += in;
      if (in) s.load_answered_tokens += osl_[i];
      s.waiting_at_open += sent[i] <= from && first_token > from;
      s.waiting_at_end += first_token > to;
      s.in_flight_at_open += sent[i] <= from && finish_s_[i] > from;
      s.in_flight_at_end += finish_s_[i] > to;
    }
    sort_values(sent);
    const auto at_first = std::upper_bound(sent.begin(), sent.end(), sent.front()) - sent.begin();
    if (sent.back() > sent.front())
      s.steady_output_tps = double(std::ptrdiff_t(n) - at_first) / (sent.back() - sent.front()) *
                            (double(s.total_output_tokens) / double(n));
    if (n > 2) {
      double sum = 0, sq = 0;
      for (std::size_t i = 1; i < n; ++i) sum += sent[i] - sent[i - 1];
      const double mean = sum / double(n - 1);
      for (std::size_t i = 1; i < n; ++i) sq += (sent[i] - sent[i - 1] - mean) * (sent[i] - sent[i - 1] - mean);
      s.send_gap_cv = mean > 0 ? std::sqrt(sq / double(n - 1)) / mean : 0.0;
    }
  }
  if (slo && slo->any()) {
    s.has_slo = true;
    s.slo = *slo;
    for (std::size_t i = 0; i < n; ++i) {
      bool ok = true;
      if (slo->ttft_ms > 0) ok = ok && ttft_s_[i] * 1e3 <= slo->ttft_ms;
      if (slo->latency_ms > 0) ok = ok && latency_s_[i] * 1e3 <= slo->latency_ms;
      if (slo->itl_ms > 0 && osl_[i] > 1) ok = ok && (latency_s_[i] - ttft_s_[i]) * 1e3 / (osl_[i] - 1) <= slo->itl_ms;
      s.good_request_count += ok ? 1 : 0;
    }
    if (s.duration_s > 0) s.goodput_per_s = static_cast<double>(s.good_request_count) / s.duration_s;
  }
  for (const auto& a : replicas_) {
    ReplicaSummary r;
    r.name = a.name;
    r.steps = a.steps;
    r.busy_s = a.busy_s;
    r.busy_fraction = s.duration_s > 0 ? std::min(1.0, a.busy_s / s.duration_s) : 0.0;
    r.mean_batch_size = a.busy_s > 0 ? a.batch_time / a.busy_s : 0.0;
    r.max_batch_size = a.max_batch;
    r.mean_kv_utilization = a.busy_s > 0 ? a.kv_time / a.busy_s : 0.0;
    r.max_kv_utilization = a.max_kv;
    s.replicas.push_back(std::move(r));
  }
  return s;
}

const std::vector<MetricInfo>& aiperf_metric_infos() {
  static const std::vector<MetricInfo> v = {
      {"time_to_first_token", "Time to First Token", "ms"},
      {"time_to_second_token", "Time to Second Token", "ms"},
      {"request_latency", "Request Latency", "ms"},
      {"inter_token_latency", "Inter Token Latency", "ms"},
      {"output_token_throughput_per_user", "Output Token Throughput Per User", "tokens/sec/user"},
      {"output_sequence_length", "Output Sequence Length", "tokens"},
      {"input_sequence_length", "Input Sequence Length", "tokens"},
      {"output_token_throughput", "Output Token Throughput", "tokens/sec"},
      {"request_throughput", "Request Throughput", "requests/sec"},
      {"request_count", "Request Count", "requests"},
      {"goodput", "Goodput", "requests/sec"},
      {"total_output_tokens", "Total Output Tokens", "tokens"},
      {"total_input_tokens", "Total Input Tokens", "tokens"},
      {"benchmark_duration", "Benchmark Duration", "sec"},
  };
  return v;
}

}  // namespace servesim::sim
