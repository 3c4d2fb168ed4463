// MLX affine 4-bit groups → Q4_1 blocks (convert/mlx_q4_1.h). Expected bytes come from the two
// layouts' facts: our MLX block (f32 scale, f32 bias, G/2 code bytes, input 2i in the low nibble of
// byte i) and ggml's block_q4_1 (f16 d, f16 m, 16 bytes: input j in the low nibble of byte j,
// input j + 16 in its high nibble; value = q·d + m).
#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "convert/mlx_q4_1.h"
#include "core/half.h"
#include "kernels/matmul.h"

namespace oxi {
namespace {

struct Group {
  float scale, bias;
  std::vector<int> q;  // G codes
};

// One row of MLX blocks (format/mlx.h's in-memory layout).
std::vector<uint8_t> mlx_row(const std::vector<Group>& groups) {
  std::vector<uint8_t> out;
  for (const Group& g : groups) {
    uint8_t h[8];
    std::memcpy(h, &g.scale, 4);
    std::memcpy(h + 4, &g.bias, 4);
    out.insert(out.end(), h, h + 8);
    for (size_t i = 0; i < g.q.size(); i += 2) out.push_back(static_cast<uint8_t>(g.q[i] | (g.q[i + 1] << 4)));
  }
  return out;
}

std::vector<int> codes(int n, int seed) {
  std::vector<int> q(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) q[static_cast<size_t>(i)] = (i * 7 + seed * 3 + i / 5) % 16;
  return q;
}

// Q4_1 block bytes for 32 codes with d, m (the layout written out by hand).
std::vector<uint8_t> q4_1_block(float d, float m, const int* q) {
  std::vector<uint8_t> b(20);
  const uint16_t dh = f32_to_f16(d), mh = f32_to_f16(m);
  std::memcpy(b.data(), &dh, 2);
  std::memcpy(b.data() + 2, &mh, 2);
  for (int j = 0; j < 16; ++j) b[static_cast<size_t>(4 + j)] = static_cast<uint8_t>(q[j] | (q[j + 16] << 4));
  return b;
}

TEST(MlxQ4_1, F16Exact) {
  EXPECT_TRUE(f16_exact(0.5f));
  EXPECT_TRUE(f16_exact(-0.0f));
  EXPECT_TRUE(f16_exact(65504.0f));
  EXPECT_TRUE(f16_exact(bf16_to_f32(0x3C80)));     // bf16 0.015625: an f16 normal
  EXPECT_TRUE(f16_exact(5.9604644775390625e-8f));  // the smallest f16 subnormal
  EXPECT_FALSE(f16_exact(65536.0f));               // a bf16 value beyond f16
  EXPECT_FALSE(f16_exact(bf16_to_f32(0x3401)));    // bf16 ~1.2e-7 with more bits than f16 keeps there
  EXPECT_FALSE(f16_exact(0.1f));                   // an f32 scale
}

TEST(MlxQ4_1, GroupsOf64CopiedOrRequantised) {
  // Row of 128: group 0 (scale, bias f16 values) copied; group 1 (bias 70000, not an f16 value)
  // requantised from its f32 values with the Q4_1 reference.
  const std::vector<Group> g = {{0.5f, -1.25f, codes(64, 1)}, {0.03125f, 70000.0f, codes(64, 2)}};
  const std::vector<uint8_t> src = mlx_row(g);
  std::vector<uint8_t> dst(4 * 20);
  std::vector<float> scratch(128);
  int64_t exact = 0, requant = 0;
  mlx_q4_row_to_q4_1(DType::MLX_Q4_G64, src.data(), 128, {}, dst.data(), scratch.data(), exact, requant);
  EXPECT_EQ(exact, 1);
  EXPECT_EQ(requant, 1);
  for (int b = 0; b < 2; ++b) {
    const auto want = q4_1_block(0.5f, -1.25f, g[0].q.data() + 32 * b);
    EXPECT_EQ(std::vector<uint8_t>(dst.begin() + 20 * b, dst.begin() + 20 * (b + 1)), want) << "block " << b;
  }
  // Dequantised Q4_1 == MLX's value (q·scale + bias) for the copied group, bit for bit.
  std::vector<float> y(64);
  dequantize(DType::Q4_1, dst.data(), y.data(), 64);
  for (int i = 0; i < 64; ++i) EXPECT_EQ(y[static_cast<size_t>(i)], static_cast<float>(g[0].q[static_cast<size_t>(i)]) * 0.5f - 1.25f);
  // The fallback group: the Q4_1 reference quantiser on q·scale + bias.
  std::vector<float> x(64);
  for (int i = 0; i < 64; ++i) x[static_cast<size_t>(i)] = static_cast<float>(g[1].q[static_cast<size_t>(i)]) * 0.03125f + 70000.0f;
  std::vector<uint8_t> want(40);
  quantize_row(DType::Q4_1, x.data(), 64, want.data());
  EXPECT_EQ(std::vector<uint8_t>(dst.begin() + 40, dst.end()), want);
}

TEST(MlxQ4_1, GroupsOf32WithABlockPermutation) {
  // G = 32, bf16-valued scales; output block 0 ← source block 2, 1 ← 0, 2 ← 1 (a V-head reorder
  // that moves whole blocks).
  const std::vector<Group> g = {{bf16_to_f32(0x3D4D), bf16_to_f32(0xBE80), codes(32, 3)},
                                {bf16_to_f32(0x3C00), bf16_to_f32(0x3F00), codes(32, 4)},
                                {bf16_to_f32(0x3E20), bf16_to_f32(0xC000), codes(32, 5)}};
  const std::vector<uint8_t> src = mlx_row(g);
  std::vector<int64_t> perm;
  for (int s : {2, 0, 1})
    for (int j = 0; j < 32; ++j) perm.push_back(32 * s + j);
  ASSERT_TRUE(keeps_q4_1_blocks(perm));
  std::vector<uint8_t> dst(3 * 20);
  std::vector<float> scratch(96);
  int64_t exact = 0, requant = 0;
  mlx_q4_row_to_q4_1(DType::MLX_Q4_G32, src.data(), 96, perm, dst.data(), scratch.data(), exact, requant);
  EXPECT_EQ(exact, 3);
  EXPECT_EQ(requant, 0);
  int o = 0;
  for (int s : {2, 0, 1}) {
    const Group& gs = g[static_cast<size_t>(s)];
    EXPECT_EQ(std::vector<uint8_t>(dst.begin() + 20 * o, dst.begin() + 20 * (o + 1)), q4_1_block(gs.scale, gs.bias, gs.q.data()));
    ++o;
  }
}

TEST(MlxQ4_1, PermutationsThatSplitBlocks) {
  std::vector<int64_t> shifted, swapped;
  for (int j = 0; j < 64; ++j) shifted.push_back((j + 16) % 64);
  for (int j = 0; j < 64; ++j) swapped.push_back(j ^ 1);
  EXPECT_FALSE(keeps_q4_1_blocks(shifted));
  EXPECT_FALSE(keeps_q4_1_blocks(swapped));
  EXPECT_TRUE(keeps_q4_1_blocks({}));
}

}  // namespace
}  // namespace oxi
