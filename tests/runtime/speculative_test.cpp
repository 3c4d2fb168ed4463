// Speculative decoding in the runtime (runtime/speculative.h, Session::generate): the n-gram
// drafter's proposals, the tuner's choices, Sampler::verify's output distribution, greedy runs
// equal to plain runs token for token (drafts all accepted, all rejected, mixed; every stop
// condition landing inside a verify step), sampled runs with the plain run's distribution
// (chi-square against the exact probabilities of a scripted model) and, seeded, its very tokens.
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <vector>

#include "fake_model.h"
#include "runtime/session.h"
#include "runtime/speculative.h"
#include "sampling/sampler.h"

namespace oxi {
namespace {

using test::FakeModel;
using test::FakeText;

// Chi-square critical values at p = 0.001 (the tests use fixed seeds, so a pass is stable).
double chi2_crit(int df) {
  // Wilson–Hilferty approximation of the 0.999 quantile.
  const double z = 3.090, a = 2.0 / (9.0 * df);
  return df * std::pow(1.0 - a + z * std::sqrt(a), 3.0);
}

double chi2(const std::vector<double>& expected_p, const std::vector<int>& counts, int n) {
  double x = 0.0;
  for (size_t i = 0; i < counts.size(); ++i) {
    const double e = expected_p[i] * n;
    if (e > 0.0) x += (counts[i] - e) * (counts[i] - e) / e;
    else if (counts[i] > 0) return 1e30;  // an impossible outcome happened
  }
  return x;
}

TEST(NgramDrafter, ProposesWhatFollowedTheLatestLongestMatch) {
  NgramDrafter d(2, 4);
  std::vector<int32_t> out;
  // "1 2 3" occurred at 0 and at 5; the latest earlier occurrence (5) is followed by 7 8.
  d.propose(std::vector<int32_t>{1, 2, 3, 4, 5, 1, 2, 3, 7, 8, 9, 1, 2, 3}, 3, out);
  EXPECT_EQ(out, (std::vector<int32_t>{7, 8, 9}));
  // Capped by k and by the end of the history.
  d.propose(std::vector<int32_t>{5, 6, 7, 5, 6}, 8, out);
  EXPECT_EQ(out, (std::vector<int32_t>{7, 5, 6}));
  // A longer match wins over a more recent shorter one: "4 2 3" at 0 beats "2 3" at 4.
  d.propose(std::vector<int32_t>{4, 2, 3, 9, 2, 3, 8, 4, 2, 3}, 1, out);
  EXPECT_EQ(out, (std::vector<int32_t>{9}));
  // No bigram seen before: nothing (single-token matches are below n_min).
  d.propose(std::vector<int32_t>{1, 2, 3, 4, 1}, 4, out);
  EXPECT_TRUE(out.empty());
  d.propose(std::vector<int32_t>{}, 4, out);
  EXPECT_TRUE(out.empty());
}

TEST(DraftTuner, DraftsWhenItPaysAndStopsWhenItDoesNot) {
  DraftTuner t;
  SpecOptions o;
  o.draft_max = 8;
  t.start(o);
  // A machine where a verify of m tokens costs 1 + 0.1 (m − 1) decode steps.
  for (int m = 1; m <= 9; ++m) t.record_pass(m, 0.01 * (1.0 + 0.1 * (m - 1)));
  for (int i = 0; i < 20; ++i) t.record_verify(8, 8);  // everything accepted
  EXPECT_GT(t.acceptance(), 0.9);
  EXPECT_EQ(t.choose(8), 8);
  EXPECT_EQ(t.choose(3), 3);
  for (int i = 0; i < 40; ++i) t.record_verify(2, 0);  // nothing accepted any more
  EXPECT_LT(t.acceptance(), 0.15);
  // Only probes, ever rarer while they find nothing: after 16, 32, 64, 128, then every 256.
  std::vector<int> probes;
  for (int i = 1; i <= 1000; ++i) {
    const int k = t.choose(8);
    if (k > 0) {
      EXPECT_EQ(k, 1);
      probes.push_back(i);
      t.record_verify(1, 0);
    }
  }
  EXPECT_EQ(probes, (std::vector<int>{16, 48, 112, 240, 496, 752}));
  // A probe that hits resets the interval.
  for (int i = 0; i < 300 && t.choose(8) == 0; ++i) {
  }
  t.record_verify(1, 1);
  int next = 0;
  while (t.choose(8) == 0) ++next;
  EXPECT_LE(next, DraftTuner::kProbeEvery);
  // draft_min forces drafting whenever a proposal is long enough.
  o.draft_min = 2;
  t.start(o);
  for (int i = 0; i < 40; ++i) t.record_verify(2, 0);
  EXPECT_GE(t.choose(8), 2);
  EXPECT_EQ(t.choose(1), 0);
}

// Drafts that cost forward passes (the MTP head) are charged their measured cost: at acceptance
// ≈ 0.87 on a machine where a verify of m tokens costs 1 + 0.1 (m − 1) decode steps, free drafts
// pay at a long length, drafts costing 0.35 of a step each at a shorter one, and drafts costing
// 2 steps each do not pay at all.
TEST(DraftTuner, ChargesTheDraftersOwnCost) {
  SpecOptions o;
  o.draft_max = 8;
  auto tuned = [&](double draft_steps) {
    DraftTuner t;
    t.start(o);
    for (int m = 1; m <= 9; ++m) t.record_pass(m, 0.01 * (1.0 + 0.1 * (m - 1)));
    for (int i = 0; i < 200; ++i) t.record_verify(10, i % 10 < 7 ? 7 : 6);  // ≈ 0.7 accepted
    if (draft_steps > 0) t.record_draft(4, 4 * 0.01 * draft_steps);
    return t.choose(8);
  };
  const int free_k = tuned(0.0), k = tuned(0.35);
  EXPECT_GE(free_k, 6);
  EXPECT_GE(k, 1);
  EXPECT_LT(k, free_k);
  EXPECT_EQ(tuned(2.0), 0);
}

TEST(SamplerVerify, OutputHasTheSamplersDistribution) {
  // Six tokens with unequal probabilities; temperature 1, no truncation.
  const std::vector<float> logits = {1.0f, 0.2f, -0.5f, 2.0f, 0.0f, -1.5f};
  std::vector<double> p(logits.size());
  double z = 0.0;
  for (size_t i = 0; i < p.size(); ++i) z += p[i] = std::exp(static_cast<double>(logits[i]));
  for (double& x : p) x /= z;
  SamplingParams sp;
  sp.temperature = 1.0f;
  sp.top_k = 0;
  sp.top_p = 1.0f;
  sp.min_p = 0.0f;
  for (int32_t draft : {3, 1, 5}) {
    sp.seed = 1234 + static_cast<uint64_t>(draft);
    Sampler s(sp, 6);
    constexpr int kN = 60000;
    std::vector<int> counts(6, 0);
    int acc = 0;
    for (int i = 0; i < kN; ++i) {
      bool a = false;
      const int32_t y = s.verify(logits, draft, &a);
      ++counts[static_cast<size_t>(y)];
      acc += a;
      if (a) EXPECT_EQ(y, draft);
      else EXPECT_NE(y, draft);
    }
    EXPECT_LT(chi2(p, counts, kN), chi2_crit(5)) << "draft " << draft;
    // Accepted with probability p(draft).
    EXPECT_NEAR(static_cast<double>(acc) / kN, p[static_cast<size_t>(draft)], 0.01) << "draft " << draft;
  }
  // Greedy: the argmax, accepted when it is the draft.
  Sampler g(SamplingParams::greedy(), 6);
  bool a = true;
  EXPECT_EQ(g.verify(logits, 1, &a), 3);
  EXPECT_FALSE(a);
  EXPECT_EQ(g.verify(logits, 3, &a), 3);
  EXPECT_TRUE(a);
}

struct Outcome {
  GenerateResult r;
  std::vector<std::string> texts;
  std::vector<int32_t> tokens;  // Session::tokens() after
};

Outcome generate(const FakeModel& m, int64_t n_ctx, const std::vector<int32_t>& prompt, GenerateOptions o,
             int32_t max_draft, int cancel_after = -1) {
  FakeText t;
  Session s(m, t, n_ctx, nullptr, max_draft);
  Outcome run;
  run.r = s.generate(prompt, o, [&](const TokenEvent& e) {
    run.texts.emplace_back(e.text);
    return cancel_after < 0 || static_cast<int>(run.texts.size()) < cancel_after;
  });
  run.tokens = s.tokens();
  return run;
}

// next = the token three back (a period-3 loop after the prompt): n-gram drafts all come true.
int32_t period3(const std::vector<int32_t>& s) { return s.size() >= 3 ? s[s.size() - 3] : 0; }
// next = a hash of the whole sequence: n-gram drafts come true only by chance.
int32_t by_sum(const std::vector<int32_t>& s) {
  uint64_t h = 1469598103934665603ull;
  for (int32_t v : s) h = (h ^ static_cast<uint64_t>(v + 1)) * 1099511628211ull;
  return static_cast<int32_t>((h >> 29) % 9);
}

void expect_same(const Outcome& a, const Outcome& b, const std::string& what) {
  EXPECT_EQ(a.r.generated, b.r.generated) << what;
  EXPECT_EQ(a.r.text, b.r.text) << what;
  EXPECT_EQ(a.texts, b.texts) << what;
  EXPECT_EQ(a.r.stop, b.r.stop) << what;
  EXPECT_EQ(a.tokens, b.tokens) << what;
}

TEST(Speculative, GreedyNgramEqualsPlain) {
  for (auto next : {period3, by_sum}) {
    FakeModel m(16, next);
    const std::vector<int32_t> prompt = {1, 2, 3, 4, 1, 2};
    GenerateOptions o;
    o.max_tokens = 40;
    o.ignore_eog = true;
    const Outcome plain = generate(m, 256, prompt, o, 0);
    o.spec.mode = SpecMode::kNgram;
    o.spec.adaptive = false;  // verify every proposal
    m.calls.clear();
    const Outcome spec = generate(m, 256, prompt, o, 8);
    expect_same(plain, spec, next == period3 ? "period3" : "by_sum");
    EXPECT_GT(spec.r.n_verify, 0);
    if (next == period3) {
      EXPECT_EQ(spec.r.n_accepted, spec.r.n_drafted);
      EXPECT_LT(m.calls.size(), 2u + 40u / 2u);  // far fewer model calls than tokens
    } else {
      EXPECT_LT(spec.r.n_accepted, spec.r.n_drafted);
    }
  }
}

TEST(Speculative, ScriptedDraftsAllAcceptedAllRejectedMixed) {
  FakeModel m(16, by_sum);
  const std::vector<int32_t> prompt = {5, 1, 4};
  GenerateOptions o;
  o.max_tokens = 30;
  o.ignore_eog = true;
  const Outcome plain = generate(m, 256, prompt, o, 0);
  for (int corrupt : {0, 1, 3}) {  // 0: all accepted; 1: all rejected; 3: mixed
    ReplayDrafter d(plain.r.generated, prompt.size(), corrupt, 9);
    GenerateOptions so = o;
    so.spec.mode = SpecMode::kAuto;
    so.spec.adaptive = false;
    so.spec.drafter = &d;
    for (int32_t k : {1, 4, 16}) {
      so.spec.draft_max = k;
      const Outcome spec = generate(m, 256, prompt, so, 16);
      const std::string what = "corrupt " + std::to_string(corrupt) + " k " + std::to_string(k);
      expect_same(plain, spec, what);
      EXPECT_GT(spec.r.n_drafted, 0) << what;
      if (corrupt == 0) EXPECT_EQ(spec.r.n_accepted, spec.r.n_drafted) << what;
      if (corrupt == 1) EXPECT_EQ(spec.r.n_accepted, 0) << what;
      if (corrupt == 3) EXPECT_GT(spec.r.n_accepted, 0) << what;
      if (corrupt == 3) EXPECT_LT(spec.r.n_accepted, spec.r.n_drafted) << what;
    }
  }
}

TEST(Speculative, StopsInsideAVerifyStepMatchPlain) {
  // count_up: 0 → 1 … 8 → 13 (end of generation), with the script of the plain run as drafts.
  FakeModel m(16, test::count_up);
  struct Case {
    std::vector<int32_t> prompt;
    int max_tokens;
    int64_t n_ctx;
    int cancel_after;
    bool ignore_eog;
  };
  const std::vector<Case> cases = {
      {{0}, -1, 64, -1, false},  // end of generation among accepted drafts
      {{0}, 5, 64, -1, false},   // max tokens mid-step
      {{0}, -1, 6, -1, false},   // context full mid-step
      {{0}, -1, 64, 4, false},   // callback cancels mid-step
      {{2}, 12, 64, -1, true},   // past end of generation
  };
  for (size_t ci = 0; ci < cases.size(); ++ci) {
    const Case& c = cases[ci];
    GenerateOptions o;
    o.max_tokens = c.max_tokens;
    o.ignore_eog = c.ignore_eog;
    const Outcome plain = generate(m, c.n_ctx, c.prompt, o, 0, c.cancel_after);
    ReplayDrafter d(plain.r.generated, c.prompt.size());
    o.spec.mode = SpecMode::kAuto;
    o.spec.adaptive = false;
    o.spec.drafter = &d;
    const Outcome spec = generate(m, c.n_ctx, c.prompt, o, 8, c.cancel_after);
    expect_same(plain, spec, "case " + std::to_string(ci));
  }
}

TEST(Speculative, SampledRunsHaveThePlainDistribution) {
  // Four live tokens whose logits depend on the sequence; temperature 1, no truncation. The joint
  // distribution of the first three generated tokens (64 outcomes) is computed exactly and
  // compared with 20,000 seeded speculative runs (prompt lookup drafting, every proposal verified).
  auto logits_of = [](const std::vector<int32_t>& s, float* row) {
    for (int v = 0; v < 16; ++v) row[v] = -INFINITY;
    const int last = s.back(), n = static_cast<int>(s.size());
    for (int v = 0; v < 4; ++v) row[v] = 0.9f * static_cast<float>((v * 5 + last * 3 + n) % 4) - (v == last ? 0.0f : 0.4f);
  };
  FakeModel m(16, period3);
  m.soft = logits_of;
  const std::vector<int32_t> prompt = {0, 1, 0, 1, 0, 1, 2, 3, 0, 1};
  std::vector<double> expect(64, 0.0);
  for (int a = 0; a < 64; ++a) {
    std::vector<int32_t> s = prompt;
    double pr = 1.0;
    for (int j = 0; j < 3; ++j) {
      float row[16];
      logits_of(s, row);
      double z = 0.0;
      for (int v = 0; v < 4; ++v) z += std::exp(static_cast<double>(row[v]));
      const int tok = (a >> (2 * (2 - j))) & 3;
      pr *= std::exp(static_cast<double>(row[tok])) / z;
      s.push_back(tok);
    }
    expect[static_cast<size_t>(a)] = pr;
  }
  FakeText t;
  Session s(m, t, 64, nullptr, 4);
  constexpr int kRuns = 20000;
  std::vector<int> counts(64, 0);
  int drafted = 0, accepted = 0;
  for (int i = 0; i < kRuns; ++i) {
    GenerateOptions o;
    o.max_tokens = 3;
    o.ignore_eog = true;
    o.sampling.temperature = 1.0f;
    o.sampling.top_k = 0;
    o.sampling.top_p = 1.0f;
    o.sampling.min_p = 0.0f;
    o.sampling.seed = 1000 + static_cast<uint64_t>(i);
    o.spec.mode = SpecMode::kNgram;
    o.spec.adaptive = false;
    s.reset();
    const auto r = s.generate(prompt, o, nullptr);
    ASSERT_EQ(r.generated.size(), 3u);
    ++counts[static_cast<size_t>(r.generated[0] * 16 + r.generated[1] * 4 + r.generated[2])];
    drafted += r.n_drafted;
    accepted += r.n_accepted;
  }
  EXPECT_GT(drafted, kRuns / 2);
  EXPECT_GT(accepted, 0);
  EXPECT_LT(accepted, drafted);
  EXPECT_LT(chi2(expect, counts, kRuns), chi2_crit(63));
}

TEST(Speculative, SeededSamplingGivesThePlainRunsTokens) {
  // Each position takes the same single draw as in plain decoding, so a seed reproduces the plain
  // run whatever was drafted.
  FakeModel m(16, period3);
  m.soft = [](const std::vector<int32_t>& s, float* row) {
    for (int v = 0; v < 16; ++v) row[v] = 0.3f * static_cast<float>((v * 7 + s.back() * 5 + static_cast<int>(s.size())) % 6);
  };
  const std::vector<int32_t> prompt = {3, 4, 5, 3, 4, 5, 3, 4};
  for (uint64_t seed : {1ull, 2ull, 3ull, 42ull}) {
    GenerateOptions o;
    o.max_tokens = 40;
    o.ignore_eog = true;
    o.sampling.seed = seed;
    o.sampling.repeat_penalty = 1.1f;
    const Outcome plain = generate(m, 256, prompt, o, 0);
    o.spec.mode = SpecMode::kNgram;
    o.spec.adaptive = false;
    const Outcome spec = generate(m, 256, prompt, o, 8);
    expect_same(plain, spec, "seed " + std::to_string(seed));
    EXPECT_GT(spec.r.n_drafted, 0);
  }
}

TEST(Speculative, UnavailableModesAndNoRollbackRoom) {
  FakeModel m(16, test::count_up);
  FakeText t;
  GenerateOptions o;
  o.spec.mode = SpecMode::kMtp;
  Session s(m, t, 64, nullptr, 4);
  EXPECT_THROW(s.generate(std::vector<int32_t>{0}, o, nullptr), Error);
  // A session made without rollback room decodes plainly whatever the options say.
  Session plain(m, t, 64);
  o.spec.mode = SpecMode::kNgram;
  const auto r = plain.generate(std::vector<int32_t>{0, 1, 2, 0, 1}, o, nullptr);
  EXPECT_EQ(r.n_verify, 0);
  EXPECT_EQ(parse_spec_mode("auto"), SpecMode::kAuto);
  EXPECT_THROW(parse_spec_mode("fast"), Error);
}

}  // namespace
}  // namespace oxi
