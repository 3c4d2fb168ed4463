// Which weights `--quant TYPE` (quantise at load) and `oxinfer convert --type q8_0|q4_0|q4_1|q4_k`
// quantise, and to which type. The rule is llama.cpp's llama_model_quantize without importance
// matrix (src/llama-quant.cpp of the llama.cpp that node-llama-cpp 3.22.1 ships), so a model
// quantised by us at load, a file we convert, and a file llama-quantize makes from the same
// weights hold the same tensor types and, the quantisers being byte-identical, the same bytes:
//   * quantised: tensors of 2+ dims whose GGUF name ends in "weight", except norms, MoE routers
//     (ffn_gate_inp), conv1d kernels (ssm_conv1d), Gemma's per_layer_model_proj and the tiny
//     altup/laurel matrices — those keep their stored type;
//   * output.weight — or, when the model has none (tied embeddings), token_embd.weight and
//     per_layer_token_embd.weight, which then serve as the output — become Q6_K under a 4-bit
//     base (Q8_0 stays Q8_0; Q8_0 when rows do not fit 256-blocks);
//   * 8-expert models keep attn_k / attn_v / attn_qkv at Q8_0 (llama.cpp's Mixtral rule);
//   * rows that do not fit the type's block fall back as llama.cpp does: Q4_K → Q5_0, Q6_K →
//     Q8_0, then F16 when even 32 does not divide the row.
// Q8_0, Q4_0 and Q4_1 are exactly llama-quantize's file types Q8_0, Q4_0 and Q4_1. Q4_K is that rule with Q4_K
// as the base: llama.cpp's Q4_K_S additionally bumps a few attn_v / ffn_down tensors to Q5_K.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "format/dtype.h"

namespace oxi {

// "q8_0" | "q4_0" | "q4_k" (any case) → Q8_0 | Q4_0 | Q4_K (load-time --quant; convert also takes Q4_1); else oxi::Error(kInvalidArgument)
// naming the accepted values.
DType parse_quant_type(const std::string& name);

// llama.cpp's tensor_allows_quantization (default parameters): may the tensor with GGUF name
// `name` and `n_dims` dimensions (ggml's count: trailing 1s dropped) be quantised at all?
bool quant_allowed(const std::string& name, int n_dims);
// llama.cpp's tensor_type_fallback: `t` when rows of `cols` values fit its block, else the
// smaller-block substitute (IQ4_XS → IQ4_NL, Q3_K → Q4_0, Q4_K → Q5_0, Q5_K → Q5_1, Q6_K → Q8_0),
// and F16 when that does not fit either.
DType quant_fallback(DType t, int64_t cols);

struct QuantRule {
  DType base = DType::Q8_0;  // Q8_0 | Q4_0 | Q4_1 | Q4_K
  int64_t n_expert = 0;      // experts per MoE layer (0: dense)
  bool has_output = false;   // the model has its own output.weight (else the embeddings are tied)

  // Type for the tensor with GGUF name `name`, `n_dims` dimensions and rows of `cols` values;
  // std::nullopt: keep it as stored.
  std::optional<DType> target(const std::string& name, int n_dims, int64_t cols) const;
};

// llama_ftype for general.file_type of a file quantised with `base`: Q8_0 → 7 (MOSTLY_Q8_0),
// Q4_0 → 2 (MOSTLY_Q4_0), Q4_1 → 3 (MOSTLY_Q4_1), Q4_K → 14 (MOSTLY_Q4_K_S, the nearest llama.cpp recipe).
uint32_t quant_file_type(DType base);

}  // namespace oxi
