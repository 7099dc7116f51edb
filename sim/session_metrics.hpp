// Metrics of a multi-turn session workload per turn index: how many turns, their mean prompt
// (history + new tokens), the share of prompt tokens the prefix cache served, and TTFT / ITL as
// the client saw them (aiperf's definitions). Fed by a RequestSink that wraps the run's own.
#pragma once
#include <cstdint>
#include <vector>

#include "sim/engine/cluster.hpp"
#include "sim/metrics.hpp"
#include "workloads/sessions.hpp"

namespace servesim::sim {

struct TurnSummary {
  int turn = 0;                      // 0-based turn index
  std::int64_t requests = 0;
  double prompt_tokens_avg = 0;
  std::int64_t prompt_tokens = 0, cached_tokens = 0;
  double hit_fraction() const { return prompt_tokens > 0 ? double(cached_tokens) / double(prompt_tokens) : 0.0; }
  Stats ttft_ms, itl_ms;
};

// Passes every event on to `inner` and keeps per-turn figures of the requests of `sessions`.
class SessionSink : public RequestSink {
 public:
  SessionSink(RequestSink& inner, const workloads::SessionWorkload& sessions) : inner_(&inner), sessions_(&sessions) {}
  void on_finished(const Request& r) override;
  void on_step(int worker, double start_s, double step_s, int seqs, double kv_util) override {
    inner_->on_step(worker, start_s, step_s, seqs, kv_util);
  }
  TokenGaps* token_gaps() override { return inner_->token_gaps(); }
  std::vector<TurnSummary> summary() const;

 private:
  struct Turn { std::vector<double> ttft_ms, itl_ms; std::int64_t prompt = 0, cached = 0, n = 0; };
  RequestSink* inner_;
  const workloads::SessionWorkload* sessions_;
  std::vector<Turn> turns_;
};

}  // namespace servesim::sim
