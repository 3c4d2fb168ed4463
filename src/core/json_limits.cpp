#include "core/json_limits.h"

#include <string>

#include "core/error.h"

namespace oxi {

size_t json_nesting_depth(std::string_view text, size_t limit) {
  size_t depth = 0, deepest = 0;
  bool in_string = false, escaped = false;
  for (const char c : text) {
    if (in_string) {
      if (escaped) escaped = false;
      else if (c == '\\') escaped = true;
      else if (c == '"') in_string = false;
      continue;
    }
    switch (c) {
      case '"': in_string = true; break;
      case '[':
      case '{':
        if (++depth > deepest) {
          deepest = depth;
          if (deepest > limit) return deepest;
        }
        break;
      case ']':
      case '}':
        if (depth > 0) --depth;
        break;
      default: break;
    }
  }
  return deepest;
}

void check_json_depth(std::string_view text, const std::string& what, size_t limit) {
  if (json_too_deep(text, limit)) {
    throw_error(ErrorCode::kFormat, what + ": JSON nested deeper than " + std::to_string(limit) + " levels");
  }
}

}  // namespace oxi
