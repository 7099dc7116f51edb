// aiperf metric definitions on a tiny hand-checked set of requests.
#include <cmath>
#include <filesystem>
#include <fstream>
#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <unistd.h>

#include "common/error.hpp"
#include "sim/metrics.hpp"

using namespace servesim::sim;

namespace {
// arrival, first token, second token, finish (s); ISL; OSL.
MetricsCollector five_requests(bool keep = false) {
  MetricsCollector m(keep);
  m.add({100, -5.0, -4.0, -3.9, -1.0, 50, 100, true});       // warm-up: excluded
  m.add({0, 0.0, 0.1, 0.2, 1.1, 100, 11, false});           // TTFT 100, ITL 1000/10 = 100
  m.add({1, 0.5, 0.7, 0.75, 1.7, 200, 21, false});          // TTFT 200, ITL 1000/20 = 50
  m.add({2, 1.0, 1.3, NAN, 1.3, 300, 1, false});            // TTFT 300, OSL 1: no ITL
  m.add({3, 1.5, 1.9, 1.95, 2.4, 400, 6, false});           // TTFT 400, ITL 500/5 = 100
  m.add({4, 2.0, 3.0, 3.02, 3.2, 500, 3, false});           // TTFT 1000, ITL 200/2 = 100
  return m;
}
}  // namespace

TEST(Percentiles, LinearInterpolationLikeNumpy) {
  std::vector<double> v = {1000, 100, 300, 200, 400};
  const Stats s = compute_stats(v);
  // Sorted 100 200 300 400 1000; rank (n-1)p/100.
  EXPECT_DOUBLE_EQ(s.p50, 300);
  EXPECT_DOUBLE_EQ(s.p25, 200);
  EXPECT_DOUBLE_EQ(s.p75, 400);
  EXPECT_NEAR(s.p90, 400 + 0.6 * 600, 1e-9);    // rank 3.6
  EXPECT_NEAR(s.p95, 400 + 0.8 * 600, 1e-9);    // rank 3.8
  EXPECT_NEAR(s.p99, 400 + 0.96 * 600, 1e-9);   // rank 3.96
  EXPECT_NEAR(s.p1, 100 + 0.04 * 100, 1e-9);
  EXPECT_NEAR(s.p5, 120, 1e-9);
  EXPECT_NEAR(s.p10, 140, 1e-9);
  EXPECT_DOUBLE_EQ(s.avg, 400);
  EXPECT_NEAR(s.std, std::sqrt(500000.0 / 5), 1e-9);   // population std, numpy ddof=0
  EXPECT_EQ(s.min, 100);
  EXPECT_EQ(s.max, 1000);
  std::vector<double> one = {7};
  EXPECT_EQ(compute_stats(one).p99, 7);
  std::vector<double> none;
  EXPECT_TRUE(std::isnan(compute_stats(none).avg));
}

TEST(Metrics, AiperfDefinitionsByHand) {
  const auto m = five_requests();
  EXPECT_EQ(m.request_count(), 5);
  const Summary s = m.summary();
  EXPECT_DOUBLE_EQ(s.start_s, 0.0);   // first measured arrival
  EXPECT_DOUBLE_EQ(s.end_s, 3.2);     // last measured finish
  EXPECT_EQ(s.warmup_request_count, 1);
  EXPECT_NEAR(s.ttft_ms.avg, 400, 1e-9);
  EXPECT_NEAR(s.ttft_ms.p90, 760, 1e-9);
  // ITL over the 4 requests with OSL > 1: 100, 50, 100, 100.
  EXPECT_EQ(s.itl_ms.count, 4);
  EXPECT_NEAR(s.itl_ms.avg, 87.5, 1e-9);
  EXPECT_NEAR(s.itl_ms.p10, 65, 1e-9);    // sorted 50 100 100 100, rank 0.3
  EXPECT_NEAR(s.output_token_throughput_per_user.avg, (10 + 20 + 10 + 10) / 4.0, 1e-9);
  // TTST = second token - first token: 100, 50, 50, 20.
  EXPECT_NEAR(s.ttst_ms.avg, 55, 1e-9);
  EXPECT_NEAR(s.request_latency_ms.avg, (1100 + 1200 + 300 + 900 + 1200) / 5.0, 1e-9);
  // Throughputs over the benchmark duration.
  EXPECT_EQ(s.total_output_tokens, 42);
  EXPECT_NEAR(s.output_token_throughput_per_s, 42 / 3.2, 1e-12);
  EXPECT_NEAR(s.request_throughput_per_s, 5 / 3.2, 1e-12);
  EXPECT_NEAR(s.input_sequence_length.avg, 300, 1e-12);
  EXPECT_NEAR(s.output_sequence_length.p50, 6, 1e-12);
  // An explicit window overrides the observed one.
  EXPECT_NEAR(m.summary(0.0, 4.0).request_throughput_per_s, 5 / 4.0, 1e-12);
}

TEST(Metrics, GoodputUnderSlo) {
  const auto m = five_requests();
  Slo slo;
  slo.ttft_ms = 350;
  slo.itl_ms = 80;
  // Good: request 1 (200 ms, 50 ms) and request 2 (300 ms, no ITL); the others miss one limit.
  const Summary s = m.summary(NAN, NAN, &slo);
  EXPECT_EQ(s.good_request_count, 2);
  EXPECT_NEAR(s.goodput_per_s, 2 / 3.2, 1e-12);
  slo = Slo{};
  slo.latency_ms = 1000;
  EXPECT_EQ(m.summary(NAN, NAN, &slo).good_request_count, 2);   // 300 and 900 ms
}

TEST(Metrics, WorkerSamplesAreTimeWeighted) {
  MetricsCollector m;
  m.add({0, 0.0, 1.0, 2.0, 4.0, 10, 3, false});
  const int r = m.add_replica("decode-0");
  m.measure_workers_from(0.0);
  m.add_worker_sample(r, -1.0, 5.0, 64, 1.0);   // warm-up step: ignored
  m.add_worker_sample(r, 0.0, 0.5, 2, 0.2);
  m.add_worker_sample(r, 0.5, 1.5, 4, 0.6);
  m.add_worker_sample(3, 0.0, 1.0, 1, 0.1);     // indices grow on demand
  const Summary s = m.summary();
  ASSERT_EQ(s.replicas.size(), 4u);
  const auto& a = s.replicas[0];
  EXPECT_EQ(a.name, "decode-0");
  EXPECT_EQ(a.steps, 2);
  EXPECT_DOUBLE_EQ(a.busy_fraction, 2.0 / 4.0);
  EXPECT_DOUBLE_EQ(a.mean_batch_size, (0.5 * 2 + 1.5 * 4) / 2.0);
  EXPECT_DOUBLE_EQ(a.mean_kv_utilization, (0.5 * 0.2 + 1.5 * 0.6) / 2.0);
  EXPECT_EQ(a.max_batch_size, 4);
  EXPECT_EQ(s.replicas[1].steps, 0);
  EXPECT_EQ(s.replicas[3].max_batch_size, 1);
}

TEST(Metrics, AiperfJsonLayout) {
  auto m = five_requests();
  m.set_input_config({{"endpoint", {{"model_names", {"nemotron"}}}}, {"loadgen", {{"concurrency", 4}}}});
  Slo slo;
  slo.ttft_ms = 350;
  const nlohmann::json j = m.aiperf_json(&slo);
  const auto& rec = j.at("records");
  EXPECT_EQ(rec.at("time_to_first_token").at("unit"), "ms");
  EXPECT_NEAR(rec.at("time_to_first_token").at("p90").get<double>(), 760, 1e-9);
  EXPECT_EQ(rec.at("inter_token_latency").at("unit"), "ms");
  EXPECT_EQ(rec.at("output_token_throughput").at("unit"), "tokens/sec");
  EXPECT_NEAR(rec.at("output_token_throughput").at("avg").get<double>(), 42 / 3.2, 1e-12);
  EXPECT_EQ(rec.at("request_throughput").at("unit"), "requests/sec");
  EXPECT_EQ(rec.at("request_count").at("avg").get<double>(), 5);
  EXPECT_NEAR(rec.at("goodput").at("avg").get<double>(), 3 / 3.2, 1e-12);   // TTFT <= 350: 3 requests
  EXPECT_EQ(rec.at("output_token_throughput_per_user").at("unit"), "tokens/sec/user");
  for (const char* k : {"avg", "min", "max", "p1", "p5", "p10", "p25", "p50", "p75", "p90", "p95", "p99", "std"})
    EXPECT_TRUE(rec.at("request_latency").contains(k)) << k;
  EXPECT_EQ(j.at("input_config").at("loadgen").at("concurrency"), 4);
  EXPECT_DOUBLE_EQ(j.at("benchmark_duration").get<double>(), 3.2);
  EXPECT_FALSE(rec.contains("time_to_first_token_missing"));
  // No measured requests: statistics are null, never NaN in the JSON.
  MetricsCollector empty;
  EXPECT_TRUE(empty.aiperf_json().at("records").at("request_latency").at("avg").is_null());
}

TEST(Metrics, ExportDirWritesAiperfFiles) {
  const auto m = five_requests(true);
  const auto dir = std::filesystem::temp_directory_path() / ("servesim_export_" + std::to_string(::getpid()));
  m.export_dir(dir.string());
  std::ifstream csv(dir / "profile_export_aiperf.csv");
  std::string line;
  std::getline(csv, line);
  EXPECT_EQ(line, "Metric,avg,min,max,p1,p5,p10,p25,p50,p75,p90,p95,p99,std");
  std::getline(csv, line);
  EXPECT_EQ(line.rfind("Time to First Token (ms),400.00,100.00,1000.00,104.00,", 0), 0u) << line;
  std::string all((std::istreambuf_iterator<char>(csv)), {});
  EXPECT_NE(all.find("\nMetric,Value\n"), std::string::npos);
  EXPECT_NE(all.find("Request Throughput (requests/sec),1.56\n"), std::string::npos) << all;
  std::ifstream jl(dir / "profile_export.jsonl");
  std::vector<nlohmann::json> lines;
  while (std::getline(jl, line)) lines.push_back(nlohmann::json::parse(line));
  ASSERT_EQ(lines.size(), 6u);
  EXPECT_EQ(lines[0].at("metadata").at("benchmark_phase"), "warmup");
  EXPECT_EQ(lines[1].at("metadata").at("request_start_ns"), 0);
  EXPECT_EQ(lines[1].at("metadata").at("request_end_ns"), 1100000000);
  EXPECT_NEAR(lines[1].at("metrics").at("inter_token_latency").at("value").get<double>(), 100, 1e-9);
  EXPECT_FALSE(lines[3].at("metrics").contains("inter_token_latency"));   // OSL 1
  const auto agg = nlohmann::json::parse(std::ifstream(dir / "profile_export_aiperf.json"));
  EXPECT_EQ(agg.at("records").at("request_count").at("avg"), 5);
  std::filesystem::remove_all(dir);
  EXPECT_THROW(m.export_dir("/proc/servesim_cannot_write_here"), servesim::Error);
}
