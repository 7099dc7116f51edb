// vLLM's sampler per engine step: the measured H200 table, its interpolation, the transfer to other
// GPUs, and the step breakdown's sampler row for a model's generation_config defaults.
#include <gtest/gtest.h>

#include <cmath>

#include "hwmodels/catalog.hpp"
#include "hwmodels/sampler.hpp"
#include "models/model_spec.hpp"
#include "models/step_cost.hpp"
#include "tests/models/step_parts.hpp"

using namespace servesim;
using hw::SamplingMode;

namespace {
const hw::GpuSpec& gpu(const char* name) { return hw::Catalog::global().gpu(name); }
double us(const char* g, std::int64_t vocab, double rows, SamplingMode m) {
  return 1e6 * hw::sampler(gpu(g), vocab, rows, m).seconds;
}
}  // namespace

TEST(Sampler, ModesFollowVllmsSamplingParameters) {
  EXPECT_EQ(hw::sampling_mode(0, 20, 0.9), SamplingMode::greedy);
  EXPECT_EQ(hw::sampling_mode(1, 0, 1), SamplingMode::random);
  EXPECT_EQ(hw::sampling_mode(0.7, 40, 1), SamplingMode::top_k);
  EXPECT_EQ(hw::sampling_mode(0.7, 0, 0.9), SamplingMode::top_p);
  EXPECT_EQ(hw::sampling_mode(0.6, 20, 0.95), SamplingMode::top_k_top_p);
}

TEST(Sampler, ReadsTheMeasuredTableAndInterpolatesLogLogInRows) {
  // hwmodels/data/sampler_h200.json, vocabulary 200064: batch 4 and 8 (top-k + top-p) 598.7 and
  // 672.7 us, batch 64: 1948.2 us; random draw at batch 64: 266.5 us.
  EXPECT_NEAR(us("H200", 200064, 64, SamplingMode::top_k_top_p), 1948.2, 1e-6);
  EXPECT_NEAR(us("H200", 200064, 64, SamplingMode::random), 266.5, 1e-6);
  EXPECT_NEAR(us("H200", 200064, std::sqrt(32.0), SamplingMode::top_k_top_p), std::sqrt(598.7 * 672.7), 1e-6);
  // Halfway between the measured vocabularies 163840 and 200064: the mean of the two rows.
  const double v = (163840 + 200064) / 2.0;
  EXPECT_NEAR(us("H200", std::int64_t(v), 64, SamplingMode::greedy),
              0.5 * (us("H200", 163840, 64, SamplingMode::greedy) + us("H200", 200064, 64, SamplingMode::greedy)), 1e-6);
  // Beyond the largest measured batch (1024), proportional to the rows.
  EXPECT_NEAR(us("H200", 200064, 2048, SamplingMode::random), 2 * us("H200", 200064, 1024, SamplingMode::random), 1e-6);
  EXPECT_EQ(us("H200", 200064, 0, SamplingMode::random), 0.0);
  // A full vocabulary sort costs more than a top-k, which costs more than a plain draw.
  for (double b : {1.0, 4.0, 64.0, 512.0}) {
    EXPECT_LT(us("H200", 151936, b, SamplingMode::greedy), us("H200", 151936, b, SamplingMode::random));
    EXPECT_LT(us("H200", 151936, b, SamplingMode::random), us("H200", 151936, b, SamplingMode::top_k));
    EXPECT_LT(us("H200", 151936, b, SamplingMode::top_k), us("H200", 151936, b, SamplingMode::top_p));
  }
}

TEST(Sampler, OtherGpusScaleByTheirHbmBandwidth) {
  const auto h200 = hw::sampler(gpu("H200"), 151936, 32, SamplingMode::top_p);
  const auto b200 = hw::sampler(gpu("B200"), 151936, 32, SamplingMode::top_p);
  EXPECT_EQ(h200.source, hw::Source::interpolated);
  EXPECT_EQ(b200.source, hw::Source::transferred);
  EXPECT_NEAR(b200.seconds, h200.seconds * gpu("H200").hbm_bw_bytes_per_s / gpu("B200").hbm_bw_bytes_per_s, 1e-15);
}

TEST(Sampler, StepChargesOneCallOverEveryScheduledRequestsLogits) {
  // Qwen3-32B's generation_config (temperature 0.6, top_k 20, top_p 0.95): the sort path; gpt-oss
  // sets none: vLLM's temperature-1 random draw.
  const auto& qwen = models::model("qwen3-32b");
  EXPECT_EQ(hw::sampling_mode(qwen.sampling.temperature, qwen.sampling.top_k, qwen.sampling.top_p), SamplingMode::top_k_top_p);
  EXPECT_FALSE(qwen.sampling.source.empty());
  const auto& oss = models::model("gpt-oss-120b");
  EXPECT_EQ(hw::sampling_mode(oss.sampling.temperature, oss.sampling.top_k, oss.sampling.top_p), SamplingMode::random);

  const auto cost = models::make_step_cost(qwen, gpu("H200"), hw::Precision::fp8, models::Parallelism{2, 1, 1, 1});
  models::StepBatch b = models::test_util::decode(30, 1000);
  b.prefill_seqs = 2;
  b.prefill_tokens = 2000;
  b.prefill_attention_pairs = 2 * 1000.0 * 1001 / 2;
  const auto t = cost->breakdown(b);
  double sampler = 0;
  for (const auto& p : t.parts)
    if (p.kind == "sampler") sampler += p.seconds;
  // 32 logits rows (30 decodes + 2 prefills), vocabulary 151936, each TP rank sampling them all.
  EXPECT_NEAR(sampler, hw::sampler(gpu("H200"), 151936, 32, SamplingMode::top_k_top_p).seconds, 1e-12);
  EXPECT_NEAR(sampler, 916.2e-6, 1e-9);  // the table's batch-32 point
  double sum = 0;
  for (const auto& p : t.parts) sum += p.seconds;
  EXPECT_NEAR(t.seconds, sum, 1e-12);
}
