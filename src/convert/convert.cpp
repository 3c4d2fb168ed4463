// `oxinfer convert` dispatch: the HF checkpoint's model_type picks the family's converter.
#include "convert/convert.h"

#include <cstdio>

#include "core/error.h"
#include "models/model.h"

namespace oxi {

// Implemented in convert/qwen35.cpp and convert/gemma4.cpp.
void convert_qwen35(const HfCheckpoint& hf, const std::string& out_path, const ConvertOptions& opt);
void convert_gemma4(const HfCheckpoint& hf, const std::string& out_path, const ConvertOptions& opt);
// Implemented in convert/qwen35_mmproj.cpp.
void convert_qwen35_mmproj(const HfCheckpoint& hf, const std::string& out_path, const ConvertOptions& opt);
// Implemented in convert/gemma4_mmproj.cpp.
void convert_gemma4_mmproj(const HfCheckpoint& hf, const std::string& out_path, const ConvertOptions& opt);

DType checkpoint_float_type(const HfCheckpoint& hf) {
  // MLX affine groups dequantise to values a bf16/f16 GGUF would round again: keep f32.
  for (const auto& [name, t] : hf.tensors.all())
    if (is_mlx_dtype(t.dtype)) return DType::F32;
  for (const auto& [name, t] : hf.tensors.all())
    if (t.shape.size() == 2 && (t.dtype == DType::BF16 || t.dtype == DType::F16)) return t.dtype;
  return DType::F32;
}

DType default_convert_type(const HfCheckpoint& hf) {
  for (const auto& [name, t] : hf.tensors.all())
    if (is_mlx_dtype(t.dtype)) return DType::Q8_0;
  return checkpoint_float_type(hf);
}

void write_st_pooling(GgufWriter& w, const std::string& arch, const HfCheckpoint& hf) {
  const StPooling st = read_st_pooling(hf.dir);
  if (!st.warning.empty()) {
    std::fprintf(stderr, "oxinfer: warning: not writing %s.pooling_type: %s\n", arch.c_str(), st.warning.c_str());
  }
  if (st.type) w.set_u32(arch + ".pooling_type", static_cast<uint32_t>(*st.type));
}

void convert_hf_to_gguf(const HfCheckpoint& hf, const std::string& out_path, const ConvertOptions& options) {
  const std::string arch = hf.config.value("model_type", std::string());
  const std::string family = model_family(arch);
  if (family == "qwen35") return convert_qwen35(hf, out_path, options);
  if (family == "gemma4") return convert_gemma4(hf, out_path, options);
  throw_error(ErrorCode::kUnsupported, hf.dir + ": cannot convert unknown architecture '" + arch + "'");
}

void convert_hf_to_mmproj(const HfCheckpoint& hf, const std::string& out_path, const ConvertOptions& options) {
  const std::string arch = hf.config.value("model_type", std::string());
  if (model_family(arch) == "qwen35") return convert_qwen35_mmproj(hf, out_path, options);
  if (model_family(arch) == "gemma4") return convert_gemma4_mmproj(hf, out_path, options);
  throw_error(ErrorCode::kUnsupported, hf.dir + ": no mmproj converter for architecture '" + arch + "'");
}

}  // namespace oxi
