#include "sim/engine/worker.hpp"

#include <algorithm>
#include <cmath>
#include <stdexcept>

namespace servesim::sim {

std::string_view to_string(WorkerRole r) {
  switch (r) {
    case WorkerRole::aggregated: return "aggregated";
    case WorkerRole::prefill_only: return "prefill";
    case WorkerRole::decode_only: return "decode";
  }
  return "?";
}

Worker::Worker(const EngineConfig& cfg, const models::StepCostModel& cost, std::int64_t kv_blocks,
               const models::KvDemand& kv_demand, std::uint64_t seed)
    : sched_(cfg, kv_blocks, kv_demand, seed),
      cost_(&cost),
      overhead_s_(cfg.overhead_per_step_s()),
      eager_launch_s_(cost.eager_launch_seconds()),
      graph_tokens_(cfg.enforce_eager ? 0 : cfg.max_cudagraph_capture_size) {}

double Worker::start_step(double now_s) {
  start_pending_ = false;
  if (busy_ || !sched_.has_work()) return -1;
  const models::StepBatch* batch = &sched_.schedule(now_s);
  // A step that only preempted admits nothing (vLLM skips admissions after a preemption); the
  // engine would simply run its next schedule() at once, so do that here.
  if (sched_.num_scheduled() == 0 && sched_.has_work()) batch = &sched_.schedule(now_s);
  if (sched_.num_scheduled() == 0) {
    // Nothing runs and nothing holds blocks (a prefill worker's handed-off requests hold theirs
    // until the decode side has pulled them, and wake it when released): then it never fits.
    if (sched_.num_running() == 0 && sched_.pool().used() == 0 && sched_.has_work())
      throw std::logic_error("scheduler: waiting request can never be admitted");
    return -1;
  }
  // A step beyond the captured CUDA-graph sizes (or with graphs off) launches every kernel from the
  // CPU: the GPU waits for the launches when they take longer than the kernels themselves.
  double gpu_s = step_seconds(*batch);
  if (batch->prefill_tokens + std::int64_t(batch->decode_seqs) * batch->tokens_per_decode_seq > graph_tokens_)
    gpu_s = std::max(gpu_s, eager_launch_s_);
  const double seconds = gpu_s + overhead_s_;
  busy_ = true;
  step_start_s_ = now_s;
  ++stats_.steps;
  stats_.scheduled_seqs += sched_.num_scheduled();
  stats_.batched_tokens += batch->prefill_tokens + std::int64_t(batch->decode_seqs) * batch->tokens_per_decode_seq;
  stats_.kv_block_seconds += double(sched_.pool().used()) * seconds;
  stats_.peak_kv_blocks = std::max(stats_.peak_kv_blocks, sched_.pool().used());
  return seconds;
}

double Worker::step_seconds(const models::StepBatch& batch) {
  const int d = batch.decode_seqs;
  if (batch.prefill_seqs != 0 || batch.vision_tiles != 0 || d <= 0) return cost_->seconds(batch);
  if (static_cast<std::size_t>(d) >= decode_lines_.size()) decode_lines_.resize(static_cast<std::size_t>(d) + 1);
  DecodeLine& l = decode_lines_[static_cast<std::size_t>(d)];
  if (l.state == 0) {
    // Probe at 1 and 64k tokens of context per sequence; accept the line when it predicts the
    // model at 4k per sequence to 1e-12 (relative).
    models::StepBatch probe = batch;
    auto at = [&](std::int64_t per_seq) {
      probe.decode_context_tokens = per_seq * d;
      return cost_->seconds(probe);
    };
    const double lo = at(1), hi = at(65536), mid = at(4096);
    l.b = (hi - lo) / (double(d) * 65535.0);
    l.a = lo - l.b * d;
    const double pred = l.a + l.b * (4096.0 * d);
    l.state = std::abs(pred - mid) <= 1e-12 * std::abs(mid) ? 1 : -1;
  }
  if (l.state < 0) return cost_->seconds(batch);
  return l.a + l.b * double(batch.decode_context_tokens);
}

void Worker::finish_step(double now_s) {
  sched_.complete(now_s);
  busy_ = false;
  stats_.busy_s += now_s - step_start_s_;
  stats_.preemptions = sched_.preemptions();
}

double Worker::kv_load() const {
  const auto& pool = sched_.pool();
  if (pool.capacity() == 0) return 0;
  const int bs = sched_.config().block_size;
  return (double(pool.used()) + double(sched_.waiting_tokens()) / bs) / double(pool.capacity());
}

}  // namespace servesim::sim
