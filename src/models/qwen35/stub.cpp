// Placeholder until the qwen35 model lands: says so honestly instead of computing anything.
#include "core/error.h"
#include "models/convert.h"
#include "models/model.h"

namespace oxi {

std::unique_ptr<Model> load_qwen35(const ModelFiles& files, const LoadOptions&) {
  throw_error(ErrorCode::kNotImplemented, files.path + ": the qwen35 model is not implemented yet");
}

void convert_qwen35(const HfCheckpoint& hf, const std::string&, const ConvertOptions&) {
  throw_error(ErrorCode::kNotImplemented, hf.dir + ": converting qwen35 is not implemented yet");
}

}  // namespace oxi
