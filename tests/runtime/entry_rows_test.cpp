// Prompt entries that are not plain tokens (images, runtime/session.h EntryRows): the rows and
// the explicit mRoPE positions reach the model as given, with and without the continuous
// batcher, and the tokens after them continue at the last position + 1 (not the cache position),
// snapshots included. Expected values by hand from the Qwen3-VL rule.
#include <gtest/gtest.h>

#include <array>
#include <map>
#include <thread>

#include "fake_model.h"
#include "runtime/batcher.h"
#include "runtime/session.h"

namespace oxi {
namespace {

// Records every entry it is fed (id, (t, h, w), first embedding value); always predicts token 5.
class RecordingModel : public Model {
 public:
  RecordingModel() {
    info_.arch = "fake";
    info_.n_vocab = 16;
    info_.n_embd = 2;
    info_.n_ctx_train = 4096;
  }
  const ModelInfo& info() const override { return info_; }
  std::unique_ptr<SequenceState> new_state(int64_t n_ctx, int64_t) const override {
    return std::make_unique<test::FakeState>(n_ctx);
  }
  struct Entry {
    int32_t id;
    std::array<int32_t, 3> pos;
    float e0;
    bool operator==(const Entry&) const = default;
  };
  mutable std::vector<Entry> seen;
  mutable std::map<const SequenceState*, std::vector<Entry>> by_state;  // the same, per sequence

 protected:
  void run(std::span<SequenceState* const> states, const Pass& p, const BatchOutput& out) const override {
    size_t next_out = 0;
    float* logits = out.logits;
    for (const Segment& g : p.segs) {
      auto& st = static_cast<test::FakeState&>(*states[static_cast<size_t>(g.state)]);
      for (int64_t r = g.row0; r < g.row0 + g.n; ++r) {
        const int32_t id = p.token_at(r);
        const std::array<int32_t, 3> pos = p.pos3 ? std::array<int32_t, 3>{p.pos3[3 * r], p.pos3[3 * r + 1], p.pos3[3 * r + 2]}
                                                  : std::array<int32_t, 3>{p.pos[r], p.pos[r], p.pos[r]};
        seen.push_back({id, pos, id < 0 ? p.embd[r * 2] : 0.0f});
        by_state[&st].push_back(seen.back());
        st.seq.push_back(id);
        if (next_out < p.out_rows.size() && p.out_rows[next_out] == r) {
          ++next_out;
          if (!logits) continue;
          std::fill(logits, logits + info_.n_vocab, 0.0f);
          logits[5] = 10.0f;
          logits += info_.n_vocab;
        }
      }
    }
  }

 private:
  ModelInfo info_;
};

using Entry = RecordingModel::Entry;

// Text 1 at 0; a 3 × 2 image (6 rows, id −7) at 1: row k at (1, 1 + k / 3, 1 + k % 3), rows
// valued 100 + k; text 2 resumes at 1 + max(3, 2) = 4.
struct ImagePrompt {
  std::vector<int32_t> ids{1, -7, -7, -7, -7, -7, -7, 2};
  std::vector<float> embd = std::vector<float>(16, 0.0f);
  std::vector<int32_t> pos3{0, 0, 0};
  ImagePrompt() {
    for (int k = 0; k < 6; ++k) {
      embd[static_cast<size_t>(2 * (k + 1))] = 100.0f + static_cast<float>(k);
      pos3.insert(pos3.end(), {1, 1 + k / 3, 1 + k % 3});
    }
    pos3.insert(pos3.end(), {4, 4, 4});
  }
  std::vector<Entry> expected() const {
    std::vector<Entry> e{{1, {0, 0, 0}, 0}};
    for (int k = 0; k < 6; ++k) e.push_back({-7, {1, 1 + k / 3, 1 + k % 3}, 100.0f + static_cast<float>(k)});
    e.push_back({2, {4, 4, 4}, 0});
    return e;
  }
};

TEST(EntryRows, ImageRowsAndPositionsReachTheModel) {
  RecordingModel m;
  test::FakeText t;
  const ImagePrompt ip;
  Session s(m, t, 64);
  GenerateOptions o;
  o.max_tokens = 3;
  const auto r = s.generate(ip.ids, o, nullptr, EntryRows{ip.embd.data(), ip.pos3.data()});
  EXPECT_EQ(r.generated, (std::vector<int32_t>{5, 5, 5}));
  std::vector<Entry> want = ip.expected();
  // The two fed generated tokens: cache positions 8 and 9, RoPE positions 5 and 6.
  want.push_back({5, {5, 5, 5}, 0});
  want.push_back({5, {6, 6, 6}, 0});
  EXPECT_EQ(m.seen, want);
  EXPECT_EQ(s.tokens(), (std::vector<int32_t>{1, -7, -7, -7, -7, -7, -7, 2, 5, 5}));
}

TEST(EntryRows, ThroughTheBatcher) {
  RecordingModel m;
  Batcher bm(m);
  test::FakeText t;
  const ImagePrompt ip;
  Session s(m, t, 64, &bm);
  Batcher::Participant part(&bm);
  GenerateOptions o;
  o.max_tokens = 2;
  s.generate(ip.ids, o, nullptr, EntryRows{ip.embd.data(), ip.pos3.data()});
  std::vector<Entry> want = ip.expected();
  want.push_back({5, {5, 5, 5}, 0});
  EXPECT_EQ(m.seen, want);
}

// A session with an image and a plain one decode together: the pass carries rows and positions
// for both (cache positions for the plain one), and each gets what it gets alone.
TEST(EntryRows, MixedWithAPlainSequenceInOnePass) {
  RecordingModel m;
  Batcher b(m);
  b.gather_wait = std::chrono::milliseconds(50);
  test::FakeText t;
  const ImagePrompt ip;
  Session img(m, t, 64, &b), plain(m, t, 64, &b);
  {
    auto pi = std::make_unique<Batcher::Participant>(&b), pp = std::make_unique<Batcher::Participant>(&b);
    GenerateOptions o;
    o.max_tokens = 4;
    std::thread ti([&] {
      img.generate(ip.ids, o, nullptr, EntryRows{ip.embd.data(), ip.pos3.data()});
      pi.reset();
    });
    std::thread tp([&] {
      plain.generate(std::vector<int32_t>{4, 4, 4}, o, nullptr);
      pp.reset();
    });
    ti.join();
    tp.join();
  }
  EXPECT_LT(b.passes(), 8u) << "the two sequences shared passes";  // 4 + 4 submissions
  std::vector<Entry> want_img = ip.expected(), want_plain;
  for (int k = 0; k < 3; ++k) want_img.push_back({5, {5 + k, 5 + k, 5 + k}, 0});
  for (int k = 0; k < 3; ++k) want_plain.push_back({4, {k, k, k}, 0});
  for (int k = 0; k < 3; ++k) want_plain.push_back({5, {3 + k, 3 + k, 3 + k}, 0});
  ASSERT_EQ(m.by_state.size(), 2u);
  for (const auto& [st, got] : m.by_state) EXPECT_EQ(got, got.front().id == 1 ? want_img : want_plain);
}

TEST(EntryRows, SnapshotKeepsThePositionOffset) {
  RecordingModel m;
  test::FakeText t;
  const ImagePrompt ip;
  Session a(m, t, 64);
  a.prefill(ip.ids, {}, EntryRows{ip.embd.data(), ip.pos3.data()});
  const Session::Snapshot snap = a.snapshot();
  Session b(m, t, 64);
  b.restore(snap);
  m.seen.clear();
  GenerateOptions o;
  o.max_tokens = 1;
  b.generate(std::vector<int32_t>{3}, o, nullptr);  // plain text after the image: position 4 + 1
  EXPECT_EQ(m.seen, (std::vector<Entry>{{3, {5, 5, 5}, 0}}));
  b.reset();  // an empty sequence: cache positions again
  m.seen.clear();
  b.generate(std::vector<int32_t>{3}, o, nullptr);
  EXPECT_EQ(m.seen, (std::vector<Entry>{{3, {0, 0, 0}, 0}}));
}

TEST(EntryRows, NegativeIdsNeedRows) {
  RecordingModel m;
  test::FakeText t;
  Session s(m, t, 64);
  EXPECT_THROW(s.prefill(std::vector<int32_t>{1, -7}), Error);
}

}  // namespace
}  // namespace oxi
