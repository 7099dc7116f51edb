#include "sim/engine/steady_warmup.hpp"

#include <algorithm>
#include <cmath>

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

}  // namespace servesim::sim
