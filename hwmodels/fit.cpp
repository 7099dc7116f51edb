#include "hwmodels/fit.hpp"

#include "common/stats.hpp"

#include <algorithm>
#include <tuple>
#include <cmath>
#include <limits>
#include <numeric>

#include <Eigen/Dense>

namespace servesim::hw {

std::string_view to_string(FitMethod m) {
  switch (m) {
    case FitMethod::least_squares: return "least-squares";
    case FitMethod::monotone_interp: return "monotone-log-interp";
    case FitMethod::nearest_log: return "nearest-log-interp";
    case FitMethod::local_linear: return "local-linear-log-interp";
    case FitMethod::local_linear_series: return "local-linear-series-log-interp";
  }
  return "?";
}

RooflineSplit split_roofline(double c, double m) {
  // p-norm with p = 3: within ~26% of max() at the ridge, equal to it far from it.
  double c3 = c * c * c, m3 = m * m * m, sum = c3 + m3;
  if (sum <= 0) return {};
  double s = std::cbrt(sum);
  return {s * c3 / sum, s * m3 / sum};
}

namespace {

double axis_of(double c, double m) { return std::log(std::max(split_roofline(c, m).total(), 1e-15)); }

// Weighted least squares on relative error with a weak ridge toward the priors (kRidge per
// pseudo-row, against one row per measured point). Coefficients must stay >= 0 and the
// efficiencies <= 1: a term that wants more is pinned at its bound and the rest refitted. The
// dispatch term (fused MoE only) has no prior: its coefficient is >= 0, free otherwise.
constexpr double kRidge = 0.05;

void least_squares(const std::vector<Sample>& s, double prior_c, double prior_m, double& a, double& ic, double& im,
                   double& id) {
  double fixed[4] = {NAN, NAN, NAN, NAN};  // pinned coefficients
  const double lower[4] = {0, 1, 1, 0};    // launch >= 0; 1/efficiency >= 1; dispatch >= 0
  bool uses_compute = false, uses_memory = false, uses_dispatch = false;
  for (const auto& x : s) uses_compute |= x.compute_s > 0, uses_memory |= x.memory_s > 0, uses_dispatch |= x.dispatch_s > 0;
  if (!uses_compute) fixed[1] = 0;
  if (!uses_memory) fixed[2] = 0;
  if (!uses_dispatch) fixed[3] = 0;
  double coef[4] = {0, 0, 0, 0};
  for (int iter = 0; iter < 5; ++iter) {
    int free_idx[4], nf = 0;
    for (int j = 0; j < 4; ++j)
      if (std::isnan(fixed[j])) free_idx[nf++] = j;
    Eigen::MatrixXd X = Eigen::MatrixXd::Zero(s.size() + 2, std::max(nf, 1));
    Eigen::VectorXd y = Eigen::VectorXd::Zero(s.size() + 2);
    for (size_t i = 0; i < s.size(); ++i) {
      RooflineSplit r = split_roofline(s[i].compute_s, s[i].memory_s);
      double w = 1 / s[i].seconds, f[4] = {1, r.compute, r.memory, s[i].dispatch_s};
      y(i) = 1;
      for (int j = 0; j < 4; ++j)
        if (!std::isnan(fixed[j])) y(i) -= fixed[j] * f[j] * w;
      for (int c = 0; c < nf; ++c) X(i, c) = f[free_idx[c]] * w;
    }
    double prior_inv[3] = {0, 1 / prior_c, 1 / prior_m};
    for (int c = 0; c < nf; ++c) {
      int j = free_idx[c];
      if (j == 0 || j == 3) continue;  // no prior on the launch latency or the dispatch term
      X(s.size() + j - 1, c) = kRidge / prior_inv[j];
      y(s.size() + j - 1) = kRidge;
    }
    Eigen::VectorXd beta = nf ? Eigen::VectorXd(X.colPivHouseholderQr().solve(y)) : Eigen::VectorXd();
    bool ok = true;
    for (int c = 0; c < nf; ++c) {
      int j = free_idx[c];
      if (!(beta(c) >= lower[j])) { fixed[j] = lower[j]; ok = false; }
    }
    for (int j = 0; j < 4; ++j) coef[j] = std::isnan(fixed[j]) ? 0 : fixed[j];
    for (int c = 0; c < nf; ++c) coef[free_idx[c]] = std::max(beta(c), lower[free_idx[c]]);
    if (ok) break;
  }
  a = coef[0], ic = coef[1], im = coef[2], id = coef[3];
}

}  // namespace

namespace {
// Pool-adjacent-violators: the closest non-decreasing sequence (more work never takes less time).
void make_monotone(std::vector<double>& v) {
  std::vector<double> val;
  std::vector<int> cnt;
  for (double x : v) {
    val.push_back(x);
    cnt.push_back(1);
    while (val.size() > 1 && val[val.size() - 2] > val.back()) {
      double merged = (val[val.size() - 2] * cnt[cnt.size() - 2] + val.back() * cnt.back()) /
                      (cnt[cnt.size() - 2] + cnt.back());
      int n = cnt[cnt.size() - 2] + cnt.back();
      val.pop_back(), cnt.pop_back();
      val.back() = merged, cnt.back() = n;
    }
  }
  size_t k = 0;
  for (size_t i = 0; i < val.size(); ++i)
    for (int j = 0; j < cnt[i]; ++j) v[k++] = val[i];
}

}  // namespace

namespace {
// A point this far (either way) from the log-linear interpolation of its two series neighbours,
// while they agree with each other to within this factor beyond their own work ratio, is a glitch:
// e.g. B200 FP8 GEMM n 4096, k 65536: 0.074 ms at m 16 and 0.079 ms at m 64, 0.388 ms at m 32.
constexpr double kSpikeFactor = 1.5;
}  // namespace

std::vector<Sample> lower_envelope(const std::vector<Sample>& samples) {
  std::vector<Sample> out = samples;
  std::vector<size_t> idx(out.size());
  std::iota(idx.begin(), idx.end(), 0);
  auto series = [&](size_t i) { return std::tuple(out[i].group, out[i].key, out[i].kernel); };
  std::sort(idx.begin(), idx.end(), [&](size_t i, size_t j) {
    if (series(i) != series(j)) return series(i) < series(j);
    const double ai = axis_of(out[i].compute_s, out[i].memory_s), aj = axis_of(out[j].compute_s, out[j].memory_s);
    return ai != aj ? ai > aj : i < j;  // largest first
  });
  for (size_t p = 1; p < idx.size(); ++p)
    if (series(idx[p]) == series(idx[p - 1]))
      out[idx[p]].seconds = std::min(out[idx[p]].seconds, out[idx[p - 1]].seconds);
  return out;
}

FamilyFit::FamilyFit(const std::vector<Sample>& measured, FitMethod method, double prior_compute, double prior_memory,
                     FitOptions options)
    : method_(method),
      robust_(options.robust_plane && (method == FitMethod::local_linear_series || method == FitMethod::local_linear)) {
  const std::vector<Sample> enveloped = options.size_envelope ? lower_envelope(measured) : std::vector<Sample>{};
  const std::vector<Sample>& samples = options.size_envelope ? enveloped : measured;
  least_squares(samples, prior_compute, prior_memory, launch_s_, inv_c_, inv_m_, inv_d_);
  for (const auto& x : samples) {
    px_.push_back(x.x);
    pkey_.push_back(x.key);
    pgroup_.push_back(x.group);
    pt_.push_back(x.seconds);
    pkernel_.push_back(x.kernel);
    plog_ratio_.push_back(std::log(x.seconds / roofline_fit(x.compute_s, x.memory_s, 1, x.dispatch_s)));
  }
  order_.resize(samples.size());
  std::iota(order_.begin(), order_.end(), 0);
  // std::sort with the index as the last key: the order std::stable_sort gives, without its
  // temporary buffer (which libstdc++ 13 frees with a call AddressSanitizer reports as mismatched).
  std::sort(order_.begin(), order_.end(), [&](int i, int j) {
    return std::tuple(pgroup_[i], pkey_[i], i) < std::tuple(pgroup_[j], pkey_[j], j);
  });
  for (size_t p = 0; p < order_.size();) {
    Box b{pgroup_[order_[p]], pkey_[order_[p]], static_cast<int>(p), 0, px_[order_[p]], px_[order_[p]]};
    for (; p < order_.size() && pgroup_[order_[p]] == b.group && pkey_[order_[p]] == b.key; ++p)
      for (int f = 0; f < kMaxFeatures; ++f)
        b.lo[f] = std::min(b.lo[f], px_[order_[p]][f]), b.hi[f] = std::max(b.hi[f], px_[order_[p]][f]);
    b.end = static_cast<int>(p);
    boxes_.push_back(b);
  }
  mark_spikes(samples);
  // Under the size envelope, a point over kSpikeFactor slower than a larger message of its series
  // is a glitch too (wherever it sits: the first size of a series has no smaller neighbour).
  if (options.size_envelope)
    for (size_t i = 0; i < measured.size(); ++i)
      if (measured[i].seconds > kSpikeFactor * samples[i].seconds) pspike_[i] = 1;
  if (method != FitMethod::monotone_interp) return;
  std::vector<size_t> idx(samples.size());
  std::iota(idx.begin(), idx.end(), 0);
  std::sort(idx.begin(), idx.end(), [&](size_t i, size_t j) {  // stable by index (see above)
    if (samples[i].key != samples[j].key) return samples[i].key < samples[j].key;
    const double ai = axis_of(samples[i].compute_s, samples[i].memory_s), aj = axis_of(samples[j].compute_s, samples[j].memory_s);
    return ai != aj ? ai < aj : i < j;
  });
  for (size_t p = 0; p < idx.size();) {
    size_t q = p;
    while (q < idx.size() && samples[idx[q]].key == samples[idx[p]].key) ++q;
    Series s{samples[idx[p]].key, static_cast<int>(log_axis_.size()), 0};
    std::vector<double> lt;
    for (size_t r = p; r < q; ++r) {
      const Sample& x = samples[idx[r]];
      double ax = axis_of(x.compute_s, x.memory_s);
      if (!log_axis_.empty() && static_cast<int>(log_axis_.size()) > s.begin && std::fabs(ax - log_axis_.back()) < 1e-12) {
        // Same work measured twice (e.g. batch 4 × 4096 and 16 × 1024 tokens): average in log space.
        lt.back() = 0.5 * (lt.back() + std::log(x.seconds));
        raw_t_.back() = std::exp(lt.back());
        continue;
      }
      log_axis_.push_back(ax);
      lt.push_back(std::log(x.seconds));
      raw_t_.push_back(x.seconds);
      compute_.push_back(x.compute_s);
      memory_.push_back(x.memory_s);
    }
    make_monotone(lt);
    log_t_.insert(log_t_.end(), lt.begin(), lt.end());
    s.end = static_cast<int>(log_axis_.size());
    series_.push_back(s);
    p = q;
  }
}

void FamilyFit::mark_spikes(const std::vector<Sample>& samples) {
  // Along every grid line through a point (the measured shapes of its series that differ from it in
  // one coordinate only), its nearest neighbours on either side; the point is a glitch when it is
  // off their interpolation (in log time over log work) on every line that brackets it.
  pspike_.assign(samples.size(), 0);
  const double lim = std::log(kSpikeFactor);
  auto axis = [&](int i) { return axis_of(samples[i].compute_s, samples[i].memory_s); };
  for (const Box& b : boxes_)
    for (int pb = b.begin; pb < b.end; ++pb) {
      const int i = order_[pb];
      bool tested = false, off = true;
      for (int f = 0; f < kMaxFeatures && off; ++f) {
        int lo = -1, hi = -1;
        for (int p = b.begin; p < b.end; ++p) {
          const int j = order_[p];
          bool line = std::fabs(px_[j][f] - px_[i][f]) > 1e-9;
          for (int g = 0; g < kMaxFeatures && line; ++g)
            if (g != f && std::fabs(px_[j][g] - px_[i][g]) > 1e-9) line = false;
          if (!line) continue;
          if (px_[j][f] < px_[i][f] && (lo < 0 || px_[j][f] > px_[lo][f])) lo = j;
          if (px_[j][f] > px_[i][f] && (hi < 0 || px_[j][f] < px_[hi][f])) hi = j;
        }
        if (lo < 0 || hi < 0) continue;
        const double xa = axis(lo), xb = axis(i), xc = axis(hi);
        if (xc - xa < 1e-12) continue;
        tested = true;
        const double la = std::log(pt_[lo]), lc = std::log(pt_[hi]);
        const double expect = la + (xb - xa) / (xc - xa) * (lc - la);
        if (!(std::fabs(std::log(pt_[i]) - expect) > lim && std::fabs(lc - la) < lim + (xc - xa))) off = false;
      }
      if (!tested && method_ == FitMethod::local_linear_series) {
        // Series fits (fused MoE): the token axis moves every other coordinate with it, so no grid
        // line brackets a point; its series neighbours in tokens (same kernel) do, compared in
        // log(measured / roofline) so their work ratio is already divided out.
        int lo = -1, hi = -1;
        for (int p = b.begin; p < b.end; ++p) {
          const int j = order_[p];
          if (pkernel_[j] != pkernel_[i]) continue;
          const double d = px_[j][0] - px_[i][0];
          if (std::fabs(d) < 1e-9) continue;
          if (d < 0 && (lo < 0 || px_[j][0] > px_[lo][0])) lo = j;
          if (d > 0 && (hi < 0 || px_[j][0] < px_[hi][0])) hi = j;
        }
        if (lo >= 0 && hi >= 0) {
          tested = true;
          const double f = (px_[i][0] - px_[lo][0]) / (px_[hi][0] - px_[lo][0]);
          const double expect = plog_ratio_[lo] + f * (plog_ratio_[hi] - plog_ratio_[lo]);
          // ... and out of order in time: slower than the larger token count or faster than the
          // smaller one by the same factor (more tokens never take less time on one kernel).
          off = std::fabs(plog_ratio_[i] - expect) > lim && std::fabs(plog_ratio_[hi] - plog_ratio_[lo]) < lim &&
                (pt_[i] > kSpikeFactor * pt_[hi] || kSpikeFactor * pt_[i] < pt_[lo]);
        }
      }
      pspike_[i] = tested && off;
    }
}

double FamilyFit::roofline_fit(double compute_s, double memory_s, double launch_scale, double dispatch_s) const {
  RooflineSplit r = split_roofline(compute_s, memory_s);
  return launch_s_ * launch_scale + r.compute * inv_c_ + r.memory * inv_m_ + dispatch_s * inv_d_;
}

namespace {
// Neighbours of the nearest-shape interpolation and the power of its inverse-distance weights:
// four shapes around a query in the (batch, length, width) grid, the closest counting most.
constexpr int kNeighbours = 4;
// local_linear: a weighted linear fit of the log ratio over this many nearest shapes.
constexpr int kLinearNeighbours = 16;
constexpr double kSame = 1e-9;  // feature distance² below which two shapes are the same shape

double distance2(const Features& a, const Features& b) {
  double d = 0;
  for (int i = 0; i < kMaxFeatures; ++i) d += (a[i] - b[i]) * (a[i] - b[i]);
  return d;
}
}  // namespace

double FamilyFit::predict(const Sample& q, bool* exact, bool surface_only, int* kernel) const {
  if (exact) *exact = false;
  if (kernel) *kernel = pkernel_.empty() ? -1 : pkernel_.front();
  double ls = roofline_fit(q.compute_s, q.memory_s, 1, q.dispatch_s), t = ls;
  if (method_ == FitMethod::nearest_log || method_ == FitMethod::local_linear || method_ == FitMethod::local_linear_series) {
    t = nearest(q, ls, exact, surface_only, kernel);
  } else {
    if (!surface_only)  // a measured shape: the measurement itself, not a fit through it
      for (size_t i = 0; i < px_.size(); ++i)
        if (pgroup_[i] == q.group && distance2(px_[i], q.x) < kSame) {
          if (exact) *exact = true;
          if (kernel) *kernel = pkernel_[i];
          return pt_[i];
        }
    if (method_ == FitMethod::monotone_interp) t = interp(q, ls, surface_only);
  }
  // No fit may beat the datasheet roofline.
  return std::max(t, std::max(q.compute_s, q.memory_s));
}

namespace {
// Squared distance from q to a box: a lower bound of distance2 to every point inside it (each
// term is no larger than the point's own, so the bound holds in floating point too).
double box_distance2(const Features& lo, const Features& hi, const Features& q) {
  double d = 0;
  for (int i = 0; i < kMaxFeatures; ++i) {
    double e = q[i] < lo[i] ? lo[i] - q[i] : q[i] > hi[i] ? q[i] - hi[i] : 0;
    d += e * e;
  }
  return d;
}
}  // namespace

double FamilyFit::nearest(const Sample& q, double ls, bool* exact, bool surface_only, int* kernel) const {
  // The query's ratio to the least-squares roofline, interpolated in log space among the nearest
  // measured shapes of its group (all points when its group was not measured), inverse-distance²
  // weighted. The neighbours are the kNeighbours smallest (distance, index) pairs and a measured
  // shape is the lowest-index point at its coordinates, whatever order the series are scanned in:
  // the query's own series first, then every other whose box could hold a closer point.
  auto first = std::lower_bound(boxes_.begin(), boxes_.end(), q.group,
                                [](const Box& b, std::uint64_t g) { return b.group < g; });
  auto last = first;
  while (last != boxes_.end() && last->group == q.group) ++last;
  if (first == last) first = boxes_.begin(), last = boxes_.end();  // group not measured: every point
  auto own = std::lower_bound(first, last, q.key, [](const Box& b, std::uint64_t k) { return b.key < k; });
  if (own != last && own->key != q.key) own = last;
  // The kernel of the nearest measured shape of the query's own series (of any series of its group
  // when its own was not measured): only points timed by that kernel stand in for the query.
  int k0 = -1;
  {
    double bd = INFINITY;
    int bi = -1;
    auto pick = [&](const Box& b) {
      if (box_distance2(b.lo, b.hi, q.x) > bd) return;
      for (int p = b.begin; p < b.end; ++p) {
        const int i = order_[p];
        if (pspike_[i]) continue;
        const double d = distance2(px_[i], q.x);
        if (surface_only && d < kSame) continue;
        if (d < bd || (d == bd && i < bi)) bd = d, bi = i;
      }
    };
    if (own != last) pick(*own);
    if (bi < 0)
      for (auto b = first; b != last; ++b) pick(*b);
    if (bi >= 0) k0 = pkernel_[bi];
  }
  const bool linear = method_ == FitMethod::local_linear || method_ == FitMethod::local_linear_series;
  const int kn = linear ? kLinearNeighbours : kNeighbours;
  double best_d[kLinearNeighbours];
  int best_i[kLinearNeighbours], nb = 0, hit = -1;
  auto scan = [&](const Box& b) {
    double lb = box_distance2(b.lo, b.hi, q.x);
    bool may_hit = !surface_only && lb < kSame;
    if (!may_hit && (hit >= 0 || (nb == kn && lb > best_d[nb - 1]))) return;
    for (int p = b.begin; p < b.end; ++p) {
      int i = order_[p];
      double d = distance2(px_[i], q.x);
      if (d < kSame) {
        if (!surface_only && (hit < 0 || i < hit)) hit = i;
        continue;  // surface_only: the point itself, left out of its own surface value
      }
      if (pspike_[i] || (k0 >= 0 && pkernel_[i] != k0)) continue;
      if (nb == kn && (d > best_d[nb - 1] || (d == best_d[nb - 1] && i > best_i[nb - 1]))) continue;
      int j = nb < kn ? nb++ : nb - 1;
      while (j > 0 && (best_d[j - 1] > d || (best_d[j - 1] == d && best_i[j - 1] > i)))
        best_d[j] = best_d[j - 1], best_i[j] = best_i[j - 1], --j;
      best_d[j] = d, best_i[j] = i;
    }
  };
  if (own != last) scan(*own);
  for (auto b = first; b != last; ++b)
    if (b != own) scan(*b);
  if (hit >= 0) {
    if (exact) *exact = true;
    if (kernel) *kernel = pkernel_[hit];
    return pt_[hit];
  }
  if (nb == 0) return ls;
  if (kernel) *kernel = k0 >= 0 ? k0 : pkernel_[best_i[0]];
  if (linear && nb > 2) {
    double r = local_linear(q, best_i, best_d, nb);
    // Fused MoE: the plane over neighbouring shapes, averaged with the query's own series
    // interpolated along tokens (its ratio to a roofline that has the knee where the touched
    // experts saturate), where the series brackets it. Either alone misses more: the plane bends
    // a series' curvature toward its neighbours', the series alone has no information between
    // token counts 4x apart beyond the roofline's shape.
    if (method_ == FitMethod::local_linear_series)
      if (const double s = series_log_ratio(q, k0); std::isfinite(s)) r = 0.5 * (r + s);
    return ls * std::exp(r);
  }
  double sw = 0, sr = 0;
  for (int j = 0; j < nb; ++j) {
    double w = 1 / best_d[j];
    sw += w, sr += w * plog_ratio_[best_i[j]];
  }
  return ls * std::exp(sr / sw);
}

double FamilyFit::local_linear(const Sample& q, const int* idx, const double* d2, int nb) const {
  // Weighted least squares of log(measured / roofline) = b0 + b·(x − q.x) over the neighbours,
  // weights 1 / (d² + 0.01), a small ridge on the slopes (0.005 of the weight: it settles
  // coordinates the neighbours barely vary; 0.05 flattened real gradients, e.g. B200 prefill
  // time against sequence length, held-out p90 20% instead of 19%); b0 is the query's value, kept within
  // the neighbours' range widened by a factor of 2 either way. A query outside the neighbours'
  // bounding box (beyond the measured shapes in some coordinate) trusts no slope: it gets the
  // neighbours' weighted median ratio, the fitted roofline at the local efficiency of the nearest
  // measured shapes (a 384k-token prefill MoE 2.9x its 16k-token neighbours' ratio otherwise); the
  // median, so that one noisy neighbour (a collective's latency floor, 6.5 us beside 17.7 us) is not
  // carried to the query (pooled held-out p90 of every collective family down by 0.5-2.5 points).
  Eigen::Matrix<double, kMaxFeatures + 1, kMaxFeatures + 1> A = Eigen::Matrix<double, kMaxFeatures + 1, kMaxFeatures + 1>::Zero();
  Eigen::Matrix<double, kMaxFeatures + 1, 1> b = Eigen::Matrix<double, kMaxFeatures + 1, 1>::Zero();
  double lo = INFINITY, hi = -INFINITY, sw = 0;
  for (int j = 0; j < nb; ++j) {
    const int i = idx[j];
    const double w = 1 / (d2[j] + 0.01), y = plog_ratio_[i];
    Eigen::Matrix<double, kMaxFeatures + 1, 1> x;
    x(0) = 1;
    for (int f = 0; f < kMaxFeatures; ++f) x(f + 1) = px_[i][f] - q.x[f];
    A += w * x * x.transpose();
    b += w * y * x;
    lo = std::min(lo, y), hi = std::max(hi, y), sw += w;
  }
  for (int f = 1; f <= kMaxFeatures; ++f) A(f, f) += 0.005 * sw;
  Eigen::Matrix<double, kMaxFeatures + 1, 1> beta = A.ldlt().solve(b);
  // Robust plane (families whose fit declares it): two Tukey-bisquare reweightings on the plane's
  // residuals, scale 2 x 1.4826 x their median absolute value (at least log 1.5), so a neighbouring
  // series several-fold off the plane no longer drags it.
  if (robust_) {
    for (int it = 0; it < 2; ++it) {
      double res[kLinearNeighbours], ar[kLinearNeighbours];
      for (int j = 0; j < nb; ++j) {
        const int i = idx[j];
        double pred = beta(0);
        for (int f = 0; f < kMaxFeatures; ++f) pred += beta(f + 1) * (px_[i][f] - q.x[f]);
        res[j] = plog_ratio_[i] - pred, ar[j] = std::fabs(res[j]);
      }
      std::nth_element(ar, ar + nb / 2, ar + nb);
      const double c = std::max(2 * 1.4826 * ar[nb / 2], std::log(1.5));
      A.setZero(), b.setZero();
      double sw2 = 0;
      for (int j = 0; j < nb; ++j) {
        const int i = idx[j];
        const double u = res[j] / c, bw = std::fabs(u) < 1 ? (1 - u * u) * (1 - u * u) : 0;
        const double w = bw / (d2[j] + 0.01), y = plog_ratio_[i];
        Eigen::Matrix<double, kMaxFeatures + 1, 1> x;
        x(0) = 1;
        for (int f = 0; f < kMaxFeatures; ++f) x(f + 1) = px_[i][f] - q.x[f];
        A += w * x * x.transpose();
        b += w * y * x;
        sw2 += w;
      }
      for (int f = 1; f <= kMaxFeatures; ++f) A(f, f) += 0.005 * sw2;
      A(0, 0) += 1e-9;
      beta = A.ldlt().solve(b);
    }
  }
  double b0 = beta(0);
  bool outside = false;
  for (int f = 0; f < kMaxFeatures; ++f) {
    double flo = INFINITY, fhi = -INFINITY;
    for (int j = 0; j < nb; ++j) flo = std::min(flo, px_[idx[j]][f]), fhi = std::max(fhi, px_[idx[j]][f]);
    outside |= q.x[f] < flo - 1e-9 || q.x[f] > fhi + 1e-9;
  }
  if (!std::isfinite(b0)) return 0.5 * (lo + hi);
  if (outside) {
    std::pair<double, double> yw[kLinearNeighbours];
    for (int j = 0; j < nb; ++j) yw[j] = {plog_ratio_[idx[j]], 1 / (d2[j] + 0.01)};
    std::sort(yw, yw + nb);
    double acc = 0;
    for (int j = 0; j < nb; ++j)
      if ((acc += yw[j].second) >= 0.5 * sw) return yw[j].first;
    return yw[nb - 1].first;
  }
  return std::clamp(b0, lo - 0.7, hi + 0.7);
}

double FamilyFit::interp(const Sample& q, double ls, bool surface_only) const {
  auto it = std::lower_bound(series_.begin(), series_.end(), q.key,
                             [](const Series& s, std::uint64_t k) { return s.key < k; });
  if (it == series_.end() || it->key != q.key) return ls;
  double ax = axis_of(q.compute_s, q.memory_s);
  const double* x = log_axis_.data() + it->begin;
  int n = it->end - it->begin;
  int hi = static_cast<int>(std::upper_bound(x, x + n, ax) - x);
  auto anchored = [&](int k) {  // beyond the measured range: the fitted roofline's slope from the end knot
    int g = it->begin + k;
    return std::exp(log_t_[g]) * ls / roofline_fit(compute_[g], memory_[g]);
  };
  if (hi == 0) return anchored(0);
  int lo = hi - 1, g = it->begin + lo;
  if (std::fabs(ax - x[lo]) < 1e-9)  // same work as measured shapes of the series (their mean)
    return surface_only ? std::exp(log_t_[g]) : raw_t_[g];
  if (hi == n) return anchored(n - 1);
  double f = (ax - x[lo]) / (x[hi] - x[lo]);
  return std::exp(log_t_[g] + f * (log_t_[g + 1] - log_t_[g]));
}

double FamilyFit::series_log_ratio(const Sample& q, int kernel) const {
  auto first = std::lower_bound(boxes_.begin(), boxes_.end(), std::pair(q.group, q.key),
                                [](const Box& b, const std::pair<std::uint64_t, std::uint64_t>& k) {
                                  return std::pair(b.group, b.key) < k;
                                });
  if (first == boxes_.end() || first->group != q.group || first->key != q.key) return NAN;
  int lo = -1, hi = -1;
  for (int p = first->begin; p < first->end; ++p) {
    const int i = order_[p];
    if (pspike_[i] || (kernel >= 0 && pkernel_[i] != kernel)) continue;
    const double d = px_[i][0] - q.x[0];
    if (std::fabs(d) < 1e-9) continue;  // the query's own token count
    if (d < 0 && (lo < 0 || px_[i][0] > px_[lo][0])) lo = i;
    if (d > 0 && (hi < 0 || px_[i][0] < px_[hi][0])) hi = i;
  }
  if (lo < 0 || hi < 0) return NAN;
  const double f = (q.x[0] - px_[lo][0]) / (px_[hi][0] - px_[lo][0]);
  return plog_ratio_[lo] + f * (plog_ratio_[hi] - plog_ratio_[lo]);
}

bool FamilyFit::has_series(std::uint64_t key) const {
  return std::find(pkey_.begin(), pkey_.end(), key) != pkey_.end();
}

bool FamilyFit::has_group(std::uint64_t group) const {
  return std::find(pgroup_.begin(), pgroup_.end(), group) != pgroup_.end();
}

double FamilyFit::outside_grid(std::uint64_t group, const Features& x, unsigned dims) const {
  Features lo, hi;
  lo.fill(std::numeric_limits<double>::infinity());
  hi.fill(-std::numeric_limits<double>::infinity());
  bool any = false;
  for (const Box& b : boxes_)
    if (b.group == group) {
      any = true;
      for (int f = 0; f < kMaxFeatures; ++f) lo[f] = std::min(lo[f], b.lo[f]), hi[f] = std::max(hi[f], b.hi[f]);
    }
  if (!any) return std::numeric_limits<double>::infinity();
  // Feature values are logs of integers read from the same tables: a tolerance of 1e-9 keeps a
  // measured value inside its own range.
  double d = 0;
  for (int f = 0; f < kMaxFeatures; ++f)
    if (const double out = std::max({0.0, lo[f] - x[f], x[f] - hi[f]}); dims >> f & 1u && out > 1e-9) d += out;
  return d;
}

bool held_out(size_t index, int offset) { return static_cast<int>(index % 5) == offset; }

CrossValidation cross_validate(const std::vector<Sample>& samples, FitMethod method, double prior_compute,
                               double prior_memory, int offset, FitOptions options) {
  CrossValidation cv;
  // Glitches are judged against every measured neighbour (the whole set), by the rule the fit
  // applies to its own points.
  const FamilyFit whole(samples, method, prior_compute, prior_memory, options);
  std::vector<double> err, err_all;
  std::vector<std::pair<double, int>> ranked;
  // One fold (`offset` 0-4), or all five pooled (offset < 0): every point predicted once by a fit
  // that did not see it.
  for (int o = offset < 0 ? 0 : offset; o <= (offset < 0 ? 4 : offset); ++o) {
    std::vector<Sample> train, test;
    for (size_t i = 0; i < samples.size(); ++i) (held_out(i, o) ? test : train).push_back(samples[i]);
    if (train.empty() || test.empty()) continue;
    FamilyFit fit(train, method, prior_compute, prior_memory, options);
    for (size_t i = 0, t = 0; i < samples.size(); ++i) {
      if (!held_out(i, o)) continue;
      const Sample& s = test[t++];
      const double e = std::fabs(fit.predict(s) - s.seconds) / s.seconds;
      err_all.push_back(e);
      if (whole.spike(i)) {
        cv.glitch_rows.push_back(int(i));
      } else {
        err.push_back(e);
        ranked.push_back({e, int(i)});
      }
    }
  }
  if (err_all.empty()) return cv;
  std::sort(ranked.rbegin(), ranked.rend());
  ranked.resize(std::min<size_t>(ranked.size(), 10));
  std::sort(err.begin(), err.end());
  std::sort(err_all.begin(), err_all.end());
  auto quantile = [](const std::vector<double>& v, double q) { return v.empty() ? 0.0 : percentile_sorted(v, 100 * q); };
  cv.held_out = static_cast<int>(err_all.size());
  cv.glitches = static_cast<int>(cv.glitch_rows.size());
  cv.median = quantile(err, 0.5);
  cv.p90 = quantile(err, 0.9);
  cv.max = err.empty() ? 0.0 : err.back();
  cv.median_all = quantile(err_all, 0.5);
  cv.p90_all = quantile(err_all, 0.9);
  cv.max_all = err_all.empty() ? 0.0 : err_all.back();
  cv.worst = std::move(ranked);
  return cv;
}

}  // namespace servesim::hw
