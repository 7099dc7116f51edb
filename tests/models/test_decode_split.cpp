// StepCostModel::decode_split / decode_seconds: a pure-decode step with its context sum left open
// gives seconds() of that batch at every context, bit for bit (the engine's decode steps read
// their time this way), and has no such form where another term reads the context.
#include <gtest/gtest.h>

#include <bit>
#include <cstdint>
#include <string>

#include "hwmodels/catalog.hpp"
#include "models/model_spec.hpp"
#include "models/step_cost.hpp"

using namespace servesim;
using namespace servesim::models;

namespace {
const hw::GpuSpec& h200() { return hw::Catalog::global().gpu("h200"); }

struct Case {
  const char* model;
  hw::Precision weights, kv;
  Parallelism par;
};
}  // namespace

TEST(DecodeSplit, GivesTheModelsBitsAtEveryContext) {
  // Hybrid Mamba + attention + MoE (decode attention with a cold-KV term), sliding layers with
  // sinks, dense GQA, attention data parallelism (the busiest rank's share of the context).
  const Case cases[] = {
      {"nemotron-3-super", hw::Precision::fp8, hw::Precision::fp8, {4, 1, 1, 1}},
      {"nemotron-3-super", hw::Precision::bf16, hw::Precision::bf16, {8, 1, 8, 1}},
      {"gpt-oss-120b", hw::Precision::mxfp4, hw::Precision::bf16, {2, 1, 1, 1}},
      {"llama-3.1-8b", hw::Precision::bf16, hw::Precision::bf16, {1, 1, 1, 1}},
      {"mixtral-8x7b", hw::Precision::bf16, hw::Precision::bf16, {2, 1, 4, 2}},
  };
  int checked = 0;
  for (const Case& c : cases) {
    const auto cost = make_step_cost(model(c.model), h200(), c.weights, c.par, c.kv);
    for (int seqs : {1, 3, 8, 37, 256})
      for (int pad : {0, 2})
        for (int per_seq : {1, 2}) {
          if (pad >= seqs) continue;
          StepBatch b;
          b.decode_seqs = seqs;
          b.graph_padding_seqs = pad;
          b.tokens_per_decode_seq = per_seq;
          b.decode_context_tokens = 1000;
          const DecodeSplit split = cost->decode_split(b);
          ASSERT_TRUE(split.valid) << c.model << " " << seqs;
          // From one token a sequence past 100k: over the cold-KV term's edge and the sliding window.
          for (std::int64_t ctx : {std::int64_t{0}, std::int64_t{1}, std::int64_t{seqs}, std::int64_t{17} * seqs + 5,
                                   std::int64_t{1000} * seqs, std::int64_t{4097} * seqs + 3, std::int64_t{32768} * seqs,
                                   std::int64_t{131071} * seqs}) {
            b.decode_context_tokens = ctx;
            const double want = cost->seconds(b), got = cost->decode_seconds(split, ctx);
            EXPECT_EQ(std::bit_cast<std::uint64_t>(want), std::bit_cast<std::uint64_t>(got))
                << c.model << " seqs " << seqs << " pad " << pad << " per_seq " << per_seq << " ctx " << ctx << ": " << want
                << " vs " << got;
            ++checked;
          }
        }
  }
  EXPECT_GT(checked, 300);
}

TEST(DecodeSplit, NoneWhereOtherTermsReadTheContextOrTheStepPrefills) {
  StepBatch d;
  d.decode_seqs = 8;
  d.decode_context_tokens = 8000;
  // MLA: its latent reads (and DSA's indexer) depend on the context too.
  EXPECT_FALSE(make_step_cost(model("deepseek-v3"), h200(), hw::Precision::fp8_block, {8, 1, 1, 1})->decode_split(d).valid);
  const auto cost = make_step_cost(model("llama-3.1-8b"), h200(), hw::Precision::bf16, {1, 1, 1, 1});
  EXPECT_TRUE(cost->decode_split(d).valid);
  StepBatch mixed = d;
  mixed.prefill_seqs = 1;
  mixed.prefill_tokens = 512;
  mixed.prefill_attention_pairs = 512.0 * 513 / 2;
  EXPECT_FALSE(cost->decode_split(mixed).valid);
  StepBatch empty;
  EXPECT_FALSE(cost->decode_split(empty).valid);
}
