// Reproducible random numbers: std::mt19937_64 (its output is fixed by the standard) and
// distributions written here, because the standard library's distribution algorithms are
// unspecified and differ between libstdc++ and libc++.
#pragma once
#include <cstdint>
#include <random>

namespace servesim::workloads {

class Rng {
 public:
  explicit Rng(std::uint64_t seed) : gen_(seed) {}
  double uniform();                          // [0, 1), 53 random bits
  double uniform(double lo, double hi);      // [lo, hi)
  std::int64_t uniform_int(std::int64_t lo, std::int64_t hi);  // inclusive both ends
  double normal(double mean, double stddev); // Marsaglia polar method
  double exponential(double rate);           // inverse CDF, mean 1/rate
  double gamma(double shape, double scale);  // Marsaglia-Tsang; shape < 1 by the u^(1/shape) boost
  std::uint64_t bits() { return gen_(); }

 private:
  std::mt19937_64 gen_;
  double spare_ = 0;       // the polar method yields pairs; the second is kept for the next call
  bool has_spare_ = false;
};

}  // namespace servesim::workloads
