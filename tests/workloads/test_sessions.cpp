// Multi-turn sessions: prompts grow by the history, hashes repeat what earlier turns sent.
#include <gtest/gtest.h>

#include "common/error.hpp"
#include "common/json_reader.hpp"
#include "workloads/sessions.hpp"

namespace servesim::workloads {
namespace {

SessionConfig config(int sessions, int turns) {
  SessionConfig c;
  c.sessions = sessions;
  c.turns = turns;
  c.first_isl = LengthDist::fixed_at(1000);
  c.turn_isl = LengthDist::fixed_at(200);
  c.osl = LengthDist::fixed_at(50);
  c.shared_prefix_tokens = 256;
  c.think_time_s = 3;
  return c;
}

TEST(SessionWorkload, PromptsCarryTheHistoryAndItsHashes) {
  SessionWorkload w(config(2, 3));
  EXPECT_EQ(w.total_requests(), 6);
  auto a0 = w.next(), b0 = w.next();
  ASSERT_TRUE(a0 && b0);
  EXPECT_FALSE(w.next());
  // First turn: the shared prefix + 1000 new tokens; hashes of whole 64-token chunks of prompt + answer.
  EXPECT_EQ(a0->input_tokens, 1256);
  EXPECT_EQ(a0->prefix_hashes.size(), std::size_t((1256 + 50) / 64));
  // The shared 256 tokens (4 chunks) hash alike across sessions; the rest differ.
  for (int j = 0; j < 4; ++j) EXPECT_EQ(a0->prefix_hashes[j], b0->prefix_hashes[j]);
  EXPECT_NE(a0->prefix_hashes[4], b0->prefix_hashes[4]);
  // The next turn: sent 3 s after the answer, history (1256 + 50) + 200 new tokens, its hashes
  // starting with every hash of the turn before.
  auto a1 = w.on_finished(a0->id, 10.0);
  ASSERT_TRUE(a1);
  EXPECT_DOUBLE_EQ(a1->arrival_s, 13.0);
  EXPECT_EQ(a1->input_tokens, 1256 + 50 + 200);
  for (std::size_t j = 0; j < a0->prefix_hashes.size(); ++j) EXPECT_EQ(a1->prefix_hashes[j], a0->prefix_hashes[j]);
  EXPECT_EQ(w.turn_of(a1->id), 1);
  EXPECT_EQ(w.session_of(a1->id), w.session_of(a0->id));
  auto a2 = w.on_finished(a1->id, 20.0);
  ASSERT_TRUE(a2);
  EXPECT_EQ(a2->input_tokens, 1506 + 50 + 200);
  EXPECT_FALSE(w.on_finished(a2->id, 30.0));   // 3 turns
}

TEST(SessionWorkload, TraceGivesTurnsDelaysAndHashes) {
  const std::string text =
      "{\"session_id\": \"a\", \"input_length\": 700, \"output_length\": 20, \"delay_ms\": 0, \"hash_ids\": [1, 2]}\n"
      "{\"session_id\": 7, \"input_length\": 300, \"output_length\": 10, \"delay_ms\": 500}\n"
      "{\"session_id\": \"a\", \"input_length\": 100, \"output_length\": 20, \"delay_ms\": 2000, \"hash_ids\": [1, 2, 3]}\n";
  SessionConfig c;
  c.trace = std::make_shared<const SessionTrace>(parse_session_trace(text, "t.jsonl"));
  c.hash_block_tokens = 512;
  SessionWorkload w(c);
  EXPECT_EQ(w.total_requests(), 3);
  auto a0 = w.next();
  auto b0 = w.next();
  EXPECT_DOUBLE_EQ(b0->arrival_s, 0.5);
  EXPECT_EQ(a0->prefix_hashes, (std::vector<std::uint64_t>{1, 2}));
  auto a1 = w.on_finished(a0->id, 4.0);
  EXPECT_DOUBLE_EQ(a1->arrival_s, 6.0);
  EXPECT_EQ(a1->input_tokens, 700 + 20 + 100);
  EXPECT_EQ(a1->trace_line, 3);
}

TEST(SessionWorkload, BadTraceLinesNameFileLineAndField) {
  try {
    parse_session_trace("{\"session_id\": 1, \"input_length\": 0, \"output_length\": 5}\n", "s.jsonl");
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()).rfind("s.jsonl: line 1, input_length", 0), 0u) << e.what();
  }
  EXPECT_THROW(parse_session_trace("{\"input_length\": 3, \"output_length\": 5}\n", "s.jsonl"), Error);
  EXPECT_THROW(parse_session_trace("\n\n", "s.jsonl"), Error);
}

}  // namespace
}  // namespace servesim::workloads
