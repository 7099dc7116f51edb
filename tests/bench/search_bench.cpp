// Speed of `servesim search`: a search of Nemotron 3 Super on H200 over 1,872 configurations
// that fit, 8 concurrency points each, every one simulated (no pruning), on 1 and 2 threads; and
// the same space with pruning. Wall time (the figure a user waits for) and items = configurations;
// the counters scale both wall and process CPU time (every thread's) to 1,000 configurations.
// BM_Search1000: the 1,008 configurations of the 1:1 and 1:3 ratios, on 2 threads, every one
// simulated and pruned: the whole search's wall and CPU seconds.
#include <benchmark/benchmark.h>

#include <chrono>

#include <sys/resource.h>

#include "sim/api/api.hpp"

namespace {

// The space: FP8 and BF16; aggregated TP 2/4/8 with EP 1 or TP; disaggregated xPyD in 4 ratios
// with prefill and decode TP 2/4/8 (EP 1 or TP each); max_num_seqs 128/256/512 and
// max_num_batched_tokens 2048/8192. ISL 1000 / OSL 200, concurrency 1..128 per decode worker.
servesim::api::SearchArgs space(bool prune, int threads, const char* pd_ratios = "1:1,1:2,2:1,1:3") {
  servesim::api::SearchArgs a;
  a.model = "nemotron-3-super";
  a.gpus = "h200";
  a.tp = "2,4,8";
  a.pd_ratios = pd_ratios;
  a.max_num_seqs = "128,256,512";
  a.max_num_batched_tokens = "2048,8192";
  a.isl = 1000;
  a.osl = 200;
  a.ttft_ms = 600;
  a.itl_ms = 40;
  a.target_tps = 20000;
  a.prune = prune;
  a.threads = threads;
  return a;
}

double process_cpu_s() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return double(u.ru_utime.tv_sec + u.ru_stime.tv_sec) + 1e-6 * double(u.ru_utime.tv_usec + u.ru_stime.tv_usec);
}

struct Timed {
  nlohmann::json r;
  double wall_s = 0, cpu_s = 0;
};

Timed run_search(benchmark::State& state, const servesim::api::SearchArgs& a) {
  Timed t;
  for (auto _ : state) {
    const double cpu0 = process_cpu_s();
    const auto t0 = std::chrono::steady_clock::now();
    t.r = servesim::api::search(a);
    t.wall_s += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    t.cpu_s += process_cpu_s() - cpu0;
    benchmark::DoNotOptimize(t.r.size());
  }
  return t;
}

void BM_Search(benchmark::State& state) {
  const Timed t = run_search(state, space(state.range(0) != 0, int(state.range(1))));
  const nlohmann::json& r = t.r;
  const double wall_s = t.wall_s, cpu_s = t.cpu_s;
  const double configs = r["counts"]["configurations"].get<double>() * double(state.iterations());
  state.counters["wall_s_per_1000"] = wall_s / configs * 1000;
  state.counters["cpu_s_per_1000"] = cpu_s / configs * 1000;
  state.counters["configurations"] = r["counts"]["configurations"].get<double>();
  state.counters["fit"] = r["counts"]["configurations"].get<double>() - r["counts"]["does_not_fit"].get<double>();
  state.counters["simulated"] = r["counts"]["simulated"].get<double>();
  state.counters["points"] = r["counts"]["points_simulated"].get<double>();
}
// Args: {prune, threads}.
BENCHMARK(BM_Search)->Args({0, 1})->Args({0, 2})->Args({1, 2})->Unit(benchmark::kSecond)->UseRealTime()->Iterations(1);

// Arg: prune.
void BM_Search1000(benchmark::State& state) {
  const Timed t = run_search(state, space(state.range(0) != 0, 2, "1:1,1:3"));
  const double n = double(state.iterations());
  state.counters["configurations"] = t.r["counts"]["configurations"].get<double>();
  state.counters["simulated"] = t.r["counts"]["simulated"].get<double>();
  state.counters["wall_s"] = t.wall_s / n;
  state.counters["cpu_s"] = t.cpu_s / n;
  state.counters["cpu_ms_per_configuration"] = t.cpu_s / n / t.r["counts"]["configurations"].get<double>() * 1e3;
}
BENCHMARK(BM_Search1000)->Arg(0)->Arg(1)->Unit(benchmark::kSecond)->UseRealTime()->Iterations(1);

}  // namespace
