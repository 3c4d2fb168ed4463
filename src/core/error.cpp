#include "core/error.h"

namespace oxi {

const char* error_code_name(ErrorCode code) {
  switch (code) {
    case ErrorCode::kOk: return "ok";
    case ErrorCode::kInvalidArgument: return "invalid argument";
    case ErrorCode::kIo: return "I/O error";
    case ErrorCode::kFormat: return "format error";
    case ErrorCode::kUnsupported: return "unsupported";
    case ErrorCode::kOutOfMemory: return "out of memory";
    case ErrorCode::kCancelled: return "cancelled";
    case ErrorCode::kNotImplemented: return "not implemented";
    case ErrorCode::kInternal: return "internal error";
  }
  return "unknown error";
}

void throw_error(ErrorCode code, const std::string& message) { throw Error(code, message); }

}  // namespace oxi
