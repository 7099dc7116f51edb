// aiperf's export layouts: profile_export_aiperf.json (records keyed by metric tag), its CSV
// (a distribution table, a blank line, then a Metric,Value table) and profile_export.jsonl.
#include <cinttypes>
#include <cstdio>
#include <filesystem>

#include <nlohmann/json.hpp>

#include "common/error.hpp"
#include "common/files.hpp"
#include "sim/metrics.hpp"

namespace servesim::sim {
namespace {

struct Row {
  const MetricInfo* info;
  const Stats* stats;   // distribution metrics
  double value;         // scalar metrics (stats == nullptr)
};

const MetricInfo& info(const char* tag) {
  for (const auto& m : aiperf_metric_infos())
    if (std::string_view(m.tag) == tag) return m;
  throw std::logic_error(tag);
}

std::vector<Row> rows(const Summary& s) {
  std::vector<Row> r = {
      {&info("time_to_first_token"), &s.ttft_ms, 0},
      {&info("time_to_second_token"), &s.ttst_ms, 0},
      {&info("request_latency"), &s.request_latency_ms, 0},
      {&info("inter_token_latency"), &s.itl_ms, 0},
      {&info("output_token_throughput_per_user"), &s.output_token_throughput_per_user, 0},
      {&info("output_sequence_length"), &s.output_sequence_length, 0},
      {&info("input_sequence_length"), &s.input_sequence_length, 0},
      {&info("output_token_throughput"), nullptr, s.output_token_throughput_per_s},
      {&info("request_throughput"), nullptr, s.request_throughput_per_s},
      {&info("request_count"), nullptr, static_cast<double>(s.request_count)},
  };
  if (s.has_slo) r.push_back({&info("goodput"), nullptr, s.goodput_per_s});
  r.push_back({&info("total_output_tokens"), nullptr, static_cast<double>(s.total_output_tokens)});
  r.push_back({&info("total_input_tokens"), nullptr, static_cast<double>(s.total_input_tokens)});
  r.push_back({&info("benchmark_duration"), nullptr, s.duration_s});
  return r;
}

// NaN/inf are not JSON: they become null.
nlohmann::json num(double x) { return std::isfinite(x) ? nlohmann::json(x) : nlohmann::json(nullptr); }

nlohmann::json stats_json(const char* unit, const Stats& st) {
  return {{"unit", unit}, {"avg", num(st.avg)}, {"p1", num(st.p1)}, {"p5", num(st.p5)}, {"p10", num(st.p10)},
          {"p25", num(st.p25)}, {"p50", num(st.p50)}, {"p75", num(st.p75)}, {"p90", num(st.p90)},
          {"p95", num(st.p95)}, {"p99", num(st.p99)}, {"min", num(st.min)}, {"max", num(st.max)},
          {"std", num(st.std)}, {"count", st.count}};
}

std::string fmt2(double x) {
  if (!std::isfinite(x)) return "";
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.2f", x);
  return buf;
}

}  // namespace

nlohmann::json MetricsCollector::aiperf_json(double start_s, double end_s, const Slo* slo) const {
  const Summary s = summary(start_s, end_s, slo);
  nlohmann::json records = nlohmann::json::object();
  for (const Row& r : rows(s))
    records[r.info->tag] = r.stats ? stats_json(r.info->unit, *r.stats)
                                   : nlohmann::json{{"unit", r.info->unit}, {"avg", num(r.value)}};
  nlohmann::json j;
  j["records"] = std::move(records);
  j["input_config"] = input_config_.empty() ? nlohmann::json::object() : nlohmann::json::parse(input_config_);
  j["was_cancelled"] = false;
  j["error_summary"] = nlohmann::json::array();
  j["benchmark_duration"] = num(s.duration_s);            // seconds of simulated time
  j["benchmark_start_s"] = num(s.start_s);
  j["benchmark_end_s"] = num(s.end_s);
  j["warmup_request_count"] = s.warmup_request_count;
  // Not an aiperf record (aiperf's inter_token_latency is a per-request mean): the gaps between a
  // request's streamed tokens from its second on, over every measured request (sim/token_gaps.hpp).
  j["token_gap"] = stats_json("ms", s.token_gap_ms);
  if (s.has_slo)
    j["goodput_slo"] = {{"time_to_first_token", s.slo.ttft_ms}, {"inter_token_latency", s.slo.itl_ms},
                        {"request_latency", s.slo.latency_ms}, {"good_request_count", s.good_request_count}};
  nlohmann::json reps = nlohmann::json::array();
  for (const auto& r : s.replicas)
    reps.push_back({{"name", r.name}, {"steps", r.steps}, {"busy_s", num(r.busy_s)},
                    {"busy_fraction", num(r.busy_fraction)}, {"mean_batch_size", num(r.mean_batch_size)},
                    {"max_batch_size", r.max_batch_size}, {"mean_kv_utilization", num(r.mean_kv_utilization)},
                    {"max_kv_utilization", num(r.max_kv_utilization)}});
  j["replicas"] = std::move(reps);
  return j;
}

nlohmann::json MetricsCollector::aiperf_json(const Slo* slo) const { return aiperf_json(NAN, NAN, slo); }

void MetricsCollector::export_dir(const std::string& dir, const Slo* slo, double start_s, double end_s) const {
  namespace fs = std::filesystem;
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) throw Error(dir, "", "cannot create folder: " + ec.message());
  const fs::path base(dir);
  // The three files appear together or not at all (temporary files, renamed at the end).
  AtomicFiles files;
  auto write_file = [&files](const fs::path& p, const std::string& text) { files.write(p.string(), text); };

  write_file(base / "profile_export_aiperf.json", aiperf_json(start_s, end_s, slo).dump(2) + "\n");

  const Summary s = summary(start_s, end_s, slo);
  std::string csv = "Metric,avg,min,max,p1,p5,p10,p25,p50,p75,p90,p95,p99,std\n";
  const auto rs = rows(s);
  for (const Row& r : rs) {
    if (!r.stats) continue;
    const Stats& st = *r.stats;
    csv += std::string(r.info->header) + " (" + r.info->unit + ")";
    for (double x : {st.avg, st.min, st.max, st.p1, st.p5, st.p10, st.p25, st.p50, st.p75, st.p90, st.p95, st.p99, st.std})
      csv += "," + fmt2(x);
    csv += "\n";
  }
  csv += "\nMetric,Value\n";
  for (const Row& r : rs)
    if (!r.stats) csv += std::string(r.info->header) + " (" + r.info->unit + ")," + fmt2(r.value) + "\n";
  write_file(base / "profile_export_aiperf.csv", csv);

  // One line per request: metadata (ns timestamps, phase) and its metrics, as aiperf's
  // profile_export.jsonl. Needs keep_records; without it the file is written empty.
  std::string jl;
  for (const RequestRecord& r : records_) {
    auto ns = [](double t) { return static_cast<std::int64_t>(std::llround(t * 1e9)); };
    nlohmann::json m;
    m["request_latency"] = {{"value", (r.finish_s - r.arrival_s) * 1e3}, {"unit", "ms"}};
    m["time_to_first_token"] = {{"value", (r.first_token_s - r.arrival_s) * 1e3}, {"unit", "ms"}};
    if (r.output_tokens > 1) {
      if (std::isfinite(r.second_token_s))
        m["time_to_second_token"] = {{"value", (r.second_token_s - r.first_token_s) * 1e3}, {"unit", "ms"}};
      const double decode_s = r.finish_s - r.first_token_s;
      m["inter_token_latency"] = {{"value", decode_s * 1e3 / static_cast<double>(r.output_tokens - 1)}, {"unit", "ms"}};
      if (decode_s > 0)
        m["output_token_throughput_per_user"] = {{"value", static_cast<double>(r.output_tokens - 1) / decode_s},
                                                 {"unit", "tokens/sec/user"}};
    }
    m["input_sequence_length"] = {{"value", r.input_tokens}, {"unit", "tokens"}};
    m["output_sequence_length"] = {{"value", r.output_tokens}, {"unit", "tokens"}};
    nlohmann::json line = {
        {"metadata",
         {{"x_request_id", std::to_string(r.id)}, {"request_start_ns", ns(r.arrival_s)},
          {"request_end_ns", ns(r.finish_s)}, {"benchmark_phase", r.warmup ? "warmup" : "profiling"},
          {"was_cancelled", false}}},
        {"metrics", std::move(m)},
        {"error", nullptr}};
    jl += line.dump() + "\n";
  }
  write_file(base / "profile_export.jsonl", jl);
  files.commit();
}

}  // namespace servesim::sim
