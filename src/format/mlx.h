// MLX checkpoints (mlx-community, written by mlx-lm / mlx-vlm) read as the Hugging Face
// checkpoints they were made from, so the model loaders and `convert` see HF names and layouts.
//
// What such a directory holds (facts of mlx.core.quantize and mlx-lm's per-model `sanitize`):
//  - config.json "quantization": {"group_size": G, "bits": B, ...} (also copied to
//    "quantization_config"), plus per-module overrides keyed by the module path, e.g.
//    "language_model.model.layers.0.mlp.gate": {"group_size": 64, "bits": 8}.
//  - each quantised Linear / Embedding `P` as P.weight (U32 [..., out, in·B/32]: 32/B codes per
//    word, the first code in the lowest bits), P.scales and P.biases ([..., out, in/G], the float
//    type of the original weight); value = scales · q + biases per group of G inputs.
//  - mlx-lm's names and layouts: Qwen 3.5 "language_model.model.*" (HF: "model.language_model.*"),
//    "language_model.lm_head.weight", conv1d weights [C, K, 1] (HF [C, 1, K]), the (1 + w) RMSNorm
//    weights (input/post-attention layer norms, the final norm, q_norm, k_norm) stored with the +1
//    added, MoE experts as switch_mlp.{gate,up,down}_proj [E, ·, ·] (HF experts.gate_up_proj,
//    experts.down_proj), MTP and vision tower dropped. Gemma 4: "language_model.*" (HF
//    "model.language_model.*"), embed_tokens_per_layer split into one [V, P] table per layer.
//
// apply_mlx_layout undoes all of that: quantised weights become one tensor of the block type
// DType::MLX_Q{4,8}_G{32,64,128} (format/dtype.h), repacked into memory (the file's pages are
// released as it goes), renamed and reshaped to the HF original. Errors (kFormat / kUnsupported,
// naming the tensor): bits other than 4 and 8, group sizes other than 32/64/128, a non-affine
// mode, scales/biases/weight shapes that disagree, a U32 tensor without scales.
#pragma once

#include "format/hf.h"

namespace oxi {

// True when the checkpoint looks like MLX's (a "quantization" config or mlx-lm names); then
// ck.tensors is rewritten in place. A plain HF checkpoint is left alone (false).
bool apply_mlx_layout(HfCheckpoint& ck);

}  // namespace oxi
