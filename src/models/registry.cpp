#include <set>
#include <string>

#include "core/error.h"
#include "models/common/quant_rule.h"
#include "models/model.h"

namespace oxi {

// Implemented in models/qwen35/ and models/gemma4/.
std::unique_ptr<Model> load_qwen35(const ModelFiles& files, const LoadOptions& options);
std::unique_ptr<Model> load_gemma4(const ModelFiles& files, const LoadOptions& options);

std::string model_family(const std::string& arch) {
  // GGUF general.architecture values, then HF model_type values.
  if (arch == "qwen35" || arch == "qwen35moe" || arch == "qwen3_5" || arch == "qwen3_5_moe" ||
      arch == "qwen3_5_text" || arch == "qwen3_5_moe_text")
    return "qwen35";
  if (arch == "gemma4" || arch == "gemma4_text" || arch == "gemma4_assistant" || arch == "gemma4-assistant") return "gemma4";
  return "";
}

std::unique_ptr<Model> load_model(const ModelFiles& files, const LoadOptions& options) {
  if (!options.quant.empty()) {
    parse_quant_type(options.quant);
    // As llama-quantize (which refuses to requantise unless told to) and ollama (which only
    // quantises F16/F32 models): weights that are already quantised are an error, not a no-op —
    // a silent no-op would leave the user believing the model runs at the type they asked for.
    std::set<std::string> quantised;
    for (const auto& [name, t] : files.tensors().all()) {
      const bool is_float = t.dtype == DType::F32 || t.dtype == DType::F16 || t.dtype == DType::BF16 || t.dtype == DType::F64;
      const bool is_int = t.dtype == DType::I8 || t.dtype == DType::I16 || t.dtype == DType::I32 || t.dtype == DType::I64 ||
                          t.dtype == DType::U8 || t.dtype == DType::BOOL;
      if (!is_float && !is_int) quantised.insert(dtype_name(t.dtype));
    }
    if (!quantised.empty()) {
      std::string types;
      for (const auto& q : quantised) types += (types.empty() ? "" : ", ") + q;
      throw_error(ErrorCode::kInvalidArgument,
                  files.path + ": --quant " + options.quant + ": the weights are already quantised (" + types +
                      "); quantising them again would stack a second rounding error. Load the file without --quant, or "
                      "quantise from the original f32/f16/bf16 weights (HF checkpoint or float GGUF).");
    }
  }
  const std::string arch = files.architecture();
  const std::string family = model_family(arch);
  std::unique_ptr<Model> m;
  if (family == "qwen35") m = load_qwen35(files, options);
  if (family == "gemma4") m = load_gemma4(files, options);
  if (m) {
    // Matrices (2+ dims) as stored, and what --quant turns float ones into (4-bit recipes give
    // tied embeddings / output Q6_K): a superset of the types the forward multiplies by.
    std::set<DType> types;
    for (const auto& [name, t] : files.tensors().all()) {
      if (t.shape.size() >= 2) types.insert(t.dtype);
    }
    if (!options.quant.empty()) {
      types.insert(parse_quant_type(options.quant));
      types.insert(DType::Q6_K);
    }
    m->weight_types_.assign(types.begin(), types.end());
    return m;
  }
  throw_error(ErrorCode::kUnsupported, files.path + ": unknown architecture '" + arch + "'");
}

}  // namespace oxi
