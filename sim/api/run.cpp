// api: one scenario simulated (aiperf document + summary) and a sweep of it (columns).
#include <cmath>

#include "common/error.hpp"
#include "common/text.hpp"
#include "sim/api/api.hpp"
#include "sim/simulate.hpp"

namespace servesim::api {
namespace {

sim::Scenario parse(const nlohmann::json& scenario) {
  if (!scenario.is_object()) throw Error("scenario", "", "expected a JSON object in the scenario file layout");
  return sim::parse_scenario(scenario.dump(), "scenario");
}

nlohmann::json scalar(const nlohmann::json& column) { return column.at(0); }

}  // namespace

nlohmann::json default_scenario() { return sim::default_scenario_json(); }

nlohmann::json simulate(const nlohmann::json& scenario) {
  const sim::Scenario s = parse(scenario);
  const sim::SimResult r = sim::simulate(s);
  nlohmann::json j = sim::aiperf_json(s, r);   // with "topology" and "kv_transfer" when the scenario has a topology
  // The run as one sweep row, so a simulate() and a sweep point read the same way.
  sim::SweepSpec spec;
  const bool closed = s.workload.arrival == workloads::Arrival::concurrency;
  spec.axis = closed ? sim::SweepSpec::Axis::concurrency : sim::SweepSpec::Axis::request_rate;
  spec.values = {closed ? double(s.workload.concurrency) : (s.workload.rate_per_s > 0 ? s.workload.rate_per_s : NAN)};
  const nlohmann::json row = sim::to_json(sim::sweep_columns(spec, {r}, s.gpus, &s));
  nlohmann::json sum = nlohmann::json::object();
  for (const auto& [k, v] : row.items()) sum[k] = scalar(v);
  const sim::Summary& m = r.summary;
  sum["warmup_request_count"] = m.warmup_request_count;
  sum["total_input_tokens"] = m.total_input_tokens;
  sum["total_output_tokens"] = m.total_output_tokens;
  sum["gpus"] = s.gpus;
  sum["replicas"] = s.replicas();
  sum["kv_blocks_per_replica"] = r.kv_blocks;
  sum["block_size"] = r.plan.block_size;
  sum["kv_cache"] = kv_cache_json(r.plan, std::int64_t(std::llround(s.workload.isl.expected_mean() + s.workload.osl.expected_mean())));
  sum["simulated_end_s"] = r.end_s;
  sum["events"] = r.events;
  // Little's law: request throughput × mean latency = mean requests in the system.
  sum["requests_in_system"] = m.request_throughput_per_s * m.request_latency_ms.avg / 1e3;
  nlohmann::json reps = nlohmann::json::array();
  for (std::size_t i = 0; i < m.replicas.size(); ++i) {
    const auto& x = m.replicas[i];
    reps.push_back({{"name", x.name}, {"steps", x.steps}, {"busy_s", x.busy_s}, {"busy_fraction", x.busy_fraction},
                    {"mean_batch_size", x.mean_batch_size}, {"max_batch_size", x.max_batch_size},
                    {"mean_kv_utilization", x.mean_kv_utilization}, {"max_kv_utilization", x.max_kv_utilization},
                    {"preemptions", i < r.workers.size() ? r.workers[i].preemptions : 0}});
  }
  sum["replica_stats"] = reps;
  j["summary"] = sum;
  return j;
}

nlohmann::json sweep(const nlohmann::json& scenario, std::string_view axis, const std::vector<double>& values, int threads) {
  const sim::Scenario s = parse(scenario);
  sim::SweepSpec spec;
  const std::string a = text::lower(axis);
  if (a == "concurrency") spec.axis = sim::SweepSpec::Axis::concurrency;
  else if (a == "request_rate" || a == "request-rate") spec.axis = sim::SweepSpec::Axis::request_rate;
  else throw Error("sweep", "axis", "unknown axis '" + std::string(axis) + "'; known: concurrency, request_rate");
  if (values.empty()) throw Error("sweep", a, "empty list");
  spec.values = values;
  return sim::to_json(sim::sweep_columns(spec, sim::sweep(s, spec, threads), s.gpus, &s));
}

}  // namespace servesim::api
