#include "workloads/trace.hpp"

#include <charconv>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "common/error.hpp"
#include "common/files.hpp"
#include "common/json_reader.hpp"
#include "common/text.hpp"

namespace servesim::workloads {
namespace {

constexpr std::int64_t kMaxTokens = std::int64_t{1} << 30;

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t' || s.front() == '\r')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r')) s.remove_suffix(1);
  return s;
}

// Calls f(line_number, line) for every non-blank line.
template <class F>
void for_each_line(std::string_view text, F&& f) {
  std::size_t line = 0, pos = 0;
  while (pos <= text.size()) {
    const std::size_t nl = text.find('\n', pos);
    const std::size_t end = nl == std::string_view::npos ? text.size() : nl;
    ++line;
    const std::string_view s = trim(text.substr(pos, end - pos));
    if (!s.empty()) f(line, s);
    if (nl == std::string_view::npos) break;
    pos = nl + 1;
  }
}

std::string at_line(std::size_t line, std::string_view field = {}) {
  std::string s = "line " + std::to_string(line);
  if (!field.empty()) s += ", " + std::string(field);
  return s;
}

std::string shown(const nlohmann::json& v) { return brief(v); }

nlohmann::json parse_line(std::string_view s, const std::string& file, std::size_t line) {
  nlohmann::json j;
  try {
    j = parse_json(s, file);   // depth-limited, duplicate keys refused
  } catch (const Error& e) {
    const bool syntax = e.reason().rfind("invalid JSON", 0) == 0;
    throw Error(file, e.field().empty() || syntax ? at_line(line) : at_line(line, e.field()), e.reason());
  }
  if (!j.is_object()) throw Error(file, at_line(line), "expected a JSON object");
  return j;
}

// Integer field within [lo, kMaxTokens]; integral floats (e.g. 12.0) are accepted.
std::int64_t int_field(const nlohmann::json& v, const std::string& file, std::size_t line, const char* field,
                       std::int64_t lo) {
  double d = 0;
  if (v.is_number_integer()) {
    if (v.is_number_unsigned() && v.get<std::uint64_t>() > static_cast<std::uint64_t>(kMaxTokens))
      throw Error(file, at_line(line, field), "must be <= 2^30, got " + shown(v));
    const auto n = v.get<std::int64_t>();
    if (n < lo || n > kMaxTokens)
      throw Error(file, at_line(line, field), "must be between " + std::to_string(lo) + " and 2^30, got " + shown(v));
    return n;
  }
  if (v.is_number_float()) d = v.get<double>();
  if (!v.is_number() || !std::isfinite(d) || d != std::floor(d))
    throw Error(file, at_line(line, field), "expected an integer, got " + shown(v));
  if (d < static_cast<double>(lo) || d > static_cast<double>(kMaxTokens))
    throw Error(file, at_line(line, field), "must be between " + std::to_string(lo) + " and 2^30, got " + shown(v));
  return static_cast<std::int64_t>(d);
}

double time_field(const nlohmann::json& v, const std::string& file, std::size_t line) {
  if (!v.is_number()) throw Error(file, at_line(line, "timestamp"), "expected a number of milliseconds, got " + shown(v));
  const double t = v.get<double>();
  if (!std::isfinite(t) || t < 0 || t > 1e15)
    throw Error(file, at_line(line, "timestamp"), "must be a finite number of milliseconds >= 0, got " + shown(v));
  return t;
}

bool parse_double(std::string_view s, double& out) {
  s = trim(s);
  if (!s.empty() && s.front() == '+') s.remove_prefix(1);
  const char* end = s.data() + s.size();
  auto r = std::from_chars(s.data(), end, out);
  return r.ec == std::errc() && r.ptr == end && std::isfinite(out);
}

std::vector<std::string_view> split_commas(std::string_view s) {
  std::vector<std::string_view> out;
  std::size_t pos = 0;
  for (;;) {
    const std::size_t c = s.find(',', pos);
    out.push_back(trim(s.substr(pos, c == std::string_view::npos ? std::string_view::npos : c - pos)));
    if (c == std::string_view::npos) break;
    pos = c + 1;
  }
  return out;
}

bool looks_like_jsonl(std::string_view text) {
  for (char c : text) {
    if (c == ' ' || c == '\t' || c == '\r' || c == '\n') continue;
    return c == '{';
  }
  return false;
}

}  // namespace

std::vector<TraceEntry> parse_trace(std::string_view text, const std::string& file) {
  std::vector<TraceEntry> out;
  for_each_line(text, [&](std::size_t line, std::string_view s) {
    const nlohmann::json j = parse_line(s, file, line);
    TraceEntry e;
    e.line = static_cast<std::int64_t>(line);
    auto it = j.find("timestamp");
    e.timestamp_ms = it == j.end() || it->is_null() ? NAN : time_field(*it, file, line);
    it = j.find("input_length");
    if (it == j.end() || it->is_null()) throw Error(file, at_line(line, "input_length"), "missing required field");
    e.input_length = int_field(*it, file, line, "input_length", 1);
    it = j.find("output_length");
    // Absent output_length: 0, the workload's OSL distribution decides (aiperf leaves it to the server).
    e.output_length = it == j.end() || it->is_null() ? 0 : int_field(*it, file, line, "output_length", 1);
    it = j.find("hash_ids");
    if (it != j.end() && !it->is_null()) {
      if (!it->is_array()) throw Error(file, at_line(line, "hash_ids"), "expected an array of block ids");
      e.hash_ids.reserve(it->size());
      for (std::size_t k = 0; k < it->size(); ++k) {
        const auto& h = (*it)[k];
        if (!h.is_number_integer() || (h.is_number_integer() && !h.is_number_unsigned() && h.get<std::int64_t>() < 0))
          throw Error(file, at_line(line, "hash_ids[" + std::to_string(k) + "]"),
                      "expected a non-negative integer, got " + shown(h));
        e.hash_ids.push_back(h.get<std::uint64_t>());
      }
    }
    out.push_back(std::move(e));
  });
  if (out.empty()) throw Error(file, "", "trace has no requests");
  return out;
}

std::string read_text_file(const std::string& path) {
  // Regular files only: a FIFO or /dev/zero named by a scenario would block or never end.
  return read_input_file(path, kMaxTraceFileBytes);
}

std::vector<TraceEntry> read_trace_file(const std::string& path) { return parse_trace(read_text_file(path), path); }

std::vector<std::int64_t> parse_lengths(std::string_view text, const std::string& file, const std::string& column) {
  std::vector<std::int64_t> out;
  if (looks_like_jsonl(text)) {
    for_each_line(text, [&](std::size_t line, std::string_view s) {
      const nlohmann::json j = parse_line(s, file, line);
      std::string key = column;
      if (key.empty()) {
        if (j.contains("input_length")) key = "input_length";
        else if (j.size() == 1 && j.begin().value().is_number()) key = j.begin().key();
        else throw Error(file, at_line(line), "several fields: say which with \"column\"");
      }
      auto it = j.find(key);
      if (it == j.end() || it->is_null()) throw Error(file, at_line(line, key), "missing required field");
      out.push_back(int_field(*it, file, line, key.c_str(), 1));
    });
  } else {
    int col = -1;
    std::string col_name = column.empty() ? "value" : column;
    bool first = true;
    for_each_line(text, [&](std::size_t line, std::string_view s) {
      const auto cells = split_commas(s);
      double d;
      if (first) {
        first = false;
        if (!parse_double(cells[0], d)) {  // a header row
          for (std::size_t k = 0; k < cells.size(); ++k)
            if (column.empty() ? cells.size() == 1 : text::iequals(cells[k], column)) col = static_cast<int>(k);
          if (col < 0)
            throw Error(file, at_line(line),
                        column.empty() ? "several columns: say which with \"column\""
                                       : "no column named '" + column + "'");
          col_name = std::string(cells[static_cast<std::size_t>(col)]);
          return;
        }
        if (!column.empty()) throw Error(file, at_line(line), "no header row to find column '" + column + "' in");
        if (cells.size() != 1) throw Error(file, at_line(line), "several columns and no header row");
        col = 0;
      }
      if (static_cast<std::size_t>(col) >= cells.size())
        throw Error(file, at_line(line, col_name), "missing value");
      if (!parse_double(cells[static_cast<std::size_t>(col)], d) || d != std::floor(d) || d < 1 ||
          d > static_cast<double>(kMaxTokens))
        throw Error(file, at_line(line, col_name),
                    "expected an integer token count >= 1, got '" + std::string(cells[static_cast<std::size_t>(col)]).substr(0, 40) + "'");
      out.push_back(static_cast<std::int64_t>(d));
    });
  }
  if (out.empty()) throw Error(file, "", "no lengths in file");
  return out;
}

std::vector<std::int64_t> read_lengths_file(const std::string& path, const std::string& column) {
  return parse_lengths(read_text_file(path), path, column);
}

std::vector<double> parse_timestamps(std::string_view text, const std::string& file) {
  std::vector<double> out;
  const bool jsonl = looks_like_jsonl(text);
  bool first = true;
  for_each_line(text, [&](std::size_t line, std::string_view s) {
    if (jsonl) {
      const nlohmann::json j = parse_line(s, file, line);
      auto it = j.find("timestamp");
      if (it == j.end() || it->is_null()) throw Error(file, at_line(line, "timestamp"), "missing required field");
      out.push_back(time_field(*it, file, line));
      return;
    }
    const auto cell = split_commas(s)[0];
    double d;
    if (!parse_double(cell, d)) {
      if (first) { first = false; return; }  // header
      throw Error(file, at_line(line, "timestamp"), "expected a number of milliseconds, got '" + std::string(cell).substr(0, 40) + "'");
    }
    first = false;
    if (d < 0 || d > 1e15) throw Error(file, at_line(line, "timestamp"), "must be >= 0 milliseconds");
    out.push_back(d);
  });
  if (out.empty()) throw Error(file, "", "no timestamps in file");
  return out;
}

std::vector<double> read_timestamps_file(const std::string& path) { return parse_timestamps(read_text_file(path), path); }

}  // namespace servesim::workloads
