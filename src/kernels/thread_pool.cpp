#include "kernels/thread_pool.h"

#include <exception>
#include <mutex>
#include <thread>
#include <vector>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define OXI_PAUSE() _mm_pause()
#else
#define OXI_PAUSE() ((void)0)
#endif

namespace oxi {
namespace {

thread_local bool t_in_job = false;

class Pool {
 public:
  ~Pool() { resize(1); }

  int size() const { return n_threads_; }

  void resize(int n) {
    if (n < 1) n = 1;
    if (n == n_threads_ && !workers_.empty() == (n > 1)) return;
    // Stop the current workers.
    if (!workers_.empty()) {
      stop_.store(true, std::memory_order_relaxed);
      generation_.fetch_add(1, std::memory_order_release);
      generation_.notify_all();
      for (auto& t : workers_) t.join();
      workers_.clear();
      stop_.store(false, std::memory_order_relaxed);
    }
    n_threads_ = n;
    const uint32_t gen = generation_.load(std::memory_order_relaxed);
    for (int i = 1; i < n; ++i) workers_.emplace_back([this, i, gen] { worker(i, gen); });
  }

  void run(ParallelFn fn, void* ctx) {
    const int nth = n_threads_;
    if (nth == 1 || t_in_job) {
      const bool was = t_in_job;
      t_in_job = true;
      try {
        fn(ctx, 0, 1);
      } catch (...) {
        t_in_job = was;
        throw;
      }
      t_in_job = was;
      return;
    }
    std::lock_guard<std::mutex> lock(run_mutex_);  // one job at a time
    fn_ = fn;
    ctx_ = ctx;
    error_ = nullptr;
    pending_.store(nth - 1, std::memory_order_relaxed);
    generation_.fetch_add(1, std::memory_order_release);
    generation_.notify_all();
    execute(0, nth);
    // Wait for the workers: spin, then yield.
    for (int spins = 0; pending_.load(std::memory_order_acquire) != 0; ++spins) {
      if (spins < 20000) {
        OXI_PAUSE();
      } else {
        std::this_thread::yield();
      }
    }
    if (error_) std::rethrow_exception(error_);
  }

 private:
  void execute(int ith, int nth) {
    t_in_job = true;
    try {
      fn_(ctx_, ith, nth);
    } catch (...) {
      std::lock_guard<std::mutex> lock(error_mutex_);
      if (!error_) error_ = std::current_exception();
    }
    t_in_job = false;
  }

  void worker(int ith, uint32_t seen) {
    for (;;) {
      // Spin a while for the next job (decode issues hundreds of small jobs per token), then sleep.
      uint32_t g;
      int spins = 0;
      while ((g = generation_.load(std::memory_order_acquire)) == seen) {
        if (++spins < 100000) {
          OXI_PAUSE();
        } else {
          generation_.wait(seen, std::memory_order_acquire);
        }
      }
      seen = g;
      if (stop_.load(std::memory_order_relaxed)) return;
      execute(ith, n_threads_);
      pending_.fetch_sub(1, std::memory_order_acq_rel);
    }
  }

  int n_threads_ = 1;
  std::vector<std::thread> workers_;
  std::mutex run_mutex_;
  std::mutex error_mutex_;
  std::atomic<uint32_t> generation_{0};
  std::atomic<int> pending_{0};
  std::atomic<bool> stop_{false};
  ParallelFn fn_ = nullptr;
  void* ctx_ = nullptr;
  std::exception_ptr error_;
};

Pool& pool() {
  static Pool* p = [] {
    auto* q = new Pool();  // never destroyed: workers may outlive static destruction order
    unsigned hc = std::thread::hardware_concurrency();
    q->resize(hc ? static_cast<int>(hc) : 1);
    return q;
  }();
  return *p;
}

}  // namespace

void set_num_threads(int n) {
  if (n <= 0) {
    unsigned hc = std::thread::hardware_concurrency();
    n = hc ? static_cast<int>(hc) : 1;
  }
  pool().resize(n);
}

int num_threads() { return pool().size(); }

void parallel_run_raw(ParallelFn fn, void* ctx) { pool().run(fn, ctx); }

bool in_parallel_region() { return t_in_job; }

}  // namespace oxi
