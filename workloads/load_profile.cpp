#include "workloads/load_profile.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <numbers>

#include "common/csv.hpp"
#include "common/error.hpp"
#include "common/splitmix.hpp"
#include "common/text.hpp"
#include "workloads/trace.hpp"

namespace servesim::workloads {

double LoadProfile::rate_at(double t) const {
  if (t_s.empty() || t < 0 || t >= duration_s) return 0;
  auto it = std::upper_bound(t_s.begin(), t_s.end(), t);
  if (it == t_s.end()) return rps.back();
  const std::size_t i = static_cast<std::size_t>(it - t_s.begin());
  if (i == 0) return rps.front();
  const double f = (t - t_s[i - 1]) / (t_s[i] - t_s[i - 1]);
  return rps[i - 1] + f * (rps[i] - rps[i - 1]);
}

double LoadProfile::peak() const { return rps.empty() ? 0 : *std::max_element(rps.begin(), rps.end()); }

double LoadProfile::requests_between(double a, double b) const {
  // Trapezoids between the knots (exact for the piecewise-linear rate), in 1 s pieces at most.
  double sum = 0;
  a = std::max(a, 0.0);
  b = std::min(b, duration_s);
  for (double t = a; t < b;) {
    auto it = std::upper_bound(t_s.begin(), t_s.end(), t);
    const double next = std::min(b, it == t_s.end() ? b : *it);
    sum += 0.5 * (rate_at(t) + rate_at(std::nextafter(next, t))) * (next - t);
    t = next;
  }
  return sum;
}

LoadProfile diurnal_profile(double peak_rps, double trough_fraction, double trough_hour, double hours) {
  if (!(peak_rps > 0 && peak_rps < 1e7)) {
    char got[32];
    std::snprintf(got, sizeof got, "%g", peak_rps);
    throw Error("--peak-rps", "", std::string("must be a request rate above 0 and below 10^7 requests/s, got ") + got);
  }
  if (!(trough_fraction >= 0 && trough_fraction <= 1)) throw Error("--trough-fraction", "", "must be 0..1");
  if (!(hours > 0 && hours <= 24 * 366)) throw Error("--hours", "", "must be > 0 and at most a year");
  LoadProfile p;
  p.duration_s = hours * 3600;
  for (double t = 0; t <= p.duration_s + 1e-9; t += 900) {
    const double phase = 2 * std::numbers::pi * (t / 3600 - trough_hour) / 24;
    p.t_s.push_back(t);
    p.rps.push_back(peak_rps * (trough_fraction + (1 - trough_fraction) * 0.5 * (1 - std::cos(phase))));
  }
  return p;
}

LoadProfile step_profile(double rps_before, double rps_after, double step_s, double duration_s) {
  LoadProfile p;
  p.duration_s = duration_s;
  p.t_s = {0, step_s, step_s};
  p.rps = {rps_before, rps_before, rps_after};
  // A jump: two knots at the step (upper_bound takes the later one from step_s on).
  p.t_s[1] = std::nextafter(step_s, 0.0);
  return p;
}

LoadProfile parse_load_profile_csv(std::string_view text, const std::string& file, double scale_to_peak) {
  LoadProfile p;
  std::vector<std::string> header, cells;
  int tcol = -1, rcol = -1;
  double unit = 1;
  int line = 0;
  // RFC 4180 records (quotes, CRLF or CR lines, a UTF-8 byte-order mark), as validate reads CSV.
  text::CsvRecords records(std::string(text), file);
  while (records.next(cells, line)) {
    for (auto& c : cells) {   // blanks around a cell are not part of it
      const std::size_t a = c.find_first_not_of(" \t"), b = c.find_last_not_of(" \t");
      c = a == std::string::npos ? std::string() : c.substr(a, b - a + 1);
    }
    if (header.empty()) {
      header = cells;
      for (std::size_t i = 0; i < cells.size(); ++i) {
        const std::string c = text::lower(cells[i]);
        int* col = c == "time_s" || c == "time" || c == "t" || c == "time_h" || c == "hour" || c == "hours" ? &tcol
                   : c == "rate" || c == "rps" || c == "request_rate"                                      ? &rcol
                                                                                                           : nullptr;
        if (!col) continue;
        if (*col >= 0)   // which of two columns holds the figure would be a guess
          throw Error(file, "line " + std::to_string(line), std::string(col == &tcol ? "time" : "rate") + " column given twice ('" +
                                                                header[std::size_t(*col)] + "' in column " + std::to_string(*col + 1) +
                                                                " and '" + cells[i] + "' in column " + std::to_string(i + 1) + "); keep one");
        *col = static_cast<int>(i);
        if (col == &tcol) unit = c == "time_h" || c == "hour" || c == "hours" ? 3600 : 1;
      }
      if (tcol < 0 || rcol < 0)
        throw Error(file, "line " + std::to_string(line),
                    "the header needs a time column (time_s or time_h) and a rate column (rps or request_rate)");
      continue;
    }
    // Plain decimal numbers (no hexadecimal, inf or nan), within a year and below 10^7 requests/s
    // (the bounds of --hours and --peak-rps).
    auto num = [&](int col, const char* what, double most, const char* range) {
      if (col >= static_cast<int>(cells.size())) throw Error(file, "line " + std::to_string(line), std::string("missing ") + what);
      char* end = nullptr;
      const std::string& c = cells[static_cast<std::size_t>(col)];
      if (c.empty())
        throw Error(file, "line " + std::to_string(line) + ", " + header[static_cast<std::size_t>(col)],
                    std::string("the ") + what + " cell is empty; give a number >= 0");
      const double v = text::decimal(c) ? std::strtod(c.c_str(), &end) : NAN;
      if (!end || *end || !std::isfinite(v) || v < 0 || v > most)
        throw Error(file, "line " + std::to_string(line) + ", " + header[static_cast<std::size_t>(col)],
                    std::string("expected a decimal number from 0 to ") + range + ", got '" + c + "'");
      return v;
    };
    const double t = num(tcol, "time", 366 * 24 * 3600 / unit, unit == 1 ? "31622400 (a year in seconds)" : "8784 (a year in hours)") * unit;
    const double r = num(rcol, "rate", 1e7, "10^7 requests/s");
    if (!p.t_s.empty() && t <= p.t_s.back())
      throw Error(file, "line " + std::to_string(line) + ", " + header[static_cast<std::size_t>(tcol)], "times must increase");
    p.t_s.push_back(t);
    p.rps.push_back(r);
  }
  if (p.t_s.size() < 2) throw Error(file, "", "needs at least two rows of time and rate");
  const double t0 = p.t_s.front();
  for (double& t : p.t_s) t -= t0;
  p.duration_s = p.t_s.back();
  if (scale_to_peak > 0) {
    const double peak = p.peak();
    if (!(peak > 0)) throw Error(file, "", "every rate is 0: nothing to scale to --peak-rps");
    for (double& r : p.rps) r *= scale_to_peak / peak;
  }
  return p;
}

LoadProfile read_load_profile_csv(const std::string& path, double scale_to_peak) {
  return parse_load_profile_csv(read_text_file(path), path, scale_to_peak);
}

ProfileWorkload::ProfileWorkload(LoadProfile p, LengthDist isl, LengthDist osl, std::uint64_t seed, bool poisson,
                                 MultimodalConfig media)
    : p_(std::move(p)), isl_(std::move(isl)), osl_(std::move(osl)), arrivals_(splitmix64(seed ^ 0x61727276ULL)),
      lengths_(splitmix64(seed ^ 0x6c656e67ULL)), poisson_(poisson), media_(std::move(media)), vision_(vision_work(media_)),
      seed_(seed), peak_(p_.peak()) {
  expected_ = static_cast<std::int64_t>(std::llround(p_.requests_between(0, p_.duration_s)));
}

// Poisson: thinning at the peak rate (Lewis-Shedler). Evenly spaced: the k-th request when the
// integral of the rate reaches k - 1/2, so a constant rate r gives gaps of exactly 1/r.
std::optional<RequestSpec> ProfileWorkload::next() {
  if (!(peak_ > 0)) return std::nullopt;
  if (poisson_) {
    for (;;) {
      t_ += arrivals_.exponential(peak_);
      if (t_ >= p_.duration_s) return std::nullopt;
      if (arrivals_.uniform() * peak_ < p_.rate_at(t_)) break;
    }
  } else {
    const double target = double(id_) + 0.5;
    // Step through the profile in pieces of at most 1 s until the area reaches the target.
    for (;;) {
      if (t_ >= p_.duration_s) return std::nullopt;
      const double r = p_.rate_at(t_);
      const double step = std::min(1.0, p_.duration_s - t_);
      const double piece = p_.requests_between(t_, t_ + step);
      if (area_ + piece >= target) {
        t_ += r > 0 ? std::min(step, (target - area_) / r) : step;   // linear within the piece
        area_ = target;
        break;
      }
      area_ += piece;
      t_ += step;
    }
  }
  RequestSpec s;
  s.id = id_++;
  s.arrival_s = t_;
  s.input_tokens = isl_.sample(lengths_);
  s.output_tokens = osl_.sample(lengths_);
  if (media_carried(media_, seed_, static_cast<std::int64_t>(s.id))) {
    s.vision_tokens = vision_.tokens;
    s.vision_tiles = vision_.tiles;
    s.input_tokens += vision_.tokens;
  }
  return s;
}

}  // namespace servesim::workloads
