// Small helpers shared by the loaders in format/ (internal; not part of the public interface).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "format/dtype.h"

namespace oxi::fmt {

// True if `s` is well-formed UTF-8 (no overlongs, no surrogates, ≤ U+10FFFF).
bool valid_utf8(std::string_view s);

// Quotes a possibly hostile name for an error message: printable ASCII kept, the rest escaped,
// long names cut, so a message always stays one short line.
std::string printable(std::string_view s, size_t max_len = 96);

// Overflow-safe a*b / a+b on u64 (nullopt on overflow).
std::optional<uint64_t> mul_u64(uint64_t a, uint64_t b);
std::optional<uint64_t> add_u64(uint64_t a, uint64_t b);

// Bytes of a tensor with row-major `shape` of `dtype`: the innermost dimension must be a multiple
// of the block size; nullopt (with `why` set) on a bad shape or overflow.
std::optional<uint64_t> tensor_nbytes(DType dtype, const std::vector<int64_t>& shape,
                                      std::string* why);

// "a/b" with a single separator.
std::string join_path(const std::string& dir, const std::string& name);

}  // namespace oxi::fmt
