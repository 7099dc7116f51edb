// servesim search: a case with a known best answer, pruning that never changes the answer, bounds
// that hold against the simulation, the same result at any thread count.
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <set>
#include <string>

#include "common/error.hpp"
#include "sim/api/api.hpp"
#include "hwmodels/catalog.hpp"
#include "models/model_spec.hpp"
#include "sim/studies/search.hpp"

namespace {

using servesim::api::SearchArgs;

SearchArgs small() {
  SearchArgs a;
  a.model = "nemotron-h-8b";
  a.gpus = "h200";
  a.isl = 512;
  a.osl = 64;
  a.concurrency = "1,4,16,64";
  a.requests = 48;
  a.ttft_ms = 2000;
  a.itl_ms = 200;
  a.threads = 2;
  return a;
}

const nlohmann::json& config(const nlohmann::json& r, int index) { return r["configurations"][std::size_t(index)]; }

// A dense 8B model fits one H200 at any precision; with a loose SLO and the most output tok/s per
// GPU as the goal, one GPU per replica at FP8 must win: more GPUs per replica only add
// communication to the same work per GPU, and FP8 halves the weight and KV bytes every decode step reads.
TEST(Search, KnownBestAnswer) {
  SearchArgs a = small();
  a.topology = "agg";
  const auto r = servesim::api::search(a);
  ASSERT_FALSE(r["best"].is_null());
  EXPECT_EQ(r["best"]["tp"], 1);
  EXPECT_EQ(r["best"]["precision"], "fp8");
  EXPECT_EQ(r["best"]["score"]["slo_concurrency"], 64);
  // Enumerated: TP 1/2/4/8 x {bf16, fp8} (Hopper has no FP4), dense so no EP variants.
  EXPECT_EQ(r["counts"]["configurations"], 8);
}

// With an ITL SLO below what one GPU can do for one sequence, the search must go wide: the best
// is the shape with the most tok/s per GPU among those whose simulated ITL meets the SLO.
TEST(Search, TightSloPicksWhatMeetsIt) {
  SearchArgs a = small();
  a.topology = "agg";
  a.prune = false;
  const auto loose = servesim::api::search(a);
  // The lowest simulated ITL any one-GPU replica reaches (at any concurrency), from the loose run.
  const auto& lc = loose["sweep"]["columns"];
  double itl_tp1 = 1e300;
  for (std::size_t i = 0; i < lc["index"].size(); ++i)
    if (config(loose, lc["index"][i].get<int>())["tp"] == 1) itl_tp1 = std::min(itl_tp1, lc["itl_p50_ms"][i].get<double>());
  ASSERT_LT(itl_tp1, 1e300);
  a.itl_ms = itl_tp1 * 0.95;   // below what one GPU ever reaches
  const auto r = servesim::api::search(a);
  ASSERT_FALSE(r["best"].is_null());
  EXPECT_GT(r["best"]["tp"].get<int>(), 1);
  EXPECT_LE(r["best"]["score"]["itl_ms"].get<double>(), a.itl_ms);
  // Brute force over the simulated points: nothing meeting both SLOs has more tok/s per GPU.
  const auto& cols = r["sweep"]["columns"];
  double best = 0;
  for (std::size_t i = 0; i < cols["meets_slo"].size(); ++i)
    if (cols["meets_slo"][i].get<bool>()) best = std::max(best, cols["output_tps_per_gpu"][i].get<double>());
  EXPECT_DOUBLE_EQ(r["best"]["score"]["tps_per_gpu"].get<double>(), best);
}

// Pruning never drops the configuration the full enumeration chooses, for each objective, and
// it does prune something.
TEST(Search, PruningKeepsTheWinner) {
  for (int objective = 0; objective < 3; ++objective) {
    SearchArgs a = small();
    a.model = "nemotron-3-nano";
    a.tp = "1,2,4";
    a.pd_ratios = "1:1,1:2";
    a.itl_ms = 25;
    a.ttft_ms = 400;
    if (objective == 1) a.target_tps = 20000;
    if (objective == 2) a.total_gpus = 8;
    a.prune = false;
    const auto full = servesim::api::search(a);
    a.prune = true;
    const auto pruned = servesim::api::search(a);
    ASSERT_FALSE(full["best"].is_null()) << objective;
    ASSERT_FALSE(pruned["best"].is_null()) << objective;
    EXPECT_EQ(pruned["best"]["index"], full["best"]["index"]) << objective << ": " << full["best"]["label"] << " vs "
                                                              << pruned["best"]["label"];
    const int skipped = pruned["counts"]["cannot_win"].get<int>() + pruned["counts"]["cannot_meet_slo"].get<int>();
    EXPECT_GT(skipped, 0) << objective;
    EXPECT_LT(pruned["counts"]["simulated"].get<int>(), full["counts"]["simulated"].get<int>()) << objective;
  }
}

// Every simulated point of `r` whose configuration `keep` takes against that configuration's
// bounds: TTFT and ITL never below their lower bounds, output tok/s never above the upper bound at
// that concurrency. Returns how many points were checked.
template <class Keep>
int expect_within_bounds(const nlohmann::json& r, Keep keep) {
  const auto& cols = r["sweep"]["columns"];
  int checked = 0;
  std::map<int, std::size_t> seen;   // rows of one configuration come in swept order
  for (std::size_t i = 0; i < cols["index"].size(); ++i) {
    const auto& c = config(r, cols["index"][i].get<int>());
    const auto& b = c["bound"];
    const std::size_t k = seen[cols["index"][i].get<int>()]++;
    if (!keep(c)) continue;
    for (const char* s : {"ttft_p50_ms", "ttft_p90_ms"})
      EXPECT_GE(cols[s][i].get<double>(), b["ttft_lb_ms"].get<double>()) << c["label"];
    EXPECT_GE(cols["itl_p50_ms"][i].get<double>(), b["itl_lb_ms"].get<double>()) << c["label"];
    EXPECT_LE(cols["output_tps"][i].get<double>(), b["tps_ub"][k].get<double>()) << c["label"] << " at " << cols["concurrency"][i];
    ++checked;
  }
  return checked;
}

// The analytic bounds hold against every simulated point.
TEST(Search, BoundsHoldAgainstTheSimulation) {
  SearchArgs a = small();
  a.model = "nemotron-3-nano";
  a.tp = "1,2";
  a.pd_ratios = "1:1,2:1";
  a.max_num_batched_tokens = "256,8192";
  a.prune = false;
  const auto r = servesim::api::search(a);
  EXPECT_GT(expect_within_bounds(r, [](const nlohmann::json&) { return true; }), 40);
}

// MTP draft counts (--num-speculative-tokens 0,2) are candidates of their own: each layout twice,
// the drafting one labelled and deployed with its drafts; its bounds (a decode step over at most
// 1 + K tokens) still hold against its simulation, and its ITL lower bound is the plain one / 3.
// A model without MTP layers is one clear error.
TEST(Search, MtpDraftCountsAreCandidatesWhoseBoundsHold) {
  SearchArgs a = small();
  a.model = "nemotron-3-super";
  a.precisions = "fp8";
  a.tp = "4,8";
  a.topology = "agg";
  a.concurrency = "1,8,32";
  a.num_speculative_tokens = "0,2";
  a.prune = false;
  const auto r = servesim::api::search(a);
  const auto& cfgs = r["configurations"];
  std::map<std::string, const nlohmann::json*> plain, drafting;
  for (const auto& c : cfgs) {
    const std::string label = c["label"];
    if (c["num_speculative_tokens"] == 2) {
      ASSERT_NE(label.find(" MTP 2"), std::string::npos) << label;
      drafting[label.substr(0, label.find(" MTP 2"))] = &c;
    } else {
      EXPECT_EQ(c["num_speculative_tokens"], 0);
      plain[label] = &c;
    }
  }
  ASSERT_EQ(plain.size(), drafting.size());
  ASSERT_GT(plain.size(), 0u);
  for (const auto& [label, c] : plain) {
    ASSERT_TRUE(drafting.count(label)) << label;
    const auto& b0 = (*c)["bound"];
    const auto& b2 = (*drafting[label])["bound"];
    if (!b0["fits"].get<bool>() || !b2["fits"].get<bool>()) continue;
    EXPECT_NEAR(b2["itl_lb_ms"].get<double>(), b0["itl_lb_ms"].get<double>() / 3, 1e-9 * b0["itl_lb_ms"].get<double>()) << label;
  }
  EXPECT_GT(expect_within_bounds(r, [](const nlohmann::json& c) { return c["num_speculative_tokens"] == 2; }), 0);
  // The best's deployment drafts when the best does.
  ASSERT_FALSE(r["best"].is_null());
  const int best_k = r["best"]["num_speculative_tokens"];
  EXPECT_EQ(r["best"]["deployment"].value("num_speculative_tokens", 0), best_k);
  a.model = "nemotron-h-8b";
  a.precisions = "";
  try {
    servesim::api::search(a);
    ADD_FAILURE() << "no error";
  } catch (const servesim::Error& e) {
    EXPECT_NE(std::string(e.what()).find("--num-speculative-tokens: nemotron-h-8b has no MTP layers"), std::string::npos) << e.what();
  }
}

TEST(Search, SameAnswerAtAnyThreadCount) {
  SearchArgs a = small();
  a.model = "nemotron-3-nano";
  a.tp = "1,2";
  a.pd_ratios = "1:1";
  a.threads = 1;
  const auto one = servesim::api::search(a);
  a.threads = 3;
  EXPECT_EQ(servesim::api::search(a).dump(), one.dump());
}

TEST(Search, BadInputIsOneClearError) {
  SearchArgs a = small();
  a.gpus = "h999";
  EXPECT_THROW(servesim::api::search(a), servesim::Error);
  a = small();
  a.target_tps = 100;
  a.total_gpus = 8;
  EXPECT_THROW(servesim::api::search(a), servesim::Error);
  a = small();
  a.pd_ratios = "1-2";
  EXPECT_THROW(servesim::api::search(a), servesim::Error);
}

// The default TP list (1, 2, 4, 8) keeps the sizes one instance of a GPU given holds: on GB200
// (4 GPUs a node) it searches TP 1-4; a TP the user names that no instance holds is one clear error.
TEST(Search, DefaultTpSizesFitTheInstances) {
  SearchArgs a = small();
  a.gpus = "gb200";
  const servesim::api::SearchSession s(a);
  EXPECT_GT(s.configurations(), 0);
  a.tp = "4,8";
  EXPECT_THROW(servesim::api::SearchSession{a}, servesim::Error);
}

// The precisions tried by default are those a deployment could load: BF16 / FP8 / NVFP4 where the
// GPU computes in them, and the formats the model is published in, as vLLM runs them (MXFP4 for
// gpt-oss on Hopper and Blackwell, FP8 on MiniMax-M2.5's 128x128 block checkpoint as fp8_block,
// Kimi-K2.5's NVFP4 on Hopper through Marlin W4A16); never NVFP4 on Hopper for a model with no
// NVFP4 checkpoint.
TEST(Search, DefaultPrecisionsAreTheFormatsADeploymentLoads) {
  namespace hw = servesim::hw;
  namespace sim = servesim::sim;
  auto tried = [](const char* model, const char* gpu) {
    sim::SearchSpace sp;
    sp.model = &servesim::models::model(model);
    for (const auto& i : hw::Catalog::global().instances())
      if (i.gpu == gpu && sp.instances.empty()) sp.instances.push_back(&i);
    sp.tp = {8};
    sp.dp = {1};
    sp.disaggregated = false;
    sim::SearchTraffic tr;
    tr.isl = 1000;
    tr.osl = 100;
    sim::SearchGoal goal;
    goal.ttft_ms = 1000;
    goal.itl_ms = 100;
    sim::Search s(sp, tr, goal);
    std::set<std::string> out;
    for (const auto& c : s.configs()) out.insert(std::string(hw::to_string(c.precision)));
    return out;
  };
  EXPECT_EQ(tried("gpt-oss-120b", "H200"), (std::set<std::string>{"bf16", "fp8", "mxfp4"}));
  EXPECT_EQ(tried("gpt-oss-120b", "B200"), (std::set<std::string>{"bf16", "fp8", "mxfp4", "nvfp4"}));
  EXPECT_EQ(tried("minimax-m2.5", "H200"), (std::set<std::string>{"bf16", "fp8_block", "nvfp4"}));
  EXPECT_EQ(tried("kimi-k2.5", "H200"), (std::set<std::string>{"bf16", "fp8", "int4", "nvfp4"}));
  EXPECT_EQ(tried("nemotron-3-super", "H200"), (std::set<std::string>{"bf16", "fp8"}));
}

}  // namespace

// --kv-cache-dtype adds the KV dtype to the space: each resolved once per precision ("auto" on BF16
// weights is BF16), named in the label when it is not the checkpoint's, and carried to the
// deployment. Llama-3.1-70B BF16 on TP4 H200 at 256 clients of 4000 + 500 tokens: an FP8 cache
// reads half the KV bytes a decode step streams, so with both meeting a loose SLO the FP8 one
// serves more tok/s per GPU and wins.
// A TTFT broken where the KV cache filled asks for KV memory: Llama-3.1-70B FP8 on TP4 H100 holds
// 139 whole requests of 8,000 + 2,000 tokens (servesim memory), so 128 clients run and 256 wait for
// room (vLLM preempts): the score reads "ttft" with kv_full, and the advice names KV memory per worker.
TEST(Search, ATtftBrokenAtAFullKvCacheIsNamed) {
  SearchArgs a{.model = "llama-3.1-70b", .gpus = "h100", .precisions = "fp8", .topology = "agg", .tp = "4",
               .concurrency = "128,256", .isl = 8000, .osl = 2000, .requests = 512, .ttft_ms = 3000, .itl_ms = 100,
               .threads = 2};
  const auto r = servesim::api::search(a);
  ASSERT_EQ(r["counts"]["configurations"], 1);
  const auto& s = config(r, 0)["score"];
  EXPECT_EQ(s["slo_concurrency"], 128);
  EXPECT_EQ(s["limited_by"], "ttft");
  EXPECT_TRUE(s["kv_full"].get<bool>());
  EXPECT_NE(s["advice"].get<std::string>().find("add KV memory per worker"), std::string::npos);
}

TEST(Search, KvCacheDtypeIsSearched) {
  SearchArgs a{.model = "llama-3.1-70b", .gpus = "h200", .precisions = "bf16", .topology = "agg", .tp = "4",
                .concurrency = "64,256", .kv_cache_dtypes = "auto,fp8", .isl = 4000, .osl = 500, .requests = 512,
                .ttft_ms = 5000, .itl_ms = 200, .threads = 2};
  const auto r = servesim::api::search(a);
  ASSERT_EQ(r["counts"]["configurations"], 2);
  const auto& bf = config(r, 0);
  const auto& f8 = config(r, 1);
  EXPECT_EQ(bf["kv_cache_dtype"], "bf16");
  EXPECT_EQ(f8["kv_cache_dtype"], "fp8");
  EXPECT_EQ(bf["label"].get<std::string>().find(" kv "), std::string::npos);
  EXPECT_NE(f8["label"].get<std::string>().find(" kv fp8 "), std::string::npos);
  EXPECT_GT(f8["score"]["tps_per_gpu"].get<double>(), bf["score"]["tps_per_gpu"].get<double>());
  EXPECT_EQ(r["best"]["kv_cache_dtype"], "fp8");
  EXPECT_EQ(r["best"]["deployment"]["kv_cache_dtype"], "fp8");
  a.kv_cache_dtypes = "auto,bf16";  // the same dtype once
  a.concurrency = "64";
  a.requests = 64;
  EXPECT_EQ(servesim::api::search(a)["counts"]["configurations"], 1);
  a.kv_cache_dtypes = "fp16";
  try {
    servesim::api::search(a);
    FAIL();
  } catch (const servesim::Error& e) {
    EXPECT_EQ(e.where(), "--kv-cache-dtype");
  }
}
