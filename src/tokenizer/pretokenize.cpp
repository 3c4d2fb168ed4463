#include "tokenizer/pretokenize.h"

#include "tokenizer/unicode.h"

namespace oxi {

const std::string_view kQwen2SplitRegex =
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|"
    "\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
const std::string_view kQwen35SplitRegex =
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?[\\p{L}\\p{M}]+|\\p{N}| "
    "?[^\\s\\p{L}\\p{M}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";

namespace {

inline uint32_t ascii_lower(uint32_t c) { return (c >= 'A' && c <= 'Z') ? c + 32 : c; }

}  // namespace

void split_qwen(const uint32_t* cps, size_t n, bool marks_in_letters,
                std::vector<std::pair<uint32_t, uint32_t>>& out) {
  const uint8_t letter_mask = marks_in_letters ? (unicode::kLetter | unicode::kMark) : unicode::kLetter;
  // Flags of every code point once (ASCII fast path inside unicode::flags is a table read).
  std::vector<uint8_t> fl(n);
  for (size_t i = 0; i < n; ++i) fl[i] = unicode::flags(cps[i]);
  auto is_let = [&](size_t k) { return (fl[k] & letter_mask) != 0; };
  auto is_num = [&](size_t k) { return (fl[k] & unicode::kNumber) != 0; };
  auto is_ws = [&](size_t k) { return (fl[k] & unicode::kSpace) != 0; };
  auto is_sym = [&](size_t k) {
    return (fl[k] & (letter_mask | unicode::kNumber | unicode::kSpace)) == 0;
  };
  auto is_nl = [&](size_t k) { return cps[k] == '\r' || cps[k] == '\n'; };

  size_t i = 0;
  while (i < n) {
    const uint32_t c = cps[i];
    size_t j = i;
    // 1. contractions
    if (c == '\'' && i + 1 < n) {
      const uint32_t c1 = ascii_lower(cps[i + 1]);
      if (c1 == 's' || c1 == 't' || c1 == 'm' || c1 == 'd') {
        j = i + 2;
      } else if (i + 2 < n) {
        const uint32_t c2 = ascii_lower(cps[i + 2]);
        if ((c1 == 'r' && c2 == 'e') || (c1 == 'v' && c2 == 'e') || (c1 == 'l' && c2 == 'l'))
          j = i + 3;
      }
      if (j > i) { out.emplace_back(i, j); i = j; continue; }
    }
    // 2. [^\r\n\p{L}\p{N}]?\p{L}+
    if (is_let(i)) {
      j = i + 1;
      while (j < n && is_let(j)) ++j;
      out.emplace_back(i, j); i = j; continue;
    }
    if (!is_nl(i) && !is_num(i) && i + 1 < n && is_let(i + 1)) {
      j = i + 2;
      while (j < n && is_let(j)) ++j;
      out.emplace_back(i, j); i = j; continue;
    }
    // 3. \p{N}
    if (is_num(i)) { out.emplace_back(i, i + 1); ++i; continue; }
    // 4.  ?[^\s\p{L}\p{N}]+[\r\n]*
    {
      size_t k = i;
      if (c == ' ' && i + 1 < n && is_sym(i + 1)) k = i + 1;
      if (is_sym(k)) {
        j = k + 1;
        while (j < n && is_sym(j)) ++j;
        while (j < n && is_nl(j)) ++j;
        out.emplace_back(i, j); i = j; continue;
      }
    }
    // 5-7. whitespace
    if (is_ws(i)) {
      size_t e = i + 1;
      while (e < n && is_ws(e)) ++e;
      size_t last_nl = n;
      for (size_t k = e; k > i; --k) {
        if (is_nl(k - 1)) { last_nl = k - 1; break; }
      }
      if (last_nl != n) j = last_nl + 1;       // \s*[\r\n]+
      else if (e == n) j = e;                  // \s+(?!\S) at the end
      else if (e - 1 > i) j = e - 1;           // \s+(?!\S) leaving one space for the next word
      else j = e;                              // \s+
      out.emplace_back(i, j); i = j; continue;
    }
    // Unreachable for valid input (every code point is L, N, White_Space or a symbol).
    out.emplace_back(i, i + 1);
    ++i;
  }
}

}  // namespace oxi
