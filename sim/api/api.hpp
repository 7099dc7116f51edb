// servesim's data API: every query the CLI's `--format json` prints and the Python module
// returns, as nlohmann::json built in one place so both faces give the same data.
// Arguments are validated here; bad input throws servesim::Error naming the argument.
#pragma once
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

namespace servesim::models { struct MemoryPlan; }

namespace servesim::api {

// Catalogues (`servesim list gpus|instances|models`): arrays of objects, catalogue order.
nlohmann::json gpus();
nlohmann::json instances();
nlohmann::json models();
// One model's full architecture spec and parameter counts.
nlohmann::json model(std::string_view name);

// `servesim memory`: the per-GPU memory plan of one replica.
struct MemoryArgs {
  std::string model, model_file, gpu, precision = "bf16", kv_cache_dtype;  // kv "" or "auto": the checkpoint's
  int tp = 1, pp = 1, ep = 1, num_speculative_tokens = 0, block_size = 16;
  int max_num_seqs = 0;                     // 0: `vllm serve`'s default for the GPU (1024 on >= 70 GiB)
  std::int64_t context = 0, max_num_batched_tokens = 0;   // context 0: max_model_len; tokens 0: vLLM serve's default
  double gpu_memory_utilization = 0.9;
};
nlohmann::json memory(const MemoryArgs& a);

// The KV cache block pool of a memory plan, as every subcommand reports it ("kv_cache"):
// kv_cache_dtype, block_size, num_blocks (vLLM's, the null block included), usable_blocks,
// page_bytes, group_size, groups, and at `context_tokens`: blocks_per_seq, max_concurrent_seqs,
// max_seqs_by_cache, max_num_seqs and which bound binds.
nlohmann::json kv_cache_json(const models::MemoryPlan& plan, std::int64_t context_tokens);

// `servesim min-gpus`: one object per (GPU, precision) with gpu, precision, min_gpus, tp, pp, ...
struct MinGpusArgs {
  std::string model, precisions = "bf16,nvfp4", policy = "headroom", gpus;  // gpus: CSV filter, "" = all
  int concurrency = 64;
  std::int64_t context = 0;
};
nlohmann::json min_gpus(const MinGpusArgs& a);

// `servesim op KIND`: predicted GPU time of one kernel or collective. `args` holds the CLI's
// flags with underscores (gpu, dtype, m, n, k, experts, tokens, skew, batch, seq, context, heads,
// kv_heads, head_dim, seqlen, d_state, groups, op, gpus, nodes, instance, bytes).
nlohmann::json op_time(std::string_view kind, const nlohmann::json& args);
const std::vector<std::string>& op_kinds();

// `servesim step`: one decode and one prefill step per layer kind.
struct StepArgs {
  std::string model, gpu, precision = "bf16", kv_cache_dtype;
  int tp = 1, pp = 1, ep = 1, batch = 1, chunk = 0, vision_tiles = 0;
  std::int64_t context = 1024;
};
nlohmann::json step(const StepArgs& a);

// The embedded default scenario (sim/data/default_scenario.json).
nlohmann::json default_scenario();
// One scenario (file layout): aiperf's profile_export_aiperf.json document, plus "summary": the
// run's figures as one sweep row (scalars) and per-replica statistics.
nlohmann::json simulate(const nlohmann::json& scenario);
// The scenario over `axis` ("concurrency" or "request_rate") values: {column: [one per point]}
// (`servesim sweep --format json`). threads <= 0: all cores; results do not depend on it.
nlohmann::json sweep(const nlohmann::json& scenario, std::string_view axis, const std::vector<double>& values,
                     int threads = 0);

// `servesim validate`: measured runs (path: a silicon-sample CSV or aiperf folder) simulated and
// compared; `args` holds path and the CLI's flags with underscores (backend, mode, gpu, model as a
// string or list, engine_any, scenario as a dict, requests_per_client, warmup_per_client,
// statistic, threads, seed, model_file). The CLI's --format json document.
nlohmann::json validate(const nlohmann::json& args);

// `servesim plan`: topology sweep on instances and the SLO capacity plan.
struct PlanArgs {
  std::string model, instance, precision, kv_cache_dtype, topology = "both", concurrency = "1,2,4,8,16,32,64,128,256";
  std::string statistic = "p50", mtp_acceptance, router = "least_outstanding";
  std::string prefill_instance, decode_instance;  // disaggregated roles on other instance types ("" = --instance)
  int prefill_nodes = 0, decode_nodes = 0;        // nodes of each role's instance type (0 = the fewest that hold it)
  int nodes = 0, prefill_workers = 1, decode_workers = 1, encode_workers = 0, threads = 0;
  std::optional<int> tp, pp, ep, prefill_tp, decode_tp, replicas, max_num_seqs, num_speculative_tokens;
  std::int64_t isl = 0, osl = 0, seed = 0;
  std::optional<std::int64_t> requests, max_num_batched_tokens;
  std::optional<double> gpu_memory_utilization;
  double ttft_ms = 0, itl_ms = 0, target_tps = 0;
};
// The whole plan: {"topologies": [...], "slo", "target", "sweep": {"columns": {...}}, ...}.
nlohmann::json plan(const PlanArgs& a);
// The same in pieces, so the points can run elsewhere (a Dask cluster): the number of
// (topology, concurrency) points, one point's sweep row, and the plan from all rows in order.
int plan_points(const PlanArgs& a);
nlohmann::json plan_point(const PlanArgs& a, int index);
nlohmann::json plan_finish(const PlanArgs& a, const nlohmann::json& rows);

}  // namespace servesim::api
