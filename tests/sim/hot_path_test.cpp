// The engine loop's shortcuts against the values they stand for: a remembered decode step time is
// the model's for exactly that batch, a draw whose value is never needed moves the random stream
// as computing it would, a pending lognormal draw stays under its bound, and the API server's
// output handler, whose draws are computed only when needed, times tokens as a FIFO queue does by
// hand (batches that overlap the next step and batches that do not), and steady decode stretches
// run in place give the results of every step run through the event heap.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>

#include "sim/engine/cluster.hpp"
#include "sim/engine/metrics_sink.hpp"
#include "sim/metrics.hpp"
#include "tests/sim/flat_cost.hpp"
#include "sim/engine/worker.hpp"
#include "workloads/frontend.hpp"
#include "workloads/workload.hpp"

namespace servesim::sim {
namespace {

// A step time that depends on every field of a decode batch, non-linearly in its context.
double nonlinear(const models::StepBatch& b) {
  return 1e-3 + 1e-6 * b.decode_seqs + 1e-7 * b.graph_padding_seqs + 1e-8 * b.tokens_per_decode_seq +
         1e-12 * std::pow(double(b.decode_context_tokens), 1.5);
}

TEST(DecodeStepMemo, ReturnsTheModelsValueForExactlyThatBatch) {
  DecodeStepMemo memo;
  int calls = 0;
  auto model = [&](const models::StepBatch& b) { ++calls; return nonlinear(b); };
  int lookups = 0;
  for (int pass = 0; pass < 2; ++pass)
    for (int d = 1; d <= 40; ++d)
      for (std::int64_t ctx = 0; ctx < 3000; ctx += 7)
        for (int pad = 0; pad < 2; ++pad) {
          models::StepBatch b;
          b.decode_seqs = d;
          b.decode_context_tokens = ctx * d;
          b.graph_padding_seqs = pad;
          b.tokens_per_decode_seq = 1 + pad;
          EXPECT_EQ(memo.get(b, model), nonlinear(b));
          ++lookups;
        }
  // 34,400 distinct batches: the first 8,193 misses double the 4,096 entries, 16,385 more double
  // them again; the second pass finds some, never a wrong one.
  EXPECT_GE(memo.size(), 16384u);
  EXPECT_LE(memo.size(), 131072u);
  EXPECT_GT(memo.hits(), 0);
  EXPECT_EQ(calls + memo.hits(), lookups);
  // A batch with prefill work is never remembered.
  models::StepBatch mixed;
  mixed.decode_seqs = 4;
  mixed.prefill_seqs = 1;
  mixed.prefill_tokens = 100;
  const int before = calls;
  memo.get(mixed, model);
  memo.get(mixed, model);
  EXPECT_EQ(calls, before + 2);
}

TEST(LazyDraws, SkipMovesTheStreamAsASample) {
  const workloads::Duration d{1e-3, 0.2}, fixed{1e-3, 0};
  std::uint64_t a = 12345, b = 12345;
  d.sample(a);
  d.skip(b);
  EXPECT_EQ(a, b);
  fixed.sample(a);   // cv 0 draws nothing
  fixed.skip(b);
  EXPECT_EQ(a, b);
  EXPECT_EQ(a, 12345 + 2 * 0x9e3779b97f4a7c15ULL);
}

TEST(LazyDraws, FactorStaysUnderItsBoundWhenTheFirstUniformIsNotTiny) {
  for (const double cv : {0.05, 0.2, 1.0, 3.0}) {
    const double bound = workloads::lognormal_factor_bound(cv);
    // exp(5.3 sigma) with sigma^2 = ln(1 + cv^2): 1.30 at cv 0.2.
    EXPECT_NEAR(bound, std::exp(5.3 * std::sqrt(std::log1p(cv * cv))), 1e-5 * bound);
    std::uint64_t state = 7;
    int unbounded = 0;
    double top = 0;
    for (int i = 0; i < 1000000; ++i) {
      std::uint64_t s = state;
      const double f = workloads::lognormal_factor(cv, s);
      if (workloads::lognormal_bounded(state)) {
        ASSERT_LT(f, bound) << "cv " << cv << " draw " << i;
        top = std::max(top, f);
      } else {
        ++unbounded;
      }
      state = s;
    }
    EXPECT_LE(unbounded, 10);            // 2^-20 of the draws: about one in a million
    // The largest z among a million draws (about 4.9) is close to the 5.27 the bound allows.
    const double s2 = std::log1p(cv * cv);
    EXPECT_GT((std::log(top) + s2 / 2) / std::sqrt(s2), 4.5);
  }
  EXPECT_EQ(workloads::lognormal_factor_bound(0), 1.0);
}

TEST(LazyDraws, EmitTimeAddsItsDrawsInStreamOrderOnce) {
  const workloads::Duration hop{1e-4, 0.2};
  std::uint64_t stream = 99;
  const std::uint64_t out_state = stream;
  const double out = 7e-4 * workloads::lognormal_factor(0.2, stream);
  const std::uint64_t hop_state = stream;
  const double net = hop.sample(stream);
  EmitTime e{1.5, &hop, hop_state, 7e-4, 0.2, out_state};
  const double want = 1.5 + out + net;
  EXPECT_EQ(e.get(), want);
  EXPECT_EQ(e.get(), want);   // resolved once
  EmitTime plain{2.5};
  EXPECT_EQ(plain.get(), 2.5);
}

using testing::FlatCost;   // 10 ms of GPU per step

struct Last : RequestSink {
  Request r;
  void on_finished(const Request& x) override { r = x; }
};

// One client, a 10-token prompt and `osl` answer tokens, steps of 1 ms host + 10 ms GPU (sync), with
// the frontend `f` or none.
struct OneRun {
  Request r;
  double end_s = 0;
  std::int64_t steady = 0;
  WorkerStats stats;
};
OneRun run_one(std::int64_t osl, const workloads::FrontendConfig* f) {
  FlatCost cost;
  ClusterShape shape;
  shape.kv_blocks = 1000;
  EngineConfig cfg;
  cfg.step_overhead_s = 0.001;
  cfg.async_scheduling = false;
  AggregatedCluster c(shape, cfg, cost, f);
  workloads::WorkloadConfig w;
  w.concurrency = 1;
  w.requests = 1;
  w.isl = workloads::LengthDist::fixed_at(10);
  w.osl = workloads::LengthDist::fixed_at(osl);
  auto workload = workloads::make_workload(w);
  Last sink;
  OneRun out;
  out.end_s = c.run(*workload, sink);
  out.r = sink.r;
  out.steady = c.steady_cycles_run();
  out.stats = c.workers()[0].stats();
  return out;
}

// 5 answer tokens: the steps end at 11, 22, 33, 44, 55 ms. The API server's output handler (one
// process, no other cost, a cv of 1e-12 so its draws are pending but equal their mean) takes
// `out_ms` per batch.
Request one_request(double out_ms) {
  workloads::FrontendConfig f;
  f.client.network = {0, 0};
  f.api.request = {0, 0};
  f.api.tokenize_s_per_token = 0;
  f.api.ipc_s = 0;
  f.api.output_step_s = out_ms * 1e-3;
  f.api.output_s_per_request = 0;
  f.api.cv = 1e-12;
  return run_one(5, &f).r;
}

TEST(LazyDraws, OutputHandlerQueuesAsByHand) {
  // 1 ms batches end before the next step's: first token at 11 + 1, last at 55 + 1 ms.
  const Request fast = one_request(1);
  EXPECT_NEAR(fast.first_token_s, 0.012, 1e-9);
  EXPECT_NEAR(fast.finish_s, 0.056, 1e-9);
  // 30 ms batches queue behind each other: they end at 41, 71, 101, 131 and 161 ms.
  const Request slow = one_request(30);
  EXPECT_NEAR(slow.first_token_s, 0.041, 1e-9);
  EXPECT_NEAR(slow.second_token_s, 0.071, 1e-9);
  EXPECT_NEAR(slow.finish_s, 0.161, 1e-9);
}

// A step time that grows with the batch's context, not linearly (no decode line: the memo path).
class ContextCost : public models::StepCostModel {
 public:
  double seconds(const models::StepBatch& b) const override { return nonlinear(b) + 1e-4 * b.prefill_tokens / 1000.0; }
  double encoder_seconds(int) const override { return 0; }
  models::StepTime breakdown(const models::StepBatch& b) const override { return {seconds(b), {}}; }
  std::string provenance() const override { return "context test cost"; }
};

// Every request as its client saw it, every step as the worker reported it, every token gap.
struct Trace : RequestSink {
  std::vector<Request> done;
  std::vector<double> steps;
  TokenGaps gaps;
  TokenGaps* token_gaps() override { return &gaps; }
  void on_finished(const Request& r) override { done.push_back(r); }
  void on_step(int w, double start_s, double step_s, int seqs, double kv) override {
    steps.insert(steps.end(), {double(w), start_s, step_s, double(seqs), kv});
  }
};

struct SteadyRun {
  Trace trace;
  std::vector<WorkerStats> workers;
  std::uint64_t events = 0;
  std::int64_t steady = 0;
  double end_s = 0;
};

// A closed loop with answers of spread lengths, through the API server and the network (lognormal
// draws), on a pool small enough that blocks run short.
SteadyRun run_loop(bool steady, int clients, std::int64_t kv_blocks, bool async, int replicas, std::uint64_t seed,
                   EngineKind kind = EngineKind::vllm) {
  ContextCost cost;
  ClusterShape shape;
  shape.kv_blocks = kv_blocks;
  shape.replicas = replicas;
  shape.seed = seed;
  EngineConfig cfg;
  cfg.step_overhead_s = 0.001;
  cfg.step_overhead_per_seq_s = 1e-5;
  cfg.kind = kind;
  cfg.async_scheduling = async;
  cfg.max_num_seqs = 48;
  cfg.max_num_batched_tokens = 512;
  cfg.enable_prefix_caching = true;
  workloads::FrontendConfig f;
  AggregatedCluster c(shape, cfg, cost, &f);
  c.set_steady_stretches(steady);
  workloads::WorkloadConfig w;
  w.concurrency = clients;
  w.requests = 100;
  w.warmup_requests = 8;
  w.dataset.entries = 20;   // repeated prompts: prefix-cache hits and cached blocks in the pool
  w.isl = workloads::LengthDist::fixed_at(200);
  w.osl = workloads::LengthDist::normal_of(400, 100);
  w.seed = seed;
  auto workload = workloads::make_workload(w);
  SteadyRun r;
  r.end_s = c.run(*workload, r.trace);
  for (const Worker& x : c.workers()) r.workers.push_back(x.stats());
  r.events = c.events_processed();
  r.steady = c.steady_cycles_run();
  return r;
}

void expect_same(const SteadyRun& a, const SteadyRun& b) {
  EXPECT_EQ(a.end_s, b.end_s);
  EXPECT_EQ(a.events, b.events);
  ASSERT_EQ(a.trace.done.size(), b.trace.done.size());
  for (std::size_t i = 0; i < a.trace.done.size(); ++i) {
    const Request &x = a.trace.done[i], &y = b.trace.done[i];
    EXPECT_EQ(x.id, y.id);
    EXPECT_EQ(x.first_token_s, y.first_token_s);
    EXPECT_EQ(x.second_token_s, y.second_token_s);
    EXPECT_EQ(x.finish_s, y.finish_s);
    EXPECT_EQ(x.generated, y.generated);
    EXPECT_EQ(x.preemptions, y.preemptions);
  }
  EXPECT_EQ(a.trace.steps, b.trace.steps);
  // The gaps between streamed tokens: a steady stretch counts its cycles' gaps in runs, the heap
  // one request at a time; the same gaps, their sum in another order.
  const Stats ga = a.trace.gaps.stats_ms(), gb = b.trace.gaps.stats_ms();
  EXPECT_GT(ga.count, 0);
  EXPECT_EQ(ga.count, gb.count);
  EXPECT_NEAR(ga.avg, gb.avg, 1e-9 * ga.avg);
  EXPECT_EQ(ga.min, gb.min);
  EXPECT_EQ(ga.max, gb.max);
  EXPECT_EQ(ga.p50, gb.p50);
  EXPECT_EQ(ga.p90, gb.p90);
  EXPECT_EQ(ga.p99, gb.p99);
  ASSERT_EQ(a.workers.size(), b.workers.size());
  for (std::size_t i = 0; i < a.workers.size(); ++i) {
    const WorkerStats &x = a.workers[i], &y = b.workers[i];
    EXPECT_EQ(x.busy_s, y.busy_s);
    EXPECT_EQ(x.steps, y.steps);
    EXPECT_EQ(x.scheduled_seqs, y.scheduled_seqs);
    EXPECT_EQ(x.kv_block_seconds, y.kv_block_seconds);
    EXPECT_EQ(x.peak_kv_blocks, y.peak_kv_blocks);
    EXPECT_EQ(x.preemptions, y.preemptions);
    EXPECT_EQ(x.gpu_idle_s, y.gpu_idle_s);
  }
}

TEST(SteadyStretch, SameResultsAsEveryStepThroughTheHeap) {
  for (const bool async : {true, false})
    for (const int replicas : {1, 2})
      for (const std::int64_t blocks : {100000, 200}) {   // 200 blocks of 16 tokens: 8 requests of 600 tokens need 304
        SCOPED_TRACE(::testing::Message() << "async " << async << " replicas " << replicas << " blocks " << blocks);
        const SteadyRun on = run_loop(true, 8, blocks, async, replicas, 5);
        const SteadyRun off = run_loop(false, 8, blocks, async, replicas, 5);
        EXPECT_EQ(off.steady, 0);
        EXPECT_GT(on.steady, 0);
        if (replicas == 1 && blocks > 200) { EXPECT_GT(on.steady, on.workers[0].steps / 2); }   // most steps are steady decode
        expect_same(on, off);
        if (blocks == 200 && replicas == 1) { EXPECT_GT(on.workers[0].preemptions, 0); }
      }
}

// SGLang's and TensorRT-LLM's batch formation run steady stretches too: SGLang's decode steps
// (its new-token ratio decayed by cycle, retractions when the small pool runs short), TensorRT-LLM's
// whole-sequence reservations (a request waits for its blocks instead of being preempted).
TEST(SteadyStretch, SglangAndTrtllmPoliciesGiveTheResultsOfEveryStepThroughTheHeap) {
  for (const EngineKind kind : {EngineKind::sglang, EngineKind::trtllm})
    for (const bool async : {true, false})
      for (const std::int64_t blocks : {100000, 200}) {
        SCOPED_TRACE(::testing::Message() << "engine " << to_string(kind) << " async " << async << " blocks " << blocks);
        const SteadyRun on = run_loop(true, 8, blocks, async, 1, 5, kind);
        const SteadyRun off = run_loop(false, 8, blocks, async, 1, 5, kind);
        EXPECT_EQ(off.steady, 0);
        EXPECT_GT(on.steady, 0);
        if (blocks > 200) { EXPECT_GT(on.steady, on.workers[0].steps / 2); }   // most steps are steady decode
        expect_same(on, off);
        if (blocks == 200 && kind == EngineKind::sglang) { EXPECT_GT(on.workers[0].preemptions, 0); }   // retractions
        if (kind == EngineKind::trtllm) { EXPECT_EQ(on.workers[0].preemptions, 0); }   // GUARANTEED_NO_EVICT
      }
}

// One client, 10 prompt and 100 answer tokens, 10 ms steps: steps 1-4 run through the heap (the
// prefill, then the first three tokens, which the client times); the step in flight from step 4 on
// decodes one untimed token, so its end and the next start run in place 96 times, until step 100,
// the last token's, is in flight.
TEST(SteadyStretch, OneRequestRunsNinetySixCyclesInPlace) {
  const OneRun one = run_one(100, nullptr);
  EXPECT_EQ(one.steady, 96);
  EXPECT_EQ(one.stats.steps, 100);
  EXPECT_NEAR(one.end_s, 100 * 0.011, 1e-12);   // 1 ms host + 10 ms GPU a step
  EXPECT_NEAR(one.r.finish_s, 1.1, 1e-12);
  // Blocks of 16 tokens for 10 + 100 tokens: 7, the last one taken in place at token 97.
  EXPECT_EQ(one.stats.peak_kv_blocks, 7);
}

}  // namespace
}  // namespace servesim::sim
