// Plain-text tables for the CLI's `--format table` output: left-aligned text, right-aligned numbers.
#pragma once
#include <string>
#include <vector>

namespace servesim {

class Table {
 public:
  explicit Table(std::vector<std::string> headers);
  void add_row(std::vector<std::string> cells);
  std::string render() const;

 private:
  std::vector<std::string> headers_;
  std::vector<std::vector<std::string>> rows_;
};

// Fixed-point number with `digits` decimals ("12.35").
std::string fixed(double v, int digits);
// Shortest plain number: no trailing zeros ("6", "0.25", "1024").
std::string compact(double v);
// Human-readable bytes in GiB/MiB/KiB ("1.50 GiB").
std::string human_bytes(double bytes);

}  // namespace servesim
