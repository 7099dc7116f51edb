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

namespace servesim::sim {

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
    std::vector<std::thread> workers;
    std::string failed;
    try {
      for (int t = 1; t < threads; ++t) workers.emplace_back([&pool] { pool.attach(); });
    } catch (const std::system_error& e) {
      failed = "cannot start worker thread " + std::to_string(workers.size() + 2) + " of " + std::to_string(threads) +
               " (" + e.what() + "); give a smaller " + threads_flag;
      pool.stop();
    }
    if (failed.empty()) pool.attach();   // the calling thread works too, until the last job stops the pool
    for (auto& w : workers) w.join();
    pool.join();
    if (!failed.empty()) throw Error(threads_flag, "", failed);
  }
  for (const auto& e : errors)
    if (e) std::rethrow_exception(e);   // the first failing job, in index order
}

}  // namespace servesim::sim
