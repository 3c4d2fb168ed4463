// KvCache with q8_0 storage (llama.cpp's --cache-type-k/-v q8_0): rows equal the scalar
// activation quantiser's bytes (ggml's quantize_row_q8_0, what its CPU set_rows writes), the
// scores helper equals the scalar Q8_0 dot on the scalar-quantised query, and truncate /
// snapshot / restore keep working with K and V of different types.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "core/error.h"
#include "core/half.h"
#include "kernels/quant.h"
#include "nn/kv_cache.h"

namespace oxi::nn {
namespace {

std::vector<float> randn(size_t n, uint32_t seed, float scale = 1.0f) {
  std::mt19937 g(seed);
  std::normal_distribution<float> d(0.0f, scale);
  std::vector<float> x(n);
  for (float& v : x) v = d(g);
  return x;
}

std::vector<uint8_t> scalar_q8(const float* x, int64_t n) {
  std::vector<uint8_t> out(static_cast<size_t>(n / 32) * 34);
  kern::ref_quantize_act_q8_0(x, reinterpret_cast<kern::BlockQ8_0*>(out.data()), n);
  return out;
}

TEST(KvCacheQ8, RowBytesAndNames) {
  EXPECT_EQ(kv_row_bytes(KvType::kQ8_0, 256), 8u * 34u);
  EXPECT_EQ(kv_row_bytes(KvType::kF16, 256), 512u);
  EXPECT_EQ(kv_row_bytes(KvType::kF32, 256), 1024u);
  KvType t;
  EXPECT_TRUE(parse_kv_type("q8_0", &t));
  EXPECT_EQ(t, KvType::kQ8_0);
  EXPECT_STREQ(kv_type_name(t), "q8_0");
  EXPECT_FALSE(parse_kv_type("q4_0", &t));
  EXPECT_FALSE(parse_kv_type("Q8_0", &t));
  // A q8_0 row is whole blocks.
  EXPECT_THROW(KvCache(48, KvType::kQ8_0, KvType::kF16, 0, 16, 0), Error);
}

TEST(KvCacheQ8, StoreMatchesScalarQuantiser) {
  const int64_t W = 128;
  KvCache kv(W, KvType::kQ8_0, KvType::kQ8_0, 0, 32, 0);
  EXPECT_EQ(kv.k_row_bytes(), 4u * 34u);
  kv.reserve(5);
  std::vector<std::vector<float>> ks, vs;
  for (int64_t p = 0; p < 5; ++p) {
    ks.push_back(randn(W, 10 + static_cast<uint32_t>(p), 3.0f));
    vs.push_back(randn(W, 20 + static_cast<uint32_t>(p), 0.5f));
    if (p == 3) ks[3][7] = 0.0f, std::fill(ks[3].begin() + 32, ks[3].begin() + 64, 0.0f);  // an all-zero block
    kv.store(p, ks.back().data(), vs.back().data());
  }
  for (int64_t p = 0; p < 5; ++p) {
    const auto wk = scalar_q8(ks[p].data(), W), wv = scalar_q8(vs[p].data(), W);
    EXPECT_EQ(0, std::memcmp(kv.k_row(p), wk.data(), wk.size())) << "K row " << p;
    EXPECT_EQ(0, std::memcmp(kv.v_row(p), wv.data(), wv.size())) << "V row " << p;
    // Dequantised values within half a step of the originals.
    std::vector<float> back(static_cast<size_t>(W));
    dequant_q8_0(kv.v_row(p), back.data(), W);
    for (int64_t b = 0; b < W / 32; ++b) {
      float amax = 0;
      for (int64_t i = 0; i < 32; ++i) amax = std::max(amax, std::fabs(vs[p][b * 32 + i]));
      const float step = f16_to_f32(f32_to_f16(amax / 127.0f));
      for (int64_t i = 0; i < 32; ++i) EXPECT_NEAR(back[b * 32 + i], vs[p][b * 32 + i], 0.5f * step + 1e-3f * amax);
    }
  }
}

TEST(KvCacheQ8, ScoresMatchScalarDot) {
  const int64_t hd = 64, heads = 2, W = hd * heads, n = 37;
  KvCache kv(W, KvType::kQ8_0, KvType::kF16, 0, 64, 0);
  kv.reserve(n);
  for (int64_t p = 0; p < n; ++p) {
    const auto k = randn(W, 100 + static_cast<uint32_t>(p)), v = randn(W, 200 + static_cast<uint32_t>(p));
    kv.store(p, k.data(), v.data());
  }
  const auto q = randn(hd, 7, 2.0f);
  const auto qq = scalar_q8(q.data(), hd);
  const float scale = 0.125f;
  for (int64_t h = 0; h < heads; ++h) {
    std::vector<float> got(static_cast<size_t>(n));
    kq_scores_q8_0(q.data(), hd, kv.k_row(0) + static_cast<size_t>(h * hd / 32) * 34, kv.k_row_bytes(), n, scale, got.data());
    for (int64_t p = 0; p < n; ++p) {
      const float want = scale * kern::ref_dot_q8_0(reinterpret_cast<const kern::BlockQ8_0*>(kv.k_row(p) + h * hd / 32 * 34),
                                                     reinterpret_cast<const kern::BlockQ8_0*>(qq.data()), hd);
      // Same blocks and integer sums; only the f32 order of the block sums may differ by ISA.
      EXPECT_NEAR(got[static_cast<size_t>(p)], want, 1e-5f * std::max(1.0f, std::fabs(want))) << "head " << h << " pos " << p;
    }
  }
  // Mixed types: V rows stay f16.
  EXPECT_EQ(kv.v_row_bytes(), static_cast<size_t>(W) * 2);
}

TEST(KvCacheQ8, TruncateSnapshotRestore) {
  const int64_t W = 64;
  KvCache a(W, KvType::kQ8_0, KvType::kQ8_0, 0, 32, 0);
  a.reserve(6);
  for (int64_t p = 0; p < 6; ++p) {
    const auto k = randn(W, 300 + static_cast<uint32_t>(p)), v = randn(W, 400 + static_cast<uint32_t>(p));
    a.store(p, k.data(), v.data());
  }
  EXPECT_TRUE(a.can_truncate(6, 3));
  std::vector<uint8_t> snap;
  SnapWriter w{snap};
  a.save(w, 6);
  KvCache b(W, KvType::kQ8_0, KvType::kQ8_0, 0, 32, 0);
  SnapReader r{snap, "test"};
  b.load(r, 6);
  EXPECT_EQ(r.left(), 0u);
  for (int64_t p = 0; p < 6; ++p) {
    EXPECT_EQ(0, std::memcmp(a.k_row(p), b.k_row(p), a.k_row_bytes()));
    EXPECT_EQ(0, std::memcmp(a.v_row(p), b.v_row(p), a.v_row_bytes()));
  }
  // Truncated to 3 (what a state does: n_past goes back, rows past it are rewritten later).
  std::vector<uint8_t> snap3;
  SnapWriter w3{snap3};
  a.save(w3, 3);
  EXPECT_EQ(snap3.size(), snap.size() - 3 * (a.k_row_bytes() + a.v_row_bytes()));
  // A cache of other types refuses the snapshot.
  KvCache f16(W, KvType::kF16, KvType::kF16, 0, 32, 0);
  SnapReader r2{snap, "test"};
  EXPECT_THROW(f16.load(r2, 6), Error);
  KvCache mixed(W, KvType::kQ8_0, KvType::kF16, 0, 32, 0);
  SnapReader r3{snap, "test"};
  EXPECT_THROW(mixed.load(r3, 6), Error);
}

TEST(KvCacheQ8, RingSlots) {
  const int64_t W = 32;
  KvCache ring(W, KvType::kQ8_0, KvType::kQ8_0, 4, 64, 1);  // window 4 + 1 rollback slot
  EXPECT_EQ(ring.cap(), 5);
  std::vector<std::vector<float>> ks;
  for (int64_t p = 0; p < 9; ++p) {
    ks.push_back(randn(W, 500 + static_cast<uint32_t>(p)));
    ring.store(p, ks.back().data(), ks.back().data());
  }
  for (int64_t p = 4; p < 9; ++p) {
    const auto want = scalar_q8(ks[p].data(), W);
    EXPECT_EQ(0, std::memcmp(ring.k_row(p), want.data(), want.size())) << p;
  }
  EXPECT_TRUE(ring.can_truncate(9, 8));
  EXPECT_FALSE(ring.can_truncate(9, 6));
}

}  // namespace
}  // namespace oxi::nn
