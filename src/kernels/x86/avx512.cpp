// AVX-512 kernels (F/BW/VL/DQ + VNNI + BF16), 512-bit. Register-tiled R rows × T tokens; the
// integer dot products are exact, so results differ from the scalar reference only in float
// summation order.
#include <immintrin.h>

#include <cmath>
#include <algorithm>
#include <cstring>
#include <type_traits>

#include "kernels/dispatch.h"
#include "kernels/kq_scales.h"
#include "kernels/pack.h"
#include "kernels/quant.h"
#include "kernels/tile_drive.h"
#include "kernels/x86/kq_decode.h"

#ifndef OXI_PF_HINT
#define OXI_PF_HINT _MM_HINT_T0
#endif
#ifdef OXI_PF_NONE
#define OXI_PF(p) ((void)0)
#else
#define OXI_PF(p) _mm_prefetch((p), OXI_PF_HINT)
#endif

namespace oxi::kern {
namespace {

inline int ld16(const uint8_t* p) {  // an unaligned little-endian u16 (f16 scale bits)
  uint16_t v;
  std::memcpy(&v, p, 2);
  return v;
}

inline float h2f(const uint8_t* p) { return _cvtsh_ss(static_cast<unsigned short>(ld16(p))); }

// [a ×8 | b ×8]
inline __m512 pair_scale(float a, float b) {
  return _mm512_insertf32x8(_mm512_castps256_ps512(_mm256_set1_ps(a)), _mm256_set1_ps(b), 1);
}

inline __m512i load2x256(const uint8_t* p0, const uint8_t* p1) {
  return _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p0))),
                            _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p1)), 1);
}
inline __m512i load1x256(const uint8_t* p0) {
  return _mm512_zextsi256_si512(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p0)));
}

template <int R, int T>
inline void store(const MMArgs& a, int64_t r, int64_t t, __m512 (&acc)[R][T], int64_t rs = 1) {
  for (int i = 0; i < R; ++i)
    for (int j = 0; j < T; ++j) a.y[(t + j) * a.ldy + r + i * rs] = _mm512_reduce_add_ps(acc[i][j]);
}

#define OXI_ZERO_ACC(acc) \
  for (int i = 0; i < R; ++i) \
    for (int j = 0; j < T; ++j) acc[i][j] = _mm512_setzero_ps()

// ---- F32 / F16 / BF16 -------------------------------------------------------------------------
template <int R, int T>
struct TileF32 {
  static void run(const MMArgs& a, int64_t r, int64_t t, int64_t rs, uint64_t pf) {
    __m512 acc[R][T];
    OXI_ZERO_ACC(acc);
    const float* w[R];
    const float* x[T];
    for (int i = 0; i < R; ++i) w[i] = reinterpret_cast<const float*>(a.w + (r + i * rs) * a.w_stride);
    for (int j = 0; j < T; ++j) x[j] = reinterpret_cast<const float*>(a.x + (t + j) * a.x_stride);
    int64_t k = 0;
    for (; k + 16 <= a.cols; k += 16) {
      __m512 wv[R];
      for (int i = 0; i < R; ++i) {
        if constexpr (T == 1) OXI_PF(reinterpret_cast<const char*>(w[i] + k) + pf);
        wv[i] = _mm512_loadu_ps(w[i] + k);
      }
      for (int j = 0; j < T; ++j) {
        const __m512 xv = _mm512_loadu_ps(x[j] + k);
        for (int i = 0; i < R; ++i) acc[i][j] = _mm512_fmadd_ps(wv[i], xv, acc[i][j]);
      }
    }
    if (k < a.cols) {
      const __mmask16 m = static_cast<__mmask16>((1u << (a.cols - k)) - 1);
      __m512 wv[R];
      for (int i = 0; i < R; ++i) wv[i] = _mm512_maskz_loadu_ps(m, w[i] + k);
      for (int j = 0; j < T; ++j) {
        const __m512 xv = _mm512_maskz_loadu_ps(m, x[j] + k);
        for (int i = 0; i < R; ++i) acc[i][j] = _mm512_fmadd_ps(wv[i], xv, acc[i][j]);
      }
    }
    store<R, T>(a, r, t, acc, rs);
  }
};

template <int R, int T>
struct TileF16 {
  static void run(const MMArgs& a, int64_t r, int64_t t, int64_t rs, uint64_t pf) {
    __m512 acc[R][T];
    OXI_ZERO_ACC(acc);
    const uint16_t* w[R];
    const uint16_t* x[T];
    for (int i = 0; i < R; ++i) w[i] = reinterpret_cast<const uint16_t*>(a.w + (r + i * rs) * a.w_stride);
    for (int j = 0; j < T; ++j) x[j] = reinterpret_cast<const uint16_t*>(a.x + (t + j) * a.x_stride);
    for (int64_t k = 0; k < a.cols; k += 16) {
      const int64_t left = a.cols - k;
      const __mmask16 m = left >= 16 ? 0xFFFF : static_cast<__mmask16>((1u << left) - 1);
      __m512 wv[R];
      for (int i = 0; i < R; ++i) {
        if constexpr (T == 1) OXI_PF(reinterpret_cast<const char*>(w[i] + k) + pf);
        wv[i] = _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(m, w[i] + k));
      }
      for (int j = 0; j < T; ++j) {
        const __m512 xv = _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(m, x[j] + k));
        for (int i = 0; i < R; ++i) acc[i][j] = _mm512_fmadd_ps(wv[i], xv, acc[i][j]);
      }
    }
    store<R, T>(a, r, t, acc, rs);
  }
};

template <int R, int T>
struct TileBF16 {
  static void run(const MMArgs& a, int64_t r, int64_t t, int64_t rs, uint64_t pf) {
    __m512 acc[R][T];
    OXI_ZERO_ACC(acc);
    const uint16_t* w[R];
    const uint16_t* x[T];
    for (int i = 0; i < R; ++i) w[i] = reinterpret_cast<const uint16_t*>(a.w + (r + i * rs) * a.w_stride);
    for (int j = 0; j < T; ++j) x[j] = reinterpret_cast<const uint16_t*>(a.x + (t + j) * a.x_stride);
    for (int64_t k = 0; k < a.cols; k += 32) {
      const int64_t left = a.cols - k;
      const __mmask32 m = left >= 32 ? 0xFFFFFFFFu : static_cast<__mmask32>((1u << left) - 1);
      __m512i wv[R];
      for (int i = 0; i < R; ++i) {
        if constexpr (T == 1) OXI_PF(reinterpret_cast<const char*>(w[i] + k) + pf);
        wv[i] = _mm512_maskz_loadu_epi16(m, w[i] + k);
      }
      for (int j = 0; j < T; ++j) {
        const __m512i xv = _mm512_maskz_loadu_epi16(m, x[j] + k);
        for (int i = 0; i < R; ++i)
          acc[i][j] = _mm512_dpbf16_ps(acc[i][j], (__m512bh)wv[i], (__m512bh)xv);
      }
    }
    store<R, T>(a, r, t, acc, rs);
  }
};

// ---- Q8_0 / Q4_0 × Q8_0 ------------------------------------------------------------------------
// Two blocks per 512-bit step. Weights are made unsigned (Q8_0: w + 128; Q4_0: the raw nibble)
// for vpdpbusd; the offset k·Σx is removed by starting each token's sum at -k·Σx (lane-wise).
struct Q8_0W {
  static constexpr int kBytes = 34;
  static constexpr int kOffset = 128;
  static constexpr bool kMin = false;
  static __m512i load2(const uint8_t* p) {
    return _mm512_xor_si512(load2x256(p + 2, p + 36), _mm512_set1_epi8(static_cast<char>(0x80)));
  }
  static __m512i load1(const uint8_t* p) {
    return _mm512_xor_si512(load1x256(p + 2), _mm512_set1_epi8(static_cast<char>(0x80)));
  }
};
struct Q4_0W {
  static constexpr int kBytes = 18;
  static constexpr int kOffset = 8;
  static constexpr bool kMin = false;
  static __m512i unpack(__m256i v) {  // v = [qsA | qsB] → [loA hiA loB hiB]
    const __m256i m = _mm256_set1_epi8(0x0F);
    const __m256i lo = _mm256_and_si256(v, m);
    const __m256i hi = _mm256_and_si256(_mm256_srli_epi16(v, 4), m);
    const __m512i z = _mm512_inserti64x4(_mm512_castsi256_si512(lo), hi, 1);  // loA loB hiA hiB
    return _mm512_shuffle_i64x2(z, z, _MM_SHUFFLE(3, 1, 2, 0));
  }
  static __m512i load2(const uint8_t* p) {
    // [qsA qsA qsB qsB] (broadcast loads), high nibbles shifted down in lanes 1 and 3.
    const __m256i a = _mm256_broadcastsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p + 2)));
    const __m256i b = _mm256_broadcastsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p + 20)));
    const __m512i z = _mm512_inserti64x4(_mm512_castsi256_si512(a), b, 1);
    const __m512i sh = _mm512_set_epi64(4, 4, 0, 0, 4, 4, 0, 0);
    return _mm512_and_si512(_mm512_srlv_epi64(z, sh), _mm512_set1_epi8(0x0F));
  }
  static __m512i load1(const uint8_t* p) {
    const __m256i v = _mm256_castsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p + 2)));
    const __m512i u = unpack(_mm256_zextsi128_si256(_mm256_castsi256_si128(v)));
    return u;  // upper block: nibbles of zero bytes = 0
  }
};

// The 32-element fallback types of llama.cpp's recipes in the same scheme. Two blocks A, B per
// step as [A 0..15 | A 16..31 | B 0..15 | B 16..31]; load1 pairs a block with a zero block.
alignas(64) constexpr uint8_t kZeroBlock[64] = {};
inline __m512i nibbles2(const uint8_t* qa, const uint8_t* qb) {  // 16 nibble bytes each
  const __m256i a = _mm256_broadcastsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(qa)));
  const __m256i b = _mm256_broadcastsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(qb)));
  const __m512i z = _mm512_inserti64x4(_mm512_castsi256_si512(a), b, 1);
  const __m512i sh = _mm512_set_epi64(4, 4, 0, 0, 4, 4, 0, 0);
  return _mm512_and_si512(_mm512_srlv_epi64(z, sh), _mm512_set1_epi8(0x0F));
}
// Q5_0/Q5_1 fifth bits (bit j of qh: element j) of both blocks → 0x10 in their bytes.
inline __m512i qh2(const uint8_t* ha, const uint8_t* hb) {
  uint32_t a, b;
  std::memcpy(&a, ha, 4);
  std::memcpy(&b, hb, 4);
  return _mm512_maskz_mov_epi8(static_cast<__mmask64>(a | (static_cast<uint64_t>(b) << 32)), _mm512_set1_epi8(0x10));
}
template <class D>
struct PairW {
  static __m512i load2(const uint8_t* p) { return D::pair(p, p + D::kBytes); }
  static __m512i load1(const uint8_t* p) { return D::pair(p, kZeroBlock); }
};
struct Q5_0W : PairW<Q5_0W> {  // q = 0..31, value q − 16
  static constexpr int kBytes = 22, kOffset = 16;
  static constexpr bool kMin = false;
  static __m512i pair(const uint8_t* a, const uint8_t* b) { return _mm512_or_si512(nibbles2(a + 6, b + 6), qh2(a + 2, b + 2)); }
};
struct IQ4_NLW : PairW<IQ4_NLW> {  // grid value + 128 (1..241)
  static constexpr int kBytes = 18, kOffset = 128;
  static constexpr bool kMin = false;
  static __m512i pair(const uint8_t* a, const uint8_t* b) {
    const __m128i g = _mm_add_epi8(_mm_loadu_si128(reinterpret_cast<const __m128i*>(kIQ4NL)), _mm_set1_epi8(static_cast<char>(0x80)));
    return _mm512_shuffle_epi8(_mm512_broadcast_i32x4(g), nibbles2(a + 2, b + 2));
  }
};
// MXFP4: value + 128 (116..140) by one vpshufb of its 16 values; the block scale is an E8M0
// exponent byte, not an f16 (kE8M0: block_scale, kq_scales.h, and wscale8 below).
struct MXFP4W : PairW<MXFP4W> {
  static constexpr int kBytes = 17, kOffset = 128;
  static constexpr bool kMin = false, kE8M0 = true;
  static __m512i pair(const uint8_t* a, const uint8_t* b) {
    const __m128i g = _mm_add_epi8(_mm_loadu_si128(reinterpret_cast<const __m128i*>(kMXFP4Values)), _mm_set1_epi8(static_cast<char>(0x80)));
    return _mm512_shuffle_epi8(_mm512_broadcast_i32x4(g), nibbles2(a + 1, b + 1));
  }
};
// Q4_1 / Q5_1 (q unsigned, no offset) against Q8_1: the m_w·s_x term per block is added in float.
struct Q4_1W : PairW<Q4_1W> {
  static constexpr int kBytes = 20, kOffset = 0;
  static constexpr bool kMin = true;
  static __m512i pair(const uint8_t* a, const uint8_t* b) { return nibbles2(a + 4, b + 4); }
};
struct Q5_1W : PairW<Q5_1W> {
  static constexpr int kBytes = 24, kOffset = 0;
  static constexpr bool kMin = true;
  static __m512i pair(const uint8_t* a, const uint8_t* b) { return _mm512_or_si512(nibbles2(a + 8, b + 8), qh2(a + 4, b + 4)); }
};
// Activation block bytes and the offset of its qs (Q8_0: 34, 2; Q8_1: 36, 4; Q8_1's s at 2).
template <class W> constexpr int kXBlk = W::kMin ? 36 : 34;
template <class W> constexpr int kXQs = W::kMin ? 4 : 2;

// 8 f16 at p, p + stride, …, p + 7·stride → f32 (16-bit inserts in two chains: vpgatherdd is
// slow on Zen 4/5).
inline __m256 gather8h(const uint8_t* p, int stride) {
  __m128i h0 = _mm_cvtsi32_si128(ld16(p)), h1 = _mm_cvtsi32_si128(ld16(p + 4 * stride));
  h0 = _mm_insert_epi16(h0, ld16(p + 1 * stride), 1);
  h1 = _mm_insert_epi16(h1, ld16(p + 5 * stride), 1);
  h0 = _mm_insert_epi16(h0, ld16(p + 2 * stride), 2);
  h1 = _mm_insert_epi16(h1, ld16(p + 6 * stride), 2);
  h0 = _mm_insert_epi16(h0, ld16(p + 3 * stride), 3);
  h1 = _mm_insert_epi16(h1, ld16(p + 7 * stride), 3);
  return _mm256_cvtph_ps(_mm_unpacklo_epi64(h0, h1));
}

// 8 blocks' weight scales (blocks W::kBytes apart). E8M0: bits (e − 1) << 23, or 0x00200000 << e
// for e < 2 (subnormal), as mxfp4_scale.
template <class W>
inline __m256 wscale8(const uint8_t* p) {
  if constexpr (kE8M0<W>) {
    alignas(32) int32_t e[8];
    for (int k = 0; k < 8; ++k) e[k] = p[k * W::kBytes];
    const __m256i ev = _mm256_load_si256(reinterpret_cast<const __m256i*>(e)), one = _mm256_set1_epi32(1);
    const __m256i nrm = _mm256_slli_epi32(_mm256_sub_epi32(ev, one), 23);
    const __m256i sub = _mm256_sllv_epi32(_mm256_set1_epi32(0x00200000), ev);
    return _mm256_castsi256_ps(_mm256_blendv_epi8(nrm, sub, _mm256_cmpgt_epi32(_mm256_set1_epi32(2), ev)));
  } else {
    return gather8h(p, W::kBytes);
  }
}

// GEMV path for Q8_0 / Q4_0 (1 token): the activation is unpacked once per call (64-byte block
// pairs + their −k·Σx start vectors + f32 scales); weight scales of 8 blocks come from one
// set of 16-bit inserts, are multiplied by the activation scales in one go and spread to lanes by
// vpermps.

// kMin types: sx holds s_x per block; Σ m_w·s_x is summed 8 blocks at a time in M.
template <class W, int R>
inline void gemv_q8_rows(const MMArgs& a, int64_t r, int64_t rs, uint64_t pf, const uint8_t* xp, const float* dx,
                         int64_t nb) {
  __m512 acc[R];
  __m256 M[R];
  float mtail[R];
  for (int i = 0; i < R; ++i) {
    acc[i] = _mm512_setzero_ps();
    M[i] = _mm256_setzero_ps();
    mtail[i] = 0.0f;
  }
  const float* sx = dx + nb + 8;
  const uint8_t* w[R];
  for (int i = 0; i < R; ++i) w[i] = a.w + (r + i * rs) * a.w_stride;
  __m512i spread[4];
  for (int k = 0; k < 4; ++k)
    spread[k] = _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_set1_epi32(2 * k)), _mm256_set1_epi32(2 * k + 1), 1);
  int64_t b = 0;
  for (; b + 8 <= nb; b += 8) {
    const __m256 dxv = _mm256_loadu_ps(dx + b);
    __m512 P[R];
    for (int i = 0; i < R; ++i) {
      const uint8_t* p = w[i] + b * W::kBytes;
      P[i] = _mm512_castps256_ps512(_mm256_mul_ps(wscale8<W>(p), dxv));
      if constexpr (W::kMin) M[i] = _mm256_fmadd_ps(gather8h(p + 2, W::kBytes), _mm256_loadu_ps(sx + b), M[i]);
    }
    for (int k = 0; k < 4; ++k) {
      const uint8_t* q = xp + (b / 2 + k) * 128;
      const __m512i xv = _mm512_loadu_si512(q);
      const __m512i corr = _mm512_loadu_si512(q + 64);
      for (int i = 0; i < R; ++i) {
        const uint8_t* p = w[i] + (b + 2 * k) * W::kBytes;
        OXI_PF(reinterpret_cast<const char*>(p + pf));
        OXI_PF(reinterpret_cast<const char*>(p + pf + 64));
        const __m512i s = _mm512_dpbusd_epi32(corr, W::load2(p), xv);
        acc[i] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(s), _mm512_permutexvar_ps(spread[k], P[i]), acc[i]);
      }
    }
  }
  for (; b < nb; b += 2) {
    const bool two = b + 2 <= nb;
    const uint8_t* q = xp + (b / 2) * 128;
    const __m512i xv = _mm512_loadu_si512(q);
    const __m512i corr = _mm512_loadu_si512(q + 64);
    for (int i = 0; i < R; ++i) {
      const uint8_t* p = w[i] + b * W::kBytes;
      const __m512i wv = two ? W::load2(p) : W::load1(p);
      const __m512 sc = pair_scale(block_scale<W>(p, h2f) * dx[b], two ? block_scale<W>(p + W::kBytes, h2f) * dx[b + 1] : 0.0f);
      acc[i] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(_mm512_dpbusd_epi32(corr, wv, xv)), sc, acc[i]);
      if constexpr (W::kMin) {
        mtail[i] += h2f(p + 2) * sx[b];
        if (two) mtail[i] += h2f(p + W::kBytes + 2) * sx[b + 1];
      }
    }
  }
  for (int i = 0; i < R; ++i) {
    float y = _mm512_reduce_add_ps(acc[i]);
    if constexpr (W::kMin) y += _mm512_reduce_add_ps(_mm512_castps256_ps512(M[i])) + mtail[i];
    a.y[a.t0 * a.ldy + r + i * rs] = y;
  }
}

// A thread's prepared GEMV activation (one per weight format, in its own thread-scratch slot):
// valid for the other work units of the same matmul call (MMArgs::x_id; GEMV calls have one
// token tile, t0 = 0) while the slot still holds the same buffer.
struct ActCache {
  uint64_t id = 0;
  const uint8_t* buf = nullptr;
  int key = 0;  // what was prepared (mm_q8_gemv: the weight type's offset and activation format)
  bool holds(const MMArgs& a, const uint8_t* b, int k = 0) const {
    return a.x_id != 0 && a.t0 == 0 && a.x_id == id && b == buf && k == key;
  }
  void set(const MMArgs& a, const uint8_t* b, int k = 0) {
    id = a.t0 == 0 ? a.x_id : 0;
    buf = b;
    key = k;
  }
};
thread_local ActCache t_q8_act;

template <class W>
void mm_q8_gemv(const MMArgs& a) {
  const int64_t nb = a.cols / 32, npairs = (nb + 1) / 2;
  constexpr int kXB = kXBlk<W>, kXQ = kXQs<W>;
  // Per token: npairs × {x 64 bytes, −k·Σx 16 int32}, then nb + 8 f32 scales (and for Q8_1 nb + 8
  // s values). Made once per call and thread (x_id; thread scratch slot 4), not once per work
  // unit; the key tells the Q8_0-based types' offsets and Q8_1 apart within one batch.
  const uint64_t xps = static_cast<uint64_t>(npairs) * 128 + static_cast<uint64_t>(nb + 8) * sizeof(float) * (W::kMin ? 2 : 1);
  uint8_t* buf = static_cast<uint8_t*>(thread_scratch(4, static_cast<size_t>(xps * (a.t1 - a.t0))));
  constexpr int kKey = W::kOffset + (W::kMin ? 1024 : 0);
  if (!t_q8_act.holds(a, buf, kKey)) {
    const __m512i koff = _mm512_set1_epi8(static_cast<char>(W::kOffset));
    for (int64_t t = a.t0; t < a.t1; ++t) {
      const uint8_t* x = a.x + t * a.x_stride;
      uint8_t* xbuf = buf + (t - a.t0) * xps;
      float* dxbuf = reinterpret_cast<float*>(xbuf + npairs * 128);
      for (int64_t b = 0; b < nb; b += 2) {
        const uint8_t* q = x + b * kXB;
        const __m512i xv = b + 2 <= nb ? load2x256(q + kXQ, q + kXB + kXQ) : load1x256(q + kXQ);
        _mm512_storeu_si512(xbuf + b * 64, xv);
        _mm512_storeu_si512(xbuf + b * 64 + 64, _mm512_sub_epi32(_mm512_setzero_si512(),
                                                                _mm512_dpbusd_epi32(_mm512_setzero_si512(), koff, xv)));
      }
      for (int64_t b = 0; b < nb; ++b) dxbuf[b] = h2f(x + b * kXB);
      if constexpr (W::kMin)
        for (int64_t b = 0; b < nb; ++b) dxbuf[nb + 8 + b] = h2f(x + b * kXB + 2);
    }
    t_q8_act.set(a, buf, kKey);
  }
  for (int64_t t = a.t0; t < a.t1; ++t) {
    const uint8_t* xbuf = buf + (t - a.t0) * xps;
    const float* dxbuf = reinterpret_cast<const float*>(xbuf + npairs * 128);
    MMArgs at = a;
    at.t0 = t;
    gemv_stream_rows<4>(at, [&](auto rn, int64_t r, int64_t rs, uint64_t pf) {
      gemv_q8_rows<W, decltype(rn)::value>(at, r, rs, pf, xbuf, dxbuf, nb);
    });
  }
}

// ---- GEMV (1–3 tokens) with VBMI/GFNI unpacking --------------------------------------------
// vgf2p8affineqb applies an 8×8 bit matrix to every byte (one matrix per 64-bit lane; output bit i
// is the parity of x & matrix byte 7−i): nibble extraction without a shift + mask pair.
constexpr long long kGfLo = 0x0102040800000000ll;  // x & 0x0F
constexpr long long kGfHi = 0x1020408000000000ll;  // x >> 4

inline __m512i gf_bits(__m512i x, __m512i m) { return _mm512_gf2p8affine_epi64_epi8(x, m, 0); }

// Q4_0 GEMV: 4 blocks (72 bytes) per step. Two overlapping 64-byte loads + one vpermt2b gather the
// four blocks' 16-byte nibble arrays into one vector (low nibbles: elements 0..15 of each block,
// high: 16..31); the activation is rearranged to match once per call and thread (x_id):
// per 4-block group {i8 xlo[64], i8 xhi[64], i32 corr[16] = −8·Σx per lane, f32 dx per lane}.
constexpr int kQ4G = 256;

alignas(64) constexpr uint8_t kQ4Perm[64] = {
#define OXI_Q4B(k, i) static_cast<uint8_t>((k) < 3 ? 18 * (k) + 2 + (i) : 64 + 48 + (i))
#define OXI_Q4R(k)                                                                                        \
  OXI_Q4B(k, 0), OXI_Q4B(k, 1), OXI_Q4B(k, 2), OXI_Q4B(k, 3), OXI_Q4B(k, 4), OXI_Q4B(k, 5), OXI_Q4B(k, 6), \
      OXI_Q4B(k, 7), OXI_Q4B(k, 8), OXI_Q4B(k, 9), OXI_Q4B(k, 10), OXI_Q4B(k, 11), OXI_Q4B(k, 12),         \
      OXI_Q4B(k, 13), OXI_Q4B(k, 14), OXI_Q4B(k, 15)
    OXI_Q4R(0), OXI_Q4R(1), OXI_Q4R(2), OXI_Q4R(3)
#undef OXI_Q4R
#undef OXI_Q4B
};

// x: one token's Q8_0 row (nb blocks); out: ceil(nb/4) groups (missing blocks of the last: zero).
inline void prep_q4_0_act(const uint8_t* x, int64_t nb, uint8_t* out) {
  const __m512i k8 = _mm512_set1_epi8(8);
  for (int64_t b = 0; b < nb; b += 4, out += kQ4G) {
    float* dxl = reinterpret_cast<float*>(out + 192);
    for (int k = 0; k < 4; ++k) {
      __m128i lo = _mm_setzero_si128(), hi = lo;
      float d = 0.0f;
      if (b + k < nb) {
        const uint8_t* q = x + (b + k) * 34;
        lo = _mm_loadu_si128(reinterpret_cast<const __m128i*>(q + 2));
        hi = _mm_loadu_si128(reinterpret_cast<const __m128i*>(q + 18));
        d = h2f(q);
      }
      _mm_storeu_si128(reinterpret_cast<__m128i*>(out + 16 * k), lo);
      _mm_storeu_si128(reinterpret_cast<__m128i*>(out + 64 + 16 * k), hi);
      for (int j = 0; j < 4; ++j) dxl[4 * k + j] = d;
    }
    const __m512i s = _mm512_dpbusd_epi32(_mm512_dpbusd_epi32(_mm512_setzero_si512(), k8, _mm512_loadu_si512(out)), k8,
                                          _mm512_loadu_si512(out + 64));
    _mm512_storeu_si512(out + 128, _mm512_sub_epi32(_mm512_setzero_si512(), s));
  }
}

thread_local ActCache t_q4_act;

// The prepared activation of tokens t0..t1 of this call (per thread; reused by the thread's other
// work units of the same call: GEMV calls have one token tile, t0 = 0).
inline const uint8_t* q4_0_act(const MMArgs& a, int64_t nb, uint64_t xps) {
  uint8_t* buf = static_cast<uint8_t*>(thread_scratch(2, static_cast<size_t>(xps * (a.t1 - a.t0))));
  if (t_q4_act.holds(a, buf)) return buf;
  for (int64_t t = a.t0; t < a.t1; ++t) prep_q4_0_act(a.x + t * a.x_stride, nb, buf + (t - a.t0) * xps);
  t_q4_act.set(a, buf);
  return buf;
}

template <int R, int T, bool Tail>
inline void gemv_q4_0_group(const MMArgs& a, const uint8_t* const* w, int64_t g, const uint8_t* xg, uint64_t xps,
                            int64_t nb, uint64_t pf, __m512 (&acc)[R][T]) {
  const __m512i perm = _mm512_load_si512(kQ4Perm);
  const __m512i sidx = _mm512_set_epi16(0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 27, 27, 27, 27, 18, 18, 18, 18, 9,
                                        9, 9, 9, 0, 0, 0, 0);
  const __m512i m4 = _mm512_set1_epi8(0x0F), ghi = _mm512_set1_epi64(kGfHi);
  __m512i xlo[T], xhi[T], corr[T];
  __m512 dxl[T];
  for (int j = 0; j < T; ++j) {
    const uint8_t* q = xg + j * xps;
    xlo[j] = _mm512_loadu_si512(q);
    xhi[j] = _mm512_loadu_si512(q + 64);
    corr[j] = _mm512_loadu_si512(q + 128);
    dxl[j] = _mm512_loadu_ps(q + 192);
  }
  for (int i = 0; i < R; ++i) {
    const uint8_t* p = w[i] + g * 72;
    __m512i v0, v1;
    if constexpr (!Tail) {
      OXI_PF(reinterpret_cast<const char*>(p + pf));
      OXI_PF(reinterpret_cast<const char*>(p + pf + 64));
      v0 = _mm512_loadu_si512(p);
      v1 = _mm512_loadu_si512(p + 8);
    } else {  // 1–3 blocks left (≤ 54 bytes, all in v0): a masked load, no read past the row
      v0 = _mm512_maskz_loadu_epi8((1ull << ((nb - g * 4) * 18)) - 1, p);
      v1 = _mm512_setzero_si512();
    }
    const __m512i q = _mm512_permutex2var_epi8(v0, perm, v1);
    const __m512i lo = _mm512_and_si512(q, m4), hi = gf_bits(q, ghi);
    const __m512 dw = _mm512_cvtph_ps(_mm512_castsi512_si256(_mm512_permutexvar_epi16(sidx, v0)));
    for (int j = 0; j < T; ++j) {
      const __m512i s = _mm512_dpbusd_epi32(_mm512_dpbusd_epi32(corr[j], lo, xlo[j]), hi, xhi[j]);
      acc[i][j] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(s), _mm512_mul_ps(dw, dxl[j]), acc[i][j]);
    }
  }
}

template <int R, int T>
inline void gemv_q4_0_tile(const MMArgs& a, int64_t r, int64_t rs, int64_t t, const uint8_t* xp, uint64_t xps,
                           int64_t nb, uint64_t pf) {
  __m512 acc[R][T];
  OXI_ZERO_ACC(acc);
  const uint8_t* w[R];
  for (int i = 0; i < R; ++i) w[i] = a.w + (r + i * rs) * a.w_stride;
  const uint8_t* xt = xp + (t - a.t0) * xps;
  const int64_t full = nb / 4;
  for (int64_t g = 0; g < full; ++g) gemv_q4_0_group<R, T, false>(a, w, g, xt + g * kQ4G, xps, nb, pf, acc);
  if (full * 4 < nb) gemv_q4_0_group<R, T, true>(a, w, full, xt + full * kQ4G, xps, nb, pf, acc);
  store<R, T>(a, r, t, acc, rs);
}

template <int T>
inline void gemv_q4_0_rows(const MMArgs& a, const uint8_t* xp, uint64_t xps, int64_t nb, int64_t t) {
  gemv_stream_rows<T == 1 ? 4 : 2>(a, [&](auto rn, int64_t r, int64_t rs, uint64_t pf) {
    gemv_q4_0_tile<decltype(rn)::value, T>(a, r, rs, t, xp, xps, nb, pf);
  });
}

}  // namespace

const uint8_t* prepared_q4_0_act(const MMArgs& a, int64_t nb) {
  static_assert(kQ4G == 256, "pack.h: prepared_q4_0_stride");
  return q4_0_act(a, nb, prepared_q4_0_stride(nb));
}

namespace {

void mm_q4_0_gemv(const MMArgs& a) {
  const int64_t nb = a.cols / 32;
  const uint64_t xps = static_cast<uint64_t>((nb + 3) / 4) * kQ4G;
  const uint8_t* xp = q4_0_act(a, nb, xps);
  switch (a.t1 - a.t0) {
    case 1: return gemv_q4_0_rows<1>(a, xp, xps, nb, a.t0);
    case 2: return gemv_q4_0_rows<2>(a, xp, xps, nb, a.t0);
    default: return gemv_q4_0_rows<3>(a, xp, xps, nb, a.t0);
  }
}

// GEMM path for Q8_0 / Q4_0 (4+ tokens): both operands are first unpacked into a SIMD-ready
// layout (weights per 4-row group, activations per token tile) so the inner loop is loads plus
// vpdpbusd/cvt/mul/fma; the unpacking is amortised over the other operand's tile.
// Per 64-element block pair: weights {u8 q[64], f32 scale[16]}, activations
// {i8 x[64], i32 corr[16], f32 scale[16]}.
// kMin types (Q4_1/Q5_1 × Q8_1) add {f32 m_w[16]} to the weights and {f32 s_x/8 [16]} to the
// activations: Σ over a block's 8 lanes of m_w·s_x/8 is m_w·s_x (exact scaling by 1/8).
template <class W> constexpr int kWPair = W::kMin ? 192 : 128;
template <class W> constexpr int kXPair = W::kMin ? 256 : 192;

template <class W>
inline void prep_w_row(const uint8_t* row, int64_t nb, uint8_t* out) {
  int64_t b = 0;
  for (; b + 2 <= nb; b += 2, out += kWPair<W>) {
    const uint8_t* p = row + b * W::kBytes;
    _mm512_storeu_si512(out, W::load2(p));
    _mm512_storeu_ps(out + 64, pair_scale(block_scale<W>(p, h2f), block_scale<W>(p + W::kBytes, h2f)));
    if constexpr (W::kMin) _mm512_storeu_ps(out + 128, pair_scale(h2f(p + 2), h2f(p + W::kBytes + 2)));
  }
  if (b < nb) {
    const uint8_t* p = row + b * W::kBytes;
    _mm512_storeu_si512(out, W::load1(p));
    _mm512_storeu_ps(out + 64, pair_scale(block_scale<W>(p, h2f), 0.0f));
    if constexpr (W::kMin) _mm512_storeu_ps(out + 128, pair_scale(h2f(p + 2), 0.0f));
  }
}

template <class W>
inline void prep_x_row(const uint8_t* row, int64_t nb, uint8_t* out) {
  constexpr int kXB = kXBlk<W>, kXQ = kXQs<W>;
  const __m512i koff = _mm512_set1_epi8(static_cast<char>(W::kOffset));
  int64_t b = 0;
  for (; b < nb; b += 2, out += kXPair<W>) {
    const uint8_t* q = row + b * kXB;
    const bool two = b + 2 <= nb;
    const __m512i xv = two ? load2x256(q + kXQ, q + kXB + kXQ) : load1x256(q + kXQ);
    _mm512_storeu_si512(out, xv);
    _mm512_storeu_si512(out + 64, _mm512_sub_epi32(_mm512_setzero_si512(),
                                                  _mm512_dpbusd_epi32(_mm512_setzero_si512(), koff, xv)));
    _mm512_storeu_ps(out + 128, pair_scale(h2f(q), two ? h2f(q + kXB) : 0.0f));
    if constexpr (W::kMin)
      _mm512_storeu_ps(out + 192, pair_scale(h2f(q + 2) * 0.125f, two ? h2f(q + kXB + 2) * 0.125f : 0.0f));
  }
}

template <class W, int R, int T>
inline void gemm_q8_packed(const uint8_t* wp, uint64_t wp_stride, const uint8_t* xp, uint64_t xp_stride,
                           int64_t npairs, __m512 (&acc)[R][T]) {
  for (int64_t bp = 0; bp < npairs; ++bp) {
    __m512i wv[R];
    __m512 sw[R], mw[R];
    for (int i = 0; i < R; ++i) {
      wv[i] = _mm512_loadu_si512(wp + i * wp_stride + bp * kWPair<W>);
      sw[i] = _mm512_loadu_ps(wp + i * wp_stride + bp * kWPair<W> + 64);
      if constexpr (W::kMin) mw[i] = _mm512_loadu_ps(wp + i * wp_stride + bp * kWPair<W> + 128);
    }
    for (int j = 0; j < T; ++j) {
      const uint8_t* q = xp + j * xp_stride + bp * kXPair<W>;
      const __m512i xv = _mm512_loadu_si512(q);
      const __m512i corr = _mm512_loadu_si512(q + 64);
      const __m512 sx = _mm512_loadu_ps(q + 128);
      for (int i = 0; i < R; ++i) {
        const __m512i s = _mm512_dpbusd_epi32(corr, wv[i], xv);
        acc[i][j] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(s), _mm512_mul_ps(sw[i], sx), acc[i][j]);
        if constexpr (W::kMin) acc[i][j] = _mm512_fmadd_ps(mw[i], _mm512_loadu_ps(q + 192), acc[i][j]);
      }
    }
  }
}

template <class W, int R, int T>
inline void gemm_q8_tile(const MMArgs& a, const uint8_t* wp, uint64_t wps, const uint8_t* xp, uint64_t xps,
                         int64_t npairs, int64_t r, int64_t t) {
  __m512 acc[R][T];
  OXI_ZERO_ACC(acc);
  gemm_q8_packed<W, R, T>(wp, wps, xp, xps, npairs, acc);
  store<R, T>(a, r, t, acc);
}

template <class W, int R, int T>
void mm_q8_gemm(const MMArgs& a) {
  const int64_t nb = a.cols / 32, npairs = (nb + 1) / 2;
  const int64_t ntok = a.t1 - a.t0;
  const uint64_t xps = static_cast<uint64_t>(npairs) * kXPair<W>, wps = static_cast<uint64_t>(npairs) * kWPair<W>;
  uint8_t* xbuf = static_cast<uint8_t*>(thread_scratch(0, xps * ntok));
  uint8_t* wbuf = static_cast<uint8_t*>(thread_scratch(1, wps * R));
  for (int64_t j = 0; j < ntok; ++j) prep_x_row<W>(a.x + (a.t0 + j) * a.x_stride, nb, xbuf + j * xps);
  int64_t r = a.r0;
  for (; r < a.r1; r += R) {
    const int64_t nr = std::min<int64_t>(R, a.r1 - r);
    for (int64_t i = 0; i < nr; ++i) prep_w_row<W>(a.w + (r + i) * a.w_stride, nb, wbuf + i * wps);
    int64_t t = 0;
    if (nr == R) {
      for (; t + T <= ntok; t += T) gemm_q8_tile<W, R, T>(a, wbuf, wps, xbuf + t * xps, xps, npairs, r, a.t0 + t);
      for (; t < ntok; ++t) gemm_q8_tile<W, R, 1>(a, wbuf, wps, xbuf + t * xps, xps, npairs, r, a.t0 + t);
    } else {
      for (int64_t i = 0; i < nr; ++i) {
        int64_t tt = 0;
        for (; tt + T <= ntok; tt += T)
          gemm_q8_tile<W, 1, T>(a, wbuf + i * wps, wps, xbuf + tt * xps, xps, npairs, r + i, a.t0 + tt);
        for (; tt < ntok; ++tt)
          gemm_q8_tile<W, 1, 1>(a, wbuf + i * wps, wps, xbuf + tt * xps, xps, npairs, r + i, a.t0 + tt);
      }
    }
  }
}

// ---- K-quants × Q8_K -------------------------------------------------------------------------
// 6-bit scales/mins of a Q4_K/Q5_K block as 8 bytes each, built in general registers (writing
// them to memory in 4-byte pieces and reading 8 back stalls on store forwarding, ~10 cycles a
// block on Zen 5).
inline void k4_scales(const uint8_t* s, uint64_t& sc, uint64_t& mn) {
  uint32_t a, b, c;
  std::memcpy(&a, s, 4);
  std::memcpy(&b, s + 4, 4);
  std::memcpy(&c, s + 8, 4);
  const uint32_t sc_lo = a & 0x3F3F3F3Fu, m_lo = b & 0x3F3F3F3Fu;
  const uint32_t sc_hi = (c & 0x0F0F0F0Fu) | ((a >> 2) & 0x30303030u);
  const uint32_t m_hi = ((c >> 4) & 0x0F0F0F0Fu) | ((b >> 2) & 0x30303030u);
  sc = sc_lo | (static_cast<uint64_t>(sc_hi) << 32);
  mn = m_lo | (static_cast<uint64_t>(m_hi) << 32);
}

// Index vectors: int16 lanes [2k ×16 | 2k+1 ×16] (Q4_K/Q5_K: 32-element sub-blocks) and
// [4c ×8 | 4c+1 ×8 | 4c+2 ×8 | 4c+3 ×8] (Q6_K: 16-element sub-blocks).
inline __m512i idx_pairs(int k) {
  return _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_set1_epi16(static_cast<short>(2 * k))),
                            _mm256_set1_epi16(static_cast<short>(2 * k + 1)), 1);
}
inline __m512i idx_quads(int c) {
  const __m128i q0 = _mm_set1_epi16(static_cast<short>(4 * c)), q1 = _mm_set1_epi16(static_cast<short>(4 * c + 1));
  const __m128i q2 = _mm_set1_epi16(static_cast<short>(4 * c + 2)), q3 = _mm_set1_epi16(static_cast<short>(4 * c + 3));
  __m512i z = _mm512_castsi128_si512(q0);
  z = _mm512_inserti32x4(z, q1, 1);
  z = _mm512_inserti32x4(z, q2, 2);
  return _mm512_inserti32x4(z, q3, 3);
}

// Per weight row and super-block: unpacked quants (4 × 64 unsigned bytes), int16 scale vectors
// per 64-element chunk, and the min/offset correction inputs.
struct KRow {
  __m512i q[4];
  __m512i sc[4];
  __m256i mins16;  // Q4_K/Q5_K: per-16 mins (each m_j twice); Q2_K: its per-16 mins; Q6_K, Q3_K: per-16 scales
  __mmask64 neg[4];  // IQ4_XS: q holds |value|, neg its negative lanes
  float d, dmin;
};

// Q4_K/Q5_K: the 8 sub-block scales as int16 (returned) and the mins, each twice (o.mins16).
inline __m512i k4_scale_vectors(const uint8_t* scales, KRow& o) {
  uint64_t sc, mn;
  k4_scales(scales, sc, mn);
  const __m128i m8 = _mm_cvtsi64_si128(static_cast<long long>(mn));
  o.mins16 = _mm256_cvtepu8_epi16(_mm_unpacklo_epi8(m8, m8));
  return _mm512_castsi256_si512(_mm256_cvtepu8_epi16(_mm_cvtsi64_si128(static_cast<long long>(sc))));
}

// Q5_K: nibbles as Q4_K; the fifth bit of element 64k + l is bit 2k of qh[l] (l < 32) and of
// element 64k + 32 + l bit 2k + 1: one bit matrix per 64 elements moves it to bit 4 ([qh | qh]).
inline void unpack_q5k(const BlockQ5_K& b, KRow& o, const __m512i* idx) {
  const __m512i sc16 = k4_scale_vectors(b.scales, o);
  const __m512i nib = _mm512_set_epi64(kGfHi, kGfHi, kGfHi, kGfHi, kGfLo, kGfLo, kGfLo, kGfLo);
  const __m512i H = _mm512_broadcast_i64x4(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(b.qh)));
  for (int k = 0; k < 4; ++k) {
    const long long lo = (1ll << (2 * k)) << 24, hi = (1ll << (2 * k + 1)) << 24;  // output bit 4 <- row byte 3
    const __m512i hm = _mm512_set_epi64(hi, hi, hi, hi, lo, lo, lo, lo);
    const __m512i v = _mm512_broadcast_i64x4(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(b.qs + 32 * k)));
    o.q[k] = _mm512_or_si512(gf_bits(v, nib), gf_bits(H, hm));
    o.sc[k] = _mm512_permutexvar_epi16(idx[k], sc16);
  }
  o.d = _cvtsh_ss(b.d);
  o.dmin = _cvtsh_ss(b.dmin);
}

// One weight row's super-block against one token: s = Σ_k maddubs(q_k, x_k) · sc_k (int32 lanes),
// then acc += d_w·d_x·s − (Q4_K/Q5_K) d_min·d_x·Σ m_j·bsum_j, or (Q6_K) the offset 32 removed as
// 32·Σ sc_j·bsum_j.
// Kind 0: Q4_K/Q5_K (mins), 1: Q6_K (offset 32), 2: Q3_K (offset 4), 3: IQ4_XS (|q| against x
// negated where q < 0: products ≤ 127·127, no correction), 4: Q2_K (mins, as 0, per-16 scales),
// 5: as 3 with per-16 scales (IQ2_XS/IQ2_S/IQ1_M).
template <int Kind>
inline void k_accum_one(const KRow& w, const __m512i (&xv)[4], __m256i bs, float xd, __m512& acc) {
  constexpr bool kSigned = Kind == 3 || Kind == 5;
  __m512i s = _mm512_setzero_si512();
  for (int k = 0; k < 4; ++k) {
    const __m512i x = kSigned ? _mm512_mask_sub_epi8(xv[k], w.neg[k], _mm512_setzero_si512(), xv[k]) : xv[k];
    s = _mm512_dpwssd_epi32(s, _mm512_maddubs_epi16(w.q[k], x), w.sc[k]);
  }
  if constexpr (Kind == 0 || Kind == 4) {
    const __m256i mb = _mm256_madd_epi16(w.mins16, bs);
    acc = _mm512_fmadd_ps(_mm512_cvtepi32_ps(s), _mm512_set1_ps(w.d * xd), acc);
    acc = _mm512_fnmadd_ps(_mm512_cvtepi32_ps(_mm512_zextsi256_si512(mb)), _mm512_set1_ps(w.dmin * xd), acc);
  } else {
    if constexpr (Kind == 1 || Kind == 2) {
      const __m256i mb = _mm256_madd_epi16(w.mins16, bs);
      s = _mm512_sub_epi32(s, _mm512_zextsi256_si512(_mm256_slli_epi32(mb, Kind == 1 ? 5 : 2)));
    }
    acc = _mm512_fmadd_ps(_mm512_cvtepi32_ps(s), _mm512_set1_ps(w.d * xd), acc);
  }
}

template <int Kind, int R, int T>
inline void k_accum(const KRow* const* rw, const uint8_t* x, uint64_t x_stride, int64_t b, __m512 (&acc)[R][T]) {
  for (int j = 0; j < T; ++j) {
    const BlockQ8_K& xb = reinterpret_cast<const BlockQ8_K*>(x + j * x_stride)[b];
    __m512i xv[4];
    for (int k = 0; k < 4; ++k) xv[k] = _mm512_loadu_si512(xb.qs + 64 * k);
    const __m256i bs = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xb.bsums));
    for (int i = 0; i < R; ++i) k_accum_one<Kind>(*rw[i], xv, bs, xb.d, acc[i][j]);
  }
}

// Q4_K: [v | v] from one broadcast load, low nibbles in lanes 0..31 and high nibbles in 32..63 by
// one per-qword bit matrix (GFNI).
inline void unpack_q4k(const BlockQ4_K& b, KRow& o, const __m512i* idx) {
  const __m512i sc16 = k4_scale_vectors(b.scales, o);
  const __m512i nib = _mm512_set_epi64(kGfHi, kGfHi, kGfHi, kGfHi, kGfLo, kGfLo, kGfLo, kGfLo);
  for (int k = 0; k < 4; ++k) {
    const __m512i v = _mm512_broadcast_i64x4(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(b.qs + 32 * k)));
    o.q[k] = gf_bits(v, nib);
    o.sc[k] = _mm512_permutexvar_epi16(idx[k], sc16);
  }
  o.d = _cvtsh_ss(b.d);
  o.dmin = _cvtsh_ss(b.dmin);
}

// Q6_K: per 128 elements, ql (64 bytes) gives elements 0..63 in its low nibbles and 64..127 in its
// high nibbles; qh (32 bytes, broadcast to both halves) holds their 2 high bits: bits 0-1 / 2-3
// for elements 0..31 / 32..63, bits 4-5 / 6-7 for 64..95 / 96..127. One bit matrix per half moves
// the right pair to bits 4-5; a ternary-logic op or an or merges them with the nibbles.
constexpr long long kGf6A0 = 0x0000000001020000ll;  // bits 0-1 -> 4-5
constexpr long long kGf6A1 = 0x0000000004080000ll;  // bits 2-3 -> 4-5
constexpr long long kGf6B0 = 0x0000000010200000ll;  // bits 4-5 -> 4-5
constexpr long long kGf6B1 = 0x0000000040800000ll;  // bits 6-7 -> 4-5

inline void unpack_q6k(const BlockQ6_K& b, KRow& o, const __m512i* idx) {
  const __m256i s16 = _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(b.scales)));
  o.mins16 = s16;
  const __m512i s512 = _mm512_castsi256_si512(s16);
  const __m512i m4 = _mm512_set1_epi8(0x0F), ghi = _mm512_set1_epi64(kGfHi);
  const __m512i ma = _mm512_set_epi64(kGf6A1, kGf6A1, kGf6A1, kGf6A1, kGf6A0, kGf6A0, kGf6A0, kGf6A0);
  const __m512i mb = _mm512_set_epi64(kGf6B1, kGf6B1, kGf6B1, kGf6B1, kGf6B0, kGf6B0, kGf6B0, kGf6B0);
  for (int h = 0; h < 2; ++h) {
    const __m512i L = _mm512_loadu_si512(b.ql + 64 * h);
    const __m512i H = _mm512_broadcast_i64x4(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(b.qh + 32 * h)));
    o.q[2 * h] = _mm512_ternarylogic_epi32(L, m4, gf_bits(H, ma), 0xEA);  // (L & 0x0F) | hi bits
    o.q[2 * h + 1] = _mm512_or_si512(gf_bits(L, ghi), gf_bits(H, mb));
  }
  for (int c = 0; c < 4; ++c) o.sc[c] = _mm512_permutexvar_epi16(idx[c], s512);
  o.d = _cvtsh_ss(b.d);
  o.dmin = 0.0f;
}

// Q3_K: chunk k (64 elements) = half h = k/2, 2-bit fields g0 = 2(k%2) (lanes 0..31) and g0 + 1
// (32..63). [qs | qs] (32 bytes of the half) and [hmask | hmask], one bit matrix each per 256-bit
// half: the field to bits 0-1 and hmask bit 4h + g to bit 2, so q = value + 4 (0..7; the offset
// comes off through bsums).
inline long long gf_from(int src, int dst) { return (1ll << src) << (8 * (7 - dst)); }  // out bit dst <- in bit src

inline void unpack_q3k(const BlockQ3_K& b, KRow& o, const __m512i* idx) {
  uint64_t lo, hi;
  q3k_scale_bytes(b.scales, lo, hi);
  const __m128i s8 = _mm_sub_epi8(_mm_set_epi64x(static_cast<long long>(hi), static_cast<long long>(lo)),
                                  _mm_set1_epi8(32));
  o.mins16 = _mm256_cvtepi8_epi16(s8);
  const __m512i s512 = _mm512_castsi256_si512(o.mins16);
  const __m512i H = _mm512_broadcast_i64x4(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(b.hmask)));
  for (int k = 0; k < 4; ++k) {
    const int h = k / 2, g0 = 2 * (k % 2);
    const long long q0 = gf_from(2 * g0, 0) | gf_from(2 * g0 + 1, 1), q1 = gf_from(2 * g0 + 2, 0) | gf_from(2 * g0 + 3, 1);
    const long long h0 = gf_from(4 * h + g0, 2), h1 = gf_from(4 * h + g0 + 1, 2);
    const __m512i Q = _mm512_broadcast_i64x4(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(b.qs + 32 * h)));
    o.q[k] = _mm512_or_si512(gf_bits(Q, _mm512_set_epi64(q1, q1, q1, q1, q0, q0, q0, q0)),
                             gf_bits(H, _mm512_set_epi64(h1, h1, h1, h1, h0, h0, h0, h0)));
    o.sc[k] = _mm512_permutexvar_epi16(idx[k], s512);
  }
  o.d = _cvtsh_ss(b.d);
  o.dmin = 0.0f;
}

// IQ4_XS: chunk k = sub-blocks 2k, 2k+1 (qs bytes 32k..32k+31). vpermb spreads the 32 bytes to
// [0..15, 0..15, 16..31, 16..31] and one bit matrix per qword takes low / high nibbles, which is
// element order; the grid lookup (vpshufb) gives |value|, and nibbles < 8 are the negative ones.
constexpr int8_t kIQ4Abs[16] = {127, 104, 83, 65, 49, 35, 22, 10, 1, 13, 25, 38, 53, 69, 89, 113};

inline void unpack_iq4xs(const BlockIQ4_XS& b, KRow& o, const __m512i* idx) {
  const __m512i sc16 = _mm512_castsi256_si512(_mm256_cvtepi8_epi16(
      _mm_sub_epi8(_mm_cvtsi64_si128(static_cast<long long>(iq4xs_scale_bytes(b))), _mm_set1_epi8(32))));
  const __m512i spread = _mm512_set_epi64(0x1f1e1d1c1b1a1918ll, 0x1716151413121110ll, 0x1f1e1d1c1b1a1918ll,
                                          0x1716151413121110ll, 0x0f0e0d0c0b0a0908ll, 0x0706050403020100ll,
                                          0x0f0e0d0c0b0a0908ll, 0x0706050403020100ll);
  const __m512i nibm = _mm512_set_epi64(kGfHi, kGfHi, kGfLo, kGfLo, kGfHi, kGfHi, kGfLo, kGfLo);
  const __m512i grid = _mm512_broadcast_i32x4(_mm_loadu_si128(reinterpret_cast<const __m128i*>(kIQ4Abs)));
  const __m512i eight = _mm512_set1_epi8(8);
  for (int k = 0; k < 4; ++k) {
    const __m512i v = _mm512_castsi256_si512(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(b.qs + 32 * k)));
    const __m512i nib = gf_bits(_mm512_permutexvar_epi8(spread, v), nibm);
    o.q[k] = _mm512_shuffle_epi8(grid, nib);
    o.neg[k] = _mm512_testn_epi8_mask(nib, eight);
    o.sc[k] = _mm512_permutexvar_epi16(idx[k], sc16);
  }
  o.d = _cvtsh_ss(b.d);
  o.dmin = 0.0f;
}

// Q2_K: chunks as Q3_K's (one bit matrix per 256-bit half moves 2-bit field g0 / g0 + 1 to bits
// 0-1), no high bit; scales and mins are the low / high nibbles of the 16 scale bytes.
inline void unpack_q2k(const BlockQ2_K& b, KRow& o, const __m512i* idx) {
  const __m128i s8 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(b.scales)), m4 = _mm_set1_epi8(0x0F);
  o.mins16 = _mm256_cvtepu8_epi16(_mm_and_si128(_mm_srli_epi16(s8, 4), m4));
  const __m512i s512 = _mm512_castsi256_si512(_mm256_cvtepu8_epi16(_mm_and_si128(s8, m4)));
  for (int k = 0; k < 4; ++k) {
    const int h = k / 2, g0 = 2 * (k % 2);
    const long long q0 = gf_from(2 * g0, 0) | gf_from(2 * g0 + 1, 1), q1 = gf_from(2 * g0 + 2, 0) | gf_from(2 * g0 + 3, 1);
    const __m512i Q = _mm512_broadcast_i64x4(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(b.qs + 32 * h)));
    o.q[k] = gf_bits(Q, _mm512_set_epi64(q1, q1, q1, q1, q0, q0, q0, q0));
    o.sc[k] = _mm512_permutexvar_epi16(idx[k], s512);
  }
  o.d = _cvtsh_ss(b.d);
  o.dmin = _cvtsh_ss(b.dmin);
}

// IQ3_S: chunk k = sub-blocks 2k, 2k+1: 16 grid indices (qs bytes, ninth bits from qh[2k] and
// qh[2k+1] as one 16-bit mask), one gather of their 4-byte entries gives |value| in element
// order, and the 8 sign bytes are the negative lanes (Kind 3). Scales 1 + 2s per 32 elements.
inline void unpack_iq3s(const BlockIQ3_S& b, KRow& o, const __m512i* idx) {
  uint64_t sc = 0;
  for (int ib = 0; ib < 8; ++ib) sc |= static_cast<uint64_t>(1 + 2 * ((b.scales[ib / 2] >> (4 * (ib % 2))) & 15)) << (8 * ib);
  const __m512i sc16 = _mm512_castsi256_si512(_mm256_cvtepu8_epi16(_mm_cvtsi64_si128(static_cast<long long>(sc))));
  const __m512i nine = _mm512_set1_epi32(256);
  for (int k = 0; k < 4; ++k) {
    __m512i ix = _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(b.qs + 16 * k)));
    ix = _mm512_mask_or_epi32(ix, static_cast<__mmask16>(b.qh[2 * k] | (b.qh[2 * k + 1] << 8)), ix, nine);
    o.q[k] = _mm512_i32gather_epi32(ix, kIQ3SGrid, 4);
    uint64_t sg;
    std::memcpy(&sg, b.signs + 8 * k, 8);
    o.neg[k] = sg;
    o.sc[k] = _mm512_permutexvar_epi16(idx[k], sc16);
  }
  o.d = _cvtsh_ss(b.d);
  o.dmin = 0.0f;
}

// IQ3_XXS: as IQ3_S with 8-bit indices; signs and scales from each sub-block's u32 (the sign
// bytes built in general registers). Its (2s + 1)/4 scale: 2s + 1 here, the 1/4 folded into d
// (a power of two: exact).
inline void unpack_iq3xxs(const BlockIQ3_XXS& b, KRow& o, const __m512i* idx) {
  uint64_t sc = 0;
  uint8_t sg[32];
  for (int ib = 0; ib < 8; ++ib) {
    uint32_t aux;
    std::memcpy(&aux, b.qs + 64 + 4 * ib, 4);
    sc |= static_cast<uint64_t>(2 * (aux >> 28) + 1) << (8 * ib);
    iq3xxs_signs(aux, sg + 4 * ib);
  }
  const __m512i sc16 = _mm512_castsi256_si512(_mm256_cvtepu8_epi16(_mm_cvtsi64_si128(static_cast<long long>(sc))));
  for (int k = 0; k < 4; ++k) {
    const __m512i ix = _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(b.qs + 16 * k)));
    o.q[k] = _mm512_i32gather_epi32(ix, kIQ3XXSGrid, 4);
    uint64_t m;
    std::memcpy(&m, sg + 8 * k, 8);
    o.neg[k] = m;
    o.sc[k] = _mm512_permutexvar_epi16(idx[k], sc16);
  }
  o.d = _cvtsh_ss(b.d) * 0.25f;
  o.dmin = 0.0f;
}

// The IQ2 / IQ1 types: chunk k = sub-blocks 2k, 2k+1 = 8 groups of 8, one 64-bit grid entry
// each: one vpgatherqq of the 8 entries gives the chunk's bytes in element order. IQ2: |value|
// with the sign bytes as negative lanes; IQ1: 8·g ± 1 (the delta's 1/8 folded into d, exact),
// split into |v| and its sign. Scales 2s + 1 as int16 per 32 (IQ2_XXS, IQ1_S) or per 16 elements
// (IQ2_XS, IQ2_S, IQ1_M: Kind 5).
inline __m512i sc16_from_bytes(uint64_t lo) {  // 8 scale bytes -> int16 lanes 0..7
  return _mm512_castsi256_si512(_mm256_cvtepu8_epi16(_mm_cvtsi64_si128(static_cast<long long>(lo))));
}
inline __m512i sc16_from_bytes16(const uint8_t* s) {  // 16 scale bytes -> int16 lanes 0..15
  return _mm512_castsi256_si512(_mm256_cvtepu8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(s))));
}
// Per-16 scales 2s + 1 of the IQ2_XS / IQ2_S nibble pairs (scales[ib]: low, then high nibble).
inline __m512i iq2_scales16(const uint8_t* scales) {
  const __m128i v = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(scales)), m4 = _mm_set1_epi8(0x0F);
  const __m128i n = _mm_unpacklo_epi8(_mm_and_si128(v, m4), _mm_and_si128(_mm_srli_epi16(v, 4), m4));
  return _mm512_castsi256_si512(_mm256_cvtepu8_epi16(_mm_add_epi8(_mm_add_epi8(n, n), _mm_set1_epi8(1))));
}
inline __m512i gather_grid8(__m256i ix, const uint64_t* grid) {
  return _mm512_i32gather_epi64(ix, reinterpret_cast<const long long*>(grid), 8);
}

inline void unpack_iq2xxs(const BlockIQ2_XXS& b, KRow& o, const __m512i* idx) {
  uint64_t sc = 0;
  for (int ib = 0; ib < 8; ++ib) sc |= static_cast<uint64_t>(2 * (b.qs[8 * ib + 7] >> 4) + 1) << (8 * ib);
  const __m512i sc16 = sc16_from_bytes(sc);
  for (int k = 0; k < 4; ++k) {
    uint32_t i0, i1, a0, a1;
    std::memcpy(&i0, b.qs + 16 * k, 4);
    std::memcpy(&a0, b.qs + 16 * k + 4, 4);
    std::memcpy(&i1, b.qs + 16 * k + 8, 4);
    std::memcpy(&a1, b.qs + 16 * k + 12, 4);
    const __m256i ix = _mm256_cvtepu8_epi32(_mm_set_epi32(0, 0, static_cast<int>(i1), static_cast<int>(i0)));
    o.q[k] = gather_grid8(ix, kIQ2XXSGrid);
    o.neg[k] = iq_sign_bytes4(a0) | (static_cast<uint64_t>(iq_sign_bytes4(a1)) << 32);
    o.sc[k] = _mm512_permutexvar_epi16(idx[k], sc16);
  }
  o.d = _cvtsh_ss(b.d) * 0.125f;
  o.dmin = 0.0f;
}

inline void unpack_iq2xs(const BlockIQ2_XS& b, KRow& o, const __m512i* idx) {
  const __m512i sc16 = iq2_scales16(b.scales);
  const __m128i m9 = _mm_set1_epi16(511);
  for (int k = 0; k < 4; ++k) {
    const __m128i q = _mm_loadu_si128(reinterpret_cast<const __m128i*>(b.qs + 8 * k));
    o.q[k] = gather_grid8(_mm256_cvtepu16_epi32(_mm_and_si128(q, m9)), kIQ2XSGrid);
    o.neg[k] = static_cast<uint64_t>(_mm_cvtsi128_si64(iq2xs_sign_bytes(q)));
    o.sc[k] = _mm512_permutexvar_epi16(idx[k], sc16);
  }
  o.d = _cvtsh_ss(b.d) * 0.125f;
  o.dmin = 0.0f;
}

inline void unpack_iq2s(const BlockIQ2_S& b, KRow& o, const __m512i* idx) {
  const __m512i sc16 = iq2_scales16(b.scales);
  const __m256i sh = _mm256_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14);
  for (int k = 0; k < 4; ++k) {
    // [qh[2k] | qh[2k+1] << 8]: group g's index bits 8-9 at bits 2g..2g+1
    const __m256i hv = _mm256_set1_epi32(b.qh[2 * k] | (b.qh[2 * k + 1] << 8));
    __m256i ix = _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(b.qs + 8 * k)));
    ix = _mm256_or_si256(ix, _mm256_slli_epi32(_mm256_and_si256(_mm256_srlv_epi32(hv, sh), _mm256_set1_epi32(3)), 8));
    o.q[k] = gather_grid8(ix, kIQ2SGrid);
    uint64_t m;
    std::memcpy(&m, b.signs + 8 * k, 8);
    o.neg[k] = m;
    o.sc[k] = _mm512_permutexvar_epi16(idx[k], sc16);
  }
  o.d = _cvtsh_ss(b.d) * 0.125f;
  o.dmin = 0.0f;
}

// IQ1: the gathered −1/0/1 bytes g → 8·g + delta (delta ±1 per qword, i.e. per group), as
// |v| and negative lanes.
inline void iq1_chunk(__m512i g, __m512i delta, KRow& o, int k) {
  const __m512i v = _mm512_add_epi8(_mm512_and_si512(_mm512_slli_epi16(g, 3), _mm512_set1_epi8(static_cast<char>(0xF8))), delta);
  o.neg[k] = _mm512_movepi8_mask(v);
  o.q[k] = _mm512_abs_epi8(v);
}

inline void unpack_iq1s(const BlockIQ1_S& b, KRow& o, const __m512i* idx) {
  uint64_t sc = 0;
  for (int ib = 0; ib < 8; ++ib) sc |= static_cast<uint64_t>(2 * ((b.qh[ib] >> 12) & 7) + 1) << (8 * ib);
  const __m512i sc16 = sc16_from_bytes(sc);
  const __m256i sh = _mm256_setr_epi32(0, 3, 6, 9, 0, 3, 6, 9);
  const __m512i one = _mm512_set1_epi8(1), mone = _mm512_set1_epi8(-1);
  for (int k = 0; k < 4; ++k) {
    const uint16_t h0 = b.qh[2 * k], h1 = b.qh[2 * k + 1];
    const __m256i hv = _mm256_setr_epi32(h0, h0, h0, h0, h1, h1, h1, h1);
    __m256i ix = _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(b.qs + 8 * k)));
    ix = _mm256_or_si256(ix, _mm256_slli_epi32(_mm256_and_si256(_mm256_srlv_epi32(hv, sh), _mm256_set1_epi32(7)), 8));
    const __mmask8 dn = static_cast<__mmask8>((h0 & 0x8000 ? 0x0F : 0) | (h1 & 0x8000 ? 0xF0 : 0));
    iq1_chunk(gather_grid8(ix, kIQ1SGrid), _mm512_mask_blend_epi64(dn, one, mone), o, k);
    o.sc[k] = _mm512_permutexvar_epi16(idx[k], sc16);
  }
  o.d = _cvtsh_ss(b.d) * 0.125f;
  o.dmin = 0.0f;
}

inline void unpack_iq1m(const BlockIQ1_M& b, KRow& o, const __m512i* idx) {
  uint16_t sc[4];
  std::memcpy(sc, b.scales, 8);
  uint8_t s16[16];
  for (int ib = 0; ib < 8; ++ib) {
    const int sh = 6 * (ib % 2);
    s16[2 * ib] = static_cast<uint8_t>(2 * ((sc[ib / 2] >> sh) & 7) + 1);
    s16[2 * ib + 1] = static_cast<uint8_t>(2 * ((sc[ib / 2] >> (sh + 3)) & 7) + 1);
  }
  const __m512i sc16 = sc16_from_bytes16(s16);
  const __m256i sh = _mm256_setr_epi32(0, 4, 8, 12, 16, 20, 24, 28);
  const __m512i one = _mm512_set1_epi8(1), mone = _mm512_set1_epi8(-1);
  for (int k = 0; k < 4; ++k) {
    uint32_t q;
    std::memcpy(&q, b.qh + 4 * k, 4);  // nibble g: group g of the chunk
    const __m256i nib = _mm256_and_si256(_mm256_srlv_epi32(_mm256_set1_epi32(static_cast<int>(q)), sh), _mm256_set1_epi32(15));
    __m256i ix = _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(b.qs + 8 * k)));
    ix = _mm256_or_si256(ix, _mm256_slli_epi32(_mm256_and_si256(nib, _mm256_set1_epi32(7)), 8));
    const __mmask8 dn = _mm256_test_epi32_mask(nib, _mm256_set1_epi32(8));
    iq1_chunk(gather_grid8(ix, kIQ1SGrid), _mm512_mask_blend_epi64(dn, one, mone), o, k);
    o.sc[k] = _mm512_permutexvar_epi16(idx[k], sc16);
  }
  o.d = _cvtsh_ss(iq1m_d_bits(b)) * 0.125f;
  o.dmin = 0.0f;
}

template <class B>
inline void k_unpack(const B& blk, KRow& o, const __m512i* idx) {
  if constexpr (std::is_same_v<B, BlockQ4_K>) unpack_q4k(blk, o, idx);
  else if constexpr (std::is_same_v<B, BlockQ5_K>) unpack_q5k(blk, o, idx);
  else if constexpr (std::is_same_v<B, BlockQ6_K>) unpack_q6k(blk, o, idx);
  else if constexpr (std::is_same_v<B, BlockQ3_K>) unpack_q3k(blk, o, idx);
  else if constexpr (std::is_same_v<B, BlockQ2_K>) unpack_q2k(blk, o, idx);
  else if constexpr (std::is_same_v<B, BlockIQ3_S>) unpack_iq3s(blk, o, idx);
  else if constexpr (std::is_same_v<B, BlockIQ3_XXS>) unpack_iq3xxs(blk, o, idx);
  else if constexpr (std::is_same_v<B, BlockIQ2_XXS>) unpack_iq2xxs(blk, o, idx);
  else if constexpr (std::is_same_v<B, BlockIQ2_XS>) unpack_iq2xs(blk, o, idx);
  else if constexpr (std::is_same_v<B, BlockIQ2_S>) unpack_iq2s(blk, o, idx);
  else if constexpr (std::is_same_v<B, BlockIQ1_S>) unpack_iq1s(blk, o, idx);
  else if constexpr (std::is_same_v<B, BlockIQ1_M>) unpack_iq1m(blk, o, idx);
  else unpack_iq4xs(blk, o, idx);
}

// Scale spreading per 64-element chunk: 32-element sub-blocks (Q4_K/Q5_K, IQ4_XS) or 16 (Q6_K, Q3_K, Q2_K).
template <int Kind>
inline void k_indices(__m512i* idx) {
  for (int k = 0; k < 4; ++k) idx[k] = Kind == 0 || Kind == 3 ? idx_pairs(k) : idx_quads(k);
}

template <class B, int Kind>  // Kind: see k_accum_one
struct TileK {
  template <int R, int T>
  struct Tile {
    static void run(const MMArgs& a, int64_t r, int64_t t, int64_t rs, uint64_t pf) {
      __m512 acc[R][T];
      OXI_ZERO_ACC(acc);
      __m512i idx[4];
      k_indices<Kind>(idx);
      const int64_t nb = a.cols / 256;
      const uint8_t* x = a.x + t * a.x_stride;
      // Per super-block: the tokens' activations stay in registers; each row is unpacked and
      // used at once (holding R unpacked rows, 9 vectors each, would spill to the stack).
      for (int64_t b = 0; b < nb; ++b) {
        __m512i xv[T][4];
        __m256i bs[T];
        float xd[T];
        for (int j = 0; j < T; ++j) {
          const BlockQ8_K& xb = reinterpret_cast<const BlockQ8_K*>(x + j * a.x_stride)[b];
          for (int k = 0; k < 4; ++k) xv[j][k] = _mm512_loadu_si512(xb.qs + 64 * k);
          bs[j] = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xb.bsums));
          xd[j] = xb.d;
        }
        for (int i = 0; i < R; ++i) {
          const B& blk = reinterpret_cast<const B*>(a.w + (r + i * rs) * a.w_stride)[b];
          for (unsigned off = 0; off < sizeof(B); off += 64) OXI_PF(reinterpret_cast<const char*>(&blk) + pf + off);
          KRow w;
          k_unpack(blk, w, idx);
          for (int j = 0; j < T; ++j) k_accum_one<Kind>(w, xv[j], bs[j], xd[j], acc[i][j]);
        }
      }
      store<R, T>(a, r, t, acc, rs);
    }
  };
};

// GEMM path for K-quants (4+ tokens): each R-row group is unpacked once per token tile.
template <class B, int Kind, int R, int T>
void mm_k_gemm(const MMArgs& a) {
  const int64_t nb = a.cols / 256, ntok = a.t1 - a.t0;
  KRow* buf = static_cast<KRow*>(thread_scratch(0, sizeof(KRow) * static_cast<size_t>(R * nb)));
  __m512i idx[4];
  k_indices<Kind>(idx);
  for (int64_t r = a.r0; r < a.r1; r += R) {
    const int64_t nr = std::min<int64_t>(R, a.r1 - r);
    for (int64_t i = 0; i < nr; ++i) {
      const B* row = reinterpret_cast<const B*>(a.w + (r + i) * a.w_stride);
      for (int64_t b = 0; b < nb; ++b) k_unpack(row[b], buf[i * nb + b], idx);
    }
    auto tile = [&](auto rn, auto tn, int64_t i0, int64_t t) {
      constexpr int RR = decltype(rn)::value, TT = decltype(tn)::value;
      __m512 acc[RR][TT];
      for (int i = 0; i < RR; ++i)
        for (int j = 0; j < TT; ++j) acc[i][j] = _mm512_setzero_ps();
      const uint8_t* x = a.x + t * a.x_stride;
      for (int64_t b = 0; b < nb; ++b) {
        const KRow* rp[RR];
        for (int i = 0; i < RR; ++i) rp[i] = &buf[(i0 + i) * nb + b];
        k_accum<Kind, RR, TT>(rp, x, a.x_stride, b, acc);
      }
      store<RR, TT>(a, r + i0, t, acc);
    };
    using RC = std::integral_constant<int, R>;
    using TC = std::integral_constant<int, T>;
    using One = std::integral_constant<int, 1>;
    if (nr == R) {
      int64_t t = a.t0;
      for (; t + T <= a.t1; t += T) tile(RC{}, TC{}, 0, t);
      for (; t < a.t1; ++t) tile(RC{}, One{}, 0, t);
    } else {
      for (int64_t i = 0; i < nr; ++i) {
        int64_t t = a.t0;
        for (; t + T <= a.t1; t += T) tile(One{}, TC{}, i, t);
        for (; t < a.t1; ++t) tile(One{}, One{}, i, t);
      }
    }
    (void)ntok;
  }
}

template <int R, int T> using TQ4_K = TileK<BlockQ4_K, 0>::Tile<R, T>;
template <int R, int T> using TQ5_K = TileK<BlockQ5_K, 0>::Tile<R, T>;
template <int R, int T> using TQ6_K = TileK<BlockQ6_K, 1>::Tile<R, T>;
template <int R, int T> using TQ3_K = TileK<BlockQ3_K, 2>::Tile<R, T>;
template <int R, int T> using TIQ4_XS = TileK<BlockIQ4_XS, 3>::Tile<R, T>;
template <int R, int T> using TQ2_K = TileK<BlockQ2_K, 4>::Tile<R, T>;
template <int R, int T> using TIQ3_S = TileK<BlockIQ3_S, 3>::Tile<R, T>;
template <int R, int T> using TIQ3_XXS = TileK<BlockIQ3_XXS, 3>::Tile<R, T>;
template <int R, int T> using TIQ2_XXS = TileK<BlockIQ2_XXS, 3>::Tile<R, T>;
template <int R, int T> using TIQ2_XS = TileK<BlockIQ2_XS, 5>::Tile<R, T>;
template <int R, int T> using TIQ2_S = TileK<BlockIQ2_S, 5>::Tile<R, T>;
template <int R, int T> using TIQ1_S = TileK<BlockIQ1_S, 3>::Tile<R, T>;
template <int R, int T> using TIQ1_M = TileK<BlockIQ1_M, 5>::Tile<R, T>;

// ---- activations ------------------------------------------------------------------------------
void act_f16(const float* x, void* dst, int64_t n) {
  uint16_t* d = static_cast<uint16_t*>(dst);
  int64_t i = 0;
  for (; i + 16 <= n; i += 16)
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(d + i), _mm512_cvtps_ph(_mm512_loadu_ps(x + i), _MM_FROUND_TO_NEAREST_INT));
  for (; i < n; ++i) d[i] = _cvtss_sh(x[i], _MM_FROUND_TO_NEAREST_INT);
}

void act_bf16(const float* x, void* dst, int64_t n) {
  uint16_t* d = static_cast<uint16_t*>(dst);
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m256bh v = _mm512_cvtneps_pbh(_mm512_loadu_ps(x + i));
    std::memcpy(d + i, &v, 32);
  }
  for (; i < n; ++i) {  // round to nearest even, as vcvtneps2bf16
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

inline __m128i cvt_round_epi8(__m512 v) {  // round half to even, then narrow (|v| <= 127)
  return _mm512_cvtsepi32_epi8(_mm512_cvtps_epi32(v));
}

void act_q8_0(const float* x, void* dst, int64_t n) {
  BlockQ8_0* y = static_cast<BlockQ8_0*>(dst);
  const __m512 sign = _mm512_set1_ps(-0.0f);
  for (int64_t i = 0; i < n / 32; ++i, x += 32) {
    const __m512 a = _mm512_loadu_ps(x), b = _mm512_loadu_ps(x + 16);
    const float amax = _mm512_reduce_max_ps(_mm512_max_ps(_mm512_andnot_ps(sign, a), _mm512_andnot_ps(sign, b)));
    const float id = amax != 0.0f ? 127.0f / amax : 0.0f;
    y[i].d = _cvtss_sh(amax / 127.0f, _MM_FROUND_TO_NEAREST_INT);
    const __m512 vid = _mm512_set1_ps(id);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(y[i].qs), cvt_round_epi8(_mm512_mul_ps(a, vid)));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(y[i].qs + 16), cvt_round_epi8(_mm512_mul_ps(b, vid)));
  }
}

void act_q8_1(const float* x, void* dst, int64_t n) { ref_quantize_act_q8_1(x, static_cast<BlockQ8_1*>(dst), n); }
void act_q8_K(const float* x, void* dst, int64_t n) {
  BlockQ8_K* y = static_cast<BlockQ8_K*>(dst);
  for (int64_t i = 0; i < n / 256; ++i, x += 256) {
    __m512 mx = _mm512_loadu_ps(x), mn = mx;
    for (int k = 16; k < 256; k += 16) {
      const __m512 v = _mm512_loadu_ps(x + k);
      mx = _mm512_max_ps(mx, v);
      mn = _mm512_min_ps(mn, v);
    }
    const float vmax = _mm512_reduce_max_ps(mx), vmin = _mm512_reduce_min_ps(mn);
    // The value of largest magnitude (either sign gives the same dot products).
    const float max = vmax >= -vmin ? vmax : vmin;
    if (max == 0.0f) {
      std::memset(&y[i], 0, sizeof(BlockQ8_K));
      continue;
    }
    const float iscale = -127.0f / max;
    const __m512 vs = _mm512_set1_ps(iscale);
    const __m512i lim = _mm512_set1_epi32(127);
    for (int k = 0; k < 256; k += 16) {
      const __m512i q = _mm512_min_epi32(_mm512_cvtps_epi32(_mm512_mul_ps(_mm512_loadu_ps(x + k), vs)), lim);
      _mm_storeu_si128(reinterpret_cast<__m128i*>(y[i].qs + k), _mm512_cvtsepi32_epi8(q));
    }
    // bsums: Σ(q + 128) per 8 bytes by vpsadbw, pairs added, minus 16·128.
    const __m512i off = _mm512_set1_epi8(static_cast<char>(0x80));
    for (int c = 0; c < 4; ++c) {
      const __m512i u = _mm512_xor_si512(_mm512_loadu_si512(y[i].qs + 64 * c), off);
      const __m512i s8 = _mm512_sad_epu8(u, _mm512_setzero_si512());
      const __m512i s16 = _mm512_add_epi64(s8, _mm512_bsrli_epi128(s8, 8));  // qwords 0, 2, 4, 6
      alignas(16) int16_t w[8];
      _mm_store_si128(reinterpret_cast<__m128i*>(w), _mm512_cvtepi64_epi16(s16));
      for (int k = 0; k < 4; ++k) y[i].bsums[4 * c + k] = static_cast<int16_t>(w[2 * k] - 2048);
    }
    y[i].d = 1.0f / iscale;
  }
}

void mm_f32(const MMArgs& a) { drive_stream_tiles<TileF32, 4, 4>(a); }
void mm_f16(const MMArgs& a) { drive_stream_tiles<TileF16, 4, 4>(a); }
void mm_bf16(const MMArgs& a) { drive_stream_tiles<TileBF16, 4, 4>(a); }
void mm_q8_0(const MMArgs& a) {
  if (a.t1 - a.t0 >= 4) return mm_q8_gemm<Q8_0W, 4, 4>(a);
  mm_q8_gemv<Q8_0W>(a);
}
void mm_q4_0(const MMArgs& a) {
  if (a.t1 - a.t0 >= 4) return mm_q8_gemm<Q4_0W, 4, 4>(a);
  mm_q4_0_gemv(a);
}
// Q5_0 / IQ4_NL / Q4_1 / Q5_1: Q8_0's GEMV (block pairs, vpdpbusd) and 4+-token GEMM.
template <class W>
void mm_pair(const MMArgs& a) {
  if (a.t1 - a.t0 >= 4) return mm_q8_gemm<W, 4, 4>(a);
  mm_q8_gemv<W>(a);
}
// GEMV (1–3 tokens): R rows × all the tokens per tile, so each block is unpacked once.
template <template <int, int> class Tile, int T>
void gemv_k_tokens(const MMArgs& a) {
  gemv_stream_rows<T == 1 ? 4 : 2>(a, [&](auto rn, int64_t r, int64_t rs, uint64_t pf) {
    Tile<decltype(rn)::value, T>::run(a, r, a.t0, rs, pf);
  });
}
template <template <int, int> class Tile>
void gemv_k(const MMArgs& a) {
  switch (a.t1 - a.t0) {
    case 1: return gemv_k_tokens<Tile, 1>(a);
    case 2: return gemv_k_tokens<Tile, 2>(a);
    default: return gemv_k_tokens<Tile, 3>(a);
  }
}
void mm_q4_K(const MMArgs& a) {
  if (a.t1 - a.t0 >= 4) return mm_k_gemm<BlockQ4_K, 0, 2, 4>(a);
  gemv_k<TQ4_K>(a);
}
void mm_q5_K(const MMArgs& a) {
  if (a.t1 - a.t0 >= 4) return mm_k_gemm<BlockQ5_K, 0, 2, 4>(a);
  gemv_k<TQ5_K>(a);
}
void mm_q6_K(const MMArgs& a) {
  if (a.t1 - a.t0 >= 4) return mm_k_gemm<BlockQ6_K, 1, 2, 4>(a);
  gemv_k<TQ6_K>(a);
}
void mm_q3_K(const MMArgs& a) {
  if (a.t1 - a.t0 >= 4) return mm_k_gemm<BlockQ3_K, 2, 2, 4>(a);
  gemv_k<TQ3_K>(a);
}
void mm_iq4_xs(const MMArgs& a) {
  if (a.t1 - a.t0 >= 4) return mm_k_gemm<BlockIQ4_XS, 3, 2, 4>(a);
  gemv_k<TIQ4_XS>(a);
}
void mm_q2_K(const MMArgs& a) {
  if (a.t1 - a.t0 >= 4) return mm_k_gemm<BlockQ2_K, 4, 2, 4>(a);
  gemv_k<TQ2_K>(a);
}
void mm_iq3_s(const MMArgs& a) {
  if (a.t1 - a.t0 >= 4) return mm_k_gemm<BlockIQ3_S, 3, 2, 4>(a);
  gemv_k<TIQ3_S>(a);
}
void mm_iq3_xxs(const MMArgs& a) {
  if (a.t1 - a.t0 >= 4) return mm_k_gemm<BlockIQ3_XXS, 3, 2, 4>(a);
  gemv_k<TIQ3_XXS>(a);
}
template <class B, int Kind, template <int, int> class Tile>
void mm_iq(const MMArgs& a) {
  if (a.t1 - a.t0 >= 4) return mm_k_gemm<B, Kind, 2, 4>(a);
  gemv_k<Tile>(a);
}

// MLX affine groups: the kernel's scheme is in kernels/x86/mlx_drive.h.
inline __m512 mlx_widen(__m128i bytes) { return _mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(bytes)); }

template <int kBits, int G, int NT>
void mlx_row(const uint8_t* row, const float* const* x, int64_t cols, float* const* y) {
  constexpr int kBlock = 8 + G * kBits / 8;
  __m512 acc0[NT], acc1[NT];
  for (int k = 0; k < NT; ++k) acc0[k] = acc1[k] = _mm512_setzero_ps();
  const __m128i m4 = _mm_set1_epi8(15);
  for (int64_t i0 = 0; i0 < cols; i0 += G, row += kBlock) {
    float s, b;
    std::memcpy(&s, row, 4);
    std::memcpy(&b, row + 4, 4);
    const __m512 vs = _mm512_set1_ps(s), vb = _mm512_set1_ps(b);
    const uint8_t* q = row + 8;
    for (int c = 0; c < G; c += 32) {
      __m512 w0, w1;
      if constexpr (kBits == 4) {
        // byte j: code 2j low nibble, 2j+1 high nibble → interleave back to element order.
        const __m128i raw = _mm_loadu_si128(reinterpret_cast<const __m128i*>(q + c / 2));
        const __m128i lo = _mm_and_si128(raw, m4), hi = _mm_and_si128(_mm_srli_epi16(raw, 4), m4);
        w0 = mlx_widen(_mm_unpacklo_epi8(lo, hi));
        w1 = mlx_widen(_mm_unpackhi_epi8(lo, hi));
      } else {
        w0 = mlx_widen(_mm_loadu_si128(reinterpret_cast<const __m128i*>(q + c)));
        w1 = mlx_widen(_mm_loadu_si128(reinterpret_cast<const __m128i*>(q + c + 16)));
      }
      w0 = _mm512_fmadd_ps(w0, vs, vb);
      w1 = _mm512_fmadd_ps(w1, vs, vb);
      for (int k = 0; k < NT; ++k) {
        acc0[k] = _mm512_fmadd_ps(w0, _mm512_loadu_ps(x[k] + i0 + c), acc0[k]);
        acc1[k] = _mm512_fmadd_ps(w1, _mm512_loadu_ps(x[k] + i0 + c + 16), acc1[k]);
      }
    }
  }
  for (int k = 0; k < NT; ++k) *y[k] = _mm512_reduce_add_ps(_mm512_add_ps(acc0[k], acc1[k]));
}

#include "kernels/x86/mlx_drive.h"

}  // namespace

const Kernels kAvx512Kernels = {
    "avx512",
    {mm_f32, mm_f16, mm_bf16, mm_q8_0, mm_q4_0, mm_q4_K, mm_q5_K, mm_q6_K, mm_q3_K, mm_iq4_xs, mm_pair<Q5_0W>,
     mm_pair<IQ4_NLW>, mm_pair<Q4_1W>, mm_pair<Q5_1W>, mm_q2_K, mm_iq3_s, mm_iq3_xxs,
     mm_iq<BlockIQ2_XXS, 3, TIQ2_XXS>, mm_iq<BlockIQ2_XS, 5, TIQ2_XS>, mm_iq<BlockIQ2_S, 5, TIQ2_S>,
     mm_iq<BlockIQ1_S, 3, TIQ1_S>, mm_iq<BlockIQ1_M, 5, TIQ1_M>, mm_pair<MXFP4W>,
     mm_mlx<4, 32>, mm_mlx<4, 64>, mm_mlx<4, 128>, mm_mlx<8, 32>, mm_mlx<8, 64>, mm_mlx<8, 128>},
    {nullptr, act_f16, act_bf16, act_q8_0, act_q8_K, act_q8_1},
    16,
    {nullptr, nullptr, nullptr, nullptr, mm_q4_0_packed_avx512, mm_q4_K_packed_avx512, nullptr, mm_q6_K_packed_avx512},
    {nullptr, nullptr, nullptr, nullptr, pack_q4_0_avx512, pack_q4_K_avx512, nullptr, pack_q6_K_avx512},
    {nullptr, nullptr, nullptr, nullptr, unpack_q4_0_avx512, unpack_q4_K_avx512, nullptr, unpack_q6_K_avx512},
};

#if defined(OXI_HAVE_AMX)
// The same kernels; matmul's multi-token GEMM runs on AMX tiles with this set (kernels/gemm.h).
const Kernels kAvx512AmxKernels = {
    "avx512-amx",
    {mm_f32, mm_f16, mm_bf16, mm_q8_0, mm_q4_0, mm_q4_K, mm_q5_K, mm_q6_K, mm_q3_K, mm_iq4_xs, mm_pair<Q5_0W>,
     mm_pair<IQ4_NLW>, mm_pair<Q4_1W>, mm_pair<Q5_1W>, mm_q2_K, mm_iq3_s, mm_iq3_xxs,
     mm_iq<BlockIQ2_XXS, 3, TIQ2_XXS>, mm_iq<BlockIQ2_XS, 5, TIQ2_XS>, mm_iq<BlockIQ2_S, 5, TIQ2_S>,
     mm_iq<BlockIQ1_S, 3, TIQ1_S>, mm_iq<BlockIQ1_M, 5, TIQ1_M>, mm_pair<MXFP4W>,
     mm_mlx<4, 32>, mm_mlx<4, 64>, mm_mlx<4, 128>, mm_mlx<8, 32>, mm_mlx<8, 64>, mm_mlx<8, 128>},
    {nullptr, act_f16, act_bf16, act_q8_0, act_q8_K, act_q8_1},
    16,
    {nullptr, nullptr, nullptr, nullptr, mm_q4_0_packed_avx512, mm_q4_K_packed_avx512, nullptr, mm_q6_K_packed_avx512},
    {nullptr, nullptr, nullptr, nullptr, pack_q4_0_avx512, pack_q4_K_avx512, nullptr, pack_q6_K_avx512},
    {nullptr, nullptr, nullptr, nullptr, unpack_q4_0_avx512, unpack_q4_K_avx512, nullptr, unpack_q6_K_avx512},
};
#endif

}  // namespace oxi::kern
