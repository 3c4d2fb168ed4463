// AVX-512 VNNI GEMM for the integer weight types (Q8_0, Q4_0, Q5_0, IQ4_NL, Q4_1, Q5_1, Q4_K, Q5_K,
// Q6_K, Q3_K, IQ4_XS), 5+ tokens,
// and (set avx512-amx, end of file) the same GEMMs on AMX-INT8 tiles.
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
// Offsets: Q8_0 weights are stored as w + 128, Q4_0 as the raw nibble (w + 8), Q5_0 as the raw
// 5-bit q (w + 16) and IQ4_NL as grid value + 128 (Q4_1/Q5_1: q, no offset, + m_w·s_x per block); the
// k·Σx term is removed by starting each block's int32 sum at −k·Σx (per token and block).
// Q4_K/Q5_K mins and the Q6_K −32 / Q3_K −4 / IQ4_XS −128 offsets come from Q8_K's bsums via vpdpwssd.
#include <immintrin.h>

#include <cstdint>
#include <cstring>

#include "kernels/dispatch.h"
#include "kernels/quant.h"
#include "kernels/gemm.h"
#include "kernels/x86/gemm_pack.h"

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
  static constexpr bool kMin = false;
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
// Q5_0 (q 0..31, offset 16) and IQ4_NL (grid value + 128, offset 128), unsigned for vpdpbusd.
template <class B, int kOff>
struct PackQ32 : PackQ8Base {
  static constexpr int kOffset = kOff;
  static void row(const uint8_t* src, int64_t nb, uint8_t* dst, float* d, int lane) {
    for (int64_t b = 0; b < nb; ++b) {
      const B& blk = reinterpret_cast<const B*>(src)[b];
      __m256i v;
      if constexpr (sizeof(B) == sizeof(BlockQ5_0)) v = q5_0_bytes<kOff>(blk);
      else v = iq4nl_bytes<kOff>(blk);
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst + b * 32), v);
      d[b * kRows + lane] = h2f(blk.d);
    }
  }
};
using PackQ5_0 = PackQ32<BlockQ5_0, 16>;
using PackIQ4_NL = PackQ32<BlockIQ4_NL, 128>;
using PackQ4_1 = PackMinRows<BlockQ4_1, kRows>;
using PackQ5_1 = PackMinRows<BlockQ5_1, kRows>;

// K-quants: per super-block and 16-row group, after the q vectors of the whole row group:
// KScales {int32 sc[NS][16]; int32 mn[8][16] (int16 pairs); float d[16]; float dmin[16]}.
template <int NS>
struct KScales {
  int32_t sc[NS][kRows];
  int32_t mn[8][kRows];  // int16 pairs: Q4_K/Q5_K (m_2p, m_2p+1), p < 4; Q6_K (sc_2p, sc_2p+1)
  float d[kRows];
  float dmin[kRows];
};

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
  static constexpr int kNS = 8, kOff = 0;  // kOff 0: mins (dmin); else the offset removed via bsums
  using Scales = KScales<8>;
  static void row(const uint8_t* src, int64_t nsb, uint8_t* dst, Scales* s, int lane) {
    for (int64_t b = 0; b < nsb; ++b) {
      const B& blk = reinterpret_cast<const B*>(src)[b];
      decode_q45k(blk, dst + b * 256);
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
  static constexpr int kNS = 16, kOff = 32;
  using Scales = KScales<16>;
  static void row(const uint8_t* src, int64_t nsb, uint8_t* dst, Scales* s, int lane) {
    for (int64_t b = 0; b < nsb; ++b) {
      const BlockQ6_K& blk = reinterpret_cast<const BlockQ6_K*>(src)[b];
      decode_q6k(blk, dst + b * 256);
      for (int j = 0; j < 16; ++j) s[b].sc[j][lane] = blk.scales[j];
      for (int p = 0; p < 8; ++p) s[b].mn[p][lane] = static_cast<int32_t>(pair16(blk.scales[2 * p], blk.scales[2 * p + 1]));
      s[b].d[lane] = h2f(blk.d);
      s[b].dmin[lane] = 0.0f;
    }
  }
};

// Q3_K (bytes value + 4, 0..7, offset 4; 16 scales) and IQ4_XS (grid value + 128, unsigned
// 1..241 for vpdpbusd with int32 sums, offset 128 through the per-32 bsums; 8 scales): signed
// sub-block scales, and pairs of them for the bsums term.
template <class B, int NS, int Off>
struct PackSignedK : PackKBase<NS> {
  static constexpr int kNS = NS, kOff = Off;
  using Scales = KScales<NS>;
  static void row(const uint8_t* src, int64_t nsb, uint8_t* dst, Scales* s, int lane) {
    for (int64_t b = 0; b < nsb; ++b) {
      const B& blk = reinterpret_cast<const B*>(src)[b];
      if constexpr (NS == 16) decode_q3k(blk, dst + b * 256);
      else decode_iq4xs<Off>(blk, dst + b * 256);
      int sc[NS];
      block_scales(blk, sc);
      for (int j = 0; j < NS; ++j) s[b].sc[j][lane] = sc[j];
      for (int p = 0; p < 8; ++p) s[b].mn[p][lane] = 0;
      for (int p = 0; 2 * p < NS; ++p) s[b].mn[p][lane] = static_cast<int32_t>(pair16(sc[2 * p], sc[2 * p + 1]));
      s[b].d[lane] = h2f(blk.d);
      s[b].dmin[lane] = 0.0f;
    }
  }
};
using PackQ3_K = PackSignedK<BlockQ3_K, 16, 4>;
using PackIQ4_XS = PackSignedK<BlockIQ4_XS, 8, 128>;

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
// kMin (Q4_1/Q5_1): sums start at 0, and m_w·s_x is added per block (m_w at wd + nb·16, s_x in the
// activation's corr slot).
template <int T, bool kMin = false>
void kern_q8(const uint8_t* q, const float* wd, int64_t nb, const uint8_t* X, int64_t N, int64_t t, float* y,
             int64_t ldy, int nr) {
  const int8_t* xq = reinterpret_cast<const int8_t*>(X) + t * 32;
  const int32_t* xc = reinterpret_cast<const int32_t*>(X + nb * N * 32) + t;
  const float* xd = reinterpret_cast<const float*>(X + nb * N * 36) + t;
  __m512 accf[T];
  for (int j = 0; j < T; ++j) accf[j] = _mm512_setzero_ps();
  for (int64_t b = 0; b < nb; ++b, q += 512, wd += kRows, xq += N * 32, xc += N, xd += N) {
    __m512i acc[T];
    for (int j = 0; j < T; ++j) acc[j] = kMin ? _mm512_setzero_si512() : _mm512_set1_epi32(xc[j]);
    for (int k = 0; k < 8; ++k) {
      const __m512i w = _mm512_load_si512(q + 64 * k);
      for (int j = 0; j < T; ++j) acc[j] = dpbusd_b(acc[j], w, xq + 32 * j + 4 * k);
    }
    const __m512 d = _mm512_load_ps(wd);
    for (int j = 0; j < T; ++j)
      accf[j] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(acc[j]), _mm512_mul_ps(d, _mm512_set1_ps(xd[j])), accf[j]);
    if constexpr (kMin) {
      const __m512 m = _mm512_load_ps(wd + nb * kRows);
      for (int j = 0; j < T; ++j) {
        float sx;
        std::memcpy(&sx, xc + j, 4);
        accf[j] = _mm512_fmadd_ps(m, _mm512_set1_ps(sx), accf[j]);
      }
    }
  }
  for (int j = 0; j < T; ++j) store_rows(y + j * ldy, accf[j], nr);
}

// K-quants: q packed (nsb × 64 vectors), scales per super-block; X as above. Off: 0 for the mins
// (Q4_K/Q5_K), else the constant added to every weight byte (Q6_K 32, Q3_K 4, IQ4_XS 128).
template <int NS, int Off, int T>
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
    // Sub-block sums (exact int32) scaled in float: vpmulld costs two port-0 µops per token and
    // sub-block, cvt + FMA one each.
    __m512 A[T];
    __m512i M[T];
    for (int j = 0; j < T; ++j) {
      A[j] = _mm512_setzero_ps();
      M[j] = _mm512_setzero_si512();
    }
    for (int sb = 0; sb < NS; ++sb) {
      __m512i S[T];
      for (int j = 0; j < T; ++j) S[j] = _mm512_setzero_si512();
      for (int g = 0; g < kGroups; ++g) {
        const __m512i w = _mm512_load_si512(q + (sb * kGroups + g) * 64);
        for (int j = 0; j < T; ++j) S[j] = dpbusd_b(S[j], w, xq + 256 * j + (sb * kGroups + g) * 4);
      }
      const __m512 scf = _mm512_cvtepi32_ps(_mm512_load_si512(s.sc[sb]));
      for (int j = 0; j < T; ++j) A[j] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(S[j]), scf, A[j]);
    }
    // Q4_K/Q5_K: M = Σ_s m_s·bsum32_s (the packed bsums of these types are per 32: 4 pairs);
    // IQ4_XS likewise with its scales; Q6_K/Q3_K: M = Σ_s sc_s·bsum_s (per 16: 8 pairs).
    constexpr int kPairs = NS == 8 ? 4 : 8;
    for (int p = 0; p < kPairs; ++p) {
      const __m512i mv = _mm512_load_si512(s.mn[p]);
      for (int j = 0; j < T; ++j) M[j] = _mm512_dpwssd_epi32(M[j], mv, bcast32(xb + 16 * j + 2 * p));
    }
    const __m512 d = _mm512_load_ps(s.d);
    if constexpr (Off == 0) {
      const __m512 dm = _mm512_load_ps(s.dmin);
      for (int j = 0; j < T; ++j) {
        const __m512 xv = _mm512_set1_ps(xd[j]);
        accf[j] = _mm512_fmadd_ps(A[j], _mm512_mul_ps(d, xv), accf[j]);
        accf[j] = _mm512_fnmadd_ps(_mm512_cvtepi32_ps(M[j]), _mm512_mul_ps(dm, xv), accf[j]);
      }
    } else {
      const __m512 koff = _mm512_set1_ps(static_cast<float>(Off));
      for (int j = 0; j < T; ++j) {
        const __m512 s32 = _mm512_fnmadd_ps(_mm512_cvtepi32_ps(M[j]), koff, A[j]);
        accf[j] = _mm512_fmadd_ps(s32, _mm512_mul_ps(d, _mm512_set1_ps(xd[j])), accf[j]);
      }
    }
  }
  for (int j = 0; j < T; ++j) store_rows(y + j * ldy, accf[j], nr);
}

// Packs the 16-row group at row r (nr real rows, the rest zero) into q (+ per-type scales).
template <class P, class S>
void pack_group(const MMArgs& a, int64_t r, int nr, int64_t nblk, uint8_t* tmp, uint8_t* q, S* sc) {
  decode_rows<P, kRows>(a, r, nr, nblk, tmp, sc);
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
  // q, then d[nb][16] (and for Q4_1/Q5_1 m[nb][16]).
  uint8_t* q = static_cast<uint8_t*>(thread_scratch(1, static_cast<size_t>(kRows * a.cols + nb * kRows * 8)));
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
        case 12: kern_q8<12, P::kMin>(q, wd, nb, a.x, N, t, y, a.ldy, nr); break;
        case 11: kern_q8<11, P::kMin>(q, wd, nb, a.x, N, t, y, a.ldy, nr); break;
        case 10: kern_q8<10, P::kMin>(q, wd, nb, a.x, N, t, y, a.ldy, nr); break;
        case 9: kern_q8<9, P::kMin>(q, wd, nb, a.x, N, t, y, a.ldy, nr); break;
        case 8: kern_q8<8, P::kMin>(q, wd, nb, a.x, N, t, y, a.ldy, nr); break;
        case 7: kern_q8<7, P::kMin>(q, wd, nb, a.x, N, t, y, a.ldy, nr); break;
        case 6: kern_q8<6, P::kMin>(q, wd, nb, a.x, N, t, y, a.ldy, nr); break;
        case 5: kern_q8<5, P::kMin>(q, wd, nb, a.x, N, t, y, a.ldy, nr); break;
        case 4: kern_q8<4, P::kMin>(q, wd, nb, a.x, N, t, y, a.ldy, nr); break;
        case 3: kern_q8<3, P::kMin>(q, wd, nb, a.x, N, t, y, a.ldy, nr); break;
        case 2: kern_q8<2, P::kMin>(q, wd, nb, a.x, N, t, y, a.ldy, nr); break;
        default: kern_q8<1, P::kMin>(q, wd, nb, a.x, N, t, y, a.ldy, nr); break;
      }
    }
  });
}

template <class P>
void gemm_k_impl(const MMArgs& a) {
  constexpr int NS = P::kNS, Off = P::kOff;
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
        case 6: kern_k<NS, Off, 6>(q, sc, nsb, a.x, N, t, y, a.ldy, nr); break;
        case 5: kern_k<NS, Off, 5>(q, sc, nsb, a.x, N, t, y, a.ldy, nr); break;
        case 4: kern_k<NS, Off, 4>(q, sc, nsb, a.x, N, t, y, a.ldy, nr); break;
        case 3: kern_k<NS, Off, 3>(q, sc, nsb, a.x, N, t, y, a.ldy, nr); break;
        case 2: kern_k<NS, Off, 2>(q, sc, nsb, a.x, N, t, y, a.ldy, nr); break;
        default: kern_k<NS, Off, 1>(q, sc, nsb, a.x, N, t, y, a.ldy, nr); break;
      }
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
// order. (The same scheme per 32-element K-quant sub-block was no faster than VNNI: K-quants fold
// their sub-block scales into the weights instead, see "AMX-INT8 tiles, K-quants" below.)
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

// ---- AMX-INT8 tiles, K-quants ----------------------------------------------------------------
// A K-quant super-block (256 elements) has one float scale per row (d, and dmin for the mins) and
// small integer sub-block scales sc. Folding sc into the weights makes the super-block one exact
// integer dot product, v = q·sc per element (Q4_K ≤ 945, Q5_K ≤ 1953, Q6_K in ±8064), which is
// too wide for int8 but splits exactly as v = 128·hi + lo with lo in 0..127 and hi in −63..62.
// So per super-block, 16 tokens × 16 rows: 4 TDPBSSD (K = 64) into C_hi and 4 into C_lo, both
// tiles accumulating over the whole super-block, and one vector pass per super-block:
// 128·C_hi + C_lo, the mins (or Q6_K's −32) from Q8_K's bsums, and the float scales. The VNNI
// kernel spends one vpdpbusd per 4 elements per 16 rows per token; this spends 8 tile
// instructions per 256 elements per 16 rows and 16 tokens. The scaling of super-block b − 1
// runs while the tiles of b are computed (two C buffer pairs).
//
// tmm0/1: C_hi/C_lo (nt tokens × 16 int32); tmm2: A (nt tokens × 64 activation bytes, rows 256
// bytes apart in the packed Q8_K layout); tmm3/4: B_hi/B_lo (16 × 64 bytes).
void amx_k_config(int nt) {
  TileCfg c;
  std::memset(&c, 0, sizeof c);
  c.palette = 1;
  for (int i = 0; i < 5; ++i) {
    c.rows[i] = static_cast<uint8_t>(i < 3 ? nt : 16);
    c.colsb[i] = 64;
  }
  asm volatile("ldtilecfg %0" : : "m"(c));
}

#define OXI_TILE_LOAD_A(tmm, p)                                                     \
  asm volatile("tileloadd (%1,%2,1), %%tmm" #tmm                                    \
               :                                                                   \
               : "m"(*reinterpret_cast<const uint8_t(*)[15 * 256 + 64]>(p)), "r"(p), \
                 "r"(int64_t{256}))
#define OXI_TILE_LOAD_B(tmm, p)                                                                                  \
  asm volatile("tileloadd (%1,%2,1), %%tmm" #tmm : : "m"(*reinterpret_cast<const uint8_t(*)[1024]>(p)), "r"(p), \
               "r"(int64_t{64}))

// 16 rows of decoded unsigned q bytes (tmp, `cols` apart) → hi (in place) and lo bytes.
template <int NS>
void amx_k_split(uint8_t* tmp, uint8_t* lo, const KScales<NS>* sc, int64_t nsb, int64_t cols) {
  constexpr int E = 256 / NS;  // elements per sub-block: 32 (Q4_K/Q5_K) or 16 (Q6_K)
  const __m512i m7 = _mm512_set1_epi16(127);
  for (int i = 0; i < kRows; ++i) {
    for (int64_t b = 0; b < nsb; ++b) {
      for (int c = 0; c < 256; c += 32) {
        const int64_t off = i * cols + b * 256 + c;
        const __m512i sv = _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_set1_epi16(static_cast<short>(sc[b].sc[c / E][i]))),
                                              _mm256_set1_epi16(static_cast<short>(sc[b].sc[(c + 16) / E][i])), 1);
        const __m512i v = _mm512_mullo_epi16(
            _mm512_cvtepu8_epi16(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(tmp + off))), sv);
        _mm256_storeu_si256(reinterpret_cast<__m256i*>(tmp + off), _mm512_cvtepi16_epi8(_mm512_srai_epi16(v, 7)));
        _mm256_storeu_si256(reinterpret_cast<__m256i*>(lo + off), _mm512_cvtepi16_epi8(_mm512_and_si512(v, m7)));
      }
    }
  }
}

// acc[j] += token j's super-block result from C_hi/C_lo (row j = token j, 16 int32 = 16 rows).
template <int NS>
__attribute__((always_inline)) inline void amx_k_scale(__m512 (&acc)[16], const int32_t* ch, const int32_t* cl,
                                                       const KScales<NS>& s, const int16_t* xb, const float* xd,
                                                       int nt) {
  constexpr int kPairs = NS == 8 ? 4 : 8;
  __m512i mv[kPairs];
  for (int p = 0; p < kPairs; ++p) mv[p] = _mm512_load_si512(s.mn[p]);
  const __m512 d = _mm512_load_ps(s.d), dm = _mm512_load_ps(s.dmin);
#pragma GCC unroll 16
  for (int j = 0; j < 16; ++j) {
    if (j >= nt) continue;
    const __m512i v = _mm512_add_epi32(_mm512_slli_epi32(_mm512_load_si512(ch + 16 * j), 7), _mm512_load_si512(cl + 16 * j));
    __m512i M = _mm512_setzero_si512();
    for (int p = 0; p < kPairs; ++p) M = _mm512_dpwssd_epi32(M, mv[p], bcast32(xb + 16 * j + 2 * p));
    const __m512 xv = _mm512_set1_ps(xd[j]);
    if constexpr (NS == 8) {
      acc[j] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(v), _mm512_mul_ps(d, xv), acc[j]);
      acc[j] = _mm512_fnmadd_ps(_mm512_cvtepi32_ps(M), _mm512_mul_ps(dm, xv), acc[j]);
    } else {
      const __m512i s32 = _mm512_sub_epi32(v, _mm512_slli_epi32(M, 5));
      acc[j] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(s32), _mm512_mul_ps(d, xv), acc[j]);
    }
  }
}

// One 16-row group (qh, ql: transposed hi/lo bytes; sc) × nt ≤ 16 tokens from token t.
template <int NS>
void amx_k_tile(const uint8_t* qh, const uint8_t* ql, const KScales<NS>* sc, int64_t nsb, const uint8_t* X,
                int64_t N, int64_t t, float* y, int64_t ldy, int nr, int nt) {
  const int16_t* XB = reinterpret_cast<const int16_t*>(X + nsb * N * 256);
  const float* XD = reinterpret_cast<const float*>(X + nsb * N * 288);
  alignas(64) int32_t cb[2][2][256];
  __m512 acc[16];
#pragma GCC unroll 16
  for (int j = 0; j < 16; ++j) acc[j] = _mm512_setzero_ps();
  for (int64_t b = 0; b <= nsb; ++b) {
    if (b < nsb) {
      _tile_zero(0);
      _tile_zero(1);
      for (int kk = 0; kk < 4; ++kk) {
        const uint8_t* A = X + (b * N + t) * 256 + kk * 64;
        const int64_t g = (b * 64 + kk * 16) * 64;
        OXI_TILE_LOAD_A(2, A);
        OXI_TILE_LOAD_B(3, qh + g);
        OXI_TILE_LOAD_B(4, ql + g);
        _tile_dpbssd(0, 2, 3);
        _tile_dpbssd(1, 2, 4);
      }
      OXI_TILE_STORE1K(0, cb[b & 1][0]);
      OXI_TILE_STORE1K(1, cb[b & 1][1]);
    }
    if (b >= 1) {
      const int64_t p = b - 1;
      amx_k_scale<NS>(acc, cb[p & 1][0], cb[p & 1][1], sc[p], XB + (p * N + t) * 16, XD + p * N + t, nt);
    }
  }
#pragma GCC unroll 16
  for (int j = 0; j < 16; ++j)
    if (j < nt) store_rows(y + j * ldy, acc[j], nr);
}

template <class P>
void amx_k_impl(const MMArgs& a) {
  constexpr int NS = P::kNS;
  using S = typename P::Scales;
  const int64_t nsb = a.cols / 256, N = static_cast<int64_t>(a.x_stride);
  const size_t rows_bytes = static_cast<size_t>(kRows * a.cols);
  uint8_t* tmp = static_cast<uint8_t*>(thread_scratch(0, 2 * rows_bytes));  // q → hi, then lo
  uint8_t* q = static_cast<uint8_t*>(thread_scratch(1, 2 * rows_bytes + nsb * sizeof(S)));
  uint8_t* qh = q;
  uint8_t* ql = q + rows_bytes;
  S* sc = reinterpret_cast<S*>(q + 2 * rows_bytes);
  int cfg = 16;
  amx_k_config(cfg);
  for (int64_t r = a.r0; r < a.r1; r += kRows) {
    const int nr = static_cast<int>(a.r1 - r < kRows ? a.r1 - r : kRows);
    decode_rows<P, kRows>(a, r, nr, nsb, tmp, sc);
    amx_k_split<NS>(tmp, tmp + rows_bytes, sc, nsb, a.cols);
    transpose_rows(tmp, static_cast<uint64_t>(a.cols), a.cols, qh);
    transpose_rows(tmp + rows_bytes, static_cast<uint64_t>(a.cols), a.cols, ql);
    for (int64_t t = a.t0; t < a.t1; t += 16) {
      const int nt = static_cast<int>(a.t1 - t < 16 ? a.t1 - t : 16);
      if (nt != cfg) amx_k_config(cfg = nt);
      amx_k_tile<NS>(qh, ql, sc, nsb, a.x, N, t, a.y + t * a.ldy + r, a.ldy, nr, nt);
    }
  }
  _tile_release();
}

void amx_run_q4_K(const MMArgs& a) { amx_k_impl<PackQ4_K>(a); }
void amx_run_q5_K(const MMArgs& a) { amx_k_impl<PackQ5_K>(a); }
void amx_run_q6_K(const MMArgs& a) { amx_k_impl<PackQ6_K>(a); }

void amx_run_q8_0(const MMArgs& a) { amx_q8_impl<PackQ8_0T<true>>(a); }
void amx_run_q4_0(const MMArgs& a) { amx_q8_impl<PackQ4_0T<true>>(a); }
#endif  // OXI_HAVE_AMX

}  // namespace

extern const GemmKernels kAvx512Gemm;
const GemmKernels kAvx512Gemm = {
    "avx512-vnni",
    5,
    {nullptr, nullptr, nullptr, pack_q8<PackQ8_0::kOffset>, pack_q8<PackQ4_0::kOffset>, pack_k<true>, pack_k<true>,
     pack_k<false>, pack_k<false>, pack_k<true>, pack_q8<PackQ5_0::kOffset>, pack_q8<PackIQ4_NL::kOffset>, pack_q8_1,
     pack_q8_1},
    {nullptr, nullptr, nullptr, run_q8_0, run_q4_0, run_q4_K, run_q5_K, run_q6_K, run_q3_K, run_iq4_xs, run_q5_0,
     run_iq4_nl, run_q4_1, run_q5_1},
};

#if defined(OXI_HAVE_AMX)
extern const GemmKernels kAmxGemm;
const GemmKernels kAmxGemm = {
    "amx",
    5,
    {nullptr, nullptr, nullptr, pack_q8<0>, pack_q8<0>, pack_k<true>, pack_k<true>, pack_k<false>},
    {nullptr, nullptr, nullptr, amx_run_q8_0, amx_run_q4_0, amx_run_q4_K, amx_run_q5_K, amx_run_q6_K},
};
#endif

}  // namespace oxi::kern
