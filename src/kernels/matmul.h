// The one interface every linear layer goes through (owned by the kernels library; ISA dispatch
// and backends live behind it, model code never names either).
#pragma once

#include <cstdint>

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
// Throws oxi::Error(kUnsupported) "unsupported tensor type X" for a dtype with no kernel.
void matmul(const MatrixView& w, const float* x, int64_t n_tokens, float* y);

// Dequantise one row (cols elements) to f32: embedding lookups and tests.
void dequantize_row(const MatrixView& w, int64_t row, float* out);

// Whether `matmul` can compute this dtype.
bool matmul_supports(DType t);

}  // namespace oxi
