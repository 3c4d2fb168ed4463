// One attention layer's K and V for one sequence, shared by every family: full caches (grown on
// demand up to the context) and sliding-window rings (position p in slot p % cap), stored as f16
// (llama.cpp's default cache type) or f32 (LoadOptions::kv_f32). A row holds one position's
// `width` values (KV heads × head size) of K, and one of V.
//
// A ring keeps `rollback` slots more than its window so that truncate() can go back that many
// tokens and still find every key the next query attends to.
#pragma once

#include <cstdint>
#include <cstring>
#include <span>
#include <vector>

namespace oxi::nn {

// Appends bytes to a snapshot, and reads them back with bounds checks (oxi::Error
// kInvalidArgument "<what>: snapshot is truncated").
struct SnapWriter {
  std::vector<uint8_t>& out;
  void put(const void* p, size_t n) {
    const auto* b = static_cast<const uint8_t*>(p);
    out.insert(out.end(), b, b + n);
  }
  template <class T>
  void val(const T& v) { put(&v, sizeof v); }
};
struct SnapReader {
  std::span<const uint8_t> bytes;
  const char* what;
  size_t off = 0;
  void get(void* p, size_t n);
  template <class T>
  T val() {
    T v{};
    get(&v, sizeof v);
    return v;
  }
  size_t left() const { return bytes.size() - off; }
};

class KvCache {
 public:
  KvCache() = default;
  // window 0: a full cache. n_ctx bounds a full cache's growth and a ring's slots.
  KvCache(int64_t width, bool f32, int64_t window, int64_t n_ctx, int64_t rollback);

  int64_t width() const { return width_; }
  bool f32() const { return f32_; }
  bool ring() const { return window_ > 0; }
  int64_t window() const { return window_; }
  int64_t cap() const { return cap_; }
  size_t esz() const { return f32_ ? 4 : 2; }
  size_t row_bytes() const { return static_cast<size_t>(width_) * esz(); }

  // Full caches: room for positions < n_pos (capacity doubles, at most n_ctx). Rings: no-op.
  void reserve(int64_t n_pos);
  int64_t slot(int64_t pos) const { return ring() ? pos % cap_ : pos; }
  const uint8_t* k_row(int64_t pos) const { return k_.data() + static_cast<size_t>(slot(pos)) * row_bytes(); }
  const uint8_t* v_row(int64_t pos) const { return v_.data() + static_cast<size_t>(slot(pos)) * row_bytes(); }
  uint8_t* k_row(int64_t pos) { return k_.data() + static_cast<size_t>(slot(pos)) * row_bytes(); }
  uint8_t* v_row(int64_t pos) { return v_.data() + static_cast<size_t>(slot(pos)) * row_bytes(); }
  // f32 storage of a full cache: rows [0, n) as one contiguous [n, width] array.
  const float* k_f32() const { return reinterpret_cast<const float*>(k_.data()); }
  const float* v_f32() const { return reinterpret_cast<const float*>(v_.data()); }
  // Stores one position's K and V rows (width floats each), converted to the storage type.
  void store(int64_t pos, const float* k, const float* v);
  // Stores already converted rows (row_bytes each).
  void store_raw(int64_t pos, const void* k, const void* v);

  // Oldest position still held when n_past positions have been written.
  int64_t oldest(int64_t n_past) const { return ring() && n_past > cap_ ? n_past - cap_ : 0; }
  // Whether the cache can go back from n_past to n: the next query (at n) must find keys
  // n - window + 1 … n - 1.
  bool can_truncate(int64_t n_past, int64_t n) const;

  void clear();
  void save(SnapWriter& w, int64_t n_past) const;
  void load(SnapReader& r, int64_t n_past);
  size_t bytes() const { return k_.capacity() + v_.capacity(); }

 private:
  int64_t width_ = 0, window_ = 0, n_ctx_ = 0, cap_ = 0;
  bool f32_ = false;
  std::vector<uint8_t> k_, v_;  // [cap, width] values each
};

}  // namespace oxi::nn
