// Distributions of prompt (ISL) and answer (OSL) lengths in tokens; every sample is >= 1.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "workloads/rng.hpp"

namespace servesim { class JsonReader; }

namespace servesim::workloads {

struct LengthDist {
  enum class Kind { fixed, normal, uniform, lognormal, empirical };
  Kind kind = Kind::fixed;
  double mean = 1;         // fixed: the value; normal/lognormal: mean of the lengths
  double stddev = 0;       // normal/lognormal: standard deviation of the lengths
  std::int64_t min = 1;    // uniform: inclusive bounds
  std::int64_t max = 1;
  std::shared_ptr<const std::vector<std::int64_t>> values;  // empirical: sampled with replacement
  std::string source;      // empirical: file it came from

  static LengthDist fixed_at(std::int64_t n);
  static LengthDist normal_of(double mean, double stddev);
  std::int64_t sample(Rng& rng) const;   // >= 1
  double expected_mean() const;          // analytic mean (empirical: sample mean), for summaries
  std::string describe() const;          // "normal(2000, 100)"
};

// At most this many lengths listed inline in an empirical distribution ({"kind": "empirical",
// "values": [...]}).
constexpr std::size_t kMaxInlineLengths = 65536;

// A number (fixed) or an object {"kind": "fixed|normal|uniform|lognormal|empirical", ...};
// empirical lengths come from a file (resolved relative to `base_dir`) or a "values" list.
LengthDist parse_length_dist(const JsonReader& j, std::string_view key, const std::string& base_dir);

}  // namespace servesim::workloads
