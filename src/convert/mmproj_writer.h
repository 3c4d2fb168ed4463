// What the mmproj converters (convert/qwen35_mmproj.cpp, gemma4_mmproj.cpp) share: tensors
// produced row by row into a GgufWriter, the checkpoint tensors they consumed (so that a tower
// tensor left unconverted is an error, not silently dropped), and the common clip header keys.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "format/dtype.h"
#include "format/gguf.h"
#include "format/hf.h"

namespace oxi {

class MmprojWriter {
 public:
  // matrix_type: what 2-D weights are written as (F32, or F16 as llama.cpp's default mmproj).
  MmprojWriter(const HfCheckpoint& hf, DType matrix_type) : hf_(hf), mt_(matrix_type) {}

  GgufWriter w;
  DType matrix_type() const { return mt_; }
  // Marks a checkpoint tensor as converted (for check_all_used).
  void take(const std::string& in) { seen_.push_back(in); }
  // One output tensor: `rows` rows of `cols` values produced by row(r, dst) at write time.
  void emit(const std::string& name, std::vector<int64_t> shape, DType type, int64_t rows, int64_t cols,
            std::function<void(int64_t, float*)> row);
  // A checkpoint tensor of `shape` as is (matrices in matrix_type(), everything else f32).
  void copy(const std::string& out_name, const std::string& in, const std::vector<int64_t>& shape, bool matrix);
  // A 0-d checkpoint tensor, when present, as a one-element f32 tensor (kFormat if not a scalar).
  void scalar(const std::string& out_name, const std::string& in);
  // HF Gemma4ClippableLinear `in` ([rows, cols] at in.linear.weight, optional 0-d input/output
  // min/max bounds) → out.weight (matrix_type()) and out.{input,output}_{min,max}.
  void clip_linear(const std::string& out, const std::string& in, int64_t rows, int64_t cols);
  // Throws kUnsupported naming the first checkpoint tensor under one of `prefixes` not taken.
  void check_all_used(const std::vector<std::string>& prefixes) const;
  // general.architecture clip, type mmproj, name (the checkpoint folder), file_type, and
  // clip.has_vision_encoder / clip.projector_type. With an audio projector too (one file holding
  // both towers, as llama.cpp's converter writes Gemma 4): clip.has_audio_encoder, and the types as
  // clip.vision.projector_type / clip.audio.projector_type (llama.cpp's loader reads the shared
  // clip.projector_type first, so it must be absent then).
  void write_header(const std::string& projector, const std::string& audio_projector = "");

 private:
  const HfCheckpoint& hf_;
  DType mt_;
  std::vector<std::string> seen_;
};

}  // namespace oxi
