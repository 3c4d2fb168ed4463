// Times one 1024 × 1024 matmul per weight type on the Vulkan device and on the CPU device, n = 1 and
// 64 (write x, matmul, read y; best of 5), and a call's fixed cost, and prints them — numbers for docs/backends.md, no bound
// asserted (on lavapipe the "device" is the same CPU, emulated). Skipped without a Vulkan device.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>

#include "device_pair.h"

namespace {

using namespace oxi_device_test;

double best_ms(Device& d, const oxi::nn::Weight& w, Ref x, Ref y, const float* xh, float* yh, int64_t n) {
  double best = 1e30;
  for (int rep = 0; rep < 5; ++rep) {
    const auto t0 = std::chrono::steady_clock::now();
    d.write(x, xh, n * w.cols);
    const oxi::nn::Weight* ws[1] = {&w};
    const Ref ys[1] = {y};
    d.matmul(ws, ys, x, n);
    d.read(y, yh, n * w.rows);
    best = std::min(best, std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
  }
  return best;
}

TEST(VulkanTiming, Matmul1024Squared) {
  std::string why;
  std::shared_ptr<Device> vk = vulkan_device(&why);
  if (!vk) GTEST_SKIP() << "no Vulkan device: " << why;
  std::shared_ptr<Device> cpu = oxi::nn::make_cpu_device();
  const int64_t rows = 1024, cols = 1024;
  const auto wf = randn(static_cast<size_t>(rows * cols), 80, 0.05f);
  const auto xh = randn(static_cast<size_t>(64 * cols), 81);
  std::vector<float> yv(static_cast<size_t>(64 * rows)), yc(yv.size());
  for (oxi::DType t : {oxi::DType::Q4_0, oxi::DType::Q8_0, oxi::DType::Q4_K, oxi::DType::F16}) {
    const uint64_t rb = *oxi::dtype_row_bytes(t, cols);
    std::vector<uint8_t> bytes(rb * rows);
    for (int64_t r = 0; r < rows; ++r) oxi::quantize_row(t, wf.data() + r * cols, cols, bytes.data() + rb * static_cast<uint64_t>(r));
    const oxi::MatrixView v{t, rows, cols, bytes.data(), rb};
    for (int64_t n : {1, 64}) {
      double ms[2];
      for (int k = 0; k < 2; ++k) {
        Device& d = k == 0 ? *vk : *cpu;
        auto w = d.upload(v);
        auto xb = d.alloc(n * cols), yb = d.alloc(n * rows);
        ms[k] = best_ms(d, *w, Ref{xb.get(), 0}, Ref{yb.get(), 0}, xh.data(), (k == 0 ? yv : yc).data(), n);
      }
      double diff = 0, mx = 0;
      for (int64_t i = 0; i < n * rows; ++i) {
        diff = std::max(diff, static_cast<double>(std::fabs(yv[static_cast<size_t>(i)] - yc[static_cast<size_t>(i)])));
        mx = std::max(mx, static_cast<double>(std::fabs(yc[static_cast<size_t>(i)])));
      }
      std::printf("%-5s 1024x1024 n=%-3lld vulkan %8.3f ms   cpu device %8.3f ms   (max |diff| %.2g of %.2g)\n",
                  oxi::dtype_name(t).c_str(), static_cast<long long>(n), ms[0], ms[1], diff, mx);
      EXPECT_LE(diff, 3e-2 * mx);  // the CPU's 8-bit activations
    }
  }
}

// The fixed cost of a call: write 4 floats, one elementwise op, read them back (a submit and a wait);
// and 100 recorded ops before one read (what a forward does between the host's reads).
TEST(VulkanTiming, RoundTripAndRecordedOps) {
  std::string why;
  std::shared_ptr<Device> vk = vulkan_device(&why);
  if (!vk) GTEST_SKIP() << "no Vulkan device: " << why;
  auto b = vk->alloc(4);
  const Ref r{b.get(), 0};
  float v[4] = {0.5f, 0.5f, 0.5f, 0.5f};
  for (int ops : {1, 100}) {
    double best = 1e30;
    for (int rep = 0; rep < 10; ++rep) {
      const auto t0 = std::chrono::steady_clock::now();
      vk->write(r, v, 4);
      for (int i = 0; i < ops; ++i) vk->softcap(r, 4, 30.0f);
      vk->read(r, v, 4);
      best = std::min(best, std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
    }
    std::printf("write + %3d op(s) + read of 4 floats: %.3f ms\n", ops, best);
  }
  EXPECT_GT(v[0], 0.0f);
}

}  // namespace
