#include "sim/validate/bands.hpp"

#include <algorithm>
#include <cstdio>
#include <map>
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
  if (r.has("cells"))
    for (const auto& c : r.array("cells")) {
      BandCell x;
      x.gpu = text::lower(c.string("gpu"));
      x.mode = c.string_or("mode", "agg");   // tables written before the split hold aggregated runs
      if (x.mode != "agg" && x.mode != "disagg") c.fail("mode", "must be agg or disagg");
      x.metric = c.string("metric");
      x.regime = c.string("regime");
      x.n = static_cast<int>(c.integer("n"));
      x.ratio_lo = c.number("ratio_p10");
      x.ratio_hi = c.number("ratio_p90");
      x.ratio_median = c.number_or("ratio_median", NAN);
      if (!(x.ratio_lo > 0 && x.ratio_hi >= x.ratio_lo)) c.fail("ratio_p10", "must be > 0 and <= ratio_p90");
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

Band band_for(const BandTable& t, const std::string& gpu, const std::string& mode, const std::string& metric,
              const std::string& regime, double predicted) {
  Band b;
  b.gpu = text::lower(gpu);
  b.mode = mode;
  b.metric = metric;
  b.regime = regime;
  const BandCell* exact = nullptr;
  const BandCell* all = nullptr;
  for (const auto& c : t.cells) {
    if (c.gpu != b.gpu || c.mode != mode || c.metric != metric || c.n < t.min_points) continue;
    if (c.regime == regime) exact = &c;
    if (c.regime == "all") all = &c;
  }
  const BandCell* c = exact ? exact : all;
  if (!c || !std::isfinite(predicted)) {
    b.note = !std::isfinite(predicted)  ? "no band: no prediction"
             : mode == "disagg"          ? "no band: no measured disaggregated runs of this kind"
                                         : "no band: no measured runs of this kind";
    return b;
  }
  b.present = true;
  b.regime = c->regime;
  b.n = c->n;
  b.ratio_lo = c->ratio_lo;
  b.ratio_hi = c->ratio_hi;
  b.lo = predicted * c->ratio_lo;
  b.hi = predicted * c->ratio_hi;
  return b;
}

nlohmann::json band_json(const Band& b) {
  if (!b.present) return {{"note", b.note}};
  return {{"lo", b.lo}, {"hi", b.hi}, {"ratio_p10", b.ratio_lo}, {"ratio_p90", b.ratio_hi}, {"n", b.n},
          {"gpu", b.gpu}, {"mode", b.mode}, {"regime", b.regime}};
}

std::string band_text(const Band& b, int digits) {
  if (!b.present) return "(no band)";
  char buf[96];
  std::snprintf(buf, sizeof buf, "(band %.*f-%.*f)", digits, b.lo, digits, b.hi);
  return buf;
}

BandTable make_bands(const std::vector<Residual>& residuals, int min_points, nlohmann::json meta) {
  std::map<std::tuple<std::string, std::string, std::string, std::string>, std::vector<double>> ratios;
  for (const auto& r : residuals) {
    if (!(r.measured > 0) || !(r.predicted > 0) || !std::isfinite(r.measured) || !std::isfinite(r.predicted)) continue;
    const double q = r.measured / r.predicted;
    ratios[{text::lower(r.gpu), r.mode, r.metric, r.regime}].push_back(q);
    ratios[{text::lower(r.gpu), r.mode, r.metric, "all"}].push_back(q);
  }
  BandTable t;
  t.meta = std::move(meta);
  t.min_points = min_points;
  for (auto& [k, v] : ratios) {
    std::sort(v.begin(), v.end());
    BandCell c;
    std::tie(c.gpu, c.mode, c.metric, c.regime) = k;
    c.n = static_cast<int>(v.size());
    c.ratio_lo = percentile_sorted(v, 10);
    c.ratio_hi = percentile_sorted(v, 90);
    c.ratio_median = percentile_sorted(v, 50);
    t.cells.push_back(std::move(c));
  }
  return t;
}

nlohmann::json to_json(const BandTable& t) {
  nlohmann::json cells = nlohmann::json::array();
  for (const auto& c : t.cells)
    cells.push_back({{"gpu", c.gpu}, {"mode", c.mode}, {"metric", c.metric}, {"regime", c.regime}, {"n", c.n}, {"ratio_p10", c.ratio_lo},
                     {"ratio_median", c.ratio_median}, {"ratio_p90", c.ratio_hi}});
  return {{"meta", t.meta}, {"min_points", t.min_points}, {"cells", cells}};
}

}  // namespace servesim::sim::validate
