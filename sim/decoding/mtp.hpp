// Multi-token-prediction (MTP) speculative decoding. Each decode step the MTP head drafts k
// tokens one after another, the model verifies all of them in one pass (1 + k query tokens per
// sequence, StepBatch::tokens_per_decode_seq), and the client receives the accepted prefix of
// the drafts plus the model's own next token: between 1 and k + 1 tokens, in one burst.
#pragma once
#include <cstdint>
#include <vector>

#include "models/model_spec.hpp"
#include "models/step_cost.hpp"

namespace servesim::sim {

struct MtpConfig {
  int draft_tokens = 0;             // k (vLLM num_speculative_tokens); 0 = off
  // Probability that draft i is accepted given drafts 0..i-1 were (one entry per position);
  // a single entry applies to every position.
  std::vector<double> acceptance;
  // Time of one draft pass relative to a plain decode step of the same batch (see draft_cost_fraction()).
  double draft_cost_fraction = 0;
  std::uint64_t seed = 0;

  bool enabled() const { return draft_tokens > 0; }
  double acceptance_at(int i) const;   // conditional acceptance of draft i (0-based)
  void validate(const std::string& where) const;   // throws Error naming the bad field
};

// Draft cost fraction of `m`: weights one MTP pass streams (its blocks with top-k experts, plus
// the LM head it re-runs) over the weights one decode step streams (active parameters); decode is
// memory-bound, so time follows bytes. 0 when the model has no MTP layers.
double draft_cost_fraction(const models::ModelSpec& m);

// The MTP configuration of `drafts` draft tokens on `m` at `acceptance` (one rate or one per
// position), its draft cost from the model's MTP layers; validated, errors naming `where`.
MtpConfig make_mtp(const models::ModelSpec& m, int drafts, std::vector<double> acceptance, std::uint64_t seed,
                   const std::string& where);

// Expected tokens a client receives per step: 1 + sum_i prod_{j<=i} acceptance_j.
double expected_tokens_per_step(const MtpConfig& c);

// Tokens emitted by request `request_id` at its `step`-th decode step (>= 1, <= k + 1), drawn
// from a hash of (seed, request, step): the same whatever the batch order or thread count.
int emitted_tokens(const MtpConfig& c, std::uint64_t request_id, std::uint64_t step);

// GPU time of a decode-carrying step with MTP: the verify pass (1 + k tokens per decode sequence)
// plus k draft passes over the decode sequences. Without MTP: cost.seconds(b).
double step_seconds_with_mtp(const models::StepCostModel& cost, models::StepBatch b, const MtpConfig& c);

}  // namespace servesim::sim
