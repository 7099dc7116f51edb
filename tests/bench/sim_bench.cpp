// Speed of the simulator itself: requests simulated per second of host time on one aggregated
// replica (1k-in / 1k-out), and a 16-point concurrency sweep of 2,000 requests per point.
#include <benchmark/benchmark.h>

#include "sim/simulate.hpp"

namespace {

using namespace servesim;

sim::Scenario scenario(int concurrency, std::int64_t requests) {
  auto j = sim::default_scenario_json();
  j["workload"] = {{"concurrency", concurrency}, {"requests", requests}, {"isl", 1000}, {"osl", 1000}};
  return sim::parse_scenario(j.dump(), "bench");
}

// 10,000 requests of 1k/1k on one H200 x8 replica of the default model; arg = concurrency.
void BM_Simulate1k1k(benchmark::State& state) {
  const sim::Scenario s = scenario(static_cast<int>(state.range(0)), 10000);
  const sim::Prepared p = sim::prepare(s);
  for (auto _ : state) {
    sim::SimResult r = sim::simulate(p, s, s.workload);
    benchmark::DoNotOptimize(r.summary.request_count);
  }
  state.SetItemsProcessed(state.iterations() * 10000);
  state.counters["requests_per_s"] = benchmark::Counter(double(state.iterations()) * 10000, benchmark::Counter::kIsRate);
}
BENCHMARK(BM_Simulate1k1k)->Arg(32)->Arg(64)->Arg(256)->Unit(benchmark::kMillisecond)->UseRealTime();

// 16 points, 2,000 requests each, on `threads` threads (the default scenario's shape).
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

}  // namespace

BENCHMARK_MAIN();
