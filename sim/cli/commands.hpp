// The `servesim` CLI: each group of subcommands lives in its own cmd_*.cpp and registers itself
// on the root app through one of the add_* functions below (called from main.cpp).
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "sim/api/api.hpp"
#include "sim/scenario.hpp"

namespace servesim::sim {
struct SweepSpec;
}

namespace servesim::cli {

enum class Format { table, json };

// Adds `--format table|json` (default table) to a subcommand.
void add_format_option(CLI::App& cmd, Format& format);
// Prints `json` (pretty, 2 spaces) or `table_text` as asked (control characters in a table as '?').
void emit(Format format, const nlohmann::json& json, const std::string& table_text);
// `s` with control characters other than newline and tab replaced by '?' (terminal output).
std::string printable(std::string s);
// What drives a command's memory, for the out-of-memory line (set by the command before its run).
extern std::string memory_hint;
// A check for whole-number flags that CLI11 would clamp silently (a seed beyond 2^63 - 1 became
// 9223372036854775807): out-of-range values are refused with the flag's name.
const CLI::Validator& int64_range();
// A check for --calibration: a readable regular file, else "--calibration: PATH: why; give a profile
// file (servesim calibrate e2e --output)" on every subcommand that takes one.
const CLI::Validator& profile_file();
// "(defaults: a; b)\n" for the notes of values the resolver chose (sim/resolve.hpp), "" if none.
std::string defaults_line(const nlohmann::json& notes);

// A progress bar on stderr for long runs: only when stderr is a terminal and not `quiet`
// (otherwise an empty function). Thread-safe; the bar ends with a newline at done == total.
std::function<void(std::int64_t done, std::int64_t total)> progress_bar(bool quiet, const std::string& unit);
// Adds `--quiet` (no progress bar) to a subcommand.
void add_quiet_flag(CLI::App& cmd, bool& quiet);
// --threads N of every command that runs points in parallel: 0 (all cores) or more.
void add_threads_option(CLI::App& cmd, int& threads);

void add_list_command(CLI::App& app);       // cmd_list.cpp: list gpus|instances|models
void add_memory_commands(CLI::App& app);    // cmd_memory.cpp: memory, min-gpus
void add_op_commands(CLI::App& app);        // cmd_op.cpp: op gemm|grouped-gemm|attention-*|mamba-*|collective
void add_calibrate_commands(CLI::App& app); // cmd_calibrate.cpp: calibrate report|fit
void add_calibrate_e2e_command(CLI::App& calibrate);  // cmd_calibrate_e2e.cpp: calibrate e2e
void add_step_command(CLI::App& app);       // cmd_step.cpp: step
void add_simulate_commands(CLI::App& app);  // cmd_simulate.cpp: simulate, sweep
void add_plan_command(CLI::App& app);       // cmd_plan.cpp: plan
void add_validate_command(CLI::App& app);   // cmd_validate.cpp: validate
void add_search_command(CLI::App& app);     // cmd_search.cpp: search
void add_nccl_command(CLI::App& app);       // cmd_nccl.cpp: nccl
void add_recommend_command(CLI::App& app);  // cmd_search.cpp: recommend
void add_planner_command(CLI::App& app);    // cmd_planner.cpp: planner

// simulate's model / GPU / engine / workload / router flags, for other subcommands (cmd_simulate.cpp).
struct ScenarioFlags;
std::shared_ptr<ScenarioFlags> add_scenario_flags(CLI::App& cmd);
sim::Scenario scenario_from_flags(const ScenarioFlags& flags);

// --gap-ms of plan, search and recommend: its help, and what it adds to their SLO line
// (", token gap p90 <= 200 ms"; "" without one). cmd_plan.cpp.
std::string gap_ms_help();
std::string gap_slo_text(const std::string& statistic, double gap_ms);
// --headroom of plan, search and recommend: its help, and what it adds to their target in words
// (" (sized for 48 requests/s, 28800 output tok/s: 20 % headroom)"; "" without one). cmd_plan.cpp.
std::string headroom_help();
std::string sized_text(double headroom, double sized_tps, double sized_rps);
// A result's spare_pct ({"lo", "hi"}, % over the target) as a cell ("0-17", ">= 5") and the legend
// line under a table of them. cmd_plan.cpp.
std::string spare_cell(const nlohmann::json& spare_pct);
std::string spare_legend(bool open_loop);
// The footnote of a table whose $/hour is "-": which of `instances` ("a" or "a + b") no source
// prices, and the --price that gives one; "" when every one is priced.
std::string unpriced_note(const std::vector<std::string>& instances);

// sweep --vs (cmd_whatif.cpp): the base scenario first, then each variant, labelled ("base", "A",
// "B", ...) with its --vs flags, swept over the same spec; fmt table, csv or json to stdout or
// `output`; `plot` the chart with a curve per scenario ("" none).
struct WhatIf {
  std::string label, flags;
  sim::Scenario scenario;
};
void run_what_if(const std::vector<WhatIf>& runs, const sim::SweepSpec& spec, const std::string& fmt,
                 const std::string& output, const std::string& plot, int threads, bool quiet);

// Shared by search and recommend (cmd_search.cpp).
void add_search_options(CLI::App& cmd, api::SearchArgs& args);
std::string search_table(const nlohmann::json& search_result);
// Writes through a temporary file and a rename: a reader never sees half a file.
void write_atomically(const std::string& path, const std::string& text);
// A progress bar on stderr, drawn only when stderr is a terminal; ends its line when destroyed.
class SearchBar {
 public:
  SearchBar();
  ~SearchBar();
  void update(int simulated, int pending, int pruned, int total);

 private:
  bool tty_ = false, shown_ = false;
};

}  // namespace servesim::cli
