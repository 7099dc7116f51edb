// The engine against hand-checkable facts: Little's law in a closed loop, token conservation
// under preemption, the KV pool's capacity, determinism, TTFT under load and a lone request's
// TTFT summed step by step from the cost model.
#include <gtest/gtest.h>

#include <cmath>
#include <type_traits>
#include <utility>

#include "common/error.hpp"
#include "sim/engine/cluster.hpp"
#include "sim/metrics.hpp"
#include "sim/scheduler/kv_pool.hpp"
#include "sim/scheduler/vllm_scheduler.hpp"
#include "sim/simulate.hpp"
#include "workloads/workload.hpp"

namespace servesim::sim {
namespace {

// SimResult{} value-initialises each member from {} (copy-list-initialisation): a MetricsCollector
// whose default constructor is explicit makes that ill-formed (GCC warned at sim/simulate.cpp's
// what_ran_json, which passes SimResult{} to run_kind).
template <class T>
concept CopyListDefault = requires(void (*f)(T)) { f({}); };
static_assert(CopyListDefault<MetricsCollector>);
static_assert(!std::is_convertible_v<bool, MetricsCollector>);   // the flag stays explicit

// Requests 1 and 2 of `input` prompt and `output` answer tokens.
std::pair<workloads::RequestSpec, workloads::RequestSpec> two_requests(std::int64_t input, std::int64_t output) {
  workloads::RequestSpec a, b;
  a.id = 1;
  b.id = 2;
  a.input_tokens = b.input_tokens = input;
  a.output_tokens = b.output_tokens = output;
  return {a, b};
}

// A linear step cost: easy to sum by hand, independent of the calibrated models.
class LinearCost : public models::StepCostModel {
 public:
  double seconds(const models::StepBatch& b) const override {
    return 0.004 + 2e-5 * double(b.prefill_tokens) + 5e-5 * b.decode_seqs + 1e-8 * double(b.decode_context_tokens) +
           1e-10 * b.prefill_attention_pairs;
  }
  double encoder_seconds(int) const override { return 0; }
  models::StepTime breakdown(const models::StepBatch& b) const override { return {seconds(b), {}}; }
  std::string provenance() const override { return "linear test cost"; }
};

// Collects records and totals like the real metrics path does.
struct Collect : RequestSink {
  MetricsCollector m;
  std::int64_t output_tokens = 0, finished = 0;
  std::vector<Request> all;
  bool keep = false;
  void on_finished(const Request& r) override {
    ++finished;
    output_tokens += r.generated;
    if (keep) all.push_back(r);
    m.add(RequestRecord{r.id, r.sent_s, r.first_token_s, r.second_token_s, r.finish_s, r.input_tokens, r.generated, r.warmup});
  }
};

workloads::WorkloadConfig closed(int clients, std::int64_t requests, std::int64_t isl, std::int64_t osl, std::int64_t warmup = 0) {
  workloads::WorkloadConfig w;
  w.arrival = workloads::Arrival::concurrency;
  w.concurrency = clients;
  w.requests = requests;
  w.warmup_requests = warmup;
  w.isl = workloads::LengthDist::fixed_at(isl);
  w.osl = workloads::LengthDist::fixed_at(osl);
  w.seed = 3;
  return w;
}

struct EngineRun {
  Collect sink;
  std::vector<WorkerStats> stats;
  std::int64_t peak = 0, capacity = 0;
};

void run(EngineRun& out, const workloads::WorkloadConfig& w, std::int64_t kv_blocks, EngineConfig cfg = {}, int replicas = 1) {
  LinearCost cost;
  ClusterShape shape;
  shape.replicas = replicas;
  shape.kv_blocks = kv_blocks;
  AggregatedCluster c(shape, cfg, cost);
  auto workload = workloads::make_workload(w);
  c.run(*workload, out.sink);
  for (const auto& wk : c.workers()) {
    out.stats.push_back(wk.stats());
    out.peak = std::max(out.peak, wk.scheduler().pool().peak_used());
    out.capacity = wk.scheduler().pool().capacity();
  }
}

TEST(Engine, LittlesLawClosedLoop) {
  // 16 clients; the drain at the end shrinks occupancy by ~ clients / (2 × requests): 0.25 %.
  EngineRun r;
  run(r, closed(16, 3200, 1000, 200, 200), 100000);
  const Summary s = r.sink.m.summary();
  EXPECT_EQ(s.request_count, 3200);
  EXPECT_NEAR(s.request_throughput_per_s * s.request_latency_ms.avg / 1e3, 16.0, 0.16);
}

TEST(Engine, OutputTokensConservedUnderPreemption) {
  // 64 clients of 512 + 256 tokens each would need 64 × 48 blocks; the pool holds 1200: the
  // scheduler must preempt by recompute, and every requested token must still come out once.
  EngineRun r;
  run(r, closed(64, 640, 512, 256), 1200);
  EXPECT_EQ(r.sink.finished, 640);
  EXPECT_EQ(r.sink.output_tokens, 640 * 256);
  EXPECT_GT(r.stats[0].preemptions, 0);
  EXPECT_LE(r.peak, r.capacity);
  EXPECT_EQ(r.peak, r.capacity);   // it did run full
}

TEST(Engine, KvPoolNeverOverCapacity) {
  KvBlockPool pool(10, false);
  EXPECT_TRUE(pool.allocate(7));
  EXPECT_FALSE(pool.allocate(4));   // refused, nothing taken
  EXPECT_EQ(pool.used(), 7);
  EXPECT_TRUE(pool.allocate(3));
  EXPECT_EQ(pool.allocatable(), 0);
  pool.release(10);
  EXPECT_THROW(pool.release(1), std::logic_error);
}

TEST(Engine, PrefixCacheReusesAndEvictsLru) {
  KvBlockPool pool(4, true);
  std::vector<std::uint64_t> a{1, 2, 3}, b{9};
  std::vector<std::int32_t> ids_a, ids_b;
  ASSERT_TRUE(pool.allocate(3));
  for (auto k : a) EXPECT_TRUE(pool.publish(k, ids_a));
  pool.release_cached(ids_a);                    // freed but cached
  EXPECT_EQ(pool.cached(), 3);
  std::int64_t free_hits = 0;
  EXPECT_EQ(pool.match(a, 10, &free_hits), 3);
  EXPECT_EQ(free_hits, 3);
  ASSERT_TRUE(pool.allocate(2));                 // 1 empty + evicts the LRU head: a's last block
  EXPECT_EQ(pool.match(a, 10, nullptr), 2);
  EXPECT_EQ(pool.used() + pool.cached(), 4);
  EXPECT_FALSE(pool.allocate(3));
}

// A preempted request's recompute with and without vLLM's prefix cache, step by step. A pool of 12
// blocks of 16 tokens; A and B each 64 prompt + 64 answer tokens (8 blocks each at the end: 16 >
// 12). Both prefill in step 1 (4 blocks each) and take a 5th and 6th block as they decode; at 96
// computed tokens (97 known) A needs a 7th block, the pool is full, and B, the newest, is
// preempted with 96 computed tokens = 6 full blocks. With the cache on they stay hashed in the free
// queue, tail first: A's 7th block evicts B's 6th, A's 8th (at 112) B's 5th; when A finishes, B
// re-enters with blocks 0-3 as hits (64 tokens) and prefills 97 - 64 = 33 tokens. With the cache
// off it prefills all 97.
TEST(Engine, PreemptedRequestRecomputesOnlyWhatTheCacheLost) {
  for (bool caching : {true, false}) {
    EngineConfig cfg;
    cfg.max_num_batched_tokens = 1000;
    cfg.max_num_seqs = 8;
    cfg.enable_prefix_caching = caching;
    VllmScheduler s(cfg, 12);
    const auto [a, b] = two_requests(64, 64);
    s.add(a, 0, 0, false);
    const std::int32_t slot_b = s.add(b, 0, 1, false);
    double t = 0;
    std::int64_t readmitted_prefill = -1;
    bool was_preempted = false;
    for (int step = 0; step < 400 && s.has_work(); ++step) {
      const bool waiting = s.request(slot_b).phase == Phase::waiting;
      const models::StepBatch& batch = s.schedule(t);
      if (was_preempted && waiting && s.request(slot_b).phase == Phase::running) readmitted_prefill = batch.prefill_tokens;
      t += 0.01;
      s.complete(t);
      for (const Output& o : s.outputs())
        if (o.kind == Output::preempted) {
          EXPECT_EQ(o.slot, slot_b);
          EXPECT_EQ(s.request(slot_b).num_tokens(), 97);
          was_preempted = true;
        }
      s.clear_outputs();
    }
    EXPECT_EQ(s.preemptions(), 1);
    EXPECT_EQ(readmitted_prefill, caching ? 33 : 97) << (caching ? "prefix caching on" : "off");
    EXPECT_FALSE(s.has_work());
  }
}

TEST(Engine, APulledRequestJoinsTheFirstVllmBatchFormedAfterItLanded) {
  // A decode-only worker: one request already decoding, a second one's KV pull lands at t = 5 ms.
  // vLLM's async loop formed the batch now starting (t = 6 ms) at t = 4 ms, before the pull
  // landed: that batch holds the first request only, and the second joins the next one (formed at
  // t = 6 ms). SGLang's and TensorRT-LLM's profiles take it into the next batch they form.
  for (EngineKind kind : {EngineKind::vllm, EngineKind::sglang, EngineKind::trtllm}) {
    EngineConfig cfg;
    cfg.kind = kind;
    cfg.role = WorkerRole::decode_only;
    cfg.max_num_batched_tokens = 1000;
    cfg.max_num_seqs = 8;
    VllmScheduler s(cfg, 64);
    const auto [a, b] = two_requests(64, 16);
    const std::int32_t slot_a = s.add_transferred(a, 0.0, 0.0, 0, false);
    const std::int32_t slot_b = s.add_transferred(b, 0.0, 0.0, 1, false);
    s.clear_outputs();
    s.transfer_done(slot_a, 0.001);
    s.transfer_done(slot_b, 0.005);
    EXPECT_EQ(s.num_running(), 2);   // both hold a seat from the pull on
    EXPECT_EQ(s.schedule(0.006, 0.004).decode_seqs, kind == EngineKind::vllm ? 1 : 2);
    s.complete(0.016);
    s.clear_outputs();
    EXPECT_EQ(s.schedule(0.016, 0.006).decode_seqs, 2);
  }
}

TEST(Engine, TtftGrowsWithLoad) {
  double prev = 0;
  for (int c : {1, 8, 32, 128}) {
    EngineRun r;
    run(r, closed(c, 4 * c + 40, 2000, 100), 200000);
    const double ttft = r.sink.m.summary().ttft_ms.avg;
    EXPECT_GT(ttft, prev) << "concurrency " << c;
    prev = ttft;
  }
}

TEST(Engine, LoneRequestTtftIsItsPrefillSteps) {
  // 3000 prompt tokens under a 1024-token budget: chunks of 1024, 1024, 952, the last one
  // samples the first token. TTFT = the three steps' costs + three overheads.
  EngineConfig cfg;
  cfg.max_num_batched_tokens = 1024;
  cfg.step_overhead_s = 0.0015;
  LinearCost cost;
  double expect = 0;
  std::int64_t prior = 0;
  for (std::int64_t c : {1024, 1024, 952}) {
    models::StepBatch b;
    b.prefill_seqs = 1;
    b.prefill_tokens = c;
    b.prefill_attention_pairs = double(c) * double(prior) + double(c) * double(c + 1) / 2;
    expect += cost.seconds(b) + 0.0015;
    prior += c;
  }
  // Second token: one decode step over a context of 3001.
  models::StepBatch d;
  d.decode_seqs = 1;
  d.decode_context_tokens = 3001;
  const double second = expect + cost.seconds(d) + 0.0015;
  EngineRun r;
  r.sink.keep = true;
  run(r, closed(1, 1, 3000, 5), 1000, cfg);
  ASSERT_EQ(r.sink.all.size(), 1u);
  EXPECT_NEAR(r.sink.all[0].first_token_s, expect, 1e-12);
  EXPECT_NEAR(r.sink.all[0].second_token_s, second, 1e-12);
  EXPECT_EQ(r.stats[0].steps, 3 + 4);
}

TEST(Engine, NoChunkedPrefillWaitsForBudget) {
  // Without chunked prefill a 3000-token prompt never splits; with a 4096 budget two such
  // prompts cannot share a step, so the second one's TTFT is two prefill steps.
  EngineConfig cfg;
  cfg.enable_chunked_prefill = false;
  cfg.max_num_batched_tokens = 4096;
  EngineRun r;
  r.sink.keep = true;
  run(r, closed(2, 2, 3000, 2), 1000, cfg);
  ASSERT_EQ(r.sink.all.size(), 2u);
  EXPECT_GT(r.sink.all[1].first_token_s, 1.9 * r.sink.all[0].first_token_s);
}

TEST(Engine, RoutersSpreadLoad) {
  for (RouterPolicy p : {RouterPolicy::round_robin, RouterPolicy::least_outstanding, RouterPolicy::least_kv_load}) {
    LinearCost cost;
    ClusterShape shape;
    shape.replicas = 4;
    shape.kv_blocks = 50000;
    shape.router = p;
    AggregatedCluster c(shape, EngineConfig{}, cost);
    Collect sink;
    auto w = workloads::make_workload(closed(32, 400, 500, 50));
    c.run(*w, sink);
    EXPECT_EQ(sink.finished, 400);
    for (const auto& wk : c.workers()) EXPECT_GT(wk.stats().steps, 0) << to_string(p);
  }
}

// The calibrated models end to end: the acceptance scenario, Little's law and determinism.
Scenario small_scenario(int concurrency, std::int64_t requests) {
  auto j = default_scenario_json();
  j["workload"] = {{"concurrency", concurrency}, {"requests", requests}, {"isl", 2000}, {"osl", 200}, {"warmup_requests", 2 * concurrency}};
  return parse_scenario(j.dump(), "test");
}

TEST(Simulate, AcceptanceLittlesLaw) {
  const SimResult r = simulate(small_scenario(32, 6400));
  const double occupancy = r.summary.request_throughput_per_s * r.summary.request_latency_ms.avg / 1e3;
  EXPECT_NEAR(occupancy, 32.0, 0.32);
}

TEST(Simulate, SameSeedSameBytesAnyThreadCount) {
  Scenario s = small_scenario(8, 200);
  SweepSpec spec;
  spec.values = {1, 4, 8, 16};
  const auto one = sweep(s, spec, 1), two = sweep(s, spec, 2), four = sweep(s, spec, 4);
  const std::string a = to_json(sweep_columns(spec, one, s.gpus)).dump();
  EXPECT_EQ(a, to_json(sweep_columns(spec, two, s.gpus)).dump());
  EXPECT_EQ(a, to_json(sweep_columns(spec, four, s.gpus)).dump());
  for (std::size_t i = 0; i < one.size(); ++i)
    EXPECT_EQ(one[i].metrics.aiperf_json().dump(), four[i].metrics.aiperf_json().dump());
  EXPECT_EQ(simulate(s).metrics.aiperf_json().dump(), simulate(s).metrics.aiperf_json().dump());
}

TEST(Simulate, ImpossibleConfigurationsNameTheField) {
  auto field_of = [](auto mutate) {
    auto j = default_scenario_json();
    mutate(j);
    try {
      const Scenario s = parse_scenario(j.dump(), "s.json");
      prepare(s);
    } catch (const Error& e) {
      EXPECT_EQ(e.where(), "s.json") << e.what();
      return e.field();
    }
    return std::string("(no error)");
  };
  EXPECT_EQ(field_of([](auto& j) { j["gpus"] = 0; }), "gpus");
  EXPECT_EQ(field_of([](auto& j) { j["gpus"] = 12; }), "gpus");
  EXPECT_EQ(field_of([](auto& j) { j["tensor_parallel_size"] = 3; j["gpus"] = 3; }), "tensor_parallel_size");
  EXPECT_EQ(field_of([](auto& j) { j["gpus"] = 1; j["tensor_parallel_size"] = 1; j["precision"] = "bf16"; }), "model");
  EXPECT_EQ(field_of([](auto& j) { j["engine"]["gpu_memory_utilization"] = 1.5; }), "engine.gpu_memory_utilization");
  EXPECT_EQ(field_of([](auto& j) { j["engine"]["max_num_sqs"] = 1; }), "engine.max_num_sqs");
  EXPECT_NE(field_of([](auto& j) { j["workload"]["osl"] = 0; }), "(no error)");
  EXPECT_NE(field_of([](auto& j) { j["workload"].erase("concurrency"); j["workload"]["request_rate"] = -1; }), "(no error)");
  EXPECT_EQ(field_of([](auto& j) { j["router"] = "random"; }), "router");
}

// A scenario without "precision" runs the checkpoint's weights, as every subcommand does: the MXFP4
// gpt-oss checkpoint (about 61 GiB of weights) fits one B200 only at MXFP4, its BF16 weights
// (about 218 GiB) do not.
TEST(Simulate, ScenarioWithoutPrecisionRunsTheCheckpoint) {
  auto j = default_scenario_json();
  j.erase("precision");
  j.erase("kv_cache_dtype");
  j["model"] = "gpt-oss-120b";
  j["gpu"] = "b200";
  j["gpus"] = 1;
  j["tensor_parallel_size"] = 1;
  const Scenario s = parse_scenario(j.dump(), "s.json");
  EXPECT_EQ(s.precision, hw::Precision::mxfp4);
  EXPECT_NO_THROW(prepare(s));
  j["precision"] = "auto";
  EXPECT_EQ(parse_scenario(j.dump(), "s.json").precision, hw::Precision::mxfp4);
  j["precision"] = "bf16";
  EXPECT_EQ(parse_scenario(j.dump(), "s.json").precision, hw::Precision::bf16);
  j["precision"] = "fp7";
  EXPECT_THROW(parse_scenario(j.dump(), "s.json"), Error);
}

}  // namespace
}  // namespace servesim::sim
