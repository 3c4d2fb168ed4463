#include "nn/kv_cache.h"

#include <algorithm>
#include <string>

#include "core/error.h"
#include "core/half.h"
#include "kernels/dispatch.h"
#include "kernels/quant.h"

namespace oxi::nn {

const char* kv_type_name(KvType t) {
  switch (t) {
    case KvType::kF32: return "f32";
    case KvType::kQ8_0: return "q8_0";
    default: return "f16";
  }
}

bool parse_kv_type(const std::string& s, KvType* out) {
  if (s == "f16") *out = KvType::kF16;
  else if (s == "f32") *out = KvType::kF32;
  else if (s == "q8_0") *out = KvType::kQ8_0;
  else return false;
  return true;
}

size_t kv_row_bytes(KvType t, int64_t width) {
  const auto w = static_cast<size_t>(width);
  switch (t) {
    case KvType::kF32: return w * 4;
    case KvType::kQ8_0: return w / kQ8Values * kQ8Block;
    default: return w * 2;
  }
}

void q8_0_query(const float* q, int64_t hd, uint8_t* qa) {
  kern::active_kernels().act[kern::kAQ8_0](q, qa, hd);  // ggml's quantize_row_q8_0 (q8_0's vec_dot_type)
}

void kq_scores_q8_0(const float* q, int64_t hd, const uint8_t* k0, size_t row_bytes, int64_t n, float scale,
                    float* scores) {
  thread_local std::vector<uint8_t> qa;
  qa.resize(static_cast<size_t>(hd / kQ8Values) * kQ8Block + 64);
  q8_0_query(q, hd, qa.data());
  kq_dot_q8_0(qa.data(), hd, k0, row_bytes, n, scale, scores);
}

void kq_dot_q8_0(const uint8_t* qa, int64_t hd, const uint8_t* k0, size_t row_bytes, int64_t n, float scale,
                 float* scores) {
  const kern::Kernels& K = kern::active_kernels();
  kern::MMArgs a{};
  a.w = k0;
  a.w_stride = row_bytes;
  a.x = qa;
  a.x_stride = static_cast<uint64_t>(hd / kQ8Values) * kQ8Block;
  a.y = scores;
  a.ldy = n;
  a.cols = hd;
  a.r0 = 0;
  a.r1 = n;
  a.t0 = 0;
  a.t1 = 1;
  K.mm[kern::kWQ8_0](a);
  for (int64_t i = 0; i < n; ++i) scores[i] *= scale;
}

void dequant_q8_0(const uint8_t* src, float* dst, int64_t hd) {
  for (int64_t b = 0; b < hd / kQ8Values; ++b) {
    const auto* blk = reinterpret_cast<const kern::BlockQ8_0*>(src + static_cast<size_t>(b) * kQ8Block);
    const float d = f16_to_f32(blk->d);
    for (int64_t i = 0; i < kQ8Values; ++i) dst[b * kQ8Values + i] = static_cast<float>(blk->qs[i]) * d;
  }
}

void SnapReader::get(void* p, size_t n) {
  if (bytes.size() - off < n) throw_error(ErrorCode::kInvalidArgument, std::string(what) + ": snapshot is truncated");
  std::memcpy(p, bytes.data() + off, n);
  off += n;
}

KvCache::KvCache(int64_t width, KvType k, KvType v, int64_t window, int64_t n_ctx, int64_t rollback)
    : width_(width), window_(window), n_ctx_(n_ctx), kt_(k), vt_(v), kb_(kv_row_bytes(k, width)), vb_(kv_row_bytes(v, width)) {
  if ((kv_quantised(k) || kv_quantised(v)) && width % kQ8Values != 0)
    throw_error(ErrorCode::kInvalidArgument, "KV cache type q8_0 needs a row width that is a multiple of 32, not " + std::to_string(width));
  if (ring()) {
    cap_ = std::min(window + std::max<int64_t>(0, rollback), n_ctx);
    k_.assign(static_cast<size_t>(cap_) * kb_, 0);
    v_.assign(static_cast<size_t>(cap_) * vb_, 0);
  }
}

void KvCache::reserve(int64_t need) {
  if (ring() || width_ == 0 || cap_ >= need) return;
  const int64_t cap = std::max<int64_t>(need, std::min<int64_t>(n_ctx_, std::max<int64_t>(64, cap_ * 2)));
  k_.resize(static_cast<size_t>(cap) * kb_);
  v_.resize(static_cast<size_t>(cap) * vb_);
  cap_ = cap;
}

void kv_convert_row(KvType t, const float* x, int64_t width, uint8_t* dst) {
  switch (t) {
    case KvType::kF32:
      std::memcpy(dst, x, static_cast<size_t>(width) * 4);
      break;
    case KvType::kQ8_0:
      // ggml's CPU set_rows converts with the type's from_float: the SIMD quantize_row_q8_0,
      // whose bytes the activation quantiser reproduces on every ISA.
      kern::active_kernels().act[kern::kAQ8_0](x, dst, width);
      break;
    default: {
      auto* d16 = reinterpret_cast<uint16_t*>(dst);
      for (int64_t i = 0; i < width; ++i) d16[i] = f32_to_f16(x[i]);
    }
  }
}

void KvCache::store_row(KvType t, const float* x, uint8_t* dst) const { kv_convert_row(t, x, width_, dst); }

void KvCache::store(int64_t pos, const float* k, const float* v) {
  store_row(kt_, k, k_row(pos));
  store_row(vt_, v, v_row(pos));
}

void KvCache::store_raw(int64_t pos, const void* k, const void* v) {
  std::memcpy(k_row(pos), k, kb_);
  std::memcpy(v_row(pos), v, vb_);
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

// Storage byte of a snapshot: 0 f16, 1 f32 (the layout before q8_0, unchanged), else
// 0x80 | K type | V type << 2.
static uint8_t storage_code(KvType k, KvType v) {
  if (k == v && !kv_quantised(k)) return k == KvType::kF32 ? 1 : 0;
  return static_cast<uint8_t>(0x80 | static_cast<int>(k) | static_cast<int>(v) << 2);
}

// Layout: width, ring flag, storage byte, rows; then rows of K, rows of V. A ring saves all of its
// slots (restore is bit-identical), a full cache its first n_past rows.
void KvCache::save(SnapWriter& w, int64_t n_past) const {
  w.val<int64_t>(width_);
  w.val<uint8_t>(ring() ? 1 : 0);
  w.val<uint8_t>(storage_code(kt_, vt_));
  const int64_t rows = ring() ? cap_ : (width_ == 0 ? 0 : n_past);
  w.val<int64_t>(rows);
  w.put(k_.data(), static_cast<size_t>(rows) * kb_);
  w.put(v_.data(), static_cast<size_t>(rows) * vb_);
}

void KvCache::load(SnapReader& r, int64_t n_past) {
  const auto width = r.val<int64_t>();
  const auto ring_flag = r.val<uint8_t>();
  const auto code = r.val<uint8_t>();
  const auto rows = r.val<int64_t>();
  if (width != width_ || (ring_flag != 0) != ring() || code != storage_code(kt_, vt_) ||
      rows != (ring() ? cap_ : (width_ == 0 ? 0 : n_past)))
    throw_error(ErrorCode::kInvalidArgument, std::string(r.what) + ": snapshot layout does not match this model's cache");
  const size_t nk = static_cast<size_t>(rows) * kb_, nv = static_cast<size_t>(rows) * vb_;
  if (r.left() < nk + nv) throw_error(ErrorCode::kInvalidArgument, std::string(r.what) + ": snapshot is truncated");
  if (!ring()) {
    k_.resize(nk);
    v_.resize(nv);
    cap_ = rows;
  }
  r.get(k_.data(), nk);
  r.get(v_.data(), nv);
}

}  // namespace oxi::nn
