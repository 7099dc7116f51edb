// sort_values (common/stats.hpp): the summary's and the load window's sorts give the vector
// std::sort gives, bit for bit, whichever way they sort it.
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "common/stats.hpp"

namespace {

void expect_as_std_sort(std::vector<double> v, const char* what) {
  std::vector<double> want = v;
  std::sort(want.begin(), want.end());
  servesim::sort_values(v);
  ASSERT_EQ(v.size(), want.size()) << what;
  for (std::size_t i = 0; i < v.size(); ++i)
    ASSERT_EQ(std::bit_cast<std::uint64_t>(v[i]), std::bit_cast<std::uint64_t>(want[i])) << what << " at " << i;
}

}  // namespace

TEST(SortValues, GivesStdSortsVector) {
  std::mt19937_64 rng(7);
  std::lognormal_distribution<double> latency(std::log(0.2), 0.6);
  std::uniform_int_distribution<int> small(0, 9);
  for (std::size_t n : {0, 1, 2, 255, 256, 257, 1000, 4096, 20000}) {
    std::vector<double> lat(n), ties(n), wide(n), mixed(n), ordered(n);
    for (std::size_t i = 0; i < n; ++i) {
      lat[i] = latency(rng);                               // latencies: one exponent range, distinct
      ties[i] = 0.125 * small(rng);                        // many equal values and zeros
      wide[i] = std::ldexp(latency(rng), small(rng) * 90 - 400);   // exponents far apart, denormals
      mixed[i] = i % 7 == 3 ? -latency(rng) : latency(rng);        // negatives: not by the bits
      ordered[i] = double(n - i);                          // reversed
    }
    expect_as_std_sort(lat, "latencies");
    expect_as_std_sort(ties, "ties");
    expect_as_std_sort(wide, "wide");
    expect_as_std_sort(mixed, "with negatives");
    expect_as_std_sort(ordered, "reversed");
  }
  // A negative zero among positives sorts as std::sort leaves it (equal to +0).
  std::vector<double> z(300, 1.0);
  z[17] = -0.0;
  z[200] = 0.0;
  std::vector<double> s = z;
  servesim::sort_values(s);
  EXPECT_EQ(s[0], 0.0);
  EXPECT_EQ(s[1], 0.0);
  EXPECT_EQ(s[2], 1.0);
}
