// Continuous batching (runtime/batcher.h): sessions on their own threads that share a Batcher get
// the same tokens as alone, while their steps run in shared passes of the model.
#include <gtest/gtest.h>

#include <thread>
#include <vector>

#include "fake_model.h"
#include "runtime/batcher.h"
#include "runtime/session.h"

namespace oxi {
namespace {

using test::FakeModel;
using test::FakeText;

std::vector<int32_t> run_alone(const FakeModel& m, const FakeText& t, const std::vector<int32_t>& prompt, int n) {
  Session s(m, t, 256);
  GenerateOptions o;
  o.max_tokens = n;
  o.ignore_eog = true;
  return s.generate(prompt, o, nullptr).generated;
}

TEST(Batcher, ConcurrentSessionsShareForwardPasses) {
  FakeModel m(16, test::count_up);
  FakeText t;
  Batcher b(m);
  b.gather_wait = std::chrono::milliseconds(50);  // generous: the test box may be loaded
  constexpr int kSeqs = 6, kTokens = 20;
  std::vector<std::vector<int32_t>> prompts, got(kSeqs);
  for (int i = 0; i < kSeqs; ++i) prompts.push_back(std::vector<int32_t>(static_cast<size_t>(1 + i), static_cast<int32_t>(i)));
  std::vector<std::unique_ptr<Session>> ses;
  for (int i = 0; i < kSeqs; ++i) ses.push_back(std::make_unique<Session>(m, t, 256, &b));
  {
    // Every participant is registered before any starts, so the first passes wait for all.
    std::vector<std::unique_ptr<Batcher::Participant>> parts;
    for (int i = 0; i < kSeqs; ++i) parts.push_back(std::make_unique<Batcher::Participant>(&b));
    std::vector<std::thread> th;
    for (int i = 0; i < kSeqs; ++i)
      th.emplace_back([&, i] {
        GenerateOptions o;
        o.max_tokens = kTokens;
        o.ignore_eog = true;
        got[static_cast<size_t>(i)] = ses[static_cast<size_t>(i)]->generate(prompts[static_cast<size_t>(i)], o, nullptr).generated;
        parts[static_cast<size_t>(i)].reset();
      });
    for (auto& x : th) x.join();
  }
  for (int i = 0; i < kSeqs; ++i) EXPECT_EQ(got[static_cast<size_t>(i)], run_alone(m, t, prompts[static_cast<size_t>(i)], kTokens)) << i;
  // 6 prompts + 6 × 19 decode steps = 120 submissions; shared passes make far fewer model calls.
  EXPECT_EQ(b.rows(), static_cast<uint64_t>(1 + 2 + 3 + 4 + 5 + 6 + kSeqs * (kTokens - 1)));
  EXPECT_LT(b.passes(), static_cast<uint64_t>(kSeqs * kTokens) / 2) << "passes " << b.passes();
}

TEST(Batcher, OneBadSubmissionFailsAlone) {
  FakeModel m(16, test::count_up);
  FakeText t;
  Batcher b(m);
  const Model& base = m;
  auto good = base.new_state(64), bad = base.new_state(4);
  std::vector<float> lg(16);
  const std::vector<int32_t> five = {1, 2, 3, 4, 5};
  std::exception_ptr bad_err;
  std::thread th([&] {
    try {
      b.forward(*bad, five, lg.data());  // overflows its context of 4
    } catch (...) {
      bad_err = std::current_exception();
    }
  });
  std::vector<float> lg2(16);
  EXPECT_NO_THROW(b.forward(*good, five, lg2.data()));
  th.join();
  EXPECT_TRUE(bad_err != nullptr);
  EXPECT_EQ(good->n_past(), 5);
  EXPECT_EQ(bad->n_past(), 0);
}

// FakeModel with 2-float hidden rows: (token, cache position) of every entry.
class HiddenModel : public FakeModel {
 public:
  HiddenModel() : FakeModel(16, test::count_up) {
    info2_ = FakeModel::info();
    info2_.n_embd = 2;
  }
  const ModelInfo& info() const override { return info2_; }

 protected:
  void run(std::span<SequenceState* const> states, const Pass& p, const BatchOutput& out) const override {
    FakeModel::run(states, p, out);
    if (!out.hidden_all) return;
    for (const Segment& g : p.segs)
      for (int64_t i = 0; i < g.n; ++i) {
        out.hidden_all[2 * (g.row0 + i)] = static_cast<float>(p.token_at(g.row0 + i));
        out.hidden_all[2 * (g.row0 + i) + 1] = static_cast<float>(g.pos0 + i);
      }
  }

 private:
  ModelInfo info2_;
};

TEST(Batcher, HiddenJobsBesideADecodingSession) {
  HiddenModel m;
  FakeText t;
  Batcher b(m);
  b.gather_wait = std::chrono::milliseconds(50);
  const std::vector<int32_t> prompt = {1};
  std::vector<int32_t> got;
  Batcher::Participant part(&b);
  std::thread th([&] {
    Session s(m, t, 64, &b);
    GenerateOptions o;
    o.max_tokens = 6;
    o.ignore_eog = true;
    got = s.generate(prompt, o, nullptr).generated;
  });
  const Model& base = m;
  auto s1 = base.new_state(8), s2 = base.new_state(8);
  const std::vector<int32_t> a = {5, 6, 7}, c = {9, 3};
  std::vector<float> ha(6, -1.0f), hc(4, -1.0f), hc2(4, -1.0f);
  // Two jobs in one call; then a second chunk of one of them continues its state.
  const Batcher::HiddenJob jobs[] = {{s1.get(), a, ha.data()}, {s2.get(), c, hc.data()}};
  b.forward_hidden(jobs);
  const Batcher::HiddenJob more[] = {{s2.get(), c, hc2.data()}};
  b.forward_hidden(more);
  th.join();
  EXPECT_EQ(ha, (std::vector<float>{5, 0, 6, 1, 7, 2}));
  EXPECT_EQ(hc, (std::vector<float>{9, 0, 3, 1}));
  EXPECT_EQ(hc2, (std::vector<float>{9, 2, 3, 3}));
  EXPECT_EQ(s1->n_past(), 3);
  EXPECT_EQ(s2->n_past(), 4);
  EXPECT_EQ(got, run_alone(m, t, prompt, 6));  // the decoding sequence computed what it does alone
}

}  // namespace
}  // namespace oxi
