// Error model of the core: functions throw oxi::Error (a code plus a one-line message); the C API
// catches at its boundary and turns it into an oxi_status + message. The CLI prints the message and
// exits 1 (2 for "not implemented" and usage errors).
#pragma once

#include <stdexcept>
#include <string>

namespace oxi {

// Kept in step with oxi_status in include/oxinfer.h (same numeric values).
enum class ErrorCode : int {
  kOk = 0,
  kInvalidArgument = 1,  // bad user input: flags, prompt, request
  kIo = 2,               // file or network I/O
  kFormat = 3,           // malformed model/tokenizer/config file
  kUnsupported = 4,      // valid but not supported (architecture, tensor type)
  kOutOfMemory = 5,
  kCancelled = 6,
  kNotImplemented = 7,
  kInternal = 8,
};

const char* error_code_name(ErrorCode code);

class Error : public std::runtime_error {
 public:
  Error(ErrorCode code, const std::string& message) : std::runtime_error(message), code_(code) {}
  ErrorCode code() const { return code_; }

 private:
  ErrorCode code_;
};

[[noreturn]] void throw_error(ErrorCode code, const std::string& message);

// Convenience for the common "file is malformed" case: "<file>: <what>".
[[noreturn]] inline void format_error(const std::string& file, const std::string& what) {
  throw_error(ErrorCode::kFormat, file + ": " + what);
}

}  // namespace oxi
