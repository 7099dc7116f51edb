#include "common/stats.hpp"

#include <algorithm>
#include <cmath>
#include <cstddef>

namespace servesim {

double percentile_sorted(const std::vector<double>& v, double q) {
  // numpy.percentile(method="linear"): virtual index (n-1)*q/100, then numpy's _lerp, which
  // interpolates from the nearer end for gamma >= 0.5 (same bits as numpy).
  const double qq = q / 100.0;
  const double vi = static_cast<double>(v.size() - 1) * qq;
  const double lo_f = std::floor(vi);
  const auto lo = static_cast<std::size_t>(lo_f);
  const std::size_t hi = std::min(lo + 1, v.size() - 1);
  const double g = vi - lo_f;
  const double a = v[lo], b = v[hi], d = b - a;
  return g >= 0.5 ? b - d * (1.0 - g) : a + d * g;
}

}  // namespace servesim
