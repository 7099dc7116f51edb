#include "common/stats.hpp"

#include <algorithm>
#include <cmath>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstring>

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

void sort_values(std::vector<double>& v) {
  const std::size_t n = v.size();
  // Below a few hundred values std::sort is as fast; a negative zero, a negative or a NaN (sign
  // bit or exponent all ones) would not sort by the bits.
  constexpr std::size_t kRadixFrom = 256;
  constexpr std::uint64_t kNaNExponent = 0x7ff0000000000000ULL;
  bool by_bits = n >= kRadixFrom && n < (std::size_t(1) << 32);
  for (std::size_t i = 0; i < n && by_bits; ++i) {
    const auto u = std::bit_cast<std::uint64_t>(v[i]);
    by_bits = (u >> 63) == 0 && (u & kNaNExponent) != kNaNExponent;
  }
  if (!by_bits) {
    std::sort(v.begin(), v.end());
    return;
  }
  // Least significant byte first, each pass stable; a byte every value shares moves nothing.
  std::vector<std::uint64_t> a(n), b(n);
  std::memcpy(a.data(), v.data(), n * sizeof(double));
  std::uint32_t count[8][256] = {};
  for (const std::uint64_t u : a)
    for (int d = 0; d < 8; ++d) ++count[d][(u >> (8 * d)) & 0xff];
  for (int d = 0; d < 8; ++d) {
    std::uint32_t* c = count[d];
    if (c[(a[0] >> (8 * d)) & 0xff] == n) continue;
    std::uint32_t sum = 0;
    for (int k = 0; k < 256; ++k) {
      const std::uint32_t x = c[k];
      c[k] = sum;
      sum += x;
    }
    for (const std::uint64_t u : a) b[c[(u >> (8 * d)) & 0xff]++] = u;
    a.swap(b);
  }
  std::memcpy(v.data(), a.data(), n * sizeof(double));
}

}  // namespace servesim
