#include "nn/kv_cache.h"

#include <algorithm>
#include <string>

#include "core/error.h"
#include "core/half.h"

namespace oxi::nn {

void SnapReader::get(void* p, size_t n) {
  if (bytes.size() - off < n) throw_error(ErrorCode::kInvalidArgument, std::string(what) + ": snapshot is truncated");
  std::memcpy(p, bytes.data() + off, n);
  off += n;
}

KvCache::KvCache(int64_t width, bool f32, int64_t window, int64_t n_ctx, int64_t rollback)
    : width_(width), window_(window), n_ctx_(n_ctx), f32_(f32) {
  if (ring()) {
    cap_ = std::min(window + std::max<int64_t>(0, rollback), n_ctx);
    k_.assign(static_cast<size_t>(cap_) * row_bytes(), 0);
    v_.assign(k_.size(), 0);
  }
}

void KvCache::reserve(int64_t need) {
  if (ring() || width_ == 0 || cap_ >= need) return;
  const int64_t cap = std::max<int64_t>(need, std::min<int64_t>(n_ctx_, std::max<int64_t>(64, cap_ * 2)));
  k_.resize(static_cast<size_t>(cap) * row_bytes());
  v_.resize(k_.size());
  cap_ = cap;
}

void KvCache::store(int64_t pos, const float* k, const float* v) {
  uint8_t* kd = k_row(pos);
  uint8_t* vd = v_row(pos);
  if (f32_) {
    std::memcpy(kd, k, row_bytes());
    std::memcpy(vd, v, row_bytes());
    return;
  }
  auto* k16 = reinterpret_cast<uint16_t*>(kd);
  auto* v16 = reinterpret_cast<uint16_t*>(vd);
  for (int64_t i = 0; i < width_; ++i) {
    k16[i] = f32_to_f16(k[i]);
    v16[i] = f32_to_f16(v[i]);
  }
}

void KvCache::store_raw(int64_t pos, const void* k, const void* v) {
  std::memcpy(k_row(pos), k, row_bytes());
  std::memcpy(v_row(pos), v, row_bytes());
}

bool KvCache::can_truncate(int64_t n_past, int64_t n) const {
  if (n < 0 || n > n_past) return false;
  if (!ring() || n == 0) return true;
  const int64_t need_from = std::max<int64_t>(0, n - window_ + 1);
  return need_from >= oldest(n_past);
}

void KvCache::clear() {
  if (ring()) {
    std::fill(k_.begin(), k_.end(), uint8_t{0});
    std::fill(v_.begin(), v_.end(), uint8_t{0});
    return;
  }
  k_.clear();
  k_.shrink_to_fit();
  v_.clear();
  v_.shrink_to_fit();
  cap_ = 0;
}

// Layout: width, ring flag, storage flag, rows; then rows of K, rows of V. A ring saves all of its
// slots (restore is bit-identical), a full cache its first n_past rows.
void KvCache::save(SnapWriter& w, int64_t n_past) const {
  w.val<int64_t>(width_);
  w.val<uint8_t>(ring() ? 1 : 0);
  w.val<uint8_t>(f32_ ? 1 : 0);
  const int64_t rows = ring() ? cap_ : (width_ == 0 ? 0 : n_past);
  w.val<int64_t>(rows);
  w.put(k_.data(), static_cast<size_t>(rows) * row_bytes());
  w.put(v_.data(), static_cast<size_t>(rows) * row_bytes());
}

void KvCache::load(SnapReader& r, int64_t n_past) {
  const auto width = r.val<int64_t>();
  const auto ring_flag = r.val<uint8_t>();
  const auto f32_flag = r.val<uint8_t>();
  const auto rows = r.val<int64_t>();
  if (width != width_ || (ring_flag != 0) != ring() || (f32_flag != 0) != f32_ ||
      rows != (ring() ? cap_ : (width_ == 0 ? 0 : n_past)))
    throw_error(ErrorCode::kInvalidArgument, std::string(r.what) + ": snapshot layout does not match this model's cache");
  const size_t n = static_cast<size_t>(rows) * row_bytes();
  if (r.left() < 2 * n) throw_error(ErrorCode::kInvalidArgument, std::string(r.what) + ": snapshot is truncated");
  if (!ring()) {
    k_.resize(n);
    v_.resize(n);
    cap_ = rows;
  }
  r.get(k_.data(), n);
  r.get(v_.data(), n);
}

}  // namespace oxi::nn
