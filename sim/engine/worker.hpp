// An engine worker: one replica (TP × PP × EP GPUs) running vLLM's engine-core loop step after
// step. Batch k is formed at S_k (sync: when batch k-1 ended; async scheduling: when batch k-2
// ended, while k-1 runs, or right after k-1 was submitted when the queue had room), costs the
// engine core cpu_k = step_overhead + per_seq x scheduled requests, and runs on the GPU from
// G_k = max(E_{k-1}, S_k + cpu_k) to E_k = max(G_k + gpu_k, S_k + cpu_k + launch_k): host-side
// kernel launches overlap the GPU work, so they bound a step only when they take longer.
// launch_k is 0 for a full CUDA-graph replay (uniform decode within the capture sizes), the
// eager attention/Mamba ops between piecewise graphs for mixed batches within them, and every
// kernel for larger steps or enforce_eager. The worker keeps the statistics metrics report per
// replica (busy fraction, batch size, KV utilisation, prefill tokens released together).
#pragma once
#include <cstdint>
#include <limits>
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
  std::int64_t prefill_tokens = 0;          // summed over steps
  std::int64_t cohort_prefill_tokens = 0;   // ... of requests sharing the step with one released together
  double gpu_idle_s = 0;                    // time between a batch's end and the next one's GPU start while work was queued
  // Closed loop: measured prompts admitted, and those that waited while a step carrying another
  // prompt's prefill ran (a "train" when most do: each round's prompts queue one behind another).
  std::int64_t prompts = 0, prompts_behind_prefill = 0;
  double prefill_step_s = 0;                // time inside steps that carry prefill tokens
  // Prompt tokens of admitted requests (warm-up included), and those the prefix cache served.
  std::int64_t prompt_tokens = 0, prompt_tokens_cached = 0;
};

// A run is in the closed loop's train orbit (each round's prompts queue one behind another's
// prefill) when at least half the prompts waited behind another prefill and at least twice as many
// as chance: the prefill duty, the share of time the prefilling workers spent in steps carrying
// prefill, is how often a prompt arriving at a random time would meet one.
inline bool is_prefill_train(double behind_fraction, double prefill_duty) {
  return behind_fraction >= 0.5 && behind_fraction >= 2 * prefill_duty;
}
// The same over a run's workers (end_s: its simulated end).
bool is_prefill_train(const std::vector<WorkerStats>& workers, double end_s);

// Pure-decode step times remembered by their batch (decode sequences, graph padding, tokens per
// sequence, context tokens) in a direct-mapped table, allocated at the first miss with 2^12
// entries and doubled (its entries kept) each time it has missed twice its size since the last
// doubling, up to 2^17: a short run keeps a small table, a long closed loop (24,000 distinct
// batches in 10,000 requests at 16 clients) one that holds its batches. A hit returns the bits
// stored for exactly that batch; a batch landing on a taken entry replaces it. Batches with
// prefill work or fields the key cannot hold are computed every time.
class DecodeStepMemo {
 public:
  template <class F> double get(const models::StepBatch& b, F&& compute) {
    const std::int64_t ctx = b.decode_context_tokens;
    const int pad = b.graph_padding_seqs, tok = b.tokens_per_decode_seq;
    if (pad < 0 || pad > INT16_MAX || tok < 0 || tok > INT16_MAX || ctx < 0 || b.prefill_seqs != 0 ||
        b.prefill_tokens != 0 || b.prefill_attention_pairs != 0 || b.vision_tiles != 0)
      return compute(b);
    if (table_.empty()) resize(kMinBits);
    const Entry key{ctx, b.decode_seqs, static_cast<std::int16_t>(pad), static_cast<std::int16_t>(tok), 0};
    Entry& e = slot(key);
    if (e.context == ctx && e.seqs == b.decode_seqs && e.padding == pad && e.tokens == tok) {
      ++hits_;
      return e.seconds;
    }
    const double seconds = compute(b);
    if (++misses_ > (std::int64_t(2) << bits_) && bits_ < kMaxBits) {
      resize(bits_ + 1);
      slot(key) = Entry{key.context, key.seqs, key.padding, key.tokens, seconds};
    } else {
      e = Entry{key.context, key.seqs, key.padding, key.tokens, seconds};
    }
    return seconds;
  }
  std::int64_t hits() const { return hits_; }
  std::size_t size() const { return table_.size(); }

 private:
  static constexpr int kMinBits = 12, kMaxBits = 17;
  struct Entry {
    std::int64_t context = -1;   // decode_context_tokens; -1 empty
    std::int32_t seqs = 0;       // decode_seqs
    std::int16_t padding = 0;    // graph_padding_seqs
    std::int16_t tokens = 0;     // tokens_per_decode_seq
    double seconds = 0;
  };
  Entry& slot(const Entry& k) {
    // Consecutive context sums of one batch shape take consecutive entries: a steady stretch
    // walks them at a stride of one token per sequence, and a shape's range of sums shares no
    // entry with itself while it is narrower than the table.
    const std::uint64_t key = std::uint64_t(k.context) + std::uint64_t(k.seqs) * 0x9e3779b97f4a7c15ULL +
                              std::uint64_t(k.padding) * 0xbf58476d1ce4e5b9ULL + std::uint64_t(k.tokens) * 0x94d049bb133111ebULL;
    return table_[static_cast<std::size_t>(key & ((std::uint64_t(1) << bits_) - 1))];
  }
  void resize(int bits) {
    std::vector<Entry> old(std::size_t(1) << bits);
    old.swap(table_);
    bits_ = bits;
    misses_ = 0;
    for (const Entry& e : old)
      if (e.context >= 0) slot(e) = e;
  }
  std::vector<Entry> table_;
  int bits_ = kMinBits;
  std::int64_t hits_ = 0, misses_ = 0;
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

  // Forms a batch at `now_s`; returns the time until the step ends, or < 0 when nothing can run.
  double start_step(double now_s);
  // The step in flight ends at `now_s`: tokens out (see scheduler().outputs()), visible to the
  // client at `emit_s` (default now_s).
  void finish_step(double now_s, EmitTime& emit);
  void finish_step(double now_s) {
    EmitTime e{now_s};
    finish_step(now_s, e);
  }
  // Steady decode (docs/speed.md): how many step cycles (the step in flight ends, the next one
  // starts at once) from now only move every running request one decode token on
  // (VllmScheduler::steady_cycles), at most `limit`; steady_cycle() runs one at `now_s`, the
  // end of the step in flight, exactly as finish_step() then start_step() would (the same stats,
  // the same step), and returns the new step's duration; steady_commit() then brings the running
  // requests' counters up to date.
  int steady_cycles(int limit);
  double steady_cycle(double now_s, int cycle);
  void steady_commit(int cycles) { sched_.steady_commit(cycles); }
  // A whole stretch from the step in flight, which ends at `end_s`: while `clear(end)` (no other
  // event comes first), `at_end(end)` (the cluster's work at a step's end), the cycle, then
  // `started(start, seconds)` (the new step's sample). Returns the cycles run; end_s becomes the
  // end of the step in flight after them.
  // `resume`: the stretch of the last run_steady() goes on (nothing else touched the scheduler since).
  template <class Clear, class AtEnd, class Started>
  int run_steady(double& end_s, Clear&& clear, AtEnd&& at_end, Started&& started, bool resume = false) {
    const int cycles = !busy_ ? 0 : resume ? sched_.steady_cycles_left() : steady_cycles(std::numeric_limits<int>::max());
    int done = 0;
    while (done < cycles && clear(end_s)) {
      ++done;
      at_end(end_s);
      const double step_s = steady_cycle(end_s, done);
      started(end_s, step_s);
      end_s = end_s + step_s;
    }
    steady_commit(done);
    return done;
  }

  // Host-side launch time of one step with `tokens` tokens (uniform decode or mixed, `per_seq`
  // tokens a decoding sequence), as start_step charges it.
  double launch_seconds(std::int64_t tokens, bool uniform_decode, int per_seq = 1) const;
  // Capture size a step of `tokens` tokens is padded to (tokens itself when it runs without a graph).
  std::int64_t padded_tokens(std::int64_t tokens) const;
  // Whether a step replays one full CUDA graph: a uniform decode within the capture sizes (of a
  // captured size exactly when the engine does not pad; with attention DP, the busiest rank's
  // share of a captured size, every rank padded to it).
  bool replays_full_graph(std::int64_t tokens, bool uniform_decode, int per_seq = 1) const;
  // The tokens a decode step of `tokens` runs as over the attention DP ranks without padding:
  // every rank at the busiest one's share (dp x ceil(seqs / dp) sequences); `tokens` with one rank.
  std::int64_t rank_aligned_tokens(std::int64_t tokens, int per_seq) const;

  // The step loop's counters, with the scheduler's prompt-token counts filled in.
  WorkerStats stats() const {
    WorkerStats s = stats_;
    s.prompt_tokens = sched_.prompt_tokens_admitted();
    s.prompt_tokens_cached = sched_.prompt_tokens_cached();
    return s;
  }
  std::int64_t outstanding() const { return sched_.num_running() + sched_.num_waiting(); }
  // Fraction of KV blocks held plus those queued prompts will need: the router's "KV load".
  double kv_load() const;

 private:
  // GPU time of `batch`. A pure-decode step of D sequences costs a(D) + b(D) * context tokens
  // (attention reads the KV linearly, everything else depends on D alone): a and b are measured
  // once per D from the cost model, checked for that linearity at a third point, and reused, so
  // the hot decode loop does not re-evaluate every layer kind's curve each step.
  // Where the line does not hold (the cold-cache term of decode attention is not linear in the
  // KV bytes), the model's value is remembered (DecodeStepMemo): a closed loop revisits the same
  // context sums step after step.
  double step_seconds(const models::StepBatch& batch);
  // The step of `batch`, scheduled at sched_s, starting at now_s: its duration, its stats.
  double run_batch(double now_s, double sched_s, const models::StepBatch& batch);
  // A line per batch shape: the sequences it carries (decode_lines_' index), the graph padding
  // and the sequences' tokens, since the routed experts see the carried count, not the padded one.
  struct DecodeLine {
    double a = 0, b = 0;
    int seqs = -1, padding = 0, tokens = 0;   // the shape it was fitted on (seqs -1: none yet)
    std::int8_t state = 0;                    // 0 unknown, 1 linear, -1 not
  };

  VllmScheduler sched_;
  const models::StepCostModel* cost_;
  double overhead_s_, overhead_per_seq_s_;
  double step_gpu_s_;            // fixed GPU time added to every step (a calibration's step_gpu_ms)
  double forward_floor_s_;       // no step's forward is shorter (a calibration's forward_floor_ms)
  double launch_full_s_;         // one forward's kernels launched from the host
  double launch_piecewise_s_;    // the eager attention/Mamba ops between piecewise graphs
  int dp_ = 1;                   // attention DP ranks in lockstep (EngineConfig::lockstep_dp)
  // launch_seconds() once replays_full_graph() is known (run_batch asks it once per step).
  double launch_seconds_given(bool full_graph, std::int64_t tokens, bool uniform_decode) const;
  bool full_graphs_;             // uniform decode replays one full graph (FULL_AND_PIECEWISE, FULL_DECODE_ONLY)
  bool decode_only_graphs_;      // FULL_DECODE_ONLY: every other step launches eagerly (SGLang, TRT-LLM)
  bool padding_;                 // a decode batch is padded to the next capture size (off: TRT-LLM)
  std::vector<std::int64_t> capture_;  // CUDA-graph capture sizes (tokens), ascending
  std::vector<std::int64_t> padded_;   // by step tokens up to graph_tokens_: the capture size it replays
  std::int64_t graph_tokens_;          // steps of more tokens than this run without a CUDA graph
  bool async_;
  bool busy_ = false, start_pending_ = false;
  double step_start_s_ = 0;
  double last_prefill_end_s_ = -1;   // end of the latest step that carried prefill tokens
  // Engine-core loop state: the last batch's schedule time and CPU cost, the ends of the last two batches.
  double sched_s_ = 0, cpu_s_ = 0, host_s_ = 0, end_last_s_ = -1, end_prev_s_ = -1;
  bool launches_on_scheduler_thread_ = false;
  std::vector<std::int64_t> cohort_scratch_;
  WorkerStats stats_;
  std::vector<DecodeLine> decode_lines_;  // by sequences carried (decode_seqs - graph_padding_seqs)
  struct ShapeSplit { int seqs = -1, padding = 0, tokens = 0; models::DecodeSplit split; };
  std::vector<ShapeSplit> decode_splits_;  // the steps whose D has no line, by sequences carried
  DecodeStepMemo decode_memo_;            // ... where the model has no split
};

}  // namespace servesim::sim
