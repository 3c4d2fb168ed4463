// What the device tests share (device_test.cpp, device_shapes_test.cpp): random inputs, the
// Vulkan device made once per process, a Pair of a device under test and the test device, and the
// fixture whose parameter picks the device (a CPU ISA, or "vulkan": skipped where no Vulkan loader
// or driver is present).
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "backend/test_device.h"
#include "backend/vulkan/vulkan_device.h"
#include "kernels/isa.h"
#include "kernels/matmul.h"
#include "nn/device.h"

namespace oxi_device_test {

using oxi::nn::Device;
using oxi::nn::Ref;

inline std::vector<float> randn(size_t n, uint32_t seed, float scale = 1.0f) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> nd(0.0f, scale);
  std::vector<float> v(n);
  for (auto& x : v) x = nd(rng);
  return v;
}

// The Vulkan device, made once per process (pipelines are built lazily and kept); null with `why`.
inline std::shared_ptr<Device> vulkan_device(std::string* why) {
  static std::string reason;
  static std::shared_ptr<Device> dev = oxi::backend::make_vulkan_device(-1, &reason);
  *why = reason;
  return dev;
}

// A device under test (`dev`, the CPU's or the Vulkan one) and the test device, given the same
// inputs; rel_diff compares an output buffer.
struct Pair {
  explicit Pair(std::shared_ptr<Device> d) : dev(std::move(d)) {}
  std::shared_ptr<Device> dev;
  std::unique_ptr<Device> ref = oxi::backend::make_test_device();
  std::vector<std::shared_ptr<oxi::nn::Buffer>> cb, rb;
  int add(const std::vector<float>& host) {
    cb.push_back(dev->alloc(static_cast<int64_t>(host.size())));
    rb.push_back(ref->alloc(static_cast<int64_t>(host.size())));
    dev->write(Ref{cb.back().get(), 0}, host.data(), static_cast<int64_t>(host.size()));
    ref->write(Ref{rb.back().get(), 0}, host.data(), static_cast<int64_t>(host.size()));
    return static_cast<int>(cb.size()) - 1;
  }
  Ref c(int i, int64_t off = 0) { return Ref{cb[static_cast<size_t>(i)].get(), off}; }
  Ref r(int i, int64_t off = 0) { return Ref{rb[static_cast<size_t>(i)].get(), off}; }
  // max |dev − ref| over buffer i, relative to max |ref|
  double rel_diff(int i) {  // OXI_PRINT_DIFF=1 prints it
    const int64_t n = cb[static_cast<size_t>(i)]->floats();
    std::vector<float> a(static_cast<size_t>(n)), b(static_cast<size_t>(n));
    dev->read(c(i), a.data(), n);
    ref->read(r(i), b.data(), n);
    double d = 0, m = 0;
    for (int64_t k = 0; k < n; ++k) {
      d = std::max(d, static_cast<double>(std::fabs(a[static_cast<size_t>(k)] - b[static_cast<size_t>(k)])));
      m = std::max(m, static_cast<double>(std::fabs(b[static_cast<size_t>(k)])));
    }
    EXPECT_GT(m, 0.0) << "output is all zero";
    if (std::getenv("OXI_PRINT_DIFF")) std::printf("  rel diff %.3g\n", d / std::max(m, 1e-30));
    return d / std::max(m, 1e-30);
  }
};

class DeviceBlocks : public ::testing::TestWithParam<std::string> {  // param: a CPU ISA, or "vulkan"
 protected:
  void SetUp() override {
    if (GetParam() == "vulkan") {
      std::string why;
      dev_ = vulkan_device(&why);
      if (!dev_) GTEST_SKIP() << "no Vulkan device: " << why;
    } else {
      oxi::set_isa(GetParam());
      dev_ = oxi::nn::make_cpu_device();
    }
  }
  void TearDown() override { oxi::set_isa("auto"); }
  bool vulkan() const { return GetParam() == "vulkan"; }
  // Matmul tolerance per weight type (see the top of this file).
  double matmul_tol(oxi::DType t) const {
    if (vulkan() || t == oxi::DType::F32) return 1e-5;
    return t == oxi::DType::F16 ? 1e-3 : t == oxi::DType::BF16 ? 1e-2 : 2e-2;
  }
  Pair pair() const { return Pair(dev_); }
  std::shared_ptr<Device> dev_;
};

// The CPU's ISAs, then "vulkan"; test names with '-' made '_'.
inline std::vector<std::string> devices() {
  std::vector<std::string> v = oxi::available_isas();
  v.push_back("vulkan");
  return v;
}
inline std::string device_name(const ::testing::TestParamInfo<std::string>& info) {
  std::string n = info.param;
  for (char& ch : n)
    if (ch == '-') ch = '_';
  return n;
}

}  // namespace oxi_device_test
