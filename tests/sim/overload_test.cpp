// An open loop offered more than a deployment can serve says so: sim::overloaded, against a
// capacity worked out by hand (one request at a time: capacity = 1 / one request's latency, which
// the weight-streaming roofline bounds from below).
#include <gtest/gtest.h>

#include "hwmodels/catalog.hpp"
#include "models/model_spec.hpp"
#include "sim/metrics.hpp"
#include "sim/studies/plan.hpp"
#include "sim/topology/deployment.hpp"

namespace servesim::sim {
namespace {

struct OneAtATime {
  DeploymentSpec spec;
  TopologyChoice topo;
  OneAtATime() {
    spec.model = &models::model("llama-3.1-8b");
    spec.instance = &hw::Catalog::global().instance("p5.48xlarge");
    spec.gpu = &hw::Catalog::global().gpu(spec.instance->gpu);
    spec.weights = spec.kv_dtype = hw::Precision::fp8;
    spec.engine.max_num_seqs = 1;   // one request at a time: the replica serves 1 / latency requests/s
    topo.agg = models::Parallelism{1, 1, 1};
    topo.replicas = 1;
  }
};

workloads::WorkloadConfig load(double rate_per_s, std::int64_t isl, std::int64_t osl) {
  workloads::WorkloadConfig w;
  w.arrival = workloads::Arrival::poisson;
  w.rate_per_s = rate_per_s;
  w.requests = 400;
  w.warmup_requests = 0;
  w.isl = workloads::LengthDist::fixed_at(isl);
  w.osl = workloads::LengthDist::fixed_at(osl);
  return w;
}

TEST(Overload, TwiceTheCapacityIsFlaggedAndHalfIsNot) {
  const OneAtATime o;
  const Deployment d(o.topo, o.spec);
  const std::int64_t isl = 128, osl = 100;
  workloads::WorkloadConfig lone = load(1, isl, osl);
  lone.arrival = workloads::Arrival::concurrency;
  lone.concurrency = 1;
  lone.requests = 1;
  const double latency_s = d.run(lone).summary.request_latency_ms.avg * 1e-3;
  // By hand: each of the OSL steps streams the FP8 weights (about 1 byte per parameter) from HBM.
  const double roofline_s = double(osl) * models::total_params(*o.spec.model) * 1.0 / o.spec.gpu->hbm_bw_bytes_per_s;
  ASSERT_GT(latency_s, roofline_s);
  const double capacity = 1.0 / latency_s;

  const PointResult over = d.run(load(2 * capacity, isl, osl));
  ASSERT_TRUE(overloaded(over.summary).has_value());
  EXPECT_TRUE(*overloaded(over.summary));
  EXPECT_NEAR(served_rps(over.summary), capacity, 0.03 * capacity);   // the server answers at its capacity
  // Sent at 2x, answered at 1x: about half of what was sent over the window is still queued.
  EXPECT_GT(over.summary.in_flight_at_end, over.summary.load_sent / 3);
  const SweepRow row = sweep_row("agg", 0, over.summary, d.gpus(), true);
  EXPECT_TRUE(row.overloaded);
  EXPECT_FALSE(sweep_row("agg", 0, over.summary, d.gpus()).overloaded);   // a closed loop's row is never flagged
  const nlohmann::json j = load_json(over.summary, 2 * capacity);
  EXPECT_EQ(j["overloaded"], true);
  EXPECT_NE(overload_line(over.summary, 2 * capacity).find("OVERLOADED: offered"), std::string::npos);

  const PointResult half = d.run(load(0.5 * capacity, isl, osl));
  ASSERT_TRUE(overloaded(half.summary).has_value());
  EXPECT_FALSE(*overloaded(half.summary));
  EXPECT_NEAR(served_rps(half.summary), 0.5 * capacity, 0.1 * capacity);
  EXPECT_EQ(overload_line(half.summary, 0.5 * capacity), "");
  // Sweep rows travel as JSON (plan_point / search_run) with the flag.
  EXPECT_TRUE(sweep_row_from_json(to_json(row), "test").overloaded);
}

TEST(Overload, ClosedLoopsAndShortRunsAreNeverFlagged) {
  const OneAtATime o;
  const Deployment d(o.topo, o.spec);
  workloads::WorkloadConfig closed = load(1, 128, 100);
  closed.arrival = workloads::Arrival::concurrency;
  closed.concurrency = 8;   // 8 clients on one seat: a long queue, but it cannot grow
  EXPECT_FALSE(overloaded(d.run(closed).summary).value_or(false));
  // Measured requests sent while warm-up ones are answered (no barrier, fewer measured requests
  // than clients) look like a growing queue to the window; plan and search never judge closed loops.
  workloads::WorkloadConfig unbarriered = closed;
  unbarriered.warmup_requests = 64;
  unbarriered.requests = 30;
  EXPECT_FALSE(sweep_row("agg", 8, d.run(unbarriered).summary, d.gpus()).overloaded);
  workloads::WorkloadConfig few = load(1e4, 128, 100);
  few.requests = 10;   // too few requests to tell
  EXPECT_FALSE(overloaded(d.run(few).summary).has_value());
}

// Every request sent before the first answer (the load window is empty): 50 requests at 1,000/s
// reach the server in about 50 ms. One seat serves them one latency after another, so the last one
// waits about 49 latencies for its first token: offered far over its 1 / latency capacity,
// overloaded (this verdict used to be "too short to tell", so 1 copy at 40 requests/s with TTFT
// 168 s read as not overloaded). With 64 seats all 50 run in one batch: not overloaded.
TEST(Overload, EveryRequestSentBeforeTheFirstAnswer) {
  OneAtATime o;
  workloads::WorkloadConfig burst = load(1e3, 128, 100);
  burst.requests = 50;
  const Summary one = Deployment(o.topo, o.spec).run(burst).summary;
  ASSERT_EQ(one.load_window_s, 0);
  const double latency_s = one.request_latency_ms.min * 1e-3;   // the first request runs alone
  EXPECT_GT(one.last_sent_ttft_s, 45 * latency_s);
  EXPECT_LT(one.first_sent_ttft_s, latency_s);
  EXPECT_LT(one.send_span_s, 0.2 * latency_s);
  ASSERT_TRUE(overloaded(one).has_value());
  EXPECT_TRUE(*overloaded(one));
  EXPECT_NE(overload_line(one, 1e4).find("OVERLOADED: offered"), std::string::npos);
  EXPECT_TRUE(sweep_row("agg", 1, one, 1, true).overloaded);

  o.spec.engine.max_num_seqs = 64;
  burst.rate_per_s = 100;   // sent over about 0.5 s, many steps: a step's jitter is no queue
  const Summary batched = Deployment(o.topo, o.spec).run(burst).summary;
  ASSERT_EQ(batched.load_window_s, 0);
  ASSERT_TRUE(overloaded(batched).has_value());
  EXPECT_FALSE(*overloaded(batched));
}

}  // namespace
}  // namespace servesim::sim
