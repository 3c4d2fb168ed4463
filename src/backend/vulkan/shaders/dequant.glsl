// Weight rows as the GGUF file lays them out, read from a uint array W (binding 0) and
// dequantised 32 elements (a "chunk") at a time; the includer enables GL_EXT_control_flow_attributes
// (the loops are unrolled so that v stays in registers). Rows start at any byte (Q8_0 blocks are 34 bytes),
// so fields are read by byte offset: quants four at a time (word_at), scales byte by byte. TYPE (a -D define) selects the layout:
//   0 F32, 1 F16, 30 BF16, 8 Q8_0, 2 Q4_0, 3 Q4_1, 6 Q5_0, 7 Q5_1, 20 IQ4_NL, 39 MXFP4, 10 Q2_K,
//   11 Q3_K, 12 Q4_K, 13 Q5_K, 14 Q6_K, 23 IQ4_XS, 16 IQ2_XXS, 17 IQ2_XS, 22 IQ2_S, 18 IQ3_XXS,
//   21 IQ3_S, 19 IQ1_S, 29 IQ1_M; MLX affine groups 1010..1012 (4-bit, G 32/64/128) and 1013..1015
//   (8-bit)   (ggml type ids, format/dtype.h's for MLX; layouts as kernels/quant.h and kernels/ref_iq.cpp
//   document them)
// load_chunk(row, j, v): elements [32j, 32j + 32) of the row whose first byte is `row`; for the
// float types the last chunk of a row may be short (elements past `cols` are set to 0 and never
// read from W). K-quant and IQ rows (IQ4_NL's aside) are whole 256-element super-blocks
// (cols % 256 == 0); there a chunk is one 32-element sub-block.
#ifndef OXI_DEQUANT_GLSL
#define OXI_DEQUANT_GLSL

uint byte_at(uint o) { return (W[o >> 2] >> ((o & 3u) * 8u)) & 0xFFu; }
uint u16_at(uint o) {  // o even (IQ2_XS / IQ1 blocks have even sizes, so their u16 fields are)
  return (W[o >> 2] >> ((o & 2u) * 8u)) & 0xFFFFu;
}
float f16_at(uint o) { return unpackHalf2x16(u16_at(o)).x; }
int i8_at(uint o) { return int(byte_at(o) << 24) >> 24; }
// The 4 bytes from byte o on, little-endian, at any alignment (every byte read exists in the row,
// so the second word does too).
uint word_at(uint o) {
  uint s = (o & 3u) * 8u, w = W[o >> 2];
  return s == 0u ? w : (w >> s) | (W[(o >> 2) + 1u] << (32u - s));
}

// 6-bit scale and min of sub-block s (0..7) of a Q4_K / Q5_K block whose 12 scale bytes start at o.
void scale_min_k4(uint o, uint s, out float sc, out float m) {
  if (s < 4u) {
    sc = float(byte_at(o + s) & 63u);
    m = float(byte_at(o + s + 4u) & 63u);
  } else {
    sc = float((byte_at(o + s + 4u) & 0xFu) | ((byte_at(o + s - 4u) >> 6) << 4));
    m = float((byte_at(o + s + 4u) >> 4) | ((byte_at(o + s) >> 6) << 4));
  }
}

#if TYPE == 16 || TYPE == 17 || TYPE == 18 || TYPE == 19 || TYPE == 21 || TYPE == 22 || TYPE == 29
// The IQ codebooks (the kernels' tables, kernels/iq_grids.inc) in one buffer the device uploads
// once (VulkanDevice's grids_, bound to binding 3 of every weight-reading shader), at these word
// offsets; a 64-bit IQ2 / IQ1 entry i is words 2i (bytes 0..3) and 2i + 1 (bytes 4..7).
layout(std430, binding = 3) readonly buffer Tb { uint T[]; };
const uint kGridIQ2XXS = 0u, kGridIQ2XS = 512u, kGridIQ2S = 1536u, kGridIQ3XXS = 3584u, kGridIQ3S = 3840u, kGridIQ1S = 4352u;
#endif

// The 8 sign bits of an IQ group stored as 7: the eighth makes the count of negatives even.
uint signs7(uint v) {
  v &= 127u;
  return v | ((uint(bitCount(v)) & 1u) << 7);
}
// IQ2 / IQ3 group of 8: v[8l + e] = db · magnitude e (byte e of g0 then g1), negated where sign bit
// e is set (the order of ggml's to_float: the scale product first, then × magnitude).
void put_group(inout float v[32], uint l, float db, uint g0, uint g1, uint sg) {
  [[unroll]] for (uint e = 0u; e < 8u; ++e) {
    float m = db * float(((e < 4u ? g0 : g1) >> (8u * (e & 3u))) & 0xFFu);
    v[8u * l + e] = ((sg >> e) & 1u) != 0u ? -m : m;
  }
}

#if TYPE == 39
// MXFP4: a nibble indexes the doubled E2M1 values.
const float kMXFP4[16] = float[16](0.0, 1.0, 2.0, 3.0, 4.0, 6.0, 8.0, 12.0, 0.0, -1.0, -2.0, -3.0, -4.0, -6.0, -8.0, -12.0);
#endif

#if TYPE == 20 || TYPE == 23
// IQ4_NL / IQ4_XS: a nibble indexes this fixed non-linear table.
const float kIQ4NL[16] = float[16](-127.0, -104.0, -83.0, -65.0, -49.0, -35.0, -22.0, -10.0, 1.0, 13.0, 25.0, 38.0, 53.0, 69.0, 89.0, 113.0);
#endif

void load_chunk(uint row, uint j, uint cols, out float v[32]) {
#if TYPE == 0 || TYPE == 1 || TYPE == 30
  uint base = 32u * j;
  if (base + 32u <= cols) {  // a whole chunk: 16 words of f16/bf16 pairs, or 32 f32 words
    [[unroll]] for (uint k = 0u; k < 16u; ++k) {
#if TYPE == 0
      v[2u * k] = uintBitsToFloat(W[(row >> 2) + base + 2u * k]);
      v[2u * k + 1u] = uintBitsToFloat(W[(row >> 2) + base + 2u * k + 1u]);
#elif TYPE == 1
      vec2 h = unpackHalf2x16(word_at(row + 2u * (base + 2u * k)));
      v[2u * k] = h.x;
      v[2u * k + 1u] = h.y;
#else
      uint w = word_at(row + 2u * (base + 2u * k));
      v[2u * k] = uintBitsToFloat(w << 16);
      v[2u * k + 1u] = uintBitsToFloat(w & 0xFFFF0000u);
#endif
    }
    return;
  }
  [[unroll]] for (uint i = 0u; i < 32u; ++i) {  // the row's last, short chunk: zeros past cols
    uint e = base + i;
    if (e >= cols) { v[i] = 0.0; continue; }
#if TYPE == 0
    v[i] = uintBitsToFloat(W[(row >> 2) + e]);
#elif TYPE == 1
    v[i] = f16_at(row + 2u * e);
#else
    v[i] = uintBitsToFloat(u16_at(row + 2u * e) << 16);
#endif
  }
#elif TYPE == 8  // Q8_0: f16 d, 32 × int8
  uint o = row + 34u * j;
  float d = f16_at(o);
  [[unroll]] for (uint k = 0u; k < 8u; ++k) {
    uint w = word_at(o + 2u + 4u * k);
    [[unroll]] for (uint b = 0u; b < 4u; ++b) v[4u * k + b] = d * float(int(w << (24u - 8u * b)) >> 24);
  }
#elif TYPE == 2  // Q4_0: f16 d, 16 bytes: low nibbles elements 0..15, high 16..31, minus 8
  uint o = row + 18u * j;
  float d = f16_at(o);
  [[unroll]] for (uint k = 0u; k < 4u; ++k) {
    uint w = word_at(o + 2u + 4u * k);
    [[unroll]] for (uint b = 0u; b < 4u; ++b) {
      uint q = w >> (8u * b);
      v[4u * k + b] = d * (float(q & 15u) - 8.0);
      v[4u * k + b + 16u] = d * (float((q >> 4) & 15u) - 8.0);
    }
  }
#elif TYPE == 3 || TYPE == 6 || TYPE == 7  // Q4_1 / Q5_0 / Q5_1: 32-element blocks, low nibbles 0..15, high 16..31
#if TYPE == 3
  uint o = row + 20u * j, qs = o + 4u;  // f16 d, f16 m, 16 bytes
  float d = f16_at(o), m = f16_at(o + 2u);
#elif TYPE == 6
  uint o = row + 22u * j, qs = o + 6u;  // f16 d, u32 qh, 16 bytes; value (q − 16)·d
  float d = f16_at(o), m = -16.0 * d;
  uint qh = word_at(o + 2u);
#else
  uint o = row + 24u * j, qs = o + 8u;  // f16 d, f16 m, u32 qh, 16 bytes
  float d = f16_at(o), m = f16_at(o + 2u);
  uint qh = word_at(o + 4u);
#endif
  [[unroll]] for (uint k = 0u; k < 4u; ++k) {
    uint w = word_at(qs + 4u * k);
    [[unroll]] for (uint b = 0u; b < 4u; ++b) {
      uint e = 4u * k + b, q = w >> (8u * b), lo = q & 15u, hi = (q >> 4) & 15u;
#if TYPE != 3
      lo |= ((qh >> e) & 1u) << 4;  // fifth bits: bit e of qh for element e, bit e + 16 for e + 16
      hi |= ((qh >> (e + 16u)) & 1u) << 4;
#endif
#if TYPE == 6
      v[e] = (float(lo) - 16.0) * d;
      v[e + 16u] = (float(hi) - 16.0) * d;
#else
      v[e] = float(lo) * d + m;
      v[e + 16u] = float(hi) * d + m;
#endif
    }
  }
#elif TYPE == 20 || TYPE == 23  // IQ4_NL: f16 d, 16 bytes. IQ4_XS: chunk = sub-block s of a 136-byte super-block
#if TYPE == 20
  uint o = row + 18u * j, qs = o + 2u;
  float dl = f16_at(o);
#else
  uint s = j & 7u, o = row + 136u * (j >> 3), qs = o + 8u + 16u * s;  // f16 d, u16 scales_h, scales_l[4], qs[128]
  uint ls = ((byte_at(o + 4u + (s >> 1)) >> (4u * (s & 1u))) & 15u) | (((u16_at(o + 2u) >> (2u * s)) & 3u) << 4);
  float dl = f16_at(o) * (float(ls) - 32.0);
#endif
  [[unroll]] for (uint k = 0u; k < 4u; ++k) {
    uint w = word_at(qs + 4u * k);
    [[unroll]] for (uint b = 0u; b < 4u; ++b) {
      uint q = w >> (8u * b);
      v[4u * k + b] = dl * kIQ4NL[q & 15u];
      v[4u * k + b + 16u] = dl * kIQ4NL[(q >> 4) & 15u];
    }
  }
#elif TYPE == 39  // MXFP4: E8M0 exponent byte e, 16 bytes: low nibbles elements 0..15, high 16..31; × 2^(e − 128)
  uint o = row + 17u * j, e8 = byte_at(o);
  float d = uintBitsToFloat(e8 < 2u ? (0x00200000u << e8) : ((e8 - 1u) << 23));
  [[unroll]] for (uint k = 0u; k < 16u; ++k) {
    uint b = byte_at(o + 1u + k);
    v[k] = kMXFP4[b & 15u] * d;
    v[k + 16u] = kMXFP4[b >> 4] * d;
  }
#elif TYPE == 16 || TYPE == 17 || TYPE == 22  // IQ2_XXS / IQ2_XS / IQ2_S: 4 groups, an 8-magnitude grid entry each
  uint ib = j & 7u;
#if TYPE == 16  // d, then per sub-block 4 index bytes and a u32 (signs 7 bits per group, bits 28..31 s)
  uint o = row + 66u * (j >> 3), aux = word_at(o + 6u + 8u * ib);
  float db0 = f16_at(o) * (0.5 + float(aux >> 28)) * 0.25, db1 = db0;
#else  // IQ2_XS: d, 32 u16 (9-bit index | 7 sign bits << 9), scales[8]; IQ2_S: d, qs[32], signs[32], qh[8], scales[8]
#if TYPE == 17
  uint o = row + 74u * (j >> 3), sc = byte_at(o + 66u + ib);
#else
  uint o = row + 82u * (j >> 3), sc = byte_at(o + 74u + ib), qh = byte_at(o + 66u + ib);
#endif
  float d = f16_at(o), db0 = d * (0.5 + float(sc & 15u)) * 0.25, db1 = d * (0.5 + float(sc >> 4)) * 0.25;
#endif
  [[unroll]] for (uint l = 0u; l < 4u; ++l) {
#if TYPE == 16
    uint gi = byte_at(o + 2u + 8u * ib + l), sg = signs7(aux >> (7u * l));
#elif TYPE == 17
    uint q = u16_at(o + 2u + 2u * (4u * ib + l)), gi = q & 511u, sg = signs7(q >> 9);
#else
    uint gi = byte_at(o + 2u + 4u * ib + l) | (((qh >> (2u * l)) & 3u) << 8), sg = byte_at(o + 34u + 4u * ib + l);
#endif
#if TYPE == 16
    put_group(v, l, db0, T[kGridIQ2XXS + 2u * gi], T[kGridIQ2XXS + 2u * gi + 1u], sg);
#elif TYPE == 17
    put_group(v, l, l < 2u ? db0 : db1, T[kGridIQ2XS + 2u * gi], T[kGridIQ2XS + 2u * gi + 1u], sg);
#else
    put_group(v, l, l < 2u ? db0 : db1, T[kGridIQ2S + 2u * gi], T[kGridIQ2S + 2u * gi + 1u], sg);
#endif
  }
#elif TYPE == 18 || TYPE == 21  // IQ3_XXS / IQ3_S: 4 groups, two 4-magnitude grid entries each
  uint ib = j & 7u;
#if TYPE == 18  // d, 64 index bytes, then per sub-block a u32 as IQ2_XXS's
  uint o = row + 98u * (j >> 3), aux = word_at(o + 66u + 4u * ib);
  float db = f16_at(o) * (0.5 + float(aux >> 28)) * 0.5;
#else  // d, qs[64] (low 8 index bits), qh[8] (ninth bits), signs[32], scales[4] (a nibble per sub-block)
  uint o = row + 110u * (j >> 3), qh = byte_at(o + 66u + ib);
  float db = f16_at(o) * float(1u + 2u * ((byte_at(o + 106u + (ib >> 1)) >> (4u * (ib & 1u))) & 15u));
#endif
  [[unroll]] for (uint l = 0u; l < 4u; ++l) {
    uint q0 = byte_at(o + 2u + 8u * ib + 2u * l), q1 = byte_at(o + 3u + 8u * ib + 2u * l);
#if TYPE == 18
    put_group(v, l, db, T[kGridIQ3XXS + q0], T[kGridIQ3XXS + q1], signs7(aux >> (7u * l)));
#else
    q0 |= ((qh >> (2u * l)) & 1u) << 8;
    q1 |= ((qh >> (2u * l + 1u)) & 1u) << 8;
    put_group(v, l, db, T[kGridIQ3S + q0], T[kGridIQ3S + q1], byte_at(o + 74u + 4u * ib + l));
#endif
  }
#elif TYPE == 19 || TYPE == 29  // IQ1_S / IQ1_M: 4 groups of 8 ternary grid values, dl · (g + delta)
  uint ib = j & 7u;
#if TYPE == 19  // d, qs[32] (low 8 of 11-bit indices), qh[8] u16: index bits 3l.., s at 12..14, delta sign 15
  uint o = row + 50u * (j >> 3), h = u16_at(o + 34u + 2u * ib);
  float dl0 = f16_at(o) * float(2u * ((h >> 12) & 7u) + 1u), dl1 = dl0;
#else  // qs[32], qh[16] (a nibble per group: index bits 8..10, bit 3 the delta's sign), 4 u16 scales (+ d's bits)
  uint o = row + 56u * (j >> 3);
  uint s0 = u16_at(o + 48u), s1 = u16_at(o + 50u), s2 = u16_at(o + 52u), s3 = u16_at(o + 54u);
  float d = unpackHalf2x16((s0 >> 12) | ((s1 >> 8) & 0xF0u) | ((s2 >> 4) & 0xF00u) | (s3 & 0xF000u)).x;
  uint scw = u16_at(o + 48u + 2u * (ib >> 1)), sh = 6u * (ib & 1u);
  float dl0 = d * float(2u * ((scw >> sh) & 7u) + 1u), dl1 = d * float(2u * ((scw >> (sh + 3u)) & 7u) + 1u);
#endif
  [[unroll]] for (uint l = 0u; l < 4u; ++l) {
#if TYPE == 19
    uint gi = byte_at(o + 2u + 4u * ib + l) | (((h >> (3u * l)) & 7u) << 8);
    float delta = (h & 0x8000u) != 0u ? -0.125 : 0.125;
#else
    uint nib = (byte_at(o + 32u + 2u * ib + (l >> 1)) >> (4u * (l & 1u))) & 15u;
    uint gi = byte_at(o + 4u * ib + l) | ((nib & 7u) << 8);
    float delta = (nib & 8u) != 0u ? -0.125 : 0.125;
#endif
    uint g0 = T[kGridIQ1S + 2u * gi], g1 = T[kGridIQ1S + 2u * gi + 1u];
    float dl = l < 2u ? dl0 : dl1;
    [[unroll]] for (uint e = 0u; e < 8u; ++e) {
      int g = int((((e < 4u ? g0 : g1) >> (8u * (e & 3u))) & 0xFFu) << 24) >> 24;
      v[8u * l + e] = dl * (float(g) + delta);
    }
  }
#elif TYPE >= 1010 && TYPE <= 1015  // MLX groups of G: f32 scale s, f32 bias b, G codes; value = s·q + b
  const uint G = (TYPE == 1010 || TYPE == 1013) ? 32u : (TYPE == 1011 || TYPE == 1014) ? 64u : 128u;
  const uint BITS = TYPE <= 1012 ? 4u : 8u;
  uint o = row + (8u + G * BITS / 8u) * (32u * j / G), e0 = (32u * j) % G;  // the chunk's group, its first element there
  float sc = uintBitsToFloat(word_at(o)), bias = uintBitsToFloat(word_at(o + 4u));
  const uint PER = 32u / BITS;  // codes per word: the chunk is BITS words (4-bit: 4 of 8; 8-bit: 8 of 4)
  [[unroll]] for (uint k = 0u; k < BITS; ++k) {
    uint w = word_at(o + 8u + e0 * BITS / 8u + 4u * k);
    [[unroll]] for (uint e = 0u; e < PER; ++e) v[k * PER + e] = sc * float((w >> (BITS * e)) & ((1u << BITS) - 1u)) + bias;
  }
#elif TYPE == 10  // Q2_K: scales[16] qs[64] f16 d, f16 dmin; chunk c = plane g of half h (elements 128h + 32g …)
  uint c = j & 7u, h = c >> 2, g = c & 3u;
  uint o = row + 84u * (j >> 3);
  float d = f16_at(o + 80u), dmin = f16_at(o + 82u);
  // the two 16-element sub-blocks of the chunk: scale bytes 8h + 2g and 8h + 2g + 1, the low
  // nibble the scale, the high nibble the min (both 4 bits, times d / dmin)
  uint sb0 = byte_at(o + 8u * h + 2u * g), sb1 = byte_at(o + 8u * h + 2u * g + 1u);
  float a0 = d * float(sb0 & 15u), b0 = dmin * float(sb0 >> 4), a1 = d * float(sb1 & 15u), b1 = dmin * float(sb1 >> 4);
  [[unroll]] for (uint k = 0u; k < 8u; ++k) {
    uint wq = word_at(o + 16u + 32u * h + 4u * k) >> (2u * g);
    [[unroll]] for (uint e = 0u; e < 4u; ++e) {
      float q = float((wq >> (8u * e)) & 3u);
      v[4u * k + e] = k < 4u ? a0 * q - b0 : a1 * q - b1;
    }
  }
#elif TYPE == 11  // Q3_K: hmask[32] qs[64] scales[12] f16 d; chunk c = plane g of half h (elements 128h + 32g …)
  uint c = j & 7u, h = c >> 2, g = c & 3u;
  uint o = row + 110u * (j >> 3);
  float d = f16_at(o + 108u);
  // the two 16-element sub-blocks of the chunk: scales 8h + 2g and 8h + 2g + 1, 6 bits biased by 32
  float sc[2];
  [[unroll]] for (uint t = 0u; t < 2u; ++t) {
    uint is = 8u * h + 2u * g + t;
    uint low = (byte_at(o + 96u + (is & 7u)) >> (is < 8u ? 0u : 4u)) & 15u;
    uint high = (byte_at(o + 104u + (is & 3u)) >> (2u * (is >> 2))) & 3u;
    sc[t] = d * (float(low | (high << 4)) - 32.0);
  }
  uint hbit = 4u * h + g;
  [[unroll]] for (uint k = 0u; k < 8u; ++k) {
    uint wq = word_at(o + 32u + 32u * h + 4u * k) >> (2u * g), wm = word_at(o + 4u * k) >> hbit;
    [[unroll]] for (uint e = 0u; e < 4u; ++e) {
      int q = int((wq >> (8u * e)) & 3u) - (((wm >> (8u * e)) & 1u) != 0u ? 0 : 4);
      v[4u * k + e] = (k < 4u ? sc[0] : sc[1]) * float(q);
    }
  }
#elif TYPE == 12 || TYPE == 13  // Q4_K / Q5_K: chunk = sub-block s of super-block j / 8
  uint s = j & 7u;
#if TYPE == 12
  uint o = row + 144u * (j >> 3), qs = o + 16u + 32u * (s >> 1);
#else
  uint o = row + 176u * (j >> 3), qs = o + 48u + 32u * (s >> 1);
#endif
  float d = f16_at(o), dmin = f16_at(o + 2u), sc, mn;
  scale_min_k4(o + 4u, s, sc, mn);
  float a = d * sc, b = dmin * mn;
  uint shift = (s & 1u) * 4u;
  [[unroll]] for (uint k = 0u; k < 8u; ++k) {
    uint w = word_at(qs + 4u * k) >> shift;
#if TYPE == 13
    uint h = word_at(o + 16u + 4u * k) >> s;  // fifth bit: bit s of qh[l]
#endif
    [[unroll]] for (uint e = 0u; e < 4u; ++e) {
      uint q = (w >> (8u * e)) & 15u;
#if TYPE == 13
      q |= ((h >> (8u * e)) & 1u) << 4;
#endif
      v[4u * k + e] = a * float(q) - b;
    }
  }
#elif TYPE == 14  // Q6_K: ql[128] qh[64] int8 scales[16] f16 d; chunk = quarter g of half h
  uint c = j & 7u, h = c >> 2, g = c & 3u;
  uint o = row + 210u * (j >> 3);
  float d = f16_at(o + 208u);
  uint ql = o + 64u * h + ((g & 1u) != 0u ? 32u : 0u), qh = o + 128u + 32u * h;
  uint nshift = (g >> 1) * 4u, hshift = 2u * g;
  float s0 = d * float(i8_at(o + 192u + 8u * h + 2u * g)), s1 = d * float(i8_at(o + 193u + 8u * h + 2u * g));
  [[unroll]] for (uint k = 0u; k < 8u; ++k) {
    uint wl = word_at(ql + 4u * k) >> nshift, wh = word_at(qh + 4u * k) >> hshift;
    [[unroll]] for (uint e = 0u; e < 4u; ++e) {
      int q = int(((wl >> (8u * e)) & 15u) | (((wh >> (8u * e)) & 3u) << 4)) - 32;
      v[4u * k + e] = (k < 4u ? s0 : s1) * float(q);
    }
  }
#else
#error unknown TYPE
#endif
}

#endif
