#include "sim/session_metrics.hpp"

#include <algorithm>

namespace servesim::sim {

void SessionSink::on_finished(const Request& r) {
  inner_->on_finished(r);
  const auto t = static_cast<std::size_t>(sessions_->turn_of(r.id));
  if (turns_.size() <= t) turns_.resize(t + 1);
  Turn& x = turns_[t];
  ++x.n;
  x.prompt += r.input_tokens;
  x.cached += r.cached_tokens;
  x.ttft_ms.push_back(1e3 * (r.first_token_s - r.sent_s));
  const std::int64_t visible = r.output_tokens - r.preamble_tokens;
  if (visible > 1) x.itl_ms.push_back(1e3 * (r.finish_s - r.first_token_s) / double(visible - 1));
}

std::vector<TurnSummary> SessionSink::summary() const {
  std::vector<TurnSummary> out;
  for (std::size_t t = 0; t < turns_.size(); ++t) {
    Turn x = turns_[t];
    TurnSummary s;
    s.turn = static_cast<int>(t);
    s.requests = x.n;
    s.prompt_tokens = x.prompt;
    s.cached_tokens = x.cached;
    s.prompt_tokens_avg = x.n > 0 ? double(x.prompt) / double(x.n) : 0.0;
    s.ttft_ms = compute_stats(x.ttft_ms);
    s.itl_ms = compute_stats(x.itl_ms);
    out.push_back(std::move(s));
  }
  return out;
}

}  // namespace servesim::sim
