#include "convert/mmproj_writer.h"

#include <algorithm>
#include <filesystem>

#include "core/error.h"
#include "kernels/matmul.h"
#include "models/common/weights.h"

namespace oxi {

void MmprojWriter::emit(const std::string& name, std::vector<int64_t> shape, DType type, int64_t rows, int64_t cols,
                        std::function<void(int64_t, float*)> row) {
  auto rb = dtype_row_bytes(type, static_cast<uint64_t>(cols));
  if (!rb) throw_error(ErrorCode::kInternal, "convert: row size for " + name);
  w.add_tensor(name, type, std::move(shape), *rb * static_cast<uint64_t>(rows),
               [type, rows, cols, row = std::move(row)](uint8_t* dst, uint64_t) {
                 quantize_rows(type, rows, cols, dst, [&row](int64_t r, float* x, float*) { row(r, x); });
               });
}

void MmprojWriter::copy(const std::string& out_name, const std::string& in, const std::vector<int64_t>& shape, bool matrix) {
  const TensorInfo& t = wt::require(hf_.tensors, in, shape);
  take(in);
  const int64_t cols = shape.back(), rows = t.n_elements() / cols;
  const MatrixView m = wt::matrix(t, rows, cols);
  emit(out_name, shape, matrix ? mt_ : DType::F32, rows, cols, [m](int64_t r, float* x) { dequantize_row(m, r, x); });
}

void MmprojWriter::scalar(const std::string& out_name, const std::string& in) {
  const TensorInfo* t = hf_.tensors.find(in);
  if (!t) return;
  if (t->n_elements() != 1) throw_error(ErrorCode::kFormat, hf_.dir + ": " + in + " is not a scalar");
  take(in);
  const float x = wt::to_f32(*t)[0];
  emit(out_name, {1}, DType::F32, 1, 1, [x](int64_t, float* dst) { dst[0] = x; });
}

void MmprojWriter::clip_linear(const std::string& out, const std::string& in, int64_t rows, int64_t cols) {
  copy(out + ".weight", in + ".linear.weight", {rows, cols}, true);
  for (const char* b : {"input_min", "input_max", "output_min", "output_max"}) scalar(out + "." + b, in + "." + b);
}

void MmprojWriter::check_all_used(const std::vector<std::string>& prefixes) const {
  for (const auto& entry : hf_.tensors.all()) {
    const std::string& name = entry.first;  // not a structured binding: clang 14 (emscripten) cannot capture one
    const TensorInfo& t = entry.second;
    if (std::none_of(prefixes.begin(), prefixes.end(), [&](const std::string& p) { return name.rfind(p, 0) == 0; })) continue;
    if (std::find(seen_.begin(), seen_.end(), name) == seen_.end())
      throw_error(ErrorCode::kUnsupported, hf_.dir + ": unexpected tower tensor " + name + " " + t.shape_string());
  }
}

void MmprojWriter::write_header(const std::string& projector, const std::string& audio_projector) {
  w.set_string("general.architecture", "clip");
  w.set_string("general.type", "mmproj");
  std::string name = std::filesystem::path(hf_.dir).filename().string();
  if (name.empty()) name = std::filesystem::path(hf_.dir).parent_path().filename().string();
  w.set_string("general.name", name);
  w.set_u32("general.file_type", mt_ == DType::F32 ? 0 : 1);
  w.set_bool("clip.has_vision_encoder", true);
  if (audio_projector.empty()) {
    w.set_string("clip.projector_type", projector);
  } else {
    w.set_bool("clip.has_audio_encoder", true);
    w.set_string("clip.vision.projector_type", projector);
    w.set_string("clip.audio.projector_type", audio_projector);
  }
}

}  // namespace oxi
