// 256-bit decoding of Q3_K and IQ4_XS quants, shared by the AVX2 GEMV tiles (avx2.cpp) and the
// AVX2 / AVX-512 GEMM packing (gemm_pack.h). Anonymous namespace: each file compiles its own copy
// with its own target flags (as tile_drive.h).
#pragma once

#include <immintrin.h>

#include <cstdint>

#include "kernels/quant.h"

namespace oxi::kern {
namespace {

// Q3_K: 32 elements 128h + 32g + l (chunk c = 4h + g) as value + 4 (0..7): the 2-bit field at
// shift 2g of Q = qs[32h..], plus 4 where bit c of H = hmask[l] is set.
inline __m256i q3k_chunk(__m256i Q, __m256i H, int g, int c) {
  const __m256i hb = _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(H, c), _mm256_set1_epi8(1)), 2);
  return _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(Q, 2 * g), _mm256_set1_epi8(3)), hb);
}

// IQ4_XS: the IQ4_NL grid plus kOff in every 128-bit lane (kOff 128: unsigned bytes 1..241).
template <int kOff>
inline __m256i iq4_grid() {
  const __m128i g = _mm_loadu_si128(reinterpret_cast<const __m128i*>(kIQ4NL));
  return _mm256_broadcastsi128_si256(_mm_add_epi8(g, _mm_set1_epi8(static_cast<char>(kOff))));
}

// One IQ4_XS sub-block (16 bytes of qs): elements 0..15 (low nibbles) then 16..31 (high), looked up.
inline __m256i iq4xs_sub(__m256i grid, const uint8_t* qs) {
  const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(qs)), m4 = _mm_set1_epi8(0x0F);
  return _mm256_shuffle_epi8(grid, _mm256_set_m128i(_mm_and_si128(_mm_srli_epi16(v, 4), m4), _mm_and_si128(v, m4)));
}

}  // namespace
}  // namespace oxi::kern
