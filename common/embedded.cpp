#include "common/embedded.hpp"

#include <algorithm>

#include "common/error.hpp"

namespace servesim::data {

std::string_view get(std::string_view path) {
  for (const auto& [p, contents] : all_files())
    if (p == path) return contents;
  throw Error(std::string(path), "", "no such embedded data file");
}

std::vector<std::string_view> list(std::string_view prefix) {
  std::vector<std::string_view> out;
  for (const auto& [p, contents] : all_files())
    if (p.substr(0, prefix.size()) == prefix) out.push_back(p);
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace servesim::data
