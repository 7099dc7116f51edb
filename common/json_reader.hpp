// Validated access to JSON input: every failure names the file, the field path and the reason,
// so a malformed spec, scenario or config.json gives one clear line instead of a crash.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

namespace servesim {

// Deepest nesting of arrays and objects any JSON input may have (servesim's own files use < 10).
inline constexpr std::size_t kMaxJsonDepth = 64;

// Parses `text`; a syntax error becomes servesim::Error(file, "line L, column C", reason). Nesting
// deeper than kMaxJsonDepth and a key repeated within one object are errors too (checked while
// parsing, so nothing recursive ever sees a deep document).
nlohmann::json parse_json(std::string_view text, const std::string& file);
// Reads and parses a file from disk: a regular file of at most kMaxJsonFileBytes (common/files.hpp).
nlohmann::json read_json_file(const std::string& path);
// JSON as Python's json module writes it by default: NaN, Infinity and -Infinity appear as bare
// words (a Hugging Face config.json's unset limits; SGLang's bench_serving writes its default
// request rate, inf, as Infinity). Returns the text with each such word outside a string, standing
// as a value, written as `null` (PythonWords::null) or as the word quoted ("NaN", "Infinity",
// "-Infinity": PythonWords::quoted, so that the reader of a field decides what it means there).
// One linear pass (a regex backtracks on long inputs and recurses per character).
enum class PythonWords { null, quoted };
std::string python_json_words(std::string_view text, PythonWords as);
// A JSON value for an error message: scalars as JSON (cut at 60 characters), containers as
// "an array" / "an object" (never a recursive dump of user input).
std::string brief(const nlohmann::json& v);

class JsonReader {
 public:
  JsonReader(const nlohmann::json& j, std::string file, std::string path = "");

  bool has(std::string_view key) const;
  double number(std::string_view key) const;
  double number_or(std::string_view key, double fallback) const;
  // number_or, failing with "must be between lo and hi" outside [lo, hi].
  double number_in(std::string_view key, double fallback, double lo, double hi) const;
  std::int64_t integer(std::string_view key) const;
  std::int64_t integer_or(std::string_view key, std::int64_t fallback) const;
  std::string string(std::string_view key) const;
  std::string string_or(std::string_view key, std::string fallback) const;
  bool boolean_or(std::string_view key, bool fallback) const;
  JsonReader object(std::string_view key) const;
  std::vector<JsonReader> array(std::string_view key) const;
  std::vector<double> numbers(std::string_view key) const;

  const nlohmann::json& json() const { return *j_; }
  const std::string& file() const { return file_; }
  std::string field(std::string_view key) const;  // "path.key"
  [[noreturn]] void fail(std::string_view key, const std::string& reason) const;

 private:
  const nlohmann::json& at(std::string_view key) const;
  const nlohmann::json* j_;
  std::string file_, path_;
};

}  // namespace servesim
