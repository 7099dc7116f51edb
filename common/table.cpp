#include "common/table.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>

namespace servesim {
namespace {
bool looks_numeric(const std::string& s) {
  if (s.empty()) return false;
  char c = s[0];
  return std::isdigit(static_cast<unsigned char>(c)) || ((c == '-' || c == '+' || c == '.') && s.size() > 1);
}
}  // namespace

Table::Table(std::vector<std::string> headers) : headers_(std::move(headers)) {}

void Table::add_row(std::vector<std::string> cells) {
  cells.resize(headers_.size());
  rows_.push_back(std::move(cells));
}

std::string Table::render() const {
  std::vector<size_t> width(headers_.size());
  for (size_t c = 0; c < headers_.size(); ++c) width[c] = headers_[c].size();
  for (const auto& r : rows_)
    for (size_t c = 0; c < r.size(); ++c) width[c] = std::max(width[c], r[c].size());
  auto line = [&](const std::vector<std::string>& cells, bool header) {
    std::string s;
    for (size_t c = 0; c < cells.size(); ++c) {
      std::string pad(width[c] - cells[c].size(), ' ');
      bool right = !header && looks_numeric(cells[c]);
      s += right ? pad + cells[c] : cells[c] + pad;
      if (c + 1 < cells.size()) s += "  ";
    }
    while (!s.empty() && s.back() == ' ') s.pop_back();
    return s + "\n";
  };
  std::string out = line(headers_, true);
  std::string rule;
  for (size_t c = 0; c < width.size(); ++c) rule += std::string(width[c], '-') + (c + 1 < width.size() ? "  " : "");
  out += rule + "\n";
  for (const auto& r : rows_) out += line(r, false);
  return out;
}

std::string fixed(double v, int digits) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", digits, v);
  return buf;
}

std::string compact(double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.6g", v);
  return buf;
}

std::string human_bytes(double bytes) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  int u = 0;
  double v = bytes;
  while (std::fabs(v) >= 1024.0 && u < 4) { v /= 1024.0; ++u; }
  return fixed(v, u == 0 ? 0 : 2) + " " + units[u];
}

}  // namespace servesim
