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

// Hardware threads; 1 where threads cannot be created (wasm without pthreads).
int hw_threads() {
#if defined(__EMSCRIPTEN__) && !defined(__EMSCRIPTEN_PTHREADS__)
  return 1;
#else
  const unsigned hc = std::thread::hardware_concurrency();
  return hc ? static_cast<int>(hc) : 1;
#endif
}

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
      slots_.store(slots_.load() | 0xffffffffu);
    }
    n_threads_ = n;
    nth_max_ = n;
    slots_.store(slots_.load() | 0xffffffffu);  // no open job
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
    nth_ = nth;
    error_ = nullptr;
    done_.store(0, std::memory_order_relaxed);
    // Publish the job: slots 0..nth-1 are claimed by whoever comes first. The caller claims too,
    // so a worker the OS has descheduled never holds the job up: its slot runs on the caller.
    const uint64_t job = (slots_.load(std::memory_order_relaxed) >> 32) + 1;
    slots_.store(job << 32, std::memory_order_release);
    generation_.fetch_add(1, std::memory_order_release);
    generation_.notify_all();
    claim_and_run();
    // Wait for slots claimed by workers: spin, then yield.
    for (int spins = 0; done_.load(std::memory_order_acquire) != nth; ++spins) {
      if (spins < 20000) {
        OXI_PAUSE();
      } else {
        std::this_thread::yield();
      }
    }
    if (error_) std::rethrow_exception(error_);
  }

 private:
  // Claims slots of the current job until none is left, running each.
  void claim_and_run() {
    uint64_t w = slots_.load(std::memory_order_acquire);
    for (;;) {
      const uint32_t slot = static_cast<uint32_t>(w);
      if (slot >= static_cast<uint32_t>(nth_max_)) return;
      if (!slots_.compare_exchange_weak(w, w + 1, std::memory_order_acq_rel, std::memory_order_acquire)) continue;
      // The job cannot change before done_ reaches nth, which needs this slot: fields are stable.
      const int nth = nth_;
      if (static_cast<int>(slot) < nth) {
        execute(static_cast<int>(slot), nth);
        done_.fetch_add(1, std::memory_order_acq_rel);
      }
      w = slots_.load(std::memory_order_acquire);
    }
  }

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

  void worker(int, uint32_t seen) {
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
      claim_and_run();
    }
  }

  int n_threads_ = 1;
  int nth_ = 1;
  int nth_max_ = 1;  // slots per job (= n_threads_ while workers exist)
  std::atomic<uint64_t> slots_{0};  // job id << 32 | next unclaimed slot
  std::atomic<int> done_{0};
  std::vector<std::thread> workers_;
  std::mutex run_mutex_;
  std::mutex error_mutex_;
  std::atomic<uint32_t> generation_{0};
  std::atomic<bool> stop_{false};
  ParallelFn fn_ = nullptr;
  void* ctx_ = nullptr;
  std::exception_ptr error_;
};

Pool& pool() {
  static Pool* p = [] {
    auto* q = new Pool();  // never destroyed: workers may outlive static destruction order
    q->resize(hw_threads());
    return q;
  }();
  return *p;
}

}  // namespace

void set_num_threads(int n) {
  if (n <= 0) n = hw_threads();
#if defined(__EMSCRIPTEN__) && !defined(__EMSCRIPTEN_PTHREADS__)
  n = 1;
#endif
  pool().resize(n);
}

int num_threads() { return pool().size(); }

void parallel_run_raw(ParallelFn fn, void* ctx) { pool().run(fn, ctx); }

bool in_parallel_region() { return t_in_job; }

}  // namespace oxi
