// Draws `servesim plan --plot` charts by running `/usr/bin/python3 -m servesim.plot` (the
// package built beside the binary) through Boost.Process with an argument vector: no shell ever
// parses a path, so any file name is passed through as it is.
#pragma once
#include <string>
#include <vector>

namespace servesim::cli {

// Writes `chart` (a .png) and its "-throughput.png" sibling from the sweep and plan JSON files.
// A failure is one servesim::Error line ("--plot: <the plotter's one-line reason>").
void draw_charts(const std::string& sweep_json, const std::string& plan_json, const std::string& chart);

// Runs `/usr/bin/python3 -m servesim.plot ARGS...` (no shell); a failure is one Error on `flag`.
void run_plotter(const std::vector<std::string>& args, const std::string& flag = "--plot");

}  // namespace servesim::cli
