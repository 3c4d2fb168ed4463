// The one interface every linear layer goes through (owned by the kernels library; ISA dispatch
// and backends live behind it, model code never names either).
//
// Numerics follow llama.cpp's CPU backend: activations are converted per token to the weight
// type's "vec_dot_type" before the dot products — F32 weights: f32; F16: f16; BF16: bf16;
// Q8_0/Q4_0: Q8_0 blocks; Q4_K/Q5_K/Q6_K: Q8_K blocks (integer dot products, exact) — so results
// match llama.cpp up to float summation order.
#pragma once

#include <cstdint>
#include <functional>

#include "format/dtype.h"

namespace oxi {

// A weight matrix as stored in the model file: `rows` output features, each a contiguous row of
// `cols` input features in `dtype` (quant blocks run along a row). row_bytes = bytes of one row.
// This is HF's [out, in] and GGUF's ne = {in, out}.
struct MatrixView {
  DType dtype = DType::F32;
  int64_t rows = 0;
  int64_t cols = 0;
  const uint8_t* data = nullptr;
  uint64_t row_bytes = 0;
};

// y[t, r] = Σ_c x[t, c] · W[r, c] for t < n_tokens.
// x: [n_tokens, cols] f32 row-major; y: [n_tokens, rows] f32 row-major (overwritten).
// Runs on the global thread pool (kernels/thread_pool.h); called from inside a pool job it runs
// serially on the calling thread. Thread-safe (scratch is per thread).
// Throws oxi::Error(kUnsupported) "unsupported tensor type X" for a dtype with no kernel.
// Native kernels: F32, F16, BF16, Q8_0, Q4_0, Q4_K, Q5_K, Q6_K. Also accepted, slower (rows
// dequantised to f32 per chunk; activations rounded to ggml's Q8_0 / Q8_K first, and Q4_1 / Q5_1
// by a scalar Q8_1 dot, so results still match ggml up to summation order): Q4_1, Q5_0, Q5_1,
// IQ4_NL, IQ4_XS, Q2_K, Q3_K (llama.cpp's fallbacks for K-quant recipes).
void matmul(const MatrixView& w, const float* x, int64_t n_tokens, float* y);

// Several matrices sharing one input (q/k/v, gate/up): ys[j] = x · ws[j]ᵀ, every ws[j] with the
// same cols. Same results as n separate matmul calls (bit for bit), but the activation is
// converted once per format and all row chunks are shared in one pool job (one dispatch and one
// join instead of n), and a device backend gets the batch as one call.
void matmul_batch(const MatrixView* ws, float* const* ys, int n, const float* x, int64_t n_tokens);

// Dequantise one row (cols elements) to f32: embedding lookups and tests.
void dequantize_row(const MatrixView& w, int64_t row, float* out);

// The most tokens one `matmul` call on weights of type t takes while giving every token's row bit
// for bit what a one-token call gives (under the kernel set now active): up to 4 tokens every type
// runs the GEMV kernels; types with a packed multi-token kernel (kernels/pack.h) keep it up to its
// limit; the GEMM beyond sums in another order. Speculative verify steps stay within it.
int64_t matmul_exact_tokens(DType t);

// Whether `matmul` can compute this dtype.
bool matmul_supports(DType t);
// Whether the active kernel set has a kernel for this dtype; false for the types `matmul` runs by
// dequantising rows to f32 first (slower; `inspect` and `bench` name them).
bool matmul_is_native(DType t);
// How `matmul` computes a weight dtype under the active kernel set: "kernel", "dequantise" (rows
// dequantised to f32, then the F32 kernel) or "none" (unsupported).
const char* matmul_path(DType t);

// Dequantise n elements (a multiple of the block size) of type t from src to f32.
// Types: F32, F16, BF16, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, IQ4_NL, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K,
// IQ4_XS, Q8_K; else kUnsupported.
void dequantize(DType t, const void* src, float* dst, int64_t n);

// Quantise n floats (a multiple of the block size) to type t at dst (dtype_row_bytes(t, n) bytes).
// F32, F16, BF16 (round to nearest even), Q8_0, Q4_0, Q4_K, Q5_0 and Q6_K (bit-identical to ggml's
// reference quantisers without importance matrix, as llama-quantize / convert_hf_to_gguf produce).
// Else kUnsupported.
void quantize_row(DType t, const float* x, int64_t n, void* dst);
// `rows` rows of `cols` values quantised to `t` into dst (row r at dst + r × row bytes of t), in
// parallel on the pool (chunks of ~256 KiB of output): fill(r, row, scratch) first writes row r in
// f32 to `row` (`scratch`: cols more floats for the caller, e.g. a column permutation). What the
// converters and load-time quantisation share. `done(r0, r1)`, if given, runs after each finished
// chunk of rows [r0, r1) on the thread that did it (e.g. to release source pages early).
void quantize_rows(DType t, int64_t rows, int64_t cols, void* dst,
                   const std::function<void(int64_t r, float* row, float* scratch)>& fill,
                   const std::function<void(int64_t r0, int64_t r1)>& done = {});
bool quantize_supports(DType t);

}  // namespace oxi
