// `oxinfer convert`: HF checkpoint → GGUF that llama.cpp loads (exact metadata keys, tensor names
// and value transforms of llama.cpp's converter). Per-architecture code in convert/<family>.cpp.
#pragma once

#include <string>

#include "format/dtype.h"
#include "format/gguf.h"
#include "format/hf.h"

namespace oxi {

struct ConvertOptions {
  // Type for 2-D weight matrices; norms, biases and small 1-D tensors stay F32 (as llama.cpp).
  DType out_type = DType::F32;  // F32 | F16 | BF16 | Q8_0 | Q4_0 | Q4_1 | Q4_K
  // The MTP head (Qwen 3.5), as llama.cpp's converter splits it: kAll writes it as block n_layer
  // of the model (the default); kNone leaves it out (--no-mtp: block_count = n_layer, no
  // nextn_predict_layers); kOnly writes only the head (--mtp: block n_layer's tensors plus
  // token_embd / output_norm / output, block_count = n_layer + 1), the draft file for -md.
  enum class Mtp { kAll, kNone, kOnly } mtp = Mtp::kAll;
};

// The float width the checkpoint's matrices are stored in: the type of the first 2-D BF16/F16
// tensor, else F32 (what `convert` writes when no --type is given).
// MLX-quantised checkpoints (format/mlx.h): F32 (their dequantised values, unrounded).
DType checkpoint_float_type(const HfCheckpoint& hf);
// What `convert` writes when no --type is given: Q8_0 for an MLX-quantised checkpoint (its 4- and
// 8-bit groups requantised to Q8_0 blocks: ~1/500 of the group's range added error, far below the
// MLX quantisation's own; docs/format.md "MLX checkpoints"), else checkpoint_float_type.
DType default_convert_type(const HfCheckpoint& hf);

// For the per-family converters: `<arch>.pooling_type` from the checkpoint's sentence-transformers
// pooling config (read_st_pooling), as llama.cpp's converter writes it; nothing when there is
// none. An unusable config is skipped with a warning on stderr (llama.cpp's converter stops).
void write_st_pooling(GgufWriter& w, const std::string& arch, const HfCheckpoint& hf);

// Writes via temp file + rename. Throws oxi::Error naming the offending file/tensor.
void convert_hf_to_gguf(const HfCheckpoint& hf, const std::string& out_path,
                        const ConvertOptions& options);

// The checkpoint's vision tower → the mmproj GGUF llama.cpp's mtmd loads (general.architecture
// "clip"). Qwen 3.5: projector `qwen3vl_merger`. Matrices are f32 when options.out_type is F32,
// else f16 (llama.cpp's default mmproj type); norms, biases and position embeddings stay f32.
// oxi::Error(kUnsupported) when the checkpoint has no vision tower or the family has none of ours.
void convert_hf_to_mmproj(const HfCheckpoint& hf, const std::string& out_path, const ConvertOptions& options);

}  // namespace oxi
