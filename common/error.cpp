#include "common/error.hpp"

namespace servesim {
namespace {
std::string compose(const std::string& where, const std::string& field, const std::string& reason) {
  std::string s = where;
  if (!field.empty()) s += (s.empty() ? "" : ": ") + field;
  if (!s.empty()) s += ": ";
  s += reason;
  // what() is a C string: a NUL byte (a file name from a JSON string may hold one) would end the line
  // there, so it is written as the two characters \0.
  for (std::size_t at = s.find('\0'); at != std::string::npos; at = s.find('\0', at + 2)) s.replace(at, 1, "\\0");
  return s;
}
}  // namespace

Error::Error(std::string where, std::string field, std::string reason)
    : std::runtime_error(compose(where, field, reason)),
      where_(std::move(where)), field_(std::move(field)), reason_(std::move(reason)) {}

}  // namespace servesim
