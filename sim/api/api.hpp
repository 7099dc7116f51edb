// servesim's data API: every query the CLI's `--format json` prints and the Python module
// returns, as nlohmann::json built in one place so both faces give the same data.
// Arguments are validated here; bad input throws servesim::Error naming the argument.
#pragma once
#include <cstdint>
#include <functional>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/files.hpp"

#include "sim/resolve.hpp"

namespace servesim::models { struct MemoryPlan; struct ModelSpec; struct Parallelism; }
namespace servesim::hw { enum class Precision; }
namespace servesim::workloads { struct MultimodalConfig; }

namespace servesim::api {

// text::option_list (common/text.hpp): an option's comma-separated items, an empty one refused.
std::vector<std::string> option_list(std::string_view value, std::string_view option);
// --mtp-acceptance: one rate, or one per draft position (plan, search, recommend); "" is 0.7. Each
// item a number (its range is MtpConfig::validate's to check).
std::vector<double> mtp_acceptance_list(const std::string& value);
// --images WxH[:N],... (workloads' parser, which refuses empty items through text::option_list).
workloads::MultimodalConfig images_option(const std::string& value);

// Catalogues (`servesim list gpus|instances|models`): arrays of objects, catalogue order.
nlohmann::json gpus();
nlohmann::json instances();
nlohmann::json models();
// One model's full architecture spec and parameter counts (name, or a model file).
nlohmann::json model(std::string_view name);
nlohmann::json model_file(const std::string& path);
nlohmann::json model(const models::ModelSpec& m);

// The model of a command: a catalogue name or a file (servesim model JSON or HF config.json, read
// without adding it to the catalogue); both or neither is an Error naming the flags.
const models::ModelSpec& resolve_model(const std::string& model, const std::string& model_file);
// One replica's GPU, precision and TP x PP for `memory` and `step` (sim/resolve's rule; tp 0 = the
// smallest shape that serves the model).
// `name`: the model as named (a quantised repository's Hugging Face id names the checkpoint when no precision is given).
sim::Resolved resolve_replica(const models::ModelSpec& m, const std::string& name, const std::string& gpu, const std::string& precision, int tp,
                             int pp);
// The command line's layout against what --engine (default the newest vLLM) launches (sim::check_layout).
void check_command_line_layout(const std::string& engine, const models::Parallelism& par);

// `servesim memory`: the per-GPU memory plan of one replica.
struct MemoryArgs {
  // gpu "": H200; precision "": the checkpoint's; tp 0: the smallest TP x PP that serves the
  // model (sim/resolve.hpp, the rule every subcommand shares); kv "" or "auto": the checkpoint's.
  std::string model, model_file, gpu, precision, kv_cache_dtype;
  // engine: a profile name (servesim list engines); "" = vLLM's planner with `vllm serve`'s defaults.
  // SGLang's and TRT-LLM's planners read the fraction as mem_fraction_static / free_gpu_memory_fraction.
  std::string engine;
  int tp = 0, pp = 1, ep = 1, dp = 1, num_speculative_tokens = 0;
  int block_size = 0;                       // 0: the engine's (vLLM 16, SGLang 1 / 64 on Blackwell, TRT-LLM 32)
  int max_num_seqs = 0;                     // 0: the engine's default for the GPU (vLLM: 1024 on >= 70 GiB)
  std::int64_t context = 0, max_num_batched_tokens = 0;   // context 0: max_model_len; tokens 0: the engine's default
  double gpu_memory_utilization = -1;       // < 0: the engine's (vLLM 0.9, SGLang its heuristic, TRT-LLM 0.9 of free)
  std::string kv_offload;                   // "cpu:GIB[,disk:GIB]": the tiers' rows ("kv_offload"); "" none
  // "WIDTHxHEIGHT[:COUNT],...": a request's images, whose vision tokens the context holds too
  // (as simulate, plan, search and recommend count them); needs `context` and a vision model.
  std::string images;
};
nlohmann::json memory(const MemoryArgs& a);

// The KV cache block pool of a memory plan, as every subcommand reports it ("kv_cache"):
// kv_cache_dtype, block_size, num_blocks (vLLM's, the null block included), usable_blocks,
// page_bytes, group_size, groups, and at `context_tokens`: blocks_per_seq, max_concurrent_seqs,
// max_seqs_by_cache, max_num_seqs and which bound binds.
nlohmann::json kv_cache_json(const models::MemoryPlan& plan, std::int64_t context_tokens);

// `servesim min-gpus`: one object per (GPU, precision) with gpu, precision, min_gpus, tp, pp, ...
struct MinGpusArgs {
  // precisions "": the checkpoint's and nvfp4 (min_gpus_precisions); gpus: CSV filter, "" = all
  std::string model, model_file, precisions, policy = "headroom", gpus;
  int concurrency = 64;
  std::int64_t context = 0;
};
nlohmann::json min_gpus(const MinGpusArgs& a);
// The precisions min-gpus tabulates: `precisions` parsed, or when "" the checkpoint's (the rule of
// sim/resolve.hpp) and nvfp4.
std::vector<hw::Precision> min_gpus_precisions(const models::ModelSpec& m, const std::string& precisions, const std::string& name = "");

// `servesim op KIND`: predicted GPU time of one kernel or collective. `args` holds the CLI's
// flags with underscores (gpu, dtype, m, n, k, experts, tokens, skew, batch, seq, context, heads,
// kv_heads, head_dim, seqlen, d_state, groups, op, gpus, nodes, instance, bytes).
nlohmann::json op_time(std::string_view kind, const nlohmann::json& args);
const std::vector<std::string>& op_kinds();

// `servesim step`: one decode and one prefill step per layer kind.
struct StepArgs {
  std::string model, model_file, gpu, precision, kv_cache_dtype;  // as MemoryArgs: "" / tp 0 resolved (sim/resolve.hpp)
  int tp = 0, pp = 1, ep = 1, dp = 1, batch = 1, chunk = 0, vision_tiles = 0;
  std::int64_t context = 1024;
  std::string engine;  // engine profile (simulate --engine) whose kernel tables price the step; "" = vLLM 0.24's
  bool moe_all_to_all = false;   // MoE under attention DP exchanges tokens by all-to-all (Parallelism::moe_all_to_all)
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
// `servesim calibrate e2e`: inputs (paths), output (profile file, optional), the bench results' setup
// (model, gpu, tp, precision, engine), parameters, folds, train_fraction, shrink, threads, seed, harness.
// Returns the report with the profile ("profile") and its text ("text").
nlohmann::json calibrate_e2e(const nlohmann::json& args);

// `servesim plan`: topology sweep on instances and the SLO capacity plan.
struct PlanArgs {
  std::string model, model_file, instance, precision, kv_cache_dtype, topology = "both";
  // Closed-loop clients to sweep; "" = 1, 2, 4, ..., 256, then (plan() only) 384, 512, 768, ...
  // up to 4096 for each topology still under both SLO lines at its highest point.
  std::string concurrency;
  std::string statistic = "p90", mtp_acceptance, router = "least_outstanding";
  std::string prefill_instance, decode_instance;  // disaggregated roles on other instance types ("" = --instance)
  int prefill_nodes = 0, decode_nodes = 0;        // nodes of each role's instance type (0 = the fewest that hold it)
  int nodes = 0, prefill_workers = 1, decode_workers = 1, encode_workers = 0, threads = 0;
  std::optional<int> tp, pp, ep, prefill_tp, decode_tp, replicas, max_num_seqs, num_speculative_tokens;
  std::optional<int> dp, prefill_dp, decode_dp;   // attention-DP ranks of every worker / of one role (MoE models)
  std::int64_t seed = 0;
  std::optional<std::int64_t> isl, osl, requests, max_num_batched_tokens;   // unset: required with a model
  std::optional<double> gpu_memory_utilization;
  std::optional<double> ttft_ms, itl_ms, target_tps;                         // unset: required with a model
  double gap_ms = 0;                     // SLO on the gap between streamed tokens (0: none)
  double headroom = 0;                   // spare capacity: size for the target x (1 + headroom)
  // Open loop: --target-rps R with --arrival poisson|gamma|constant sizes each topology by the
  // fewest copies that meet both SLOs when R requests/s arrive (R / copies per copy).
  std::optional<double> target_rps, burstiness;
  std::string arrival;
  // A calibration profile (servesim calibrate e2e --output): applied on the GPU and engine build
  // it was fitted on, as simulate --calibration applies it; without --engine the plan runs its build.
  std::string calibration;
  // The engine profile the topologies run on (vllm, sglang, trtllm or a release; "" = the newest
  // vLLM, or the calibration's build): its defaults, scheduler, kernels and emitted launch files.
  std::string engine;
  // Images on a share of the requests (vision models): "WIDTHxHEIGHT[:COUNT],..." and that share.
  std::string images;
  std::optional<double> image_fraction;
};
// The whole plan: {"topologies": [...], "slo", "target", "sweep": {"columns": {...}}, ...}.
// progress(done, points), if given, is called after each sweep point.
nlohmann::json plan(const PlanArgs& a, const std::function<void(int, int)>& progress = {});
// The same in pieces, so the points can run elsewhere (a Dask cluster): the number of
// (topology, concurrency) points, one point's sweep row, and the plan from all rows in order.
int plan_points(const PlanArgs& a);
nlohmann::json plan_point(const PlanArgs& a, int index);
nlohmann::json plan_finish(const PlanArgs& a, const nlohmann::json& rows);

// `servesim search`: enumerate, prune and simulate configurations; Pareto frontiers per topology
// family and the best configuration under the SLO (sim/studies/search.hpp).
struct SearchArgs {
  std::string model, model_file, gpus, precisions; // model_file: servesim JSON or HF config.json instead of model
                                                   // gpus: CSV of GPU or instance names; precisions "" = all native
  std::string topology = "both", tp = "1,2,4,8", pp = "1", dp = "1,2,4,8", pd_ratios = "1:1,1:2,2:1,1:3,3:1";
  std::string ep;                                  // CSV of expert-parallel sizes ("" = 1 and each layout's TP x DP)
  std::string decode_dp = "1";                     // CSV: attention-DP ranks of disaggregated decode workers
  std::string engines = "vllm";                    // CSV of engine profiles to rank across (vllm, sglang, trtllm, or releases)
  std::string max_num_seqs, max_num_batched_tokens, concurrency = "1,2,4,8,16,32,64,128";
  std::string kv_cache_dtypes = "auto";            // CSV of auto, bf16, fp8: the KV-cache dtypes to try
  std::string prefix_caching;                      // CSV of on, off: prefix caching to try ("" = the engine's default)
  std::string num_speculative_tokens;              // CSV of MTP draft counts to try ("" = 0: off)
  std::string mtp_acceptance;                      // CSV: one acceptance or one per draft position ("" = 0.7)
  std::int64_t shared_prefix_tokens = 0;           // every prompt starts with the same tokens (a system prompt)
  std::string statistic = "p90", router, images;   // images: "WIDTHxHEIGHT[:COUNT],..." per request
                                                   // max_num_seqs, max_num_batched_tokens: CSV; "" = the engine default
  bool expert_parallel = true, mixed_gpus = true, prune = true;
  std::int64_t isl = 0, osl = 0, seed = 0;
  std::optional<std::int64_t> requests;
  // gpu_memory_utilization NaN: not given, each engine's default (vLLM 0.9, SGLang its heuristic, TRT-LLM 0.9 of free memory)
  double ttft_ms = 0, itl_ms = 0, gpu_memory_utilization = std::numeric_limits<double>::quiet_NaN();
  double gap_ms = 0;                               // SLO on the gap between streamed tokens (0: none)
  // The objective's load: NaN = not given (0 or a negative value given is refused, never taken for "not given").
  double total_gpus = std::numeric_limits<double>::quiet_NaN(), target_tps = std::numeric_limits<double>::quiet_NaN(),
         target_rps = std::numeric_limits<double>::quiet_NaN();
  double headroom = 0;                             // spare capacity: size for the target x (1 + headroom)
  int threads = 0;
  std::string calibration;                         // a calibration profile file ("" = none), as PlanArgs::calibration
  std::optional<double> image_fraction;            // share of requests carrying `images` (unset: every request)
  // Open loop: with target_rps, poisson|gamma|constant arrivals at that rate; each candidate gets the
  // fewest copies meeting both SLOs (as PlanArgs::arrival). "" = closed loop over `concurrency`.
  std::string arrival;
  std::optional<double> burstiness;
};
// progress(simulated, pending, pruned, total) between rounds (from the calling thread).
using SearchProgressFn = std::function<void(int, int, int, int)>;
nlohmann::json search(const SearchArgs& a, const SearchProgressFn& progress = {});
// The search's rounds for another executor: next_round() lists the candidates to run (empty:
// done), search_run() simulates one anywhere, add() takes its rows back; report() as search().
class SearchSession {
 public:
  explicit SearchSession(const SearchArgs& a, bool per_instance = false);
  ~SearchSession();
  std::vector<int> next_round();
  void add(int index, const nlohmann::json& rows);
  nlohmann::json report() const;
  int configurations() const;
  // Simulates one candidate's sweep (needs no bounds; thread-safe): rows for add(). A worker that
  // keeps one session per arguments enumerates the candidates once, not once per candidate.
  nlohmann::json run(int index) const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};
nlohmann::json search_run(const SearchArgs& a, int index);
// The arguments as the Python package takes them (servesim.search(**args)'s keys, the bindings'
// search_args): how `--dask` hands a CLI search to python/servesim/dask_search.py.
nlohmann::json search_args_json(const SearchArgs& a);
// What was given, as a report's `input_config` (search_args_json without the thread count).
nlohmann::json search_input_config(const SearchArgs& a);
// `servesim recommend`: the search with one winner per instance type (set) for a load target
// (target_tps or target_rps required): "recommendations", cheapest first — GPUs, nodes, $/hour,
// $ per million output tokens, power (TDP upper bound) and joules per output token, SLO headroom.
nlohmann::json recommend(const SearchArgs& a, const SearchProgressFn& progress = {});
// The recommendations of a per-instance search report (SearchSession(args, true).report()).
nlohmann::json recommend_table(const nlohmann::json& report);

// Deployment artefacts (sim/api/deploy.cpp). A deployment description is the JSON object a plan,
// search or recommend result carries under "deployment": model, precision, engine knobs, kind,
// workers [{role, count, tp, pp, ep, instance, gpu}], copies, instances {type: nodes}, isl, osl,
// concurrency (clients of one copy) and the predicted sweep of one copy.
// Writes vllm-serve.sh, dynamo-deployment.yaml, aiperf-sweep.sh, predicted.csv, nccl-<instance>.sh,
// nccl-<instance>-expected.csv and deployment.json into `dir` (created); returns the paths.
// The description is checked first (positive counts in range, known roles and instances, one
// predicted figure per point); `dir` must be new, empty or hold only an earlier emitted set, which
// is replaced whole. All files appear or none (DeploymentSet).
nlohmann::json emit_deployment(const nlohmann::json& deployment, const std::string& dir);
// Several deployments' files (recommend's DIR/<instance>/, plan's DIR/<topology>/) and any other
// output of the same run (--output, --plot: files()) written as one set: nothing appears until
// commit(); destroyed without commit() it removes its temporaries and the folders it created.
class DeploymentSet {
 public:
  explicit DeploymentSet(std::string flag = "--emit");
  DeploymentSet(const DeploymentSet&) = delete;
  DeploymentSet& operator=(const DeploymentSet&) = delete;
  ~DeploymentSet();
  // Checks a folder that will hold deployment folders (recommend's DIR): new, or holding only
  // folders and an earlier set's files.
  void prepare(const std::string& dir, bool nested);
  void add(const nlohmann::json& deployment, const std::string& dir);
  // `servesim planner --emit`: the engine script, the Dynamo manifest with its Planner service
  // (replicas: the opening fleet; the rule and the per-role bounds the simulated day needed),
  // planner.json (those bounds) and deployment.json. `deployment` as add() takes it, without the
  // predicted sweep (concurrency, predicted).
  void add_planner(const nlohmann::json& deployment, const nlohmann::json& planner, const std::string& dir);
  // index.json in a nested set's top folder (recommend --emit): what each folder holds.
  void put_index(const std::string& dir, const nlohmann::json& index);
  AtomicFiles& files() { return files_; }
  nlohmann::json commit();   // the deployment files' paths

 private:
  void put(const std::string& dir, const std::string& name, const std::string& text, bool exec = false);
  void put_engine(const nlohmann::json& d, const std::string& dir);   // the engine's launch script(s)
  std::string flag_;
  AtomicFiles files_;
  std::vector<std::string> created_, stale_, exec_, stale_dirs_, added_dirs_;
  nlohmann::json paths_ = nlohmann::json::array();
  bool committed_ = false;
};
// `servesim nccl`: the nccl-tests all_reduce_perf command for `nodes` instances and the time,
// algbw and busbw servesim expects at each message size (powers of two from min to max bytes).
nlohmann::json nccl(const std::string& instance, int nodes, double min_bytes = 8, double max_bytes = 16.0 * (1ull << 30));
std::string nccl_table(const nlohmann::json& nccl_result);
// Writes through a temporary file in the same folder and a rename: readers never see half a file.
void write_file_atomically(const std::string& path, const std::string& text);

}  // namespace servesim::api
