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
  namespace bp = boost::process;
  std::vector<std::string> args{"-m", "servesim.plot"};
  args.insert(args.end(), plot_args.begin(), plot_args.end());
  bp::environment env = boost::this_process::environment();
  env["PYTHONPATH"] = self_dir() + "/python";
  env["MPLBACKEND"] = "Agg";
  std::string last, line;
  int rc = 0;
  try {
    bp::ipstream err;
    bp::child c(bp::exe = kPython, bp::args = args, env, bp::std_in < bp::null, bp::std_out > bp::null, bp::std_err > err);
    // Keep the last non-empty line: the plotter reports a failure as one line on stderr.
    while (std::getline(err, line))
      if (!line.empty()) last = line;
    c.wait();
    rc = c.exit_code();
  } catch (const std::exception& e) {   // bp::process_error: python3 missing, fork failed, ...
    throw Error(flag, "", std::string("cannot run ") + kPython + " -m servesim.plot: " + e.what());
  }
  if (rc != 0) {
    const std::string prefix = "servesim.plot: error: ";
    if (last.rfind(prefix, 0) == 0) last = last.substr(prefix.size());
    throw Error(flag, "", (last.empty() ? "python3 -m servesim.plot failed" : last) + " (charts not written)");
  }
}

}  // namespace servesim::cli
