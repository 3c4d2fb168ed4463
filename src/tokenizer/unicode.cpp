#include "tokenizer/unicode.h"

#include <algorithm>

#include "tokenizer/unicode_tables.h"

namespace oxi::unicode {

namespace t = oxi::unicode_tables;

uint8_t flags(uint32_t cp) {
  if (cp >= 0x110000) return 0;
  return t::flags_data[static_cast<uint32_t>(t::flags_index[cp >> 8]) * 256 + (cp & 255)];
}

uint8_t combining_class(uint32_t cp) {
  if (cp >= 0x110000) return 0;
  return t::ccc_data[static_cast<uint32_t>(t::ccc_index[cp >> 8]) * 256 + (cp & 255)];
}

const char* unicode_version() { return t::kUnicodeVersion; }

int utf8_seq_len(uint8_t b) {
  if (b < 0x80) return 1;
  if (b >= 0xC2 && b <= 0xDF) return 2;
  if (b >= 0xE0 && b <= 0xEF) return 3;
  if (b >= 0xF0 && b <= 0xF4) return 4;
  return 1;
}

uint32_t decode_utf8(const char* s, size_t n, size_t* len) {
  const auto* u = reinterpret_cast<const uint8_t*>(s);
  const uint8_t b0 = u[0];
  *len = 1;
  if (b0 < 0x80) return b0;
  const uint32_t bad = kInvalidBase + b0;
  if (b0 >= 0xC2 && b0 <= 0xDF) {
    if (n < 2 || (u[1] & 0xC0) != 0x80) return bad;
    *len = 2;
    return (static_cast<uint32_t>(b0 & 0x1F) << 6) | (u[1] & 0x3F);
  }
  if (b0 >= 0xE0 && b0 <= 0xEF) {
    if (n < 3 || (u[1] & 0xC0) != 0x80 || (u[2] & 0xC0) != 0x80) return bad;
    if (b0 == 0xE0 && u[1] < 0xA0) return bad;   // overlong
    if (b0 == 0xED && u[1] >= 0xA0) return bad;  // surrogate
    *len = 3;
    return (static_cast<uint32_t>(b0 & 0x0F) << 12) | (static_cast<uint32_t>(u[1] & 0x3F) << 6) |
           (u[2] & 0x3F);
  }
  if (b0 >= 0xF0 && b0 <= 0xF4) {
    if (n < 4 || (u[1] & 0xC0) != 0x80 || (u[2] & 0xC0) != 0x80 || (u[3] & 0xC0) != 0x80)
      return bad;
    if (b0 == 0xF0 && u[1] < 0x90) return bad;   // overlong
    if (b0 == 0xF4 && u[1] >= 0x90) return bad;  // > U+10FFFF
    *len = 4;
    return (static_cast<uint32_t>(b0 & 0x07) << 18) | (static_cast<uint32_t>(u[1] & 0x3F) << 12) |
           (static_cast<uint32_t>(u[2] & 0x3F) << 6) | (u[3] & 0x3F);
  }
  return bad;
}

void append_utf8(std::string& out, uint32_t cp) {
  if (cp >= kInvalidBase) {
    out.push_back(static_cast<char>(cp - kInvalidBase));
  } else if (cp < 0x80) {
    out.push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out.push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out.push_back(static_cast<char>(0xE0 | (cp >> 12)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    out.push_back(static_cast<char>(0xF0 | (cp >> 18)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
}

namespace {

constexpr uint32_t kSBase = 0xAC00, kLBase = 0x1100, kVBase = 0x1161, kTBase = 0x11A7;
constexpr uint32_t kLCount = 19, kVCount = 21, kTCount = 28, kNCount = kVCount * kTCount,
                   kSCount = kLCount * kNCount;

void decompose(uint32_t cp, std::vector<uint32_t>& out) {
  if (cp >= kSBase && cp < kSBase + kSCount) {
    const uint32_t s = cp - kSBase;
    out.push_back(kLBase + s / kNCount);
    out.push_back(kVBase + (s % kNCount) / kTCount);
    if (s % kTCount) out.push_back(kTBase + s % kTCount);
    return;
  }
  if (cp < 0x110000 && (flags(cp) & kDecomp)) {
    const t::DecompEntry* b = t::decomp_entries;
    const t::DecompEntry* e = b + t::kNumDecomp;
    const t::DecompEntry* it =
        std::lower_bound(b, e, cp, [](const t::DecompEntry& x, uint32_t v) { return x.cp < v; });
    if (it != e && it->cp == cp) {
      out.insert(out.end(), t::decomp_data + it->offset, t::decomp_data + it->offset + it->len);
      return;
    }
  }
  out.push_back(cp);
}

uint32_t compose(uint32_t a, uint32_t b) {
  if (a >= kLBase && a < kLBase + kLCount && b >= kVBase && b < kVBase + kVCount)
    return kSBase + ((a - kLBase) * kVCount + (b - kVBase)) * kTCount;
  if (a >= kSBase && a < kSBase + kSCount && (a - kSBase) % kTCount == 0 && b > kTBase &&
      b < kTBase + kTCount)
    return a + (b - kTBase);
  if (a >= 0x110000 || b >= 0x110000) return 0;
  const uint64_t key = (static_cast<uint64_t>(a) << 21) | b;
  const t::CompEntry* s = t::comp_entries;
  const t::CompEntry* e = s + t::kNumComp;
  const t::CompEntry* it =
      std::lower_bound(s, e, key, [](const t::CompEntry& x, uint64_t v) { return x.key < v; });
  return (it != e && it->key == key) ? it->composite : 0;
}

}  // namespace

bool nfc(std::string_view s, std::string& out) {
  // Quick check: text without any code point that NFC could touch is returned as is.
  bool maybe = false;
  for (size_t i = 0; i < s.size();) {
    const auto b = static_cast<uint8_t>(s[i]);
    if (b < 0x80) { ++i; continue; }
    size_t len;
    const uint32_t cp = decode_utf8(s.data() + i, s.size() - i, &len);
    i += len;
    if (flags(cp) & kNfcMaybe) { maybe = true; break; }
  }
  if (!maybe) return false;

  std::vector<uint32_t> d;
  d.reserve(s.size() + 8);
  for (size_t i = 0; i < s.size();) {
    size_t len;
    const uint32_t cp = decode_utf8(s.data() + i, s.size() - i, &len);
    i += len;
    decompose(cp, d);
  }
  // Canonical ordering: stable sort of each run of non-starters by combining class.
  for (size_t i = 0; i < d.size();) {
    if (combining_class(d[i]) == 0) { ++i; continue; }
    size_t j = i;
    while (j < d.size() && combining_class(d[j]) != 0) ++j;
    if (j - i > 1)
      std::stable_sort(d.begin() + static_cast<ptrdiff_t>(i), d.begin() + static_cast<ptrdiff_t>(j),
                       [](uint32_t x, uint32_t y) { return combining_class(x) < combining_class(y); });
    i = j;
  }
  // Canonical composition.
  std::vector<uint32_t> c;
  c.reserve(d.size());
  ptrdiff_t starter = -1;
  int last_ccc = 0;
  for (uint32_t cp : d) {
    const int cc = combining_class(cp);
    if (starter >= 0) {
      const bool adjacent = static_cast<size_t>(starter) + 1 == c.size();
      if (adjacent || (last_ccc != 0 && last_ccc < cc)) {
        const uint32_t comp = compose(c[static_cast<size_t>(starter)], cp);
        if (comp) {
          c[static_cast<size_t>(starter)] = comp;
          continue;
        }
      }
    }
    if (cc == 0) {
      starter = static_cast<ptrdiff_t>(c.size());
      last_ccc = 0;
    } else {
      last_ccc = cc;
    }
    c.push_back(cp);
  }
  out.clear();
  out.reserve(s.size());
  for (uint32_t cp : c) append_utf8(out, cp);
  return true;
}

}  // namespace oxi::unicode
