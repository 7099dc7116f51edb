// Moments of the samplers over large samples, and reproducibility of the random streams.
#include <cmath>
#include <random>
#include <vector>

#include <gtest/gtest.h>

#include "workloads/lengths.hpp"
#include "workloads/rng.hpp"
#include "workloads/workload.hpp"

using namespace servesim::workloads;

namespace {
struct Moments { double mean, sd; };
Moments moments(const std::vector<double>& v) {
  double s = 0, ss = 0;
  for (double x : v) s += x;
  const double m = s / v.size();
  for (double x : v) ss += (x - m) * (x - m);
  return {m, std::sqrt(ss / v.size())};
}
std::vector<double> gaps(const std::vector<RequestSpec>& rs) {
  std::vector<double> g;
  for (size_t i = 1; i < rs.size(); ++i) g.push_back(rs[i].arrival_s - rs[i - 1].arrival_s);
  return g;
}
}  // namespace

TEST(Rng, EngineIsTheStandardMt19937_64) {
  // The C++ standard fixes the 10000th output of a default-seeded mt19937_64.
  std::mt19937_64 g;
  g.discard(9999);
  EXPECT_EQ(g(), 9981545732273789042ULL);
  Rng a(5489);   // 5489 is the default seed
  for (int i = 0; i < 9999; ++i) a.bits();
  EXPECT_EQ(a.bits(), 9981545732273789042ULL);
}

TEST(Rng, UniformAndNormalMoments) {
  Rng r(42);
  std::vector<double> u, z;
  for (int i = 0; i < 200000; ++i) u.push_back(r.uniform());
  for (int i = 0; i < 200000; ++i) z.push_back(r.normal(3.0, 2.0));
  const auto mu = moments(u), mz = moments(z);
  EXPECT_NEAR(mu.mean, 0.5, 0.003);
  EXPECT_NEAR(mu.sd, std::sqrt(1.0 / 12), 0.002);
  EXPECT_NEAR(mz.mean, 3.0, 0.015);   // 5 sigma of the mean: 5 * 2/sqrt(2e5)
  EXPECT_NEAR(mz.sd, 2.0, 0.015);
}

TEST(Rng, GammaMeanAndCv) {
  for (double shape : {0.25, 1.0, 4.0}) {
    Rng r(7);
    std::vector<double> g;
    for (int i = 0; i < 200000; ++i) g.push_back(r.gamma(shape, 2.0));
    const auto m = moments(g);
    EXPECT_NEAR(m.mean, shape * 2.0, 0.02 * shape * 2.0) << shape;
    EXPECT_NEAR(m.sd / m.mean, 1.0 / std::sqrt(shape), 0.03 / std::sqrt(shape)) << shape;
  }
}

TEST(Lengths, NormalIslAsAiperfSynthesizesIt) {
  // ceil(x) of a positive normal draw: mean rises by ~0.5, stddev stays (rounding adds 1/12 var).
  Rng r(1);
  const LengthDist d = LengthDist::normal_of(2000, 100);
  std::vector<double> v;
  for (int i = 0; i < 100000; ++i) v.push_back(static_cast<double>(d.sample(r)));
  const auto m = moments(v);
  EXPECT_NEAR(m.mean, 2000.5, 1.6);   // 5 sigma: 5 * 100/sqrt(1e5)
  EXPECT_NEAR(m.sd, 100.0, 1.2);
  for (double x : v) EXPECT_EQ(x, std::floor(x));
}

TEST(Lengths, NormalNeverBelowOne) {
  Rng r(2);
  const LengthDist d = LengthDist::normal_of(2, 50);   // most draws negative: redrawn
  for (int i = 0; i < 20000; ++i) EXPECT_GE(d.sample(r), 1);
}

TEST(Lengths, UniformAndLognormal) {
  Rng r(3);
  LengthDist u;
  u.kind = LengthDist::Kind::uniform;
  u.min = 10;
  u.max = 19;
  std::vector<int> hits(10);
  for (int i = 0; i < 100000; ++i) {
    const auto x = u.sample(r);
    ASSERT_GE(x, 10);
    ASSERT_LE(x, 19);
    ++hits[x - 10];
  }
  for (int h : hits) EXPECT_NEAR(h, 10000, 500);
  LengthDist ln;
  ln.kind = LengthDist::Kind::lognormal;
  ln.mean = 1000;
  ln.stddev = 500;
  std::vector<double> v;
  for (int i = 0; i < 200000; ++i) v.push_back(static_cast<double>(ln.sample(r)));
  const auto m = moments(v);
  EXPECT_NEAR(m.mean, 1000, 8);
  EXPECT_NEAR(m.sd, 500, 12);
}

TEST(Arrivals, PoissonRateAndCv) {
  WorkloadConfig c;
  c.arrival = Arrival::poisson;
  c.rate_per_s = 10;
  c.requests = 100000;
  const auto rs = materialize(c);
  EXPECT_EQ(rs.front().arrival_s, 0.0);
  const auto m = moments(gaps(rs));
  EXPECT_NEAR(1.0 / m.mean, 10.0, 0.05);         // 5 sigma on the mean gap
  EXPECT_NEAR(m.sd / m.mean, 1.0, 0.02);         // exponential: CV 1
  EXPECT_NEAR(rs.size() / rs.back().arrival_s, 10.0, 0.05);
}

TEST(Arrivals, GammaCvIsOneOverSqrtBurstiness) {
  for (double b : {0.25, 0.5, 2.0, 8.0}) {
    WorkloadConfig c;
    c.arrival = Arrival::gamma;
    c.rate_per_s = 4;
    c.burstiness = b;
    c.requests = 100000;
    c.seed = 9;
    const auto m = moments(gaps(materialize(c)));
    EXPECT_NEAR(m.mean, 0.25, 0.25 * 0.02) << b;
    EXPECT_NEAR(m.sd / m.mean, 1.0 / std::sqrt(b), 0.03 / std::sqrt(b)) << b;
  }
}

TEST(Arrivals, ConstantRate) {
  WorkloadConfig c;
  c.arrival = Arrival::constant;
  c.rate_per_s = 8;
  c.requests = 17;
  const auto rs = materialize(c);
  ASSERT_EQ(rs.size(), 17u);
  for (size_t i = 0; i < rs.size(); ++i) EXPECT_DOUBLE_EQ(rs[i].arrival_s, i / 8.0);
}

TEST(Arrivals, SameSeedSameBitsAndStreamsIndependent) {
  WorkloadConfig c;
  c.arrival = Arrival::poisson;
  c.rate_per_s = 3;
  c.requests = 500;
  c.seed = 11;
  c.isl = LengthDist::normal_of(1000, 300);
  c.osl = LengthDist::normal_of(200, 50);
  const auto a = materialize(c), b = materialize(c);
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(a[i].arrival_s, b[i].arrival_s);
    EXPECT_EQ(a[i].input_tokens, b[i].input_tokens);
  }
  c.rate_per_s = 7;   // a different rate must not change the length sequence
  const auto d = materialize(c);
  for (size_t i = 0; i < a.size(); ++i) EXPECT_EQ(a[i].input_tokens, d[i].input_tokens);
  c.seed = 12;
  EXPECT_NE(materialize(c)[5].input_tokens, a[5].input_tokens);
}
