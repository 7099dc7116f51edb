// Closed-loop semantics, trace replay, files and bad input.
#include <algorithm>
#include <queue>
#include <set>
#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "common/error.hpp"
#include "common/json_reader.hpp"
#include "workloads/trace.hpp"
#include "workloads/workload.hpp"

using namespace servesim;
using namespace servesim::workloads;

namespace {
std::string data(const std::string& f) { return std::string(SERVESIM_SOURCE_DIR) + "/tests/workloads/data/" + f; }
WorkloadConfig parse(const std::string& text, const std::string& file = "<test>") {
  static nlohmann::json keep;
  keep = nlohmann::json::parse(text);
  return parse_workload(JsonReader(keep, file, "workload"));
}
std::string error_of(const std::string& text) {
  try {
    parse(text);
  } catch (const Error& e) {
    return e.what();
  }
  return "no error";
}
}  // namespace

TEST(ClosedLoop, YieldsWarmupPlusMeasuredInOrder) {
  WorkloadConfig c;
  c.arrival = Arrival::concurrency;
  c.concurrency = 4;
  c.requests = 10;
  c.warmup_requests = 3;
  auto w = make_workload(c);
  EXPECT_EQ(w->concurrency(), 4);
  EXPECT_EQ(w->warmup_requests(), 3);
  EXPECT_EQ(w->total_requests(), 13);
  for (std::uint64_t i = 0; i < 13; ++i) {
    auto r = w->next();
    ASSERT_TRUE(r);
    EXPECT_EQ(r->id, i);
    EXPECT_EQ(r->input_tokens, 128);
  }
  EXPECT_FALSE(w->next());
}

TEST(ClosedLoop, ClientsKeepNInFlight) {
  // N clients, fixed service time D: each completion sends the next request at once, so exactly
  // N are in flight until the tail, and the run lasts ceil(total / N) * D (Little: X = N / D).
  WorkloadConfig c;
  c.arrival = Arrival::concurrency;
  c.concurrency = 8;
  c.requests = 100;
  auto w = make_workload(c);
  ClosedLoopClients clients(*w);
  const double D = 0.5;
  std::priority_queue<double, std::vector<double>, std::greater<>> done;
  for (const auto& r : clients.start(0.0)) {
    EXPECT_EQ(r.arrival_s, 0.0);
    done.push(r.arrival_s + D);
  }
  EXPECT_EQ(done.size(), 8u);
  int completed = 0;
  double t = 0;
  while (!done.empty()) {
    t = done.top();
    done.pop();
    ++completed;
    if (auto r = clients.on_complete(t)) {
      EXPECT_EQ(r->arrival_s, t);
      done.push(t + D);
      EXPECT_EQ(done.size(), 8u);
    }
  }
  EXPECT_EQ(completed, 100);
  EXPECT_DOUBLE_EQ(t, 13 * D);   // ceil(100 / 8) = 13 rounds
}

TEST(Trace, ParsesMooncakeJsonl) {
  const auto e = read_trace_file(data("mooncake_small.jsonl"));
  ASSERT_EQ(e.size(), 4u);   // the blank line is skipped
  EXPECT_EQ(e[0].input_length, 1024);
  EXPECT_EQ(e[0].output_length, 20);
  EXPECT_EQ(e[2].hash_ids, (std::vector<std::uint64_t>{0, 1, 3}));
  EXPECT_EQ(e[3].timestamp_ms, 4000);
}

TEST(Trace, FixedScheduleReplaySortedScaledWithPrefixes) {
  const auto c = parse_workload(JsonReader(read_json_file(data("scenario_trace.json")), data("scenario_trace.json"))
                                    .object("workload"));
  EXPECT_EQ(c.arrival, Arrival::schedule);
  const auto rs = materialize(c);
  ASSERT_EQ(rs.size(), 4u);
  // Timestamps 0, 1500, 1000, 4000 ms sorted and halved (time_scale 0.5).
  EXPECT_DOUBLE_EQ(rs[0].arrival_s, 0.0);
  EXPECT_DOUBLE_EQ(rs[1].arrival_s, 0.5);
  EXPECT_DOUBLE_EQ(rs[2].arrival_s, 0.75);
  EXPECT_DOUBLE_EQ(rs[3].arrival_s, 2.0);
  EXPECT_EQ(rs[1].input_tokens, 1536);
  EXPECT_EQ(rs[1].output_tokens, 1);
  EXPECT_EQ(rs[1].prefix_hashes, (std::vector<std::uint64_t>{0, 1, 3}));
  EXPECT_EQ(rs[1].hash_block_tokens, 512);
  EXPECT_EQ(rs[2].input_tokens, 700);
}

TEST(Trace, MalformedLineNamesFileLineField) {
  try {
    read_trace_file(data("bad_trace.jsonl"));
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.where(), data("bad_trace.jsonl"));
    EXPECT_EQ(e.field(), "line 3, input_length");
    EXPECT_NE(std::string(e.what()).find("expected an integer"), std::string::npos) << e.what();
  }
  auto field_of = [](const std::string& text) {
    try {
      parse_trace(text, "t.jsonl");
    } catch (const Error& e) {
      return e.field() + ": " + e.reason();
    }
    return std::string("no error");
  };
  EXPECT_EQ(field_of("{\"input_length\": 5}\n{oops\n"), "line 2: invalid JSON");
  EXPECT_EQ(field_of("{\"input_length\": 0}"), "line 1, input_length: must be between 1 and 2^30, got 0");
  EXPECT_EQ(field_of("{\"input_length\": 5, \"hash_ids\": [1, -2]}"),
            "line 1, hash_ids[1]: expected a non-negative integer, got -2");
  EXPECT_EQ(field_of("{\"timestamp\": -1, \"input_length\": 5}"),
            "line 1, timestamp: must be a finite number of milliseconds >= 0, got -1");
  EXPECT_EQ(field_of("{\"output_length\": 5}"), "line 1, input_length: missing required field");
  EXPECT_EQ(field_of("[1, 2]"), "line 1: expected a JSON object");
  EXPECT_EQ(field_of("\n\n"), ": trace has no requests");
}

TEST(Files, EmpiricalLengthsAndSchedule) {
  EXPECT_EQ(read_lengths_file(data("lengths.csv"), "output_length"), (std::vector<std::int64_t>{10, 20, 30, 40}));
  EXPECT_EQ(read_lengths_file(data("lengths.jsonl"), ""), (std::vector<std::int64_t>{50, 150}));
  EXPECT_EQ(read_lengths_file(data("lengths.jsonl"), "output_length"), (std::vector<std::int64_t>{7, 9}));
  EXPECT_EQ(parse_lengths("5\n6\n", "x", ""), (std::vector<std::int64_t>{5, 6}));
  try {
    parse_lengths("isl\n5\nfive\n", "x.csv", "");
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.field(), "line 3, isl");
  }
  EXPECT_THROW(parse_lengths("a,b\n1,2\n", "x.csv", "c"), Error);
  EXPECT_EQ(read_timestamps_file(data("schedule.txt")), (std::vector<double>{2000, 0, 500}));
}

TEST(Workload, EmpiricalSampledWithReplacement) {
  const auto path = data("lengths.csv");
  const auto c = parse(R"({"concurrency": 2, "requests": 4000, "seed": 5,
      "isl": {"kind": "empirical", "file": ")" + path + R"(", "column": "input_length"},
      "osl": {"kind": "uniform", "min": 3, "max": 3}})");
  std::map<std::int64_t, int> hits;
  for (const auto& r : materialize(c)) {
    ++hits[r.input_tokens];
    EXPECT_EQ(r.output_tokens, 3);
  }
  ASSERT_EQ(hits.size(), 4u);
  for (auto [v, n] : hits) EXPECT_NEAR(n, 1000, 150) << v;
}

// Inline lengths (a measured run's requests): the same sampling as a file's, and one clear line for a
// list that is not token counts or names both a file and values.
TEST(Workload, EmpiricalLengthsListedInline) {
  const auto c = parse(R"({"concurrency": 2, "requests": 4000, "seed": 5,
      "isl": {"kind": "empirical", "values": [100, 300]}, "osl": 7})");
  EXPECT_DOUBLE_EQ(c.isl.expected_mean(), 200);
  EXPECT_EQ(c.isl.describe(), "empirical(2 values)");
  std::map<std::int64_t, int> hits;
  for (const auto& r : materialize(c)) ++hits[r.input_tokens];
  ASSERT_EQ(hits.size(), 2u);
  EXPECT_NEAR(hits[100], 2000, 150);
  EXPECT_NE(error_of(R"({"concurrency": 4, "isl": {"kind": "empirical", "values": [5, 0]}, "osl": 1})")
                .find("workload.isl.values: entry 1 is not a token count"),
            std::string::npos);
  EXPECT_NE(error_of(R"({"concurrency": 4, "isl": {"kind": "empirical", "values": []}, "osl": 1})").find("expected a list of 1 to 65536"),
            std::string::npos);
  EXPECT_NE(error_of(R"({"concurrency": 4, "isl": {"kind": "empirical", "values": [5], "file": "x.csv"}, "osl": 1})")
                .find("either \"file\" or \"values\""),
            std::string::npos);
}

TEST(Workload, ScheduleFileWithSyntheticLengths) {
  const auto c = parse(R"({"schedule_file": ")" + data("schedule.txt") + R"(", "isl": 10, "osl": 2})");
  const auto rs = materialize(c);
  ASSERT_EQ(rs.size(), 3u);
  EXPECT_DOUBLE_EQ(rs[1].arrival_s, 0.5);
  EXPECT_DOUBLE_EQ(rs[2].arrival_s, 2.0);
}

TEST(Workload, MultimodalAddsVisionTokens) {
  const auto c = parse(R"({"request_rate": 2, "arrival": "constant", "requests": 3, "isl": 100, "osl": 10,
      "multimodal": {"images": [{"width": 1024, "height": 1024}], "video": {"fps": 2, "duration_s": 4}}})");
  const auto rs = materialize(c);
  EXPECT_EQ(rs[0].vision_tiles, 5 + 8);
  EXPECT_EQ(rs[0].vision_tokens, 13 * 256);
  EXPECT_EQ(rs[0].input_tokens, 100 + 13 * 256);
  EXPECT_DOUBLE_EQ(rs[2].arrival_s, 1.0);
}

TEST(Workload, BadScenariosGiveOneClearError) {
  EXPECT_EQ(error_of(R"({"concurrency": 4, "request_rate": 2, "isl": 1, "osl": 1})"),
            "<test>: workload.request_rate: give exactly one of concurrency (closed loop), request_rate (open loop) or "
            "fixed_schedule/schedule_file");
  EXPECT_EQ(error_of(R"({"request_rate": -1, "isl": 1, "osl": 1})"),
            "<test>: workload.request_rate: must be between 1e-6 and 1e9 requests/s, got -1.000000");
  EXPECT_NE(error_of(R"({"concurency": 4})").find("unknown field; known: concurrency"), std::string::npos);
  EXPECT_EQ(error_of(R"({"concurrency": 4, "isl": 10, "osl": 0})"), "<test>: workload.osl: must be >= 1 token, got 0");
  EXPECT_NE(error_of(R"({"concurrency": 4, "isl": {"kind": "zipf"}, "osl": 1})")
                .find("unknown length distribution 'zipf'; known: fixed, normal"),
            std::string::npos);
  EXPECT_EQ(error_of(R"({"concurrency": 4, "osl": 3})"), "<test>: workload.isl: missing required field (input tokens per request)");
  EXPECT_EQ(error_of(R"({"request_rate": 1, "arrival": "bursty", "isl": 1, "osl": 1})"),
            "<test>: workload.arrival: unknown arrival process 'bursty'; known: poisson, gamma, constant");
  EXPECT_NE(error_of(R"({"fixed_schedule": true, "isl": 1, "osl": 1})").find("needs a trace"), std::string::npos);
  EXPECT_NE(error_of(R"({"concurrency": 1, "trace": "/nonexistent.jsonl"})").find("/nonexistent.jsonl: cannot open file"),
            std::string::npos);
  EXPECT_NE(error_of(R"({"concurrency": 1, "trace": "/dev/zero"})").find("give a regular file"),
            std::string::npos);
}

TEST(Workload, DatasetEntriesRepeatTheirPromptAndLengths) {
  // Three entries, sequential (aiperf cycles through its dataset): request i sends entry i mod 3,
  // with that entry's lengths (drawn once) and content (one hash per 512-token block).
  const auto seq = materialize(parse(R"({"concurrency": 2, "requests": 7, "isl": {"kind": "normal", "mean": 1200, "stddev": 300},
      "osl": {"kind": "uniform", "min": 5, "max": 500}, "dataset": {"entries": 3}})"));
  ASSERT_EQ(seq.size(), 7u);
  for (std::size_t i = 0; i < seq.size(); ++i) {
    const auto& a = seq[i];
    ASSERT_EQ(a.hash_block_tokens, 512);
    EXPECT_EQ(static_cast<std::int64_t>(a.prefix_hashes.size()), (a.input_tokens + 511) / 512);
    for (std::size_t j = 0; j < seq.size(); ++j) {
      const bool same = i % 3 == j % 3;
      EXPECT_EQ(seq[j].prefix_hashes == a.prefix_hashes, same) << i << " " << j;
      if (same) {
        EXPECT_EQ(seq[j].output_tokens, a.output_tokens);
      } else {
        EXPECT_NE(seq[j].prefix_hashes[0], a.prefix_hashes[0]);
      }
    }
  }
  // Shuffle: every pass of 4 sends each entry once, in a new order.
  const auto sh = materialize(parse(R"({"concurrency": 1, "requests": 12, "isl": 600, "osl": 4,
      "dataset": {"entries": 4, "sampling": "shuffle"}})"));
  std::vector<std::uint64_t> first;
  for (const auto& r : sh) first.push_back(r.prefix_hashes[0]);
  for (int pass = 0; pass < 3; ++pass) {
    std::vector<std::uint64_t> p(first.begin() + 4 * pass, first.begin() + 4 * pass + 4);
    std::sort(p.begin(), p.end());
    EXPECT_EQ(std::unique(p.begin(), p.end()), p.end()) << "pass " << pass;
    std::vector<std::uint64_t> p0(first.begin(), first.begin() + 4);
    std::sort(p0.begin(), p0.end());
    EXPECT_EQ(p, p0);
  }
  // Random: with replacement, only 2 distinct prompts among many requests.
  const auto rnd = materialize(parse(R"({"concurrency": 1, "requests": 50, "isl": 100, "osl": 4,
      "dataset": {"entries": 2, "sampling": "random"}})"));
  std::set<std::uint64_t> distinct;
  for (const auto& r : rnd) distinct.insert(r.prefix_hashes[0]);
  EXPECT_EQ(distinct.size(), 2u);
  // No dataset: no prefix identity (every prompt distinct), and the same lengths as before.
  const auto plain = materialize(parse(R"({"concurrency": 1, "requests": 3, "isl": 100, "osl": 4})"));
  EXPECT_TRUE(plain[0].prefix_hashes.empty());
  EXPECT_EQ(plain[0].hash_block_tokens, 0);
}

TEST(Workload, BadDatasetGivesOneClearError) {
  EXPECT_EQ(error_of(R"({"concurrency": 1, "isl": 10, "osl": 1, "dataset": {"entries": -1}})"),
            "<test>: workload.dataset.entries: must be 0..10^6 prompts (0: every request a distinct prompt), got -1");
  EXPECT_EQ(error_of(R"({"concurrency": 1, "isl": 10, "osl": 1, "dataset": {"entries": 5, "sampling": "zigzag"}})"),
            "<test>: workload.dataset.sampling: unknown sampling 'zigzag'; known: sequential, random, shuffle");
  EXPECT_NE(error_of(R"({"concurrency": 1, "trace": ")" + data("mooncake_small.jsonl") + R"(", "osl": 1, "dataset": {"entries": 5}})")
                .find("workload.dataset: applies to synthetic prompts"),
            std::string::npos);
}
