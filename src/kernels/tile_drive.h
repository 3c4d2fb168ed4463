// Walks a matmul tile range (MMArgs rows r0..r1 × tokens t0..t1) with R×T register blocks, then
// the row and token remainders with R×1, 1×T and 1×1 blocks. Tile<R, T>::run(a, r, t) computes
// y for rows r..r+R-1 and tokens t..t+T-1. For the per-ISA files: the template lives in an
// anonymous namespace so that every file gets its own internal copy. (Instantiated with a
// file's anonymous-namespace tiles alone is not enough: GCC emits drive<alias template> as a weak
// symbol whose mangled name is the same in every file, and the linker would keep one of them —
// possibly the +dotprod or AVX-512 copy — for all.)
#pragma once

#include <cstdint>

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

}  // namespace
}  // namespace oxi::kern
