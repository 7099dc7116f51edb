// Runs independent jobs 0..n-1 on worker threads (Boost.Asio's thread_pool). Results never
// depend on the thread count: each job writes only its own slot. A worker thread that cannot be
// created (address-space, pids or nproc limits) becomes a servesim::Error naming `threads_flag`,
// never std::terminate; a failing job's exception is rethrown for the lowest failing index, so
// the error is the same at any thread count.
#pragma once
#include <functional>
#include <string>

namespace servesim::sim {

// threads <= 0: all cores. At most n threads are started (the calling thread is one of them).
// progress(done, n), if given, is called after each job, from the thread that ran it.
void parallel_for(int n, int threads, const std::function<void(int)>& job, const std::string& threads_flag,
                  const std::function<void(int, int)>& progress = {});

}  // namespace servesim::sim
