// AVX-512 single-token GEMV over Q4_K weights repacked 16 rows at a time (kernels/pack.h).
//
// Why: with the file's layout one row's super-block costs ~30 vector ops (nibble unpack, 4 scale
// permutes, maddubs + dpwssd per 64 elements, a float tail per row), ~16 cycles per 144 bytes on
// Zen 5: compute-bound below the DRAM rate. With 16 rows interleaved per 4-byte column, one
// vpdpbusd multiplies 4 weights of each of 16 rows by 4 activations broadcast from memory, each
// int32 lane is one row's sub-block sum, and the scales, mins and float tail are applied once per
// sub-block (or super-block) for all 16 rows: ~190 ops per 2304 bytes instead of ~480.
//
// Packed layout of one 16-row group, per super-block b (2304 bytes, as many as the 16 blocks):
//   [0, 32)      d    f16 × 16 (row r at 2r)
//   [32, 64)     dmin f16 × 16
//   [64, 256)    the 12 scale bytes as three dword vectors: A = bytes 0..3, B = 4..7, C = 8..11
//                (row r in lane r)
//   [256, 2304)  qs: vector (8j + m), j < 4, m < 8, lane r = row r's qs[32j + 4m .. 32j + 4m + 3]
//                (low nibbles: elements 64j + 4m.., sub-block 2j; high: 64j + 32 + 4m.., 2j + 1)
#include <immintrin.h>

#include <algorithm>
#include <cstring>

#include "kernels/dispatch.h"
#include "kernels/pack.h"
#include "kernels/quant.h"

namespace oxi::kern {
namespace {

constexpr long long kGfHi = 0x1020408000000000ll;  // vgf2p8affineqb matrix: x >> 4 per byte

// vpshufb controls: dword lanes get byte i of themselves (zero-extended), or (byte i, byte i) as
// two zero-extended int16 words.
inline __m512i ctl_byte(int i) {
  const int c = static_cast<int>(0x80808000u) | i;
  const __m128i v = _mm_setr_epi32(c, c + 4, c + 8, c + 12);
  return _mm512_broadcast_i32x4(v);
}
inline __m512i ctl_pair(int i) {
  const int c = static_cast<int>(0x80008000u) | i | (i << 16);
  const int s = 4 | (4 << 16);
  const __m128i v = _mm_setr_epi32(c, c + s, c + 2 * s, c + 3 * s);
  return _mm512_broadcast_i32x4(v);
}

// Prefetch distance: 2 super-blocks (4608 bytes) ahead. Groups are contiguous, so near a group's
// end this runs into the next one. Measured on Zen 5 (docs/kernels.md): E2B Q4_K_M tg64 ~29-31
// t/s at 2 blocks against ~26-27 one whole group ahead (14-55 KB) and ~28 at 1, 3 or 4 blocks.
constexpr uint64_t kPfBytes = 2 * kPackQ4KBlock;

// One 16-row group against one token (Q8_K row x, nb super-blocks): y[0..15].
inline __m512 q4k_group(const uint8_t* p, const BlockQ8_K* x, int64_t nb) {
  constexpr uint64_t pf = kPfBytes;
  const __m512i m4 = _mm512_set1_epi8(0x0F), ghi = _mm512_set1_epi64(kGfHi);
  const __m512i k3f = _mm512_set1_epi8(0x3F), k0f = _mm512_set1_epi8(0x0F), k30 = _mm512_set1_epi8(0x30);
  __m512i cb[4], cp[4];
  for (int i = 0; i < 4; ++i) {
    cb[i] = ctl_byte(i);
    cp[i] = ctl_pair(i);
  }
  __m512 acc = _mm512_setzero_ps();
  for (int64_t b = 0; b < nb; ++b, p += kPackQ4KBlock) {
    const int8_t* xq = x[b].qs;
    for (int l = 0; l < 256; l += 64) _mm_prefetch(reinterpret_cast<const char*>(p + pf + l), _MM_HINT_T0);
    const __m512i A = _mm512_loadu_si512(p + 64), B = _mm512_loadu_si512(p + 128), C = _mm512_loadu_si512(p + 192);
    // The 6-bit scales and mins of sub-blocks 0..3 (lo) and 4..7 (hi), one byte each per lane.
    const __m512i sc_lo = _mm512_and_si512(A, k3f), mn_lo = _mm512_and_si512(B, k3f);
    const __m512i sc_hi = _mm512_ternarylogic_epi32(_mm512_and_si512(C, k0f), _mm512_srli_epi32(A, 2), k30, 0xF8);
    const __m512i mn_hi =
        _mm512_ternarylogic_epi32(_mm512_and_si512(_mm512_srli_epi32(C, 4), k0f), _mm512_srli_epi32(B, 2), k30, 0xF8);
    __m512i isum = _mm512_setzero_si512();
    for (int j = 0; j < 4; ++j) {
      const uint8_t* q = p + 256 + j * 512;
      for (int l = 0; l < 512; l += 64) _mm_prefetch(reinterpret_cast<const char*>(q + pf + l), _MM_HINT_T0);
      __m512i a0 = _mm512_setzero_si512(), a1 = a0, h0 = a0, h1 = a0;
      for (int m = 0; m < 8; m += 2) {
        const __m512i v0 = _mm512_loadu_si512(q + 64 * m), v1 = _mm512_loadu_si512(q + 64 * m + 64);
        int32_t xl0, xl1, xh0, xh1;
        std::memcpy(&xl0, xq + 64 * j + 4 * m, 4);
        std::memcpy(&xl1, xq + 64 * j + 4 * m + 4, 4);
        std::memcpy(&xh0, xq + 64 * j + 32 + 4 * m, 4);
        std::memcpy(&xh1, xq + 64 * j + 36 + 4 * m, 4);
        a0 = _mm512_dpbusd_epi32(a0, _mm512_and_si512(v0, m4), _mm512_set1_epi32(xl0));
        a1 = _mm512_dpbusd_epi32(a1, _mm512_and_si512(v1, m4), _mm512_set1_epi32(xl1));
        h0 = _mm512_dpbusd_epi32(h0, _mm512_gf2p8affine_epi64_epi8(v0, ghi, 0), _mm512_set1_epi32(xh0));
        h1 = _mm512_dpbusd_epi32(h1, _mm512_gf2p8affine_epi64_epi8(v1, ghi, 0), _mm512_set1_epi32(xh1));
      }
      // Sub-blocks 2j and 2j + 1: |sum| ≤ 32·15·127, times a 6-bit scale: int32 is exact.
      const __m512i sv = j < 2 ? sc_lo : sc_hi;
      isum = _mm512_add_epi32(isum, _mm512_mullo_epi32(_mm512_add_epi32(a0, a1), _mm512_shuffle_epi8(sv, cb[(2 * j) & 3])));
      isum = _mm512_add_epi32(isum,
                              _mm512_mullo_epi32(_mm512_add_epi32(h0, h1), _mm512_shuffle_epi8(sv, cb[(2 * j + 1) & 3])));
    }
    // Σ_s m_s · (bsums[2s] + bsums[2s+1]): (m_s, m_s) word pairs against the bsum pair.
    __m512i msum = _mm512_setzero_si512();
    for (int s = 0; s < 8; ++s) {
      int32_t bp;
      std::memcpy(&bp, x[b].bsums + 2 * s, 4);
      msum = _mm512_dpwssd_epi32(msum, _mm512_shuffle_epi8(s < 4 ? mn_lo : mn_hi, cp[s & 3]), _mm512_set1_epi32(bp));
    }
    const __m512 xd = _mm512_set1_ps(x[b].d);
    const __m512 d = _mm512_mul_ps(_mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p))), xd);
    const __m512 dm = _mm512_mul_ps(_mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + 32))), xd);
    acc = _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum), d, acc);
    acc = _mm512_fnmadd_ps(_mm512_cvtepi32_ps(msum), dm, acc);
  }
  return acc;
}

}  // namespace

void pack_q4_K_avx512(const uint8_t* w, uint64_t w_stride, int64_t cols, int64_t g0, int64_t g1, uint8_t* dst) {
  const int64_t nb = cols / 256;
  for (int64_t g = g0; g < g1; ++g) {
    uint8_t* o = dst + static_cast<uint64_t>(g) * static_cast<uint64_t>(nb) * kPackQ4KBlock;
    for (int64_t b = 0; b < nb; ++b, o += kPackQ4KBlock) {
      for (int r = 0; r < 16; ++r) {
        const BlockQ4_K& blk = reinterpret_cast<const BlockQ4_K*>(w + static_cast<uint64_t>(16 * g + r) * w_stride)[b];
        std::memcpy(o + 2 * r, &blk.d, 2);
        std::memcpy(o + 32 + 2 * r, &blk.dmin, 2);
        for (int k = 0; k < 3; ++k) std::memcpy(o + 64 + 64 * k + 4 * r, blk.scales + 4 * k, 4);
        for (int v = 0; v < 32; ++v) std::memcpy(o + 256 + 64 * v + 4 * r, blk.qs + 4 * v, 4);
      }
    }
  }
}

// Rows [r0, r1) of one token (t0 + 1 == t1): rows below a.wp_rows from the packed copy (r0 is a
// multiple of 16: GEMV units are), the rest with the file-layout kernel.
void mm_q4_K_packed_avx512(const MMArgs& a) {
  const int64_t nb = a.cols / 256;
  const BlockQ8_K* x = reinterpret_cast<const BlockQ8_K*>(a.x + a.t0 * a.x_stride);
  float* y = a.y + a.t0 * a.ldy;
  const int64_t rp = std::min(a.r1, a.wp_rows);
  for (int64_t r = a.r0; r + 16 <= rp; r += 16) {
    const uint8_t* p = a.wp + static_cast<uint64_t>(r / 16) * a.wp_stride;
    _mm512_storeu_ps(y + r, q4k_group(p, x, nb));
  }
  if (rp < a.r1) {
    MMArgs rest = a;
    rest.r0 = std::max(a.r0, rp);
    kAvx512Kernels.mm[kWQ4_K](rest);
  }
}

}  // namespace oxi::kern
