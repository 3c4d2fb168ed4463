// Placeholder until the hub lands: parses the spec and reports that cache lookup is missing.
#include "core/error.h"
#include "hub/hub.h"

namespace oxi {

std::string hub_resolve_model(const std::string& spec, const HubOptions&) {
  throw_error(ErrorCode::kNotImplemented, "-hf " + spec + ": Hugging Face cache lookup is not implemented yet");
}

}  // namespace oxi
