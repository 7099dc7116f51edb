// Configuration search: which GPU, precision, parallel layout, aggregated or disaggregated xPyD
// split and engine knobs serve a model best under TTFT/ITL SLOs. Candidates are enumerated,
// checked against the memory plan, bounded analytically (step-cost lower bounds give upper
// bounds on throughput and lower bounds on latency), simulated over a concurrency sweep in
// deterministic rounds (best bound first; after each round every candidate whose bound cannot
// beat the best simulated one is dropped), and reported as Pareto frontiers of output tok/s per
// GPU against tok/s per user per topology family, plus the best configuration under the SLO.
// The rounds depend only on the inputs, never on how many threads or machines simulate them.
#pragma once
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "hwmodels/catalog.hpp"
#include "models/memory.hpp"
#include "models/model_spec.hpp"
#include "models/step_cost.hpp"
#include "sim/calibration.hpp"
#include "sim/engine/engine_config.hpp"
#include "sim/studies/plan.hpp"
#include "sim/topology/deployment.hpp"
#include "workloads/multimodal.hpp"

namespace servesim::sim {

// What to enumerate. Every list is a set of alternatives; the search takes their product.
struct SearchSpace {
  const models::ModelSpec* model = nullptr;
  std::vector<const hw::InstanceSpec*> instances;   // one per GPU type, in the user's order
  std::vector<hw::Precision> precisions;             // empty: bf16, fp8, nvfp4 + the model's published checkpoint formats
  std::vector<int> tp = {1, 2, 4, 8}, pp = {1};      // TP within a node; PP stages across nodes (aggregated only)
  bool expert_parallel = true;                       // MoE models: also EP = TP x DP (experts sharded whole)
  // MoE models: the expert-parallel sizes to try, each where it divides a layout's TP x DP and the
  // experts (between 1 and TP x DP: MoE TP x EP, which TensorRT-LLM and SGLang launch); empty: 1
  // and TP x DP (expert_parallel).
  std::vector<int> ep;
  std::vector<int> dp = {1, 2, 4, 8};                // MoE models: attention data-parallel ranks of an aggregated
                                                     // replica (without PP, tp x dp within a node)
  std::vector<int> decode_dp = {1};                  // ... of a disaggregated decode worker (1: none; opt-in, each
                                                     // value multiplies the disaggregated candidates)
  bool aggregated = true, disaggregated = true;
  bool mixed_gpus = true;                            // disaggregated: prefill on one GPU type, decode on another
  std::vector<std::pair<int, int>> pd_ratios = {{1, 1}, {1, 2}, {2, 1}, {1, 3}, {3, 1}};   // x prefill : y decode
  // Engine profiles to rank across ("vllm", "sglang-0.5", ...: servesim list engines), each
  // candidate run on one of them. A knob value 0 is that engine's default for the GPU.
  std::vector<std::string> engines = {"vllm"};
  std::vector<int> max_num_seqs = {EngineConfig{}.max_num_seqs};
  std::vector<std::int64_t> max_num_batched_tokens = {EngineConfig{}.max_num_batched_tokens};
  // KV-cache dtypes: "auto" (the checkpoint's: FP8 for FP8/NVFP4 ModelOpt checkpoints, else BF16),
  // "bf16", "fp8"; each resolved per precision, the same dtype tried once.
  std::vector<std::string> kv_cache_dtypes = {"auto"};
  // Prefix caching (--prefix-caching on,off): -1 the engine's default for the model (vLLM: on,
  // off for hybrid Mamba models), 0 off, 1 on; each value a candidate of its own.
  std::vector<int> prefix_caching = {-1};
  // MTP speculative decoding on the decode-carrying workers (--num-speculative-tokens 0,1,3): each
  // draft count a candidate of its own (0: off), at the acceptance per draft position given
  // (--mtp-acceptance; one value for every position, default 0.7, as simulate and plan take it).
  std::vector<int> speculative_tokens = {0};
  std::vector<double> mtp_acceptance = {0.7};
  double gpu_memory_utilization = 0.9;   // < 0: the engine's (SGLang: its mem_fraction_static heuristic)
  RouterPolicy router = RouterPolicy::least_outstanding;
  // A user's calibration: each candidate's roles take the parts that transfer to their GPU and
  // engine build (candidates on other GPUs run uncalibrated, and the report says which applied).
  std::shared_ptr<const CalibrationProfile> calibration;
};

struct SearchTraffic {
  std::int64_t isl = 0, osl = 0;                     // text tokens in, tokens out (fixed per request)
  workloads::MultimodalConfig multimodal;            // images / video every request carries
  std::int64_t shared_prefix_tokens = 0;             // every prompt starts with the same tokens (a system prompt)
  std::vector<int> concurrency = {1, 2, 4, 8, 16, 32, 64, 128};   // clients per decode-carrying worker
  std::optional<std::int64_t> requests;              // measured requests per point (default: capacity_requests, sim/studies/plan.hpp)
  std::uint64_t seed = 0;
  // Open loop (--arrival with --target-rps): instead of the concurrency sweep, each candidate gets
  // the fewest copies that meet both SLOs when `rate` requests/s arrive split evenly over them
  // (fewest_copies, the open-loop plan's rule); its rows are the evaluated copy counts.
  std::optional<workloads::Arrival> arrival;
  double rate = 0, burstiness = 1;
  bool open_loop() const { return arrival.has_value(); }
};

enum class SearchObjective {
  tps_per_gpu,   // no load given: the most output tok/s per GPU under the SLO
  total_gpus,    // --total-gpus N: the most output tok/s from at most N GPUs
  target_tps,    // --target-tps X (or --target-rps R x OSL): the cheapest deployment that serves X
};

struct SearchGoal {
  double ttft_ms = 0, itl_ms = 0;
  double gap_ms = 0;   // on the gap between streamed tokens (--gap-ms); 0: none
  Statistic statistic = Statistic::p50;
  SearchObjective objective = SearchObjective::tps_per_gpu;
  double total_gpus = 0, target_tps = 0;
  double target_rps = 0;   // --target-rps R (target_tps = R x OSL), open loop or read closed loop; 0: not given
  double headroom = 0;     // --headroom: spare capacity; candidates are sized for sized_tps()
  std::string target_flag = "--target-tps";   // the option the target came from (errors name it)
  double sized_tps() const { return target_tps * (1 + headroom); }   // the load each candidate is sized for
  bool per_instance = false;   // one winner per instance type (set), as `recommend` reports
  void validate() const;
};

// One candidate configuration: a topology of workers on instances, a precision and engine knobs.
struct SearchConfig {
  int index = 0;
  TopologyChoice topo;                               // aggregated: replicas = 1 (one engine replica per copy)
  const hw::InstanceSpec* instance = nullptr;        // aggregated, or prefill (+encode) workers
  const hw::InstanceSpec* decode_instance = nullptr; // decode workers (== instance unless mixed)
  hw::Precision precision = hw::Precision::bf16;
  hw::Precision kv_dtype = hw::Precision::bf16;      // the KV cache's element type
  std::string engine = "vllm-0.19";                  // the engine profile it runs on
  int max_num_seqs = 256;
  std::int64_t max_num_batched_tokens = 8192;
  int prefix_caching = -1;                           // as SearchSpace::prefix_caching (-1: the engine's default)
  int speculative_tokens = 0;                        // MTP drafts a decode step (0: off)
  int gpus = 0;                                      // one copy
  int nodes = 0, decode_nodes = 0;                   // nodes of each type one copy occupies when placed alone
  std::optional<double> usd_per_hour;                // one copy placed alone
  std::string family;                                // "aggregated H200", "disaggregated B200+H200"
  std::string label;                                 // short unique description
  std::string group;                                 // instance type(s), for per-instance winners

  bool disaggregated() const { return topo.kind == TopologyChoice::Kind::disaggregated; }
  int decode_workers() const { return disaggregated() ? topo.decode_workers : 1; }
  int clients(int concurrency) const { return concurrency * decode_workers(); }
  nlohmann::json to_json() const;
};

enum class Pruned { no, does_not_fit, cannot_meet_slo, cannot_win };
std::string_view to_string(Pruned p);

// Analytic bounds of one candidate, from the step-cost model without simulating.
struct SearchBound {
  bool fits = false;
  std::string reason;                    // why it does not fit / cannot meet the SLO
  double ttft_lb_ms = 0, itl_lb_ms = 0;  // no request can do better
  std::vector<double> tps_ub;            // per swept concurrency: output tok/s of one copy cannot exceed
  double tps_ub_slo = 0;                 // the most one copy could serve under the SLO (0: cannot meet it)
  bool prefix_caching = false;           // as the engine resolves it
  int block_tokens = 0;                  // the KV block of the worker that prefills (hybrid models: thousands of tokens)
  nlohmann::json to_json() const;
};

// What a deployment of copies of one configuration costs for the goal.
struct SearchScore {
  bool feasible = false;
  int slo_concurrency = 0;               // clients of one copy at the rightmost point under both SLOs (open loop: 0)
  double rate_per_copy = 0;              // open loop: requests/s one copy is offered (0: closed loop)
  double in_flight = 0;                  // open loop: requests in flight per copy, rate x latency (Little's law)
  double tps_per_copy = 0, tps_per_gpu = 0, tps_per_user = 0;
  double ttft_ms = 0, itl_ms = 0;        // at that point, at the SLO statistic
  double gap_ms = 0;                     // the gap between streamed tokens there, at the SLO statistic
  std::int64_t copies = 0, gpus = 0, instances = 0;   // at most 10^9 copies (kMaxCopies): no overflow
  std::optional<double> usd_per_hour;
  std::vector<std::pair<std::string, std::int64_t>> nodes_by_instance;   // instance type -> nodes of the deployment
  double served_tps = 0;                 // total_gpus: what the copies serve; target: the target
  LimitedBy limited_by = LimitedBy::none;
  bool prefill_train = false;            // the point read (or the next) ran in a PREFILL TRAIN
  bool kv_full = false;                  // the point whose TTFT broke the SLO had a full KV cache (SweepRow::kv_full)
  bool gap_only = false;                 // its ITL side broke on the token gap alone (--gap-ms; the mean ITL held)
  bool fewer_overloaded = false;         // open loop: one copy fewer could not keep up (its queue grew)
  std::int64_t fewer_copies = 0;         // open loop: the most copies tried below `copies` that failed the SLO (0: none)
  double prefix_hit = 0;                 // share of prompt tokens the prefix cache served at the point read
  nlohmann::json to_json() const;
};

struct SearchProgress { int simulated = 0, pending = 0, pruned = 0, total = 0; };

class Search {
 public:
  // Enumerates the candidates (cheap: no memory plans or cost models yet). Throws Error on bad input.
  Search(SearchSpace space, SearchTraffic traffic, SearchGoal goal, bool prune = true);

  const std::vector<SearchConfig>& configs() const { return configs_; }
  // The candidates to simulate next, in index order (empty: the search is done). Computes the
  // bounds on the first call. Every index of a round must be add()ed before the next call.
  std::vector<int> next_round();
  // Simulates one candidate's concurrency sweep (thread-safe, needs no bounds): one row per point.
  std::vector<SweepRow> run(int index) const;
  void add(int index, std::vector<SweepRow> rows);
  SearchProgress progress() const;
  // The report: configurations, bounds, scores, frontiers, winners and the sweep of every
  // simulated candidate. Valid once next_round() returned empty.
  nlohmann::json report() const;
  // The deployment description of a simulated candidate sized for the goal (copies from its
  // score), as api::emit_deployment reads it.
  nlohmann::json deployment(int index) const;

  // Candidates per round. Without pruning nothing depends on the rounds but the progress shown
  // between them, so they are larger: fewer barriers for a cluster or a thread pool to wait at.
  static constexpr int kRoundSize = 16, kRoundSizeNoPrune = 256;
  // Limits that keep a search's memory and time bounded: configurations enumerated (about 5 KB
  // each before any simulation), copies of one configuration a goal may take, requests of one
  // point and requests over the whole space (about 2 us and 90 bytes each when simulated).
  static constexpr std::size_t kMaxConfigurations = 50000;
  static constexpr std::int64_t kMaxCopies = 1000000000;
  static constexpr std::int64_t kMaxRequestsPerPoint = 10000000;
  static constexpr double kMaxSpaceRequests = 1e9;

 private:
  struct State {
    SearchBound bound;
    Pruned pruned = Pruned::no;
    bool simulated = false;
    std::vector<SweepRow> rows;
    SearchScore score;
  };
  void enumerate();
  void compute_bounds();
  SearchBound bound_of(const SearchConfig& c);
  SearchScore score_of(const SearchConfig& c, const std::vector<SweepRow>& rows) const;
  SearchScore score_bound(const SearchConfig& c, double tps_per_copy) const;
  // True when score a ranks strictly before b (ties broken by index by the caller).
  bool better(const SearchScore& a, const SearchScore& b) const;
  bool cannot_beat(const SearchConfig& c, const SearchBound& b, const SearchScore& incumbent) const;
  DeploymentSpec deployment_spec(const SearchConfig& c) const;
  // The engine of a candidate's workers on `gpu` at tensor parallel `tp`: its profile under the
  // configuration's knobs.
  // The engine of one role of `c` on `gpu` at TP `tp`; `decodes`: a decode-carrying role, which
  // runs the candidate's MTP drafts (their weights and KV lookahead in its memory plan).
  EngineConfig engine_of(const SearchConfig& c, const hw::GpuSpec& gpu, int tp, bool decodes = true) const;
  EngineConfig engine_of(const SearchConfig& c) const;
  std::int64_t prompt_tokens() const;
  int vision_tiles() const;
  const models::StepCostModel& cost(const hw::GpuSpec& gpu, hw::Precision p, hw::Precision kv, const models::Parallelism& par,
                                    const hw::KernelTables& tables, const std::string& engine);
  std::string group_of(int index) const;
  bool calibrated(const SearchConfig& c) const;   // the calibration applies to one of its roles

  SearchSpace space_;
  SearchTraffic traffic_;
  SearchGoal goal_;
  bool prune_ = true;
  std::vector<SearchConfig> configs_;
  int precision_pairs_ = 0, layouts_no_engine_runs_ = 0;   // enumerate(): what an empty space lacked
  std::vector<State> state_;
  std::vector<int> order_;     // candidates by bound, best first
  bool bounded_ = false;
  // The step-cost models of the bounds and of every candidate's deployment, each built once.
  std::shared_ptr<StepCostCache> costs_ = std::make_shared<StepCostCache>();
};

}  // namespace servesim::sim
