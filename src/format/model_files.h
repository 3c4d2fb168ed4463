// One front door for "a model path": a .gguf file or an HF checkpoint directory. Also resolves
// `-hf org/name[:quant][@rev]` against the local Hugging Face cache (no download here; see hub/).
#pragma once

#include <memory>
#include <optional>
#include <string>

#include "format/gguf.h"
#include "format/hf.h"

namespace oxi {

enum class ModelFileKind { kGguf, kHf };

struct ModelFiles {
  ModelFileKind kind = ModelFileKind::kGguf;
  std::string path;
  std::optional<GgufFile> gguf;      // set when kind == kGguf
  std::optional<HfCheckpoint> hf;    // set when kind == kHf
  const TensorIndex& tensors() const { return gguf ? gguf->tensors : hf->tensors; }
  // "qwen35", "qwen35moe", "gemma4"… : GGUF general.architecture, or derived from HF
  // config model_type / architectures[0] (raw model_type, e.g. "qwen3_5", for HF).
  std::string architecture() const;
  // The weight type as quantisers name the recipes ("Q4_K_M", "Q8_0", "BF16"): GGUF
  // general.file_type, else the dtype holding the most tensor bytes.
  std::string file_type() const;
};

// Path is a .gguf file (or split first part) or a directory with config.json. Throws oxi::Error.
ModelFiles open_model_files(const std::string& path);

}  // namespace oxi
