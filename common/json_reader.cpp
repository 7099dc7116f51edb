#include "common/json_reader.hpp"

#include <cmath>
#include <fstream>
#include <sstream>

#include "common/error.hpp"

namespace servesim {

nlohmann::json parse_json(std::string_view text, const std::string& file) {
  try {
    return nlohmann::json::parse(text.begin(), text.end());
  } catch (const nlohmann::json::parse_error& e) {
    // Locate the byte offset as line/column for a human.
    size_t line = 1, col = 1;
    for (size_t i = 0; i < e.byte && i < text.size(); ++i) {
      if (text[i] == '\n') { ++line; col = 1; } else { ++col; }
    }
    throw Error(file, "line " + std::to_string(line) + ", column " + std::to_string(col),
                "invalid JSON");
  } catch (const nlohmann::json::exception& e) {
    // e.g. out_of_range: a number too large for a double.
    throw Error(file, "", std::string("invalid JSON (") + e.what() + ")");
  }
}

nlohmann::json read_json_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error(path, "", "cannot open file");
  std::stringstream ss;
  ss << in.rdbuf();
  return parse_json(ss.str(), path);
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
  if (!v.is_number()) fail(key, "expected a number, got " + v.dump());
  double d = v.get<double>();
  if (!std::isfinite(d)) fail(key, "expected a finite number");
  return d;
}

double JsonReader::number_or(std::string_view key, double fallback) const {
  return has(key) ? number(key) : fallback;
}

std::int64_t JsonReader::integer(std::string_view key) const {
  const auto& v = at(key);
  if (v.is_number_integer()) return v.get<std::int64_t>();
  if (v.is_number_float()) {
    double d = v.get<double>();
    if (std::isfinite(d) && d == std::floor(d) && std::fabs(d) < 9e15) return static_cast<std::int64_t>(d);
  }
  fail(key, "expected an integer, got " + v.dump());
}

std::int64_t JsonReader::integer_or(std::string_view key, std::int64_t fallback) const {
  return has(key) ? integer(key) : fallback;
}

std::string JsonReader::string(std::string_view key) const {
  const auto& v = at(key);
  if (!v.is_string()) fail(key, "expected a string, got " + v.dump());
  return v.get<std::string>();
}

std::string JsonReader::string_or(std::string_view key, std::string fallback) const {
  return has(key) ? string(key) : fallback;
}

bool JsonReader::boolean_or(std::string_view key, bool fallback) const {
  if (!has(key)) return fallback;
  const auto& v = at(key);
  if (!v.is_boolean()) fail(key, "expected true or false, got " + v.dump());
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
