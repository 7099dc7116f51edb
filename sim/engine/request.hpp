// A request inside an engine worker: its lifecycle timestamps and the scheduler's counters.
// vLLM v1 semantics: num_tokens = prompt + sampled output; computed = tokens whose KV is cached.
// Per-token statistics are derived from first/second/finish times (aiperf's ITL is
// (latency - TTFT) / (OSL - 1)), so nothing here is touched per token but the two counters.
#pragma once
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

namespace servesim::sim {

enum class Phase : std::uint8_t {
  waiting,          // queued (new, or preempted and waiting to recompute)
  running,          // in the running list: prefilling in chunks or decoding
  awaiting_kv,      // decode-only worker: blocks reserved, prompt KV in flight
  handed_off,       // prefill-only worker: first token out, blocks held until the transfer ends
  finished,
};

inline constexpr double kNotYet = std::numeric_limits<double>::quiet_NaN();

struct Request {
  std::uint64_t id = 0;
  double arrival_s = 0;                 // reached the worker's queue
  double sent_s = 0;                    // the client sent it (router arrival)
  double scheduled_s = kNotYet;         // first scheduled
  double first_token_s = kNotYet, second_token_s = kNotYet, finish_s = kNotYet;
  double last_token_s = kNotYet;        // its last visible token's step end while out of the running list (preempted)
  std::int64_t input_tokens = 0;        // prompt (text + vision tokens)
  std::int64_t output_tokens = 1;       // tokens to generate (the request's max_tokens, ignore_eos)
  std::int64_t generated = 0;           // output tokens sampled so far
  std::int64_t computed = 0;            // tokens whose KV is cached (num_computed_tokens)
  std::int64_t blocks = 0;              // KV cache blocks held: attention blocks + state blocks while running
  std::int64_t token_slots = 0;         // tokens its attention blocks have room for (positions x block_size)
  std::int64_t cached_tokens = 0;       // prefix-cache hit on the last admission
  std::int64_t keyed_blocks = 0;        // prompt blocks already offered to the prefix cache
  int vision_tiles = 0;
  int preemptions = 0;
  std::int32_t preamble_tokens = 0;     // sampled before the first visible text (EngineConfig)
  int client = -1;                      // owner's tag (closed-loop client, topology handle)
  std::int64_t cohort = -1;             // closed loop: the event that released its client (-1: none)
  bool warmup = false;
  bool release_pending = false;         // finished; blocks and seat freed at the next complete() (async)
  Phase phase = Phase::waiting;
  // Prefix caching: chained keys of the prompt's full blocks, and the cached block ids held.
  std::vector<std::uint64_t> block_keys;
  std::vector<std::int32_t> cached_block_ids;

  std::int64_t num_tokens() const { return input_tokens + generated; }
  bool decoding() const { return computed >= input_tokens && num_tokens() - computed == 1; }
};

}  // namespace servesim::sim
