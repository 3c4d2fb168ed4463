// Walks a matmul tile range (MMArgs rows r0..r1 × tokens t0..t1) with R×T register blocks, then
// the row and token remainders with R×1, 1×T and 1×1 blocks. Tile<R, T>::run(a, r, t) computes
// y for rows r..r+R-1 and tokens t..t+T-1. For the per-ISA files: the template lives in an
// anonymous namespace so that every file gets its own internal copy. (Instantiated with a
// file's anonymous-namespace tiles alone is not enough: GCC emits drive<alias template> as a weak
// symbol whose mangled name is the same in every file, and the linker would keep one of them —
// possibly the +dotprod or AVX-512 copy — for all.)
#pragma once

#include <cstdint>
#include <type_traits>

#include "kernels/dispatch.h"

namespace oxi::kern {
namespace {

template <template <int, int> class Tile, int R, int T>
inline void drive_tiles(const MMArgs& a) {
  int64_t r = a.r0;
  for (; r + R <= a.r1; r += R) {
    int64_t t = a.t0;
    for (; t + T <= a.t1; t += T) Tile<R, T>::run(a, r, t);
    for (; t < a.t1; ++t) Tile<R, 1>::run(a, r, t);
  }
  for (; r < a.r1; ++r) {
    int64_t t = a.t0;
    for (; t + T <= a.t1; t += T) Tile<1, T>::run(a, r, t);
    for (; t < a.t1; ++t) Tile<1, 1>::run(a, r, t);
  }
}

// GEMV row walk (weights streamed from memory once per call): the R rows of a register tile
// come from R evenly spaced places of the unit [r0, r1) instead of R neighbouring rows, so a
// core has R DRAM streams in flight rather than one. One core's read rate is bounded by how
// many lines it has in flight; R streams raised a 2-thread Q4_0 GEMV from ~15 to ~20–23 GB/s
// (docs/kernels.md, "GEMV streams"). tile(R, r, rs, pf) computes rows r, r + rs, …,
// r + (R−1)·rs and prefetches pf bytes ahead in each (kGemvPfRows rows: the stream's next row).
inline constexpr int kGemvPfRows = 1;

template <int R, class F>
inline void gemv_stream_rows(const MMArgs& a, F&& tile) {
  const int64_t q = (a.r1 - a.r0) / R;
  const uint64_t pf = kGemvPfRows * a.w_stride;
  for (int64_t j = 0; j < q; ++j) tile(std::integral_constant<int, R>{}, a.r0 + j, q, pf);
  for (int64_t r = a.r0 + R * q; r < a.r1; ++r) tile(std::integral_constant<int, 1>{}, r, int64_t{1}, pf);
}

// drive_tiles for tiles that take a row step and prefetch distance, Tile<R, T>::run(a, r, t, rs,
// pf) (the x86 sets): one token goes through gemv_stream_rows with G-row tiles; otherwise R×T
// tiles of neighbouring rows prefetch the next row group.
template <template <int, int> class Tile, int R, int T, int G = 4>
inline void drive_stream_tiles(const MMArgs& a) {
  if (a.t1 - a.t0 == 1) {
    gemv_stream_rows<G>(a, [&](auto rn, int64_t r, int64_t rs, uint64_t pf) {
      Tile<decltype(rn)::value, 1>::run(a, r, a.t0, rs, pf);
    });
    return;
  }
  int64_t r = a.r0;
  for (; r + R <= a.r1; r += R) {
    int64_t t = a.t0;
    for (; t + T <= a.t1; t += T) Tile<R, T>::run(a, r, t, 1, R * a.w_stride);
    for (; t < a.t1; ++t) Tile<R, 1>::run(a, r, t, 1, R * a.w_stride);
  }
  for (; r < a.r1; ++r) {
    int64_t t = a.t0;
    for (; t + T <= a.t1; t += T) Tile<1, T>::run(a, r, t, 1, a.w_stride);
    for (; t < a.t1; ++t) Tile<1, 1>::run(a, r, t, 1, a.w_stride);
  }
}

}  // namespace
}  // namespace oxi::kern
