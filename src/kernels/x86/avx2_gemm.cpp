// AVX2 GEMM for the integer weight types (Q8_0, Q4_0, Q5_0, IQ4_NL, Q4_1, Q5_1, Q4_K, Q5_K, Q6_K, Q3_K,
// IQ4_XS), 5+ tokens: the
// scheme of avx512_gemm.cpp at 256 bits and without vpdpbusd.
//
// A work unit is computed 8 weight rows at a time. The 8 rows are unpacked to one byte per
// element and transposed so that one 32-byte vector holds 4 consecutive elements of each row
// (dword lane i = row i). Per 4 elements one weight load then serves T tokens, each token's 4
// activation bytes a broadcast load, and the products need no horizontal sums: vpmaddubsw gives
// each row two int16 pair sums, vpmaddwd folds them (times an int16 scale, or 1) into the row's
// int32 lane. All integer sums are exact, so results equal the scalar reference up to float
// summation order, as the per-token tiles of avx2.cpp do.
//
// vpmaddubsw (u8 × s8, pairs saturating at int16) bounds how long int16 sums may run. Activations
// are Q8_0 / Q8_K bytes in [−127, 127]:
//   Q4_0 raw nibble (0..15, the 8 removed by corr = −8·Σx): pair ≤ 3810, a block's 8 steps ≤ 30480.
//   Q8_0 (signed weights): the sign trick, |w| × sign(x, w), pair ≤ 2·128·127 = 32512: one step.
//   Q4_K 0..15: 8 steps (one 32-element sub-block); Q5_K 0..31: 4 steps (half a sub-block);
//   Q6_K 0..63 (−32 via Q8_K's bsums): 2 steps (half of a 16-element sub-block).
//   Q3_K 0..7 (−4 via bsums): 4 steps (a 16-element sub-block, ≤ 7112).
//   IQ4_XS (signed grid values −127..113): the sign trick as Q8_0, one step, int32 per step.
//   Q5_0 (q − 16) and IQ4_NL (grid values): signed, the sign trick as Q8_0.
//   Q4_1 (0..15, no offset): 8 steps as Q4_0; Q5_1 (0..31): 4 steps (≤ 4·7874 = 31496).
#include <immintrin.h>

#include <cstdint>
#include <cstring>
#include <type_traits>

#include "kernels/dispatch.h"
#include "kernels/gemm.h"
#include "kernels/quant.h"
#include "kernels/x86/gemm_pack.h"

namespace oxi::kern {
namespace {

constexpr int kRows = 8;  // rows per packed group (one ymm of int32 lanes)

// 8×8 dword transpose: row i at base + i·stride (32 bytes); out[k] lane i = dword k of row i.
inline void transpose8x8(const uint8_t* base, uint64_t stride, __m256i* out) {
  __m256i z[8], t[8], u[8];
  for (int i = 0; i < 8; ++i) z[i] = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(base + i * stride));
  // t[2i]: rows 2i, 2i+1, dwords (0, 1 | 4, 5); t[2i+1]: dwords (2, 3 | 6, 7).
  for (int i = 0; i < 4; ++i) {
    t[2 * i] = _mm256_unpacklo_epi32(z[2 * i], z[2 * i + 1]);
    t[2 * i + 1] = _mm256_unpackhi_epi32(z[2 * i], z[2 * i + 1]);
  }
  // u[4h + j]: rows 4h..4h+3, dword j in the low 128 bits and dword j + 4 in the high.
  for (int h = 0; h < 2; ++h) {
    const __m256i* tt = t + 4 * h;
    u[4 * h + 0] = _mm256_unpacklo_epi64(tt[0], tt[2]);
    u[4 * h + 1] = _mm256_unpackhi_epi64(tt[0], tt[2]);
    u[4 * h + 2] = _mm256_unpacklo_epi64(tt[1], tt[3]);
    u[4 * h + 3] = _mm256_unpackhi_epi64(tt[1], tt[3]);
  }
  for (int j = 0; j < 4; ++j) {
    out[j] = _mm256_permute2x128_si256(u[j], u[4 + j], 0x20);
    out[j + 4] = _mm256_permute2x128_si256(u[j], u[4 + j], 0x31);
  }
}

// 8 rows of `cols` bytes (row stride `stride`) → q: cols/4 vectors of 32 bytes.
inline void transpose_rows(const uint8_t* tmp, uint64_t stride, int64_t cols, uint8_t* q) {
  for (int64_t c = 0; c < cols; c += 32) {
    __m256i o[8];
    transpose8x8(tmp + c, stride, o);
    for (int k = 0; k < 8; ++k) _mm256_store_si256(reinterpret_cast<__m256i*>(q + (c / 4 + k) * 32), o[k]);
  }
}

// ---- per-type row decoding: element bytes + per-row scales -----------------------------------

// Q8_0 / Q4_0: per 8-row group, q (cols/4 × 32 B) then d[nb][8] f32.
struct PackQ8Base {
  static constexpr bool kMin = false;
  static void zero(int64_t nb, float* d, int lane) {
    for (int64_t b = 0; b < nb; ++b) d[b * kRows + lane] = 0.0f;
  }
};
struct PackQ8_0 : PackQ8Base {  // signed bytes as stored (the sign trick makes them unsigned)
  static constexpr bool kSigned = true;
  static constexpr int kOffset = 0;
  static void row(const uint8_t* src, int64_t nb, uint8_t* dst, float* d, int lane) {
    for (int64_t b = 0; b < nb; ++b) {
      const BlockQ8_0& blk = reinterpret_cast<const BlockQ8_0*>(src)[b];
      std::memcpy(dst + b * 32, blk.qs, 32);
      d[b * kRows + lane] = _cvtsh_ss(blk.d);
    }
  }
};
struct PackQ4_0 : PackQ8Base {  // the raw nibble (w + 8)
  static constexpr bool kSigned = false;
  static constexpr int kOffset = 8;
  static void row(const uint8_t* src, int64_t nb, uint8_t* dst, float* d, int lane) {
    const __m128i m4 = _mm_set1_epi8(0x0F);
    for (int64_t b = 0; b < nb; ++b) {
      const BlockQ4_0& blk = reinterpret_cast<const BlockQ4_0*>(src)[b];
      const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(blk.qs));
      _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + b * 32), _mm_and_si128(v, m4));
      _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + b * 32 + 16), _mm_and_si128(_mm_srli_epi16(v, 4), m4));
      d[b * kRows + lane] = _cvtsh_ss(blk.d);
    }
  }
};

// Q5_0 (q − 16) and IQ4_NL (grid values −127..113): signed, the sign trick as Q8_0 (unsigned
// with an offset, their int16 pair sums could saturate within a block).
template <class B>
struct PackQ32 : PackQ8Base {
  static constexpr bool kSigned = true;
  static constexpr int kOffset = 0;
  static void row(const uint8_t* src, int64_t nb, uint8_t* dst, float* d, int lane) {
    for (int64_t b = 0; b < nb; ++b) {
      const B& blk = reinterpret_cast<const B*>(src)[b];
      __m256i v;
      if constexpr (sizeof(B) == sizeof(BlockQ5_0)) v = q5_0_bytes<0>(blk);
      else v = iq4nl_bytes<0>(blk);
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst + b * 32), v);
      d[b * kRows + lane] = _cvtsh_ss(blk.d);
    }
  }
};
using PackQ5_0 = PackQ32<BlockQ5_0>;
using PackIQ4_NL = PackQ32<BlockIQ4_NL>;
// Q4_1 (0..15: int16 pair sums over a whole block, ≤ 30480) / Q5_1 (0..31: over half a block).
using PackQ4_1 = PackMinRows<BlockQ4_1, kRows>;
using PackQ5_1 = PackMinRows<BlockQ5_1, kRows>;

// K-quants, per super-block and 8-row group: sc: the sub-block scale as an int16 pair (vpmaddwd
// with the int16 pair sums); mn: int16 pairs for the bsums term (Q4_K/Q5_K: mins (m_2p, m_2p+1);
// Q6_K: scales (sc_2p, sc_2p+1)).
template <int NS>
struct KScales {
  int32_t sc[NS][kRows];
  int32_t mn[8][kRows];
  float d[kRows];
  float dmin[kRows];
};

template <int NS>
struct PackKBase {
  using Scales = KScales<NS>;
  static void zero(int64_t nsb, Scales* s, int lane) {
    for (int64_t b = 0; b < nsb; ++b) {
      for (int j = 0; j < NS; ++j) s[b].sc[j][lane] = 0;
      for (int j = 0; j < 8; ++j) s[b].mn[j][lane] = 0;
      s[b].d[lane] = s[b].dmin[lane] = 0.0f;
    }
  }
};

template <class B>
struct PackQ45_K : PackKBase<8> {
  static constexpr bool kQ5 = sizeof(B) == sizeof(BlockQ5_K);
  static constexpr int kNS = 8, kSteps = 8, kChunk = kQ5 ? 4 : 8;  // 4-element steps per sub-block / int16 run
  static constexpr int kMode = 0, kShift = 0;  // kMode 0: mins; 1: offset 1 << kShift via bsums; 2: signed
  static void row(const uint8_t* src, int64_t nsb, uint8_t* dst, Scales* s, int lane) {
    for (int64_t b = 0; b < nsb; ++b) {
      const B& blk = reinterpret_cast<const B*>(src)[b];
      decode_q45k(blk, dst + b * 256);
      uint8_t sc[8], mn[8];
      k4_scales(blk.scales, sc, mn);
      for (int j = 0; j < 8; ++j) s[b].sc[j][lane] = static_cast<int32_t>(pair16(sc[j], sc[j]));
      for (int p = 0; p < 4; ++p) s[b].mn[p][lane] = static_cast<int32_t>(pair16(mn[2 * p], mn[2 * p + 1]));
      for (int p = 4; p < 8; ++p) s[b].mn[p][lane] = 0;
      s[b].d[lane] = _cvtsh_ss(blk.d);
      s[b].dmin[lane] = _cvtsh_ss(blk.dmin);
    }
  }
};
using PackQ4_K = PackQ45_K<BlockQ4_K>;
using PackQ5_K = PackQ45_K<BlockQ5_K>;

struct PackQ6_K : PackKBase<16> {
  static constexpr int kNS = 16, kSteps = 4, kChunk = 2, kMode = 1, kShift = 5;
  static void row(const uint8_t* src, int64_t nsb, uint8_t* dst, Scales* s, int lane) {
    for (int64_t b = 0; b < nsb; ++b) {
      const BlockQ6_K& blk = reinterpret_cast<const BlockQ6_K*>(src)[b];
      decode_q6k(blk, dst + b * 256);
      for (int j = 0; j < 16; ++j) s[b].sc[j][lane] = static_cast<int32_t>(pair16(blk.scales[j], blk.scales[j]));
      for (int p = 0; p < 8; ++p) s[b].mn[p][lane] = static_cast<int32_t>(pair16(blk.scales[2 * p], blk.scales[2 * p + 1]));
      s[b].d[lane] = _cvtsh_ss(blk.d);
      s[b].dmin[lane] = 0.0f;
    }
  }
};

// Q3_K (bytes value + 4, 0..7, offset 4 via bsums; 16 scales) and IQ4_XS (signed grid values, the
// sign trick; 8 scales, no bsums term).
template <class B, int NS>
struct PackSignedK : PackKBase<NS> {
  using Scales = KScales<NS>;
  static constexpr int kNS = NS, kSteps = 64 / NS, kChunk = NS == 16 ? 4 : 1, kMode = NS == 16 ? 1 : 2, kShift = 2;
  static void row(const uint8_t* src, int64_t nsb, uint8_t* dst, Scales* s, int lane) {
    for (int64_t b = 0; b < nsb; ++b) {
      const B& blk = reinterpret_cast<const B*>(src)[b];
      if constexpr (NS == 16) decode_q3k(blk, dst + b * 256);
      else decode_iq4xs<0>(blk, dst + b * 256);
      int sc[NS];
      block_scales(blk, sc);
      for (int j = 0; j < NS; ++j) s[b].sc[j][lane] = static_cast<int32_t>(pair16(sc[j], sc[j]));
      for (int p = 0; p < 8; ++p) s[b].mn[p][lane] = 0;
      if constexpr (kMode == 1)
        for (int p = 0; p < 8; ++p) s[b].mn[p][lane] = static_cast<int32_t>(pair16(sc[2 * p], sc[2 * p + 1]));
      s[b].d[lane] = _cvtsh_ss(blk.d);
      s[b].dmin[lane] = 0.0f;
    }
  }
};
using PackQ3_K = PackSignedK<BlockQ3_K, 16>;
using PackIQ4_XS = PackSignedK<BlockIQ4_XS, 8>;

// Unpacks the 8-row group at row r (nr real rows, the rest zero) into q (+ per-type scales).
template <class P, class S>
void pack_group(const MMArgs& a, int64_t r, int nr, int64_t nblk, uint8_t* tmp, uint8_t* q, S* sc) {
  decode_rows<P, kRows>(a, r, nr, nblk, tmp, sc);
  transpose_rows(tmp, static_cast<uint64_t>(a.cols), a.cols, q);
}

// ---- inner kernels: 8 rows × T tokens -------------------------------------------------------

inline __m256i bcast32(const void* p) {
  int32_t v;
  std::memcpy(&v, p, 4);
  return _mm256_set1_epi32(v);
}

inline void store_rows(float* y, __m256 v, int nr) {
  if (nr == kRows) return _mm256_storeu_ps(y, v);
  const __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
  _mm256_maskstore_ps(y, _mm256_cmpgt_epi32(_mm256_set1_epi32(nr), lane), v);
}

// Q8_0/Q4_0: q packed (nb × 8 vectors), wd[nb][8]; X: packed activations of N tokens, this tile
// starting at token t.
// kMin (Q4_1/Q5_1): unsigned q without offset, int16 runs of kRun steps; m_w·s_x per block (m_w at
// wd + nb·8, s_x in the activation's corr slot).
template <bool kSigned, int T, bool kMin = false, int kRun = 8>
void kern_q8(const uint8_t* q, const float* wd, int64_t nb, const uint8_t* X, int64_t N, int64_t t, float* y,
             int64_t ldy, int nr) {
  const int8_t* xq = reinterpret_cast<const int8_t*>(X) + t * 32;
  const int32_t* xc = reinterpret_cast<const int32_t*>(X + nb * N * 32) + t;
  const float* xd = reinterpret_cast<const float*>(X + nb * N * 36) + t;
  const __m256i ones = _mm256_set1_epi16(1);
  __m256 accf[T];
  for (int j = 0; j < T; ++j) accf[j] = _mm256_setzero_ps();
  for (int64_t b = 0; b < nb; ++b, q += 256, wd += kRows, xq += N * 32, xc += N, xd += N) {
    __m256i acc[T];
    if constexpr (kSigned) {  // int32 sums per step
      for (int j = 0; j < T; ++j) acc[j] = _mm256_set1_epi32(xc[j]);
      for (int k = 0; k < 8; ++k) {
        const __m256i w = _mm256_load_si256(reinterpret_cast<const __m256i*>(q + 32 * k));
        const __m256i aw = _mm256_abs_epi8(w);
        for (int j = 0; j < T; ++j) {
          const __m256i xs = _mm256_sign_epi8(bcast32(xq + 32 * j + 4 * k), w);
          acc[j] = _mm256_add_epi32(acc[j], _mm256_madd_epi16(_mm256_maddubs_epi16(aw, xs), ones));
        }
      }
    } else if constexpr (kRun == 8) {  // int16 pair sums over the whole block, then one vpmaddwd
      for (int j = 0; j < T; ++j) acc[j] = _mm256_setzero_si256();
      for (int k = 0; k < 8; ++k) {
        const __m256i w = _mm256_load_si256(reinterpret_cast<const __m256i*>(q + 32 * k));
        for (int j = 0; j < T; ++j) acc[j] = _mm256_add_epi16(acc[j], _mm256_maddubs_epi16(w, bcast32(xq + 32 * j + 4 * k)));
      }
      for (int j = 0; j < T; ++j)
        acc[j] = kMin ? _mm256_madd_epi16(acc[j], ones) : _mm256_add_epi32(_mm256_madd_epi16(acc[j], ones), _mm256_set1_epi32(xc[j]));
    } else {  // int16 runs of kRun steps (Q5_1), folded into int32
      static_assert(kMin);
      for (int j = 0; j < T; ++j) acc[j] = _mm256_setzero_si256();
      for (int h = 0; h < 8; h += kRun) {
        __m256i s16[T];
        for (int j = 0; j < T; ++j) s16[j] = _mm256_setzero_si256();
        for (int k = h; k < h + kRun; ++k) {
          const __m256i w = _mm256_load_si256(reinterpret_cast<const __m256i*>(q + 32 * k));
          for (int j = 0; j < T; ++j) s16[j] = _mm256_add_epi16(s16[j], _mm256_maddubs_epi16(w, bcast32(xq + 32 * j + 4 * k)));
        }
        for (int j = 0; j < T; ++j) acc[j] = _mm256_add_epi32(acc[j], _mm256_madd_epi16(s16[j], ones));
      }
    }
    const __m256 d = _mm256_load_ps(wd);
    for (int j = 0; j < T; ++j)
      accf[j] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(acc[j]), _mm256_mul_ps(d, _mm256_set1_ps(xd[j])), accf[j]);
    if constexpr (kMin) {
      const __m256 m = _mm256_load_ps(wd + nb * kRows);
      for (int j = 0; j < T; ++j) {
        float sx;
        std::memcpy(&sx, xc + j, 4);
        accf[j] = _mm256_fmadd_ps(m, _mm256_set1_ps(sx), accf[j]);
      }
    }
  }
  for (int j = 0; j < T; ++j) store_rows(y + j * ldy, accf[j], nr);
}

// K-quants: q packed (nsb × 64 vectors), scales per super-block; X as above.
template <class P, int T>
void kern_k(const uint8_t* q, const typename P::Scales* sc, int64_t nsb, const uint8_t* X, int64_t N, int64_t t,
            float* y, int64_t ldy, int nr) {
  constexpr int NS = P::kNS, G = P::kSteps, H = P::kChunk;
  const int8_t* xq = reinterpret_cast<const int8_t*>(X) + t * 256;
  const int16_t* xb = reinterpret_cast<const int16_t*>(X + nsb * N * 256) + t * 16;
  const float* xd = reinterpret_cast<const float*>(X + nsb * N * 288) + t;
  __m256 accf[T];
  for (int j = 0; j < T; ++j) accf[j] = _mm256_setzero_ps();
  for (int64_t b = 0; b < nsb; ++b, q += 2048, xq += N * 256, xb += N * 16, xd += N) {
    const typename P::Scales& s = sc[b];
    __m256i A[T], S[T];
    for (int j = 0; j < T; ++j) A[j] = _mm256_setzero_si256();
    for (int sb = 0; sb < NS; ++sb) {
      const __m256i scv = _mm256_load_si256(reinterpret_cast<const __m256i*>(s.sc[sb]));
      if constexpr (P::kMode == 2) {  // signed weights: |w| × sign(x, w), int32 per step
        for (int g = 0; g < G; ++g) {
          const int step = sb * G + g;
          const __m256i w = _mm256_load_si256(reinterpret_cast<const __m256i*>(q + step * 32));
          const __m256i aw = _mm256_abs_epi8(w);
          for (int j = 0; j < T; ++j) {
            const __m256i xs = _mm256_sign_epi8(bcast32(xq + 256 * j + step * 4), w);
            A[j] = _mm256_add_epi32(A[j], _mm256_madd_epi16(_mm256_maddubs_epi16(aw, xs), scv));
          }
        }
        continue;
      }
      for (int h = 0; h < G; h += H) {
        for (int j = 0; j < T; ++j) S[j] = _mm256_setzero_si256();
        for (int g = h; g < h + H; ++g) {
          const int step = sb * G + g;
          const __m256i w = _mm256_load_si256(reinterpret_cast<const __m256i*>(q + step * 32));
          for (int j = 0; j < T; ++j) S[j] = _mm256_add_epi16(S[j], _mm256_maddubs_epi16(w, bcast32(xq + 256 * j + step * 4)));
        }
        for (int j = 0; j < T; ++j) A[j] = _mm256_add_epi32(A[j], _mm256_madd_epi16(S[j], scv));
      }
    }
    const __m256 d = _mm256_load_ps(s.d);
    if constexpr (P::kMode == 2) {
      for (int j = 0; j < T; ++j)
        accf[j] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(A[j]), _mm256_mul_ps(d, _mm256_set1_ps(xd[j])), accf[j]);
      continue;
    }
    // Q4_K/Q5_K: M = Σ_s m_s·bsum32_s (4 pairs); Q6_K/Q3_K: M = Σ_s sc_s·bsum16_s (8 pairs).
    constexpr int kPairs = NS == 8 ? 4 : 8;
    for (int j = 0; j < T; ++j) S[j] = _mm256_setzero_si256();
    for (int p = 0; p < kPairs; ++p) {
      const __m256i mv = _mm256_load_si256(reinterpret_cast<const __m256i*>(s.mn[p]));
      for (int j = 0; j < T; ++j) S[j] = _mm256_add_epi32(S[j], _mm256_madd_epi16(mv, bcast32(xb + 16 * j + 2 * p)));
    }
    if constexpr (P::kMode == 0) {
      const __m256 dm = _mm256_load_ps(s.dmin);
      for (int j = 0; j < T; ++j) {
        const __m256 xv = _mm256_set1_ps(xd[j]);
        accf[j] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(A[j]), _mm256_mul_ps(d, xv), accf[j]);
        accf[j] = _mm256_fnmadd_ps(_mm256_cvtepi32_ps(S[j]), _mm256_mul_ps(dm, xv), accf[j]);
      }
    } else {
      for (int j = 0; j < T; ++j) {
        const __m256i s32 = _mm256_sub_epi32(A[j], _mm256_slli_epi32(S[j], P::kShift));
        accf[j] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(s32), _mm256_mul_ps(d, _mm256_set1_ps(xd[j])), accf[j]);
      }
    }
  }
  for (int j = 0; j < T; ++j) store_rows(y + j * ldy, accf[j], nr);
}

// Calls f(integral_constant<int, n>) for a run-time n in 1..T.
template <int T, class F>
inline void with_tokens(int n, F&& f) {
  if constexpr (T > 1) {
    if (n < T) return with_tokens<T - 1>(n, f);
  }
  f(std::integral_constant<int, T>{});
}

// Register tiles: Q4_0 and K-quants keep 2 vectors per token (int16 sums, float accumulator) and
// Q8_0 3 (its sign-trick temporaries); 16 ymm registers in all.
constexpr int kTQ4 = 6, kTQ8 = 5, kTK = 4;

// Steps of int16 pair sums per block of the unsigned path: a whole block (8), Q5_1 half (4).
template <class P>
constexpr int int16_run() {
  if constexpr (P::kMin) return P::kQ5 ? 4 : 8;
  else return 8;
}

template <class P>
void gemm_q8_impl(const MMArgs& a) {
  constexpr int TT = P::kSigned ? kTQ8 : kTQ4;
  const int64_t nb = a.cols / 32, N = static_cast<int64_t>(a.x_stride);
  uint8_t* tmp = static_cast<uint8_t*>(thread_scratch(0, static_cast<size_t>(kRows * a.cols)));
  // q, then d[nb][8] (and for Q4_1/Q5_1 m[nb][8]).
  uint8_t* q = static_cast<uint8_t*>(thread_scratch(1, static_cast<size_t>(kRows * a.cols + nb * kRows * 8)));
  float* wd = reinterpret_cast<float*>(q + kRows * a.cols);
  constexpr int kRun = int16_run<P>();
  for (int64_t r = a.r0; r < a.r1; r += kRows) {
    const int nr = static_cast<int>(a.r1 - r < kRows ? a.r1 - r : kRows);
    pack_group<P>(a, r, nr, nb, tmp, q, wd);
    for (int64_t t = a.t0; t < a.t1; t += TT) {
      const int n = static_cast<int>(a.t1 - t < TT ? a.t1 - t : TT);
      with_tokens<TT>(n, [&](auto tn) {
        kern_q8<P::kSigned, decltype(tn)::value, P::kMin, kRun>(q, wd, nb, a.x, N, t, a.y + t * a.ldy + r, a.ldy, nr);
      });
    }
  }
}

template <class P>
void gemm_k_impl(const MMArgs& a) {
  using S = typename P::Scales;
  const int64_t nsb = a.cols / 256, N = static_cast<int64_t>(a.x_stride);
  uint8_t* tmp = static_cast<uint8_t*>(thread_scratch(0, static_cast<size_t>(kRows * a.cols)));
  uint8_t* q = static_cast<uint8_t*>(thread_scratch(1, static_cast<size_t>(kRows * a.cols) + nsb * sizeof(S)));
  S* sc = reinterpret_cast<S*>(q + kRows * a.cols);
  for (int64_t r = a.r0; r < a.r1; r += kRows) {
    const int nr = static_cast<int>(a.r1 - r < kRows ? a.r1 - r : kRows);
    pack_group<P>(a, r, nr, nsb, tmp, q, sc);
    for (int64_t t = a.t0; t < a.t1; t += kTK) {
      const int n = static_cast<int>(a.t1 - t < kTK ? a.t1 - t : kTK);
      with_tokens<kTK>(n, [&](auto tn) {
        kern_k<P, decltype(tn)::value>(q, sc, nsb, a.x, N, t, a.y + t * a.ldy + r, a.ldy, nr);
      });
    }
  }
}

void run_q8_0(const MMArgs& a) { gemm_q8_impl<PackQ8_0>(a); }
void run_q4_0(const MMArgs& a) { gemm_q8_impl<PackQ4_0>(a); }
void run_q5_0(const MMArgs& a) { gemm_q8_impl<PackQ5_0>(a); }
void run_iq4_nl(const MMArgs& a) { gemm_q8_impl<PackIQ4_NL>(a); }
void run_q4_1(const MMArgs& a) { gemm_q8_impl<PackQ4_1>(a); }
void run_q5_1(const MMArgs& a) { gemm_q8_impl<PackQ5_1>(a); }
void run_q4_K(const MMArgs& a) { gemm_k_impl<PackQ4_K>(a); }
void run_q5_K(const MMArgs& a) { gemm_k_impl<PackQ5_K>(a); }
void run_q6_K(const MMArgs& a) { gemm_k_impl<PackQ6_K>(a); }
void run_q3_K(const MMArgs& a) { gemm_k_impl<PackQ3_K>(a); }
void run_iq4_xs(const MMArgs& a) { gemm_k_impl<PackIQ4_XS>(a); }

}  // namespace

extern const GemmKernels kAvx2Gemm;
const GemmKernels kAvx2Gemm = {
    "avx2",
    5,
    {nullptr, nullptr, nullptr, pack_q8<PackQ8_0::kOffset>, pack_q8<PackQ4_0::kOffset>, pack_k<true>, pack_k<true>,
     pack_k<false>, pack_k<false>, pack_k<true>, pack_q8<0>, pack_q8<0>, pack_q8_1, pack_q8_1},
    {nullptr, nullptr, nullptr, run_q8_0, run_q4_0, run_q4_K, run_q5_K, run_q6_K, run_q3_K, run_iq4_xs, run_q5_0,
     run_iq4_nl, run_q4_1, run_q5_1},
};

}  // namespace oxi::kern
