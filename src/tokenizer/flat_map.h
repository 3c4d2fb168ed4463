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

// uint64 key -> uint64 value. Key ~0 is reserved (empty).
class U64Map {
 public:
  void reserve(size_t n) {
    const size_t cap = table_size_for(n);
    keys_.assign(cap, kEmpty);
    vals_.assign(cap, 0);
    mask_ = cap - 1;
  }
  // Inserts if absent; returns false when the key existed (value kept).
  bool insert(uint64_t key, uint64_t val) {
    size_t i = mix64(key) & mask_;
    while (keys_[i] != kEmpty) {
      if (keys_[i] == key) return false;
      i = (i + 1) & mask_;
    }
    keys_[i] = key;
    vals_[i] = val;
    return true;
  }
  const uint64_t* find(uint64_t key) const {
    if (keys_.empty()) return nullptr;
    size_t i = mix64(key) & mask_;
    while (keys_[i] != kEmpty) {
      if (keys_[i] == key) return &vals_[i];
      i = (i + 1) & mask_;
    }
    return nullptr;
  }

 private:
  static constexpr uint64_t kEmpty = ~0ULL;
  std::vector<uint64_t> keys_;
  std::vector<uint64_t> vals_;
  size_t mask_ = 0;
};

// string -> int32 id, where the strings are owned elsewhere (looked up through `text(id)`).
template <class TextOf>
class StrIdMap {
 public:
  explicit StrIdMap(TextOf text_of) : text_of_(text_of) {}
  void reserve(size_t n) {
    const size_t cap = table_size_for(n);
    ids_.assign(cap, -1);
    tags_.assign(cap, 0);
    mask_ = cap - 1;
  }
  // First id wins for duplicate texts.
  void insert(std::string_view s, int32_t id) {
    const uint64_t h = hash_bytes(s.data(), s.size());
    size_t i = h & mask_;
    const auto tag = static_cast<uint32_t>(h >> 32);
    while (ids_[i] >= 0) {
      if (tags_[i] == tag && text_of_(ids_[i]) == s) return;
      i = (i + 1) & mask_;
    }
    ids_[i] = id;
    tags_[i] = tag;
  }
  int32_t find(std::string_view s) const {
    if (ids_.empty()) return -1;
    const uint64_t h = hash_bytes(s.data(), s.size());
    size_t i = h & mask_;
    const auto tag = static_cast<uint32_t>(h >> 32);
    while (ids_[i] >= 0) {
      if (tags_[i] == tag && text_of_(ids_[i]) == s) return ids_[i];
      i = (i + 1) & mask_;
    }
    return -1;
  }

 private:
  TextOf text_of_;
  std::vector<int32_t> ids_;
  std::vector<uint32_t> tags_;
  size_t mask_ = 0;
};

}  // namespace oxi::tok
