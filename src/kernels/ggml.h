// llama.cpp's (ggml's) CPU arithmetic reproduced bit for bit, for the families whose llama.cpp
// agreement is checked at that level (Gemma 4; docs/gemma4.md): the summation orders of its vector
// dot products, soft-max, GELU table, RoPE recurrence, flash attention (vector and tiled kernels)
// and f32 mul_mat. Kernel code, model-independent; the AVX-512 flash attention is in
// x86/ggml_fa_avx512.cpp (kernels/ggml_fa.h).
#pragma once

#include <cstdint>

#include "kernels/matmul.h"

namespace oxi {

// llama.cpp's CPU arithmetic reproduced bit for bit (ggml_numerics.cpp). `lanes`:
// the f32 vector width of the ggml build the host gets, 16 (AVX-512) or 8 (AVX2 + FMA).
int ggml_host_lanes();
float ggml_dot_f16(const uint16_t* x, const float* y, int64_t n, int lanes);  // ggml_vec_dot_f16, y f16-valued
float ggml_dot_f32(const float* x, const float* y, int64_t n, int lanes);     // ggml_vec_dot_f32
float ggml_v_expf(float x, int lanes);                                       // ggml_v_expf, one lane
double ggml_soft_max(float* x, int64_t n, float max, int lanes);             // ggml_vec_soft_max_f32
float ggml_gelu(float x);                                                    // ggml_vec_gelu_f32 (f16 table)
void ggml_geglu(float* g, const float* u, int64_t n);  // g[i] = ggml_gelu(g[i]) · u[i]
// ggml_rope_ext, NeoX mode, no scaling: n_heads heads of hd values at position pos, the first
// n_dims rotated; freq_factors (n_dims/2 divisors) may be null.
void ggml_rope_neox(float* x, int64_t n_heads, int64_t hd, int64_t pos, int64_t n_dims, float base, const float* freq_factors);
// One query row of ggml_flash_attn_ext (scale 1, no soft-cap, no sinks) over the consecutive KV
// cells [c0, c0 + n): k[i], v[i] are the rows of cell c0 + i (f16 or f32 values). `tiled`: the
// kernel ggml uses for ubatches of 64+ tokens, else its vector kernel. out: hd floats. A single
// query over a cache view of n_view ≥ 512 cells is split among llama.cpp's n_threads (0: never).
void ggml_flash_attn_row(const float* q, int64_t hd, const void* const* k, const void* const* v, int64_t c0, int64_t n,
                         bool kv_f16, bool tiled, int lanes, float* out, int64_t n_view = 0, int n_threads = 0);
// The same row as llama.cpp computes it with flash attention off: kq = K·q (ggml mul_mat),
// ggml_soft_max_ext over the cache view, kqv = V·softmax (mul_mat over the cells; the f16 cache
// rounds q and the weights to f16). `batch`: the ubatch has 2+ tokens (llamafile's sgemm applies);
// `one_head`: the model has one query head (its permuted q is then contiguous).
void ggml_attn_row_noflash(const float* q, int64_t hd, const void* const* k, const void* const* v, int64_t c0, int64_t n,
                           bool kv_f16, bool batch, bool one_head, int lanes, float* out);
// y = W·x for f32 W as ggml's CPU mul_mat orders it: llamafile's sgemm when T ≥ 2, cols % lanes == 0
// and rows % 4 == 0 (our kernels when their width matches), ggml_vec_dot_f32 otherwise and for
// mul_mat_id (expert) products.
void ggml_matmul_f32(const MatrixView& w, const float* x, int64_t T, float* y, int lanes, bool mul_mat_id);

}  // namespace oxi
