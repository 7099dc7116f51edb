// Test helpers for step-cost breakdowns: the H200, decode-only and prefill-only batches, the seconds of named rows.
#pragma once

#include <cstdint>
#include <string>

#include "hwmodels/catalog.hpp"
#include "models/step_cost.hpp"

namespace servesim::models::test_util {

inline const hw::GpuSpec& h200() { return hw::Catalog::global().gpu("h200"); }

// `seqs` decoding sequences of `context` tokens each.
inline StepBatch decode(int seqs, std::int64_t context) {
  StepBatch b;
  b.decode_seqs = seqs;
  b.decode_context_tokens = seqs * context;
  return b;
}

// `seqs` fresh prompts of `tokens` tokens each, prefilled whole in one step.
inline StepBatch prefill(int seqs, std::int64_t tokens) {
  StepBatch b;
  b.prefill_seqs = seqs;
  b.prefill_tokens = seqs * tokens;
  b.prefill_attention_pairs = seqs * (double(tokens) * double(tokens + 1) / 2);
  return b;
}

// Seconds of every breakdown row whose op is `op`.
inline double part(const StepTime& t, const std::string& op) {
  double s = 0;
  for (const auto& p : t.parts)
    if (p.op == op) s += p.seconds;
  return s;
}

}  // namespace servesim::models::test_util
