// File paths in scenarios resolve relative to the scenario file's folder.
#pragma once
#include <string>

namespace servesim::workloads {

// Folder of `file` ("" when it has none, or when `file` is not a path, e.g. "<flags>").
std::string folder_of(const std::string& file);
// `path` unchanged when absolute or `base_dir` is empty, else base_dir/path.
std::string resolve_path(const std::string& base_dir, const std::string& path);

}  // namespace servesim::workloads
