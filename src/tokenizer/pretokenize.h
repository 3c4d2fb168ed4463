// Hand-written matchers for the known pre-tokeniser split regexes (no regex engine: the same code
// runs natively and in wasm). They reproduce, on code points, leftmost-first alternation with
// greedy backtracking of
//   Qwen2/3:  (?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+
//   Qwen3.5:  the same with [\p{L}\p{M}]+ for letter runs and [^\s\p{L}\p{M}\p{N}] for symbols.
// \s is Unicode White_Space; invalid UTF-8 bytes (pseudo code points) count as symbols.
#pragma once

#include <cstdint>
#include <string_view>
#include <utility>
#include <vector>

namespace oxi {

// The exact pattern strings found in tokenizer.json files.
extern const std::string_view kQwen2SplitRegex;
extern const std::string_view kQwen35SplitRegex;

// Splits cps[0..n) into pieces; appends [begin, end) code point index pairs to `out`.
void split_qwen(const uint32_t* cps, size_t n, bool marks_in_letters,
                std::vector<std::pair<uint32_t, uint32_t>>& out);

}  // namespace oxi
