#include "runtime/batcher.h"

#include <algorithm>
#include <iterator>

#include "core/error.h"

namespace oxi {

namespace {

// Runs one pass for reqs; returns whether it ran. When it throws, each request gets its own
// outcome: a batch is refused whole, before any state changes, when one submission is bad (e.g.
// its context overflows), so each then runs in a pass of its own (`alone`), its error included;
// any other failure came mid-pass and is every submission's (their sessions start over).
template <class Req, class Pass, class Alone>
bool guarded(std::vector<Req*>& reqs, Pass&& pass, Alone&& alone) {
  try {
    pass();
    return true;
  } catch (const Error& e) {
    if (reqs.size() == 1 || e.code() != ErrorCode::kInvalidArgument) {
      for (Req* q : reqs) q->error = std::current_exception();
      return false;
    }
    for (Req* q : reqs) {
      std::vector<Req*> one{q};
      alone(one);
    }
  } catch (...) {
    for (Req* q : reqs) q->error = std::current_exception();
  }
  return false;
}

}  // namespace

void Batcher::join(int delta) {
  std::lock_guard<std::mutex> lk(mu_);
  participants_ += delta;
  cv_.notify_all();  // a leader waiting for a participant that just left need not wait longer
}

Batcher::Counts Batcher::counts() const {
  std::lock_guard<std::mutex> lk(mu_);
  return n_;
}

void Batcher::mtp_forward(SequenceState& state, const float* hidden, const int32_t* tokens, int64_t n, float* logits,
                          float* hidden_out) {
  if (n <= 0) return;
  Req r;
  r.state = &state;
  r.tokens = std::span<const int32_t>(tokens, static_cast<size_t>(n));
  r.mtp = true;
  r.mtp_hidden = hidden;
  r.logits = logits;
  r.mtp_out = hidden_out;
  submit(std::span<Req>(&r, 1));
}

void Batcher::forward(SequenceState& state, std::span<const int32_t> tokens, float* logits, bool all_logits,
                      const float* embd, const int32_t* pos3, float* hidden_all, bool non_causal) {
  if (tokens.empty()) return;
  Req r;
  r.state = &state;
  r.tokens = tokens;
  r.embd = embd;
  r.pos3 = pos3;
  r.logits = logits;
  r.hidden_all = hidden_all;
  r.all = all_logits;
  r.non_causal = non_causal;
  submit(std::span<Req>(&r, 1));
}

void Batcher::forward_hidden(std::span<const HiddenJob> jobs) {
  std::vector<Req> reqs;
  for (const HiddenJob& j : jobs) {
    if (j.tokens.empty()) continue;
    Req r;
    r.state = j.state;
    r.tokens = j.tokens;
    r.hidden = j.hidden;
    reqs.push_back(r);
  }
  if (!reqs.empty()) submit(reqs);
}

void Batcher::submit(std::span<Req> reqs) {
  auto all_done = [&] { return std::all_of(reqs.begin(), reqs.end(), [](const Req& q) { return q.done; }); };
  std::unique_lock<std::mutex> lk(mu_);
  for (Req& r : reqs) pending_.push_back(&r);
  cv_.notify_all();
  while (!all_done()) {
    if (running_) {
      cv_.wait(lk);
      continue;
    }
    // Leader: gather the other participants' submissions for a moment, then run them all.
    running_ = true;
    const auto until = std::chrono::steady_clock::now() + gather_wait;
    while (static_cast<int>(pending_.size()) < participants_ &&
           cv_.wait_until(lk, until) != std::cv_status::timeout) {
    }
    std::vector<Req*> take, heads;
    take.swap(pending_);
    auto is_mtp = [](const Req* q) { return q->mtp; };
    std::copy_if(take.begin(), take.end(), std::back_inserter(heads), is_mtp);
    take.erase(std::remove_if(take.begin(), take.end(), is_mtp), take.end());
    // Head feeds first; trunk steps wait for the next take. A session's step is a trunk pass then
    // its head's chain, so serving both kinds in one take would keep the sessions out of phase
    // (each trunk pass with only part of them: the trunk's weights read more often per token);
    // holding the trunk steps back while any head still chains brings every drafting session to
    // its trunk step together. A session's chain is at most its draft length, so none waits long.
    if (!heads.empty() && !take.empty()) take.swap(pending_);
    lk.unlock();
    if (!take.empty()) run(take);
    if (!heads.empty()) run_mtp(heads);
    lk.lock();
    if (!take.empty()) ++n_.passes;
    if (!heads.empty()) ++n_.mtp_passes;
    n_.mtp_feeds += heads.size();
    for (Req* q : take) {
      n_.rows += q->tokens.size();
      q->done = true;
    }
    for (Req* q : heads) q->done = true;
    running_ = false;
    cv_.notify_all();
  }
  for (const Req& r : reqs)
    if (r.error) std::rethrow_exception(r.error);
}

void Batcher::run(std::vector<Req*>& reqs) {
  // A non-causal submission's rows see the later rows of its own sequence: the flag is the pass's,
  // so such a submission never shares one.
  if (reqs.size() > 1 && std::any_of(reqs.begin(), reqs.end(), [](const Req* q) { return q->non_causal; })) {
    std::vector<Req*> rest;
    for (Req* q : reqs) {
      if (!q->non_causal) {
        rest.push_back(q);
        continue;
      }
      std::vector<Req*> one{q};
      run(one);
    }
    if (!rest.empty()) run(rest);
    return;
  }
  std::vector<SequenceState*> states;
  std::vector<int32_t> tok, seq;
  std::vector<uint8_t> want;  // outputs: each submission's last entry, or all of a verify step's
  std::vector<size_t> n_out;
  for (size_t i = 0; i < reqs.size(); ++i) {
    states.push_back(reqs[i]->state);
    const size_t n = reqs[i]->tokens.size();
    for (size_t j = 0; j < n; ++j) {
      tok.push_back(reqs[i]->tokens[j]);
      seq.push_back(static_cast<int32_t>(i));
      want.push_back(!reqs[i]->hidden && (reqs[i]->all || j + 1 == n) ? 1 : 0);
    }
    n_out.push_back(reqs[i]->hidden ? 0 : reqs[i]->all ? n : 1);
  }
  // Image rows and explicit positions: when one submission has them, the pass carries them for
  // every entry (zero rows for tokens; cache positions for submissions without).
  const bool any_embd = std::any_of(reqs.begin(), reqs.end(), [](const Req* q) { return q->embd != nullptr; });
  const bool any_pos = std::any_of(reqs.begin(), reqs.end(), [](const Req* q) { return q->pos3 != nullptr; });
  const size_t d = static_cast<size_t>(model_.info().n_embd);
  std::vector<float> embd(any_embd ? tok.size() * d : 0, 0.0f);
  std::vector<int32_t> pos, pos3;
  for (size_t i = 0, at = 0; i < reqs.size(); at += reqs[i]->tokens.size(), ++i) {
    const Req& q = *reqs[i];
    const size_t n = q.tokens.size();
    if (q.embd) std::copy_n(q.embd, n * d, embd.data() + at * d);
    if (!any_pos) continue;
    for (size_t j = 0; j < n; ++j) {
      const auto p = static_cast<int32_t>(q.state->n_past() + static_cast<int64_t>(j));
      if (q.pos3) pos3.insert(pos3.end(), q.pos3 + 3 * j, q.pos3 + 3 * j + 3);
      else pos3.insert(pos3.end(), {p, p, p});
      pos.push_back(pos3[3 * (at + j)]);
    }
  }
  const size_t V = static_cast<size_t>(model_.info().n_vocab);
  size_t rows_out = 0;
  for (size_t n : n_out) rows_out += n;
  std::vector<float> out(rows_out * V);
  // Hidden-state submissions and submissions that keep hidden rows (MTP): every entry's row of the
  // pass (the model writes all or none; the rows are the final norm's output, computed anyway).
  const bool any_hidden =
      std::any_of(reqs.begin(), reqs.end(), [](const Req* q) { return q->hidden != nullptr || q->hidden_all != nullptr; });
  std::vector<float> hidden(any_hidden ? tok.size() * d : 0);
  Batch b;
  b.n = static_cast<int64_t>(tok.size());
  b.token = tok.data();
  b.seq = seq.data();
  b.output = want.data();
  b.non_causal = reqs.size() == 1 && reqs[0]->non_causal;
  if (any_embd) b.embd = embd.data();
  if (any_pos) {
    b.pos = pos.data();
    b.pos3 = pos3.data();
  }
  const bool ran = guarded(
      reqs,
      [&] {
        model_.forward_batch(states, b,
                             BatchOutput{rows_out ? out.data() : nullptr, nullptr, any_hidden ? hidden.data() : nullptr});
      },
      [this](std::vector<Req*>& one) { run(one); });
  if (!ran) return;
  size_t at = 0, entry = 0;
  for (size_t i = 0; i < reqs.size(); ++i) {
    if (reqs[i]->hidden) std::copy_n(hidden.data() + entry * d, reqs[i]->tokens.size() * d, reqs[i]->hidden);
    else std::copy_n(out.data() + at * V, n_out[i] * V, reqs[i]->logits);
    if (reqs[i]->hidden_all) std::copy_n(hidden.data() + entry * d, reqs[i]->tokens.size() * d, reqs[i]->hidden_all);
    at += n_out[i];
    entry += reqs[i]->tokens.size();
  }
}

void Batcher::run_mtp(std::vector<Req*>& reqs) {
  std::vector<Model::MtpJob> jobs;
  for (const Req* q : reqs)
    jobs.push_back(Model::MtpJob{q->state, q->mtp_hidden, q->tokens.data(), static_cast<int64_t>(q->tokens.size()), q->logits,
                                 q->mtp_out});
  guarded(reqs, [&] { model_.mtp_forward_batch(jobs); }, [this](std::vector<Req*>& one) { run_mtp(one); });
}

}  // namespace oxi
