// One recurrent (Gated DeltaNet) layer's state for one sequence: the causal conv's last K−1 input
// rows and the delta-rule state S (per value head dk × dv). Rollback: when the sequence was created
// with rollback R > 0, a forward call of n ≤ R tokens keeps the state it started from (`base`) and
// each token's recurrence inputs (`rec`, written by the model), so truncate() can restore the base
// and replay the accepted tokens — no matmul, no copy of S per token. The model owns the replay
// (it knows the head layout); this class owns the memory.
#pragma once

#include <cstdint>
#include <vector>

#include "nn/kv_cache.h"

namespace oxi::nn {

class RecurrentState {
 public:
  RecurrentState() = default;
  // conv_size: (K−1)·conv_dim floats; ssm_size: Hv·dk·dv floats; rec_width: floats of one token's
  // recurrence inputs (the model's choice); rollback: most tokens one call may undo.
  RecurrentState(int64_t conv_size, int64_t ssm_size, int64_t rec_width, int64_t raw_width, int64_t rollback);

  float* conv() { return conv_.data(); }
  float* ssm() { return ssm_.data(); }
  const float* conv() const { return conv_.data(); }
  const float* ssm() const { return ssm_.data(); }
  int64_t conv_size() const { return static_cast<int64_t>(conv_.size()); }
  int64_t ssm_size() const { return static_cast<int64_t>(ssm_.size()); }

  // A call of n tokens begins: with rollback room (1 < n ≤ rollback) the conv state is saved and
  // the model is asked to keep S's start (base_ssm) and fill rec/raw rows; else the record is
  // dropped. Returns whether the call is recorded. Single-token calls (plain decode) are not:
  // copying S every step would add a tenth to decode's memory traffic, and speculative decoding
  // only ever rolls back its multi-token verify calls.
  bool begin_call(int64_t n);
  bool recording() const { return rec_n_ > 0; }
  int64_t recorded() const { return rec_n_; }
  float* base_ssm() { return base_ssm_.data(); }
  const float* base_conv() const { return base_conv_.data(); }
  float* rec_row(int64_t t) { return rec_.data() + t * rec_width_; }  // token t's recurrence inputs
  float* raw_row(int64_t t) { return raw_.data() + t * raw_width_; }  // token t's raw conv input
  const float* rec_row(int64_t t) const { return rec_.data() + t * rec_width_; }
  const float* raw_row(int64_t t) const { return raw_.data() + t * raw_width_; }
  void drop_record() { rec_n_ = 0; }

  void clear();
  void save(SnapWriter& w) const;
  void load(SnapReader& r);

 private:
  std::vector<float> conv_, ssm_;
  int64_t rollback_ = 0, rec_width_ = 0, raw_width_ = 0, rec_n_ = 0;
  std::vector<float> base_conv_, base_ssm_, rec_, raw_;
};

}  // namespace oxi::nn
