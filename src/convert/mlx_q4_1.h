// MLX affine 4-bit groups → ggml Q4_1 blocks without a second rounding (`oxinfer convert --type
// q4_1` of an MLX checkpoint; docs/format.md "MLX checkpoints").
//
// An MLX group of G inputs (G a multiple of 32) holds value = q·scale + bias, q in 0..15; a Q4_1
// block of 32 holds value = q·d + m, q in 0..15, d and m f16. So each 32-input slice of a group is
// one Q4_1 block with d = scale, m = bias and the same codes, exactly, whenever scale and bias are
// f16 values (f32 → f16 → f32 gives them back). A group where either is not (a bf16 value beyond
// 65504, below the f16 subnormals, or between f16 steps; an f32 scale with more mantissa bits) is
// requantised from its dequantised f32 values with llama-quantize's Q4_1 arithmetic, and counted.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <utility>
#include <vector>

#include "format/dtype.h"
#include "kernels/matmul.h"

namespace oxi {

// Groups written so far (a converter sums over its tensors; thread-safe).
struct MlxQ4_1Stats {
  std::atomic<int64_t> exact{0};        // copied: scale and bias are f16 values
  std::atomic<int64_t> requantised{0};  // dequantised and quantised again (Q4_1 reference)
};

// MLX_Q4_G32 / G64 / G128.
bool is_mlx_q4(DType t);
// True when `v` survives f32 → f16 → f32 unchanged (NaN never does).
bool f16_exact(float v);
// True when every 32-column output block of `col_perm` (output column → source column; empty:
// identity) reads 32 consecutive source columns starting at a multiple of 32 — then each output
// block is one slice of one MLX group and can be copied.
bool keeps_q4_1_blocks(const std::vector<int64_t>& col_perm);

// One row: `src` holds `cols` values as MLX_Q4 blocks of type `t`; dst gets cols/32 Q4_1 blocks
// (output column j = source column col_perm[j]; col_perm empty or keeps_q4_1_blocks). `scratch`:
// `cols` floats. Adds the row's groups to `exact` / `requantised`.
void mlx_q4_row_to_q4_1(DType t, const uint8_t* src, int64_t cols, const std::vector<int64_t>& col_perm, uint8_t* dst,
                        float* scratch, int64_t& exact, int64_t& requantised);

// `rows` rows of `cols` values (row r from src(r): a MLX_Q4 matrix and its row) as Q4_1 into dst,
// in parallel on the pool; the group counts are added to `stats`.
void mlx_q4_to_q4_1(int64_t rows, int64_t cols, uint8_t* dst,
                    const std::function<std::pair<MatrixView, int64_t>(int64_t)>& src, const std::vector<int64_t>& col_perm,
                    MlxQ4_1Stats& stats);

// "convert: Q4_1 from MLX 4-bit groups: N exact, M requantised (…)" on stderr when any were written.
void print_mlx_q4_1_stats(const MlxQ4_1Stats& stats);

}  // namespace oxi
