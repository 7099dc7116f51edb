#include "sim/validate/transfer.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <map>
#include <set>

#include "common/error.hpp"
#include "common/table.hpp"
#include "common/text.hpp"

namespace servesim::sim::validate {

const std::vector<FitParameter>& fitted_parameters() {
  // Both are factors on each release's fitted value (engine profile), so one fold moves every
  // release of an engine together and factor 1 x 1 is the shipped fit.
  static const std::vector<FitParameter> p = {
      {"step_overhead_us_per_seq", {"engine", "step_overhead_us_per_seq"}, {0.5, 1, 2},
       "engine-core host time per scheduled request (factor on the profile's step_cpu_us_per_seq)"},
      {"closed_loop_osl_spread_tokens", {"engine", "closed_loop_osl_spread_tokens"}, {0.5, 1, 2},
       "closed-loop answer-length spread (factor on the profile's closed_loop.osl_spread_tokens)"},
  };
  return p;
}

GroupBy parse_group_by(const std::string& s, const std::string& where) {
  const std::string l = text::lower(s);
  if (l == "model") return GroupBy::model;
  if (l == "release") return GroupBy::release;
  throw Error(where, "", "unknown grouping '" + s + "'; known: model, release");
}

const char* to_string(GroupBy g) { return g == GroupBy::model ? "model" : "release"; }

std::string group_of(const PointResult& p, GroupBy g) {
  if (g == GroupBy::model) return p.model;
  const std::string v = p.measured.backend_version;
  return v.empty() ? "unlabelled" : v;
}

namespace {

bool usable(const PointResult& p) {
  return p.unmodellable.empty() && !p.excluded() && std::isfinite(p.ttft_err) && std::isfinite(p.itl_err);
}

FoldErrors errors_of(const std::vector<const PointResult*>& pts) {
  std::vector<double> t, i;
  for (const auto* p : pts) t.push_back(p->ttft_err), i.push_back(p->itl_err);
  return {error_stats(t), error_stats(i)};
}

// The fit's objective on a set of points: per GPU x mode, median |TTFT error| + median |TPOT error|,
// summed (the figures the acceptance targets name, each GPU counted once).
double loss(const std::vector<const PointResult*>& pts) {
  std::map<std::pair<std::string, std::string>, std::vector<const PointResult*>> by;
  for (const auto* p : pts) by[{p->gpu, p->mode}].push_back(p);
  double l = 0;
  for (const auto& [k, v] : by) {
    const FoldErrors e = errors_of(v);
    l += e.ttft.median_abs + e.tpot.median_abs;
  }
  return l;
}

// The candidate with the least loss over the points `take` admits (first on ties: the grid's order).
template <class Take>
std::size_t best_candidate(const std::vector<Report>& runs, const std::vector<std::size_t>& idx, Take take) {
  std::size_t best = 0;
  double best_loss = std::numeric_limits<double>::infinity();
  for (std::size_t c = 0; c < runs.size(); ++c) {
    std::vector<const PointResult*> pts;
    for (auto i : idx)
      if (take(i)) pts.push_back(&runs[c].points[i]);
    if (pts.empty()) continue;
    const double l = loss(pts);
    if (l < best_loss - 1e-12) best_loss = l, best = c;
  }
  return best;
}

std::vector<Residual> residuals_of(const std::vector<const PointResult*>& pts) {
  std::vector<Residual> res;
  for (const auto* p : pts) {
    res.push_back({p->gpu, p->engine, p->mode, "ttft", p->regime, p->measured.ttft_ms, p->ttft_ms, p->model});
    res.push_back({p->gpu, p->engine, p->mode, "itl", p->regime, p->measured.tpot_ms, p->itl_ms, p->model});
    res.push_back({p->gpu, p->engine, p->mode, "output_tps", p->regime, p->measured.output_tps, p->output_tps, p->model});
  }
  return res;
}

nlohmann::json stats_json(const ErrorStats& s) {
  auto pct = [](double x) { return std::isfinite(x) ? nlohmann::json(100 * x) : nlohmann::json(nullptr); };
  return {{"n", s.n}, {"median_signed_pct", pct(s.median_signed)}, {"median_abs_pct", pct(s.median_abs)}, {"p90_abs_pct", pct(s.p90_abs)}};
}

nlohmann::json fold_json(const FoldErrors& f) { return {{"ttft", stats_json(f.ttft)}, {"tpot", stats_json(f.tpot)}}; }

std::string pct(double x) {
  if (!std::isfinite(x)) return "-";
  char b[32];
  std::snprintf(b, sizeof b, "%.1f%%", 100 * x);
  return b;
}

std::string values_text(const std::vector<double>& v) {
  std::string s;
  for (std::size_t i = 0; i < v.size(); ++i) {
    char b[32];
    std::snprintf(b, sizeof b, "%s%g", i ? " x " : "", v[i]);
    s += b;
  }
  return s;
}

}  // namespace

TransferReport leave_one_out(const std::vector<MeasuredPoint>& points, const Options& o, GroupBy by) {
  TransferReport t;
  t.by = by;
  const auto& params = fitted_parameters();
  t.candidates.push_back({});
  for (const auto& p : params) {
    std::vector<std::vector<double>> next;
    for (const auto& c : t.candidates)
      for (double v : p.grid) {
        auto d = c;
        d.push_back(v);
        next.push_back(std::move(d));
      }
    t.candidates = std::move(next);
  }
  std::vector<Report> runs;
  for (const auto& c : t.candidates) {
    Options oc = o;
    for (std::size_t k = 0; k < params.size(); ++k) oc.engine_scale.emplace_back(params[k].name, c[k]);
    runs.push_back(run(points, oc));
  }
  const std::size_t n = runs.front().points.size();
  for (const auto& r : runs)
    if (r.points.size() != n) throw Error("validate", "", "candidate runs disagree on the points (internal error)");

  // Usable points by engine and group.
  std::map<std::string, std::map<std::string, std::vector<std::size_t>>> groups;
  std::map<std::string, std::vector<std::size_t>> by_engine;
  const Report& first = runs.front();
  for (std::size_t i = 0; i < n; ++i) {
    const auto& p = first.points[i];
    bool ok = true;
    for (const auto& r : runs) ok = ok && usable(r.points[i]);
    if (!ok) continue;
    groups[p.engine][group_of(p, by)].push_back(i);
    by_engine[p.engine].push_back(i);
  }

  t.out_of_fit = first;
  t.out_of_fit.points.clear();
  std::vector<std::size_t> chosen(n, 0);   // each point's out-of-fit candidate
  std::vector<bool> scored(n, false);
  std::map<std::string, std::size_t> in_fit;
  for (const auto& [engine, gs] : groups) {
    const auto& all = by_engine[engine];
    // What the profiles' engine parameters were fitted on: the engine's aggregated points (each
    // profile's closed_loop.source), so the refit is on those too; every left-out point, aggregated
    // or disaggregated, is predicted with it. An engine's disaggregated points, whose TTFT turns on
    // prefill queues and handoffs these parameters do not hold, would move the refit (on the split,
    // TensorRT-LLM's without DeepSeek-V3 from 0.5 x 2 to 2 x 2).
    const bool any_agg = std::any_of(all.begin(), all.end(), [&](std::size_t i) { return first.points[i].mode == "agg"; });
    auto fitted_on = [&](std::size_t i) { return !any_agg || first.points[i].mode == "agg"; };
    in_fit[engine] = best_candidate(runs, all, fitted_on);
    for (const auto& [g, idx] : gs) {
      const std::set<std::size_t> mine(idx.begin(), idx.end());
      auto others = [&](std::size_t i) { return !mine.count(i) && fitted_on(i); };
      const bool refit = gs.size() > 1 && std::any_of(all.begin(), all.end(), others);   // else nothing to refit on
      const std::size_t c = refit ? best_candidate(runs, all, others) : in_fit[engine];
      GroupTransfer gt;
      gt.engine = engine;
      gt.group = g;
      gt.points = static_cast<int>(idx.size());
      std::vector<const PointResult*> in, out;
      for (auto i : idx) {
        in.push_back(&runs[in_fit[engine]].points[i]);
        out.push_back(&runs[c].points[i]);
        chosen[i] = c;
        scored[i] = true;
      }
      gt.in_fit = errors_of(in);
      gt.out_of_fit = errors_of(out);
      gt.in_values = t.candidates[in_fit[engine]];
      gt.out_values = t.candidates[c];
      t.groups.push_back(std::move(gt));
    }
  }
  for (std::size_t i = 0; i < n; ++i) {
    const auto it = in_fit.find(first.points[i].engine);
    t.out_of_fit.points.push_back(runs[scored[i] ? chosen[i] : it != in_fit.end() ? it->second : 0].points[i]);
  }

  // Band coverage: each group's out-of-fit points against the band of every other group's, at 10-90
  // unless that holds under kBandCoverageFloor overall (then the narrowest wider pair that does).
  std::vector<std::vector<Residual>> others(t.groups.size());
  for (std::size_t g = 0; g < t.groups.size(); ++g) {
    std::vector<const PointResult*> pts;
    for (std::size_t i = 0; i < n; ++i)
      if (scored[i] && !(t.out_of_fit.points[i].engine == t.groups[g].engine && group_of(t.out_of_fit.points[i], by) == t.groups[g].group))
        pts.push_back(&t.out_of_fit.points[i]);
    others[g] = residuals_of(pts);
  }
  std::map<std::tuple<std::string, std::string, std::string>, std::pair<int, int>> kind_cover;   // engine x GPU x mode
  auto coverage = [&](double lo_pct, bool keep) {
    int checks = 0, hits = 0;
    for (std::size_t g = 0; g < t.groups.size(); ++g) {
      const BandTable bt = make_bands(others[g], 8, {}, lo_pct, 100 - lo_pct, kBandMinModels);
      int c = 0, h = 0;
      for (std::size_t i = 0; i < n; ++i) {
        const auto& p = t.out_of_fit.points[i];
        if (!scored[i] || p.engine != t.groups[g].engine || group_of(p, by) != t.groups[g].group) continue;
        int pc = 0, ph = 0;
        add_band_checks(bt, p, pc, ph);
        c += pc, h += ph;
        if (keep) {
          auto& k = kind_cover[{p.engine, p.gpu, p.mode}];
          k.first += pc, k.second += ph;
        }
      }
      if (keep) t.groups[g].band_checks = c, t.groups[g].band_hits = h;
      checks += c, hits += h;
    }
    return std::pair{checks, hits};
  };
  t.band_hits_10_90 = coverage(10, false).second;
  for (double q : {10.0, 9.0, 8.0, 7.0, 6.0, 5.0, 4.0, 3.0, 2.0}) {
    const auto [c, h] = coverage(q, false);
    t.band_lo_pct = q, t.band_hi_pct = 100 - q;
    if (c == 0 || h >= kBandCoverageFloor * c) break;
  }
  std::tie(t.band_checks, t.band_hits) = coverage(t.band_lo_pct, true);

  // Per engine x GPU x mode.
  std::map<std::tuple<std::string, std::string, std::string>, std::pair<std::vector<const PointResult*>, std::vector<const PointResult*>>> sums;
  for (std::size_t i = 0; i < n; ++i) {
    if (!scored[i]) continue;
    const auto& p = first.points[i];
    auto& [in, out] = sums[{p.engine, p.gpu, p.mode}];
    in.push_back(&runs[in_fit[p.engine]].points[i]);
    out.push_back(&t.out_of_fit.points[i]);
  }
  for (const auto& [k, v] : sums) {
    TransferReport::Summary s;
    std::tie(s.engine, s.gpu, s.mode) = k;
    s.in_fit = errors_of(v.first);
    s.out_of_fit = errors_of(v.second);
    std::tie(s.band_checks, s.band_hits) = kind_cover[k];
    t.summary.push_back(std::move(s));
  }
  return t;
}

BandTable transfer_bands(const TransferReport& t, int min_points, nlohmann::json meta) {
  std::vector<const PointResult*> pts;
  for (const auto& p : t.out_of_fit.points)
    if (usable(p)) pts.push_back(&p);
  return make_bands(residuals_of(pts), min_points, std::move(meta), t.band_lo_pct, t.band_hi_pct, kBandMinModels);
}

std::map<std::string, std::pair<int, int>> band_cover_by_engine(const TransferReport& t) {
  std::map<std::string, std::pair<int, int>> m;
  for (const auto& s : t.summary) {
    auto& x = m[s.engine];
    x.first += s.band_checks, x.second += s.band_hits;
  }
  return m;
}

nlohmann::json to_json(const TransferReport& t) {
  nlohmann::json j;
  j["group_by"] = to_string(t.by);
  nlohmann::json params = nlohmann::json::array();
  for (const auto& p : fitted_parameters())
    params.push_back({{"name", p.name}, {"grid", p.grid}, {"what", p.what}});
  j["fitted_parameters"] = params;
  j["candidates"] = t.candidates.size();
  nlohmann::json groups = nlohmann::json::array();
  for (const auto& g : t.groups)
    groups.push_back({{"engine", g.engine}, {"group", g.group}, {"points", g.points}, {"in_fit", fold_json(g.in_fit)},
                      {"out_of_fit", fold_json(g.out_of_fit)}, {"in_fit_values", g.in_values},
                      {"out_of_fit_values", g.out_values}, {"band_checks", g.band_checks}, {"band_hits", g.band_hits}});
  j["groups"] = groups;
  nlohmann::json sum = nlohmann::json::array();
  for (const auto& s : t.summary)
    sum.push_back({{"engine", s.engine}, {"gpu", s.gpu}, {"mode", s.mode}, {"in_fit", fold_json(s.in_fit)},
                   {"out_of_fit", fold_json(s.out_of_fit)}, {"band_checks", s.band_checks}, {"band_hits", s.band_hits}});
  j["by_gpu"] = sum;
  nlohmann::json by_engine = nlohmann::json::object();
  for (const auto& [engine, ch] : band_cover_by_engine(t))
    by_engine[engine] = {{"checks", ch.first}, {"inside", ch.second}, {"fraction", ch.first ? double(ch.second) / ch.first : NAN}};
  j["band_coverage"] = {{"percentiles", {t.band_lo_pct, t.band_hi_pct}}, {"checks", t.band_checks}, {"inside", t.band_hits},
                        {"fraction", t.band_checks ? double(t.band_hits) / t.band_checks : NAN},
                        {"inside_at_10_90", t.band_hits_10_90}, {"min_models", kBandMinModels}, {"by_engine", by_engine}};
  return j;
}

std::string to_text(const TransferReport& t) {
  const std::string by = to_string(t.by);
  std::string out = "Transfer error, leave one " + by + " out: the fitted engine parameters (";
  for (std::size_t k = 0; k < fitted_parameters().size(); ++k)
    out += (k ? ", " : "") + fitted_parameters()[k].name + " x " + values_text(fitted_parameters()[k].grid);
  out += "; " + std::to_string(t.candidates.size()) + " combinations, each run over every point) refitted per engine on every other " +
         by + ", the left-out " + by + " predicted with that refit. In fit: the fit on every " + by + ".\n";
  Table tab({by == "model" ? "engine  model" : "engine  release", "points", "TTFT |med| in", "out", "TPOT |med| in", "out",
             "TPOT p90 in", "out", "out/in TTFT", "out/in TPOT", "refit", "band cover"});
  for (const auto& g : t.groups) {
    auto ratio = [](double a, double b) {
      if (!(b > 0) || !std::isfinite(a)) return std::string("-");
      char s[16];
      std::snprintf(s, sizeof s, "%.2f", a / b);
      return std::string(s);
    };
    tab.add_row({g.engine + "  " + g.group, std::to_string(g.points), pct(g.in_fit.ttft.median_abs), pct(g.out_of_fit.ttft.median_abs),
             pct(g.in_fit.tpot.median_abs), pct(g.out_of_fit.tpot.median_abs), pct(g.in_fit.tpot.p90_abs),
             pct(g.out_of_fit.tpot.p90_abs), ratio(g.out_of_fit.ttft.median_abs, g.in_fit.ttft.median_abs),
             ratio(g.out_of_fit.tpot.median_abs, g.in_fit.tpot.median_abs), values_text(g.out_values),
             g.band_checks ? pct(double(g.band_hits) / g.band_checks) : "-"});
  }
  out += tab.render();
  Table s({"engine", "GPU", "mode", "TTFT |med| in", "out", "TPOT |med| in", "out", "TPOT p90 in", "out", "band cover"});
  for (const auto& x : t.summary)
    s.add_row({x.engine, x.gpu, x.mode, pct(x.in_fit.ttft.median_abs), pct(x.out_of_fit.ttft.median_abs), pct(x.in_fit.tpot.median_abs),
           pct(x.out_of_fit.tpot.median_abs), pct(x.in_fit.tpot.p90_abs), pct(x.out_of_fit.tpot.p90_abs),
           x.band_checks ? pct(double(x.band_hits) / x.band_checks) + " of " + std::to_string(x.band_checks) : "-"});
  out += "\nPer engine x GPU x mode, every " + by + " predicted out of fit:\n" + s.render();
  char b[768];
  const double all = t.band_checks ? 100.0 / t.band_checks : NAN;
  std::snprintf(b, sizeof b,
                "\nBands out of fit: a band spans the %g-%g percentiles of measured / predicted, each model x GPU weighted equally, "
                "from a cell of >= %d models (else the kind's runs of all loads, else the engine's runs of every GPU). Built from "
                "the other %ss' out-of-fit residuals, they hold %d of the left-out %ss' %d predictions (%.1f%%; TTFT, TPOT, tok/s)",
                t.band_lo_pct, t.band_hi_pct, kBandMinModels, by.c_str(), t.band_hits, by.c_str(), t.band_checks, t.band_hits * all);
  out += b;
  if (t.band_lo_pct != 10) {   // 10-90 held too few: say how few
    std::snprintf(b, sizeof b, "; the 10-90 percentiles held %.1f%%, under %.0f%%", t.band_hits_10_90 * all, 100 * kBandCoverageFloor);
    out += b;
  }
  out += ".";
  std::string per;
  for (const auto& [engine, ch] : band_cover_by_engine(t))
    per += (per.empty() ? " By engine: " : ", ") + engine + " " + (ch.first ? pct(double(ch.second) / ch.first) : std::string("-"));
  out += per + "\n";
  return out;
}

}  // namespace servesim::sim::validate
