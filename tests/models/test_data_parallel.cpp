// Attention data parallelism (vLLM --data-parallel-size with MoE): attention and the dense layers
// run per rank on that rank's requests, the routed experts span tp x dp GPUs and see every rank's
// tokens, gathered and scattered back over the DP group.
#include <gtest/gtest.h>

#include <string>

#include "common/error.hpp"
#include "hwmodels/catalog.hpp"
#include "hwmodels/kernel_model.hpp"
#include "models/memory.hpp"
#include "models/model_spec.hpp"
#include "models/step_cost.hpp"
#include "tests/models/step_parts.hpp"

using namespace servesim;
using namespace servesim::models;
using servesim::models::test_util::decode;
using servesim::models::test_util::h200;
using servesim::models::test_util::part;

TEST(DataParallel, AttentionRunsOnOneRanksShareAndExpertsOnAllTokens) {
  const ModelSpec& m = model("mixtral-8x7b");
  const auto dp2 = make_step_cost(m, h200(), hw::Precision::bf16, {2, 1, 4, 2});
  const auto dp1 = make_step_cost(m, h200(), hw::Precision::bf16, {2, 1, 1, 1});
  const StepTime a = dp2->breakdown(decode(64, 2000));  // 32 per rank
  const StepTime b = dp1->breakdown(decode(32, 2000));
  // Every per-rank row of the DP2 replica at 64 sequences is the TP2 replica's at 32.
  for (const char* op : {"QKV + O GEMM", "decode attention (KV read)", "LM head GEMM", "TP all-reduce after each block"})
    EXPECT_DOUBLE_EQ(part(a, op), part(b, op)) << op;
  // The routed experts: 64 tokens over EP4, as the fused-MoE model costs them.
  const auto& km = hw::kernel_model(h200());
  hw::MoeShape s;
  s.tokens = 64;
  s.hidden = double(m.moe_width());
  s.inter = double(m.moe_intermediate);
  s.topk = m.top_k;
  s.experts = m.experts;
  s.tp = 1;
  s.ep = 4;
  s.gated = m.moe_gated;
  const int moe_layers = m.count(LayerKind::moe);
  EXPECT_NEAR(part(a, "routed experts (fused MoE)"), moe_layers * km.moe(s, hw::Precision::bf16).seconds,
              1e-3 * part(a, "routed experts (fused MoE)"));
  // The DP exchange: all-gather then reduce-scatter of dp x 32 tokens x hidden x 2 bytes over the
  // 2 GPUs of one DP group (NVLink, one node).
  const double bytes = 2.0 * 32 * m.moe_width() * 2;
  const hw::CommGroup g{2, 1, nullptr};
  const double want = moe_layers * (km.collective(hw::Collective::all_gather, bytes, g).seconds +
                                    km.collective(hw::Collective::reduce_scatter, bytes, g).seconds);
  EXPECT_NEAR(part(a, "MoE all-gather + reduce-scatter across DP ranks"), want, 0.02 * want);
}

TEST(DataParallel, BusiestRankSetsTheStep) {
  const ModelSpec& m = model("mixtral-8x7b");
  const auto dp4 = make_step_cost(m, h200(), hw::Precision::bf16, {1, 1, 4, 4});
  // 5 sequences over 4 ranks: the busiest runs 2, so attention costs what 8 sequences spread evenly cost.
  EXPECT_DOUBLE_EQ(part(dp4->breakdown(decode(5, 1000)), "decode attention (KV read)"),
                   part(dp4->breakdown(decode(8, 1000)), "decode attention (KV read)"));
}

TEST(DataParallel, MemoryHoldsOneKvPoolPerRankAndShardsExpertsOverAllGpus) {
  const ModelSpec& m = model("mixtral-8x7b");
  EngineMemoryConfig cfg;
  cfg.max_num_seqs = 256;
  cfg.max_num_batched_tokens = 8192;
  cfg.kv_cache_dtype = hw::Precision::bf16;
  const MemoryPlan one = plan_memory(m, h200(), hw::Precision::bf16, {2, 1, 4, 2}, cfg);
  EXPECT_EQ(one.gpus, 4);
  EXPECT_EQ(one.dp, 2);
  // The replica runs twice one rank's sequences (its cap is 2 x max_num_seqs).
  const Concurrency c = one.concurrency(4096);
  EXPECT_EQ(c.max_num_seqs, 512);
  EXPECT_EQ(c.by_cache, 2 * one.kv.max_requests(4096));
  // Routed-expert weights per GPU: the same with EP4 (whole experts) as with experts sharded over
  // tp x dp = 4 GPUs, and half of what TP2 alone holds.
  const MemoryPlan sharded = plan_memory(m, h200(), hw::Precision::bf16, {2, 1, 1, 2}, cfg);
  const MemoryPlan tp2 = plan_memory(m, h200(), hw::Precision::bf16, {2, 1, 1, 1}, cfg);
  EXPECT_NEAR(one.weights.total(), sharded.weights.total(), 1e-6 * one.weights.total());
  EXPECT_LT(one.weights.total(), tp2.weights.total());
}

TEST(DataParallel, RefusesWhatVllmCannotRun) {
  EngineMemoryConfig cfg;
  auto msg = [&](const std::string& name, Parallelism par) {
    try {
      plan_memory(model(name), h200(), hw::Precision::bf16, par, cfg);
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  EXPECT_NE(msg("llama-3.1-8b", {1, 1, 1, 2}).find("needs MoE layers"), std::string::npos);
  EXPECT_NE(msg("mixtral-8x7b", {2, 1, 8, 2}).find("does not divide the 4 GPUs"), std::string::npos);
  EXPECT_EQ(msg("mixtral-8x7b", {2, 1, 2, 2}), "");   // MoE TP2 x EP2: an engine's rule (sim::check_layout)
  EXPECT_NE(msg("mixtral-8x7b", {1, 2, 1, 2}).find("pipeline"), std::string::npos);
}

// A prefill step under attention DP leaves the ranks unequal: one rank prefills a 4,096-token prompt
// while the other seven idle. vLLM pads every rank to the busiest (8 x 4,096 tokens through the
// routed experts and the exchange); TensorRT-LLM gathers each rank's own tokens (4,096 in all, what
// eight ranks of 512 decodes each run); SGLang sums them into one buffer and all-reduces it twice.
TEST(DataParallel, AnUnpaddedPrefillStepRunsTheRanksOwnTokens) {
  const ModelSpec& m = model("mixtral-8x7b");
  auto cost = [&](DpPrefillMoe p) {
    Parallelism par{1, 1, 8, 8};
    par.dp_prefill_moe = p;
    return make_step_cost(m, h200(), hw::Precision::bf16, par);
  };
  const auto padded = cost(DpPrefillMoe::padded), gathered = cost(DpPrefillMoe::gathered), summed = cost(DpPrefillMoe::summed);
  const StepTime one_prompt_padded = padded->breakdown(test_util::prefill(1, 4096));
  const StepTime one_prompt = gathered->breakdown(test_util::prefill(1, 4096));
  const StepTime balanced = gathered->breakdown(decode(8 * 512, 1000));   // 512 decodes a rank: 4,096 tokens gathered
  const char* experts = "routed experts (fused MoE)";
  const char* gather = "MoE all-gather + reduce-scatter across DP ranks";
  EXPECT_DOUBLE_EQ(part(one_prompt, experts), part(balanced, experts));
  EXPECT_DOUBLE_EQ(part(one_prompt, gather), part(balanced, gather));
  EXPECT_DOUBLE_EQ(part(padded->breakdown(decode(8 * 512, 1000)), experts), part(balanced, experts));   // decode: the same
  // Padded: the experts and the exchange see 8 x 4,096 tokens (what 8 ranks of 4,096 decodes run).
  const StepTime padded_balanced = padded->breakdown(decode(8 * 4096, 1000));
  EXPECT_DOUBLE_EQ(part(one_prompt_padded, experts), part(padded_balanced, experts));
  EXPECT_DOUBLE_EQ(part(one_prompt_padded, gather), part(padded_balanced, gather));
  EXPECT_GT(part(one_prompt_padded, experts), 2 * part(one_prompt, experts));
  // Attention and the dense layers run on the busy rank either way.
  EXPECT_DOUBLE_EQ(part(one_prompt, "QKV + O GEMM"), part(one_prompt_padded, "QKV + O GEMM"));
  // Summed: two all-reduces of 4,096 tokens x hidden x 2 bytes over the 8 GPUs of the node.
  const StepTime one_prompt_summed = summed->breakdown(test_util::prefill(1, 4096));
  const auto& km = hw::kernel_model(h200());
  const hw::CommGroup node{8, 1, nullptr};
  const double want = m.count(LayerKind::moe) * 2 * km.collective(hw::Collective::all_reduce, 4096.0 * m.moe_width() * 2, node).seconds;
  EXPECT_NEAR(part(one_prompt_summed, "MoE gather + reduce across DP ranks (two all-reduces of every rank's tokens)"), want, 0.02 * want);
  EXPECT_DOUBLE_EQ(part(one_prompt_summed, experts), part(one_prompt, experts));
  // A decode step is balanced: every engine pads it.
  EXPECT_DOUBLE_EQ(summed->seconds(decode(64, 1000)), padded->seconds(decode(64, 1000)));
}

// All-to-all dispatch: a rank's routed experts work on the slots its own tokens send out, so 64
// sequences over 8 ranks (8 a rank) price the experts as the all-gather path prices 8 sequences
// (one a rank, 8 gathered), and 8 prompts of 512 tokens (one a rank) as one prompt of 512 tokens
// gathered without padding.
TEST(DataParallel, AllToAllRanksRunTheExpertsOnTheirOwnTokens) {
  const ModelSpec& m = model("mixtral-8x7b");
  Parallelism par{1, 1, 8, 8};
  par.dp_prefill_moe = DpPrefillMoe::gathered;
  const auto gathered = make_step_cost(m, h200(), hw::Precision::bf16, par);
  par.moe_all_to_all = true;
  const auto a2a = make_step_cost(m, h200(), hw::Precision::bf16, par);
  const char* experts = "routed experts (fused MoE)";
  EXPECT_DOUBLE_EQ(part(a2a->breakdown(decode(64, 1000)), experts), part(gathered->breakdown(decode(8, 1000)), experts));
  EXPECT_DOUBLE_EQ(part(a2a->breakdown(test_util::prefill(8, 512)), experts),
                   part(gathered->breakdown(test_util::prefill(1, 512)), experts));
}
