// `servesim sweep ... --vs "FLAGS"`: the what-if. The base scenario and each variant of it (the
// base's flags with the ones a --vs gives in their place; cmd_simulate.cpp builds them) run over the
// same concurrencies or rates: one table with every variant's change against the base at each
// point, every scenario's columns in --output, one chart with a curve per scenario (--plot).
#include <algorithm>
#include <cmath>
#include <functional>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#include "common/error.hpp"
#include "common/files.hpp"
#include "common/table.hpp"
#include "common/text.hpp"
#include "sim/cli/commands.hpp"
#include "sim/cli/plot_runner.hpp"
#include "sim/simulate.hpp"

namespace servesim::cli {
namespace {

// "+12 %" / "-5 %": the variant's figure against the base's at the same point ("-" where either is
// undefined or the base is 0).
std::string change(double v, double base) {
  if (!std::isfinite(v) || !std::isfinite(base) || base == 0) return "-";
  const double pct = 100 * (v / base - 1);
  return (pct >= 0 ? "+" : "") + fixed(pct, 0) + " %";
}

std::string fig(double v, int digits) { return std::isfinite(v) ? fixed(v, digits) : "-"; }

// Every scenario's column names, in order of first appearance (a disaggregated run has more).
std::vector<std::string> union_names(const std::vector<sim::Columns>& cols) {
  std::vector<std::string> out;
  for (const auto& c : cols)
    for (const auto& n : c.names)
      if (std::find(out.begin(), out.end(), n) == out.end()) out.push_back(n);
  return out;
}

double cell(const sim::Columns& c, const std::string& name, std::size_t i) {
  const auto it = std::find(c.names.begin(), c.names.end(), name);
  return it == c.names.end() ? std::nan("") : c.data[std::size_t(it - c.names.begin())][i];
}

}  // namespace

void run_what_if(const std::vector<WhatIf>& runs, const sim::SweepSpec& spec, const std::string& fmt,
                 const std::string& output, const std::string& plot, int threads, bool quiet) {
  const bool rate = spec.axis == sim::SweepSpec::Axis::request_rate;
  const PlotPaths charts = plot_paths(plot);
  const std::string &chart = charts.chart, &base_path = charts.base;
  if (!plot.empty())   // before the runs, so a bad path does not waste them
    for (const auto& f : {chart, base_path + "-throughput.png", base_path + "-sweep.json"}) check_writable_target(f, "--plot");
  std::vector<sim::Columns> cols;
  std::vector<nlohmann::json> ran;
  const std::int64_t points = std::int64_t(runs.size() * spec.values.size());
  const auto bar = progress_bar(quiet, "points");
  for (std::size_t k = 0; k < runs.size(); ++k) {
    std::function<void(int, int)> progress;
    if (bar) progress = [&, k](int done, int) { bar(std::int64_t(k * spec.values.size()) + done, points); };
    const auto results = sim::sweep(runs[k].scenario, spec, threads, progress);
    cols.push_back(sim::sweep_columns(spec, results, runs[k].scenario.gpus, &runs[k].scenario));
    ran.push_back(sim::what_ran_json(runs[k].scenario, results.front()));
  }

  // The table: one row per point and scenario, each variant's change against the base beside it.
  const std::string axis = cols.front().names[0];
  Table t({axis, "scenario", "GPUs", "out tok/s", "tok/s/GPU", "tok/s/user", "TTFT p50 ms", "TTFT p90 ms", "ITL p50 ms",
           "ITL p90 ms", "vs base: TTFT p50", "ITL p50", "tok/s/GPU"});
  for (std::size_t i = 0; i < spec.values.size(); ++i)
    for (std::size_t k = 0; k < runs.size(); ++k) {
      const sim::Columns& c = cols[k];
      const sim::Columns& b = cols.front();
      const double tps = cell(c, "output_token_throughput", i), per = cell(c, "output_token_throughput_per_gpu", i);
      t.add_row({fixed(c.data[0][i], rate ? 2 : 0), runs[k].label, per > 0 ? fixed(tps / per, 0) : "-", fig(tps, 1), fig(per, 1),
                 fig(cell(c, "output_token_throughput_per_user_avg", i), 2), fig(cell(c, "time_to_first_token_ms_p50", i), 2),
                 fig(cell(c, "time_to_first_token_ms_p90", i), 2), fig(cell(c, "inter_token_latency_ms_p50", i), 2),
                 fig(cell(c, "inter_token_latency_ms_p90", i), 2),
                 k == 0 ? "" : change(cell(c, "time_to_first_token_ms_p50", i), cell(b, "time_to_first_token_ms_p50", i)),
                 k == 0 ? "" : change(cell(c, "inter_token_latency_ms_p50", i), cell(b, "inter_token_latency_ms_p50", i)),
                 k == 0 ? "" : change(per, cell(b, "output_token_throughput_per_gpu", i))});
    }
  std::string table = "What if: the base scenario and " + std::to_string(runs.size() - 1) +
                      (runs.size() == 2 ? " variant" : " variants") + " (--vs: the base's flags with those in their place), " +
                      (rate ? "open loop at each request rate" : "closed loop at each concurrency") + "\n";
  // The base as it ran; each variant by its flags and the lines of what ran that differ from the base's.
  const std::string base_ran = sim::what_ran_text(ran.front());
  table += "base:\n" + base_ran;
  for (std::size_t k = 1; k < runs.size(); ++k) {
    table += runs[k].label + " = " + runs[k].flags + ":\n";
    std::istringstream lines(sim::what_ran_text(ran[k]));
    bool any = false;
    for (std::string l; std::getline(lines, l);)
      if (base_ran.find(l + "\n") == std::string::npos) table += l + "\n", any = true;
    if (!any) table += "  (ran as the base)\n";
  }
  table += t.render() +
           "vs base: the variant's figure against the base's at the same point (+: higher; for TTFT and ITL lower is better, "
           "for tok/s/GPU higher); GPUs: the scenario's (out tok/s over tok/s/GPU)\n";

  std::string text;
  if (fmt == "json") {
    nlohmann::json j;
    j["axis"] = rate ? "request_rate" : "concurrency";
    j["values"] = spec.values;
    j["scenarios"] = nlohmann::json::array();
    for (std::size_t k = 0; k < runs.size(); ++k)
      j["scenarios"].push_back({{"label", runs[k].label}, {"vs", runs[k].flags}, {"what_ran", ran[k]},
                                {"input_config", runs[k].scenario.json}, {"columns", sim::to_json(cols[k])}});
    text = j.dump(2) + "\n";
  } else if (fmt == "csv") {   // every scenario's rows under the union of their columns, the scenario first
    const auto names = union_names(cols);
    text = "scenario";
    for (const auto& n : names) text += "," + n;
    text += "\n";
    for (std::size_t k = 0; k < runs.size(); ++k)
      for (std::size_t i = 0; i < spec.values.size(); ++i) {
        std::ostringstream row;
        row.precision(10);   // as a sweep's CSV
        row << text::csv_field(runs[k].label);
        for (const auto& n : names) {
          row << ",";
          if (const double v = cell(cols[k], n, i); std::isfinite(v)) row << v;
        }
        text += row.str() + "\n";
      }
  } else {
    text = table;
  }

  if (!plot.empty()) {   // one curve per scenario: the chart groups a sweep's rows by its topology column
    const auto names = union_names(cols);
    nlohmann::json c = nlohmann::json::object();
    c["topology"] = nlohmann::json::array();
    for (const auto& n : names) c[n] = nlohmann::json::array();
    for (std::size_t k = 0; k < runs.size(); ++k)
      for (std::size_t i = 0; i < spec.values.size(); ++i) {
        c["topology"].push_back(k == 0 ? runs[k].label : runs[k].label + ": " + runs[k].flags);
        for (const auto& n : names) {
          const double v = cell(cols[k], n, i);
          c[n].push_back(std::isfinite(v) ? nlohmann::json(v) : nlohmann::json(nullptr));
        }
      }
    const std::string data = base_path + "-sweep.json";
    write_file_atomic(data, nlohmann::json{{"columns", c}}.dump());
    run_plotter({data, "-o", chart, "--title", "What if: " + (runs.size() == 2 ? runs[1].flags : std::to_string(runs.size() - 1) + " variants") +
                                                  " against the base"});
    table += "Charts: " + chart + " (TTFT and ITL, a curve per scenario), " + base_path + "-throughput.png; data: " + data + "\n";
    if (fmt == "table") text = table;
  }
  if (output.empty()) {
    std::cout << text;
  } else {
    write_file_atomic(output, text);
    std::cout << table << "Wrote " << output << " (" << fmt << ")\n";
  }
}

}  // namespace servesim::cli
