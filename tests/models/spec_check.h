// Speculative decoding on a real model (shared by the family tests): greedy runs with drafts that
// are all accepted (the plain run's own continuation), all rejected (every draft wrong), mixed
// (every third wrong), and prompt-lookup drafts, each against the plain greedy run token for token.
// Verify steps never exceed Model::exact_batch_tokens() (none when it is 1).
#pragma once

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "models/model.h"
#include "runtime/session.h"
#include "runtime/speculative.h"

namespace spectest {

// Every id samplable, none ends the generation, no text (ids are compared).
class IdsOnly : public oxi::TokenText {
 public:
  explicit IdsOnly(int64_t n) : n_(n) {}
  int64_t vocab_size() const override { return n_; }
  bool is_eog(int32_t) const override { return false; }
  std::unique_ptr<oxi::TextStream> new_stream() const override {
    return std::make_unique<oxi::Utf8TextStream>([](int32_t) { return std::string(); });
  }

 private:
  int64_t n_;
};

inline oxi::GenerateResult greedy(const oxi::Model& m, const std::vector<int32_t>& prompt, int n, const oxi::SpecOptions& spec) {
  IdsOnly text(m.info().n_vocab);
  oxi::Session s(m, text, 256, nullptr, spec.mode == oxi::SpecMode::kNone ? 0 : 16);
  oxi::GenerateOptions o;
  o.max_tokens = n;
  o.spec = spec;
  return s.generate(prompt, o, nullptr);
}

// Returns a description of the first mode whose tokens differ from the plain run ("" if none).
inline std::string spec_vs_plain(const oxi::Model& m, const std::vector<int32_t>& prompt, int n) {
  const oxi::GenerateResult plain = greedy(m, prompt, n, {});
  const int64_t V = m.info().n_vocab;
  for (int corrupt : {0, 1, 3}) {
    for (int32_t k : {1, 3, 8}) {
      oxi::ReplayDrafter d(plain.generated, prompt.size(), corrupt, V);
      oxi::SpecOptions spec;
      spec.mode = oxi::SpecMode::kAuto;
      spec.adaptive = false;
      spec.draft_max = k;
      spec.drafter = &d;
      const oxi::GenerateResult r = greedy(m, prompt, n, spec);
      const std::string what = "replay corrupt_every " + std::to_string(corrupt) + " k " + std::to_string(k);
      if (r.generated != plain.generated) return what;
      // A model whose multi-token calls do not score like decoding never verifies drafts.
      if (m.exact_batch_tokens() <= 1) {
        if (r.n_drafted != 0) return what + ": drafted on a model without exact verify steps";
        continue;
      }
      if (r.n_drafted == 0) return what + ": nothing drafted";
      if (corrupt == 0 && r.n_accepted != r.n_drafted) return what + ": correct drafts rejected";
      if (corrupt == 1 && r.n_accepted != 0) return what + ": wrong drafts accepted";
    }
  }
  oxi::SpecOptions ngram;
  ngram.mode = oxi::SpecMode::kNgram;
  ngram.adaptive = false;
  if (greedy(m, prompt, n, ngram).generated != plain.generated) return "ngram";
  if (m.has_mtp()) {
    // The model's own head answers 'mtp', a draft model beside it (Gemma 4's assistant) 'draft'.
    const oxi::SpecMode head = m.mtp_is_draft_model() ? oxi::SpecMode::kDraft : oxi::SpecMode::kMtp;
    for (int32_t k : {1, 3, 8}) {
      oxi::SpecOptions mtp;
      mtp.mode = head;
      mtp.adaptive = false;  // verify every draft the head makes
      mtp.draft_max = k;
      const oxi::GenerateResult r = greedy(m, prompt, n, mtp);
      if (r.generated != plain.generated) return "mtp k " + std::to_string(k);
      if (m.exact_batch_tokens() > 1 && r.n_drafted == 0) return "mtp k " + std::to_string(k) + ": nothing drafted";
    }
    // auto on a model with a head drafts with it (draft_min 1: whenever the tuner allows any),
    // the head catching up on the positions it skipped while drafting was off.
    oxi::SpecOptions au;
    au.mode = oxi::SpecMode::kAuto;
    au.draft_max = 4;
    au.draft_min = 1;
    const oxi::GenerateResult r = greedy(m, prompt, n, au);
    if (r.generated != plain.generated) return "auto (mtp)";
    if (m.exact_batch_tokens() > 1 && r.n_drafted == 0) return "auto (mtp): nothing drafted";
  }
  return "";
}

}  // namespace spectest
