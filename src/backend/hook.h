// The seam between the CPU kernels and an optional device backend (docs/backends.md).
//
// Header-only on purpose: kernels/matmul.cpp includes it without linking oxi_backend (which itself
// uses the kernels), and oxi_backend installs the hooks when a device is selected at start-up. With
// no device the cost of the seam is one atomic load per matmul call. Model code never includes it:
// it calls the kernels' matmul entry points, which come here.
#pragma once

#include <atomic>
#include <cstdint>

#include "kernels/matmul.h"

namespace oxi::device {

struct Hooks {
  // Runs every job y_j = x · W_jᵀ on the device and returns true, or returns false (no device worth
  // it, a matrix declined, the backend declined) and the CPU runs the whole batch. x: [n_tokens,
  // cols] f32 shared by all jobs; ys[j]: [n_tokens, ws[j].rows] f32.
  bool (*matmul)(const MatrixView* ws, float* const* ys, int n_jobs, const float* x, int64_t n_tokens);
  // Uploads matrices now instead of at first use (declines are remembered, not errors).
  void (*prepare)(const MatrixView* ws, int n);
  // Drops device copies of matrices whose data lies in [begin, end) (their memory is going away).
  void (*forget)(const void* begin, const void* end);
};

// Set by oxi_backend (backend/registry.cpp); null when no device is active.
inline std::atomic<const Hooks*> g_hooks{nullptr};

inline bool try_matmul(const MatrixView* ws, float* const* ys, int n_jobs, const float* x, int64_t n_tokens) {
  const Hooks* h = g_hooks.load(std::memory_order_acquire);
  return h && h->matmul(ws, ys, n_jobs, x, n_tokens);
}

inline void prepare(const MatrixView* ws, int n) {
  if (const Hooks* h = g_hooks.load(std::memory_order_acquire)) h->prepare(ws, n);
}

inline void forget(const void* begin, const void* end) {
  if (const Hooks* h = g_hooks.load(std::memory_order_acquire)) h->forget(begin, end);
}

}  // namespace oxi::device
