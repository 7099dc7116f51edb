// Benchmarks of the cost models the simulator builds its per-step tables from: one kernel-time
// query (nearest measured shapes, log-space interpolation) and one step's cost (the hot path).
#include <benchmark/benchmark.h>

#include "hwmodels/calibration.hpp"
#include "hwmodels/kernel_model.hpp"
#include "models/model_spec.hpp"
#include "models/step_cost.hpp"

using namespace servesim;

static void BM_KernelGemm(benchmark::State& state) {
  const auto& km = hw::kernel_model(hw::Catalog::global().gpu("H200"));
  std::int64_t m = 37;
  for (auto _ : state) {
    benchmark::DoNotOptimize(km.gemm(m, 4096, 4096, hw::Precision::bf16).seconds);
    m = m % 1024 + 37;   // off-grid rows, so each query interpolates
  }
}
BENCHMARK(BM_KernelGemm);

static void BM_KernelGroupedGemm(benchmark::State& state) {
  const auto& km = hw::kernel_model(hw::Catalog::global().gpu("H200"));
  std::int64_t t = 100;
  for (auto _ : state) {
    benchmark::DoNotOptimize(km.grouped_gemm(128, t, 2688, 1024, hw::Precision::fp8).seconds);
    t = t % 20000 + 100;
  }
}
BENCHMARK(BM_KernelGroupedGemm);

static void BM_StepCost(benchmark::State& state) {
  const auto cost = models::make_step_cost(models::model("nemotron-3-super"), hw::Catalog::global().gpu("H200"),
                                           hw::Precision::fp8, {8, 1, 1});
  models::StepBatch b;
  b.decode_seqs = 64;
  b.prefill_seqs = 1;
  b.prefill_tokens = 2000;
  b.prefill_attention_pairs = 2000.0 * 2001 / 2;
  std::int64_t ctx = 64 * 1000;
  for (auto _ : state) {
    b.decode_context_tokens = ctx;
    benchmark::DoNotOptimize(cost->seconds(b));
    ctx = ctx % 200000 + 64 * 1000;
  }
}
BENCHMARK(BM_StepCost);

// Start-up cost of one calibration family: reading its embedded file(s) and fitting it, what the
// first query of that family costs a process (hw::Calibration reads lazily, one family at a time).
// Arg: 0 = gemm_bf16, 1 = attention_decode, 2 = attention_prefill, 3 = moe_fp8_block_triton; of the
// H200's vLLM 0.19 tables.
static void BM_ReadFitFamily(benchmark::State& state) {
  static const char* families[] = {"gemm_bf16", "attention_decode", "attention_prefill", "moe_fp8_block_triton"};
  const char* name = families[state.range(0)];
  const auto& g = hw::Catalog::global().gpu("H200");
  for (auto _ : state) {
    const hw::Calibration c = hw::Calibration::embedded(g, "vllm-0.19.0");
    benchmark::DoNotOptimize(c.family(name));
  }
  state.SetLabel(name);
}
BENCHMARK(BM_ReadFitFamily)->DenseRange(0, 3)->Unit(benchmark::kMillisecond);
