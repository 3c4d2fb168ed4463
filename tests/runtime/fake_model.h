// A tiny scripted Model + TokenText for runtime and API tests: the next token is a function of the
// sequence so far, given logit 10 (every other id 0). Expected outputs in the tests are derived
// from that rule by hand.
#pragma once

#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "core/error.h"
#include "models/model.h"
#include "runtime/session.h"

namespace oxi::test {

class FakeState : public SequenceState {
 public:
  explicit FakeState(int64_t n_ctx) : n_ctx_(n_ctx) {}
  int64_t n_past() const override { return static_cast<int64_t>(seq.size()); }
  int64_t n_ctx() const override { return n_ctx_; }
  void clear() override { seq.clear(); }
  void truncate(int64_t n) override {
    if (n < 0 || n > n_past()) throw_error(ErrorCode::kInvalidArgument, "fake: bad truncate");
    seq.resize(static_cast<size_t>(n));
  }
  std::vector<uint8_t> snapshot() const override {
    std::vector<uint8_t> b(seq.size() * 4);
    if (!seq.empty()) std::memcpy(b.data(), seq.data(), b.size());
    return b;
  }
  void restore(std::span<const uint8_t> bytes) override {
    seq.resize(bytes.size() / 4);
    if (!seq.empty()) std::memcpy(seq.data(), bytes.data(), bytes.size());
  }
  std::vector<int32_t> seq;

 private:
  int64_t n_ctx_;
};

class FakeModel : public Model {
 public:
  using NextFn = std::function<int32_t(const std::vector<int32_t>&)>;
  FakeModel(int64_t n_vocab, NextFn next) : next_(std::move(next)) {
    info_.arch = "fake";
    info_.name = "fake";
    info_.n_vocab = n_vocab;
    info_.n_ctx_train = 4096;
  }
  const ModelInfo& info() const override { return info_; }
  std::unique_ptr<SequenceState> new_state(int64_t n_ctx, int64_t /*rollback*/) const override {
    return std::make_unique<FakeState>(n_ctx);
  }

 protected:
  void run(std::span<SequenceState* const> states, const Pass& p, const BatchOutput& out) const override {
    size_t next_out = 0;
    float* logits = out.logits;
    for (const Segment& g : p.segs) {
      auto& st = static_cast<FakeState&>(*states[static_cast<size_t>(g.state)]);
      if (fail_after >= 0 && st.n_past() + g.n > fail_after) {
        st.seq.push_back(-1);  // leave the state damaged, as a real failure might
        throw_error(ErrorCode::kInternal, "fake: forward failed");
      }
      calls.push_back(static_cast<size_t>(g.n));
      for (int64_t i = 0; i < g.n; ++i) {
        st.seq.push_back(p.token_at(g.row0 + i));
        if (next_out < p.out_rows.size() && p.out_rows[next_out] == g.row0 + i) {
          ++next_out;
          if (!logits) continue;
          float* row = logits;
          logits += info_.n_vocab;
          for (int64_t v = 0; v < info_.n_vocab; ++v) row[v] = 0.0f;
          if (soft) {
            soft(st.seq, row);
            continue;
          }
          if (flat) continue;
          const int32_t nx = next_(st.seq);
          if (nx >= 0 && nx < info_.n_vocab) row[nx] = 10.0f;
        }
      }
    }
  }

 public:
  mutable std::vector<size_t> calls;  // sizes of forward() batches
  bool flat = false;                  // all logits equal
  // When set, writes the whole logit row for a sequence (instead of the one-hot next token).
  std::function<void(const std::vector<int32_t>&, float*)> soft;
  int64_t fail_after = -1;            // forward() throws once the sequence would pass this length

 private:
  ModelInfo info_;
  NextFn next_;
};

// ids 0..9 → "a".."j"; 10 → E2 82 and 11 → AC (together "€"); 12 → lone F0; 13, 14 end of
// generation; 15 → "\n".
class FakeText : public TokenText {
 public:
  int64_t vocab_size() const override { return 16; }
  bool is_eog(int32_t id) const override { return id == 13 || id == 14; }
  static std::string piece(int32_t id) {
    if (id >= 0 && id < 10) return std::string(1, static_cast<char>('a' + id));
    if (id == 10) return "\xE2\x82";
    if (id == 11) return "\xAC";
    if (id == 12) return "\xF0";
    if (id == 15) return "\n";
    return "";
  }
  std::unique_ptr<TextStream> new_stream() const override {
    return std::make_unique<Utf8TextStream>(&FakeText::piece);
  }
};

// Next = last + 1 for ids below 8; after 8 comes 13 (end of generation); otherwise 0.
inline int32_t count_up(const std::vector<int32_t>& seq) {
  const int32_t last = seq.back();
  if (last < 8) return last + 1;
  if (last == 8) return 13;
  return 0;
}

}  // namespace oxi::test
