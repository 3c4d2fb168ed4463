// Every block of the device interface (nn/device.h) on the CPU device — the kernels the models run,
// on every ISA this host has — against the test device, an independent double-precision
// implementation of the formulas (backend/test_device.h). A new device backend gets the same
// check. Tolerances, relative to the output's largest value: f32 blocks 1e-5..2e-4 (f32 vs double
// rounding; RoPE angles at large positions); matmuls 1e-5 with f32 weights, 1e-3 f16, 1e-2 bf16
// (the CPU rounds activations to the weight's type, as ggml) and 2e-2 quantised (8-bit activation
// blocks), while the test device multiplies the dequantised weights in double.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "backend/test_device.h"
#include "core/error.h"
#include "core/half.h"
#include "kernels/isa.h"
#include "kernels/matmul.h"
#include "nn/device.h"

namespace {

using oxi::nn::Device;
using oxi::nn::Ref;

std::vector<float> randn(size_t n, uint32_t seed, float scale = 1.0f) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> nd(0.0f, scale);
  std::vector<float> v(n);
  for (auto& x : v) x = nd(rng);
  return v;
}

// Runs `fn` on both devices with the same inputs (uploaded to each) and returns max |Δ| and the
// output's max |value| for output buffer `out_idx`.
struct Pair {
  std::unique_ptr<Device> cpu = oxi::nn::make_cpu_device();
  std::unique_ptr<Device> ref = oxi::backend::make_test_device();
  std::vector<std::shared_ptr<oxi::nn::Buffer>> cb, rb;
  int add(const std::vector<float>& host) {
    cb.push_back(cpu->alloc(static_cast<int64_t>(host.size())));
    rb.push_back(ref->alloc(static_cast<int64_t>(host.size())));
    cpu->write(Ref{cb.back().get(), 0}, host.data(), static_cast<int64_t>(host.size()));
    ref->write(Ref{rb.back().get(), 0}, host.data(), static_cast<int64_t>(host.size()));
    return static_cast<int>(cb.size()) - 1;
  }
  Ref c(int i, int64_t off = 0) { return Ref{cb[static_cast<size_t>(i)].get(), off}; }
  Ref r(int i, int64_t off = 0) { return Ref{rb[static_cast<size_t>(i)].get(), off}; }
  // max |cpu − ref| over buffer i, relative to max |ref|
  double rel_diff(int i) {
    const int64_t n = cb[static_cast<size_t>(i)]->floats();
    std::vector<float> a(static_cast<size_t>(n)), b(static_cast<size_t>(n));
    cpu->read(c(i), a.data(), n);
    ref->read(r(i), b.data(), n);
    double d = 0, m = 0;
    for (int64_t k = 0; k < n; ++k) {
      d = std::max(d, static_cast<double>(std::fabs(a[static_cast<size_t>(k)] - b[static_cast<size_t>(k)])));
      m = std::max(m, static_cast<double>(std::fabs(b[static_cast<size_t>(k)])));
    }
    EXPECT_GT(m, 0.0) << "output is all zero";
    return d / std::max(m, 1e-30);
  }
};

class DeviceBlocks : public ::testing::TestWithParam<std::string> {  // param: ISA
 protected:
  void SetUp() override { oxi::set_isa(GetParam()); }
  void TearDown() override { oxi::set_isa("auto"); }
};

TEST_P(DeviceBlocks, MatmulEveryWeightType) {
  const int64_t rows = 96, cols = 256, n = 7;
  const auto wf = randn(static_cast<size_t>(rows * cols), 1, 0.05f);
  for (oxi::DType t : {oxi::DType::F32, oxi::DType::F16, oxi::DType::BF16, oxi::DType::Q8_0, oxi::DType::Q4_0, oxi::DType::Q4_K,
                       oxi::DType::Q6_K}) {
    const uint64_t rb = *oxi::dtype_row_bytes(t, static_cast<uint64_t>(cols));
    std::vector<uint8_t> bytes(rb * static_cast<uint64_t>(rows));
    for (int64_t r = 0; r < rows; ++r) oxi::quantize_row(t, wf.data() + r * cols, cols, bytes.data() + rb * static_cast<uint64_t>(r));
    oxi::MatrixView v;
    v.dtype = t;
    v.rows = rows;
    v.cols = cols;
    v.row_bytes = rb;
    v.data = bytes.data();
    Pair p;
    auto wc = p.cpu->upload(v), wr = p.ref->upload(v);
    const int x = p.add(randn(static_cast<size_t>(n * cols), 2)), y = p.add(std::vector<float>(static_cast<size_t>(n * rows)));
    const oxi::nn::Weight* wcs[1] = {wc.get()};
    const oxi::nn::Weight* wrs[1] = {wr.get()};
    const Ref yc[1] = {p.c(y)}, yr[1] = {p.r(y)};
    p.cpu->matmul(wcs, yc, p.c(x), n);
    p.ref->matmul(wrs, yr, p.r(x), n);
    // The CPU rounds activations to the weight's own type (f16, bf16: as ggml) or to 8-bit blocks.
    const double tol = t == oxi::DType::F32 ? 1e-5 : t == oxi::DType::F16 ? 1e-3 : t == oxi::DType::BF16 ? 1e-2 : 2e-2;
    EXPECT_LE(p.rel_diff(y), tol) << oxi::dtype_name(t);
    // embedding rows of the same table
    const int e = p.add(std::vector<float>(static_cast<size_t>(3 * cols)));
    const int32_t ids[3] = {5, 0, 95};
    p.cpu->embed(*wc, ids, p.c(e));
    p.ref->embed(*wr, ids, p.r(e));
    EXPECT_LE(p.rel_diff(e), 1e-6) << oxi::dtype_name(t);
  }
}

TEST_P(DeviceBlocks, NormsActivationsSoftcap) {
  const int64_t rows = 5, width = 200;
  Pair p;
  const int h = p.add(randn(static_cast<size_t>(rows * width), 3)), o = p.add(randn(static_cast<size_t>(rows * width), 4));
  const int w = p.add(randn(static_cast<size_t>(width), 5)), y = p.add(std::vector<float>(static_cast<size_t>(rows * width)));
  p.cpu->rms_norm(p.c(h), p.c(o), p.c(w), p.c(y), rows, width, 1e-6f);
  p.ref->rms_norm(p.r(h), p.r(o), p.r(w), p.r(y), rows, width, 1e-6f);
  EXPECT_LE(p.rel_diff(h), 1e-6);  // the residual add
  EXPECT_LE(p.rel_diff(y), 1e-5);
  const int64_t n = 3000;
  const int a = p.add(randn(static_cast<size_t>(n), 6, 3.0f)), b = p.add(randn(static_cast<size_t>(n), 7));
  const int s = p.add(std::vector<float>(static_cast<size_t>(n))), g = p.add(std::vector<float>(static_cast<size_t>(n)));
  p.cpu->silu_mul(p.c(a), p.c(b), p.c(s), n);
  p.ref->silu_mul(p.r(a), p.r(b), p.r(s), n);
  EXPECT_LE(p.rel_diff(s), 1e-5);
  p.cpu->gelu_mul(p.c(a), p.c(b), p.c(g), n);
  p.ref->gelu_mul(p.r(a), p.r(b), p.r(g), n);
  EXPECT_LE(p.rel_diff(g), 1e-5);
  const int sc = p.add(randn(static_cast<size_t>(n), 8, 40.0f));
  p.cpu->softcap(p.c(sc), n, 30.0f);
  p.ref->softcap(p.r(sc), n, 30.0f);
  EXPECT_LE(p.rel_diff(sc), 1e-5);
}

TEST_P(DeviceBlocks, RopeAndMrope) {
  const int64_t rows = 6, heads = 3, hd = 64, n_rot = 32, stride = heads * hd + 16;
  const std::vector<int32_t> pos = {0, 1, 7, 100, 4095, 20000};
  const std::vector<int32_t> pos3 = {0, 0, 0, 5, 1, 2, 5, 3, 9, 6, 6, 6, 10, 0, 31, 11, 4, 4};
  for (bool m : {false, true}) {
    Pair p;
    const int x = p.add(randn(static_cast<size_t>(rows * stride), 9));
    p.cpu->rope_neox(p.c(x), rows, stride, heads, hd, n_rot, 1e6f, pos, m ? pos3.data() : nullptr, {11, 11, 10});
    p.ref->rope_neox(p.r(x), rows, stride, heads, hd, n_rot, 1e6f, pos, m ? pos3.data() : nullptr, {11, 11, 10});
    EXPECT_LE(p.rel_diff(x), 2e-4) << (m ? "mrope" : "rope");  // f32 angles at position 20000
  }
}

TEST_P(DeviceBlocks, ConvAndGatedDeltaNet) {
  const int64_t C = 96, K = 4, T = 70;
  Pair p;
  const int X = p.add(randn(static_cast<size_t>((K - 1 + T) * C), 10)), wT = p.add(randn(static_cast<size_t>(K * C), 11, 0.5f));
  const int y = p.add(std::vector<float>(static_cast<size_t>(T * C)));
  p.cpu->conv_silu(p.c(X), p.c(wT), C, K, T, p.c(y));
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
      auto args = [&](bool cpu) {
        oxi::nn::GdnArgs a;
        a.qkv = cpu ? p.c(q) : p.r(q);
        a.qk_stride = W;
        a.gb = cpu ? p.c(g) : p.r(g);
        a.gb_stride = 2 * Hv;
        a.state = cpu ? p.c(S) : p.r(S);
        a.out = cpu ? p.c(o) : p.r(o);
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
      p.cpu->gdn(args(true));
      p.ref->gdn(args(false));
      EXPECT_LE(p.rel_diff(o), 1e-4) << "tiled " << tiled << " chunked " << chunked;
      EXPECT_LE(p.rel_diff(S), 1e-4) << "tiled " << tiled << " chunked " << chunked;
    }
}

TEST_P(DeviceBlocks, AttentionCausalWindowGqa) {
  const int64_t H = 4, Hkv = 2, hd = 32, pos0 = 40, T = 9, KW = Hkv * hd;
  for (int64_t window : {0, 16})
    for (bool f16 : {false, true}) {
      Pair p;
      std::vector<float> k = randn(static_cast<size_t>((pos0 + T) * KW), 15), v = randn(static_cast<size_t>((pos0 + T) * KW), 16);
      if (f16)  // an f16 cache holds f16 values
        for (auto* vec : {&k, &v})
          for (auto& x : *vec) x = oxi::f16_to_f32(oxi::f32_to_f16(x));
      const int q = p.add(randn(static_cast<size_t>(T * H * hd * 2), 17)), kb = p.add(k), vb = p.add(v);
      const int o = p.add(std::vector<float>(static_cast<size_t>(T * H * hd)));
      auto args = [&](bool cpu) {
        oxi::nn::AttnArgs a;
        a.q = cpu ? p.c(q) : p.r(q);
        a.q_stride = 2 * H * hd;  // Qwen's interleaved q | gate rows
        a.q_head_stride = 2 * hd;
        a.k = cpu ? p.c(kb) : p.r(kb);
        a.v = cpu ? p.c(vb) : p.r(vb);
        a.out = cpu ? p.c(o) : p.r(o);
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
      p.cpu->attention(args(true));
      p.ref->attention(args(false));
      EXPECT_LE(p.rel_diff(o), f16 ? 2e-3 : 1e-5) << "window " << window << " f16 " << f16;
    }
}

TEST_P(DeviceBlocks, MoeRouting) {
  const int64_t rows = 9, E = 16, k = 4;
  Pair p;
  const int l = p.add(randn(static_cast<size_t>(rows * E), 18, 2.0f));
  std::vector<int32_t> ic(static_cast<size_t>(rows * k)), ir(ic.size());
  std::vector<float> wc(ic.size()), wr(ic.size());
  p.cpu->moe_route(p.c(l), rows, E, k, ic.data(), wc.data());
  p.ref->moe_route(p.r(l), rows, E, k, ir.data(), wr.data());
  EXPECT_EQ(ic, ir);
  for (size_t i = 0; i < wc.size(); ++i) EXPECT_NEAR(wc[i], wr[i], 1e-6);
}

TEST(DeviceMemory, RefsAreChecked) {
  auto cpu = oxi::nn::make_cpu_device();
  auto ref = oxi::backend::make_test_device();
  auto b = cpu->alloc(10);
  std::vector<float> x(11, 1.0f);
  EXPECT_THROW(cpu->write(Ref{b.get(), 0}, x.data(), 11), oxi::Error);
  EXPECT_THROW(cpu->write(Ref{b.get(), 5}, x.data(), 6), oxi::Error);
  EXPECT_THROW(ref->write(Ref{b.get(), 0}, x.data(), 1), oxi::Error);  // another device's buffer
  EXPECT_NO_THROW(cpu->write(Ref{b.get(), 5}, x.data(), 5));
}

INSTANTIATE_TEST_SUITE_P(EveryIsa, DeviceBlocks, ::testing::ValuesIn(oxi::available_isas()));

}  // namespace
