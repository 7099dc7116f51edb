// The RequestSink that feeds a MetricsCollector: each finished request as the client saw it
// (its visible output: the tokens after the model's response preamble, as a client counts them
// in the text), worker samples counted from the first measured (non-warm-up) request on.
#pragma once
#include <algorithm>

#include "sim/engine/cluster.hpp"
#include "sim/metrics.hpp"

namespace servesim::sim {

class MetricsSink : public RequestSink {
 public:
  explicit MetricsSink(MetricsCollector& m) : m_(&m) {}
  void on_finished(const Request& r) override {
    RequestRecord rec;
    rec.id = r.id;
    rec.arrival_s = r.sent_s;
    rec.first_token_s = r.first_token_s;
    rec.second_token_s = r.second_token_s;
    rec.finish_s = r.finish_s;
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

 private:
  MetricsCollector* m_;
  bool measuring_ = false;
};

}  // namespace servesim::sim
