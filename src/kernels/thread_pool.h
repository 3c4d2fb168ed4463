// A global, low-latency thread pool for the kernels and for model code (attention heads, norms…).
// Workers spin briefly after each job, then sleep on a futex (std::atomic::wait), so back-to-back
// matmuls in decode do not pay a wake-up each time. The calling thread takes part as thread 0.
// Nested calls (from inside a job) run serially on the calling thread.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <type_traits>
#include <utility>

namespace oxi {

// Number of threads jobs use (callers included). n <= 0: std::thread::hardware_concurrency().
// Not to be called while a job runs.
void set_num_threads(int n);
int num_threads();

// Runs fn(ith, nth) on nth = num_threads() threads (ith = 0 is the caller) and returns when all
// have finished. An exception thrown by fn is rethrown here (the first one).
using ParallelFn = void (*)(void* ctx, int ith, int nth);
void parallel_run_raw(ParallelFn fn, void* ctx);

template <class F>
void parallel_run(F&& fn) {
  using Fn = std::remove_reference_t<F>;
  parallel_run_raw([](void* c, int ith, int nth) { (*static_cast<Fn*>(c))(ith, nth); },
                   const_cast<void*>(static_cast<const void*>(&fn)));
}

// True while the current thread is running a pool job (nested parallel calls run serially).
bool in_parallel_region();

// fn(i) for every i in [0, n), shared dynamically among the threads.
template <class F>
void parallel_for(int64_t n, F&& fn) {
  if (n <= 0) return;
  if (n == 1 || num_threads() == 1 || in_parallel_region()) {
    for (int64_t i = 0; i < n; ++i) fn(i);
    return;
  }
  std::atomic<int64_t> next{0};
  parallel_run([&](int, int) {
    for (int64_t i; (i = next.fetch_add(1, std::memory_order_relaxed)) < n;) fn(i);
  });
}

// fn(begin, end) over [0, n) in chunks of about `grain` items, shared dynamically.
template <class F>
void parallel_for_chunked(int64_t n, int64_t grain, F&& fn) {
  if (n <= 0) return;
  grain = std::max<int64_t>(grain, 1);
  const int64_t chunks = (n + grain - 1) / grain;
  parallel_for(chunks, [&](int64_t c) { fn(c * grain, std::min(n, (c + 1) * grain)); });
}

}  // namespace oxi
