#include "sim/validate/bands.hpp"

#include <boost/math/distributions/normal.hpp>
#include <boost/math/distributions/students_t.hpp>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <set>
#include <tuple>

#include "common/embedded.hpp"
#include "common/error.hpp"
#include "common/json_reader.hpp"
#include "common/text.hpp"
#include "sim/metrics.hpp"

namespace servesim::sim::validate {

BandTable parse_bands(const nlohmann::json& j, const std::string& file) {
  const JsonReader r(j, file);
  BandTable t;
  if (!j.is_object()) throw Error(file, "", "expected a JSON object (the layout `servesim validate --write-bands` writes)");
  if (j.contains("meta") && j["meta"].is_object()) t.meta = j["meta"];
  t.min_points = static_cast<int>(r.integer_or("min_points", t.min_points));
  if (t.min_points < 1) r.fail("min_points", "must be >= 1");
  t.min_models = static_cast<int>(r.integer_or("min_models", t.min_models));
  if (t.min_models < 1) r.fail("min_models", "must be >= 1");
  if (r.has("percentiles")) {
    const auto& pc = j["percentiles"];
    if (!pc.is_array() || pc.size() != 2 || !pc[0].is_number() || !pc[1].is_number() || !(pc[0].get<double>() >= 0) ||
        !(pc[0].get<double>() < pc[1].get<double>()) || !(pc[1].get<double>() <= 100))
      r.fail("percentiles", "must be [lo, hi] with 0 <= lo < hi <= 100");
    t.lo_pct = pc[0].get<double>();
    t.hi_pct = pc[1].get<double>();
  }
  if (r.has("cells"))
    for (const auto& c : r.array("cells")) {
      BandCell x;
      x.gpu = text::lower(c.string("gpu"));
      x.engine = text::lower(c.string_or("engine", "vllm"));   // tables written before engines were split hold vLLM runs
      x.mode = c.string_or("mode", "agg");   // tables written before the split hold aggregated runs
      if (x.mode != "agg" && x.mode != "disagg") c.fail("mode", "must be agg or disagg");
      x.metric = c.string("metric");
      x.regime = c.string("regime");
      x.n = static_cast<int>(c.integer("n"));
      x.models = static_cast<int>(c.integer_or("models", 0));
      if (x.models < 0) c.fail("models", "must be >= 0");
      x.ratio_lo = c.has("ratio_lo") ? c.number("ratio_lo") : c.number("ratio_p10");   // the band's edges
      x.ratio_hi = c.has("ratio_hi") ? c.number("ratio_hi") : c.number("ratio_p90");
      x.ratio_median = c.number_or("ratio_median", NAN);
      if (!(x.ratio_lo > 0 && x.ratio_hi >= x.ratio_lo)) c.fail("ratio_lo", "must be > 0 and <= ratio_hi");
      t.cells.push_back(std::move(x));
    }
  return t;
}

const BandTable& embedded_bands() {
  static const BandTable t = [] {
    const std::string path = "sim/data/prediction_bands.json";
    for (auto p : data::list("sim/data/"))
      if (p == path) return parse_bands(parse_json(data::get(path), path), path);
    return BandTable{};
  }();
  return t;
}

namespace {

std::string cell_words(const BandCell& c) {
  std::string s = (c.gpu == "all" ? std::string() : c.gpu + " ") + c.engine + " " + c.mode + " " + c.metric + ", " +
                  (c.gpu == "all" ? std::string("all GPUs and loads") : c.regime == "all" ? std::string("all loads") : c.regime + " load");
  if (c.models > 0) s += ", " + std::to_string(c.models) + (c.models == 1 ? " model" : " models");
  return s;
}

}  // namespace

Band band_for(const BandTable& t, const std::string& gpu, const std::string& engine, const std::string& mode,
              const std::string& metric, const std::string& regime, double predicted) {
  Band b;
  b.gpu = text::lower(gpu);
  b.engine = text::lower(engine);
  b.mode = mode;
  b.metric = metric;
  b.regime = regime;
  const BandCell* exact = nullptr;
  const BandCell* all = nullptr;
  const BandCell* every_gpu = nullptr;   // the engine's runs of every GPU
  const BandCell* every_gpu_regime = nullptr;   // ... at this load regime
  double wide_lo = INFINITY, wide_hi = 0;   // the widest validated band of this mode and metric
  int wide_n = 0;
  for (const auto& c : t.cells) {
    if (c.mode != mode || c.metric != metric || c.n < t.min_points) continue;
    if (c.gpu == "all") {
      if (c.engine == b.engine && c.regime == "all") every_gpu = &c;
      if (c.engine == b.engine && c.regime == regime) every_gpu_regime = &c;
      continue;
    }
    if (c.regime == "all") {
      wide_lo = std::min(wide_lo, c.ratio_lo);
      wide_hi = std::max(wide_hi, c.ratio_hi);
      wide_n += c.n;
    }
    if (c.gpu != b.gpu || c.engine != b.engine) continue;
    if (c.regime == regime) exact = &c;
    if (c.regime == "all") all = &c;
  }
  // A validated kind's cell serves when it holds enough models (tables that do not count models: always).
  auto enough = [&](const BandCell* c) { return c && (t.min_models <= 1 || c->models >= t.min_models); };
  const BandCell* c = exact;   // a table without "all" cells (hand-written): its regime cell
  if (all) {
    if (enough(exact)) c = exact;
    else if (enough(all) || !every_gpu) c = all;
    else c = every_gpu;
  }
  if (!std::isfinite(predicted) || (!c && wide_n == 0)) {
    b.note = !std::isfinite(predicted)  ? "no band: no prediction"
             : mode == "disagg"          ? "no band: no measured disaggregated runs of this kind"
                                         : "no band: no measured runs of this kind";
    return b;
  }
  b.present = true;
  if (c) {
    b.regime = c->regime;
    b.n = c->n;
    b.models = c->models;
    b.ratio_lo = c->ratio_lo;
    b.ratio_hi = c->ratio_hi;
    b.all_gpus = c == every_gpu;
    b.cell = cell_words(*c);
    if (b.all_gpus) {
      // The engine's every-GPU cell measures the spread between models centred on the engine's
      // median; the kind's own runs (too few models to stand alone) may sit off that centre, and its
      // load regime may spread wider than all loads together. The band is the hull of the three
      // (the regime's only when it holds enough models): never narrower than any of them.
      b.cell += " (" + b.gpu + ": " + std::to_string(all->models) + (all->models == 1 ? " model)" : " models)");
      std::string with = "widened to " + b.gpu + "'s own runs";
      b.ratio_lo = std::min(b.ratio_lo, all->ratio_lo);
      b.ratio_hi = std::max(b.ratio_hi, all->ratio_hi);
      if (every_gpu_regime && every_gpu_regime->n >= t.min_points && enough(every_gpu_regime)) {
        b.ratio_lo = std::min(b.ratio_lo, every_gpu_regime->ratio_lo);
        b.ratio_hi = std::max(b.ratio_hi, every_gpu_regime->ratio_hi);
        with += " and all GPUs' " + regime + " load (" + std::to_string(every_gpu_regime->models) + " models)";
      }
      b.cell += ", " + with;
    }
  } else {
    b.widened = true;
    b.regime = "all";
    b.n = wide_n;
    b.ratio_lo = wide_lo;
    b.ratio_hi = wide_hi;
    b.note = "no measured " + std::string(mode == "disagg" ? "disaggregated " : "") + b.engine + " runs on " + b.gpu +
             ": widened to the widest validated " + mode + " band";
    b.cell = "widest validated " + mode + " " + metric + " band";
  }
  b.lo = predicted * b.ratio_lo;
  b.hi = predicted * b.ratio_hi;
  return b;
}

std::string band_legend() {
  const BandTable& t = embedded_bands();
  auto nth = [](double p) {
    const long n = std::lround(p);
    const char* suf = (n % 100 >= 11 && n % 100 <= 13) ? "th" : n % 10 == 1 ? "st" : n % 10 == 2 ? "nd" : n % 10 == 3 ? "rd" : "th";
    return std::to_string(n) + suf;
  };
  return "the " + nth(t.lo_pct) + "-" + nth(t.hi_pct) +
         " percentile of measured / predicted over validated runs of the point's kind (GPU, engine, aggregated or "
         "disaggregated, load regime)" +
         (t.min_models > 1 ? ", each model x GPU weighted equally, out of fit (from " + std::to_string(t.min_models) +
                                 " models a cell, else all loads, else all GPUs)"
                           : std::string()) +
         (t.lo_pct < 10 ? std::string(", widened to hold 75 % of a model the fit has not seen") : std::string());
}

nlohmann::json band_json(const Band& b) {
  if (!b.present) return {{"note", b.note}};
  nlohmann::json j = {{"lo", b.lo}, {"hi", b.hi}, {"ratio_lo", b.ratio_lo}, {"ratio_hi", b.ratio_hi}, {"n", b.n},
                      {"gpu", b.gpu}, {"engine", b.engine}, {"mode", b.mode}, {"regime", b.regime}, {"cell", b.cell}};
  if (b.models > 0) j["models"] = b.models;
  if (b.all_gpus) j["all_gpus"] = true;
  if (b.widened) j["widened"] = true, j["note"] = b.note;
  return j;
}

std::string band_text(const Band& b, int digits) {
  if (!b.present) return "(no band)";
  char buf[96];
  std::snprintf(buf, sizeof buf, "(band %.*f-%.*f%s)", digits, b.lo, digits, b.hi, b.widened ? ", widened: not validated" : "");
  return buf;
}

double weighted_percentile(std::vector<std::pair<double, double>> v, double q) {
  if (v.empty()) return NAN;
  std::sort(v.begin(), v.end());
  if (v.size() == 1) return v.front().first;
  std::vector<double> mid(v.size());   // each value's midpoint on the cumulative-weight axis
  double cum = 0;
  for (std::size_t i = 0; i < v.size(); ++i) mid[i] = cum + v[i].second / 2, cum += v[i].second;
  const double x = mid.front() + q / 100 * (mid.back() - mid.front());
  for (std::size_t i = 1; i < v.size(); ++i)
    if (x <= mid[i]) {
      const double span = mid[i] - mid[i - 1];
      const double f = span > 0 ? (x - mid[i - 1]) / span : 0;
      return v[i - 1].first + f * (v[i].first - v[i - 1].first);
    }
  return v.back().first;
}

namespace {

using CellKey = std::tuple<std::string, std::string, std::string, std::string, std::string>;   // gpu, engine, mode, metric, regime
struct Entry { double ratio; std::string model, unit; };   // unit: the model x GPU whose runs share a bias

// The usable residuals (both figures positive and finite) of each cell: its kind's load regime, its
// kind's all loads, and with min_models > 1 the engine's every GPU (both).
std::map<CellKey, std::vector<Entry>> residual_cells(const std::vector<Residual>& residuals, int min_models) {
  std::map<CellKey, std::vector<Entry>> cells;
  std::size_t anonymous = 0;
  for (const auto& r : residuals) {
    if (!(r.measured > 0) || !(r.predicted > 0) || !std::isfinite(r.measured) || !std::isfinite(r.predicted)) continue;
    const std::string gpu = text::lower(r.gpu);
    const std::string engine = r.engine.empty() ? "vllm" : text::lower(r.engine);
    const Entry e{r.measured / r.predicted, r.model,
                  r.model.empty() ? "#" + std::to_string(anonymous++) : r.model + "\n" + gpu};
    cells[{gpu, engine, r.mode, r.metric, r.regime}].push_back(e);
    cells[{gpu, engine, r.mode, r.metric, "all"}].push_back(e);
    if (min_models > 1) {
      cells[{"all", engine, r.mode, r.metric, "all"}].push_back(e);
      cells[{"all", engine, r.mode, r.metric, r.regime}].push_back(e);
    }
  }
  return cells;
}

}  // namespace

BandTable make_bands(const std::vector<Residual>& residuals, int min_points, nlohmann::json meta, double lo_pct,
                     double hi_pct, int min_models) {
  const auto cells = residual_cells(residuals, min_models);
  BandTable t;
  t.meta = std::move(meta);
  t.min_points = min_points;
  t.min_models = min_models;
  t.lo_pct = lo_pct;
  t.hi_pct = hi_pct;
  for (const auto& [k, v] : cells) {
    std::map<std::string, int> per_unit;
    std::set<std::string> models;
    for (const auto& e : v) {
      ++per_unit[e.unit];
      if (!e.model.empty()) models.insert(e.model);
    }
    std::vector<std::pair<double, double>> weighted;
    for (const auto& e : v) weighted.emplace_back(e.ratio, 1.0 / per_unit[e.unit]);
    BandCell c;
    std::tie(c.gpu, c.engine, c.mode, c.metric, c.regime) = k;
    c.n = static_cast<int>(v.size());
    c.models = static_cast<int>(models.size());
    c.ratio_lo = weighted_percentile(weighted, lo_pct);
    c.ratio_hi = weighted_percentile(weighted, hi_pct);
    c.ratio_median = weighted_percentile(weighted, 50);
    t.cells.push_back(std::move(c));
  }
  return t;
}

BandTable prediction_bands(const std::vector<Residual>& residuals, int min_points, nlohmann::json meta, const BandTable* prior,
                           double prior_weight) {
  BandTable t = make_bands(residuals, min_points, std::move(meta));
  const auto cells = residual_cells(residuals, 1);
  const double share = (t.hi_pct - t.lo_pct) / 100;   // the coverage the band promises
  const double z = boost::math::quantile(boost::math::normal(), 0.5 + share / 2);
  for (auto& c : t.cells) {
    const auto& v = cells.at({c.gpu, c.engine, c.mode, c.metric, c.regime});
    const auto n = static_cast<double>(v.size());
    if (v.size() < 2) continue;   // one residual: no spread to scale (and below any min_points)
    double mean = 0, ss = 0;   // of ln(measured / predicted)
    for (const auto& e : v) mean += std::log(e.ratio) / n;
    for (const auto& e : v) ss += (std::log(e.ratio) - mean) * (std::log(e.ratio) - mean);
    double var = ss / (n - 1), dof = n - 1;
    // The prior's spread of the same kind, as the sd of a normal its band would be the central share
    // of, weighing as prior_weight residuals (a scaled inverse-chi-square prior on the variance).
    if (prior && prior_weight > 0)
      if (const Band p = band_for(*prior, c.gpu, c.engine, c.mode, c.metric, c.regime, 1.0); p.present && p.ratio_hi > p.ratio_lo) {
        const double s0 = std::log(p.ratio_hi / p.ratio_lo) / (2 * z);
        var = (prior_weight * s0 * s0 + ss) / (prior_weight + n - 1);
        dof = prior_weight + n - 1;
      }
    const double half = boost::math::quantile(boost::math::students_t(dof), 0.5 + share / 2) * std::sqrt(var * (1 + 1 / n));
    c.ratio_lo = std::exp(mean - half);
    c.ratio_hi = std::exp(mean + half);
  }
  return t;
}

nlohmann::json to_json(const BandTable& t) {
  nlohmann::json cells = nlohmann::json::array();
  for (const auto& c : t.cells) {
    nlohmann::json x = {{"gpu", c.gpu}, {"engine", c.engine}, {"mode", c.mode}, {"metric", c.metric}, {"regime", c.regime}, {"n", c.n},
                        {"ratio_lo", c.ratio_lo}, {"ratio_median", c.ratio_median}, {"ratio_hi", c.ratio_hi}};
    if (c.models > 0) x["models"] = c.models;
    cells.push_back(std::move(x));
  }
  return {{"meta", t.meta}, {"min_points", t.min_points}, {"min_models", t.min_models}, {"percentiles", {t.lo_pct, t.hi_pct}},
          {"cells", cells}};
}

}  // namespace servesim::sim::validate
