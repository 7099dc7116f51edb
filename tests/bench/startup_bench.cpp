// Whole-process cost of the CLI: `servesim simulate` of the default scenario (Nemotron 3 Super FP8
// on 8 x H200, 1k/1k, 64 clients) as a user runs it, start-up included (reading the embedded
// tables and fitting the kernel families the step model asks for). Each iteration spawns the
// servesim binary next to this one; the time reported is the child's CPU time (user + sys, from
// wait4), robust to other work on the host; counters: wall seconds per run.
#include <benchmark/benchmark.h>

#include <fcntl.h>
#include <spawn.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <string>
#include <vector>

extern char** environ;

namespace {

std::string servesim_binary() {
  return (std::filesystem::read_symlink("/proc/self/exe").parent_path() / "servesim").string();
}

// Runs `servesim simulate --requests N` once, output to /dev/null; its CPU seconds, or < 0 on failure.
double run_once(const std::string& bin, const std::string& requests, double& wall_s) {
  std::vector<std::string> args{bin, "simulate", "--requests", requests, "--format", "json"};
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
  const auto t0 = std::chrono::steady_clock::now();
  pid_t pid = 0;
  const int err = posix_spawn(&pid, bin.c_str(), &fa, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&fa);
  if (err != 0) return -1;
  int status = 0;
  struct rusage ru {};
  if (wait4(pid, &status, 0, &ru) != pid || !WIFEXITED(status) || WEXITSTATUS(status) != 0) return -1;
  wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  auto sec = [](const timeval& t) { return double(t.tv_sec) + 1e-6 * double(t.tv_usec); };
  return sec(ru.ru_utime) + sec(ru.ru_stime);
}

// arg = requests: 64 (start-up dominates; the aim is <= 50 ms) and 10,000 (<= 0.2 s).
void BM_StartUp(benchmark::State& state) {
  const std::string bin = servesim_binary(), requests = std::to_string(state.range(0));
  double wall = 0, walls = 0;
  for (auto _ : state) {
    const double cpu = run_once(bin, requests, wall);
    if (cpu < 0) {
      state.SkipWithError(("cannot run " + bin + " simulate").c_str());
      break;
    }
    state.SetIterationTime(cpu);
    walls += wall;
  }
  state.counters["wall_s"] = benchmark::Counter(walls, benchmark::Counter::kAvgIterations);
}
BENCHMARK(BM_StartUp)->Arg(64)->Arg(10000)->UseManualTime()->Unit(benchmark::kMillisecond);

}  // namespace
