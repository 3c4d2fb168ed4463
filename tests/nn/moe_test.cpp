// nn/moe.h against a direct per-row computation written out here: top-k with renormalisation, the
// per-expert row lists, and both orders of adding a row's expert outputs (bit-exact: same f32 ops).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

#include "core/error.h"
#include "nn/moe.h"

namespace oxi::nn {
namespace {

TEST(Moe, TopkRenormPicksTheLargestLowerIndexOnTies) {
  const std::vector<float> p = {0.1f, 0.3f, 0.05f, 0.3f, 0.25f};
  int32_t ids[3];
  float w[3];
  topk_renorm(p.data(), 5, 3, ids, w);
  EXPECT_EQ(ids[0], 1);
  EXPECT_EQ(ids[1], 3);
  EXPECT_EQ(ids[2], 4);
  const float s = static_cast<float>(0.3 + 0.3 + 0.25);  // p's f32 values summed in double
  EXPECT_EQ(w[0], 0.3f / s);
  EXPECT_EQ(w[2], 0.25f / s);
  // all-zero probabilities: the sum is floored, no division by zero
  const std::vector<float> z(4, 0.0f);
  topk_renorm(z.data(), 4, 2, ids, w);
  EXPECT_EQ(ids[0], 0);
  EXPECT_EQ(ids[1], 1);
  EXPECT_EQ(w[0], 0.0f);
}

TEST(Moe, ExpertRowsRejectsAnOutOfRangeExpert) {
  const int32_t ids[2] = {0, 7};
  const float w[2] = {0.5f, 0.5f};
  EXPECT_THROW(expert_rows(ids, w, 1, 4, 2, "test"), Error);
}

TEST(Moe, RunExpertsMatchesADirectSumInBothOrders) {
  const int64_t n = 9, D = 13, E = 6, K = 3;
  std::mt19937 rng(7);
  std::normal_distribution<float> nd;
  std::vector<float> x(static_cast<size_t>(n * D)), p(static_cast<size_t>(E));
  for (float& v : x) v = nd(rng);
  std::vector<int32_t> ids(static_cast<size_t>(n * K));
  std::vector<float> w(ids.size());
  for (int64_t t = 0; t < n; ++t) {
    for (float& v : p) v = std::abs(nd(rng));
    topk_renorm(p.data(), E, K, ids.data() + t * K, w.data() + t * K);
  }
  // expert e maps a row to row · (e + 1) + 0.25·e, so every output is distinct per expert
  auto expert = [](int64_t e, float v) { return v * static_cast<float>(e + 1) + 0.25f * static_cast<float>(e); };
  const ExpertRows r = expert_rows(ids.data(), w.data(), n, E, K, "test");
  for (int64_t e = 0; e < E; ++e)
    EXPECT_TRUE(std::is_sorted(r.rows[static_cast<size_t>(e)].begin(), r.rows[static_cast<size_t>(e)].end()));
  for (MoeSum order : {MoeSum::kExpertOrder, MoeSum::kSlotOrder}) {
    std::vector<float> out(static_cast<size_t>(n * D), -1.0f);
    std::vector<int> calls(static_cast<size_t>(E), 0);
    run_experts_host(r, x.data(), n, D, K, order, out.data(), [&](size_t e, const float* xin, int64_t m, float* y) {
      ++calls[e];
      for (int64_t i = 0; i < m * D; ++i) y[i] = expert(static_cast<int64_t>(e), xin[i]);
    });
    for (int64_t e = 0; e < E; ++e) EXPECT_EQ(calls[static_cast<size_t>(e)], r.rows[static_cast<size_t>(e)].empty() ? 0 : 1);
    for (int64_t t = 0; t < n; ++t)
      for (int64_t j = 0; j < D; ++j) {
        const float xv = x[static_cast<size_t>(t * D + j)];
        float want = 0.0f;
        if (order == MoeSum::kSlotOrder) {  // slot 0 (heaviest) first
          for (int64_t s = 0; s < K; ++s) {
            const float v = expert(ids[static_cast<size_t>(t * K + s)], xv) * w[static_cast<size_t>(t * K + s)];
            want = s == 0 ? v : want + v;
          }
        } else {  // experts in index order
          for (int64_t e = 0; e < E; ++e)
            for (int64_t s = 0; s < K; ++s)
              if (ids[static_cast<size_t>(t * K + s)] == e) want += w[static_cast<size_t>(t * K + s)] * expert(e, xv);
        }
        ASSERT_EQ(out[static_cast<size_t>(t * D + j)], want) << "row " << t << " col " << j;
      }
  }
}

}  // namespace
}  // namespace oxi::nn
