// A serving topology deployed on instances: aggregated (N engine replicas behind a router) or
// disaggregated (x prefill + y decode workers, optionally encode workers for vision inputs),
// each worker with its own TP/PP/EP shape, placed on `nodes` instances. Builds the memory plans
// and step-cost models once and runs workloads on it.
#pragma once
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "hwmodels/catalog.hpp"
#include "models/memory.hpp"
#include "models/model_spec.hpp"
#include "models/step_cost.hpp"
#include "sim/decoding/mtp.hpp"
#include "sim/engine/engine_config.hpp"
#include "sim/calibration.hpp"
#include "workloads/frontend.hpp"
#include "sim/links/placement.hpp"
#include "sim/metrics.hpp"
#include "sim/router/router.hpp"
#include "sim/studies/plan.hpp"
#include "sim/topology/disagg_cluster.hpp"
#include "sim/topology/step_cost_cache.hpp"
#include "sim/session_metrics.hpp"
#include "workloads/workload.hpp"

namespace servesim::sim {

struct TopologyChoice {
  enum class Kind { aggregated, disaggregated } kind = Kind::aggregated;
  int replicas = 0;                       // aggregated: 0 = as many as the nodes hold
  models::Parallelism agg, prefill, decode, encode;
  int prefill_workers = 1, decode_workers = 1, encode_workers = 0;
  std::string name() const;               // "aggregated", "disaggregated-1p1d", "disaggregated-1e2p1d"
};

struct DeploymentSpec {
  const models::ModelSpec* model = nullptr;
  const hw::InstanceSpec* instance = nullptr;
  const hw::GpuSpec* gpu = nullptr;       // the instance's GPU
  int nodes = 1;
  // Disaggregated only: prefill (and encode) workers and decode workers on their own instance
  // types, e.g. B200 prefill and H200 decode. nullptr = `instance`. When the two differ each role
  // gets its own nodes (0 = the fewest that hold its workers) and handoffs cross EFA.
  const hw::InstanceSpec* prefill_instance = nullptr;
  const hw::InstanceSpec* decode_instance = nullptr;
  int prefill_nodes = 0, decode_nodes = 0;
  hw::Precision weights = hw::Precision::bf16;
  hw::Precision kv_dtype = hw::Precision::bf16;
  EngineConfig engine;                    // vLLM knobs shared by every worker (role set per worker)
  // Client + API-server path of aggregated deployments and the prefill -> decode path of
  // disaggregated ones (sim::profile_frontend); nullopt: requests reach the engine the instant they
  // are sent, and a prefilled request its decode worker (disaggregated deployments have no client /
  // API-server model).
  std::optional<workloads::FrontendConfig> frontend;
  MtpConfig mtp;                          // speculative decoding on decode-carrying workers
  RouterPolicy router = RouterPolicy::least_outstanding;
  KvRouterConfig kv_router;
  // KV offload tiers beside each aggregated replica's or prefill worker's pool (sim/kv_offload_setup.hpp).
  OffloadConfig offload;
  std::uint64_t seed = 0;
  // A user's calibration (sim/calibration.hpp): each role takes the parts that transfer to its own
  // GPU and the engine build (spec.engine.engine_profile), as `simulate --calibration` applies them.
  std::shared_ptr<const CalibrationProfile> calibration;
  // Step-cost models shared with other deployments of the same study (a search's candidates);
  // nullptr: this deployment builds its own.
  std::shared_ptr<StepCostCache> step_costs;
};

// Step cost with MTP drafts added (sim/decoding/mtp.hpp); the identity when MTP is off.
class MtpStepCost : public models::StepCostModel {
 public:
  MtpStepCost(std::shared_ptr<const models::StepCostModel> inner, MtpConfig mtp) : inner_(std::move(inner)), mtp_(std::move(mtp)) {}
  double seconds(const models::StepBatch& b) const override { return step_seconds_with_mtp(*inner_, b, mtp_); }
  double encoder_seconds(int tiles) const override { return inner_->encoder_seconds(tiles); }
  models::StepTime breakdown(const models::StepBatch& b) const override { return inner_->breakdown(b); }
  std::string provenance() const override { return inner_->provenance(); }
  double eager_launch_seconds() const override { return inner_->eager_launch_seconds(); }
  LaunchCounts launch_counts() const override { return inner_->launch_counts(); }

 private:
  std::shared_ptr<const models::StepCostModel> inner_;
  MtpConfig mtp_;
};

struct PointResult {
  Summary summary;
  TransferStats transfers;                // disaggregated only
  std::vector<WorkerStats> workers;       // aggregated: replicas; disaggregated: prefill..., decode...
  double end_s = 0;
  std::int64_t routed_blocks = 0, routed_overlap_blocks = 0;   // the KV router's (RouterPolicy::kv)
  std::int64_t routed_offload_blocks = 0;
  std::vector<TurnSummary> turns;         // multi-turn sessions: per turn index
  std::vector<OffloadTierStats> offload;  // per tier, summed over the workers that have tiers
};

class Deployment {
 public:
  // Throws Error when a worker does not fit its GPUs or the workers do not fit the nodes.
  Deployment(const TopologyChoice& topo, const DeploymentSpec& spec);

  const std::string& name() const { return name_; }
  bool disaggregated() const { return topo_.kind == TopologyChoice::Kind::disaggregated; }
  bool mixed_instances() const { return placement_->groups().size() > 1; }
  int gpus() const { return placement_->gpus_used(); }
  std::int64_t kv_blocks() const { return memory_plan().num_kv_blocks * memory_plan().dp; }   // every attention-DP rank's pool
  // The memory plan of a replica (disaggregated: of a decode worker).
  const models::MemoryPlan& memory_plan() const { return disaggregated() ? decode_.plan : agg_.plan; }
  const Placement& placement() const { return *placement_; }
  const OffloadConfig& offload() const { return spec_.offload; }
  TopologyUnit unit() const;              // what one copy costs, for the planner
  std::string describe() const;           // workers, shapes and placement in one line
  // The step-cost model's provenance (a replica's; disaggregated: a decode worker's).
  std::string calibration() const;
  // What of spec.calibration applied to each role's GPU (empty without one): one line per GPU.
  std::string user_calibration() const;
  // Whether the calibration applied on `gpu` (catalogue name, any case) with its own bands.
  bool calibrated_on(const std::string& gpu) const;

  // Runs one workload (a fresh cluster each call).
  PointResult run(const workloads::WorkloadConfig& workload) const;
  // The same into `metrics` (for per-request records, input config, worker samples).
  PointResult run(const workloads::WorkloadConfig& workload, MetricsCollector& metrics) const;
  // A disaggregated topology on a given workload, `setup` called on the cluster before it runs
  // (a fleet controller: sim/studies/planner.hpp).
  PointResult run_disaggregated(workloads::Workload& workload, MetricsCollector& metrics,
                                const std::function<void(DisaggregatedCluster&)>& setup) const;
  // One worker of a role (disaggregated: prefill or decode; else a replica): its GPUs and weights per GPU.
  int role_gpus(WorkerRole role) const;
  double role_weight_bytes(WorkerRole role) const;

 private:
  struct Pool {
    models::Parallelism par;
    models::MemoryPlan plan;
    std::shared_ptr<const models::StepCostModel> cost;
  };
  Pool make_pool(const models::Parallelism& par, bool decodes, const hw::GpuSpec& gpu) const;
  EngineConfig engine_for(WorkerRole role) const;
  EngineConfig engine_for(WorkerRole role, const hw::GpuSpec& gpu) const;
  std::shared_ptr<const models::StepCostModel> step_cost(const hw::GpuSpec& gpu, const models::Parallelism& par,
                                                         const EngineConfig& e) const;

  TopologyChoice topo_;
  DeploymentSpec spec_;
  std::string name_;
  int replicas_ = 0;
  Pool agg_, prefill_, decode_, encode_;
  const hw::GpuSpec* prefill_gpu_ = nullptr;
  const hw::GpuSpec* decode_gpu_ = nullptr;
  std::unique_ptr<Placement> placement_;
  std::optional<workloads::FrontendConfig> frontend_;   // spec.frontend with the calibration's host time per request
};

// The planner's row for one run: p50/p90/p99 TTFT and ITL in ms, output tokens/s in total, per
// GPU and per user (aiperf's output_token_throughput_per_user, mean over requests).
// open_loop: the run had an offered rate, so it can be overloaded (sim::overloaded); a closed
// loop's clients wait for their answers and its queue cannot grow.
SweepRow sweep_row(const std::string& topology, int concurrency, const Summary& s, int gpus, bool open_loop = false);
// The same from a point's whole run, also whether it ran in a prefill train (not where a KV cache
// was full: the full cache is then the queue) and the prefix cache's share of its prompt tokens.
SweepRow sweep_row(const std::string& topology, int concurrency, const PointResult& p, int gpus, bool open_loop = false);

}  // namespace servesim::sim
