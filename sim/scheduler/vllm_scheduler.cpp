#include "sim/scheduler/vllm_scheduler.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>

#include "common/error.hpp"
#include "common/splitmix.hpp"
#include "workloads/frontend.hpp"

namespace servesim::sim {

VllmScheduler::VllmScheduler(const EngineConfig& cfg, std::int64_t kv_blocks, const models::KvDemand& demand,
                             std::uint64_t seed)
    : cfg_(cfg), pool_(kv_blocks, cfg.enable_prefix_caching), demand_(demand), lookahead_(cfg.num_speculative_tokens),
      state_blocks_(demand.state_blocks(cfg.num_speculative_tokens)),
      rng_(seed * 0x9e3779b97f4a7c15ULL + 0x632be59bd9b4e019ULL), new_token_ratio_(cfg.sglang.init_new_token_ratio) {
  if (cfg_.enable_prefix_caching && !demand_.simple())
    throw Error("enable_prefix_caching", "",
                "prefix caching is modelled for one full-attention group without sliding windows; this model's KV cache has " +
                    std::to_string(demand_.full_groups) + " full-attention and " + std::to_string(demand_.windows.size()) +
                    " sliding-window groups");
  if (cfg_.kind == EngineKind::trtllm && !demand_.windows.empty())
    window_reservation_ = cfg_.enable_chunked_prefill ? cfg_.max_num_batched_tokens : 0;
  slots_.reserve(static_cast<std::size_t>(cfg_.max_num_seqs) * 2 + 16);
  running_.reserve(static_cast<std::size_t>(cfg_.max_num_seqs) + 1);
  outputs_.reserve(static_cast<std::size_t>(cfg_.max_num_seqs) * 2 + 16);
}

std::int32_t VllmScheduler::new_slot() {
  std::int32_t slot;
  if (!free_slots_.empty()) {
    slot = free_slots_.back();
    free_slots_.pop_back();
  } else {
    slot = static_cast<std::int32_t>(slots_.size());
    slots_.emplace_back();
  }
  Request& r = slots_[static_cast<std::size_t>(slot)];
  // Reset, keeping the vectors' capacity so a recycled slot does not allocate again.
  auto keys = std::move(r.block_keys);
  auto ids = std::move(r.cached_block_ids);
  r = Request{};
  keys.clear();
  ids.clear();
  r.block_keys = std::move(keys);
  r.cached_block_ids = std::move(ids);
  return slot;
}

namespace {
// "request 3", or "trace line 7" for a request read from a trace (sim::simulate adds the file).
std::string request_name(const workloads::RequestSpec& spec) {
  return spec.trace_line > 0 ? "trace line " + std::to_string(spec.trace_line) : "request " + std::to_string(spec.id);
}
}  // namespace

std::int32_t VllmScheduler::add(const workloads::RequestSpec& spec, double now_s, int client, bool warmup) {
  // vLLM's frontend refuses a request whose prompt plus max_tokens exceeds max_model_len (HTTP
  // 400). Checked where a client's request arrives, not on a disaggregated decode worker's
  // transfer (which carries the prefill's extra sampled token).
  const std::int64_t total = spec.input_tokens + spec.output_tokens;
  if (cfg_.max_model_len > 0 && total > cfg_.max_model_len)
    throw Error(request_name(spec), "input_tokens + output_tokens",
                std::to_string(total) + " tokens exceed max_model_len " + std::to_string(cfg_.max_model_len) +
                    " (vLLM rejects such a request; shorten the request or raise max_model_len)");
  // TRT-LLM without chunked prefill runs a context whole in one step of at most max_num_tokens.
  if (cfg_.kind == EngineKind::trtllm && !cfg_.enable_chunked_prefill && spec.input_tokens > cfg_.max_num_batched_tokens)
    throw Error(request_name(spec), "input_tokens",
                std::to_string(spec.input_tokens) + " prompt tokens exceed max_num_tokens " +
                    std::to_string(cfg_.max_num_batched_tokens) +
                    " (TensorRT-LLM without chunked prefill runs a prompt whole in one step; raise max_num_batched_tokens or "
                    "enable_chunked_prefill)");
  std::int32_t slot = init(spec, now_s, client, warmup);
  waiting_.push_back(slot);
  waiting_tokens_ += request(slot).num_tokens();
  return slot;
}

std::int32_t VllmScheduler::init(const workloads::RequestSpec& spec, double now_s, int client, bool warmup) {
  const std::int64_t total = spec.input_tokens + spec.output_tokens;
  std::int64_t need = blocks_for(total, total);
  if (need > pool_.capacity())
    throw Error(request_name(spec), "input_tokens + output_tokens",
                std::to_string(total) + " tokens need " + std::to_string(need) + " KV cache blocks of " +
                    std::to_string(cfg_.block_size) + " tokens" +
                    (state_blocks_ > 0 ? " (" + std::to_string(state_blocks_) + " of them state blocks)" : std::string()) +
                    "; the replica holds " + std::to_string(pool_.capacity()));
  std::int32_t slot = new_slot();
  Request& r = request(slot);
  r.id = spec.id;
  r.arrival_s = now_s;
  r.sent_s = now_s;
  r.input_tokens = spec.input_tokens;
  r.output_tokens = spec.output_tokens;
  r.vision_tiles = spec.vision_tiles;
  r.client = client;
  r.warmup = warmup;
  r.preamble_tokens = cfg_.response_preamble_tokens;
  if (pool_.prefix_caching())
    block_keys(spec.prefix_hashes, spec.hash_block_tokens, spec.hashed_tokens > 0 ? spec.hashed_tokens : spec.input_tokens,
               cfg_.block_size, r.block_keys);
  return slot;
}

std::int32_t VllmScheduler::add_transferred(const workloads::RequestSpec& spec, double now_s, double first_token_s,
                                            int client, bool warmup) {
  std::int32_t slot = init(spec, now_s, client, warmup);
  Request& r = request(slot);
  r.first_token_s = first_token_s;
  pending_.push_back(slot);
  try_reserve();
  return slot;
}

void VllmScheduler::try_reserve() {
  while (!pending_.empty() && num_running() + reserved_ < cfg_.max_num_seqs) {
    std::int32_t slot = pending_.front();
    Request& r = request(slot);
    const std::int64_t end = transfer_reserve_end(r);
    std::int64_t need = blocks_for(r.input_tokens, end);
    if (!pool_.allocate(need)) break;
    r.blocks = need;
    r.token_slots = slots_for(end);
    r.phase = Phase::awaiting_kv;
    ++reserved_;
    pending_.pop_front();
    outputs_.push_back({Output::kv_reserved, slot});
  }
}

void VllmScheduler::transfer_done(std::int32_t slot, double now_s) {
  Request& r = request(slot);
  --reserved_;
  r.computed = r.input_tokens;
  r.generated = 1;  // the prefill worker sampled the first token
  r.phase = Phase::running;
  r.scheduled_s = now_s;
  if (r.generated >= r.output_tokens) {
    r.phase = Phase::finished;
    r.finish_s = now_s;
    free_resources(r);
    outputs_.push_back({Output::finished, slot});
    return;
  }
  // vLLM's engine core learns of a finished pull in a step's output, and with async scheduling the
  // next batch was formed before that output was applied (reference vllm-engine.md s2.4: a request
  // that arrives while batch N runs joins N + 2 at the earliest). The SGLang and TensorRT-LLM
  // profiles keep a pulled request in the next batch formed after it landed: how their decode
  // servers poll a finished transfer is not in the reference.
  landed_.emplace_back(cfg_.kind == EngineKind::vllm ? now_s : -std::numeric_limits<double>::infinity(), slot);
}

VllmScheduler::Running VllmScheduler::running_entry(const Request& r, std::int32_t slot) const {
  return Running{r.computed, r.num_tokens(), r.token_slots - lookahead_, r.input_tokens, r.output_tokens - r.generated, slot, 0,
                 r.last_token_s, !r.warmup};
}

void VllmScheduler::release_handoff(std::int32_t slot) {
  free_resources(request(slot));
  free_slots_.push_back(slot);
}

void VllmScheduler::clear_outputs() {
  for (const Output& o : outputs_)
    if (o.kind == Output::finished && !request(o.slot).release_pending) free_slots_.push_back(o.slot);
  outputs_.clear();
}

void VllmScheduler::release_deferred() {
  for (std::int32_t slot : deferred_) {
    Request& r = request(slot);
    free_resources(r);
    r.release_pending = false;
    free_slots_.push_back(slot);
  }
  deferred_.clear();
}

void VllmScheduler::release_idle() {
  release_deferred();
  if (cfg_.role == WorkerRole::decode_only) try_reserve();
}

bool VllmScheduler::waiting_arrived_by(double t_s) const {
  return !waiting_.empty() && request(waiting_.front()).arrival_s <= t_s;
}

void VllmScheduler::free_resources(Request& r) {
  std::int64_t anonymous = r.blocks - static_cast<std::int64_t>(r.cached_block_ids.size());
  if (!r.cached_block_ids.empty()) pool_.release_cached(r.cached_block_ids);
  pool_.release(anonymous);
  r.blocks = 0;
  r.token_slots = 0;
  r.keyed_blocks = 0;
}

void VllmScheduler::preempt(std::int32_t slot, std::int64_t computed) {
  Request& r = request(slot);
  // vLLM hashes every full block a request computes, its answer's as well as its prompt's
  // (Request.block_hashes grow with its tokens; cache_blocks on each allocation), and frees a
  // preempted request's blocks to the free queue still hashed, tail first: its recompute finds the
  // blocks not evicted since as prefix-cache hits. One block id per position (no sliding window,
  // no state groups), as the prompt keys assume.
  if (cfg_.kind == EngineKind::vllm && pool_.prefix_caching() && demand_.simple() && state_blocks_ == 0 &&
      computed >= cfg_.block_size) {
    own_block_keys(r.id, computed / cfg_.block_size, r.block_keys);
    r.computed = computed;
    publish_blocks(r);
  }
  free_resources(r);
  r.computed = 0;
  r.phase = Phase::waiting;
  ++r.preemptions;
  ++preemptions_;
  // vLLM puts a preempted request back at the head of the queue; SGLang appends a retracted one.
  if (cfg_.kind == EngineKind::sglang) waiting_.push_back(slot);
  else waiting_.push_front(slot);
  waiting_tokens_ += r.num_tokens();
  outputs_.push_back({Output::preempted, slot});
}

// Draft tokens accepted in one verify step: position i is accepted with its probability given
// every earlier one was; the first rejection ends the run. splitmix64 keeps it reproducible.
int VllmScheduler::accepted_drafts() {
  int a = 0;
  for (int i = 0; i < cfg_.num_speculative_tokens; ++i) {
    double p = i < static_cast<int>(cfg_.acceptance_per_position.size()) ? cfg_.acceptance_per_position[static_cast<std::size_t>(i)] : 1.0;
    const std::uint64_t z = splitmix64(rng_);   // the SplitMix64 generator: hash, then advance
    rng_ += 0x9e3779b97f4a7c15ULL;
    if (unit_interval(z) >= p) break;
    ++a;
  }
  return a;
}

const models::StepBatch& VllmScheduler::schedule(double now_s, double cutoff_s) {
  batch_ = models::StepBatch{};
  onboard_s_ = 0;
  emitting_ = 0;
  prefill_parts_.clear();
  batch_.tokens_per_decode_seq = 1 + cfg_.num_speculative_tokens;
  scheduled_ = 0;
  // Pulled requests that had landed when this batch was formed join the running list.
  std::size_t joined = 0;
  while (joined < landed_.size() && landed_[joined].first <= cutoff_s) {
    const std::int32_t slot = landed_[joined++].second;
    running_.push_back(running_entry(request(slot), slot));
  }
  if (joined > 0) landed_.erase(landed_.begin(), landed_.begin() + static_cast<std::ptrdiff_t>(joined));
  switch (cfg_.kind) {
    case EngineKind::vllm: schedule_vllm(now_s, cutoff_s); break;
    case EngineKind::sglang: schedule_sglang(now_s, cutoff_s); break;
    case EngineKind::trtllm: schedule_trtllm(now_s, cutoff_s); break;
  }
  return batch_;
}

void VllmScheduler::count_running(const Running& h, std::int64_t n, bool decode) {
  ++scheduled_;
  if (decode) {
    ++batch_.decode_seqs;
    batch_.decode_context_tokens += h.computed + 1;
    ++emitting_;
    return;
  }
  ++batch_.prefill_seqs;
  batch_.prefill_tokens += n;
  batch_.prefill_attention_pairs += double(n) * double(h.computed) + double(n) * double(n + 1) / 2;
  if (h.computed + n >= h.tokens) ++emitting_;
  prefill_parts_.push_back({request(h.slot).cohort, n});
}

void VllmScheduler::schedule_vllm(double now_s, double cutoff_s) {
  std::int64_t budget = cfg_.max_num_batched_tokens;
  const std::int64_t threshold = cfg_.long_prefill_token_threshold;
  bool preempted = false;

  // Running requests, oldest first. Decodes are counted into locals and added to the batch
  // summary after the loop (integer sums: the same totals, kept in registers).
  const std::int64_t tpd = batch_.tokens_per_decode_seq;
  int decodes = 0;
  std::int64_t decode_context = 0;
  for (std::size_t i = 0; i < running_.size() && budget > 0; ++i) {
    Running& h = running_[i];
    const bool decode = h.computed >= h.input && h.tokens - h.computed == 1;
    std::int64_t n = decode ? tpd : h.tokens - h.computed;
    if (!decode && threshold > 0 && n > threshold) n = threshold;
    n = std::min(n, budget);
    if (h.computed + n > h.cap) {  // most decode steps stay inside the last block
      const std::int32_t self = h.slot;
      Request& r = request(self);
      // Attention blocks for the new tokens (+ lookahead); sliding windows may free some.
      const std::int64_t need = blocks_for(h.computed, h.computed + n) - r.blocks;
      bool scheduled = true;
      while (need > 0 && !pool_.allocate(need)) {
        // Out of blocks: preempt the newest running request (possibly this one) and retry.
        const Running& back = running_.back();
        const std::int32_t victim = back.slot;
        request(victim).generated = back.tokens - back.input;  // the running list held it
        request(victim).last_token_s = back.last_emit_s;
        const std::int64_t victim_computed = back.computed;
        running_.pop_back();
        preempt(victim, victim_computed);
        preempted = true;
        if (victim == self) {
          scheduled = false;
          break;
        }
      }
      if (!scheduled) break;
      if (need < 0) pool_.release(-need);
      r.blocks += need;
      r.token_slots = slots_for(h.computed + n);
      h.cap = r.token_slots - lookahead_;
    }
    h.step = static_cast<std::int32_t>(n);
    budget -= n;
    if (decode) {
      ++decodes;
      decode_context += h.computed + 1;
    } else {
      count_running(h, n, false);
    }
  }
  scheduled_ += decodes;
  emitting_ += decodes;
  batch_.decode_seqs += decodes;
  batch_.decode_context_tokens += decode_context;

  // Waiting requests, FCFS, only when this step preempted nothing (as vLLM does).
  if (!preempted) {
    while (!waiting_.empty() && budget > 0 && seats_taken() < cfg_.max_num_seqs) {
      if (request(waiting_.front()).arrival_s > cutoff_s) break;   // not yet at the engine when this batch was formed
      if (!try_admit(waiting_.front(), budget, now_s)) break;
      waiting_.pop_front();
    }
  }
}

std::int64_t VllmScheduler::prefix_hit(const Request& r, std::int64_t* free_hits, std::int64_t* onboard) const {
  *free_hits = 0;
  if (onboard) *onboard = 0;
  if (!pool_.prefix_caching() || r.block_keys.empty()) return 0;
  // No engine takes a full hit: the last token is recomputed to sample from it.
  const std::int64_t max_hit = (r.num_tokens() - 1) / cfg_.block_size;
  const std::int64_t hit = pool_.match(r.block_keys, max_hit, free_hits);
  // Offload hook: the blocks after the GPU hits that a tier holds are onboarded, not recomputed.
  if (onboard && offload_) *onboard = offload_->match(r.block_keys, hit, max_hit - hit);
  return hit;
}

bool VllmScheduler::try_admit(std::int32_t slot, std::int64_t& budget, double now_s) {
  const Request& r = request(slot);
  std::int64_t free_hits = 0, onboard = 0;
  const std::int64_t hit_blocks = prefix_hit(r, &free_hits, &onboard);
  const std::int64_t computed = (hit_blocks + onboard) * cfg_.block_size;
  std::int64_t n = r.num_tokens() - computed;
  if (cfg_.long_prefill_token_threshold > 0 && n > cfg_.long_prefill_token_threshold) n = cfg_.long_prefill_token_threshold;
  if (!cfg_.enable_chunked_prefill && n > budget) return false;
  n = std::min(n, budget);
  // Its attention blocks for the first chunk (+ lookahead) and its state blocks.
  const std::int64_t need = blocks_for(computed, computed + n) - hit_blocks;
  if (need > pool_.allocatable() - free_hits) return false;
  admit(slot, hit_blocks, n, computed + n, now_s, onboard);
  budget -= n;
  return true;
}

void VllmScheduler::admit(std::int32_t slot, std::int64_t hit_blocks, std::int64_t n, std::int64_t end, double now_s,
                          std::int64_t onboard) {
  Request& r = request(slot);
  const std::int64_t computed = (hit_blocks + onboard) * cfg_.block_size;
  const std::int64_t need = blocks_for(computed, end) - hit_blocks;
  if (hit_blocks > 0) pool_.acquire(r.block_keys, hit_blocks, r.cached_block_ids);
  pool_.allocate(need);
  r.blocks = hit_blocks + need;
  r.token_slots = slots_for(end);
  r.keyed_blocks = hit_blocks;
  r.computed = computed;
  if (onboard > 0) {   // the onboarded blocks hold their content now: cached like computed ones
    onboard_s_ += offload_->onboard(r.block_keys, hit_blocks, onboard, cfg_.block_size, std::isnan(r.scheduled_s));
    publish_blocks(r);
  }
  r.cached_tokens = computed;
  r.phase = Phase::running;
  const bool first = std::isnan(r.scheduled_s);
  if (first) {
    r.scheduled_s = now_s;
    prompt_tokens_admitted_ += r.num_tokens();
    prompt_tokens_cached_ += computed;
  }
  waiting_tokens_ -= r.num_tokens();
  running_.push_back(running_entry(r, slot));
  running_.back().step = static_cast<std::int32_t>(n);
  ++scheduled_;
  ++batch_.prefill_seqs;
  batch_.prefill_tokens += n;
  batch_.prefill_attention_pairs += double(n) * double(computed) + double(n) * double(n + 1) / 2;
  batch_.vision_tiles += r.vision_tiles;  // the encoder runs with the first chunk
  if (computed + n >= r.num_tokens()) ++emitting_;
  prefill_parts_.push_back({r.cohort, n, first && r.cohort >= 0 && !r.warmup ? r.arrival_s : NAN});
}

void VllmScheduler::publish_blocks(Request& r) {
  const std::int64_t full = std::min<std::int64_t>(r.computed / cfg_.block_size, static_cast<std::int64_t>(r.block_keys.size()));
  for (; r.keyed_blocks < full; ++r.keyed_blocks)
    pool_.publish(r.block_keys[static_cast<std::size_t>(r.keyed_blocks)], r.cached_block_ids);
}

double EmitTime::resolve() {
  if (out_cv > 0) {
    at_s = at_s + out_s * workloads::lognormal_factor(out_cv, out_state);
    out_cv = 0;
  }
  if (hop) {
    at_s += hop->sample(state);
    hop = nullptr;
  }
  return at_s;
}

void VllmScheduler::complete(double now_s, EmitTime& emit) {
  release_deferred();
  std::size_t kept = 0;
  const bool spec = cfg_.num_speculative_tokens > 0;
  const bool prefill_only = cfg_.role == WorkerRole::prefill_only;
  // The client's first and second visible tokens are sampled tokens K+1 and K+2 (K: the model's
  // response preamble); a decode-only worker's client tokens are timed by its topology.
  const std::int64_t preamble = cfg_.response_preamble_tokens;
  const std::int64_t timed_tokens = 3 + preamble;
  const bool time_visible = cfg_.role != WorkerRole::decode_only;
  const double end_s = now_s;   // token gaps are timed at the step's end, the engine's output
  // The step's gaps: a plain decode that took its last token at the previous step's end (most of
  // them) is counted, the others as runs of equal gaps handed to gaps_ when the value changes.
  const bool count_gaps = gaps_ != nullptr;
  const double prev_end_s = prev_end_s_;
  std::int64_t one_step = 0;
  double run_gap = NAN;
  std::int64_t run_n = 0;
  auto gap = [&](const Running& h) {
    if (!h.measured) return;
    const double g = end_s - h.last_emit_s;
    if (g == run_gap) {
      ++run_n;
      return;
    }
    if (run_n > 0) gaps_->add(run_gap, run_n);
    run_gap = g;
    run_n = 1;
  };
  // Entries are updated in place and moved down over the ones that left.
  const auto keep = [&](std::size_t i) {
    if (kept != i) running_[kept] = running_[i];
    ++kept;
  };
  for (std::size_t i = 0; i < running_.size(); ++i) {
    Running& h = running_[i];
    const std::int64_t n = h.step;
    if (n == 0) {
      keep(i);
      continue;
    }
    h.step = 0;
    // Steady decode: a plain token after the client's first two (the third sampled, after any
    // response preamble), not the last. Only the running list's counters move; the Request's
    // generated/computed catch up when the request leaves it.
    if (!spec && h.tokens - h.computed == 1 && h.tokens - h.input >= timed_tokens && h.left > 1) {
      ++h.computed;
      ++h.tokens;
      --h.left;
      if (count_gaps) {
        if (h.last_emit_s == prev_end_s)
          one_step += h.measured;
        else
          gap(h);
      }
      h.last_emit_s = end_s;
      keep(i);
      continue;
    }
    Request& r = request(h.slot);
    const std::int64_t before = h.tokens;
    h.computed += n;
    if (r.keyed_blocks < static_cast<std::int64_t>(r.block_keys.size())) {
      r.computed = h.computed;
      publish_blocks(r);
    }
    if (h.computed < before) {  // a partial prefill chunk: no token yet
      r.computed = h.computed;
      keep(i);
      continue;
    }
    // The step covered the last known token: the model samples the next one(s).
    std::int64_t emitted = 1;
    if (spec && h.computed > before) emitted += accepted_drafts();
    emitted = std::min(emitted, h.left);
    h.left -= emitted;
    h.tokens += emitted;
    h.computed = h.tokens - 1;  // the newest sampled token is not in the KV cache yet
    r.generated = h.tokens - h.input;
    r.computed = h.computed;
    const std::int64_t prev = r.generated - emitted;
    if (r.generated - preamble >= 2) {   // from the second visible token on: one gap a step (a chunk)
      if (count_gaps && !std::isnan(h.last_emit_s)) gap(h);
      h.last_emit_s = end_s;
    }
    if (prev == 0) {  // the first sampled token
      outputs_.push_back({Output::first_token, h.slot});
      if (prefill_only) {
        r.first_token_s = emit.get();
        r.phase = Phase::handed_off;  // keeps its blocks until release_handoff()
        outputs_.push_back({Output::handoff, h.slot});
        continue;
      }
    }
    if (time_visible) {  // the client's first two visible tokens are timed; the rest only counted
      if (prev <= preamble && r.generated > preamble) r.first_token_s = emit.get();
      if (prev <= preamble + 1 && r.generated > preamble + 1) r.second_token_s = emit.get();
    }
    if (h.left == 0) {
      // Prefix-cache hook: the answer's full blocks whose content the request's keys describe (a
      // session's next turn re-sends it) join the cache as vLLM caches every full block.
      if (r.keyed_blocks < static_cast<std::int64_t>(r.block_keys.size())) publish_blocks(r);
      r.phase = Phase::finished;
      r.finish_s = emit.get();
      if (std::isnan(r.first_token_s)) r.first_token_s = emit.get();  // all preamble: seen at the end
      if (defer_release_) {
        r.release_pending = true;
        deferred_.push_back(h.slot);
      } else {
        free_resources(r);
      }
      outputs_.push_back({Output::finished, h.slot});
      continue;
    }
    keep(i);
  }
  running_.resize(kept);
  if (run_n > 0) gaps_->add(run_gap, run_n);
  if (one_step > 0) gaps_->add(end_s - prev_end_s, one_step);
  prev_end_s_ = end_s;
  if (cfg_.role == WorkerRole::decode_only) try_reserve();
}

}  // namespace servesim::sim

namespace servesim::sim {

int VllmScheduler::steady_cycles(int limit) {
  // Every policy forms the same batch from a running list of plain decodes with nothing waiting:
  // vLLM's and TensorRT-LLM's schedule every running request (the token budget took them all this
  // step), SGLang's runs a decode step (no chunk, no queue) whose retraction check passes while
  // empty blocks last; its new-token ratio decays by cycle (steady_cycle).
  // A batch with a prefill chunk is not one: a re-admitted request whose prefix-cache hit left one
  // token to recompute looks like a decode in the running list but ran that token as a prefill.
  steady_total_ = steady_base_ = 0;
  steady_end_s_ = NAN;
  if (lookahead_ != 0 || !waiting_.empty() || !pending_.empty() || reserved_ != 0 || !landed_.empty() ||
      !demand_.windows.empty() || running_.empty() || limit <= 0 || batch_.prefill_seqs != 0)
    return 0;
  const std::int64_t timed_tokens = 3 + cfg_.response_preamble_tokens;
  std::int64_t cycles = limit;
  for (const Running& h : running_) {
    // Decoding in this batch, its next token not one the client times, and not its last.
    if (h.step != 1 || h.computed < h.input || h.tokens - h.computed != 1 || h.tokens - h.input < timed_tokens || h.left < 2)
      return 0;
    cycles = std::min(cycles, h.left - 1);
  }
  // Blocks crossed, by cycle: request h schedules token computed + m + 1 in cycle m and crosses
  // its last block when that exceeds cap, then every block_size cycles; one block per full group.
  const std::int64_t bs = cfg_.block_size;
  steady_blocks_.assign(static_cast<std::size_t>(cycles) + 1, 0);
  std::int64_t taken = 0;
  for (const Running& h : running_)
    for (std::int64_t m = h.cap - h.computed; m <= cycles; m += bs) {
      steady_blocks_[static_cast<std::size_t>(m)] += demand_.full_groups;
      taken += demand_.full_groups;
    }
  // Only blocks that need no eviction: the stretch ends before the pool's empty blocks run out
  // (found cycle by cycle only when all of them would not do).
  std::int64_t empty = pool_.capacity() - pool_.used() - pool_.cached();
  if (taken > empty)
    for (std::int64_t m = 1; m <= cycles; ++m) {
      empty -= steady_blocks_[static_cast<std::size_t>(m)];
      if (empty < 0) {
        cycles = m - 1;
        break;
      }
    }
  return steady_total_ = static_cast<int>(cycles);
}

void VllmScheduler::steady_cycle(int cycle, double end_s) {
  // Every running request takes a token at end_s: after the stretch's first cycle all of them took
  // their last one at the cycle before; at the first, each at its own last (a request that sat out
  // a prefill-only step, SGLang's, waited that step too).
  if (gaps_) {
    if (!std::isnan(steady_end_s_)) {
      gaps_->add(end_s - steady_end_s_, steady_measured_);
    } else {   // the stretch's first cycle: each its own gap; the measured ones counted for the next cycles
      steady_measured_ = 0;
      for (const Running& h : running_)
        if (h.measured) {
          gaps_->add(end_s - h.last_emit_s);
          ++steady_measured_;
        }
    }
  }
  steady_end_s_ = end_s;
  release_deferred();
  batch_.decode_context_tokens += static_cast<std::int64_t>(running_.size());
  pool_.allocate(steady_blocks_[static_cast<std::size_t>(steady_base_ + cycle)]);
  if (cfg_.kind == EngineKind::sglang) decay_new_token_ratio();
}

void VllmScheduler::steady_commit(int cycles) {
  if (cycles <= 0) return;
  steady_base_ += cycles;
  const std::int64_t bs = cfg_.block_size;
  prev_end_s_ = steady_end_s_;
  for (Running& h : running_) {
    h.last_emit_s = steady_end_s_;
    const std::int64_t first = h.cap - h.computed;   // the cycle of its first crossing
    h.computed += cycles;
    h.tokens += cycles;
    h.left -= cycles;
    if (first > cycles) continue;
    const std::int64_t crossed = (cycles - first) / bs + 1;
    Request& r = request(h.slot);
    r.blocks += crossed * demand_.full_groups;
    h.cap += crossed * bs;
    r.token_slots = h.cap;
  }
}

}  // namespace servesim::sim
