// oxinfer bench's speculative-decoding tests (docs/speculative.md):
//   vK           the cost of one verify step of K positions: from a state holding 64 fixed ids, n
//                steps of one forward call of K tokens (logits for all K), each followed by a
//                truncate that keeps one of them (every draft rejected: the state advances one
//                token per step, as decoding does). K = 1 is a plain decode step.
//   tgN MODE     N tokens generated through the runtime (Session, greedy) after a 32-id prompt,
//                with speculation MODE: none, ngram (prompt lookup), replay (drafts the plain
//                run's own continuation: acceptance 100 %, the ceiling).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "models/model.h"

namespace oxi::cli {

// Fixed pseudo-random ids in [0, n_vocab) (64-bit LCG, high bits): every bench test's input.
std::vector<int32_t> token_ids(int64_t n, int64_t n_vocab, uint64_t seed);

// Seconds for n verify steps of K positions (state cleared and prefilled first, not timed).
double bench_verify_steps(const Model& model, SequenceState& state, int64_t k, int64_t n);

struct SpecRun {
  double seconds = 0;
  int32_t drafted = 0, accepted = 0;
};

// tgN MODE runs; one per (mode, n) call, each from a fresh sequence.
class SpecBench {
 public:
  SpecBench(const Model& model, int64_t n_ctx, int32_t draft_max);
  ~SpecBench();
  SpecRun run(const std::string& mode, int64_t n_gen);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace oxi::cli
