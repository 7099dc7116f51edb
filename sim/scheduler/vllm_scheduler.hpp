// The scheduler of one replica. vLLM v1's (vllm/v1/core/sched/scheduler.py), step by step:
// running requests first in admission order (decodes take 1 token, or 1 + draft tokens;
// partial prefills take the next chunk), preempting the newest running request by recompute
// when KV blocks run out; then, if nothing was preempted, waiting requests in FCFS order fill
// the token budget up to max_num_seqs. The step's batch summary is kept as running sums.
// The engine's policy (EngineConfig::kind) picks how a batch is formed: vLLM's above, SGLang's
// or TensorRT-LLM's (engine_policies.cpp, docs/engines.md); the request lifecycle, the block
// pool and complete() are shared.
#pragma once
#include <cmath>
#include <cstdint>
#include <memory>
#include <vector>

#include "models/kv_cache.hpp"
#include "models/step_cost.hpp"
#include "sim/engine/engine_config.hpp"
#include "sim/engine/request.hpp"
#include "sim/token_gaps.hpp"
#include "sim/scheduler/kv_offload.hpp"
#include "sim/scheduler/kv_pool.hpp"
#include "sim/scheduler/ring.hpp"
#include "workloads/request.hpp"

namespace servesim::workloads { struct Duration; }

namespace servesim::sim {

// When a step's tokens reach the client: `at_s`, plus the API server's output batch when
// `out_cv` > 0 (out_s x a lognormal factor drawn from `out_state`), plus the client's network hop
// when `hop` is set (drawn from `state`). The draws are computed only when a token's time is
// recorded (a steady decode step records none); the caller has already moved its stream past them.
struct EmitTime {
  double at_s = 0;
  const workloads::Duration* hop = nullptr;
  std::uint64_t state = 0;
  double out_s = 0, out_cv = 0;
  std::uint64_t out_state = 0;
  double get() { return hop || out_cv > 0 ? resolve() : at_s; }

 private:
  double resolve();
};

// What a step (or an admission) produced, for the worker to report after the step is applied.
struct Output {
  enum Kind : std::uint8_t { first_token, finished, handoff, preempted, kv_reserved } kind;
  std::int32_t slot;
};

class VllmScheduler {
 public:
  // `kv_blocks` usable blocks of the memory plan's pool (models::KvCacheLayout) and what a
  // request holds in it: attention blocks per group as it grows, state blocks while it runs.
  VllmScheduler(const EngineConfig& cfg, std::int64_t kv_blocks, const models::KvDemand& demand = {},
                std::uint64_t seed = 0);

  // A new request joins the waiting queue (aggregated and prefill-only workers). Returns its slot.
  std::int32_t add(const workloads::RequestSpec& spec, double now_s, int client, bool warmup);
  // Decode-only: a request whose prompt KV (and first token) will arrive by transfer. Blocks for
  // the prompt + 1 and its state blocks are reserved in FIFO order; a kv_reserved output says when.
  std::int32_t add_transferred(const workloads::RequestSpec& spec, double now_s, double first_token_s,
                               int client, bool warmup);
  // Decode-only: the transfer for `slot` completed at now_s. On vLLM it joins the first batch formed
  // at or after now_s (async scheduling forms a batch while the previous one runs, so a pull that
  // lands after the batch in flight was formed waits one more step, as a new request does); on
  // SGLang and TensorRT-LLM the next batch the loop forms, whenever it was formed.
  void transfer_done(std::int32_t slot, double now_s);
  // Prefill-only: the handed-off request's KV has left; free its blocks and slot.
  void release_handoff(std::int32_t slot);

  bool has_work() const { return !running_.empty() || !waiting_.empty() || !landed_.empty(); }
  // Forms the next step's batch. Waiting requests that reached the engine after `cutoff_s` are
  // not admitted (async scheduling forms a batch one step before it runs). The summary is empty
  // when nothing can run.
  const models::StepBatch& schedule(double now_s, double cutoff_s);
  const models::StepBatch& schedule(double now_s) { return schedule(now_s, now_s); }
  // Applies the step's results at `now_s`: tokens sampled, requests finished or handed off.
  // Token timestamps are `emit_s` (when the client sees them; default now_s).
  void complete(double now_s, EmitTime& emit);
  void complete(double now_s, double emit_s) {
    EmitTime e{emit_s};
    complete(now_s, e);
  }
  void complete(double now_s) { complete(now_s, now_s); }

  // Steady decode stretch (docs/speed.md): called right after schedule() formed a batch, the
  // number of further step cycles (that batch's complete(), then the next schedule()) that only
  // move every running request one decode token on: any engine's policy (vLLM, SGLang,
  // TensorRT-LLM) without speculative tokens, nothing waiting or in transfer, every running request decoding in this batch past its timed
  // tokens and short of its last, and every block a request crosses taken from the empty ones
  // (no eviction, no preemption). At most `limit`. 0 when the next cycle is not such a one.
  int steady_cycles(int limit);
  // One such cycle, as complete() then schedule() would run it: a finished request's deferred
  // blocks released, the batch's context grown by one token per sequence, the blocks of the
  // requests that cross one taken; the step in flight ends at `end_s` and gives each running
  // request a token. Cycle numbers count from 1 after steady_cycles().
  void steady_cycle(int cycle, double end_s);
  // The running requests' counters after `cycles` cycles run by steady_cycle().
  void steady_commit(int cycles);
  // The cycles of the last steady_cycles() not yet committed: what steady_cycles() would return
  // now when nothing but those cycles' steady_cycle() and steady_commit() changed the scheduler
  // since (a stretch another event cut short, resumed at its step's end). steady_cycle() numbers
  // continue from 1 after it.
  int steady_cycles_left() const { return steady_total_ - steady_base_; }
  // Every gap between a measured request's visible tokens from its second on is counted in `gaps`
  // (the run's MetricsCollector::token_gaps(); null: not counted).
  void set_token_gaps(TokenGaps* gaps) { gaps_ = gaps; }
  const models::StepBatch& batch() const { return batch_; }   // the last schedule()'s summary
  // Async scheduling: a finished request keeps its blocks and seat until the next complete()
  // (vLLM frees them in update_from_output, after the next batch was scheduled).
  void set_deferred_release(bool on) { defer_release_ = on; }
  void release_deferred();
  // Decode-only, when the engine loop goes idle: it applies the last step's outputs (frees the
  // finished requests' deferred blocks) and grants the KV reservations that room allows; a
  // kv_reserved output says which. Without it a transfer waiting on the blocks of the last
  // requests to finish would wait for a step that never comes.
  void release_idle();
  bool has_pending_transfers() const { return !pending_.empty(); }
  int num_deferred() const { return static_cast<int>(deferred_.size()); }
  // Requests of the last schedule() that sample a token when the step ends.
  int num_emitting() const { return emitting_; }
  // Waiting requests that reached the engine at or before `t_s` (any, in FCFS order's head).
  bool waiting_arrived_by(double t_s) const;
  // The last schedule()'s prefill work, one entry per request with a chunk: its closed-loop cohort,
  // its tokens, and, for a measured closed-loop request's first admission, when it reached the
  // engine (NaN otherwise).
  struct PrefillPart { std::int64_t cohort; std::int64_t tokens; double first_arrival_s = NAN; };
  const std::vector<PrefillPart>& prefill_parts() const { return prefill_parts_; }

  // Outputs since the last clear_outputs(); finished/handed-off slots stay valid until then.
  const std::vector<Output>& outputs() const { return outputs_; }
  void clear_outputs();

  Request& request(std::int32_t slot) { return slots_[static_cast<std::size_t>(slot)]; }
  const Request& request(std::int32_t slot) const { return slots_[static_cast<std::size_t>(slot)]; }
  const KvBlockPool& pool() const { return pool_; }
  // KV events of the prefix cache (hashes stored / evicted) appended to `log` (null: off).
  void set_kv_event_log(std::vector<KvEvent>* log) { pool_.set_event_log(log); }
  // KV offload tiers (prefix caching only): evicted blocks go there; admissions onboard them.
  void set_offload(std::shared_ptr<KvOffload> offload) {
    offload_ = std::move(offload);
    pool_.set_offload(offload_.get());
  }
  const KvOffload* offload() const { return offload_.get(); }
  // Onboarding time of the last schedule()'s admissions (0 without offload).
  double step_onboard_seconds() const { return onboard_s_; }
  int num_running() const { return static_cast<int>(running_.size() + landed_.size()); }
  int num_waiting() const { return static_cast<int>(waiting_.size()) + static_cast<int>(pending_.size()); }
  int num_scheduled() const { return scheduled_; }
  // Prompt tokens at requests' first admission, and those served from the prefix cache.
  std::int64_t prompt_tokens_admitted() const { return prompt_tokens_admitted_; }
  std::int64_t prompt_tokens_cached() const { return prompt_tokens_cached_; }
  std::int64_t waiting_tokens() const { return waiting_tokens_; }   // prompt tokens queued, not yet admitted
  std::int64_t preemptions() const { return preemptions_; }   // vLLM preemptions, SGLang retractions
  double new_token_ratio() const { return new_token_ratio_; }  // SGLang's admission ratio now
  const EngineConfig& config() const { return cfg_; }

 private:
  std::int64_t prompt_tokens_admitted_ = 0, prompt_tokens_cached_ = 0;
  std::int32_t new_slot();
  std::int32_t init(const workloads::RequestSpec& spec, double now_s, int client, bool warmup);
  // Blocks a request holds once `end` tokens have slots (K lookahead added here) and `computed`
  // are cached: its attention blocks plus, while it runs, its state blocks.
  // TensorRT-LLM reserves every request's whole sequence (`end` is prompt + max_tokens there), its
  // sliding-window groups capped at the window (KvDemand::reserved_blocks).
  std::int64_t blocks_for(std::int64_t computed, std::int64_t end) const {
    if (window_reservation_ >= 0)
      return demand_.reserved_blocks(end + lookahead_, window_reservation_, cfg_.block_size) + state_blocks_;
    return demand_.token_blocks(computed, end + lookahead_, cfg_.block_size) + state_blocks_;
  }
  std::int64_t slots_for(std::int64_t end) const {
    const std::int64_t bs = cfg_.block_size;
    return (end + lookahead_ + bs - 1) / bs * bs;
  }
  void free_resources(Request& r);
  // Preempts by recompute. vLLM (prefix caching on): the `computed` tokens' full blocks stay in
  // the cache, hashed, when freed, and the recompute takes the ones not evicted back as hits.
  void preempt(std::int32_t slot, std::int64_t computed = 0);
  bool try_admit(std::int32_t slot, std::int64_t& budget, double now_s);
  // The engines' batch formation (engine_policies.cpp for SGLang and TRT-LLM).
  void schedule_vllm(double now_s, double cutoff_s);
  void schedule_sglang(double now_s, double cutoff_s);
  void schedule_trtllm(double now_s, double cutoff_s);
  // Prefix-cache hit of a waiting request: leading blocks cached (never the whole prompt) and how many are free.
  // `onboard` (optional): the blocks after the GPU hits an offload tier holds (onboarded, not recomputed).
  std::int64_t prefix_hit(const Request& r, std::int64_t* free_hits, std::int64_t* onboard = nullptr) const;
  // Puts a waiting request into the running list with `computed` tokens cached (hit_blocks of them
  // from the prefix cache, already allocatable) and `n` tokens scheduled now, its blocks covering
  // `end` tokens; counts it into the step.
  void admit(std::int32_t slot, std::int64_t hit_blocks, std::int64_t n, std::int64_t end, double now_s, std::int64_t onboard = 0);
  // SGLang: retracts running requests, longest output first, until every remaining one can take
  // its next token with retract_decode_steps of headroom; returns how many were retracted.
  int retract_for_decode();
  void decay_new_token_ratio();   // SGLang: one decode step's decay of new_token_ratio
  // Tokens the decode-only worker reserves for a transferred request (vLLM: prompt + 1; SGLang:
  // + num_reserved_decode_tokens; TRT-LLM GUARANTEED_NO_EVICT: prompt + max_tokens).
  std::int64_t transfer_reserve_end(const Request& r) const;
  int seats_taken() const { return num_running() + reserved_ + static_cast<int>(deferred_.size()); }
  void try_reserve();
  void publish_blocks(Request& r);
  int accepted_drafts();

  EngineConfig cfg_;
  KvBlockPool pool_;
  models::KvDemand demand_;
  std::int64_t lookahead_;  // speculative tokens: attention slots allocated ahead (vLLM num_lookahead_tokens)
  std::int64_t state_blocks_;  // per running request: (1 + K) per state group
  // TensorRT-LLM with sliding-window groups: the temporary attention window a reservation adds to
  // each window (max_num_tokens with chunked prefill, else 0); -1: blocks follow token_blocks.
  std::int64_t window_reservation_ = -1;
  std::vector<Request> slots_;
  std::vector<std::int32_t> free_slots_;
  // The running list's hot counters, dense and in admission order (preemption takes from the
  // back), so a step over the batch reads one contiguous array instead of chasing request slots.
  // blocks are mirrored into the Request whenever they change; generated/computed at each of a
  // request's first three tokens and whenever it leaves the list (finish, preemption, handoff):
  // steady decode steps move only these counters. step lives here only.
  struct Running {
    std::int64_t computed;     // num_computed_tokens
    std::int64_t tokens;       // num_tokens: prompt + sampled
    std::int64_t cap;          // tokens the held attention blocks can store, lookahead excluded
    std::int64_t input;        // prompt tokens
    std::int64_t left;         // output tokens still to sample
    std::int32_t slot;
    std::int32_t step;         // tokens scheduled in the step in flight
    double last_emit_s;        // its last visible token's step end from its second on (NaN: none yet)
    bool measured;             // not a warm-up request: its token gaps are counted
  };
  Running running_entry(const Request& r, std::int32_t slot) const;
  // A running entry's chunk of n prompt tokens (or its decode) joins the step's batch summary.
  void count_running(const Running& h, std::int64_t n, bool decode);
  // Blocks for a running request's tokens up to `end` (no preemption): false when the pool cannot
  // give them, and nothing changes.
  bool grow_to(Running& h, std::int64_t end);
  std::vector<Running> running_;
  TokenGaps* gaps_ = nullptr;
  double steady_end_s_ = NAN;   // the last steady cycle's step end (NaN: the stretch's first is next)
  double prev_end_s_ = NAN;     // the last step's end (complete() or a steady cycle)
  std::int64_t steady_measured_ = 0;   // measured requests in the running list of the stretch (counted at its first cycle)
  Ring<std::int32_t> waiting_;          // FCFS; preempted requests go back to the front
  Ring<std::int32_t> pending_;          // decode-only: waiting for a KV reservation
  // Decode-only: pulled requests (slot, when the pull landed) not yet in a batch, in landing order.
  std::vector<std::pair<double, std::int32_t>> landed_;
  int reserved_ = 0;                    // decode-only: requests holding blocks, KV in flight
  std::vector<Output> outputs_;
  models::StepBatch batch_;
  int scheduled_ = 0;
  std::int64_t waiting_tokens_ = 0;
  std::int64_t preemptions_ = 0;
  int emitting_ = 0;
  bool defer_release_ = false;
  std::vector<std::int32_t> deferred_;
  std::vector<PrefillPart> prefill_parts_;
  std::vector<std::int32_t> steady_blocks_;   // steady stretch: blocks taken by cycle (index = cycle)
  int steady_total_ = 0, steady_base_ = 0;    // ... its cycles, and those committed
  std::uint64_t rng_;
  double new_token_ratio_ = 0;          // SGLang: NewTokenRatioTracker's current ratio
  std::shared_ptr<KvOffload> offload_;
  double onboard_s_ = 0;
};

}  // namespace servesim::sim
