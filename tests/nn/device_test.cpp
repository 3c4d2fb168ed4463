// Every block of the device interface (nn/device.h) on the CPU device — the kernels the models run,
// on every ISA this host has — and on the Vulkan device (backend/vulkan; skipped where no Vulkan
// loader or driver is present, e.g. lavapipe missing) against the test device, an independent
// double-precision implementation of the formulas (backend/test_device.h). Tolerances, relative to
// the output's largest value: f32 blocks 1e-5..2e-4 (f32 vs double rounding; RoPE angles at large
// positions); matmuls on the CPU 1e-5 with f32 weights, 1e-3 f16, 1e-2 bf16 (the CPU rounds
// activations to the weight's type, as ggml) and 2e-2 quantised (8-bit activation blocks), while the
// test device multiplies the dequantised weights in double. The Vulkan device keeps activations in
// f32 for every weight type: 1e-5 for all of them.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "core/error.h"
#include "core/half.h"
#include "device_pair.h"

namespace {

using namespace oxi_device_test;

TEST_P(DeviceBlocks, MatmulEveryWeightType) {
  const int64_t rows = 96, cols = 256, n = 7;
  for (oxi::DType t : kVulkanTypes) {
    const Matrix m = make_matrix(t, rows, cols, 1);
    const oxi::MatrixView& v = m.v;
    Pair p = pair();
    auto wc = p.dev->upload(v), wr = p.ref->upload(v);
    const int x = p.add(randn(static_cast<size_t>(n * cols), 2)), y = p.add(std::vector<float>(static_cast<size_t>(n * rows)));
    const oxi::nn::Weight* wcs[1] = {wc.get()};
    const oxi::nn::Weight* wrs[1] = {wr.get()};
    const Ref yc[1] = {p.c(y)}, yr[1] = {p.r(y)};
    p.dev->matmul(wcs, yc, p.c(x), n);
    p.ref->matmul(wrs, yr, p.r(x), n);
    // The CPU rounds activations to the weight's own type (f16, bf16: as ggml) or to 8-bit blocks.
    EXPECT_LE(p.rel_diff(y), matmul_tol(t)) << oxi::dtype_name(t);
    // embedding rows of the same table
    const int e = p.add(std::vector<float>(static_cast<size_t>(3 * cols)));
    const int32_t ids[3] = {5, 0, 95};
    p.dev->embed(*wc, ids, p.c(e));
    p.ref->embed(*wr, ids, p.r(e));
    EXPECT_LE(p.rel_diff(e), 1e-6) << oxi::dtype_name(t);
  }
}

TEST_P(DeviceBlocks, NormsActivationsSoftcap) {
  const int64_t rows = 5, width = 200;
  Pair p = pair();
  const int h = p.add(randn(static_cast<size_t>(rows * width), 3)), o = p.add(randn(static_cast<size_t>(rows * width), 4));
  const int w = p.add(randn(static_cast<size_t>(width), 5)), y = p.add(std::vector<float>(static_cast<size_t>(rows * width)));
  p.dev->rms_norm(p.c(h), p.c(o), p.c(w), p.c(y), rows, width, 1e-6f);
  p.ref->rms_norm(p.r(h), p.r(o), p.r(w), p.r(y), rows, width, 1e-6f);
  EXPECT_LE(p.rel_diff(h), 1e-6);  // the residual add
  EXPECT_LE(p.rel_diff(y), 1e-5);
  const int64_t n = 3000;
  const int a = p.add(randn(static_cast<size_t>(n), 6, 3.0f)), b = p.add(randn(static_cast<size_t>(n), 7));
  const int s = p.add(std::vector<float>(static_cast<size_t>(n))), g = p.add(std::vector<float>(static_cast<size_t>(n)));
  p.dev->silu_mul(p.c(a), p.c(b), p.c(s), n);
  p.ref->silu_mul(p.r(a), p.r(b), p.r(s), n);
  EXPECT_LE(p.rel_diff(s), 1e-5);
  p.dev->gelu_mul(p.c(a), p.c(b), p.c(g), n);
  p.ref->gelu_mul(p.r(a), p.r(b), p.r(g), n);
  EXPECT_LE(p.rel_diff(g), 1e-5);
  const int sc = p.add(randn(static_cast<size_t>(n), 8, 40.0f));
  p.dev->softcap(p.c(sc), n, 30.0f);
  p.ref->softcap(p.r(sc), n, 30.0f);
  EXPECT_LE(p.rel_diff(sc), 1e-5);
}

TEST_P(DeviceBlocks, RopeAndMrope) {
  const int64_t rows = 6, heads = 3, hd = 64, n_rot = 32, stride = heads * hd + 16;
  const std::vector<int32_t> pos = {0, 1, 7, 100, 4095, 20000};
  const std::vector<int32_t> pos3 = {0, 0, 0, 5, 1, 2, 5, 3, 9, 6, 6, 6, 10, 0, 31, 11, 4, 4};
  for (bool m : {false, true}) {
    Pair p = pair();
    const int x = p.add(randn(static_cast<size_t>(rows * stride), 9));
    p.dev->rope_neox(p.c(x), rows, stride, heads, hd, n_rot, 1e6f, pos, m ? pos3.data() : nullptr, {11, 11, 10});
    p.ref->rope_neox(p.r(x), rows, stride, heads, hd, n_rot, 1e6f, pos, m ? pos3.data() : nullptr, {11, 11, 10});
    EXPECT_LE(p.rel_diff(x), 2e-4) << (m ? "mrope" : "rope");  // f32 angles at position 20000
  }
}

TEST_P(DeviceBlocks, ConvAndGatedDeltaNet) {
  const int64_t C = 96, K = 4, T = 70;
  Pair p = pair();
  const int X = p.add(randn(static_cast<size_t>((K - 1 + T) * C), 10)), wT = p.add(randn(static_cast<size_t>(K * C), 11, 0.5f));
  const int y = p.add(std::vector<float>(static_cast<size_t>(T * C)));
  p.dev->conv_silu(p.c(X), p.c(wT), C, K, T, p.c(y));
  p.ref->conv_silu(p.r(X), p.r(wT), C, K, T, p.r(y));
  EXPECT_LE(p.rel_diff(y), 1e-5);
  // GDN: Hk = 2 key heads, Hv = 4 value heads, dk = dv = 16; q, k unit-norm rows (q scaled).
  const int64_t Hk = 2, Hv = 4, dk = 16, dv = 16, KD = Hk * dk, W = 2 * KD + Hv * dv;
  for (bool tiled : {false, true})
    for (bool chunked : {false, true}) {
      std::vector<float> qkv = randn(static_cast<size_t>(T * W), 12);
      for (int64_t t = 0; t < T; ++t)
        for (int64_t hh = 0; hh < 2 * Hk; ++hh) {
          float* v = qkv.data() + t * W + hh * dk;
          double s = 0;
          for (int64_t i = 0; i < dk; ++i) s += v[i] * v[i];
          for (int64_t i = 0; i < dk; ++i) v[i] = static_cast<float>(v[i] / std::sqrt(s) / (hh < Hk ? 4.0 : 1.0));
        }
      std::vector<float> gb(static_cast<size_t>(T * 2 * Hv));
      std::mt19937 rng(13);
      std::uniform_real_distribution<float> ud(0.0f, 1.0f);
      for (int64_t t = 0; t < T; ++t)
        for (int64_t hh = 0; hh < Hv; ++hh) {
          gb[static_cast<size_t>(t * 2 * Hv + hh)] = -1.5f * ud(rng);
          gb[static_cast<size_t>(t * 2 * Hv + Hv + hh)] = ud(rng);
        }
      const int q = p.add(qkv), g = p.add(gb), S = p.add(randn(static_cast<size_t>(Hv * dk * dv), 14, 0.3f));
      const int o = p.add(std::vector<float>(static_cast<size_t>(T * Hv * dv)));
      auto args = [&](bool dut) {
        oxi::nn::GdnArgs a;
        a.qkv = dut ? p.c(q) : p.r(q);
        a.qk_stride = W;
        a.gb = dut ? p.c(g) : p.r(g);
        a.gb_stride = 2 * Hv;
        a.state = dut ? p.c(S) : p.r(S);
        a.out = dut ? p.c(o) : p.r(o);
        a.out_stride = Hv * dv;
        a.T = T;
        a.Hk = Hk;
        a.Hv = Hv;
        a.dk = dk;
        a.dv = dv;
        a.tiled = tiled;
        a.chunked = chunked;
        return a;
      };
      p.dev->gdn(args(true));
      p.ref->gdn(args(false));
      EXPECT_LE(p.rel_diff(o), 1e-4) << "tiled " << tiled << " chunked " << chunked;
      EXPECT_LE(p.rel_diff(S), 1e-4) << "tiled " << tiled << " chunked " << chunked;
    }
}

TEST_P(DeviceBlocks, AttentionCausalWindowGqa) {
  const int64_t H = 4, Hkv = 2, hd = 32, pos0 = 40, T = 9, KW = Hkv * hd;
  for (int64_t window : {0, 16})
    for (bool f16 : {false, true}) {
      Pair p = pair();
      std::vector<float> k = randn(static_cast<size_t>((pos0 + T) * KW), 15), v = randn(static_cast<size_t>((pos0 + T) * KW), 16);
      if (f16)  // an f16 cache holds f16 values
        for (auto* vec : {&k, &v})
          for (auto& x : *vec) x = oxi::f16_to_f32(oxi::f32_to_f16(x));
      const int q = p.add(randn(static_cast<size_t>(T * H * hd * 2), 17)), kb = p.add(k), vb = p.add(v);
      const int o = p.add(std::vector<float>(static_cast<size_t>(T * H * hd)));
      auto args = [&](bool dut) {
        oxi::nn::AttnArgs a;
        a.q = dut ? p.c(q) : p.r(q);
        a.q_stride = 2 * H * hd;  // Qwen's interleaved q | gate rows
        a.q_head_stride = 2 * hd;
        a.k = dut ? p.c(kb) : p.r(kb);
        a.v = dut ? p.c(vb) : p.r(vb);
        a.out = dut ? p.c(o) : p.r(o);
        a.out_stride = H * hd;
        a.T = T;
        a.pos0 = pos0;
        a.H = H;
        a.Hkv = Hkv;
        a.hd = hd;
        a.window = window;
        a.scale = 1.0f / std::sqrt(static_cast<float>(hd));
        a.f16_like = f16;
        return a;
      };
      p.dev->attention(args(true));
      p.ref->attention(args(false));
      EXPECT_LE(p.rel_diff(o), f16 ? 2e-3 : 1e-5) << "window " << window << " f16 " << f16;
    }
}

TEST_P(DeviceBlocks, MoeRouting) {
  const int64_t rows = 9, E = 16, k = 4;
  Pair p = pair();
  const int l = p.add(randn(static_cast<size_t>(rows * E), 18, 2.0f));
  std::vector<int32_t> ic(static_cast<size_t>(rows * k)), ir(ic.size());
  std::vector<float> wc(ic.size()), wr(ic.size());
  p.dev->moe_route(p.c(l), rows, E, k, ic.data(), wc.data());
  p.ref->moe_route(p.r(l), rows, E, k, ir.data(), wr.data());
  EXPECT_EQ(ic, ir);
  for (size_t i = 0; i < wc.size(); ++i) EXPECT_NEAR(wc[i], wr[i], 1e-6);
}

// The small blocks (host versions in nn/device.cpp unless the device has kernels; double on the test device):
// per-head norms on strided views, the gated-attention gate, Gated DeltaNet gates, row gather and
// scaled scatter-add (ids repeat).
TEST_P(DeviceBlocks, HeadNormsGatesAndRows) {
  const int64_t rows = 3, heads = 4, width = 24, row_stride = 2 * heads * width + 5, head_stride = 2 * width;
  Pair p = pair();
  const int n_x = static_cast<int>(rows * row_stride);
  const int x = p.add(randn(static_cast<size_t>(n_x), 30)), x2 = p.add(randn(static_cast<size_t>(n_x), 31));
  const int w = p.add(randn(static_cast<size_t>(width), 32));
  p.dev->rms_norm_heads(oxi::nn::Heads{p.c(x, 1), row_stride, head_stride}, rows, heads, width, p.c(w), 1e-6f);
  p.ref->rms_norm_heads(oxi::nn::Heads{p.r(x, 1), row_stride, head_stride}, rows, heads, width, p.r(w), 1e-6f);
  EXPECT_LE(p.rel_diff(x), 1e-5);
  p.dev->l2_norm_heads(oxi::nn::Heads{p.c(x2), row_stride, head_stride}, rows, heads, width, 1e-6f, 0.25f);
  p.ref->l2_norm_heads(oxi::nn::Heads{p.r(x2), row_stride, head_stride}, rows, heads, width, 1e-6f, 0.25f);
  EXPECT_LE(p.rel_diff(x2), 1e-5);
  const int y = p.add(randn(static_cast<size_t>(rows * heads * width), 33));
  p.dev->mul_sigmoid_heads(oxi::nn::Heads{p.c(y), heads * width, width}, oxi::nn::Heads{p.c(x2, width), row_stride, head_stride}, rows,
                           heads, width);
  p.ref->mul_sigmoid_heads(oxi::nn::Heads{p.r(y), heads * width, width}, oxi::nn::Heads{p.r(x2, width), row_stride, head_stride}, rows,
                           heads, width);
  EXPECT_LE(p.rel_diff(y), 1e-5);
  const int64_t T = 5, H = 6;
  const int a = p.add(randn(static_cast<size_t>(T * H), 34, 3.0f)), b = p.add(randn(static_cast<size_t>(T * H), 35, 3.0f));
  std::vector<float> sa = randn(static_cast<size_t>(H), 36);
  for (auto& v : sa) v = -std::exp(v);
  const int ssm_a = p.add(sa), dt = p.add(randn(static_cast<size_t>(H), 37, 10.0f)), gb = p.add(std::vector<float>(static_cast<size_t>(T * 2 * H)));
  p.dev->gdn_gates(p.c(a), p.c(b), p.c(ssm_a), p.c(dt), T, H, p.c(gb));
  p.ref->gdn_gates(p.r(a), p.r(b), p.r(ssm_a), p.r(dt), T, H, p.r(gb));
  EXPECT_LE(p.rel_diff(gb), 1e-5);
  const int64_t D = 37;
  const int src = p.add(randn(static_cast<size_t>(9 * D), 38)), g = p.add(std::vector<float>(static_cast<size_t>(4 * D)));
  const int32_t ids[4] = {8, 0, 3, 3};
  p.dev->gather_rows(p.c(src), ids, D, p.c(g));
  p.ref->gather_rows(p.r(src), ids, D, p.r(g));
  EXPECT_LE(p.rel_diff(g), 0.0);
  const int acc = p.add(randn(static_cast<size_t>(9 * D), 39));
  const float wts[4] = {0.5f, -1.25f, 2.0f, 0.75f};
  p.dev->add_rows_scaled(p.c(g), ids, wts, D, p.c(acc));
  p.ref->add_rows_scaled(p.r(g), ids, wts, D, p.r(acc));
  EXPECT_LE(p.rel_diff(acc), 1e-6);
}

// scale, add, mul_cols and the RoPE with frequency divisors (Gemma 4's proportional RoPE: 1e30
// leaves a pair as it is), against the test device.
TEST_P(DeviceBlocks, ScaleAddColsAndDividedRope) {
  const int64_t rows = 3, width = 300;
  Pair p = pair();
  const int x = p.add(randn(static_cast<size_t>(rows * width), 40)), y = p.add(randn(static_cast<size_t>(rows * width), 41));
  const int w = p.add(randn(static_cast<size_t>(width), 42));
  p.dev->scale(p.c(x), rows * width, 0.37f);
  p.ref->scale(p.r(x), rows * width, 0.37f);
  p.dev->add(p.c(x), p.c(y), rows * width);
  p.ref->add(p.r(x), p.r(y), rows * width);
  p.dev->mul_cols(p.c(x), p.c(w), rows, width);
  p.ref->mul_cols(p.r(x), p.r(w), rows, width);
  EXPECT_LE(p.rel_diff(x), 1e-6);
  const int64_t heads = 2, hd = 32, n_rot = 32;
  const int r = p.add(randn(static_cast<size_t>(rows * heads * hd), 43));
  const int32_t pos[3] = {0, 7, 1000};
  std::vector<float> div(static_cast<size_t>(n_rot / 2), 1.0f);
  for (size_t j = 4; j < div.size(); ++j) div[j] = 1e30f;
  p.dev->rope_neox_div(p.c(r), rows, heads * hd, heads, hd, n_rot, 1e6f, pos, div);
  p.ref->rope_neox_div(p.r(r), rows, heads * hd, heads, hd, n_rot, 1e6f, pos, div);
  EXPECT_LE(p.rel_diff(r), 2e-4);
}

TEST_P(DeviceBlocks, RefsAreChecked) {
  auto ref = oxi::backend::make_test_device();
  auto b = dev_->alloc(10);
  std::vector<float> x(11, 1.0f);
  EXPECT_THROW(dev_->write(Ref{b.get(), 0}, x.data(), 11), oxi::Error);
  EXPECT_THROW(dev_->write(Ref{b.get(), 5}, x.data(), 6), oxi::Error);
  EXPECT_THROW(dev_->read(Ref{b.get(), -1}, x.data(), 2), oxi::Error);
  EXPECT_THROW(ref->write(Ref{b.get(), 0}, x.data(), 1), oxi::Error);  // another device's buffer
  EXPECT_NO_THROW(dev_->write(Ref{b.get(), 5}, x.data(), 5));
}

INSTANTIATE_TEST_SUITE_P(EveryDevice, DeviceBlocks, ::testing::ValuesIn(devices()), device_name);

}  // namespace
