// Element/block types of tensors in model files. Values equal ggml's type ids (the GGUF on-disk
// numbers) so a GGUF type field casts straight in; safetensors-only integer/bool dtypes that ggml
// lacks get ids from 1000 up.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace oxi {

enum class DType : uint32_t {
  F32 = 0, F16 = 1, Q4_0 = 2, Q4_1 = 3, Q5_0 = 6, Q5_1 = 7, Q8_0 = 8, Q8_1 = 9,
  Q2_K = 10, Q3_K = 11, Q4_K = 12, Q5_K = 13, Q6_K = 14, Q8_K = 15,
  IQ2_XXS = 16, IQ2_XS = 17, IQ3_XXS = 18, IQ1_S = 19, IQ4_NL = 20, IQ3_S = 21, IQ2_S = 22,
  IQ4_XS = 23, I8 = 24, I16 = 25, I32 = 26, I64 = 27, F64 = 28, IQ1_M = 29, BF16 = 30,
  TQ1_0 = 34, TQ2_0 = 35, MXFP4 = 39,
  // Not ggml types: safetensors dtypes without a ggml equivalent.
  U8 = 1000, BOOL = 1001, U32 = 1002,  // U32: MLX's packed codes (format/mlx.h)
  // Not ggml types either: MLX affine groups (mlx-community checkpoints, format/mlx.h), repacked at
  // load into one self-contained block per group of G elements: f32 scale s, f32 bias b, then the
  // G codes q (4 bits: element 2j in the low nibble of byte j, 2j+1 in the high; 8 bits: one byte
  // each), value = s * q + b. Never written to GGUF (ids >= 1000 have no GGUF encoding).
  MLX_Q4_G32 = 1010, MLX_Q4_G64 = 1011, MLX_Q4_G128 = 1012,
  MLX_Q8_G32 = 1013, MLX_Q8_G64 = 1014, MLX_Q8_G128 = 1015,
};

// The MLX affine block type for (bits, group size); nullopt for a combination we do not run
// (bits other than 4 and 8, group sizes other than 32, 64, 128).
std::optional<DType> mlx_dtype(int bits, int group_size);
bool is_mlx_dtype(DType t);

struct DTypeTraits {
  const char* name;      // "F32", "Q4_K", ... (ggml's spelling, upper case)
  uint32_t block_elems;  // elements per block (1 for plain types)
  uint32_t block_bytes;  // bytes per block
};

// Traits for a known type; nullopt for an id we do not know (e.g. a removed ggml type).
std::optional<DTypeTraits> dtype_traits(DType t);
std::optional<DTypeTraits> dtype_traits(uint32_t raw_id);
std::string dtype_name(DType t);  // "F32"…; "type#N" for unknown ids
std::optional<DType> dtype_from_name(std::string_view name);  // case-insensitive: "q8_0", "BF16"

// Bytes for `n_elems` elements of a row; nullopt if n_elems is not a multiple of the block size
// or on overflow.
std::optional<uint64_t> dtype_row_bytes(DType t, uint64_t n_elems);

}  // namespace oxi
