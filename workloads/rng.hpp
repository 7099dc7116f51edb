// Reproducible random numbers: the Mersenne Twister mt19937_64 (its output is fixed by the C++
// standard; Boost.Random's header implementation is used) and Boost.Random's header-defined
// distributions. The standard library's distribution algorithms are unspecified and differ
// between libstdc++ and libc++; Boost's are code in the headers, so the same seed gives the same
// samples with any compiler and standard library (for one Boost release: 1.74 here).
#pragma once
#include <cstdint>

#include <boost/random/mersenne_twister.hpp>

namespace servesim::workloads {

class Rng {
 public:
  explicit Rng(std::uint64_t seed) : gen_(seed) {}
  double uniform();                          // [0, 1), boost::random::uniform_01
  double uniform(double lo, double hi);      // [lo, hi)
  std::int64_t uniform_int(std::int64_t lo, std::int64_t hi);  // inclusive both ends (lo when hi <= lo)
  double normal(double mean, double stddev); // boost::random::normal_distribution (ziggurat)
  double exponential(double rate);           // boost::random::exponential_distribution, mean 1/rate
  double gamma(double shape, double scale);  // boost::random::gamma_distribution
  std::uint64_t bits() { return gen_(); }

 private:
  boost::random::mt19937_64 gen_;
};

}  // namespace servesim::workloads
