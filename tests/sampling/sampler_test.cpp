// Sampling transforms against hand-computed cases, and sampled frequencies against the analytic
// distribution (chi-square). Expected values are worked out by hand in the comments, never taken
// from the implementation.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <set>
#include <vector>

#include "core/error.h"
#include "sampling/sampler.h"

namespace oxi {
namespace {

std::vector<Candidate> cands(const std::vector<float>& logits) {
  std::vector<Candidate> c;
  for (size_t i = 0; i < logits.size(); ++i) c.push_back({static_cast<int32_t>(i), logits[i]});
  return c;
}

std::set<int32_t> ids(const std::vector<Candidate>& c) {
  std::set<int32_t> s;
  for (const auto& x : c) s.insert(x.id);
  return s;
}

// Logits whose softmax is exactly the given probabilities.
std::vector<float> logits_of(const std::vector<double>& probs) {
  std::vector<float> l;
  for (double p : probs) l.push_back(static_cast<float>(std::log(p)));
  return l;
}

TEST(Sampling, TopKKeepsBestAndBreaksTiesBySmallerId) {
  auto c = cands({1.0f, 3.0f, 2.0f, 3.0f, -1.0f});
  apply_top_k(c, 2);
  ASSERT_EQ(c.size(), 2u);
  EXPECT_EQ(c[0].id, 1);  // 3.0, smaller id first
  EXPECT_EQ(c[1].id, 3);
  auto d = cands({1.0f, 3.0f, 2.0f, 3.0f});
  apply_top_k(d, 3);
  EXPECT_EQ(ids(d), (std::set<int32_t>{1, 2, 3}));
  auto e = cands({1.0f, 2.0f});
  apply_top_k(e, 0);  // off
  EXPECT_EQ(e.size(), 2u);
  apply_top_k(e, 10);  // k > n keeps all
  EXPECT_EQ(e.size(), 2u);
}

TEST(Sampling, TopPKeepsSmallestPrefixReachingMass) {
  // probs 0.05 0.5 0.15 0.3 → sorted 0.5 (id1), 0.3 (id3), 0.15 (id2), 0.05 (id0);
  // cumulative 0.5, 0.8, 0.95, 1.0.
  const auto l = logits_of({0.05, 0.5, 0.15, 0.3});
  auto a = cands(l);
  apply_top_p(a, 0.4f);  // 0.5 already >= 0.4
  EXPECT_EQ(ids(a), (std::set<int32_t>{1}));
  auto b = cands(l);
  apply_top_p(b, 0.7f);  // crosses at the 2nd
  EXPECT_EQ(ids(b), (std::set<int32_t>{1, 3}));
  auto c = cands(l);
  apply_top_p(c, 0.9f);
  EXPECT_EQ(ids(c), (std::set<int32_t>{1, 2, 3}));
  auto d = cands(l);
  apply_top_p(d, 1.0f);  // off
  EXPECT_EQ(d.size(), 4u);
  auto e = cands(l);
  apply_top_p(e, 0.0f);  // keeps at least one
  EXPECT_EQ(ids(e), (std::set<int32_t>{1}));
}

TEST(Sampling, TopPOverManyCandidatesNeedsMoreThanFirstPrefix) {
  // 1000 equal logits: the nucleus for p = 0.5 is exactly 500 tokens (each 0.001); the expanding
  // sort must go past its first 256. Use 0.5005 to stay clear of rounding at the boundary.
  std::vector<float> l(1000, 0.0f);
  auto c = cands(l);
  apply_top_p(c, 0.5005f);
  EXPECT_EQ(c.size(), 501u);
  // Ties keep the smallest ids.
  EXPECT_EQ(*ids(c).rbegin(), 500);
}

TEST(Sampling, MinPKeepsTokensAboveFractionOfMax) {
  // probs 0.5 0.3 0.15 0.05: min_p 0.2 → threshold 0.1 keeps {0,1,2}; 0.5 → 0.25 keeps {0,1}.
  const auto l = logits_of({0.5, 0.3, 0.15, 0.05});
  auto a = cands(l);
  apply_min_p(a, 0.2f);
  EXPECT_EQ(ids(a), (std::set<int32_t>{0, 1, 2}));
  auto b = cands(l);
  apply_min_p(b, 0.5f);
  EXPECT_EQ(ids(b), (std::set<int32_t>{0, 1}));
  auto c = cands(l);
  apply_min_p(c, 1.0f);
  EXPECT_EQ(ids(c), (std::set<int32_t>{0}));
  auto d = cands(l);
  apply_min_p(d, 0.0f);
  EXPECT_EQ(d.size(), 4u);
}

TEST(Sampling, PenaltiesFollowLlamaCppRule) {
  // id0: 2 seen twice → 2/2 = 1, minus 2*0.25 + 0.5 → 0
  // id1: -2 seen once → -2*2 = -4, minus 0.25 + 0.5 → -4.75
  // id2: unseen → 1 unchanged; id3: beyond counts → unchanged
  auto c = cands({2.0f, -2.0f, 1.0f, 7.0f});
  const std::vector<int32_t> counts = {2, 1, 0};
  apply_penalties(c, counts, 2.0f, 0.5f, 0.25f);
  EXPECT_FLOAT_EQ(c[0].logit, 0.0f);
  EXPECT_FLOAT_EQ(c[1].logit, -4.75f);
  EXPECT_FLOAT_EQ(c[2].logit, 1.0f);
  EXPECT_FLOAT_EQ(c[3].logit, 7.0f);
}

TEST(Sampling, TemperatureAndProbs) {
  auto c = cands({2.0f, 4.0f});
  apply_temperature(c, 2.0f);
  EXPECT_FLOAT_EQ(c[0].logit, 1.0f);
  EXPECT_FLOAT_EQ(c[1].logit, 2.0f);
  const auto p = candidate_probs(cands(logits_of({0.2, 0.3, 0.5})));
  EXPECT_NEAR(p[0], 0.2, 1e-6);
  EXPECT_NEAR(p[1], 0.3, 1e-6);
  EXPECT_NEAR(p[2], 0.5, 1e-6);
}

TEST(Sampling, ArgmaxTiesToSmallestIdAndSkipsNan) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const std::vector<float> a = {1.0f, 5.0f, 5.0f, 2.0f};
  EXPECT_EQ(argmax(a), 1);
  const std::vector<float> b = {nan, -3.0f, nan, -1.0f};
  EXPECT_EQ(argmax(b), 3);
  const std::vector<float> c = {nan, -std::numeric_limits<float>::infinity()};
  EXPECT_THROW(argmax(c), Error);
}

TEST(Sampling, TopLogprobsAreLogSoftmaxOfRawLogits) {
  // softmax of log(1..4) = (1,2,3,4)/10.
  const auto l = logits_of({1, 2, 3, 4});
  const double lse = log_sum_exp(l);
  EXPECT_NEAR(lse, std::log(10.0), 1e-6);
  const auto t = top_logprobs(l, 2, lse);
  ASSERT_EQ(t.size(), 2u);
  EXPECT_EQ(t[0].id, 3);
  EXPECT_NEAR(t[0].logprob, std::log(0.4), 1e-6);
  EXPECT_EQ(t[1].id, 2);
  EXPECT_NEAR(t[1].logprob, std::log(0.3), 1e-6);
  // Ties keep ascending ids; k beyond n is clamped.
  const std::vector<float> flat = {0.0f, 0.0f, 0.0f};
  const auto u = top_logprobs(flat, 5, log_sum_exp(flat));
  ASSERT_EQ(u.size(), 3u);
  EXPECT_EQ(u[0].id, 0);
  EXPECT_EQ(u[1].id, 1);
  EXPECT_EQ(u[2].id, 2);
  EXPECT_NEAR(u[0].logprob, -std::log(3.0), 1e-6);
  EXPECT_TRUE(top_logprobs(flat, 0, 0.0).empty());
}

TEST(Sampling, LogSumExpMatchesDoubleReferenceOnALargeRow) {
  // 262 147 logits (not a multiple of the vector width) spread over ±40, some NaN and -inf.
  std::vector<float> l(262147);
  uint32_t x = 12345;
  for (auto& v : l) {
    x = x * 1664525u + 1013904223u;
    v = static_cast<float>(x >> 8) / 16777216.0f * 80.0f - 40.0f;
  }
  l[7] = std::numeric_limits<float>::quiet_NaN();
  l[100] = -std::numeric_limits<float>::infinity();
  l[262146] = 45.5f;  // the maximum sits in the tail
  double m = -1e300;
  for (float v : l) {
    if (!std::isnan(v)) m = std::max(m, static_cast<double>(v));
  }
  double s = 0.0;
  for (float v : l) {
    if (!std::isnan(v)) s += std::exp(static_cast<double>(v) - m);
  }
  const double ref = m + std::log(s);
  EXPECT_NEAR(log_sum_exp(l), ref, 2e-6);
  // Small rows and exact cases.
  const std::vector<float> one = {3.0f};
  EXPECT_NEAR(log_sum_exp(one), 3.0, 1e-6);
  const std::vector<float> two = {0.0f, 0.0f};
  EXPECT_NEAR(log_sum_exp(two), std::log(2.0), 1e-6);
  const std::vector<float> none = {std::numeric_limits<float>::quiet_NaN()};
  EXPECT_FALSE(std::isfinite(log_sum_exp(none)));
}

TEST(Sampling, GreedyIgnoresRngAndHonoursPenalties) {
  Sampler g(SamplingParams::greedy(), 4);
  const std::vector<float> l = {1.0f, 3.0f, 3.0f, 2.0f};
  EXPECT_EQ(g.sample(l), 1);
  // Presence penalty 1.5 over the last 2 tokens: after accepting 1, id1 drops to 1.5 < 3.
  SamplingParams p = SamplingParams::greedy();
  p.presence_penalty = 1.5f;
  p.penalty_last_n = 2;
  Sampler s(p, 4);
  s.accept(1);
  EXPECT_EQ(s.sample(l), 2);
  s.accept(2);  // window {1, 2}: ids 1 and 2 → 1.5, id3 = 2 wins
  EXPECT_EQ(s.sample(l), 3);
  s.accept(3);  // window {2, 3}: id1 back to 3
  EXPECT_EQ(s.sample(l), 1);
  EXPECT_EQ(s.history(), (std::vector<int32_t>{2, 3}));
  s.reset();
  EXPECT_TRUE(s.history().empty());
  EXPECT_EQ(s.sample(l), 1);
}

TEST(Sampling, ValidationRejectsBadParams) {
  SamplingParams p;
  p.top_p = std::numeric_limits<float>::quiet_NaN();
  EXPECT_THROW(Sampler(p, 10), Error);
  SamplingParams q;
  q.repeat_penalty = 0.0f;
  EXPECT_THROW(Sampler(q, 10), Error);
  SamplingParams r;
  EXPECT_THROW(Sampler(r, 0), Error);
  Sampler ok(SamplingParams::greedy(), 10);
  const std::vector<float> short_row(5, 0.0f);
  EXPECT_THROW(ok.sample(short_row), Error);
}

TEST(Sampling, SameSeedSameSequence) {
  SamplingParams p;
  p.temperature = 1.0f;
  p.top_k = 0;
  p.top_p = 1.0f;
  p.min_p = 0.0f;
  p.seed = 1234;
  const std::vector<float> l = {0.1f, 0.2f, 0.3f, 0.4f, 0.5f, 0.6f, 0.7f, 0.8f};
  Sampler a(p, 8), b(p, 8);
  std::vector<int32_t> sa, sb;
  for (int i = 0; i < 200; ++i) {
    sa.push_back(a.sample(l));
    sb.push_back(b.sample(l));
  }
  EXPECT_EQ(sa, sb);
  a.reset();
  std::vector<int32_t> sa2;
  for (int i = 0; i < 200; ++i) sa2.push_back(a.sample(l));
  EXPECT_EQ(sa, sa2);
  p.seed = 1235;
  Sampler c(p, 8);
  std::vector<int32_t> sc;
  for (int i = 0; i < 200; ++i) sc.push_back(c.sample(l));
  EXPECT_NE(sa, sc);
}

// Pearson chi-square of observed counts against expected probabilities.
double chi_square(const std::map<int32_t, int>& observed, const std::map<int32_t, double>& expected,
                  int n) {
  double chi = 0.0;
  for (const auto& [id, p] : expected) {
    const double e = p * n;
    const auto it = observed.find(id);
    const double o = it == observed.end() ? 0.0 : it->second;
    chi += (o - e) * (o - e) / e;
  }
  return chi;
}

TEST(Sampling, FrequenciesMatchAnalyticDistribution) {
  // probs (1,2,3,4,10)/20. llama.cpp order: top-p on the untempered probs, then temperature.
  // top_p 0.8: sorted 0.5 (id4), 0.2 (id3), 0.15 (id2) → cumulative 0.85 ≥ 0.8 keeps {4,3,2}.
  // Temperature 0.5 squares the probabilities: 100, 16, 9 → /125.
  const auto l = logits_of({1 / 20.0, 2 / 20.0, 3 / 20.0, 4 / 20.0, 10 / 20.0});
  SamplingParams p;
  p.temperature = 0.5f;
  p.top_k = 0;
  p.top_p = 0.8f;
  p.min_p = 0.0f;
  p.seed = 42;
  Sampler s(p, 5);
  const int n = 100000;
  std::map<int32_t, int> obs;
  for (int i = 0; i < n; ++i) obs[s.sample(l)]++;
  EXPECT_EQ(obs.count(0), 0u);
  EXPECT_EQ(obs.count(1), 0u);
  const std::map<int32_t, double> expected = {{4, 100 / 125.0}, {3, 16 / 125.0}, {2, 9 / 125.0}};
  // df = 2: P(chi² > 13.82) = 0.001.
  EXPECT_LT(chi_square(obs, expected, n), 13.82);
}

TEST(Sampling, FrequenciesWithTopKMinPAndTemperature) {
  // probs (1,2,3,4,10)/20 → top_k 4 drops id0; min_p 0.25 keeps prob >= 0.125: ids 2 (0.15),
  // 3 (0.2), 4 (0.5); temperature 2 takes square roots: sqrt(3), 2, sqrt(10).
  const auto l = logits_of({1 / 20.0, 2 / 20.0, 3 / 20.0, 4 / 20.0, 10 / 20.0});
  SamplingParams p;
  p.temperature = 2.0f;
  p.top_k = 4;
  p.top_p = 1.0f;
  p.min_p = 0.25f;
  p.seed = 7;
  Sampler s(p, 5);
  const int n = 100000;
  std::map<int32_t, int> obs;
  for (int i = 0; i < n; ++i) obs[s.sample(l)]++;
  EXPECT_EQ(obs.count(0) + obs.count(1), 0u);
  const double z = std::sqrt(3.0) + 2.0 + std::sqrt(10.0);
  const std::map<int32_t, double> expected = {
      {2, std::sqrt(3.0) / z}, {3, 2.0 / z}, {4, std::sqrt(10.0) / z}};
  EXPECT_LT(chi_square(obs, expected, n), 13.82);
}

TEST(Sampling, FrequenciesOfPlainSoftmax) {
  // Temperature 1 with every filter off: the softmax itself, (1,2,3,4)/10; df = 3, 16.27.
  const auto l = logits_of({0.1, 0.2, 0.3, 0.4});
  SamplingParams p;
  p.temperature = 1.0f;
  p.top_k = 0;
  p.top_p = 1.0f;
  p.min_p = 0.0f;
  p.seed = 99;
  Sampler s(p, 4);
  const int n = 100000;
  std::map<int32_t, int> obs;
  for (int i = 0; i < n; ++i) obs[s.sample(l)]++;
  const std::map<int32_t, double> expected = {{0, 0.1}, {1, 0.2}, {2, 0.3}, {3, 0.4}};
  EXPECT_LT(chi_square(obs, expected, n), 16.27);
}

TEST(Sampling, IdsBeyondVocabularyAreNeverSampled) {
  // The row has 6 logits but only 3 ids are valid; the padded ones are the largest.
  const std::vector<float> l = {0.0f, 0.0f, 0.0f, 50.0f, 50.0f, 50.0f};
  Sampler g(SamplingParams::greedy(), 3);
  EXPECT_EQ(g.sample(l), 0);
  SamplingParams p;
  p.temperature = 1.0f;
  p.seed = 3;
  Sampler s(p, 3);
  for (int i = 0; i < 100; ++i) EXPECT_LT(s.sample(l), 3);
}

}  // namespace
}  // namespace oxi
