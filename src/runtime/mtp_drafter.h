// Drafting with a model's MTP head (Qwen 3.5/3.6; Model::mtp_forward). The head predicts the token
// after next from the trunk's final normed hidden state h_p of a position and the token x_{p+1}
// that followed it; its own attention cache holds one entry per such pair, at position p.
//
// The session keeps the trunk's hidden rows of every consumed position (BatchOutput::hidden_all).
// At each step, with the token `id` just sampled (to be fed at position n = the trunk's n_past),
// propose() first feeds the pairs the head has not seen, (h_p, x_{p+1}) for p up to n − 1 (the
// last one pairs h_{n−1} with id), then chains: draft 1 = argmax of the last pair's logits; draft
// j + 1 from (the head's own output hidden state, draft j) at position n + j − 1. The chained
// entries are dropped again (their h is a prediction), so the head's cache only ever holds pairs
// of the real sequence. Drafts are a deterministic function of the history, as the acceptance rule
// needs (docs/speculative.md).
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "models/model.h"
#include "runtime/batcher.h"

namespace oxi {

class MtpDrafter {
 public:
  // trunk: the sequence's own state (a draft model such as Gemma 4's assistant reads its cache).
  // batcher: when set, the head's passes go through it (shared with the other sessions' drafts).
  MtpDrafter(const Model& m, int64_t n_ctx, const SequenceState& trunk, Batcher* batcher = nullptr);

  // history: the consumed tokens then `id` (history.size() − 1 = the trunk's n_past = n); hidden:
  // the trunk's rows of positions [first, hidden_rows) (first ≤ fed(): rows the head has taken in
  // need not be kept) — drafting needs hidden_rows ≥ n. Appends at most k drafts to out (cleared
  // first); with k = 0 it only feeds the pending pairs (no output head product). Returns false
  // when it could not run (hidden rows missing: the session lost them in a restore, or they were
  // never kept).
  bool propose(std::span<const int32_t> history, const float* hidden, int64_t first, int64_t hidden_rows, int32_t k,
               std::vector<int32_t>& out);
  // Positions whose pair the head has taken in: [0, fed()). The rest wait for the next propose,
  // which feeds them all in one pass (a session that skips drafting calls it only to draft again).
  int64_t fed() const;
  // The trunk went back to n tokens (or was emptied: n = 0).
  void truncate(int64_t n);
  // The head's state (its cache of pairs), for a session snapshot, and back.
  std::vector<uint8_t> snapshot() const;
  void restore(std::span<const uint8_t> bytes);

 private:
  // One pass of the head, through the batcher when there is one.
  void feed(const float* hidden, const int32_t* tokens, int64_t n, float* logits, float* hidden_out);

  const Model& m_;
  Batcher* batcher_;
  std::unique_ptr<SequenceState> st_;  // pairs (h_p, x_{p+1}) for p < st_->n_past()
  std::vector<float> logits_, h_;
};

}  // namespace oxi
