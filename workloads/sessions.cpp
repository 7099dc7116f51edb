#include "workloads/sessions.hpp"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <unordered_map>

#include "common/error.hpp"
#include "common/json_reader.hpp"
#include "common/splitmix.hpp"
#include "common/text.hpp"
#include "workloads/paths.hpp"
#include "workloads/trace.hpp"

namespace servesim::workloads {
namespace {

constexpr std::int64_t kMaxTokens = std::int64_t{1} << 30;

std::string at_line(std::int64_t line, const char* field) { return "line " + std::to_string(line) + ", " + field; }

std::int64_t tokens_field(const nlohmann::json& o, const char* key, const std::string& file, std::int64_t line,
                          std::int64_t lo) {
  if (!o.contains(key)) throw Error(file, at_line(line, key), "missing required field");
  const auto& v = o.at(key);
  const double d = v.is_number() ? v.get<double>() : NAN;
  if (!std::isfinite(d) || d != std::floor(d) || d < double(lo) || d > double(kMaxTokens))
    throw Error(file, at_line(line, key), "expected an integer " + std::to_string(lo) + "..2^30, got " + brief(v));
  return static_cast<std::int64_t>(d);
}

// Session id as the trace writes it (a string or an integer).
std::string session_key(const nlohmann::json& o, const std::string& file, std::int64_t line) {
  if (!o.contains("session_id")) throw Error(file, at_line(line, "session_id"), "missing required field");
  const auto& v = o.at("session_id");
  if (v.is_string()) return v.get<std::string>();
  if (v.is_number_integer()) return std::to_string(v.get<std::int64_t>());
  throw Error(file, at_line(line, "session_id"), "expected a string or an integer, got " + brief(v));
}

}  // namespace

SessionTrace parse_session_trace(std::string_view text, const std::string& file) {
  SessionTrace t;
  std::unordered_map<std::string, std::size_t> index;
  std::int64_t line = 0;
  std::size_t pos = 0;
  while (pos <= text.size()) {
    const std::size_t nl = text.find('\n', pos);
    const std::size_t end = nl == std::string_view::npos ? text.size() : nl;
    ++line;
    std::string_view s = text.substr(pos, end - pos);
    while (!s.empty() && (s.back() == '\r' || s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
    while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
    pos = nl == std::string_view::npos ? text.size() + 1 : nl + 1;
    if (s.empty()) continue;
    nlohmann::json o;
    try {
      o = parse_json(s, file);
    } catch (const Error& e) {
      throw Error(file, "line " + std::to_string(line), e.reason());
    }
    if (!o.is_object()) throw Error(file, "line " + std::to_string(line), "expected a JSON object");
    static const std::vector<std::string> known = {"session_id", "input_length", "output_length", "delay_ms", "hash_ids"};
    for (const auto& item : o.items())
      if (std::find(known.begin(), known.end(), item.key()) == known.end())
        throw Error(file, at_line(line, item.key().c_str()), "unknown field; known: " + text::join(known));
    SessionTurn turn;
    turn.line = line;
    turn.new_tokens = tokens_field(o, "input_length", file, line, 1);
    turn.output_tokens = tokens_field(o, "output_length", file, line, 1);
    if (o.contains("delay_ms")) {
      const auto& v = o.at("delay_ms");
      const double d = v.is_number() ? v.get<double>() : NAN;
      if (!(d >= 0 && d <= 1e12)) throw Error(file, at_line(line, "delay_ms"), "expected milliseconds >= 0, got " + brief(v));
      turn.delay_s = d * 1e-3;
    }
    if (o.contains("hash_ids")) {
      const auto& h = o.at("hash_ids");
      if (!h.is_array()) throw Error(file, at_line(line, "hash_ids"), "expected an array of integers, got " + brief(h));
      for (const auto& x : h) {
        if (!x.is_number_integer() || (x.is_number_integer() && !x.is_number_unsigned() && x.get<std::int64_t>() < 0))
          throw Error(file, at_line(line, "hash_ids"), "expected integers >= 0, got " + brief(x));
        turn.hash_ids.push_back(x.get<std::uint64_t>());
      }
    }
    const std::string key = session_key(o, file, line);
    auto [it, fresh] = index.try_emplace(key, t.sessions.size());
    if (fresh) t.sessions.emplace_back();
    t.sessions[it->second].push_back(std::move(turn));
  }
  if (t.sessions.empty()) throw Error(file, "", "no session turns (one JSON object per line)");
  return t;
}

SessionTrace read_session_trace(const std::string& path) { return parse_session_trace(read_text_file(path), path); }

SessionConfig parse_sessions(const JsonReader& j, const std::string& base) {
  static const std::vector<std::string> known = {"count",        "turns",       "think_time_s", "think_time",
                                                 "start_spread_s", "shared_prefix_tokens", "isl", "turn_isl",
                                                 "osl",          "block_tokens", "file"};
  for (const auto& item : j.json().items())
    if (std::find(known.begin(), known.end(), item.key()) == known.end())
      j.fail(item.key(), "unknown field; known: " + text::join(known));
  SessionConfig c;
  if (j.has("file")) {
    for (const char* k : {"count", "turns", "think_time_s", "isl", "turn_isl", "osl", "shared_prefix_tokens"})
      if (j.has(k)) j.fail(k, "a session trace (file) gives every turn; leave this out");
    c.trace_file = resolve_path(base, j.string("file"));
    c.trace = std::make_shared<const SessionTrace>(read_session_trace(c.trace_file));
  } else {
    c.sessions = static_cast<int>(std::clamp<std::int64_t>(j.integer("count"), -1, 1 << 30));
    c.turns = static_cast<int>(std::clamp<std::int64_t>(j.integer_or("turns", 1), -1, 1 << 30));
    c.think_time_s = j.number_or("think_time_s", 0);
    const std::string how = text::lower(j.string_or("think_time", "fixed"));
    if (how == "exponential") c.think_exponential = true;
    else if (how != "fixed") j.fail("think_time", "unknown '" + how + "'; known: fixed, exponential");
    c.start_spread_s = j.number_or("start_spread_s", 0);
    c.shared_prefix_tokens = j.integer_or("shared_prefix_tokens", 0);
    if (j.has("isl")) c.first_isl = parse_length_dist(j, "isl", base);
    else j.fail("isl", "missing required field (new tokens of a session's first turn)");
    c.turn_isl = j.has("turn_isl") ? parse_length_dist(j, "turn_isl", base) : c.first_isl;
    if (j.has("osl")) c.osl = parse_length_dist(j, "osl", base);
    else j.fail("osl", "missing required field (answer tokens per turn)");
  }
  c.hash_block_tokens = j.integer_or("block_tokens", c.trace ? kMooncakeBlockTokens : 64);
  return c;
}

void validate(const SessionConfig& c, const std::string& where, const std::string& p) {
  auto fail = [&](const std::string& f, const std::string& why) { throw Error(where, p + f, why); };
  if (c.hash_block_tokens < 1 || c.hash_block_tokens > (1 << 20)) fail("block_tokens", "must be 1..2^20 tokens");
  if (c.trace) return;
  if (c.sessions < 1 || c.sessions > 10'000'000) fail("count", "must be 1..10^7 sessions, got " + std::to_string(c.sessions));
  if (c.turns < 1 || c.turns > 100'000) fail("turns", "must be 1..100000 turns per session, got " + std::to_string(c.turns));
  if (std::int64_t(c.sessions) * c.turns > 10'000'000)
    fail("count", "sessions x turns must be <= 10^7 requests (each is kept for exact percentiles)");
  if (!(c.think_time_s >= 0 && c.think_time_s <= 1e7)) fail("think_time_s", "must be 0..1e7 seconds");
  if (!(c.start_spread_s >= 0 && c.start_spread_s <= 1e7)) fail("start_spread_s", "must be 0..1e7 seconds");
  if (c.shared_prefix_tokens < 0 || c.shared_prefix_tokens > kMaxTokens) fail("shared_prefix_tokens", "must be 0..2^30");
  for (auto [d, f] : {std::pair{&c.first_isl, "isl"}, {&c.turn_isl, "turn_isl"}, {&c.osl, "osl"}})
    if (d->kind == LengthDist::Kind::empirical ? (!d->values || d->values->empty())
        : d->kind == LengthDist::Kind::uniform  ? (d->min < 1 || d->max < d->min)
                                                 : !(d->mean >= 1 && d->mean <= 1e9 && d->stddev >= 0))
      fail(f, "invalid length distribution " + d->describe());
}

SessionWorkload::SessionWorkload(const SessionConfig& c) : c_(c) {
  const int n = c_.trace ? static_cast<int>(c_.trace->sessions.size()) : c_.sessions;
  state_.resize(static_cast<std::size_t>(n));
  Rng starts(splitmix64(c_.seed ^ 0x73746172ULL));
  for (int s = 0; s < n; ++s) {
    State& st = state_[static_cast<std::size_t>(s)];
    st.salt = splitmix64(c_.seed ^ splitmix64(0x7365737369ULL + static_cast<std::uint64_t>(s))) | 1ULL;
    st.rng = Rng(splitmix64(st.salt ^ 0x6c656e67ULL));
    st.start_s = c_.trace ? c_.trace->sessions[static_cast<std::size_t>(s)].front().delay_s
                          : (c_.start_spread_s > 0 ? starts.uniform(0, c_.start_spread_s) : 0.0);
    total_ += turns_of(s);
    max_turns_ = std::max(max_turns_, turns_of(s));
  }
  order_.resize(static_cast<std::size_t>(n));
  std::iota(order_.begin(), order_.end(), 0);
  std::stable_sort(order_.begin(), order_.end(), [&](int a, int b) {
    return state_[static_cast<std::size_t>(a)].start_s < state_[static_cast<std::size_t>(b)].start_s;
  });
  turn_of_.reserve(static_cast<std::size_t>(total_));
  session_of_.reserve(static_cast<std::size_t>(total_));
}

int SessionWorkload::turns_of(int s) const {
  return c_.trace ? static_cast<int>(c_.trace->sessions[static_cast<std::size_t>(s)].size()) : c_.turns;
}

std::optional<RequestSpec> SessionWorkload::next() {
  if (next_first_ >= order_.size()) return std::nullopt;
  const int s = order_[next_first_++];
  return make_turn(s, state_[static_cast<std::size_t>(s)].start_s);
}

std::optional<RequestSpec> SessionWorkload::on_finished(std::uint64_t id, double t_s) {
  const int s = session_of(id);
  State& st = state_[static_cast<std::size_t>(s)];
  if (st.turn >= turns_of(s)) return std::nullopt;
  double think = 0;
  if (c_.trace) think = c_.trace->sessions[static_cast<std::size_t>(s)][static_cast<std::size_t>(st.turn)].delay_s;
  else if (c_.think_time_s > 0) think = c_.think_exponential ? st.rng.exponential(1.0 / c_.think_time_s) : c_.think_time_s;
  return make_turn(s, t_s + think);
}

// The turn's prompt is the history plus its new tokens. Content identity, one hash per
// hash_block_tokens tokens: a session's tokens never change once written, so the hash of chunk j
// is the session's (or, inside the shared prefix, everyone's) hash of j. The hashes cover the
// prompt and the answer, so the engine can cache the answer's full blocks for the next turn.
RequestSpec SessionWorkload::make_turn(int s, double arrival_s) {
  State& st = state_[static_cast<std::size_t>(s)];
  const SessionTurn* tr = c_.trace ? &c_.trace->sessions[static_cast<std::size_t>(s)][static_cast<std::size_t>(st.turn)] : nullptr;
  RequestSpec r;
  r.id = static_cast<std::uint64_t>(turn_of_.size());
  r.arrival_s = arrival_s;
  std::int64_t fresh = tr ? tr->new_tokens : (st.turn == 0 ? c_.first_isl : c_.turn_isl).sample(st.rng);
  if (!tr && st.turn == 0) fresh += c_.shared_prefix_tokens;
  r.input_tokens = st.history + fresh;
  r.output_tokens = tr ? tr->output_tokens : c_.osl.sample(st.rng);
  r.hash_block_tokens = c_.hash_block_tokens;
  if (tr && !tr->hash_ids.empty()) {
    r.prefix_hashes = tr->hash_ids;   // the trace says what the prompt shares
    r.trace_line = tr->line;
  } else {
    const std::int64_t g = c_.hash_block_tokens;
    const std::int64_t chunks = (r.input_tokens + r.output_tokens) / g;
    r.prefix_hashes.reserve(static_cast<std::size_t>(chunks));
    for (std::int64_t j = 0; j < chunks; ++j) {
      const bool shared = (j + 1) * g <= c_.shared_prefix_tokens;
      r.prefix_hashes.push_back(splitmix64((shared ? 0x5348415245ULL : st.salt) + static_cast<std::uint64_t>(j) * 0x9e3779b97f4a7c15ULL));
    }
    r.hashed_tokens = chunks * g;
    if (tr) r.trace_line = tr->line;
  }
  st.history = r.input_tokens + r.output_tokens;
  ++st.turn;
  turn_of_.push_back(st.turn - 1);
  session_of_.push_back(s);
  return r;
}

}  // namespace servesim::workloads
