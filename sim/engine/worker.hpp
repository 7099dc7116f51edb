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
// sequence, context tokens) in a direct-mapped table of 2^14 entries, allocated at the first
// miss: a hit returns the bits stored for exactly that batch; a batch landing on a taken entry
// replaces it. Batches with prefill work or fields the key cannot hold are computed every time.
class DecodeStepMemo {
 public:
  template <class F> double get(const models::StepBatch& b, F&& compute) {
    const std::int64_t ctx = b.decode_context_tokens;
    const int pad = b.graph_padding_seqs, tok = b.tokens_per_decode_seq;
    if (pad < 0 || pad > INT16_MAX || tok < 0 || tok > INT16_MAX || ctx < 0 || b.prefill_seqs != 0 ||
        b.prefill_tokens != 0 || b.prefill_attention_pairs != 0 || b.vision_tiles != 0)
      return compute(b);
    if (table_.empty()) table_.resize(std::size_t(1) << kBits);
    const std::uint64_t key = std::uint64_t(ctx) * 0x9e3779b97f4a7c15ULL ^ std::uint64_t(b.decode_seqs) * 0xbf58476d1ce4e5b9ULL ^
                              std::uint64_t(pad) << 40 ^ std::uint64_t(tok) << 52;
    Entry& e = table_[static_cast<std::size_t>((key * 0x94d049bb133111ebULL) >> (64 - kBits))];
    if (e.context == ctx && e.seqs == b.decode_seqs && e.padding == pad && e.tokens == tok) {
      ++hits_;
      return e.seconds;
    }
    e.context = ctx;
    e.seqs = b.decode_seqs;
    e.padding = static_cast<std::int16_t>(pad);
    e.tokens = static_cast<std::int16_t>(tok);
    e.seconds = compute(b);
    return e.seconds;
  }
  std::int64_t hits() const { return hits_; }

 private:
  static constexpr int kBits = 14;
  struct Entry {
    std::int64_t context = -1;   // decode_context_tokens; -1 empty
    std::int32_t seqs = 0;       // decode_seqs
    std::int16_t padding = 0;    // graph_padding_seqs
    std::int16_t tokens = 0;     // tokens_per_decode_seq
    double seconds = 0;
  };
  std::vector<Entry> table_;
  std::int64_t hits_ = 0;
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
  // Host-side launch time of one step with `tokens` tokens (uniform decode or mixed), as start_step charges it.
  double launch_seconds(std::int64_t tokens, bool uniform_decode) const;
  // Capture size a step of `tokens` tokens is padded to (tokens itself when it runs without a graph).
  std::int64_t padded_tokens(std::int64_t tokens) const;
  // Whether a step replays one full CUDA graph: a uniform decode within the capture sizes (of a
  // captured size exactly when the engine does not pad).
  bool replays_full_graph(std::int64_t tokens, bool uniform_decode) const;

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
  struct DecodeLine { double a = 0, b = 0; std::int8_t state = 0; };  // 0 unknown, 1 linear, -1 not

  VllmScheduler sched_;
  const models::StepCostModel* cost_;
  double overhead_s_, overhead_per_seq_s_;
  double step_gpu_s_;            // fixed GPU time added to every step (a calibration's step_gpu_ms)
  double launch_full_s_;         // one forward's kernels launched from the host
  double launch_piecewise_s_;    // the eager attention/Mamba ops between piecewise graphs
  bool full_graphs_;             // uniform decode replays one full graph (FULL_AND_PIECEWISE, FULL_DECODE_ONLY)
  bool decode_only_graphs_;      // FULL_DECODE_ONLY: every other step launches eagerly (SGLang, TRT-LLM)
  bool padding_;                 // a decode batch is padded to the next capture size (off: TRT-LLM)
  std::vector<std::int64_t> capture_;  // CUDA-graph capture sizes (tokens), ascending
  std::int64_t graph_tokens_;          // steps of more tokens than this run without a CUDA graph
  bool async_;
  bool busy_ = false, start_pending_ = false;
  double step_start_s_ = 0;
  double last_prefill_end_s_ = -1;   // end of the latest step that carried prefill tokens
  // Engine-core loop state: the last batch's schedule time and CPU cost, the ends of the last two batches.
  double sched_s_ = 0, cpu_s_ = 0, end_last_s_ = -1, end_prev_s_ = -1;
  std::vector<std::int64_t> cohort_scratch_;
  WorkerStats stats_;
  std::vector<DecodeLine> decode_lines_;  // by decode_seqs
  DecodeStepMemo decode_memo_;            // the steps whose D has no line
};

}  // namespace servesim::sim
