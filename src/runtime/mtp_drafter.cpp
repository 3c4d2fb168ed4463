#include "runtime/mtp_drafter.h"

#include "sampling/sampler.h"

#include <algorithm>

namespace oxi {

MtpDrafter::MtpDrafter(const Model& m, int64_t n_ctx, const SequenceState& trunk, Batcher* batcher)
    : m_(m), batcher_(batcher), st_(m.new_mtp_state_for(n_ctx, trunk)) {
  logits_.resize(static_cast<size_t>(m.info().n_vocab));
  h_.resize(static_cast<size_t>(m.info().n_embd));
}

void MtpDrafter::feed(const float* hidden, const int32_t* tokens, int64_t n, float* logits, float* hidden_out) {
  if (batcher_) batcher_->mtp_forward(*st_, hidden, tokens, n, logits, hidden_out);
  else m_.mtp_forward(*st_, hidden, tokens, n, logits, hidden_out);
}

int64_t MtpDrafter::fed() const { return st_->n_past(); }

void MtpDrafter::truncate(int64_t n) {
  if (n < st_->n_past()) st_->truncate(std::max<int64_t>(n, 0));
}

std::vector<uint8_t> MtpDrafter::snapshot() const { return st_->snapshot(); }

void MtpDrafter::restore(std::span<const uint8_t> bytes) { st_->restore(bytes); }

bool MtpDrafter::propose(std::span<const int32_t> history, const float* hidden, int64_t first, int64_t hidden_rows,
                         int32_t k, std::vector<int32_t>& out) {
  out.clear();
  const int64_t n = static_cast<int64_t>(history.size()) - 1, d = m_.info().n_embd;
  if (n < 1 || hidden_rows < n || st_->n_past() > n || first > st_->n_past()) return false;
  // Pending pairs: positions [m, n), each with the token that followed it.
  const int64_t m = st_->n_past(), np = n - m;
  if (np == 0) return false;  // nothing new since the last call: cannot happen in a session
  const bool want = k > 0 && n + k < st_->n_ctx();
  feed(hidden + (m - first) * d, history.data() + m + 1, np, want ? logits_.data() : nullptr, want ? h_.data() : nullptr);
  if (!want) return true;
  for (int32_t j = 0; j < k; ++j) {
    const int32_t draft = argmax(logits_);
    out.push_back(draft);
    if (j + 1 == k) break;
    feed(h_.data(), &draft, 1, logits_.data(), h_.data());
  }
  st_->truncate(n);  // the chained entries predicted their h: drop them
  return true;
}

}  // namespace oxi
