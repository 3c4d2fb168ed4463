// llama-quantize's recipes (Q4_K_M, Q3_K_M, IQ4_XS, ...): which type each tensor of a GGUF gets.
// The rule is llama.cpp's llama_tensor_get_type without importance matrix or overrides
// (src/llama-quant.cpp of the llama.cpp that node-llama-cpp 3.22.1 ships): the file type's base
// type, bumped for the output / tied embeddings, attn_v-like and ffn_down tensors by layer
// ("use more bits" layers), then the block-size fallback (models/common/quant_rule.h).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "format/dtype.h"

namespace oxi {

struct QuantFileType {
  const char* name;  // "Q4_K_M" (llama-quantize's spelling)
  uint32_t ftype;    // llama_ftype, written as general.file_type
  DType base;        // the type most matrices get
};

// The recipes `oxinfer quantize` offers, in the order --help lists them.
const std::vector<QuantFileType>& quant_file_types();
// Case-insensitive lookup by name; nullopt when unknown.
std::optional<QuantFileType> find_quant_file_type(const std::string& name);

// What the recipe needs to know about the model (from the GGUF metadata).
struct QuantModelInfo {
  std::string arch;        // general.architecture
  int64_t n_layer_all = 0;  // <arch>.block_count (MTP blocks included, as llama.cpp counts)
  int64_t n_expert = 0;    // <arch>.expert_count, 0 when ≤ 1
  int64_t n_gqa = 0;       // head_count / head_count_kv of layer 0 (0 when head_count_kv is 0)
};

struct QuantTensorInfo {
  std::string name;
  std::vector<int64_t> ne;  // ggml order: ne[0] = values per row
  DType type = DType::F32;  // stored type
};

// Target type of every tensor (same order as `tensors`); a tensor whose target equals its
// stored type is copied unchanged. `pure`: every quantisable tensor gets the base type (only the
// block-size fallback applies), as llama-quantize --pure. Counters run in llama.cpp's tensor
// order (non-block tensors first, then by block number, by name within each).
std::vector<DType> quant_recipe_types(const QuantFileType& ft, const QuantModelInfo& model,
                                      const std::vector<QuantTensorInfo>& tensors, bool pure);

// llama.cpp's tensor order for `names` (as above): the permutation, first index first.
std::vector<size_t> llama_tensor_order(const std::vector<std::string>& names);

}  // namespace oxi

namespace oxi {

struct QuantizeOptions {
  bool allow_requantize = false;  // a quantised tensor may be dequantised and quantised again
  bool pure = false;              // no mixed recipe: the base type everywhere it fits
  bool progress = true;           // "[  i/  n] name  TYPE -> TYPE" lines on stderr
};

// llama-quantize on a GGUF: every KV copied (split keys dropped), general.file_type set to the
// recipe's llama_ftype and general.quantization_version to 2 (appended last, as llama.cpp does),
// tensors in llama.cpp's order, each either copied (type unchanged) or dequantised to f32 and
// quantised to its recipe type. Written via a temp file beside `out_path` + rename (nothing left
// behind on failure). oxi::Error(kInvalidArgument) "requantizing from type X is disabled" when a
// quantised tensor would change type without allow_requantize (checked before anything is written).
void quantize_gguf(const std::string& in_path, const std::string& out_path, const QuantFileType& ft,
                   const QuantizeOptions& options);

}  // namespace oxi
