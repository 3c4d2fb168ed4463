// The device blocks at odd sizes, on every device of device_pair.h against the test device: every
// weight type the Vulkan device runs (Q5_K too) at rows 1 / 33 / 67, widths that are not multiples
// of a workgroup (nor of 32-element chunks for the float types), n = 1, 3, 17, 64, three weights
// sharing one input with outputs at offsets; norms, activations, conv, Gated DeltaNet and attention
// at 1-row / odd widths / head dims 80, 128 and 256; copies that overlap; refused weight types.
// Tolerances as device_test.cpp.
#include <gtest/gtest.h>

#include <chrono>
#include <cstring>
#include <numeric>
#include <thread>

#include "core/error.h"
#include "core/half.h"
#include "device_pair.h"

namespace {

using namespace oxi_device_test;
using oxi::DType;

class DeviceShapes : public DeviceBlocks {};

// A [rows, cols] matrix of type t: quantised from N(0, 0.05) values; Q5_K (no quantiser in the
// kernels) from random bytes with small f16 scales.
struct Matrix {
  std::vector<uint8_t> bytes;
  oxi::MatrixView v;
};
Matrix make_matrix(DType t, int64_t rows, int64_t cols, uint32_t seed) {
  Matrix m;
  const uint64_t rb = *oxi::dtype_row_bytes(t, static_cast<uint64_t>(cols));
  m.bytes.resize(rb * static_cast<uint64_t>(rows));
  if (t == DType::Q5_K) {
    std::mt19937 rng(seed);
    for (auto& b : m.bytes) b = static_cast<uint8_t>(rng());
    for (size_t o = 0; o < m.bytes.size(); o += 176) {
      const uint16_t d = oxi::f32_to_f16(0.002f), dmin = oxi::f32_to_f16(0.001f);
      std::memcpy(&m.bytes[o], &d, 2);
      std::memcpy(&m.bytes[o + 2], &dmin, 2);
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

TEST_P(DeviceShapes, MatmulOddShapesEveryType) {
  const DType types[] = {DType::F32, DType::F16, DType::BF16, DType::Q8_0, DType::Q4_0, DType::Q4_K, DType::Q5_K, DType::Q6_K};
  const int64_t rows[3] = {67, 1, 33};
  for (DType t : types) {
    const bool kq = t == DType::Q4_K || t == DType::Q5_K || t == DType::Q6_K, q = t == DType::Q8_0 || t == DType::Q4_0;
    // a width under one 32 × 32 sweep of a row's lanes, and one over it
    for (int64_t cols : {kq ? int64_t{256} : q ? int64_t{96} : int64_t{100}, kq ? int64_t{1280} : q ? int64_t{1088} : int64_t{1061}}) {
      std::vector<Matrix> ms;
      for (int j = 0; j < 3; ++j) ms.push_back(make_matrix(t, rows[j], cols, static_cast<uint32_t>(40 + j)));
      Pair p = pair();
      std::vector<std::unique_ptr<oxi::nn::Weight>> wd, wr;
      for (const Matrix& m : ms) {
        wd.push_back(p.dev->upload(m.v));
        wr.push_back(p.ref->upload(m.v));
      }
      const oxi::nn::Weight* wds[3] = {wd[0].get(), wd[1].get(), wd[2].get()};
      const oxi::nn::Weight* wrs[3] = {wr[0].get(), wr[1].get(), wr[2].get()};
      for (int64_t n : {1, 3, 17, 64}) {
        const int x = p.add(randn(static_cast<size_t>(5 + n * cols), static_cast<uint32_t>(n)));  // x from offset 5
        const int64_t o1 = n * 67, o2 = n * 68 + 3;                                                // outputs at offsets
        const int y = p.add(std::vector<float>(static_cast<size_t>(o2 + n * 33)));
        const Ref yd[3] = {p.c(y), p.c(y, o1), p.c(y, o2)}, yr[3] = {p.r(y), p.r(y, o1), p.r(y, o2)};
        p.dev->matmul(wds, yd, p.c(x, 5), n);
        p.ref->matmul(wrs, yr, p.r(x, 5), n);
        EXPECT_LE(p.rel_diff(y), matmul_tol(t)) << oxi::dtype_name(t) << " cols " << cols << " n " << n;
      }
      const int e = p.add(std::vector<float>(static_cast<size_t>(4 * cols + 2)));
      const int32_t ids[4] = {66, 0, 7, 7};
      p.dev->embed(*wd[0], ids, p.c(e, 2));
      p.ref->embed(*wr[0], ids, p.r(e, 2));
      EXPECT_LE(p.rel_diff(e), 1e-6) << oxi::dtype_name(t) << " embed";
    }
  }
}

// Weights split into row parts (the device's part limit lowered to 4 KiB, OXI_VULKAN_MAX_PART): a
// matmul writes each part's rows at their place in y, embed finds each id's part.
TEST(VulkanDeviceParts, WeightsSplitByRows) {
  setenv("OXI_VULKAN_MAX_PART", "4096", 1);
  std::string why;
  std::shared_ptr<Device> dev = oxi::backend::make_vulkan_device(-1, &why);
  unsetenv("OXI_VULKAN_MAX_PART");
  if (!dev) GTEST_SKIP() << "no Vulkan device: " << why;
  for (DType t : {DType::Q8_0, DType::Q6_K, DType::F16}) {
    const Matrix m = make_matrix(t, 67, t == DType::Q8_0 ? 1088 : 1280, 90);  // 3 or 1–2 rows a part
    Pair p(dev);
    auto wd = p.dev->upload(m.v), wr = p.ref->upload(m.v);
    for (int64_t n : {1, 3, 17}) {
      const int x = p.add(randn(static_cast<size_t>(n * m.v.cols), 91)), y = p.add(std::vector<float>(static_cast<size_t>(n * 67)));
      const oxi::nn::Weight* wds[1] = {wd.get()};
      const oxi::nn::Weight* wrs[1] = {wr.get()};
      const Ref yd[1] = {p.c(y)}, yr[1] = {p.r(y)};
      p.dev->matmul(wds, yd, p.c(x), n);
      p.ref->matmul(wrs, yr, p.r(x), n);
      EXPECT_LE(p.rel_diff(y), 1e-5) << oxi::dtype_name(t) << " n " << n;
    }
    const int e = p.add(std::vector<float>(static_cast<size_t>(5 * m.v.cols)));
    const int32_t ids[5] = {66, 0, 3, 2, 40};
    p.dev->embed(*wd, ids, p.c(e));
    p.ref->embed(*wr, ids, p.r(e));
    EXPECT_LE(p.rel_diff(e), 1e-6) << oxi::dtype_name(t) << " embed";
  }
}

// Threads sharing one device (each call takes its lock): four threads each write their own x, run a
// matmul with a shared weight and read y back, 20 times; every y equals the one-thread result.
TEST_P(DeviceShapes, ThreadsShareTheDevice) {
  const Matrix m = make_matrix(DType::Q4_K, 33, 512, 95);
  auto w = dev_->upload(m.v);
  const oxi::nn::Weight* ws[1] = {w.get()};
  auto run = [&](const std::vector<float>& x, int64_t n) {
    auto xb = dev_->alloc(n * 512), yb = dev_->alloc(n * 33);
    dev_->write(Ref{xb.get(), 0}, x.data(), n * 512);
    const Ref ys[1] = {Ref{yb.get(), 0}};
    dev_->matmul(ws, ys, Ref{xb.get(), 0}, n);
    std::vector<float> y(static_cast<size_t>(n * 33));
    dev_->read(Ref{yb.get(), 0}, y.data(), n * 33);
    return y;
  };
  std::vector<std::vector<float>> xs, want;
  for (int k = 0; k < 4; ++k) {
    xs.push_back(randn(static_cast<size_t>((k + 1) * 512), static_cast<uint32_t>(96 + k)));
    want.push_back(run(xs.back(), k + 1));
  }
  std::vector<int> bad(4, 0);
  std::vector<std::thread> th;
  for (int k = 0; k < 4; ++k)
    th.emplace_back([&, k] {
      for (int i = 0; i < 20; ++i)
        if (run(xs[static_cast<size_t>(k)], k + 1) != want[static_cast<size_t>(k)]) ++bad[static_cast<size_t>(k)];
    });
  for (auto& t : th) t.join();
  EXPECT_EQ(bad, std::vector<int>(4, 0));
}

TEST_P(DeviceShapes, ElementwiseAndNormsAtOddSizes) {
  for (int64_t rows : {1, 7})
    for (int64_t width : {1, 13, 2049})
      for (bool with_add_w : {false, true}) {
        Pair p = pair();
        const int h = p.add(randn(static_cast<size_t>(rows * width), 50)), a = p.add(randn(static_cast<size_t>(rows * width), 51));
        const int w = p.add(randn(static_cast<size_t>(width), 52)), y = p.add(std::vector<float>(static_cast<size_t>(rows * width)));
        p.dev->rms_norm(p.c(h), with_add_w ? p.c(a) : Ref{}, with_add_w ? p.c(w) : Ref{}, p.c(y), rows, width, 1e-6f);
        p.ref->rms_norm(p.r(h), with_add_w ? p.r(a) : Ref{}, with_add_w ? p.r(w) : Ref{}, p.r(y), rows, width, 1e-6f);
        EXPECT_LE(p.rel_diff(h), 1e-6);
        EXPECT_LE(p.rel_diff(y), 1e-5) << rows << "×" << width;
        p.dev->rms_norm(p.c(h), Ref{}, Ref{}, p.c(h), rows, width, 1e-6f);  // in place
        p.ref->rms_norm(p.r(h), Ref{}, Ref{}, p.r(h), rows, width, 1e-6f);
        EXPECT_LE(p.rel_diff(h), 1e-5) << "in place";
      }
  for (int64_t n : {1, 257}) {
    Pair p = pair();
    const int a = p.add(randn(static_cast<size_t>(n + 3), 53, 3.0f)), b = p.add(randn(static_cast<size_t>(n + 1), 54));
    const int s = p.add(std::vector<float>(static_cast<size_t>(n + 2))), g = p.add(std::vector<float>(static_cast<size_t>(n)));
    p.dev->silu_mul(p.c(a, 3), p.c(b, 1), p.c(s, 2), n);
    p.ref->silu_mul(p.r(a, 3), p.r(b, 1), p.r(s, 2), n);
    EXPECT_LE(p.rel_diff(s), 1e-5);
    p.dev->gelu_mul(p.c(a, 3), p.c(b, 1), p.c(g), n);
    p.ref->gelu_mul(p.r(a, 3), p.r(b, 1), p.r(g), n);
    EXPECT_LE(p.rel_diff(g), 1e-5);
    p.dev->softcap(p.c(a, 1), n, 2.5f);
    p.ref->softcap(p.r(a, 1), n, 2.5f);
    EXPECT_LE(p.rel_diff(a), 1e-5);
  }
  for (int64_t C : {5, 300})
    for (int64_t T : {1, 3}) {
      Pair p = pair();
      const int X = p.add(randn(static_cast<size_t>((3 + T) * C), 55)), wT = p.add(randn(static_cast<size_t>(4 * C), 56, 0.5f));
      const int y = p.add(std::vector<float>(static_cast<size_t>(T * C)));
      p.dev->conv_silu(p.c(X), p.c(wT), C, 4, T, p.c(y));
      p.ref->conv_silu(p.r(X), p.r(wT), C, 4, T, p.r(y));
      EXPECT_LE(p.rel_diff(y), 1e-5) << "conv C " << C << " T " << T;
    }
}

// Decode-sized Gated DeltaNet (Qwen 3.5's dk = dv = 128) and an odd one (dk 40, dv 72: columns
// beyond one 64-wide workgroup).
TEST_P(DeviceShapes, GatedDeltaNetDecodeAndOddHeads) {
  struct Case {
    int64_t T, Hk, Hv, dk, dv;
  };
  for (Case cs : {Case{1, 2, 4, 128, 128}, Case{3, 1, 3, 40, 72}})
    for (bool tiled : {false, true}) {
      const int64_t KD = cs.Hk * cs.dk, W = 2 * KD + cs.Hv * cs.dv;
      Pair p = pair();
      std::vector<float> qkv = randn(static_cast<size_t>(cs.T * W), 60, 0.1f), gb = randn(static_cast<size_t>(cs.T * 2 * cs.Hv), 61, 0.3f);
      for (int64_t t = 0; t < cs.T; ++t)
        for (int64_t h = 0; h < cs.Hv; ++h) {
          gb[static_cast<size_t>(t * 2 * cs.Hv + h)] = -std::fabs(gb[static_cast<size_t>(t * 2 * cs.Hv + h)]);  // g < 0
          gb[static_cast<size_t>(t * 2 * cs.Hv + cs.Hv + h)] = 0.5f;                                         // β
        }
      const int q = p.add(qkv), g = p.add(gb), S = p.add(randn(static_cast<size_t>(cs.Hv * cs.dk * cs.dv), 62, 0.3f));
      const int o = p.add(std::vector<float>(static_cast<size_t>(cs.T * cs.Hv * cs.dv)));
      auto args = [&](bool dut) {
        auto at = [&](int i) { return dut ? p.c(i) : p.r(i); };
        return oxi::nn::GdnArgs{.qkv = at(q), .qk_stride = W, .gb = at(g), .gb_stride = 2 * cs.Hv, .state = at(S), .out = at(o),
                                .out_stride = cs.Hv * cs.dv, .T = cs.T, .Hk = cs.Hk, .Hv = cs.Hv, .dk = cs.dk, .dv = cs.dv, .tiled = tiled};
      };
      p.dev->gdn(args(true));
      p.ref->gdn(args(false));
      EXPECT_LE(p.rel_diff(o), 1e-4) << "dk " << cs.dk << " tiled " << tiled;
      EXPECT_LE(p.rel_diff(S), 1e-4) << "dk " << cs.dk << " tiled " << tiled;
    }
}

// Attention at decode (T = 1 at position 0, and deep in a cache), prefill past a window, and head
// dims 80 (not a multiple of the 64 lanes), 128 and 256.
TEST_P(DeviceShapes, AttentionDecodePrefillHeadDims) {
  struct Case {
    int64_t T, pos0, H, Hkv, hd, window;
  };
  for (Case cs : {Case{1, 0, 2, 1, 128, 0}, Case{1, 300, 8, 2, 128, 0}, Case{17, 100, 6, 3, 80, 33}, Case{3, 70, 4, 4, 256, 0}}) {
    const int64_t KW = cs.Hkv * cs.hd, n = cs.pos0 + cs.T;
    Pair p = pair();
    const int q = p.add(randn(static_cast<size_t>(cs.T * cs.H * cs.hd), 70)), k = p.add(randn(static_cast<size_t>(n * KW), 71));
    const int v = p.add(randn(static_cast<size_t>(n * KW), 72)), o = p.add(std::vector<float>(static_cast<size_t>(cs.T * cs.H * cs.hd)));
    auto args = [&](bool dut) {
      auto at = [&](int i) { return dut ? p.c(i) : p.r(i); };
      return oxi::nn::AttnArgs{.q = at(q), .q_stride = cs.H * cs.hd, .q_head_stride = cs.hd, .k = at(k), .v = at(v), .out = at(o),
                               .out_stride = cs.H * cs.hd, .T = cs.T, .pos0 = cs.pos0, .H = cs.H, .Hkv = cs.Hkv, .hd = cs.hd,
                               .window = cs.window, .scale = 1.0f / std::sqrt(static_cast<float>(cs.hd))};
    };
    p.dev->attention(args(true));
    p.ref->attention(args(false));
    EXPECT_LE(p.rel_diff(o), 1e-5) << "T " << cs.T << " pos0 " << cs.pos0 << " hd " << cs.hd;
  }
}

TEST_P(DeviceShapes, CopiesOverlapLikeMemmove) {
  std::vector<float> host(100);
  std::iota(host.begin(), host.end(), 0.0f);
  for (auto [src, dst] : {std::pair<int64_t, int64_t>{0, 10}, {10, 0}, {0, 60}}) {
    auto b = dev_->alloc(100);
    dev_->write(Ref{b.get(), 0}, host.data(), 100);
    dev_->copy(Ref{b.get(), src}, Ref{b.get(), dst}, 40);
    std::vector<float> want = host, got(100);
    std::memmove(want.data() + dst, want.data() + src, 40 * sizeof(float));
    dev_->read(Ref{b.get(), 0}, got.data(), 100);
    EXPECT_EQ(got, want) << src << " → " << dst;
  }
}

// Transfers larger than the Vulkan device's 8 MiB host arena, and more recorded dispatches than one
// descriptor pool holds (512) before the host reads.
TEST_P(DeviceShapes, LargeTransfersAndManyDispatches) {
  const int64_t big = 3'000'001;
  std::vector<float> host(static_cast<size_t>(big)), back(host.size());
  std::iota(host.begin(), host.end(), -1.5e6f);
  auto b = dev_->alloc(big);
  dev_->write(Ref{b.get(), 0}, host.data(), big);
  dev_->read(Ref{b.get(), 0}, back.data(), big);
  EXPECT_EQ(back, host);
  auto s = dev_->alloc(4);
  const float one[4] = {1.0f, 1.0f, 1.0f, 1.0f};
  dev_->write(Ref{s.get(), 0}, one, 4);
  for (int i = 0; i < 700; ++i) dev_->softcap(Ref{s.get(), 0}, 4, 100.0f);  // x ← 100·tanh(x / 100), 700 times
  float got[4];
  dev_->read(Ref{s.get(), 0}, got, 4);
  double want = 1.0;
  for (int i = 0; i < 700; ++i) want = 100.0 * std::tanh(want / 100.0);
  for (float g : got) EXPECT_NEAR(g, want, 1e-4 * want);
}

TEST_P(DeviceShapes, UnsupportedWeightTypeIsAnError) {
  if (!vulkan()) GTEST_SKIP() << "the CPU device runs every type the kernels know";
  std::vector<uint8_t> bytes(20 * 4);
  oxi::MatrixView v;
  v.dtype = DType::Q4_1;
  v.rows = 4;
  v.cols = 32;
  v.row_bytes = 20;
  v.data = bytes.data();
  try {
    dev_->upload(v);
    ADD_FAILURE() << "Q4_1 uploaded";
  } catch (const oxi::Error& e) {
    EXPECT_EQ(e.code(), oxi::ErrorCode::kUnsupported);
    EXPECT_NE(std::string(e.what()).find("Q4_1"), std::string::npos) << e.what();
  }
}

INSTANTIATE_TEST_SUITE_P(EveryDevice, DeviceShapes, ::testing::ValuesIn(devices()), device_name);

}  // namespace
