// Transfer error: how well servesim predicts a model (or an engine release) its fit has not seen.
// The engine-level parameters servesim fits on measured serving runs (the engine core's host time per
// scheduled request, the closed-loop answer-length spread) are refitted on every group but one and
// the left-out group is predicted with that refit: leave one model out, or one release out. Every
// candidate value of the fitted parameters is simulated once over all points; a fold then only
// picks, per engine, the candidate with the least error on its training points. The out-of-fit
// residuals build prediction bands that are honest for a model or release no fit has seen.
#pragma once
#include <map>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "sim/validate/validate.hpp"

namespace servesim::sim::validate {

// One fitted engine-level parameter: where it sits in a scenario and the values the fit may take.
struct FitParameter {
  std::string name;                  // "step_overhead_us_per_seq"
  std::vector<std::string> path;     // its place in the scenario: {"engine", "step_overhead_us_per_seq"}
  std::vector<double> grid;          // candidate values (the engine profiles' fitted value among them)
  std::string what;
};
// The parameters servesim fits on measured runs, with their grids.
const std::vector<FitParameter>& fitted_parameters();

// What a fold is: one model (the resolved catalogue model) or one engine release ("vllm 0.19").
enum class GroupBy { model, release };
GroupBy parse_group_by(const std::string& s, const std::string& where);
const char* to_string(GroupBy g);
// A point's group under `g`.
std::string group_of(const PointResult& p, GroupBy g);

// The error of one set of points: median |error| and p90 |error| of TTFT and TPOT, and how many.
struct FoldErrors {
  ErrorStats ttft, tpot;
};

struct GroupTransfer {
  std::string engine, group;
  int points = 0;                    // simulated, consistent points of the group
  FoldErrors in_fit, out_of_fit;     // with the fit on every group / on every other group of its engine
  std::vector<double> in_values, out_values;   // the fitted parameters' values (fitted_parameters() order)
  // Share of the group's out-of-fit (point, metric) pairs inside the band built from the other
  // groups' out-of-fit residuals: the coverage of a band for a group no fit has seen.
  int band_checks = 0, band_hits = 0;
};

struct TransferReport {
  GroupBy by = GroupBy::model;
  std::vector<std::vector<double>> candidates;  // every grid combination simulated
  std::vector<GroupTransfer> groups;            // by engine, then group name
  // Every point predicted out of fit (its group's fold), for the bands and --output; points of an
  // engine with a single group keep their in-fit prediction (there is no other group to fit on).
  Report out_of_fit;
  // Per engine x GPU x mode: in-fit and out-of-fit errors over all groups, and the band coverage of
  // its points (each against the bands of the other groups' residuals).
  struct Summary { std::string engine, gpu, mode; FoldErrors in_fit, out_of_fit; int band_checks = 0, band_hits = 0; };
  std::vector<Summary> summary;
  // The band's percentiles: 10-90, unless its bands, built from the other groups' out-of-fit
  // residuals, hold under kBandCoverageFloor of the left-out groups' predictions overall; then the
  // narrowest wider symmetric pair (9-91, ... 2-98) that does (the figures below are at that pair),
  // and the coverage 10-90 had.
  double band_lo_pct = 10, band_hi_pct = 90;
  int band_checks = 0, band_hits = 0, band_hits_10_90 = 0;
};

// Out-of-fit band tables count models: a cell of a validated kind gives its band from at least this
// many distinct models, else the kind's cell of all loads, else the engine's cell of every GPU
// (bands.hpp). Below it a cell's percentiles measure the spread within its few models, not the
// spread between models that a model no fit has seen meets.
inline constexpr int kBandMinModels = 4;
// The least coverage of a left-out group's predictions the 10-90 pair must reach before the table
// takes wider percentiles (the lower edge of the 75-85 % a 10-90 band of a new model should hold).
inline constexpr double kBandCoverageFloor = 0.75;

// Runs every point once per candidate (o.base gives the candidate's values on top of its own
// fields) and scores each group out of fit. Points that cannot be modelled or whose measurement is
// inconsistent (PointResult::inconsistent) take no part in the fit or the scores.
TransferReport leave_one_out(const std::vector<MeasuredPoint>& points, const Options& o, GroupBy by);

nlohmann::json to_json(const TransferReport& t);
// Band checks and hits per engine (from the per engine x GPU x mode summary).
std::map<std::string, std::pair<int, int>> band_cover_by_engine(const TransferReport& t);
std::string to_text(const TransferReport& t);
// The band table of the out-of-fit residuals.
BandTable transfer_bands(const TransferReport& t, int min_points, nlohmann::json meta);

}  // namespace servesim::sim::validate
