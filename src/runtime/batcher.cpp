#include "runtime/batcher.h"

#include <algorithm>

#include "core/error.h"

namespace oxi {

void Batcher::join(int delta) {
  std::lock_guard<std::mutex> lk(mu_);
  participants_ += delta;
  cv_.notify_all();  // a leader waiting for a participant that just left need not wait longer
}

uint64_t Batcher::passes() const {
  std::lock_guard<std::mutex> lk(mu_);
  return passes_;
}

uint64_t Batcher::rows() const {
  std::lock_guard<std::mutex> lk(mu_);
  return rows_;
}

void Batcher::forward(SequenceState& state, std::span<const int32_t> tokens, float* logits, bool all_logits) {
  if (tokens.empty()) return;
  Req r;
  r.state = &state;
  r.tokens = tokens;
  r.logits = logits;
  r.all = all_logits;
  std::unique_lock<std::mutex> lk(mu_);
  pending_.push_back(&r);
  cv_.notify_all();
  while (!r.done) {
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
    std::vector<Req*> take;
    take.swap(pending_);
    lk.unlock();
    run(take);
    lk.lock();
    ++passes_;
    for (Req* q : take) {
      rows_ += q->tokens.size();
      q->done = true;
    }
    running_ = false;
    cv_.notify_all();
  }
  if (r.error) std::rethrow_exception(r.error);
}

void Batcher::run(std::vector<Req*>& reqs) {
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
      want.push_back(reqs[i]->all || j + 1 == n ? 1 : 0);
    }
    n_out.push_back(reqs[i]->all ? n : 1);
  }
  const size_t V = static_cast<size_t>(model_.info().n_vocab);
  size_t rows_out = 0;
  for (size_t n : n_out) rows_out += n;
  std::vector<float> out(rows_out * V);
  Batch b;
  b.n = static_cast<int64_t>(tok.size());
  b.token = tok.data();
  b.seq = seq.data();
  b.output = want.data();
  try {
    model_.forward_batch(states, b, BatchOutput{out.data(), nullptr});
  } catch (const Error& e) {
    // A batch is refused whole, before any state changes, when one submission is bad (e.g. its
    // context overflows): run them one by one so that each gets its own outcome. Any other
    // failure came mid-pass and is every submission's (their sessions start over).
    if (reqs.size() == 1 || e.code() != ErrorCode::kInvalidArgument) {
      for (Req* q : reqs) q->error = std::current_exception();
      return;
    }
    for (Req* q : reqs) {
      try {
        model_.forward(*q->state, q->tokens, q->logits, q->all);
      } catch (...) {
        q->error = std::current_exception();
      }
    }
    return;
  } catch (...) {
    for (Req* q : reqs) q->error = std::current_exception();
    return;
  }
  size_t at = 0;
  for (size_t i = 0; i < reqs.size(); ++i) {
    std::copy_n(out.data() + at * V, n_out[i] * V, reqs[i]->logits);
    at += n_out[i];
  }
}

}  // namespace oxi
