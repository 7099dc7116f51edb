// Engine profiles and the engine-core loop against hand-checkable facts: vLLM's capture-size
// list, defaults by GPU class, all-reduce switch points, the one-step delay of async scheduling,
// the seat a finished request holds one step longer, aiperf's warm-up barrier and exclusion count,
// Little's law through the API-server path, the closed-loop cohort detector, the first visible
// token after a response preamble, the profile's spread of fixed answer lengths, and a re-send
// later than a decode step keeping a synchronous closed loop's round together.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "common/error.hpp"
#include "sim/engine/cluster.hpp"
#include "tests/sim/flat_cost.hpp"
#include "sim/engine/engine_profile.hpp"
#include "sim/metrics.hpp"
#include "sim/engine/metrics_sink.hpp"
#include "sim/simulate.hpp"
#include "workloads/workload.hpp"

namespace servesim::sim {
namespace {

using testing::FlatCost;   // 10 ms of GPU per step

struct Keep : RequestSink {
  std::vector<Request> all;
  MetricsCollector m;
  void on_finished(const Request& r) override {
    all.push_back(r);
    m.add(RequestRecord{r.id, r.sent_s, r.first_token_s, r.second_token_s, r.finish_s, r.input_tokens, r.generated, r.warmup});
  }
  const Request& by_id(std::uint64_t id) const {
    return *std::find_if(all.begin(), all.end(), [&](const Request& r) { return r.id == id; });
  }
};

EngineConfig engine(bool async) {
  EngineConfig c;
  c.step_overhead_s = 0.001;
  c.async_scheduling = async;
  c.max_num_seqs = 64;
  return c;
}

// Requests of 10 prompt and 100 answer tokens reaching the engine at `arrivals_ms`, on 10 ms steps.
std::vector<Request> run_flat(const EngineConfig& cfg, std::vector<double> arrivals_ms, std::int64_t kv_blocks = 10000) {
  FlatCost cost;
  ClusterShape shape;
  shape.kv_blocks = kv_blocks;
  AggregatedCluster c(shape, cfg, cost);
  workloads::WorkloadConfig w;
  w.arrival = workloads::Arrival::schedule;
  w.schedule_ms = std::make_shared<const std::vector<double>>(std::move(arrivals_ms));
  w.requests = 0;
  w.isl = workloads::LengthDist::fixed_at(10);
  w.osl = workloads::LengthDist::fixed_at(100);
  auto workload = workloads::make_workload(w);
  Keep k;
  c.run(*workload, k);
  return k.all;
}

// Request 0 at t = 0; request 1 reaches the engine at 25.5 ms, while step 3 runs.
std::vector<Request> two_requests(bool async) { return run_flat(engine(async), {0.0, 25.5}); }

TEST(EngineProfile, CaptureSizesAsVllmListsThem) {
  const EngineProfile& p = engine_profile("vllm");
  // serve on an H200: max_num_seqs 1024 -> min(1024 * 2, 512) = 512: [1,2,4] + 8..248 step 8 + 256..512 step 16.
  const auto s = p.capture_sizes(1024, 0, 8192, false);
  EXPECT_EQ(s.size(), 51u);
  EXPECT_EQ(s.front(), 1);
  EXPECT_EQ(s[3], 8);
  EXPECT_EQ(s[33], 248);
  EXPECT_EQ(s[34], 256);
  EXPECT_EQ(s[35], 272);
  EXPECT_EQ(s.back(), 512);
  // max_num_seqs 64: max = 128 -> [1,2,4] + 8..128 step 8 = 19 sizes.
  EXPECT_EQ(p.capture_sizes(64, 0, 8192, false).size(), 19u);
  EXPECT_EQ(p.capture_sizes(64, 0, 8192, false).back(), 128);
  // MTP K = 1 doubles the tokens per sequence: 64 * 2 * 2 = 256.
  EXPECT_EQ(p.capture_sizes(64, 1, 8192, false).back(), 256);
  // Capped by max_num_batched_tokens; none with enforce_eager.
  EXPECT_EQ(p.capture_sizes(1024, 0, 300, false).back(), 288);
  EXPECT_TRUE(p.capture_sizes(1024, 0, 8192, true).empty());
  // vLLM 0.11 steps by 8 all the way: 3 + 31 + 33 = 67 sizes.
  EXPECT_EQ(engine_profile("vllm-0.11").capture_sizes(1024, 0, 8192, false).size(), 67u);
}

TEST(EngineProfile, DefaultsByGpuClassAndModelKind) {
  const EngineProfile& p = engine_profile("vllm");
  const auto& cat = hw::Catalog::global();
  EXPECT_EQ(p.gpu_class(cat.gpu("H200")).max_num_seqs, 1024);
  EXPECT_EQ(p.gpu_class(cat.gpu("H100")).max_num_batched_tokens, 8192);
  hw::GpuSpec small = cat.gpu("H100");
  small.hbm_usable_bytes = 48.0 * (1ULL << 30);
  EXPECT_EQ(p.gpu_class(small).max_num_seqs, 256);
  EXPECT_EQ(p.gpu_class(small).max_num_batched_tokens, 2048);
  hw::GpuSpec a100 = cat.gpu("H100");
  a100.name = "A100-SXM4-80GB";
  EXPECT_EQ(p.gpu_class(a100).max_num_batched_tokens, 2048);
  // Unset knobs come from the profile; prefix caching is off for hybrids; given knobs stay.
  EngineConfig c;
  apply_profile(p, models::model("nemotron-3-super"), cat.gpu("H200"), nlohmann::json::object(), c);
  EXPECT_EQ(c.max_num_seqs, 1024);
  EXPECT_FALSE(c.enable_prefix_caching);
  EXPECT_TRUE(c.async_scheduling);
  EXPECT_EQ(c.max_cudagraph_capture_size, 512);
  EXPECT_EQ(c.cudagraph_capture_sizes.size(), 51u);
  EngineConfig d;
  d.max_num_seqs = 32;
  apply_profile(p, models::model("llama-3.1-70b"), cat.gpu("H200"), nlohmann::json{{"max_num_seqs", 32}}, d);
  EXPECT_EQ(d.max_num_seqs, 32);
  EXPECT_TRUE(d.enable_prefix_caching);
  EXPECT_EQ(d.max_cudagraph_capture_size, 64);   // 32 * 2
  EngineConfig old;
  apply_profile(engine_profile("vllm-0.12"), models::model("llama-3.1-70b"), cat.gpu("H200"), nlohmann::json::object(), old);
  EXPECT_FALSE(old.async_scheduling);
}

TEST(EngineProfile, VersionsResolveToTheNewestAtOrBelow) {
  EXPECT_EQ(engine_profile("vllm").name, engine_profile_names().back());
  EXPECT_EQ(engine_profile("vllm-0.16").name, "vllm-0.14");
  EXPECT_EQ(engine_profile("VLLM-0.12").name, "vllm-0.12");
  EXPECT_EQ(engine_profile("vllm-0.12.0").name, "vllm-0.12");
  EXPECT_THROW(engine_profile("vllm-0.10"), Error);
  EXPECT_EQ(engine_profile("sglang-0.5.9").name, "sglang-0.5.6");
  EXPECT_EQ(engine_profile("sglang-0.5.1.post1").name, "sglang-0.5");
  EXPECT_THROW(engine_profile("sglang-0.4"), Error);   // older than every SGLang profile
  EXPECT_THROW(engine_profile("tgi"), Error);
}

TEST(EngineProfile, AllReduceSwitchPointsByGpuAndTp) {
  const EngineProfile& p = engine_profile("vllm");
  const auto& cat = hw::Catalog::global();
  const auto& h200 = cat.gpu("H200");
  const double KiB = 1024, MiB = 1024 * KiB;
  // H100/H200 TP8: custom one-stage below 256 KiB (the symm-mem cap), then multimem to 64 MiB, then NCCL.
  EXPECT_EQ(p.all_reduce_for(h200, 8, 100 * KiB), AllReduceImpl::custom_one_stage);
  EXPECT_EQ(p.all_reduce_for(h200, 8, 300 * KiB), AllReduceImpl::symm_mem_multimem);
  EXPECT_EQ(p.all_reduce_for(h200, 8, 100 * MiB), AllReduceImpl::nccl);
  // TP2, hidden 4096 bf16 = 8 KiB per token: < 1024 tokens custom; 1024..8192 tokens symm-mem two-shot.
  EXPECT_EQ(p.all_reduce_for(h200, 2, 1023 * 8 * KiB), AllReduceImpl::custom_one_stage);
  EXPECT_EQ(p.all_reduce_for(h200, 2, 1024 * 8 * KiB), AllReduceImpl::symm_mem_two_shot);
  EXPECT_EQ(p.all_reduce_for(h200, 2, 8192 * 8 * KiB), AllReduceImpl::symm_mem_two_shot);
  EXPECT_EQ(p.all_reduce_for(h200, 2, 8193 * 8 * KiB), AllReduceImpl::nccl);
  // B200 TP2: < 256 tokens custom, <= 1024 tokens symm-mem, above NCCL.
  const auto& b200 = cat.gpu("B200");
  EXPECT_EQ(p.all_reduce_for(b200, 2, 255 * 8 * KiB), AllReduceImpl::custom_one_stage);
  EXPECT_EQ(p.all_reduce_for(b200, 2, 1024 * 8 * KiB), AllReduceImpl::symm_mem_two_shot);
  EXPECT_EQ(p.all_reduce_for(b200, 2, 1025 * 8 * KiB), AllReduceImpl::nccl);
  const auto sw = p.all_reduce_switch_points(h200, 8);
  ASSERT_EQ(sw.size(), 3u);
  EXPECT_EQ(sw[0].first, 256 * KiB);
  EXPECT_EQ(sw[1].first, 64 * MiB + 1);
}

TEST(EngineLoop, AsyncSchedulingJoinsOneStepLater) {
  // Sync: steps of 1 ms CPU + 10 ms GPU back to back: 0-11, 11-22, 22-33 (request 1 arrives at
  // 25.5), so it prefills in step 4 (33-44) and sees its first token at 44 ms.
  const auto sync = two_requests(false);
  EXPECT_NEAR(sync[0].id == 1 ? sync[0].first_token_s : sync[1].first_token_s, 0.044, 1e-12);
  // Async: batch k+1 is formed while batch k runs, so the CPU hides behind the GPU: 0-11, 11-21,
  // 21-31, 31-41, 41-51. Batch 4 was formed at 21 ms (before the arrival), so request 1 joins
  // batch 5 and sees its first token at 51 ms: one step later than synchronous scheduling.
  const auto as = two_requests(true);
  const Request& r1 = as[0].id == 1 ? as[0] : as[1];
  const Request& r0 = as[0].id == 0 ? as[0] : as[1];
  EXPECT_NEAR(r1.first_token_s, 0.051, 1e-12);
  EXPECT_NEAR(r0.first_token_s, 0.011, 1e-12);
  // Request 0's 100 tokens: its first at 11 ms, then one per 10 ms step.
  EXPECT_NEAR(r0.finish_s, 0.011 + 99 * 0.010, 1e-9);
}

// The engine core's host time per step is step_cpu_ms + step_cpu_us_per_seq x scheduled requests
// (the profiles: 2 ms + 40 us, fitted on the calibration CSV). With N requests decoding together,
// by hand: synchronous scheduling puts it before every 10 ms GPU step (1 + 0.04 N + 10 ms per
// token); async scheduling hides it behind the GPU step until it is the longer of the two.
TEST(EngineLoop, HostTimePerRequestSetsTheStepWhenItIsOnTheCriticalPath) {
  EXPECT_DOUBLE_EQ(engine_profile("vllm").host.step_cpu_per_seq_s, 10e-6);
  EXPECT_DOUBLE_EQ(engine_profile("vllm-0.12").host.step_cpu_per_seq_s, 10e-6);
  auto itl = [](bool async, int n) {
    EngineConfig cfg = engine(async);
    cfg.max_num_seqs = 1024;
    cfg.step_overhead_per_seq_s = 40e-6;
    const Request r = run_flat(cfg, std::vector<double>(size_t(n), 0.0), 100000).front();
    return (r.finish_s - r.first_token_s) / 99;
  };
  EXPECT_NEAR(itl(false, 50), 0.001 + 50 * 40e-6 + 0.010, 1e-9);   // 13 ms
  EXPECT_NEAR(itl(true, 50), 0.010, 1e-9);                          // 3 ms of host under 10 of GPU
  EXPECT_NEAR(itl(true, 300), 0.001 + 300 * 40e-6, 1e-9);           // 13 ms of host: the host sets the pace
}

TEST(EngineLoop, AsyncFinishedRequestHoldsItsSeatOneStepLonger) {
  // One seat (max_num_seqs 1); request 0 (1 answer token... 3 tokens) then request 1 waiting from t = 0.
  auto run = [](bool async) {
    FlatCost cost;
    ClusterShape shape;
    shape.kv_blocks = 10000;
    EngineConfig cfg = engine(async);
    cfg.max_num_seqs = 1;
    cfg.max_num_batched_tokens = 64;
    AggregatedCluster c(shape, cfg, cost);
    workloads::WorkloadConfig w;
    w.arrival = workloads::Arrival::schedule;
    w.schedule_ms = std::make_shared<const std::vector<double>>(std::vector<double>{0.0, 0.0});
    w.requests = 0;
    w.isl = workloads::LengthDist::fixed_at(10);
    w.osl = workloads::LengthDist::fixed_at(3);
    auto workload = workloads::make_workload(w);
    Keep k;
    c.run(*workload, k);
    return k.by_id(1).first_token_s;
  };
  // Sync: request 0 runs steps 1-3 (0-11, 11-22, 22-33); request 1 prefills in step 4: 44 ms.
  EXPECT_NEAR(run(false), 0.044, 1e-12);
  // Async: steps 0-11, 11-21, 21-31 for request 0; batch 4 is formed while batch 3 runs, when
  // request 0 still holds the seat, so it is empty; the loop then applies batch 3 and schedules
  // request 1 at 31 ms: 1 ms CPU + 10 ms GPU -> 42 ms.
  EXPECT_NEAR(run(true), 0.042, 1e-12);
}

// gpt-oss answers in the harmony format: <|channel|>analysis<|message|> (3 tokens) stream no
// text, so a client's first token is the 4th sampled. One request of 10 + 100 tokens on 10 ms
// steps with async scheduling (1 ms of host hidden after the first step): tokens at 11, 21, 31,
// 41, 51 ... 1001 ms; the client sees its first text at 41 ms and its second at 51, counts the 97
// visible tokens, and its ITL is (1001 - 41) / 96 = 10 ms, the step.
TEST(EngineLoop, ResponsePreambleDelaysTheFirstVisibleToken) {
  EXPECT_EQ(models::model("gpt-oss-120b").response.preamble_tokens, 3);
  EXPECT_EQ(models::model("gpt-oss-120b").response.name, "harmony");
  EXPECT_EQ(models::model("llama-3.1-70b").response.preamble_tokens, 0);
  auto run = [](int preamble) {
    FlatCost cost;
    ClusterShape shape;
    shape.kv_blocks = 10000;
    EngineConfig cfg = engine(true);
    cfg.response_preamble_tokens = preamble;
    AggregatedCluster c(shape, cfg, cost);
    workloads::WorkloadConfig w;
    w.arrival = workloads::Arrival::schedule;
    w.schedule_ms = std::make_shared<const std::vector<double>>(std::vector<double>{0.0});
    w.requests = 0;
    w.isl = workloads::LengthDist::fixed_at(10);
    w.osl = workloads::LengthDist::fixed_at(100);
    auto workload = workloads::make_workload(w);
    MetricsCollector m;
    MetricsSink sink(m);
    c.run(*workload, sink);
    return m.summary();
  };
  const Summary harmony = run(3);
  EXPECT_NEAR(harmony.ttft_ms.avg, 41.0, 1e-9);
  EXPECT_NEAR(harmony.ttst_ms.avg, 10.0, 1e-9);
  EXPECT_NEAR(harmony.itl_ms.avg, 10.0, 1e-9);
  EXPECT_EQ(harmony.total_output_tokens, 97);
  EXPECT_NEAR(harmony.request_latency_ms.avg, 1001.0, 1e-9);
  const Summary plain = run(0);
  EXPECT_NEAR(plain.ttft_ms.avg, 11.0, 1e-9);
  EXPECT_EQ(plain.total_output_tokens, 100);
  EXPECT_NEAR(plain.request_latency_ms.avg, 1001.0, 1e-9);
  // The scenario path takes it from the model.
  nlohmann::json j = {{"model", "gpt-oss-120b"}, {"gpu", "h200"}, {"gpus", 1}, {"tp", 1},
                      {"workload", {{"concurrency", 1}, {"requests", 2}, {"isl", 100}, {"osl", 20}}}};
  EXPECT_EQ(prepare(parse_scenario(j.dump(), "test")).engine.response_preamble_tokens, 3);
}

workloads::WorkloadConfig closed(int clients, std::int64_t requests, std::int64_t warmup) {
  workloads::WorkloadConfig w;
  w.arrival = workloads::Arrival::concurrency;
  w.concurrency = clients;
  w.requests = requests;
  w.warmup_requests = warmup;
  w.isl = workloads::LengthDist::fixed_at(200);
  w.osl = workloads::LengthDist::fixed_at(20);
  w.seed = 5;
  return w;
}

TEST(ClosedLoop, WarmupBarrierAndExclusionCount) {
  FlatCost cost;
  ClusterShape shape;
  shape.kv_blocks = 100000;
  workloads::FrontendConfig f;   // priors
  AggregatedCluster c(shape, engine(true), cost, &f);
  auto workload = workloads::make_workload(closed(4, 40, 8));   // aiperf: warm-up = 2 x concurrency
  Keep k;
  c.run(*workload, k);
  EXPECT_EQ(c.warmup_completed(), 8);
  const Summary s = k.m.summary();
  EXPECT_EQ(s.request_count, 40);
  EXPECT_EQ(s.warmup_request_count, 8);
  // The measured phase starts when the last warm-up response is back, all four clients at once.
  double last_warm = 0, first_sent = INFINITY;
  for (const auto& r : k.all) {
    if (r.warmup) last_warm = std::max(last_warm, r.finish_s);
    else first_sent = std::min(first_sent, r.sent_s);
  }
  int at_start = 0;
  for (const auto& r : k.all) at_start += !r.warmup && r.sent_s == last_warm;
  EXPECT_EQ(first_sent, last_warm);
  EXPECT_EQ(at_start, 4);
}

TEST(ClosedLoop, LittlesLawThroughTheApiServer) {
  FlatCost cost;
  ClusterShape shape;
  shape.kv_blocks = 100000;
  workloads::FrontendConfig f;
  f.api.request.mean_s = 0.002;   // a visible API path
  AggregatedCluster c(shape, engine(true), cost, &f);
  auto workload = workloads::make_workload(closed(8, 800, 16));
  Keep k;
  c.run(*workload, k);
  const Summary s = k.m.summary();
  // Every client has exactly one request between its send and its last token: X * W = N.
  EXPECT_NEAR(s.request_throughput_per_s * s.request_latency_ms.avg / 1e3, 8.0, 8.0 * 0.02);
  // The API path sits inside TTFT: at least the request handling + IPC + network both ways.
  EXPECT_GT(s.ttft_ms.min, 2.0 + 0.1 + 0.1);
}

// The disaggregated path's terms come from the engine profile (vLLM 0.19: 200 ms, cv 0.2, and 12 us per
// prompt token, fitted), a scenario's "frontend.disaggregation" overrides them, a profile without the
// section has none, and an unknown field is refused with its name.
TEST(ClosedLoop, DisaggregatedPathFromTheProfileOrTheScenario) {
  nlohmann::json j = {{"model", "llama-3.1-70b"}, {"gpu", "h200"}, {"engine_profile", "vllm-0.19"},
                      {"workload", {{"concurrency", 4}, {"isl", 1024}, {"osl", 128}}}};
  const workloads::FrontendConfig p = resolved_frontend(parse_scenario(j.dump(), "test"));
  EXPECT_DOUBLE_EQ(p.disagg.handoff.mean_s, 0.2);
  EXPECT_DOUBLE_EQ(p.disagg.handoff.cv, 0.2);
  EXPECT_DOUBLE_EQ(p.disagg.pull_s_per_token, 12e-6);
  j["frontend"] = {{"disaggregation", {{"handoff_ms", 50}}}};
  const workloads::FrontendConfig s = resolved_frontend(parse_scenario(j.dump(), "test"));
  EXPECT_DOUBLE_EQ(s.disagg.handoff.mean_s, 0.05);
  EXPECT_DOUBLE_EQ(s.disagg.handoff.cv, 0.0);
  EXPECT_DOUBLE_EQ(s.disagg.pull_s_per_token, 12e-6);
  j.erase("frontend");
  j["engine_profile"] = "vllm-0.12";
  EXPECT_DOUBLE_EQ(resolved_frontend(parse_scenario(j.dump(), "test")).disagg.handoff.mean_s, 0.0);
  j["frontend"] = {{"disaggregation", {{"handoff", 50}}}};
  try {
    resolved_frontend(parse_scenario(j.dump(), "test"));
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("handoff"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("unknown field"), std::string::npos) << e.what();
  }
}

Scenario cohort_scenario(bool frontend) {
  nlohmann::json j = {{"model", "llama-3.1-70b"}, {"gpu", "h200"}, {"gpus", 8}, {"tp", 8}, {"precision", "fp8"},
                      {"engine_profile", "vllm-0.12"},
                      {"workload", {{"concurrency", 8}, {"requests", 40}, {"isl", 1024}, {"osl", 128}, {"seed", 1}}}};
  if (!frontend) j["frontend"] = {{"enabled", false}};
  return parse_scenario(j.dump(), "test");
}

TEST(ClosedLoop, CohortDetectorSeesTheLockAndItsBreakup) {
  // Without a frontend the eight clients move in lockstep: every prefill step holds all eight
  // prompts, released by the same step end, and every request has the same TTFT.
  const SimResult locked = simulate(cohort_scenario(false));
  EXPECT_TRUE(locked.cohort_locked());
  EXPECT_NEAR(locked.cohort_fraction(), 1.0, 1e-12);
  EXPECT_NEAR(locked.summary.ttft_ms.min, locked.summary.ttft_ms.max, 1e-6);
  // Through the API server (FIFO tokenisation) a released cohort reaches the engine staggered: the
  // first request prefills alone, those arriving during that step share the next one.
  const SimResult real = simulate(cohort_scenario(true));
  EXPECT_LT(real.cohort_fraction(), 1.0);
  EXPECT_LT(real.summary.ttft_ms.min, 0.5 * locked.summary.ttft_ms.min);
}

// P: the GPU time of one step that prefills one prompt of `isl` tokens and nothing else.
double prefill_alone_ms(const Scenario& s, int isl) {
  const Prepared prep = prepare(s);
  models::StepBatch one;
  one.prefill_seqs = 1;
  one.prefill_tokens = isl;
  one.prefill_attention_pairs = double(isl) * double(isl + 1) / 2;
  return prep.cost->seconds(one) * 1e3;
}

// Fixed lengths on vLLM 0.19 (`spread`: the profile's own spread of the answer lengths; else
// engine.closed_loop_osl_spread_tokens 0 keeps them fixed).
Scenario train_scenario(bool spread) {
  nlohmann::json j = {{"model", "llama-3.1-70b"}, {"gpu", "h200"}, {"gpus", 8}, {"tp", 8}, {"precision", "fp8"},
                      {"engine_profile", "vllm-0.19"},
                      {"workload", {{"concurrency", 4}, {"requests", 80}, {"warmup_requests", 8}, {"isl", 8192}, {"osl", 256},
                                    {"seed", 1}}}};
  if (!spread) j["engine"] = {{"closed_loop_osl_spread_tokens", 0}};
  return parse_scenario(j.dump(), "test");
}

TEST(ClosedLoop, OutputLengthSpreadBreaksThePrefillTrain) {
  // Four clients with fixed lengths: the first prompts prefill one step after another, every
  // request then decodes in the same steps, so answers end one decode step apart and each next
  // prompt queues behind the previous one's 8192-token prefill, round after round (a "train").
  // With async scheduling an arrival also waits for the step already scheduled, so the mean TTFT
  // is own prefill + about 1.5 others' (C - 1 = 3 others, half of them ahead on average): > 2.2 P.
  const Scenario fixed = train_scenario(false);
  const double P_ms = prefill_alone_ms(fixed, 8192);
  const SimResult train = simulate(fixed);
  EXPECT_GT(train.summary.ttft_ms.avg, 2.2 * P_ms);
  // Every round the first of the four prompts arrives while only decodes run and the other three
  // arrive while the one before them prefills: 3 of 4 waited behind a prefill, far more than the
  // share of time a prefill runs. The clients are not released together (no cohort lock).
  EXPECT_NEAR(train.behind_prefill_fraction(), 0.75, 0.02);
  EXPECT_LT(train.prefill_duty(), 0.375);
  EXPECT_TRUE(train.prefill_train());
  EXPECT_FALSE(train.cohort_locked());
  // Output lengths that differ by a few tokens (the vllm-0.19 profile's sd: 6 x (4/16)^0.25 x
  // (256/1024)^0.25 = 3, of 256) move the re-sends by a few decode steps each round: prompts mostly
  // prefill alone, and the mean TTFT falls under 2 P.
  const SimResult spread = simulate(train_scenario(true));
  EXPECT_NEAR(spread.summary.output_sequence_length.avg, 256, 3);
  EXPECT_NEAR(spread.summary.output_sequence_length.std, 3, 1.0);   // 80 draws: 4 standard errors
  EXPECT_LT(spread.summary.ttft_ms.avg, 2.0 * P_ms);
  EXPECT_GT(spread.summary.ttft_ms.avg, P_ms);   // never below its own prefill
  EXPECT_LT(spread.behind_prefill_fraction(), 0.5);
  EXPECT_FALSE(spread.prefill_train());
  EXPECT_EQ(spread.prompts, 80);                 // measured prompts only (warm-up left out)
  // Open loop: no client re-sends, so no train to detect.
  nlohmann::json open = nlohmann::json::parse(fixed.json.dump());
  open["workload"].erase("concurrency");
  open["workload"]["request_rate"] = 2.0;
  const SimResult poisson = simulate(parse_scenario(open.dump(), "test"));
  EXPECT_EQ(poisson.prompts, 0);
  EXPECT_FALSE(poisson.prefill_train());
}



// Qwen3-32B on eight H100s (TP8) under the synchronous vLLM 0.12 loop, 8 clients of 4096 + 512
// fixed tokens and the AIConfigurator harness's budget (C + ISL + 1500 = 5604 tokens);
// `network_ms` one way between client and API server (the profile's prior: 0.1 ms).
Scenario resend_scenario(double network_ms) {
  nlohmann::json j = {{"model", "qwen3-32b"}, {"gpu", "h100"}, {"gpus", 8}, {"tp", 8}, {"precision", "bf16"},
                      {"engine_profile", "vllm-0.12"},
                      {"engine", {{"max_num_batched_tokens", 8 + 4096 + 1500}, {"max_model_len", 4096 + 512 + 1500}}},
                      {"frontend", {{"client", {{"network_ms", network_ms}}}}},
                      {"workload", {{"concurrency", 8}, {"requests", 80}, {"warmup_requests", 16}, {"isl", 4096}, {"osl", 512},
                                    {"seed", 1}}}};
  return parse_scenario(j.dump(), "test");
}

TEST(ClosedLoop, ResendLaterThanADecodeStepKeepsTheRoundTogether) {
  // On the synchronous loop the answers of a round end one decode step apart (about 9-10 ms here).
  // With the profile's host priors a re-sent prompt reaches the engine core about 5.5 ms after its
  // answer's last token (request 1 ms, tokenisation 1 us x 4096, IPC and network 0.1 ms): within
  // that step, so it prefills before the next answer ends and the prompts go one after another.
  // Each then spans two budget steps (its own 4096 tokens after the 1500-token tail of the one
  // before, then its own tail): about 2 P, and the warm-up barrier's first round, all eight queued
  // together, lifts the mean a little: under 2.6 P.
  const Scenario priors = resend_scenario(0.1);
  const double P_ms = prefill_alone_ms(priors, 4096);
  const SimResult train = simulate(priors);
  EXPECT_LT(train.summary.itl_ms.avg, 10.5);   // the decode step the re-send races
  EXPECT_GT(train.summary.ttft_ms.avg, 1.5 * P_ms);
  EXPECT_LT(train.summary.ttft_ms.avg, 2.6 * P_ms);
  // 10 ms each way puts the re-send 20 ms more behind its answer, longer than a decode step: the
  // answers after it end first and a round's prompts queue together. Eight prompts queued at once
  // in 5604-token steps finish after 1, 2, 3, 3, 4, 5, 6, 6 steps (the i-th after i x 4096
  // tokens): 3.75 steps of 5604 / 4096 = 1.37 P, about 5.1 P on average. The rounds stay mostly
  // together (the first re-sends of a round can get ahead), so the mean sits over 3.6 P and under
  // 5.2 P once the 20 ms of the hops themselves are taken off.
  const SimResult bunched = simulate(resend_scenario(10.0));
  EXPECT_GT(bunched.summary.ttft_ms.avg - 20.0, 3.6 * P_ms);
  EXPECT_LT(bunched.summary.ttft_ms.avg - 20.0, 5.2 * P_ms);
  // The same GPU work, queued differently: TPOT moves by a few % at most.
  EXPECT_NEAR(bunched.summary.itl_ms.avg / train.summary.itl_ms.avg, 1.0, 0.05);
}

TEST(ClosedLoop, DatasetRepeatsHitThePrefixCache) {
  // aiperf's dataset of 4 prompts, 12 requests from 2 clients: requests 4..11 re-send a prompt
  // whose blocks a finished request left in the cache. vLLM never takes a full hit (the last
  // token is recomputed to sample from it), so each repeat of 1000 tokens hits
  // floor(999 / 16) = 62 blocks of 16 = 992 tokens: 8 x 992 of 12 x 1000 prompt tokens.
  auto scenario = [](bool dataset) {
    nlohmann::json j = {{"model", "llama-3.1-8b"}, {"gpu", "h200"}, {"gpus", 1}, {"tp", 1}, {"precision", "fp8"},
                        {"engine_profile", "vllm-0.19"},
                        {"engine", {{"enable_prefix_caching", true}, {"closed_loop_osl_spread_tokens", 0}}},
                        {"workload", {{"concurrency", 2}, {"requests", 12}, {"isl", 1000}, {"osl", 8}, {"seed", 1}}}};
    if (dataset) j["workload"]["dataset"] = {{"entries", 4}};
    return parse_scenario(j.dump(), "test");
  };
  const SimResult reuse = simulate(scenario(true));
  EXPECT_EQ(reuse.prompt_tokens, 12 * 1000);
  EXPECT_EQ(reuse.prompt_tokens_cached, 8 * 992);
  EXPECT_NEAR(reuse.prefix_hit_fraction(), 8.0 * 992 / 12000, 1e-12);
  // Distinct prompts (no dataset): nothing to hit, and every prompt pays its prefill.
  const SimResult fresh = simulate(scenario(false));
  EXPECT_EQ(fresh.prompt_tokens_cached, 0);
  EXPECT_LT(reuse.summary.ttft_ms.avg, fresh.summary.ttft_ms.avg);
}

// The vLLM 0.14 and 0.19 profiles give fixed answer lengths of a closed loop a normal spread of
// 6 x (C/16)^0.25 x (OSL/1024)^0.25 tokens (sd); the synchronous 0.12 profile, an explicit 0, open
// loops and traces keep them.
TEST(ClosedLoop, EngineProfileSpreadsFixedAnswerLengths) {
  for (const char* v : {"vllm-0.19", "vllm-0.14"}) {
    EXPECT_DOUBLE_EQ(engine_profile(v).closed_loop_osl_spread_tokens, 6);
    EXPECT_DOUBLE_EQ(engine_profile(v).closed_loop_osl_spread_load_exponent, 0.25);
    EXPECT_DOUBLE_EQ(engine_profile(v).closed_loop_osl_spread_length_exponent, 0.25);
  }
  EXPECT_DOUBLE_EQ(engine_profile("vllm-0.12").closed_loop_osl_spread_tokens, 0);
  // The law by hand: 4x the clients and 4x the answer each scale the sd by 4^0.25 = sqrt(2).
  EngineConfig law;
  law.closed_loop_osl_spread_tokens = 6;
  law.closed_loop_osl_spread_load_exponent = law.closed_loop_osl_spread_length_exponent = 0.25;
  EXPECT_NEAR(closed_loop_osl_sd(law, 16, 1024), 6, 1e-12);
  EXPECT_NEAR(closed_loop_osl_sd(law, 64, 4096), 12, 1e-12);
  EXPECT_NEAR(closed_loop_osl_sd(law, 4, 256), 3, 1e-12);
  law.closed_loop_osl_spread_tokens = 0;
  EXPECT_EQ(closed_loop_osl_sd(law, 64, 4096), 0);
  auto run = [](const char* profile, nlohmann::json engine, bool open) {
    nlohmann::json j = {{"model", "llama-3.1-8b"}, {"gpu", "h200"}, {"gpus", 1}, {"tp", 1}, {"precision", "fp8"},
                        {"engine_profile", profile},
                        {"workload", {{"concurrency", 4}, {"requests", 400}, {"isl", 128}, {"osl", 256}, {"seed", 3}}}};
    if (!engine.is_null()) j["engine"] = engine;
    if (open) {
      j["workload"].erase("concurrency");
      j["workload"]["request_rate"] = 5.0;
    }
    return simulate(parse_scenario(j.dump(), "test")).summary.output_sequence_length;
  };
  // 4 clients, 256-token answers: sd 6 x (1/4)^0.25 x (1/4)^0.25 = 3. 400 draws of N(256, 3): the
  // sample mean within 4 standard errors (0.15 each), the sample sd within 4 of its standard errors
  // (3 / sqrt(800) = 0.11; whole-token lengths add 1/12 to the variance).
  const Stats spread = run("vllm-0.19", nullptr, false);
  EXPECT_NEAR(spread.avg, 256, 0.6);
  EXPECT_NEAR(spread.std, 3, 0.45);
  // A scenario's constant sd: no exponents, 8 tokens at any load.
  const Stats constant = run("vllm-0.19", {{"closed_loop_osl_spread_tokens", 8}, {"closed_loop_osl_spread_load_exponent", 0},
                                           {"closed_loop_osl_spread_length_exponent", 0}}, false);
  EXPECT_NEAR(constant.std, 8, 1.2);
  for (const Stats& fixed : {run("vllm-0.12", nullptr, false), run("vllm-0.19", {{"closed_loop_osl_spread_tokens", 0}}, false),
                             run("vllm-0.19", nullptr, true)}) {
    EXPECT_EQ(fixed.min, 256);
    EXPECT_EQ(fixed.max, 256);
  }
  nlohmann::json bad = {{"model", "llama-3.1-8b"}, {"engine", {{"closed_loop_osl_spread_tokens", -1}}},
                        {"workload", {{"concurrency", 1}, {"isl", 1}, {"osl", 1}}}};
  EXPECT_THROW(parse_scenario(bad.dump(), "test"), Error);
  bad["engine"] = {{"closed_loop_osl_spread_load_exponent", 3}};
  EXPECT_THROW(parse_scenario(bad.dump(), "test"), Error);
}

}  // namespace
}  // namespace servesim::sim
