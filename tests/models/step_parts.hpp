// Test helpers for step-cost breakdowns: a decode-only batch and the seconds of named rows.
#pragma once

#include <cstdint>
#include <string>

#include "models/step_cost.hpp"

namespace servesim::models::test_util {

// `seqs` decoding sequences of `context` tokens each.
inline StepBatch decode(int seqs, std::int64_t context) {
  StepBatch b;
  b.decode_seqs = seqs;
  b.decode_context_tokens = seqs * context;
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
