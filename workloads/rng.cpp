#include "workloads/rng.hpp"

#include <boost/random/exponential_distribution.hpp>
#include <boost/random/gamma_distribution.hpp>
#include <boost/random/normal_distribution.hpp>
#include <boost/random/uniform_01.hpp>
#include <boost/random/uniform_int_distribution.hpp>

namespace servesim::workloads {

double Rng::uniform() { return boost::random::uniform_01<double>{}(gen_); }

double Rng::uniform(double lo, double hi) { return lo + (hi - lo) * uniform(); }

std::int64_t Rng::uniform_int(std::int64_t lo, std::int64_t hi) {
  if (hi <= lo) return lo;
  return boost::random::uniform_int_distribution<std::int64_t>(lo, hi)(gen_);
}

double Rng::normal(double mean, double stddev) {
  if (stddev <= 0) return mean;
  return boost::random::normal_distribution<double>(mean, stddev)(gen_);
}

double Rng::exponential(double rate) { return boost::random::exponential_distribution<double>(rate)(gen_); }

double Rng::gamma(double shape, double scale) { return boost::random::gamma_distribution<double>(shape, scale)(gen_); }

}  // namespace servesim::workloads
