// Placeholder until the gemma4 model lands: says so honestly instead of computing anything.
#include "core/error.h"
#include "models/convert.h"
#include "models/model.h"

namespace oxi {

std::unique_ptr<Model> load_gemma4(const ModelFiles& files, const LoadOptions&) {
  throw_error(ErrorCode::kNotImplemented, files.path + ": the gemma4 model is not implemented yet");
}

void convert_gemma4(const HfCheckpoint& hf, const std::string&, const ConvertOptions&) {
  throw_error(ErrorCode::kNotImplemented, hf.dir + ": converting gemma4 is not implemented yet");
}

}  // namespace oxi
