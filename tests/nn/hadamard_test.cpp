// The attention-rotation helper (nn/hadamard.h) against an independent definition of the
// normalised Sylvester Hadamard matrix, H[i][j] = (−1)^popcount(i & j) / √n computed in double
// here: the matrix equals it, is orthonormal (H·Hᵀ = I) and its own inverse, and the blockwise
// fast transform equals the double-precision matrix product block by block; plus llama.cpp's
// block-size rules and the env switch.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdlib>
#include <random>
#include <vector>

#include "core/error.h"
#include "nn/hadamard.h"

namespace oxi::nn {
namespace {

double sylvester(int64_t n, int64_t i, int64_t j) {
  const int pc = std::popcount(static_cast<uint64_t>(i & j));
  return (pc % 2 ? -1.0 : 1.0) / std::sqrt(static_cast<double>(n));
}

TEST(Hadamard, MatrixIsSylvesterAndOrthonormal) {
  for (int64_t n : {1, 2, 4, 64, 128, 256}) {
    const std::vector<float> h = hadamard_matrix(n);
    ASSERT_EQ(h.size(), static_cast<size_t>(n * n));
    for (int64_t i = 0; i < n; ++i)
      for (int64_t j = 0; j < n; ++j)
        ASSERT_NEAR(h[static_cast<size_t>(i * n + j)], sylvester(n, i, j), 1e-7) << "n " << n << " (" << i << ", " << j << ")";
    // H·Hᵀ = I (and H symmetric, so H·H = I: the inverse rotation is H itself).
    for (int64_t i = 0; i < n; ++i)
      for (int64_t j = 0; j < n; ++j) {
        double acc = 0;
        for (int64_t k = 0; k < n; ++k) acc += double(h[static_cast<size_t>(i * n + k)]) * h[static_cast<size_t>(j * n + k)];
        ASSERT_NEAR(acc, i == j ? 1.0 : 0.0, 1e-5) << "n " << n << " (" << i << ", " << j << ")";
        ASSERT_EQ(h[static_cast<size_t>(i * n + j)], h[static_cast<size_t>(j * n + i)]);
      }
  }
}

TEST(Hadamard, RotateEqualsBlockwiseMatrixProduct) {
  std::mt19937 g(7);
  std::normal_distribution<float> d(0.0f, 1.0f);
  for (int64_t n : {64, 128, 256}) {
    const int64_t len = 512;  // len / n blocks
    std::vector<float> x(static_cast<size_t>(len));
    for (float& v : x) v = d(g);
    x[3] = 40.0f;  // an outlier channel: rotation spreads it over its block
    std::vector<float> y = x;
    hadamard_rotate(y.data(), len, n);
    for (int64_t b = 0; b < len; b += n)
      for (int64_t i = 0; i < n; ++i) {
        double ref = 0;
        for (int64_t j = 0; j < n; ++j) ref += sylvester(n, i, j) * x[static_cast<size_t>(b + j)];
        ASSERT_NEAR(y[static_cast<size_t>(b + i)], ref, 2e-5 * (1 + std::fabs(ref))) << "n " << n << " at " << b + i;
      }
    // Rotating twice gives x back (H·H = I), up to f32 rounding.
    hadamard_rotate(y.data(), len, n);
    for (int64_t i = 0; i < len; ++i) ASSERT_NEAR(y[static_cast<size_t>(i)], x[static_cast<size_t>(i)], 1e-5 * (1 + std::fabs(x[static_cast<size_t>(i)])));
  }
}

TEST(Hadamard, BlockRulesAndErrors) {
  // K: the largest power of two ≥ 64 dividing hd; V: 64; neither unless hd % 64 == 0.
  EXPECT_EQ(hadamard_k_block(64), 64);
  EXPECT_EQ(hadamard_k_block(128), 128);
  EXPECT_EQ(hadamard_k_block(256), 256);
  EXPECT_EQ(hadamard_k_block(192), 64);
  EXPECT_EQ(hadamard_k_block(320), 64);
  EXPECT_EQ(hadamard_k_block(80), 0);
  EXPECT_EQ(hadamard_k_block(32), 0);
  EXPECT_EQ(hadamard_v_block(256), 64);
  EXPECT_EQ(hadamard_v_block(96), 0);
  std::vector<float> x(96);
  EXPECT_THROW(hadamard_rotate(x.data(), 96, 64), Error);
  EXPECT_THROW(hadamard_rotate(x.data(), 96, 48), Error);
  EXPECT_THROW(hadamard_matrix(3), Error);
}

TEST(Hadamard, EnvSwitch) {
  const char* old = std::getenv("OXI_ATTN_ROT_DISABLE");
  const std::string saved = old ? old : "";
  setenv("OXI_ATTN_ROT_DISABLE", "1", 1);
  EXPECT_TRUE(attn_rot_disabled());
  setenv("OXI_ATTN_ROT_DISABLE", "0", 1);
  EXPECT_FALSE(attn_rot_disabled());
  unsetenv("OXI_ATTN_ROT_DISABLE");
  EXPECT_FALSE(attn_rot_disabled());
  if (old) setenv("OXI_ATTN_ROT_DISABLE", saved.c_str(), 1);
}

}  // namespace
}  // namespace oxi::nn
