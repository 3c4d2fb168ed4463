#include <algorithm>

#include "server/stream_text.h"

namespace oxi::server {

std::string StopMatcher::feed(const std::string& piece) {
  if (stopped_) return {};
  held_ += piece;
  // A complete stop string: cut there.
  size_t first = std::string::npos;
  for (const auto& s : stops_) {
    const size_t p = held_.find(s);
    if (p != std::string::npos && p < first) {
      first = p;
      matched_ = s;
    }
  }
  if (first != std::string::npos) {
    stopped_ = true;
    std::string out = held_.substr(0, first);
    held_.clear();
    return out;
  }
  // Hold back the longest suffix that is a proper prefix of some stop string.
  size_t keep = 0;
  for (const auto& s : stops_) {
    for (size_t k = std::min(s.size() - 1, held_.size()); k > keep; --k) {
      if (held_.compare(held_.size() - k, k, s, 0, k) == 0) {
        keep = k;
        break;
      }
    }
  }
  std::string out = held_.substr(0, held_.size() - keep);
  held_.erase(0, held_.size() - keep);
  return out;
}

std::string StopMatcher::flush() {
  std::string out;
  out.swap(held_);
  return stopped_ ? std::string() : out;
}

}  // namespace oxi::server
