#include "sim/token_gaps.hpp"

#include <algorithm>
#include <cstring>

#include "sim/metrics.hpp"

namespace servesim::sim {

namespace {
// A positive double's bits grow with its value: its exponent and the top kMantissaBits bits of its
// mantissa name a bin 2^-kMantissaBits of an octave wide (no logarithm per gap).
constexpr int kMantissaBits = 10, kShift = 52 - kMantissaBits;
std::uint64_t bits_of(double x) {
  std::uint64_t b;
  std::memcpy(&b, &x, sizeof b);
  return b;
}
double from_bits(std::uint64_t b) {
  double x;
  std::memcpy(&x, &b, sizeof x);
  return x;
}
const std::uint64_t kBase = bits_of(TokenGaps::kMinS) >> kShift;
const int kBins = static_cast<int>((bits_of(TokenGaps::kMaxS) >> kShift) - kBase);
double bin_low_s(int bin) { return from_bits((static_cast<std::uint64_t>(bin) + kBase) << kShift); }
}  // namespace

int TokenGaps::bin_of(double gap_s) {
  if (!(gap_s > kMinS)) return 0;
  if (gap_s >= kMaxS) return kBins - 1;
  return static_cast<int>((bits_of(gap_s) >> kShift) - kBase);
}

double TokenGaps::bin_value_s(int bin) { return 0.5 * (bin_low_s(bin) + bin_low_s(bin + 1)); }

void TokenGaps::flush() const {
  if (run_count_ > 0) {
    if (bins_.empty()) bins_.assign(static_cast<std::size_t>(kBins), 0);   // on the first gap
    const double n = double(run_count_);
    bins_[static_cast<std::size_t>(bin_of(run_gap_))] += run_count_;
    total_ += run_count_;
    sum_s_ += n * run_gap_;
    sumsq_s_ += n * run_gap_ * run_gap_;
    min_s_ = std::min(min_s_, run_gap_);
    max_s_ = std::max(max_s_, run_gap_);
  }
  run_gap_ = NAN;
  run_count_ = 0;
}

Stats TokenGaps::stats_ms() const {
  flush();
  Stats s;
  s.count = total_;
  if (total_ == 0) return s;
  const double n = double(total_);
  s.avg = sum_s_ / n * 1e3;
  s.min = min_s_ * 1e3;
  s.max = max_s_ * 1e3;
  s.std = std::sqrt(std::max(0.0, sumsq_s_ / n - (sum_s_ / n) * (sum_s_ / n))) * 1e3;
  // numpy.percentile ("linear") reads the order statistics floor(pos) and floor(pos) + 1, pos =
  // p / 100 x (n - 1); each is its bin's middle kept within the exact min and max, all found in
  // one pass over the bins.
  const double ps[] = {1, 5, 10, 25, 50, 75, 90, 95, 99};
  double* out[] = {&s.p1, &s.p5, &s.p10, &s.p25, &s.p50, &s.p75, &s.p90, &s.p95, &s.p99};
  std::vector<std::int64_t> ranks;
  for (double p : ps) {
    const auto lo = static_cast<std::int64_t>(std::floor(p / 100.0 * (n - 1)));
    ranks.push_back(lo);
    ranks.push_back(std::min(lo + 1, total_ - 1));
  }
  std::vector<std::int64_t> sorted = ranks;
  std::sort(sorted.begin(), sorted.end());
  std::vector<double> value(sorted.size());
  std::int64_t seen = 0;
  std::size_t next = 0;
  for (int b = 0; b < kBins && next < sorted.size(); ++b) {
    seen += bins_[static_cast<std::size_t>(b)];
    while (next < sorted.size() && sorted[next] < seen) value[next++] = std::clamp(bin_value_s(b), min_s_, max_s_);
  }
  auto at = [&](std::int64_t k) {
    return value[static_cast<std::size_t>(std::lower_bound(sorted.begin(), sorted.end(), k) - sorted.begin())];
  };
  for (std::size_t i = 0; i < std::size(ps); ++i) {
    const double pos = ps[i] / 100.0 * (n - 1);
    const double a = at(ranks[2 * i]), b = at(ranks[2 * i + 1]);
    *out[i] = (a + (pos - std::floor(pos)) * (b - a)) * 1e3;
  }
  return s;
}

}  // namespace servesim::sim
