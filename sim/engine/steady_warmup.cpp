#include "sim/engine/steady_warmup.hpp"

#include <algorithm>
#include <cmath>

#include "common/stats.hpp"

namespace servesim::sim {

SteadyWarmup::SteadyWarmup(int clients) : round_(std::max<std::int64_t>(clients, SteadyRule::kMinRoundRequests)) {}

bool SteadyWarmup::finished(double latency_s, double ttft_s) {
  if (steady_) return true;
  sum_latency_ += latency_s;
  sum_ttft_ += ttft_s;
  if (++done_ % round_ != 0) return false;
  latency_.push_back(sum_latency_ / double(round_));
  ttft_.push_back(sum_ttft_ / double(round_));
  sum_latency_ = sum_ttft_ = 0;
  const std::size_t n = latency_.size(), w = SteadyRule::kWindowRounds;
  if (n < std::size_t{SteadyRule::kMinRounds} || n < w) return false;
  double l = 0, t = 0;
  for (std::size_t i = n - w; i < n; ++i) l += latency_[i], t += ttft_[i];
  l /= double(w);
  t /= double(w);
  for (std::size_t i = n - w; i < n; ++i)
    if (!(std::fabs(latency_[i] - l) <= SteadyRule::kLatencyBand * l && std::fabs(ttft_[i] - t) <= SteadyRule::kTtftBand * t))
      return false;
  return steady_ = true;
}

std::int64_t PrecisionRule::batch_requests(int clients) { return std::max<std::int64_t>(clients, kMinBatchRequests); }

std::int64_t PrecisionRule::min_requests(int clients, std::int64_t max_requests) {
  const double n = double(std::max(1, clients)), m = double(std::max<std::int64_t>(1, max_requests));
  const auto drain = clients > 1 ? std::int64_t(std::ceil(n * m / (n + kTolerance * m))) : std::int64_t{0};
  return std::max({kMinRequests, std::int64_t{kMinBatches} * batch_requests(clients), drain});
}

double PrecisionRule::t975(int df) {
  static constexpr double table[31] = {0,      12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228,
                                       2.201,  2.179,  2.160, 2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086, 2.080,
                                       2.074,  2.069,  2.064, 2.060, 2.056, 2.052, 2.048, 2.045, 2.042};
  if (df < 1) df = 1;
  if (df <= 30) return table[df];
  const double z = 1.959964, d = double(df), z3 = z * z * z, z5 = z3 * z * z;
  return z + (z3 + z) / (4 * d) + (5 * z5 + 16 * z3 + 3 * z) / (96 * d * d);
}

MeasuredPrecision::MeasuredPrecision(int clients, std::int64_t max_requests)
    : batch_(PrecisionRule::batch_requests(clients)), min_(PrecisionRule::min_requests(clients, max_requests)) {
  ttft_.reserve(std::size_t(std::max<std::int64_t>(max_requests, 0)));
  itl_.reserve(std::size_t(std::max<std::int64_t>(max_requests, 0)));
}

bool MeasuredPrecision::finished(double ttft_s, double itl_s) {
  if (precise_) return true;
  ttft_.push_back(ttft_s);
  itl_.push_back(itl_s);
  const auto n = std::int64_t(ttft_.size());
  if (n < min_ || n % batch_ != 0) return false;
  return precise_ = check();
}

namespace {

// Relative 95 % half-width of `point` from the batch estimates `b`.
double relative_half_width(const std::vector<double>& b, double point) {
  const std::size_t k = b.size();
  if (k < 2 || !(point > 0)) return 0;
  double mean = 0, sq = 0;
  for (double x : b) mean += x;
  mean /= double(k);
  for (double x : b) sq += (x - mean) * (x - mean);
  const double sd = std::sqrt(sq / double(k - 1));
  return PrecisionRule::t975(int(k) - 1) * sd / std::sqrt(double(k)) / point;
}

}  // namespace

bool MeasuredPrecision::check() {
  const std::size_t k = ttft_.size() / std::size_t(batch_), b = std::size_t(batch_);
  half_.assign(4, 0.0);
  for (int which = 0; which < 2; ++which) {
    const std::vector<double>& all = which == 0 ? ttft_ : itl_;
    // The checked requests' values in order: those of the batches since the last check sorted
    // and merged into the sorted values of those before (the sequence a sort of them all gives).
    std::vector<double>& every = sorted_[which];
    const std::size_t before = every.size();
    for (std::size_t i = checked_; i < k * b; ++i)
      if (!std::isnan(all[i])) every.push_back(all[i]);
    if (every.empty()) continue;   // no ITL: every answer one token
    const auto mid = every.begin() + std::ptrdiff_t(before);
    std::sort(mid, every.end());
    std::inplace_merge(every.begin(), mid, every.end());
    const double q = percentile_sorted(every, 90);
    double mean = 0;
    for (double x : every) mean += x;
    mean /= double(every.size());
    // Batch means of the figure and of the indicator 1{x <= p90} (the share of a batch at or
    // under the whole run's p90).
    std::vector<double> means, below;
    for (std::size_t j = 0; j < k; ++j) {
      double s = 0, under = 0, m = 0;
      for (std::size_t i = j * b; i < (j + 1) * b; ++i)
        if (!std::isnan(all[i])) s += all[i], under += all[i] <= q, ++m;
      if (m == 0) continue;
      means.push_back(s / m);
      below.push_back(under / m);
    }
    half_[std::size_t(which)] = relative_half_width(means, mean);
    // The p90's interval: the quantiles at 0.9 -/+ the share's half-width, half their distance
    // relative to the p90.
    double h = relative_half_width(below, 1.0);   // absolute half-width of the share
    const double lo = percentile_sorted(every, std::max(0.0, 90 - 100 * h)),
                 hi = percentile_sorted(every, std::min(100.0, 90 + 100 * h));
    half_[std::size_t(2 + which)] = q > 0 ? 0.5 * (hi - lo) / q : 0.0;
  }
  checked_ = k * b;
  return half_[0] <= PrecisionRule::kTtftTolerance && half_[2] <= PrecisionRule::kTtftTolerance &&
         half_[1] <= PrecisionRule::kTolerance && half_[3] <= PrecisionRule::kTolerance;
}

}  // namespace servesim::sim
