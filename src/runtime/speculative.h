// Speculative decoding's parts that do not touch the model: who proposes draft tokens (a Drafter)
// and how many of them are worth verifying (DraftTuner). The verify/accept/rollback loop itself is
// in Session::generate (runtime/session.cpp); docs/speculative.md has the method and the numbers.
//
// Decode reads every weight once per step; a verify step feeds the sampled token plus k drafts in
// one forward call, reading the weights once for k + 1 positions, and keeps the drafts the model
// agrees with (rejected ones are rolled back with SequenceState::truncate).
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace oxi {

// --spec: auto picks the best drafter the model has (today: n-gram prompt lookup; the MTP head
// and assistant drafters when they are implemented) and lets DraftTuner decide, step by step,
// whether drafting pays.
enum class SpecMode : int32_t { kNone = 0, kAuto = 1, kNgram = 2, kMtp = 3, kDraft = 4 };
const char* spec_mode_name(SpecMode m);
// "auto" | "none" | "ngram" | "mtp" | "draft"; throws oxi::Error(kInvalidArgument) otherwise.
SpecMode parse_spec_mode(const std::string& s);

struct SpecOptions {
  SpecMode mode = SpecMode::kNone;
  int32_t draft_max = 16;  // most drafts per verify step (llama.cpp's --draft-max default)
  // Fewest drafts worth a verify step (llama.cpp's --draft-min). With mode auto, also: draft at
  // least this many whenever a proposal exists (0: the tuner may switch drafting off).
  int32_t draft_min = 0;
  // false: always verify min(draft_max, proposed) drafts (no cost model).
  bool adaptive = true;
  // Not owned; when set (and mode is not none) it drafts instead of the mode's drafter: tests and
  // bench's replay drafter.
  class Drafter* drafter = nullptr;
};
// Largest draft_max accepted (the verify pass is one forward call of draft_max + 1 tokens).
inline constexpr int32_t kMaxDraft = 32;

// Proposes tokens that may follow `history` (every token of the sequence so far, the last one
// being the token about to be fed). Deterministic: the same history gives the same drafts (the
// acceptance rule in Sampler::verify relies on that).
class Drafter {
 public:
  virtual ~Drafter() = default;
  virtual const char* name() const = 0;
  // Appends at most k tokens to `out` (cleared first).
  virtual void propose(std::span<const int32_t> history, int32_t k, std::vector<int32_t>& out) = 0;
};

// Prompt lookup: finds the most recent earlier occurrence of the history's last n tokens (n from
// n_max down to n_min) and proposes the tokens that followed it. Costs a backwards scan of the
// history per step (microseconds next to a forward pass).
class NgramDrafter : public Drafter {
 public:
  NgramDrafter(int32_t n_min = 2, int32_t n_max = 4) : n_min_(n_min), n_max_(n_max) {}
  const char* name() const override { return "ngram"; }
  void propose(std::span<const int32_t> history, int32_t k, std::vector<int32_t>& out) override;

 private:
  int32_t n_min_, n_max_;
};

// Drafts a known continuation: the tokens of `script` that follow the history (history = the
// prompt of prompt_len tokens + what was generated so far). bench's 100 %-acceptance ceiling;
// tests make every corrupt_every-th position wrong (0: none) to force rejections.
class ReplayDrafter : public Drafter {
 public:
  ReplayDrafter(std::vector<int32_t> script, size_t prompt_len, int corrupt_every = 0, int64_t vocab = 1)
      : script_(std::move(script)), prompt_len_(prompt_len), corrupt_(corrupt_every), vocab_(vocab) {}
  const char* name() const override { return "replay"; }
  void propose(std::span<const int32_t> history, int32_t k, std::vector<int32_t>& out) override;

 private:
  std::vector<int32_t> script_;
  size_t prompt_len_;
  int corrupt_;
  int64_t vocab_;
};

// Chooses the draft length of each verify step from what it has measured on this machine and
// this request: the wall time of a forward call of m tokens (m = 1 is a plain decode step) and the
// per-draft acceptance rate a. With independent acceptance, k drafts yield on average
// E(k) = 1 + a + … + a^k tokens per step, so it picks the k ≥ 1 that maximises E(k) / t(k + 1)
// (plus k · d with d the measured cost of one draft, for drafters that run the model: MTP) and
// drafts only if that beats 1 / t(1). While drafting is off it still verifies one draft now
// and then so that a change in acceptance is noticed: after kProbeEvery proposals, doubling after
// each probe that found nothing up to kProbeEvery · 2^kProbeBackoff (cost at acceptance 0: a
// fraction (t(2) − t(1)) / t(1) / 256 of decode time, well under 1 %).
class DraftTuner {
 public:
  static constexpr int kProbeEvery = 16;
  static constexpr int kProbeBackoff = 4;

  // Forgets the acceptance history (per request); keeps the measured costs (per machine/model).
  void start(const SpecOptions& opt);
  // Drafts to verify this step, given `proposed` tokens on offer.
  int32_t choose(int32_t proposed);
  void record_pass(int32_t n_tokens, double seconds);
  // A drafter whose drafts cost forward passes (the MTP head): `seconds` spent making k drafts.
  // choose() then charges k drafts k times the smoothed cost of one on top of the verify pass.
  void record_draft(int32_t k, double seconds);
  // A costly drafter's cost per draft in decode steps, assumed until record_draft measures it (so
  // a request does not start drafting on the optimistic assumption that drafts are free).
  void expect_draft_cost(double steps) { draft_prior_ = steps; }
  void record_verify(int32_t drafted, int32_t accepted);
  double acceptance() const;
  // t(m) / t(1): measured where possible, else a prior (1 + 0.3 (m − 1), a CPU-like guess that the
  // first measurements replace).
  double cost_ratio(int32_t m) const;

 private:
  SpecOptions opt_;
  std::vector<double> t_;     // t_[m]: smoothed seconds of an m-token forward call (0: unmeasured)
  double draft_s_ = 0.0;      // smoothed seconds per draft (0: free or unmeasured)
  double draft_prior_ = 0.0;  // draft cost in decode steps while draft_s_ is unmeasured
  double acc_ = 1.0, rej_ = 1.0;  // decayed counts of accepted drafts and of rejections (prior 1/1)
  int since_probe_ = 0;
  int failed_probes_ = 0;   // probes in a row that accepted nothing
  bool probing_ = false;    // the last choice was a probe
};

}  // namespace oxi
