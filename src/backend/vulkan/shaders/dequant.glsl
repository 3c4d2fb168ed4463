// Weight rows as the GGUF file lays them out, read from a uint array W (binding 0) and
// dequantised 32 elements (a "chunk") at a time; the includer enables GL_EXT_control_flow_attributes
// (the loops are unrolled so that v stays in registers). Rows start at any byte (Q8_0 blocks are 34 bytes),
// so fields are read by byte offset: quants four at a time (word_at), scales byte by byte. TYPE (a -D define) selects the layout:
//   0 F32, 1 F16, 30 BF16, 8 Q8_0, 2 Q4_0, 3 Q4_1, 6 Q5_0, 7 Q5_1, 20 IQ4_NL, 10 Q2_K, 11 Q3_K,
//   12 Q4_K, 13 Q5_K, 14 Q6_K, 23 IQ4_XS   (ggml type ids; layouts as kernels/quant.h documents them)
// load_chunk(row, j, v): elements [32j, 32j + 32) of the row whose first byte is `row`; for the
// float types the last chunk of a row may be short (elements past `cols` are set to 0 and never
// read from W). K-quant and IQ4_XS rows are whole 256-element super-blocks (cols % 256 == 0).
#ifndef OXI_DEQUANT_GLSL
#define OXI_DEQUANT_GLSL

uint byte_at(uint o) { return (W[o >> 2] >> ((o & 3u) * 8u)) & 0xFFu; }
uint u16_at(uint o) {  // o even
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
