// Pieces the vision towers share (Qwen3-VL in qwen3vl.cpp, Gemma 4 in gemma4v.cpp), all on the
// kernels' thread pool and SIMD matmul.
#pragma once

#include <cfloat>
#include <cstdint>
#include <string>
#include <vector>

#include "format/gguf.h"
#include "kernels/matmul.h"

namespace oxi::vision {

// An mmproj GGUF (general.architecture "clip") whose vision projector type
// (clip.vision.projector_type, else clip.projector_type, as llama.cpp's loader reads it) is
// `projector`. oxi::Error:
// kInvalidArgument for a file that is not an mmproj, kUnsupported "PATH: projector type 'X' is
// not NAME" for another projector, and read_gguf's errors.
// `modality` "audio" reads clip.audio.projector_type instead of clip.vision.projector_type.
GgufFile read_mmproj(const std::string& path, const std::string& projector, const std::string& name,
                     const std::string& modality = "vision");

// A linear without bias, with the optional clamps of HF's Gemma4ClippableLinear (the Gemma 4
// vision and audio towers): y = clamp(W · clamp(x, in_lo, in_hi), out_lo, out_hi).
struct ClipLinear {
  MatrixView w;
  float in_lo = -FLT_MAX, in_hi = FLT_MAX, out_lo = -FLT_MAX, out_hi = FLT_MAX;
};
// y[n, w.rows] = the linear over n rows x[n, k], through the kernels' matmul (scratch: the clamped input).
void clip_linear(const ClipLinear& l, const float* x, int64_t n, int64_t k, float* y, std::vector<float>& scratch);
// The value of a one-element tensor, `def` when absent; kFormat when it is not one element.
float scalar_or(const TensorIndex& idx, const std::string& name, float def);
// RMS norm in place over n rows of k (w may be null), on the thread pool.
void rms_rows(float* x, const float* w, int64_t n, int64_t k, float eps);

// Full (non-causal) multi-head attention over N rows: for head hh, query row i reads
// q[i·q_stride + hh·hd …], keys/values likewise; out[i·H·hd + hh·hd …] = softmax(scale·q·Kᵀ)·V.
// Per head on blocks of 256 queries as two f32 matmuls (q·Kᵀ, P·V) with softmax_row between.
void vit_attention(const float* q, int64_t q_stride, const float* k, int64_t k_stride, const float* v, int64_t v_stride,
                   int64_t N, int64_t H, int64_t hd, float scale, float* out);

// GELU (tanh form, HF gelu_pytorch_tanh / ggml_gelu) in place over n rows of width k, with the
// kernels' vector tanh: 0.5·x·(1 + tanh(√(2/π)·x·(1 + 0.044715·x²))). bias (may be null) is added
// to every row first.
void gelu_tanh_rows(float* x, const float* bias, int64_t n, int64_t k);

}  // namespace oxi::vision
