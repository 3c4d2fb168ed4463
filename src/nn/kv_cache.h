// One attention layer's K and V for one sequence, shared by every family: full caches (grown on
// demand up to the context) and sliding-window rings (position p in slot p % cap). K and V each
// have a storage type (llama.cpp's --cache-type-k / -v): f16 (the default), f32, or q8_0 (ggml's
// block_q8_0: 32 values per 34-byte block, an f16 scale and 32 int8; quantised as ggml's CPU
// set_rows does, i.e. the activation flavour ref_quantize_act_q8_0). A row holds one position's
// `width` values (KV heads × head size) of K, and one of V; with q8_0 a head of hd values is
// hd / 32 blocks at byte offset head · hd / 32 · 34.
//
// A ring keeps `rollback` slots more than its window so that truncate() can go back that many
// tokens and still find every key the next query attends to.
#pragma once

#include <cstdint>
#include <cstring>
#include <span>
#include <string>
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

// A cache row's storage type (LoadOptions::cache_type_k / cache_type_v).
enum class KvType : uint8_t { kF16 = 0, kF32 = 1, kQ8_0 = 2 };
// "f16" / "f32" / "q8_0" (lower case, llama.cpp's spelling); parse returns false on anything else.
const char* kv_type_name(KvType t);
bool parse_kv_type(const std::string& s, KvType* out);
inline bool kv_quantised(KvType t) { return t == KvType::kQ8_0; }
// Bytes of `width` values of type t (q8_0: width a multiple of 32).
size_t kv_row_bytes(KvType t, int64_t width);
// Bytes of one q8_0 block (ggml's block_q8_0) and values per block.
constexpr size_t kQ8Block = 34;
constexpr int64_t kQ8Values = 32;

// scores[i] = scale · dot(K row i's head, q) for i < n, as ggml's CPU attention scores a q8_0 K
// cache: q (hd values, hd a multiple of 32) quantised to Q8_0 by ggml's activation quantiser (the
// vec_dot_type of q8_0), then the Q8_0 × Q8_0 dot (this ISA's kernel). k0: the head's first
// block in row 0; rows `row_bytes` apart. Single-threaded (called from inside pool jobs).
void kq_scores_q8_0(const float* q, int64_t hd, const uint8_t* k0, size_t row_bytes, int64_t n, float scale,
                    float* scores);
// Its two steps: the query as Q8_0 blocks (hd / 32 · 34 bytes at qa), and the dots with n rows.
void q8_0_query(const float* q, int64_t hd, uint8_t* qa);
void kq_dot_q8_0(const uint8_t* qa, int64_t hd, const uint8_t* k0, size_t row_bytes, int64_t n, float scale,
                 float* scores);
// width values of x converted to storage type t at dst (kv_row_bytes(t, width) bytes).
void kv_convert_row(KvType t, const float* x, int64_t width, uint8_t* dst);
// hd values of a q8_0 row head back to f32 (value = qs · d, exact).
void dequant_q8_0(const uint8_t* src, float* dst, int64_t hd);

class KvCache {
 public:
  KvCache() = default;
  // window 0: a full cache. n_ctx bounds a full cache's growth and a ring's slots.
  KvCache(int64_t width, KvType k, KvType v, int64_t window, int64_t n_ctx, int64_t rollback);
  KvCache(int64_t width, bool f32, int64_t window, int64_t n_ctx, int64_t rollback)
      : KvCache(width, f32 ? KvType::kF32 : KvType::kF16, f32 ? KvType::kF32 : KvType::kF16, window, n_ctx, rollback) {}

  int64_t width() const { return width_; }
  KvType k_type() const { return kt_; }
  KvType v_type() const { return vt_; }
  bool f32() const { return kt_ == KvType::kF32 && vt_ == KvType::kF32; }
  bool ring() const { return window_ > 0; }
  int64_t window() const { return window_; }
  int64_t cap() const { return cap_; }
  // Element size of f16 / f32 storage where K and V share it (callers that read raw rows).
  size_t esz() const { return kt_ == KvType::kF32 ? 4 : 2; }
  size_t row_bytes() const { return kb_; }  // K row bytes (= V's unless the types differ)
  size_t k_row_bytes() const { return kb_; }
  size_t v_row_bytes() const { return vb_; }

  // Full caches: room for positions < n_pos (capacity doubles, at most n_ctx). Rings: no-op.
  void reserve(int64_t n_pos);
  int64_t slot(int64_t pos) const { return ring() ? pos % cap_ : pos; }
  const uint8_t* k_row(int64_t pos) const { return k_.data() + static_cast<size_t>(slot(pos)) * kb_; }
  const uint8_t* v_row(int64_t pos) const { return v_.data() + static_cast<size_t>(slot(pos)) * vb_; }
  uint8_t* k_row(int64_t pos) { return k_.data() + static_cast<size_t>(slot(pos)) * kb_; }
  uint8_t* v_row(int64_t pos) { return v_.data() + static_cast<size_t>(slot(pos)) * vb_; }
  // f32 storage of a full cache: rows [0, n) as one contiguous [n, width] array.
  const float* k_f32() const { return reinterpret_cast<const float*>(k_.data()); }
  const float* v_f32() const { return reinterpret_cast<const float*>(v_.data()); }
  // Stores one position's K and V rows (width floats each), converted to the storage type.
  void store(int64_t pos, const float* k, const float* v);
  // Stores already converted rows (k_row_bytes / v_row_bytes each).
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
  void store_row(KvType t, const float* x, uint8_t* dst) const;

  int64_t width_ = 0, window_ = 0, n_ctx_ = 0, cap_ = 0;
  KvType kt_ = KvType::kF16, vt_ = KvType::kF16;
  size_t kb_ = 0, vb_ = 0;      // bytes of a K row, of a V row
  std::vector<uint8_t> k_, v_;  // [cap] rows each
};

}  // namespace oxi::nn
