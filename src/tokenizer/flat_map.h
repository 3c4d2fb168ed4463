// Small open-addressing hash tables used by the tokenizer (faster to build and probe than
// std::unordered_map for the 262k-entry vocabularies and 515k merges).
#pragma once

#include <cstdint>
#include <cstring>
#include <string_view>
#include <vector>

namespace oxi::tok {

inline uint64_t mix64(uint64_t x) {
  x ^= x >> 33;
  x *= 0xff51afd7ed558ccdULL;
  x ^= x >> 33;
  x *= 0xc4ceb9fe1a85ec53ULL;
  x ^= x >> 33;
  return x;
}

inline uint64_t hash_bytes(const char* p, size_t n) {
  uint64_t h = 0x9E3779B97F4A7C15ULL ^ (n * 0x100000001B3ULL);
  while (n >= 8) {
    uint64_t v;
    std::memcpy(&v, p, 8);
    h = (h ^ mix64(v)) * 0x100000001B3ULL;
    p += 8;
    n -= 8;
  }
  uint64_t v = 0;
  std::memcpy(&v, p, n);
  h = (h ^ mix64(v ^ (static_cast<uint64_t>(n) << 56))) * 0x100000001B3ULL;
  return mix64(h);
}

inline size_t table_size_for(size_t n) {
  size_t cap = 16;
  while (cap < n * 2) cap <<= 1;
  return cap;
}

inline void prefetch(const void* p) {
#if defined(__GNUC__) || defined(__clang__)
  __builtin_prefetch(p);
#else
  (void)p;
#endif
}

// uint64 key -> uint64 value. Key ~0 is reserved (empty).
class U64Map {
 public:
  void reserve(size_t n) {
    const size_t cap = table_size_for(n);
    slots_.assign(cap, Slot{kEmpty, 0});
    mask_ = cap - 1;
  }
  void prefetch_key(uint64_t key) const { prefetch(&slots_[mix64(key) & mask_]); }
  // Inserts if absent; returns false when the key existed (value kept).
  bool insert(uint64_t key, uint64_t val) {
    size_t i = mix64(key) & mask_;
    while (slots_[i].key != kEmpty) {
      if (slots_[i].key == key) return false;
      i = (i + 1) & mask_;
    }
    slots_[i] = Slot{key, val};
    return true;
  }
  const uint64_t* find(uint64_t key) const {
    if (slots_.empty()) return nullptr;
    size_t i = mix64(key) & mask_;
    while (slots_[i].key != kEmpty) {
      if (slots_[i].key == key) return &slots_[i].val;
      i = (i + 1) & mask_;
    }
    return nullptr;
  }

 private:
  struct Slot { uint64_t key, val; };
  static constexpr uint64_t kEmpty = ~0ULL;
  std::vector<Slot> slots_;
  size_t mask_ = 0;
};

// string -> int32 id, where the strings are owned elsewhere (looked up through `text(id)`).
// Each slot keeps the full 64-bit hash: find() still compares the text; find_hashed() trusts the
// hash (used only at load time to resolve merges, see docs/tokenizer.md).
template <class TextOf>
class StrIdMap {
 public:
  explicit StrIdMap(TextOf text_of) : text_of_(text_of) {}
  void reserve(size_t n) {
    const size_t cap = table_size_for(n);
    slots_.assign(cap, Slot{0, -1});
    mask_ = cap - 1;
  }
  static uint64_t hash(std::string_view s) { return hash_bytes(s.data(), s.size()); }
  void prefetch_hash(uint64_t h) const { prefetch(&slots_[h & mask_]); }
  // First id wins for duplicate texts.
  void insert(std::string_view s, int32_t id) {
    const uint64_t h = hash(s);
    size_t i = h & mask_;
    while (slots_[i].id >= 0) {
      if (slots_[i].hash == h) {
        if (text_of_(slots_[i].id) == s) return;
        collisions_ = true;
      }
      i = (i + 1) & mask_;
    }
    slots_[i] = Slot{h, id};
  }
  int32_t find(std::string_view s) const { return find(s, hash(s)); }
  int32_t find(std::string_view s, uint64_t h) const {
    if (slots_.empty()) return -1;
    size_t i = h & mask_;
    while (slots_[i].id >= 0) {
      if (slots_[i].hash == h && text_of_(slots_[i].id) == s) return slots_[i].id;
      i = (i + 1) & mask_;
    }
    return -1;
  }
  // Lookup by hash alone; falls back to comparing text when two vocabulary entries share a hash.
  int32_t find_hashed(std::string_view s, uint64_t h) const {
    if (collisions_) return find(s, h);
    if (slots_.empty()) return -1;
    size_t i = h & mask_;
    while (slots_[i].id >= 0) {
      if (slots_[i].hash == h) return slots_[i].id;
      i = (i + 1) & mask_;
    }
    return -1;
  }

 private:
  struct Slot { uint64_t hash; int32_t id; };
  TextOf text_of_;
  std::vector<Slot> slots_;
  size_t mask_ = 0;
  bool collisions_ = false;
};

}  // namespace oxi::tok
