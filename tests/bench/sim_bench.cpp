// Speed of the simulator itself: requests simulated per second of host CPU time on one
// aggregated replica (1k-in / 1k-out) across the concurrency range, a 16-point concurrency sweep
// of 2,000 requests per point, and the heap bytes kept per finished request.
#include <benchmark/benchmark.h>
#include <malloc.h>

#include <atomic>
#include <cstdlib>
#include <new>

#include "sim/simulate.hpp"

// Live heap bytes of this process (glibc's usable size of each block), for the bytes-per-request
// figure: the peak of a long run minus the peak of a short one, over the extra requests.
namespace {
std::atomic<long long> g_live{0}, g_peak{0};
void* counted(std::size_t n) {
  void* p = std::malloc(n ? n : 1);
  if (!p) throw std::bad_alloc();
  const long long now = g_live.fetch_add(static_cast<long long>(malloc_usable_size(p)), std::memory_order_relaxed) +
                        static_cast<long long>(malloc_usable_size(p));
  long long peak = g_peak.load(std::memory_order_relaxed);
  while (now > peak && !g_peak.compare_exchange_weak(peak, now, std::memory_order_relaxed)) {}
  return p;
}
void uncounted(void* p) noexcept {
  if (!p) return;
  g_live.fetch_sub(static_cast<long long>(malloc_usable_size(p)), std::memory_order_relaxed);
  std::free(p);
}
}  // namespace
void* operator new(std::size_t n) { return counted(n); }
void* operator new[](std::size_t n) { return counted(n); }
void operator delete(void* p) noexcept { uncounted(p); }
void operator delete[](void* p) noexcept { uncounted(p); }
void operator delete(void* p, std::size_t) noexcept { uncounted(p); }
void operator delete[](void* p, std::size_t) noexcept { uncounted(p); }

namespace {

using namespace servesim;

sim::Scenario scenario(int concurrency, std::int64_t requests, int isl = 1000) {
  auto j = sim::default_scenario_json();
  j["workload"] = {{"concurrency", concurrency}, {"requests", requests}, {"isl", isl}, {"osl", 1000}};
  return sim::parse_scenario(j.dump(), "bench");
}

// 10,000 requests of 1k/1k on one H200 x8 replica of the default model on `engine` (a profile
// name); arg = concurrency. Times are CPU time of the simulating thread; items/s = simulated
// requests per CPU second.
void simulate_1k1k(benchmark::State& state, int concurrency, const char* engine) {
  auto j = sim::default_scenario_json();
  j["workload"] = {{"concurrency", concurrency}, {"requests", 10000}, {"isl", 1000}, {"osl", 1000}};
  j["engine_profile"] = engine;
  const sim::Scenario s = sim::parse_scenario(j.dump(), "bench");
  const sim::Prepared p = sim::prepare(s);
  std::uint64_t steps = 0;
  for (auto _ : state) {
    sim::SimResult r = sim::simulate(p, s, s.workload);
    benchmark::DoNotOptimize(r.summary.request_count);
    steps = 0;
    for (const auto& w : r.workers) steps += std::uint64_t(w.steps);
  }
  state.SetItemsProcessed(state.iterations() * 10000);
  state.counters["steps"] = double(steps);
}

void BM_Simulate1k1k(benchmark::State& state) { simulate_1k1k(state, static_cast<int>(state.range(0)), "vllm"); }
BENCHMARK(BM_Simulate1k1k)->Arg(16)->Arg(32)->Arg(64)->Arg(128)->Arg(256)->Unit(benchmark::kMillisecond);

// The same on SGLang's and TensorRT-LLM's batch formation (their profiles' knobs and costs);
// args = engine (1: sglang-0.5.6, 2: trtllm-1.3), concurrency.
void BM_SimulateEngine1k1k(benchmark::State& state) {
  simulate_1k1k(state, static_cast<int>(state.range(1)), state.range(0) == 1 ? "sglang-0.5.6" : "trtllm-1.3");
}
BENCHMARK(BM_SimulateEngine1k1k)->ArgsProduct({{1, 2}, {16, 64, 256}})->Unit(benchmark::kMillisecond);

// The same with 8k-token prompts (8k-in / 1k-out), 2,000 requests; arg = concurrency.
void BM_Simulate8k1k(benchmark::State& state) {
  const sim::Scenario s = scenario(static_cast<int>(state.range(0)), 2000, 8000);
  const sim::Prepared p = sim::prepare(s);
  for (auto _ : state) {
    sim::SimResult r = sim::simulate(p, s, s.workload);
    benchmark::DoNotOptimize(r.summary.request_count);
  }
  state.SetItemsProcessed(state.iterations() * 2000);
}
BENCHMARK(BM_Simulate8k1k)->Arg(16)->Arg(64)->Arg(256)->Unit(benchmark::kMillisecond);

// 16 points (concurrency 16, 32, ..., 256), 2,000 requests each, on `threads` threads. Wall time.
void BM_Sweep16(benchmark::State& state) {
  const sim::Scenario s = scenario(1, 2000);
  sim::SweepSpec spec;
  for (int c = 1; c <= 16; ++c) spec.values.push_back(c * 16);
  for (auto _ : state) {
    auto r = sim::sweep(s, spec, static_cast<int>(state.range(0)));
    benchmark::DoNotOptimize(r.size());
  }
}
BENCHMARK(BM_Sweep16)->Arg(1)->Arg(2)->Unit(benchmark::kMillisecond)->UseRealTime()->Iterations(2);

// Heap bytes per finished request with per-request export off, at concurrency 256: peak live
// bytes of a 101,000-request run minus those of a 1,000-request run, over 100,000.
void BM_BytesPerRequest(benchmark::State& state) {
  auto peak_of = [](std::int64_t requests) {
    const sim::Scenario s = scenario(256, requests);
    const sim::Prepared p = sim::prepare(s);
    const long long base = g_live.load();
    g_peak.store(base);
    {
      sim::SimResult r = sim::simulate(p, s, s.workload);
      benchmark::DoNotOptimize(r.summary.request_count);
    }
    return g_peak.load() - base;
  };
  double per_request = 0;
  for (auto _ : state) per_request = double(peak_of(101000) - peak_of(1000)) / 100000.0;
  state.counters["bytes_per_request"] = per_request;
}
BENCHMARK(BM_BytesPerRequest)->Unit(benchmark::kMillisecond)->Iterations(1);

}  // namespace

BENCHMARK_MAIN();
