#include "common/json_reader.hpp"

#include <cmath>
#include <cstdint>

#include "common/error.hpp"
#include "common/files.hpp"
#include "common/table.hpp"

namespace servesim {

namespace {

// Builds the DOM through nlohmann's SAX interface, so limits apply while parsing: nesting deeper
// than kMaxJsonDepth is refused before anything recursive (dump, copy, compare) could overflow
// the stack, and a key given twice in one object is an error instead of "last one wins".
class DomBuilder {
 public:
  using json = nlohmann::json;
  DomBuilder(std::string_view text, const std::string& file) : text_(text), file_(file) {}
  json result() { return std::move(root_); }

  bool null() { return value(nullptr); }
  bool boolean(bool v) { return value(v); }
  bool number_integer(json::number_integer_t v) { return value(v); }
  bool number_unsigned(json::number_unsigned_t v) { return value(v); }
  bool number_float(json::number_float_t v, const json::string_t&) { return value(v); }
  bool string(json::string_t& v) { return value(std::move(v)); }
  bool binary(json::binary_t& v) { return value(json::binary(std::move(v))); }
  bool start_object(std::size_t) { return open(json::object()); }
  bool start_array(std::size_t) { return open(json::array()); }
  bool end_object() { return close(); }
  bool end_array() { return close(); }
  bool key(json::string_t& k) {
    if (stack_.back()->contains(k))
      throw Error(file_, path_with(k), "key given twice in one object (keep one)");
    key_ = std::move(k);
    return true;
  }
  bool parse_error(std::size_t byte, const std::string&, const nlohmann::detail::exception& e) {
    // Locate the byte offset as line/column for a human.
    std::size_t line = 1, col = 1;
    for (std::size_t i = 0; i < byte && i < text_.size(); ++i) {
      if (text_[i] == '\n') { ++line; col = 1; } else { ++col; }
    }
    const bool range = e.id == 406;   // a number too large for a double
    throw Error(file_, "line " + std::to_string(line) + ", column " + std::to_string(col),
                range ? "invalid JSON (number out of range)" : "invalid JSON");
  }

 private:
  std::string path_with(const std::string& k) const {
    std::string p;
    for (const auto& s : keys_) if (!s.empty()) p += (p.empty() ? "" : ".") + s;
    if (k.empty()) return p;
    return p.empty() ? k : p + "." + k;
  }
  json* place(json&& v) {
    if (stack_.empty()) {
      root_ = std::move(v);
      return &root_;
    }
    json& top = *stack_.back();
    if (top.is_array()) {
      top.push_back(std::move(v));
      return &top.back();
    }
    json& slot = top[key_];
    slot = std::move(v);
    return &slot;
  }
  template <class T>
  bool value(T&& v) {
    place(json(std::forward<T>(v)));
    return true;
  }
  bool open(json&& container) {
    if (stack_.size() >= kMaxJsonDepth)
      throw Error(file_, stack_.empty() ? "" : path_with(""),
                  "JSON nested deeper than " + std::to_string(kMaxJsonDepth) + " levels");
    const std::string k = !stack_.empty() && stack_.back()->is_object() ? key_ : std::string();
    stack_.push_back(place(std::move(container)));
    keys_.push_back(k);
    return true;
  }
  bool close() {
    stack_.pop_back();
    keys_.pop_back();
    return true;
  }

  std::string_view text_;
  const std::string& file_;
  json root_;
  std::vector<json*> stack_;
  std::vector<std::string> keys_;
  std::string key_;
};

}  // namespace

nlohmann::json parse_json(std::string_view text, const std::string& file) {
  DomBuilder b(text, file);
  try {
    nlohmann::json::sax_parse(text.begin(), text.end(), &b);
  } catch (const nlohmann::json::exception& e) {
    throw Error(file, "", std::string("invalid JSON (") + e.what() + ")");
  }
  return b.result();
}

nlohmann::json read_json_file(const std::string& path) {
  return parse_json(read_input_file(path, kMaxJsonFileBytes), path);
}

std::string python_json_words(std::string_view text, PythonWords as) {
  auto space = [](char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; };
  std::string out;
  out.reserve(text.size() + 16);
  bool in_string = false;
  for (std::size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (in_string) {
      out += c;
      if (c == '\\' && i + 1 < text.size()) out += text[++i];
      else if (c == '"') in_string = false;
      continue;
    }
    if (c == '"') {
      in_string = true;
      out += c;
      continue;
    }
    bool replaced = false;
    if (i == 0 || space(text[i - 1]) || text[i - 1] == '[' || text[i - 1] == ',' || text[i - 1] == ':') {
      for (const std::string_view word : {std::string_view("-Infinity"), std::string_view("Infinity"), std::string_view("NaN")}) {
        const std::size_t e = i + word.size();
        if (text.substr(i, word.size()) == word &&
            (e == text.size() || space(text[e]) || text[e] == ',' || text[e] == ']' || text[e] == '}')) {
          if (as == PythonWords::null) out += "null";
          else out.append("\"").append(word).append("\"");
          i = e - 1;
          replaced = true;
          break;
        }
      }
    }
    if (!replaced) out += c;
  }
  return out;
}

std::string brief(const nlohmann::json& v) {
  if (v.is_array()) return "an array";
  if (v.is_object()) return "an object";
  std::string s = v.dump();
  return s.size() > 60 ? s.substr(0, 57) + "..." : s;
}

JsonReader::JsonReader(const nlohmann::json& j, std::string file, std::string path)
    : j_(&j), file_(std::move(file)), path_(std::move(path)) {
  if (!j.is_object()) throw Error(file_, path_.empty() ? "(top level)" : path_, "expected a JSON object");
}

std::string JsonReader::field(std::string_view key) const {
  return path_.empty() ? std::string(key) : path_ + "." + std::string(key);
}

void JsonReader::fail(std::string_view key, const std::string& reason) const {
  throw Error(file_, field(key), reason);
}

bool JsonReader::has(std::string_view key) const {
  auto it = j_->find(key);
  return it != j_->end() && !it->is_null();
}

const nlohmann::json& JsonReader::at(std::string_view key) const {
  auto it = j_->find(key);
  if (it == j_->end() || it->is_null()) fail(key, "missing required field");
  return *it;
}

double JsonReader::number(std::string_view key) const {
  const auto& v = at(key);
  if (!v.is_number()) fail(key, "expected a number, got " + brief(v));
  double d = v.get<double>();
  if (!std::isfinite(d)) fail(key, "expected a finite number");
  return d;
}

double JsonReader::number_or(std::string_view key, double fallback) const {
  return has(key) ? number(key) : fallback;
}

double JsonReader::number_in(std::string_view key, double fallback, double lo, double hi) const {
  const double v = number_or(key, fallback);
  if (!(v >= lo && v <= hi)) fail(key, "must be between " + compact(lo) + " and " + compact(hi));
  return v;
}

std::int64_t JsonReader::integer(std::string_view key) const {
  const auto& v = at(key);
  if (v.is_number_unsigned() && v.get<std::uint64_t>() > std::uint64_t(INT64_MAX))
    fail(key, "integer out of range (at most 9223372036854775807), got " + brief(v));
  if (v.is_number_integer()) return v.get<std::int64_t>();
  if (v.is_number_float()) {
    double d = v.get<double>();
    if (std::isfinite(d) && d == std::floor(d) && std::fabs(d) < 9e15) return static_cast<std::int64_t>(d);
  }
  fail(key, "expected an integer, got " + brief(v));
}

std::int64_t JsonReader::integer_or(std::string_view key, std::int64_t fallback) const {
  return has(key) ? integer(key) : fallback;
}

std::string JsonReader::string(std::string_view key) const {
  const auto& v = at(key);
  if (!v.is_string()) fail(key, "expected a string, got " + brief(v));
  return v.get<std::string>();
}

std::string JsonReader::string_or(std::string_view key, std::string fallback) const {
  return has(key) ? string(key) : fallback;
}

bool JsonReader::boolean_or(std::string_view key, bool fallback) const {
  if (!has(key)) return fallback;
  const auto& v = at(key);
  if (!v.is_boolean()) fail(key, "expected true or false, got " + brief(v));
  return v.get<bool>();
}

JsonReader JsonReader::object(std::string_view key) const {
  const auto& v = at(key);
  if (!v.is_object()) fail(key, "expected a JSON object");
  return JsonReader(v, file_, field(key));
}

std::vector<JsonReader> JsonReader::array(std::string_view key) const {
  const auto& v = at(key);
  if (!v.is_array()) fail(key, "expected an array");
  std::vector<JsonReader> out;
  for (size_t i = 0; i < v.size(); ++i) {
    std::string p = field(key) + "[" + std::to_string(i) + "]";
    if (!v[i].is_object()) throw Error(file_, p, "expected a JSON object");
    out.emplace_back(v[i], file_, p);
  }
  return out;
}

std::vector<double> JsonReader::numbers(std::string_view key) const {
  const auto& v = at(key);
  if (!v.is_array()) fail(key, "expected an array of numbers");
  std::vector<double> out;
  for (size_t i = 0; i < v.size(); ++i) {
    if (!v[i].is_number())
      throw Error(file_, field(key) + "[" + std::to_string(i) + "]", "expected a number");
    out.push_back(v[i].get<double>());
  }
  return out;
}

}  // namespace servesim
