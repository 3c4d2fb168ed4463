// C API implementation: catches oxi::Error at the boundary and keeps a per-thread message.
#include <string>

#include "core/error.h"
#include "oxinfer.h"

namespace {
thread_local std::string g_last_error;
}

extern "C" {

const char* oxi_last_error(void) { return g_last_error.c_str(); }

const char* oxi_status_name(oxi_status status) {
  return oxi::error_code_name(static_cast<oxi::ErrorCode>(status));
}

const char* oxi_version(void) { return "0.1.0"; }

}  // extern "C"
