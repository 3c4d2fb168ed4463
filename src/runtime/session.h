// The generation runtime: a Session owns one sequence (Model + SequenceState) and runs
//   prefill (in chunks) → sample → stream text → feed back → … until a stop condition.
// It is shared by the C API (and through it the CLI and the server): the server keeps one Session
// per slot and uses snapshot()/restore() and reuse_prefix() for prompt caching.
//
// The runtime knows the tokenizer only through TokenText (below), so it builds and is tested
// without a real vocabulary; loader/loaded_model.h adapts the tokenizer library to it.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "models/model.h"
#include "runtime/speculative.h"
#include "sampling/sampler.h"

namespace oxi {

class Batcher;  // runtime/batcher.h
class MtpDrafter;  // runtime/mtp_drafter.h

// Incremental detokenizer: push ids, get back only complete UTF-8 (never half a code point).
class TextStream {
 public:
  virtual ~TextStream() = default;
  virtual std::string push(int32_t id) = 0;
  // Whatever is still buffered (an incomplete sequence is returned as U+FFFD replacement).
  virtual std::string flush() = 0;
};

// What the runtime needs from a vocabulary.
class TokenText {
 public:
  virtual ~TokenText() = default;
  virtual int64_t vocab_size() const = 0;         // ids the sampler may pick: [0, vocab_size)
  virtual bool is_eog(int32_t id) const = 0;      // end-of-generation (EOS, EOT, <|im_end|>…)
  virtual std::unique_ptr<TextStream> new_stream() const = 0;
};

// A TextStream over a function that returns a token's raw bytes: buffers until the bytes form
// complete UTF-8 code points (invalid bytes are passed through as U+FFFD).
class Utf8TextStream : public TextStream {
 public:
  explicit Utf8TextStream(std::function<std::string(int32_t)> piece) : piece_(std::move(piece)) {}
  std::string push(int32_t id) override { return feed(piece_(id)); }
  std::string flush() override;
  // Appends bytes and returns the complete prefix.
  std::string feed(std::string_view bytes);

 private:
  std::function<std::string(int32_t)> piece_;
  std::string pending_;
};

// Length of the longest prefix of `s` that does not end inside a (possibly valid) UTF-8
// sequence. Invalid bytes count as complete (they cannot become valid later).
size_t utf8_complete_prefix(std::string_view s);

enum class StopReason : int32_t { kEndOfGeneration = 0, kMaxTokens = 1, kContextFull = 2, kCancelled = 3 };
const char* stop_reason_name(StopReason r);

struct TokenEvent {
  int32_t id = 0;
  std::string_view text;   // this step's UTF-8 ("" while buffering, and for end-of-generation)
  bool eog = false;        // this token ends the generation (its text is not shown)
  float logprob = 0.0f;    // log-softmax of the raw logits (NaN when not computed)
  std::span<const TokenLogprob> top;  // n_top_logprobs best by raw logit
};

struct GenerateOptions {
  int32_t max_tokens = -1;         // < 0: until end of generation or context full
  int32_t n_top_logprobs = 0;      // 0..20
  bool logprobs = false;           // compute TokenEvent::logprob even with n_top_logprobs == 0
  bool ignore_eog = false;         // keep going past end-of-generation tokens
  SamplingParams sampling = SamplingParams::greedy();
  int32_t prefill_chunk = 512;     // tokens per forward() during prefill
  const volatile int* cancel = nullptr;  // polled between tokens
  // Optional extra stop check (also polled between tokens); returns true to cancel.
  std::function<bool()> should_stop;
  // Optional constraint (grammar / JSON schema): called on a copy of each step's logits before
  // sampling; set a token's logit to -inf to forbid it. Reported logprobs stay those of the raw
  // logits.
  std::function<void(std::span<float>)> logit_filter;
  // Speculative decoding (runtime/speculative.h). Greedy output is the same token for token;
  // sampled output has the same distribution (not the same draws for a seed). Drafts are capped by
  // the session's max_draft (its rollback room).
  SpecOptions spec;
};

struct GenerateResult {
  int32_t n_prompt = 0;
  int32_t n_generated = 0;
  double prompt_seconds = 0.0;
  double gen_seconds = 0.0;
  StopReason stop = StopReason::kEndOfGeneration;
  std::vector<int32_t> generated;  // ids (including a final end-of-generation id)
  std::string text;                // streamed text concatenated (end-of-generation text excluded)
  // Speculative decoding: verify steps run, drafts verified in them, drafts accepted.
  int32_t n_verify = 0;
  int32_t n_drafted = 0;
  int32_t n_accepted = 0;
};

// Prompt entries that are not plain tokens at plain positions (images), for a span of n entries
// given beside their ids: embd [n, n_embd] holds the rows of the entries whose id is negative
// (other rows are not read; nullptr when no id is negative), pos3 [n, 3] every entry's (t, h, w)
// mRoPE positions (nullptr: cache positions). After a span with pos3, later entries and generated
// tokens continue from its last t + 1: the session keeps that offset from the cache position
// (Qwen3-VL: an image of R × C rows advances the position by max(R, C), not R · C).
// non_causal: the span is one image whose rows see each other (Batch::non_causal; Gemma 4 26B/31B):
// it goes to the model in one pass, never split into chunks.
struct EntryRows {
  const float* embd = nullptr;
  const int32_t* pos3 = nullptr;
  bool non_causal = false;
};

// Return false to stop (the result then says kCancelled).
using TokenCallback = std::function<bool(const TokenEvent&)>;

class Session {
 public:
  // batcher: when set, every forward step goes through it (continuous batching with the other
  // sessions that share it; runtime/batcher.h). max_draft: the most draft tokens a speculative
  // verify step may carry (the state keeps room to roll that many back; 0: no speculation).
  Session(const Model& model, const TokenText& text, int64_t n_ctx, Batcher* batcher = nullptr,
          int32_t max_draft = 0);
  ~Session();

  const Model& model() const { return model_; }
  int64_t n_ctx() const;
  int64_t n_past() const;
  // The RoPE position of the next entry (n_past, or behind it after Qwen's images: EntryRows).
  int64_t next_position() const { return n_past() + pos_offset_; }
  const std::vector<int32_t>& tokens() const { return tokens_; }  // every token consumed

  // Forgets everything (state emptied, checkpoint dropped).
  void reset();
  // MTP models: the most bytes of trunk hidden rows kept for the head before a long prompt is fed
  // to it chunk by chunk (default 64 MiB; tests lower it). Hidden rows held now, in bytes.
  void set_max_hidden_bytes(int64_t bytes) { max_hidden_bytes_ = bytes; }
  int64_t hidden_bytes() const { return static_cast<int64_t>(hid_.size() * sizeof(float)); }

  // Feeds tokens (chunked) without sampling; throws kInvalidArgument when they do not fit.
  // rows: image rows and positions for these entries (see EntryRows).
  void prefill(std::span<const int32_t> tokens, const GenerateOptions& opt = {}, const EntryRows& rows = {});

  // Appends `prompt` to the sequence, then generates. `prompt` may be empty only when the last
  // call left logits behind (it never does after generate(); so in practice: non-empty).
  // Throws oxi::Error: kInvalidArgument "prompt of N tokens does not fit…" when the prompt does not
  // fit the context, model errors as they come.
  GenerateResult generate(std::span<const int32_t> prompt, const GenerateOptions& opt,
                          const TokenCallback& on_token, const EntryRows& rows = {});

  // Prompt caching. A checkpoint is a saved (tokens, state) pair; reuse_prefix(seq) brings the
  // session to the longest usable prefix of `seq` (the current state if tokens() is a prefix of
  // it, else the checkpoint if its tokens are, else empty), consuming at most max_reuse tokens.
  // Returns how many tokens of `seq` are already consumed.
  void checkpoint();
  bool has_checkpoint() const { return checkpoint_.has_value(); }
  size_t reuse_prefix(std::span<const int32_t> seq, size_t max_reuse);

  struct Snapshot {
    std::vector<int32_t> tokens;  // negative ids: image rows (the server keys them by content hash)
    std::vector<uint8_t> state;
    int64_t pos_offset = 0;       // RoPE position − cache position of the next entry
    // MTP drafting (empty when the session keeps none): the head's state and the trunk's hidden
    // rows of positions [hidden_base, tokens.size()) it has not taken in — one row, as snapshot()
    // feeds the head every pair whose next token is known first.
    std::vector<uint8_t> mtp_state;
    std::vector<float> hidden;
    int64_t hidden_base = 0;
    size_t bytes() const {
      return state.size() + tokens.size() * sizeof(int32_t) + mtp_state.size() + hidden.size() * sizeof(float);
    }
  };
  // Not const: on an MTP model the head first takes in the pairs it has not seen (one layer's
  // pass over them), so that the snapshot carries its state and a single hidden row.
  Snapshot snapshot();
  void restore(const Snapshot& s);

 private:
  const Model& model_;
  const TokenText& text_;
  Batcher* batcher_ = nullptr;
  std::unique_ptr<SequenceState> state_;
  std::vector<int32_t> tokens_;
  std::vector<float> logits_;     // last token's logits
  int64_t pos_offset_ = 0;        // RoPE position − cache position after images (EntryRows); ≤ 0
  bool logits_valid_ = false;     // logits_ belong to tokens_.back()
  std::optional<Snapshot> checkpoint_;
  int32_t max_draft_ = 0;
  DraftTuner tuner_;                 // measured verify costs persist across requests
  std::vector<float> verify_logits_;  // [k + 1, n_vocab] of the last verify step
  std::vector<float> pending_row_;    // raw logits of a rejected draft's position (logprobs)
  // MTP drafting (models with an MTP head, sessions that may speculate): the trunk's final normed
  // hidden rows of positions [hid_base_, hid_n_) — kept while hid_n_ == n_past(); rows the head
  // has taken in are dropped (hid_base_ follows it), and a prompt whose rows would outgrow
  // max_hidden_bytes_ is fed to the head chunk by chunk. Snapshots carry the head's state and the
  // rows it still needs, so a restored session drafts at once.
  int64_t max_hidden_bytes_ = 64ll << 20;
  std::unique_ptr<MtpDrafter> mtp_;
  std::vector<float> hid_;
  int64_t hid_base_ = 0, hid_n_ = 0;
  void feed_head_if_full();

  void forward_chunked(std::span<const int32_t> tokens, int32_t chunk, const EntryRows& rows = {});
  // One model call (through the batcher when there is one), keeping hidden rows for MTP (plain
  // tokens at plain positions only).
  void model_forward(std::span<const int32_t> tokens, float* logits, bool all, const EntryRows& rows = {});
  // Forgets kept hidden rows and the MTP head's pairs beyond position n.
  void drop_hidden(int64_t n);
  // One decode or verify step: feeds `tokens`, writes the last token's logits to logits_ (or, with
  // all, every token's to verify_logits_), and tells the tuner how long it took.
  void forward_step(std::span<const int32_t> tokens, bool all);
  // Drops consumed tokens back to n (rejected drafts).
  void truncate(int64_t n);
};

// Sampling defaults recommended by the model files: GGUF general.sampling.* keys, HF
// generation_config.json (temperature, top_k, top_p, min_p, repetition_penalty,
// presence_penalty, frequency_penalty, do_sample=false → greedy). Fields absent there keep
// `base`'s values.
SamplingParams model_sampling_defaults(const ModelFiles& files, const SamplingParams& base);

}  // namespace oxi
