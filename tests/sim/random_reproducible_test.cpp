// Reproducible samples (workloads/rng.hpp: Boost.Random's header distributions on mt19937_64):
// a sweep whose every point draws random arrivals (gamma) and random lengths (normal, lognormal)
// gives the same bits at 1, 2 and 3 threads and on a second run, and a different seed differs.
#include <gtest/gtest.h>

#include "sim/api/api.hpp"

namespace {

nlohmann::json random_scenario(int seed) {
  nlohmann::json s = servesim::api::default_scenario();
  s["seed"] = seed;
  s["workload"] = {{"request_rate", 4.0},
                   {"burstiness", 0.5},
                   {"requests", 60},
                   {"isl", {{"kind", "normal"}, {"mean", 1500}, {"stddev", 400}}},
                   {"osl", {{"kind", "lognormal"}, {"mean", 200}, {"stddev", 80}}}};
  return s;
}

std::string run(int seed, int threads) {
  return servesim::api::sweep(random_scenario(seed), "request_rate", {2.0, 4.0, 8.0, 16.0}, threads).dump();
}

}  // namespace

TEST(RandomSamples, BitIdenticalAcrossThreadCountsAndRuns) {
  const std::string one = run(7, 1);
  EXPECT_EQ(one, run(7, 2));
  EXPECT_EQ(one, run(7, 3));
  EXPECT_EQ(one, run(7, 1));
  EXPECT_NE(one, run(8, 2));   // the seed reaches the samples
}
