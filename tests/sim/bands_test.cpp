// Out-of-fit prediction bands: the model-weighted percentile and the minimum number of models a
// band cell needs (sim/validate/bands.hpp), with figures checked by hand.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <utility>
#include <vector>

#include "common/error.hpp"
#include "common/stats.hpp"
#include "sim/validate/bands.hpp"

namespace v = servesim::sim::validate;

namespace {

// n residuals of one model on one kind of point, each measured at `ratio` x the prediction (100).
void add(std::vector<v::Residual>& res, const char* gpu, const char* regime, const char* model, int n, double ratio) {
  for (int i = 0; i < n; ++i) res.push_back({gpu, "vllm", "agg", "itl", regime, 100.0 * ratio, 100.0, model});
}

}  // namespace

TEST(BandsWeightedPercentile, MidpointsOfTheWeights) {
  // Weights 1, 1, 2: midpoints 0.5, 1.5, 3 on the cumulative axis, i.e. positions 0, 0.4, 1; the
  // 50th percentile lies 0.1 / 0.6 of the way from 2 to 10: 3.333.
  EXPECT_NEAR(v::weighted_percentile({{10, 2}, {1, 1}, {2, 1}}, 50), 2 + 8.0 / 6, 1e-12);
  EXPECT_EQ(v::weighted_percentile({{10, 2}, {1, 1}, {2, 1}}, 0), 1);
  EXPECT_EQ(v::weighted_percentile({{10, 2}, {1, 1}, {2, 1}}, 100), 10);
  EXPECT_EQ(v::weighted_percentile({{7, 3}}, 10), 7);
  // Equal weights are numpy's linear percentile: {1, 1, 2, 3, 4, 5, 6, 9}, the 90th at index 6.3: 6 + 0.3 x 3 = 6.9.
  const std::vector<double> x = {3, 1, 4, 1, 5, 9, 2, 6};
  std::vector<std::pair<double, double>> w;
  for (double d : x) w.emplace_back(d, 1.0);
  std::vector<double> sorted = {1, 1, 2, 3, 4, 5, 6, 9};
  EXPECT_NEAR(v::weighted_percentile(w, 90), 6.9, 1e-12);
  for (double q : {0.0, 10.0, 37.0, 50.0, 90.0, 100.0}) EXPECT_NEAR(v::weighted_percentile(w, q), servesim::percentile_sorted(sorted, q), 1e-12) << q;
}

// Five models, each measured at one constant ratio (one bias per model): M1 at 1.0 over 100 runs,
// M2..M5 at 0.8, 0.9, 1.1, 1.2 over 8 runs each. Each model left out and its band built from the
// other four. Pooled, M1's 100 runs set both percentiles: without M3, the 124 ratios sorted put
// index 12.3 (10th) and 110.7 (90th) both on M1's 1.0 and M4's 1.1, and 0.9 falls outside; only M1
// left out (four models of 8 runs: 0.8-1.2) is held: 1 of 5. Weighted, each model counts once: the
// 10th percentile of four models lies in the lowest one's weight, the 90th in the highest's, so the
// band spans the other models' extremes and holds M1, M3 and M4, 3 of 5 (a new model falls inside
// the range of k others with probability (k - 1) / (k + 1) = 3 / 5).
TEST(BandsWeightedPercentile, EachModelCountsOnceSoALeftOutModelIsHeld) {
  const std::vector<std::pair<const char*, std::pair<int, double>>> models = {
      {"m1", {100, 1.0}}, {"m2", {8, 0.8}}, {"m3", {8, 0.9}}, {"m4", {8, 1.1}}, {"m5", {8, 1.2}}};
  int pooled_held = 0, weighted_held = 0;
  for (const auto& [out, fig] : models) {
    std::vector<v::Residual> named, anonymous;
    for (const auto& [m, f] : models)
      if (std::string(m) != out) add(named, "h200", "medium", m, f.first, f.second);
    for (auto r : named) r.model.clear(), anonymous.push_back(r);
    const double left_out = 20.0 * fig.second;   // the left-out model's measurement of a 20 ms prediction
    const v::Band p = v::band_for(v::make_bands(anonymous, 8, {}), "h200", "agg", "itl", "medium", 20.0);
    const v::Band w = v::band_for(v::make_bands(named, 8, {}, 10, 90, 4), "h200", "agg", "itl", "medium", 20.0);
    ASSERT_TRUE(p.present && w.present) << out;
    EXPECT_EQ(w.models, 4);
    EXPECT_FALSE(w.all_gpus);
    pooled_held += left_out >= p.lo && left_out <= p.hi;
    weighted_held += left_out >= w.lo && left_out <= w.hi;
    if (std::string(out) == "m3") {
      EXPECT_NEAR(p.ratio_lo, 1.0, 1e-12);
      EXPECT_NEAR(p.ratio_hi, 1.1, 1e-12);
      EXPECT_NEAR(w.ratio_lo, 0.8, 1e-12);
      EXPECT_NEAR(w.ratio_hi, 1.2, 1e-12);
      EXPECT_EQ(w.cell, "h200 vllm agg itl, medium load, 4 models");
    }
  }
  EXPECT_EQ(pooled_held, 1);
  EXPECT_EQ(weighted_held, 3);
}

// A cell of fewer than min_models models gives way to the coarser one. On the H200, models A, B, C
// ran at medium load (0.8, 0.9, 1.1) and D at light load (1.2): the medium cell's 3 models give way
// to the H200's cell of all loads, 4 models, 0.8-1.2 (the 10th of four equal models in the lowest
// one's weight, the 90th in the highest's). On the B200, A and B both measured 1.0: its own cells
// (2 models) would say 1.0-1.0; it takes vLLM's cell of every GPU, six model x GPU units 0.8, 0.9,
// 1.0, 1.0, 1.1, 1.2 of equal weight: 0.8-1.2. A GPU no run validated still widens.
TEST(BandsMinModels, AThinCellGivesWayToAllLoadsThenAllGpus) {
  std::vector<v::Residual> res;
  add(res, "h200", "medium", "a", 8, 0.8);
  add(res, "h200", "medium", "b", 8, 0.9);
  add(res, "h200", "medium", "c", 8, 1.1);
  add(res, "h200", "light", "d", 8, 1.2);
  add(res, "b200", "medium", "a", 8, 1.0);
  add(res, "b200", "medium", "b", 8, 1.0);
  const v::BandTable t = v::make_bands(res, 8, {}, 10, 90, 4);
  const v::Band h = v::band_for(t, "h200", "agg", "itl", "medium", 10.0);
  ASSERT_TRUE(h.present);
  EXPECT_EQ(h.regime, "all");
  EXPECT_FALSE(h.all_gpus);
  EXPECT_EQ(h.n, 32);
  EXPECT_NEAR(h.lo, 8.0, 1e-9);
  EXPECT_NEAR(h.hi, 12.0, 1e-9);
  EXPECT_EQ(h.cell, "h200 vllm agg itl, all loads, 4 models");
  const v::Band b = v::band_for(t, "b200", "agg", "itl", "medium", 10.0);
  ASSERT_TRUE(b.present);
  EXPECT_TRUE(b.all_gpus);
  EXPECT_FALSE(b.widened);
  EXPECT_EQ(b.n, 48);
  EXPECT_NEAR(b.lo, 8.0, 1e-9);
  EXPECT_NEAR(b.hi, 12.0, 1e-9);
  EXPECT_EQ(b.cell, "vllm agg itl, all GPUs and loads, 4 models (b200: 2 models), widened to b200's own runs");
  EXPECT_EQ(v::band_json(b).at("all_gpus"), true);
  // Without the minimum (in-fit tables), the B200's own cell serves: 1.0-1.0, and no every-GPU cells are written.
  const v::BandTable any = v::make_bands(res, 8, {});
  EXPECT_NEAR(v::band_for(any, "b200", "agg", "itl", "medium", 10.0).hi, 10.0, 1e-9);
  for (const auto& c : any.cells) EXPECT_NE(c.gpu, "all");
  // Not validated: widened to the widest validated band of the mode, never the engine's cell.
  const v::Band w = v::band_for(t, "b300", "agg", "itl", "medium", 10.0);
  ASSERT_TRUE(w.present);
  EXPECT_TRUE(w.widened);
  EXPECT_FALSE(w.all_gpus);
  // The table keeps its minimum and the cells' model counts through its JSON layout.
  const v::BandTable back = v::parse_bands(v::to_json(t), "bands.json");
  EXPECT_EQ(back.min_models, 4);
  EXPECT_EQ(v::band_for(back, "b200", "agg", "itl", "medium", 10.0).cell, b.cell);
  nlohmann::json bad = v::to_json(t);
  bad["min_models"] = 0;
  EXPECT_THROW(v::parse_bands(bad, "bad.json"), servesim::Error);
}

// The engine's every-GPU band is widened to hold the kind's own runs, never narrowed to them. Eight
// models on the H200 measured once each at 1.0; two on the B200, four runs each at 1.5 and 1.6, all
// at medium load. vLLM's every-GPU cell weighs each model x GPU once: the eight 1.0s sit at 0.5 ...
// 7.5 on the cumulative-weight axis, the B200's runs a quarter each at 8.125 ... 9.875, so its 90th
// (at 0.5 + 0.9 x 9.375 = 8.9375) lies a quarter of the way from 1.5 to 1.6: 1.525, its 10th 1.0. The
// B200's own two models span 1.5-1.6 and the medium-load cell of every GPU is the every-GPU cell
// again. A B200 prediction of 10 takes the hull, 10-16; an H200 one its own cell of eight models, 10-10.
TEST(BandsMinModels, TheEveryGpuBandIsWidenedToHoldTheKindsOwnRuns) {
  std::vector<v::Residual> res;
  for (const char* m : {"a", "b", "c", "d", "e", "f", "g", "h"}) add(res, "h200", "medium", m, 1, 1.0);
  add(res, "b200", "medium", "i", 4, 1.5);
  add(res, "b200", "medium", "j", 4, 1.6);
  const v::BandTable t = v::make_bands(res, 8, {}, 10, 90, 4);
  const v::Band every = v::band_for(t, "b300", "agg", "itl", "medium", 10.0);   // not validated: the widest kind's
  EXPECT_TRUE(every.widened);
  const v::Band b = v::band_for(t, "b200", "agg", "itl", "medium", 10.0);
  ASSERT_TRUE(b.present);
  EXPECT_TRUE(b.all_gpus);
  EXPECT_NEAR(b.lo, 10.0, 1e-9);
  EXPECT_NEAR(b.hi, 16.0, 1e-9);
  EXPECT_EQ(b.cell, "vllm agg itl, all GPUs and loads, 10 models (b200: 2 models), widened to b200's own runs and all GPUs' "
                    "medium load (10 models)");
  bool every_gpu_cell = false;
  for (const auto& c : t.cells)
    if (c.gpu == "all" && c.regime == "all") {
      every_gpu_cell = true;
      EXPECT_NEAR(c.ratio_lo, 1.0, 1e-12);
      EXPECT_NEAR(c.ratio_hi, 1.525, 1e-12);
    }
  EXPECT_TRUE(every_gpu_cell);
  const v::Band h = v::band_for(t, "h200", "agg", "itl", "medium", 10.0);
  EXPECT_FALSE(h.all_gpus);
  EXPECT_NEAR(h.lo, 10.0, 1e-9);
  EXPECT_NEAR(h.hi, 10.0, 1e-9);
}

// A calibration profile's bands: the 80 % prediction interval of the next run from n residuals of one
// cluster. Three residuals of ln(measured / predicted) -1, 0, 1 (mean 0, sd 1) give
// exp(+-t(0.9, 2) x 1 x sqrt(1 + 1/3)), t(0.9, 2) = 1.8856 (a t table's 80 % two-sided row at 2
// degrees of freedom): 0.1133 to 8.824, where the 10th-90th percentiles of the three ratios say
// e^-1 + 0.2 x (1 - e^-1) = 0.494 to 1 + 0.8 x (e - 1) = 2.375, which a next run from that spread
// falls between about half the time.
TEST(BandsPredictionInterval, WidensASmallSampleToWhatItPromises) {
  std::vector<v::Residual> res;
  for (double l : {-1.0, 0.0, 1.0}) res.push_back({"h200", "vllm", "agg", "itl", "light", 100.0 * std::exp(l), 100.0});
  const v::BandTable pct = v::make_bands(res, 3, {}), pi = v::prediction_bands(res, 3, {});
  const v::Band p = v::band_for(pct, "h200", "agg", "itl", "light", 10.0), b = v::band_for(pi, "h200", "agg", "itl", "light", 10.0);
  EXPECT_NEAR(p.lo, 10.0 * (std::exp(-1.0) + 0.2 * (1 - std::exp(-1.0))), 1e-9);
  EXPECT_NEAR(p.hi, 10.0 * (1 + 0.8 * (std::exp(1.0) - 1)), 1e-9);
  const double half = 1.885618 * std::sqrt(4.0 / 3);
  EXPECT_NEAR(b.lo, 10.0 * std::exp(-half), 1e-4);
  EXPECT_NEAR(b.hi, 10.0 * std::exp(half), 1e-3);
  EXPECT_NEAR(b.ratio_lo * b.ratio_hi, 1.0, 1e-12);   // centred on the mean of the logs
  // Equal residuals have no spread: the band is the point.
  std::vector<v::Residual> same(5, {"h200", "vllm", "agg", "itl", "light", 120.0, 100.0});
  const v::Band s = v::band_for(v::prediction_bands(same, 3, {}), "h200", "agg", "itl", "light", 10.0);
  EXPECT_NEAR(s.lo, 12.0, 1e-9);
  EXPECT_NEAR(s.hi, 12.0, 1e-9);
}

// With a prior table, the spread is pooled with the prior band's of the same kind: a band of
// exp(+-1.2816 x 0.5) is a log-sd of 0.5; three equal residuals (no spread of their own) and a prior
// weighing as 4 residuals give a variance of 4 x 0.25 / (4 + 2) = 1 / 6 at 6 degrees of freedom,
// t(0.9, 6) = 1.4398: half-width 1.4398 x sqrt(1/6 x 4/3) = 0.6787 around their mean (ln 1.2).
TEST(BandsPredictionInterval, PoolsTheSpreadWithThePriorsBand) {
  std::vector<v::Residual> prior_res;
  v::BandTable prior = v::make_bands(prior_res, 1, {});
  v::BandCell c;
  c.gpu = "h200", c.engine = "vllm", c.mode = "agg", c.metric = "itl", c.regime = "all", c.n = 100;
  c.ratio_lo = std::exp(-1.2815515655 * 0.5), c.ratio_hi = std::exp(1.2815515655 * 0.5), c.ratio_median = 1;
  prior.min_points = 1;
  prior.cells.push_back(c);
  std::vector<v::Residual> same(3, {"h200", "vllm", "agg", "itl", "light", 120.0, 100.0});
  const v::Band b = v::band_for(v::prediction_bands(same, 3, {}, &prior, 4), "h200", "agg", "itl", "light", 10.0);
  EXPECT_NEAR(b.lo, 12.0 * std::exp(-0.6787), 1e-3);
  EXPECT_NEAR(b.hi, 12.0 * std::exp(0.6787), 1e-3);
  // No prior band of the kind (disaggregated: the prior has none, and an aggregated band is never
  // borrowed for one): the residuals' own spread, here none.
  const v::Band o = v::band_for(v::prediction_bands(std::vector<v::Residual>(3, {"h200", "vllm", "disagg", "itl", "light", 120.0, 100.0}),
                                                    3, {}, &prior, 4), "h200", "disagg", "itl", "light", 10.0);
  EXPECT_NEAR(o.hi, 12.0, 1e-9);
}
