// AVX-512 single-token GEMV over Q4_0, Q4_K and Q6_K weights repacked 16 rows at a time
// (kernels/pack.h). Q4_K first; Q6_K and Q4_0 below follow the same plan.
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
#include <cstddef>
#include <cstring>
#include <type_traits>

#include "kernels/dispatch.h"
#include "kernels/pack.h"
#include "kernels/quant.h"
#include "kernels/x86/pack_layout.h"

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

// The 6-bit scales and mins of sub-blocks 0..3 (lo) and 4..7 (hi) of one packed Q4_K super-block
// of 16 rows (p), one byte each per lane (row).
inline void q4k_scales_mins(const uint8_t* p, __m512i& sc_lo, __m512i& mn_lo, __m512i& sc_hi, __m512i& mn_hi) {
  const __m512i k3f = _mm512_set1_epi8(0x3F), k0f = _mm512_set1_epi8(0x0F), k30 = _mm512_set1_epi8(0x30);
  const __m512i A = _mm512_loadu_si512(p + 64), B = _mm512_loadu_si512(p + 128), C = _mm512_loadu_si512(p + 192);
  sc_lo = _mm512_and_si512(A, k3f);
  mn_lo = _mm512_and_si512(B, k3f);
  sc_hi = _mm512_ternarylogic_epi32(_mm512_and_si512(C, k0f), _mm512_srli_epi32(A, 2), k30, 0xF8);
  mn_hi = _mm512_ternarylogic_epi32(_mm512_and_si512(_mm512_srli_epi32(C, 4), k0f), _mm512_srli_epi32(B, 2), k30, 0xF8);
}

// 16-row groups ps[0..NS) against one token (Q8_K row x, nb super-blocks): acc[st] += group st's
// y[0..15], the groups' super-blocks interleaved (packed_streams).
template <int NS>
inline void q4k_groups(const uint8_t* const (&ps)[NS], const BlockQ8_K* x, int64_t nb, __m512 (&acc)[NS]) {
  constexpr uint64_t pf = kPfBytes;
  const __m512i m4 = _mm512_set1_epi8(0x0F), ghi = _mm512_set1_epi64(kGfHi);
  __m512i cb[4], cp[4];
  for (int i = 0; i < 4; ++i) {
    cb[i] = ctl_byte(i);
    cp[i] = ctl_pair(i);
  }
  for (int64_t b = 0; b < nb; ++b) {
    for (int st = 0; st < NS; ++st) {
      const uint8_t* p = ps[st] + b * kPackQ4KBlock;
      const int8_t* xq = x[b].qs;
      for (int l = 0; l < 256; l += 64) _mm_prefetch(reinterpret_cast<const char*>(p + pf + l), _MM_HINT_T0);
      __m512i sc_lo, mn_lo, sc_hi, mn_hi;
      q4k_scales_mins(p, sc_lo, mn_lo, sc_hi, mn_hi);
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
      acc[st] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum), d, acc[st]);
      acc[st] = _mm512_fnmadd_ps(_mm512_cvtepi32_ps(msum), dm, acc[st]);
    }
  }
}

// Q6_K, 16 rows per group. Packed layout per super-block b (3360 bytes, as many as the 16 blocks):
//   [0, 32)      d f16 × 16 (row r at 2r)
//   [32, 288)    the 16 int8 scales as four dword vectors: S_k lane r = row r's scales[4k .. 4k+3]
//   [288, 3360)  for half h < 2, m < 8, three vectors at 288 + 64·(3·(8h + m) + {0, 1, 2}):
//                L0 = ql[64h + 4m ..], L1 = ql[64h + 32 + 4m ..], H = qh[32h + 4m ..] (4 bytes,
//                lane r = row r). Their 6-bit values (file order, see quant.h) are elements
//                128h + 32k + 4m + i, k < 4: low nibble of L0 | H bits 0-1 (k = 0), low of L1 |
//                bits 2-3 (k = 1), high of L0 | bits 4-5 (k = 2), high of L1 | bits 6-7 (k = 3),
//                so k's element lies in sub-block s = 8h + 2k + m/4, scale scales[s].
// ~380 vector ops per 3360 bytes against ~1000 in the file-layout kernel (6-bit unpack per row).
constexpr uint64_t kPfBytes6 = 2 * kPackQ6KBlock;
// vgf2p8affineqb matrices moving two bits of each byte to bits 4-5 (all others zero).
constexpr long long kGfB01 = 0x0000000001020000ll;  // bits 0-1
constexpr long long kGfB23 = 0x0000000004080000ll;  // bits 2-3
constexpr long long kGfB67 = 0x0000000040800000ll;  // bits 6-7

// Sign-extended byte i (< 4) of each dword lane.
template <int i>
inline __m512i sbyte(__m512i v) {
  if constexpr (i == 3) {
    return _mm512_srai_epi32(v, 24);
  } else {
    return _mm512_srai_epi32(_mm512_slli_epi32(v, 24 - 8 * i), 24);
  }
}

// As q4k_groups, for Q6_K.
template <int NS>
inline void q6k_groups(const uint8_t* const (&ps)[NS], const BlockQ8_K* x, int64_t nb, __m512 (&acc)[NS]) {
  constexpr uint64_t pf = kPfBytes6;
  const __m512i k0f = _mm512_set1_epi8(0x0F), k30 = _mm512_set1_epi8(0x30), ghi = _mm512_set1_epi64(kGfHi);
  const __m512i g01 = _mm512_set1_epi64(kGfB01), g23 = _mm512_set1_epi64(kGfB23), g67 = _mm512_set1_epi64(kGfB67);
  for (int64_t b = 0; b < nb; ++b) {
    for (int st = 0; st < NS; ++st) {
      const uint8_t* p = ps[st] + b * kPackQ6KBlock;
      const int8_t* xq = x[b].qs;
      const int16_t* bs = x[b].bsums;
      for (int l = 0; l < 320; l += 64) _mm_prefetch(reinterpret_cast<const char*>(p + pf + l), _MM_HINT_T0);
      const __m512i S[4] = {_mm512_loadu_si512(p + 32), _mm512_loadu_si512(p + 96), _mm512_loadu_si512(p + 160),
                            _mm512_loadu_si512(p + 224)};
      __m512i isum = _mm512_setzero_si512();
      for (int h = 0; h < 2; ++h) {
        for (int mh = 0; mh < 2; ++mh) {
          __m512i a0 = _mm512_setzero_si512(), a1 = a0, a2 = a0, a3 = a0;
          for (int mm = 0; mm < 4; ++mm) {
            const int m = 4 * mh + mm;
            const uint8_t* q = p + 288 + 192 * (8 * h + m);
            _mm_prefetch(reinterpret_cast<const char*>(q + pf), _MM_HINT_T0);
            _mm_prefetch(reinterpret_cast<const char*>(q + pf + 64), _MM_HINT_T0);
            _mm_prefetch(reinterpret_cast<const char*>(q + pf + 128), _MM_HINT_T0);
            const __m512i L0 = _mm512_loadu_si512(q), L1 = _mm512_loadu_si512(q + 64), H = _mm512_loadu_si512(q + 128);
            // (a & c) | b = 0xEC; a | (b & c) = 0xF8.
            const __m512i w0 = _mm512_ternarylogic_epi32(L0, _mm512_gf2p8affine_epi64_epi8(H, g01, 0), k0f, 0xEC);
            const __m512i w1 = _mm512_ternarylogic_epi32(L1, _mm512_gf2p8affine_epi64_epi8(H, g23, 0), k0f, 0xEC);
            const __m512i w2 = _mm512_ternarylogic_epi32(_mm512_gf2p8affine_epi64_epi8(L0, ghi, 0), H, k30, 0xF8);
            const __m512i w3 =
                _mm512_or_si512(_mm512_gf2p8affine_epi64_epi8(L1, ghi, 0), _mm512_gf2p8affine_epi64_epi8(H, g67, 0));
            const int8_t* xm = xq + 128 * h + 4 * m;
            int32_t x0, x1, x2, x3;
            std::memcpy(&x0, xm, 4);
            std::memcpy(&x1, xm + 32, 4);
            std::memcpy(&x2, xm + 64, 4);
            std::memcpy(&x3, xm + 96, 4);
            a0 = _mm512_dpbusd_epi32(a0, w0, _mm512_set1_epi32(x0));
            a1 = _mm512_dpbusd_epi32(a1, w1, _mm512_set1_epi32(x1));
            a2 = _mm512_dpbusd_epi32(a2, w2, _mm512_set1_epi32(x2));
            a3 = _mm512_dpbusd_epi32(a3, w3, _mm512_set1_epi32(x3));
          }
          // Sub-block s = 8h + 2k + mh: (Σ q·x − 32·Σ x) · scale; |.| ≤ 16·32·128 · 128 per sub-block,
          // 16 of them: int32 is exact.
          const int s0 = 8 * h + mh;      // k = 0; k adds 2
          const __m512i* Sv = S + 2 * h;  // scales 8h .. 8h + 7
          const __m512i c0 = _mm512_sub_epi32(a0, _mm512_set1_epi32(32 * bs[s0]));
          const __m512i c1 = _mm512_sub_epi32(a1, _mm512_set1_epi32(32 * bs[s0 + 2]));
          const __m512i c2 = _mm512_sub_epi32(a2, _mm512_set1_epi32(32 * bs[s0 + 4]));
          const __m512i c3 = _mm512_sub_epi32(a3, _mm512_set1_epi32(32 * bs[s0 + 6]));
          // scales[8h + mh + 2k]: vector Sv[k / 2], byte (mh + 2k) & 3 = mh + 2(k & 1).
          if (mh == 0) {
            isum = _mm512_add_epi32(isum, _mm512_mullo_epi32(c0, sbyte<0>(Sv[0])));
            isum = _mm512_add_epi32(isum, _mm512_mullo_epi32(c1, sbyte<2>(Sv[0])));
            isum = _mm512_add_epi32(isum, _mm512_mullo_epi32(c2, sbyte<0>(Sv[1])));
            isum = _mm512_add_epi32(isum, _mm512_mullo_epi32(c3, sbyte<2>(Sv[1])));
          } else {
            isum = _mm512_add_epi32(isum, _mm512_mullo_epi32(c0, sbyte<1>(Sv[0])));
            isum = _mm512_add_epi32(isum, _mm512_mullo_epi32(c1, sbyte<3>(Sv[0])));
            isum = _mm512_add_epi32(isum, _mm512_mullo_epi32(c2, sbyte<1>(Sv[1])));
            isum = _mm512_add_epi32(isum, _mm512_mullo_epi32(c3, sbyte<3>(Sv[1])));
          }
        }
      }
      const __m512 d = _mm512_mul_ps(_mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p))),
                                     _mm512_set1_ps(x[b].d));
      acc[st] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum), d, acc[st]);
    }
  }
}

// Q4_0, 16 rows per group. Packed layout per block b (288 bytes, as many as the 16 blocks):
//   [0, 32)     d f16 × 16 (row r at 2r)
//   [32, 288)   qs: vector j < 4, lane r = row r's qs[4j .. 4j + 3] (low nibbles: elements
//               4j.., high: 16 + 4j..)
// The activation is the file-layout Q4_0 GEMV's, prepared once per call and thread (x86/avx512.cpp,
// prepared_q4_0_act): per 4-block group k-th block's x bytes 0..15 at 16k, 16..31 at 64 + 16k,
// −8·Σx as four int32 lane shares at 128 + 16k and its scale (f32) at 192 + 16k.
constexpr uint64_t kPfBytes40 = 16 * kPackQ40Block;

// 16-row groups ps[0..NS) against one token (xp: its prepared activation, nb blocks): acc[s] +=
// y[0..15] of group s. Low and high nibbles accumulate in separate chains.
template <int NS>
inline void q40_groups(const uint8_t* const (&ps)[NS], const uint8_t* xp, int64_t nb, __m512 (&acc)[NS]) {
  constexpr uint64_t pf = kPfBytes40;
  const __m512i m4 = _mm512_set1_epi8(0x0F), ghi = _mm512_set1_epi64(kGfHi);
  for (int64_t b = 0; b < nb; ++b) {
    const uint8_t* xb = xp + (b / 4) * 256 + 16 * (b % 4);
    int32_t c[4];  // −8·Σx over the block's 4 lanes (each lane's share of the block)
    float dxs;
    std::memcpy(c, xb + 128, 16);
    std::memcpy(&dxs, xb + 192, 4);
    const __m512i corr = _mm512_set1_epi32(c[0] + c[1] + c[2] + c[3]);
    const __m512 dx = _mm512_set1_ps(dxs);
    for (int st = 0; st < NS; ++st) {
      const uint8_t* p = ps[st] + b * kPackQ40Block;
      for (int l = 0; l < 320; l += 64) _mm_prefetch(reinterpret_cast<const char*>(p + pf + l), _MM_HINT_T0);
      __m512i lo = corr, hi = _mm512_setzero_si512();
      for (int j = 0; j < 4; ++j) {
        const __m512i v = _mm512_loadu_si512(p + 32 + 64 * j);
        int32_t xl, xh;
        std::memcpy(&xl, xb + 4 * j, 4);
        std::memcpy(&xh, xb + 64 + 4 * j, 4);
        lo = _mm512_dpbusd_epi32(lo, _mm512_and_si512(v, m4), _mm512_set1_epi32(xl));
        hi = _mm512_dpbusd_epi32(hi, _mm512_gf2p8affine_epi64_epi8(v, ghi, 0), _mm512_set1_epi32(xh));
      }
      const __m512 d = _mm512_mul_ps(_mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p))), dx);
      acc[st] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(_mm512_add_epi32(lo, hi)), d, acc[st]);
    }
  }
}

// Rows [a.r0, rp) of the packed copy (16-row groups; a.r0 is a multiple of 16, GEMV units are)
// into y: groups(ps, acc) adds NS groups' outputs to acc. Read as S streams, evenly spaced groups
// of the unit in lockstep (docs/kernels.md, "GEMV streams"); the last n mod S groups one at a
// time. Measured (oxi_kernels_bench, 2 threads, from DRAM): Q4_0 gains with 2 streams, Q4_K and
// Q6_K lose with 2 or 4 (their 2304 / 3360-byte steps), so they read one (docs/kernels.md).
template <int S, class Groups>
inline void packed_streams(const MMArgs& a, int64_t rp, float* y, Groups&& groups) {
  if (rp < a.r0 + 16) return;
  const int64_t g0 = a.r0 / 16, n = (rp - a.r0) / 16, q = n / S;
  auto at = [&](int64_t g) { return a.wp + static_cast<uint64_t>(g) * a.wp_stride; };
  for (int64_t i = 0; i < q; ++i) {
    const uint8_t* ps[S];
    __m512 acc[S];
    for (int s = 0; s < S; ++s) {
      ps[s] = at(g0 + s * q + i);
      acc[s] = _mm512_setzero_ps();
    }
    groups(ps, acc);
    for (int s = 0; s < S; ++s) _mm512_storeu_ps(y + 16 * (g0 + s * q + i), acc[s]);
  }
  for (int64_t g = g0 + S * q; g < g0 + n; ++g) {
    const uint8_t* ps[1] = {at(g)};
    __m512 acc[1] = {_mm512_setzero_ps()};
    groups(ps, acc);
    _mm512_storeu_ps(y + 16 * g, acc[0]);
  }
}

// ---- several tokens (2..16) per call ---------------------------------------------------------
// Continuous batching hands decode's matmuls one token row per sequence. Each 16-row group is read
// once per pass and multiplied against up to kMtPass tokens: the per-block weight work (loads,
// nibble masks, vgf2p8affineqb bit moves, scale vectors, f16 → f32) is shared by the pass's
// tokens, each token keeps its own accumulators. More tokens: several passes over the group (from
// L1/L2). A token's result is bit-identical to the single-token kernels above: the integer sums
// are exact (int32, no overflow, so their association does not matter) and the float tail is the
// same ops in the same order per super-block (or block).
constexpr int kMtPass = 8;

// Integer accumulation chains per token: enough independent vpdpbusd chains in flight for small T.
template <int T>
constexpr int mt_chains() {
  return T >= 5 ? 1 : T >= 3 ? 2 : 4;
}
template <int NC>
inline __m512i sum_chains(const __m512i (&c)[NC]) {
  if constexpr (NC == 1) {
    return c[0];
  } else if constexpr (NC == 2) {
    return _mm512_add_epi32(c[0], c[1]);
  } else {
    return _mm512_add_epi32(_mm512_add_epi32(c[0], c[1]), _mm512_add_epi32(c[2], c[3]));
  }
}

// Q4_0: one group p (nb blocks) against T tokens; xp + t·xps: token t's prepared activation,
// cs[t·nb + b]: its −8·Σx of block b (the sum of the 4 lane shares). acc[t] += its y[0..15].
template <int T>
inline void q40_group_mt(const uint8_t* p, const uint8_t* xp, uint64_t xps, const int32_t* cs, int64_t nb,
                         __m512 (&acc)[T]) {
  constexpr uint64_t pf = kPfBytes40;
  constexpr int NC = mt_chains<T>() > 2 ? 2 : mt_chains<T>();  // 8 dpbusd per token and block
  const __m512i m4 = _mm512_set1_epi8(0x0F), ghi = _mm512_set1_epi64(kGfHi);
  for (int64_t b = 0; b < nb; ++b, p += kPackQ40Block) {
    for (int l = 0; l < 320; l += 64) _mm_prefetch(reinterpret_cast<const char*>(p + pf + l), _MM_HINT_T0);
    __m512i lo[4], hi[4];
    for (int j = 0; j < 4; ++j) {
      const __m512i v = _mm512_loadu_si512(p + 32 + 64 * j);
      lo[j] = _mm512_and_si512(v, m4);
      hi[j] = _mm512_gf2p8affine_epi64_epi8(v, ghi, 0);
    }
    const __m512 dw = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
    const uint8_t* xb = xp + (b / 4) * 256 + 16 * (b % 4);
    for (int t = 0; t < T; ++t) {
      const uint8_t* xt = xb + t * xps;
      __m512i c[NC];
      c[0] = _mm512_set1_epi32(cs[t * nb + b]);
      for (int i = 1; i < NC; ++i) c[i] = _mm512_setzero_si512();
      for (int j = 0; j < 4; ++j) {
        int32_t xl, xh;
        std::memcpy(&xl, xt + 4 * j, 4);
        std::memcpy(&xh, xt + 64 + 4 * j, 4);
        c[0] = _mm512_dpbusd_epi32(c[0], lo[j], _mm512_set1_epi32(xl));
        c[NC - 1] = _mm512_dpbusd_epi32(c[NC - 1], hi[j], _mm512_set1_epi32(xh));
      }
      float dxs;
      std::memcpy(&dxs, xt + 192, 4);
      const __m512 d = _mm512_mul_ps(dw, _mm512_set1_ps(dxs));
      acc[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(sum_chains(c)), d, acc[t]);
    }
  }
}

// Q4_K: one group p against T tokens (Q8_K rows x + t·xs bytes). Sub-block by sub-block (the 8 qs
// vectors of a sub-block pair are read twice from L1, low then high nibbles), so a token holds one
// sub-block's chains and its running sum.
template <int T>
inline void q4k_group_mt(const uint8_t* p, const uint8_t* x, uint64_t xs, int64_t nb, __m512 (&acc)[T]) {
  constexpr uint64_t pf = kPfBytes;
  constexpr int NC = mt_chains<T>();
  const __m512i m4 = _mm512_set1_epi8(0x0F), ghi = _mm512_set1_epi64(kGfHi);
  for (int64_t b = 0; b < nb; ++b, p += kPackQ4KBlock) {
    const BlockQ8_K* xb[T];
    for (int t = 0; t < T; ++t) xb[t] = reinterpret_cast<const BlockQ8_K*>(x + t * xs) + b;
    for (int l = 0; l < 256; l += 64) _mm_prefetch(reinterpret_cast<const char*>(p + pf + l), _MM_HINT_T0);
    __m512i sc_lo, mn_lo, sc_hi, mn_hi;
    q4k_scales_mins(p, sc_lo, mn_lo, sc_hi, mn_hi);
    __m512i isum[T];
    for (int t = 0; t < T; ++t) isum[t] = _mm512_setzero_si512();
#pragma GCC unroll 8
    for (int s = 0; s < 8; ++s) {  // sub-block s: elements 32s..32s+31, qs vectors 8(s/2) + m
      const int j = s / 2;
      const uint8_t* q = p + 256 + j * 512;
      if (s % 2 == 0) {
        for (int l = 0; l < 512; l += 64) _mm_prefetch(reinterpret_cast<const char*>(q + pf + l), _MM_HINT_T0);
      }
      __m512i c[T][NC];
      for (int t = 0; t < T; ++t)
        for (int i = 0; i < NC; ++i) c[t][i] = _mm512_setzero_si512();
#pragma GCC unroll 8
      for (int m = 0; m < 8; ++m) {
        const __m512i v = _mm512_loadu_si512(q + 64 * m);
        const __m512i w = s % 2 == 0 ? _mm512_and_si512(v, m4) : _mm512_gf2p8affine_epi64_epi8(v, ghi, 0);
        const int off = 64 * j + 32 * (s % 2) + 4 * m;
        for (int t = 0; t < T; ++t) {
          int32_t xv;
          std::memcpy(&xv, xb[t]->qs + off, 4);
          c[t][m % NC] = _mm512_dpbusd_epi32(c[t][m % NC], w, _mm512_set1_epi32(xv));
        }
      }
      const __m512i sc = _mm512_shuffle_epi8(s < 4 ? sc_lo : sc_hi, ctl_byte(s & 3));
      for (int t = 0; t < T; ++t) isum[t] = _mm512_add_epi32(isum[t], _mm512_mullo_epi32(sum_chains(c[t]), sc));
    }
    __m512i msum[T];
    for (int t = 0; t < T; ++t) msum[t] = _mm512_setzero_si512();
#pragma GCC unroll 8
    for (int s = 0; s < 8; ++s) {
      const __m512i mv = _mm512_shuffle_epi8(s < 4 ? mn_lo : mn_hi, ctl_pair(s & 3));
      for (int t = 0; t < T; ++t) {
        int32_t bp;
        std::memcpy(&bp, xb[t]->bsums + 2 * s, 4);
        msum[t] = _mm512_dpwssd_epi32(msum[t], mv, _mm512_set1_epi32(bp));
      }
    }
    const __m512 dw = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
    const __m512 mw = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + 32)));
    for (int t = 0; t < T; ++t) {
      const __m512 xd = _mm512_set1_ps(xb[t]->d);
      const __m512 d = _mm512_mul_ps(dw, xd), dm = _mm512_mul_ps(mw, xd);
      acc[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum[t]), d, acc[t]);
      acc[t] = _mm512_fnmadd_ps(_mm512_cvtepi32_ps(msum[t]), dm, acc[t]);
    }
  }
}

// Sign-extended byte i (< 4, a constant once unrolled) of each dword lane.
inline __m512i sbyte_i(__m512i v, int i) {
  return _mm512_srai_epi32(_mm512_slli_epi32(v, static_cast<unsigned>(24 - 8 * i)), 24);
}

// Q6_K: one group p against T tokens (Q8_K rows x + t·xs bytes), sub-block by sub-block: for
// s = 8h + 2k + mh, the k-th 6-bit vector of columns m = 4mh..4mh+3 of half h. Each token's chain
// starts at −32·bsums[s] (the single-token kernel subtracts it after the dots: the same integer).
template <int T>
inline void q6k_group_mt(const uint8_t* p, const uint8_t* x, uint64_t xs, int64_t nb, __m512 (&acc)[T]) {
  constexpr uint64_t pf = kPfBytes6;
  constexpr int NC = mt_chains<T>() > 2 ? 2 : mt_chains<T>();  // 4 dpbusd per token and sub-block
  const __m512i k0f = _mm512_set1_epi8(0x0F), k30 = _mm512_set1_epi8(0x30), ghi = _mm512_set1_epi64(kGfHi);
  const __m512i g01 = _mm512_set1_epi64(kGfB01), g23 = _mm512_set1_epi64(kGfB23), g67 = _mm512_set1_epi64(kGfB67);
  for (int64_t b = 0; b < nb; ++b, p += kPackQ6KBlock) {
    const BlockQ8_K* xb[T];
    for (int t = 0; t < T; ++t) xb[t] = reinterpret_cast<const BlockQ8_K*>(x + t * xs) + b;
    for (int l = 0; l < 320; l += 64) _mm_prefetch(reinterpret_cast<const char*>(p + pf + l), _MM_HINT_T0);
    __m512i isum[T];
    for (int t = 0; t < T; ++t) isum[t] = _mm512_setzero_si512();
#pragma GCC unroll 2
    for (int h = 0; h < 2; ++h) {
#pragma GCC unroll 2
      for (int mh = 0; mh < 2; ++mh) {
        for (int mm = 0; mm < 4; ++mm) {
          const uint8_t* q = p + 288 + 192 * (8 * h + 4 * mh + mm);
          _mm_prefetch(reinterpret_cast<const char*>(q + pf), _MM_HINT_T0);
          _mm_prefetch(reinterpret_cast<const char*>(q + pf + 64), _MM_HINT_T0);
          _mm_prefetch(reinterpret_cast<const char*>(q + pf + 128), _MM_HINT_T0);
        }
#pragma GCC unroll 4
        for (int k = 0; k < 4; ++k) {
          const int s = 8 * h + 2 * k + mh;
          __m512i c[T][NC];
          for (int t = 0; t < T; ++t) {
            c[t][0] = _mm512_set1_epi32(-32 * xb[t]->bsums[s]);
            for (int i = 1; i < NC; ++i) c[t][i] = _mm512_setzero_si512();
          }
#pragma GCC unroll 4
          for (int mm = 0; mm < 4; ++mm) {
            const int m = 4 * mh + mm;
            const uint8_t* q = p + 288 + 192 * (8 * h + m);
            __m512i w;
            if (k == 0) {
              w = _mm512_ternarylogic_epi32(_mm512_loadu_si512(q),
                                            _mm512_gf2p8affine_epi64_epi8(_mm512_loadu_si512(q + 128), g01, 0), k0f, 0xEC);
            } else if (k == 1) {
              w = _mm512_ternarylogic_epi32(_mm512_loadu_si512(q + 64),
                                            _mm512_gf2p8affine_epi64_epi8(_mm512_loadu_si512(q + 128), g23, 0), k0f, 0xEC);
            } else if (k == 2) {
              w = _mm512_ternarylogic_epi32(_mm512_gf2p8affine_epi64_epi8(_mm512_loadu_si512(q), ghi, 0),
                                            _mm512_loadu_si512(q + 128), k30, 0xF8);
            } else {
              w = _mm512_or_si512(_mm512_gf2p8affine_epi64_epi8(_mm512_loadu_si512(q + 64), ghi, 0),
                                  _mm512_gf2p8affine_epi64_epi8(_mm512_loadu_si512(q + 128), g67, 0));
            }
            const int off = 128 * h + 32 * k + 4 * m;
            for (int t = 0; t < T; ++t) {
              int32_t xv;
              std::memcpy(&xv, xb[t]->qs + off, 4);
              c[t][mm % NC] = _mm512_dpbusd_epi32(c[t][mm % NC], w, _mm512_set1_epi32(xv));
            }
          }
          // scales[s]: vector S[s / 4] (at p + 32 + 64·(s/4)), byte s % 4.
          const __m512i sc = sbyte_i(_mm512_loadu_si512(p + 32 + 64 * (s / 4)), s % 4);
          for (int t = 0; t < T; ++t) isum[t] = _mm512_add_epi32(isum[t], _mm512_mullo_epi32(sum_chains(c[t]), sc));
        }
      }
    }
    const __m512 dw = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
    for (int t = 0; t < T; ++t) {
      const __m512 d = _mm512_mul_ps(dw, _mm512_set1_ps(xb[t]->d));
      acc[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum[t]), d, acc[t]);
    }
  }
}

// Rows [a.r0, rp) of the packed copy (a.r0 a multiple of 16) for tokens [a.t0, a.t1): per 16-row
// group, passes of ≤ kMtPass tokens (sizes as even as possible). group(ctag, p, t, acc) adds the
// outputs of T = ctag's value tokens from t to acc.
template <class Group>
inline void packed_multi(const MMArgs& a, int64_t rp, Group&& group) {
  auto run = [&](auto tn, const uint8_t* p, int64_t g, int64_t t) {
    constexpr int T = decltype(tn)::value;
    __m512 acc[T];
    for (int i = 0; i < T; ++i) acc[i] = _mm512_setzero_ps();
    group(tn, p, t, acc);
    for (int i = 0; i < T; ++i) _mm512_storeu_ps(a.y + (t + i) * a.ldy + 16 * g, acc[i]);
  };
  for_group_passes<kMtPass>(a, rp, run);
}

}  // namespace

OXI_DEFINE_PACKERS(avx512)

// Rows [r0, r1) of tokens [t0, t1): rows below a.wp_rows from the packed copy (r0 is a multiple of
// 16: GEMV units are), the rest with the file-layout kernel. One token: the group kernels above
// (S streams); several: packed_multi, each token bit-identical to its single-token call.
void mm_q4_0_packed_avx512(const MMArgs& a) {
  const int64_t nb = a.cols / 32;
  if (a.t1 - a.t0 > 1) {  // several tokens: their prepared activations (one buffer), −8·Σx per block
    const int64_t rp = std::min(a.r1, a.wp_rows);
    if (a.r0 + 16 <= rp) {
      const uint8_t* xp = prepared_q4_0_act(a, nb);
      const uint64_t xps = prepared_q4_0_stride(nb);
      const int64_t n = a.t1 - a.t0;
      auto* cs = static_cast<int32_t*>(thread_scratch(0, static_cast<size_t>(n * nb) * sizeof(int32_t)));
      for (int64_t t = 0; t < n; ++t) {
        for (int64_t b = 0; b < nb; ++b) {
          int32_t c[4];
          std::memcpy(c, xp + t * xps + (b / 4) * 256 + 16 * (b % 4) + 128, 16);
          cs[t * nb + b] = c[0] + c[1] + c[2] + c[3];
        }
      }
      packed_multi(a, rp, [&](auto tn, const uint8_t* p, int64_t t, auto& acc) {
        q40_group_mt<decltype(tn)::value>(p, xp + (t - a.t0) * xps, xps, cs + (t - a.t0) * nb, nb, acc);
      });
    }
    return file_rows_per_token(kAvx512Kernels.mm[kWQ4_0], a, rp);
  }
  float* y = a.y + a.t0 * a.ldy;
  const int64_t rp = std::min(a.r1, a.wp_rows);
  if (a.r0 + 16 <= rp) {
    const uint8_t* xp = prepared_q4_0_act(a, nb);
    packed_streams<2>(a, rp, y, [&](auto& ps, auto& acc) { q40_groups(ps, xp, nb, acc); });
  }
  if (rp < a.r1) {
    MMArgs rest = a;
    rest.r0 = std::max(a.r0, rp);
    kAvx512Kernels.mm[kWQ4_0](rest);
  }
}

void mm_q6_K_packed_avx512(const MMArgs& a) {
  const int64_t nb = a.cols / 256;
  if (a.t1 - a.t0 > 1) {
    const int64_t rp = std::min(a.r1, a.wp_rows);
    packed_multi(a, rp, [&](auto tn, const uint8_t* p, int64_t t, auto& acc) {
      q6k_group_mt<decltype(tn)::value>(p, a.x + t * a.x_stride, a.x_stride, nb, acc);
    });
    return file_rows_per_token(kAvx512Kernels.mm[kWQ6_K], a, rp);
  }
  const BlockQ8_K* x = reinterpret_cast<const BlockQ8_K*>(a.x + a.t0 * a.x_stride);
  float* y = a.y + a.t0 * a.ldy;
  const int64_t rp = std::min(a.r1, a.wp_rows);
  packed_streams<1>(a, rp, y, [&](auto& ps, auto& acc) { q6k_groups(ps, x, nb, acc); });
  if (rp < a.r1) {
    MMArgs rest = a;
    rest.r0 = std::max(a.r0, rp);
    kAvx512Kernels.mm[kWQ6_K](rest);
  }
}

// Rows [r0, r1) of one token (t0 + 1 == t1): rows below a.wp_rows from the packed copy (r0 is a
// multiple of 16: GEMV units are), the rest with the file-layout kernel.
void mm_q4_K_packed_avx512(const MMArgs& a) {
  const int64_t nb = a.cols / 256;
  if (a.t1 - a.t0 > 1) {
    const int64_t rp = std::min(a.r1, a.wp_rows);
    packed_multi(a, rp, [&](auto tn, const uint8_t* p, int64_t t, auto& acc) {
      q4k_group_mt<decltype(tn)::value>(p, a.x + t * a.x_stride, a.x_stride, nb, acc);
    });
    return file_rows_per_token(kAvx512Kernels.mm[kWQ4_K], a, rp);
  }
  const BlockQ8_K* x = reinterpret_cast<const BlockQ8_K*>(a.x + a.t0 * a.x_stride);
  float* y = a.y + a.t0 * a.ldy;
  const int64_t rp = std::min(a.r1, a.wp_rows);
  packed_streams<1>(a, rp, y, [&](auto& ps, auto& acc) { q4k_groups(ps, x, nb, acc); });
  if (rp < a.r1) {
    MMArgs rest = a;
    rest.r0 = std::max(a.r0, rp);
    kAvx512Kernels.mm[kWQ4_K](rest);
  }
}

}  // namespace oxi::kern
