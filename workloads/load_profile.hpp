// Request rate over time, for a day of traffic: a built-in diurnal curve scaled to a peak, or a
// CSV of time -> request rate (piecewise linear between rows), and the open-loop workload that
// follows it (non-homogeneous Poisson by thinning, or evenly spaced arrivals at the rate).
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "workloads/lengths.hpp"
#include "workloads/workload.hpp"

namespace servesim::workloads {

struct LoadProfile {
  std::vector<double> t_s, rps;    // knots, t ascending from 0; linear in between, the last value after
  double duration_s = 0;
  double rate_at(double t) const;
  double peak() const;
  // Requests expected in [a, b) (the integral of the rate).
  double requests_between(double a, double b) const;
};

// A working day: the rate follows (1 - cos) from its trough at `trough_hour` to `peak_rps` twelve
// hours later, never below trough_fraction x peak; one knot every 15 minutes over `hours`.
LoadProfile diurnal_profile(double peak_rps, double trough_fraction = 0.2, double trough_hour = 4, double hours = 24);
// CSV with a header: time (seconds; or a column named time_h / hour in hours) and rate (requests/s);
// `scale_to_peak` > 0 rescales the rates so the largest is that. Errors name file, line, column.
LoadProfile parse_load_profile_csv(std::string_view text, const std::string& file, double scale_to_peak = 0);
LoadProfile read_load_profile_csv(const std::string& path, double scale_to_peak = 0);
// A constant rate, or a step from one rate to another at `step_s` (tests, what-ifs).
LoadProfile step_profile(double rps_before, double rps_after, double step_s, double duration_s);

class ProfileWorkload final : public Workload {
 public:
  // `media`: images / video on every request or its `fraction` of them (media_carried), as the
  // scenario's workload carries them.
  ProfileWorkload(LoadProfile p, LengthDist isl, LengthDist osl, std::uint64_t seed, bool poisson, MultimodalConfig media = {});
  std::optional<RequestSpec> next() override;
  int concurrency() const override { return 0; }
  std::int64_t warmup_requests() const override { return 0; }
  std::int64_t total_requests() const override { return expected_; }   // expected, not exact with Poisson

 private:
  LoadProfile p_;
  LengthDist isl_, osl_;
  Rng arrivals_, lengths_;
  bool poisson_;
  MultimodalConfig media_;
  VisionWork vision_;
  std::uint64_t seed_ = 0;
  double t_ = 0, peak_ = 0, area_ = 0;
  std::uint64_t id_ = 0;
  std::int64_t expected_ = 0;
};

}  // namespace servesim::workloads
