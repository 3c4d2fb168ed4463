// 256-bit decoding of Q3_K and IQ4_XS quants, shared by the AVX2 GEMV tiles (avx2.cpp) and the
// AVX2 / AVX-512 GEMM packing (gemm_pack.h). Anonymous namespace: each file compiles its own copy
// with its own target flags (as tile_drive.h).
#pragma once

#include <immintrin.h>

#include <cstdint>
#include <cstring>

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

// 16 bytes of nibbles → [low nibbles (elements 0..15) | high nibbles (16..31)] (Q4_0-style blocks).
inline __m256i nibbles32(const uint8_t* qs) {
  const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(qs));
  const __m128i m = _mm_set1_epi8(0x0F);
  return _mm256_set_m128i(_mm_and_si128(_mm_srli_epi16(v, 4), m), _mm_and_si128(v, m));
}

// The 32 bits of qh (Q5_0/Q5_1: bit j = fifth bit of element j) → byte j = 0x10 where set.
inline __m256i qh_bytes(const uint8_t* qh) {
  uint32_t h;
  std::memcpy(&h, qh, 4);
  const __m256i v = _mm256_shuffle_epi8(_mm256_set1_epi32(static_cast<int>(h)),
                                        _mm256_setr_epi64x(0, 0x0101010101010101ll, 0x0202020202020202ll, 0x0303030303030303ll));
  const __m256i bit = _mm256_set1_epi64x(static_cast<long long>(0x8040201008040201ull));
  return _mm256_and_si256(_mm256_cmpeq_epi8(_mm256_and_si256(v, bit), bit), _mm256_set1_epi8(0x10));
}

// A Q5_0 / IQ4_NL block's 32 values + kOff in element order (Q5_0: q − 16 + kOff, so kOff 16
// gives q (0..31) and 0 the signed value; IQ4_NL: grid value + kOff).
template <int kOff>
inline __m256i q5_0_bytes(const BlockQ5_0& b) {
  const __m256i q = _mm256_or_si256(nibbles32(b.qs), qh_bytes(b.qh));
  return kOff == 16 ? q : _mm256_add_epi8(q, _mm256_set1_epi8(static_cast<char>(kOff - 16)));
}
template <int kOff>
inline __m256i iq4nl_bytes(const BlockIQ4_NL& b) {
  return _mm256_shuffle_epi8(iq4_grid<kOff>(), nibbles32(b.qs));
}

// The IQ2/IQ3 sign fields: 7 stored bits, the eighth the parity of the 7 (even count of
// negatives), by xor folding. IQ2_XS: the 8 groups' u16s (signs in bits 9..15) -> 8 sign bytes in
// the low half; IQ2_XXS / IQ3_XXS: a sub-block's u32 (four fields at bits 7l) -> 4 sign bytes.
inline __m128i iq2xs_sign_bytes(__m128i q) {
  const __m128i s = _mm_srli_epi16(q, 9);
  __m128i p = _mm_xor_si128(s, _mm_srli_epi16(s, 4));
  p = _mm_xor_si128(p, _mm_srli_epi16(p, 2));
  p = _mm_xor_si128(p, _mm_srli_epi16(p, 1));
  const __m128i b = _mm_or_si128(s, _mm_slli_epi16(_mm_and_si128(p, _mm_set1_epi16(1)), 7));
  return _mm_packus_epi16(b, b);
}
inline uint32_t iq_sign_bytes4(uint32_t aux) {
  uint32_t r = 0;
  for (int l = 0; l < 4; ++l) {
    const uint32_t s = (aux >> (7 * l)) & 127;
    uint32_t p = s ^ (s >> 4);
    p ^= p >> 2;
    p ^= p >> 1;
    r |= (s | ((p & 1) << 7)) << (8 * l);
  }
  return r;
}

}  // namespace
}  // namespace oxi::kern
