// Model::forward_batch: validation of a batch and its split into passes of at most kMaxUbatch
// entries; the families only see validated passes (Model::run).
#include "models/model.h"

#include <algorithm>
#include <string>

#include "core/byte_source.h"
#include "core/error.h"
#include "kernels/matmul.h"

namespace oxi {

void Model::forward_batch(std::span<SequenceState* const> states, const Batch& b, const BatchOutput& out) const {
  if (b.n <= 0) return;
  const ModelInfo& mi = info();
  const int64_t n_states = static_cast<int64_t>(states.size());
  if (n_states == 0) throw_error(ErrorCode::kInvalidArgument, "forward: a batch needs at least one sequence state");
  for (int64_t s = 0; s < n_states; ++s) {
    if (!states[static_cast<size_t>(s)]) throw_error(ErrorCode::kInvalidArgument, "forward: sequence state " + std::to_string(s) + " is null");
    for (int64_t r = 0; r < s; ++r)
      if (states[static_cast<size_t>(r)] == states[static_cast<size_t>(s)])
        throw_error(ErrorCode::kInvalidArgument, "forward: one sequence state is named twice in a batch");
  }
  // Segments over the whole batch (one per sequence), checked before any state changes.
  std::vector<int64_t> count(static_cast<size_t>(n_states), 0);
  std::vector<uint8_t> closed(static_cast<size_t>(n_states), 0);
  int32_t prev = -1;
  for (int64_t i = 0; i < b.n; ++i) {
    const int32_t s = b.seq ? b.seq[i] : 0;
    if (s < 0 || s >= n_states)
      throw_error(ErrorCode::kInvalidArgument, "forward: entry " + std::to_string(i) + " names sequence " + std::to_string(s) +
                                                   " of " + std::to_string(n_states));
    if (s != prev) {
      if (prev >= 0) closed[static_cast<size_t>(prev)] = 1;
      if (closed[static_cast<size_t>(s)])
        throw_error(ErrorCode::kInvalidArgument, "forward: the entries of sequence " + std::to_string(s) + " are not contiguous");
      prev = s;
    }
    ++count[static_cast<size_t>(s)];
    const int32_t t = b.token ? b.token[i] : -1;
    if (t >= mi.n_vocab)
      throw_error(ErrorCode::kInvalidArgument, "token id " + std::to_string(t) + " is out of range [0, " + std::to_string(mi.n_vocab) + ")");
    if (t < 0 && !b.embd)
      throw_error(ErrorCode::kInvalidArgument,
                  b.token ? "token id " + std::to_string(t) + " is out of range [0, " + std::to_string(mi.n_vocab) + ")"
                          : std::string("forward: entry ") + std::to_string(i) + " has neither a token nor an embedding row");
  }
  for (int64_t s = 0; s < n_states; ++s) {
    const SequenceState& st = *states[static_cast<size_t>(s)];
    if (st.n_past() + count[static_cast<size_t>(s)] > st.n_ctx())
      throw_error(ErrorCode::kInvalidArgument, "context overflow: " + std::to_string(st.n_past()) + " + " +
                                                   std::to_string(count[static_cast<size_t>(s)]) +
                                                   " tokens exceed the context size " + std::to_string(st.n_ctx()));
  }
  if (b.non_causal && !non_causal_ok())
    throw_error(ErrorCode::kUnsupported, mi.arch + ": this model (or its device) has no non-causal attention");
  if (b.non_causal && b.n > kMaxUbatch)
    throw_error(ErrorCode::kInvalidArgument, "forward: a non-causal batch of " + std::to_string(b.n) +
                                                 " entries exceeds one pass (" + std::to_string(kMaxUbatch) + ")");
  // Passes of at most kMaxUbatch entries.
  std::vector<int32_t> pos_buf;
  BatchOutput o = out;
  for (int64_t e0 = 0; e0 < b.n; e0 += kMaxUbatch) {
    Pass p;
    p.n = std::min(kMaxUbatch, b.n - e0);
    p.token = b.token ? b.token + e0 : nullptr;
    p.embd = b.embd ? b.embd + e0 * mi.n_embd : nullptr;
    p.pos3 = b.pos3 ? b.pos3 + 3 * e0 : nullptr;
    p.non_causal = b.non_causal;
    for (int64_t i = 0; i < p.n; ++i) {
      const int32_t s = b.seq ? b.seq[e0 + i] : 0;
      if (p.segs.empty() || p.segs.back().state != s) {
        Segment g;
        g.state = s;
        g.row0 = i;
        g.pos0 = states[static_cast<size_t>(s)]->n_past();
        p.segs.push_back(g);
      }
      ++p.segs.back().n;
      p.seg_of.push_back(static_cast<int32_t>(p.segs.size() - 1));
      const bool last_of_seq = e0 + i + 1 == b.n || (b.seq ? b.seq[e0 + i + 1] : 0) != s;
      if (b.output ? b.output[e0 + i] != 0 : last_of_seq) p.out_rows.push_back(i);
    }
    if (b.pos) {
      p.pos = b.pos + e0;
    } else {
      pos_buf.resize(static_cast<size_t>(p.n));
      for (const Segment& g : p.segs)
        for (int64_t i = 0; i < g.n; ++i) pos_buf[static_cast<size_t>(g.row0 + i)] = static_cast<int32_t>(g.pos0 + i);
      p.pos = pos_buf.data();
    }
    run(states, p, o);
    // A weight file truncated on disk while mapped read as zeros (core/byte_source.h): fail.
    if (const std::string f = damaged_mapped_file(); !f.empty()) {
      throw_error(ErrorCode::kIo, f + ": the file was truncated on disk while in use; restart with an intact file");
    }
    const int64_t n_out = static_cast<int64_t>(p.out_rows.size());
    if (o.logits) o.logits += n_out * mi.n_vocab;
    if (o.hidden) o.hidden += n_out * mi.n_embd;
    if (o.hidden_all) o.hidden_all += p.n * mi.n_embd;
  }
}

std::unique_ptr<SequenceState> Model::new_mtp_state(int64_t) const {
  throw_error(ErrorCode::kUnsupported, info().arch + ": this model has no MTP head");
}

void Model::mtp_forward(SequenceState&, const float*, const int32_t*, int64_t, float*, float*) const {
  throw_error(ErrorCode::kUnsupported, info().arch + ": this model has no MTP head");
}

void Model::check_mtp_jobs(std::span<const MtpJob> jobs) const {
  if (!has_mtp()) throw_error(ErrorCode::kUnsupported, info().arch + ": this model has no MTP head");
  const int64_t V = info().n_vocab;
  for (size_t i = 0; i < jobs.size(); ++i) {
    const MtpJob& j = jobs[i];
    if (!j.state || j.n < 0 || (j.n > 0 && (!j.hidden || !j.tokens)))
      throw_error(ErrorCode::kInvalidArgument, "MTP batch: job " + std::to_string(i) + " is incomplete");
    if (j.state->n_past() + j.n > j.state->n_ctx())
      throw_error(ErrorCode::kInvalidArgument, "MTP context overflow: " + std::to_string(j.state->n_past()) + " + " +
                                                   std::to_string(j.n) + " exceed " + std::to_string(j.state->n_ctx()));
    for (int64_t t = 0; t < j.n; ++t)
      if (j.tokens[t] < 0 || j.tokens[t] >= V) throw_error(ErrorCode::kInvalidArgument, "MTP: token id out of range");
    for (size_t k = 0; k < i; ++k)
      if (jobs[k].state == j.state) throw_error(ErrorCode::kInvalidArgument, "MTP batch: a state is named twice");
  }
}

void Model::mtp_forward_batch(std::span<const MtpJob> jobs) const {
  check_mtp_jobs(jobs);
  for (const MtpJob& j : jobs)
    if (j.n > 0) mtp_forward(*j.state, j.hidden, j.tokens, j.n, j.logits, j.hidden_out);
}

int64_t Model::exact_batch_tokens() const {
  int64_t n = kMaxUbatch;
  for (DType t : weight_types_) n = std::min(n, matmul_exact_tokens(t));
  return std::max<int64_t>(1, n);
}

void Model::forward(SequenceState& state, std::span<const int32_t> tokens, float* logits, bool all_logits,
                    float* hidden_all) const {
  if (tokens.empty()) return;
  SequenceState* st[1] = {&state};
  std::vector<uint8_t> want;
  Batch b;
  b.n = static_cast<int64_t>(tokens.size());
  b.token = tokens.data();
  if (all_logits) {
    want.assign(tokens.size(), 1);
    b.output = want.data();
  }
  BatchOutput o;
  o.logits = logits;
  o.hidden_all = hidden_all;
  forward_batch(st, b, o);
}

}  // namespace oxi
