// Speed of `servesim search`: a search of Nemotron 3 Super on H200 over 1,000+ configurations
// that fit, 8 concurrency points each, every one simulated (no pruning), on 1 and 2 threads; and
// the same space with pruning. Wall time (the figure a user waits for) and items = configurations.
#include <benchmark/benchmark.h>

#include "sim/api/api.hpp"

namespace {

// The space: FP8 and BF16; aggregated TP 2/4/8 with EP 1 or TP; disaggregated xPyD in 4 ratios
// with prefill and decode TP 2/4/8 (EP 1 or TP each); max_num_seqs 128/256/512 and
// max_num_batched_tokens 2048/8192. ISL 1000 / OSL 200, concurrency 1..128 per decode worker.
servesim::api::SearchArgs space(bool prune, int threads) {
  servesim::api::SearchArgs a;
  a.model = "nemotron-3-super";
  a.gpus = "h200";
  a.tp = "2,4,8";
  a.pd_ratios = "1:1,1:2,2:1,1:3";
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

void BM_Search(benchmark::State& state) {
  const bool prune = state.range(0) != 0;
  const int threads = int(state.range(1));
  nlohmann::json r;
  for (auto _ : state) {
    r = servesim::api::search(space(prune, threads));
    benchmark::DoNotOptimize(r.size());
  }
  state.counters["configurations"] = r["counts"]["configurations"].get<double>();
  state.counters["fit"] = r["counts"]["configurations"].get<double>() - r["counts"]["does_not_fit"].get<double>();
  state.counters["simulated"] = r["counts"]["simulated"].get<double>();
  state.counters["points"] = r["counts"]["points_simulated"].get<double>();
}
// Args: {prune, threads}.
BENCHMARK(BM_Search)->Args({0, 1})->Args({0, 2})->Args({1, 2})->Unit(benchmark::kSecond)->UseRealTime()->Iterations(1);

}  // namespace
