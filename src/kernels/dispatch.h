// Per-ISA kernel tables (internal). Each ISA's source file fills one Kernels table; matmul.cpp
// picks one at start-up (isa.cpp) and only calls through it.
#pragma once

#include <cstddef>
#include <cstdint>

#include "format/dtype.h"

namespace oxi::kern {

// Weight types with a matmul kernel, in table order.
// An ISA table may leave a type's entry empty (today only the MLX types on NEON and SIMD128):
// matmul then dequantises rows to f32 (its fallback) on that ISA.
enum WType : int {
  kWF32, kWF16, kWBF16, kWQ8_0, kWQ4_0, kWQ4_K, kWQ5_K, kWQ6_K, kWQ3_K, kWIQ4_XS,
  kWQ5_0, kWIQ4_NL, kWQ4_1, kWQ5_1, kWQ2_K, kWIQ3_S, kWIQ3_XXS,
  kWIQ2_XXS, kWIQ2_XS, kWIQ2_S, kWIQ1_S, kWIQ1_M, kWMXFP4,
  // MLX affine groups (format/dtype.h), f32 activations: scalar, AVX2 and AVX-512 kernels; the
  // other tables leave them empty (rows dequantised to f32).
  kWMLX4_32, kWMLX4_64, kWMLX4_128, kWMLX8_32, kWMLX8_64, kWMLX8_128, kNumWTypes
};
// Activation formats (ggml's vec_dot_type).
enum AType : int { kAF32, kAF16, kABF16, kAQ8_0, kAQ8_K, kAQ8_1, kNumATypes };

int wtype_index(DType t);  // -1 if none
AType atype_of(int wtype);
DType wtype_dtype(int wtype);
uint64_t act_row_bytes(AType a, int64_t cols);

// One tile of a matmul: y[t * ldy + r] = dot(W row r, X row t) for r in [r0, r1), t in [t0, t1).
struct MMArgs {
  const uint8_t* w;    // weight row 0
  uint64_t w_stride;   // bytes between weight rows
  const uint8_t* x;    // activation row 0 (in the weight type's activation format)
  uint64_t x_stride;   // bytes between activation rows
  float* y;
  int64_t ldy;         // floats between output rows (tokens)
  int64_t cols;
  int64_t r0, r1, t0, t1;
  // Nonzero: identifies this activation buffer's contents (unique per matmul call), so a kernel
  // may reuse per-thread preprocessing of x across the work units of one call; 0: do not cache.
  uint64_t x_id;
  // A row-interleaved copy of the weights (kernels/pack.h), for the Kernels::mm_packed kernels:
  // 16-row group g at wp + g·wp_stride, covering rows [0, wp_rows); rows past it use w.
  const uint8_t* wp;
  uint64_t wp_stride;
  int64_t wp_rows;
};

using MMFn = void (*)(const MMArgs&);
// Converts n floats to an activation row of the given format (n a multiple of its block size).
using ActFn = void (*)(const float* x, void* dst, int64_t n);
// Writes 16-row groups [g0, g1) of a weight matrix (rows of w_stride bytes, cols elements) in an
// ISA's packed layout to dst (group g at dst + g · packed group bytes; kernels/pack.h).
using PackFn = void (*)(const uint8_t* w, uint64_t w_stride, int64_t cols, int64_t g0, int64_t g1, uint8_t* dst);
// The inverse: one packed 16-row group back to 16 file-layout rows (row r at rows + r·row_stride).
using UnpackFn = void (*)(const uint8_t* group, int64_t cols, uint8_t* rows, uint64_t row_stride);

struct Kernels {
  const char* name;
  MMFn mm[kNumWTypes];
  ActFn act[kNumATypes];  // act[kAF32] unused
  // Lanes of the F32 tiles when their sums run in llamafile's sgemm order for that vector width
  // (x86: 8 or 16 — the Gemma 4 ggml-order path relies on it); 0: some other order.
  int f32_sgemm_lanes = 0;
  // GEMV over a packed copy (nullptr: none for that type) for 1..kPackedGemvMaxTokens tokens
  // (each token's result the same as its single-token call's), its packer and unpacker (all three
  // or none per type).
  MMFn mm_packed[kNumWTypes] = {};
  PackFn pack[kNumWTypes] = {};
  UnpackFn unpack[kNumWTypes] = {};
};

extern const Kernels kScalarKernels;
#if defined(OXI_HAVE_AVX2)
extern const Kernels kAvx2Kernels;
#endif
#if defined(OXI_HAVE_AVX512)
extern const Kernels kAvx512Kernels;
#endif
#if defined(OXI_HAVE_AMX)
extern const Kernels kAvx512AmxKernels;  // avx512 + AMX-INT8 tiles for the multi-token GEMM
#endif
#if defined(OXI_HAVE_NEON)
extern const Kernels kNeonKernels;
#endif
#if defined(OXI_HAVE_NEON_DOTPROD)
extern const Kernels kNeonDotprodKernels;
#endif
#if defined(OXI_HAVE_NEON_I8MM)
extern const Kernels kNeonI8mmKernels;
#endif
#if defined(OXI_HAVE_SIMD128)
extern const Kernels kSimd128Kernels;
#endif

// Per-thread scratch for ISA kernels (64-byte aligned, grows, slot 0..5). The per-ISA files use
// this instead of std containers: an out-of-line std template instantiated in a file compiled
// with -mavx512f would be a COMDAT the linker may pick for generic code too.
// Slots 2 and 4 hold the AVX-512 GEMV activation caches (Q4_0, Q8_0; valid while MMArgs::x_id
// matches): kernels that do not own those caches must not use them.
void* thread_scratch(int slot, size_t bytes);

// The active table.
const Kernels& active_kernels();

}  // namespace oxi::kern
