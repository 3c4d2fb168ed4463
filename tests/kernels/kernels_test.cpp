#include <algorithm>
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <cstring>
#include <map>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/half.h"
#include "kernels/dispatch.h"
#include "kernels/isa.h"
#include "kernels/pack.h"
#include "kernels/matmul.h"
#include "kernels/quant.h"
#include "kernels/thread_pool.h"

using namespace oxi;
using namespace oxi::kern;

// The wasm build without pthreads has a one-thread pool: thread-count tests do not apply.
#if defined(__EMSCRIPTEN__) && !defined(__EMSCRIPTEN_PTHREADS__)
#define OXI_SKIP_WITHOUT_THREADS() GTEST_SKIP() << "wasm build without threads"
#else
#define OXI_SKIP_WITHOUT_THREADS() (void)0
#endif

namespace {

std::vector<float> randn(size_t n, uint32_t seed, float scale = 1.0f) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.0f, scale);
  std::vector<float> v(n);
  for (auto& x : v) x = dist(rng);
  return v;
}

// Random but valid bytes for a weight matrix of type t: random bits with sane scale fields.
std::vector<uint8_t> random_weights(DType t, int64_t rows, int64_t cols, uint32_t seed) {
  const uint64_t rb = *dtype_row_bytes(t, cols);
  std::vector<uint8_t> buf(rb * rows);
  std::mt19937 rng(seed);
  for (auto& b : buf) b = static_cast<uint8_t>(rng());
  std::uniform_real_distribution<float> sc(0.001f, 0.02f);
  std::normal_distribution<float> nd(0.0f, 0.5f);
  const auto tr = *dtype_traits(t);
  const int64_t nb = rows * cols / tr.block_elems;
  for (int64_t i = 0; i < nb; ++i) {
    uint8_t* blk = buf.data() + i * tr.block_bytes;
    auto put16 = [&](size_t off, uint16_t v) { std::memcpy(blk + off, &v, 2); };
    switch (t) {
      case DType::F32: { float f = nd(rng); std::memcpy(blk, &f, 4); break; }
      case DType::F16: put16(0, f32_to_f16(nd(rng))); break;
      case DType::BF16: put16(0, f32_to_bf16(nd(rng))); break;
      case DType::Q8_0:
      case DType::Q4_0: put16(0, f32_to_f16(sc(rng))); break;
      case DType::Q4_K:
      case DType::Q5_K: put16(0, f32_to_f16(sc(rng))); put16(2, f32_to_f16(sc(rng))); break;
      case DType::Q6_K: put16(208, f32_to_f16(sc(rng) * 0.1f)); break;
      case DType::Q3_K: put16(108, f32_to_f16(sc(rng) * 0.1f)); break;
      case DType::Q2_K: put16(80, f32_to_f16(sc(rng) * 0.1f)); put16(82, f32_to_f16(sc(rng) * 0.1f)); break;
      case DType::IQ4_XS:
      case DType::IQ3_S:
      case DType::IQ3_XXS:
      case DType::IQ2_XXS:
      case DType::IQ2_XS:
      case DType::IQ2_S:
      case DType::IQ1_S: put16(0, f32_to_f16(sc(rng) * 0.01f)); break;
      case DType::IQ1_M: {  // f16 d in the top nibbles of the four scale u16s (bytes 48..55)
        const uint16_t d = f32_to_f16(sc(rng) * 0.01f);
        for (int k = 0; k < 4; ++k) {
          uint16_t v;
          std::memcpy(&v, blk + 48 + 2 * k, 2);
          put16(48 + 2 * k, static_cast<uint16_t>((v & 0x0FFF) | (((d >> (4 * k)) & 15) << 12)));
        }
        break;
      }
      case DType::MXFP4: blk[0] = static_cast<uint8_t>(118 + rng() % 8); break;  // 2^(e − 128): 2^-10 .. 2^-3
      case DType::Q5_0:
      case DType::IQ4_NL: put16(0, f32_to_f16(sc(rng))); break;
      case DType::Q4_1:
      case DType::Q5_1: put16(0, f32_to_f16(sc(rng))); put16(2, f32_to_f16(-sc(rng) * 8.0f)); break;
      default:
        if (is_mlx_dtype(t)) {  // f32 scale, f32 bias (≈ −scale·2^(bits−1): codes centred on 0)
          const float s = sc(rng), b = -s * (t <= DType::MLX_Q4_G128 ? 8.0f : 128.0f);
          std::memcpy(blk, &s, 4);
          std::memcpy(blk + 4, &b, 4);
        }
        break;
    }
  }
  return buf;
}

const DType kAllTypes[] = {DType::F32,  DType::F16,  DType::BF16, DType::Q8_0,  DType::Q4_0,
                           DType::Q4_K, DType::Q5_K, DType::Q6_K, DType::Q3_K,  DType::IQ4_XS,
                           DType::Q5_0, DType::Q4_1, DType::Q5_1, DType::IQ4_NL, DType::Q2_K,
                           DType::IQ3_S, DType::IQ3_XXS, DType::IQ2_XXS, DType::IQ2_XS, DType::IQ2_S,
                           DType::IQ1_S, DType::IQ1_M, DType::MXFP4, DType::MLX_Q4_G32, DType::MLX_Q4_G64,
                           DType::MLX_Q4_G128, DType::MLX_Q8_G32, DType::MLX_Q8_G64, DType::MLX_Q8_G128};

struct IsaGuard {
  ~IsaGuard() { set_isa("auto"); }
};

// Exact f64 dot of dequantised weights with the activations as the dot format sees them.
std::vector<float> dequant_matmul(const MatrixView& w, const float* x, int64_t nt) {
  std::vector<float> row(w.cols), y(nt * w.rows);
  for (int64_t r = 0; r < w.rows; ++r) {
    dequantize_row(w, r, row.data());
    for (int64_t t = 0; t < nt; ++t) {
      double s = 0;
      for (int64_t c = 0; c < w.cols; ++c) s += static_cast<double>(row[c]) * x[t * w.cols + c];
      y[t * w.rows + r] = static_cast<float>(s);
    }
  }
  return y;
}

}  // namespace

TEST(ThreadPool, ParallelForCoversAllOnce) {
  OXI_SKIP_WITHOUT_THREADS();
  for (int nth : {1, 2, 3}) {
    set_num_threads(nth);
    EXPECT_EQ(num_threads(), nth);
    std::vector<std::atomic<int>> hits(1000);
    parallel_for(1000, [&](int64_t i) { hits[i].fetch_add(1); });
    for (auto& h : hits) EXPECT_EQ(h.load(), 1);
    std::atomic<int64_t> sum{0};
    parallel_for_chunked(777, 10, [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) sum += i;
    });
    EXPECT_EQ(sum.load(), 777 * 776 / 2);
  }
  set_num_threads(0);
}

TEST(ThreadPool, NestedRunsSeriallyAndExceptionsPropagate) {
  OXI_SKIP_WITHOUT_THREADS();
  set_num_threads(2);
  std::atomic<int> n{0};
  parallel_for(4, [&](int64_t) {
    EXPECT_TRUE(in_parallel_region());
    parallel_for(3, [&](int64_t) { n++; });
  });
  EXPECT_EQ(n.load(), 12);
  EXPECT_THROW(parallel_for(8, [&](int64_t i) {
                 if (i == 5) throw std::runtime_error("boom");
               }),
               std::runtime_error);
  // Still usable afterwards.
  std::atomic<int> m{0};
  parallel_for(10, [&](int64_t) { m++; });
  EXPECT_EQ(m.load(), 10);
  set_num_threads(0);
}

TEST(Isa, SelectAndReport) {
  IsaGuard g;
  auto v = available_isas();
  ASSERT_FALSE(v.empty());
  EXPECT_EQ(v.front(), "scalar");
  for (auto& name : v) {
    set_isa(name);
    EXPECT_EQ(std::string(isa_name()), name);
  }
  EXPECT_THROW(set_isa("sse9"), Error);
  EXPECT_FALSE(kernels_summary().empty());
}

// Hand-built blocks, values computed from the layout description (independently of ref.cpp).
TEST(Dequant, Q4_0Layout) {
  BlockQ4_0 b{};
  b.d = f32_to_f16(0.5f);
  for (int j = 0; j < 16; ++j) b.qs[j] = static_cast<uint8_t>(j | ((15 - j) << 4));
  float y[32];
  dequantize(DType::Q4_0, &b, y, 32);
  for (int j = 0; j < 16; ++j) {
    EXPECT_FLOAT_EQ(y[j], (j - 8) * 0.5f);
    EXPECT_FLOAT_EQ(y[16 + j], (15 - j - 8) * 0.5f);
  }
}

// MLX affine groups (format/dtype.h): f32 scale, f32 bias, codes; 4 bits: element 2j in the low
// nibble of byte j (mlx packs the first code in the lowest bits of a little-endian word).
TEST(Dequant, MlxAffineLayout) {
  std::vector<uint8_t> blk(8 + 16);
  const float s = 0.5f, b = -1.0f;
  std::memcpy(blk.data(), &s, 4);
  std::memcpy(blk.data() + 4, &b, 4);
  for (int j = 0; j < 16; ++j) blk[8 + j] = static_cast<uint8_t>((15 - j) << 4 | j);  // codes j, 15 − j
  std::vector<float> y(32);
  dequantize(DType::MLX_Q4_G32, blk.data(), y.data(), 32);
  for (int j = 0; j < 16; ++j) {
    EXPECT_EQ(y[2 * j], 0.5f * j - 1.0f) << j;
    EXPECT_EQ(y[2 * j + 1], 0.5f * (15 - j) - 1.0f) << j;
  }
  std::vector<uint8_t> b8(8 + 32);
  std::memcpy(b8.data(), &s, 4);
  std::memcpy(b8.data() + 4, &b, 4);
  for (int j = 0; j < 32; ++j) b8[8 + j] = static_cast<uint8_t>(j * 7);
  dequantize(DType::MLX_Q8_G32, b8.data(), y.data(), 32);
  for (int j = 0; j < 32; ++j) EXPECT_EQ(y[j], 0.5f * static_cast<float>(j * 7) - 1.0f) << j;
  EXPECT_EQ(mlx_dtype(4, 64), DType::MLX_Q4_G64);
  EXPECT_EQ(mlx_dtype(8, 128), DType::MLX_Q8_G128);
  EXPECT_FALSE(mlx_dtype(3, 64));
  EXPECT_FALSE(mlx_dtype(4, 48));
}

TEST(Dequant, Q4_KLayout) {
  BlockQ4_K b{};
  b.d = f32_to_f16(1.0f);
  b.dmin = f32_to_f16(0.25f);
  // Sub-block scales 1..8 and mins 60..53 (6 bits each, packed per ggml's 12-byte scheme).
  const int sc[8] = {1, 2, 3, 4, 37, 50, 63, 8}, mn[8] = {60, 59, 58, 57, 56, 55, 54, 53};
  for (int j = 0; j < 4; ++j) {
    b.scales[j] = static_cast<uint8_t>((sc[j] & 63) | ((sc[j + 4] >> 4) << 6));
    b.scales[j + 4] = static_cast<uint8_t>((mn[j] & 63) | ((mn[j + 4] >> 4) << 6));
    b.scales[j + 8] = static_cast<uint8_t>((sc[j + 4] & 15) | ((mn[j + 4] & 15) << 4));
  }
  for (int i = 0; i < 128; ++i) b.qs[i] = static_cast<uint8_t>((i % 16) | (((i * 7) % 16) << 4));
  float y[256];
  dequantize(DType::Q4_K, &b, y, 256);
  for (int e = 0; e < 256; ++e) {
    const int chunk = e / 64, within = e % 64, sub = e / 32;
    const int byte = 32 * chunk + within % 32;
    const int q = within < 32 ? (byte % 16) : ((byte * 7) % 16);
    EXPECT_FLOAT_EQ(y[e], 1.0f * sc[sub] * q - 0.25f * mn[sub]) << e;
  }
}

TEST(Dequant, Q5_KAndQ6_KLayout) {
  BlockQ5_K b{};
  b.d = f32_to_f16(1.0f);
  b.dmin = f32_to_f16(0.0f);
  for (int j = 0; j < 4; ++j) b.scales[j] = 1;  // sub-blocks 0..3 scale 1; 4..7 scale 0|… 
  for (int j = 8; j < 12; ++j) b.scales[j] = 1;  // sub-blocks 4..7 scale 1
  for (int i = 0; i < 128; ++i) b.qs[i] = static_cast<uint8_t>((i % 16) | ((15 - i % 16) << 4));
  for (int l = 0; l < 32; ++l) b.qh[l] = static_cast<uint8_t>(l % 2 ? 0xAA : 0x55);
  float y[256];
  dequantize(DType::Q5_K, &b, y, 256);
  for (int e = 0; e < 256; ++e) {
    const int chunk = e / 64, within = e % 64, l = within % 32;
    const int byte = 32 * chunk + l;
    const int lo = within < 32 ? byte % 16 : 15 - byte % 16;
    const int bit = 2 * chunk + (within < 32 ? 0 : 1);
    const int hb = ((l % 2 ? 0xAA : 0x55) >> bit) & 1;
    EXPECT_FLOAT_EQ(y[e], static_cast<float>(lo + 16 * hb)) << e;
  }

  BlockQ6_K c{};
  c.d = f32_to_f16(1.0f);
  for (int i = 0; i < 16; ++i) c.scales[i] = static_cast<int8_t>(i - 4);
  for (int i = 0; i < 128; ++i) c.ql[i] = static_cast<uint8_t>(i * 37);
  for (int i = 0; i < 64; ++i) c.qh[i] = static_cast<uint8_t>(i * 91 + 3);
  float z[256];
  dequantize(DType::Q6_K, &c, z, 256);
  for (int e = 0; e < 256; ++e) {
    const int half = e / 128, w = e % 128, g = w / 32, l = w % 32;
    const uint8_t qlb = c.ql[64 * half + l + (g % 2 ? 32 : 0)];
    const int low = g < 2 ? (qlb & 15) : (qlb >> 4);
    const int high = (c.qh[32 * half + l] >> (2 * g)) & 3;
    EXPECT_FLOAT_EQ(z[e], static_cast<float>(c.scales[e / 16] * ((low | (high << 4)) - 32))) << e;
  }
}

TEST(Quantize, Q8_0MatchesGgmlRounding) {
  auto x = randn(32 * 64, 1);
  x[5] = 0.0f;
  std::vector<BlockQ8_0> q(64);
  quantize_row(DType::Q8_0, x.data(), 32 * 64, q.data());
  for (int b = 0; b < 64; ++b) {
    float amax = 0;
    for (int j = 0; j < 32; ++j) amax = std::max(amax, std::fabs(x[b * 32 + j]));
    const float d = amax / 127.0f, id = 1.0f / d;
    EXPECT_EQ(q[b].d, f32_to_f16(d));
    for (int j = 0; j < 32; ++j) EXPECT_EQ(q[b].qs[j], static_cast<int8_t>(std::roundf(x[b * 32 + j] * id)));
  }
  std::vector<float> back(32 * 64);
  dequantize(DType::Q8_0, q.data(), back.data(), 32 * 64);
  for (int i = 0; i < 32 * 64; ++i) {
    const float d = f16_to_f32(q[i / 32].d);
    EXPECT_LE(std::fabs(back[i] - x[i]), 0.5f * d + 1e-3f * std::fabs(x[i]) + 1e-6f);
  }
}

TEST(Quantize, Q4_0ErrorBound) {
  auto x = randn(32 * 64, 2);
  std::vector<BlockQ4_0> q(64);
  quantize_row(DType::Q4_0, x.data(), 32 * 64, q.data());
  std::vector<float> back(32 * 64);
  dequantize(DType::Q4_0, q.data(), back.data(), 32 * 64);
  for (int i = 0; i < 32 * 64; ++i) {
    const float d = std::fabs(f16_to_f32(q[i / 32].d));
    // Half a step, or one step at the clamped end opposite the extreme value (q = 16 → 15).
    EXPECT_LE(std::fabs(back[i] - x[i]), 1.0f * d + 2e-3f * std::fabs(x[i]) + 1e-6f) << i;
  }
  // All zeros stays zero.
  std::vector<float> z(32, 0.0f);
  quantize_row(DType::Q4_0, z.data(), 32, q.data());
  dequantize(DType::Q4_0, q.data(), back.data(), 32);
  for (int i = 0; i < 32; ++i) EXPECT_EQ(back[i], 0.0f);
}

// llama-quantize's other no-imatrix quantisers (their bytes equal ggml's: GgmlVectors). Here:
// quantise → dequantise error on Gaussian rows with outliers, relative RMSE under a per-type bound
// (about 1.3× what they measure), ordered by bits; all-zero rows stay zero; NaN-free.
TEST(Quantize, RecipeTypesErrorBounds) {
  constexpr int64_t n = 256 * 32;
  auto x = randn(n, 7);
  for (int64_t i = 0; i < n; i += 97) x[static_cast<size_t>(i)] *= 6.0f;  // outliers
  double ss = 0;
  for (float v : x) ss += double{v} * v;
  struct Case { DType t; double bound; };
  std::map<DType, double> rel;
  for (const Case c : {Case{DType::Q3_K, 0.24}, Case{DType::Q4_K, 0.115}, Case{DType::Q5_K, 0.057}, Case{DType::Q6_K, 0.031},
                       Case{DType::IQ4_XS, 0.13}, Case{DType::IQ4_NL, 0.13}, Case{DType::Q4_1, 0.121}, Case{DType::Q5_1, 0.059}}) {
    std::vector<uint8_t> q(*dtype_row_bytes(c.t, n));
    quantize_row(c.t, x.data(), n, q.data());
    std::vector<float> back(n);
    dequantize(c.t, q.data(), back.data(), n);
    double se = 0;
    for (int64_t i = 0; i < n; ++i) {
      ASSERT_TRUE(std::isfinite(back[static_cast<size_t>(i)])) << dtype_name(c.t);
      const double d = double{back[static_cast<size_t>(i)]} - x[static_cast<size_t>(i)];
      se += d * d;
    }
    rel[c.t] = std::sqrt(se / ss);
    EXPECT_LT(rel[c.t], c.bound) << dtype_name(c.t);
    std::vector<float> z(n, 0.0f);
    quantize_row(c.t, z.data(), n, q.data());
    dequantize(c.t, q.data(), back.data(), n);
    for (float v : back) ASSERT_EQ(v, 0.0f) << dtype_name(c.t);
  }
  EXPECT_GT(rel[DType::Q3_K], rel[DType::Q4_K]);
  EXPECT_GT(rel[DType::Q4_K], rel[DType::Q5_K]);
  EXPECT_GT(rel[DType::Q5_K], rel[DType::Q6_K]);
  EXPECT_GT(rel[DType::Q4_1], rel[DType::Q5_1]);
  for (const auto& [t, r] : rel) std::printf("  %-6s relative RMSE %.4f\n", dtype_name(t).c_str(), r);
}

TEST(Matmul, UnsupportedTypeThrows) {
  std::vector<uint8_t> w(1024);
  MatrixView v{DType::TQ1_0, 1, 256, w.data(), 54};
  float x[256] = {}, y[1];
  EXPECT_FALSE(matmul_supports(DType::TQ1_0));
  try {
    matmul(v, x, 1, y);
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kUnsupported);
    EXPECT_NE(std::string(e.what()).find("unsupported tensor type"), std::string::npos);
  }
}

// Scalar reference vs the exact dot of dequantised weights: bounds the activation quantisation.
TEST(Matmul, ScalarCloseToDequantisedDot) {
  IsaGuard g;
  set_isa("scalar");
  for (DType t : kAllTypes) {
    const int64_t rows = 37, cols = 512, nt = 3;
    auto wb = random_weights(t, rows, cols, 10 + static_cast<int>(t));
    MatrixView w{t, rows, cols, wb.data(), *dtype_row_bytes(t, cols)};
    auto x = randn(nt * cols, 3);
    std::vector<float> y(nt * rows);
    matmul(w, x.data(), nt, y.data());
    auto ref = dequant_matmul(w, x.data(), nt);
    // Error scale: |w|·|x| summed (a bound on rounding of x to the activation format).
    std::vector<float> row(cols);
    for (int64_t r = 0; r < rows; ++r) {
      dequantize_row(w, r, row.data());
      for (int64_t tk = 0; tk < nt; ++tk) {
        double mag = 0;
        for (int64_t c = 0; c < cols; ++c) mag += std::fabs(row[c] * x[tk * cols + c]);
        const double rel = t == DType::F32 ? 1e-5 : t == DType::F16 ? 1e-3 : 1e-2;
        EXPECT_NEAR(y[tk * rows + r], ref[tk * rows + r], rel * mag + 1e-6)
            << dtype_name(t) << " r=" << r << " t=" << tk;
      }
    }
  }
}

// Every ISA the host runs vs the scalar reference, odd rows/tokens, GEMV and GEMM sizes.
TEST(Matmul, EveryIsaMatchesScalar) {
  IsaGuard g;
  const auto isas = available_isas();
  struct Shape { int64_t rows, cols, nt; };
  // 2101×1024, 1 token: many GEMV work units per thread, rows not a multiple of the tile's streams.
  const Shape shapes[] = {{1, 256, 1},    {33, 512, 1},   {67, 768, 5},  {130, 1024, 19},
                          {17, 256, 70},  {70, 512, 301}, {2101, 1024, 1}};
  for (DType t : kAllTypes) {
    for (const Shape& s : shapes) {
      auto wb = random_weights(t, s.rows, s.cols, 100 + static_cast<int>(t) + static_cast<int>(s.rows));
      MatrixView w{t, s.rows, s.cols, wb.data(), *dtype_row_bytes(t, s.cols)};
      auto x = randn(s.nt * s.cols, 7 + static_cast<int>(s.nt));
      set_isa("scalar");
      std::vector<float> ref(s.nt * s.rows);
      matmul(w, x.data(), s.nt, ref.data());
      for (const auto& isa : isas) {
        set_isa(isa);
        for (int nth : {1, 2}) {
          set_num_threads(nth);
          std::vector<float> y(s.nt * s.rows, NAN);
          matmul(w, x.data(), s.nt, y.data());
          for (int64_t i = 0; i < s.nt * s.rows; ++i) {
            ASSERT_NEAR(y[i], ref[i], 2e-4 * (std::fabs(ref[i]) + 1.0) + 1e-4)
                << isa << " " << dtype_name(t) << " " << s.rows << "x" << s.cols << " nt=" << s.nt
                << " i=" << i;
          }
        }
      }
    }
  }
  set_num_threads(0);
}

// simd128's quantised tiles sum each output in the scalar reference's order (Q8_0-like tiles and
// MXFP4: lanes hold different outputs; K-quants, IQ4_XS and the codebook types: exact integer
// sums, then the reference's float expression), so the wasm build's numbers are the native scalar
// build's, bit for bit (tests/web compares the browser module with the native CLI). Any token
// count, tile edges.
TEST(Matmul, Simd128QuantTilesBitIdenticalToScalar) {
  IsaGuard g;
  const auto isas = available_isas();
  if (std::find(isas.begin(), isas.end(), "simd128") == isas.end()) GTEST_SKIP() << "not the wasm build";
  for (DType t : {DType::Q8_0, DType::Q4_0, DType::Q5_0, DType::IQ4_NL, DType::Q4_1, DType::Q5_1, DType::Q4_K,
                  DType::Q5_K, DType::Q6_K, DType::Q3_K, DType::IQ4_XS, DType::Q2_K, DType::IQ3_S, DType::IQ3_XXS,
                  DType::IQ2_XXS, DType::IQ2_XS, DType::IQ2_S, DType::IQ1_S, DType::IQ1_M, DType::MXFP4}) {
    for (int64_t nt : {1, 3, 4, 5, 9, 19}) {
      const int64_t rows = 37, cols = 512;
      auto wb = random_weights(t, rows, cols, 300 + static_cast<int>(nt) + 7 * static_cast<int>(t));
      MatrixView w{t, rows, cols, wb.data(), *dtype_row_bytes(t, cols)};
      auto x = randn(nt * cols, 11 + static_cast<int>(nt));
      std::vector<float> ref(nt * rows), y(nt * rows, NAN);
      set_isa("scalar");
      matmul(w, x.data(), nt, ref.data());
      set_isa("simd128");
      ASSERT_STREQ(matmul_path(t), "kernel") << dtype_name(t);
      matmul(w, x.data(), nt, y.data());
      for (int64_t i = 0; i < nt * rows; ++i) ASSERT_EQ(y[i], ref[i]) << dtype_name(t) << " nt=" << nt << " i=" << i;
    }
  }
}

// Not a test: single-token GEMV throughput per weight type on every ISA of the build (weight GB/s,
// one thread, 2048×2048, best of 5 timed batches of ~0.04 s each). Where the active set
// has no kernel for a type the number is its dequantise fallback's. Used for the per-ISA numbers
// in docs/kernels.md (the wasm build under node has no Google Benchmark):
//   node build/wasm/tests/oxi_kernels_tests.js --gtest_also_run_disabled_tests --gtest_filter='*GemvThroughput*'
TEST(MatmulBench, DISABLED_GemvThroughput) {
  IsaGuard g;
  set_num_threads(1);
  const int64_t rows = 2048, cols = 2048;
  for (DType t : {DType::Q4_K, DType::Q3_K, DType::Q2_K, DType::IQ3_S, DType::IQ3_XXS, DType::IQ2_XXS,
                  DType::IQ2_XS, DType::IQ2_S, DType::IQ1_S, DType::IQ1_M, DType::MXFP4}) {
    auto wb = random_weights(t, rows, cols, 77);
    MatrixView w{t, rows, cols, wb.data(), *dtype_row_bytes(t, cols)};
    auto x = randn(cols, 5);
    std::vector<float> y(rows);
    for (const auto& isa : available_isas()) {
      set_isa(isa);
      using clk = std::chrono::steady_clock;
      matmul(w, x.data(), 1, y.data());
      auto t0 = clk::now();
      int64_t n = 0;
      while (std::chrono::duration<double>(clk::now() - t0).count() < 0.04) matmul(w, x.data(), 1, y.data()), ++n;
      double best = 1e30;
      for (int rep = 0; rep < 5; ++rep) {
        t0 = clk::now();
        for (int64_t k = 0; k < n; ++k) matmul(w, x.data(), 1, y.data());
        best = std::min(best, std::chrono::duration<double>(clk::now() - t0).count() / static_cast<double>(n));
      }
      std::printf("  %-8s %-8s %-10s %8.3f ms  %6.2f GB/s\n", dtype_name(t).c_str(), isa.c_str(), matmul_path(t),
                  best * 1e3, static_cast<double>(wb.size()) / best * 1e-9);
    }
  }
  set_num_threads(0);
}

// Single-token decode through packed weight copies (kernels/pack.h; held while a lease is), every
// ISA vs the scalar reference: Q4_0, Q4_K and Q6_K, rows not a multiple of 16 (the tail uses the
// file layout), a second call from the cache, new contents at the same address (must be packed
// again, not served stale), 2..16-token calls through the packed kernels (bit-identical per token
// to single-token calls), more tokens reading the copy, every copy dropped with the lease.
TEST(Matmul, PackedGemvMatchesScalar) {
  IsaGuard g;
  struct Shape { int64_t rows, cols; };
  const Shape shapes[] = {{16, 256}, {37, 512}, {160, 1536}, {1000, 1024}, {5, 256}, {48, 96}, {17, 32}};
  std::optional<kern::PackLease> lease(std::in_place);
  for (const DType t : {DType::Q4_0, DType::Q4_K, DType::Q6_K}) {
    for (const Shape& s : shapes) {
      if (s.cols % 256 != 0 && t != DType::Q4_0) continue;  // K-quants: 256-element super-blocks
      for (int variant = 0; variant < 2; ++variant) {
        static std::vector<uint8_t> wb;  // one address for every type, shape and variant
        auto fresh = random_weights(t, s.rows, s.cols, 1300 + static_cast<int>(s.rows) + 7 * variant);
        wb.assign(fresh.begin(), fresh.end());
        MatrixView w{t, s.rows, s.cols, wb.data(), *dtype_row_bytes(t, s.cols)};
        auto x = randn(s.cols, 31 + static_cast<int>(s.cols) + variant);
        set_isa("scalar");
        std::vector<float> ref(s.rows);
        matmul(w, x.data(), 1, ref.data());
        for (const auto& isa : available_isas()) {
          set_isa(isa);
          for (int nth : {1, 2}) {
            set_num_threads(nth);
            for (int rep = 0; rep < 2; ++rep) {
              std::vector<float> y(s.rows, NAN);
              matmul(w, x.data(), 1, y.data());
              for (int64_t i = 0; i < s.rows; ++i)
                ASSERT_NEAR(y[i], ref[i], 2e-4 * (std::fabs(ref[i]) + 1.0) + 1e-4)
                    << isa << " " << dtype_name(t) << " " << s.rows << "x" << s.cols << " variant " << variant << " rep " << rep << " i=" << i;
            }
          }
          const bool has_packed = kern::active_kernels().mm_packed[kern::wtype_index(t)] != nullptr;
          if (has_packed && s.rows >= 16) {
            EXPECT_GT(kern::pack_stats().matrices, 0u) << isa;
          }
          // 2..16 tokens (a decode step of that many sequences): where the ISA has a packed kernel
          // for the type and the matrix a copy (16+ rows), each token's row equals, bit for bit,
          // the single-token call on that token (the packed kernels' contract, rows past the copy
          // included), and every ISA stays within the tolerance of the scalar reference.
          const bool packed_isa = has_packed && s.rows >= 16;
          for (int64_t nt = 2; nt <= 16; ++nt) {
            auto xm = randn(nt * s.cols, 500 + static_cast<int>(nt) + variant);
            set_isa("scalar");
            std::vector<float> mref(nt * s.rows);
            matmul(w, xm.data(), nt, mref.data());
            set_isa(isa);
            for (int nth : {1, 2}) {
              set_num_threads(nth);
              std::vector<float> y(nt * s.rows, NAN), y1(s.rows);
              matmul(w, xm.data(), nt, y.data());
              for (int64_t tk = 0; tk < nt; ++tk) {
                if (packed_isa) {
                  std::fill(y1.begin(), y1.end(), NAN);
                  matmul(w, xm.data() + tk * s.cols, 1, y1.data());
                  for (int64_t i = 0; i < s.rows; ++i)
                    ASSERT_EQ(y[tk * s.rows + i], y1[i]) << isa << " " << dtype_name(t) << " " << s.rows << "x"
                                                         << s.cols << " tokens " << nt << " token " << tk
                                                         << " nth " << nth << " i=" << i;
                }
                for (int64_t i = 0; i < s.rows; ++i)
                  ASSERT_NEAR(y[tk * s.rows + i], mref[tk * s.rows + i], 2e-4 * (std::fabs(mref[tk * s.rows + i]) + 1.0) + 1e-4)
                      << isa << " " << dtype_name(t) << " " << s.rows << "x" << s.cols << " tokens " << nt
                      << " token " << tk << " i=" << i;
              }
            }
          }
          // Multi-token calls after decode packed the matrix read its packed rows from the copy
          // (rebuilt per 16-row group). Shown by changing one file byte of row 17 that the
          // copy's fingerprint does not cover: results must still be the original matrix's.
          for (int64_t nt : {3, 40}) {
            auto xm = randn(nt * s.cols, 50 + static_cast<int>(nt));
            set_isa("scalar");
            std::vector<float> mref(nt * s.rows);
            matmul(w, xm.data(), nt, mref.data());
            set_isa(isa);
            const bool probe = has_packed && s.rows >= 160;
            const uint64_t at = 17 * w.row_bytes + 50;
            if (probe) wb[at] ^= 0x5A;
            std::vector<float> y(nt * s.rows, NAN);
            matmul(w, xm.data(), nt, y.data());
            // Row lookups (a tied embedding) read the copy too: row 17 as the reference decodes it.
            std::vector<float> row(static_cast<size_t>(s.cols), NAN), row_ref(static_cast<size_t>(s.cols));
            if (s.rows > 17) dequantize_row(w, 17, row.data());
            if (probe) wb[at] ^= 0x5A;
            if (s.rows > 17) {
              dequantize(t, wb.data() + 17 * w.row_bytes, row_ref.data(), s.cols);
              for (int64_t i = 0; i < s.cols; ++i)
                ASSERT_EQ(row[static_cast<size_t>(i)], row_ref[static_cast<size_t>(i)])
                    << isa << " " << dtype_name(t) << " " << s.rows << "x" << s.cols << " row 17, i=" << i;
            }
            for (int64_t i = 0; i < nt * s.rows; ++i)
              ASSERT_NEAR(y[i], mref[i], 2e-4 * (std::fabs(mref[i]) + 1.0) + 1e-4)
                  << isa << " " << dtype_name(t) << " " << s.rows << "x" << s.cols << " tokens " << nt << " i=" << i;
          }
        }
      }
    }
  }
  lease.reset();
  EXPECT_EQ(kern::pack_stats().matrices, 0u);
  EXPECT_EQ(kern::pack_stats().bytes, 0u);
  set_num_threads(0);
}

// GEMV paths (1–4 tokens, and a 1–4-token tail tile after 64 tokens) with block counts that are
// not multiples of the kernels' block groups, every ISA vs the scalar reference.
TEST(Matmul, EveryIsaGemvOddBlockCounts) {
  IsaGuard g;
  struct Shape { int64_t rows, cols, nt; };
  std::vector<std::pair<DType, Shape>> cases;
  for (DType t : {DType::Q8_0, DType::Q4_0, DType::F16, DType::BF16, DType::Q5_0, DType::IQ4_NL, DType::Q4_1,
                  DType::Q5_1, DType::MXFP4})
    for (int64_t cols : {32, 64, 96, 160, 224, 288, 1056})
      for (int64_t nt : {1, 2, 3, 4, 67, 68}) cases.push_back({t, {cols == 1056 ? 37 : 9, cols, nt}});
  for (DType t : {DType::Q4_K, DType::Q5_K, DType::Q6_K, DType::Q3_K, DType::IQ4_XS, DType::Q2_K, DType::IQ3_S,
                  DType::IQ3_XXS, DType::IQ2_XXS, DType::IQ2_XS, DType::IQ2_S, DType::IQ1_S, DType::IQ1_M})
    for (int64_t cols : {256, 768, 1280})
      for (int64_t nt : {1, 2, 3, 4, 66, 68}) cases.push_back({t, {13, cols, nt}});
  for (const auto& [t, s] : cases) {
    auto wb = random_weights(t, s.rows, s.cols, 900 + static_cast<int>(s.cols) + static_cast<int>(t));
    MatrixView w{t, s.rows, s.cols, wb.data(), *dtype_row_bytes(t, s.cols)};
    auto x = randn(s.nt * s.cols, 70 + static_cast<int>(s.nt));
    set_isa("scalar");
    std::vector<float> ref(s.nt * s.rows);
    matmul(w, x.data(), s.nt, ref.data());
    for (const auto& isa : available_isas()) {
      set_isa(isa);
      for (int nth : {1, 2}) {
        set_num_threads(nth);
        std::vector<float> y(s.nt * s.rows, NAN);
        matmul(w, x.data(), s.nt, y.data());
        for (int64_t i = 0; i < s.nt * s.rows; ++i)
          ASSERT_NEAR(y[i], ref[i], 2e-4 * (std::fabs(ref[i]) + 1.0) + 1e-4)
              << isa << " " << dtype_name(t) << " " << s.rows << "x" << s.cols << " nt=" << s.nt << " i=" << i;
      }
    }
  }
  set_num_threads(0);
}

// Every ggml block type with a matmul kernel has it on every set (NEON and SIMD128 complete since
// 2026-12-07), and matmul_path says so (what `oxinfer inspect` / `bench` report).
TEST(Matmul, PathNamesKernelTypes) {
  IsaGuard g;
  for (const auto& isa : available_isas()) {
    set_isa(isa);
    for (DType t : {DType::Q3_K, DType::IQ4_XS, DType::Q5_0, DType::IQ4_NL, DType::Q4_1, DType::Q5_1, DType::Q2_K,
                    DType::IQ3_S, DType::IQ3_XXS, DType::IQ2_XXS, DType::IQ2_XS, DType::IQ2_S, DType::IQ1_S,
                    DType::IQ1_M, DType::MXFP4}) {
      EXPECT_STREQ(matmul_path(t), "kernel") << isa << " " << dtype_name(t);
      EXPECT_TRUE(matmul_is_native(t)) << isa << " " << dtype_name(t);
    }
    const bool x86 = isa == "scalar" || isa.rfind("avx", 0) == 0;
    EXPECT_STREQ(matmul_path(DType::TQ1_0), "none") << isa;
    // MLX affine groups: kernels on scalar / AVX2 / AVX-512, rows dequantised to f32 elsewhere.
    for (DType t : {DType::MLX_Q4_G32, DType::MLX_Q4_G64, DType::MLX_Q4_G128, DType::MLX_Q8_G32, DType::MLX_Q8_G64, DType::MLX_Q8_G128})
      EXPECT_STREQ(matmul_path(t), x86 ? "kernel" : "dequantise") << isa << " " << dtype_name(t);
  }
}

// A batch sharing one input gives exactly what separate calls give (mixed weight types, so
// several activation formats; a fallback type; an empty matrix), on every ISA and thread count.
TEST(Matmul, BatchEqualsSeparateCalls) {
  IsaGuard g;
  const int64_t cols = 512;
  const DType types[] = {DType::Q4_K, DType::Q8_0, DType::Q6_K, DType::F32, DType::Q4_1, DType::BF16, DType::Q4_0};
  const int64_t rows[] = {300, 65, 16, 5, 33, 0, 129};
  constexpr int n = 7;
  std::vector<std::vector<uint8_t>> wb(n);
  std::vector<MatrixView> ws(n);
  for (int j = 0; j < n; ++j) {
    wb[j] = rows[j] ? random_weights(types[j] == DType::Q4_1 ? DType::Q8_0 : types[j], rows[j], cols, 500 + j)
                    : std::vector<uint8_t>(16);
    if (types[j] == DType::Q4_1) {  // Q4_1 blocks (20 bytes per 32): any bits with small f16 d/m
      wb[j].assign(static_cast<size_t>(rows[j] * cols / 32 * 20), 0x35);
    }
    ws[j] = MatrixView{types[j], rows[j], cols, wb[j].data(), *dtype_row_bytes(types[j], cols)};
  }
  for (const auto& isa : available_isas()) {
    set_isa(isa);
    for (int nth : {1, 2}) {
      set_num_threads(nth);
      for (int64_t nt : {1, 3, 9, 270}) {
        auto x = randn(static_cast<size_t>(nt * cols), 40 + static_cast<uint32_t>(nt));
        std::vector<std::vector<float>> ref(n), y(n);
        std::vector<float*> yp(n);
        for (int j = 0; j < n; ++j) {
          ref[j].assign(static_cast<size_t>(nt * rows[j]), 0.0f);
          y[j].assign(ref[j].size(), NAN);
          yp[j] = y[j].data();
          matmul(ws[j], x.data(), nt, ref[j].data());
        }
        matmul_batch(ws.data(), yp.data(), n, x.data(), nt);
        for (int j = 0; j < n; ++j)
          for (size_t i = 0; i < ref[j].size(); ++i)
            ASSERT_EQ(y[j][i], ref[j][i]) << isa << " nth=" << nth << " nt=" << nt << " " << dtype_name(types[j]) << " i=" << i;
      }
    }
  }
  set_num_threads(0);
  // Different column counts in one batch are an error.
  std::vector<uint8_t> a(32 * 34), b(64 * 34);
  const MatrixView bad[2] = {{DType::Q8_0, 1, 1024, a.data(), 34 * 32}, {DType::Q8_0, 1, 2048, b.data(), 34 * 64}};
  std::vector<float> x(2048, 1.0f), y0(1), y1(1);
  float* const yb[2] = {y0.data(), y1.data()};
  EXPECT_THROW(matmul_batch(bad, yb, 2, x.data(), 1), Error);
}

// Every finite f16 weight (normals, subnormals, ±0) converted exactly by every ISA: with one-hot
// activations each output is a single weight, so y must equal f16_to_f32 bit for bit.
TEST(Matmul, EveryIsaConvertsEveryFiniteF16Weight) {
  IsaGuard g;
  const int64_t cols = 256, rows = 2 * (0x7c00 / cols);  // patterns 0..0x7bff, then negated
  std::vector<uint16_t> wb(rows * cols);
  for (int64_t i = 0; i < rows * cols; ++i)
    wb[i] = static_cast<uint16_t>((i % (rows * cols / 2)) | (i >= rows * cols / 2 ? 0x8000 : 0));
  MatrixView w{DType::F16, rows, cols, reinterpret_cast<const uint8_t*>(wb.data()), cols * 2};
  std::vector<float> x(cols * cols, 0.0f);
  for (int64_t t = 0; t < cols; ++t) x[t * cols + t] = 1.0f;
  for (const auto& isa : available_isas()) {
    set_isa(isa);
    std::vector<float> y(cols * rows, NAN);
    matmul(w, x.data(), cols, y.data());
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t t = 0; t < cols; ++t)
        ASSERT_EQ(y[t * rows + r], f16_to_f32(wb[r * cols + t])) << isa << " f16 bits " << wb[r * cols + t];
  }
}

// Activation quantisers of every ISA produce exactly the scalar bytes.
TEST(Activations, EveryIsaBitIdentical) {
  IsaGuard g;
  const int64_t n = 256 * 5;
  auto x = randn(n, 42, 3.0f);
  for (int i = 0; i < 64; ++i) x[i] = 0.0f;  // an all-zero Q8_0 block
  for (int i = 256; i < 512; ++i) x[i] = (i % 3 - 1) * 0.5f;  // ties
  std::printf("ISAs:");
  for (const auto& isa : available_isas()) std::printf(" %s", isa.c_str());
  std::printf("\n");
  for (int a = kAF16; a < kNumATypes; ++a) {
    set_isa("scalar");
    const uint64_t bytes = act_row_bytes(static_cast<AType>(a), n);
    std::vector<uint8_t> ref(bytes), got(bytes);
    active_kernels().act[a](x.data(), ref.data(), n);
    for (const auto& isa : available_isas()) {
      set_isa(isa);
      std::fill(got.begin(), got.end(), 0xCD);
      active_kernels().act[a](x.data(), got.data(), n);
      EXPECT_EQ(0, std::memcmp(ref.data(), got.data(), bytes)) << isa << " activation type " << a;
    }
  }
}

TEST(ThreadPool, EverySlotRunsOnceUnderStress) {
  OXI_SKIP_WITHOUT_THREADS();
  for (int nth : {2, 3}) {
    set_num_threads(nth);
    for (int rep = 0; rep < 20000; ++rep) {
      std::atomic<int> mask{0};
      parallel_run([&](int ith, int n) {
        EXPECT_EQ(n, nth);
        mask.fetch_or(1 << ith);
      });
      ASSERT_EQ(mask.load(), (1 << nth) - 1) << rep;
    }
  }
  set_num_threads(0);
}
