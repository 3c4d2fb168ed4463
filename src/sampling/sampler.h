// Token sampling, modelled on llama.cpp's default sampler chain:
//   penalties (repeat / presence / frequency over the last N tokens)
//   → top-k → top-p → min-p → temperature → random draw (seeded)
// with temperature <= 0 meaning greedy (argmax after penalties; ties → smallest id, like the
// oracle). Every transform is also a free function on a candidate list so it can be tested alone.
// Log-probabilities reported to users are the natural log-softmax of the *raw* logits, before any
// of these transforms.
#pragma once

#include <cstdint>
#include <random>
#include <span>
#include <string>
#include <vector>

namespace oxi {

// Seed value meaning "pick a random seed" (llama.cpp's LLAMA_DEFAULT_SEED plays the same role).
inline constexpr uint64_t kRandomSeed = ~uint64_t{0};

struct SamplingParams {
  // Defaults are llama.cpp's common defaults (common_params_sampling).
  float temperature = 0.8f;       // <= 0: greedy
  int32_t top_k = 40;             // <= 0: off
  float top_p = 0.95f;            // >= 1: off
  float min_p = 0.05f;            // <= 0: off
  float repeat_penalty = 1.0f;    // 1: off
  float presence_penalty = 0.0f;  // 0: off
  float frequency_penalty = 0.0f; // 0: off
  int32_t penalty_last_n = 64;    // window of past tokens; 0: off, -1: whole history
  uint64_t seed = kRandomSeed;

  static SamplingParams greedy();
  bool is_greedy() const { return !(temperature > 0.0f); }
  bool has_penalties() const {
    return penalty_last_n != 0 &&
           (repeat_penalty != 1.0f || presence_penalty != 0.0f || frequency_penalty != 0.0f);
  }
  // Throws oxi::Error(kInvalidArgument) naming the bad field (NaN, negative top_p, …).
  void validate() const;
};

struct Candidate {
  int32_t id;
  float logit;
};

// ---- transforms on a candidate list (each keeps at least one candidate) --------------------
// llama.cpp's penalty rule: for a token seen c > 0 times in the window,
//   logit = logit > 0 ? logit / repeat : logit * repeat;  logit -= c * frequency + presence.
// `counts` maps id → occurrences (indexed by id, ids beyond its size count 0).
void apply_penalties(std::vector<Candidate>& c, std::span<const int32_t> counts, float repeat,
                     float presence, float frequency);
// Sorts by logit (descending, ties by smaller id) and keeps the k best; k <= 0 is a no-op.
void apply_top_k(std::vector<Candidate>& c, int32_t k);
// Keeps the smallest prefix (sorted by probability) whose probability mass reaches p, including
// the token that crosses p. p >= 1 is a no-op. The kept tokens' order is unspecified (but
// deterministic); found by selection, not a full sort.
void apply_top_p(std::vector<Candidate>& c, float p);
// Keeps tokens with prob >= p * max prob (logit >= max + log p). p <= 0 is a no-op.
void apply_min_p(std::vector<Candidate>& c, float p);
// Divides logits by t (t > 0).
void apply_temperature(std::vector<Candidate>& c, float t);
// Probabilities of the candidates (softmax of their logits, in candidate order).
std::vector<double> candidate_probs(const std::vector<Candidate>& c);

// ---- raw-logit helpers ----------------------------------------------------------------------
// Index of the largest finite logit, ties → smallest id. Throws oxi::Error(kInternal) when no
// logit is finite (NaN, all -inf).
int32_t argmax(std::span<const float> logits);
// log Σ exp(logits) over all entries (NaN treated as -inf).
double log_sum_exp(std::span<const float> logits);

struct TokenLogprob {
  int32_t id;
  float logprob;
};
// The k most likely tokens by raw logit (ties → smaller id) with their log-softmax values.
std::vector<TokenLogprob> top_logprobs(std::span<const float> logits, int32_t k, double lse);

// ---- stateful sampler ----------------------------------------------------------------------
class Sampler {
 public:
  // n_vocab: ids that may be sampled (logits beyond it are ignored).
  Sampler(const SamplingParams& params, int64_t n_vocab);

  const SamplingParams& params() const { return params_; }
  uint64_t seed() const { return seed_; }  // the seed in use (resolved when kRandomSeed)

  // Picks the next id from a logit row (at least n_vocab entries).
  int32_t sample(std::span<const float> logits);
  // Speculative decoding's acceptance step for a token a deterministic drafter proposed at this
  // position: the token sample() picks (same draw), and whether it is the draft. For a one-hot
  // draft this is the standard acceptance rule (kept with probability p(draft), else a token from
  // p without it, renormalised), and a seeded run emits the same tokens with speculation as
  // without. (A drafter that samples its drafts would need the general min(1, p/q) rule.)
  int32_t verify(std::span<const float> logits, int32_t draft, bool* accepted);
  // Records a token in the penalty window (prompt tokens too, as llama.cpp's server does).
  void accept(int32_t id);
  // Clears the penalty window and reseeds the RNG with the original seed.
  void reset();
  // The penalty history (oldest first), for snapshots.
  std::vector<int32_t> history() const;

 private:
  SamplingParams params_;
  int64_t n_vocab_;
  uint64_t seed_;
  std::mt19937_64 rng_;
  std::vector<int32_t> window_;  // ring buffer when penalty_last_n > 0
  size_t window_head_ = 0;
  size_t window_fill_ = 0;
  std::vector<int32_t> counts_;  // occurrences per id inside the window
  std::vector<Candidate> cands_;

  void count(int32_t id, int delta);
};

}  // namespace oxi
