#include "nn/recurrent_state.h"

#include <algorithm>
#include <string>

#include "core/error.h"

namespace oxi::nn {

RecurrentState::RecurrentState(int64_t conv_size, int64_t ssm_size, int64_t rec_width, int64_t raw_width, int64_t rollback)
    : conv_(static_cast<size_t>(conv_size), 0.0f),
      ssm_(static_cast<size_t>(ssm_size), 0.0f),
      rollback_(std::max<int64_t>(0, rollback)),
      rec_width_(rec_width),
      raw_width_(raw_width) {
  if (rollback_ > 0) {
    base_conv_.resize(conv_.size());
    base_ssm_.resize(ssm_.size());
    rec_.resize(static_cast<size_t>(rollback_ * rec_width_));
    raw_.resize(static_cast<size_t>(rollback_ * raw_width_));
  }
}

bool RecurrentState::begin_call(int64_t n) {
  rec_n_ = 0;
  if (n <= 1 || n > rollback_) return false;
  std::copy(conv_.begin(), conv_.end(), base_conv_.begin());
  rec_n_ = n;
  return true;
}

void RecurrentState::clear() {
  std::fill(conv_.begin(), conv_.end(), 0.0f);
  std::fill(ssm_.begin(), ssm_.end(), 0.0f);
  rec_n_ = 0;
}

// The record is not saved: a restored state rolls back no further than its own position.
void RecurrentState::save(SnapWriter& w) const {
  w.val<int64_t>(static_cast<int64_t>(conv_.size()));
  w.val<int64_t>(static_cast<int64_t>(ssm_.size()));
  w.put(conv_.data(), conv_.size() * sizeof(float));
  w.put(ssm_.data(), ssm_.size() * sizeof(float));
}

void RecurrentState::load(SnapReader& r) {
  const auto nc = r.val<int64_t>();
  const auto ns = r.val<int64_t>();
  if (nc != static_cast<int64_t>(conv_.size()) || ns != static_cast<int64_t>(ssm_.size()))
    throw_error(ErrorCode::kInvalidArgument, std::string(r.what) + ": snapshot layout does not match this model's recurrent state");
  r.get(conv_.data(), conv_.size() * sizeof(float));
  r.get(ssm_.data(), ssm_.size() * sizeof(float));
  rec_n_ = 0;
}

}  // namespace oxi::nn
