// An engine worker: one replica (TP × PP × EP GPUs) running a vLLM scheduler step after step.
// Step time = StepCostModel::seconds(batch) + the per-step CPU overhead; the worker keeps the
// statistics metrics report per replica (busy fraction, batch size, KV utilisation).
#pragma once
#include <cstdint>
#include <vector>

#include "models/step_cost.hpp"
#include "sim/engine/engine_config.hpp"
#include "sim/scheduler/vllm_scheduler.hpp"

namespace servesim::sim {

struct WorkerStats {
  double busy_s = 0;                 // time inside steps
  std::int64_t steps = 0;
  std::int64_t scheduled_seqs = 0;   // summed over steps (mean batch = scheduled_seqs / steps)
  std::int64_t batched_tokens = 0;   // summed over steps
  double kv_block_seconds = 0;       // used blocks integrated over busy time
  std::int64_t peak_kv_blocks = 0;
  std::int64_t preemptions = 0;
};

class Worker {
 public:
  Worker(const EngineConfig& cfg, const models::StepCostModel& cost, std::int64_t kv_blocks, const models::KvDemand& kv_demand,
         std::uint64_t seed);

  VllmScheduler& scheduler() { return sched_; }
  const VllmScheduler& scheduler() const { return sched_; }
  bool busy() const { return busy_; }
  bool start_pending() const { return start_pending_; }
  void set_start_pending(bool v) { start_pending_ = v; }

  // Forms a batch at `now_s`; returns the step's duration, or < 0 when nothing can run.
  double start_step(double now_s);
  // The step in flight ends at `now_s`: tokens out (see scheduler().outputs()).
  void finish_step(double now_s);

  const WorkerStats& stats() const { return stats_; }
  std::int64_t outstanding() const { return sched_.num_running() + sched_.num_waiting(); }
  // Fraction of KV blocks held plus those queued prompts will need: the router's "KV load".
  double kv_load() const;

 private:
  // GPU time of `batch`. A pure-decode step of D sequences costs a(D) + b(D) * context tokens
  // (attention reads the KV linearly, everything else depends on D alone): a and b are measured
  // once per D from the cost model, checked for that linearity at a third point, and reused, so
  // the hot decode loop does not re-evaluate every layer kind's curve each step.
  double step_seconds(const models::StepBatch& batch);
  struct DecodeLine { double a = 0, b = 0; std::int8_t state = 0; };  // 0 unknown, 1 linear, -1 not

  VllmScheduler sched_;
  const models::StepCostModel* cost_;
  double overhead_s_;
  double eager_launch_s_;        // one forward's kernels launched eagerly (measured cost per kernel)
  std::int64_t graph_tokens_;    // steps of more tokens than this run without a CUDA graph
  bool busy_ = false, start_pending_ = false;
  double step_start_s_ = 0;
  WorkerStats stats_;
  std::vector<DecodeLine> decode_lines_;  // by decode_seqs
};

}  // namespace servesim::sim
