// Every subcommand that plans memory reports the same KV cache for the same shape: `memory`,
// `step`, `simulate`, `plan` and `min-gpus` all go through models::plan_memory with the same KV
// dtype rule and vLLM serve's engine defaults. The shape is the acceptance case: Nemotron 3
// Super FP8 on 2 x H100 (TP2), 8192 + 1024 tokens, 32 clients, which vLLM serves at 32
// concurrent requests.
#include <gtest/gtest.h>

#include "sim/api/api.hpp"

namespace servesim::api {
namespace {

constexpr std::int64_t kContext = 8192 + 1024;

void expect_same(const nlohmann::json& a, const nlohmann::json& b, const char* who) {
  for (const char* k : {"kv_cache_dtype", "block_size", "num_blocks", "usable_blocks", "page_bytes", "group_size",
                        "blocks_per_seq", "max_seqs_by_cache", "max_num_seqs", "max_concurrent_seqs", "bound"})
    EXPECT_EQ(a.at(k), b.at(k)) << who << ": " << k;
}

TEST(MemoryAgreement, MemoryStepSimulatePlanAndMinGpusAgree) {
  MemoryArgs ma;
  ma.model = "nemotron-3-super";
  ma.gpu = "h100";
  ma.precision = "fp8";
  ma.tp = 2;
  ma.context = kContext;
  const nlohmann::json mem = memory(ma).at("kv_cache");
  // The checkpoint's FP8 KV, the hybrid block size, and more than the 32 sequences asked for.
  EXPECT_EQ(mem.at("kv_cache_dtype"), "fp8");
  EXPECT_EQ(mem.at("block_size"), 8320);
  EXPECT_EQ(mem.at("blocks_per_seq"), 7);  // cdiv(9216, 8320) + 5 Mamba groups
  EXPECT_GT(mem.at("max_concurrent_seqs").get<int>(), 32);
  EXPECT_EQ(mem.at("max_num_seqs"), 1024);  // vllm serve on >= 70 GiB GPUs

  StepArgs sa;
  sa.model = "nemotron-3-super";
  sa.gpu = "h100";
  sa.precision = "fp8";
  sa.tp = 2;
  sa.context = kContext;
  expect_same(mem, step(sa).at("kv_cache"), "step");

  nlohmann::json scenario = {{"model", "nemotron-3-super"}, {"gpu", "h100"}, {"gpus", 2}, {"tensor_parallel_size", 2},
                             {"precision", "fp8"},
                             {"workload", {{"concurrency", 32}, {"requests", 64}, {"isl", 8192}, {"osl", 1024}}}};
  const nlohmann::json run = simulate(scenario);
  const nlohmann::json& sum = run.at("summary");
  expect_same(mem, sum.at("kv_cache"), "simulate");
  // The run holds all 32 clients at once: no preemption, and the batch sits at 32 in steady decode.
  const nlohmann::json& rep = sum.at("replica_stats").at(0);
  EXPECT_EQ(rep.at("preemptions"), 0);
  EXPECT_EQ(rep.at("max_batch_size"), 32);
  EXPECT_GT(rep.at("mean_batch_size").get<double>(), 28.0);

  PlanArgs pa;
  pa.model = "nemotron-3-super";
  pa.instance = "p5.48xlarge";
  pa.nodes = 1;
  pa.precision = "fp8";
  pa.tp = 2;
  pa.replicas = 1;
  pa.topology = "agg";
  pa.concurrency = "4";
  pa.requests = 8;
  pa.isl = 8192;
  pa.osl = 1024;
  pa.ttft_ms = 2000;
  pa.itl_ms = 100;
  pa.target_tps = 100;
  pa.threads = 1;
  expect_same(mem, plan(pa).at("topologies").at(0).at("kv_cache"), "plan");

  MinGpusArgs ga;
  ga.model = "nemotron-3-super";
  ga.precisions = "fp8";
  ga.gpus = "h100";
  ga.policy = "vllm";
  ga.concurrency = 32;
  ga.context = kContext;
  const nlohmann::json rows = min_gpus(ga);
  ASSERT_EQ(rows.size(), 1u);
  EXPECT_EQ(rows[0].at("min_gpus"), 2);
  EXPECT_EQ(rows[0].at("tp"), 2);
  expect_same(mem, rows[0].at("kv_cache"), "min-gpus");
}

TEST(MemoryAgreement, SimulateUsesTheCheckpointKvDtype) {
  // "auto" (the default) is the checkpoint's FP8; "bf16" halves the blocks a page holds per token.
  nlohmann::json s = {{"model", "nemotron-3-super"}, {"gpu", "h200"}, {"gpus", 8}, {"tensor_parallel_size", 8},
                      {"precision", "fp8"}, {"workload", {{"concurrency", 1}, {"requests", 1}, {"isl", 64}, {"osl", 2}}}};
  const auto fp8 = simulate(s).at("summary").at("kv_cache");
  EXPECT_EQ(fp8.at("kv_cache_dtype"), "fp8");
  s["kv_cache_dtype"] = "bf16";
  const auto bf16 = simulate(s).at("summary").at("kv_cache");
  EXPECT_EQ(bf16.at("kv_cache_dtype"), "bf16");
  EXPECT_DOUBLE_EQ(bf16.at("attn_bytes_per_token_per_layer").get<double>(),
                   2 * fp8.at("attn_bytes_per_token_per_layer").get<double>());
}

}  // namespace

// Attention data parallelism: `memory` and `simulate` agree on the pool, and the replica holds
// dp times one rank's sequences (each rank has its own KV cache and max_num_seqs).
TEST(MemoryAgreement, DataParallelRanksEachHoldTheirOwnPool) {
  MemoryArgs ma;
  ma.model = "mixtral-8x7b";
  ma.gpu = "h200";
  ma.precision = "bf16";
  ma.tp = 1;
  ma.dp = 2;
  ma.ep = 2;
  ma.context = 3000;
  const nlohmann::json mem = memory(ma).at("kv_cache");
  ma.dp = 1;
  ma.ep = 1;
  ma.tp = 1;
  EXPECT_EQ(mem.at("data_parallel_ranks"), 2);
  EXPECT_EQ(mem.at("max_num_seqs"), 2 * 1024);
  EXPECT_EQ(mem.at("max_seqs_by_cache").get<std::int64_t>() % 2, 0);
  nlohmann::json scenario = {{"model", "mixtral-8x7b"}, {"gpu", "h200"}, {"gpus", 2}, {"tensor_parallel_size", 1},
                             {"data_parallel_size", 2}, {"expert_parallel_size", 2}, {"precision", "bf16"},
                             {"workload", {{"concurrency", 8}, {"requests", 32}, {"isl", 2000}, {"osl", 1000}}}};
  const nlohmann::json run = simulate(scenario);
  expect_same(mem, run.at("summary").at("kv_cache"), "simulate");
  // Little's law on the closed loop: 8 clients = request rate x mean request latency.
  const auto& sum = run.at("summary");
  const double little = sum.at("request_throughput").get<double>() * sum.at("request_latency_ms_avg").get<double>() / 1e3;
  EXPECT_EQ(sum.at("gpus"), 2);
  EXPECT_EQ(sum.at("kv_blocks_per_replica").get<std::int64_t>(), 2 * mem.at("usable_blocks").get<std::int64_t>());
  EXPECT_NEAR(little, 8.0, 0.8);
}

}  // namespace servesim::api
