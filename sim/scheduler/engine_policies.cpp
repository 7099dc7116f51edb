// How SGLang and TensorRT-LLM form a step's batch (docs/engines.md; facts from
// ../shared/reference/sglang-trtllm-engines.md A4 and B3). The request lifecycle, the block pool,
// complete() and the disaggregated roles are VllmScheduler's.
#include <algorithm>

#include "sim/scheduler/vllm_scheduler.hpp"

namespace servesim::sim {

bool VllmScheduler::grow_to(Running& h, std::int64_t end) {
  if (end <= h.cap) return true;
  Request& r = request(h.slot);
  const std::int64_t need = blocks_for(h.computed, end) - r.blocks;
  if (need > 0 && !pool_.allocate(need)) return false;
  r.blocks += need;
  r.token_slots = slots_for(end);
  h.cap = r.token_slots - lookahead_;
  return true;
}

std::int64_t VllmScheduler::transfer_reserve_end(const Request& r) const {
  switch (cfg_.kind) {
    case EngineKind::vllm: break;
    case EngineKind::sglang:   // the decode server's pre-allocation: the prompt + reserved decode tokens
      return r.input_tokens + std::max<std::int64_t>(1, std::min(r.output_tokens, cfg_.sglang.num_reserved_decode_tokens));
    case EngineKind::trtllm:   // the generation server's GUARANTEED_NO_EVICT reservation
      return r.input_tokens + r.output_tokens;
  }
  return r.input_tokens + 1;
}

// SGLang's get_next_batch_to_run: a prefill (EXTEND) batch first, from the chunked request then
// the waiting queue under PrefillAdder's budgets; only if there is none, every running request
// decodes (after retraction if the pool cannot take one more token each). No step mixes both.
void VllmScheduler::schedule_sglang(double now_s, double cutoff_s) {
  const SglangPolicy& sp = cfg_.sglang;
  const std::int64_t bs = cfg_.block_size;
  std::int64_t rem_chunk = cfg_.max_num_batched_tokens;   // chunked_prefill_size
  std::int64_t rem_input = sp.max_prefill_tokens;
  // rem_total_tokens: free (and evictable) slots less what running requests are still expected to
  // write, new_token_ratio x min(remaining output, CLIP_MAX_NEW_TOKENS) each.
  double rem_total = double(pool_.allocatable()) * double(bs);
  for (const Running& h : running_) rem_total -= double(std::min(h.left, sp.clip_max_new_tokens)) * new_token_ratio_;

  // With attention DP the scheduler is the union of `lanes` ranks, each of which schedules on its own
  // (reference A6): up to one chunked request per rank, a prompt's chunk at most a rank's share of the
  // chunk budget (lockstep_engine).
  const int lanes = std::max(1, cfg_.lockstep_dp);
  const std::int64_t lane_chunk =
      lanes > 1 && cfg_.long_prefill_token_threshold > 0 ? cfg_.long_prefill_token_threshold : cfg_.max_num_batched_tokens;
  // The chunked requests (at most one a rank, mid-prompt) continue first.
  int chunked = 0;
  for (Running& h : running_) {
    if (chunked == lanes) break;
    const bool decode = h.computed >= h.input && h.tokens - h.computed == 1;
    if (decode) continue;
    const std::int64_t rest = h.tokens - h.computed;
    std::int64_t n = std::min({rest, rem_chunk, lane_chunk});
    if (n < rest) n = n / bs * bs;   // a truncated chunk ends on a page
    if (n <= 0) break;
    if (!grow_to(h, h.computed + n)) break;
    h.step = static_cast<std::int32_t>(n);
    count_running(h, n, false);
    rem_chunk -= n;
    rem_input -= n;
    rem_total -= double(n);
    chunked += h.computed + n < h.tokens ? 1 : 0;
    if (lanes == 1) break;
  }

  // New requests, FCFS, while the chunk, input and total-token budgets and the seats last.
  while (chunked < lanes && !waiting_.empty() && rem_chunk > 0 && rem_input > 0 && seats_taken() < cfg_.max_num_seqs) {
    const std::int32_t slot = waiting_.front();
    const Request& r = request(slot);
    if (r.arrival_s > cutoff_s) break;   // not yet at the scheduler when this batch was formed
    std::int64_t free_hits = 0;
    const std::int64_t hit = prefix_hit(r, &free_hits);
    const std::int64_t computed = hit * bs;
    const std::int64_t extend = r.num_tokens() - computed;
    const std::int64_t total = extend + std::min(r.output_tokens - r.generated, sp.clip_max_new_tokens);
    if (double(total) >= rem_total) break;   // AddReqResult.NO_TOKEN
    std::int64_t n = extend;
    if (n > std::min(rem_chunk, lane_chunk)) {
      n = std::min(rem_chunk, lane_chunk) / bs * bs;
      if (n <= 0) break;
      ++chunked;
    }
    if (blocks_for(computed, computed + n) - hit > pool_.allocatable() - free_hits) break;
    admit(slot, hit, n, computed + n, now_s);
    waiting_.pop_front();
    rem_chunk -= n;
    rem_input -= n;
    rem_total -= double(n < extend ? n : total);
  }
  if (scheduled_ > 0) return;   // a prefill step: the running requests' decodes wait

  if (running_.empty()) {   // idle: the tracker resets
    new_token_ratio_ = sp.init_new_token_ratio;
    return;
  }
  retract_for_decode();
  const std::int64_t tpd = batch_.tokens_per_decode_seq;
  for (Running& h : running_) {
    const bool decode = h.computed >= h.input && h.tokens - h.computed == 1;
    if (!decode) continue;   // a chunked prompt that found no room this step
    if (!grow_to(h, h.computed + tpd)) continue;
    h.step = static_cast<std::int32_t>(tpd);
    count_running(h, tpd, true);
  }
  decay_new_token_ratio();
}

void VllmScheduler::decay_new_token_ratio() {
  const SglangPolicy& sp = cfg_.sglang;
  const double min_ratio = sp.init_new_token_ratio * sp.min_new_token_ratio_factor;
  new_token_ratio_ = std::max(min_ratio, new_token_ratio_ - (sp.init_new_token_ratio - min_ratio) / sp.new_token_ratio_decay_steps);
}

// ScheduleBatch.retract_decode: when the pool cannot give every decoding request its next token,
// retract the request with the most output (ties: the shorter prompt) until retract_decode_steps
// tokens per remaining request fit; their blocks are freed and they queue again from scratch.
int VllmScheduler::retract_for_decode() {
  const std::int64_t tpd = batch_.tokens_per_decode_seq;
  const std::int64_t bs = cfg_.block_size;
  std::int64_t need = 0;
  for (const Running& h : running_)
    if (h.computed + tpd > h.cap) need += blocks_for(h.computed, h.computed + tpd) - request(h.slot).blocks;
  if (need <= pool_.allocatable()) return 0;
  int retracted = 0;
  const SglangPolicy& sp = cfg_.sglang;
  while (running_.size() > 1) {
    std::size_t victim = 0;
    for (std::size_t i = 1; i < running_.size(); ++i) {
      const Running& a = running_[i];
      const Running& b = running_[victim];
      const std::int64_t out_a = a.tokens - a.input, out_b = b.tokens - b.input;
      if (out_a > out_b || (out_a == out_b && a.input < b.input)) victim = i;
    }
    const Running v = running_[victim];
    request(v.slot).generated = v.tokens - v.input;   // the running list held it
    request(v.slot).last_token_s = v.last_emit_s;
    running_.erase(running_.begin() + static_cast<std::ptrdiff_t>(victim));
    preempt(v.slot);
    ++retracted;
    if (double(pool_.allocatable()) * double(bs) >= double(sp.retract_decode_steps) * double(running_.size())) break;
  }
  // The tracker's estimate after a retraction: what the rest decoded, plus the headroom, over what they may write.
  double decoded = 0, max_new = 0;
  for (const Running& h : running_) {
    decoded += double(h.tokens - h.input);
    max_new += double(h.tokens - h.input + h.left);
  }
  if (max_new > 0)
    new_token_ratio_ = std::min(1.0, (decoded + double(sp.retract_decode_steps) * double(running_.size())) / max_new);
  return retracted;
}

// TensorRT-LLM's in-flight batching: the micro-batch scheduler takes generation requests first
// (1 + draft tokens each), then context chunks in flight, then new context requests FCFS within
// max_num_tokens, whole unless chunked prefill is on. The capacity scheduler (GUARANTEED_NO_EVICT)
// admits a request only with blocks for its whole sequence, prompt + max_tokens (a context
// server's request has max_tokens 1), so a running request never needs another block and nothing
// is ever evicted.
void VllmScheduler::schedule_trtllm(double now_s, double cutoff_s) {
  const std::int64_t bs = cfg_.block_size;
  const std::int64_t tpd = batch_.tokens_per_decode_seq;
  std::int64_t budget = cfg_.max_num_batched_tokens;
  // Decodes are counted into locals and added to the batch summary after the loop (integer sums:
  // count_running's totals). A list the loop saw only decodes of holds no context chunk, and the
  // pass for those is skipped.
  int decodes = 0;
  std::int64_t decode_context = 0;
  bool contexts = false;
  for (Running& h : running_) {
    const bool decode = h.computed >= h.input && h.tokens - h.computed == 1;
    if (!decode) {
      contexts = true;
      continue;
    }
    if (budget < tpd || scheduled_ + decodes >= cfg_.max_num_seqs) {
      contexts = true;  // not looked at beyond here
      break;
    }
    if (!grow_to(h, h.computed + tpd)) continue;   // draft tokens beyond the reservation's last block
    h.step = static_cast<std::int32_t>(tpd);
    budget -= tpd;
    ++decodes;
    decode_context += h.computed + 1;
  }
  scheduled_ += decodes;
  emitting_ += decodes;
  batch_.decode_seqs += decodes;
  batch_.decode_context_tokens += decode_context;
  for (std::size_t i = 0; contexts && i < running_.size(); ++i) {   // context chunks in flight (chunked prefill only)
    Running& h = running_[i];
    const bool decode = h.computed >= h.input && h.tokens - h.computed == 1;
    if (decode || h.step > 0) continue;
    const std::int64_t rest = h.tokens - h.computed;
    std::int64_t n = std::min(rest, budget);
    if (n < rest) n = n / bs * bs;   // a chunk is a multiple of tokens_per_block
    if (n <= 0) break;
    h.step = static_cast<std::int32_t>(n);
    budget -= n;
    count_running(h, n, false);
  }
  while (!waiting_.empty() && budget > 0 && seats_taken() < cfg_.max_num_seqs) {
    const std::int32_t slot = waiting_.front();
    const Request& r = request(slot);
    if (r.arrival_s > cutoff_s) break;
    std::int64_t free_hits = 0;
    const std::int64_t hit = prefix_hit(r, &free_hits);
    const std::int64_t computed = hit * bs;
    std::int64_t n = r.num_tokens() - computed;
    if (n > budget) {
      if (!cfg_.enable_chunked_prefill) break;   // a whole context that does not fit waits
      n = budget / bs * bs;
      if (n <= 0) break;
    }
    const std::int64_t end = r.input_tokens + (cfg_.role == WorkerRole::prefill_only ? 1 : r.output_tokens);
    if (blocks_for(computed, end) - hit > pool_.allocatable() - free_hits) break;
    admit(slot, hit, n, end, now_s);
    waiting_.pop_front();
    budget -= n;
  }
}

}  // namespace servesim::sim
