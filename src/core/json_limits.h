// Nesting limit for JSON from outside the process (request bodies, config / tokenizer files).
// nlohmann::json parses iteratively but copies, dumps and compares recursively, and so does our own
// code over json values (Jinja conversion, schema compilation): a document nested 100,000 levels
// overflows the stack. Every parse of outside JSON first checks the nesting with this linear,
// non-recursive scan. See docs/server.md "Hardening limits" for why 512.
#pragma once

#include <cstddef>
#include <string_view>

namespace oxi {

inline constexpr size_t kMaxJsonDepth = 512;

// Deepest nesting of '[' / '{' outside strings in `text`; stops scanning (and returns a value
// > limit) as soon as the depth exceeds `limit`. Does not validate the JSON otherwise.
size_t json_nesting_depth(std::string_view text, size_t limit = kMaxJsonDepth);

inline bool json_too_deep(std::string_view text, size_t limit = kMaxJsonDepth) {
  return json_nesting_depth(text, limit) > limit;
}

// Throws oxi::Error(kFormat) "<what>: JSON nested deeper than 512 levels" when too deep.
void check_json_depth(std::string_view text, const std::string& what, size_t limit = kMaxJsonDepth);

}  // namespace oxi
