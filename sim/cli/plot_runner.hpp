// Runs modules of the servesim Python package (the one built beside the binary, in
// <binary dir>/python) as `/usr/bin/python3 -m MODULE ARGS...` through Boost.Process with an
// argument vector: no shell ever parses a path or an address, so any is passed through as it is.
// The charts (`--plot`: servesim.plot) and the Dask search (`--dask`: servesim.dask_search).
#pragma once
#include <string>
#include <vector>

namespace servesim::cli {

// --plot's paths: "x.png" and "x" both name the chart x.png; the throughput chart
// (x-throughput.png) and the data files (x-sweep.json, ...) sit beside it, named from `base`.
struct PlotPaths {
  std::string chart, base;
};
PlotPaths plot_paths(const std::string& plot);

// Writes `chart` (a .png) and its "-throughput.png" sibling from the sweep and plan JSON files.
// A failure is one servesim::Error line ("--plot: <the plotter's one-line reason>").
void draw_charts(const std::string& sweep_json, const std::string& plan_json, const std::string& chart);

// Runs `/usr/bin/python3 -m servesim.plot ARGS...` (no shell); a failure is one Error on `flag`.
void run_plotter(const std::vector<std::string>& args, const std::string& flag = "--plot");

// Runs `/usr/bin/python3 -m MODULE ARGS...` and waits for it. A failure (python3 missing, non-zero
// exit) is one servesim::Error on `flag` carrying the module's "MODULE: error: <reason>" line from
// stderr (the package's modules report a failure that way), else its last stderr line.
void run_python_module(const std::string& module, const std::vector<std::string>& args, const std::string& flag);

}  // namespace servesim::cli
