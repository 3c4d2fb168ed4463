// The gated feed-forward block both families use: y = down(act(gate·x) ⊙ up·x) over T rows
// (SwiGLU for Qwen 3.5's dense FFN, experts and shared expert; GeGLU for Gemma 4's dense FFN,
// experts and assistant drafter), and the product strategy it runs its matrices with.
#pragma once

#include <cstdint>

#include "kernels/matmul.h"

namespace oxi::nn {

// How a layer's weight products run. Our kernels by default; with ggml_f32, products with f32
// weights follow ggml's CPU summation order instead (kernels/ggml.h ggml_matmul_f32 at `lanes`,
// Gemma 4's bit-exactness with llama.cpp), other weight types still through our kernels.
struct Products {
  bool ggml_f32 = false;
  int lanes = 16;  // ggml's f32 vector width (16 AVX-512, 8 AVX2) when ggml_f32

  // y [T, w.rows] = x [T, w.cols] · wᵀ. `id`: an expert product (ggml's mul_mat_id order).
  void mm(const MatrixView& w, const float* x, int64_t T, float* y, bool id = false) const;
  // Two products of one input (gate and up): one batched kernel call (kernels' matmul_batch, the
  // same values as two calls) unless an f32 one follows ggml's order.
  void mm2(const MatrixView& w1, float* y1, const MatrixView& w2, float* y2, const float* x, int64_t T,
           bool id = false) const;
};

// The gate activation: SiLU (SwiGLU), ggml's GELU (its f16-indexed table, as llama.cpp's GeGLU) or
// the tanh-formula GELU in f32 (ops::gelu_tanh).
enum class GateAct { kSilu, kGeluGgml, kGeluTanh };

struct GatedFfn {
  GateAct act = GateAct::kSilu;
  Products mm;
  bool expert = false;  // the products are an expert's (Products::mm's `id`)
};

// a[i] ← act(a[i]) · b[i] over n values (element-wise: the same values for any split of the range).
void gate_act(GateAct act, float* a, const float* b, int64_t n);

// y [T, down.rows] = down · (act(gate·x) ⊙ up·x) for x [T, gate.cols]; gate and up have the same
// rows (the FFN width), down as many cols. y must not alias x. Scratch: two T × width buffers per
// thread, kept and grown across calls (no allocation per layer once the widest call has run).
void gated_ffn(const MatrixView& gate, const MatrixView& up, const MatrixView& down, const float* x, int64_t T,
               float* y, const GatedFfn& o);

}  // namespace oxi::nn
