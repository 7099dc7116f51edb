#include "sim/engine/worker.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <stdexcept>

namespace servesim::sim {

bool is_prefill_train(const std::vector<WorkerStats>& workers, double end_s) {
  std::int64_t prompts = 0, behind = 0;
  double prefill_s = 0;
  int prefilling = 0;
  for (const auto& w : workers) {
    prompts += w.prompts;
    behind += w.prompts_behind_prefill;
    prefill_s += w.prefill_step_s;
    prefilling += w.prefill_step_s > 0;
  }
  if (prompts == 0) return false;
  const double duty = end_s > 0 && prefilling > 0 ? std::min(1.0, prefill_s / (end_s * prefilling)) : 0.0;
  return is_prefill_train(double(behind) / double(prompts), duty);
}

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
      overhead_per_seq_s_(cfg.step_overhead_per_seq_s),
      step_gpu_s_(cfg.step_gpu_s),
      forward_floor_s_(cfg.forward_floor_s),
      async_(cfg.async_scheduling),
      launches_on_scheduler_thread_(cfg.launches_on_scheduler_thread) {
  dp_ = std::max(1, cfg.lockstep_dp);
  const auto lc = cost.launch_counts();
  const double per_kernel = cfg.enforce_eager ? cfg.launch_per_kernel_eager_s : cfg.launch_per_kernel_s;
  launch_full_s_ = lc.kernels > 0 && per_kernel > 0 ? lc.kernels * per_kernel : cost.eager_launch_seconds();
  // Block-FP8 dense linears issued from the host cost their measured eager call, not one launch.
  if (lc.kernels > 0 && per_kernel > 0 && cfg.launch_per_fp8_block_linear_s > 0)
    launch_full_s_ += lc.fp8_block_linears * (cfg.launch_per_fp8_block_linear_s - per_kernel);
  launch_piecewise_s_ = per_kernel > 0 ? (double(lc.attention_layers) * cfg.eager_kernels_per_attention_layer +
                                          double(lc.mamba_layers) * cfg.eager_kernels_per_mamba_layer) * per_kernel
                                       : 0.0;
  const bool graphs = !cfg.enforce_eager && cfg.cudagraph_mode != "NONE";
  if (graphs) capture_ = cfg.cudagraph_capture_sizes;
  graph_tokens_ = !graphs ? 0 : capture_.empty() ? cfg.max_cudagraph_capture_size : capture_.back();
  full_graphs_ = cfg.cudagraph_mode != "PIECEWISE";
  decode_only_graphs_ = cfg.cudagraph_mode == "FULL_DECODE_ONLY";
  padding_ = cfg.cudagraph_padding;
  // The capture size of every step size up to the largest (a step reads it instead of searching).
  if (!capture_.empty() && graph_tokens_ <= (std::int64_t(1) << 16)) {
    padded_.resize(static_cast<std::size_t>(graph_tokens_) + 1);
    for (std::int64_t t = 0; t <= graph_tokens_; ++t)
      padded_[static_cast<std::size_t>(t)] = *std::lower_bound(capture_.begin(), capture_.end(), t);
  }
  sched_.set_deferred_release(async_ && cfg.role != WorkerRole::prefill_only);
}

std::int64_t Worker::padded_tokens(std::int64_t tokens) const {
  if (tokens > graph_tokens_ || capture_.empty()) return tokens;
  if (tokens >= 0 && tokens < static_cast<std::int64_t>(padded_.size())) return padded_[static_cast<std::size_t>(tokens)];
  return *std::lower_bound(capture_.begin(), capture_.end(), tokens);
}

std::int64_t Worker::rank_aligned_tokens(std::int64_t tokens, int per_seq) const {
  if (dp_ <= 1 || padding_ || per_seq <= 0) return tokens;
  const std::int64_t seqs = (tokens + per_seq - 1) / per_seq;
  return (seqs + dp_ - 1) / dp_ * dp_ * per_seq;
}

bool Worker::replays_full_graph(std::int64_t tokens, bool uniform_decode, int per_seq) const {
  if (uniform_decode) tokens = rank_aligned_tokens(tokens, per_seq);
  if (!uniform_decode || !full_graphs_ || tokens > graph_tokens_) return false;
  // Without padding (TRT-LLM's default) only a batch of a captured size replays (with attention
  // DP: every rank at the busiest rank's share, a captured size per rank).
  return padding_ || capture_.empty() || padded_tokens(tokens) == tokens;
}

double Worker::launch_seconds(std::int64_t tokens, bool uniform_decode, int per_seq) const {
  return launch_seconds_given(replays_full_graph(tokens, uniform_decode, per_seq), tokens, uniform_decode);
}

double Worker::launch_seconds_given(bool full_graph, std::int64_t tokens, bool uniform_decode) const {
  if (full_graph) return 0.0;                                  // one full-graph replay
  if (tokens > graph_tokens_ || decode_only_graphs_ || (uniform_decode && full_graphs_))
    return launch_full_s_;                                     // no graph: every kernel from the host
  return launch_piecewise_s_;                                  // piecewise graphs, attention/Mamba eager
}

double Worker::start_step(double now_s) {
  start_pending_ = false;
  if (busy_) return -1;
  // A batch that ended at this instant chains into this one; otherwise the loop was idle and has
  // applied every output (freed what finished) before it saw new work.
  const bool chained = end_last_s_ >= 0 && end_last_s_ == now_s;
  if (!chained) {
    sched_.release_deferred();
    end_last_s_ = -1;
  }
  if (!sched_.has_work()) return -1;
  // When this batch is formed. Sync: now. Async: while the previous batch ran, as soon as the one
  // before it was applied (or right after the previous one was submitted, if the queue had room).
  double sched_s = now_s;
  if (async_ && chained) sched_s = std::min(now_s, std::max(end_prev_s_, sched_s_ + host_s_));
  const models::StepBatch* batch = &sched_.schedule(now_s, sched_s);
  if (sched_.num_scheduled() == 0 && async_ && chained) {
    // An empty batch occupies no queue slot: the loop applies the last outputs and schedules again now.
    sched_.release_deferred();
    sched_s = now_s;
    batch = &sched_.schedule(now_s, sched_s);
  }
  // A step that only preempted admits nothing (vLLM skips admissions after a preemption); the
  // engine would simply run its next schedule() at once, so do that here.
  if (sched_.num_scheduled() == 0 && sched_.has_work()) batch = &sched_.schedule(now_s, sched_s);
  if (sched_.num_scheduled() == 0) {
    // Nothing runs and nothing holds blocks (a prefill worker's handed-off requests hold theirs
    // until the decode side has pulled them, and wake it when released): then it never fits.
    if (sched_.num_running() == 0 && sched_.pool().used() == 0 && sched_.waiting_arrived_by(sched_s))
      throw std::logic_error("scheduler: waiting request can never be admitted");
    return -1;
  }
  return run_batch(now_s, sched_s, *batch);
}

int Worker::steady_cycles(int limit) { return busy_ ? sched_.steady_cycles(limit) : 0; }

double Worker::steady_cycle(double now_s, int cycle) {
  // finish_step(now_s) with every running request decoding one more token ...
  stats_.busy_s += now_s - step_start_s_;
  stats_.preemptions = sched_.preemptions();
  end_prev_s_ = end_last_s_;
  end_last_s_ = now_s;
  // ... then start_step(now_s), chained, forming the same batch one token further on.
  const double sched_s = async_ ? std::min(now_s, std::max(end_prev_s_, sched_s_ + host_s_)) : now_s;
  sched_.steady_cycle(cycle, now_s);
  return run_batch(now_s, sched_s, sched_.batch());
}

double Worker::run_batch(double now_s, double sched_s, const models::StepBatch& b0) {
  const models::StepBatch* batch = &b0;
  const std::int64_t tokens = batch->prefill_tokens + std::int64_t(batch->decode_seqs) * batch->tokens_per_decode_seq;
  const bool uniform = batch->prefill_seqs == 0 && batch->vision_tiles == 0;
  double gpu_s;
  const int per_seq = batch->tokens_per_decode_seq;
  const bool full_graph = replays_full_graph(tokens, uniform, per_seq);
  if (full_graph) {
    // Uniform decode replays the graph of the next capture size: padded sequences join the batch
    // (without padding but with attention DP, the dummy requests that bring every rank to the
    // busiest rank's share).
    const std::int64_t padded = padded_tokens(rank_aligned_tokens(tokens, per_seq));
    models::StepBatch b = *batch;
    const int seqs = std::max(b.decode_seqs, static_cast<int>(per_seq == 1 ? padded : padded / per_seq));
    b.graph_padding_seqs = seqs - b.decode_seqs;
    b.decode_seqs = seqs;
    gpu_s = step_seconds(b);
  } else {
    gpu_s = step_seconds(*batch);
  }
  gpu_s = std::max(gpu_s + step_gpu_s_, forward_floor_s_);   // a calibrated cluster's forward floor
  if (const double onboard_s = sched_.step_onboard_seconds(); onboard_s > 0)   // KV offload tiers -> GPU
    gpu_s = sched_.offload()->overlap() ? std::max(gpu_s, onboard_s) : gpu_s + onboard_s;
  const double launch_s = launch_seconds_given(full_graph, tokens, uniform);
  // The host's time for this batch. With attention DP every rank is a scheduler process of its own
  // (vLLM's DP engine cores, SGLang's DP schedulers, TensorRT-LLM's per-rank PyExecutor), preparing
  // its share of the batch side by side with the others: the busiest rank's share is what the
  // lockstep waits for, not the union's requests one after another.
  const int scheduled = sched_.num_scheduled();
  const double cpu_s = overhead_s_ + overhead_per_seq_s_ * double((scheduled + dp_ - 1) / dp_);
  const double ready_s = sched_s + cpu_s;                 // inputs prepared, first kernel can be issued
  const double gpu_start_s = std::max(now_s, ready_s);
  const double end_s = std::max(gpu_start_s + gpu_s, ready_s + launch_s);
  const double seconds = end_s - now_s;
  sched_s_ = sched_s;
  cpu_s_ = cpu_s;
  // The host is free for the next batch once it has formed this one (and, where the same thread
  // issues the kernels, launched them).
  host_s_ = cpu_s + (launches_on_scheduler_thread_ ? launch_s : 0.0);
  busy_ = true;
  step_start_s_ = now_s;
  ++stats_.steps;
  stats_.gpu_idle_s += gpu_start_s - now_s;
  stats_.scheduled_seqs += sched_.num_scheduled();
  stats_.batched_tokens += tokens;
  stats_.kv_block_seconds += double(sched_.pool().used()) * seconds;
  stats_.peak_kv_blocks = std::max(stats_.peak_kv_blocks, sched_.pool().used());
  // Prefill tokens of requests whose clients were released by the same event as another request's
  // in this step: the closed loop's cohorts.
  const auto& parts = sched_.prefill_parts();
  for (const auto& p : parts) {
    stats_.prefill_tokens += p.tokens;
    if (std::isnan(p.first_arrival_s)) continue;
    ++stats_.prompts;
    // Steps run one after another: if the latest one with prefill work ended after this prompt
    // arrived, the prompt waited while another prompt's prefill ran.
    if (last_prefill_end_s_ > p.first_arrival_s) ++stats_.prompts_behind_prefill;
  }
  if (!parts.empty()) {
    last_prefill_end_s_ = end_s;
    stats_.prefill_step_s += seconds;
  }
  if (parts.size() >= 2) {
    cohort_scratch_.clear();
    for (const auto& p : parts)
      if (p.cohort >= 0) cohort_scratch_.push_back(p.cohort);
    std::sort(cohort_scratch_.begin(), cohort_scratch_.end());
    for (const auto& p : parts) {
      if (p.cohort < 0) continue;
      const auto range = std::equal_range(cohort_scratch_.begin(), cohort_scratch_.end(), p.cohort);
      if (range.second - range.first >= 2) stats_.cohort_prefill_tokens += p.tokens;
    }
  }
  return seconds;
}

double Worker::step_seconds(const models::StepBatch& batch) {
  const int d = batch.decode_seqs;
  if (batch.prefill_seqs != 0 || batch.vision_tiles != 0 || d <= 0) return cost_->seconds(batch);
  // Keyed on the sequences the batch carries with its padding: 5 and 6 sequences padded to 8 run
  // the same dense layers but route 5 + 1 and 6 + 1 tokens' experts (models/step_cost.hpp).
  const auto real = static_cast<std::size_t>(d - batch.graph_padding_seqs);
  if (real >= decode_lines_.size()) decode_lines_.resize(real + 1);
  DecodeLine& l = decode_lines_[real];
  if (l.seqs != d || l.padding != batch.graph_padding_seqs || l.tokens != batch.tokens_per_decode_seq)
    l = DecodeLine{0, 0, d, batch.graph_padding_seqs, batch.tokens_per_decode_seq, 0};
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
  if (l.state < 0) {
    // The model's terms that do not read the context, computed once per batch shape (by the
    // sequences it carries: their count fixes the graph padding); the memo where it has no split.
    if (real >= decode_splits_.size()) decode_splits_.resize(real + 1);
    ShapeSplit& s = decode_splits_[real];
    if (s.seqs != d || s.padding != batch.graph_padding_seqs || s.tokens != batch.tokens_per_decode_seq)
      s = ShapeSplit{d, batch.graph_padding_seqs, batch.tokens_per_decode_seq, cost_->decode_split(batch)};
    if (s.split.valid) return cost_->decode_seconds(s.split, batch.decode_context_tokens);
    return decode_memo_.get(batch, [this](const models::StepBatch& b) { return cost_->seconds(b); });
  }
  return l.a + l.b * double(batch.decode_context_tokens);
}

void Worker::finish_step(double now_s, EmitTime& emit) {
  sched_.complete(now_s, emit);
  busy_ = false;
  stats_.busy_s += now_s - step_start_s_;
  stats_.preemptions = sched_.preemptions();
  end_prev_s_ = end_last_s_;
  end_last_s_ = now_s;
}

double Worker::kv_load() const {
  const auto& pool = sched_.pool();
  if (pool.capacity() == 0) return 0;
  const int bs = sched_.config().block_size;
  return (double(pool.used()) + double(sched_.waiting_tokens()) / bs) / double(pool.capacity());
}

}  // namespace servesim::sim
