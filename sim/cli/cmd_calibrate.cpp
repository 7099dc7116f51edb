// `servesim calibrate report|fit`: the cross-validated error of every fitted op family.
#include <algorithm>
#include <cmath>
#include <optional>
#include <vector>

#include "common/error.hpp"
#include "common/table.hpp"
#include "common/text.hpp"
#include "hwmodels/calibration.hpp"
#include "hwmodels/kernel_model.hpp"
#include "sim/cli/commands.hpp"
#include "sim/parallel.hpp"

namespace servesim::cli {
namespace {

// The worst held-out points: their measured time and shape coordinates (exp of the log features).
nlohmann::json worst_json(const hw::FamilyCalibration& f) {
  nlohmann::json a = nlohmann::json::array();
  for (const auto& [err, i] : f.cv.worst) {
    const auto& s = f.samples[size_t(i)];
    nlohmann::json x = nlohmann::json::array();
    for (double v : s.x) x.push_back(std::exp(v));
    a.push_back({{"error", err}, {"index", i}, {"seconds", s.seconds}, {"shape", x}});
  }
  return a;
}

// An attention family's measured shape grid (head count, KV heads, head size: features 2-4): a query
// outside it is timed from the nearest table that covers it (KernelModel, hwmodels/README.md).
struct ShapeGrid { double lo[3], hi[3]; };
std::optional<ShapeGrid> shape_grid(const hw::FamilyCalibration& f) {
  if (!f.family.starts_with("attention_") || f.samples.empty()) return std::nullopt;
  ShapeGrid g{{1e300, 1e300, 1e300}, {0, 0, 0}};
  for (const auto& s : f.samples)
    for (int i = 0; i < 3; ++i) {
      const double v = std::round(std::exp(s.x[size_t(2 + i)]));
      g.lo[i] = std::min(g.lo[i], v), g.hi[i] = std::max(g.hi[i], v);
    }
  return g;
}
std::string shape_grid_text(const ShapeGrid& g) {
  const char* names[] = {"heads", "KV heads", "head size"};
  std::string out;
  for (int i = 0; i < 3; ++i)
    out += std::string(i ? ", " : "") + names[i] + " " + fixed(g.lo[i], 0) + "-" + fixed(g.hi[i], 0);
  return out;
}

nlohmann::json report_json(const hw::Calibration& c, const std::string& release = "") {
  nlohmann::json fams = nlohmann::json::array();
  for (const auto& [name, f] : c.families()) {
    fams.push_back({{"family", name},
                    {"file", f.file},
                    {"origin", f.origin},
                    {"runtime", f.runtime},
                    {"kernels", f.kernels},
                    {"points", f.samples.size()},
                    {"held_out", f.cv.held_out},
                    {"held_out_glitches", f.cv.glitches},
                    {"glitch_rows", f.cv.glitch_rows},
                    {"median_error_with_glitches", f.cv.median_all},
                    {"p90_error_with_glitches", f.cv.p90_all},
                    {"method", hw::to_string(f.fit.method())},
                    {"median_error", f.cv.median},
                    {"p90_error", f.cv.p90},
                    {"max_error", f.cv.max},
                    {"fit_max_error", f.fit_max_error},
                    {"other_method_median_error", f.cv_other.median},
                    {"launch_s", f.fit.launch_s()},
                    {"compute_efficiency", f.fit.compute_efficiency()},
                    {"memory_efficiency", f.fit.memory_efficiency()},
                    {"meets_target", f.cv.median <= 0.08 && f.cv.p90 <= 0.20},
                    {"rejected", f.rejected},
                    {"worst_held_out", worst_json(f)}});
    if (const auto g = shape_grid(f))
      fams.back()["shape_grid"] = {{"heads", {g->lo[0], g->hi[0]}}, {"kv_heads", {g->lo[1], g->hi[1]}},
                                   {"head_dim", {g->lo[2], g->hi[2]}}};
  }
  hw::LaunchOverhead lo = c.launch_overhead();
  return {{"gpu", c.gpu().name},
          {"release", release.empty() ? "vllm-0.24.0 and this project's runs" : release},
          {"targets", {{"median_error", 0.08}, {"p90_error", 0.20}}},
          {"families", fams},
          {"launch_overhead", {{"eager_per_kernel_s", lo.eager_per_kernel_s},
                               {"graph_per_kernel_s", lo.graph_per_kernel_s},
                               {"source", lo.source}}},
          {"env", c.env()}};
}

std::string report_table(const hw::Calibration& c, const std::string& release = "") {
  Table t({"family", "from", "points", "held out", "glitches", "method", "median err", "p90 err", "max err", "fit max err", "launch us",
           "eff compute", "eff memory", "target"});
  for (const auto& [name, f] : c.families()) {
    t.add_row({name, f.origin == "vllm" ? f.runtime : "torch runs", std::to_string(f.samples.size()), std::to_string(f.cv.held_out),
               f.cv.glitches ? std::to_string(f.cv.glitches) + " (p90 " + fixed(100 * f.cv.p90_all, 1) + "% with)" : "0",
               std::string(hw::to_string(f.fit.method())), fixed(100 * f.cv.median, 1) + "%",
               fixed(100 * f.cv.p90, 1) + "%", fixed(100 * f.cv.max, 1) + "%", fixed(100 * f.fit_max_error, 1) + "%", fixed(f.fit.launch_s() * 1e6, 2),
               fixed(f.fit.compute_efficiency(), 3), fixed(f.fit.memory_efficiency(), 3),
               !f.rejected.empty() ? "REJECTED" : f.cv.median <= 0.08 && f.cv.p90 <= 0.20 ? "ok" : "MISSED"});
  }
  std::string out = "Cross-validated kernel model error on " + c.gpu().name +
                    (release.empty() ? std::string() : ", " + release + " tables") + " (five folds: each point |pred - meas| / meas from a fit on the other 80%; targets median <= 8%, p90 <= 20%;\n"
                    "glitches: held-out rows that are isolated glitches of the whole measured set (over 1.5x off both neighbours\n"
                    "of their series, which agree; in a token series also out of order in time), counted apart from the errors;\n"
                    "fit max err: the final surface against every measurement, the stored measurement not returned and,\n"
                    "for nearest-log-interp, the point itself left out; measured shapes themselves return their measurement;\n"
                    "NCCL collectives are fitted on each series' lower envelope along the message size, and a row over 1.5x\n"
                    "slower than a larger message of its series is a glitch)\n";
  if (c.empty()) return out + "no calibration data: every family uses roofline priors\n";
  out += t.render();
  hw::LaunchOverhead lo = c.launch_overhead();
  if (lo.eager_per_kernel_s > 0)
    out += "launch overhead: " + fixed(lo.eager_per_kernel_s * 1e6, 1) + " us per eager kernel, " +
           fixed(lo.graph_per_kernel_s * 1e6, 2) + " us per kernel replayed from a CUDA graph (" + lo.source + ")\n";
  for (const auto& [name, f] : c.families())
    if (!f.rejected.empty()) out += "not used: " + name + ": " + f.rejected + "\n";
  for (const auto& [name, f] : c.families())
    if (const auto g = shape_grid(f))
      out += "measured grid: " + name + ": " + shape_grid_text(*g) +
             "; a shape outside it is timed from the nearest table that covers it (op and step name that table)\n";
  for (const auto& e : c.env()) out += "data: " + e + "\n";
  return out;
}

}  // namespace

void add_calibrate_commands(CLI::App& app) {
  auto* cal = app.add_subcommand("calibrate", "Kernel cost model calibration: error report and refits");
  cal->require_subcommand(1);

  struct ReportOpts { std::string gpu, engine; Format format = Format::table; };
  auto ro = std::make_shared<ReportOpts>();
  auto* report = cal->add_subcommand("report", "Cross-validated error per op family on a measured GPU");
  report->add_option("--gpu", ro->gpu, "GPU whose calibration folder to report (default: every GPU with one)");
  report->add_option("--engine", ro->engine,
                     "Report the tables of every measured release of this engine (vllm, sglang, trtllm) instead, one per release");
  add_format_option(*report, ro->format);
  report->callback([ro] {
    if (!ro->engine.empty()) {
      const std::string e = text::lower(ro->engine);
      if (e != "vllm" && e != "sglang" && e != "trtllm")
        throw servesim::Error("--engine", "", "unknown engine '" + ro->engine + "' (known: vllm, sglang, trtllm)");
      std::vector<const hw::GpuSpec*> gpus;
      if (!ro->gpu.empty()) gpus.push_back(&hw::Catalog::global().gpu(ro->gpu));
      else for (const auto& g : hw::Catalog::global().gpus()) gpus.push_back(&g);
      // One job per GPU x release (each cross-validates its own families), printed in order.
      std::vector<std::pair<const hw::GpuSpec*, std::string>> jobs;
      for (const auto* g : gpus)
        for (const auto& r : hw::Calibration::embedded_releases(*g))
          if (r.starts_with(e + "-")) jobs.emplace_back(g, r);
      std::vector<std::optional<hw::Calibration>> cals(jobs.size());
      sim::parallel_for(int(jobs.size()), 0, [&](int i) {
        hw::Calibration c = hw::Calibration::embedded(*jobs[size_t(i)].first, jobs[size_t(i)].second);
        c.validate();
        cals[size_t(i)] = std::move(c);
      }, "calibrate report");
      nlohmann::json all = nlohmann::json::array();
      std::string text;
      for (std::size_t i = 0; i < jobs.size(); ++i) {
        all.push_back(report_json(*cals[i], jobs[i].second));
        text += report_table(*cals[i], jobs[i].second) + "\n";
      }
      if (jobs.empty()) text = "no " + e + " release tables embedded" + (ro->gpu.empty() ? std::string() : " for " + ro->gpu) + "\n";
      emit(ro->format, nlohmann::json{{"releases", all}}, text);
      return;
    }
    if (!ro->gpu.empty()) {
      const auto& gpu = hw::Catalog::global().gpu(ro->gpu);
      hw::Calibration c = hw::Calibration::embedded(gpu);
      c.validate();
      emit(ro->format, report_json(c), report_table(c));
      return;
    }
    // One GPU per job (each cross-validates its own families), printed in catalogue order.
    const auto& gpus = hw::Catalog::global().gpus();
    std::vector<std::optional<hw::Calibration>> cals(gpus.size());
    sim::parallel_for(int(gpus.size()), 0, [&](int i) {
      hw::Calibration c = hw::Calibration::embedded(gpus[size_t(i)]);
      if (c.empty()) return;
      c.validate();
      cals[size_t(i)] = std::move(c);
    }, "calibrate report");
    nlohmann::json all = nlohmann::json::array();
    std::string text;
    for (const auto& c : cals) {
      if (!c) continue;
      all.push_back(report_json(*c));
      text += report_table(*c) + "\n";
    }
    emit(ro->format, nlohmann::json{{"gpus", all}}, text);
  });

  struct FitOpts { std::string dir, gpu = "h200"; Format format = Format::table; };
  auto fo = std::make_shared<FitOpts>();
  auto* fit = cal->add_subcommand("fit", "Refit the cost model from a folder of measurement JSON and report it");
  fit->add_option("dir", fo->dir, "Folder of <family>.json measurement files")->required();
  fit->add_option("--gpu", fo->gpu, "GPU the measurements were taken on (default h200)");
  add_format_option(*fit, fo->format);
  fit->callback([fo] {
    const auto& gpu = hw::Catalog::global().gpu(fo->gpu);
    hw::Calibration c = hw::Calibration::from_dir(fo->dir, gpu);
    c.validate();
    emit(fo->format, report_json(c), report_table(c));
  });
  add_calibrate_e2e_command(*cal);
}

}  // namespace servesim::cli
