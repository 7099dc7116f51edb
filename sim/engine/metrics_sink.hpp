// The RequestSink that feeds a MetricsCollector: each finished request as the client saw it
// (its visible output: the tokens after the model's response preamble, as a client counts them
// in the text), worker samples counted from the first measured (non-warm-up) request on.
#pragma once
#include <algorithm>

#include "sim/engine/cluster.hpp"
#include "sim/metrics.hpp"
#include "workloads/frontend.hpp"

namespace servesim::sim {

class MetricsSink : public RequestSink {
 public:
  // `client_latency_s`: a latency the client sees on every request and the engine does not (a
  // calibration's request_latency_ms, workloads::ClientConfig): it adds to the request's first token,
  // its second and its end, and leaves the closed loop's timing alone: added on the way in, it would
  // move when each client's prompt reaches the engine and, in a loop of fixed lengths whose clients
  // run in step, which prompts arrive behind another's prefill (on the calibration split 54 ms of it
  // added 121 ms to 8k-token prompts at 4 clients, MiniMax-M2.5 H200 vLLM 0.18), where the measured
  // runs, whose clients drift apart, show the floor on short prompts only.
  //
  // `first_token_floor_s`: the shortest first token the client sees (a calibration's
  // first_token_floor_ms): a request whose first token came sooner has it, and its later tokens, moved
  // to the floor; one whose first token is later (a long prompt, a queue) is not moved. Applied after
  // the engine, like the latency: the engine's timing does not move.
  explicit MetricsSink(MetricsCollector& m, double client_latency_s = 0, double first_token_floor_s = 0)
      : m_(&m), client_latency_s_(client_latency_s), first_token_floor_s_(first_token_floor_s) {}
  MetricsSink(MetricsCollector& m, const workloads::ClientConfig& c) : MetricsSink(m, c.request_latency_s, c.first_token_floor_s) {}
  void on_finished(const Request& r) override {
    RequestRecord rec;
    rec.id = r.id;
    rec.arrival_s = r.sent_s;
    const double late = client_latency_s_ + std::max(0.0, first_token_floor_s_ - (r.first_token_s - r.sent_s));
    rec.first_token_s = r.first_token_s + late;
    rec.second_token_s = r.second_token_s + late;
    rec.finish_s = r.finish_s + late;
    rec.input_tokens = r.input_tokens;
    rec.output_tokens = std::max<std::int64_t>(0, r.output_tokens - r.preamble_tokens);
    rec.warmup = r.warmup;
    if (!r.warmup && !measuring_) {
      measuring_ = true;
      m_->measure_workers_from(r.sent_s);
    }
    m_->add(rec);
  }
  void on_step(int worker, double start_s, double step_s, int seqs, double kv_util) override {
    m_->add_worker_sample(worker, start_s, step_s, seqs, kv_util);
  }
  TokenGaps* token_gaps() override { return &m_->token_gaps(); }

 private:
  MetricsCollector* m_;
  double client_latency_s_ = 0, first_token_floor_s_ = 0;
  bool measuring_ = false;
};

}  // namespace servesim::sim
