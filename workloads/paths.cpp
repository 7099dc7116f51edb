#include "workloads/paths.hpp"

#include <filesystem>

namespace servesim::workloads {

std::string folder_of(const std::string& file) {
  if (file.empty() || file.front() == '<' || file.front() == '-') return "";
  return std::filesystem::path(file).parent_path().string();
}

std::string resolve_path(const std::string& base_dir, const std::string& path) {
  const std::filesystem::path p(path);
  if (p.is_absolute() || base_dir.empty()) return path;
  return (std::filesystem::path(base_dir) / p).string();
}

}  // namespace servesim::workloads
