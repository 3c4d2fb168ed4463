// Checks of the batched model interface shared by the family tests: several sequences in one
// forward call against each sequence alone; truncate() against never having fed the dropped
// tokens; embedding-row input and hidden-state output against their definitions.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <vector>

#include "models/model.h"

namespace batchtest {

inline double max_abs_diff(const float* a, const float* b, size_t n) {
  double m = 0;
  for (size_t i = 0; i < n; ++i) m = std::max(m, static_cast<double>(std::fabs(a[i] - b[i])));
  return m;
}

inline std::vector<int32_t> ids(int64_t n, int64_t vocab, uint32_t seed) {
  std::vector<int32_t> t(static_cast<size_t>(n));
  uint32_t x = seed * 2654435761u + 1;
  for (auto& v : t) {
    x = x * 1664525u + 1013904223u;
    v = static_cast<int32_t>((x >> 8) % static_cast<uint32_t>(vocab));
  }
  return t;
}

struct BatchDiff {
  double prefill = 0, decode = 0, scale = 0;  // max |together − alone|; max |logit| seen
};

// Sequences with the given prompts, alone (one state each, one call per step) and together (one
// call per step for all of them: the prompts in one batch, then one token each per decode step).
inline BatchDiff batch_vs_alone(const oxi::Model& m, const std::vector<std::vector<int32_t>>& prompts, int steps) {
  const int64_t V = m.info().n_vocab;
  const size_t S = prompts.size();
  std::vector<std::vector<float>> alone(S);  // per sequence: (1 + steps) rows of logits
  for (size_t s = 0; s < S; ++s) {
    auto st = m.new_state(256);
    alone[s].resize(static_cast<size_t>((1 + steps) * V));
    m.forward(*st, prompts[s], alone[s].data(), false);
    for (int k = 0; k < steps; ++k) {
      const int32_t t = static_cast<int32_t>((s * 7 + static_cast<size_t>(k) * 13 + 5) % static_cast<size_t>(V));
      m.forward(*st, std::span<const int32_t>(&t, 1), alone[s].data() + (k + 1) * V, false);
    }
  }
  std::vector<std::unique_ptr<oxi::SequenceState>> owned;
  std::vector<oxi::SequenceState*> sts;
  for (size_t s = 0; s < S; ++s) {
    owned.push_back(m.new_state(256));
    sts.push_back(owned.back().get());
  }
  BatchDiff r;
  std::vector<int32_t> tok, seq;
  for (size_t s = 0; s < S; ++s)
    for (int32_t t : prompts[s]) {
      tok.push_back(t);
      seq.push_back(static_cast<int32_t>(s));
    }
  std::vector<float> lg(S * static_cast<size_t>(V));
  oxi::Batch b;
  b.n = static_cast<int64_t>(tok.size());
  b.token = tok.data();
  b.seq = seq.data();
  m.forward_batch(sts, b, oxi::BatchOutput{lg.data(), nullptr});
  for (size_t s = 0; s < S; ++s) {
    r.prefill = std::max(r.prefill, max_abs_diff(lg.data() + s * V, alone[s].data(), static_cast<size_t>(V)));
    for (int64_t v = 0; v < V; ++v) r.scale = std::max(r.scale, static_cast<double>(std::fabs(alone[s][static_cast<size_t>(v)])));
  }
  for (int k = 0; k < steps; ++k) {
    tok.clear();
    seq.clear();
    for (size_t s = 0; s < S; ++s) {
      tok.push_back(static_cast<int32_t>((s * 7 + static_cast<size_t>(k) * 13 + 5) % static_cast<size_t>(V)));
      seq.push_back(static_cast<int32_t>(s));
    }
    b.n = static_cast<int64_t>(S);
    b.token = tok.data();
    b.seq = seq.data();
    m.forward_batch(sts, b, oxi::BatchOutput{lg.data(), nullptr});
    for (size_t s = 0; s < S; ++s)
      r.decode = std::max(r.decode, max_abs_diff(lg.data() + s * V, alone[s].data() + (k + 1) * V, static_cast<size_t>(V)));
  }
  return r;
}

// Feeds prompt, then `draft` in one call on a state with rollback room, truncates to keep
// `keep` draft tokens, feeds `next`; returns max |logits − those of a state that was fed prompt,
// draft[0..keep) one token at a time and then next|.
inline double truncate_vs_fresh(const oxi::Model& m, const std::vector<int32_t>& prompt, const std::vector<int32_t>& draft,
                                int64_t keep, int32_t next) {
  const int64_t V = m.info().n_vocab;
  std::vector<float> a(static_cast<size_t>(V)), b(static_cast<size_t>(V));
  std::vector<float> all(draft.size() * static_cast<size_t>(V));
  auto st = m.new_state(256, static_cast<int64_t>(draft.size()));
  m.forward(*st, prompt, a.data(), false);
  m.forward(*st, draft, all.data(), true);
  st->truncate(static_cast<int64_t>(prompt.size()) + keep);
  EXPECT_EQ(st->n_past(), static_cast<int64_t>(prompt.size()) + keep);
  m.forward(*st, std::span<const int32_t>(&next, 1), a.data(), false);
  auto ref = m.new_state(256);
  m.forward(*ref, prompt, b.data(), false);
  for (int64_t i = 0; i < keep; ++i) m.forward(*ref, std::span<const int32_t>(&draft[static_cast<size_t>(i)], 1), b.data(), false);
  m.forward(*ref, std::span<const int32_t>(&next, 1), b.data(), false);
  return max_abs_diff(a.data(), b.data(), static_cast<size_t>(V));
}

// Max |Δlogit| between feeding `toks` in one call (all logits, to a state with rollback room for
// them, as a speculative verify step) and one call per token, after the same prefix.
inline double multi_vs_single(const oxi::Model& m, const std::vector<int32_t>& prefix, const std::vector<int32_t>& toks) {
  const int64_t V = m.info().n_vocab, K = static_cast<int64_t>(toks.size());
  auto a = m.new_state(256, K + 1), b = m.new_state(256);
  std::vector<float> la(static_cast<size_t>(V * K)), lb(la.size()), tmp(static_cast<size_t>(V));
  m.forward(*a, prefix, tmp.data(), false);
  m.forward(*b, prefix, tmp.data(), false);
  m.forward(*a, toks, la.data(), true);
  for (int64_t i = 0; i < K; ++i) m.forward(*b, std::vector<int32_t>{toks[static_cast<size_t>(i)]}, lb.data() + i * V, false);
  return max_abs_diff(la.data(), lb.data(), la.size());
}

}  // namespace batchtest
