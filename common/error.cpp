#include "common/error.hpp"

namespace servesim {
namespace {
std::string compose(const std::string& where, const std::string& field, const std::string& reason) {
  std::string s = where;
  if (!field.empty()) s += (s.empty() ? "" : ": ") + field;
  if (!s.empty()) s += ": ";
  return s + reason;
}
}  // namespace

Error::Error(std::string where, std::string field, std::string reason)
    : std::runtime_error(compose(where, field, reason)),
      where_(std::move(where)), field_(std::move(field)), reason_(std::move(reason)) {}

}  // namespace servesim
