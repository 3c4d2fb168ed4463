// What the device tests share (device_test.cpp, device_shapes_test.cpp): random inputs, the
// Vulkan device made once per process, a Pair of a device under test and the test device, and the
// fixture whose parameter picks the device (a CPU ISA, or "vulkan": skipped where no Vulkan loader
// or driver is present).
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "backend/test_device.h"
#include "backend/vulkan/vulkan_device.h"
#include "core/half.h"
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

// The weight types the Vulkan device has shaders for (backend/vulkan/device.cpp).
inline constexpr oxi::DType kVulkanTypes[] = {
    oxi::DType::F32,     oxi::DType::F16,        oxi::DType::BF16,       oxi::DType::Q8_0,       oxi::DType::Q4_0,
    oxi::DType::Q4_1,    oxi::DType::Q5_0,       oxi::DType::Q5_1,       oxi::DType::IQ4_NL,     oxi::DType::MXFP4,
    oxi::DType::Q2_K,    oxi::DType::Q3_K,       oxi::DType::Q4_K,       oxi::DType::Q5_K,       oxi::DType::Q6_K,
    oxi::DType::IQ4_XS,  oxi::DType::IQ3_S,      oxi::DType::IQ3_XXS,    oxi::DType::IQ2_S,      oxi::DType::IQ2_XS,
    oxi::DType::IQ2_XXS, oxi::DType::IQ1_M,      oxi::DType::IQ1_S,      oxi::DType::MLX_Q4_G32, oxi::DType::MLX_Q4_G64,
    oxi::DType::MLX_Q4_G128, oxi::DType::MLX_Q8_G32, oxi::DType::MLX_Q8_G64, oxi::DType::MLX_Q8_G128};

// A [rows, cols] matrix of type t: quantised from N(0, 0.05) values where the kernels have a
// quantiser (quantize_row); else random bytes with each block's f16 scales (and mins) set to small
// values that give elements of about that size (a random f16 could be Inf or NaN).
struct Matrix {
  std::vector<uint8_t> bytes;
  oxi::MatrixView v;
};
inline Matrix make_matrix(oxi::DType t, int64_t rows, int64_t cols, uint32_t seed) {
  using oxi::DType;
  Matrix m;
  const uint64_t rb = *oxi::dtype_row_bytes(t, static_cast<uint64_t>(cols));
  m.bytes.resize(rb * static_cast<uint64_t>(rows));
  // block bytes, then (offset, value) of its f16 fields
  struct F16 {
    uint32_t off;
    float v;
  };
  uint32_t block = 0;
  std::vector<F16> f16s;
  switch (t) {
    case DType::Q4_1: block = 20, f16s = {{0, 0.006f}, {2, -0.045f}}; break;
    case DType::Q5_1: block = 24, f16s = {{0, 0.003f}, {2, -0.05f}}; break;
    case DType::IQ4_NL: block = 18, f16s = {{0, 0.0005f}}; break;
    case DType::IQ4_XS: block = 136, f16s = {{0, 3e-5f}}; break;
    case DType::Q2_K: block = 84, f16s = {{80, 0.004f}, {82, 0.002f}}; break;
    case DType::Q3_K: block = 110, f16s = {{108, 0.0015f}}; break;
    case DType::Q5_K: block = 176, f16s = {{0, 0.002f}, {2, 0.001f}}; break;
    // the IQ types: d at the start (IQ1_M: d's bits in the top nibbles of its scales, set below);
    // random grid indices are all valid (9- to 11-bit fields index tables of that size)
    case DType::IQ2_XXS: block = 66, f16s = {{0, 0.004f}}; break;
    case DType::IQ2_XS: block = 74, f16s = {{0, 0.004f}}; break;
    case DType::IQ2_S: block = 82, f16s = {{0, 0.004f}}; break;
    case DType::IQ3_XXS: block = 98, f16s = {{0, 0.003f}}; break;
    case DType::IQ3_S: block = 110, f16s = {{0, 0.0008f}}; break;
    case DType::IQ1_S: block = 50, f16s = {{0, 0.004f}}; break;
    case DType::IQ1_M: block = 56; break;
    case DType::MXFP4: block = 17; break;  // the exponent byte, set below
    default: break;
  }
  if (oxi::is_mlx_dtype(t)) {  // f32 scale and bias per group of G (format/dtype.h): elements of about ±0.05
    const uint32_t bb = oxi::dtype_traits(t)->block_bytes;
    const bool four = t == DType::MLX_Q4_G32 || t == DType::MLX_Q4_G64 || t == DType::MLX_Q4_G128;
    std::mt19937 rng(seed);
    for (auto& b : m.bytes) b = static_cast<uint8_t>(rng());
    const float sb[2] = {four ? 0.007f : 0.0004f, -0.05f};
    for (size_t o = 0; o < m.bytes.size(); o += bb) std::memcpy(&m.bytes[o], sb, 8);
    block = 0;  // no f16 fields; the view is set below
  } else if (block) {
    std::mt19937 rng(seed);
    for (auto& b : m.bytes) b = static_cast<uint8_t>(rng());
    for (size_t o = 0; o < m.bytes.size(); o += block) {
      for (const F16& f : f16s) {
        const uint16_t h = oxi::f32_to_f16(f.v);
        std::memcpy(&m.bytes[o + f.off], &h, 2);
      }
      if (t == DType::MXFP4) m.bytes[o] = static_cast<uint8_t>(118 + o % 5);  // 2^(e − 128): 2^-10 … 2^-6
      if (t == DType::IQ1_M) {  // d = 0.004 in the top nibbles of the four u16 scales (bytes 48..55)
        const uint16_t h = oxi::f32_to_f16(0.004f);
        for (int k = 0; k < 4; ++k) {
          uint8_t& hi = m.bytes[o + 49 + 2 * k];
          hi = static_cast<uint8_t>((hi & 0x0F) | (((h >> (4 * k)) & 0xF) << 4));
        }
      }
    }
  } else {
    const auto wf = randn(static_cast<size_t>(rows * cols), seed, 0.05f);
    for (int64_t r = 0; r < rows; ++r) oxi::quantize_row(t, wf.data() + r * cols, cols, m.bytes.data() + rb * static_cast<uint64_t>(r));
  }
  m.v.dtype = t;
  m.v.rows = rows;
  m.v.cols = cols;
  m.v.row_bytes = rb;
  m.v.data = m.bytes.data();
  return m;
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
