// AVX-512 VNNI GEMM for the integer weight types (Q8_0, Q4_0, Q4_K, Q5_K, Q6_K) with 5+ tokens,
// and (set avx512-amx, end of file) the Q8_0/Q4_0 GEMM on AMX-INT8 tiles.
//
// A work unit (row chunk × token tile, see matmul.cpp) is computed 16 weight rows at a time. The
// 16 rows are first unpacked to unsigned bytes (one per element) and transposed so that one
// 64-byte vector holds 4 consecutive elements of each of the 16 rows (lane i = row i, the layout
// vpdpbusd and AMX's B tiles consume). The inner loop then needs no shuffles and no horizontal
// sums: per 4 elements one weight load serves T tokens, and each token's 4 activation bytes are a
// broadcast memory operand of vpdpbusd. One int32 lane accumulates one row's block sum exactly;
// the per-block (Q8_0/Q4_0) or per-super-block (K-quants, after the integer sub-block scales)
// float scaling happens once per block for 16 rows at a time, and the outputs of 16 rows of a
// token are one contiguous store. Results equal the scalar reference up to float summation order
// (the integer block sums are exact, as in ggml).
//
// Offsets: Q8_0 weights are stored as w + 128 and Q4_0 as the raw nibble (w + 8); the
// k·Σx term is removed by starting each block's int32 sum at −k·Σx (per token and block).
// Q4_K/Q5_K mins and the Q6_K −32 offset come from Q8_K's per-16 bsums via vpdpwssd.
#include <immintrin.h>

#include <cstdint>
#include <cstring>

#include "kernels/dispatch.h"
#include "kernels/quant.h"
#include "kernels/gemm.h"

namespace oxi::kern {
namespace {

constexpr int kRows = 16;  // rows per packed group (one zmm of int32 lanes)

inline float h2f(uint16_t h) { return _cvtsh_ss(h); }

// 16×8 dword transpose: rows[i] points at 32 bytes of row i; out[k] lane i = dword k of row i.
inline void transpose16x8(const uint8_t* base, uint64_t stride, __m512i* out) {
  __m512i z[8];
  for (int i = 0; i < 8; ++i)
    z[i] = _mm512_inserti64x4(
        _mm512_castsi256_si512(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(base + i * stride))),
        _mm256_loadu_si256(reinterpret_cast<const __m256i*>(base + (i + 8) * stride)), 1);
  __m512i t[8], u[8];
  for (int i = 0; i < 4; ++i) {
    t[2 * i] = _mm512_unpacklo_epi32(z[2 * i], z[2 * i + 1]);
    t[2 * i + 1] = _mm512_unpackhi_epi32(z[2 * i], z[2 * i + 1]);
  }
  // u[0..3]: rows 0-3 (and 8-11) dwords {0,4},{1,5},{2,6},{3,7}; u[4..7]: rows 4-7 (12-15).
  for (int h = 0; h < 2; ++h) {
    __m512i* tt = t + 4 * h;
    u[4 * h + 0] = _mm512_unpacklo_epi64(tt[0], tt[2]);
    u[4 * h + 1] = _mm512_unpackhi_epi64(tt[0], tt[2]);
    u[4 * h + 2] = _mm512_unpacklo_epi64(tt[1], tt[3]);
    u[4 * h + 3] = _mm512_unpackhi_epi64(tt[1], tt[3]);
  }
  // 128-bit lanes of u[j]: (rows 0-3 dword j, rows 0-3 dword j+4, rows 8-11 dword j, rows 8-11 dword j+4).
  const __m512i lo = _mm512_setr_epi64(0, 1, 8, 9, 4, 5, 12, 13);
  const __m512i hi = _mm512_setr_epi64(2, 3, 10, 11, 6, 7, 14, 15);
  for (int j = 0; j < 4; ++j) {
    out[j] = _mm512_permutex2var_epi64(u[j], lo, u[4 + j]);
    out[j + 4] = _mm512_permutex2var_epi64(u[j], hi, u[4 + j]);
  }
}

// Transposes 16 rows of `cols` unsigned bytes (row stride `stride`) into q: cols/4 vectors.
inline void transpose_rows(const uint8_t* tmp, uint64_t stride, int64_t cols, uint8_t* q) {
  for (int64_t c = 0; c < cols; c += 32) {
    __m512i o[8];
    transpose16x8(tmp + c, stride, o);
    for (int k = 0; k < 8; ++k) _mm512_store_si512(q + (c / 4 + k) * 64, o[k]);
  }
}

// ---- per-type row decoding: element bytes (unsigned) + per-row scales ------------------------

// Q8_0 / Q4_0: per 16-row group, q (cols/4 × 64 B) then d[nb][16] f32.
struct PackQ8Base {
  static void zero(int64_t nb, float* d, int lane) {
    for (int64_t b = 0; b < nb; ++b) d[b * kRows + lane] = 0.0f;
  }
};
// kSigned (AMX, signed × signed products): Q8_0 bytes as stored and the Q4_0 nibble − 8, no
// offset; otherwise (vpdpbusd, unsigned weights) Q8_0 + 128 and the raw Q4_0 nibble.
template <bool kSigned>
struct PackQ8_0T : PackQ8Base {
  static constexpr int kOffset = kSigned ? 0 : 128;
  static void row(const uint8_t* src, int64_t nb, uint8_t* dst, float* d, int lane) {
    const __m256i flip = _mm256_set1_epi8(kSigned ? 0 : static_cast<char>(0x80));
    for (int64_t b = 0; b < nb; ++b) {
      const BlockQ8_0& blk = reinterpret_cast<const BlockQ8_0*>(src)[b];
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst + b * 32),
                          _mm256_xor_si256(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk.qs)), flip));
      d[b * kRows + lane] = h2f(blk.d);
    }
  }
};
template <bool kSigned>
struct PackQ4_0T : PackQ8Base {
  static constexpr int kOffset = kSigned ? 0 : 8;
  static void row(const uint8_t* src, int64_t nb, uint8_t* dst, float* d, int lane) {
    const __m128i m4 = _mm_set1_epi8(0x0F), off = _mm_set1_epi8(kSigned ? 8 : 0);
    for (int64_t b = 0; b < nb; ++b) {
      const BlockQ4_0& blk = reinterpret_cast<const BlockQ4_0*>(src)[b];
      const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(blk.qs));
      _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + b * 32), _mm_sub_epi8(_mm_and_si128(v, m4), off));
      _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + b * 32 + 16),
                       _mm_sub_epi8(_mm_and_si128(_mm_srli_epi16(v, 4), m4), off));
      d[b * kRows + lane] = h2f(blk.d);
    }
  }
};
using PackQ8_0 = PackQ8_0T<false>;
using PackQ4_0 = PackQ4_0T<false>;

// K-quants: per super-block and 16-row group, after the q vectors of the whole row group:
// KScales {int32 sc[NS][16]; int32 mn[8][16] (int16 pairs); float d[16]; float dmin[16]}.
template <int NS>
struct KScales {
  int32_t sc[NS][kRows];
  int32_t mn[8][kRows];  // int16 pairs: Q4_K/Q5_K (m_2p, m_2p+1), p < 4; Q6_K (sc_2p, sc_2p+1)
  float d[kRows];
  float dmin[kRows];
};

// 6-bit scales and mins of the 8 sub-blocks (ggml's get_scale_min_k4, written out here so that
// this file emits no out-of-line copy of a header inline function).
inline void k4_scales(const uint8_t* q, uint8_t* sc, uint8_t* mn) {
  for (int j = 0; j < 4; ++j) {
    sc[j] = q[j] & 63;
    mn[j] = q[j + 4] & 63;
    sc[j + 4] = static_cast<uint8_t>((q[j + 8] & 0xF) | ((q[j] >> 6) << 4));
    mn[j + 4] = static_cast<uint8_t>((q[j + 8] >> 4) | ((q[j + 4] >> 6) << 4));
  }
}

inline uint32_t pair16(int a, int b) {
  return static_cast<uint32_t>(static_cast<uint16_t>(a)) | (static_cast<uint32_t>(static_cast<uint16_t>(b)) << 16);
}

template <int NS>
struct PackKBase {
  static void zero(int64_t nsb, KScales<NS>* s, int lane) {
    for (int64_t b = 0; b < nsb; ++b) {
      for (int j = 0; j < NS; ++j) s[b].sc[j][lane] = 0;
      for (int j = 0; j < 8; ++j) s[b].mn[j][lane] = 0;
      s[b].d[lane] = s[b].dmin[lane] = 0.0f;
    }
  }
};

// Q4_K and Q5_K (B = BlockQ4_K or BlockQ5_K; Q5_K adds the fifth bit from qh).
template <class B>
struct PackQ45_K : PackKBase<8> {
  static constexpr int kNS = 8;
  static constexpr bool kQ5 = sizeof(B) == sizeof(BlockQ5_K);
  using Scales = KScales<8>;
  static void row(const uint8_t* src, int64_t nsb, uint8_t* dst, Scales* s, int lane) {
    const __m256i m4 = _mm256_set1_epi8(0x0F), one = _mm256_set1_epi8(1);
    for (int64_t b = 0; b < nsb; ++b) {
      const B& blk = reinterpret_cast<const B*>(src)[b];
      __m256i qh = _mm256_setzero_si256();
      if constexpr (kQ5) qh = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk.qh));
      for (int k = 0; k < 4; ++k) {
        const __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk.qs + 32 * k));
        __m256i lo = _mm256_and_si256(v, m4), hi = _mm256_and_si256(_mm256_srli_epi16(v, 4), m4);
        if constexpr (kQ5) {
          lo = _mm256_or_si256(lo, _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(qh, 2 * k), one), 4));
          hi = _mm256_or_si256(hi, _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(qh, 2 * k + 1), one), 4));
        }
        _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst + b * 256 + 64 * k), lo);
        _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst + b * 256 + 64 * k + 32), hi);
      }
      uint8_t sc[8], mn[8];
      k4_scales(blk.scales, sc, mn);
      for (int j = 0; j < 8; ++j) s[b].sc[j][lane] = sc[j];
      for (int p = 0; p < 4; ++p) s[b].mn[p][lane] = static_cast<int32_t>(pair16(mn[2 * p], mn[2 * p + 1]));
      s[b].d[lane] = h2f(blk.d);
      s[b].dmin[lane] = h2f(blk.dmin);
    }
  }
};
using PackQ4_K = PackQ45_K<BlockQ4_K>;
using PackQ5_K = PackQ45_K<BlockQ5_K>;

struct PackQ6_K : PackKBase<16> {
  static constexpr int kNS = 16;
  using Scales = KScales<16>;
  static void row(const uint8_t* src, int64_t nsb, uint8_t* dst, Scales* s, int lane) {
    const __m512i m4 = _mm512_set1_epi8(0x0F), m3 = _mm512_set1_epi8(3);
    for (int64_t b = 0; b < nsb; ++b) {
      const BlockQ6_K& blk = reinterpret_cast<const BlockQ6_K*>(src)[b];
      for (int h = 0; h < 2; ++h) {
        // Elements 128h + 0..63 and 128h + 64..127, in order (see dequantize_q6_K).
        const __m512i L = _mm512_loadu_si512(blk.ql + 64 * h);
        const __m256i H = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk.qh + 32 * h));
        const __m512i H2 = _mm512_inserti64x4(_mm512_castsi256_si512(H), _mm256_srli_epi16(H, 2), 1);
        const __m512i hA = _mm512_slli_epi16(_mm512_and_si512(H2, m3), 4);
        const __m512i hB = _mm512_slli_epi16(_mm512_and_si512(_mm512_srli_epi16(H2, 4), m3), 4);
        _mm512_storeu_si512(dst + b * 256 + 128 * h, _mm512_or_si512(_mm512_and_si512(L, m4), hA));
        _mm512_storeu_si512(dst + b * 256 + 128 * h + 64,
                            _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(L, 4), m4), hB));
      }
      for (int j = 0; j < 16; ++j) s[b].sc[j][lane] = blk.scales[j];
      for (int p = 0; p < 8; ++p) s[b].mn[p][lane] = static_cast<int32_t>(pair16(blk.scales[2 * p], blk.scales[2 * p + 1]));
      s[b].d[lane] = h2f(blk.d);
      s[b].dmin[lane] = 0.0f;
    }
  }
};

// ---- inner kernels: 16 rows × T tokens -------------------------------------------------------

inline __m512i bcast32(const void* p) {
  int32_t v;
  std::memcpy(&v, p, 4);
  return _mm512_set1_epi32(v);
}

// acc += w (u8) · broadcast(4 bytes at p) (s8), with the broadcast as vpdpbusd's memory operand
// (GCC does not fold _mm512_set1_epi32(load) into the instruction, and a separate broadcast costs
// a register per token).
inline __m512i dpbusd_b(__m512i acc, __m512i w, const void* p) {
  asm("vpdpbusd %2%{1to16%}, %1, %0" : "+v"(acc) : "v"(w), "m"(*static_cast<const int32_t*>(p)));
  return acc;
}

inline void store_rows(float* y, __m512 v, int nr) {
  if (nr == kRows) _mm512_storeu_ps(y, v);
  else _mm512_mask_storeu_ps(y, static_cast<__mmask16>((1u << nr) - 1), v);
}

constexpr int kTQ8 = 12;  // tokens per register tile (Q8_0/Q4_0)
constexpr int kTK = 6;   // tokens per register tile (K-quants)

// Q8_0/Q4_0: q packed (nb × 8 vectors), wd[nb][16]; X: packed activations (kernels/gemm.h) of
// N tokens, this tile starting at token t.
template <int T>
void kern_q8(const uint8_t* q, const float* wd, int64_t nb, const uint8_t* X, int64_t N, int64_t t, float* y,
             int64_t ldy, int nr) {
  const int8_t* xq = reinterpret_cast<const int8_t*>(X) + t * 32;
  const int32_t* xc = reinterpret_cast<const int32_t*>(X + nb * N * 32) + t;
  const float* xd = reinterpret_cast<const float*>(X + nb * N * 36) + t;
  __m512 accf[T];
  for (int j = 0; j < T; ++j) accf[j] = _mm512_setzero_ps();
  for (int64_t b = 0; b < nb; ++b, q += 512, wd += kRows, xq += N * 32, xc += N, xd += N) {
    __m512i acc[T];
    for (int j = 0; j < T; ++j) acc[j] = _mm512_set1_epi32(xc[j]);
    for (int k = 0; k < 8; ++k) {
      const __m512i w = _mm512_load_si512(q + 64 * k);
      for (int j = 0; j < T; ++j) acc[j] = dpbusd_b(acc[j], w, xq + 32 * j + 4 * k);
    }
    const __m512 d = _mm512_load_ps(wd);
    for (int j = 0; j < T; ++j)
      accf[j] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(acc[j]), _mm512_mul_ps(d, _mm512_set1_ps(xd[j])), accf[j]);
  }
  for (int j = 0; j < T; ++j) store_rows(y + j * ldy, accf[j], nr);
}

// K-quants: q packed (nsb × 64 vectors), scales per super-block; X as above.
template <int NS, int T>
void kern_k(const uint8_t* q, const KScales<NS>* sc, int64_t nsb, const uint8_t* X, int64_t N, int64_t t,
            float* y, int64_t ldy, int nr) {
  constexpr int kGroups = 64 / NS;  // 4-element groups per sub-block: 8 (Q4_K/Q5_K) or 4 (Q6_K)
  const int8_t* xq = reinterpret_cast<const int8_t*>(X) + t * 256;
  const int16_t* xb = reinterpret_cast<const int16_t*>(X + nsb * N * 256) + t * 16;
  const float* xd = reinterpret_cast<const float*>(X + nsb * N * 288) + t;
  __m512 accf[T];
  for (int j = 0; j < T; ++j) accf[j] = _mm512_setzero_ps();
  for (int64_t b = 0; b < nsb; ++b, q += 4096, xq += N * 256, xb += N * 16, xd += N) {
    const KScales<NS>& s = sc[b];
    __m512i A[T], M[T];
    for (int j = 0; j < T; ++j) A[j] = M[j] = _mm512_setzero_si512();
    for (int sb = 0; sb < NS; ++sb) {
      __m512i S[T];
      for (int j = 0; j < T; ++j) S[j] = _mm512_setzero_si512();
      for (int g = 0; g < kGroups; ++g) {
        const __m512i w = _mm512_load_si512(q + (sb * kGroups + g) * 64);
        for (int j = 0; j < T; ++j) S[j] = dpbusd_b(S[j], w, xq + 256 * j + (sb * kGroups + g) * 4);
      }
      const __m512i scv = _mm512_load_si512(s.sc[sb]);
      for (int j = 0; j < T; ++j) A[j] = _mm512_add_epi32(A[j], _mm512_mullo_epi32(S[j], scv));
    }
    // Q4_K/Q5_K: M = Σ_s m_s·bsum32_s (the packed bsums of these types are per 32: 4 pairs);
    // Q6_K: M = Σ_s sc_s·bsum_s (per 16: 8 pairs).
    constexpr int kPairs = NS == 8 ? 4 : 8;
    for (int p = 0; p < kPairs; ++p) {
      const __m512i mv = _mm512_load_si512(s.mn[p]);
      for (int j = 0; j < T; ++j) M[j] = _mm512_dpwssd_epi32(M[j], mv, bcast32(xb + 16 * j + 2 * p));
    }
    const __m512 d = _mm512_load_ps(s.d);
    if constexpr (NS == 8) {
      const __m512 dm = _mm512_load_ps(s.dmin);
      for (int j = 0; j < T; ++j) {
        const __m512 xv = _mm512_set1_ps(xd[j]);
        accf[j] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(A[j]), _mm512_mul_ps(d, xv), accf[j]);
        accf[j] = _mm512_fnmadd_ps(_mm512_cvtepi32_ps(M[j]), _mm512_mul_ps(dm, xv), accf[j]);
      }
    } else {
      for (int j = 0; j < T; ++j) {
        const __m512i s32 = _mm512_sub_epi32(A[j], _mm512_slli_epi32(M[j], 5));
        accf[j] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(s32), _mm512_mul_ps(d, _mm512_set1_ps(xd[j])), accf[j]);
      }
    }
  }
  for (int j = 0; j < T; ++j) store_rows(y + j * ldy, accf[j], nr);
}

// ---- activation packing (layouts in kernels/gemm.h) ------------------------------------------

template <int kOffset>
void pack_q8(const uint8_t* xa, uint64_t x_stride, int64_t t0, int64_t t1, int64_t N, int64_t cols, uint8_t* X) {
  const int64_t nb = cols / 32;
  int32_t* C = reinterpret_cast<int32_t*>(X + nb * N * 32);
  float* D = reinterpret_cast<float*>(X + nb * N * 36);
  const __m256i ones = _mm256_set1_epi8(1);
  for (int64_t t = t0; t < t1; ++t) {
    const BlockQ8_0* xb = reinterpret_cast<const BlockQ8_0*>(xa + t * x_stride);
    for (int64_t b = 0; b < nb; ++b) {
      const __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xb[b].qs));
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(X + (b * N + t) * 32), v);
      const __m256i s = _mm256_dpbusd_epi32(_mm256_setzero_si256(), ones, v);
      const __m128i s4 = _mm_add_epi32(_mm256_castsi256_si128(s), _mm256_extracti128_si256(s, 1));
      const __m128i s2 = _mm_add_epi32(s4, _mm_unpackhi_epi64(s4, s4));
      C[b * N + t] = -kOffset * (_mm_cvtsi128_si32(s2) + _mm_extract_epi32(s2, 1));
      D[b * N + t] = h2f(xb[b].d);
    }
  }
}

// kPer32: bsums summed per 32 (Q4_K/Q5_K sub-blocks; the first 8 of the 16 slots), else as is.
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

// Packs the 16-row group at row r (nr real rows, the rest zero) into q (+ per-type scales).
template <class P, class S>
void pack_group(const MMArgs& a, int64_t r, int nr, int64_t nblk, uint8_t* tmp, uint8_t* q, S* sc) {
  for (int i = 0; i < kRows; ++i) {
    if (i < nr) {
      P::row(a.w + (r + i) * a.w_stride, nblk, tmp + i * a.cols, sc, i);
    } else {
      std::memset(tmp + i * a.cols, 0, static_cast<size_t>(a.cols));
      P::zero(nblk, sc, i);
    }
  }
  transpose_rows(tmp, static_cast<uint64_t>(a.cols), a.cols, q);
}

// The 16-row groups of a Q8_0/Q4_0 work unit: each unpacked by P into thread scratch (slot 0 raw
// rows, slot 1 packed q + per-block scales wd[nb][16]), then run(r, nr, q, wd). The unit's first
// 16 output lines of the group are fetched for writing before the unpacking (a GEMM writes each
// output line once; a store that misses the caches then stalls the stores behind it).
template <class P, class Run>
void each_q8_group(const MMArgs& a, Run&& run) {
  const int64_t nb = a.cols / 32;
  uint8_t* tmp = static_cast<uint8_t*>(thread_scratch(0, static_cast<size_t>(kRows * a.cols)));
  uint8_t* q = static_cast<uint8_t*>(thread_scratch(1, static_cast<size_t>(kRows * a.cols + nb * kRows * 4)));
  float* wd = reinterpret_cast<float*>(q + kRows * a.cols);
  for (int64_t r = a.r0; r < a.r1; r += kRows) {
    const int nr = static_cast<int>(a.r1 - r < kRows ? a.r1 - r : kRows);
    for (int64_t j = a.t0; j < a.t1 && j < a.t0 + 16; ++j) _m_prefetchw(a.y + j * a.ldy + r);
    pack_group<P>(a, r, nr, nb, tmp, q, wd);
    run(r, nr, static_cast<const uint8_t*>(q), static_cast<const float*>(wd));
  }
}

template <class P>
void gemm_q8_impl(const MMArgs& a) {
  const int64_t nb = a.cols / 32, N = static_cast<int64_t>(a.x_stride);
  each_q8_group<P>(a, [&](int64_t r, int nr, const uint8_t* q, const float* wd) {
    for (int64_t t = a.t0; t < a.t1; t += kTQ8) {
      const int n = static_cast<int>(a.t1 - t < kTQ8 ? a.t1 - t : kTQ8);
      float* y = a.y + t * a.ldy + r;
      switch (n) {
        case 12: kern_q8<12>(q, wd, nb, a.x, N, t, y, a.ldy, nr); break;
        case 11: kern_q8<11>(q, wd, nb, a.x, N, t, y, a.ldy, nr); break;
        case 10: kern_q8<10>(q, wd, nb, a.x, N, t, y, a.ldy, nr); break;
        case 9: kern_q8<9>(q, wd, nb, a.x, N, t, y, a.ldy, nr); break;
        case 8: kern_q8<8>(q, wd, nb, a.x, N, t, y, a.ldy, nr); break;
        case 7: kern_q8<7>(q, wd, nb, a.x, N, t, y, a.ldy, nr); break;
        case 6: kern_q8<6>(q, wd, nb, a.x, N, t, y, a.ldy, nr); break;
        case 5: kern_q8<5>(q, wd, nb, a.x, N, t, y, a.ldy, nr); break;
        case 4: kern_q8<4>(q, wd, nb, a.x, N, t, y, a.ldy, nr); break;
        case 3: kern_q8<3>(q, wd, nb, a.x, N, t, y, a.ldy, nr); break;
        case 2: kern_q8<2>(q, wd, nb, a.x, N, t, y, a.ldy, nr); break;
        default: kern_q8<1>(q, wd, nb, a.x, N, t, y, a.ldy, nr); break;
      }
    }
  });
}

template <class P>
void gemm_k_impl(const MMArgs& a) {
  constexpr int NS = P::kNS;
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
      float* y = a.y + t * a.ldy + r;
      switch (n) {
        case 6: kern_k<NS, 6>(q, sc, nsb, a.x, N, t, y, a.ldy, nr); break;
        case 5: kern_k<NS, 5>(q, sc, nsb, a.x, N, t, y, a.ldy, nr); break;
        case 4: kern_k<NS, 4>(q, sc, nsb, a.x, N, t, y, a.ldy, nr); break;
        case 3: kern_k<NS, 3>(q, sc, nsb, a.x, N, t, y, a.ldy, nr); break;
        case 2: kern_k<NS, 2>(q, sc, nsb, a.x, N, t, y, a.ldy, nr); break;
        default: kern_k<NS, 1>(q, sc, nsb, a.x, N, t, y, a.ldy, nr); break;
      }
    }
  }
}

void run_q8_0(const MMArgs& a) { gemm_q8_impl<PackQ8_0>(a); }
void run_q4_0(const MMArgs& a) { gemm_q8_impl<PackQ4_0>(a); }
void run_q4_K(const MMArgs& a) { gemm_k_impl<PackQ4_K>(a); }
void run_q5_K(const MMArgs& a) { gemm_k_impl<PackQ5_K>(a); }
void run_q6_K(const MMArgs& a) { gemm_k_impl<PackQ6_K>(a); }


#if defined(OXI_HAVE_AMX)
// ---- AMX-INT8 tiles, Q8_0 / Q4_0 --------------------------------------------------------------
// The signed packing above makes each 16-row group's 8 × 64-byte slice per block an AMX B tile
// (row k/4 holds elements k..k+3 of the 16 weight rows), and the packed activations of 16 tokens
// (32 bytes each, consecutive) an A tile. One TDPBSSD per block gives the 16 tokens × 16 rows of
// exact int32 block sums; the per-block scales d_w·d_x keep them from accumulating across blocks
// in the tile, so each block's C goes through memory (tiles have no path to vector registers) and
// is scaled into 16 float accumulators with AVX-512. The tile work of block b is issued two blocks
// before its scaling (two C tiles ping-pong, four C buffers), so the tile unit and the vector units
// overlap instead of waiting on each other. Results equal the VNNI kernel's up to float summation
// order. K-quants keep the VNNI kernels: the same scheme per 32-element sub-block (scales in float,
// mins from Q8_K's bsums per super-block) measured no faster for Q4_K/Q5_K and slower for Q6_K
// (16-element sub-blocks), and pp512 of the Gemma-4-E2B Q4_K_M file was 3–9 % slower with it.
struct alignas(64) TileCfg {
  uint8_t palette, start_row;
  uint8_t reserved[14];
  uint16_t colsb[16];
  uint8_t rows[16];
};

// tmm0/1: C of even/odd blocks (nt tokens × 16 int32), tmm2/3: A (nt tokens × 32 bytes), tmm4/5:
// B (8 × 64 bytes). A last partial token tile configures nt < 16 rows, so no tile reads past the
// packed activations.
void amx_config(int nt) {
  TileCfg c;
  std::memset(&c, 0, sizeof c);
  c.palette = 1;
  for (int i = 0; i < 4; ++i) {
    c.rows[i] = static_cast<uint8_t>(nt);
    c.colsb[i] = i < 2 ? 64 : 32;
  }
  for (int i = 4; i < 6; ++i) {
    c.rows[i] = 8;
    c.colsb[i] = 64;
  }
  // Not _tile_loadconfig: GCC 12's declares only 8 bytes of the 64 as read, and the stores of
  // colsb were dropped as dead (ldtilecfg then faults).
  asm volatile("ldtilecfg %0" : : "m"(c));
}

// acc[j] += float(C[j]) · sc · xd[j]: one block's 16 × 16 int32 sums (row j = token j), sc the 16
// rows' weight scales of the block.
__attribute__((always_inline)) inline void amx_scale(__m512 (&acc)[16], const int32_t* c, const float* sc,
                                                     const float* xd) {
  const __m512 d = _mm512_load_ps(sc);
#pragma GCC unroll 16
  for (int j = 0; j < 16; ++j)
    acc[j] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(_mm512_load_si512(c + 16 * j)), _mm512_mul_ps(d, _mm512_set1_ps(xd[j])),
                             acc[j]);
}

// Tile loads and stores with their memory operands spelled out: GCC's _tile_stored clobbers all
// memory, which forces the 16 float accumulators out of registers around every store.
#define OXI_TILE_LOAD512(tmm, p, stride)                                                   \
  asm volatile("tileloadd (%1,%2,1), %%tmm" #tmm                                           \
               :                                                                          \
               : "m"(*reinterpret_cast<const uint8_t(*)[512]>(p)), "r"(p), "r"(int64_t{stride}))
#define OXI_TILE_STORE1K(tmm, p) \
  asm volatile("tilestored %%tmm" #tmm ", (%1,%2,1)" : "=m"(*reinterpret_cast<int32_t(*)[256]>(p)) : "r"(p), "r"(int64_t{64}))

// One 16-row group (q, wd as packed above) × nt ≤ 16 tokens. xq: block 0 of the tile's first
// token (blocks N·32 bytes apart; a block's 16 tokens are 512 contiguous bytes); xd: its scales,
// block b at xd + b·xds.
void amx_tile(const uint8_t* q, const float* wd, int64_t nb, const uint8_t* xq, int64_t N, const float* xd,
              int64_t xds, float* y, int64_t ldy, int nr, int nt) {
  constexpr int64_t kLag = 2;
  alignas(64) int32_t cb[4][256];
  if (nt < 16) std::memset(cb, 0, sizeof cb);  // rows past nt are never stored by the tiles
  __m512 acc[16];
#pragma GCC unroll 16
  for (int j = 0; j < 16; ++j) acc[j] = _mm512_setzero_ps();
  // Output lines (16 tokens × 64 bytes of rows, ldy apart) are written once, at the end of a
  // tile, and a store that misses the caches holds up the tile stores behind it. So each tile
  // fetches the next tile's 16 lines for writing along the way (the caller does the first tile's).
  float* y_next = y + 16 * ldy;
  int pf = 0;
  const int64_t xstep = N * 32;
  for (int64_t b = 0; b < nb + kLag; b += 2) {
    if (pf < 16) _m_prefetchw(y_next + ldy * pf++);
    if (b < nb) {
      const uint8_t* a = xq + b * xstep;
      const uint8_t* w = q + b * 512;
      OXI_TILE_LOAD512(2, a, 32);
      OXI_TILE_LOAD512(4, w, 64);
      _tile_zero(0);
      _tile_dpbssd(0, 2, 4);
      OXI_TILE_STORE1K(0, cb[b & 3]);
    }
    if (b >= kLag) amx_scale(acc, cb[(b - kLag) & 3], wd + (b - kLag) * kRows, xd + (b - kLag) * xds);
    if (b + 1 < nb) {
      const uint8_t* a = xq + (b + 1) * xstep;
      const uint8_t* w = q + (b + 1) * 512;
      OXI_TILE_LOAD512(3, a, 32);
      OXI_TILE_LOAD512(5, w, 64);
      _tile_zero(1);
      _tile_dpbssd(1, 3, 5);
      OXI_TILE_STORE1K(1, cb[(b + 1) & 3]);
    }
    if (b + 1 >= kLag && b + 1 - kLag < nb)
      amx_scale(acc, cb[(b + 1 - kLag) & 3], wd + (b + 1 - kLag) * kRows, xd + (b + 1 - kLag) * xds);
  }
  for (; pf < 16; ++pf) _m_prefetchw(y_next + ldy * pf);
  // Constant indices only (a runtime acc[j] would keep the whole array in memory).
#pragma GCC unroll 16
  for (int j = 0; j < 16; ++j)
    if (j < nt) store_rows(y + j * ldy, acc[j], nr);
}

template <class P>
void amx_q8_impl(const MMArgs& a) {
  const int64_t nb = a.cols / 32, N = static_cast<int64_t>(a.x_stride);
  const float* D = reinterpret_cast<const float*>(a.x + nb * N * 36);
  // A last partial token tile (nt < 16) reads its activation scales from a zero-padded copy
  // (thread scratch slot 5) and configures nt tile rows.
  const int tail = static_cast<int>((a.t1 - a.t0) % 16);
  float* xd_tail = nullptr;
  if (tail) {
    xd_tail = static_cast<float*>(thread_scratch(5, static_cast<size_t>(nb * 16 * 4)));
    for (int64_t b = 0; b < nb; ++b)
      for (int j = 0; j < 16; ++j) xd_tail[b * 16 + j] = j < tail ? D[b * N + a.t1 - tail + j] : 0.0f;
  }
  int cfg = 16;
  amx_config(cfg);
  each_q8_group<P>(a, [&](int64_t r, int nr, const uint8_t* q, const float* wd) {
    for (int64_t t = a.t0; t < a.t1; t += 16) {
      const int nt = static_cast<int>(a.t1 - t < 16 ? a.t1 - t : 16);
      if (nt != cfg) amx_config(cfg = nt);
      const bool full = nt == 16;
      amx_tile(q, wd, nb, a.x + t * 32, N, full ? D + t : xd_tail, full ? N : 16, a.y + t * a.ldy + r, a.ldy, nr, nt);
    }
  });
  _tile_release();
}

void amx_run_q8_0(const MMArgs& a) { amx_q8_impl<PackQ8_0T<true>>(a); }
void amx_run_q4_0(const MMArgs& a) { amx_q8_impl<PackQ4_0T<true>>(a); }
#endif  // OXI_HAVE_AMX

}  // namespace

extern const GemmKernels kAvx512Gemm;
const GemmKernels kAvx512Gemm = {
    "avx512-vnni",
    5,
    {nullptr, nullptr, nullptr, pack_q8<PackQ8_0::kOffset>, pack_q8<PackQ4_0::kOffset>, pack_k<true>, pack_k<true>,
     pack_k<false>},
    {nullptr, nullptr, nullptr, run_q8_0, run_q4_0, run_q4_K, run_q5_K, run_q6_K},
};

#if defined(OXI_HAVE_AMX)
extern const GemmKernels kAmxGemm;
const GemmKernels kAmxGemm = {
    "amx",
    5,
    {nullptr, nullptr, nullptr, pack_q8<0>, pack_q8<0>, pack_k<true>, pack_k<true>, pack_k<false>},
    {nullptr, nullptr, nullptr, amx_run_q8_0, amx_run_q4_0, run_q4_K, run_q5_K, run_q6_K},
};
#endif

}  // namespace oxi::kern
