// Data files (GPU specs, model specs, calibration tables) compiled into the binary, so the CLI
// and the Python module run anywhere. Paths are relative to the source root.
#pragma once
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace servesim::data {

// Every embedded file as (path, contents).
std::span<const std::pair<std::string_view, std::string_view>> all_files();
// Contents of one embedded file; throws servesim::Error if absent.
std::string_view get(std::string_view path);
// Paths of embedded files that start with `prefix`, sorted.
std::vector<std::string_view> list(std::string_view prefix);

}  // namespace servesim::data
