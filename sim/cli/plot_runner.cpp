#include "sim/cli/plot_runner.hpp"

#include "common/text.hpp"

#include <signal.h>
#include <sys/prctl.h>
#include <unistd.h>

#include <string>
#include <vector>

#include <boost/process.hpp>
#include <boost/process/extend.hpp>

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

// The child dies with servesim: killed (even with SIGKILL) or not, servesim never leaves a
// plotter or a Dask client running on, writing a chart after its parent has gone.
struct DieWithParent : boost::process::extend::handler {
  pid_t parent = ::getpid();
  template <class Exec>
  void on_exec_setup(Exec&) const {
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (::getppid() != parent) ::_exit(127);   // the parent died before prctl
  }
};

}  // namespace

PlotPaths plot_paths(const std::string& plot) {
  const bool png = plot.size() > 4 && text::lower(plot.substr(plot.size() - 4)) == ".png";
  const std::string base = png ? plot.substr(0, plot.size() - 4) : plot;
  return {png ? plot : plot + ".png", base};
}

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
  // -P: the current folder is not put on sys.path, so an argparse.py or json.py in the folder
  // servesim runs from (an unpacked artefact folder, a cloned repository) is never imported.
  std::vector<std::string> args{"-P", "-m", module};
  args.insert(args.end(), module_args.begin(), module_args.end());
  bp::environment env = boost::this_process::environment();
  env["PYTHONPATH"] = self_dir() + "/python";
  env["MPLBACKEND"] = "Agg";
  const std::string prefix = module + ": error: ";
  std::string last, reported, line;
  int rc = 0;
  try {
    bp::ipstream err;
    bp::child c(bp::exe = kPython, bp::args = args, env, bp::std_in < bp::null, bp::std_out > bp::null, bp::std_err > err, DieWithParent{});
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
