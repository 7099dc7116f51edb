// MTP speculative decoding: tokens per step and the cost of a verify step, by hand.
#include <gtest/gtest.h>

#include "common/error.hpp"
#include "sim/decoding/mtp.hpp"
#include "sim/simulate.hpp"

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

// End to end through simulate(): Nemotron 3 Super has an MTP layer. At acceptance 1.0 and K = 2
// every decode step emits 3 tokens, so after the prefill's first token a lone request takes
// ceil((OSL - 1) / 3) decode steps and its ITL is about one (verify + 2 drafts) step / 3.
namespace servesim::sim {
namespace {

Scenario lone_request(int k, const std::string& acceptance, int osl) {
  const std::string spec = k > 0 ? ", \"num_speculative_tokens\": " + std::to_string(k) + ", \"acceptance_rate\": " + acceptance : "";
  return parse_scenario(R"({"model": "nemotron-3-super", "gpu": "h200", "gpus": 8, "tp": 8, "precision": "fp8",
    "engine": {"max_num_seqs": 256, "async_scheduling": false)" + spec + R"(}, "frontend": {"enabled": false},
    "workload": {"concurrency": 1, "requests": 1, "isl": 1000, "osl": )" + std::to_string(osl) + "}}", "mtp test");
}

TEST(Mtp, LoneRequestAtFullAcceptanceTakesAThirdOfTheDecodeSteps) {
  for (int osl : {301, 300, 2}) {
    const SimResult plain = simulate(lone_request(0, "", osl));
    const SimResult mtp = simulate(lone_request(2, "[1.0, 1.0]", osl));
    ASSERT_EQ(mtp.workers.size(), 1u);
    // One prefill step (it samples the first token), then the decode steps.
    EXPECT_EQ(plain.workers[0].steps, 1 + (osl - 1));
    EXPECT_EQ(mtp.workers[0].steps, 1 + (osl - 1 + 2) / 3) << "OSL " << osl;
    EXPECT_EQ(mtp.summary.total_output_tokens, osl);
  }
  const Scenario s = lone_request(2, "[1.0, 1.0]", 301);
  const SimResult r = simulate(s);
  const Prepared p = prepare(s);   // p.cost includes the two draft passes
  const double overhead = p.engine.overhead_per_step_s() + p.engine.step_overhead_per_seq_s;  // host time of a one-request step (profile applied)
  auto step = [&](std::int64_t context) {
    models::StepBatch b;
    b.decode_seqs = 1;
    b.decode_context_tokens = context;
    return p.cost->seconds(b) + overhead;
  };
  // Context runs from 1001 to 1300 tokens over the 100 steps; the step time lies between.
  EXPECT_GE(r.summary.itl_ms.avg, step(1001) / 3 * 1e3 * (1 - 1e-9));
  EXPECT_LE(r.summary.itl_ms.avg, step(1301) / 3 * 1e3 * (1 + 1e-9));
  // The MTP step costs more than a plain one (3 verify tokens + 2 drafts) but emits 3 tokens.
  const Prepared plain = prepare(lone_request(0, "", 301));
  models::StepBatch b;
  b.decode_seqs = 1;
  b.decode_context_tokens = 1001;
  const double draft = draft_cost_fraction(*p.model);
  EXPECT_GT(draft, 0);
  EXPECT_GT(p.cost->seconds(b), plain.cost->seconds(b) * (1 + 2 * draft) * (1 - 1e-9));
  EXPECT_LT(r.summary.itl_ms.avg, simulate(lone_request(0, "", 301)).summary.itl_ms.avg / 2);
}

TEST(Mtp, ModelWithoutMtpLayersCannotDraft) {
  Scenario s = lone_request(2, "[0.7, 0.7]", 10);
  s.model = "llama-3.1-70b";
  EXPECT_THROW(prepare(s), Error);
}

}  // namespace
}  // namespace servesim::sim
