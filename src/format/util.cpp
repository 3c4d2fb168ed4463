#include "format/util.h"

namespace oxi::fmt {

bool valid_utf8(std::string_view s) {
  const auto* p = reinterpret_cast<const unsigned char*>(s.data());
  const size_t n = s.size();
  size_t i = 0;
  while (i < n) {
    const unsigned c = p[i];
    if (c < 0x80) {
      ++i;
      continue;
    }
    size_t len;
    uint32_t cp;
    if (c >= 0xC2 && c <= 0xDF) {
      len = 2;
      cp = c & 0x1F;
    } else if (c >= 0xE0 && c <= 0xEF) {
      len = 3;
      cp = c & 0x0F;
    } else if (c >= 0xF0 && c <= 0xF4) {
      len = 4;
      cp = c & 0x07;
    } else {
      return false;
    }
    if (n - i < len) return false;
    for (size_t k = 1; k < len; ++k) {
      const unsigned cc = p[i + k];
      if ((cc & 0xC0) != 0x80) return false;
      cp = (cp << 6) | (cc & 0x3F);
    }
    if ((len == 3 && cp < 0x800) || (len == 4 && cp < 0x10000) || cp > 0x10FFFF ||
        (cp >= 0xD800 && cp <= 0xDFFF)) {
      return false;
    }
    i += len;
  }
  return true;
}

std::string printable(std::string_view s, size_t max_len) {
  static const char* kHex = "0123456789abcdef";
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (out.size() >= max_len) {
      out += "...";
      break;
    }
    const unsigned char c = static_cast<unsigned char>(s[i]);
    if (c >= 0x20 && c < 0x7f && c != '\\') {
      out += static_cast<char>(c);
    } else if (c >= 0x80) {
      out += static_cast<char>(c);  // UTF-8 is checked separately; keep non-ASCII names readable
    } else {
      out += "\\x";
      out += kHex[c >> 4];
      out += kHex[c & 15];
    }
  }
  return out;
}

std::optional<uint64_t> mul_u64(uint64_t a, uint64_t b) {
  if (a != 0 && b > ~0ull / a) return std::nullopt;
  return a * b;
}

std::optional<uint64_t> add_u64(uint64_t a, uint64_t b) {
  if (b > ~0ull - a) return std::nullopt;
  return a + b;
}

std::optional<uint64_t> tensor_nbytes(DType dtype, const std::vector<int64_t>& shape,
                                      std::string* why) {
  auto tr = dtype_traits(dtype);
  if (!tr) {
    if (why) *why = "unknown type " + dtype_name(dtype);
    return std::nullopt;
  }
  // Element count must fit in int64 (TensorInfo::n_elements returns int64).
  uint64_t elems = 1;
  for (int64_t d : shape) {
    if (d < 0) {
      if (why) *why = "negative dimension " + std::to_string(d);
      return std::nullopt;
    }
    auto m = mul_u64(elems, static_cast<uint64_t>(d));
    if (!m || *m > static_cast<uint64_t>(INT64_MAX)) {
      if (why) *why = "element count overflows";
      return std::nullopt;
    }
    elems = *m;
  }
  const uint64_t inner = shape.empty() ? 1 : static_cast<uint64_t>(shape.back());
  if (inner % tr->block_elems != 0) {
    if (why) {
      *why = "row length " + std::to_string(inner) + " is not a multiple of the " +
             std::string(tr->name) + " block size " + std::to_string(tr->block_elems);
    }
    return std::nullopt;
  }
  auto bytes = mul_u64(elems / tr->block_elems, tr->block_bytes);
  if (!bytes) {
    if (why) *why = "byte size overflows";
    return std::nullopt;
  }
  return bytes;
}

std::string join_path(const std::string& dir, const std::string& name) {
  if (dir.empty()) return name;
  if (dir.back() == '/') return dir + name;
  return dir + "/" + name;
}

}  // namespace oxi::fmt
