// Readers for request traces and length/timestamp files. Errors name file, line and field.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace servesim::workloads {

// One Mooncake-style JSONL line: {"timestamp": ms, "input_length": n, "output_length": n,
// "hash_ids": [..]}; hash_ids name 512-token prompt blocks (equal ids = equal content).
struct TraceEntry {
  double timestamp_ms = 0;
  std::int64_t input_length = 0;
  std::int64_t output_length = 1;
  std::vector<std::uint64_t> hash_ids;
  std::int64_t line = 0;             // line in the trace file (1-based), for messages
};

inline constexpr std::int64_t kMooncakeBlockTokens = 512;

// Parses JSONL text (blank lines skipped); `file` is used in error messages.
std::vector<TraceEntry> parse_trace(std::string_view text, const std::string& file);
std::vector<TraceEntry> read_trace_file(const std::string& path);

// Lengths for an empirical distribution: CSV (header row, `column` or the only column) or JSONL
// (`column` = field name; default input_length / the only numeric field). Each value >= 1.
std::vector<std::int64_t> parse_lengths(std::string_view text, const std::string& file, const std::string& column);
std::vector<std::int64_t> read_lengths_file(const std::string& path, const std::string& column);

// Arrival timestamps in milliseconds: one number per line (an optional header line) or JSONL with
// a "timestamp" field.
std::vector<double> parse_timestamps(std::string_view text, const std::string& file);
std::vector<double> read_timestamps_file(const std::string& path);

// Whole file as text; Error(path, "", "cannot open file") when unreadable.
std::string read_text_file(const std::string& path);

}  // namespace servesim::workloads
