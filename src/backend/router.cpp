// The router behind backend/hook.h: the active backend, its device copies keyed by matrix, the size
// rule, and the counters. Decode calls cost two atomic loads and a few multiplications before the
// CPU takes them; only calls the size rule sends to the device take the lock.
#include "backend/router.h"

#include <atomic>
#include <cstring>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "backend/backend.h"
#include "backend/hook.h"

namespace oxi::backend {

namespace {

// A cached device copy is found by the matrix's data pointer and shape; a content fingerprint
// guards against a new matrix allocated where a freed one was (models reloaded, quantised-at-load
// buffers reused by malloc) when nobody called device::forget.
struct Key {
  const uint8_t* data;
  DType dtype;
  int64_t rows, cols;
  uint64_t row_bytes;
  bool operator==(const Key&) const = default;
};
struct KeyHash {
  size_t operator()(const Key& k) const {
    uint64_t h = reinterpret_cast<uintptr_t>(k.data) * 0x9E3779B97F4A7C15ull;
    h ^= static_cast<uint64_t>(k.rows) * 0xC2B2AE3D27D4EB4Full + static_cast<uint64_t>(k.cols);
    return static_cast<size_t>(h ^ (h >> 29));
  }
};
struct Entry {
  std::shared_ptr<DeviceMatrix> dev;  // null: the backend declined this matrix
  uint64_t fingerprint = 0;
};

Key key_of(const MatrixView& w) { return {w.data, w.dtype, w.rows, w.cols, w.row_bytes}; }

// 16 words sampled evenly over the matrix's bytes (first and last included), mixed.
uint64_t fingerprint(const MatrixView& w) {
  const uint64_t total = static_cast<uint64_t>(w.rows - 1) * w.row_bytes + w.row_bytes;
  uint64_t h = 0xCBF29CE484222325ull;
  if (total < 8) return h;
  for (uint64_t i = 0; i < 16; ++i) {
    uint64_t v;
    std::memcpy(&v, w.data + (total - 8) * i / 15, 8);
    h = (h ^ v) * 0x100000001B3ull;
    h ^= h >> 31;
  }
  return h;
}

struct Router {
  std::mutex mu;
  std::shared_ptr<Backend> backend;  // shared: a call in flight keeps it alive across re-selection
  std::unordered_map<Key, Entry, KeyHash> cache;
  std::atomic<int64_t> min_tokens{SizeRule{}.min_tokens};
  std::atomic<double> min_flops{SizeRule{}.min_flops};
  std::atomic<uint64_t> prepared{0}, prepare_declined{0}, device_batches{0}, device_jobs{0}, small_batches{0},
      declined_batches{0};
};

Router& R() {
  static Router r;
  return r;
}

// Looks up (or uploads) w's device copy; the lock is held. Null when declined.
std::shared_ptr<DeviceMatrix> lookup_locked(Router& r, const MatrixView& w) {
  const Key k = key_of(w);
  const uint64_t fp = fingerprint(w);
  auto it = r.cache.find(k);
  if (it != r.cache.end() && it->second.fingerprint == fp) return it->second.dev;
  std::shared_ptr<DeviceMatrix> dev = r.backend->prepare(w);
  (dev ? r.prepared : r.prepare_declined).fetch_add(1, std::memory_order_relaxed);
  r.cache[k] = Entry{dev, fp};
  return dev;
}

bool hook_matmul(const MatrixView* ws, float* const* ys, int n_jobs, const float* x, int64_t n_tokens) {
  Router& r = R();
  double flops = 0;
  for (int j = 0; j < n_jobs; ++j) flops += 2.0 * static_cast<double>(ws[j].rows) * ws[j].cols * n_tokens;
  const SizeRule rule{r.min_tokens.load(std::memory_order_relaxed), r.min_flops.load(std::memory_order_relaxed)};
  if (!rule.worth(n_tokens, flops)) {
    r.small_batches.fetch_add(1, std::memory_order_relaxed);
    return false;
  }
  std::shared_ptr<Backend> b;
  std::vector<std::shared_ptr<DeviceMatrix>> devs(static_cast<size_t>(n_jobs));
  {
    std::lock_guard<std::mutex> lock(r.mu);
    if (!r.backend) return false;
    b = r.backend;
    for (int j = 0; j < n_jobs; ++j) {
      devs[static_cast<size_t>(j)] = lookup_locked(r, ws[j]);
      if (!devs[static_cast<size_t>(j)]) {
        r.declined_batches.fetch_add(1, std::memory_order_relaxed);
        return false;
      }
    }
  }
  std::vector<Job> jobs(static_cast<size_t>(n_jobs));
  for (int j = 0; j < n_jobs; ++j)
    jobs[static_cast<size_t>(j)] = Job{devs[static_cast<size_t>(j)].get(), &ws[j], ys[j]};
  if (!b->matmul_batch(jobs, x, n_tokens)) {
    r.declined_batches.fetch_add(1, std::memory_order_relaxed);
    return false;
  }
  r.device_batches.fetch_add(1, std::memory_order_relaxed);
  r.device_jobs.fetch_add(static_cast<uint64_t>(n_jobs), std::memory_order_relaxed);
  return true;
}

void hook_prepare(const MatrixView* ws, int n) {
  Router& r = R();
  std::lock_guard<std::mutex> lock(r.mu);
  if (!r.backend) return;
  for (int i = 0; i < n; ++i)
    if (ws[i].data && ws[i].rows > 0 && ws[i].cols > 0) lookup_locked(r, ws[i]);
}

void hook_forget(const void* begin, const void* end) {
  Router& r = R();
  std::lock_guard<std::mutex> lock(r.mu);
  const auto* b = static_cast<const uint8_t*>(begin);
  const auto* e = static_cast<const uint8_t*>(end);
  std::erase_if(r.cache, [&](const auto& kv) { return kv.first.data >= b && kv.first.data < e; });
}

const device::Hooks kHooks{hook_matmul, hook_prepare, hook_forget};

}  // namespace

void router_activate(std::unique_ptr<Backend> b, const SizeRule& rule) {
  Router& r = R();
  device::g_hooks.store(nullptr, std::memory_order_release);
  {
    std::lock_guard<std::mutex> lock(r.mu);
    r.cache.clear();
    r.backend = std::move(b);
    r.min_tokens.store(rule.min_tokens);
    r.min_flops.store(rule.min_flops);
  }
  if (r.backend) device::g_hooks.store(&kHooks, std::memory_order_release);
}

Backend* active() {
  std::lock_guard<std::mutex> lock(R().mu);
  return R().backend.get();
}

std::shared_ptr<nn::Device> active_block_device() {
  std::lock_guard<std::mutex> lock(R().mu);  // the backend stays while its device is made
  return R().backend ? R().backend->block_device() : nullptr;
}

SizeRule active_rule() { return {R().min_tokens.load(), R().min_flops.load()}; }

void set_rule(const SizeRule& rule) {
  R().min_tokens.store(rule.min_tokens);
  R().min_flops.store(rule.min_flops);
}

Stats stats() {
  const Router& r = R();
  return {r.prepared.load(),    r.prepare_declined.load(), r.device_batches.load(),
          r.device_jobs.load(), r.small_batches.load(),    r.declined_batches.load()};
}

namespace {
std::atomic<int> g_leases{0};
}

WeightsLease::WeightsLease() { g_leases.fetch_add(1); }

WeightsLease::~WeightsLease() {
  if (g_leases.fetch_sub(1) == 1) {
    std::lock_guard<std::mutex> lock(R().mu);
    R().cache.clear();
  }
}

void reset_stats() {
  Router& r = R();
  for (auto* c :
       {&r.prepared, &r.prepare_declined, &r.device_batches, &r.device_jobs, &r.small_batches, &r.declined_batches})
    c->store(0);
}

}  // namespace oxi::backend
