// The traffic a benchmark client generates: closed loop like aiperf --concurrency, open loop at a
// rate (Poisson, gamma, constant), fixed-schedule replay, or a Mooncake-style trace; prompt and
// answer lengths from distributions or the trace; images and video per request.
#pragma once
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "workloads/lengths.hpp"
#include "workloads/multimodal.hpp"
#include "workloads/request.hpp"
#include "workloads/trace.hpp"

namespace servesim { class JsonReader; }

namespace servesim::workloads {

class Workload {                        // a deterministic source of requests, in order
 public:
  virtual ~Workload() = default;
  virtual std::optional<RequestSpec> next() = 0;   // nullopt when exhausted
  virtual int concurrency() const = 0;             // > 0: closed loop with N clients (aiperf --concurrency); 0: open loop by arrival_s
  virtual std::int64_t warmup_requests() const = 0;// first K requests are excluded from metrics
  virtual std::int64_t total_requests() const = 0; // warm-up + measured requests next() will yield
  // A closed loop's warm-up ends early (WorkloadConfig::warmup_until_steady): the `sent` requests
  // yielded so far are the warm-up, and `requests` measured ones follow. Others ignore it.
  virtual void end_warmup(std::int64_t sent) { (void)sent; }
  virtual bool warmup_until_steady() const { return false; }
  // A closed loop's measured phase ends once its figures are precise
  // (WorkloadConfig::measure_until_precise): no request is yielded after the `sent` ones.
  virtual void end_measured(std::int64_t sent) { (void)sent; }
  virtual bool measure_until_precise() const { return false; }
};

enum class Arrival {
  concurrency,   // closed loop: N clients, each sends its next request when the previous completes
  poisson,       // open loop, exponential gaps of mean 1/rate
  gamma,         // open loop, gamma gaps: shape = burstiness, mean 1/rate (vLLM bench --burstiness)
  constant,      // open loop, gaps of exactly 1/rate
  schedule,      // fixed schedule: timestamps (ms) from the trace or a schedule file
  sessions,      // multi-turn sessions, each a closed loop of its own (workloads/sessions.hpp)
};
const char* arrival_name(Arrival a);
// An open-loop arrival process by name (poisson, gamma, constant; any case); throws Error naming `flag`.
Arrival parse_arrival(const std::string& name, const std::string& flag);

// aiperf's synthetic dataset: the prompts a client draws from. aiperf synthesises
// --num-dataset-entries prompts (100 by default) and cycles through them, so a run of more
// requests than entries re-sends identical prompts, which vLLM's prefix cache (on by default)
// serves without prefilling them again. entries = 0: every request is a distinct prompt (real
// traffic; servesim's default).
enum class DatasetSampling {
  sequential,    // entry i mod N
  random,        // uniform, with replacement
  shuffle,       // a fresh random order of the N entries in every pass
};
const char* sampling_name(DatasetSampling s);
struct DatasetConfig {
  std::int64_t entries = 0;
  DatasetSampling sampling = DatasetSampling::sequential;
};

struct SessionConfig;

struct WorkloadConfig {
  Arrival arrival = Arrival::concurrency;
  int concurrency = 1;                 // Arrival::concurrency
  double rate_per_s = 0;               // poisson / gamma / constant
  double burstiness = 1;               // gamma shape; 1 = Poisson, < 1 burstier, > 1 smoother
  double time_scale = 1;               // schedule: multiplies timestamps (0.5 = replay twice as fast)
  bool auto_offset = true;             // schedule: first timestamp becomes t = 0
  std::int64_t requests = 100;         // measured requests (trace/schedule: 0 = every line)
  std::int64_t warmup_requests = 0;    // sent first, excluded from metrics (aiperf --warmup-request-count)
  // Closed loop: the warm-up ends as soon as the loop is steady (sim/engine/steady_warmup.hpp),
  // warmup_requests being the most it lasts (the capacity points of plan, search and recommend).
  bool warmup_until_steady = false;
  // Closed loop: the measured phase ends once the 95 % confidence intervals of mean and p90 TTFT
  // and ITL are within 1 % (sim/engine/steady_warmup.hpp, MeasuredPrecision), `requests` being
  // the most it lasts (the capacity points of plan, search and recommend).
  bool measure_until_precise = false;
  std::uint64_t seed = 0;
  LengthDist isl = LengthDist::fixed_at(128);   // text tokens of the prompt
  LengthDist osl = LengthDist::fixed_at(128);
  // Trace: lengths and prefix hashes from a Mooncake JSONL file (ISL/OSL distributions unused).
  std::shared_ptr<const std::vector<TraceEntry>> trace;
  std::string trace_file;
  std::int64_t hash_block_tokens = kMooncakeBlockTokens;
  // Schedule file: arrival timestamps (ms) when no trace gives them.
  std::shared_ptr<const std::vector<double>> schedule_ms;
  std::string schedule_file;
  MultimodalConfig multimodal;         // vision tokens are added to the prompt
  // Synthetic prompts drawn from a finite dataset: an entry keeps its lengths and content
  // (prefix hashes, one per 512-token block), so repeats can hit the prefix cache.
  DatasetConfig dataset;
  // Synthetic prompts that all start with the same `shared_prefix_tokens` tokens (a system prompt,
  // tool definitions): the rest of each prompt is its own. With prefix caching on, an engine that
  // holds the prefix prefills only the whole blocks after it (block_keys: one hash covering the
  // prefix). 0: no shared content.
  std::int64_t shared_prefix_tokens = 0;
  // Arrival::sessions: multi-turn sessions (the other arrival and length fields are unused).
  std::shared_ptr<const SessionConfig> sessions;
};

// Validates the scenario "workload" object (schema in workloads/README.md); trace, schedule and
// empirical files are read here, relative to the scenario file's folder.
WorkloadConfig parse_workload(const JsonReader& j);
// Checks the config (rates > 0, concurrency >= 1, ...); throws Error(where, field, reason).
// Field names are prefixed with `field_prefix` (e.g. "workload.").
void validate(const WorkloadConfig& c, const std::string& where = "workload", const std::string& field_prefix = "");
std::unique_ptr<Workload> make_workload(const WorkloadConfig& c);
// Every request the workload yields, in order (tests, small runs).
std::vector<RequestSpec> materialize(const WorkloadConfig& c);

// Closed-loop client bookkeeping as aiperf does it: N clients start together; each completion
// frees its client, which sends the next request at once. O(1) per request.
class ClosedLoopClients {
 public:
  explicit ClosedLoopClients(Workload& w) : w_(&w) {}
  // The first min(N, total) requests, all sent at `t_s`.
  std::vector<RequestSpec> start(double t_s);
  // A request finished at `t_s`: its client's next request (arrival_s = t_s), or nullopt when done.
  std::optional<RequestSpec> on_complete(double t_s);

 private:
  Workload* w_;
};

}  // namespace servesim::workloads
