// One op family's efficiency surface: a least-squares roofline (launch + compute/eff_c +
// memory/eff_m), a monotone log-space interpolation along each measured shape series, or a
// log-space interpolation of measured / roofline among the nearest measured shapes.
#pragma once
#include <array>
#include <cstdint>
#include <string>
#include <vector>

namespace servesim::hw {

// Shape coordinates of a point in log space (log of batch, tokens, ...; unused entries 0), the
// space in which nearby measured shapes are found.
constexpr int kMaxFeatures = 8;
using Features = std::array<double, kMaxFeatures>;

// A measured point reduced to its roofline terms on the measured GPU's datasheet peaks.
struct Sample {
  std::uint64_t key = 0;      // hash of the shape fields that stay fixed along a series
  std::uint64_t group = 0;    // points of different groups (e.g. elementwise op kinds) never stand in for each other
  Features x{};               // log-space shape coordinates
  double compute_s = 0;       // FLOPs / peak FLOP/s
  double memory_s = 0;        // bytes / peak bytes/s
  double dispatch_s = 0;      // fused MoE: every token-slot's activations / peak bytes/s (moe_dispatch_bytes); 0 elsewhere
  double seconds = 0;         // measured GPU time (CUDA-graph replay)
  double eager_seconds = -1;  // measured eager time; < 0 when absent
  int kernel = -1;            // index of the kernel that ran it in its family's kernel list; -1 unknown
};

// Soft maximum of the two roofline terms, split back into its compute and memory parts so a
// linear fit can give each its own efficiency without double-counting where both matter.
struct RooflineSplit {
  double compute = 0, memory = 0;
  double total() const { return compute + memory; }
};
RooflineSplit split_roofline(double compute_s, double memory_s);

// local_linear: like nearest_log, but a weighted linear fit over 16 neighbours instead of their
// inverse-distance mean (follows gradients across a coarse grid). Both interpolations only use
// neighbours timed by the kernel that ran the query's nearest measured shape of its own series
// (vLLM switches kernels on discrete shape properties, e.g. Triton attention for head_dim 192 on
// Blackwell, 10-30x slower than TRTLLM-gen at head_dim 256: never interpolated across).
// local_linear_series (fused MoE): local_linear, averaged in log space with the interpolation of
// the log ratio along the query's own measured series (feature 0: log tokens) between the nearest
// measured token counts on either side, where it has both.
enum class FitMethod { least_squares, monotone_interp, nearest_log, local_linear, local_linear_series };
std::string_view to_string(FitMethod m);

// Per-family options of a fit.
struct FitOptions {
  // local_linear / local_linear_series: the local plane down-weights neighbours far off it (Tukey
  // bisquare), for kernel families where whole shape series run several-fold apart from the rest.
  bool robust_plane = false;
  // NCCL collectives: each series is fitted on its lower envelope along the message size (a point's time
  // is at most that of any larger message of its series, same GPUs and kernel). Moving more bytes
  // among the same GPUs never takes less time, and timing noise only ever adds (a straggler, a
  // clock ramp): H100 NCCL all-to-all on 8 GPUs measures 16.6, 15.8 and 17.0 us at 2, 16 and 32 KiB
  // between 7.5 us at 4-8 KiB and 8.7 us at 64 KiB.
  bool size_envelope = false;
};

// Each series' lower envelope along its work axis (FitOptions::size_envelope): a point's time
// becomes the least of its own and every larger one's of the same group, key and kernel.
std::vector<Sample> lower_envelope(const std::vector<Sample>& samples);

class FamilyFit {
 public:
  FamilyFit() = default;
  // Fits on `samples` (at least one, all with seconds > 0). `prior_compute` / `prior_memory` are the
  // expected achieved fractions of peak: a weak pull toward them settles terms the data cannot
  // tell apart (e.g. a state update whose FLOPs and bytes grow together).
  // `options`: see FitOptions (a size envelope also replaces the stored measurements a measured
  // shape returns).
  FamilyFit(const std::vector<Sample>& samples, FitMethod method, double prior_compute = 0.7,
            double prior_memory = 0.7, FitOptions options = {});

  // Least-squares roofline: launch_s·launch_scale + compute/eff_c + memory/eff_m + dispatch·dispatch_s
  // (the last only where samples carry a dispatch term: fused MoE).
  double roofline_fit(double compute_s, double memory_s, double launch_scale = 1, double dispatch_s = 0) const;
  // The family's prediction for the shape `q` (key, group, x, compute_s, memory_s; seconds unused):
  // a measured shape returns its measurement and sets `exact`. Never below the peak roofline.
  // `surface_only` skips that lookup (nearest_log then leaves the point itself out): the surface's
  // own value at a measured shape, which the reproduction bound is reported on.
  // `kernel`, when given, receives the kernel index of the measured point nearest the query (-1 none).
  double predict(const Sample& q, bool* exact = nullptr, bool surface_only = false, int* kernel = nullptr) const;

  // True when measured points of this shape series were fitted.
  bool has_series(std::uint64_t key) const;
  // True when measured points of this group (any series) were fitted.
  bool has_group(std::uint64_t group) const;
  // How far `x` lies outside the measured grid of `group` along the shape coordinates `dims` (bit f
  // = feature f): the sum over those coordinates of the distance, in log units, from x[f] to the
  // range [least, greatest] of x[f] over every fitted point of the group. 0: the grid covers the
  // shape (no extrapolation in any of those coordinates); infinity: the group was not measured.
  double outside_grid(std::uint64_t group, const Features& x, unsigned dims) const;
  // local_linear_series: log(measured / roofline) of the query's series interpolated linearly in
  // feature 0 between its nearest fitted points on either side (timed by `kernel` when >= 0; glitches
  // and the query's own shape skipped); NaN when the series does not bracket the query.
  double series_log_ratio(const Sample& q, int kernel = -1) const;
  // True when fitted point `i` (in the order given to the constructor) is an isolated glitch of its
  // series: returned at its own shape, never used for another one (see pspike_).
  bool spike(size_t i) const { return i < pspike_.size() && pspike_[i]; }

  FitMethod method() const { return method_; }
  double launch_s() const { return launch_s_; }
  double dispatch_factor() const { return inv_d_; }  // time per second of dispatch_s (0: no such term)
  double compute_efficiency() const { return inv_c_ > 0 ? 1 / inv_c_ : 0; }  // 0: no compute term
  double memory_efficiency() const { return inv_m_ > 0 ? 1 / inv_m_ : 0; }

 private:
  struct Series { std::uint64_t key; int begin, end; };
  FitMethod method_ = FitMethod::least_squares;
  bool robust_ = false;  // local_linear_series with the robust plane
  double launch_s_ = 0, inv_c_ = 0, inv_m_ = 0, inv_d_ = 0;
  std::vector<Series> series_;                  // sorted by key
  std::vector<double> log_axis_, log_t_, raw_t_, compute_, memory_;  // knots, per series ascending in axis
  // Every fitted point, for exact hits and the nearest-shape interpolation.
  std::vector<Features> px_;
  std::vector<std::uint64_t> pkey_, pgroup_;
  std::vector<double> pt_, plog_ratio_;  // measured seconds; log(measured / least-squares roofline)
  std::vector<int> pkernel_;             // kernel index per point
  // Isolated glitches: points off both neighbours of their shape series (the measured shapes on
  // either side along the series' work axis, which agree with each other) by more than
  // kSpikeFactor. They are still returned at their own shape, but never stand in for another one.
  std::vector<char> pspike_;
  // Index of the nearest-shape search, built once: points ordered by (group, key); per series its
  // bounding box in feature space, so a query scans its own series first and skips every series
  // whose box is farther than the neighbours already found.
  struct Box { std::uint64_t group, key; int begin, end; Features lo, hi; };
  std::vector<Box> boxes_;       // sorted by (group, key)
  std::vector<int> order_;       // point indices, grouped by box
  double interp(const Sample& q, double ls, bool surface_only) const;
  double local_linear(const Sample& q, const int* idx, const double* d2, int nb) const;
  double nearest(const Sample& q, double ls, bool* exact, bool surface_only, int* kernel) const;
  void mark_spikes(const std::vector<Sample>& samples);
};

// Held-out errors |pred − meas| / meas of `method` fitted on 80% of `samples`: every fifth point in
// file order, starting at `offset` (0-4), is held out (deterministic and spread over each series);
// `offset` kAllFolds pools the five folds, so every point is predicted once by a fit that did not
// see it.
// Held-out rows that are isolated glitches of the whole measured set (FamilyFit::spike on every
// point: several-fold off both neighbours of their series while those agree) are measurement
// faults, not shapes a model should reproduce: they are counted and listed, and left out of
// median / p90 / max, which `*_all` keep them in.
struct CrossValidation {
  int held_out = 0;
  int glitches = 0;  // held-out rows that are glitches of the whole set
  double median = 0, p90 = 0, max = 0;
  double median_all = 0, p90_all = 0, max_all = 0;
  std::vector<std::pair<double, int>> worst;  // (error, sample index) of the worst held-out points, worst first
  std::vector<int> glitch_rows;               // sample indices of the held-out glitches
};
// The held-out points are compared with their own measurements (never with an envelope).
CrossValidation cross_validate(const std::vector<Sample>& samples, FitMethod method, double prior_compute = 0.7,
                               double prior_memory = 0.7, int offset = 4, FitOptions options = {});
bool held_out(size_t index, int offset = 4);
inline constexpr int kAllFolds = -1;

}  // namespace servesim::hw
