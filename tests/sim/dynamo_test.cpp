// KV-aware routing and multi-turn sessions: figures checked by hand (block arithmetic of the
// prefix cache, and TTFT differences against the step-cost model's prefill times).
#include <gtest/gtest.h>

#include <cmath>

#include "common/error.hpp"
#include "sim/simulate.hpp"
#include "sim/topology/deployment.hpp"

namespace servesim::sim {
namespace {

// One session of 6 turns on 2 replicas of Llama-3.1-8B, no frontend: turn k's prompt is
// P_k = 8000 + 1100 k tokens (history + 1000 new), its answer 100 tokens.
nlohmann::json one_session(const char* router) {
  return {{"model", "llama-3.1-8b"}, {"gpu", "h200"}, {"gpus", 2}, {"tp", 1}, {"precision", "fp8"},
          {"engine_profile", "vllm-0.19"}, {"router", router},
          {"engine", {{"enable_prefix_caching", true}, {"max_num_batched_tokens", 32768}}},
          {"frontend", {{"enabled", false}}},
          {"workload", {{"sessions", {{"count", 1}, {"turns", 6}, {"isl", 8000}, {"turn_isl", 1000}, {"osl", 100}}}, {"seed", 3}}}};
}

std::int64_t prompt(int k) { return 8000 + 1100 * k; }
// Tokens a finished turn leaves in the cache: its prompt + answer, in whole 64-token hash chunks
// (the session's content granularity), of which whole 16-token blocks are cached.
std::int64_t cached_after(int k) { return (prompt(k) + 100) / 64 * 64; }

TEST(Sessions, KvRoutingHitsTheWholeHistoryRoundRobinEveryOtherTurn) {
  const SimResult kv = simulate(parse_scenario(one_session("kv").dump(), "test"));
  const SimResult rr = simulate(parse_scenario(one_session("round_robin").dump(), "test"));
  // kv: every turn k >= 1 on the replica that holds turn k-1; round robin: turn k on replica k mod 2,
  // which holds turn k-2's history.
  std::int64_t want_kv = 0, want_rr = 0, prompts = 0;
  for (int k = 0; k < 6; ++k) {
    prompts += prompt(k);
    if (k >= 1) want_kv += cached_after(k - 1);
    if (k >= 2) want_rr += cached_after(k - 2);
  }
  EXPECT_EQ(kv.prompt_tokens, prompts);
  EXPECT_EQ(kv.prompt_tokens_cached, want_kv);
  EXPECT_EQ(rr.prompt_tokens_cached, want_rr);
  ASSERT_EQ(kv.turns.size(), 6u);
  ASSERT_EQ(rr.turns.size(), 6u);
  // Per replica: kv keeps the session on one replica; round robin splits its turns 3 / 3.
  EXPECT_TRUE(kv.workers[0].prompt_tokens == 0 || kv.workers[1].prompt_tokens == 0);
  EXPECT_EQ(rr.workers[0].prompt_tokens, prompt(0) + prompt(2) + prompt(4));
  // The router expected what the engine then hit.
  EXPECT_EQ(kv.routed_overlap_blocks * 16, want_kv);

  // TTFT: a lone prompt on an idle engine is one prefill step, so the TTFT saved on turn k is the
  // step-cost model's prefill time of the extra tokens round robin recomputes.
  const Prepared p = prepare(parse_scenario(one_session("kv").dump(), "test"));
  auto prefill_s = [&](std::int64_t tokens, std::int64_t cached) {
    models::StepBatch b;
    b.prefill_seqs = 1;
    b.prefill_tokens = tokens - cached;
    b.prefill_attention_pairs = double(tokens - cached) * double(cached) + double(tokens - cached) * double(tokens - cached + 1) / 2;
    return p.cost->seconds(b);
  };
  for (int k = 2; k < 6; ++k) {
    const double saved = 1e3 * (prefill_s(prompt(k), cached_after(k - 2)) - prefill_s(prompt(k), cached_after(k - 1)));
    const double got = rr.turns[static_cast<std::size_t>(k)].ttft_ms.p50 - kv.turns[static_cast<std::size_t>(k)].ttft_ms.p50;
    EXPECT_GT(saved, 5.0) << "turn " << k;
    EXPECT_NEAR(got, saved, 0.05 * saved) << "turn " << k;
  }
  EXPECT_GT(kv.prefix_hit_fraction(), rr.prefix_hit_fraction());
  EXPECT_LT(kv.summary.ttft_ms.avg, rr.summary.ttft_ms.avg);
}

TEST(Sessions, StaleKvEventsHideTheCacheFromTheRouter) {
  // KV events that reach the router a day late: it never sees a cached block, so it expects no
  // overlap and balances by load alone.
  nlohmann::json j = one_session("kv");
  j["router"] = {{"kind", "kv"}, {"kv_event_delay_ms", 8.64e7}};
  const SimResult stale = simulate(parse_scenario(j.dump(), "test"));
  EXPECT_EQ(stale.routed_overlap_blocks, 0);
  EXPECT_GT(stale.routed_blocks, 0);
}

TEST(Sessions, ManySessionsKvBeatsRoundRobinAndIsDeterministic) {
  auto run = [](const char* router) {
    nlohmann::json j = one_session(router);
    j["gpus"] = 4;
    j["workload"]["sessions"] = {{"count", 24}, {"turns", 5}, {"isl", 4000}, {"turn_isl", 500}, {"osl", 200},
                                 {"think_time_s", 1.0}, {"think_time", "exponential"},
                                 {"start_spread_s", 2.0}};
    return simulate(parse_scenario(j.dump(), "test"));
  };
  const SimResult kv = run("kv"), rr = run("round_robin"), kv2 = run("kv");
  EXPECT_EQ(kv.summary.request_count, 24 * 5);
  // Exponential think times scramble round robin's order (0.39 of prompt tokens hit); the KV router
  // hits 0.57 of them, of at most 0.78 (turn 0 never hits), trading the rest for balanced load.
  EXPECT_GT(kv.prefix_hit_fraction(), rr.prefix_hit_fraction() + 0.1);
  EXPECT_LT(kv.summary.ttft_ms.p50, rr.summary.ttft_ms.p50);
  EXPECT_EQ(kv.prompt_tokens_cached, kv2.prompt_tokens_cached);
  EXPECT_EQ(kv.summary.ttft_ms.avg, kv2.summary.ttft_ms.avg);
}

TEST(Sessions, BadInputIsOneClearError) {
  nlohmann::json j = one_session("kv");
  j["workload"]["sessions"]["turns"] = 0;
  EXPECT_THROW(parse_scenario(j.dump(), "test"), Error);
  j = one_session("kv");
  j["workload"]["concurrency"] = 4;
  try {
    parse_scenario(j.dump(), "test");
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("concurrency"), std::string::npos);
  }
  j = one_session("kv");
  j["router"] = {{"kind", "round_robin"}, {"overlap_score_weight", 2}};
  EXPECT_THROW(parse_scenario(j.dump(), "test"), Error);
}

}  // namespace
}  // namespace servesim::sim

namespace servesim::sim {
namespace {

// Llama-3.1-8B BF16 on one H200 at gpu_memory_utilization 0.2, one client sending prompts A, B, A
// (aiperf dataset of 2 entries), each 60 % of the KV pool: B evicts A's tail blocks, and the
// second A finds its head on the GPU and its tail in the host tier.
nlohmann::json offload_scenario(double util, bool offload) {
  nlohmann::json j = {{"model", "llama-3.1-8b"}, {"gpu", "h200"}, {"gpus", 1}, {"tp", 1}, {"precision", "bf16"},
                      {"engine_profile", "vllm-0.19"},
                      {"engine", {{"enable_prefix_caching", true}, {"gpu_memory_utilization", util},
                                  {"closed_loop_osl_spread_tokens", 0}}},
                      {"frontend", {{"enabled", false}}},
                      {"workload", {{"concurrency", 1}, {"requests", 3}, {"isl", 1}, {"osl", 4}, {"dataset", {{"entries", 2}}}}}};
  if (offload) j["kv_offload"] = {{"cpu_gib", 100}};
  return j;
}

TEST(KvOffload, OnboardingCostsBytesOverTheHostLinkPlusLatency) {
  const Prepared small = prepare(parse_scenario(offload_scenario(0.2, true).dump(), "test"));
  const std::int64_t isl = small.plan.num_kv_blocks * 16 * 6 / 10;
  auto run = [&](double util, bool offload) {
    nlohmann::json j = offload_scenario(util, offload);
    j["workload"]["isl"] = isl;
    return simulate(parse_scenario(j.dump(), "test"));
  };
  const SimResult tiers = run(0.2, true);
  const SimResult roomy = run(0.5, false);   // a pool that keeps both prompts: every hit on the GPU
  ASSERT_EQ(tiers.offload_stats.size(), 1u);
  const OffloadTierStats& cpu = tiers.offload_stats[0];
  // Per block: 16 tokens x 32 layers x 8 KV heads x 128 x 2 (K, V) x 2 bytes = 2 MiB.
  EXPECT_DOUBLE_EQ(small.plan.kv.bytes_per_block, 2.0 * 1024 * 1024);
  EXPECT_GT(cpu.hit_blocks, 100);
  EXPECT_EQ(cpu.transfers, 1);
  // Both runs hit the whole prompt but its last block's worth: floor((isl - 1) / 16) blocks.
  EXPECT_EQ(tiers.prompt_tokens_cached, (isl - 1) / 16 * 16);   // the repeat's: GPU head + host tail
  EXPECT_EQ(roomy.prompt_tokens_cached, tiers.prompt_tokens_cached);
  // One transfer: 18.4 us + blocks x 2 MiB / 55.0 GB/s (the H200's measured PCIe Gen5 copy).
  const double want = 18.4e-6 + double(cpu.hit_blocks) * 2.0 * 1024 * 1024 / 55.0e9;
  EXPECT_NEAR(cpu.seconds, want, 1e-12);
  EXPECT_DOUBLE_EQ(cpu.bytes_onboarded, double(cpu.hit_blocks) * 2.0 * 1024 * 1024);
  // The repeat is the run's shortest TTFT; onboarding adds exactly its transfer to its first step.
  EXPECT_NEAR(tiers.summary.ttft_ms.min - roomy.summary.ttft_ms.min, 1e3 * want, 1e-6);

  // Overlapped with compute, the transfer hides behind the step when the step is longer.
  nlohmann::json j = offload_scenario(0.2, true);
  j["workload"]["isl"] = isl;
  j["kv_offload"]["overlap"] = true;
  const SimResult hidden = simulate(parse_scenario(j.dump(), "test"));
  EXPECT_LT(hidden.summary.ttft_ms.min, tiers.summary.ttft_ms.min);
  EXPECT_GE(hidden.summary.ttft_ms.min, roomy.summary.ttft_ms.min);
}

TEST(KvOffload, BadInputIsOneClearError) {
  nlohmann::json j = offload_scenario(0.2, true);
  j["kv_offload"] = {{"cpu_gib", 5000}};   // p5en: 2 TiB host memory for 8 GPUs -> 256 GiB per GPU
  try {
    prepare(parse_scenario(j.dump(), "test"));
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("host memory"), std::string::npos) << e.what();
  }
  j = offload_scenario(0.2, true);
  j["engine"]["enable_prefix_caching"] = false;
  EXPECT_THROW(prepare(parse_scenario(j.dump(), "test")), Error);
}

}  // namespace
}  // namespace servesim::sim

#include "sim/studies/planner.hpp"

namespace servesim::sim {
namespace {

Scenario planner_scenario() {
  const nlohmann::json j = {{"model", "llama-3.1-8b"}, {"gpu", "h200"}, {"gpus", 1}, {"tp", 1}, {"precision", "fp8"},
                            {"engine_profile", "vllm-0.19"}, {"router", "least_outstanding"},
                            {"workload", {{"request_rate", 1.0}, {"isl", 1000}, {"osl", 100}, {"seed", 5}}}};
  return parse_scenario(j.dump(), "test");
}

PlannerSpec planner_spec(workloads::LoadProfile profile) {
  PlannerSpec p;
  p.profile = std::move(profile);
  p.poisson = false;            // evenly spaced arrivals: every interval sees exactly its rate
  p.interval_s = 60;
  p.ttft_ms = 2000;
  p.itl_ms = 100;
  p.replica_rps = 4;            // given, so the fleet is rate / 4 by hand
  p.storage_bytes_per_s = 1e9;  // 8 GB of FP8 weights: 8 s to start
  p.run_fixed_fleet = false;
  return p;
}

TEST(Planner, ConstantLoadHoldsAConstantFleet) {
  // 10 requests/s for 20 minutes at 4 per worker: ceil(10 / 4) = 3 workers from start to end.
  const PlannerResult r = run_planner(planner_scenario(), planner_spec(workloads::step_profile(10, 10, 600, 1200)));
  ASSERT_EQ(r.timeline.size(), 20u);
  for (const auto& iv : r.timeline) {
    EXPECT_EQ(iv.workers_ready, 3) << iv.start_s;
    EXPECT_EQ(iv.workers_held, 3) << iv.start_s;
    EXPECT_NEAR(iv.observed_rps, 10, 0.02) << iv.start_s;
  }
  ASSERT_EQ(r.roles.size(), 1u);
  EXPECT_EQ(r.roles[0].peak_workers, 3);
  EXPECT_NEAR(r.gpu_hours, 3.0 * 1200 / 3600, 1e-9);
  EXPECT_NEAR(r.fixed_fleet_gpu_hours, r.gpu_hours, 1e-9);
  EXPECT_EQ(r.requests, 12000);
}

TEST(Planner, AStepAddsWorkersAfterOneIntervalPlusStartUp) {
  // 6 -> 14 requests/s at t = 300 s (an interval boundary): the tick at 360 s sees 14 and starts
  // ceil(14 / 4) - ceil(6 / 4) = 2 workers, which take requests from 360 s + start-up on.
  PlannerSpec spec = planner_spec(workloads::step_profile(6, 14, 300, 900));
  const PlannerResult r = run_planner(planner_scenario(), spec);
  const double startup = r.roles[0].startup_s;
  EXPECT_GT(startup, 1.0);
  EXPECT_LT(startup, 60.0);
  for (const auto& iv : r.timeline) {
    const double end = iv.start_s + spec.interval_s;
    if (end <= 300 + 1e-9) {           // before the step: 2 workers
      EXPECT_EQ(iv.workers_held, 2) << end;
    } else if (end < 360 - 1e-9) {
      EXPECT_EQ(iv.workers_held, 2) << end;
    } else {                           // from the tick at 360 s on: 4 held
      EXPECT_EQ(iv.workers_held, 4) << end;
    }
  }
  // At 360 s the two new workers were still loading (ready = 2), at 420 s they serve (ready = 4).
  EXPECT_EQ(r.timeline[5].workers_ready, 2);
  EXPECT_EQ(r.timeline[6].workers_ready, 4);
  // GPU time: 2 workers all along, 2 more from 360 s (while loading too) to the end.
  EXPECT_NEAR(r.gpu_hours, (2.0 * 900 + 2.0 * (900 - 360)) / 3600, 1e-9);
}

TEST(Planner, DiurnalProfileAndCsv) {
  const workloads::LoadProfile d = workloads::diurnal_profile(10, 0.2, 4, 24);
  EXPECT_NEAR(d.rate_at(4 * 3600), 2.0, 1e-9);      // trough at 04:00
  EXPECT_NEAR(d.rate_at(16 * 3600), 10.0, 1e-9);    // peak twelve hours later
  // The mean of 0.2 + 0.8 (1 - cos) / 2 over a day is 0.6 of the peak.
  EXPECT_NEAR(d.requests_between(0, 86400) / 86400, 6.0, 0.01);
  const auto c = workloads::parse_load_profile_csv("time_h,rps\n0,1\n1,3\n2,3\n", "p.csv", 6);
  EXPECT_DOUBLE_EQ(c.rate_at(1800), 4.0);          // rescaled to peak 6: 2 -> 6 linear, halfway 4
  EXPECT_DOUBLE_EQ(c.duration_s, 7200);
  EXPECT_THROW(workloads::parse_load_profile_csv("time_s,rps\n0,1\n0,2\n", "p.csv"), Error);
  EXPECT_THROW(workloads::parse_load_profile_csv("when,rps\n0,1\n", "p.csv"), Error);
  // Empty cells keep their column: an unused empty one is fine (the rate is still column 3), an
  // empty rate is one line naming it (it read "missing rate" for a row that had one).
  const auto gap = workloads::parse_load_profile_csv("time_s,note,rps\n0,,5\n60,x,10\n", "p.csv");
  EXPECT_DOUBLE_EQ(gap.rate_at(30), 7.5);
  try {
    workloads::parse_load_profile_csv("time_s,rps\n0,\n60,10\n", "p.csv");
    ADD_FAILURE() << "accepted an empty rate";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("line 2, rps: the rate cell is empty"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace servesim::sim

namespace servesim::sim {
namespace {

TEST(Sessions, DisaggregatedPrefillWorkersAreRoutedByOverlap) {
  // 2 prefill + 1 decode workers on a p5en, 8 prompts of 6,000 tokens drawn at random: the KV
  // router sends a repeat to the prefill worker holding it. With fresh KV events what it expected
  // to find cached is what the prefill workers served, less the blocks a copy of the same prompt
  // still in prefill published between the routing and the admission (0.5 % here).
  nlohmann::json j = {{"model", "llama-3.1-8b"}, {"gpu", "h200"}, {"tp", 1}, {"precision", "fp8"},
                      {"engine_profile", "vllm-0.19"}, {"router", "kv"},
                      {"topology", {{"kind", "disagg"}, {"instance", "p5en.48xlarge"}, {"prefill_workers", 2}, {"decode_workers", 1}}},
                      {"workload", {{"concurrency", 8}, {"requests", 200}, {"isl", 6000}, {"osl", 100}, {"seed", 2},
                                    {"dataset", {{"entries", 8}, {"sampling", "random"}}}}}};
  const SimResult r = simulate(parse_scenario(j.dump(), "test"));
  ASSERT_EQ(r.workers.size(), 3u);
  EXPECT_GT(r.routed_overlap_blocks, 0);
  EXPECT_LE(r.routed_overlap_blocks * 16, r.prompt_tokens_cached);
  EXPECT_GT(double(r.routed_overlap_blocks * 16), 0.99 * double(r.prompt_tokens_cached));
  EXPECT_GT(r.workers[0].prompt_tokens_cached, 0);
  EXPECT_GT(r.workers[1].prompt_tokens_cached, 0);
  EXPECT_EQ(r.workers[2].prompt_tokens, 0);   // the decode worker receives KV, it prefills nothing
}

}  // namespace
}  // namespace servesim::sim

#include "sim/api/api.hpp"

namespace servesim::sim {
namespace {

// `memory --kv-offload`: the tiers' capacity and onboarding by hand. Llama-3.1-8B BF16 on one H200:
// a 16-token block of 32 layers x 8 KV heads x 128 x 2 (K, V) x 2 B = 2 MiB on its one GPU.
TEST(KvOffload, MemoryRowsAreTheHandSums) {
  api::MemoryArgs a;
  a.model = "llama-3.1-8b";
  a.gpu = "h200";
  a.precision = "bf16";
  a.tp = 1;
  a.context = 8000;
  a.kv_offload = "cpu:100,disk:1000";
  const nlohmann::json j = api::memory(a);
  const auto& o = j.at("kv_offload");
  const double block = 2.0 * 1024 * 1024;
  EXPECT_DOUBLE_EQ(o.at("block_bytes_per_gpu").get<double>(), block);
  const auto& cpu = o.at("tiers").at(0);
  const auto& disk = o.at("tiers").at(1);
  EXPECT_EQ(cpu.at("capacity_blocks").get<std::int64_t>(), 100 * 512);      // 100 GiB / 2 MiB
  EXPECT_EQ(cpu.at("capacity_tokens").get<std::int64_t>(), 100 * 512 * 16);
  EXPECT_EQ(cpu.at("sequences_at_context").get<std::int64_t>(), 51200 / 500);   // 8000 tokens: 500 blocks
  EXPECT_EQ(disk.at("capacity_blocks").get<std::int64_t>(), 1000 * 512);
  // 8000 tokens hit 499 whole blocks (never the last token): 18.4 us + 499 x 2 MiB / 55.0 GB/s.
  EXPECT_EQ(cpu.at("onboard_blocks").get<std::int64_t>(), 499);
  EXPECT_NEAR(cpu.at("onboard_s").get<double>(), 18.4e-6 + 499 * block / 55.0e9, 1e-9);
  EXPECT_NEAR(disk.at("onboard_s").get<double>(), 100e-6 + 499 * block / 6.9e9, 1e-9);

  // A hybrid (Nemotron 3 Super, TP2, FP8 KV): 8,320-token blocks; a hit brings the Mamba state
  // pages of its 5 state groups with it, each group one block id.
  a.model = "nemotron-3-super";
  a.precision = "fp8";
  a.tp = 2;
  a.context = 20000;
  a.kv_offload = "cpu:200";
  const nlohmann::json h = api::memory(a);
  const auto& ho = h.at("kv_offload");
  const double hb = ho.at("block_bytes_per_gpu").get<double>();
  EXPECT_EQ(ho.at("block_size").get<int>(), 8320);
  EXPECT_DOUBLE_EQ(ho.at("state_bytes_per_seq_per_gpu").get<double>(), 5 * hb);
  const auto& ht = ho.at("tiers").at(0);
  EXPECT_EQ(ht.at("capacity_blocks").get<std::int64_t>(), static_cast<std::int64_t>(200.0 * 1024 * 1024 * 1024 / (2 * hb)));
  EXPECT_EQ(ht.at("onboard_blocks").get<std::int64_t>(), 2);   // 19,999 / 8,320
  EXPECT_NEAR(ht.at("onboard_s").get<double>(), 18.4e-6 + (2 + 5) * hb / 55.0e9, 1e-9);

  a.kv_offload = "cpu:5000";   // more than the replica's 2 x 256 GiB of p5en host memory
  EXPECT_THROW(api::memory(a), Error);
}

}  // namespace
}  // namespace servesim::sim

namespace servesim::sim {
namespace {

// Llama-3.1-8B FP8 disaggregated on p5en: prefill workers TP1, decode workers TP2, 1,000 + 100 tokens.
Scenario disagg_planner_scenario() {
  nlohmann::json j = {{"model", "llama-3.1-8b"}, {"gpu", "h200"}, {"tp", 1}, {"precision", "fp8"},
                      {"engine_profile", "vllm-0.19"},
                      {"topology", {{"kind", "disagg"}, {"instance", "p5en.48xlarge"}, {"decode_tp", 2}}},
                      {"workload", {{"request_rate", 1.0}, {"isl", 1000}, {"osl", 100}, {"seed", 5}}}};
  return parse_scenario(j.dump(), "test");
}

PlannerSpec disagg_spec(workloads::LoadProfile profile) {
  PlannerSpec p = planner_spec(std::move(profile));
  p.prefill_rps = 4;   // given: prefill workers = ceil(rate / 4), decode workers = ceil(rate / 8), by hand
  p.decode_rps = 8;
  return p;
}

int held(const PlannerInterval& iv, std::size_t role) { return iv.roles.at(role).held; }
int ready(const PlannerInterval& iv, std::size_t role) { return iv.roles.at(role).ready; }

TEST(Planner, DisaggregatedConstantLoadHoldsEachRole) {
  // 10 requests/s: ceil(10 / 4) = 3 prefill workers and ceil(10 / 8) = 2 decode workers throughout.
  const PlannerResult r = run_planner(disagg_planner_scenario(), disagg_spec(workloads::step_profile(10, 10, 600, 1200)));
  ASSERT_EQ(r.roles.size(), 2u);
  EXPECT_EQ(r.roles[0].name, "prefill");
  EXPECT_EQ(r.roles[1].gpus_per_worker, 2);
  for (const auto& iv : r.timeline) {
    EXPECT_EQ(held(iv, 0), 3) << iv.start_s;
    EXPECT_EQ(ready(iv, 0), 3) << iv.start_s;
    EXPECT_EQ(held(iv, 1), 2) << iv.start_s;
    EXPECT_EQ(ready(iv, 1), 2) << iv.start_s;
  }
  EXPECT_NEAR(r.gpu_hours, (3 * 1 + 2 * 2) * 1200.0 / 3600, 1e-9);   // 3 TP1 + 2 TP2 workers for 20 minutes
  EXPECT_NEAR(r.fixed_fleet_gpu_hours, r.gpu_hours, 1e-9);
  EXPECT_EQ(r.requests, 12000);
}

TEST(Planner, DisaggregatedStepScalesEachRoleByItsOwnRule) {
  // 6 -> 14 requests/s at 300 s: the tick at 360 s wants ceil(14 / 4) = 4 prefill workers (2 more)
  // and ceil(14 / 8) = 2 decode workers (1 more); each role's new workers take requests after its
  // own start-up: its weights on its GPUs at 1 GB/s.
  const PlannerSpec spec = disagg_spec(workloads::step_profile(6, 14, 300, 900));
  const PlannerResult r = run_planner(disagg_planner_scenario(), spec);
  for (const auto& role : r.roles) {
    EXPECT_GT(role.startup_s, 1.0) << role.name;
    EXPECT_LT(role.startup_s, 60.0) << role.name;
  }
  // TP2 decode workers read their two shards: a little more than one TP1 prefill worker's copy
  // (the embeddings and norms are replicated).
  EXPECT_GT(r.roles[1].startup_s, r.roles[0].startup_s);
  for (const auto& iv : r.timeline) {
    const bool after = iv.start_s + spec.interval_s > 360 - 1e-9;
    EXPECT_EQ(held(iv, 0), after ? 4 : 2) << iv.start_s;
    EXPECT_EQ(held(iv, 1), after ? 2 : 1) << iv.start_s;
  }
  EXPECT_EQ(ready(r.timeline[5], 0), 2);   // at 360 s the new workers are loading
  EXPECT_EQ(ready(r.timeline[5], 1), 1);
  EXPECT_EQ(ready(r.timeline[6], 0), 4);   // at 420 s they serve
  EXPECT_EQ(ready(r.timeline[6], 1), 2);
  EXPECT_NEAR(r.gpu_hours, (2.0 * 900 + 2.0 * 540 + 2 * (1.0 * 900 + 1.0 * 540)) / 3600, 1e-9);
  EXPECT_GT(r.slo_attainment, 0.99);
}

TEST(Planner, LoadRuleShrinksAnIdleFleetOneWorkerPerInterval) {
  // Aggregated, 2 requests/s with replica_rps 0.5 given: the fleet opens at ceil(2 / 0.5) = 4
  // replicas; the load is far below the scale-down thresholds (KV utilisation < 0.5, no queue), so
  // each tick removes one worker until one is left.
  PlannerSpec spec = planner_spec(workloads::step_profile(2, 2, 300, 600));
  spec.rule = PlannerSpec::Rule::load;
  spec.replica_rps = 0.5;
  const PlannerResult r = run_planner(planner_scenario(), spec);
  const int want[] = {3, 2, 1, 1, 1, 1, 1, 1, 1, 1};
  ASSERT_EQ(r.timeline.size(), 10u);
  for (std::size_t k = 0; k < 10; ++k) {
    EXPECT_EQ(r.timeline[k].workers_ready, want[k]) << k;
    EXPECT_LT(r.timeline[k].roles[0].kv_utilization, spec.kv_down) << k;
    EXPECT_LT(r.timeline[k].roles[0].queue, spec.queue_down) << k;
  }
}

TEST(Planner, LoadRuleAddsAPrefillWorkerWhileItsQueueIsLong) {
  // Disaggregated, 1 request/s of 1,000-token prompts and then 200/s: far past one prefill worker,
  // so its queue passes 5 prompts per worker and every tick adds exactly one prefill worker.
  PlannerSpec spec = disagg_spec(workloads::step_profile(1, 200, 120, 480));
  spec.rule = PlannerSpec::Rule::load;
  spec.max_workers = 8;
  const PlannerResult r = run_planner(disagg_planner_scenario(), spec);
  EXPECT_EQ(held(r.timeline[0], 0), 1);
  EXPECT_EQ(held(r.timeline[1], 0), 1);   // the first minute: no queue (shrink stops at one)
  for (std::size_t k = 2; k < r.timeline.size(); ++k) {
    if (r.timeline[k].roles[0].queue > spec.queue_up && held(r.timeline[k - 1], 0) < 8) {
      EXPECT_EQ(held(r.timeline[k], 0), held(r.timeline[k - 1], 0) + 1) << k;
    }
  }
  EXPECT_GT(r.timeline[2].roles[0].queue, spec.queue_up);
  EXPECT_GT(held(r.timeline.back(), 0), 2);
}

}  // namespace
}  // namespace servesim::sim

namespace servesim::sim {
namespace {

TEST(Planner, ReservedPlusOnDemandIsTheHandSum) {
  // Two levels over an hour: 6 requests/s, then 14 from 1800 s. At 4 per worker the planner holds
  // 2 one-GPU workers until the tick at 1860 s and 4 after it. With reserved GPUs at $5/hour and
  // p5en on demand at $63.296 / 8 per GPU-hour:
  //   R = 0: (2 x 3600 + 2 x 1740) s on demand;  R = 2: 2 x 1 h reserved + 2 x 1740 s on demand;
  //   R = 4: 4 x 1 h reserved. The cheapest is R = 2.
  PlannerSpec spec = planner_spec(workloads::step_profile(6, 14, 1800, 3600));
  spec.reserved_usd_per_gpu_hour = 5;
  const PlannerResult r = run_planner(planner_scenario(), spec);
  ASSERT_TRUE(r.reserved.has_value());
  const ReservedSplit& x = *r.reserved;
  const double od = 63.296 / 8;
  ASSERT_NEAR(x.on_demand_usd_per_gpu_hour, od, 1e-9);
  ASSERT_EQ(x.options.size(), 3u);
  EXPECT_EQ(x.options[0].reserved_gpus, 0);
  EXPECT_EQ(x.options[1].reserved_gpus, 2);
  EXPECT_EQ(x.options[2].reserved_gpus, 4);
  EXPECT_NEAR(x.options[0].total_usd, (2.0 * 3600 + 2.0 * 1740) / 3600 * od, 1e-9);
  EXPECT_NEAR(x.options[1].total_usd, 2 * 1 * 5.0 + 2.0 * 1740 / 3600 * od, 1e-9);
  EXPECT_NEAR(x.options[2].total_usd, 4 * 1 * 5.0, 1e-9);
  EXPECT_EQ(x.best, 1u);
  EXPECT_NEAR(x.options[0].total_usd, r.gpu_hours * od, 1e-9);   // all on demand: the planner's GPU-hours

  // A 60 % reserved discount ($3.16) makes reserving the peak cheapest: 4 x 1 h x 3.16 < 2 x 1 h x 3.16 + 0.97 h x 7.91.
  spec.reserved_usd_per_gpu_hour = 0;
  spec.reserved_discount = 0.6;
  const PlannerResult d = run_planner(planner_scenario(), spec);
  EXPECT_EQ(d.reserved->options[d.reserved->best].reserved_gpus, 4);
  EXPECT_NEAR(d.reserved->reserved_usd_per_gpu_hour, 0.4 * od, 1e-9);
}

}  // namespace
}  // namespace servesim::sim

namespace servesim::sim {
namespace {

// One session of 6 turns (as one_session) on 2 prefill + 1 decode workers of Llama-3.1-8B FP8.
nlohmann::json disagg_session(const nlohmann::json& router) {
  nlohmann::json j = one_session("kv");
  j.erase("gpus");
  j["router"] = router;
  j["topology"] = {{"kind", "disagg"}, {"instance", "p5en.48xlarge"}, {"prefill_workers", 2}, {"decode_workers", 1}};
  return j;
}

TEST(Sessions, DisaggregatedKvRoutingHitsTheHistoryAndShipsTheWholeContext) {
  const SimResult kv = simulate(parse_scenario(disagg_session("kv").dump(), "test"));
  // The KV router keeps the session on one prefill worker. That worker computed turn k-1's prompt,
  // not its answer (the decode worker wrote it), so turn k hits turn k-1's prompt in whole 16-token
  // blocks and recomputes the answer: 64 tokens fewer per turn than aggregated (cached_after).
  std::int64_t want = 0, prompts = 0;
  for (int k = 0; k < 6; ++k) {
    prompts += prompt(k);
    if (k >= 1) want += prompt(k - 1) / 16 * 16;
  }
  ASSERT_EQ(kv.workers.size(), 3u);
  EXPECT_EQ(kv.prompt_tokens, prompts);
  EXPECT_EQ(kv.prompt_tokens_cached, want);
  EXPECT_TRUE(kv.workers[0].prompt_tokens == 0 || kv.workers[1].prompt_tokens == 0);
  EXPECT_EQ(kv.workers[2].prompt_tokens, 0);   // the decode worker receives KV, it prefills nothing
  ASSERT_EQ(kv.turns.size(), 6u);
  EXPECT_EQ(kv.turns[3].cached_tokens, prompt(2) / 16 * 16);
  // Each turn's handoff moves its whole context (history + new tokens) to the decode worker:
  // 32 layers x 8 KV heads x 128 x 2 (K, V) x 1 byte (FP8) = 64 KiB per token.
  EXPECT_EQ(kv.transfers.handoffs, 6);
  EXPECT_DOUBLE_EQ(kv.transfers.bytes, 65536.0 * double(prompts));

  // Blind to the prefill workers' caches (KV events a day late) the router splits the turns by load
  // and ties: fewer hits, a longer mean TTFT.
  const SimResult blind = simulate(parse_scenario(disagg_session({{"kind", "kv"}, {"kv_event_delay_ms", 8.64e7}}).dump(), "test"));
  EXPECT_LT(blind.prompt_tokens_cached, kv.prompt_tokens_cached);
  EXPECT_GT(blind.summary.ttft_ms.avg, kv.summary.ttft_ms.avg);
}

TEST(KvOffload, DisaggregatedPrefillWorkerOnboardsFromItsHostTier) {
  // Prompts A, B, C, A, each 40 % of the pool, on 1 prefill + 1 decode worker (BF16,
  // gpu_memory_utilization 0.2): the prefill worker's pool evicts A's tail for C and onboards it
  // from host memory for the repeat, in one
  // transfer of 18.4 us + blocks x 2 MiB / 55.0 GB/s; the TTFT of the repeat exceeds that of a pool
  // that keeps A by exactly that transfer.
  auto scenario = [](double util, bool offload) {
    nlohmann::json j = offload_scenario(util, offload);
    j.erase("gpus");
    j["topology"] = {{"kind", "disagg"}, {"instance", "p5en.48xlarge"}, {"prefill_workers", 1}, {"decode_workers", 1}};
    return j;
  };
  const Prepared small = prepare(parse_scenario(scenario(0.2, true).dump(), "test"));
  const std::int64_t isl = small.deployment->kv_blocks() * 16 * 4 / 10;
  auto run = [&](double util, bool offload) {
    nlohmann::json j = scenario(util, offload);
    j["workload"]["isl"] = isl;
    j["workload"]["requests"] = 4;
    j["workload"]["dataset"]["entries"] = 3;
    return simulate(parse_scenario(j.dump(), "test"));
  };
  const SimResult tiers = run(0.2, true), roomy = run(0.5, false);
  ASSERT_EQ(tiers.offload_stats.size(), 1u);
  const OffloadTierStats& cpu = tiers.offload_stats[0];
  EXPECT_GT(cpu.hit_blocks, 100);
  EXPECT_EQ(cpu.transfers, 1);
  EXPECT_EQ(tiers.prompt_tokens_cached, (isl - 1) / 16 * 16);   // the repeat's: GPU head + host tail
  EXPECT_EQ(roomy.prompt_tokens_cached, tiers.prompt_tokens_cached);
  const double want = 18.4e-6 + double(cpu.hit_blocks) * 2.0 * 1024 * 1024 / 55.0e9;
  EXPECT_NEAR(cpu.seconds, want, 1e-12);
  EXPECT_NEAR(tiers.summary.ttft_ms.min - roomy.summary.ttft_ms.min, 1e3 * want, 1e-6);
}

TEST(KvOffload, RouterCountsAnOffloadedBlockAsItsOnboardingOverItsPrefill) {
  // The router's price of a host-tier block: 2 MiB / 55.0 GB/s against the prefill time of a
  // 16-token block in a full 8,192-token chunk (Llama-3.1-8B BF16, H200).
  nlohmann::json j = offload_scenario(0.2, true);
  j["gpus"] = 2;
  j["router"] = "kv";
  const Scenario s = parse_scenario(j.dump(), "test");
  const Prepared p = prepare(s);
  models::StepBatch b;
  b.prefill_seqs = 1;
  b.prefill_tokens = p.engine.max_num_batched_tokens;
  b.prefill_attention_pairs = double(b.prefill_tokens) * double(b.prefill_tokens + 1) / 2;
  const double prefill_block_s = p.cost->seconds(b) * 16 / double(b.prefill_tokens);
  const ClusterShape shape = cluster_shape(p, s, 0);
  ASSERT_EQ(shape.kv_router.offload_block_cost.size(), 1u);
  EXPECT_NEAR(shape.kv_router.offload_block_cost[0], 2.0 * 1024 * 1024 / 55.0e9 / prefill_block_s, 1e-12);
  EXPECT_LT(shape.kv_router.offload_block_cost[0], 0.5);   // onboarding is the cheaper way to a block

  // 2 replicas, 6 prompts of half a pool each drawn at random, the GPU caches unseen (KV events a
  // day late): the tiers are the router's only view of where a prompt lives.
  auto run = [&](bool aware) {
    nlohmann::json k = j;
    k["router"] = {{"kind", "kv"}, {"kv_event_delay_ms", 8.64e7}, {"offload_aware", aware}};
    k["workload"] = {{"concurrency", 1}, {"requests", 60}, {"isl", p.plan.num_kv_blocks * 16 / 2}, {"osl", 4},
                     {"seed", 4}, {"dataset", {{"entries", 6}, {"sampling", "random"}}}};
    return simulate(parse_scenario(k.dump(), "test"));
  };
  const SimResult aware = run(true), blind = run(false);
  EXPECT_GT(aware.routed_offload_blocks, 0);
  EXPECT_EQ(blind.routed_offload_blocks, 0);
  // Sent back where its blocks are (GPU head, host tail) a repeat is served more from cache in all
  // (2.38 M against 2.24 M prompt tokens) and its TTFT drops (mean 350 against 451 ms).
  EXPECT_GT(aware.prompt_tokens_cached, blind.prompt_tokens_cached);
  EXPECT_LT(aware.summary.ttft_ms.avg, blind.summary.ttft_ms.avg);
}

}  // namespace
}  // namespace servesim::sim
