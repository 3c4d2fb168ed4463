// WebAssembly SIMD128 kernel set "simd128" (fixed-width 128-bit, no FMA, no f16 instructions).
// A wasm module cannot test for SIMD at run time (a module that uses it fails to validate on an
// engine without it), so this set is a build-time choice: the wasm build compiles everything with
// -msimd128 and registers it next to "scalar" (OXI_ISA=scalar still selects the reference).
//
// Integer dot products: int8 → int16 (extend) then i32x4.dot_i16x8_s, exact; K-quant (and
// IQ4_XS) weights are unpacked to int16 once per super-block and reused for every token of the
// tile. Every ggml block type has a kernel here, each bit-identical to the scalar reference (the
// MLX affine types are dequantised). The codebook and Q2_K unpackers are in simd128_iq.inc.
#include <wasm_simd128.h>

#include <algorithm>
#include <cstring>

#include "core/half.h"
#include "kernels/dispatch.h"
#include "kernels/kq_scales.h"
#include "kernels/quant.h"
#include "kernels/tile_drive.h"

namespace oxi::kern {
namespace {

// f16 → f32 inline (a block scale per 32 weights: the out-of-line call cost ~5 % of decode).
// Exponent and mantissa shifted into place and scaled by 2^112 rebias both normals and
// subnormals exactly; inf/NaN keep an all-ones exponent. Equal to f16_to_f32 for every input.
inline float h2f(const void* p) {
  uint16_t h;
  std::memcpy(&h, p, 2);
  const uint32_t em = static_cast<uint32_t>(h & 0x7fffu) << 13;
  float f;
  if ((h & 0x7c00u) == 0x7c00u) {
    const uint32_t u = em | 0x7f800000u;
    std::memcpy(&f, &u, 4);
  } else {
    std::memcpy(&f, &em, 4);
    f *= 0x1p112f;
  }
  return (h & 0x8000u) ? -f : f;
}

inline float hsum(v128_t v) {
  return (wasm_f32x4_extract_lane(v, 0) + wasm_f32x4_extract_lane(v, 1)) +
         (wasm_f32x4_extract_lane(v, 2) + wasm_f32x4_extract_lane(v, 3));
}
inline int32_t hsum_i32(v128_t v) {
  return (wasm_i32x4_extract_lane(v, 0) + wasm_i32x4_extract_lane(v, 1)) +
         (wasm_i32x4_extract_lane(v, 2) + wasm_i32x4_extract_lane(v, 3));
}
inline v128_t fma(v128_t acc, v128_t a, v128_t b) { return wasm_f32x4_add(acc, wasm_f32x4_mul(a, b)); }

// ---- F32 / F16 / BF16: 8 elements per step as two f32x4, a zero-padded copy for the tail -------
struct F32L {
  using E = float;
  static void load(const float* p, v128_t& lo, v128_t& hi) {
    lo = wasm_v128_load(p);
    hi = wasm_v128_load(p + 4);
  }
};
// f16 bits (in u32 lanes) → f32: the 15 magnitude bits shifted into place are an f32 2^112 times
// too small — exact for normals and subnormals alike; inf/NaN get the all-ones exponent.
inline v128_t f16x4_to_f32(v128_t h) {
  const v128_t em = wasm_v128_and(h, wasm_i32x4_splat(0x7fff));
  const v128_t sign = wasm_i32x4_shl(wasm_v128_and(h, wasm_i32x4_splat(0x8000)), 16);
  const v128_t shifted = wasm_i32x4_shl(em, 13);
  const v128_t fin = wasm_f32x4_mul(shifted, wasm_i32x4_splat(0x77800000));  // × 2^112
  const v128_t inf = wasm_v128_or(shifted, wasm_i32x4_splat(0x7f800000));
  return wasm_v128_or(sign, wasm_v128_bitselect(inf, fin, wasm_i32x4_ge(em, wasm_i32x4_splat(0x7c00))));
}
struct F16L {
  using E = uint16_t;
  static void load(const uint16_t* p, v128_t& lo, v128_t& hi) {
    const v128_t v = wasm_v128_load(p);
    lo = f16x4_to_f32(wasm_u32x4_extend_low_u16x8(v));
    hi = f16x4_to_f32(wasm_u32x4_extend_high_u16x8(v));
  }
};
struct BF16L {
  using E = uint16_t;
  static void load(const uint16_t* p, v128_t& lo, v128_t& hi) {
    const v128_t v = wasm_v128_load(p);
    lo = wasm_i32x4_shl(wasm_u32x4_extend_low_u16x8(v), 16);
    hi = wasm_i32x4_shl(wasm_u32x4_extend_high_u16x8(v), 16);
  }
};

template <class L>
struct TileFloat {
  template <int R, int T>
  struct Tile {
    using E = typename L::E;
    static void run(const MMArgs& a, int64_t r, int64_t t) {
      v128_t acc[R][T];
      for (int i = 0; i < R; ++i)
        for (int j = 0; j < T; ++j) acc[i][j] = wasm_f32x4_splat(0.0f);
      const E* w[R];
      const E* x[T];
      for (int i = 0; i < R; ++i) w[i] = reinterpret_cast<const E*>(a.w + (r + i) * a.w_stride);
      for (int j = 0; j < T; ++j) x[j] = reinterpret_cast<const E*>(a.x + (t + j) * a.x_stride);
      auto step = [&](const E* const* wp, const E* const* xp, int64_t k) {
        v128_t wl[R], wh[R];
        for (int i = 0; i < R; ++i) L::load(wp[i] + k, wl[i], wh[i]);
        for (int j = 0; j < T; ++j) {
          v128_t xl, xh;
          L::load(xp[j] + k, xl, xh);
          for (int i = 0; i < R; ++i) acc[i][j] = fma(fma(acc[i][j], wl[i], xl), wh[i], xh);
        }
      };
      int64_t k = 0;
      for (; k + 8 <= a.cols; k += 8) step(w, x, k);
      if (k < a.cols) {
        const int64_t left = a.cols - k;
        E wb[R][8] = {}, xb[T][8] = {};
        const E* wq[R];
        const E* xq[T];
        for (int i = 0; i < R; ++i) {
          std::memcpy(wb[i], w[i] + k, left * sizeof(E));
          wq[i] = wb[i];
        }
        for (int j = 0; j < T; ++j) {
          std::memcpy(xb[j], x[j] + k, left * sizeof(E));
          xq[j] = xb[j];
        }
        step(wq, xq, 0);
      }
      for (int i = 0; i < R; ++i)
        for (int j = 0; j < T; ++j) a.y[(t + j) * a.ldy + r + i] = hsum(acc[i][j]);
    }
  };
};

// ---- 32-element block types × Q8_0 / Q8_1: one block per step as four int16x8 -----------------
inline void widen(v128_t v, v128_t* o) {
  o[0] = wasm_i16x8_extend_low_i8x16(v);
  o[1] = wasm_i16x8_extend_high_i8x16(v);
}
// 16 nibble bytes: low nibbles are elements 0..15, high 16..31 (Q4_0, Q4_1, Q5_x, IQ4_NL).
inline void nibbles(const uint8_t* qs, v128_t& lo, v128_t& hi) {
  const v128_t v = wasm_v128_load(qs);
  lo = wasm_v128_and(v, wasm_i8x16_splat(0x0F));
  hi = wasm_u8x16_shr(v, 4);
}
// Q5_0/Q5_1: bit j of the 32-bit qh (element j) → 0x10 in byte j of [lo | hi]: each qh byte is
// spread over 8 lanes (swizzle), tested against that lane's bit.
inline void qh_bits(const uint8_t* qh, v128_t& lo, v128_t& hi) {
  uint32_t h;
  std::memcpy(&h, qh, 4);
  const v128_t v = wasm_i32x4_splat(static_cast<int32_t>(h));
  const v128_t bits = wasm_u8x16_make(1, 2, 4, 8, 16, 32, 64, 128, 1, 2, 4, 8, 16, 32, 64, 128);
  const v128_t b4 = wasm_i8x16_splat(0x10);
  const v128_t l = wasm_i8x16_swizzle(v, wasm_i8x16_make(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1));
  const v128_t u = wasm_i8x16_swizzle(v, wasm_i8x16_make(2, 2, 2, 2, 2, 2, 2, 2, 3, 3, 3, 3, 3, 3, 3, 3));
  lo = wasm_v128_and(wasm_i8x16_eq(wasm_v128_and(l, bits), bits), b4);
  hi = wasm_v128_and(wasm_i8x16_eq(wasm_v128_and(u, bits), bits), b4);
}
// Q5_0/Q5_1: the 32 five-bit values (qh, then the 16 nibble bytes).
inline void five_bits(const uint8_t* qh, v128_t& lo, v128_t& hi) {
  v128_t bl, bh;
  nibbles(qh + 4, lo, hi);
  qh_bits(qh, bl, bh);
  lo = wasm_v128_or(lo, bl);
  hi = wasm_v128_or(hi, bh);
}
// A weight block's 32 values as int8 (elements 0..15 in lo, 16..31 in hi), before any bias.
inline void q8_0_bytes(const uint8_t* p, v128_t& lo, v128_t& hi) {
  lo = wasm_v128_load(p + 2);
  hi = wasm_v128_load(p + 18);
}
inline void q4_0_bytes(const uint8_t* p, v128_t& lo, v128_t& hi) { nibbles(p + 2, lo, hi); }
inline void q5_0_bytes(const uint8_t* p, v128_t& lo, v128_t& hi) { five_bits(p + 2, lo, hi); }
inline void iq4_nl_bytes(const uint8_t* p, v128_t& lo, v128_t& hi) {  // grid[nibble]: swizzle is a 16-byte table
  nibbles(p + 2, lo, hi);
  const v128_t grid = wasm_v128_load(kIQ4NL);
  lo = wasm_i8x16_swizzle(grid, lo);
  hi = wasm_i8x16_swizzle(grid, hi);
}
inline void mxfp4_bytes(const uint8_t* p, v128_t& lo, v128_t& hi) {  // kMXFP4Values[nibble] (swizzle)
  nibbles(p + 1, lo, hi);
  const v128_t grid = wasm_v128_load(kMXFP4Values);
  lo = wasm_i8x16_swizzle(grid, lo);
  hi = wasm_i8x16_swizzle(grid, hi);
}
inline void q4_1_bytes(const uint8_t* p, v128_t& lo, v128_t& hi) { nibbles(p + 4, lo, hi); }
inline void q5_1_bytes(const uint8_t* p, v128_t& lo, v128_t& hi) { five_bits(p + 4, lo, hi); }

// A 32-element weight block type: Bytes per block, value = byte − Bias; Min: Q4_1/Q5_1 (f16 m
// after d; Q8_1 activations, + m_w·s_x per block). load → o[4]: elements 0..31 as int16. The
// block scale is the f16 at the block's start (MXFP4: its E8M0 byte, MXFP4W).
template <int Bytes, int Bias, bool Min, void (*Values)(const uint8_t*, v128_t&, v128_t&)>
struct BlockW {
  static constexpr int kBytes = Bytes;
  static constexpr bool kMin = Min;
  static void load(const uint8_t* p, v128_t* o) {
    v128_t lo, hi;
    Values(p, lo, hi);
    if constexpr (Bias != 0) {
      lo = wasm_i8x16_sub(lo, wasm_i8x16_splat(Bias));
      hi = wasm_i8x16_sub(hi, wasm_i8x16_splat(Bias));
    }
    widen(lo, o);
    widen(hi, o + 2);
  }
};
using Q8_0W = BlockW<34, 0, false, q8_0_bytes>;
using Q4_0W = BlockW<18, 8, false, q4_0_bytes>;
using Q5_0W = BlockW<22, 16, false, q5_0_bytes>;
using IQ4_NLW = BlockW<18, 0, false, iq4_nl_bytes>;
using Q4_1W = BlockW<20, 0, true, q4_1_bytes>;
using Q5_1W = BlockW<24, 0, true, q5_1_bytes>;
struct MXFP4W : BlockW<17, 0, false, mxfp4_bytes> {
  static constexpr bool kE8M0 = true;  // block_scale (kq_scales.h): 2^(e − 128)
};

// Four int32x4 partial-sum vectors → one vector of their four totals (integer adds: exact).
inline v128_t hsum4_i32(v128_t a, v128_t b, v128_t c, v128_t d) {
  const v128_t ab = wasm_i32x4_add(wasm_i32x4_shuffle(a, b, 0, 4, 1, 5), wasm_i32x4_shuffle(a, b, 2, 6, 3, 7));
  const v128_t cd = wasm_i32x4_add(wasm_i32x4_shuffle(c, d, 0, 4, 1, 5), wasm_i32x4_shuffle(c, d, 2, 6, 3, 7));
  return wasm_i32x4_add(wasm_i32x4_shuffle(ab, cd, 0, 1, 4, 5), wasm_i32x4_shuffle(ab, cd, 2, 3, 6, 7));
}

// Bit-identical to ref_dot_q8_0 / q4_0 / q5_0 / iq4_nl (and q4_1 / q5_1) for every output: per
// block the whole integer dot, then sum += float(s)·(d_w·d_x) (+ m_w·s_x) in block order. The
// vector lanes hold four different outputs (R rows × T tokens, flattened) instead of four parts
// of one sum, so each output's additions happen in the scalar order (the wasm build then gives
// the native scalar build's numbers). Activations: Q8_0 blocks (34 bytes, qs at 2), or Q8_1
// (36, s at 2, qs at 4) for the kMin types.
template <class W>
struct TileQ8 {
  template <int R, int T>
  struct Tile {
    static constexpr int P = R * T, G = (P + 3) / 4;
    static constexpr int kXB = W::kMin ? 36 : 34, kXQ = W::kMin ? 4 : 2;
    static void run(const MMArgs& a, int64_t r, int64_t t) {
      v128_t acc[G];
      for (int g = 0; g < G; ++g) acc[g] = wasm_f32x4_splat(0.0f);
      const int64_t nb = a.cols / 32;
      for (int64_t b = 0; b < nb; ++b) {
        // The T tokens' activation blocks stay in registers; each row's weights are loaded and
        // used at once (four rows × one token needs ~13 vector registers: no spills in decode).
        v128_t xv[T][4];
        float dx[T], sx[T];
        for (int j = 0; j < T; ++j) {
          const uint8_t* q = a.x + (t + j) * a.x_stride + b * kXB;
          widen(wasm_v128_load(q + kXQ), xv[j]);
          widen(wasm_v128_load(q + kXQ + 16), xv[j] + 2);
          dx[j] = h2f(q);
          if constexpr (W::kMin) sx[j] = h2f(q + 2);
        }
        v128_t sv[4 * G];
        alignas(16) float d[4 * G];
        alignas(16) float m[W::kMin ? 4 * G : 1];
        for (int i = 0; i < R; ++i) {
          const uint8_t* p = a.w + (r + i) * a.w_stride + b * W::kBytes;
          v128_t wv[4];
          W::load(p, wv);
          const float dw = block_scale<W>(p, h2f), mw = W::kMin ? h2f(p + 2) : 0.0f;
          for (int j = 0; j < T; ++j) {
            v128_t s = wasm_i32x4_dot_i16x8(wv[0], xv[j][0]);
            for (int c = 1; c < 4; ++c) s = wasm_i32x4_add(s, wasm_i32x4_dot_i16x8(wv[c], xv[j][c]));
            sv[i * T + j] = s;
            d[i * T + j] = dw * dx[j];
            if constexpr (W::kMin) m[i * T + j] = mw * sx[j];
          }
        }
        for (int p = P; p < 4 * G; ++p) {
          sv[p] = wasm_i32x4_splat(0);
          d[p] = 0.0f;
          if constexpr (W::kMin) m[p] = 0.0f;
        }
        for (int g = 0; g < G; ++g) {
          const v128_t tot = hsum4_i32(sv[4 * g], sv[4 * g + 1], sv[4 * g + 2], sv[4 * g + 3]);
          v128_t v = wasm_f32x4_mul(wasm_f32x4_convert_i32x4(tot), wasm_v128_load(d + 4 * g));
          if constexpr (W::kMin) v = wasm_f32x4_add(v, wasm_v128_load(m + 4 * g));
          acc[g] = wasm_f32x4_add(acc[g], v);
        }
      }
      alignas(16) float out[4 * G];
      for (int g = 0; g < G; ++g) wasm_v128_store(out + 4 * g, acc[g]);
      for (int i = 0; i < R; ++i)
        for (int j = 0; j < T; ++j) a.y[(t + j) * a.ldy + r + i] = out[i * T + j];
    }
  };
};

// ---- K-quants × Q8_K ----------------------------------------------------------------------------
// A weight super-block as 32 int16x8 in element order (Q4_K/Q5_K: 0..31, Q6_K: q − 32, Q3_K:
// −4..3, Q2_K: 0..3, IQ4_XS and the codebook types: signed grid values), the integer scale of
// each G-element group and the sub-block mins (Q4_K/Q5_K: 8, one per 32 elements; Q2_K: 16).
struct KRow {
  v128_t q[32];
  int32_t sc[16];
  int32_t mins[16];
  float d, dmin;
};

inline void k4_scales(const uint8_t* s, int32_t* sc, int32_t* mn) {
  for (int j = 0; j < 8; ++j) {
    if (j < 4) {
      sc[j] = s[j] & 63;
      mn[j] = s[j + 4] & 63;
    } else {
      sc[j] = (s[j + 4] & 0xF) | ((s[j - 4] >> 6) << 4);
      mn[j] = (s[j + 4] >> 4) | ((s[j] >> 6) << 4);
    }
  }
}

// Q4_K/Q5_K: 64 elements per 32 bytes of qs (low nibbles: sub-block 2k, high: 2k+1); Q5_K's
// fifth bit of element l of sub-block s is bit s of qh[l].
inline void unpack_q45(const uint8_t* scales, const uint8_t* qs, const uint8_t* qh, KRow& o) {
  k4_scales(scales, o.sc, o.mins);
  const v128_t m4 = wasm_i8x16_splat(0x0F), b4 = wasm_i8x16_splat(0x10);
  v128_t h[2] = {wasm_i8x16_splat(0), wasm_i8x16_splat(0)};
  if (qh) h[0] = wasm_v128_load(qh), h[1] = wasm_v128_load(qh + 16);
  for (int k = 0; k < 4; ++k) {
    for (int p = 0; p < 2; ++p) {
      const v128_t v = wasm_v128_load(qs + 32 * k + 16 * p);
      v128_t lo = wasm_v128_and(v, m4), hi = wasm_u8x16_shr(v, 4);
      if (qh) {  // bit 2k (lo) / 2k+1 (hi) of qh, moved to bit 4
        const v128_t bl = wasm_v128_and(wasm_i8x16_splat(static_cast<int8_t>(1u << (2 * k))), h[p]);
        const v128_t bh = wasm_v128_and(wasm_i8x16_splat(static_cast<int8_t>(2u << (2 * k))), h[p]);
        lo = wasm_v128_or(lo, wasm_v128_andnot(b4, wasm_i8x16_eq(bl, wasm_i8x16_splat(0))));
        hi = wasm_v128_or(hi, wasm_v128_andnot(b4, wasm_i8x16_eq(bh, wasm_i8x16_splat(0))));
      }
      widen(lo, &o.q[8 * k + 2 * p]);
      widen(hi, &o.q[8 * k + 4 + 2 * p]);
    }
  }
}

inline void unpack(const BlockQ4_K& b, KRow& o) {
  unpack_q45(b.scales, b.qs, nullptr, o);
  o.d = h2f(&b.d);
  o.dmin = h2f(&b.dmin);
}
inline void unpack(const BlockQ5_K& b, KRow& o) {
  unpack_q45(b.scales, b.qs, b.qh, o);
  o.d = h2f(&b.d);
  o.dmin = h2f(&b.dmin);
}
// Q6_K, per 128-element half: group g (32 elements) takes the low (g < 2) or high nibbles of
// ql[32·(g&1) + l] and bits 2g..2g+1 of qh[l].
inline void unpack(const BlockQ6_K& b, KRow& o) {
  const v128_t m4 = wasm_i8x16_splat(0x0F), m3 = wasm_i8x16_splat(3), off = wasm_i8x16_splat(32);
  for (int h = 0; h < 2; ++h) {
    for (int p = 0; p < 2; ++p) {
      const v128_t l0 = wasm_v128_load(b.ql + 64 * h + 16 * p);
      const v128_t l1 = wasm_v128_load(b.ql + 64 * h + 32 + 16 * p);
      const v128_t H = wasm_v128_load(b.qh + 32 * h + 16 * p);
      const v128_t lows[4] = {wasm_v128_and(l0, m4), wasm_v128_and(l1, m4), wasm_u8x16_shr(l0, 4),
                              wasm_u8x16_shr(l1, 4)};
      for (int g = 0; g < 4; ++g) {
        const v128_t hb = wasm_i8x16_shl(wasm_v128_and(wasm_u8x16_shr(H, 2 * g), m3), 4);
        widen(wasm_i8x16_sub(wasm_v128_or(lows[g], hb), off), &o.q[2 * (8 * h + 2 * g + p)]);
      }
    }
  }
  for (int g = 0; g < 16; ++g) o.sc[g] = b.scales[g];
  o.d = h2f(&b.d);
  o.dmin = 0.0f;
}

// Q3_K: element 128h + 32g + l = the 2-bit field at shift 2g of qs[32h + l], minus 4 unless bit
// 4h + g of hmask[l] is set; 16 signed scales (kernels/kq_scales.h).
inline void unpack(const BlockQ3_K& b, KRow& o) {
  const v128_t m3 = wasm_i8x16_splat(3), four = wasm_i8x16_splat(4), zero = wasm_i8x16_splat(0);
  for (int p = 0; p < 2; ++p) {
    const v128_t H = wasm_v128_load(b.hmask + 16 * p);
    for (int h = 0; h < 2; ++h) {
      const v128_t Q = wasm_v128_load(b.qs + 32 * h + 16 * p);
      for (int g = 0; g < 4; ++g) {
        const int c = 4 * h + g;
        const v128_t field = wasm_v128_and(wasm_u8x16_shr(Q, 2 * g), m3);
        const v128_t unset = wasm_i8x16_eq(wasm_v128_and(H, wasm_i8x16_splat(static_cast<int8_t>(1u << c))), zero);
        widen(wasm_i8x16_sub(field, wasm_v128_and(unset, four)), &o.q[4 * c + 2 * p]);
      }
    }
  }
  uint64_t lo, hi;
  q3k_scale_bytes(b.scales, lo, hi);
  for (int j = 0; j < 16; ++j) o.sc[j] = static_cast<int32_t>(((j < 8 ? lo : hi) >> (8 * (j % 8))) & 0xFF) - 32;
  o.d = h2f(&b.d);
  o.dmin = 0.0f;
}
// IQ4_XS: sub-block ib's 16 bytes, low nibbles (elements 0..15) and high (16..31), looked up in
// the IQ4_NL grid (swizzle); 8 signed scales, no mins.
inline void unpack(const BlockIQ4_XS& b, KRow& o) {
  const v128_t grid = wasm_v128_load(kIQ4NL);
  const uint64_t ls = iq4xs_scale_bytes(b);
  for (int ib = 0; ib < 8; ++ib) {
    v128_t lo, hi;
    nibbles(b.qs + 16 * ib, lo, hi);
    widen(wasm_i8x16_swizzle(grid, lo), &o.q[4 * ib]);
    widen(wasm_i8x16_swizzle(grid, hi), &o.q[4 * ib + 2]);
    o.sc[ib] = static_cast<int32_t>((ls >> (8 * ib)) & 0xFF) - 32;
  }
  o.d = h2f(&b.d);
  o.dmin = 0.0f;
}

#include "kernels/wasm/simd128_iq.inc"

// G: elements per scale (32: Q4_K/Q5_K, IQ4_XS, IQ2_XXS, IQ3_*, IQ1_S; 16: Q6_K, Q3_K, Q2_K,
// IQ2_XS/S, IQ1_M); Mins: the mins term, none, 8 per 32 elements (Q4_K/Q5_K: the reference's
// d_x·(d·sumi) − d_x·(dmin·summ)) or 16 per 16 (Q2_K: its reference's d_x·d·sumi − d_x·dmin·summ).
// Bit-identical to the scalar reference: exact integer sums, then its float expression (the IQ
// types' 1/4 and 1/8 folded into d scale by a power of two, which commutes with rounding).
enum MinsKind : int { kNoMins, kMins32, kMins16 };
template <class B, int G, int Mins = G == 32 ? kMins32 : kNoMins>
struct TileK {
  template <int R, int T>
  struct Tile {
    static void run(const MMArgs& a, int64_t r, int64_t t) {
      float acc[R][T] = {};
      const int64_t nb = a.cols / 256;
      for (int64_t b = 0; b < nb; ++b) {
        KRow rw[R];
        // Several tokens: the group scales go into the int16 weights once per row (|q·scale| ≤
        // 4096: Q6_K's 32·128, IQ4_XS's 127·32; the codebook types' at most 62·31), so the dot loop is dot + add only; each dot lane
        // sums two products (≤ 2·4096·128). One token: an int32 multiply per group instead (fewer
        // multiplies). Either way the super-block total is the reference's int sumi: exact.
        constexpr bool kPrescale = T > 1;
        for (int i = 0; i < R; ++i) {
          unpack(reinterpret_cast<const B*>(a.w + (r + i) * a.w_stride)[b], rw[i]);
          if constexpr (kPrescale)
            for (int g = 0; g < 32; ++g)
              rw[i].q[g] = wasm_i16x8_mul(rw[i].q[g], wasm_i16x8_splat(static_cast<int16_t>(rw[i].sc[g / (G / 8)])));
        }
        for (int j = 0; j < T; ++j) {
          const BlockQ8_K& xb = reinterpret_cast<const BlockQ8_K*>(a.x + (t + j) * a.x_stride)[b];
          v128_t xv[32];
          for (int g = 0; g < 16; ++g) widen(wasm_v128_load(xb.qs + 16 * g), &xv[2 * g]);
          for (int i = 0; i < R; ++i) {
            v128_t s0 = wasm_i32x4_splat(0), s1 = wasm_i32x4_splat(0);
            for (int g = 0; g < 32; g += 2 * (G / 8)) {  // two groups per step, one per accumulator
              v128_t d0 = wasm_i32x4_dot_i16x8(rw[i].q[g], xv[g]);
              v128_t d1 = wasm_i32x4_dot_i16x8(rw[i].q[g + G / 8], xv[g + G / 8]);
              for (int c = 1; c < G / 8; ++c) {
                d0 = wasm_i32x4_add(d0, wasm_i32x4_dot_i16x8(rw[i].q[g + c], xv[g + c]));
                d1 = wasm_i32x4_add(d1, wasm_i32x4_dot_i16x8(rw[i].q[g + G / 8 + c], xv[g + G / 8 + c]));
              }
              if constexpr (!kPrescale) {
                d0 = wasm_i32x4_mul(d0, wasm_i32x4_splat(rw[i].sc[g / (G / 8)]));
                d1 = wasm_i32x4_mul(d1, wasm_i32x4_splat(rw[i].sc[g / (G / 8) + 1]));
              }
              s0 = wasm_i32x4_add(s0, d0);
              s1 = wasm_i32x4_add(s1, d1);
            }
            const int32_t sumi = hsum_i32(wasm_i32x4_add(s0, s1));
            if constexpr (Mins == kMins32) {
              int32_t summ = 0;
              for (int k = 0; k < 8; ++k) summ += rw[i].mins[k] * (xb.bsums[2 * k] + xb.bsums[2 * k + 1]);
              acc[i][j] += xb.d * (rw[i].d * static_cast<float>(sumi)) - xb.d * (rw[i].dmin * static_cast<float>(summ));
            } else if constexpr (Mins == kMins16) {
              int32_t summ = 0;
              for (int k = 0; k < 16; ++k) summ += rw[i].mins[k] * xb.bsums[k];
              acc[i][j] += xb.d * rw[i].d * static_cast<float>(sumi) - xb.d * rw[i].dmin * static_cast<float>(summ);
            } else {
              acc[i][j] += xb.d * rw[i].d * static_cast<float>(sumi);
            }
          }
        }
      }
      for (int i = 0; i < R; ++i)
        for (int j = 0; j < T; ++j) a.y[(t + j) * a.ldy + r + i] = acc[i][j];
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
template <int R, int T> using TQ4_K = TileK<BlockQ4_K, 32>::Tile<R, T>;
template <int R, int T> using TQ5_K = TileK<BlockQ5_K, 32>::Tile<R, T>;
template <int R, int T> using TQ6_K = TileK<BlockQ6_K, 16>::Tile<R, T>;
template <int R, int T> using TQ3_K = TileK<BlockQ3_K, 16>::Tile<R, T>;
template <int R, int T> using TIQ4_XS = TileK<BlockIQ4_XS, 32, kNoMins>::Tile<R, T>;
template <int R, int T> using TQ2_K = TileK<BlockQ2_K, 16, kMins16>::Tile<R, T>;
template <int R, int T> using TIQ3_S = TileK<BlockIQ3_S, 32, kNoMins>::Tile<R, T>;
template <int R, int T> using TIQ3_XXS = TileK<BlockIQ3_XXS, 32, kNoMins>::Tile<R, T>;
template <int R, int T> using TIQ2_XXS = TileK<BlockIQ2_XXS, 32, kNoMins>::Tile<R, T>;
template <int R, int T> using TIQ2_XS = TileK<BlockIQ2_XS, 16, kNoMins>::Tile<R, T>;
template <int R, int T> using TIQ2_S = TileK<BlockIQ2_S, 16, kNoMins>::Tile<R, T>;
template <int R, int T> using TIQ1_S = TileK<BlockIQ1_S, 32, kNoMins>::Tile<R, T>;
template <int R, int T> using TIQ1_M = TileK<BlockIQ1_M, 16, kNoMins>::Tile<R, T>;
template <int R, int T> using TMXFP4 = TileQ8<MXFP4W>::Tile<R, T>;

// ---- activations (bytes identical to the scalar converters) -------------------------------------
// No f16 conversion instruction in SIMD128: the scalar converters (identical by construction).
void act_f16(const float* x, void* dst, int64_t n) { kScalarKernels.act[kAF16](x, dst, n); }
void act_bf16(const float* x, void* dst, int64_t n) { kScalarKernels.act[kABF16](x, dst, n); }
// Q8_0: d = amax/127 (f16), q = round-half-even(x · 127/amax) (f32x4.nearest), as
// ref_quantize_act_q8_0; |x · id| ≤ 127 so the saturating narrows never clip.
void act_q8_0(const float* x, void* dst, int64_t n) {
  BlockQ8_0* y = static_cast<BlockQ8_0*>(dst);
  for (int64_t i = 0; i < n / 32; ++i, x += 32) {
    v128_t v[8];
    v128_t m = wasm_f32x4_splat(0.0f);
    for (int k = 0; k < 8; ++k) {
      v[k] = wasm_v128_load(x + 4 * k);
      m = wasm_f32x4_max(m, wasm_f32x4_abs(v[k]));
    }
    const float amax = std::max(std::max(wasm_f32x4_extract_lane(m, 0), wasm_f32x4_extract_lane(m, 1)),
                                std::max(wasm_f32x4_extract_lane(m, 2), wasm_f32x4_extract_lane(m, 3)));
    const float id = amax != 0.0f ? 127.0f / amax : 0.0f;
    y[i].d = f32_to_f16(amax / 127.0f);
    const v128_t vid = wasm_f32x4_splat(id);
    v128_t q[8];
    for (int k = 0; k < 8; ++k) q[k] = wasm_i32x4_trunc_sat_f32x4(wasm_f32x4_nearest(wasm_f32x4_mul(v[k], vid)));
    const v128_t h0 = wasm_i16x8_narrow_i32x4(q[0], q[1]), h1 = wasm_i16x8_narrow_i32x4(q[2], q[3]);
    const v128_t h2 = wasm_i16x8_narrow_i32x4(q[4], q[5]), h3 = wasm_i16x8_narrow_i32x4(q[6], q[7]);
    wasm_v128_store(y[i].qs, wasm_i8x16_narrow_i16x8(h0, h1));
    wasm_v128_store(y[i].qs + 16, wasm_i8x16_narrow_i16x8(h2, h3));
  }
}
void act_q8_K(const float* x, void* dst, int64_t n) { ref_quantize_q8_K(x, static_cast<BlockQ8_K*>(dst), n); }
void act_q8_1(const float* x, void* dst, int64_t n) { ref_quantize_act_q8_1(x, static_cast<BlockQ8_1*>(dst), n); }

void mm_f32(const MMArgs& a) { drive_tiles<TF32, 4, 4>(a); }
void mm_f16(const MMArgs& a) { drive_tiles<TF16, 4, 4>(a); }
void mm_bf16(const MMArgs& a) { drive_tiles<TBF16, 4, 4>(a); }
// 32-element types: 2-row tiles for 1–3 tokens (faster GEMV), 4×4 above.
template <template <int, int> class Tl>
void mm_q(const MMArgs& a) {
  if (a.t1 - a.t0 < 4)
    drive_tiles<Tl, 2, 4>(a);
  else
    drive_tiles<Tl, 4, 4>(a);
}
void mm_q8_0(const MMArgs& a) { mm_q<TQ8_0>(a); }
void mm_q4_0(const MMArgs& a) { mm_q<TQ4_0>(a); }
void mm_q4_K(const MMArgs& a) { drive_tiles<TQ4_K, 4, 4>(a); }
void mm_q5_K(const MMArgs& a) { drive_tiles<TQ5_K, 4, 4>(a); }
void mm_q6_K(const MMArgs& a) { drive_tiles<TQ6_K, 4, 4>(a); }
void mm_q3_K(const MMArgs& a) { drive_tiles<TQ3_K, 4, 4>(a); }
void mm_iq4_xs(const MMArgs& a) { drive_tiles<TIQ4_XS, 4, 4>(a); }
void mm_q5_0(const MMArgs& a) { mm_q<TQ5_0>(a); }
void mm_iq4_nl(const MMArgs& a) { mm_q<TIQ4_NL>(a); }
void mm_q4_1(const MMArgs& a) { mm_q<TQ4_1>(a); }
void mm_q5_1(const MMArgs& a) { mm_q<TQ5_1>(a); }
void mm_q2_K(const MMArgs& a) { drive_tiles<TQ2_K, 4, 4>(a); }
void mm_iq3_s(const MMArgs& a) { drive_tiles<TIQ3_S, 4, 4>(a); }
void mm_iq3_xxs(const MMArgs& a) { drive_tiles<TIQ3_XXS, 4, 4>(a); }
void mm_iq2_xxs(const MMArgs& a) { drive_tiles<TIQ2_XXS, 4, 4>(a); }
void mm_iq2_xs(const MMArgs& a) { drive_tiles<TIQ2_XS, 4, 4>(a); }
void mm_iq2_s(const MMArgs& a) { drive_tiles<TIQ2_S, 4, 4>(a); }
void mm_iq1_s(const MMArgs& a) { drive_tiles<TIQ1_S, 4, 4>(a); }
void mm_iq1_m(const MMArgs& a) { drive_tiles<TIQ1_M, 4, 4>(a); }
void mm_mxfp4(const MMArgs& a) { mm_q<TMXFP4>(a); }

}  // namespace

const Kernels kSimd128Kernels = {
    "simd128",
    {mm_f32, mm_f16, mm_bf16, mm_q8_0, mm_q4_0, mm_q4_K, mm_q5_K, mm_q6_K, mm_q3_K, mm_iq4_xs, mm_q5_0, mm_iq4_nl,
     mm_q4_1, mm_q5_1, mm_q2_K, mm_iq3_s, mm_iq3_xxs, mm_iq2_xxs, mm_iq2_xs, mm_iq2_s, mm_iq1_s, mm_iq1_m,
     mm_mxfp4},
    {nullptr, act_f16, act_bf16, act_q8_0, act_q8_K, act_q8_1},
};

}  // namespace oxi::kern
