// AVX2 + FMA + F16C kernels, 256-bit. Same tiling as the AVX-512 set; integer dot products use
// vpmaddubsw/vpmaddwd (the sign trick for signed × signed), exact, so results differ from the
// scalar reference only in float summation order.
#include <immintrin.h>

#include <algorithm>
#include <cstring>

#include "kernels/dispatch.h"
#include "kernels/kq_scales.h"
#include "kernels/pack.h"
#include "kernels/quant.h"
#include "kernels/tile_drive.h"
#include "kernels/x86/kq_decode.h"

namespace oxi::kern {
namespace {

inline float h2f(const uint8_t* p) {
  uint16_t h;
  std::memcpy(&h, p, 2);
  return _cvtsh_ss(h);
}

inline float hsum(__m256 v) {
  const __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  const __m128 t = _mm_add_ps(s, _mm_movehl_ps(s, s));
  return _mm_cvtss_f32(_mm_add_ss(t, _mm_movehdup_ps(t)));
}

template <int R, int T>
inline void store(const MMArgs& a, int64_t r, int64_t t, __m256 (&acc)[R][T], int64_t rs) {
  for (int i = 0; i < R; ++i)
    for (int j = 0; j < T; ++j) a.y[(t + j) * a.ldy + r + i * rs] = hsum(acc[i][j]);
}

#define OXI_ZERO_ACC(acc) \
  for (int i = 0; i < R; ++i) \
    for (int j = 0; j < T; ++j) acc[i][j] = _mm256_setzero_ps()

// ---- F32 / F16 / BF16: 8 elements per step, a zero-padded copy for the tail -------------------
struct F32L {
  using E = float;
  static __m256 load(const float* p) { return _mm256_loadu_ps(p); }
};
struct F16L {
  using E = uint16_t;
  static __m256 load(const uint16_t* p) { return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))); }
};
struct BF16L {
  using E = uint16_t;
  static __m256 load(const uint16_t* p) {
    const __m256i v = _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
    return _mm256_castsi256_ps(_mm256_slli_epi32(v, 16));
  }
};

template <class L>
struct TileFloat {
  template <int R, int T>
  struct Tile {
    using E = typename L::E;
    static void run(const MMArgs& a, int64_t r, int64_t t, int64_t rs, uint64_t pf) {
      __m256 acc[R][T];
      OXI_ZERO_ACC(acc);
      const E* w[R];
      const E* x[T];
      for (int i = 0; i < R; ++i) w[i] = reinterpret_cast<const E*>(a.w + (r + i * rs) * a.w_stride);
      for (int j = 0; j < T; ++j) x[j] = reinterpret_cast<const E*>(a.x + (t + j) * a.x_stride);
      int64_t k = 0;
      for (; k + 8 <= a.cols; k += 8) {
        __m256 wv[R];
        for (int i = 0; i < R; ++i) {
          if constexpr (T == 1) _mm_prefetch(reinterpret_cast<const char*>(w[i] + k) + pf, _MM_HINT_T0);
          wv[i] = L::load(w[i] + k);
        }
        for (int j = 0; j < T; ++j) {
          const __m256 xv = L::load(x[j] + k);
          for (int i = 0; i < R; ++i) acc[i][j] = _mm256_fmadd_ps(wv[i], xv, acc[i][j]);
        }
      }
      if (k < a.cols) {
        const int64_t left = a.cols - k;
        E wb[R][8] = {}, xb[T][8] = {};
        for (int i = 0; i < R; ++i) std::memcpy(wb[i], w[i] + k, left * sizeof(E));
        for (int j = 0; j < T; ++j) std::memcpy(xb[j], x[j] + k, left * sizeof(E));
        for (int j = 0; j < T; ++j) {
          const __m256 xv = L::load(xb[j]);
          for (int i = 0; i < R; ++i) acc[i][j] = _mm256_fmadd_ps(L::load(wb[i]), xv, acc[i][j]);
        }
      }
      store<R, T>(a, r, t, acc, rs);
    }
  };
};

// ---- Q8_0 / Q4_0 × Q8_0: one block per step --------------------------------------------------
inline __m256i sdot(__m256i w, __m256i x) {  // signed × signed, 8 int32 lanes
  const __m256i p = _mm256_maddubs_epi16(_mm256_sign_epi8(w, w), _mm256_sign_epi8(x, w));
  return _mm256_madd_epi16(p, _mm256_set1_epi16(1));
}
struct Q8_0W {
  static constexpr int kBytes = 34;
  static constexpr bool kMin = false;
  static __m256i load(const uint8_t* p) { return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + 2)); }
};
struct Q4_0W {
  static constexpr int kBytes = 18;
  static constexpr bool kMin = false;
  static __m256i load(const uint8_t* p) { return _mm256_sub_epi8(nibbles32(p + 2), _mm256_set1_epi8(8)); }
};
struct Q5_0W {  // q − 16 (−16..15)
  static constexpr int kBytes = 22;
  static constexpr bool kMin = false;
  static __m256i load(const uint8_t* p) { return q5_0_bytes<0>(*reinterpret_cast<const BlockQ5_0*>(p)); }
};
struct IQ4_NLW {  // grid values (−127..113)
  static constexpr int kBytes = 18;
  static constexpr bool kMin = false;
  static __m256i load(const uint8_t* p) { return iq4nl_bytes<0>(*reinterpret_cast<const BlockIQ4_NL*>(p)); }
};
struct MXFP4W {  // doubled E2M1 values (−12..12); the block scale is an E8M0 exponent byte
  static constexpr int kBytes = 17;
  static constexpr bool kMin = false, kE8M0 = true;
  static __m256i load(const uint8_t* p) {
    const __m128i g = _mm_loadu_si128(reinterpret_cast<const __m128i*>(kMXFP4Values));
    return _mm256_shuffle_epi8(_mm256_broadcastsi128_si256(g), nibbles32(p + 1));
  }
};
// Q4_1 / Q5_1: unsigned q (0..15 / 0..31) against Q8_1, plus m_w·s_x per block.
struct Q4_1W {
  static constexpr int kBytes = 20;
  static constexpr bool kMin = true;
  static __m256i load(const uint8_t* p) { return nibbles32(p + 4); }
};
struct Q5_1W {
  static constexpr int kBytes = 24;
  static constexpr bool kMin = true;
  static __m256i load(const uint8_t* p) { return _mm256_or_si256(nibbles32(p + 8), qh_bytes(p + 4)); }
};

// Per block: kMin types take Q8_1 activations (36 bytes: d, s, qs) and multiply unsigned weights
// directly (pairs ≤ 2·31·127), the others Q8_0 (34 bytes) with the sign trick; the m_w·s_x
// terms go to a scalar sum per output.
template <class W>
struct TileQ8 {
  template <int R, int T>
  struct Tile {
    static void run(const MMArgs& a, int64_t r, int64_t t, int64_t rs, uint64_t pf) {
      constexpr int kXB = W::kMin ? 36 : 34, kXQ = W::kMin ? 4 : 2;
      __m256 acc[R][T];
      float macc[R][T] = {};
      OXI_ZERO_ACC(acc);
      const uint8_t* w[R];
      const uint8_t* x[T];
      for (int i = 0; i < R; ++i) w[i] = a.w + (r + i * rs) * a.w_stride;
      for (int j = 0; j < T; ++j) x[j] = a.x + (t + j) * a.x_stride;
      const int64_t nb = a.cols / 32;
      for (int64_t b = 0; b < nb; ++b) {
        __m256i wv[R];
        float dw[R], mw[R];
        for (int i = 0; i < R; ++i) {
          const uint8_t* p = w[i] + b * W::kBytes;
          if constexpr (T == 1) {
            _mm_prefetch(reinterpret_cast<const char*>(p + pf), _MM_HINT_T0);
            _mm_prefetch(reinterpret_cast<const char*>(p + pf + 32), _MM_HINT_T0);
          }
          wv[i] = W::load(p);
          dw[i] = block_scale<W>(p, h2f);
          if constexpr (W::kMin) mw[i] = h2f(p + 2);
        }
        for (int j = 0; j < T; ++j) {
          const uint8_t* q = x[j] + b * kXB;
          const __m256i xv = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(q + kXQ));
          const float dx = h2f(q);
          for (int i = 0; i < R; ++i) {
            __m256i s;
            if constexpr (W::kMin) {
              s = _mm256_madd_epi16(_mm256_maddubs_epi16(wv[i], xv), _mm256_set1_epi16(1));
              macc[i][j] += mw[i] * h2f(q + 2);
            } else {
              s = sdot(wv[i], xv);
            }
            acc[i][j] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(s), _mm256_set1_ps(dw[i] * dx), acc[i][j]);
          }
        }
      }
      for (int i = 0; i < R; ++i)
        for (int j = 0; j < T; ++j) a.y[(t + j) * a.ldy + r + i * rs] = hsum(acc[i][j]) + macc[i][j];
    }
  };
};

// ---- K-quants × Q8_K ----------------------------------------------------------------------------
inline void k4_scales(const uint8_t* s, uint8_t* sc, uint8_t* mn) {
  uint32_t a, b, c;
  std::memcpy(&a, s, 4);
  std::memcpy(&b, s + 4, 4);
  std::memcpy(&c, s + 8, 4);
  const uint32_t v[4] = {a & 0x3F3F3F3Fu, (c & 0x0F0F0F0Fu) | ((a >> 2) & 0x30303030u),
                         b & 0x3F3F3F3Fu, ((c >> 4) & 0x0F0F0F0Fu) | ((b >> 2) & 0x30303030u)};
  std::memcpy(sc, v, 8);
  std::memcpy(mn, v + 2, 8);
}

// A weight row's super-block: 8 chunks of 32 unsigned quants, int16 scale vectors per chunk,
// and per-16 mins (Q4_K/Q5_K) or scales (Q6_K) for the bsums correction.
struct KRow {
  __m256i q[8];
  __m256i sc[8];
  __m256i mins16;
  float d, dmin;
};

inline __m256i split16(int a, int b) {  // int16 [a ×8 | b ×8]
  return _mm256_set_m128i(_mm_set1_epi16(static_cast<short>(b)), _mm_set1_epi16(static_cast<short>(a)));
}

inline void unpack_q45k(const uint8_t* scales, const uint8_t* qs, const uint8_t* qh, KRow& o) {
  uint8_t sc[8], mn[8];
  k4_scales(scales, sc, mn);
  const __m128i m8 = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(mn));
  o.mins16 = _mm256_cvtepu8_epi16(_mm_unpacklo_epi8(m8, m8));
  const __m256i m4 = _mm256_set1_epi8(0x0F), one = _mm256_set1_epi8(1);
  const __m256i h = qh ? _mm256_loadu_si256(reinterpret_cast<const __m256i*>(qh)) : _mm256_setzero_si256();
  for (int k = 0; k < 4; ++k) {
    const __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(qs + 32 * k));
    __m256i lo = _mm256_and_si256(v, m4), hi = _mm256_and_si256(_mm256_srli_epi16(v, 4), m4);
    if (qh) {
      lo = _mm256_or_si256(lo, _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(h, 2 * k), one), 4));
      hi = _mm256_or_si256(hi, _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(h, 2 * k + 1), one), 4));
    }
    o.q[2 * k] = lo;
    o.q[2 * k + 1] = hi;
    o.sc[2 * k] = _mm256_set1_epi16(sc[2 * k]);
    o.sc[2 * k + 1] = _mm256_set1_epi16(sc[2 * k + 1]);
  }
}

inline void unpack(const BlockQ4_K& b, KRow& o) {
  unpack_q45k(b.scales, b.qs, nullptr, o);
  o.d = _cvtsh_ss(b.d);
  o.dmin = _cvtsh_ss(b.dmin);
}
inline void unpack(const BlockQ5_K& b, KRow& o) {
  unpack_q45k(b.scales, b.qs, b.qh, o);
  o.d = _cvtsh_ss(b.d);
  o.dmin = _cvtsh_ss(b.dmin);
}
inline void unpack(const BlockQ6_K& b, KRow& o) {
  o.mins16 = _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(b.scales)));
  const __m256i m4 = _mm256_set1_epi8(0x0F), m3 = _mm256_set1_epi8(3);
  for (int h = 0; h < 2; ++h) {
    const __m256i l0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b.ql + 64 * h));
    const __m256i l1 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b.ql + 64 * h + 32));
    const __m256i H = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b.qh + 32 * h));
    const __m256i lows[4] = {_mm256_and_si256(l0, m4), _mm256_and_si256(l1, m4),
                             _mm256_and_si256(_mm256_srli_epi16(l0, 4), m4),
                             _mm256_and_si256(_mm256_srli_epi16(l1, 4), m4)};
    for (int g = 0; g < 4; ++g) {
      const __m256i hb = _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(H, 2 * g), m3), 4);
      o.q[4 * h + g] = _mm256_or_si256(lows[g], hb);
      const int s = 8 * h + 2 * g;  // 32 elements = sub-blocks s, s+1
      o.sc[4 * h + g] = split16(b.scales[s], b.scales[s + 1]);
    }
  }
  o.d = _cvtsh_ss(b.d);
  o.dmin = 0.0f;
}

// Q3_K: 8 chunks of 32 elements, chunk c = 4h + g (h: 128-element half, g: 2-bit field): the field
// at shift 2g of qs[32h + l], plus 4 where bit c of hmask[l] is set, so q = value + 4 (0..7, the
// offset removed through bsums as Q6_K's 32); int16 scales per 16 elements.
inline void unpack(const BlockQ3_K& b, KRow& o) {
  uint64_t lo, hi;
  q3k_scale_bytes(b.scales, lo, hi);
  const __m128i s8 = _mm_sub_epi8(_mm_set_epi64x(static_cast<long long>(hi), static_cast<long long>(lo)),
                                  _mm_set1_epi8(32));
  o.mins16 = _mm256_cvtepi8_epi16(s8);
  const __m256i H = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b.hmask));
  for (int h = 0; h < 2; ++h) {
    const __m256i Q = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b.qs + 32 * h));
    for (int g = 0; g < 4; ++g) {
      const int c = 4 * h + g;
      o.q[c] = q3k_chunk(Q, H, g, c);
      const uint64_t w = c < 4 ? lo : hi;
      const int sh = 16 * (c % 4);  // scales 2c, 2c + 1: bytes 2(c % 4), 2(c % 4) + 1 of lo / hi
      o.sc[c] = split16(static_cast<int>((w >> sh) & 0xFF) - 32, static_cast<int>((w >> (sh + 8)) & 0xFF) - 32);
    }
  }
  o.d = _cvtsh_ss(b.d);
  o.dmin = 0.0f;
}

// Q2_K: chunk c = 4h + g as Q3_K's (the 2-bit field at shift 2g of qs[32h + l]), no high bit;
// scales (low nibbles) per 16 elements, mins (high nibbles) for the bsums correction (Kind 0).
inline void unpack(const BlockQ2_K& b, KRow& o) {
  const __m128i s8 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(b.scales));
  o.mins16 = _mm256_cvtepu8_epi16(_mm_and_si128(_mm_srli_epi16(s8, 4), _mm_set1_epi8(0x0F)));
  const __m256i m3 = _mm256_set1_epi8(3);
  for (int h = 0; h < 2; ++h) {
    const __m256i Q = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b.qs + 32 * h));
    for (int g = 0; g < 4; ++g) {
      const int c = 4 * h + g;
      o.q[c] = _mm256_and_si256(_mm256_srli_epi16(Q, 2 * g), m3);
      o.sc[c] = split16(b.scales[2 * c] & 0xF, b.scales[2 * c + 1] & 0xF);
    }
  }
  o.d = _cvtsh_ss(b.d);
  o.dmin = _cvtsh_ss(b.dmin);
}

// 32 IQ3 magnitudes (element order) negated where bit e of the 4 sign bytes sg is set.
inline __m256i iq3_signed(__m256i mag, const uint8_t* sg) {
  const __m256i bitb = _mm256_set1_epi64x(static_cast<long long>(0x8040201008040201ull));
  const __m256i spread = _mm256_setr_epi8(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 2, 2, 2, 2, 2, 2, 3, 3, 3,
                                          3, 3, 3, 3, 3);
  uint32_t s;
  std::memcpy(&s, sg, 4);
  const __m256i sb = _mm256_and_si256(_mm256_shuffle_epi8(_mm256_set1_epi32(static_cast<int>(s)), spread), bitb);
  const __m256i neg = _mm256_cmpeq_epi8(sb, bitb);
  return _mm256_sub_epi8(_mm256_xor_si256(mag, neg), neg);
}

// IQ3_XXS: as IQ3_S with 8-bit indices, signs and scale 2s + 1 from each sub-block's u32, the
// 1/4 folded into d (exact).
inline void unpack(const BlockIQ3_XXS& b, KRow& o) {
  for (int c = 0; c < 8; ++c) {
    uint32_t aux;
    std::memcpy(&aux, b.qs + 64 + 4 * c, 4);
    uint8_t sg[4];
    iq3xxs_signs(aux, sg);
    const __m256i ix = _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(b.qs + 8 * c)));
    o.q[c] = iq3_signed(_mm256_i32gather_epi32(reinterpret_cast<const int*>(kIQ3XXSGrid), ix, 4), sg);
    o.sc[c] = _mm256_set1_epi16(static_cast<short>(2 * (aux >> 28) + 1));
  }
  o.d = _cvtsh_ss(b.d) * 0.25f;
  o.dmin = 0.0f;
}

// The IQ2 / IQ1 types: chunk c = sub-block c = 4 groups of 8, one 64-bit grid entry each (one
// vpgatherdq of 4). IQ2: magnitudes negated by the sign bytes; IQ1: 8·g ± 1 (the delta's 1/8
// folded into d, exact). Scales 2s + 1 per 32 (IQ2_XXS, IQ1_S) or per 16 elements.
inline __m256i gather_grid4(__m128i ix, const uint64_t* grid) {
  return _mm256_i32gather_epi64(reinterpret_cast<const long long*>(grid), ix, 8);
}
inline int iq2_ls(const uint8_t* scales, int c, int half) { return 2 * ((scales[c] >> (4 * half)) & 15) + 1; }

inline void unpack(const BlockIQ2_XXS& b, KRow& o) {
  for (int c = 0; c < 8; ++c) {
    uint32_t ix, aux;
    std::memcpy(&ix, b.qs + 8 * c, 4);
    std::memcpy(&aux, b.qs + 8 * c + 4, 4);
    const uint32_t sg = iq_sign_bytes4(aux);
    o.q[c] = iq3_signed(gather_grid4(_mm_cvtepu8_epi32(_mm_cvtsi32_si128(static_cast<int>(ix))), kIQ2XXSGrid),
                        reinterpret_cast<const uint8_t*>(&sg));
    o.sc[c] = _mm256_set1_epi16(static_cast<short>(2 * (aux >> 28) + 1));
  }
  o.d = _cvtsh_ss(b.d) * 0.125f;
  o.dmin = 0.0f;
}

inline void unpack(const BlockIQ2_XS& b, KRow& o) {
  for (int c = 0; c < 8; ++c) {
    const __m128i q = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(b.qs + 4 * c));
    const uint32_t sg = static_cast<uint32_t>(_mm_cvtsi128_si32(iq2xs_sign_bytes(q)));
    o.q[c] = iq3_signed(gather_grid4(_mm_cvtepu16_epi32(_mm_and_si128(q, _mm_set1_epi16(511))), kIQ2XSGrid),
                        reinterpret_cast<const uint8_t*>(&sg));
    o.sc[c] = split16(iq2_ls(b.scales, c, 0), iq2_ls(b.scales, c, 1));
  }
  o.d = _cvtsh_ss(b.d) * 0.125f;
  o.dmin = 0.0f;
}

inline void unpack(const BlockIQ2_S& b, KRow& o) {
  const __m128i sh = _mm_setr_epi32(0, 2, 4, 6);
  for (int c = 0; c < 8; ++c) {
    uint32_t q;
    std::memcpy(&q, b.qs + 4 * c, 4);
    const __m128i hb = _mm_and_si128(_mm_srlv_epi32(_mm_set1_epi32(b.qh[c]), sh), _mm_set1_epi32(3));
    const __m128i ix = _mm_or_si128(_mm_cvtepu8_epi32(_mm_cvtsi32_si128(static_cast<int>(q))), _mm_slli_epi32(hb, 8));
    o.q[c] = iq3_signed(gather_grid4(ix, kIQ2SGrid), b.signs + 4 * c);
    o.sc[c] = split16(iq2_ls(b.scales, c, 0), iq2_ls(b.scales, c, 1));
  }
  o.d = _cvtsh_ss(b.d) * 0.125f;
  o.dmin = 0.0f;
}

// 8·g + delta from the gathered −1/0/1 bytes (delta: ±1 bytes per group).
inline __m256i iq1_values(__m256i g, __m256i delta) {
  return _mm256_add_epi8(_mm256_and_si256(_mm256_slli_epi16(g, 3), _mm256_set1_epi8(static_cast<char>(0xF8))), delta);
}

inline void unpack(const BlockIQ1_S& b, KRow& o) {
  const __m128i sh = _mm_setr_epi32(0, 3, 6, 9);
  for (int c = 0; c < 8; ++c) {
    const uint16_t h = b.qh[c];
    uint32_t q;
    std::memcpy(&q, b.qs + 4 * c, 4);
    const __m128i hb = _mm_and_si128(_mm_srlv_epi32(_mm_set1_epi32(h), sh), _mm_set1_epi32(7));
    const __m128i ix = _mm_or_si128(_mm_cvtepu8_epi32(_mm_cvtsi32_si128(static_cast<int>(q))), _mm_slli_epi32(hb, 8));
    o.q[c] = iq1_values(gather_grid4(ix, kIQ1SGrid), _mm256_set1_epi8(h & 0x8000 ? -1 : 1));
    o.sc[c] = _mm256_set1_epi16(static_cast<short>(2 * ((h >> 12) & 7) + 1));
  }
  o.d = _cvtsh_ss(b.d) * 0.125f;
  o.dmin = 0.0f;
}

inline void unpack(const BlockIQ1_M& b, KRow& o) {
  uint16_t sc[4];
  std::memcpy(sc, b.scales, 8);
  const __m128i sh = _mm_setr_epi32(0, 4, 8, 12);
  for (int c = 0; c < 8; ++c) {
    uint32_t q;
    std::memcpy(&q, b.qs + 4 * c, 4);
    const int h = b.qh[2 * c] | (b.qh[2 * c + 1] << 8);  // nibble l: group l
    const __m128i nib = _mm_and_si128(_mm_srlv_epi32(_mm_set1_epi32(h), sh), _mm_set1_epi32(15));
    const __m128i ix = _mm_or_si128(_mm_cvtepu8_epi32(_mm_cvtsi32_si128(static_cast<int>(q))),
                                    _mm_slli_epi32(_mm_and_si128(nib, _mm_set1_epi32(7)), 8));
    // per group: −1 bytes where bit 3 of its nibble is set, else +1
    const __m256i neg = _mm256_cmpeq_epi64(_mm256_cvtepu32_epi64(_mm_and_si128(nib, _mm_set1_epi32(8))),
                                           _mm256_set1_epi64x(8));
    const __m256i delta = _mm256_or_si256(neg, _mm256_set1_epi8(1));
    o.q[c] = iq1_values(gather_grid4(ix, kIQ1SGrid), delta);
    const int s = 6 * (c % 2);
    o.sc[c] = split16(2 * ((sc[c / 2] >> s) & 7) + 1, 2 * ((sc[c / 2] >> (s + 3)) & 7) + 1);
  }
  o.d = _cvtsh_ss(iq1m_d_bits(b)) * 0.125f;
  o.dmin = 0.0f;
}

// IQ3_S: chunk c = sub-block c: 8 grid indices (qs bytes, ninth bits from qh[c]), one gather of
// their 4-byte magnitudes, negated where the sign bit is set (signed, as IQ4_XS's, for Kind 3).
inline void unpack(const BlockIQ3_S& b, KRow& o) {
  const __m256i bits8 = _mm256_setr_epi32(1, 2, 4, 8, 16, 32, 64, 128), nine = _mm256_set1_epi32(256);
  for (int c = 0; c < 8; ++c) {
    __m256i ix = _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(b.qs + 8 * c)));
    const __m256i hb = _mm256_and_si256(_mm256_set1_epi32(b.qh[c]), bits8);
    ix = _mm256_or_si256(ix, _mm256_and_si256(_mm256_cmpeq_epi32(hb, bits8), nine));
    const __m256i mag = _mm256_i32gather_epi32(reinterpret_cast<const int*>(kIQ3SGrid), ix, 4);
    o.q[c] = iq3_signed(mag, b.signs + 4 * c);
    o.sc[c] = _mm256_set1_epi16(static_cast<short>(1 + 2 * ((b.scales[c / 2] >> (4 * (c % 2))) & 15)));
  }
  o.d = _cvtsh_ss(b.d);
  o.dmin = 0.0f;
}

// IQ4_XS: chunk ib = sub-block ib, its 16 bytes' low nibbles then high nibbles looked up in the
// IQ4_NL grid (signed values; TileK's Kind 3 multiplies them by the sign trick); one int16 scale.
inline void unpack(const BlockIQ4_XS& b, KRow& o) {
  const uint64_t ls = iq4xs_scale_bytes(b);
  const __m256i grid = iq4_grid<0>();
  for (int ib = 0; ib < 8; ++ib) {
    o.q[ib] = iq4xs_sub(grid, b.qs + 16 * ib);
    o.sc[ib] = _mm256_set1_epi16(static_cast<short>(static_cast<int>((ls >> (8 * ib)) & 0xFF) - 32));
  }
  o.d = _cvtsh_ss(b.d);
  o.dmin = 0.0f;
}

// Kind 0: mins (Q4_K/Q5_K/Q2_K); 1: offset 32 (Q6_K); 2: offset 4 (Q3_K); 3: signed quants, no
// correction (IQ4_XS: |q| × sign(x, q), pairs ≤ 2·127·127, no int16 saturation).
template <class B, int Kind>
struct TileK {
  template <int R, int T>
  struct Tile {
    static void run(const MMArgs& a, int64_t r, int64_t t, int64_t rs, uint64_t pf) {
      __m256 acc[R][T];
      OXI_ZERO_ACC(acc);
      const int64_t nb = a.cols / 256;
      for (int64_t b = 0; b < nb; ++b) {
        KRow rw[R];
        for (int i = 0; i < R; ++i) {
          const B& blk = reinterpret_cast<const B*>(a.w + (r + i * rs) * a.w_stride)[b];
          if constexpr (T == 1)
            for (unsigned off = 0; off < sizeof(B); off += 64)
              _mm_prefetch(reinterpret_cast<const char*>(&blk) + pf + off, _MM_HINT_T0);
          unpack(blk, rw[i]);
        }
        for (int j = 0; j < T; ++j) {
          const BlockQ8_K& xb = reinterpret_cast<const BlockQ8_K*>(a.x + (t + j) * a.x_stride)[b];
          const __m256i bs = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xb.bsums));
          for (int i = 0; i < R; ++i) {
            __m256i s = _mm256_setzero_si256();
            for (int k = 0; k < 8; ++k) {
              const __m256i xv = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xb.qs + 32 * k));
              const __m256i p = Kind == 3 ? _mm256_maddubs_epi16(_mm256_sign_epi8(rw[i].q[k], rw[i].q[k]),
                                                                 _mm256_sign_epi8(xv, rw[i].q[k]))
                                          : _mm256_maddubs_epi16(rw[i].q[k], xv);
              s = _mm256_add_epi32(s, _mm256_madd_epi16(p, rw[i].sc[k]));
            }
            if constexpr (Kind == 0) {
              const __m256i mb = _mm256_madd_epi16(rw[i].mins16, bs);
              acc[i][j] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(s), _mm256_set1_ps(rw[i].d * xb.d), acc[i][j]);
              acc[i][j] = _mm256_fnmadd_ps(_mm256_cvtepi32_ps(mb), _mm256_set1_ps(rw[i].dmin * xb.d), acc[i][j]);
            } else {
              if constexpr (Kind == 1 || Kind == 2)
                s = _mm256_sub_epi32(s, _mm256_slli_epi32(_mm256_madd_epi16(rw[i].mins16, bs), Kind == 1 ? 5 : 2));
              acc[i][j] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(s), _mm256_set1_ps(rw[i].d * xb.d), acc[i][j]);
            }
          }
        }
      }
      store<R, T>(a, r, t, acc, rs);
    }
  };
};

template <int R, int T> using TF32 = TileFloat<F32L>::Tile<R, T>;
template <int R, int T> using TF16 = TileFloat<F16L>::Tile<R, T>;
template <int R, int T> using TBF16 = TileFloat<BF16L>::Tile<R, T>;
template <int R, int T> using TQ8_0 = TileQ8<Q8_0W>::Tile<R, T>;
template <int R, int T> using TQ4_0 = TileQ8<Q4_0W>::Tile<R, T>;
template <int R, int T> using TQ5_0 = TileQ8<Q5_0W>::Tile<R, T>;
template <int R, int T> using TIQ4_NL = TileQ8<IQ4_NLW>::Tile<R, T>;
template <int R, int T> using TQ4_1 = TileQ8<Q4_1W>::Tile<R, T>;
template <int R, int T> using TQ5_1 = TileQ8<Q5_1W>::Tile<R, T>;
template <int R, int T> using TQ4_K = TileK<BlockQ4_K, 0>::Tile<R, T>;
template <int R, int T> using TQ5_K = TileK<BlockQ5_K, 0>::Tile<R, T>;
template <int R, int T> using TQ6_K = TileK<BlockQ6_K, 1>::Tile<R, T>;
template <int R, int T> using TQ3_K = TileK<BlockQ3_K, 2>::Tile<R, T>;
template <int R, int T> using TIQ4_XS = TileK<BlockIQ4_XS, 3>::Tile<R, T>;
template <int R, int T> using TQ2_K = TileK<BlockQ2_K, 0>::Tile<R, T>;
template <int R, int T> using TIQ3_S = TileK<BlockIQ3_S, 3>::Tile<R, T>;
template <int R, int T> using TIQ3_XXS = TileK<BlockIQ3_XXS, 3>::Tile<R, T>;
template <int R, int T> using TIQ2_XXS = TileK<BlockIQ2_XXS, 3>::Tile<R, T>;
template <int R, int T> using TIQ2_XS = TileK<BlockIQ2_XS, 3>::Tile<R, T>;
template <int R, int T> using TIQ2_S = TileK<BlockIQ2_S, 3>::Tile<R, T>;
template <int R, int T> using TIQ1_S = TileK<BlockIQ1_S, 3>::Tile<R, T>;
template <int R, int T> using TIQ1_M = TileK<BlockIQ1_M, 3>::Tile<R, T>;
template <int R, int T> using TMXFP4 = TileQ8<MXFP4W>::Tile<R, T>;

// ---- activations --------------------------------------------------------------------------------
void act_f16(const float* x, void* dst, int64_t n) {
  uint16_t* d = static_cast<uint16_t*>(dst);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    _mm_storeu_si128(reinterpret_cast<__m128i*>(d + i), _mm256_cvtps_ph(_mm256_loadu_ps(x + i), _MM_FROUND_TO_NEAREST_INT));
  for (; i < n; ++i) d[i] = _cvtss_sh(x[i], _MM_FROUND_TO_NEAREST_INT);
}
void act_bf16(const float* x, void* dst, int64_t n) {
  uint16_t* d = static_cast<uint16_t*>(dst);
  for (int64_t i = 0; i < n; ++i) {  // round to nearest even, NaN stays quiet NaN (as f32_to_bf16)
    uint32_t u;
    std::memcpy(&u, x + i, 4);
    if ((u & 0x7fffffffu) > 0x7f800000u) {
      d[i] = static_cast<uint16_t>((u >> 16) | 0x40u);
    } else {
      u += 0x7fffu + ((u >> 16) & 1u);
      d[i] = static_cast<uint16_t>(u >> 16);
    }
  }
}
void act_q8_0(const float* x, void* dst, int64_t n) {
  BlockQ8_0* y = static_cast<BlockQ8_0*>(dst);
  const __m256 sign = _mm256_set1_ps(-0.0f);
  for (int64_t i = 0; i < n / 32; ++i, x += 32) {
    __m256 v[4];
    __m256 m = _mm256_setzero_ps();
    for (int k = 0; k < 4; ++k) {
      v[k] = _mm256_loadu_ps(x + 8 * k);
      m = _mm256_max_ps(m, _mm256_andnot_ps(sign, v[k]));
    }
    __m128 h = _mm_max_ps(_mm256_castps256_ps128(m), _mm256_extractf128_ps(m, 1));
    h = _mm_max_ps(h, _mm_movehl_ps(h, h));
    h = _mm_max_ss(h, _mm_movehdup_ps(h));
    const float amax = _mm_cvtss_f32(h);
    const float id = amax != 0.0f ? 127.0f / amax : 0.0f;
    y[i].d = _cvtss_sh(amax / 127.0f, _MM_FROUND_TO_NEAREST_INT);
    const __m256 vid = _mm256_set1_ps(id);
    __m256i q[4];
    for (int k = 0; k < 4; ++k) q[k] = _mm256_cvtps_epi32(_mm256_mul_ps(v[k], vid));  // half to even
    const __m256i p01 = _mm256_packs_epi32(q[0], q[1]), p23 = _mm256_packs_epi32(q[2], q[3]);
    __m256i p = _mm256_packs_epi16(p01, p23);
    p = _mm256_permutevar8x32_epi32(p, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(y[i].qs), p);
  }
}
void act_q8_K(const float* x, void* dst, int64_t n) { ref_quantize_q8_K(x, static_cast<BlockQ8_K*>(dst), n); }
void act_q8_1(const float* x, void* dst, int64_t n) { ref_quantize_act_q8_1(x, static_cast<BlockQ8_1*>(dst), n); }

void mm_f32(const MMArgs& a) { drive_stream_tiles<TF32, 4, 3>(a); }
void mm_f16(const MMArgs& a) { drive_stream_tiles<TF16, 4, 3>(a); }
void mm_bf16(const MMArgs& a) { drive_stream_tiles<TBF16, 4, 3>(a); }
void mm_q8_0(const MMArgs& a) { drive_stream_tiles<TQ8_0, 4, 2>(a); }
void mm_q4_0(const MMArgs& a) { drive_stream_tiles<TQ4_0, 4, 2>(a); }
void mm_q4_K(const MMArgs& a) { drive_stream_tiles<TQ4_K, 1, 4>(a); }
void mm_q5_K(const MMArgs& a) { drive_stream_tiles<TQ5_K, 1, 4>(a); }
void mm_q6_K(const MMArgs& a) { drive_stream_tiles<TQ6_K, 1, 4>(a); }
void mm_q3_K(const MMArgs& a) { drive_stream_tiles<TQ3_K, 1, 4>(a); }
void mm_iq4_xs(const MMArgs& a) { drive_stream_tiles<TIQ4_XS, 1, 4>(a); }
void mm_q2_K(const MMArgs& a) { drive_stream_tiles<TQ2_K, 1, 4>(a); }
void mm_iq3_s(const MMArgs& a) { drive_stream_tiles<TIQ3_S, 1, 4>(a); }
void mm_iq3_xxs(const MMArgs& a) { drive_stream_tiles<TIQ3_XXS, 1, 4>(a); }
void mm_iq2_xxs(const MMArgs& a) { drive_stream_tiles<TIQ2_XXS, 1, 4>(a); }
void mm_iq2_xs(const MMArgs& a) { drive_stream_tiles<TIQ2_XS, 1, 4>(a); }
void mm_iq2_s(const MMArgs& a) { drive_stream_tiles<TIQ2_S, 1, 4>(a); }
void mm_iq1_s(const MMArgs& a) { drive_stream_tiles<TIQ1_S, 1, 4>(a); }
void mm_iq1_m(const MMArgs& a) { drive_stream_tiles<TIQ1_M, 1, 4>(a); }
void mm_mxfp4(const MMArgs& a) { drive_stream_tiles<TMXFP4, 4, 2>(a); }
void mm_q5_0(const MMArgs& a) { drive_stream_tiles<TQ5_0, 4, 2>(a); }
void mm_iq4_nl(const MMArgs& a) { drive_stream_tiles<TIQ4_NL, 4, 2>(a); }
void mm_q4_1(const MMArgs& a) { drive_stream_tiles<TQ4_1, 4, 2>(a); }
void mm_q5_1(const MMArgs& a) { drive_stream_tiles<TQ5_1, 4, 2>(a); }

// MLX affine groups: the kernel's scheme is in kernels/x86/mlx_drive.h.
inline __m256 mlx_widen(__m128i bytes) { return _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(bytes)); }

template <int kBits, int G, int NT>
void mlx_row(const uint8_t* row, const float* const* x, int64_t cols, float* const* y) {
  constexpr int kBlock = 8 + G * kBits / 8;
  __m256 acc0[NT], acc1[NT];
  for (int k = 0; k < NT; ++k) acc0[k] = acc1[k] = _mm256_setzero_ps();
  const __m128i m4 = _mm_set1_epi8(15);
  for (int64_t i0 = 0; i0 < cols; i0 += G, row += kBlock) {
    float s, b;
    std::memcpy(&s, row, 4);
    std::memcpy(&b, row + 4, 4);
    const __m256 vs = _mm256_set1_ps(s), vb = _mm256_set1_ps(b);
    const uint8_t* q = row + 8;
    for (int c = 0; c < G; c += 32) {
      __m128i v0, v1;  // codes 0..15 and 16..31 of the chunk, one byte each
      if constexpr (kBits == 4) {
        const __m128i raw = _mm_loadu_si128(reinterpret_cast<const __m128i*>(q + c / 2));
        const __m128i lo = _mm_and_si128(raw, m4), hi = _mm_and_si128(_mm_srli_epi16(raw, 4), m4);
        v0 = _mm_unpacklo_epi8(lo, hi);
        v1 = _mm_unpackhi_epi8(lo, hi);
      } else {
        v0 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(q + c));
        v1 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(q + c + 16));
      }
      const __m256 w0 = _mm256_fmadd_ps(mlx_widen(v0), vs, vb);
      const __m256 w1 = _mm256_fmadd_ps(mlx_widen(_mm_srli_si128(v0, 8)), vs, vb);
      const __m256 w2 = _mm256_fmadd_ps(mlx_widen(v1), vs, vb);
      const __m256 w3 = _mm256_fmadd_ps(mlx_widen(_mm_srli_si128(v1, 8)), vs, vb);
      for (int k = 0; k < NT; ++k) {
        const float* xk = x[k] + i0 + c;
        acc0[k] = _mm256_fmadd_ps(w0, _mm256_loadu_ps(xk), acc0[k]);
        acc1[k] = _mm256_fmadd_ps(w1, _mm256_loadu_ps(xk + 8), acc1[k]);
        acc0[k] = _mm256_fmadd_ps(w2, _mm256_loadu_ps(xk + 16), acc0[k]);
        acc1[k] = _mm256_fmadd_ps(w3, _mm256_loadu_ps(xk + 24), acc1[k]);
      }
    }
  }
  for (int k = 0; k < NT; ++k) *y[k] = hsum(_mm256_add_ps(acc0[k], acc1[k]));
}

#include "kernels/x86/mlx_drive.h"

// Decode over packed copies (x86/avx2_pack.cpp), with this file's kernels for rows past them.
void mm_q4_0_packed(const MMArgs& a) { mm_q4_0_packed_avx2(a, mm_q4_0); }
void mm_q4_K_packed(const MMArgs& a) { mm_q4_K_packed_avx2(a, mm_q4_K); }
void mm_q6_K_packed(const MMArgs& a) { mm_q6_K_packed_avx2(a, mm_q6_K); }

}  // namespace

const Kernels kAvx2Kernels = {
    "avx2",
    {mm_f32, mm_f16, mm_bf16, mm_q8_0, mm_q4_0, mm_q4_K, mm_q5_K, mm_q6_K, mm_q3_K, mm_iq4_xs, mm_q5_0, mm_iq4_nl,
     mm_q4_1, mm_q5_1, mm_q2_K, mm_iq3_s, mm_iq3_xxs, mm_iq2_xxs, mm_iq2_xs, mm_iq2_s, mm_iq1_s, mm_iq1_m,
     mm_mxfp4, mm_mlx<4, 32>, mm_mlx<4, 64>, mm_mlx<4, 128>, mm_mlx<8, 32>, mm_mlx<8, 64>, mm_mlx<8, 128>},
    {nullptr, act_f16, act_bf16, act_q8_0, act_q8_K, act_q8_1},
    8,
    {nullptr, nullptr, nullptr, nullptr, mm_q4_0_packed, mm_q4_K_packed, nullptr, mm_q6_K_packed},
    {nullptr, nullptr, nullptr, nullptr, pack_q4_0_avx2, pack_q4_K_avx2, nullptr, pack_q6_K_avx2},
    {nullptr, nullptr, nullptr, nullptr, unpack_q4_0_avx2, unpack_q4_K_avx2, nullptr, unpack_q6_K_avx2},
};

}  // namespace oxi::kern
