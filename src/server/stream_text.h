// Stop-string matching for generation: never emits text which may turn out to be the start of a
// stop string.
#pragma once

#include <string>
#include <vector>

namespace oxi::server {

// Feed text pieces; returns the part safe to emit now. Once a stop string is complete, `stopped()`
// is true and the returned text ends right before it.
class StopMatcher {
 public:
  explicit StopMatcher(std::vector<std::string> stops) : stops_(std::move(stops)) {}
  std::string feed(const std::string& piece);
  std::string flush();  // at the end: whatever was held back
  bool stopped() const { return stopped_; }
  const std::string& matched() const { return matched_; }  // the stop string found ("" if none)

 private:
  std::vector<std::string> stops_;
  std::string held_;
  bool stopped_ = false;
  std::string matched_;
};

}  // namespace oxi::server
