#include "workloads/lengths.hpp"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <sstream>

#include "common/error.hpp"
#include "common/json_reader.hpp"
#include "common/text.hpp"
#include "workloads/paths.hpp"
#include "workloads/trace.hpp"

namespace servesim::workloads {

LengthDist LengthDist::fixed_at(std::int64_t n) {
  LengthDist d;
  d.kind = Kind::fixed;
  d.mean = static_cast<double>(n);
  return d;
}

LengthDist LengthDist::normal_of(double mean, double stddev) {
  LengthDist d;
  d.kind = stddev > 0 ? Kind::normal : Kind::fixed;
  d.mean = mean;
  d.stddev = stddev;
  return d;
}

std::int64_t LengthDist::sample(Rng& rng) const {
  switch (kind) {
    case Kind::fixed:
      return std::max<std::int64_t>(1, std::llround(mean));
    case Kind::normal: {
      // aiperf sample_positive_normal_integer: a normal draw, redrawn until positive (rejection,
      // so the shape is not distorted), then rounded UP (math.ceil), never below 1. genai-perf
      // truncated with int() instead; the ceiling raises the mean by about half a token.
      double x;
      do x = rng.normal(mean, stddev); while (!(x > 0.0));
      return std::max<std::int64_t>(1, static_cast<std::int64_t>(std::ceil(x)));
    }
    case Kind::uniform:
      return rng.uniform_int(min, max);
    case Kind::lognormal: {
      // mean/stddev are those of the lengths: sigma^2 = ln(1 + s^2/m^2), mu = ln m - sigma^2/2.
      const double s2 = std::log1p((stddev * stddev) / (mean * mean));
      const double mu = std::log(mean) - 0.5 * s2;
      const double x = std::exp(mu + std::sqrt(s2) * rng.normal(0.0, 1.0));
      return std::max<std::int64_t>(1, std::llround(std::min(x, 9e15)));
    }
    case Kind::empirical: {
      const auto& v = *values;
      return v[static_cast<size_t>(rng.uniform_int(0, static_cast<std::int64_t>(v.size()) - 1))];
    }
  }
  return 1;
}

double LengthDist::expected_mean() const {
  switch (kind) {
    case Kind::uniform: return 0.5 * static_cast<double>(min + max);
    case Kind::empirical: {
      double s = 0;
      for (auto x : *values) s += static_cast<double>(x);
      return values->empty() ? 0 : s / static_cast<double>(values->size());
    }
    default: return mean;
  }
}

std::string LengthDist::describe() const {
  std::ostringstream o;
  switch (kind) {
    case Kind::fixed: o << std::llround(mean); break;
    case Kind::normal: o << "normal(" << mean << ", " << stddev << ")"; break;
    case Kind::uniform: o << "uniform(" << min << ", " << max << ")"; break;
    case Kind::lognormal: o << "lognormal(" << mean << ", " << stddev << ")"; break;
    case Kind::empirical:
      o << "empirical(" << (source.empty() ? std::string() : source + ", ") << values->size() << " values)";
      break;
  }
  return o.str();
}

namespace {

std::int64_t positive_length(const JsonReader& j, std::string_view key) {
  const std::int64_t n = j.integer(key);
  if (n < 1) j.fail(key, "must be >= 1 token, got " + std::to_string(n));
  if (n > (std::int64_t{1} << 30)) j.fail(key, "must be <= 2^30 tokens, got " + std::to_string(n));
  return n;
}

}  // namespace

LengthDist parse_length_dist(const JsonReader& j, std::string_view key, const std::string& base_dir) {
  const auto& v = j.json().at(std::string(key));
  if (v.is_number()) return LengthDist::fixed_at(positive_length(j, key));
  if (!v.is_object()) j.fail(key, "expected a token count or an object with \"kind\"");
  const JsonReader o = j.object(key);
  const std::string kind = text::lower(o.string("kind"));
  LengthDist d;
  if (kind == "fixed") {
    d = LengthDist::fixed_at(positive_length(o, "value"));
  } else if (kind == "normal" || kind == "lognormal") {
    d.kind = kind == "normal" ? LengthDist::Kind::normal : LengthDist::Kind::lognormal;
    d.mean = o.number("mean");
    d.stddev = o.number_or("stddev", 0);
    if (d.mean < 1 || d.mean > 1e9) o.fail("mean", "must be between 1 and 1e9 tokens");
    if (d.stddev < 0 || d.stddev > 1e9) o.fail("stddev", "must be between 0 and 1e9 tokens");
    if (d.kind == LengthDist::Kind::normal && d.stddev == 0) d.kind = LengthDist::Kind::fixed;
  } else if (kind == "uniform") {
    d.kind = LengthDist::Kind::uniform;
    d.min = positive_length(o, "min");
    d.max = positive_length(o, "max");
    if (d.max < d.min) o.fail("max", "must be >= min (" + std::to_string(d.min) + ")");
    d.mean = 0.5 * static_cast<double>(d.min + d.max);
  } else if (kind == "empirical") {
    d.kind = LengthDist::Kind::empirical;
    // The lengths from a file, or listed inline (what a measured run's requests had).
    if (o.has("values") == o.has("file")) o.fail("kind", "empirical lengths take either \"file\" or \"values\" (a list of token counts)");
    if (o.has("file")) {
      d.source = resolve_path(base_dir, o.string("file"));
      d.values = std::make_shared<const std::vector<std::int64_t>>(read_lengths_file(d.source, o.string_or("column", "")));
    } else {
      const auto& list = o.json().at("values");
      if (!list.is_array() || list.empty() || list.size() > kMaxInlineLengths)
        o.fail("values", "expected a list of 1 to " + std::to_string(kMaxInlineLengths) + " token counts");
      std::vector<std::int64_t> v;
      v.reserve(list.size());
      for (std::size_t i = 0; i < list.size(); ++i) {
        const auto& x = list[i];
        if (!(x.is_number_integer() || (x.is_number_float() && x.get<double>() == std::floor(x.get<double>()))) ||
            !(x.get<double>() >= 1 && x.get<double>() <= double(std::int64_t{1} << 30)))
          o.fail("values", "entry " + std::to_string(i) + " is not a token count (a whole number in 1..2^30)");
        v.push_back(static_cast<std::int64_t>(x.get<double>()));
      }
      d.values = std::make_shared<const std::vector<std::int64_t>>(std::move(v));
    }
    d.mean = d.expected_mean();
  } else {
    o.fail("kind", "unknown length distribution '" + kind +
                       "'; known: fixed, normal, uniform, lognormal, empirical");
  }
  return d;
}

}  // namespace servesim::workloads
