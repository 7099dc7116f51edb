// SGLang and TensorRT-LLM as servesim runs them, against figures a person can check by hand:
// SGLang's decode stalls for each prefill step (no mixed batches), TRT-LLM's GUARANTEED_NO_EVICT
// admission (KV blocks / blocks(prompt + max_tokens)), the decode-only CUDA-graph rules, the
// memory planners' formulas, and which profile a measured point runs on.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <cmath>

#include "common/error.hpp"
#include "hwmodels/catalog.hpp"
#include "hwmodels/kernel_model.hpp"
#include "models/memory.hpp"
#include "models/model_spec.hpp"
#include "models/step_cost.hpp"
#include "sim/engine/cluster.hpp"
#include "sim/engine/engine_profile.hpp"
#include "sim/engine/worker.hpp"
#include "sim/scenario.hpp"
#include "sim/simulate.hpp"
#include "sim/studies/search.hpp"
#include "sim/validate/validate.hpp"
#include "workloads/workload.hpp"
#include "tests/sim/flat_cost.hpp"

namespace servesim::sim {
namespace {

// A step with prompt tokens costs 50 ms, a decode-only step 10 ms; counts steps that mix both.
class PrefillDecodeCost : public models::StepCostModel {
 public:
  mutable int mixed = 0, prefill = 0, decode = 0;
  double seconds(const models::StepBatch& b) const override {
    if (b.prefill_seqs > 0 && b.decode_seqs > 0) ++mixed;
    if (b.prefill_seqs > 0) {
      ++prefill;
      return 0.050;
    }
    ++decode;
    return 0.010;
  }
  double encoder_seconds(int) const override { return 0; }
  models::StepTime breakdown(const models::StepBatch& b) const override { return {seconds(b), {}}; }
  std::string provenance() const override { return "test cost"; }
};

struct Keep : RequestSink {
  std::vector<Request> all;
  void on_finished(const Request& r) override { all.push_back(r); }
  const Request& by_id(std::uint64_t id) const {
    return *std::find_if(all.begin(), all.end(), [&](const Request& r) { return r.id == id; });
  }
};

EngineConfig plain(EngineKind kind) {
  EngineConfig c;
  c.kind = kind;
  c.step_overhead_s = 0;
  c.step_overhead_per_seq_s = 0;
  c.async_scheduling = false;
  c.max_num_seqs = 64;
  c.enable_chunked_prefill = kind != EngineKind::trtllm;
  if (kind == EngineKind::trtllm) c.block_size = 32;
  return c;
}

// Requests of `isl` + `osl` tokens reaching the engine at `arrivals_ms`.
// `demand`: what a request holds in the pool (default: one full-attention group).
std::vector<Request> run(const EngineConfig& cfg, const models::StepCostModel& cost, std::vector<double> arrivals_ms,
                         std::int64_t isl, std::int64_t osl, std::int64_t kv_blocks, WorkerStats* stats = nullptr,
                         const models::KvDemand& demand = {}) {
  ClusterShape shape;
  shape.kv_blocks = kv_blocks;
  shape.kv_demand = demand;
  AggregatedCluster c(shape, cfg, cost);
  workloads::WorkloadConfig w;
  w.arrival = workloads::Arrival::schedule;
  w.schedule_ms = std::make_shared<const std::vector<double>>(std::move(arrivals_ms));
  w.requests = 0;
  w.isl = workloads::LengthDist::fixed_at(isl);
  w.osl = workloads::LengthDist::fixed_at(osl);
  auto workload = workloads::make_workload(w);
  Keep k;
  c.run(*workload, k);
  if (stats) *stats = c.workers().front().stats();
  return k.all;
}

// Requests whose first token came before any request finished: those that ran at once.
int first_tokens_before_first_finish(const std::vector<Request>& r) {
  double first_finish = 1e9;
  for (const auto& q : r) first_finish = std::min(first_finish, q.finish_s);
  int before = 0;
  for (const auto& q : r) before += q.first_token_s < first_finish;
  return before;
}

// Request A (10 + 100 tokens) at t = 0, B at 205 ms. A: prefill 0-50 ms (first token at 50), decode
// steps of 10 ms to 210 ms (tokens 2..17). SGLang then runs B's prefill alone (210-260 ms) while A
// waits, so A's remaining 83 tokens end at 260 + 83 x 10 = 1090 ms: A's ITL is the decode step plus
// the interleaved prefill step spread over its 99 gaps, (99 x 10 + 50) / 99 = 10.505 ms. vLLM and
// TRT-LLM put A's decode into B's prefill step (one 50 ms mixed step): A ends at 1080 ms.
TEST(Engines, SglangDecodeWaitsForEachPrefillStep) {
  PrefillDecodeCost cost;
  const auto sg = run(plain(EngineKind::sglang), cost, {0.0, 205.0}, 10, 100, 100000);
  EXPECT_EQ(cost.mixed, 0);
  const Request& a = sg[0].id == 0 ? sg[0] : sg[1];
  EXPECT_NEAR(a.first_token_s, 0.050, 1e-9);
  EXPECT_NEAR(a.finish_s, 1.090, 1e-9);
  EXPECT_NEAR((a.finish_s - a.first_token_s) / 99, (99 * 0.010 + 0.050) / 99, 1e-9);
  for (EngineKind k : {EngineKind::vllm, EngineKind::trtllm}) {
    PrefillDecodeCost mixed_cost;
    const auto r = run(plain(k), mixed_cost, {0.0, 205.0}, 10, 100, 100000);
    EXPECT_EQ(mixed_cost.mixed, 1) << to_string(k);
    const Request& x = r[0].id == 0 ? r[0] : r[1];
    EXPECT_NEAR(x.finish_s, 1.080, 1e-9) << to_string(k);
  }
}

// SGLang's overlap scheduler (event_loop_overlap, reference A4) forms batch N+1 while batch N runs,
// so a prompt that reaches the scheduler during a decode step misses the batch already formed and is
// prefilled one step later. A (10 + 100 tokens) at 0 ms: prefill 0-50 ms, decode steps of 10 ms. B
// arrives at 205 ms, inside the step 200-210. Sync: B's prefill runs 210-260 ms (first token at 260).
// Overlap: the batch of 210-220 was formed at 200, without B, and decodes A; B's prefill runs 220-270.
TEST(Engines, SglangOverlapSchedulerPrefillsALatePromptOneStepLater) {
  for (const bool overlap : {false, true}) {
    PrefillDecodeCost cost;
    EngineConfig c = plain(EngineKind::sglang);
    c.async_scheduling = overlap;
    const auto r = run(c, cost, {0.0, 205.0}, 10, 100, 100000);
    ASSERT_EQ(r.size(), 2u);
    Keep k;
    k.all = r;
    EXPECT_NEAR(k.by_id(0).first_token_s, 0.050, 1e-9) << overlap;
    EXPECT_NEAR(k.by_id(1).first_token_s, overlap ? 0.270 : 0.260, 1e-9) << overlap;
    EXPECT_EQ(cost.mixed, 0) << overlap;
  }
}

// Why SGLang's measured closed loops stay in whichever orbit they start in: prefill priority erases
// any stagger in a cohort's arrivals shorter than a prefill step. A at 0 ms, B, C, D at 10, 20, 30 ms
// (10 + 100 tokens each). SGLang prefills A alone (0-50 ms), then B, C and D together (50-100 ms)
// while A's decode waits, so all four decode from the same step and end together at
// 100 + 99 x 10 = 1,090 ms: one cohort again. vLLM puts A's second token into that prefill step
// (one 50 ms mixed step), so A stays one token ahead and ends a step earlier, at 100 + 98 x 10 =
// 1,080 ms: the stagger survives and the clients drift apart as it grows.
TEST(Engines, SglangPrefillPriorityMergesACohort) {
  PrefillDecodeCost cost;
  const auto sg = run(plain(EngineKind::sglang), cost, {0.0, 10.0, 20.0, 30.0}, 10, 100, 100000);
  ASSERT_EQ(sg.size(), 4u);
  EXPECT_EQ(cost.prefill, 2);
  for (const auto& r : sg) EXPECT_NEAR(r.finish_s, 1.090, 1e-9) << r.id;
  PrefillDecodeCost vcost;
  const auto v = run(plain(EngineKind::vllm), vcost, {0.0, 10.0, 20.0, 30.0}, 10, 100, 100000);
  Keep k;
  k.all = v;
  EXPECT_NEAR(k.by_id(0).finish_s, 1.080, 1e-9);
  for (std::uint64_t id : {1, 2, 3}) EXPECT_NEAR(k.by_id(id).finish_s, 1.090, 1e-9) << id;
}

// SGLang chunks one prompt at a time at chunked_prefill_size (max_num_batched_tokens): a 2,500-token
// prompt with a 1,000-token budget takes 3 prefill steps (1,000 + 1,000 + 500), the first token after
// the third: 3 x 50 ms.
TEST(Engines, SglangChunksOnePromptAtATime) {
  PrefillDecodeCost cost;
  EngineConfig c = plain(EngineKind::sglang);
  c.max_num_batched_tokens = 1000;
  const auto r = run(c, cost, {0.0}, 2500, 5, 100000);
  ASSERT_EQ(r.size(), 1u);
  EXPECT_EQ(cost.prefill, 3);
  EXPECT_NEAR(r[0].first_token_s, 0.150, 1e-9);
}

// With attention DP each SGLang rank schedules on its own, with chunked_prefill_size / dp of the chunk
// budget (ServerArgs._handle_data_parallelism) and its own max_prefill_tokens. Four ranks of a 1,000-token
// budget: 250 tokens a rank. Four prompts of 1,000 tokens at 0, 1, 2 and 3 ms: the first step (at 0)
// holds the first prompt alone and still prefills only its rank's 250 tokens; from the second step on
// the four prefill side by side, 250 tokens each, so the first prompt's first token comes after 4 steps
// of 50 ms (0.20 s) and the others' one step later (0.25 s), in 5 prefill steps. On one rank with the
// same budget each prompt prefills whole, one a step: first tokens at 0.05, 0.10, 0.15 and 0.20 s.
TEST(Engines, SglangAttentionDpRanksChunkTheirOwnPrompts) {
  EngineConfig one = plain(EngineKind::sglang);
  one.max_num_batched_tokens = 1000;
  one.block_size = 1;
  const EngineConfig dp = lockstep_engine(one, 4);
  EXPECT_EQ(dp.max_num_batched_tokens, 1000);
  EXPECT_EQ(dp.long_prefill_token_threshold, 250);
  EXPECT_EQ(dp.sglang.max_prefill_tokens, 4 * one.sglang.max_prefill_tokens);
  auto firsts = [](const std::vector<Request>& r) {
    std::vector<double> f;
    for (const auto& q : r) f.push_back(q.first_token_s);
    std::sort(f.begin(), f.end());
    return f;
  };
  PrefillDecodeCost cost;
  const auto d = firsts(run(dp, cost, {0.0, 1.0, 2.0, 3.0}, 1000, 2, 100000));
  ASSERT_EQ(d.size(), 4u);
  EXPECT_NEAR(d[0], 0.200, 1e-9);
  for (int i = 1; i < 4; ++i) EXPECT_NEAR(d[std::size_t(i)], 0.250, 1e-9);
  EXPECT_EQ(cost.prefill, 5);
  PrefillDecodeCost cost1;
  const auto s = firsts(run(one, cost1, {0.0, 1.0, 2.0, 3.0}, 1000, 2, 100000));
  for (int i = 0; i < 4; ++i) EXPECT_NEAR(s[std::size_t(i)], 0.050 * (i + 1), 1e-9);
}

// Each attention-DP rank is a scheduler process of its own: the host's time per scheduled request is
// paid for the busiest rank's share, side by side. 8 requests of 10 + 200 tokens on 4 ranks, 10 ms
// decode steps and 1 ms of host time a scheduled request, synchronous loop: a decode step of all 8
// takes 10 + 2 x 1 ms (2 a rank), not 10 + 8 (within the 50 ms prefill steps that the first prompt's
// start apart from the others adds over 199 tokens).
TEST(Engines, AttentionDpRanksPrepareTheirShareOfTheBatchSideBySide) {
  for (int dp : {1, 4}) {
    EngineConfig c = plain(EngineKind::vllm);
    c.step_overhead_per_seq_s = 1e-3;
    const EngineConfig e = lockstep_engine(c, dp);
    PrefillDecodeCost cost;
    const auto r = run(e, cost, std::vector<double>(8, 0.0), 10, 200, 100000);
    ASSERT_EQ(r.size(), 8u);
    for (const auto& q : r) EXPECT_NEAR((q.finish_s - q.first_token_s) / 199, dp == 1 ? 0.018 : 0.012, 0.0005) << dp;
  }
}

// The wide expert-parallel path: SGLang and TensorRT-LLM exchange an MoE layer's tokens by
// all-to-all once its EP group spans more than one node (a GB200 node holds 4 GPUs, an H200 node 8);
// vLLM keeps its all-gather default, and EP 1 has nothing to dispatch.
TEST(Engines, WideExpertParallelGroupsExchangeAllToAll) {
  const auto& m = models::model("deepseek-r1");
  auto a2a = [&](const char* profile, const char* gpu, int dp, int ep) {
    const auto& g = hw::Catalog::global().gpu(gpu);
    EngineConfig e;
    apply_profile(engine_profile(profile), m, g, nlohmann::json::object(), e, 1);
    return moe_all_to_all_for(e, m, models::Parallelism{1, 1, ep, dp}, g);
  };
  EXPECT_TRUE(a2a("sglang-0.5.6", "gb200", 8, 8));
  EXPECT_TRUE(a2a("trtllm-1.3", "gb200", 32, 32));
  EXPECT_TRUE(a2a("trtllm-1.3", "gb300", 8, 8));   // no GB300 instance in the catalogue: a 4-GPU tray
  EXPECT_FALSE(a2a("sglang-0.5.6", "gb200", 4, 4));
  EXPECT_FALSE(a2a("sglang-0.5.6", "h200", 8, 8));
  EXPECT_FALSE(a2a("trtllm-1.3", "b200", 8, 8));
  EXPECT_FALSE(a2a("vllm-0.19", "gb200", 32, 32));
  EXPECT_FALSE(a2a("sglang-0.5.6", "gb200", 8, 1));
  // A scenario that names the knob decides: false keeps SGLang's default all-gather.
  const auto& gb200 = hw::Catalog::global().gpu("gb200");
  EngineConfig off;
  apply_profile(engine_profile("sglang-0.5.6"), m, gb200, nlohmann::json{{"moe_all_to_all", false}}, off, 1);
  EXPECT_FALSE(moe_all_to_all_for(off, m, models::Parallelism{1, 1, 32, 32}, gb200));
  EXPECT_EQ(engine_profile("sglang-0.5.6").dp_prefill_moe, models::DpPrefillMoe::summed);
  EXPECT_EQ(engine_profile("trtllm-1.1").dp_prefill_moe, models::DpPrefillMoe::gathered);
  EXPECT_EQ(engine_profile("vllm-0.14").dp_prefill_moe, models::DpPrefillMoe::padded);
}

// GUARANTEED_NO_EVICT: each request of 100 + 200 tokens reserves ceil(300 / 32) = 10 blocks when it
// is admitted, so a pool of 35 blocks runs 3 at once (30 blocks) and never evicts; the other 5 of 8
// wait for a finished request's blocks. vLLM's incremental allocation admits all 8 at first
// (ceil(101 / 32) = 4 blocks each, 32 of 35) and preempts when they grow.
TEST(Engines, TrtllmAdmitsWhatItsBlocksGuarantee) {
  PrefillDecodeCost cost;
  WorkerStats st;
  const auto r = run(plain(EngineKind::trtllm), cost, std::vector<double>(8, 0.0), 100, 200, 35, &st);
  ASSERT_EQ(r.size(), 8u);
  EXPECT_EQ(first_tokens_before_first_finish(r), 35 / ((100 + 200 + 31) / 32));   // 3
  EXPECT_EQ(st.preemptions, 0);
  EXPECT_LE(st.peak_kv_blocks, 30);
  for (const auto& q : r) EXPECT_EQ(q.generated, 200);

  EngineConfig v = plain(EngineKind::vllm);
  v.block_size = 32;
  WorkerStats vs;
  PrefillDecodeCost vcost;
  run(v, vcost, std::vector<double>(8, 0.0), 100, 200, 35, &vs);
  EXPECT_GT(vs.preemptions, 0);
}

// GUARANTEED_NO_EVICT reserves a sliding-window group's window, not the whole sequence
// (getRemainingBlocksToCompletion: min(prompt + max_tokens, window) tokens). 100 + 200 tokens in
// blocks of 32, one full group and one 64-token window: 10 + 2 = 12 blocks a request, so a pool of
// 36 runs 3 at once (a reservation of both groups' whole sequence, 20 blocks, would run 1).
// gpt-oss-120b TP1 B200, 256 clients of 1,024 + 8,192 tokens: measured TTFT 190 ms, all running.
TEST(Engines, TrtllmReservesASlidingWindowOnlyUpToItsWindow) {
  PrefillDecodeCost cost;
  models::KvDemand window;
  window.windows = {64};
  WorkerStats st;
  const auto r = run(plain(EngineKind::trtllm), cost, std::vector<double>(6, 0.0), 100, 200, 36, &st, window);
  ASSERT_EQ(r.size(), 6u);
  EXPECT_EQ(first_tokens_before_first_finish(r), 36 / (10 + 2));
  EXPECT_EQ(st.preemptions, 0);
  EXPECT_LE(st.peak_kv_blocks, 36);
}

// TRT-LLM without chunked prefill refuses a prompt longer than max_num_tokens.
TEST(Engines, TrtllmRefusesPromptsBeyondMaxNumTokens) {
  PrefillDecodeCost cost;
  EngineConfig c = plain(EngineKind::trtllm);
  c.max_num_batched_tokens = 1000;
  EXPECT_THROW(run(c, cost, {0.0}, 1001, 5, 100000), Error);
}

// SGLang admits optimistically (new_token_ratio) and retracts when the pool is full. Two requests of
// 10 + 800 tokens, a pool of 1,500 token slots: A is admitted (810 < 1,500) and B is not (1,500 - 810
// = 690 left), but once A runs it is charged only 0.7 x its 799 remaining tokens, so B fits the next
// step (1,489 - 559.3 = 929.7 > 810). Together they need 1,620 slots: A (the longer output) is
// retracted when the pool runs out, recomputed later, and both still get their 800 tokens.
TEST(Engines, SglangRetractsWhenThePoolIsFull) {
  PrefillDecodeCost cost;
  EngineConfig c = plain(EngineKind::sglang);
  c.block_size = 1;
  WorkerStats st;
  const auto r = run(c, cost, {0.0, 0.0}, 10, 800, 1500, &st);
  ASSERT_EQ(r.size(), 2u);
  for (const auto& q : r) EXPECT_EQ(q.generated, 800);
  EXPECT_EQ(st.preemptions, 1);
  EXPECT_LE(st.peak_kv_blocks, 1500);
  const Request& a = r[0].id == 0 ? r[0] : r[1];
  const Request& b = r[0].id == 0 ? r[1] : r[0];
  EXPECT_EQ(a.preemptions, 1);
  EXPECT_EQ(b.preemptions, 0);
  EXPECT_GT(a.finish_s, b.finish_s);
}

// PrefillAdder's admission under new_token_ratio, by hand. A pool of 10,000 one-token pages; 4
// requests of 100 + 1,000 tokens at t = 0 (each charged 100 + 1,000 < 10,000 - what the others took:
// all 4 in the first prefill step, 0-50 ms), then 300 decode steps of 10 ms (to 3,050 ms), after
// which each has 401 tokens in the pool and 699 to write, and the ratio has fallen from 0.7 by
// 300 x (0.7 - 0.098) / 600 to 0.399. A wave of 10 more arriving at 3,045 ms meets rem_total =
// (10,000 - 4 x 401) - 4 x 0.399 x 699 = 7,280 tokens and is admitted while a request's 1,100
// fit: 6 in the prefill step 3,050-3,100 ms (7,280 - 6 x 1,100 = 680). In the next step the 6 are
// running requests charged 0.399 x 999 each: rem_total = (10,000 - 1,604 - 606) - 0.399 x (4 x 699
// + 6 x 999) = 4,283, 3 more (3,100-3,150 ms), and the last one at 3,150-3,200 ms. Had the ratio
// stayed at 0.7, the first step would take 5 (rem_total 6,439). Admission binds only where
// clients x (prompt + min(answer, 4,096)) approaches the pool (docs/engines.md, SGLang's TTFT on
// Blackwell).
TEST(Engines, SglangNewTokenRatioAdmitsAHandSum) {
  EngineConfig c = plain(EngineKind::sglang);
  c.block_size = 1;
  std::vector<double> arrivals(4, 0.0);
  arrivals.insert(arrivals.end(), 10, 3045.0);
  auto first_tokens = [&](const EngineConfig& cfg) {
    PrefillDecodeCost cost;
    const auto r = run(cfg, cost, arrivals, 100, 1000, 10000);
    std::map<double, int> at;   // first-token time (ms, rounded) -> requests of the wave
    for (const auto& q : r)
      if (q.id >= 4) ++at[std::round(q.first_token_s * 1e4) / 10];
    return at;
  };
  EXPECT_EQ(first_tokens(c), (std::map<double, int>{{3100.0, 6}, {3150.0, 3}, {3200.0, 1}}));
  EngineConfig flat = c;
  flat.sglang.new_token_ratio_decay_steps = 1e12;   // the ratio stays at 0.7
  EXPECT_EQ(first_tokens(flat).begin()->second, 5);
}

EngineConfig profiled(const std::string& name, const std::string& gpu, int tp) {
  EngineConfig e;
  apply_profile(engine_profile(name), models::model("llama-3.1-8b"), hw::Catalog::global().gpu(gpu), nlohmann::json::object(), e, tp);
  return e;
}

// TRT-LLM captures decode batches 1..31, 32, 64, 128 and pads none: a batch of 40 launches every
// kernel from the host, 32 replays its graph. Any step with a prompt runs eagerly.
TEST(Engines, TrtllmGraphsOnlyForCapturedDecodeSizes) {
  const EngineConfig e = profiled("trtllm", "H200", 1);
  ASSERT_EQ(e.cudagraph_capture_sizes.size(), 34u);
  EXPECT_EQ(e.cudagraph_capture_sizes[30], 31);
  EXPECT_EQ(e.cudagraph_capture_sizes.back(), 128);
  const auto& m = models::model("llama-3.1-8b");
  const auto& gpu = hw::Catalog::global().gpu("H200");
  auto cost = models::make_step_cost(m, gpu, hw::Precision::bf16, {1, 1, 1}, hw::Precision::bf16);
  Worker w(e, *cost, 1000, {}, 0);
  EXPECT_TRUE(w.replays_full_graph(32, true));
  EXPECT_TRUE(w.replays_full_graph(64, true));
  EXPECT_FALSE(w.replays_full_graph(40, true));
  EXPECT_FALSE(w.replays_full_graph(129, true));
  EXPECT_EQ(w.launch_seconds(32, true), 0.0);
  const double eager = w.launch_seconds(40, true);
  EXPECT_GT(eager, 0.0);
  EXPECT_EQ(w.launch_seconds(64, false), eager);   // a context request in the batch: eager
  EXPECT_EQ(w.padded_tokens(40), 64);               // (what padding would do; TRT-LLM does not)
}

// With attention DP each rank replays the graph of its own share, every rank at the busiest one's
// (dummy requests fill the others; reference B3/B4). On 4 ranks, 127 decoding requests are ranks of
// 32, 32, 32, 31: all at 32, a captured size, one dummy; 129 puts 33 on the busiest rank, which
// TRT-LLM did not capture; 250 is 63 a rank (eager), 256 is 64 (a graph). One rank of 127: eager.
TEST(Engines, TrtllmAttentionDpRanksReplayTheBusiestRanksGraph) {
  const EngineConfig one = profiled("trtllm", "H200", 1);
  const EngineConfig e = lockstep_engine(one, 4);
  EXPECT_EQ(e.lockstep_dp, 4);
  const auto& m = models::model("llama-3.1-8b");
  const auto& gpu = hw::Catalog::global().gpu("H200");
  auto cost = models::make_step_cost(m, gpu, hw::Precision::bf16, {1, 1, 1}, hw::Precision::bf16);
  Worker w(e, *cost, 1000, {}, 0);
  EXPECT_EQ(w.rank_aligned_tokens(127, 1), 128);
  EXPECT_TRUE(w.replays_full_graph(127, true));
  EXPECT_FALSE(w.replays_full_graph(129, true));
  EXPECT_FALSE(w.replays_full_graph(250, true));
  EXPECT_TRUE(w.replays_full_graph(256, true));
  EXPECT_EQ(w.launch_seconds(127, true), 0.0);
  EXPECT_GT(w.launch_seconds(129, true), 0.0);
  EXPECT_FALSE(w.replays_full_graph(127, false));    // a context request in the batch: eager
  Worker single(one, *cost, 1000, {}, 0);
  EXPECT_FALSE(single.replays_full_graph(127, true));
  // An engine that pads (SGLang) was already judged per rank: its capture sizes times the ranks.
  const EngineConfig sg = lockstep_engine(profiled("sglang", "H200", 1), 4);
  Worker ws(sg, *cost, 1000, {}, 0);
  EXPECT_EQ(ws.rank_aligned_tokens(127, 1), 127);
  EXPECT_EQ(ws.padded_tokens(127), 128);
}

// TensorRT-LLM's PyExecutor forms a batch and then issues its kernels on the same thread (the
// overlap loop schedules and launches batch N+1 before it handles N's results), so an eager step's
// launches hold the host. 10 ms of GPU a step, 2 ms to form a batch and 1,000 kernels at 20 us:
// every decode step takes 2 + 20 = 22 ms. vLLM's engine core forms the next batch while its
// workers issue the last one: the host's 22 ms a step spread over two batches in flight, 11 ms.
TEST(Engines, TrtllmLaunchesHoldTheSchedulingThread) {
  struct EagerCost : testing::FlatCost {
    LaunchCounts launch_counts() const override { return {1000, 0, 0, 0}; }
  } cost;
  EngineConfig e = plain(EngineKind::trtllm);
  e.async_scheduling = true;
  e.enforce_eager = true;
  e.eager_overhead_s = 0;
  e.step_overhead_s = 0.002;
  e.launch_per_kernel_s = e.launch_per_kernel_eager_s = 20e-6;
  auto itl_ms = [&](bool serial) {
    e.launches_on_scheduler_thread = serial;
    const Request r = run(e, cost, {0.0}, 10, 101, 1000).front();
    return (r.finish_s - r.first_token_s) / 100 * 1e3;
  };
  EXPECT_NEAR(itl_ms(true), 22.0, 0.01);
  EXPECT_NEAR(itl_ms(false), 11.0, 0.01);
  EXPECT_TRUE(engine_profile("trtllm-1.3").launches_on_scheduler_thread);
  EXPECT_FALSE(engine_profile("vllm").launches_on_scheduler_thread);
  EXPECT_FALSE(engine_profile("sglang").launches_on_scheduler_thread);
}

// SGLang pads decode batches up to cuda_graph_max_bs (256 below TP 4 on a 60-160 GiB GPU, 512 from
// TP 4): [1,2,4,8,12] + 16..256 step 8 = 36 sizes; 52 up to 512. Prefill steps run eagerly.
TEST(Engines, SglangDecodeGraphsPaddedToCudaGraphMaxBs) {
  const EngineConfig tp1 = profiled("sglang", "H200", 1);
  EXPECT_EQ(tp1.cudagraph_capture_sizes.size(), 36u);
  EXPECT_EQ(tp1.max_cudagraph_capture_size, 256);
  EXPECT_EQ(profiled("sglang", "H200", 4).cudagraph_capture_sizes.size(), 52u);
  EXPECT_EQ(profiled("sglang", "B200", 1).max_cudagraph_capture_size, 512);
  EXPECT_EQ(tp1.max_num_batched_tokens, 8192);                            // chunked_prefill_size on H200
  EXPECT_EQ(profiled("sglang", "B200", 1).max_num_batched_tokens, 16384);  // >= 160 GiB
  EXPECT_EQ(tp1.block_size, 1);                                           // FA3 on Hopper
  EXPECT_EQ(profiled("sglang", "B200", 1).block_size, 64);                // trtllm_mha on Blackwell
  const auto& m = models::model("llama-3.1-8b");
  auto cost = models::make_step_cost(m, hw::Catalog::global().gpu("H200"), hw::Precision::bf16, {1, 1, 1}, hw::Precision::bf16);
  Worker w(tp1, *cost, 1000, {}, 0);
  EXPECT_TRUE(w.replays_full_graph(41, true));
  EXPECT_EQ(w.padded_tokens(41), 48);
  EXPECT_FALSE(w.replays_full_graph(257, true));
  EXPECT_GT(w.launch_seconds(100, false), 0.0);
}

// mem_fraction_static = round((total - reserved) / total, 3), MiB: H100 TP1 (81,920 MiB) reserves
// 512 + 8192 x 1.5 + 256 x 2 + 1 / 8 x 1024 = 13,440 -> 0.836; B200 TP1 (184,320 MiB) reserves
// 512 + 16384 x 1.5 + 512 x 2 + 128 = 26,240 -> 0.857; a small budget is raised to 10 GiB above 60 GiB.
TEST(Engines, SglangMemFractionStaticHeuristic) {
  const double mib = 1024.0 * 1024.0;
  EXPECT_DOUBLE_EQ(models::sglang_mem_fraction_static(81920 * mib, 8192, 256, 1, 1, false), 0.836);
  EXPECT_DOUBLE_EQ(models::sglang_mem_fraction_static(184320 * mib, 16384, 512, 1, 1, false), 0.858);
  // 512 + 3072 + 16 + 128 = 3,728 MiB < 10 GiB floor: (81,920 - 10,240) / 81,920 = 0.875.
  EXPECT_DOUBLE_EQ(models::sglang_mem_fraction_static(81920 * mib, 2048, 8, 1, 1, false), 0.875);
  // MTP adds 2 GiB: 13,440 + 2,048 -> (81,920 - 15,488) / 81,920 = 0.811.
  EXPECT_DOUBLE_EQ(models::sglang_mem_fraction_static(81920 * mib, 8192, 256, 1, 1, true), 0.811);
  // Request slots: min(max(tokens / context x 512, 2048), 4096), at most tokens / 2.
  EXPECT_EQ(models::sglang_max_running_requests(1000000, 131072), 3906);
  EXPECT_EQ(models::sglang_max_running_requests(10000, 8192), 2048);
  EXPECT_EQ(models::sglang_max_running_requests(3000, 8192), 1500);
}

// What an SGLang row resolves to on each GPU it was measured on, by hand from the reference's
// _handle_gpu_memory_settings table (A2) and the catalogue's memory (hwmodels/data/gpus.json):
// H100 81,920 MiB, H200 143,155.9, B200 184,320, B300 275,040. chunked_prefill_size 8,192 below
// 160 GiB, 16,384 from it; cuda_graph_max_bs 256 (TP < 4) / 512 (TP >= 4) below, 512 from it;
// reserved MiB = 512 + 1.5 x chunk + 2 x graphs + TP / 8 x 1024:
//   H100 TP1 13,440 -> (81,920 - 13,440) / 81,920 = 0.836;   TP8 14,848 -> 0.819
//   H200 TP1 13,440 -> (143,155.9 - 13,440) / 143,155.9 = 0.906; TP8 14,848 -> 0.896
//   B200 TP1 26,240 -> (184,320 - 26,240) / 184,320 = 0.858;  TP8 27,136 -> 0.853
//   B300 TP1 26,240 -> (275,040 - 26,240) / 275,040 = 0.905;  TP8 27,136 -> 0.901
// Pages: 1 token on Hopper (FA3), 64 on Blackwell (trtllm_mha). The plan takes the fraction of
// the same chunk and graph sizes the engine runs with.
TEST(Engines, SglangResolvedDefaultsByGpu) {
  struct Row { const char* gpu; int tp; std::int64_t chunk, graphs, page; double fraction; };
  const Row rows[] = {{"H100", 1, 8192, 256, 1, 0.836},  {"H100", 8, 8192, 512, 1, 0.819},
                      {"H200", 1, 8192, 256, 1, 0.906},  {"H200", 8, 8192, 512, 1, 0.896},
                      {"B200", 1, 16384, 512, 64, 0.858}, {"B200", 8, 16384, 512, 64, 0.853},
                      {"B300", 1, 16384, 512, 64, 0.905}, {"B300", 8, 16384, 512, 64, 0.901}};
  const auto& m = models::model("llama-3.1-8b");
  for (const Row& r : rows) {
    const EngineConfig e = profiled("sglang-0.5.6", r.gpu, r.tp);
    EXPECT_EQ(e.max_num_batched_tokens, r.chunk) << r.gpu << " TP" << r.tp;
    EXPECT_EQ(e.max_cudagraph_capture_size, r.graphs) << r.gpu << " TP" << r.tp;
    EXPECT_EQ(e.block_size, r.page) << r.gpu << " TP" << r.tp;
    const auto p = models::plan_memory(m, hw::Catalog::global().gpu(r.gpu), hw::Precision::bf16, {r.tp, 1, 1},
                                       e.memory_config(hw::Precision::bf16));
    EXPECT_DOUBLE_EQ(p.memory_fraction, r.fraction) << r.gpu << " TP" << r.tp;
  }
}

// The pools against the reference formulas, from the plan's own parts. SGLang: mem_fraction_static
// x total - weights - CUDA context - communicator buffers, one token per page. TRT-LLM: 0.9 x
// (total - peak), peak = weights + activations + graphs + context + buffers, 32-token blocks.
TEST(Engines, MemoryPlannersPoolSizes) {
  const auto& m = models::model("llama-3.1-8b");
  const auto& gpu = hw::Catalog::global().gpu("H200");
  for (const char* name : {"sglang", "trtllm"}) {
    const EngineConfig e = profiled(name, "H200", 1);
    const auto p = models::plan_memory(m, gpu, hw::Precision::bf16, {1, 1, 1}, e.memory_config(hw::Precision::bf16));
    // Llama-3.1-8B: 32 layers x 8 KV heads x 128 x (K + V) x 2 bytes = 131,072 bytes per token.
    EXPECT_DOUBLE_EQ(p.kv_bytes_per_token, 131072.0);
    if (std::string(name) == "sglang") {
      const double f = models::sglang_mem_fraction_static(gpu.hbm_usable_bytes, 8192, 256, 1, 1, false);
      EXPECT_DOUBLE_EQ(p.memory_fraction, f);
      EXPECT_NEAR(p.cache_bytes, f * gpu.hbm_usable_bytes - p.weight_bytes - p.context_bytes - p.reserve_bytes, 1.0);
      EXPECT_EQ(p.block_size, 1);
      EXPECT_EQ(p.num_kv_blocks, std::int64_t(std::floor(p.cache_bytes / 131072.0)) - 1);   // the padding slot
      EXPECT_EQ(p.max_num_seqs, models::sglang_max_running_requests(p.num_kv_blocks, p.max_model_len));
    } else {
      const double peak = p.weight_bytes + p.activation_bytes + p.cuda_graph_bytes + p.context_bytes + p.reserve_bytes;
      EXPECT_NEAR(p.cache_bytes, 0.9 * (gpu.hbm_usable_bytes - peak), 1.0);
      EXPECT_EQ(p.block_size, 32);
      EXPECT_EQ(p.num_kv_blocks, std::int64_t(std::floor(p.cache_bytes / (32 * 131072.0))) - 1);
    }
  }
}

// What does not limit SGLang 0.5.6's Llama-3.1-8B rows on the H200 at 352-512 clients (docs/engines.md,
// SGLang's TTFT on the H200): at TP1 the pool holds every client's prompt + answer of the 352-client
// rows (352 x (1,000 + 1,000) = 704,000 tokens; 256 x (1,000 + 2,000) = 768,000) and the request slots,
// min(max(tokens / 131,072 x 512, 2,048), 4,096), are over 3,500; at TP8 (8 KV heads, one a rank:
// 16 KiB a token) the pool is over 8 M tokens and the slots 4,096. Decode graphs go to 256 sequences
// below TP4 and 512 from TP4 (reference A2), so the 512-client rows decode eagerly at TP1-2 only.
TEST(Engines, SglangLlamaH200RowsFitThePoolAndSlots) {
  const auto& m = models::model("llama-3.1-8b");
  const auto& gpu = hw::Catalog::global().gpu("H200");
  for (int tp : {1, 8}) {
    const EngineConfig e = profiled("sglang-0.5.6", "H200", tp);
    const auto p = models::plan_memory(m, gpu, hw::Precision::bf16, {tp, 1, 1}, e.memory_config(hw::Precision::bf16));
    EXPECT_DOUBLE_EQ(p.kv_bytes_per_token, 131072.0 / tp);
    const std::int64_t tokens = p.num_kv_blocks * p.block_size;
    EXPECT_GT(tokens, tp == 1 ? 768000 : 8000000) << tp;
    EXPECT_EQ(p.max_num_seqs, std::min<std::int64_t>(std::max<std::int64_t>(tokens * 512 / 131072, 2048), 4096)) << tp;
    EXPECT_GT(p.max_num_seqs, 3500) << tp;
    EXPECT_EQ(e.max_cudagraph_capture_size, tp < 4 ? 256 : 512) << tp;
  }
}

// A step costs 1 ms whatever it holds (prefill or decode).
class MillisecondStep : public models::StepCostModel {
 public:
  double seconds(const models::StepBatch&) const override { return 0.001; }
  double encoder_seconds(int) const override { return 0; }
  models::StepTime breakdown(const models::StepBatch& b) const override { return {seconds(b), {}}; }
  std::string provenance() const override { return "test cost"; }
};

// The engine-level terms fitted on SGLang's and TRT-LLM's measured rows (each profile's
// closed_loop.source): a closed loop's fixed answer lengths get a spread, sd = base x (C/16)^a x
// (OSL/1024)^0.25 tokens: the base at 16 clients of 1,024 tokens, twice it (16^0.25 = 2) at
// 16,384-token answers; TRT-LLM 1.1+ takes vLLM's a = 0.25 (twice the base at 256 clients), SGLang
// 0.5.6 a = -0.5 (a quarter of it at 256 clients); and each profile's API-server request time and
// hop. SGLang 0.5.0-0.5.5 and TRT-LLM 1.0 keep fixed lengths (their measured loops stay locked);
// TRT-LLM 1.1 and newer take a 20-token base.
TEST(Engines, FittedClosedLoopSpreadAndApiServerTerms) {
  struct Fit {
    const char* profile;
    double spread, at_256_clients, request_ms, ipc_ms;
  };
  // SGLang 0.5.6: sd = 40 x (C/16)^-0.5 x (OSL/1024)^0.25, so 40 tokens at 16 clients, 40 / 4 = 10 at
  // 256 and 80 at 4; twice the base at 16,384-token answers.
  for (const Fit& f : {Fit{"trtllm", 20, 40, 1, 7}, Fit{"trtllm-1.1", 20, 40, 1, 7}, Fit{"trtllm-1.0", 0, 0, 1, 7},
                       Fit{"sglang-0.5.6", 40, 10, 1, 80}, Fit{"sglang-0.5", 0, 0, 1, 80}}) {
    const EngineConfig e = profiled(f.profile, "H200", 1);
    EXPECT_NEAR(closed_loop_osl_sd(e, 16, 1024), f.spread, 1e-12) << f.profile;
    EXPECT_NEAR(closed_loop_osl_sd(e, 256, 1024), f.at_256_clients, 1e-12) << f.profile;
    EXPECT_NEAR(closed_loop_osl_sd(e, 16, 16384), 2 * f.spread, 1e-12) << f.profile;
    const workloads::FrontendConfig fe = profile_frontend(engine_profile(f.profile));
    EXPECT_NEAR(fe.api.request.mean_s, f.request_ms * 1e-3, 1e-12) << f.profile;
    EXPECT_NEAR(fe.api.ipc_s, f.ipc_ms * 1e-3, 1e-12) << f.profile;
  }
}

// TRT-LLM's API server may not hold each request long: aiperf releases its C clients together after
// the warm-up barrier, and the first C of the C x 10 measured requests queue at the API server one at
// a time. gpt-oss-120b on B200 TP2, 128 clients of 1,024 + 1,024 tokens (1.2.0rc2.post2) measures a
// mean TTFT of 110.16 ms; no request of this model on B200 measures under 35.2 ms (4 clients, TP1),
// so the first wave's mean is at most (110.16 - 0.9 x 35.2) / 0.1 = 784.8 ms, and a wave of C
// prompts handled one at a time waits (C - 1) / 2 x request_ms on average: request_ms <= 12.36 ms
// (the 15 ms once fitted predicted 442 ms there).
TEST(Engines, TrtllmApiServerPassesTheMeasuredFirstWave) {
  const double wave_ms = (110.16 - 0.9 * 35.2) / 0.1;
  EXPECT_NEAR(wave_ms, 784.8, 1e-9);
  const double bound_ms = wave_ms / ((128 - 1) / 2.0);
  EXPECT_NEAR(bound_ms, 12.36, 0.01);
  for (const char* name : {"trtllm-1.0", "trtllm-1.1", "trtllm-1.3"}) {
    const workloads::FrontendConfig fe = profile_frontend(engine_profile(name));
    EXPECT_EQ(fe.api.api_server_count, 1) << name;
    EXPECT_LT(fe.api.request.mean_s + 1024 * fe.api.tokenize_s_per_token, bound_ms * 1e-3) << name;
  }
}

// One SGLang API server (TokenizerManager) takes one request at a time, so it serves at most
// 1 / request_ms requests a second. The measured Llama-3.1-8B H200 TP8 run of 448 clients of
// 1,000 + 100 tokens completes a request cycle in 915.5 ms + 99 x 34.08 ms = 4.289 s: 448 / 4.289 =
// 104.4 requests/s, so a request can hold the API server for at most 9.6 ms. Every SGLang
// profile must let that through (the 15 ms fitted before capped it at 67 requests/s).
TEST(Engines, SglangApiServerPassesTheMeasuredRequestRate) {
  const double cycle_s = 0.9155 + 99 * 0.03408;
  const double measured_rps = 448 / cycle_s;
  EXPECT_NEAR(measured_rps, 104.4, 0.1);
  for (const char* name : {"sglang-0.5", "sglang-0.5.6"}) {
    const workloads::FrontendConfig fe = profile_frontend(engine_profile(name));
    EXPECT_EQ(fe.api.api_server_count, 1) << name;
    EXPECT_LT(fe.api.request.mean_s + 1000 * fe.api.tokenize_s_per_token, 1 / measured_rps) << name;
  }
}

// A TRT-LLM profile's API server without spread, tokenisation, IPC hop or network.
workloads::FrontendConfig quiet_frontend(const char* profile) {
  workloads::FrontendConfig f = profile_frontend(engine_profile(profile));
  f.api.request.cv = 0;
  f.api.cv = 0;
  f.api.ipc_s = 0;
  f.api.tokenize_s_per_token = 0;
  f.client.network = {0, 0};
  return f;
}

// The requests of workload `w` (prompts of 100 tokens) through frontend `f` in front of 1 ms TRT-LLM steps.
std::vector<Request> run_behind_api(const workloads::FrontendConfig& f, workloads::WorkloadConfig w) {
  w.isl = workloads::LengthDist::fixed_at(100);
  ClusterShape shape;
  shape.kv_blocks = 100000;
  MillisecondStep cost;
  AggregatedCluster c(shape, plain(EngineKind::trtllm), cost, &f);
  auto workload = workloads::make_workload(w);
  Keep k;
  c.run(*workload, k);
  return k.all;
}

// TRT-LLM's API server with a request time of `request_s` and no output cost, in front of 1 ms
// steps; `ipc_s` each way. The TTFT of requests sent at `sent_ms` with fixed prompts of 100 tokens
// and answers of `osl`, in completion order.
std::vector<double> api_server_ttfts(double request_s, double ipc_s, const std::vector<double>& sent_ms, int osl) {
  workloads::FrontendConfig f = quiet_frontend("trtllm");
  f.api.request.mean_s = request_s;
  f.api.ipc_s = ipc_s;
  f.api.output_step_s = f.api.output_s_per_request = 0;
  workloads::WorkloadConfig w;
  w.arrival = workloads::Arrival::schedule;
  w.schedule_ms = std::make_shared<const std::vector<double>>(sent_ms);
  w.requests = 0;
  w.osl = workloads::LengthDist::fixed_at(osl);
  std::vector<double> ttft;
  for (const auto& r : run_behind_api(f, w)) ttft.push_back(r.first_token_s - r.sent_s);
  return ttft;
}

// The API server is one process taking requests and step outputs in FIFO order: four requests sent
// together at t = 0 reach TRT-LLM at R, 2R, 3R, 4R (R = 15 ms, no spread, no network or IPC). Each
// prefills alone in a 1 ms step (R + 1 ms, 2R + 1 ms, ...), but its first token is handled after the
// four requests already queued at t = 0: TTFT 4R = 60 ms for the first three, 4R + 1 ms for the last.
// Without the API server it would be 1 ms each.
TEST(Engines, ApiServerTakesOneRequestAtATime) {
  const double R = 0.015;
  std::vector<double> ttft = api_server_ttfts(R, 0, std::vector<double>(4, 0.0), 2);
  ASSERT_EQ(ttft.size(), 4u);
  std::sort(ttft.begin(), ttft.end());
  EXPECT_NEAR(ttft[0], 4 * R, 1e-9);
  EXPECT_NEAR(ttft[1], 4 * R, 1e-9);
  EXPECT_NEAR(ttft[2], 4 * R, 1e-9);
  EXPECT_NEAR(ttft[3], 4 * R + 0.001, 1e-9);
}

// The hop between the API server and the engine is a latency each way, not work on the API server:
// a step's output reaches the API server one hop after the step ends, so a request that reaches it
// earlier does not wait for it. Hop H = 100 ms, request handling R = 15 ms, outputs free, 1 ms
// steps. Client 1 (t = 0): handled by R, at the engine by R + H, prefilled in one step, its first
// token back one hop later: TTFT 2H + R + 1 ms. Client 2 (t = 0.5 s) arrives while client 1
// decodes (a step ends every 1 ms, each output in flight for 100 ms): handled at once, at the
// engine by 0.5 + R + H, behind at most the step in flight: TTFT between 2H + R + 1 ms and
// 2H + R + 2 ms, not the 3H + R it takes if it queues behind outputs still in flight.
TEST(Engines, ApiServerHopIsNotWorkOnTheApiServer) {
  const double R = 0.015, H = 0.1;
  const std::vector<double> ttft = api_server_ttfts(R, H, {0.0, 500.0}, 1000);
  ASSERT_EQ(ttft.size(), 2u);
  EXPECT_NEAR(ttft[0], 2 * H + R + 0.001, 1e-9);
  EXPECT_GE(ttft[1], 2 * H + R + 0.001 - 1e-9);
  EXPECT_LE(ttft[1], 2 * H + R + 0.002 + 1e-9);
}

// TRT-LLM 1.0's one API-server process streams each token at a fitted 100 us (vLLM's prior: 40 us),
// so a closed loop whose engine outruns it is held to the process's rate. 64 clients of 100 + 100
// tokens, 1 ms engine steps (64,000 tokens a second if nothing else limited them), no spread,
// network or hop. The process takes each request (request_ms, 1 ms), each step's output batch
// (output_step_ms, 0.1 ms) and each streamed token (100 us): R requests a second cost R x (1 ms +
// 100 x 100 us) = R x 11 ms, so it passes at most 100 / 11 ms = 9,091 tokens a second, and at
// least 8,182 when every one of 1,000 steps a second also costs it 0.1 ms (R = 0.9 / 11 ms). At
// vLLM's 40 us the same loop runs at 18,000-20,000. The measured 1.0.0rc3 runs stop at about 9,200
// tokens a second at TP2, TP4 and TP8 alike (trtllm-1.0.json api_server.sources).
TEST(Engines, TrtllmOneZeroApiServerCapsStreamedTokens) {
  EXPECT_NEAR(profile_frontend(engine_profile("trtllm-1.0")).api.output_s_per_request, 100e-6, 1e-12);
  EXPECT_NEAR(profile_frontend(engine_profile("trtllm-1.3")).api.output_s_per_request, 40e-6, 1e-12);
  const double osl = 100;
  auto tokens_per_s = [&](const char* profile) {
    const workloads::FrontendConfig f = quiet_frontend(profile);
    EXPECT_NEAR(f.api.request.mean_s, 0.001, 1e-12);
    EXPECT_NEAR(f.api.output_step_s, 0.0001, 1e-12);
    workloads::WorkloadConfig w;
    w.arrival = workloads::Arrival::concurrency;
    w.concurrency = 64;
    w.requests = 1280;
    w.warmup_requests = 128;
    w.osl = workloads::LengthDist::fixed_at(std::int64_t(osl));
    double first = INFINITY, last = 0, tokens = 0;
    for (const auto& r : run_behind_api(f, w)) {
      if (r.warmup) continue;
      first = std::min(first, r.sent_s);
      last = std::max(last, r.finish_s);
      tokens += osl;
    }
    return tokens / (last - first);
  };
  const double at_100us = tokens_per_s("trtllm-1.0");
  EXPECT_LE(at_100us, osl / (0.001 + osl * 100e-6));
  EXPECT_GE(at_100us, 0.9 * osl / (0.001 + osl * 100e-6));
  const double at_40us = tokens_per_s("trtllm-1.3");
  EXPECT_LE(at_40us, osl / (0.001 + osl * 40e-6));
  EXPECT_GE(at_40us, 0.9 * osl / (0.001 + osl * 40e-6));
}

// A measured point runs on its backend's profile; --engine-any runs sglang / trtllm as the newest vLLM.
TEST(Engines, ValidatePointsRunOnTheirOwnEngine) {
  validate::MeasuredPoint p;
  p.backend = "sglang";
  p.backend_version = "0.5.9";
  EXPECT_EQ(validate::point_engine_profile(p, false), "sglang-0.5.6");
  EXPECT_EQ(validate::point_engine_profile(p, true), "");
  p.backend_version = "0.5.1.post1";   // the release whose measured loops stay locked
  EXPECT_EQ(validate::point_engine_profile(p, false), "sglang-0.5");
  p.backend_version = "nightly-dev";   // no release: the newest
  EXPECT_EQ(validate::point_engine_profile(p, false), "sglang-0.5.6");
  p.backend = "trtllm";
  p.backend_version = "1.2.0rc6.post2";   // 1.1-1.2: the newer builds' spread, not 1.0's lockstep
  EXPECT_EQ(validate::point_engine_profile(p, false), "trtllm-1.1");
  p.backend_version = "1.0.0rc3";   // the release whose measured loops stay locked
  EXPECT_EQ(validate::point_engine_profile(p, false), "trtllm-1.0");
  p.backend_version = "0.21.0";   // older than every TRT-LLM profile: the newest
  EXPECT_EQ(validate::point_engine_profile(p, false), "trtllm-1.3");
  p.backend_version = "";
  EXPECT_EQ(validate::point_engine_profile(p, false), "trtllm-1.3");
  p.backend = "vllm";
  p.backend_version = "0.16.0";
  EXPECT_EQ(validate::point_engine_profile(p, true), "vllm-0.14");
  EXPECT_EQ(engine_profile("sglang").name, "sglang-0.5.6");
  EXPECT_EQ(engine_profile("trtllm").name, "trtllm-1.3");
}

// search --engine vllm,sglang,trtllm: every candidate once per engine, each knob at its engine's default.
// The aggregated candidates of one model on p5en.48xlarge (H200) at TP x DP sizes over engines, at
// 4 clients of 1,000 + 100 tokens (the search's configurations; nothing run).
Search aggregated_search(const std::string& model, hw::Precision p, std::vector<int> tp, std::vector<int> dp,
                         std::vector<std::string> engines) {
  SearchSpace sp;
  sp.model = &models::model(model);
  sp.instances = {&hw::Catalog::global().instance("p5en.48xlarge")};
  sp.precisions = {p};
  sp.tp = std::move(tp);
  sp.dp = std::move(dp);
  sp.disaggregated = false;
  sp.engines = std::move(engines);
  sp.max_num_seqs = {0};
  sp.max_num_batched_tokens = {0};
  SearchTraffic t;
  t.isl = 1000;
  t.osl = 100;
  t.concurrency = {4};
  SearchGoal g;
  g.ttft_ms = 5000;
  g.itl_ms = 100;
  return Search(sp, t, g);
}

TEST(Engines, SearchRanksAcrossEngines) {
  const Search s = aggregated_search("llama-3.1-8b", hw::Precision::bf16, {1}, {1}, {"vllm", "sglang", "trtllm"});
  ASSERT_EQ(s.configs().size(), 3u);
  EXPECT_EQ(s.configs()[0].engine, "vllm-0.19");
  EXPECT_EQ(s.configs()[1].engine, "sglang-0.5.6");
  EXPECT_EQ(s.configs()[2].engine, "trtllm-1.3");
  EXPECT_EQ(s.configs()[0].max_num_seqs, 1024);
  EXPECT_EQ(s.configs()[2].max_num_seqs, 2048);
  EXPECT_EQ(s.configs()[1].max_num_batched_tokens, 8192);
}

// Which engines launch which layouts (EngineProfile "layouts"): MoE TP x EP on TensorRT-LLM and
// SGLang, not vLLM (its EP spans tp x dp); attention DP with attention TP on SGLang and vLLM, not
// TensorRT-LLM (one GPU an attention rank). A scenario says so in one line; search leaves out what
// an engine does not run.
TEST(Engines, EachEngineLaunchesItsOwnLayouts) {
  auto err = [](const std::string& engine, int tp, int dp, int ep) {
    nlohmann::json j = {{"model", "qwen3-235b-a22b"}, {"gpu", "h200"}, {"precision", "fp8"}, {"engine_profile", engine},
                        {"tensor_parallel_size", tp}, {"data_parallel_size", dp}, {"expert_parallel_size", ep},
                        {"gpus", tp * dp}, {"workload", {{"concurrency", 4}, {"isl", 100}, {"osl", 10}, {"requests", 4}}}};
    try {
      parse_scenario(j.dump(), "s.json");
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  EXPECT_NE(err("vllm", 8, 1, 4).find("vLLM's expert parallelism spans the whole group (1 or 8)"), std::string::npos);
  EXPECT_EQ(err("trtllm", 8, 1, 4), "");
  EXPECT_EQ(err("sglang", 8, 1, 4), "");
  EXPECT_EQ(err("vllm", 2, 4, 8), "");
  EXPECT_EQ(err("sglang", 2, 4, 2), "");
  EXPECT_NE(err("trtllm", 2, 4, 8).find("attention DP runs each rank's attention on one GPU; give tp 1 and dp 8"),
            std::string::npos);
  EXPECT_EQ(err("trtllm", 1, 8, 4), "");
  EXPECT_NE(err("trtllm", 8, 1, 3).find("a divisor of it"), std::string::npos);

  const Search s = aggregated_search("qwen3-235b-a22b", hw::Precision::fp8, {1, 2}, {4}, {"vllm", "trtllm"});
  std::vector<std::string> runs;
  for (const auto& c : s.configs()) runs.push_back(c.engine + " " + c.topo.agg.label());
  EXPECT_EQ(runs, (std::vector<std::string>{"vllm-0.19 TP1 DP4", "trtllm-1.3 TP1 DP4", "vllm-0.19 TP1 DP4 EP4",
                                             "trtllm-1.3 TP1 DP4 EP4", "vllm-0.19 TP2 DP4", "vllm-0.19 TP2 DP4 EP8"}));
}

}  // namespace
}  // namespace servesim::sim

namespace servesim::sim {
namespace {

// sglang-0.5 extends sglang-0.5.6: the same profile but for its fixed answer lengths (the merge
// patch sets the spread to 0 and removes its exponents), so every other knob is the base's.
// SGLang's profile runs hybrid (Gated DeltaNet / Mamba) models without the overlap scheduler, so
// the scheduler's host time per step is paid after the GPU's instead of under it. One request of
// 10 + 100 tokens, 10 ms decode steps, 2 ms + 10 us a scheduled sequence of host time: overlapped,
// a token every 10 ms; serial, every 10 + 2.01 = 12.01 ms. Qwen3.5-397B-A17B (hybrid) resolves to
// serial, DeepSeek-R1 to overlapped on the same profile; vLLM overlaps both.
TEST(Engines, SglangHybridModelsRunWithoutTheOverlapScheduler) {
  const auto& gpu = hw::Catalog::global().gpu("H200");
  auto resolved = [&](const char* profile, const char* model) {
    EngineConfig e;
    apply_profile(engine_profile(profile), models::model(model), gpu, nlohmann::json::object(), e, 8);
    return e.async_scheduling;
  };
  EXPECT_FALSE(resolved("sglang-0.5.6", "qwen3.5-397b-a17b"));
  EXPECT_TRUE(resolved("sglang-0.5.6", "deepseek-r1"));
  EXPECT_TRUE(resolved("vllm-0.19", "qwen3.5-397b-a17b"));
  for (bool overlap : {true, false}) {
    EngineConfig c = plain(EngineKind::sglang);
    c.step_overhead_s = 0.002;
    c.step_overhead_per_seq_s = 10e-6;
    c.async_scheduling = overlap;
    PrefillDecodeCost cost;
    const auto r = run(c, cost, {0.0}, 10, 100, 100000);
    ASSERT_EQ(r.size(), 1u);
    const double itl = (r[0].finish_s - r[0].first_token_s) / 99;
    EXPECT_NEAR(itl, overlap ? 0.010 : 0.01201, 2e-5) << overlap;
  }
}

TEST(EngineProfile, ExtendsMergesOverItsBase) {
  const EngineProfile& old = engine_profile("sglang-0.5");
  const EngineProfile& base = engine_profile("sglang-0.5.6");
  EXPECT_EQ(old.closed_loop_osl_spread_tokens, 0.0);
  EXPECT_EQ(old.closed_loop_osl_spread_load_exponent, 0.0);
  EXPECT_EQ(base.closed_loop_osl_spread_tokens, 40.0);
  EXPECT_EQ(base.closed_loop_osl_spread_load_exponent, -0.5);
  EXPECT_FALSE(old.json.contains("extends"));
  nlohmann::json a = old.json, b = base.json;
  for (auto* j : {&a, &b}) {
    for (const char* k : {"name", "version", "description", "closed_loop"}) j->erase(k);
  }
  EXPECT_EQ(a, b);
  EXPECT_EQ(old.gpu_memory_utilization, base.gpu_memory_utilization);
}

// TensorRT-LLM's profile prices block-FP8 GEMMs on its release's own fp8_block rows (kernel times
// there); vLLM and SGLang keep the per-tensor rows (tests/hwmodels KernelTables.TensorRtLlmTimes...).
TEST(EngineProfile, OnlyTensorRtLlmTimesBlockFp8GemmsOnItsBlockRows) {
  EXPECT_TRUE(engine_profile("trtllm").kernel_tables.block_fp8_gemm_rows);
  for (const char* name : {"vllm", "vllm-0.14", "sglang-0.5", "sglang-0.5.6"})
    EXPECT_FALSE(engine_profile(name).kernel_tables.block_fp8_gemm_rows) << name;
}

// TensorRT-LLM's profiles time a MoE-TP layer on their release's EP rows of the same per-rank
// experts (tests/hwmodels KernelTables.TensorRtLlmTimesMoeTpOnItsEpRows); vLLM and SGLang read
// their tables' MoE-TP rows.
TEST(EngineProfile, OnlyTensorRtLlmTimesMoeTpOnItsEpRows) {
  for (const char* name : {"trtllm", "trtllm-1.0", "trtllm-1.1", "trtllm-1.3"})
    EXPECT_TRUE(engine_profile(name).kernel_tables.moe_tp_on_ep_rows) << name;
  for (const char* name : {"vllm", "vllm-0.14", "sglang-0.5", "sglang-0.5.6"})
    EXPECT_FALSE(engine_profile(name).kernel_tables.moe_tp_on_ep_rows) << name;
}

// MoE TP x EP layers, which the shipped TensorRT-LLM table keeps no rows of, priced from its TP and
// EP rows against AIConfigurator's TensorRT-LLM 1.3.0rc20 H200 rows of those layouts (FP8 per-tensor,
// CUTLASS, Qwen3-235B-A22B's shape: hidden 4,096, 1,536 per expert, top-8 of 128, balanced; ms a
// layer, held out of the reduced table): (MoE TP, EP) = (2, 4) 0.1485 / 0.9224 ms at 1,024 / 16,384
// tokens, (4, 2) 0.1722 / 1.3543, (2, 2) 0.2521 / 1.7273. Token counts that touch every expert
// (64 and 1,024 slots an expert), where balanced and random routing agree; within 20 %.
TEST(EngineProfile, TensorRtLlmPricesMoeTpTimesEpFromItsTpAndEpRows) {
  const auto& km = hw::kernel_model(hw::Catalog::global().gpu("h200"), engine_profile("trtllm-1.3").kernel_tables);
  struct Row { int tp, ep; double tokens, ms; };
  for (const Row& r : {Row{2, 4, 1024, 0.1485}, Row{2, 4, 16384, 0.9224}, Row{4, 2, 1024, 0.1722},
                       Row{4, 2, 16384, 1.3543}, Row{2, 2, 1024, 0.2521}, Row{2, 2, 16384, 1.7273}}) {
    hw::MoeShape s;
    s.tokens = r.tokens;
    s.hidden = 4096;
    s.inter = 1536;
    s.topk = 8;
    s.experts = 128;
    s.tp = r.tp;
    s.ep = r.ep;
    const double ms = km.moe(s, hw::Precision::fp8).seconds * 1e3;
    EXPECT_NEAR(ms / r.ms, 1.0, 0.20) << "MoE TP" << r.tp << " EP" << r.ep << " at " << r.tokens << " tokens: " << ms;
  }
}

// TensorRT-LLM's profiles price a MoE shape their release table never timed from SGLang 0.5.14's
// FlashInfer TRTLLM-gen MXFP4 x MXFP8 rows of it, as measured (tests/hwmodels
// KernelTables.AMoeShapeTheReleaseTableLacksComesFromTheSameKernelsMeasuredShape); vLLM and SGLang
// read their own tables.
TEST(EngineProfile, OnlyTensorRtLlmPricesAMoeShapeItsTableLacksFromTheSameKernelsRows) {
  for (const char* name : {"trtllm", "trtllm-1.0", "trtllm-1.1", "trtllm-1.3"}) {
    EXPECT_EQ(engine_profile(name).kernel_tables.moe_same_kernel, std::vector<std::string>{"moe_mxfp4_w4a8_trtllm"}) << name;
    EXPECT_FALSE(engine_profile(name).kernel_tables.moe_same_kernel_scaled) << name;
  }
  for (const char* name : {"vllm", "vllm-0.14", "sglang-0.5", "sglang-0.5.6"})
    EXPECT_TRUE(engine_profile(name).kernel_tables.moe_same_kernel.empty()) << name;
}

// SGLang runs the SGLang 0.5.14 table's MXFP4 x MXFP8 MoE rows for an MXFP4 layer on Blackwell
// (KernelTables.AProfileNamesWhichOfATablesMoeKernelsItRuns: gpt-oss-120b's 1,024-token layer 0.4121
// ms, against 0.6792 with BF16 activations); the other engines name none.
TEST(EngineProfile, SglangNamesItsMxfp4MoeActivations) {
  for (const char* name : {"sglang-0.5", "sglang-0.5.6"})
    EXPECT_EQ(engine_profile(name).kernel_tables.moe_first, std::vector<std::string>{"moe_mxfp4_w4a8_trtllm"}) << name;
  for (const char* name : {"vllm", "trtllm"}) EXPECT_TRUE(engine_profile(name).kernel_tables.moe_first.empty()) << name;
}

// SGLang's NSA backend keeps a DSA model's KV cache in BF16 on Hopper and FP8 on Blackwell when the
// KV dtype is left auto (reference A6), whatever the checkpoint declares; other models and engines
// keep the checkpoint's. Memory sum for GLM-5 (78 MLA layers, latent 512 + rope 64 = 576 elements,
// DSA indexer key 128 FP8 bytes + one 4-byte scale per 128): BF16 78 x (576 x 2 + 132) = 100,152
// bytes a token, FP8 78 x (576 + 132) = 55,224, so the same cache holds 0.551x the tokens in BF16.
TEST(EngineProfile, SglangKeepsDsaCachesInBf16OnHopper) {
  const auto& glm = models::model("glm-5");
  const auto& llama = models::model("llama-3.1-8b");
  const auto& h200 = hw::Catalog::global().gpu("H200");
  const auto& b200 = hw::Catalog::global().gpu("B200");
  ASSERT_GT(glm.index_topk, 0);
  ASSERT_EQ(glm.count(models::LayerKind::mla), 78);
  for (const char* name : {"sglang-0.5", "sglang-0.5.6"}) {
    const EngineProfile& p = engine_profile(name);
    EXPECT_EQ(p.auto_kv_cache_dtype(glm, h200, hw::Precision::fp8), hw::Precision::bf16) << name;
    EXPECT_EQ(p.auto_kv_cache_dtype(glm, b200, hw::Precision::bf16), hw::Precision::fp8) << name;
    EXPECT_EQ(p.auto_kv_cache_dtype(llama, h200, hw::Precision::fp8), hw::Precision::fp8) << name;
    EXPECT_EQ(p.auto_kv_cache_dtype(llama, b200, hw::Precision::bf16), hw::Precision::bf16) << name;
  }
  for (const char* name : {"vllm", "trtllm"})
    EXPECT_EQ(engine_profile(name).auto_kv_cache_dtype(glm, h200, hw::Precision::fp8), hw::Precision::fp8) << name;

  // A scenario that leaves the dtype auto runs the rule; one that names it keeps its own.
  auto plan = [](const char* engine, const char* kv) {
    nlohmann::json j = {{"model", "glm-5"}, {"gpu", "h200"}, {"gpus", 8}, {"tensor_parallel_size", 8},
                        {"precision", "fp8"}, {"engine_profile", engine},
                        {"workload", {{"concurrency", 1}, {"isl", 1024}, {"osl", 1024}, {"requests", 1}}}};
    if (kv) j["kv_cache_dtype"] = kv;
    return prepare(parse_scenario(j.dump(), "test")).plan;
  };
  const auto sglang_auto = plan("sglang", nullptr), sglang_fp8 = plan("sglang", "fp8"), vllm_auto = plan("vllm", nullptr);
  EXPECT_EQ(sglang_auto.kv_precision, "bf16");
  EXPECT_DOUBLE_EQ(sglang_auto.kv_bytes_per_token, 100152.0);
  EXPECT_DOUBLE_EQ(sglang_fp8.kv_bytes_per_token, 55224.0);
  EXPECT_DOUBLE_EQ(vllm_auto.kv_bytes_per_token, 55224.0);
  // One token a page on Hopper: the pool is the cache over the bytes a token (less the padding slot).
  EXPECT_EQ(sglang_auto.num_kv_blocks, std::int64_t(std::floor(sglang_auto.cache_bytes / 100152.0)) - 1);
  EXPECT_NEAR(double(sglang_auto.num_kv_blocks) / double(sglang_fp8.num_kv_blocks), 55224.0 / 100152.0, 1e-4);
}

// SGLang's profiles prefill DSA prompts past index_topk on FlashMLA's sparse kernel (Hopper; the
// step model's Families.DsaSparsePrefillOnHopperPadsHeadsToSixtyFour); the other engines do not.
TEST(EngineProfile, OnlySglangPrefillsDsaPromptsOnTheSparseKernel) {
  for (const char* name : {"sglang-0.5", "sglang-0.5.6"}) EXPECT_TRUE(engine_profile(name).kernel_tables.dsa_sparse_mla_prefill) << name;
  for (const char* name : {"vllm", "vllm-0.14", "trtllm", "trtllm-1.0"})
    EXPECT_FALSE(engine_profile(name).kernel_tables.dsa_sparse_mla_prefill) << name;
}

// Every vLLM profile models a release before 0.24, whose FP8 GEMMs take no step at m = 1 on
// Blackwell (tests/hwmodels KernelTables.OneRowFp8GemmOnBlackwellCostsAtMostTwoRows); the other
// engines price FP8 GEMMs on their own release tables, as measured.
TEST(EngineProfile, VllmProfilesPriceAOneRowFp8GemmAtMostAtTwoRows) {
  for (const char* name : {"vllm", "vllm-0.11", "vllm-0.12", "vllm-0.14", "vllm-0.19"})
    EXPECT_TRUE(engine_profile(name).kernel_tables.fp8_gemm_m1_at_most_m2) << name;
  for (const char* name : {"trtllm", "sglang-0.5"})
    EXPECT_FALSE(engine_profile(name).kernel_tables.fp8_gemm_m1_at_most_m2) << name;
}

}  // namespace
}  // namespace servesim::sim
