// Prediction bands: how far measured serving runs fell from servesim's prediction, by kind of
// point (GPU, engine, aggregated or disaggregated, metric, load regime). `servesim validate ... --write-bands FILE` computes them from
// the residuals of a validation (ratio measured / predicted, its 10th and 90th percentiles, or wider
// percentiles where out-of-fit validation showed 10-90 holds under 75 %: BandTable::lo_pct); the
// table in sim/data/prediction_bands.json is embedded in the binary and every TTFT, ITL and output
// throughput that simulate, sweep and plan print carries its band: [predicted x lo, predicted x
// hi], i.e. the range 80 % of measured runs of that kind fell into relative to the prediction.
// Residuals that name their model are weighted so that each model x GPU counts once in a cell (its
// runs share one bias); a table built out of fit asks a cell for a minimum number of distinct
// models (BandTable::min_models), else the band comes from the coarser cell: the kind's runs of all
// loads, then the engine's runs of every GPU for that mode and metric, widened to hold the kind's own
// runs and the engine's every-GPU runs of the load regime (never narrower than any of them).
// A kind without enough measured runs has no band, and says so; a prediction of a (GPU, engine,
// mode) no measured run validated takes the widest band of any validated kind of its mode, and says so.
#pragma once
#include <cmath>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

namespace servesim::sim::validate {

// The mode of a kind of point, as the table and validate's points name it.
inline const char* band_mode(bool disaggregated) { return disaggregated ? "disagg" : "agg"; }

// Metrics a band exists for, by the names used in the table.
inline constexpr const char* kBandMetrics[] = {"ttft", "itl", "output_tps"};

struct Band {
  bool present = false;
  double lo = NAN, hi = NAN;           // the interval around a prediction (its unit)
  double ratio_lo = NAN, ratio_hi = NAN;   // measured / predicted: the table's percentiles (10th and 90th by default)
  int n = 0;                           // measured runs behind it
  int models = 0;                      // distinct models behind it (0: the table does not say)
  std::string gpu, engine, mode, metric, regime;   // mode agg | disagg; regime "all" when the load regime's own cell is too thin
  bool all_gpus = false;               // from the engine's runs of every GPU: the kind's own cells hold too few models
  std::string cell;                    // the cell in words: "h200 vllm agg, medium load, 5 models"
  std::string note;                    // why there is no band (when !present), or why it was widened
  bool widened = false;                // no measured run of this (GPU, engine, mode): the widest validated band of the mode
};

// One cell of the table.
struct BandCell {
  // gpu: a catalogue GPU, or "all" for the engine's runs of every GPU (written when min_models > 1);
  // mode: agg | disagg; regime: light, medium, heavy, saturated or all
  std::string gpu, engine = "vllm", mode, metric, regime;
  int n = 0;
  int models = 0;                      // distinct models among its residuals (0: not recorded)
  double ratio_lo = NAN, ratio_hi = NAN, ratio_median = NAN;
};

struct BandTable {
  nlohmann::json meta = nlohmann::json::object();   // provenance: source rows, filters, servesim commit
  int min_points = 8;                  // cells with fewer residuals give no band
  // A validated kind's cell with fewer distinct models gives way to the coarser cell (all loads, then
  // the engine's every GPU); 1: any cell of min_points residuals serves.
  int min_models = 1;
  // The percentiles of measured / predicted a band spans (cells' ratio_lo / ratio_hi): 10 and 90, or
  // wider where out-of-fit validation showed 10-90 holds less than 75 % of a model no fit has seen.
  double lo_pct = 10, hi_pct = 90;
  std::vector<BandCell> cells;
};

// Parses a band table (the layout --write-bands writes); throws Error naming `file` and the field.
BandTable parse_bands(const nlohmann::json& j, const std::string& file);
// The embedded table (sim/data/prediction_bands.json); an empty table when none is embedded.
const BandTable& embedded_bands();

// The band of one predicted value: the cell of (gpu, engine, mode, metric, regime) when it holds
// min_points residuals of min_models models, else that GPU, engine and mode's "all" cell under the
// same test, else the engine's cell of every GPU for that mode and metric (whatever its model count:
// the coarsest validated cell) widened to the hull of it, the kind's own "all" cell and the engine's
// every-GPU cell of the regime (that one only when it holds min_points of min_models). A validated kind is one whose "all" cell holds min_points. A (gpu, engine, mode) without
// such a cell was never validated: it takes the widest "all" band of any validated kind of the same
// mode and metric (lowest lo, highest hi), marked widened, never a narrow borrowed one; a mode
// without any validated kind gives none ("no band: no measured runs of this kind"; a disaggregated
// point never borrows the aggregated runs' band). mode: agg | disagg; engine: vllm, sglang, trtllm.
Band band_for(const BandTable& t, const std::string& gpu, const std::string& engine, const std::string& mode,
              const std::string& metric, const std::string& regime, double predicted);
inline Band band_for(const std::string& gpu, const std::string& engine, const std::string& mode, const std::string& metric,
                     const std::string& regime, double predicted) {
  return band_for(embedded_bands(), gpu, engine, mode, metric, regime, predicted);
}
// The same for a vLLM prediction.
inline Band band_for(const BandTable& t, const std::string& gpu, const std::string& mode, const std::string& metric,
                     const std::string& regime, double predicted) {
  return band_for(t, gpu, "vllm", mode, metric, regime, predicted);
}
inline Band band_for(const std::string& gpu, const std::string& mode, const std::string& metric, const std::string& regime,
                     double predicted) {
  return band_for(embedded_bands(), gpu, "vllm", mode, metric, regime, predicted);
}

// What a printed band is, in one phrase for a table's legend: "the 10th-90th percentile of measured /
// predicted over validated runs of the point's kind (GPU, engine, aggregated or disaggregated, load
// regime)", with the embedded table's percentiles.
std::string band_legend();
// {"lo", "hi", "n", "gpu", "regime", ...} or {"note": "no band: ..."}.
nlohmann::json band_json(const Band& b);
// "(band 95.1-160.2)" with `digits` decimals, or "(no band)".
std::string band_text(const Band& b, int digits);

// The q-th percentile (0..100) of values with weights (> 0): each value sits at the middle of its
// weight on the cumulative-weight axis, the first at 0 and the last at 100, and a percentile
// interpolates linearly between neighbours. Equal weights give numpy.percentile(method="linear");
// {(1, 1), (2, 1), (10, 2)}: midpoints 0.5, 1.5, 3 -> positions 0, 0.4, 1 -> the 50th is 2 + 0.1 / 0.6 x 8 = 3.33.
double weighted_percentile(std::vector<std::pair<double, double>> value_weight, double q);

// The band cells of residuals (measured, predicted) per (gpu, engine, mode, metric, regime) and per
// (gpu, engine, mode, metric, "all"), and with min_models > 1 per ("all", engine, mode, metric, regime)
// and ("all", engine, mode, metric, "all"),
// in sorted order; `min_points` and `min_models` are recorded, thin cells are kept with their n and
// models. A residual naming its model weighs 1 / (the residuals of its model x GPU in the cell), so
// each model x GPU counts once; one without a model weighs 1.
struct Residual { std::string gpu, engine, mode, metric, regime; double measured, predicted; std::string model = {}; };
BandTable make_bands(const std::vector<Residual>& residuals, int min_points, nlohmann::json meta, double lo_pct = 10,
                     double hi_pct = 90, int min_models = 1);
// The bands of one cluster's residuals (a calibration profile's cross-validated ones): each cell's
// [ratio_lo, ratio_hi] the 80 % prediction interval of the next run's ln(measured / predicted) from
// the cell's n residuals, mean +/- t(0.9, dof) x sd x sqrt(1 + 1 / n) (Student's t): the 10th and
// 90th percentiles of n residuals cover what they promise only as n grows (of normal residuals, the
// next one falls between those of 5 in 56 % of draws, of 9 in 66 %, of 17 in 72 %). With `prior`
// (the shipped table), the variance is pooled with the spread of that table's band of the same kind
// (its width as 2 x 1.2816 sd of a normal) weighing as `prior_weight` residuals, dof n - 1 +
// prior_weight: a few residuals say little of a spread, many say more. ratio_median stays the percentile.
BandTable prediction_bands(const std::vector<Residual>& residuals, int min_points, nlohmann::json meta,
                           const BandTable* prior = nullptr, double prior_weight = 0);
nlohmann::json to_json(const BandTable& t);

}  // namespace servesim::sim::validate
