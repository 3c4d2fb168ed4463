// Minimal levelled logging to stderr. Library code logs sparingly (start-up choices, warnings);
// stdout belongs to the CLI's machine-readable output.
#pragma once

#include <string>

namespace oxi {

enum class LogLevel { kDebug = 0, kInfo = 1, kWarn = 2, kError = 3, kSilent = 4 };

void set_log_level(LogLevel level);
LogLevel log_level();
void log_message(LogLevel level, const std::string& message);

inline void log_info(const std::string& m) { log_message(LogLevel::kInfo, m); }
inline void log_warn(const std::string& m) { log_message(LogLevel::kWarn, m); }
inline void log_debug(const std::string& m) { log_message(LogLevel::kDebug, m); }

}  // namespace oxi
