// nn/ffn.h (the gated FFN block) and nn/ops.h's RMS / L2 norm against direct references written
// out here, on every ISA the host runs: the norms bit for bit with ggml's arithmetic (each square
// rounded to f32, summed in double one after another), the FFN with our kernels against an f64
// reference, and with ggml's f32 product order bit for bit against the composition of ggml's dot
// product (kernels/ggml.h, itself checked against llama.cpp's vectors) and its GELU table.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "core/error.h"
#include "device_pair.h"  // randn
#include "kernels/ggml.h"
#include "kernels/isa.h"
#include "nn/ffn.h"
#include "nn/ops.h"

namespace oxi::nn {
namespace {

using oxi_device_test::randn;

struct IsaGuard {
  ~IsaGuard() { set_isa("auto"); }
};

MatrixView f32_view(const std::vector<float>& w, int64_t rows, int64_t cols) {
  MatrixView m;
  m.dtype = DType::F32;
  m.rows = rows;
  m.cols = cols;
  m.data = reinterpret_cast<const uint8_t*>(w.data());
  m.row_bytes = static_cast<uint64_t>(cols) * sizeof(float);
  return m;
}

// ggml_compute_forward_rms_norm_f32, one row: sum += (double)(x·x) in order, mean = (float)(sum/n),
// scale = 1/sqrtf(mean + eps), y = x·scale, then ggml_mul by the weight.
void ref_rms_norm(const float* x, const float* w, float* y, int64_t n, float eps) {
  double sum = 0.0;
  for (int64_t i = 0; i < n; ++i) sum += static_cast<double>(x[i] * x[i]);
  const float mean = static_cast<float>(sum / static_cast<double>(n));
  const float scale = 1.0f / std::sqrt(mean + eps);
  for (int64_t i = 0; i < n; ++i) {
    const float v = x[i] * scale;
    y[i] = w ? v * w[i] : v;
  }
}

TEST(RmsNorm, EqualsGgmlArithmeticBitForBitOnEveryIsa) {
  IsaGuard guard;
  for (const auto& isa : available_isas()) {
    set_isa(isa);
    for (int64_t n : {1, 7, 8, 9, 64, 255, 1536, 2560}) {
      const int64_t rows = 5;
      const std::vector<float> x = randn(static_cast<size_t>(rows * n), 11u + static_cast<uint32_t>(n), 3.0f);
      const std::vector<float> w = randn(static_cast<size_t>(n), 7u + static_cast<uint32_t>(n));
      for (const bool weighted : {false, true}) {
        const float* wp = weighted ? w.data() : nullptr;
        std::vector<float> want(x.size()), got(x.size()), alias = x;
        for (int64_t r = 0; r < rows; ++r) ref_rms_norm(x.data() + r * n, wp, want.data() + r * n, n, 1e-6f);
        ops::rms_norm_rows(x.data(), wp, got.data(), rows, n, 1e-6f);
        for (int64_t r = 0; r < rows; ++r) ops::rms_norm(alias.data() + r * n, wp, alias.data() + r * n, n, 1e-6f);  // y = x
        for (size_t i = 0; i < x.size(); ++i) {
          ASSERT_EQ(got[i], want[i]) << isa << " n=" << n << " w=" << weighted << " i=" << i;
          ASSERT_EQ(alias[i], want[i]) << isa << " in place, n=" << n << " i=" << i;
        }
      }
    }
  }
}

TEST(L2Norm, EqualsGgmlArithmeticBitForBit) {
  // ggml_l2_norm: the squares summed as the RMS norm's, x · 1/max(||x||, eps).
  for (int64_t n : {3, 16, 128, 1000}) {
    std::vector<float> x = randn(static_cast<size_t>(n), 5u + static_cast<uint32_t>(n));
    double sum = 0.0;
    for (float v : x) sum += static_cast<double>(v * v);
    const float scale = 1.0f / std::max(static_cast<float>(std::sqrt(sum)), 1e-6f);
    std::vector<float> want(x.size());
    for (size_t i = 0; i < x.size(); ++i) want[i] = x[i] * scale;
    ops::l2_norm(x.data(), n, 1e-6f);
    for (size_t i = 0; i < x.size(); ++i) ASSERT_EQ(x[i], want[i]) << "n=" << n << " i=" << i;
  }
}

struct FfnCase {
  int64_t T, d, I;
};

struct FfnData {
  std::vector<float> gate, up, down, x;
};

FfnData make_ffn(const FfnCase& c, uint32_t seed) {
  const float s = 1.0f / std::sqrt(static_cast<float>(c.d));
  return {randn(static_cast<size_t>(c.I * c.d), seed, s), randn(static_cast<size_t>(c.I * c.d), seed + 1, s),
          randn(static_cast<size_t>(c.d * c.I), seed + 2, 1.0f / std::sqrt(static_cast<float>(c.I))),
          randn(static_cast<size_t>(c.T * c.d), seed + 3, 2.0f)};
}

// y = down · (act(gate·x) ⊙ up·x), every sum and the activation in double.
std::vector<double> ref_ffn_f64(const FfnCase& c, const FfnData& w, bool silu) {
  std::vector<double> y(static_cast<size_t>(c.T * c.d)), h(static_cast<size_t>(c.I));
  for (int64_t t = 0; t < c.T; ++t) {
    const float* xt = w.x.data() + t * c.d;
    for (int64_t i = 0; i < c.I; ++i) {
      double g = 0, u = 0;
      for (int64_t j = 0; j < c.d; ++j) {
        g += static_cast<double>(w.gate[static_cast<size_t>(i * c.d + j)]) * xt[j];
        u += static_cast<double>(w.up[static_cast<size_t>(i * c.d + j)]) * xt[j];
      }
      const double a = silu ? g / (1.0 + std::exp(-g))
                            : 0.5 * g * (1.0 + std::tanh(std::sqrt(2.0 / M_PI) * g * (1.0 + 0.044715 * g * g)));
      h[static_cast<size_t>(i)] = a * u;
    }
    for (int64_t r = 0; r < c.d; ++r) {
      double s = 0;
      for (int64_t i = 0; i < c.I; ++i) s += w.down[static_cast<size_t>(r * c.I + i)] * h[static_cast<size_t>(i)];
      y[static_cast<size_t>(t * c.d + r)] = s;
    }
  }
  return y;
}

TEST(GatedFfn, OurKernelsMatchAnF64ReferenceOnEveryIsa) {
  IsaGuard guard;
  const FfnCase cases[] = {{1, 64, 96}, {3, 128, 80}, {9, 96, 256}, {1, 32, 4100}, {5, 32, 4100}};  // the last over the pool
  for (const auto& isa : available_isas()) {
    set_isa(isa);
    uint32_t seed = 100;
    for (const FfnCase& c : cases) {
      const FfnData w = make_ffn(c, seed += 10);
      for (const GateAct act : {GateAct::kSilu, GateAct::kGeluTanh}) {
        const std::vector<double> want = ref_ffn_f64(c, w, act == GateAct::kSilu);
        std::vector<float> y(want.size());
        GatedFfn o;
        o.act = act;
        gated_ffn(f32_view(w.gate, c.I, c.d), f32_view(w.up, c.I, c.d), f32_view(w.down, c.d, c.I), w.x.data(), c.T,
                  y.data(), o);
        double scale = 0, err = 0;
        for (size_t i = 0; i < y.size(); ++i) {
          scale = std::max(scale, std::fabs(want[i]));
          err = std::max(err, std::fabs(y[i] - want[i]));
        }
        EXPECT_LT(err, 2e-5 * std::max(scale, 1.0))
            << isa << " T=" << c.T << " d=" << c.d << " I=" << c.I << " act=" << static_cast<int>(act);
      }
    }
  }
}

TEST(GatedFfn, GgmlOrderEqualsGgmlDotAndGeluTableBitForBit) {
  // With Products::ggml_f32, one row (ggml's vec_dot order; several rows go through llamafile's
  // sgemm) and expert products (mul_mat_id: vec_dot for any row count) are ggml_vec_dot_f32 per
  // output, and GeGLU is ggml_gelu(g) · u in f32.
  IsaGuard guard;
  struct C {
    FfnCase c;
    bool expert;
  };
  const C cases[] = {{{1, 64, 96}, false}, {{1, 100, 70}, false}, {{3, 128, 80}, true}, {{5, 48, 33}, true}, {{5, 32, 4100}, true}};
  for (const auto& isa : available_isas()) {
    set_isa(isa);
    uint32_t seed = 300;
    for (const C& k : cases) {
      const FfnCase& c = k.c;
      const FfnData w = make_ffn(c, seed += 10);
      for (const int lanes : {8, 16}) {
        std::vector<float> want(static_cast<size_t>(c.T * c.d)), h(static_cast<size_t>(c.I));
        for (int64_t t = 0; t < c.T; ++t) {
          const float* xt = w.x.data() + t * c.d;
          for (int64_t i = 0; i < c.I; ++i) {
            const float g = ggml_dot_f32(w.gate.data() + i * c.d, xt, c.d, lanes);
            const float u = ggml_dot_f32(w.up.data() + i * c.d, xt, c.d, lanes);
            h[static_cast<size_t>(i)] = ggml_gelu(g) * u;
          }
          for (int64_t r = 0; r < c.d; ++r)
            want[static_cast<size_t>(t * c.d + r)] = ggml_dot_f32(w.down.data() + r * c.I, h.data(), c.I, lanes);
        }
        std::vector<float> y(want.size());
        const GatedFfn o{GateAct::kGeluGgml, Products{true, lanes}, k.expert};
        gated_ffn(f32_view(w.gate, c.I, c.d), f32_view(w.up, c.I, c.d), f32_view(w.down, c.d, c.I), w.x.data(), c.T,
                  y.data(), o);
        for (size_t i = 0; i < y.size(); ++i)
          ASSERT_EQ(y[i], want[i]) << isa << " lanes=" << lanes << " T=" << c.T << " d=" << c.d << " I=" << c.I
                                   << " i=" << i;
      }
    }
  }
}

TEST(GatedFfn, RejectsMismatchedShapes) {
  const FfnCase c{1, 16, 24};
  const FfnData w = make_ffn(c, 9);
  std::vector<float> y(16);
  EXPECT_THROW(gated_ffn(f32_view(w.gate, c.I, c.d), f32_view(w.up, c.I - 1, c.d), f32_view(w.down, c.d, c.I),
                         w.x.data(), 1, y.data(), GatedFfn{}),
               Error);
  EXPECT_THROW(gated_ffn(f32_view(w.gate, c.I, c.d), f32_view(w.up, c.I, c.d), f32_view(w.down, c.I, c.d),
                         w.x.data(), 1, y.data(), GatedFfn{}),
               Error);
}

}  // namespace
}  // namespace oxi::nn
