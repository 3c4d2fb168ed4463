// Scalar reference: block dequantisation, quantisation and dot products. Everything else is
// tested against these. Integer sums are exact, so SIMD versions differ only in the order of the
// final float operations.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <string>

#include "core/error.h"
#include "core/half.h"
#include "kernels/quant.h"

namespace oxi::kern {
namespace {

void dequant_q8_0(const BlockQ8_0* b, float* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i) {
    const float d = f16_to_f32(b[i].d);
    for (int j = 0; j < 32; ++j) y[i * 32 + j] = b[i].qs[j] * d;
  }
}

void dequant_q4_0(const BlockQ4_0* b, float* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i) {
    const float d = f16_to_f32(b[i].d);
    for (int j = 0; j < 16; ++j) {
      y[i * 32 + j] = ((b[i].qs[j] & 0xF) - 8) * d;
      y[i * 32 + j + 16] = ((b[i].qs[j] >> 4) - 8) * d;
    }
  }
}

void dequant_q4_K(const BlockQ4_K* b, float* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i) {
    const float d = f16_to_f32(b[i].d);
    const float dmin = f16_to_f32(b[i].dmin);
    const uint8_t* q = b[i].qs;
    for (int k = 0; k < 4; ++k) {
      uint8_t sc, m;
      get_scale_min_k4(2 * k, b[i].scales, &sc, &m);
      const float d1 = d * sc, m1 = dmin * m;
      get_scale_min_k4(2 * k + 1, b[i].scales, &sc, &m);
      const float d2 = d * sc, m2 = dmin * m;
      for (int l = 0; l < 32; ++l) *y++ = d1 * (q[l] & 0xF) - m1;
      for (int l = 0; l < 32; ++l) *y++ = d2 * (q[l] >> 4) - m2;
      q += 32;
    }
  }
}

void dequant_q5_K(const BlockQ5_K* b, float* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i) {
    const float d = f16_to_f32(b[i].d);
    const float dmin = f16_to_f32(b[i].dmin);
    const uint8_t* ql = b[i].qs;
    const uint8_t* qh = b[i].qh;
    for (int k = 0; k < 4; ++k) {
      uint8_t sc, m;
      get_scale_min_k4(2 * k, b[i].scales, &sc, &m);
      const float d1 = d * sc, m1 = dmin * m;
      get_scale_min_k4(2 * k + 1, b[i].scales, &sc, &m);
      const float d2 = d * sc, m2 = dmin * m;
      const uint8_t u1 = static_cast<uint8_t>(1u << (2 * k)), u2 = static_cast<uint8_t>(2u << (2 * k));
      for (int l = 0; l < 32; ++l) *y++ = d1 * ((ql[l] & 0xF) + ((qh[l] & u1) ? 16 : 0)) - m1;
      for (int l = 0; l < 32; ++l) *y++ = d2 * ((ql[l] >> 4) + ((qh[l] & u2) ? 16 : 0)) - m2;
      ql += 32;
    }
  }
}

// Q6_K element order: each 128-element half uses 64 bytes of ql, 32 of qh and 8 scales.
// For l < 32: elements l, l+32, l+64, l+96 of the half take ql[l] low, ql[l+32] low, ql[l] high,
// ql[l+32] high nibbles, and bits 0-1, 2-3, 4-5, 6-7 of qh[l]; element e has scale e/16.
inline int q6_value(const uint8_t* ql, const uint8_t* qh, int e) {  // e: 0..127 within a half
  const int g = e / 32, l = e % 32;
  const int lo = (g & 1) ? ql[l + 32] : ql[l];
  const int nib = (g >> 1) ? (lo >> 4) : (lo & 0xF);
  const int hi = (qh[l] >> (2 * g)) & 3;
  return (nib | (hi << 4)) - 32;
}

void dequant_q6_K(const BlockQ6_K* b, float* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i) {
    const float d = f16_to_f32(b[i].d);
    for (int h = 0; h < 2; ++h) {
      const uint8_t* ql = b[i].ql + 64 * h;
      const uint8_t* qh = b[i].qh + 32 * h;
      const int8_t* sc = b[i].scales + 8 * h;
      for (int e = 0; e < 128; ++e) {
        *y++ = d * sc[e / 16] * q6_value(ql, qh, e);  // scales run in element order
      }
    }
  }
}

void dequant_q8_K(const BlockQ8_K* b, float* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i)
    for (int j = 0; j < 256; ++j) *y++ = b[i].d * b[i].qs[j];
}

// Unpacked 0..15 / 0..31 quants and the 8 scales/mins of a Q4_K / Q5_K block.
void unpack_q4_K(const BlockQ4_K& b, uint8_t* q, uint8_t* sc, uint8_t* m) {
  for (int k = 0; k < 4; ++k)
    for (int l = 0; l < 32; ++l) {
      q[64 * k + l] = b.qs[32 * k + l] & 0xF;
      q[64 * k + 32 + l] = b.qs[32 * k + l] >> 4;
    }
  for (int j = 0; j < 8; ++j) get_scale_min_k4(j, b.scales, &sc[j], &m[j]);
}


// ---- further ggml types (matmul dequantises rows to f32 where an ISA has no kernel for them) -----

inline float rd_f16(const uint8_t* p) {
  uint16_t h;
  std::memcpy(&h, p, 2);
  return f16_to_f32(h);
}

// Q4_1 (20 B / 32): f16 d, f16 m, 16 nibble bytes; value = q·d + m.
void dequant_q4_1(const uint8_t* b, float* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, b += 20, y += 32) {
    const float d = rd_f16(b), m = rd_f16(b + 2);
    for (int j = 0; j < 16; ++j) {
      y[j] = (b[4 + j] & 0xF) * d + m;
      y[j + 16] = (b[4 + j] >> 4) * d + m;
    }
  }
}

// Q5_0 (22 B / 32): f16 d, u32 qh (bit j: fifth bit of element j), 16 nibble bytes;
// value = (q − 16)·d. Q5_1 (24 B): f16 d, f16 m, qh, nibbles; value = q·d + m.
void dequant_q5(const uint8_t* b, float* y, int64_t nb, bool with_min) {
  const int hdr = with_min ? 4 : 2, bytes = with_min ? 24 : 22;
  for (int64_t i = 0; i < nb; ++i, b += bytes, y += 32) {
    const float d = rd_f16(b), m = with_min ? rd_f16(b + 2) : 0.0f;
    uint32_t qh;
    std::memcpy(&qh, b + hdr, 4);
    const uint8_t* qs = b + hdr + 4;
    for (int j = 0; j < 16; ++j) {
      const int q0 = (qs[j] & 0xF) | (((qh >> j) & 1) << 4);
      const int q1 = (qs[j] >> 4) | (((qh >> (j + 16)) & 1) << 4);
      y[j] = with_min ? q0 * d + m : (q0 - 16) * d;
      y[j + 16] = with_min ? q1 * d + m : (q1 - 16) * d;
    }
  }
}

// IQ4_NL (18 B / 32): f16 d, 16 nibble bytes indexing a fixed non-linear table.
void dequant_iq4_nl(const uint8_t* b, float* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, b += 18, y += 32) {
    const float d = rd_f16(b);
    for (int j = 0; j < 16; ++j) {
      y[j] = d * kIQ4NL[b[2 + j] & 0xF];
      y[j + 16] = d * kIQ4NL[b[2 + j] >> 4];
    }
  }
}

// IQ4_XS (136 B / 256, BlockIQ4_XS): 8 sub-blocks of 32 with 6-bit scales biased by 32.
int iq4xs_scale(const BlockIQ4_XS& b, int ib) {
  return (((b.scales_l[ib / 2] >> (4 * (ib % 2))) & 0xF) | (((b.scales_h >> (2 * ib)) & 3) << 4)) - 32;
}

void dequant_iq4_xs(const BlockIQ4_XS* b, float* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i) {
    const float d = f16_to_f32(b[i].d);
    const uint8_t* qs = b[i].qs;
    for (int ib = 0; ib < 8; ++ib, qs += 16, y += 32) {
      const float dl = d * iq4xs_scale(b[i], ib);
      for (int j = 0; j < 16; ++j) {
        y[j] = dl * kIQ4NL[qs[j] & 0xF];
        y[j + 16] = dl * kIQ4NL[qs[j] >> 4];
      }
    }
  }
}

// Q2_K (84 B / 256): scales[16] (low nibble scale, high nibble min, per 16 elements), qs[64]
// (2-bit, four planes per 32 bytes), f16 d, f16 dmin.
void dequant_q2_K(const uint8_t* b, float* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, b += 84) {
    const uint8_t* sc = b;
    const uint8_t* q = b + 16;
    const float d = rd_f16(b + 80), dmin = rd_f16(b + 82);
    int is = 0;
    for (int half = 0; half < 2; ++half, q += 32) {
      for (int shift = 0; shift < 8; shift += 2) {
        for (int part = 0; part < 2; ++part, ++is) {
          const float dl = d * (sc[is] & 0xF), ml = dmin * (sc[is] >> 4);
          for (int l = 0; l < 16; ++l) *y++ = dl * ((q[16 * part + l] >> shift) & 3) - ml;
        }
      }
    }
  }
}

// Q3_K (110 B / 256, BlockQ3_K): scale of 16-element sub-block j (−32..31), and element e's
// quant (−4..3) = low 2 bits − 4 unless its hmask bit is set.
int q3k_scale(const BlockQ3_K& b, int j) {
  const int low = j < 8 ? (b.scales[j] & 0xF) : (b.scales[j - 8] >> 4);
  const int high = (b.scales[8 + j % 4] >> (2 * (j / 4))) & 3;
  return (low | (high << 4)) - 32;
}

int q3k_value(const BlockQ3_K& b, int e) {
  const int h = e / 128, g = (e % 128) / 32, l = e % 32;
  return ((b.qs[32 * h + l] >> (2 * g)) & 3) - (((b.hmask[l] >> (4 * h + g)) & 1) ? 0 : 4);
}

void dequant_q3_K(const BlockQ3_K* b, float* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i)
    for (int j = 0; j < 16; ++j) {
      const float dl = f16_to_f32(b[i].d) * q3k_scale(b[i], j);
      for (int l = 0; l < 16; ++l) *y++ = dl * q3k_value(b[i], 16 * j + l);
    }
}
}  // namespace

namespace {
// MLX affine groups (format/dtype.h): per block of G, f32 scale s and bias b, then the codes.
// value = s·q + b, rounded twice (product, then sum) as numpy / mlx compute it in f32.
template <int kBits, int G>
void dequant_mlx(const uint8_t* b, float* y, int64_t nb) {
  constexpr int kBlock = 8 + G * kBits / 8;
  for (int64_t i = 0; i < nb; ++i, b += kBlock, y += G) {
    float s, bias;
    std::memcpy(&s, b, 4);
    std::memcpy(&bias, b + 4, 4);
    const uint8_t* q = b + 8;
    for (int j = 0; j < G; ++j) {
      const int code = kBits == 4 ? (q[j >> 1] >> ((j & 1) * 4)) & 15 : q[j];
      volatile float p = s * static_cast<float>(code);  // no fused multiply-add: the reference rounds twice
      y[j] = p + bias;
    }
  }
}
}  // namespace

float ref_dot_mlx(DType t, const uint8_t* w, const float* x, int64_t n) {
  const int64_t g = static_cast<int64_t>(dtype_traits(t)->block_elems);
  const uint64_t bb = dtype_traits(t)->block_bytes;
  float buf[128];
  float sum = 0.0f;
  for (int64_t i = 0; i < n; i += g, w += bb) {
    ref_dequantize(t, w, buf, g);
    for (int64_t j = 0; j < g; ++j) sum += buf[j] * x[i + j];
  }
  return sum;
}

void ref_dequantize(DType t, const void* src, float* dst, int64_t n) {
  const auto* u8 = static_cast<const uint8_t*>(src);
  switch (t) {
    case DType::MLX_Q4_G32: return dequant_mlx<4, 32>(u8, dst, n / 32);
    case DType::MLX_Q4_G64: return dequant_mlx<4, 64>(u8, dst, n / 64);
    case DType::MLX_Q4_G128: return dequant_mlx<4, 128>(u8, dst, n / 128);
    case DType::MLX_Q8_G32: return dequant_mlx<8, 32>(u8, dst, n / 32);
    case DType::MLX_Q8_G64: return dequant_mlx<8, 64>(u8, dst, n / 64);
    case DType::MLX_Q8_G128: return dequant_mlx<8, 128>(u8, dst, n / 128);
    case DType::F32:
      std::memcpy(dst, src, n * sizeof(float));
      return;
    case DType::F16: {
      const uint16_t* s = static_cast<const uint16_t*>(src);
      for (int64_t i = 0; i < n; ++i) dst[i] = f16_to_f32(s[i]);
      return;
    }
    case DType::BF16: {
      const uint16_t* s = static_cast<const uint16_t*>(src);
      for (int64_t i = 0; i < n; ++i) dst[i] = bf16_to_f32(s[i]);
      return;
    }
    case DType::Q8_0: return dequant_q8_0(static_cast<const BlockQ8_0*>(src), dst, n / 32);
    case DType::Q4_0: return dequant_q4_0(static_cast<const BlockQ4_0*>(src), dst, n / 32);
    case DType::Q4_K: return dequant_q4_K(static_cast<const BlockQ4_K*>(src), dst, n / 256);
    case DType::Q5_K: return dequant_q5_K(static_cast<const BlockQ5_K*>(src), dst, n / 256);
    case DType::Q6_K: return dequant_q6_K(static_cast<const BlockQ6_K*>(src), dst, n / 256);
    case DType::Q8_K: return dequant_q8_K(static_cast<const BlockQ8_K*>(src), dst, n / 256);
    case DType::Q4_1: return dequant_q4_1(static_cast<const uint8_t*>(src), dst, n / 32);
    case DType::Q5_0: return dequant_q5(static_cast<const uint8_t*>(src), dst, n / 32, false);
    case DType::Q5_1: return dequant_q5(static_cast<const uint8_t*>(src), dst, n / 32, true);
    case DType::IQ4_NL: return dequant_iq4_nl(static_cast<const uint8_t*>(src), dst, n / 32);
    case DType::IQ4_XS: return dequant_iq4_xs(static_cast<const BlockIQ4_XS*>(src), dst, n / 256);
    case DType::Q2_K: return dequant_q2_K(static_cast<const uint8_t*>(src), dst, n / 256);
    case DType::Q3_K: return dequant_q3_K(static_cast<const BlockQ3_K*>(src), dst, n / 256);
    default:
      if (ref_dequantize_codebook(t, src, dst, n)) return;  // IQ1/IQ2/IQ3, MXFP4 (ref_iq.cpp)
      throw_error(ErrorCode::kUnsupported, "unsupported tensor type " + dtype_name(t) +
                                               " (no dequantisation kernel)");
  }
}

void ref_quantize_q8_0(const float* x, BlockQ8_0* y, int64_t n) {
  for (int64_t i = 0; i < n / 32; ++i, x += 32) {
    float amax = 0.0f;
    for (int j = 0; j < 32; ++j) amax = std::max(amax, std::fabs(x[j]));
    const float d = amax / 127.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    y[i].d = f32_to_f16(d);
    for (int j = 0; j < 32; ++j) y[i].qs[j] = static_cast<int8_t>(std::roundf(x[j] * id));
  }
}

void ref_quantize_q4_0(const float* x, BlockQ4_0* y, int64_t n) {
  for (int64_t i = 0; i < n / 32; ++i, x += 32) {
    float amax = 0.0f, max = 0.0f;  // max: the value of largest magnitude, sign kept
    for (int j = 0; j < 32; ++j) {
      if (amax < std::fabs(x[j])) {
        amax = std::fabs(x[j]);
        max = x[j];
      }
    }
    const float d = max / -8.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    y[i].d = f32_to_f16(d);
    for (int j = 0; j < 16; ++j) {
      const int lo = std::min(15, static_cast<int>(static_cast<int8_t>(x[j] * id + 8.5f)));
      const int hi = std::min(15, static_cast<int>(static_cast<int8_t>(x[j + 16] * id + 8.5f)));
      y[i].qs[j] = static_cast<uint8_t>(lo | (hi << 4));
    }
  }
}

// ggml's nearest_int: adding 1.5·2^23 leaves round-half-to-even(v) in the low mantissa bits (exact
// for |v| ≤ 2^22 − 1; outside that ggml gets garbage and so do we — quantisers clamp the result).
// Same bits as ggml by construction, and plain integer/float ops the compiler vectorises.
static inline int nearest_int(float v) {
  const float f = v + 12582912.0f;
  int32_t i;
  std::memcpy(&i, &f, sizeof i);
  return (i & 0x007fffff) - 0x00400000;
}

void ref_quantize_act_q8_0(const float* x, BlockQ8_0* y, int64_t n) {
  for (int64_t i = 0; i < n / 32; ++i, x += 32) {
    float amax = 0.0f;
    for (int j = 0; j < 32; ++j) amax = std::max(amax, std::fabs(x[j]));
    const float id = amax != 0.0f ? 127.0f / amax : 0.0f;
    y[i].d = f32_to_f16(amax / 127.0f);
    for (int j = 0; j < 32; ++j) y[i].qs[j] = static_cast<int8_t>(nearest_int(x[j] * id));
  }
}

void ref_quantize_act_q8_1(const float* x, BlockQ8_1* y, int64_t n) {
  for (int64_t i = 0; i < n / 32; ++i, x += 32) {
    float amax = 0.0f;
    for (int j = 0; j < 32; ++j) amax = std::max(amax, std::fabs(x[j]));
    const float d = amax / 127.0f, id = amax != 0.0f ? 127.0f / amax : 0.0f;
    int sum = 0;
    for (int j = 0; j < 32; ++j) {
      y[i].qs[j] = static_cast<int8_t>(nearest_int(x[j] * id));
      sum += y[i].qs[j];
    }
    y[i].d = f32_to_f16(d);
    y[i].s = f32_to_f16(d * static_cast<float>(sum));
  }
}

void ref_quantize_q8_K(const float* x, BlockQ8_K* y, int64_t n) {
  for (int64_t i = 0; i < n / 256; ++i, x += 256) {
    float amax = 0.0f, max = 0.0f;
    for (int j = 0; j < 256; ++j) {
      if (std::fabs(x[j]) > amax) {
        amax = std::fabs(x[j]);
        max = x[j];
      }
    }
    if (amax == 0.0f) {
      std::memset(&y[i], 0, sizeof(BlockQ8_K));
      continue;
    }
    const float iscale = -127.0f / max;
    for (int j = 0; j < 256; ++j) y[i].qs[j] = static_cast<int8_t>(std::min(127, nearest_int(iscale * x[j])));
    for (int j = 0; j < 16; ++j) {
      int s = 0;
      for (int l = 0; l < 16; ++l) s += y[i].qs[16 * j + l];
      y[i].bsums[j] = static_cast<int16_t>(s);
    }
    y[i].d = 1.0f / iscale;
  }
}

namespace {

// Fits x ≈ scale·L + min (L in 0..nmax, min <= 0) minimising Σ w·(scale·L + min − x)², trying
// nstep+1 candidate inverse scales around nmax/(max − min) (ggml's make_qkx2_quants, same
// arithmetic order so the chosen L are identical). Returns scale; *neg_min = −min.
float fit_scale_min(int n, int nmax, const float* x, const float* w, uint8_t* L, float* neg_min,
                    float rmin, float rdelta, int nstep) {
  float lo = x[0], hi = x[0];
  float sum_w = w[0];
  float sum_x = sum_w * x[0];
  for (int i = 1; i < n; ++i) {
    lo = std::min(lo, x[i]);
    hi = std::max(hi, x[i]);
    sum_w += w[i];
    sum_x += w[i] * x[i];
  }
  if (lo > 0) lo = 0;
  if (hi == lo) {
    for (int i = 0; i < n; ++i) L[i] = 0;
    *neg_min = -lo;
    return 0.0f;
  }
  float iscale = nmax / (hi - lo);
  float scale = 1 / iscale;
  float best = 0;
  for (int i = 0; i < n; ++i) {
    const int l = std::max(0, std::min(nmax, nearest_int(iscale * (x[i] - lo))));
    L[i] = static_cast<uint8_t>(l);
    const float diff = scale * L[i] + lo - x[i];
    best += w[i] * (diff * diff);
  }
  uint8_t cand[32];
  for (int is = 0; is <= nstep; ++is) {
    iscale = (rmin + rdelta * is + nmax) / (hi - lo);
    float sum_l = 0, sum_l2 = 0, sum_xl = 0;
    for (int i = 0; i < n; ++i) {
      const int l = std::max(0, std::min(nmax, nearest_int(iscale * (x[i] - lo))));
      cand[i] = static_cast<uint8_t>(l);
      sum_l += w[i] * l;
      sum_l2 += w[i] * l * l;
      sum_xl += w[i] * l * x[i];
    }
    const float D = sum_w * sum_l2 - sum_l * sum_l;
    if (D > 0) {
      float s = (sum_w * sum_xl - sum_x * sum_l) / D;
      float m = (sum_l2 * sum_x - sum_l * sum_xl) / D;
      if (m > 0) {
        m = 0;
        s = sum_xl / sum_l2;
      }
      float err = 0;
      for (int i = 0; i < n; ++i) {
        const float diff = s * cand[i] + m - x[i];
        err += w[i] * (diff * diff);
      }
      if (err < best) {
        std::memcpy(L, cand, n);
        best = err;
        scale = s;
        lo = m;
      }
    }
  }
  *neg_min = -lo;
  return scale;
}

}  // namespace

namespace {

// The part Q4_K and Q5_K share (ggml's quantize_row_q4_K_ref / _q5_K_ref): per 32 values a
// weighted (scale, min) fit to levels 0..nmax (fit_scale_min with weights rms + |x|), the 8 scales
// and 8 mins quantised to 6 bits against their maxima (packed into `scales` as get_scale_min_k4
// reads them; d = max scale/63, dmin = max min/63 as f16), then every value re-rounded to 0..nmax
// against its quantised scale and min. L receives the 256 levels.
void fit_k_block(const float* x, int nmax, float rmin, float rdelta, int nstep, uint16_t* d_out, uint16_t* dmin_out,
                 uint8_t* scales_out, uint8_t* L) {
  float w[32], scales[8], mins[8];
  float max_scale = 0, max_min = 0;
  for (int j = 0; j < 8; ++j) {
    float sum_x2 = 0;
    for (int l = 0; l < 32; ++l) sum_x2 += x[32 * j + l] * x[32 * j + l];
    const float av = std::sqrt(sum_x2 / 32);
    for (int l = 0; l < 32; ++l) w[l] = av + std::fabs(x[32 * j + l]);
    scales[j] = fit_scale_min(32, nmax, x + 32 * j, w, L + 32 * j, &mins[j], rmin, rdelta, nstep);
    max_scale = std::max(max_scale, scales[j]);
    max_min = std::max(max_min, mins[j]);
  }
  const float inv_scale = max_scale > 0 ? 63.0f / max_scale : 0.0f;
  const float inv_min = max_min > 0 ? 63.0f / max_min : 0.0f;
  std::memset(scales_out, 0, 12);
  for (int j = 0; j < 8; ++j) {
    const uint8_t ls = static_cast<uint8_t>(std::min(63, nearest_int(inv_scale * scales[j])));
    const uint8_t lm = static_cast<uint8_t>(std::min(63, nearest_int(inv_min * mins[j])));
    if (j < 4) {
      scales_out[j] = ls;
      scales_out[j + 4] = lm;
    } else {
      scales_out[j + 4] = static_cast<uint8_t>((ls & 0xF) | ((lm & 0xF) << 4));
      scales_out[j - 4] |= static_cast<uint8_t>((ls >> 4) << 6);
      scales_out[j] |= static_cast<uint8_t>((lm >> 4) << 6);
    }
  }
  *d_out = f32_to_f16(max_scale / 63.0f);
  *dmin_out = f32_to_f16(max_min / 63.0f);
  for (int j = 0; j < 8; ++j) {
    uint8_t sc, m;
    get_scale_min_k4(j, scales_out, &sc, &m);
    const float d = f16_to_f32(*d_out) * sc;
    if (d == 0.0f) continue;
    const float dm = f16_to_f32(*dmin_out) * m;
    for (int l = 0; l < 32; ++l)
      L[32 * j + l] = static_cast<uint8_t>(std::max(0, std::min(nmax, nearest_int((x[32 * j + l] + dm) / d))));
  }
}

}  // namespace

void ref_quantize_q4_K(const float* x, BlockQ4_K* y, int64_t n) {
  uint8_t L[256];
  for (int64_t i = 0; i < n / 256; ++i, x += 256) {
    BlockQ4_K& b = y[i];
    uint16_t d, dmin;  // not &b.d: packed members may be unaligned
    fit_k_block(x, 15, -1.0f, 0.1f, 20, &d, &dmin, b.scales, L);
    b.d = d;
    b.dmin = dmin;
    for (int k = 0; k < 4; ++k)
      for (int l = 0; l < 32; ++l)
        b.qs[32 * k + l] = static_cast<uint8_t>(L[64 * k + l] | (L[64 * k + 32 + l] << 4));
  }
}

// Q5_0 as ggml's reference: d = (signed value of largest magnitude) / −16, q = trunc(x/d + 16.5)
// capped at 31; low nibbles in qs (elements j and j + 16 share byte j), fifth bits in qh.
void ref_quantize_q5_0(const float* x, uint8_t* y, int64_t n) {
  for (int64_t i = 0; i < n / 32; ++i, x += 32, y += 22) {
    float amax = 0.0f, max = 0.0f;
    for (int j = 0; j < 32; ++j) {
      if (amax < std::fabs(x[j])) {
        amax = std::fabs(x[j]);
        max = x[j];
      }
    }
    const float d = max / -16.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    const uint16_t dh = f32_to_f16(d);
    std::memcpy(y, &dh, 2);
    uint32_t qh = 0;
    for (int j = 0; j < 16; ++j) {
      const int lo = std::min(31, static_cast<int>(static_cast<int8_t>(x[j] * id + 16.5f)));
      const int hi = std::min(31, static_cast<int>(static_cast<int8_t>(x[j + 16] * id + 16.5f)));
      y[6 + j] = static_cast<uint8_t>((lo & 0xF) | ((hi & 0xF) << 4));
      qh |= static_cast<uint32_t>((lo >> 4) & 1) << j;
      qh |= static_cast<uint32_t>((hi >> 4) & 1) << (j + 16);
    }
    std::memcpy(y + 2, &qh, 4);
  }
}

namespace {

// The value of largest magnitude among v[0..n) with its sign (the first such; 0 for none above
// zero) — ggml's "max" that the symmetric K-quant and IQ4 scales start from.
float signed_absmax(const float* v, int n) {
  float amax = 0.0f, max = 0.0f;
  for (int i = 0; i < n; ++i) {
    if (std::fabs(v[i]) > amax) {
      amax = std::fabs(v[i]);
      max = v[i];
    }
  }
  return max;
}

// Symmetric fit of 16 values to levels −32..31 weighted by x² (ggml's make_qx_quants with
// nmax 32, rmse_type 1, no importance): start from −32/max, then try 18 nearby inverse scales and
// keep the one with the largest (Σw·x·l)²/Σw·l². L receives l + 32. Returns the scale.
float fit_scale_sym16(const float* x, uint8_t* L) {
  constexpr int n = 16, nmax = 32;
  const float max = signed_absmax(x, n);
  if (std::fabs(max) < 1e-15f) {
    for (int i = 0; i < n; ++i) L[i] = 0;
    return 0.0f;
  }
  auto level = [](float v) { return std::max(-nmax, std::min(nmax - 1, nearest_int(v))); };
  float iscale = -nmax / max;
  float sumlx = 0.0f, suml2 = 0.0f;
  for (int i = 0; i < n; ++i) {
    const int l = level(iscale * x[i]);
    L[i] = static_cast<uint8_t>(l + nmax);
    const float w = x[i] * x[i];
    sumlx += w * x[i] * l;
    suml2 += w * l * l;
  }
  float scale = suml2 != 0.0f ? sumlx / suml2 : 0.0f;
  float best = scale * sumlx;
  for (int is = -9; is <= 9; ++is) {
    if (is == 0) continue;
    iscale = -(nmax + 0.1f * is) / max;
    sumlx = suml2 = 0.0f;
    for (int i = 0; i < n; ++i) {
      const int l = level(iscale * x[i]);
      const float w = x[i] * x[i];
      sumlx += w * x[i] * l;
      suml2 += w * l * l;
    }
    if (suml2 > 0 && sumlx * sumlx > best * suml2) {
      for (int i = 0; i < n; ++i) L[i] = static_cast<uint8_t>(level(iscale * x[i]) + nmax);
      scale = sumlx / suml2;
      best = scale * sumlx;
    }
  }
  return scale;
}

}  // namespace

// Q6_K as ggml's quantize_row_q6_K_ref: a scale per 16 values (fit_scale_sym16), the scales
// quantised to int8 against the one of largest magnitude (d = max/−128), then every value
// re-rounded against its quantised scale. Layout as dequant_q6_K reads it.
void ref_quantize_q6_K(const float* x, BlockQ6_K* y, int64_t n) {
  uint8_t L[256];
  float scales[16];
  for (int64_t i = 0; i < n / 256; ++i, x += 256) {
    for (int ib = 0; ib < 16; ++ib) scales[ib] = fit_scale_sym16(x + 16 * ib, L + 16 * ib);
    const float max_scale = signed_absmax(scales, 16);
    BlockQ6_K& b = y[i];
    if (std::fabs(max_scale) < 1e-15f) {
      std::memset(&b, 0, sizeof b);
      continue;
    }
    const float iscale = -128.0f / max_scale;
    b.d = f32_to_f16(1.0f / iscale);
    for (int ib = 0; ib < 16; ++ib) b.scales[ib] = static_cast<int8_t>(std::min(127, nearest_int(iscale * scales[ib])));
    for (int j = 0; j < 16; ++j) {
      const float d = f16_to_f32(b.d) * b.scales[j];
      if (d == 0.0f) continue;
      for (int k = 0; k < 16; ++k) {
        const int l = std::max(-32, std::min(31, nearest_int(x[16 * j + k] / d)));
        L[16 * j + k] = static_cast<uint8_t>(l + 32);
      }
    }
    for (int h = 0; h < 2; ++h) {  // two halves of 128: 64 ql bytes and 32 qh bytes each
      const uint8_t* Lh = L + 128 * h;
      uint8_t* ql = b.ql + 64 * h;
      uint8_t* qh = b.qh + 32 * h;
      for (int l = 0; l < 32; ++l) {
        ql[l] = static_cast<uint8_t>((Lh[l] & 0xF) | ((Lh[l + 64] & 0xF) << 4));
        ql[l + 32] = static_cast<uint8_t>((Lh[l + 32] & 0xF) | ((Lh[l + 96] & 0xF) << 4));
        qh[l] = static_cast<uint8_t>((Lh[l] >> 4) | ((Lh[l + 32] >> 4) << 2) | ((Lh[l + 64] >> 4) << 4) | ((Lh[l + 96] >> 4) << 6));
      }
    }
  }
}

// Q4_1 / Q5_1 as ggml's reference: per 32 values d = (max − min)/(2^bits − 1) and m = min (both
// f16), q = trunc((x − min)/d + 0.5) (Q4_1 capped at 15). Q4_1: 20-byte blocks (d, m, 16 bytes of
// nibbles: element j low, j + 16 high); Q5_1: 24 bytes (d, m, qh: bit j = fifth bit of element j,
// then 16 bytes of low nibbles as Q4_1).
void ref_quantize_q4_1(const float* x, uint8_t* y, int64_t n) {
  for (int64_t i = 0; i < n / 32; ++i, x += 32, y += 20) {
    float lo = std::numeric_limits<float>::max(), hi = -std::numeric_limits<float>::max();
    for (int j = 0; j < 32; ++j) {
      lo = std::min(lo, x[j]);
      hi = std::max(hi, x[j]);
    }
    const float d = (hi - lo) / 15.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    const uint16_t dh = f32_to_f16(d), mh = f32_to_f16(lo);
    std::memcpy(y, &dh, 2);
    std::memcpy(y + 2, &mh, 2);
    for (int j = 0; j < 16; ++j) {
      const int a = std::min(15, static_cast<int>(static_cast<int8_t>((x[j] - lo) * id + 0.5f)));
      const int b = std::min(15, static_cast<int>(static_cast<int8_t>((x[j + 16] - lo) * id + 0.5f)));
      y[4 + j] = static_cast<uint8_t>(a | (b << 4));
    }
  }
}

void ref_quantize_q5_1(const float* x, uint8_t* y, int64_t n) {
  for (int64_t i = 0; i < n / 32; ++i, x += 32, y += 24) {
    float lo = std::numeric_limits<float>::max(), hi = -std::numeric_limits<float>::max();
    for (int j = 0; j < 32; ++j) {
      lo = std::min(lo, x[j]);
      hi = std::max(hi, x[j]);
    }
    const float d = (hi - lo) / 31.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    const uint16_t dh = f32_to_f16(d), mh = f32_to_f16(lo);
    std::memcpy(y, &dh, 2);
    std::memcpy(y + 2, &mh, 2);
    uint32_t qh = 0;
    for (int j = 0; j < 16; ++j) {
      const unsigned a = static_cast<uint8_t>((x[j] - lo) * id + 0.5f);
      const unsigned b = static_cast<uint8_t>((x[j + 16] - lo) * id + 0.5f);
      y[8 + j] = static_cast<uint8_t>((a & 0xF) | ((b & 0xF) << 4));
      qh |= ((a >> 4) & 1u) << j;
      qh |= ((b >> 4) & 1u) << (j + 16);
    }
    std::memcpy(y + 4, &qh, 4);
  }
}

// Q5_K as ggml's quantize_row_q5_K_ref: Q4_K's scheme with 5-bit levels (0..31; candidate inverse
// scales from −0.5 in 16 steps of 0.1), the fifth bits in qh as BlockQ5_K documents.
void ref_quantize_q5_K(const float* x, BlockQ5_K* y, int64_t n) {
  uint8_t L[256];
  for (int64_t i = 0; i < n / 256; ++i, x += 256) {
    BlockQ5_K& b = y[i];
    uint16_t d, dmin;  // not &b.d: packed members may be unaligned
    fit_k_block(x, 31, -0.5f, 0.1f, 15, &d, &dmin, b.scales, L);
    b.d = d;
    b.dmin = dmin;
    std::memset(b.qh, 0, sizeof b.qh);
    for (int k = 0; k < 4; ++k) {  // 64 elements per k: low nibbles first 32, high nibbles next 32
      for (int l = 0; l < 32; ++l) {
        const int a = L[64 * k + l], c = L[64 * k + 32 + l];
        if (a > 15) b.qh[l] |= static_cast<uint8_t>(1u << (2 * k));
        if (c > 15) b.qh[l] |= static_cast<uint8_t>(2u << (2 * k));
        b.qs[32 * k + l] = static_cast<uint8_t>((a & 0xF) | ((c & 0xF) << 4));
      }
    }
  }
}

namespace {

// Symmetric fit of 16 values to levels −4..3 (ggml's make_q3_quants with rmse): start from
// −4/max, then up to 5 passes that move single levels to where they raise (Σw·x·l)²/Σw·l²
// (w = x²). L receives l + 4. Returns the scale Σw·x·l / Σw·l².
float fit_scale_q3(const float* x, int8_t* L) {
  constexpr int n = 16, nmax = 4;
  const float max = signed_absmax(x, n);
  if (std::fabs(max) < 1e-15f) {
    for (int i = 0; i < n; ++i) L[i] = 0;
    return 0.0f;
  }
  const float iscale = -nmax / max;
  float sumlx = 0.0f, suml2 = 0.0f;
  for (int i = 0; i < n; ++i) {
    const int l = std::max(-nmax, std::min(nmax - 1, nearest_int(iscale * x[i])));
    L[i] = static_cast<int8_t>(l);
    const float w = x[i] * x[i];
    sumlx += w * x[i] * l;
    suml2 += w * l * l;
  }
  for (int pass = 0; pass < 5; ++pass) {
    int changed = 0;
    for (int i = 0; i < n; ++i) {
      const float w = x[i] * x[i];
      float slx = sumlx - w * x[i] * L[i];
      if (slx > 0) {
        float sl2 = suml2 - w * L[i] * L[i];
        const int nl = std::max(-nmax, std::min(nmax - 1, nearest_int(x[i] * sl2 / slx)));
        if (nl != L[i]) {
          slx += w * x[i] * nl;
          sl2 += w * nl * nl;
          if (sl2 > 0 && slx * slx * suml2 > sumlx * sumlx * sl2) {
            L[i] = static_cast<int8_t>(nl);
            sumlx = slx;
            suml2 = sl2;
            ++changed;
          }
        }
      }
    }
    if (!changed) break;
  }
  for (int i = 0; i < n; ++i) L[i] = static_cast<int8_t>(L[i] + nmax);
  return sumlx / suml2;
}

// Index of the grid value nearest to v in the ascending 16-entry grid (ties → the upper one
// only when strictly nearer, as ggml's best_index_int8).
int nearest_grid(const int8_t* grid, float v) {
  if (v <= grid[0]) return 0;
  if (v >= grid[15]) return 15;
  int lo = 0, hi = 15;
  while (hi - lo > 1) {
    const int mid = (lo + hi) / 2;
    if (v < grid[mid]) hi = mid;
    else lo = mid;
  }
  return v - grid[hi - 1] < grid[hi] - v ? hi - 1 : hi;
}

// Scale for 32 values on the IQ4_NL grid (weights x², no importance matrix): start from
// d = −max/grid[0], refit d = Σw·q·x / Σw·q², then try the 15 inverse scales (t + grid[0])/max,
// t = −7..7, keeping the one of largest (Σw·q·x)²/Σw·q². Writes the grid indices to L.
float fit_iq4_block(const float* x, uint8_t* L) {
  const float max = signed_absmax(x, 32);
  if (std::fabs(max) < 1e-15f) {
    for (int j = 0; j < 32; ++j) L[j] = 0;
    return 0.0f;
  }
  float d = -max / kIQ4NL[0];
  float id = 1 / d;
  float sumqx = 0, sumq2 = 0;
  for (int j = 0; j < 32; ++j) {
    const int l = nearest_grid(kIQ4NL, id * x[j]);
    L[j] = static_cast<uint8_t>(l);
    const float q = kIQ4NL[l], w = x[j] * x[j];
    sumqx += w * q * x[j];
    sumq2 += w * q * q;
  }
  d = sumqx / sumq2;
  float best = d * sumqx;
  for (int t = -7; t <= 7; ++t) {
    id = (t + kIQ4NL[0]) / max;
    sumqx = sumq2 = 0;
    for (int j = 0; j < 32; ++j) {
      const int l = nearest_grid(kIQ4NL, id * x[j]);
      const float q = kIQ4NL[l], w = x[j] * x[j];
      sumqx += w * q * x[j];
      sumq2 += w * q * q;
    }
    if (sumq2 > 0 && sumqx * sumqx > best * sumq2) {
      d = sumqx / sumq2;
      best = d * sumqx;
    }
  }
  return d;
}

}  // namespace

// Q3_K as ggml's quantize_row_q3_K_ref: a scale per 16 values (fit_scale_q3), the 16 scales
// quantised to 6 bits against the one of largest magnitude (d = max/−32), every value re-rounded
// to −4..3 against its quantised scale; layout as BlockQ3_K documents.
void ref_quantize_q3_K(const float* x, BlockQ3_K* y, int64_t n) {
  int8_t L[256];
  float scales[16];
  for (int64_t i = 0; i < n / 256; ++i, x += 256) {
    for (int j = 0; j < 16; ++j) scales[j] = fit_scale_q3(x + 16 * j, L + 16 * j);
    const float max_scale = signed_absmax(scales, 16);
    BlockQ3_K& b = y[i];
    std::memset(b.scales, 0, sizeof b.scales);
    if (max_scale != 0.0f) {
      const float iscale = -32.0f / max_scale;
      for (int j = 0; j < 16; ++j) {
        int l = std::max(-32, std::min(31, static_cast<int>(static_cast<int8_t>(nearest_int(iscale * scales[j]))))) + 32;
        if (j < 8) b.scales[j] = static_cast<uint8_t>(l & 0xF);
        else b.scales[j - 8] |= static_cast<uint8_t>((l & 0xF) << 4);
        l >>= 4;
        b.scales[j % 4 + 8] |= static_cast<uint8_t>(l << (2 * (j / 4)));
      }
      b.d = f32_to_f16(1 / iscale);
    } else {
      b.d = 0;
    }
    for (int j = 0; j < 16; ++j) {
      const float d = f16_to_f32(b.d) * static_cast<float>(q3k_scale(b, j));
      if (d == 0.0f) continue;
      for (int k = 0; k < 16; ++k)
        L[16 * j + k] = static_cast<int8_t>(std::max(-4, std::min(3, nearest_int(x[16 * j + k] / d))) + 4);
    }
    std::memset(b.hmask, 0, sizeof b.hmask);
    for (int j = 0; j < 256; ++j) {  // element j: hmask byte j % 32, bit j / 32
      if (L[j] > 3) {
        b.hmask[j % 32] |= static_cast<uint8_t>(1u << (j / 32));
        L[j] = static_cast<int8_t>(L[j] - 4);
      }
    }
    for (int h = 0; h < 2; ++h)
      for (int l = 0; l < 32; ++l) {
        const int8_t* Lh = L + 128 * h;
        b.qs[32 * h + l] = static_cast<uint8_t>(Lh[l] | (Lh[l + 32] << 2) | (Lh[l + 64] << 4) | (Lh[l + 96] << 6));
      }
  }
}

// IQ4_XS as ggml's quantize_iq4_xs without importance matrix: a scale per 32 values
// (fit_iq4_block), quantised to 6 bits against the one of largest magnitude (d = −max/32, the
// float d, not its f16, used for the re-rounding), then every value re-mapped to the grid
// against its quantised scale.
void ref_quantize_iq4_xs(const float* x, BlockIQ4_XS* y, int64_t n) {
  uint8_t L[256];
  float scales[8];
  for (int64_t i = 0; i < n / 256; ++i, x += 256) {
    BlockIQ4_XS& b = y[i];
    for (int ib = 0; ib < 8; ++ib) scales[ib] = fit_iq4_block(x + 32 * ib, L + 32 * ib);
    const float max_scale = signed_absmax(scales, 8);
    b.scales_h = 0;
    std::memset(b.scales_l, 0, sizeof b.scales_l);
    const float d = -max_scale / 32;
    b.d = f32_to_f16(d);
    const float id = d != 0.0f ? 1 / d : 0.0f;
    for (int ib = 0; ib < 8; ++ib) {
      int l = std::max(-32, std::min(31, nearest_int(id * scales[ib])));
      const float dl = d * l;
      const float idl = dl != 0.0f ? 1 / dl : 0.0f;
      for (int j = 0; j < 32; ++j) L[32 * ib + j] = static_cast<uint8_t>(nearest_grid(kIQ4NL, idl * x[32 * ib + j]));
      l += 32;
      if (ib % 2 == 0) b.scales_l[ib / 2] = static_cast<uint8_t>(l & 0xF);
      else b.scales_l[ib / 2] |= static_cast<uint8_t>((l & 0xF) << 4);
      b.scales_h |= static_cast<uint16_t>((l >> 4) << (2 * ib));
    }
    for (int ib = 0; ib < 8; ++ib)
      for (int j = 0; j < 16; ++j) b.qs[16 * ib + j] = static_cast<uint8_t>(L[32 * ib + j] | (L[32 * ib + 16 + j] << 4));
  }
}

// IQ4_NL (18-byte blocks: f16 d, 16 bytes of grid indices, element j low, j + 16 high): one
// fit_iq4_block per 32 values, d stored as f16, indices re-mapped against the float d.
void ref_quantize_iq4_nl(const float* x, uint8_t* y, int64_t n) {
  uint8_t L[32];
  for (int64_t i = 0; i < n / 32; ++i, x += 32, y += 18) {
    const float d = fit_iq4_block(x, L);
    const uint16_t dh = f32_to_f16(d);
    std::memcpy(y, &dh, 2);
    const float id = d != 0.0f ? 1 / d : 0.0f;
    for (int j = 0; j < 32; ++j) L[j] = static_cast<uint8_t>(nearest_grid(kIQ4NL, id * x[j]));
    for (int j = 0; j < 16; ++j) y[2 + j] = static_cast<uint8_t>(L[j] | (L[16 + j] << 4));
  }
}

float ref_dot_f32(const float* w, const float* x, int64_t n) {
  double s = 0.0;  // reference: accurate
  for (int64_t i = 0; i < n; ++i) s += static_cast<double>(w[i]) * x[i];
  return static_cast<float>(s);
}

float ref_dot_f16(const uint16_t* w, const uint16_t* x, int64_t n) {
  double s = 0.0;
  for (int64_t i = 0; i < n; ++i) s += static_cast<double>(f16_to_f32(w[i])) * f16_to_f32(x[i]);
  return static_cast<float>(s);
}

float ref_dot_bf16(const uint16_t* w, const uint16_t* x, int64_t n) {
  double s = 0.0;
  for (int64_t i = 0; i < n; ++i) s += static_cast<double>(bf16_to_f32(w[i])) * bf16_to_f32(x[i]);
  return static_cast<float>(s);
}

float ref_dot_q8_0(const BlockQ8_0* w, const BlockQ8_0* x, int64_t n) {
  float sum = 0.0f;
  for (int64_t i = 0; i < n / 32; ++i) {
    int s = 0;
    for (int j = 0; j < 32; ++j) s += w[i].qs[j] * x[i].qs[j];
    sum += static_cast<float>(s) * (f16_to_f32(w[i].d) * f16_to_f32(x[i].d));
  }
  return sum;
}

float ref_dot_q4_0(const BlockQ4_0* w, const BlockQ8_0* x, int64_t n) {
  float sum = 0.0f;
  for (int64_t i = 0; i < n / 32; ++i) {
    int s = 0;
    for (int j = 0; j < 16; ++j) {
      s += ((w[i].qs[j] & 0xF) - 8) * x[i].qs[j];
      s += ((w[i].qs[j] >> 4) - 8) * x[i].qs[j + 16];
    }
    sum += static_cast<float>(s) * (f16_to_f32(w[i].d) * f16_to_f32(x[i].d));
  }
  return sum;
}

float ref_dot_q4_K(const BlockQ4_K* w, const BlockQ8_K* x, int64_t n) {
  float sum = 0.0f;
  uint8_t q[256], sc[8], m[8];
  for (int64_t i = 0; i < n / 256; ++i) {
    unpack_q4_K(w[i], q, sc, m);
    int sumi = 0, summ = 0;
    for (int j = 0; j < 8; ++j) {
      int s = 0;
      for (int l = 0; l < 32; ++l) s += q[32 * j + l] * x[i].qs[32 * j + l];
      sumi += sc[j] * s;
      summ += m[j] * (x[i].bsums[2 * j] + x[i].bsums[2 * j + 1]);
    }
    sum += x[i].d * (f16_to_f32(w[i].d) * sumi) - x[i].d * (f16_to_f32(w[i].dmin) * summ);
  }
  return sum;
}

float ref_dot_q5_K(const BlockQ5_K* w, const BlockQ8_K* x, int64_t n) {
  float sum = 0.0f;
  uint8_t sc[8], m[8];
  for (int64_t i = 0; i < n / 256; ++i) {
    int sumi = 0, summ = 0;
    for (int j = 0; j < 8; ++j) get_scale_min_k4(j, w[i].scales, &sc[j], &m[j]);
    for (int k = 0; k < 4; ++k) {
      int s1 = 0, s2 = 0;
      for (int l = 0; l < 32; ++l) {
        const int q1 = (w[i].qs[32 * k + l] & 0xF) + (((w[i].qh[l] >> (2 * k)) & 1) << 4);
        const int q2 = (w[i].qs[32 * k + l] >> 4) + (((w[i].qh[l] >> (2 * k + 1)) & 1) << 4);
        s1 += q1 * x[i].qs[64 * k + l];
        s2 += q2 * x[i].qs[64 * k + 32 + l];
      }
      sumi += sc[2 * k] * s1 + sc[2 * k + 1] * s2;
    }
    for (int j = 0; j < 8; ++j) summ += m[j] * (x[i].bsums[2 * j] + x[i].bsums[2 * j + 1]);
    sum += x[i].d * (f16_to_f32(w[i].d) * sumi) - x[i].d * (f16_to_f32(w[i].dmin) * summ);
  }
  return sum;
}

namespace {
// Super-blocks of 16 sub-blocks of 16 (Q6_K, Q3_K), as ggml's vec_dot: the integer sum
// Σ_j scale(b, j)·Σ_l value(b, 16j + l)·x_q, then one float multiply by d_x·d_w.
template <class B, class Value, class Scale>
float ref_dot_16x16(const B* w, const BlockQ8_K* x, int64_t n, Value value, Scale scale) {
  float sum = 0.0f;
  for (int64_t i = 0; i < n / 256; ++i) {
    int sumi = 0;
    for (int j = 0; j < 16; ++j) {
      int s = 0;
      for (int l = 0; l < 16; ++l) s += value(w[i], 16 * j + l) * x[i].qs[16 * j + l];
      sumi += scale(w[i], j) * s;
    }
    sum += x[i].d * f16_to_f32(w[i].d) * static_cast<float>(sumi);
  }
  return sum;
}
}  // namespace

float ref_dot_q6_K(const BlockQ6_K* w, const BlockQ8_K* x, int64_t n) {
  return ref_dot_16x16(
      w, x, n, [](const BlockQ6_K& b, int e) { return q6_value(b.ql + 64 * (e / 128), b.qh + 32 * (e / 128), e % 128); },
      [](const BlockQ6_K& b, int j) { return static_cast<int>(b.scales[j]); });
}

float ref_dot_q3_K(const BlockQ3_K* w, const BlockQ8_K* x, int64_t n) {
  return ref_dot_16x16(w, x, n, q3k_value, q3k_scale);
}

// Q2_K as ggml's vec_dot: Σ_j sc_j·Σ q·x_q and Σ_j m_j·bsum_j in integers, then
// d_x·d_w·sumi − d_x·dmin_w·summ.
float ref_dot_q2_K(const BlockQ2_K* w, const BlockQ8_K* x, int64_t n) {
  float sum = 0.0f;
  for (int64_t i = 0; i < n / 256; ++i) {
    int sumi = 0, summ = 0;
    for (int j = 0; j < 16; ++j) {
      const int h = j / 8, g = (j % 8) / 2, l0 = 16 * (j % 2);
      int s = 0;
      for (int l = 0; l < 16; ++l) s += ((w[i].qs[32 * h + l0 + l] >> (2 * g)) & 3) * x[i].qs[16 * j + l];
      sumi += (w[i].scales[j] & 0xF) * s;
      summ += (w[i].scales[j] >> 4) * x[i].bsums[j];
    }
    sum += x[i].d * f16_to_f32(w[i].d) * static_cast<float>(sumi) - x[i].d * f16_to_f32(w[i].dmin) * static_cast<float>(summ);
  }
  return sum;
}

// IQ4_XS as ggml's vec_dot: Σ_ib scale_ib·Σ grid(q)·x_q in integers, then d_x·d_w.
float ref_dot_iq4_xs(const BlockIQ4_XS* w, const BlockQ8_K* x, int64_t n) {
  float sum = 0.0f;
  for (int64_t i = 0; i < n / 256; ++i) {
    int sumi = 0;
    for (int ib = 0; ib < 8; ++ib) {
      const uint8_t* qs = w[i].qs + 16 * ib;
      const int8_t* xq = x[i].qs + 32 * ib;
      int s = 0;
      for (int j = 0; j < 16; ++j) s += kIQ4NL[qs[j] & 0xF] * xq[j] + kIQ4NL[qs[j] >> 4] * xq[j + 16];
      sumi += iq4xs_scale(w[i], ib) * s;
    }
    sum += x[i].d * f16_to_f32(w[i].d) * static_cast<float>(sumi);
  }
  return sum;
}

namespace {
// Σ over a 32-element block of q(j)·x_q[j] in integers (q: the weight's integer value of element j).
template <class Q>
int block_dot32(const int8_t* xq, Q q) {
  int s = 0;
  for (int j = 0; j < 32; ++j) s += q(j) * xq[j];
  return s;
}
inline int nib(const uint8_t* qs, int j) { return j < 16 ? qs[j] & 0xF : qs[j - 16] >> 4; }
inline int q5(const uint8_t* qh, const uint8_t* qs, int j) {
  uint32_t h;
  std::memcpy(&h, qh, 4);
  return nib(qs, j) | static_cast<int>(((h >> j) & 1) << 4);
}
}  // namespace

float ref_dot_q5_0(const BlockQ5_0* w, const BlockQ8_0* x, int64_t n) {
  float sum = 0.0f;
  for (int64_t i = 0; i < n / 32; ++i) {
    const int s = block_dot32(x[i].qs, [&](int j) { return q5(w[i].qh, w[i].qs, j) - 16; });
    sum += static_cast<float>(s) * (f16_to_f32(w[i].d) * f16_to_f32(x[i].d));
  }
  return sum;
}

float ref_dot_iq4_nl(const BlockIQ4_NL* w, const BlockQ8_0* x, int64_t n) {
  float sum = 0.0f;
  for (int64_t i = 0; i < n / 32; ++i) {
    const int s = block_dot32(x[i].qs, [&](int j) { return static_cast<int>(kIQ4NL[nib(w[i].qs, j)]); });
    sum += static_cast<float>(s) * (f16_to_f32(w[i].d) * f16_to_f32(x[i].d));
  }
  return sum;
}

float ref_dot_q4_1(const BlockQ4_1* w, const BlockQ8_1* x, int64_t n) {
  float sum = 0.0f;
  for (int64_t i = 0; i < n / 32; ++i) {
    const int s = block_dot32(x[i].qs, [&](int j) { return nib(w[i].qs, j); });
    sum += (f16_to_f32(w[i].d) * f16_to_f32(x[i].d)) * static_cast<float>(s) + f16_to_f32(w[i].m) * f16_to_f32(x[i].s);
  }
  return sum;
}

float ref_dot_q5_1(const BlockQ5_1* w, const BlockQ8_1* x, int64_t n) {
  float sum = 0.0f;
  for (int64_t i = 0; i < n / 32; ++i) {
    const int s = block_dot32(x[i].qs, [&](int j) { return q5(w[i].qh, w[i].qs, j); });
    sum += (f16_to_f32(w[i].d) * f16_to_f32(x[i].d)) * static_cast<float>(s) + f16_to_f32(w[i].m) * f16_to_f32(x[i].s);
  }
  return sum;
}

DType activation_type(DType weight) {
  switch (weight) {
    case DType::F32: return DType::F32;
    case DType::F16: return DType::F16;
    case DType::BF16: return DType::BF16;
    case DType::Q8_0:
    case DType::Q4_0:
    case DType::Q5_0:
    case DType::IQ4_NL: return DType::Q8_0;
    case DType::Q4_1:
    case DType::Q5_1: return DType::Q8_1;
    case DType::Q4_K:
    case DType::Q5_K:
    case DType::Q6_K:
    case DType::Q3_K:
    case DType::Q2_K:
    case DType::IQ4_XS: return DType::Q8_K;
    case DType::MXFP4: return DType::Q8_0;
    default:
      if (is_codebook_type(weight)) return DType::Q8_K;  // the IQ1/IQ2/IQ3 types
      if (is_mlx_dtype(weight)) return DType::F32;       // MLX affine groups: f32 activations
      throw_error(ErrorCode::kUnsupported, "unsupported tensor type " + dtype_name(weight) +
                                               " (no matmul kernel)");
  }
}

}  // namespace oxi::kern
