// One request as a client sends it: prompt and answer lengths, vision work, prefix identity.
#pragma once
#include <cstdint>
#include <vector>

namespace servesim::workloads {

struct RequestSpec {
  std::uint64_t id = 0;
  double arrival_s = 0;                 // open loop / trace: absolute arrival; closed loop: ignored
  std::int64_t input_tokens = 0;        // everything the LLM prefills (text + vision tokens)
  std::int64_t output_tokens = 1;       // >= 1
  std::int64_t vision_tokens = 0;       // part of input_tokens produced by the vision encoder
  int vision_tiles = 0;                 // encoder work (image tiles incl. thumbnail + video frames)
  std::vector<std::uint64_t> prefix_hashes;  // one hash per `hash_block_tokens` block of the prompt (traces), for prefix caching
  std::int64_t hash_block_tokens = 0;   // 0 = no prefix information
  // Tokens the prefix hashes describe when they reach past the prompt (a session turn's answer,
  // which the next turn re-sends, so the engine caches its full blocks too); 0 = the prompt's.
  std::int64_t hashed_tokens = 0;
  std::int64_t trace_line = 0;          // the trace file's line the request came from (0 = not from a trace)
};

}  // namespace servesim::workloads
