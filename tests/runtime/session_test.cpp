#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "fake_model.h"
#include "runtime/session.h"

namespace oxi {
namespace {

using test::FakeModel;
using test::FakeText;

std::vector<int32_t> ids_of(const GenerateResult& r) { return r.generated; }

TEST(Utf8, CompletePrefix) {
  EXPECT_EQ(utf8_complete_prefix("abc"), 3u);
  EXPECT_EQ(utf8_complete_prefix("ab\xE2\x82"), 2u);        // € cut after 2 of 3 bytes
  EXPECT_EQ(utf8_complete_prefix("ab\xE2\x82\xAC"), 5u);    // whole €
  EXPECT_EQ(utf8_complete_prefix("\xF0\x9F\x98"), 0u);      // 3 of 4 bytes of an emoji
  EXPECT_EQ(utf8_complete_prefix("a\xFF"), 2u);             // invalid byte: complete as is
  EXPECT_EQ(utf8_complete_prefix("a\xE2" "b"), 3u);         // broken sequence: nothing to wait for
  EXPECT_EQ(utf8_complete_prefix(""), 0u);
}

TEST(Utf8, StreamNeverSplitsACodePoint) {
  Utf8TextStream s(&FakeText::piece);
  EXPECT_EQ(s.push(0), "a");
  EXPECT_EQ(s.push(10), "");
  EXPECT_EQ(s.push(11), "\xE2\x82\xAC");
  EXPECT_EQ(s.push(12), "");
  EXPECT_EQ(s.flush(), "\xEF\xBF\xBD");
  EXPECT_EQ(s.flush(), "");
}

TEST(Session, GreedyStopsAtEndOfGeneration) {
  FakeModel m(16, test::count_up);
  FakeText t;
  Session s(m, t, 64);
  GenerateOptions o;
  std::vector<std::string> texts;
  std::vector<bool> eogs;
  const std::vector<int32_t> prompt = {3};
  auto r = s.generate(prompt, o, [&](const TokenEvent& e) {
    texts.emplace_back(e.text);
    eogs.push_back(e.eog);
    return true;
  });
  // 3 → 4 5 6 7 8 → 13 (end of generation).
  EXPECT_EQ(ids_of(r), (std::vector<int32_t>{4, 5, 6, 7, 8, 13}));
  EXPECT_EQ(r.stop, StopReason::kEndOfGeneration);
  EXPECT_EQ(r.n_prompt, 1);
  EXPECT_EQ(r.n_generated, 6);
  EXPECT_EQ(r.text, "efghi");
  EXPECT_EQ(texts, (std::vector<std::string>{"e", "f", "g", "h", "i", ""}));
  EXPECT_TRUE(eogs.back());
  // The sequence holds the prompt and every generated token but the last (not fed back).
  EXPECT_EQ(s.tokens(), (std::vector<int32_t>{3, 4, 5, 6, 7, 8}));
  EXPECT_EQ(s.n_past(), 6);
}

TEST(Session, IgnoreEogKeepsGoing) {
  FakeModel m(16, test::count_up);
  FakeText t;
  Session s(m, t, 64);
  GenerateOptions o;
  o.ignore_eog = true;
  o.max_tokens = 8;
  const std::vector<int32_t> prompt = {6};
  auto r = s.generate(prompt, o, nullptr);
  // 6 → 7 8 13 0 1 2 3 4 (after 13: rule gives 0).
  EXPECT_EQ(ids_of(r), (std::vector<int32_t>{7, 8, 13, 0, 1, 2, 3, 4}));
  EXPECT_EQ(r.stop, StopReason::kMaxTokens);
}

TEST(Session, MaxTokens) {
  FakeModel m(16, test::count_up);
  FakeText t;
  Session s(m, t, 64);
  GenerateOptions o;
  o.max_tokens = 2;
  const std::vector<int32_t> prompt = {0, 1};
  auto r = s.generate(prompt, o, nullptr);
  EXPECT_EQ(ids_of(r), (std::vector<int32_t>{2, 3}));
  EXPECT_EQ(r.stop, StopReason::kMaxTokens);
  o.max_tokens = 0;
  const std::vector<int32_t> p2 = {3};
  auto r0 = s.generate(p2, o, nullptr);
  EXPECT_EQ(r0.n_generated, 0);
  EXPECT_EQ(r0.stop, StopReason::kMaxTokens);
}

TEST(Session, ContextFullStopsAndLongPromptIsRefused) {
  FakeModel m(16, test::count_up);
  FakeText t;
  {
    Session s(m, t, 5);
    const std::vector<int32_t> prompt = {0};
    auto r = s.generate(prompt, GenerateOptions{}, nullptr);
    // Positions 0..4 hold 0 1 2 3 4; the 5th generated token (5) cannot be fed back.
    EXPECT_EQ(ids_of(r), (std::vector<int32_t>{1, 2, 3, 4, 5}));
    EXPECT_EQ(r.stop, StopReason::kContextFull);
  }
  {
    Session s(m, t, 3);
    const std::vector<int32_t> prompt = {0, 1, 2, 3};
    try {
      s.generate(prompt, GenerateOptions{}, nullptr);
      FAIL() << "expected an error";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument);
      EXPECT_NE(std::string(e.what()).find("does not fit the context"), std::string::npos);
    }
    // A prompt that exactly fills the context still yields one token.
    const std::vector<int32_t> exact = {0, 1, 2};
    auto r = s.generate(exact, GenerateOptions{}, nullptr);
    EXPECT_EQ(ids_of(r), (std::vector<int32_t>{3}));
    EXPECT_EQ(r.stop, StopReason::kContextFull);
  }
}

TEST(Session, PrefillIsChunked) {
  FakeModel m(16, test::count_up);
  FakeText t;
  Session s(m, t, 64);
  GenerateOptions o;
  o.prefill_chunk = 4;
  o.max_tokens = 2;
  const std::vector<int32_t> prompt = {0, 1, 2, 3, 4, 5, 0, 1, 2, 3};
  auto r = s.generate(prompt, o, nullptr);
  EXPECT_EQ(m.calls, (std::vector<size_t>{4, 4, 2, 1}));  // 3 prefill chunks, 1 decode step
  EXPECT_EQ(ids_of(r), (std::vector<int32_t>{4, 5}));
}

TEST(Session, BadTokenIdsAreRejected) {
  FakeModel m(16, test::count_up);
  FakeText t;
  Session s(m, t, 64);
  const std::vector<int32_t> bad = {1, 16};
  EXPECT_THROW(s.generate(bad, GenerateOptions{}, nullptr), Error);
  const std::vector<int32_t> neg = {-1};
  EXPECT_THROW(s.generate(neg, GenerateOptions{}, nullptr), Error);
  const std::vector<int32_t> none;
  EXPECT_THROW(s.generate(none, GenerateOptions{}, nullptr), Error);
  GenerateOptions o;
  o.n_top_logprobs = 21;
  const std::vector<int32_t> ok = {1};
  EXPECT_THROW(s.generate(ok, o, nullptr), Error);
  EXPECT_EQ(s.n_past(), 0);
}

TEST(Session, StreamsMultiByteCharactersWhole) {
  // Script: after 0 → 10, after 10 → 11, after 11 → 12, after 12 → 14 (end).
  FakeModel m(16, [](const std::vector<int32_t>& q) {
    switch (q.back()) {
      case 0: return 10;
      case 10: return 11;
      case 11: return 12;
      default: return 14;
    }
  });
  FakeText t;
  Session s(m, t, 64);
  std::vector<std::string> texts;
  const std::vector<int32_t> prompt = {0};
  auto r = s.generate(prompt, GenerateOptions{}, [&](const TokenEvent& e) {
    texts.emplace_back(e.text);
    return true;
  });
  // 10 buffers, 11 completes "€", 12 (lone F0) buffers, end flushes it as U+FFFD.
  EXPECT_EQ(texts, (std::vector<std::string>{"", "\xE2\x82\xAC", "", "\xEF\xBF\xBD"}));
  EXPECT_EQ(r.text, "\xE2\x82\xAC\xEF\xBF\xBD");
}

TEST(Session, CutOffSequenceIsFlushedOnTheLastToken) {
  FakeModel m(16, [](const std::vector<int32_t>&) { return 10; });
  FakeText t;
  Session s(m, t, 64);
  GenerateOptions o;
  o.max_tokens = 1;
  std::string seen;
  const std::vector<int32_t> prompt = {0};
  s.generate(prompt, o, [&](const TokenEvent& e) {
    seen += std::string(e.text);
    return true;
  });
  EXPECT_EQ(seen, "\xEF\xBF\xBD");
}

TEST(Session, LogprobsOfRawLogits) {
  FakeModel m(16, test::count_up);
  FakeText t;
  Session s(m, t, 64);
  GenerateOptions o;
  o.max_tokens = 1;
  o.n_top_logprobs = 3;
  std::vector<TokenLogprob> top;
  float lp = 0;
  const std::vector<int32_t> prompt = {2};
  s.generate(prompt, o, [&](const TokenEvent& e) {
    top.assign(e.top.begin(), e.top.end());
    lp = e.logprob;
    return true;
  });
  // One logit 10 (id 3) and fifteen 0s: log p(3) = 10 - log(e^10 + 15), others -log(e^10 + 15).
  const double z = std::log(std::exp(10.0) + 15.0);
  EXPECT_NEAR(lp, 10.0 - z, 1e-5);
  ASSERT_EQ(top.size(), 3u);
  EXPECT_EQ(top[0].id, 3);
  EXPECT_NEAR(top[0].logprob, 10.0 - z, 1e-5);
  EXPECT_EQ(top[1].id, 0);  // ties → smallest ids
  EXPECT_EQ(top[2].id, 1);
  EXPECT_NEAR(top[1].logprob, -z, 1e-5);
}

TEST(Session, CancellationByFlagAndCallback) {
  FakeModel m(16, test::count_up);
  FakeText t;
  Session s(m, t, 64);
  volatile int flag = 1;
  GenerateOptions o;
  o.cancel = &flag;
  const std::vector<int32_t> prompt = {0};
  auto r = s.generate(prompt, o, nullptr);
  EXPECT_EQ(r.stop, StopReason::kCancelled);
  EXPECT_EQ(r.n_generated, 0);

  s.reset();
  GenerateOptions o2;
  int n = 0;
  auto r2 = s.generate(prompt, o2, [&](const TokenEvent&) { return ++n < 2; });
  EXPECT_EQ(r2.stop, StopReason::kCancelled);
  EXPECT_EQ(ids_of(r2), (std::vector<int32_t>{1, 2}));
}

TEST(Session, SeededSamplingIsDeterministic) {
  FakeModel m(16, test::count_up);
  m.flat = true;
  FakeText t;
  GenerateOptions o;
  o.max_tokens = 40;
  o.ignore_eog = true;
  o.sampling = SamplingParams{};
  o.sampling.temperature = 1.0f;
  o.sampling.top_k = 0;
  o.sampling.top_p = 1.0f;
  o.sampling.min_p = 0.0f;
  o.sampling.seed = 77;
  const std::vector<int32_t> prompt = {0};
  Session a(m, t, 64), b(m, t, 64);
  auto ra = a.generate(prompt, o, nullptr);
  auto rb = b.generate(prompt, o, nullptr);
  EXPECT_EQ(ra.generated, rb.generated);
  // 40 draws from 16 equally likely ids: the chance they are all equal is 16^-39.
  bool varied = false;
  for (auto id : ra.generated) varied |= id != ra.generated[0];
  EXPECT_TRUE(varied);
  o.sampling.seed = 78;
  Session c(m, t, 64);
  EXPECT_NE(c.generate(prompt, o, nullptr).generated, ra.generated);
}

TEST(Session, PenaltiesSeeThePrompt) {
  // Greedy with a presence penalty of 20 over the whole history: the prompt 0 1 makes the
  // model's favourite 2 (logit 10 → -10) lose to the untouched zeros; the smallest unseen id wins.
  FakeModel m(16, [](const std::vector<int32_t>&) { return 2; });
  FakeText t;
  Session s(m, t, 64);
  GenerateOptions o;
  o.max_tokens = 1;
  o.sampling.presence_penalty = 20.0f;
  o.sampling.penalty_last_n = -1;
  const std::vector<int32_t> prompt = {2, 0};
  auto r = s.generate(prompt, o, nullptr);
  // 2 → 10/1 - 20 = -10; 0 → 0 - 20 = -20; unseen 1 keeps 0 and wins.
  EXPECT_EQ(ids_of(r), (std::vector<int32_t>{1}));
}

TEST(Session, ModelFailureClearsTheState) {
  FakeModel m(16, test::count_up);
  FakeText t;
  Session s(m, t, 64);
  m.fail_after = 4;
  const std::vector<int32_t> prompt = {0, 1};
  // Decode fails when the 5th token would be fed: the error comes out, the session is emptied.
  try {
    s.generate(prompt, GenerateOptions{}, nullptr);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kInternal);
  }
  EXPECT_EQ(s.n_past(), 0);
  EXPECT_TRUE(s.tokens().empty());
  m.fail_after = -1;
  GenerateOptions o;
  o.max_tokens = 2;
  EXPECT_EQ(s.generate(prompt, o, nullptr).generated, (std::vector<int32_t>{2, 3}));
}

TEST(Session, SnapshotRestoreAndPrefixReuse) {
  FakeModel m(16, test::count_up);
  FakeText t;
  Session s(m, t, 64);
  const std::vector<int32_t> a = {0, 1, 2};
  s.prefill(a);
  s.checkpoint();
  GenerateOptions o;
  o.max_tokens = 3;
  const std::vector<int32_t> b = {5};
  s.generate(b, o, nullptr);
  EXPECT_EQ(s.tokens(), (std::vector<int32_t>{0, 1, 2, 5, 6, 7}));

  // Current tokens are a prefix: nothing recomputed.
  const std::vector<int32_t> longer = {0, 1, 2, 5, 6, 7, 8, 9};
  EXPECT_EQ(s.reuse_prefix(longer, longer.size() - 1), 6u);
  // Diverging after the checkpoint: back to the checkpoint.
  const std::vector<int32_t> other = {0, 1, 2, 4, 4};
  EXPECT_EQ(s.reuse_prefix(other, other.size() - 1), 3u);
  EXPECT_EQ(s.tokens(), (std::vector<int32_t>{0, 1, 2}));
  EXPECT_EQ(s.n_past(), 3);
  // Diverging before it: start over.
  const std::vector<int32_t> fresh = {1, 1};
  EXPECT_EQ(s.reuse_prefix(fresh, fresh.size() - 1), 0u);
  EXPECT_EQ(s.n_past(), 0);

  // Snapshot round trip.
  s.prefill(a);
  auto snap = s.snapshot();
  s.reset();
  s.restore(snap);
  EXPECT_EQ(s.tokens(), a);
  EXPECT_EQ(s.n_past(), 3);
  // Generation continues from the restored state (needs a new token to get logits).
  const std::vector<int32_t> c = {3};
  o.max_tokens = 2;
  EXPECT_EQ(s.generate(c, o, nullptr).generated, (std::vector<int32_t>{4, 5}));
}

}  // namespace
}  // namespace oxi
