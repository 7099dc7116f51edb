#include "sim/cli/plot_runner.hpp"

#include <unistd.h>

#include <string>
#include <vector>

#include <boost/process.hpp>

#include "common/error.hpp"

namespace servesim::cli {
namespace {

constexpr const char* kPython = "/usr/bin/python3";

std::string self_dir() {
  char buf[4096];
  const ssize_t n = readlink("/proc/self/exe", buf, sizeof(buf) - 1);
  if (n <= 0) return ".";
  std::string p(buf, static_cast<std::size_t>(n));
  return p.substr(0, p.find_last_of('/'));
}

}  // namespace

void draw_charts(const std::string& sweep_json, const std::string& plan_json, const std::string& chart) {
  run_plotter({sweep_json, "--plan", plan_json, "-o", chart});
}

void run_plotter(const std::vector<std::string>& plot_args, const std::string& flag) {
  try {
    run_python_module("servesim.plot", plot_args, flag);
  } catch (const Error& e) {
    throw Error(e.where(), e.field(), e.reason() + " (charts not written)");
  }
}

void run_python_module(const std::string& module, const std::vector<std::string>& module_args, const std::string& flag) {
  namespace bp = boost::process;
  std::vector<std::string> args{"-m", module};
  args.insert(args.end(), module_args.begin(), module_args.end());
  bp::environment env = boost::this_process::environment();
  env["PYTHONPATH"] = self_dir() + "/python";
  env["MPLBACKEND"] = "Agg";
  const std::string prefix = module + ": error: ";
  std::string last, reported, line;
  int rc = 0;
  try {
    bp::ipstream err;
    bp::child c(bp::exe = kPython, bp::args = args, env, bp::std_in < bp::null, bp::std_out > bp::null, bp::std_err > err);
    // The module reports a failure as one "MODULE: error: " line on stderr; else keep the last line.
    while (std::getline(err, line)) {
      if (!line.empty()) last = line;
      if (line.rfind(prefix, 0) == 0) reported = line.substr(prefix.size());
    }
    c.wait();
    rc = c.exit_code();
  } catch (const std::exception& e) {   // bp::process_error: python3 missing, fork failed, ...
    throw Error(flag, "", std::string("cannot run ") + kPython + " -m " + module + ": " + e.what());
  }
  if (rc != 0) {
    if (!reported.empty()) last = reported;
    throw Error(flag, "", last.empty() ? kPython + std::string(" -m ") + module + " failed (exit status " + std::to_string(rc) + ")"
                                       : last);
  }
}

}  // namespace servesim::cli
