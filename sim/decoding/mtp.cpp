#include "sim/decoding/mtp.hpp"

#include <cmath>
#include <string>

#include "common/error.hpp"
#include "common/splitmix.hpp"

namespace servesim::sim {
namespace {
// A hash of (seed, request, step, position), so draws do not depend on call order.
double uniform(std::uint64_t seed, std::uint64_t request, std::uint64_t step, int position) {
  const std::uint64_t h =
      splitmix64(splitmix64(splitmix64(seed) ^ request) ^ step) ^ static_cast<std::uint64_t>(position + 1);
  return unit_interval(splitmix64(h));
}
}  // namespace

double MtpConfig::acceptance_at(int i) const {
  if (acceptance.empty()) return 0;
  return acceptance.size() == 1 ? acceptance[0] : acceptance.at(static_cast<std::size_t>(i));
}

void MtpConfig::validate(const std::string& where) const {
  if (draft_tokens < 0 || draft_tokens > 16)
    throw Error(where, "num_speculative_tokens", "must be between 0 and 16, got " + std::to_string(draft_tokens));
  if (draft_tokens == 0) return;
  if (acceptance.empty()) throw Error(where, "acceptance", "needs one rate, or one per draft position");
  if (acceptance.size() != 1 && static_cast<int>(acceptance.size()) != draft_tokens)
    throw Error(where, "acceptance", "has " + std::to_string(acceptance.size()) + " entries; give 1 or " +
                                         std::to_string(draft_tokens) + " (one per draft position)");
  for (double a : acceptance)
    if (!(a >= 0 && a <= 1)) throw Error(where, "acceptance", "rates must lie in [0, 1]");
  if (!(draft_cost_fraction >= 0)) throw Error(where, "draft_cost_fraction", "must be >= 0");
}

double draft_cost_fraction(const models::ModelSpec& m) {
  if (m.mtp_layers <= 0 || m.mtp_pattern.empty()) return 0;
  double active_moe = 0;
  if (m.experts > 0) {
    // Active share of one MoE block: top_k of the routed experts, everything else in full.
    const double per_expert = (m.moe_gated ? 3.0 : 2.0) * double(m.moe_width()) * double(m.moe_intermediate);
    active_moe = models::layer_params(m, models::LayerKind::moe) - (m.experts - m.top_k) * per_expert;
  }
  double head = 0;
  for (auto k : m.mtp_pattern)
    head += k == models::LayerKind::moe ? active_moe : models::layer_params(m, k);
  head += double(m.vocab) * double(m.hidden);   // the LM head runs once per draft token
  const double step = models::active_params(m);
  return step > 0 ? head / step : 0;
}

double expected_tokens_per_step(const MtpConfig& c) {
  double e = 1, run = 1;
  for (int i = 0; i < c.draft_tokens; ++i) {
    run *= c.acceptance_at(i);
    e += run;
  }
  return e;
}

int emitted_tokens(const MtpConfig& c, std::uint64_t request_id, std::uint64_t step) {
  int accepted = 0;
  while (accepted < c.draft_tokens && uniform(c.seed, request_id, step, accepted) < c.acceptance_at(accepted))
    ++accepted;
  return accepted + 1;
}

double step_seconds_with_mtp(const models::StepCostModel& cost, models::StepBatch b, const MtpConfig& c) {
  if (!c.enabled() || b.decode_seqs == 0) return cost.seconds(b);
  models::StepBatch draft;
  draft.decode_seqs = b.decode_seqs;
  draft.decode_context_tokens = b.decode_context_tokens;
  const double draft_s = c.draft_tokens * c.draft_cost_fraction * cost.seconds(draft);
  b.tokens_per_decode_seq = 1 + c.draft_tokens;
  return cost.seconds(b) + draft_s;
}

MtpConfig make_mtp(const models::ModelSpec& m, int drafts, std::vector<double> acceptance, std::uint64_t seed,
                   const std::string& where) {
  MtpConfig c;
  c.draft_tokens = drafts;
  c.acceptance = std::move(acceptance);
  c.draft_cost_fraction = draft_cost_fraction(m);
  c.seed = seed;
  c.validate(where);
  return c;
}

}  // namespace servesim::sim
