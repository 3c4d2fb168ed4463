#include "runtime/session.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>

#include "core/error.h"
#include "runtime/batcher.h"
#include "runtime/mtp_drafter.h"

namespace oxi {

namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

// Expected length of a UTF-8 sequence from its lead byte; 0 for a byte that cannot start one.
int utf8_len(unsigned char c) {
  if (c < 0x80) return 1;
  if (c >= 0xC2 && c <= 0xDF) return 2;
  if (c >= 0xE0 && c <= 0xEF) return 3;
  if (c >= 0xF0 && c <= 0xF4) return 4;
  return 0;
}

bool is_cont(unsigned char c) { return (c & 0xC0) == 0x80; }

}  // namespace

size_t utf8_complete_prefix(std::string_view s) {
  // Look back at most 3 bytes for a lead byte whose sequence is cut off by the end.
  const size_t n = s.size();
  for (size_t back = 1; back <= 3 && back <= n; ++back) {
    const auto c = static_cast<unsigned char>(s[n - back]);
    if (is_cont(c)) continue;
    const int len = utf8_len(c);
    if (len > static_cast<int>(back)) {
      // Check the bytes present so far are continuations (else it is invalid: complete as is).
      for (size_t i = n - back + 1; i < n; ++i) {
        if (!is_cont(static_cast<unsigned char>(s[i]))) return n;
      }
      return n - back;
    }
    return n;
  }
  return n;
}

std::string Utf8TextStream::feed(std::string_view bytes) {
  pending_.append(bytes);
  const size_t k = utf8_complete_prefix(pending_);
  std::string out = pending_.substr(0, k);
  pending_.erase(0, k);
  return out;
}

std::string Utf8TextStream::flush() {
  if (pending_.empty()) return {};
  pending_.clear();
  return "\xEF\xBF\xBD";  // one U+FFFD for the cut-off sequence
}

const char* stop_reason_name(StopReason r) {
  switch (r) {
    case StopReason::kEndOfGeneration: return "eog";
    case StopReason::kMaxTokens: return "max_tokens";
    case StopReason::kContextFull: return "context_full";
    case StopReason::kCancelled: return "cancelled";
  }
  return "unknown";
}

Session::Session(const Model& model, const TokenText& text, int64_t n_ctx, Batcher* batcher, int32_t max_draft)
    : model_(model), text_(text), batcher_(batcher), max_draft_(std::clamp<int32_t>(max_draft, 0, kMaxDraft)) {
  if (n_ctx <= 0) throw_error(ErrorCode::kInvalidArgument, "context size must be positive");
  state_ = model_.new_state(n_ctx, max_draft_ > 0 ? max_draft_ + 1 : 0);
  if (!state_) throw_error(ErrorCode::kInternal, "the model returned no sequence state");
  logits_.resize(static_cast<size_t>(model_.info().n_vocab));
  if (model_.has_mtp() && max_draft_ > 0) mtp_ = std::make_unique<MtpDrafter>(model_, n_ctx, *state_, batcher_);
}

Session::~Session() = default;

void Session::model_forward(std::span<const int32_t> tokens, float* logits, bool all, const EntryRows& rows) {
  const int64_t d = model_.info().n_embd, p0 = state_->n_past(), n = static_cast<int64_t>(tokens.size());
  // Positions: as given, else the cache positions shifted by what earlier images left behind.
  std::vector<int32_t> shifted;
  const int32_t* pos3 = rows.pos3;
  if (!pos3 && pos_offset_ != 0) {
    for (int64_t j = 0; j < n; ++j) {
      const auto p = static_cast<int32_t>(p0 + j + pos_offset_);
      shifted.insert(shifted.end(), {p, p, p});
    }
    pos3 = shifted.data();
  }
  if (rows.pos3 && n > 0) pos_offset_ = rows.pos3[3 * (n - 1)] + 1 - (p0 + n);
  // Hidden rows only for MTP drafting, and only contiguous ones from plain token sequences; the
  // rows the head has taken in go first.
  const bool keep = mtp_ && hid_n_ == p0 && !rows.embd && !pos3 && !rows.non_causal;
  if (keep) {
    const int64_t drop = std::min(mtp_->fed(), hid_n_) - hid_base_;
    if (drop > 0) {
      hid_.erase(hid_.begin(), hid_.begin() + drop * d);
      hid_base_ += drop;
    }
    hid_.resize(static_cast<size_t>((p0 + n - hid_base_) * d));
  }
  float* keep_at = keep ? hid_.data() + (p0 - hid_base_) * d : nullptr;
  if (batcher_) {
    batcher_->forward(*state_, tokens, logits, all, rows.embd, pos3, keep_at, rows.non_causal);
    if (keep) hid_n_ = p0 + n;
    return;
  }
  if (rows.embd || pos3 || rows.non_causal) {  // no hidden rows kept (above)
    std::vector<int32_t> pos(static_cast<size_t>(n));
    for (int64_t j = 0; j < n; ++j) pos[static_cast<size_t>(j)] = pos3 ? pos3[3 * j] : static_cast<int32_t>(p0 + j);
    const std::vector<uint8_t> every(all ? static_cast<size_t>(n) : 0, 1);
    Batch b;
    b.n = n;
    b.token = tokens.data();
    b.embd = rows.embd;
    b.pos = pos.data();
    b.pos3 = pos3;
    b.non_causal = rows.non_causal;
    if (all) b.output = every.data();
    SequenceState* st[1] = {state_.get()};
    model_.forward_batch(st, b, BatchOutput{logits, nullptr});
    return;
  }
  model_.forward(*state_, tokens, logits, all, keep_at);
  if (keep) hid_n_ = p0 + n;
}

void Session::drop_hidden(int64_t n) {
  hid_n_ = std::min(hid_n_, n);
  if (hid_n_ <= hid_base_) {  // back to (or below) the first kept row: start the window there
    hid_.clear();
    hid_base_ = hid_n_;
  } else {
    hid_.resize(static_cast<size_t>((hid_n_ - hid_base_) * model_.info().n_embd));
  }
  if (mtp_) mtp_->truncate(n);
}

// Rows pile up while nothing drafts (a long prompt before the first draft, a request that does not
// draft): past max_hidden_bytes_ the head takes in every pair whose next token is known (all but
// the last position) now, so the rows can go.
void Session::feed_head_if_full() {
  if (!mtp_ || hid_n_ != n_past() || hid_n_ <= hid_base_) return;
  const int64_t bytes = (hid_n_ - hid_base_) * model_.info().n_embd * static_cast<int64_t>(sizeof(float));
  if (bytes <= max_hidden_bytes_ || static_cast<int64_t>(tokens_.size()) != hid_n_) return;
  std::vector<int32_t> none;
  mtp_->propose(tokens_, hid_.data(), hid_base_, hid_n_, 0, none);
}

int64_t Session::n_ctx() const { return state_->n_ctx(); }
int64_t Session::n_past() const { return state_->n_past(); }

void Session::reset() {
  state_->clear();
  tokens_.clear();
  pos_offset_ = 0;
  logits_valid_ = false;
  checkpoint_.reset();
  drop_hidden(0);
}

void Session::forward_chunked(std::span<const int32_t> tokens, int32_t chunk, const EntryRows& rows) {
  if (tokens.empty()) return;
  const int64_t room = n_ctx() - n_past();
  if (static_cast<int64_t>(tokens.size()) > room) {
    throw_error(ErrorCode::kInvalidArgument,
                "prompt of " + std::to_string(tokens.size()) + " tokens does not fit the context (" +
                    std::to_string(n_ctx()) + " tokens, " + std::to_string(n_past()) +
                    " already used); use a larger context (-c)");
  }
  const int64_t n_vocab = model_.info().n_vocab;
  for (int64_t id : tokens) {
    if ((id < 0 && !rows.embd) || id >= n_vocab) {
      throw_error(ErrorCode::kInvalidArgument, "token id " + std::to_string(id) +
                                                   " is out of range (vocabulary of " +
                                                   std::to_string(n_vocab) + ")");
    }
  }
  const size_t step = rows.non_causal ? tokens.size() : chunk > 0 ? static_cast<size_t>(chunk) : 512;
  logits_valid_ = false;
  try {
    for (size_t i = 0; i < tokens.size(); i += step) {
      const auto part = tokens.subspan(i, std::min(step, tokens.size() - i));
      const int64_t d = model_.info().n_embd;
      const EntryRows part_rows{rows.embd ? rows.embd + static_cast<int64_t>(i) * d : nullptr,
                                rows.pos3 ? rows.pos3 + 3 * i : nullptr, rows.non_causal};
      model_forward(part, logits_.data(), false, part_rows);
      tokens_.insert(tokens_.end(), part.begin(), part.end());
      feed_head_if_full();
    }
  } catch (...) {
    // A failed forward may leave the state half-updated: start over rather than go on from it.
    state_->clear();
    tokens_.clear();
    pos_offset_ = 0;
    checkpoint_.reset();
    drop_hidden(0);
    throw;
  }
  logits_valid_ = true;
}

void Session::forward_step(std::span<const int32_t> tokens, bool all) {
  const int64_t V = model_.info().n_vocab;
  float* out = logits_.data();
  if (all) {
    verify_logits_.resize(tokens.size() * static_cast<size_t>(V));
    out = verify_logits_.data();
  }
  logits_valid_ = false;
  const auto t0 = Clock::now();
  try {
    model_forward(tokens, out, all);
  } catch (...) {
    state_->clear();  // as forward_chunked: never go on from a half-updated state
    tokens_.clear();
    pos_offset_ = 0;
    checkpoint_.reset();
    drop_hidden(0);
    throw;
  }
  tuner_.record_pass(static_cast<int32_t>(tokens.size()), seconds_since(t0));
  tokens_.insert(tokens_.end(), tokens.begin(), tokens.end());
  feed_head_if_full();  // a request that does not draft (n_max 0) must not pile up rows either
  logits_valid_ = !all;
}

void Session::truncate(int64_t n) {
  state_->truncate(n);
  tokens_.resize(static_cast<size_t>(n));
  logits_valid_ = false;
  drop_hidden(n);
}

void Session::prefill(std::span<const int32_t> tokens, const GenerateOptions& opt, const EntryRows& rows) {
  forward_chunked(tokens, opt.prefill_chunk, rows);
}

GenerateResult Session::generate(std::span<const int32_t> prompt, const GenerateOptions& opt,
                                 const TokenCallback& on_token, const EntryRows& rows) {
  if (opt.n_top_logprobs < 0 || opt.n_top_logprobs > 20) {
    throw_error(ErrorCode::kInvalidArgument, "top logprobs must be between 0 and 20");
  }
  if (prompt.empty() && !logits_valid_) {
    throw_error(ErrorCode::kInvalidArgument, "empty prompt");
  }
  const int64_t n_vocab_model = model_.info().n_vocab;
  int64_t n_sample = text_.vocab_size();
  if (n_sample <= 0 || n_sample > n_vocab_model) n_sample = n_vocab_model;
  Sampler sampler(opt.sampling, n_sample);
  if (opt.sampling.has_penalties()) {
    // The penalty window sees the sequence so far, prompt included (as llama.cpp's server).
    const size_t keep = opt.sampling.penalty_last_n < 0
                            ? tokens_.size()
                            : std::min(tokens_.size(), static_cast<size_t>(opt.sampling.penalty_last_n));
    // Image rows (negative ids) are no tokens to penalise.
    for (size_t i = tokens_.size() - keep; i < tokens_.size(); ++i)
      if (tokens_[i] >= 0) sampler.accept(tokens_[i]);
    for (int32_t id : prompt)
      if (id >= 0) sampler.accept(id);
  }

  GenerateResult res;
  res.n_prompt = static_cast<int32_t>(prompt.size());
  const auto t0 = Clock::now();
  forward_chunked(prompt, opt.prefill_chunk, rows);
  res.prompt_seconds = seconds_since(t0);

  auto stream = text_.new_stream();
  const bool want_lp = opt.logprobs || opt.n_top_logprobs > 0;
  std::vector<TokenLogprob> top;
  std::vector<float> filtered;  // logits after opt.logit_filter
  const auto t1 = Clock::now();
  auto cancelled = [&] {
    return (opt.cancel && *opt.cancel) || (opt.should_stop && opt.should_stop());
  };
  // The row a choice is made from, after the constraint.
  auto constrained = [&](std::span<const float> row) {
    if (!opt.logit_filter) return row;
    filtered.assign(row.begin(), row.end());
    opt.logit_filter(std::span<float>(filtered.data(), filtered.size()));
    return std::span<const float>(filtered.data(), filtered.size());
  };
  // Hands one generated token to the caller. `row`: the raw logits it was chosen from; n_fed: the
  // tokens the sequence holds before it (its position). Returns the stop reason, if it ends here.
  auto emit = [&](int32_t id, std::span<const float> row, int64_t n_fed) -> std::optional<StopReason> {
    sampler.accept(id);
    ++res.n_generated;
    res.generated.push_back(id);
    TokenEvent ev;
    ev.id = id;
    ev.logprob = std::numeric_limits<float>::quiet_NaN();
    if (want_lp) {
      const double lse = log_sum_exp(row);
      ev.logprob = static_cast<float>(static_cast<double>(row[static_cast<size_t>(id)]) - lse);
      top = top_logprobs(row, opt.n_top_logprobs, lse);
      ev.top = top;
    }
    const bool eog = !opt.ignore_eog && text_.is_eog(id);
    const bool at_max = opt.max_tokens >= 0 && res.n_generated >= opt.max_tokens;
    const bool full = n_fed >= n_ctx();
    std::string piece;
    if (eog) {
      piece = stream->flush();  // a cut-off sequence before the end is shown as U+FFFD
      ev.eog = true;
    } else {
      piece = stream->push(id);
      if (at_max || full) piece += stream->flush();  // last token: nothing may stay buffered
    }
    ev.text = piece;
    res.text += piece;
    const bool go_on = on_token ? on_token(ev) : true;
    if (eog) return StopReason::kEndOfGeneration;
    if (!go_on) return StopReason::kCancelled;
    if (at_max) return StopReason::kMaxTokens;
    if (full) return StopReason::kContextFull;
    if (cancelled()) return StopReason::kCancelled;
    return std::nullopt;
  };

  // Speculation: a drafter proposes tokens to follow each sampled one; they are fed with it in
  // one verify step and kept while Sampler::verify accepts them (docs/speculative.md).
  std::unique_ptr<Drafter> own_drafter;
  Drafter* drafter = nullptr;
  SpecOptions spec = opt.spec;
  // Verify steps of at most exact_batch_tokens() positions score each exactly as decoding does.
  const int32_t exact = static_cast<int32_t>(std::min<int64_t>(model_.exact_batch_tokens(), kMaxDraft + 1));
  spec.draft_max = std::clamp(spec.draft_max, 0, std::min(max_draft_, exact - 1));
  spec.draft_min = std::clamp(spec.draft_min, 0, spec.draft_max);
  bool use_mtp = false;
  // The model's MTP head answers --spec mtp; a draft model loaded beside it (Gemma 4's assistant,
  // -md) answers --spec draft; auto takes either.
  const SpecMode head_mode = model_.mtp_is_draft_model() ? SpecMode::kDraft : SpecMode::kMtp;
  if (spec.mode != SpecMode::kNone && spec.drafter) {
    drafter = spec.drafter;
  } else if ((spec.mode == head_mode || spec.mode == SpecMode::kAuto) && mtp_) {
    // auto on a model with an MTP head drafts with the head (docs/speculative.md, "auto").
    use_mtp = spec.draft_max > 0;
  } else if (spec.mode == head_mode && model_.has_mtp()) {
    throw_error(ErrorCode::kUnsupported, std::string("speculation mode '") + spec_mode_name(spec.mode) +
                                             "' needs a session that may speculate (max_draft > 0)");
  } else if (spec.mode == SpecMode::kDraft) {
    throw_error(ErrorCode::kUnsupported, "speculation mode 'draft' needs a draft model: -md FILE, a Gemma 4 assistant drafter "
                                         "for a Gemma 4 model (use auto, ngram or none)");
  } else if (spec.mode == SpecMode::kMtp || spec.mode == SpecMode::kDraft) {
    throw_error(ErrorCode::kUnsupported, std::string("speculation mode '") + spec_mode_name(spec.mode) +
                                             "' is not available for this model (use auto, ngram or none)");
  } else if (spec.mode != SpecMode::kNone) {
    own_drafter = std::make_unique<NgramDrafter>();
    drafter = own_drafter.get();
  }
  if (spec.draft_max <= 0) drafter = nullptr;
  tuner_.start(spec);
  // An MTP draft runs the head (one layer and the output head: about 0.3 of a decode step on the
  // 0.8B shape) until its cost is measured: with the tuner's prior acceptance that keeps a request
  // from drafting before its first probe, so drafting that never pays costs only the probes.
  // Gemma 4's assistant: four narrow layers and a d_a-wide output product (E2B assistant: d_a 256,
  // ~70 M multiply-adds against ~2 G for the target), assumed 0.1 of a decode step until measured.
  if (use_mtp) tuner_.expect_draft_cost(model_.mtp_is_draft_model() ? 0.1 : 0.3);
  std::vector<int32_t> draft, feed;

  int32_t pending = -1;  // a token already chosen: the replacement for a rejected draft
  std::optional<StopReason> stop;
  while (!stop) {
    if (opt.max_tokens >= 0 && res.n_generated >= opt.max_tokens) {
      stop = StopReason::kMaxTokens;
      break;
    }
    if (cancelled()) {
      stop = StopReason::kCancelled;
      break;
    }
    const std::span<const float> row(logits_.data(), logits_.size());
    const std::span<const float> prev_row = pending >= 0 ? std::span<const float>(pending_row_) : row;
    const int32_t id = pending >= 0 ? pending : sampler.sample(constrained(row));
    pending = -1;
    stop = emit(id, prev_row, n_past());
    if (stop) break;

    // Drafts: no more than can still be emitted, and room for all of them in the context.
    int32_t k = 0;
    if (use_mtp) {
      int64_t cap = std::min<int64_t>(spec.draft_max, n_ctx() - n_past() - 1);
      if (opt.max_tokens >= 0) cap = std::min<int64_t>(cap, opt.max_tokens - res.n_generated);
      if (cap > 0) {
        // Each MTP draft costs a pass of the head (its output product above all): the tuner
        // decides how many first, charging each its measured cost. With none the head is not
        // run: the positions it has not seen wait for the next drafting step, which feeds them in
        // one pass (so drafting switched off costs next to nothing).
        const int32_t want = tuner_.choose(static_cast<int32_t>(cap));
        if (want > 0) {
          // A draft's cost as measured: the head's pass over the few new pairs (1 + the drafts just
          // accepted) and the chained drafts; not a catch-up after drafting was off (an outlier).
          const bool steady = n_past() - mtp_->fed() <= 8;
          const Clock::time_point t0 = Clock::now();
          tokens_.push_back(id);
          const bool ok = mtp_->propose(tokens_, hid_.data(), hid_base_, hid_n_, want, draft);
          tokens_.pop_back();
          k = ok ? std::min<int32_t>(want, static_cast<int32_t>(draft.size())) : 0;
          if (steady && k > 0) tuner_.record_draft(k, seconds_since(t0));
        }
      }
    } else if (drafter) {
      int64_t cap = std::min<int64_t>(spec.draft_max, n_ctx() - n_past() - 1);
      if (opt.max_tokens >= 0) cap = std::min<int64_t>(cap, opt.max_tokens - res.n_generated);
      if (cap > 0) {
        // The drafter sees the history with `id` at its end: appended for the call (amortised
        // O(1)), not a copy of the whole sequence per step.
        tokens_.push_back(id);
        drafter->propose(tokens_, static_cast<int32_t>(cap), draft);
        tokens_.pop_back();
        // A history with images holds their rows as negative ids: a draft ends before one.
        draft.erase(std::find_if(draft.begin(), draft.end(), [](int32_t t) { return t < 0; }), draft.end());
        k = tuner_.choose(static_cast<int32_t>(draft.size()));
      }
    }
    if (k == 0) {
      const int32_t one[1] = {id};
      forward_step(std::span<const int32_t>(one, 1), false);
      continue;
    }
    feed.assign(1, id);
    feed.insert(feed.end(), draft.begin(), draft.begin() + k);
    const int64_t base = n_past();  // the sequence before `id`
    forward_step(feed, true);
    ++res.n_verify;
    res.n_drafted += k;
    const size_t V = logits_.size();
    int32_t i = 0;
    for (; i < k; ++i) {
      const std::span<const float> ri(verify_logits_.data() + static_cast<size_t>(i) * V, V);
      bool accepted = false;
      const int32_t y = sampler.verify(constrained(ri), draft[static_cast<size_t>(i)], &accepted);
      if (!accepted) {
        pending = y;
        pending_row_.assign(ri.begin(), ri.end());
        break;
      }
      stop = emit(y, ri, base + 1 + i);
      if (stop) break;
    }
    res.n_accepted += stop ? i + 1 : i;
    tuner_.record_verify(k, stop ? i + 1 : i);
    if (stop || pending >= 0) {
      // Keep `id` and the accepted drafts before position i (the last emitted token is not fed,
      // as in plain decoding); drop the rest.
      truncate(base + 1 + i);
    } else {
      std::copy_n(verify_logits_.data() + static_cast<size_t>(k) * V, V, logits_.data());
      logits_valid_ = true;
    }
  }
  res.stop = *stop;
  res.gen_seconds = seconds_since(t1);
  return res;
}

void Session::checkpoint() { checkpoint_ = snapshot(); }

size_t Session::reuse_prefix(std::span<const int32_t> seq, size_t max_reuse) {
  auto is_prefix = [&](const std::vector<int32_t>& t) {
    return t.size() <= seq.size() && t.size() <= max_reuse &&
           std::equal(t.begin(), t.end(), seq.begin());
  };
  if (is_prefix(tokens_)) return tokens_.size();
  if (checkpoint_ && is_prefix(checkpoint_->tokens)) {
    restore(*checkpoint_);
    return tokens_.size();
  }
  state_->clear();
  tokens_.clear();
  pos_offset_ = 0;
  logits_valid_ = false;
  drop_hidden(0);
  return 0;
}

Session::Snapshot Session::snapshot() {
  Snapshot s{tokens_, state_->snapshot(), pos_offset_};
  const int64_t n = n_past();
  if (!mtp_ || hid_n_ != n || n < 1 || static_cast<int64_t>(tokens_.size()) != n) return s;
  // The head takes in every pair whose next token is known (positions < n − 1), so that only the
  // last position's row has to travel with the snapshot.
  if (mtp_->fed() < n - 1) {
    std::vector<int32_t> none;
    if (!mtp_->propose(tokens_, hid_.data(), hid_base_, hid_n_, 0, none)) return s;
  }
  const int64_t from = std::max(hid_base_, mtp_->fed()), d = model_.info().n_embd;
  if (from >= n) return s;
  s.mtp_state = mtp_->snapshot();
  s.hidden.assign(hid_.begin() + (from - hid_base_) * d, hid_.begin() + (n - hid_base_) * d);
  s.hidden_base = from;
  return s;
}

void Session::restore(const Snapshot& s) {
  state_->restore(s.state);
  tokens_ = s.tokens;
  pos_offset_ = s.pos_offset;
  logits_valid_ = false;
  drop_hidden(0);
  if (state_->n_past() != static_cast<int64_t>(tokens_.size())) {
    state_->clear();
    tokens_.clear();
    pos_offset_ = 0;
    throw_error(ErrorCode::kInternal, "restored state does not match its tokens");
  }
  // The head's state and its pending rows (a snapshot without them: no MTP drafting until the
  // next reset).
  const int64_t n = n_past(), d = model_.info().n_embd;
  if (mtp_ && !s.mtp_state.empty() && s.hidden_base < n &&
      static_cast<int64_t>(s.hidden.size()) == (n - s.hidden_base) * d) {
    mtp_->restore(s.mtp_state);
    if (mtp_->fed() >= s.hidden_base && mtp_->fed() <= n) {
      hid_ = s.hidden;
      hid_base_ = s.hidden_base;
      hid_n_ = n;
    } else {
      mtp_->truncate(0);
    }
  }
}

}  // namespace oxi
