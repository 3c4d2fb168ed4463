// Scalar dequantisation of the codebook types (IQ2_XXS/XS/S, IQ3_XXS/S, IQ1_S/M) and MXFP4, and
// their reference dot products against Q8_K / Q8_0 activations (ggml's vec_dot integer forms):
// the sets without a kernel for a type dequantise its rows to f32 (kernels/matmul.cpp's
// fallback). Each dequantised value is computed with the float operations in the order ggml's
// to_float uses (scale products first, then × grid value), so the results are ggml's bit for bit (tests/kernels/ggml_vectors_test.cpp).
//
// Common shape: a 256-element block of one f16 super-scale d and 8 sub-blocks of 32; each
// sub-block is 4 groups of 8 elements, and a group is one codebook entry (8 unsigned magnitudes,
// IQ2) or two (4 each, IQ3), with 8 sign bits. Byte j of a codebook entry is element j.
#include <bit>
#include <cstring>

#include "core/half.h"
#include "kernels/kq_scales.h"
#include "kernels/quant.h"

namespace oxi::kern {
namespace {

#include "kernels/iq_grids.inc"

uint16_t rd16(const uint8_t* p) {
  uint16_t v;
  std::memcpy(&v, p, 2);
  return v;
}
uint32_t rd32(const uint8_t* p) {
  uint32_t v;
  std::memcpy(&v, p, 4);
  return v;
}

// The 8 sign bits of a group stored as 7 bits: the eighth makes the count of negatives even.
uint8_t signs7(uint32_t v) { return static_cast<uint8_t>((v & 127) | ((std::popcount(v & 127) & 1) << 7)); }

uint8_t gbyte(uint64_t entry, int j) { return static_cast<uint8_t>(entry >> (8 * j)); }

// Group of 8: y[j] = db · magnitude j, negated where sign bit j is set.
void put8(float db, uint64_t entry, uint8_t signs, float* y) {
  for (int j = 0; j < 8; ++j) {
    const float v = db * static_cast<float>(gbyte(entry, j));
    y[j] = (signs >> j) & 1 ? -v : v;
  }
}

// IQ3 group: two 4-magnitude entries (elements 0..3, 4..7) sharing the 8 sign bits.
void put4x2(float db, uint32_t lo, uint32_t hi, uint8_t signs, float* y) {
  put8(db, static_cast<uint64_t>(lo) | (static_cast<uint64_t>(hi) << 32), signs, y);
}

// IQ2_XXS (66 B): d, then per sub-block 8 bytes: 4 grid indices (bytes), then a u32 whose bits
// 7l..7l+6 are group l's signs and bits 28..31 the scale s; db = d·(0.5 + s)·0.25.
void dequant_iq2_xxs(const uint8_t* b, float* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, b += 66) {
    const float d = f16_to_f32(rd16(b));
    for (int ib = 0; ib < 8; ++ib) {
      const uint8_t* s = b + 2 + 8 * ib;
      const uint32_t aux = rd32(s + 4);
      const float db = d * (0.5f + static_cast<float>(aux >> 28)) * 0.25f;
      for (int l = 0; l < 4; ++l, y += 8) put8(db, kGridIQ2XXS[s[l]], signs7(aux >> (7 * l)), y);
    }
  }
}

// IQ2_XS (74 B): d, 32 u16 (9-bit grid index | 7 sign bits << 9), 8 scale bytes (nibble per
// 16 elements: groups 0-1 the low one, 2-3 the high one); db = d·(0.5 + s)·0.25.
void dequant_iq2_xs(const uint8_t* b, float* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, b += 74) {
    const float d = f16_to_f32(rd16(b));
    const uint8_t* sc = b + 66;
    for (int ib = 0; ib < 8; ++ib) {
      const float db[2] = {d * (0.5f + static_cast<float>(sc[ib] & 15)) * 0.25f,
                           d * (0.5f + static_cast<float>(sc[ib] >> 4)) * 0.25f};
      for (int l = 0; l < 4; ++l, y += 8) {
        const uint16_t q = rd16(b + 2 + 2 * (4 * ib + l));
        put8(db[l / 2], kGridIQ2XS[q & 511], signs7(q >> 9), y);
      }
    }
  }
}

// IQ2_S (82 B): d, qs[32] low 8 bits of the 10-bit grid indices, signs[32] (one full byte per
// group), qh[8] (bits 2l..2l+1: index bits 8-9 of group l), scales[8] as IQ2_XS.
void dequant_iq2_s(const uint8_t* b, float* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, b += 82) {
    const float d = f16_to_f32(rd16(b));
    const uint8_t *qs = b + 2, *sg = b + 34, *qh = b + 66, *sc = b + 74;
    for (int ib = 0; ib < 8; ++ib) {
      const float db[2] = {d * (0.5f + static_cast<float>(sc[ib] & 15)) * 0.25f,
                           d * (0.5f + static_cast<float>(sc[ib] >> 4)) * 0.25f};
      for (int l = 0; l < 4; ++l, y += 8) {
        const int idx = qs[4 * ib + l] | (((qh[ib] >> (2 * l)) & 3) << 8);
        put8(db[l / 2], kGridIQ2S[idx], sg[4 * ib + l], y);
      }
    }
  }
}

// IQ3_XXS (98 B): d, 64 grid indices (two per group), then per sub-block a u32 as IQ2_XXS's;
// db = d·(0.5 + s)·0.5.
void dequant_iq3_xxs(const uint8_t* b, float* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, b += 98) {
    const float d = f16_to_f32(rd16(b));
    const uint8_t* qs = b + 2;
    for (int ib = 0; ib < 8; ++ib) {
      const uint32_t aux = rd32(b + 66 + 4 * ib);
      const float db = d * (0.5f + static_cast<float>(aux >> 28)) * 0.5f;
      for (int l = 0; l < 4; ++l, y += 8) {
        const uint8_t* q = qs + 8 * ib + 2 * l;
        put4x2(db, kGridIQ3XXS[q[0]], kGridIQ3XXS[q[1]], signs7(aux >> (7 * l)), y);
      }
    }
  }
}

// IQ3_S (110 B): d, qs[64] low 8 bits of 9-bit indices (two per group), qh[8] (bit k: the ninth
// bit of sub-block ib's k-th index), signs[32] (byte per group), scales[4] (nibble per
// sub-block, low first); db = d·(1 + 2·s).
void dequant_iq3_s(const uint8_t* b, float* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, b += 110) {
    const float d = f16_to_f32(rd16(b));
    const uint8_t *qs = b + 2, *qh = b + 66, *sg = b + 74, *sc = b + 106;
    for (int ib = 0; ib < 8; ++ib) {
      const int s = ib % 2 ? sc[ib / 2] >> 4 : sc[ib / 2] & 15;
      const float db = d * static_cast<float>(1 + 2 * s);
      for (int l = 0; l < 4; ++l, y += 8) {
        const uint8_t* q = qs + 8 * ib + 2 * l;
        const int i0 = q[0] | (((qh[ib] >> (2 * l)) & 1) << 8);
        const int i1 = q[1] | (((qh[ib] >> (2 * l + 1)) & 1) << 8);
        put4x2(db, kGridIQ3S[i0], kGridIQ3S[i1], sg[4 * ib + l], y);
      }
    }
  }
}

// IQ1 group: y[j] = dl·(g_j + delta), g_j ∈ {−1, 0, 1} the signed bytes of an IQ1_S grid entry.
void put_iq1(float dl, float delta, uint64_t entry, float* y) {
  for (int j = 0; j < 8; ++j) y[j] = dl * (static_cast<float>(static_cast<int8_t>(gbyte(entry, j))) + delta);
}

constexpr float kIQ1Delta = 0.125f;

// IQ1_S (50 B): d, qs[32] low 8 bits of 11-bit indices, qh[8] u16 per sub-block: bits 3l..3l+2
// index bits 8-10 of group l, bits 12-14 the scale s (dl = d·(2s + 1)), bit 15 the delta's sign.
void dequant_iq1_s(const uint8_t* b, float* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, b += 50) {
    const float d = f16_to_f32(rd16(b));
    for (int ib = 0; ib < 8; ++ib) {
      const uint16_t h = rd16(b + 34 + 2 * ib);
      const float dl = d * static_cast<float>(2 * ((h >> 12) & 7) + 1);
      const float delta = h & 0x8000 ? -kIQ1Delta : kIQ1Delta;
      for (int l = 0; l < 4; ++l, y += 8)
        put_iq1(dl, delta, kGridIQ1S[b[2 + 4 * ib + l] | (((h >> (3 * l)) & 7) << 8)], y);
    }
  }
}

// IQ1_M (56 B): qs[32] as IQ1_S, qh[16] (a nibble per group: index bits 8-10, bit 3 the delta's
// sign), scales as 4 u16: 3-bit scales (sub-block ib: bits 6(ib%2)… of u16 ib/2, groups 0-1 then
// 2-3) and, in the top nibbles of the four, the f16 super-scale d.
void dequant_iq1_m(const uint8_t* b, float* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, b += 56) {
    const uint8_t *qs = b, *qh = b + 32;
    uint16_t sc[4];
    for (int k = 0; k < 4; ++k) sc[k] = rd16(b + 48 + 2 * k);
    const float d = f16_to_f32(iq1m_d_bits(*reinterpret_cast<const BlockIQ1_M*>(b)));
    for (int ib = 0; ib < 8; ++ib) {
      const int sh = 6 * (ib % 2);
      const float dl[2] = {d * static_cast<float>(2 * ((sc[ib / 2] >> sh) & 7) + 1),
                           d * static_cast<float>(2 * ((sc[ib / 2] >> (sh + 3)) & 7) + 1)};
      for (int l = 0; l < 4; ++l, y += 8) {
        const int nib = (qh[2 * ib + l / 2] >> (4 * (l % 2))) & 15;
        const float delta = nib & 8 ? -kIQ1Delta : kIQ1Delta;
        put_iq1(dl[l / 2], delta, kGridIQ1S[qs[4 * ib + l] | ((nib & 7) << 8)], y);
      }
    }
  }
}

// MXFP4 (17 B / 32): exponent byte e, qs[16]: low nibbles elements 0..15, high 16..31;
// value = kValuesMXFP4[nibble]·2^(e − 128).
void dequant_mxfp4(const uint8_t* b, float* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, b += 17, y += 32) {
    const float d = mxfp4_scale(b[0]);
    for (int j = 0; j < 16; ++j) {
      y[j] = static_cast<float>(kValuesMXFP4[b[1 + j] & 15]) * d;
      y[j + 16] = static_cast<float>(kValuesMXFP4[b[1 + j] >> 4]) * d;
    }
  }
}

}  // namespace

const uint32_t* const kIQ3SGrid = kGridIQ3S;
const uint32_t* const kIQ3XXSGrid = kGridIQ3XXS;

namespace {
// One IQ3 sub-block against Q8_K in integers: grid entries idx[m] (elements 4m..4m+3), signs
// sg[l] (bit j: element 8l + j).
int iq3_sub_dot(const uint32_t* grid, const int* idx, const uint8_t* sg, const int8_t* xq) {
  int s = 0;
  for (int m = 0; m < 8; ++m)
    for (int j = 0; j < 4; ++j) {
      const int el = 4 * m + j, v = static_cast<int>((grid[idx[m]] >> (8 * j)) & 0xFF);
      s += ((sg[el / 8] >> (el % 8)) & 1 ? -v : v) * xq[el];
    }
  return s;
}
}  // namespace

void iq3xxs_signs(uint32_t aux, uint8_t* sg) {
  for (int l = 0; l < 4; ++l) sg[l] = signs7(aux >> (7 * l));
}

namespace {
// The IQ3 dots as ggml's vec_dot: per sub-block the integer dot times its integer scale (sub()
// fills the sub-block's 8 grid indices and 4 sign bytes and returns the scale), summed over the
// block, then one float multiply by d_w·d_x.
template <class B, class Sub>
float iq3_dot(const B* w, const BlockQ8_K* x, int64_t n, const uint32_t* grid, Sub sub) {
  float sum = 0.0f;
  for (int64_t i = 0; i < n / QK_K; ++i) {
    int bsum = 0;
    for (int ib = 0; ib < 8; ++ib) {
      int idx[8];
      uint8_t sg[4];
      const int ls = sub(w[i], ib, idx, sg);
      bsum += iq3_sub_dot(grid, idx, sg, x[i].qs + 32 * ib) * ls;
    }
    sum += f16_to_f32(w[i].d) * x[i].d * static_cast<float>(bsum);
  }
  return sum;
}
}  // namespace

// IQ3_S: scale 1 + 2s.
float ref_dot_iq3_s(const BlockIQ3_S* w, const BlockQ8_K* x, int64_t n) {
  return iq3_dot(w, x, n, kGridIQ3S, [](const BlockIQ3_S& b, int ib, int* idx, uint8_t* sg) {
    for (int m = 0; m < 8; ++m) idx[m] = b.qs[8 * ib + m] | (((b.qh[ib] >> m) & 1) << 8);
    std::memcpy(sg, b.signs + 4 * ib, 4);
    return 1 + 2 * ((b.scales[ib / 2] >> (4 * (ib % 2))) & 15);
  });
}

// IQ3_XXS: scale 2s + 1 and the sum over blocks times 0.25 (its (0.5 + s)·0.5 = (2s + 1)/4).
float ref_dot_iq3_xxs(const BlockIQ3_XXS* w, const BlockQ8_K* x, int64_t n) {
  return 0.25f * iq3_dot(w, x, n, kGridIQ3XXS, [](const BlockIQ3_XXS& b, int ib, int* idx, uint8_t* sg) {
    const uint32_t aux = rd32(b.qs + 64 + 4 * ib);
    for (int m = 0; m < 8; ++m) idx[m] = b.qs[8 * ib + m];
    iq3xxs_signs(aux, sg);
    return static_cast<int>(2 * (aux >> 28) + 1);
  });
}


const uint64_t* const kIQ2XXSGrid = kGridIQ2XXS;
const uint64_t* const kIQ2XSGrid = kGridIQ2XS;
const uint64_t* const kIQ2SGrid = kGridIQ2S;
const uint64_t* const kIQ1SGrid = kGridIQ1S;
const int8_t* const kMXFP4Values = kValuesMXFP4;

namespace {
// One IQ2 group against 8 Q8_K values in integers: Σ ±magnitude_j·x_j (sign bit j of sg).
int iq2_group_dot(uint64_t entry, uint8_t sg, const int8_t* xq) {
  int s = 0;
  for (int j = 0; j < 8; ++j) {
    const int v = gbyte(entry, j);
    s += ((sg >> j) & 1 ? -v : v) * xq[j];
  }
  return s;
}

// The IQ2 dots as ggml's vec_dot: per 16 elements (two groups) the integer dot times the integer
// scale 2s + 1 (group(b, g, sg) returns group g's grid entry and sets its sign byte; scale(b, h)
// the scale of 16-element half h), summed over the block; the block sums times d_w·d_x, and the
// total times 1/8 (the scale's (0.5 + s)·0.25 = (2s + 1)/8).
template <class B, class Group, class Scale>
float iq2_dot(const B* w, const BlockQ8_K* x, int64_t n, Group group, Scale scale) {
  float sum = 0.0f;
  for (int64_t i = 0; i < n / QK_K; ++i) {
    int bsum = 0;
    for (int h = 0; h < 16; ++h) {
      int s = 0;
      for (int g = 2 * h; g < 2 * h + 2; ++g) {
        uint8_t sg;
        const uint64_t e = group(w[i], g, sg);
        s += iq2_group_dot(e, sg, x[i].qs + 8 * g);
      }
      bsum += s * scale(w[i], h);
    }
    sum += f16_to_f32(w[i].d) * x[i].d * static_cast<float>(bsum);
  }
  return 0.125f * sum;
}
}  // namespace

float ref_dot_iq2_xxs(const BlockIQ2_XXS* w, const BlockQ8_K* x, int64_t n) {
  return iq2_dot(
      w, x, n,
      [](const BlockIQ2_XXS& b, int g, uint8_t& sg) {
        sg = signs7(rd32(b.qs + 8 * (g / 4) + 4) >> (7 * (g % 4)));
        return kGridIQ2XXS[b.qs[8 * (g / 4) + g % 4]];
      },
      [](const BlockIQ2_XXS& b, int h) { return static_cast<int>(2 * (rd32(b.qs + 8 * (h / 2) + 4) >> 28) + 1); });
}

float ref_dot_iq2_xs(const BlockIQ2_XS* w, const BlockQ8_K* x, int64_t n) {
  return iq2_dot(
      w, x, n,
      [](const BlockIQ2_XS& b, int g, uint8_t& sg) {
        sg = signs7(b.qs[g] >> 9);
        return kGridIQ2XS[b.qs[g] & 511];
      },
      [](const BlockIQ2_XS& b, int h) { return 2 * ((b.scales[h / 2] >> (4 * (h % 2))) & 15) + 1; });
}

float ref_dot_iq2_s(const BlockIQ2_S* w, const BlockQ8_K* x, int64_t n) {
  return iq2_dot(
      w, x, n,
      [](const BlockIQ2_S& b, int g, uint8_t& sg) {
        sg = b.signs[g];
        return kGridIQ2S[b.qs[g] | (((b.qh[g / 4] >> (2 * (g % 4))) & 3) << 8)];
      },
      [](const BlockIQ2_S& b, int h) { return 2 * ((b.scales[h / 2] >> (4 * (h % 2))) & 15) + 1; });
}

namespace {
// One IQ1 group against 8 Q8_K values: Σ g_j·x_j (g_j ∈ {−1, 0, 1}).
int iq1_group_dot(uint64_t entry, const int8_t* xq) {
  int s = 0;
  for (int j = 0; j < 8; ++j) s += static_cast<int8_t>(gbyte(entry, j)) * xq[j];
  return s;
}
int xsum8(const int8_t* xq) {
  int s = 0;
  for (int j = 0; j < 8; ++j) s += xq[j];
  return s;
}
}  // namespace

// IQ1_S as ggml's vec_dot: per block Σ ls·Σ g·x and Σ ls·(±1)·Σ x (the delta's), then
// d_w·d_x·(sumi + 0.125·sumi1).
float ref_dot_iq1_s(const BlockIQ1_S* w, const BlockQ8_K* x, int64_t n) {
  float sum = 0.0f;
  for (int64_t i = 0; i < n / QK_K; ++i) {
    const BlockIQ1_S& b = w[i];
    int sumi = 0, sumi1 = 0;
    for (int ib = 0; ib < 8; ++ib) {
      const uint16_t h = b.qh[ib];
      const int ls = 2 * ((h >> 12) & 7) + 1, delta = h & 0x8000 ? -1 : 1;
      int lsum = 0;
      for (int l = 0; l < 4; ++l)
        lsum += iq1_group_dot(kGridIQ1S[b.qs[4 * ib + l] | (((h >> (3 * l)) & 7) << 8)], x[i].qs + 32 * ib + 8 * l);
      sumi += ls * lsum;
      sumi1 += ls * delta * (x[i].bsums[2 * ib] + x[i].bsums[2 * ib + 1]);
    }
    sum += f16_to_f32(b.d) * x[i].d * (static_cast<float>(sumi) + kIQ1Delta * static_cast<float>(sumi1));
  }
  return sum;
}

// IQ1_M as ggml's vec_dot: as IQ1_S with per-16 scales and a delta sign per group.
float ref_dot_iq1_m(const BlockIQ1_M* w, const BlockQ8_K* x, int64_t n) {
  float sum = 0.0f;
  for (int64_t i = 0; i < n / QK_K; ++i) {
    const BlockIQ1_M& b = w[i];
    uint16_t sc[4];
    std::memcpy(sc, b.scales, 8);
    int sumi1 = 0, sumi2 = 0;
    for (int ib = 0; ib < 8; ++ib) {
      int s1[2] = {0, 0}, s2[2] = {0, 0};
      for (int l = 0; l < 4; ++l) {
        const int nib = (b.qh[2 * ib + l / 2] >> (4 * (l % 2))) & 15;
        const int8_t* xq = x[i].qs + 32 * ib + 8 * l;
        s1[l / 2] += iq1_group_dot(kGridIQ1S[b.qs[4 * ib + l] | ((nib & 7) << 8)], xq);
        s2[l / 2] += (nib & 8 ? -1 : 1) * xsum8(xq);
      }
      const int sh = 6 * (ib % 2);
      const int ls1 = 2 * ((sc[ib / 2] >> sh) & 7) + 1, ls2 = 2 * ((sc[ib / 2] >> (sh + 3)) & 7) + 1;
      sumi1 += s1[0] * ls1 + s1[1] * ls2;
      sumi2 += s2[0] * ls1 + s2[1] * ls2;
    }
    sum += f16_to_f32(iq1m_d_bits(b)) * x[i].d * (static_cast<float>(sumi1) + kIQ1Delta * static_cast<float>(sumi2));
  }
  return sum;
}

// MXFP4 as ggml's vec_dot against Q8_0: per block (2^(e − 128)·d_x)·Σ value·x_q.
float ref_dot_mxfp4(const BlockMXFP4* w, const BlockQ8_0* x, int64_t n) {
  float sum = 0.0f;
  for (int64_t i = 0; i < n / 32; ++i) {
    int s = 0;
    for (int j = 0; j < 16; ++j)
      s += kValuesMXFP4[w[i].qs[j] & 15] * x[i].qs[j] + kValuesMXFP4[w[i].qs[j] >> 4] * x[i].qs[j + 16];
    sum += mxfp4_scale(w[i].e) * f16_to_f32(x[i].d) * static_cast<float>(s);
  }
  return sum;
}

bool is_codebook_type(DType t) {
  switch (t) {
    case DType::IQ2_XXS:
    case DType::IQ2_XS:
    case DType::IQ2_S:
    case DType::IQ3_XXS:
    case DType::IQ3_S:
    case DType::IQ1_S:
    case DType::IQ1_M:
    case DType::MXFP4: return true;
    default: return false;
  }
}

bool ref_dequantize_codebook(DType t, const void* src, float* dst, int64_t n) {
  const auto* b = static_cast<const uint8_t*>(src);
  switch (t) {
    case DType::IQ2_XXS: dequant_iq2_xxs(b, dst, n / QK_K); return true;
    case DType::IQ2_XS: dequant_iq2_xs(b, dst, n / QK_K); return true;
    case DType::IQ2_S: dequant_iq2_s(b, dst, n / QK_K); return true;
    case DType::IQ3_XXS: dequant_iq3_xxs(b, dst, n / QK_K); return true;
    case DType::IQ3_S: dequant_iq3_s(b, dst, n / QK_K); return true;
    case DType::IQ1_S: dequant_iq1_s(b, dst, n / QK_K); return true;
    case DType::IQ1_M: dequant_iq1_m(b, dst, n / QK_K); return true;
    case DType::MXFP4: dequant_mxfp4(b, dst, n / 32); return true;
    default: return false;
  }
}

}  // namespace oxi::kern
