// The device blocks at odd sizes, on every device of device_pair.h against the test device: every
// weight type the Vulkan device runs (kVulkanTypes) at rows 1 / 33 / 67, widths that are not multiples
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

TEST_P(DeviceShapes, MatmulOddShapesEveryType) {
  const int64_t rows[3] = {67, 1, 33};
  for (DType t : kVulkanTypes) {
    const uint32_t be = oxi::dtype_traits(t)->block_elems;
    // a width under one 32 × 32 sweep of a row's lanes, and one over it (whole blocks: 256 and 1280
    // for the 256-element types, 3 blocks and 1061 rounded up to a block for the others)
    const int64_t b = be, small = be == 1 ? 100 : be == 256 ? 256 : 3 * b, large = be == 1 ? 1061 : be == 256 ? 1280 : (1061 + b - 1) / b * b;
    for (int64_t cols : {small, large}) {
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
  const uint64_t w0 = dev_->waits();
  // x ← 100·tanh(x / 100), 700 times: more dispatches than one descriptor pool holds (512), and
  // still one wait, for the read.
  for (int i = 0; i < 700; ++i) dev_->softcap(Ref{s.get(), 0}, 4, 100.0f);
  float got[4];
  dev_->read(Ref{s.get(), 0}, got, 4);
  if (vulkan()) {
    EXPECT_EQ(dev_->waits() - w0, 1u);
  }
  double want = 1.0;
  for (int i = 0; i < 700; ++i) want = 100.0 * std::tanh(want / 100.0);
  for (float g : got) EXPECT_NEAR(g, want, 1e-4 * want);
}

// The small blocks (nn/device.h; kernels of their own on Vulkan) at odd sizes, on strided head views
// from odd offsets, against the test device — and, on Vulkan, none of them waits for the queue
// (checked before the results are read back).
TEST_P(DeviceShapes, SmallBlocksOddShapesStayOnTheDevice) {
  using oxi::nn::Heads;
  for (int64_t width : {1, 80, 128, 257})
    for (int64_t rows : {1, 5}) {
      const int64_t heads = 3, hs = width + 7, rs = heads * hs + 2 * width + 3;  // q with a gate after it, as Qwen's
      Pair p = pair();
      const int x = p.add(randn(static_cast<size_t>(rows * rs + 5), 60)), x2 = p.add(randn(static_cast<size_t>(rows * rs + 5), 61));
      const int x3 = p.add(randn(static_cast<size_t>(rows * rs + 5), 65));
      const int w = p.add(randn(static_cast<size_t>(width + 2), 62)), g = p.add(randn(static_cast<size_t>(rows * rs + 5), 63, 4.0f));
      const uint64_t w0 = p.dev->waits();
      p.dev->rms_norm_heads(Heads{p.c(x, 5), rs, hs}, rows, heads, width, p.c(w, 2), 1e-6f);
      p.ref->rms_norm_heads(Heads{p.r(x, 5), rs, hs}, rows, heads, width, p.r(w, 2), 1e-6f);
      p.dev->rms_norm_heads(Heads{p.c(x3, 1), rs, hs}, rows, heads, width, Ref{}, 1e-6f);  // no weight (Gemma's V)
      p.ref->rms_norm_heads(Heads{p.r(x3, 1), rs, hs}, rows, heads, width, Ref{}, 1e-6f);
      p.dev->l2_norm_heads(Heads{p.c(x2, 3), rs, hs}, rows, heads, width, 1e-6f, 0.125f);
      p.ref->l2_norm_heads(Heads{p.r(x2, 3), rs, hs}, rows, heads, width, 1e-6f, 0.125f);
      // the gate: heads interleaved in another buffer (head stride 2·width), x3 gated in place
      p.dev->mul_sigmoid_heads(Heads{p.c(x3, 1), rs, hs}, Heads{p.c(g, 4), rs, 2 * width}, rows, heads, width);
      p.ref->mul_sigmoid_heads(Heads{p.r(x3, 1), rs, hs}, Heads{p.r(g, 4), rs, 2 * width}, rows, heads, width);
      if (vulkan()) {
        EXPECT_EQ(p.dev->waits(), w0) << "a per-head block waited for the queue";
      }
      EXPECT_LE(p.rel_diff(x), 1e-5) << "rms_norm_heads width " << width << " rows " << rows;
      EXPECT_LE(p.rel_diff(x3), 1e-5) << "rms_norm_heads (no weight) · sigmoid gate, width " << width << " rows " << rows;
      EXPECT_LE(p.rel_diff(x2), 1e-5) << "l2_norm_heads width " << width << " rows " << rows;
    }
  {  // a row's one gate value over the whole row: D heads of width 1, gate head stride 0 (Qwen's shared expert)
    const int64_t rows = 3, D = 1031;
    Pair p = pair();
    const int x = p.add(randn(static_cast<size_t>(rows * D + 2), 66)), g = p.add(randn(static_cast<size_t>(rows + 1), 67, 3.0f));
    const uint64_t w0 = p.dev->waits();
    p.dev->mul_sigmoid_heads(Heads{p.c(x, 2), D, 1}, Heads{p.c(g, 1), 1, 0}, rows, D, 1);
    p.ref->mul_sigmoid_heads(Heads{p.r(x, 2), D, 1}, Heads{p.r(g, 1), 1, 0}, rows, D, 1);
    if (vulkan()) {
      EXPECT_EQ(p.dev->waits(), w0);
    }
    EXPECT_LE(p.rel_diff(x), 1e-6) << "row gate";
  }
  for (int64_t T : {1, 19})
    for (int64_t H : {1, 32, 300}) {
      Pair p = pair();
      // a + dt_bias spans −40..40: softplus' log1p regime, its linear one (> 20) and between
      const int a = p.add(randn(static_cast<size_t>(T * H + 1), 70, 12.0f)), b = p.add(randn(static_cast<size_t>(T * H + 2), 71, 5.0f));
      std::vector<float> sa = randn(static_cast<size_t>(H), 72);
      for (auto& v : sa) v = -std::exp(v);
      const int ssm_a = p.add(sa), dt = p.add(randn(static_cast<size_t>(H + 3), 73, 4.0f));
      const int gb = p.add(std::vector<float>(static_cast<size_t>(T * 2 * H + 4)));
      const uint64_t w0 = p.dev->waits();
      p.dev->gdn_gates(p.c(a, 1), p.c(b, 2), p.c(ssm_a), p.c(dt, 3), T, H, p.c(gb, 4));
      p.ref->gdn_gates(p.r(a, 1), p.r(b, 2), p.r(ssm_a), p.r(dt, 3), T, H, p.r(gb, 4));
      if (vulkan()) {
        EXPECT_EQ(p.dev->waits(), w0);
      }
      // g and β compared apart (g's scale is up to ~100, β's 1)
      std::vector<float> dg(static_cast<size_t>(T * 2 * H)), rg(dg.size());
      p.dev->read(p.c(gb, 4), dg.data(), T * 2 * H);
      p.ref->read(p.r(gb, 4), rg.data(), T * 2 * H);
      for (int64_t i = 0; i < T * 2 * H; ++i) {
        const double want = rg[static_cast<size_t>(i)];
        EXPECT_NEAR(dg[static_cast<size_t>(i)], want, 2e-6 * std::max(1.0, std::fabs(want))) << "gdn_gates T " << T << " H " << H << " at " << i;
      }
    }
  for (int64_t D : {1, 37, 1031}) {
    Pair p = pair();
    const int src = p.add(randn(static_cast<size_t>(11 * D + 2), 74)), gth = p.add(std::vector<float>(static_cast<size_t>(6 * D + 1)));
    const int32_t ids[6] = {10, 0, 3, 3, 7, 10};
    const int acc = p.add(randn(static_cast<size_t>(11 * D + 3), 75));
    const float wts[6] = {0.5f, -1.25f, 2.0f, 0.75f, 1e-3f, -3.0f};
    const int cols = p.add(randn(static_cast<size_t>(3 * D + 1), 76)), cw = p.add(randn(static_cast<size_t>(D + 2), 77));
    const uint64_t w0 = p.dev->waits();
    p.dev->gather_rows(p.c(src, 2), ids, D, p.c(gth, 1));
    p.ref->gather_rows(p.r(src, 2), ids, D, p.r(gth, 1));
    p.dev->add_rows_scaled(p.c(gth, 1), ids, wts, D, p.c(acc, 3));  // rows 3 and 10 twice, in order
    p.ref->add_rows_scaled(p.r(gth, 1), ids, wts, D, p.r(acc, 3));
    p.dev->mul_cols(p.c(cols, 1), p.c(cw, 2), 3, D);
    p.ref->mul_cols(p.r(cols, 1), p.r(cw, 2), 3, D);
    if (vulkan()) {
      EXPECT_EQ(p.dev->waits(), w0);
    }
    EXPECT_LE(p.rel_diff(gth), 0.0) << "gather_rows D " << D;
    EXPECT_LE(p.rel_diff(acc), 1e-6) << "add_rows_scaled D " << D;
    EXPECT_LE(p.rel_diff(cols), 1e-6) << "mul_cols D " << D;
  }
  for (int64_t n_rot : {2, 64, 256}) {
    const int64_t rows = 4, heads = 3, hd = n_rot + 6, stride = heads * hd + 9;
    const int32_t pos[4] = {0, 1, 513, 8191};
    std::vector<float> div(static_cast<size_t>(n_rot / 2));
    for (size_t j = 0; j < div.size(); ++j) div[j] = j % 3 == 2 ? 1e30f : 1.0f + 0.5f * static_cast<float>(j % 4);
    Pair p = pair();
    const int x = p.add(randn(static_cast<size_t>(rows * stride + 1), 78));
    const uint64_t w0 = p.dev->waits();
    p.dev->rope_neox_div(p.c(x, 1), rows, stride, heads, hd, n_rot, 1e6f, pos, div);
    p.ref->rope_neox_div(p.r(x, 1), rows, stride, heads, hd, n_rot, 1e6f, pos, div);
    if (vulkan()) {
      EXPECT_EQ(p.dev->waits(), w0);
    }
    EXPECT_LE(p.rel_diff(x), 2e-4) << "rope_neox_div n_rot " << n_rot;  // f32 angles (pos / div in f32, as the host version) at 8191
  }
}

TEST_P(DeviceShapes, UnsupportedWeightTypeIsAnError) {
  if (!vulkan()) GTEST_SKIP() << "the CPU device runs every type the kernels know";
  // TQ2_0: a GGUF type neither the CPU kernels nor the shaders run (every type the CPU runs has a shader)
  std::vector<uint8_t> bytes(66 * 4);  // 66 bytes per 256 elements
  oxi::MatrixView v;
  v.dtype = DType::TQ2_0;
  v.rows = 4;
  v.cols = 256;
  v.row_bytes = 66;
  v.data = bytes.data();
  try {
    dev_->upload(v);
    ADD_FAILURE() << "TQ2_0 uploaded";
  } catch (const oxi::Error& e) {
    EXPECT_EQ(e.code(), oxi::ErrorCode::kUnsupported);
    EXPECT_NE(std::string(e.what()).find("TQ2_0"), std::string::npos) << e.what();
  }
}

INSTANTIATE_TEST_SUITE_P(EveryDevice, DeviceShapes, ::testing::ValuesIn(devices()), device_name);

}  // namespace
