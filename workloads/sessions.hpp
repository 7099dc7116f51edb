// Multi-turn sessions (agentic coding, chat): each turn's prompt is the session's whole history
// (earlier prompts and answers) plus the turn's new tokens, sent a think time after the previous
// answer ended, so prefixes grow and repeat and where a turn is routed matters. Sessions are
// synthetic (count x turns with length distributions) or read from a session trace (JSONL, one
// line per turn). Each session is a closed loop of its own: the cluster asks for a session's next
// turn when its previous answer reached the client.
#pragma once
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "workloads/lengths.hpp"
#include "workloads/workload.hpp"

namespace servesim { class JsonReader; }

namespace servesim::workloads {

// One turn of a session trace line: {"session_id", "input_length" (the turn's new tokens),
// "output_length", "delay_ms" (after the previous answer; the first turn: its start time),
// optional "hash_ids" (the whole prompt's blocks of `block_tokens` tokens, history included, as
// Mooncake / agentic traces carry them; equal ids = equal content)}.
struct SessionTurn {
  std::int64_t new_tokens = 1;
  std::int64_t output_tokens = 1;
  double delay_s = 0;
  std::vector<std::uint64_t> hash_ids;
  std::int64_t line = 0;
};
struct SessionTrace {
  std::vector<std::vector<SessionTurn>> sessions;   // in order of first appearance
};
SessionTrace parse_session_trace(std::string_view text, const std::string& file);
SessionTrace read_session_trace(const std::string& path);

struct SessionConfig {
  int sessions = 1;                     // synthetic: sessions running at once, all starting within start_spread_s
  int turns = 1;                        // synthetic: turns per session
  double think_time_s = 0;              // synthetic: delay between an answer and the next turn
  bool think_exponential = false;       // exponential think times of that mean (else fixed)
  double start_spread_s = 0;            // synthetic: session starts uniform in [0, spread)
  std::int64_t shared_prefix_tokens = 0;  // synthetic: a prefix every session shares (system prompt, tool definitions)
  LengthDist first_isl = LengthDist::fixed_at(1024);   // new tokens of a session's first turn (after the shared prefix)
  LengthDist turn_isl = LengthDist::fixed_at(256);     // new tokens of each later turn
  LengthDist osl = LengthDist::fixed_at(256);
  std::int64_t hash_block_tokens = 64;  // content granularity of the prefix hashes
  std::shared_ptr<const SessionTrace> trace;            // set: sessions come from this trace
  std::string trace_file;
  std::uint64_t seed = 0;
};

// The scenario's workload "sessions" object (workloads/README.md); `base` resolves its file.
SessionConfig parse_sessions(const JsonReader& j, const std::string& base);
void validate(const SessionConfig& c, const std::string& where, const std::string& prefix);

class SessionWorkload final : public Workload {
 public:
  explicit SessionWorkload(const SessionConfig& c);
  // Every session's first turn, in order of start time (arrival_s = the start); then nullopt.
  std::optional<RequestSpec> next() override;
  int concurrency() const override { return 0; }
  std::int64_t warmup_requests() const override { return 0; }
  std::int64_t total_requests() const override { return total_; }
  // The request `id` reached its client at t_s: its session's next turn (arrival_s = t_s + think
  // time), or nullopt when the session is over.
  std::optional<RequestSpec> on_finished(std::uint64_t id, double t_s);
  int turn_of(std::uint64_t id) const { return turn_of_[static_cast<std::size_t>(id)]; }
  int session_of(std::uint64_t id) const { return session_of_[static_cast<std::size_t>(id)]; }
  int sessions() const { return static_cast<int>(state_.size()); }
  int max_turns() const { return max_turns_; }

 private:
  struct State {
    double start_s = 0;
    int turn = 0;                 // turns sent so far
    std::int64_t history = 0;     // tokens of earlier prompts and answers
    std::uint64_t salt = 0;
    Rng rng{0};
  };
  RequestSpec make_turn(int s, double arrival_s);
  int turns_of(int s) const;

  SessionConfig c_;
  std::vector<State> state_;
  std::vector<int> order_;        // sessions by start time
  std::size_t next_first_ = 0;
  std::vector<int> turn_of_, session_of_;
  std::int64_t total_ = 0;
  int max_turns_ = 0;
};

}  // namespace servesim::workloads
