#include "core/log.h"

#include <atomic>
#include <cstdio>

namespace oxi {

namespace {
std::atomic<int> g_level{static_cast<int>(LogLevel::kWarn)};
}

void set_log_level(LogLevel level) { g_level.store(static_cast<int>(level)); }
LogLevel log_level() { return static_cast<LogLevel>(g_level.load()); }

void log_message(LogLevel level, const std::string& message) {
  if (static_cast<int>(level) < g_level.load()) return;
  static const char* kPrefix[] = {"debug: ", "", "warning: ", "error: "};
  std::fprintf(stderr, "%s%s\n", kPrefix[static_cast<int>(level)], message.c_str());
}

}  // namespace oxi
