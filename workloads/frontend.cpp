#include "workloads/frontend.hpp"

#include <algorithm>
#include <cmath>

#include "common/error.hpp"
#include "common/json_reader.hpp"
#include "common/splitmix.hpp"
#include "common/text.hpp"

namespace servesim::workloads {
namespace {

double next_unit(std::uint64_t& state) {
  const std::uint64_t z = splitmix64(state);
  state += 0x9e3779b97f4a7c15ULL;
  return unit_interval(z);
}

void check_keys(const JsonReader& j, const std::vector<std::string>& known) {
  for (const auto& item : j.json().items())
    if (std::find(known.begin(), known.end(), item.key()) == known.end())
      j.fail(item.key(), "unknown field; known: " + text::join(known));
}

// A duration field in ms: a number (fixed) or {"mean": ms, "cv": c}.
Duration duration_ms(const JsonReader& j, std::string_view key, Duration base) {
  if (!j.has(key)) return base;
  const auto& v = j.json().at(std::string(key));
  if (v.is_number()) {
    base.mean_s = j.number(key) * 1e-3;
    base.cv = 0;
  } else {
    const JsonReader d = j.object(key);
    check_keys(d, {"mean", "cv"});
    base.mean_s = d.number("mean") * 1e-3;
    base.cv = d.number_or("cv", 0);
  }
  if (!(base.mean_s >= 0 && base.mean_s < 10)) j.fail(key, "mean must be between 0 and 10000 ms");
  if (!(base.cv >= 0 && base.cv <= 10)) j.fail(key, "cv must be between 0 and 10");
  return base;
}

double nonneg(const JsonReader& j, std::string_view key, double fallback, double scale, double max) {
  const double v = j.number_or(key, fallback / scale) * scale;
  if (!(v >= 0 && v <= max)) j.fail(key, "must be between 0 and " + std::to_string(max / scale));
  return v;
}

}  // namespace

double lognormal_factor(double cv, std::uint64_t& state) {
  if (!(cv > 0)) return 1.0;
  // Box-Muller from two SplitMix64 draws; sigma^2 = ln(1 + cv^2), mu = -sigma^2 / 2 (mean 1).
  const double u1 = std::max(next_unit(state), 1e-300), u2 = next_unit(state);
  const double z = std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * M_PI * u2);
  // sigma and sigma^2 / 2 of the last cv (the hot loop draws with one or two cvs): the same values,
  // without a log1p and a sqrt per draw.
  thread_local double last_cv = -1, sigma = 0, half_s2 = 0;
  if (cv != last_cv) {
    const double s2 = std::log1p(cv * cv);
    last_cv = cv, sigma = std::sqrt(s2), half_s2 = s2 / 2;
  }
  return std::exp(sigma * z - half_s2);
}

bool lognormal_bounded(std::uint64_t state) { return unit_interval(splitmix64(state)) >= 0x1p-20; }

double lognormal_factor_bound(double cv) {
  if (!(cv > 0)) return 1.0;
  return std::exp(5.3 * std::sqrt(std::log1p(cv * cv))) * 1.000001;   // margin for the rounding of z and exp
}

double Duration::sample(std::uint64_t& state) const { return mean_s * lognormal_factor(cv, state); }

nlohmann::json Duration::to_json_ms() const { return {{"mean", mean_s * 1e3}, {"cv", cv}}; }

double FrontendConfig::request_in_s(std::int64_t prompt_tokens, std::uint64_t& rng) const {
  return api.request.sample(rng) + api.tokenize_s_per_token * double(prompt_tokens) * lognormal_factor(api.cv, rng);
}

double FrontendConfig::step_out_s(int requests, std::uint64_t& rng) const {
  return (api.output_step_s + api.output_s_per_request * double(requests)) * lognormal_factor(api.cv, rng);
}

nlohmann::json FrontendConfig::client_json() const {
  nlohmann::json c = {{"network_ms", client.network.to_json_ms()}, {"warmup_barrier", client.warmup_barrier}};
  if (client.request_latency_s > 0) c["request_latency_ms"] = client.request_latency_s * 1e3;
  if (client.first_token_floor_s > 0) c["first_token_floor_ms"] = client.first_token_floor_s * 1e3;
  return c;
}

nlohmann::json FrontendConfig::to_json() const {
  return {{"enabled", enabled},
          {"client", client_json()},
          {"api_server",
           {{"api_server_count", api.api_server_count},
            {"request_ms", api.request.to_json_ms()},
            {"tokenize_us_per_token", api.tokenize_s_per_token * 1e6},
            {"ipc_ms", api.ipc_s * 1e3},
            {"output_step_ms", api.output_step_s * 1e3},
            {"output_us_per_request", api.output_s_per_request * 1e6},
            {"cv", api.cv}}},
          {"disaggregation",
           {{"handoff_ms", disagg.handoff.to_json_ms()}, {"pull_us_per_token", disagg.pull_s_per_token * 1e6}}}};
}

DisaggPathConfig parse_disagg_path(const JsonReader& j, DisaggPathConfig d) {
  check_keys(j, {"handoff_ms", "pull_us_per_token", "sources"});
  d.handoff = duration_ms(j, "handoff_ms", d.handoff);
  d.pull_s_per_token = nonneg(j, "pull_us_per_token", d.pull_s_per_token, 1e-6, 1e-2);
  return d;
}

ApiServerConfig parse_api_server(const JsonReader& j, ApiServerConfig a) {
  check_keys(j, {"api_server_count", "request_ms", "tokenize_us_per_token", "ipc_ms", "output_step_ms",
                 "output_us_per_request", "cv", "sources"});
  const std::int64_t n = j.integer_or("api_server_count", a.api_server_count);
  if (n < 1 || n > 1024) j.fail("api_server_count", "must be 1..1024 processes");
  a.api_server_count = static_cast<int>(n);
  a.request = duration_ms(j, "request_ms", a.request);
  a.tokenize_s_per_token = nonneg(j, "tokenize_us_per_token", a.tokenize_s_per_token, 1e-6, 1e-3);
  a.ipc_s = nonneg(j, "ipc_ms", a.ipc_s, 1e-3, 10);
  a.output_step_s = nonneg(j, "output_step_ms", a.output_step_s, 1e-3, 10);
  a.output_s_per_request = nonneg(j, "output_us_per_request", a.output_s_per_request, 1e-6, 1);
  a.cv = nonneg(j, "cv", a.cv, 1, 10);
  return a;
}

FrontendConfig parse_frontend(const JsonReader& j, FrontendConfig f) {
  check_keys(j, {"enabled", "client", "api_server", "disaggregation"});
  f.enabled = j.boolean_or("enabled", f.enabled);
  if (j.has("client")) {
    const JsonReader c = j.object("client");
    check_keys(c, {"network_ms", "warmup_barrier"});
    f.client.network = duration_ms(c, "network_ms", f.client.network);
    f.client.warmup_barrier = c.boolean_or("warmup_barrier", f.client.warmup_barrier);
  }
  if (j.has("api_server")) f.api = parse_api_server(j.object("api_server"), f.api);
  if (j.has("disaggregation")) f.disagg = parse_disagg_path(j.object("disaggregation"), f.disagg);
  return f;
}

void validate(const FrontendConfig& f, const std::string& where) {
  if (f.api.api_server_count < 1) throw Error(where, "frontend.api_server.api_server_count", "must be >= 1");
}

}  // namespace servesim::workloads
