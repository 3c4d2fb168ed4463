// Activation packing (layouts in kernels/gemm.h) and K-quant weight decoding for the multi-token
// GEMMs, shared by the AVX2 and AVX-512 GEMM files (256-bit code, fine in both). Plain C++: each file compiles its own internal copy with its own target
// flags (anonymous namespace, as tile_drive.h). Packing is O(tokens · cols), next to nothing
// beside the GEMM.
#pragma once

#include <immintrin.h>

#include <cstdint>
#include <cstring>

#include "kernels/dispatch.h"
#include "kernels/kq_scales.h"
#include "kernels/quant.h"
#include "kernels/x86/kq_decode.h"

namespace oxi::kern {
namespace {

// Q8_0 / Q8_1 activation rows → qs[nb][N][32], a 4-byte slot [nb][N], d[nb][N]. Q8_0: the slot
// is corr = −kOffset·Σqs (kOffset: the constant the kernel adds to every weight byte to make it
// unsigned; 0 for signed products). Q8_1 (Q4_1/Q5_1 weights, no offset): the slot holds s_x as
// f32 bits, and the kernel adds m_w·s_x per block instead.
template <class XB, int kOffset>
void pack_q8_blocks(const uint8_t* xa, uint64_t x_stride, int64_t t0, int64_t t1, int64_t N, int64_t cols,
                    uint8_t* X) {
  const int64_t nb = cols / 32;
  uint8_t* C = X + nb * N * 32;
  float* D = reinterpret_cast<float*>(X + nb * N * 36);
  for (int64_t t = t0; t < t1; ++t) {
    const XB* xb = reinterpret_cast<const XB*>(xa + t * x_stride);
    for (int64_t b = 0; b < nb; ++b) {
      std::memcpy(X + (b * N + t) * 32, xb[b].qs, 32);
      if constexpr (sizeof(XB) == sizeof(BlockQ8_1)) {
        const float sx = _cvtsh_ss(xb[b].s);
        std::memcpy(C + (b * N + t) * 4, &sx, 4);
      } else {
        int32_t s = 0;
        for (int i = 0; i < 32; ++i) s += xb[b].qs[i];
        s *= -kOffset;
        std::memcpy(C + (b * N + t) * 4, &s, 4);
      }
      D[b * N + t] = _cvtsh_ss(xb[b].d);
    }
  }
}
template <int kOffset>
void pack_q8(const uint8_t* xa, uint64_t x_stride, int64_t t0, int64_t t1, int64_t N, int64_t cols, uint8_t* X) {
  pack_q8_blocks<BlockQ8_0, kOffset>(xa, x_stride, t0, t1, N, cols, X);
}
inline void pack_q8_1(const uint8_t* xa, uint64_t x_stride, int64_t t0, int64_t t1, int64_t N, int64_t cols,
                      uint8_t* X) {
  pack_q8_blocks<BlockQ8_1, 0>(xa, x_stride, t0, t1, N, cols, X);
}

// Q4_1 / Q5_1 rows for the GEMMs: unsigned q bytes (0..15 / 0..31) in element order; per 16- or
// 8-row group d[nb][R] then m[nb][R] (the scale array holds 2·nb·R floats).
template <class B, int R>
struct PackMinRows {
  static constexpr bool kMin = true;
  static constexpr bool kSigned = false;
  static constexpr int kOffset = 0;
  static constexpr bool kQ5 = sizeof(B) == sizeof(BlockQ5_1);
  static void row(const uint8_t* src, int64_t nb, uint8_t* dst, float* d, int lane) {
    for (int64_t b = 0; b < nb; ++b) {
      const B& blk = reinterpret_cast<const B*>(src)[b];
      __m256i v = nibbles32(blk.qs);
      if constexpr (kQ5) v = _mm256_or_si256(v, qh_bytes(blk.qh));
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst + b * 32), v);
      d[b * R + lane] = _cvtsh_ss(blk.d);
      d[(nb + b) * R + lane] = _cvtsh_ss(blk.m);
    }
  }
  static void zero(int64_t nb, float* d, int lane) {
    for (int64_t b = 0; b < 2 * nb; ++b) d[b * R + lane] = 0.0f;
  }
};

// Q8_K activation rows → qs[nsb][N][256], bsums[nsb][N][16], d[nsb][N]. kPer32: bsums summed per
// 32 (the Q4_K/Q5_K sub-blocks; the first 8 of the 16 slots), else Q8_K's per-16 sums as they are.
template <bool kPer32>
void pack_k(const uint8_t* xa, uint64_t x_stride, int64_t t0, int64_t t1, int64_t N, int64_t cols, uint8_t* X) {
  const int64_t nsb = cols / 256;
  int16_t* B = reinterpret_cast<int16_t*>(X + nsb * N * 256);
  float* D = reinterpret_cast<float*>(X + nsb * N * 288);
  for (int64_t t = t0; t < t1; ++t) {
    const BlockQ8_K* xb = reinterpret_cast<const BlockQ8_K*>(xa + t * x_stride);
    for (int64_t b = 0; b < nsb; ++b) {
      std::memcpy(X + (b * N + t) * 256, xb[b].qs, 256);
      int16_t* bs = B + (b * N + t) * 16;
      if constexpr (kPer32) {  // |Σ| ≤ 32·127: fits int16
        for (int k = 0; k < 8; ++k) bs[k] = static_cast<int16_t>(xb[b].bsums[2 * k] + xb[b].bsums[2 * k + 1]);
      } else {
        std::memcpy(bs, xb[b].bsums, 32);
      }
      D[b * N + t] = xb[b].d;
    }
  }
}

// ---- weight decoding shared by the GEMMs: one unsigned byte per element ------------------------

inline uint32_t pair16(int a, int b) {
  return static_cast<uint32_t>(static_cast<uint16_t>(a)) | (static_cast<uint32_t>(static_cast<uint16_t>(b)) << 16);
}

// 6-bit scales and mins of the 8 sub-blocks of a Q4_K/Q5_K super-block (ggml's layout).
inline void k4_scales(const uint8_t* q, uint8_t* sc, uint8_t* mn) {
  for (int j = 0; j < 4; ++j) {
    sc[j] = q[j] & 63;
    mn[j] = q[j + 4] & 63;
    sc[j + 4] = static_cast<uint8_t>((q[j + 8] & 0xF) | ((q[j] >> 6) << 4));
    mn[j + 4] = static_cast<uint8_t>((q[j + 8] >> 4) | ((q[j + 4] >> 6) << 4));
  }
}

// Q4_K (0..15) / Q5_K (0..31, the fifth bit from qh) super-block → 256 bytes in element order:
// elements 64k..64k+31 are the low nibbles of qs[32k..], 64k+32.. the high nibbles.
template <class B>
inline void decode_q45k(const B& blk, uint8_t* dst) {
  constexpr bool kQ5 = sizeof(B) == sizeof(BlockQ5_K);
  const __m256i m4 = _mm256_set1_epi8(0x0F), one = _mm256_set1_epi8(1);
  __m256i qh = _mm256_setzero_si256();
  if constexpr (kQ5) qh = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk.qh));
  for (int k = 0; k < 4; ++k) {
    const __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk.qs + 32 * k));
    __m256i lo = _mm256_and_si256(v, m4), hi = _mm256_and_si256(_mm256_srli_epi16(v, 4), m4);
    if constexpr (kQ5) {
      lo = _mm256_or_si256(lo, _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(qh, 2 * k), one), 4));
      hi = _mm256_or_si256(hi, _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(qh, 2 * k + 1), one), 4));
    }
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst + 64 * k), lo);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst + 64 * k + 32), hi);
  }
}

// Q6_K super-block → 256 bytes 0..63 in element order (the −32 is left to the caller): element
// 128h + 32i + l takes ql[64h + l + 32(i&1)] (low nibble for i < 2, high for i ≥ 2) and bits
// 2i..2i+1 of qh[32h + l] (see dequantize_q6_K).
inline void decode_q6k(const BlockQ6_K& blk, uint8_t* dst) {
  const __m256i m4 = _mm256_set1_epi8(0x0F), m3 = _mm256_set1_epi8(3);
  auto hbits = [&](__m256i h, int sh) { return _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(h, sh), m3), 4); };
  for (int h = 0; h < 2; ++h) {
    const __m256i L0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk.ql + 64 * h));
    const __m256i L1 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk.ql + 64 * h + 32));
    const __m256i H = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk.qh + 32 * h));
    uint8_t* o = dst + 128 * h;
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(o), _mm256_or_si256(_mm256_and_si256(L0, m4), hbits(H, 0)));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(o + 32), _mm256_or_si256(_mm256_and_si256(L1, m4), hbits(H, 2)));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(o + 64),
                        _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(L0, 4), m4), hbits(H, 4)));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(o + 96),
                        _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(L1, 4), m4), hbits(H, 6)));
  }
}

// Q3_K / IQ4_XS super-block → 256 bytes in element order (IQ4_XS: grid value + kOff).
inline void decode_q3k(const BlockQ3_K& blk, uint8_t* dst) {
  const __m256i H = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk.hmask));
  for (int h = 0; h < 2; ++h) {
    const __m256i Q = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk.qs + 32 * h));
    for (int g = 0; g < 4; ++g)
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst + 128 * h + 32 * g), q3k_chunk(Q, H, g, 4 * h + g));
  }
}

template <int kOff>
inline void decode_iq4xs(const BlockIQ4_XS& blk, uint8_t* dst) {
  const __m256i grid = iq4_grid<kOff>();
  for (int ib = 0; ib < 8; ++ib)
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst + 32 * ib), iq4xs_sub(grid, blk.qs + 16 * ib));
}

// The signed sub-block scales of a Q3_K (16) / IQ4_XS (8) super-block.
inline void block_scales(const BlockQ3_K& blk, int* sc) {
  uint64_t w[2];
  q3k_scale_bytes(blk.scales, w[0], w[1]);
  for (int j = 0; j < 16; ++j) sc[j] = static_cast<int>((w[j / 8] >> (8 * (j % 8))) & 0xFF) - 32;
}
inline void block_scales(const BlockIQ4_XS& blk, int* sc) {
  const uint64_t w = iq4xs_scale_bytes(blk);
  for (int j = 0; j < 8; ++j) sc[j] = static_cast<int>((w >> (8 * j)) & 0xFF) - 32;
}

// Decodes rows r..r+nr−1 of a work unit with P::row into R rows of tmp (`cols` bytes apart; P
// also fills lane i of the per-type scales sc); rows nr..R−1 are zero bytes and zero scales.
template <class P, int R, class S>
inline void decode_rows(const MMArgs& a, int64_t r, int nr, int64_t nblk, uint8_t* tmp, S* sc) {
  for (int i = 0; i < R; ++i) {
    if (i < nr) {
      P::row(a.w + (r + i) * a.w_stride, nblk, tmp + i * a.cols, sc, i);
    } else {
      std::memset(tmp + i * a.cols, 0, static_cast<size_t>(a.cols));
      P::zero(nblk, sc, i);
    }
  }
}

}  // namespace
}  // namespace oxi::kern
