#include "sim/parallel.hpp"

#include <algorithm>
#include <atomic>
#include <exception>
#include <system_error>
#include <thread>
#include <vector>

#include <boost/asio/post.hpp>
#include <boost/asio/thread_pool.hpp>

#include "common/error.hpp"

#if defined(__linux__)
#include <pthread.h>
#include <sys/resource.h>
#include <unistd.h>

#include <cstdio>
#endif

namespace servesim::sim {
namespace {

// How many more threads the address-space limit (ulimit -v) leaves room for, at the default
// stack size (-1: no limit, or not known). Starting threads until one fails leaves the process
// with no address space at all, where glibc aborts rather than fails on some allocations.
long threads_that_fit() {
#if defined(__linux__)
  rlimit as{};
  if (getrlimit(RLIMIT_AS, &as) != 0 || as.rlim_cur == RLIM_INFINITY) return -1;
  long pages = 0;
  if (std::FILE* f = std::fopen("/proc/self/statm", "r")) {
    if (std::fscanf(f, "%ld", &pages) != 1) pages = -1;
    std::fclose(f);
  }
  pthread_attr_t attr;
  std::size_t stack = 0;
  if (pages < 0 || pthread_attr_init(&attr) != 0) return -1;
  pthread_attr_getstacksize(&attr, &stack);
  pthread_attr_destroy(&attr);
  const double used = double(pages) * double(sysconf(_SC_PAGESIZE));
  // Each thread: its stack and a guard page; the first ones also a malloc arena each (glibc
  // reserves 64 MiB of address space per arena, up to 8 x cores arenas). Keep 64 MiB for the work.
  const double MiB = 1024.0 * 1024.0;
  const double room = double(as.rlim_cur) - used - 64 * MiB;
  const long arenas = 8L * std::max(1L, long(std::thread::hardware_concurrency()));
  long t = 0;
  while (t < 100000 && double(t + 1) * (double(stack) + 4096.0) + double(std::min(t + 1, arenas)) * 64 * MiB <= room) ++t;
  return t;
#else
  return -1;
#endif
}

}  // namespace

void parallel_for(int n, int threads, const std::function<void(int)>& job, const std::string& threads_flag,
                  const std::function<void(int, int)>& progress) {
  if (n <= 0) return;
  if (threads <= 0) threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  threads = std::max(1, std::min(threads, n));
  std::vector<std::exception_ptr> errors(static_cast<std::size_t>(n));
  if (threads == 1) {
    for (int i = 0; i < n; ++i) {
      try {
        job(i);
      } catch (...) {
        errors[static_cast<std::size_t>(i)] = std::current_exception();
      }
      if (progress) progress(i + 1, n);
    }
  } else {
    // The pool starts no threads of its own: Boost.Asio's constructor, when a thread cannot be
    // created, waits forever on the ones it already started. Workers attach themselves instead,
    // so a creation failure stops the pool and is reported.
    boost::asio::thread_pool pool(0);
    std::atomic<int> left{n}, done{0};
    for (int i = 0; i < n; ++i)
      boost::asio::post(pool, [&, i] {
        try {
          job(i);
        } catch (...) {
          errors[static_cast<std::size_t>(i)] = std::current_exception();
        }
        const int d = ++done;
        if (progress) progress(d, n);
        if (--left == 0) pool.stop();
      });
    // Every worker waits at a gate until all are created: when one cannot be (the address space
    // is then nearly full), the others leave without running a job, since a job's first touch of
    // a thread_local in the Python module (dynamic TLS, allocated lazily) would make glibc abort
    // the process instead of failing.
    std::atomic<int> gate{0};   // 0 closed, 1 run, 2 leave
    std::vector<std::thread> workers;
    std::string failed;
    if (const long fit = threads_that_fit(); fit >= 0 && fit < threads - 1)
      throw Error(threads_flag, "",
                  "cannot start worker thread " + std::to_string(fit + 2) + " of " + std::to_string(threads) +
                      ": the address-space limit (ulimit -v) leaves room for " + std::to_string(fit + 1) +
                      " threads; give a smaller " + threads_flag);
    try {
      for (int t = 1; t < threads; ++t)
        workers.emplace_back([&pool, &gate] {
          gate.wait(0);
          if (gate.load() == 1) pool.attach();
        });
    } catch (const std::system_error& e) {
      failed = "cannot start worker thread " + std::to_string(workers.size() + 2) + " of " + std::to_string(threads) +
               " (" + e.what() + "); give a smaller " + threads_flag;
      pool.stop();
    }
    gate.store(failed.empty() ? 1 : 2);
    gate.notify_all();
    if (failed.empty()) pool.attach();   // the calling thread works too, until the last job stops the pool
    for (auto& w : workers) w.join();
    pool.join();
    if (!failed.empty()) throw Error(threads_flag, "", failed);
  }
  for (const auto& e : errors)
    if (e) std::rethrow_exception(e);   // the first failing job, in index order
}

}  // namespace servesim::sim
