// The one HF ↔ GGUF tensor map of the Qwen 3.5 family (dense `qwen35`, MoE `qwen35moe`): for each
// GGUF name (llama.cpp's), the HF checkpoint's name and the transform that turns the HF tensor
// into the GGUF one (spec A.8.2). Used by the model's HF read (through wt::WeightSource) and by
// the converter (src/convert/qwen35.cpp), so the two cannot drift apart.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "format/tensor_index.h"
#include "models/qwen35/config.h"

namespace oxi::qwen35 {

// Per-element transform, HF value → GGUF value.
enum class Fix : uint8_t {
  kNone,
  kPlusOne,  // zero-centred RMSNorm weight (HF stores w, the GGUF 1 + w); not linear_attn.norm
  kNegExp,   // A_log → ssm_a = −exp(A_log)
};

// Where the V heads sit in the tensor: HF groups the value heads of one key head together,
// GGUF tiles them (config.h vhead_perm); the reorder applies only when Hk ≠ Hv.
enum class VHeads : uint8_t {
  kNone,
  kConvRows,   // rows [C = 2·key_dim + value_dim]: the value part (from 2·key_dim) in blocks of dv
  kValueRows,  // rows [value_dim]: blocks of dv
  kHeadRows,   // one row (or element, for 1-D) per value head
  kValueCols,  // columns [value_dim] (ssm_out's input): blocks of dv
};

// How the HF shape differs from the GGUF one.
enum class HfShape : uint8_t {
  kSame,
  kConv,  // conv1d: HF [C, 1, K], GGUF [C, K]
  kRow,   // shared_expert_gate: HF [1, d], GGUF [d]
};

struct HfTensor {
  std::string name;  // "" when the HF checkpoint has no single tensor for it (per-expert stacks)
  Fix fix = Fix::kNone;
  VHeads vheads = VHeads::kNone;
  HfShape shape = HfShape::kSame;
  bool f32 = false;  // stored f32 in the GGUF whatever the matrix type (norms, conv, router, ...)
};

// The HF language-model prefix: "model.language_model." (Qwen 3.5 VL checkpoints) or "model."
// (text-only ones).
std::string hf_lm_prefix(const TensorIndex& idx);

// GGUF name → its HF source. `lm`: hf_lm_prefix; `n_layer`: the trunk's block count (block
// n_layer is the MTP block, HF mtp.*). Unknown names give an empty HfTensor::name.
HfTensor hf_tensor(const std::string& gguf, const std::string& lm, int64_t n_layer);
// Expert e's HF matrix of a per-expert checkpoint (the older layout) for the GGUF stack
// blk.N.ffn_{gate,up,down}_exps.weight; "" for other names.
std::string hf_expert_name(const std::string& gguf, int64_t e, const std::string& lm, int64_t n_layer);
// HF name → GGUF name (the inverse of both; a per-expert matrix gives its stack). "" when the
// name is not a language-model tensor of the family.
std::string gguf_name(const std::string& hf, const std::string& lm, int64_t n_layer);

// The HF shape of a tensor whose GGUF shape is `gguf_shape` (kConv / kRow insert their 1).
std::vector<int64_t> hf_shape(const HfTensor& h, std::vector<int64_t> gguf_shape);
// The HF → GGUF order of a tensor's V-head axis (out index → HF index); empty when there is
// nothing to reorder (vheads kNone, or Hk = Hv).
std::vector<int64_t> vhead_order(const Config& c, VHeads v);
// `fix` applied to n values in place.
void apply_fix(Fix fix, float* x, int64_t n);

}  // namespace oxi::qwen35
