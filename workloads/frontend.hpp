// What lies between a benchmark client and the engine core: the client's network hops (aiperf),
// the API-server process of `vllm serve` (request handling, chat template and tokenisation on the
// way in; incremental detokenisation and one SSE chunk per request per engine step on the way
// out; a single process is one FIFO queue), and the ZMQ hop to the engine core. Every term is a
// random duration with a stated prior (workloads/README.md); all draws come from one seeded
// SplitMix64 stream per run, so a run stays a pure function of its inputs.
#pragma once
#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

namespace servesim { class JsonReader; }

namespace servesim::workloads {

// A positive duration: `mean_s` scaled by a lognormal factor of mean 1 and coefficient of
// variation `cv` (cv 0: exactly mean_s).
struct Duration {
  double mean_s = 0, cv = 0;
  double sample(std::uint64_t& state) const;
  // Moves `state` past one sample() without computing it (the same draws, their value unused).
  void skip(std::uint64_t& state) const {
    if (cv > 0) state += 2 * 0x9e3779b97f4a7c15ULL;
  }
  nlohmann::json to_json_ms() const;
};
// A lognormal factor of mean 1 and coefficient of variation cv (1 when cv <= 0).
double lognormal_factor(double cv, std::uint64_t& state);
// When the first uniform a draw from `state` takes is at least 2^-20 (lognormal_bounded), its
// factor is below lognormal_factor_bound(cv): Box-Muller's z = sqrt(-2 ln u1) cos(2 pi u2) is at
// most sqrt(-2 ln 2^-20) = 5.27, so the factor exp(sigma z - sigma^2 / 2) < exp(5.3 sigma). A
// loop can then tell that a pending draw ends before a given time without computing it.
bool lognormal_bounded(std::uint64_t state);
double lognormal_factor_bound(double cv);

struct ClientConfig {                   // aiperf's side
  Duration network{1e-4, 0.2};          // one way, client <-> API server, per request or per chunk
  // A user calibration's latency per request that holds no serial resource (the HTTP stack, proxies,
  // async hand-offs): a TTFT floor that does not queue at high load (sim/calibration.hpp,
  // request_latency_ms). The client sees it; the engine's arrivals do not move (sim/engine/metrics_sink.hpp).
  // 0 without a calibration.
  double request_latency_s = 0;
  // A user calibration's shortest first token (first_token_floor_ms): the client's TTFT is at least
  // this, whatever the engine took (the engine's minimum first-token path: the request's hand-off to
  // the engine core, its first schedule, the detokenised first chunk back), and the request's later
  // tokens move with it. Unlike request_latency_s it adds nothing where the engine's own first token
  // is already later (long prompts, a queue). 0 without a calibration.
  double first_token_floor_s = 0;
  // aiperf runs the warm-up phase to completion before the profiling phase starts all clients
  // together again (prior: true).
  bool warmup_barrier = true;
};

struct ApiServerConfig {                // vLLM's API-server process(es)
  int api_server_count = 1;             // vLLM --api-server-count
  Duration request{1e-3, 0.2};          // parse + chat template + validation per request
  double tokenize_s_per_token = 1e-6;   // prompt tokenisation
  double ipc_s = 1e-4;                  // ZMQ hop to/from the engine core
  double output_step_s = 1e-4;          // output handler per engine step
  double output_s_per_request = 40e-6;  // detokenise + SSE chunk per request per step
  double cv = 0.2;                      // lognormal spread of the tokenise / output costs
};

// Disaggregated serving (prefill and decode workers under a serving framework such as Dynamo): what
// a request pays between the prefill worker's last step and its decode worker pulling the KV, beyond
// the pull at link bandwidth. No prior: fitted on measured disaggregated runs (engine profile's
// "disaggregation"), 0 where a profile has none.
struct DisaggPathConfig {
  Duration handoff{0, 0};               // prefill result back through the framework to the decode worker
  double pull_s_per_token = 0;          // the KV pull's cost per prompt token on top of bytes / bandwidth
};

struct FrontendConfig {
  bool enabled = true;                  // false: requests reach the engine the instant they are sent
  ClientConfig client;
  ApiServerConfig api;
  DisaggPathConfig disagg;
  // CPU time of one request's way in (before the queue) and of one step's output batch.
  double request_in_s(std::int64_t prompt_tokens, std::uint64_t& rng) const;
  double step_out_s(int requests, std::uint64_t& rng) const;
  nlohmann::json to_json() const;
  nlohmann::json client_json() const;   // the client part of to_json()
};

// Reads the API-server fields of a JSON object (an engine profile's "api_server", or a
// scenario's "frontend.api_server") on top of `base`; errors name the file and field.
ApiServerConfig parse_api_server(const JsonReader& j, ApiServerConfig base);
// The disaggregated-path fields of a JSON object (an engine profile's "disaggregation", or a
// scenario's "frontend.disaggregation") on top of `base`.
DisaggPathConfig parse_disagg_path(const JsonReader& j, DisaggPathConfig base);
// A scenario's "frontend" object on top of `base` (the engine profile's API-server priors).
FrontendConfig parse_frontend(const JsonReader& j, FrontendConfig base);
void validate(const FrontendConfig& f, const std::string& where);

}  // namespace servesim::workloads
