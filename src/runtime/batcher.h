// Continuous batching: several sessions (threads) that each run their own generation loop submit
// their forward steps here, and one pass of the model serves all of them — one read of the
// weights for every active sequence's decode token, with any waiting prompt chunk mixed in.
//
// No thread of its own: the first caller that finds no pass running becomes the leader, waits
// briefly for the other participants' submissions (they are sampling their previous step), takes
// every pending submission, runs one Model::forward_batch and hands each caller its logits.
// Each sequence computes what it computes alone (the model's batch contract; docs/design.md).
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <exception>
#include <mutex>
#include <span>
#include <vector>

#include "models/model.h"

namespace oxi {

class Batcher {
 public:
  explicit Batcher(const Model& model) : model_(model) {}

  // Counts a sequence that will submit steps (a generation in progress): the leader waits for the
  // participants' submissions, not for idle sessions'.
  class Participant {
   public:
    explicit Participant(Batcher* b) : b_(b) {
      if (b_) b_->join(+1);
    }
    ~Participant() {
      if (b_) b_->join(-1);
    }
    Participant(const Participant&) = delete;
    Participant& operator=(const Participant&) = delete;

   private:
    Batcher* b_;
  };

  // Feeds `tokens` to `state` together with the other pending submissions; writes the last
  // token's logits (n_vocab floats), or every token's ([tokens.size(), n_vocab]) when all_logits
  // (a speculative verify step). Throws what the model throws for this submission's batch.
  // Entries that are not plain tokens (images): embd [tokens.size(), n_embd] holds the rows of
  // the entries whose id is negative; pos3 [tokens.size(), 3] explicit mRoPE positions (nullptr:
  // the cache positions), as Batch (models/model.h) takes them. hidden_all (optional,
  // [tokens.size(), n_embd]): every token's final normed hidden state as well (MTP drafting).
  // non_causal: the submission is one image whose rows see each other (Batch::non_causal): it runs
  // in a pass of its own.
  void forward(SequenceState& state, std::span<const int32_t> tokens, float* logits, bool all_logits = false,
               const float* embd = nullptr, const int32_t* pos3 = nullptr, float* hidden_all = nullptr,
               bool non_causal = false);

  // Hidden-state submissions (embeddings): each job feeds `tokens` to its `state` and gets every
  // token's final normed hidden state in `hidden` ([tokens.size(), n_embd], BatchOutput::hidden_all),
  // no logits (the output head is not run for them). The jobs of one call go into the same pass,
  // with whatever else is pending; returns once all are done. Throws the first job's failure.
  struct HiddenJob {
    SequenceState* state = nullptr;
    std::span<const int32_t> tokens;
    float* hidden = nullptr;
  };
  void forward_hidden(std::span<const HiddenJob> jobs);

  // An MTP head's feed (Model::mtp_forward's arguments) together with the other pending head
  // feeds: the sessions drafting at the same time share one pass of the head, so its layer and
  // the output head are read once for all of them. While head feeds are pending, a leader runs
  // only those and leaves trunk steps for the next pass (batcher.cpp says why). Throws what the
  // model throws for this feed.
  void mtp_forward(SequenceState& state, const float* hidden, const int32_t* tokens, int64_t n, float* logits,
                   float* hidden_out);

  // What the batcher has served, for tests and /metrics: trunk passes and the entries (rows) they
  // carried; MTP head passes and the head feeds they served.
  struct Counts {
    uint64_t passes = 0, rows = 0, mtp_passes = 0, mtp_feeds = 0;
  };
  Counts counts() const;
  uint64_t passes() const { return counts().passes; }
  uint64_t rows() const { return counts().rows; }

  // How long a leader waits for missing participants before running what it has.
  std::chrono::microseconds gather_wait{3000};

 private:
  struct Req {
    SequenceState* state = nullptr;
    std::span<const int32_t> tokens;
    const float* embd = nullptr;
    const int32_t* pos3 = nullptr;
    float* logits = nullptr;
    float* hidden = nullptr;  // hidden-state submission: [tokens.size(), n_embd], no logits
    float* hidden_all = nullptr;  // a logits submission that also wants every token's hidden row
    bool all = false;
    bool non_causal = false;
    bool mtp = false;  // an MTP head feed: state, hidden (rows in), tokens, logits, mtp_out
    const float* mtp_hidden = nullptr;
    float* mtp_out = nullptr;
    bool done = false;
    std::exception_ptr error;
  };
  void join(int delta);
  // Queues the requests and serves passes (as leader or not) until all of them are done.
  void submit(std::span<Req> reqs);
  void run(std::vector<Req*>& reqs);
  void run_mtp(std::vector<Req*>& reqs);

  const Model& model_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::vector<Req*> pending_;
  bool running_ = false;
  int participants_ = 0;
  Counts n_;
};

}  // namespace oxi
