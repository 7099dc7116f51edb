// MTP speculative decoding: tokens per step and the cost of a verify step, by hand.
#include <gtest/gtest.h>

#include "common/error.hpp"
#include "sim/decoding/mtp.hpp"

namespace servesim::sim {
namespace {

// A step cost that is linear in what it is given, so the verify/draft split can be checked.
class LinearCost : public models::StepCostModel {
 public:
  double seconds(const models::StepBatch& b) const override {
    return 0.010 + 1e-4 * b.decode_seqs * b.tokens_per_decode_seq + 1e-6 * b.prefill_tokens;
  }
  double encoder_seconds(int tiles) const override { return 1e-3 * tiles; }
  models::StepTime breakdown(const models::StepBatch& b) const override { return {seconds(b), {}}; }
  std::string provenance() const override { return "linear test cost"; }
};

TEST(Mtp, FullAcceptanceEmitsKPlusOne) {
  MtpConfig c{2, {1.0}, 0, 42};
  for (std::uint64_t step = 0; step < 100; ++step) EXPECT_EQ(emitted_tokens(c, 7, step), 3);
  EXPECT_DOUBLE_EQ(expected_tokens_per_step(c), 3.0);
}

TEST(Mtp, ZeroAcceptanceEmitsOne) {
  MtpConfig c{2, {0.0}, 0, 42};
  for (std::uint64_t step = 0; step < 100; ++step) EXPECT_EQ(emitted_tokens(c, 7, step), 1);
  EXPECT_DOUBLE_EQ(expected_tokens_per_step(c), 1.0);
}

TEST(Mtp, PerPositionAcceptanceMeanMatchesTheProduct) {
  // p = (0.8, 0.5): E[tokens] = 1 + 0.8 + 0.8 * 0.5 = 2.2.
  MtpConfig c{2, {0.8, 0.5}, 0, 3};
  double sum = 0;
  const int n = 200000;
  for (int i = 0; i < n; ++i) sum += emitted_tokens(c, static_cast<std::uint64_t>(i % 97), static_cast<std::uint64_t>(i));
  EXPECT_NEAR(sum / n, 2.2, 0.01);
  EXPECT_DOUBLE_EQ(expected_tokens_per_step(c), 2.2);
}

TEST(Mtp, DrawsAreAPureFunctionOfSeedRequestAndStep) {
  MtpConfig c{3, {0.6}, 0, 11};
  EXPECT_EQ(emitted_tokens(c, 5, 9), emitted_tokens(c, 5, 9));
  MtpConfig d = c;
  d.seed = 12;
  int differ = 0;
  for (std::uint64_t s = 0; s < 64; ++s) differ += emitted_tokens(c, 5, s) != emitted_tokens(d, 5, s);
  EXPECT_GT(differ, 0);
}

TEST(Mtp, VerifyStepCarriesOnePlusKTokensPlusDrafts) {
  LinearCost cost;
  models::StepBatch b;
  b.decode_seqs = 10;
  b.decode_context_tokens = 10000;
  const double plain = cost.seconds(b);                     // 10 ms + 1 ms
  EXPECT_DOUBLE_EQ(step_seconds_with_mtp(cost, b, MtpConfig{}), plain);
  MtpConfig c{2, {0.7}, 0.05, 1};
  // verify: 10 ms + 1e-4 * 10 * 3 = 13 ms; drafts: 2 * 0.05 * 11 ms = 1.1 ms.
  EXPECT_NEAR(step_seconds_with_mtp(cost, b, c), 0.013 + 0.0011, 1e-12);
}

TEST(Mtp, BadConfigsAreErrors) {
  EXPECT_THROW((MtpConfig{2, {}, 0, 0}.validate("--mtp")), Error);
  EXPECT_THROW((MtpConfig{2, {0.5, 0.5, 0.5}, 0, 0}.validate("--mtp")), Error);
  EXPECT_THROW((MtpConfig{2, {1.5}, 0, 0}.validate("--mtp")), Error);
  EXPECT_NO_THROW((MtpConfig{2, {0.5, 0.4}, 0, 0}.validate("--mtp")));
}

}  // namespace
}  // namespace servesim::sim
