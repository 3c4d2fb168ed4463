// Multi-token GEMM paths (internal). An ISA set may provide, per integer weight type, a GEMM
// that works on activations repacked once per matmul call into the layout its micro-kernel
// reads (instead of the per-token activation rows the generic tiles take). matmul() uses it for
// n_tokens >= min_tokens; the activation rows are first converted with the set's act[] function
// as usual (so numerics are the same), then packed.
//
// Packed activation layouts (block-major; N = tokens packed, block b of token t):
//   Q8_0/Q4_0/Q5_0/IQ4_NL weights (32-element blocks, nb = cols/32):
//     int8  qs[nb][N][32]; int32 corr[nb][N] = −k·Σqs (k: the weight offset, see the ISA file);
//     f32   d[nb][N]   (Q4_1/Q5_1, Q8_1 activations: the corr slot holds f32 s_x instead)
//   K-quants (256-element super-blocks, nsb = cols/256):
//     int8  qs[nsb][N][256]; int16 bsums[nsb][N][16] (Q6_K: Q8_K's per-16 sums; Q4_K/Q5_K: per-32
//     sums in the first 8); f32 d[nsb][N]
#pragma once

#include <cstdint>

#include "kernels/dispatch.h"

namespace oxi::kern {

// Packs tokens [t0, t1) of act-format rows (xa, x_stride bytes apart) into dst, a layout of
// n_total tokens.
using GemmPackFn = void (*)(const uint8_t* xa, uint64_t x_stride, int64_t t0, int64_t t1, int64_t n_total,
                            int64_t cols, uint8_t* dst);

struct GemmKernels {
  const char* name;
  int64_t min_tokens;
  GemmPackFn pack[kNumWTypes];  // null: no GEMM for this weight type
  MMFn run[kNumWTypes];         // one work unit; MMArgs.x = packed buffer, x_stride = n_total
};

// Bytes of the packed activations for a weight type (same formula for every ISA).
uint64_t gemm_packed_bytes(int wtype, int64_t cols, int64_t n_total);

#if defined(OXI_HAVE_AVX2)
extern const GemmKernels kAvx2Gemm;
#endif
#if defined(OXI_HAVE_AVX512)
extern const GemmKernels kAvx512Gemm;
#endif
#if defined(OXI_HAVE_AMX)
extern const GemmKernels kAmxGemm;
#endif

// The GEMM table of the active set, or null.
const GemmKernels* active_gemm();

}  // namespace oxi::kern
