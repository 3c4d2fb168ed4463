#include <string>

#include "core/error.h"
#include "models/convert.h"
#include "models/model.h"

namespace oxi {

// Implemented in models/qwen35/ and models/gemma4/.
std::unique_ptr<Model> load_qwen35(const ModelFiles& files, const LoadOptions& options);
std::unique_ptr<Model> load_gemma4(const ModelFiles& files, const LoadOptions& options);
void convert_qwen35(const HfCheckpoint& hf, const std::string& out_path, const ConvertOptions& opt);
void convert_gemma4(const HfCheckpoint& hf, const std::string& out_path, const ConvertOptions& opt);

namespace {
enum class Family { kQwen35, kGemma4, kUnknown };

Family family_of(const std::string& arch) {
  // GGUF general.architecture values, then HF model_type values.
  if (arch == "qwen35" || arch == "qwen35moe" || arch == "qwen3_5" || arch == "qwen3_5_moe" ||
      arch == "qwen3_5_text" || arch == "qwen3_5_moe_text")
    return Family::kQwen35;
  if (arch == "gemma4" || arch == "gemma4_text") return Family::kGemma4;
  return Family::kUnknown;
}
}  // namespace

std::unique_ptr<Model> load_model(const ModelFiles& files, const LoadOptions& options) {
  const std::string arch = files.architecture();
  switch (family_of(arch)) {
    case Family::kQwen35: return load_qwen35(files, options);
    case Family::kGemma4: return load_gemma4(files, options);
    case Family::kUnknown: break;
  }
  throw_error(ErrorCode::kUnsupported, files.path + ": unknown architecture '" + arch + "'");
}

void convert_hf_to_gguf(const HfCheckpoint& hf, const std::string& out_path,
                        const ConvertOptions& options) {
  std::string arch = hf.config.value("model_type", std::string());
  switch (family_of(arch)) {
    case Family::kQwen35: return convert_qwen35(hf, out_path, options);
    case Family::kGemma4: return convert_gemma4(hf, out_path, options);
    case Family::kUnknown: break;
  }
  throw_error(ErrorCode::kUnsupported, hf.dir + ": cannot convert unknown architecture '" + arch + "'");
}

}  // namespace oxi
