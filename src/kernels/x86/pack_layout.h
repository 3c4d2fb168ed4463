// The 16-row packed layouts shared by the x86 packed GEMV kernels (x86/avx512_pack.cpp: one
// 512-bit vector per 4-byte column; x86/avx2_pack.cpp: the same bytes as two 256-bit halves,
// rows 0-7 and 8-15), their packer and unpacker, and the rows past a copy. The layouts are
// documented beside the AVX-512 kernels. Included by each per-ISA file, so the code is compiled
// with that file's flags (internal linkage: no out-of-line template shared with generic code).
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "kernels/dispatch.h"
#include "kernels/quant.h"

namespace oxi::kern {
namespace {

// Each packed layout (x86/avx512_pack.cpp) as a list of moves mv(packed offset, offset in the file's block, n):
// row r's n bytes go to packed offset + n·r of the 16-row block. pack and unpack walk the same
// list in opposite directions.
constexpr auto q4_0_moves = [](auto&& mv) {
  mv(0, offsetof(BlockQ4_0, d), 2);
  for (int j = 0; j < 4; ++j) mv(32 + 64 * j, offsetof(BlockQ4_0, qs) + 4 * j, 4);
};
constexpr auto q4_K_moves = [](auto&& mv) {
  mv(0, offsetof(BlockQ4_K, d), 2);
  mv(32, offsetof(BlockQ4_K, dmin), 2);
  for (int k = 0; k < 3; ++k) mv(64 + 64 * k, offsetof(BlockQ4_K, scales) + 4 * k, 4);
  for (int v = 0; v < 32; ++v) mv(256 + 64 * v, offsetof(BlockQ4_K, qs) + 4 * v, 4);
};
constexpr auto q6_K_moves = [](auto&& mv) {
  mv(0, offsetof(BlockQ6_K, d), 2);
  for (int k = 0; k < 4; ++k) mv(32 + 64 * k, offsetof(BlockQ6_K, scales) + 4 * k, 4);
  for (int h = 0; h < 2; ++h) {
    for (int m = 0; m < 8; ++m) {
      const int v = 288 + 192 * (8 * h + m);
      mv(v, offsetof(BlockQ6_K, ql) + 64 * h + 4 * m, 4);
      mv(v + 64, offsetof(BlockQ6_K, ql) + 64 * h + 32 + 4 * m, 4);
      mv(v + 128, offsetof(BlockQ6_K, qh) + 32 * h + 4 * m, 4);
    }
  }
};

// Groups [g0, g1) of rows of nb blocks of `block` bytes (packed: 16 · block per block).
template <class Moves>
void pack_groups(Moves moves, uint64_t block, int64_t nb, const uint8_t* w, uint64_t w_stride, int64_t g0, int64_t g1,
                 uint8_t* dst) {
  for (int64_t g = g0; g < g1; ++g) {
    uint8_t* o = dst + static_cast<uint64_t>(g) * static_cast<uint64_t>(nb) * 16 * block;
    for (int64_t b = 0; b < nb; ++b, o += 16 * block) {
      for (int r = 0; r < 16; ++r) {
        const uint8_t* src = w + static_cast<uint64_t>(16 * g + r) * w_stride + static_cast<uint64_t>(b) * block;
        moves([&](int po, size_t fo, int n) { std::memcpy(o + po + n * r, src + fo, static_cast<size_t>(n)); });
      }
    }
  }
}
template <class Moves>
void unpack_group(Moves moves, uint64_t block, int64_t nb, const uint8_t* group, uint8_t* rows, uint64_t row_stride) {
  const uint8_t* o = group;
  for (int64_t b = 0; b < nb; ++b, o += 16 * block) {
    for (int r = 0; r < 16; ++r) {
      uint8_t* dst = rows + static_cast<uint64_t>(r) * row_stride + static_cast<uint64_t>(b) * block;
      moves([&](int po, size_t fo, int n) { std::memcpy(dst + fo, o + po + n * r, static_cast<size_t>(n)); });
    }
  }
}

// Rows [rp, a.r1) past a packed copy (< 16): the file-layout kernel fn one token at a time, as the
// single-token packed kernels run them (so each token's result is theirs).
inline void file_rows_per_token(MMFn fn, const MMArgs& a, int64_t rp) {
  if (rp >= a.r1) return;
  for (int64_t t = a.t0; t < a.t1; ++t) {
    MMArgs rest = a;
    rest.r0 = std::max(a.r0, rp);
    rest.t0 = t;
    rest.t1 = t + 1;
    fn(rest);
  }
}

// f(std::integral_constant<int, k>{}) for 1 ≤ k ≤ Max (a larger k runs Max).
template <int Max, class F>
inline void with_token_count(int64_t k, F&& f) {
  if constexpr (Max > 1) {
    if (k < Max) return with_token_count<Max - 1>(k, f);
  }
  f(std::integral_constant<int, Max>{});
}

// The packed 16-row groups of rows [a.r0, rp) (a.r0 a multiple of 16: GEMV units are) for tokens
// [a.t0, a.t1), in passes of ≤ Pass tokens with sizes as even as possible (9 → 5 + 4):
// run(ctag, p, g, t) handles T = ctag's value tokens from t on group g at p.
template <int Pass, class Run>
inline void for_group_passes(const MMArgs& a, int64_t rp, Run&& run) {
  const int64_t n = a.t1 - a.t0, passes = (n + Pass - 1) / Pass, per = (n + passes - 1) / passes;
  for (int64_t g = a.r0 / 16; g < rp / 16; ++g) {
    const uint8_t* p = a.wp + static_cast<uint64_t>(g) * a.wp_stride;
    for (int64_t t = a.t0; t < a.t1;) {
      const int64_t k = std::min(per, a.t1 - t);
      with_token_count<Pass>(k, [&](auto tn) { run(tn, p, g, t); });
      t += k;
    }
  }
}

}  // namespace
}  // namespace oxi::kern

// Defines kernels/pack.h's pack_<type>_<isa> and unpack_<type>_<isa> for Q4_0, Q4_K and Q6_K in
// the including per-ISA file (inside namespace oxi::kern).
#define OXI_DEFINE_PACKERS(isa)                                                                          \
  void pack_q4_0_##isa(const uint8_t* w, uint64_t w_stride, int64_t cols, int64_t g0, int64_t g1,       \
                       uint8_t* dst) {                                                                  \
    pack_groups(q4_0_moves, sizeof(BlockQ4_0), cols / 32, w, w_stride, g0, g1, dst);                    \
  }                                                                                                     \
  void unpack_q4_0_##isa(const uint8_t* group, int64_t cols, uint8_t* rows, uint64_t row_stride) {      \
    unpack_group(q4_0_moves, sizeof(BlockQ4_0), cols / 32, group, rows, row_stride);                    \
  }                                                                                                     \
  void pack_q4_K_##isa(const uint8_t* w, uint64_t w_stride, int64_t cols, int64_t g0, int64_t g1,       \
                       uint8_t* dst) {                                                                  \
    pack_groups(q4_K_moves, sizeof(BlockQ4_K), cols / 256, w, w_stride, g0, g1, dst);                   \
  }                                                                                                     \
  void unpack_q4_K_##isa(const uint8_t* group, int64_t cols, uint8_t* rows, uint64_t row_stride) {      \
    unpack_group(q4_K_moves, sizeof(BlockQ4_K), cols / 256, group, rows, row_stride);                   \
  }                                                                                                     \
  void pack_q6_K_##isa(const uint8_t* w, uint64_t w_stride, int64_t cols, int64_t g0, int64_t g1,       \
                       uint8_t* dst) {                                                                  \
    pack_groups(q6_K_moves, sizeof(BlockQ6_K), cols / 256, w, w_stride, g0, g1, dst);                   \
  }                                                                                                     \
  void unpack_q6_K_##isa(const uint8_t* group, int64_t cols, uint8_t* rows, uint64_t row_stride) {      \
    unpack_group(q6_K_moves, sizeof(BlockQ6_K), cols / 256, group, rows, row_stride);                   \
  }
