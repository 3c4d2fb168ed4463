// "cpu-ref": the test backend that proves the seam. It behaves like a device with its own memory
// and its own arithmetic: prepare() makes an f32 copy of the matrix (dequantised once, the
// "upload"), matmul_batch() runs a plain f32 GEMM on that copy with f32 activations — no activation
// quantisation, no ISA kernels — so it is an independent path whose results agree with the CPU
// kernels within quantisation tolerance (exactly up to summation order for F32). Available only
// when named (OXI_DEVICE=cpu-ref, or tests): auto never picks it.
#include <algorithm>
#include <thread>
#include <vector>

#include "backend/backend.h"
#include "backend/router.h"
#include "core/error.h"
#include "kernels/thread_pool.h"

namespace oxi::backend {

namespace {

class CpuRefMatrix final : public DeviceMatrix {
 public:
  std::vector<float> w;  // [rows, cols] f32
  int64_t rows = 0, cols = 0;
};

// Σ_c a[c]·b[c] with 8 independent partial sums (lets the compiler vectorise without -ffast-math).
float dot(const float* a, const float* b, int64_t n) {
  float s[8] = {};
  int64_t c = 0;
  for (; c + 8 <= n; c += 8)
    for (int k = 0; k < 8; ++k) s[k] += a[c + k] * b[c + k];
  float t = ((s[0] + s[1]) + (s[2] + s[3])) + ((s[4] + s[5]) + (s[6] + s[7]));
  for (; c < n; ++c) t += a[c] * b[c];
  return t;
}

class CpuRef final : public Backend {
 public:
  std::string name() const override { return "cpu-ref"; }
  std::string description() const override {
    return "reference f32 GEMM on host memory, " + std::to_string(std::thread::hardware_concurrency()) + " threads";
  }
  // Everything but single-token decode, whatever the size: tests exercise the device path on tiny
  // models.
  SizeRule default_rule() const override { return {2, 0.0}; }

  std::unique_ptr<DeviceMatrix> prepare(const MatrixView& w) override {
    auto m = std::make_unique<CpuRefMatrix>();
    m->rows = w.rows;
    m->cols = w.cols;
    try {
      m->w.resize(static_cast<size_t>(w.rows * w.cols));
      for (int64_t r = 0; r < w.rows; ++r) dequantize_row(w, r, m->w.data() + r * w.cols);
    } catch (const Error&) {
      return nullptr;  // a type without a dequantiser: decline, the CPU keeps it
    } catch (const std::bad_alloc&) {
      return nullptr;  // "out of device memory"
    }
    return m;
  }

  bool matmul_batch(std::span<const Job> jobs, const float* x, int64_t n_tokens) override {
    for (const Job& j : jobs) {
      const auto& m = static_cast<const CpuRefMatrix&>(*j.w);
      const int64_t rows = m.rows, cols = m.cols;
      // Row chunks of 16 over the pool; every token per row chunk (the matrix chunk stays hot).
      parallel_for_chunked(rows, 16, [&](int64_t r0, int64_t r1) {
        for (int64_t t = 0; t < n_tokens; ++t)
          for (int64_t r = r0; r < r1; ++r) j.y[t * rows + r] = dot(x + t * cols, m.w.data() + r * cols, cols);
      });
    }
    return true;
  }
};

}  // namespace

std::unique_ptr<Backend> make_cpu_ref() { return std::make_unique<CpuRef>(); }

ProbeResult probe_cpu_ref() { return {make_cpu_ref(), 0, ""}; }

}  // namespace oxi::backend
