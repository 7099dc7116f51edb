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
  // Sent at 2x, started at 1x over the later half of the sends: half of what was sent in it joins the queue.
  const Summary& m = over.summary;
  EXPECT_NEAR(double(m.waiting_at_end - m.waiting_at_open), 0.5 * double(m.load_sent), 0.1 * double(m.load_sent));
  EXPECT_EQ(m.load_sent - m.load_started, m.waiting_at_end - m.waiting_at_open);   // conservation, exactly
  EXPECT_EQ(m.load_sent - m.load_answered, m.in_flight_at_end - m.in_flight_at_open);
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

// Every request sent before the first answer: 50 requests at 1,000/s reach the server in about
// 50 ms. One seat serves them one latency after another, so the 25 sent in the later half of that
// span all join the queue (none starts before the last send): growth 25 > max(2.5, 3 sqrt(25) = 15).
// With 64 seats all 50 run in one batch and start within a step or two of being sent: not overloaded.
TEST(Overload, EveryRequestSentBeforeTheFirstAnswer) {
  OneAtATime o;
  workloads::WorkloadConfig burst = load(1e3, 128, 100);
  burst.requests = 50;
  const Summary one = Deployment(o.topo, o.spec).run(burst).summary;
  const double latency_s = one.request_latency_ms.min * 1e-3;   // the first request runs alone
  EXPECT_LT(one.load_window_s, 0.2 * latency_s);
  EXPECT_EQ(one.load_answered, 0);
  EXPECT_GE(one.waiting_at_end - one.waiting_at_open, one.load_sent - 1);
  ASSERT_TRUE(overloaded(one).has_value());
  EXPECT_TRUE(*overloaded(one));
  EXPECT_NE(overload_line(one, 1e3).find("OVERLOADED: offered 1000 requests/s; over the later half of the sends"), std::string::npos);
  EXPECT_TRUE(sweep_row("agg", 1, one, 1, true).overloaded);

  o.spec.engine.max_num_seqs = 64;
  burst.rate_per_s = 100;   // sent over about 0.5 s, many steps: a step's jitter is no queue
  const Summary batched = Deployment(o.topo, o.spec).run(burst).summary;
  ASSERT_TRUE(overloaded(batched).has_value());
  EXPECT_FALSE(*overloaded(batched));
}

// The rule on a queue worked out by hand: one server, a request every second (constant arrivals,
// gap CV 0), each holding the server for S seconds, first token 0.1 s after it starts. 400 sends:
// the window is the later 199.5 s and holds 200 sends. S = 1.5 s (offered 1.5 x capacity): the
// server starts 200 / 1.5 = 133 of them, so the queue grows by 67 > max(20, 3 sqrt(200) = 42.4).
// S = 0.7 s (0.7 x): every request starts 0.1 s after it is sent, the queue never grows (the
// last one sent waits at the last send).
Summary fifo(double service_s) {
  MetricsCollector c;
  double free_s = 0;
  for (int i = 0; i < 400; ++i) {
    RequestRecord r;
    r.id = std::uint64_t(i);
    r.arrival_s = i;
    const double start = std::max(r.arrival_s, free_s);
    r.first_token_s = start + 0.1;
    r.second_token_s = start + 0.2;
    r.finish_s = free_s = start + service_s;
    r.input_tokens = 100;
    r.output_tokens = 10;
    c.add(r);
  }
  return c.summary();
}

TEST(Overload, RuleOnAQueueByHand) {
  const Summary over = fifo(1.5);
  EXPECT_DOUBLE_EQ(over.load_from_s, 199.5);
  EXPECT_DOUBLE_EQ(over.load_window_s, 199.5);
  EXPECT_EQ(over.load_sent, 200);
  EXPECT_NEAR(double(over.load_started), 200 / 1.5, 1);
  EXPECT_NEAR(double(over.waiting_at_end - over.waiting_at_open), 200 - 200 / 1.5, 1);
  EXPECT_NEAR(overload_allowance(over), 3 * std::sqrt(200.0), 1e-9);
  EXPECT_NEAR(served_rps(over), 1 / 1.5, 0.01);
  EXPECT_EQ(overloaded(over), std::optional<bool>(true));
  const Summary under = fifo(0.7);
  EXPECT_EQ(under.waiting_at_end, 1);   // the last one sent, 0.1 s from its first token
  EXPECT_EQ(under.waiting_at_open, 0);
  EXPECT_NEAR(served_rps(under), 1.0, 0.01);
  EXPECT_EQ(overloaded(under), std::optional<bool>(false));
}

// Every request starts at once but the batch grows, so answers fall behind: a request every second,
// first token 0.1 s after it is sent, answered 10 + 0.5 t s after it is sent at t. Over the later
// 499.5 s of 1000 sends the queue never grows, but answers come 1 / 1.5 as fast as sends: in flight
// grows by 500 / 3 = 167 > max(50, 3 sqrt(500 + 173 in flight at t = 499.5)) = 78, and the window
// opens after the p90 latency (10 + 0.5 x 899 = 460 s): overloaded.
TEST(Overload, AnswersFallingBehindWhileEveryRequestStarts) {
  MetricsCollector c;
  for (int i = 0; i < 1000; ++i) {
    RequestRecord r;
    r.id = std::uint64_t(i);
    r.arrival_s = i;
    r.first_token_s = i + 0.1;
    r.second_token_s = i + 0.2;
    r.finish_s = i + 10 + 0.5 * i;
    r.input_tokens = 100;
    r.output_tokens = 10;
    c.add(r);
  }
  const Summary s = c.summary();
  EXPECT_LE(s.waiting_at_end - s.waiting_at_open, 1);
  EXPECT_TRUE(in_flight_judged(s));
  EXPECT_NEAR(double(s.in_flight_at_end - s.in_flight_at_open), 500.0 / 3, 2);
  EXPECT_NEAR(in_flight_allowance(s), 3 * std::sqrt(500.0 + double(s.in_flight_at_open)), 1e-9);
  EXPECT_EQ(s.in_flight_at_open, 500 - 327);   // sent by 499.5 s, less those answered by then (10 + 1.5 i <= 499.5: i <= 326)
  EXPECT_EQ(overloaded(s), std::optional<bool>(true));
}

// A copy offered 1.5 x its service rate is overloaded, one offered 0.7 x is not, with 1 seat and
// with 64. The service rate is Little's law on a closed loop that keeps every seat busy: seats /
// mean request latency.
TEST(Overload, OneAndAHalfTimesIsFlaggedPointSevenIsNotAtOneAndSixtyFourSeats) {
  for (const int seats : {1, 64}) {
    OneAtATime o;
    o.spec.engine.max_num_seqs = seats;
    const Deployment d(o.topo, o.spec);
    workloads::WorkloadConfig full = load(1, 128, 100);
    full.arrival = workloads::Arrival::concurrency;
    full.concurrency = seats;
    full.requests = 4 * seats;
    full.warmup_requests = seats;
    const double capacity = seats / (d.run(full).summary.request_latency_ms.avg * 1e-3);
    for (const double x : {1.5, 0.7}) {
      workloads::WorkloadConfig w = load(x * capacity, 128, 100);
      w.requests = std::max(400, int(60 * x * capacity));
      const Summary s = d.run(w).summary;
      ASSERT_TRUE(overloaded(s).has_value()) << seats << " seats, " << x;
      EXPECT_EQ(*overloaded(s), x > 1) << seats << " seats, " << x << ": waiting " << s.waiting_at_open << " -> "
                                       << s.waiting_at_end << ", allowed " << overload_allowance(s);
      if (x > 1) EXPECT_NEAR(served_rps(s), capacity, 0.1 * capacity) << seats;
      else EXPECT_NEAR(served_rps(s), x * capacity, 0.1 * x * capacity) << seats;
    }
  }
}

}  // namespace
}  // namespace servesim::sim

namespace servesim::sim {
namespace {

// A capacity point's output tokens/s is the closed loop's steady rate. By Little's law N clients
// each with one request in flight answer N / (mean latency) requests/s, each OSL tokens long. The
// window from the first measured send to the last measured answer holds, besides the measured
// requests, the warm-up ones still in flight at its start and the drain at its end, about one
// latency of N clients in R / N rounds: it reads about N / R low (64 clients, about 1,000
// requests, 1k in, 200 or 1k out: 5.0-5.4 %). The row reads the rate of the measured sends:
// 0.5-1.4 % under N / mean latency of the measured requests (the loop's cycle also holds the
// client's hops), within 1.5 %.
TEST(CapacityThroughput, ClosedLoopRowIsLittlesLawNotTheWindow) {
  OneAtATime o;
  o.spec.engine.max_num_seqs = 256;
  const Deployment d(o.topo, o.spec);
  const int clients = 64;
  for (const std::int64_t osl : {200, 1000})
    for (const std::optional<std::int64_t> requests : {std::optional<std::int64_t>{}, std::optional<std::int64_t>{1000}}) {
      const Summary s = d.run(capacity_workload(clients, requests, 0, 1000, osl)).summary;
      const double little = clients / (s.request_latency_ms.avg * 1e-3) * double(osl);
      const SweepRow row = sweep_row("agg", clients, s, d.gpus());
      EXPECT_NEAR(row.output_tps / little, 1.0, 0.015) << row.output_tps << " vs " << little;
      EXPECT_EQ(row.output_tps, s.steady_output_tps);
      EXPECT_LT(s.output_token_throughput_per_s / little, 0.96) << s.output_token_throughput_per_s << " vs " << little;
      // An open loop's row keeps the window's figure (its rate is what was offered).
      EXPECT_EQ(sweep_row("agg", 0, s, d.gpus(), true).output_tps, s.output_token_throughput_per_s);
    }
}

}  // namespace
}  // namespace servesim::sim
