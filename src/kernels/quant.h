// ggml-compatible quantisation block layouts and the scalar reference routines (dequantise,
// quantise, per-block dot products). Internal to the kernels library and its tests.
#pragma once

#include <cstddef>
#include <cstdint>

#include "format/dtype.h"

namespace oxi::kern {

constexpr int QK8_0 = 32;
constexpr int QK4_0 = 32;
constexpr int QK_K = 256;

#pragma pack(push, 1)
struct BlockQ8_0 {  // 34 bytes: value = qs[i] * d
  uint16_t d;  // f16
  int8_t qs[32];
};
struct BlockQ4_0 {  // 18 bytes: value = (nibble - 8) * d; low nibbles: 0..15, high: 16..31
  uint16_t d;
  uint8_t qs[16];
};
// The 32-element fallback types of llama.cpp's recipes. Q4_1: value = q·d + m (q the nibble;
// low nibbles elements 0..15, high 16..31, as Q4_0). Q5_0: value = (q − 16)·d, q = nibble | bit j
// of qh << 4 for element j. Q5_1: value = q·d + m, q as Q5_0's. IQ4_NL: value = d·kIQ4NL[nibble].
struct BlockQ4_1 {  // 20 bytes
  uint16_t d;
  uint16_t m;
  uint8_t qs[16];
};
struct BlockQ5_0 {  // 22 bytes
  uint16_t d;
  uint8_t qh[4];
  uint8_t qs[16];
};
struct BlockQ5_1 {  // 24 bytes
  uint16_t d;
  uint16_t m;
  uint8_t qh[4];
  uint8_t qs[16];
};
struct BlockIQ4_NL {  // 18 bytes
  uint16_t d;
  uint8_t qs[16];
};
// Q8_1: activation blocks for Q4_1 / Q5_1 (ggml's vec_dot_type for them): Q8_0 plus
// s = d·Σqs (d the unrounded amax/127, the product rounded to f16), which carries the min term.
struct BlockQ8_1 {  // 36 bytes
  uint16_t d;
  uint16_t s;
  int8_t qs[32];
};
// Q4_K: 8 sub-blocks of 32 with 6-bit scale and min each (packed in 12 bytes);
// value = d * sc[j] * q - dmin * m[j]. Every 64 elements use 32 bytes of qs: low nibbles are
// the first 32 elements (sub-block 2k), high nibbles the next 32 (sub-block 2k+1).
struct BlockQ4_K {  // 144 bytes
  uint16_t d;
  uint16_t dmin;
  uint8_t scales[12];
  uint8_t qs[128];
};
// Q5_K: as Q4_K plus a fifth bit per element in qh: for the k-th 64-element group, bit 2k of
// qh[l] is the high bit of element l (l < 32) and bit 2k+1 that of element 32 + l.
struct BlockQ5_K {  // 176 bytes
  uint16_t d;
  uint16_t dmin;
  uint8_t scales[12];
  uint8_t qh[32];
  uint8_t qs[128];
};
// Q6_K: 16 sub-blocks of 16 with int8 scales; value = d * sc * (q - 32), q 6-bit: 4 low bits in
// ql, 2 high bits in qh (see dequantize_q6_K for the interleave).
struct BlockQ6_K {  // 210 bytes
  uint8_t ql[128];
  uint8_t qh[64];
  int8_t scales[16];
  uint16_t d;
};
// Q3_K: 16 sub-blocks of 16 with 6-bit scales biased by 32 (12 bytes: low nibbles of bytes 0..7
// are scales 0..7, their high nibbles scales 8..15; bits 2i..2i+1 of byte 8 + j are the high bits
// of scale 4i + j). value = d·(sc − 32)·(q − 4·(1 − h)): q the 2-bit field (shift 2g of byte
// 32h + l of qs for element 128h + 32g + l), h bit 4h + g of hmask[l].
struct BlockQ3_K {  // 110 bytes
  uint8_t hmask[32];
  uint8_t qs[64];
  uint8_t scales[12];
  uint16_t d;
};
// Q2_K: 16 sub-blocks of 16, scales[j] low nibble the scale, high nibble the min of sub-block j;
// value = d·sc·q − dmin·m, q the 2-bit field at shift 2g of byte 32h + l of qs for element
// 128h + 32g + l (as Q3_K's, without the hmask bit).
struct BlockQ2_K {  // 84 bytes
  uint8_t scales[16];
  uint8_t qs[64];
  uint16_t d;
  uint16_t dmin;
};
// IQ3_S: 8 sub-blocks of 32 = 4 groups of 8 = 8 grid entries of 4 magnitudes (kIQ3SGrid, 9-bit
// index: qs[8ib + m] | bit m of qh[ib] << 8), sign bits per group (signs[4ib + l], bit j: element
// 8l + j), scale nibble s (scales[ib/2], low for even ib); value = d·(1 + 2s)·±magnitude.
struct BlockIQ3_S {  // 110 bytes
  uint16_t d;
  uint8_t qs[64];
  uint8_t qh[8];
  uint8_t signs[32];
  uint8_t scales[4];
};
// IQ3_XXS: as IQ3_S with 8-bit indices (qs[8ib + m]) into kIQ3XXSGrid; after the 64 index bytes,
// a u32 per sub-block: bits 7l..7l+6 group l's signs (eighth bit: even parity), bits 28..31 s;
// value = d·(2s + 1)/4·±magnitude.
struct BlockIQ3_XXS {  // 98 bytes
  uint16_t d;
  uint8_t qs[96];
};
// The IQ3 codebooks (the format's data, kernels/iq_grids.inc): entry i's byte j is magnitude j.
extern const uint32_t* const kIQ3SGrid;
extern const uint32_t* const kIQ3XXSGrid;
// IQ3_XXS sign bytes of one sub-block (4 groups) from its u32.
void iq3xxs_signs(uint32_t aux, uint8_t* sg);
// IQ2_XXS: 8 sub-blocks of 32, each 8 bytes of qs: 4 indices into kIQ2XXSGrid (one 8-magnitude
// entry per group), then a u32 as IQ3_XXS's (signs, bits 28..31 s); value = d·(2s + 1)/8·±g.
struct BlockIQ2_XXS {  // 66 bytes
  uint16_t d;
  uint8_t qs[64];
};
// IQ2_XS: qs[4ib + l] = 9-bit index into kIQ2XSGrid | 7 sign bits << 9; scales[ib]: low nibble
// for groups 0-1, high for 2-3 (per 16 elements); value = d·(2s + 1)/8·±g.
struct BlockIQ2_XS {  // 74 bytes
  uint16_t d;
  uint16_t qs[32];
  uint8_t scales[8];
};
// IQ2_S: 10-bit indices into kIQ2SGrid (qs[4ib + l] | bits 2l..2l+1 of qh[ib] << 8), one sign
// byte per group (signs[4ib + l]), scales as IQ2_XS's.
struct BlockIQ2_S {  // 82 bytes
  uint16_t d;
  uint8_t qs[32];
  uint8_t signs[32];
  uint8_t qh[8];
  uint8_t scales[8];
};
// IQ1_S: 11-bit indices into kIQ1SGrid (entries of 8 signed bytes −1/0/1: qs[4ib + l] | bits
// 3l..3l+2 of qh[ib] << 8); qh bits 12..14 s, bit 15 the delta's sign; value = d·(2s + 1)·(g ± 1/8).
struct BlockIQ1_S {  // 50 bytes
  uint16_t d;
  uint8_t qs[32];
  uint16_t qh[8];
};
// IQ1_M: indices as IQ1_S's with nibble l%2 of qh[2ib + l/2] (bits 0-2: index bits 8-10, bit 3:
// the group's delta sign); 3-bit scales per 16 elements (u16 ib/2 of scales, bits 6(ib%2) + 0..2
// for groups 0-1, + 3..5 for 2-3); the f16 d in the four u16s' top nibbles.
struct BlockIQ1_M {  // 56 bytes
  uint8_t qs[32];
  uint8_t qh[16];
  uint8_t scales[8];
};
// MXFP4: E8M0 exponent e, qs[16] nibbles (low: elements 0..15, high: 16..31) into kMXFP4Values
// (doubled E2M1 values); value = kMXFP4Values[nibble]·2^(e − 128) (kq_scales.h: mxfp4_scale).
struct BlockMXFP4 {  // 17 bytes
  uint8_t e;
  uint8_t qs[16];
};
// The IQ2 / IQ1 codebooks (kernels/iq_grids.inc): entry i's byte j is element j of a group.
extern const uint64_t* const kIQ2XXSGrid;
extern const uint64_t* const kIQ2XSGrid;
extern const uint64_t* const kIQ2SGrid;
extern const uint64_t* const kIQ1SGrid;
extern const int8_t* const kMXFP4Values;  // 16 values
// IQ4_XS: 8 sub-blocks of 32 with 6-bit scales biased by 32 (low 4 bits: nibble ib of
// scales_l, high 2: bits 2ib..2ib+1 of scales_h); value = d·(ls − 32)·kIQ4NL[nibble], sub-block
// ib's 16 bytes of qs hold elements 0..15 in their low nibbles and 16..31 in their high ones.
struct BlockIQ4_XS {  // 136 bytes
  uint16_t d;
  uint16_t scales_h;
  uint8_t scales_l[4];
  uint8_t qs[128];
};
// IQ4_NL's fixed non-linear grid (ggml's kvalues_iq4nl), also IQ4_XS's (internal linkage: no
// COMDAT symbol in the per-ISA objects).
constexpr int8_t kIQ4NL[16] = {-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113};

// Q8_K: activation blocks for the K-quant dot products.
struct BlockQ8_K {  // 292 bytes
  float d;
  int8_t qs[256];
  int16_t bsums[16];  // sums of each 16 consecutive qs
};
#pragma pack(pop)

static_assert(sizeof(BlockQ8_0) == 34);
static_assert(sizeof(BlockQ4_0) == 18);
static_assert(sizeof(BlockQ4_K) == 144);
static_assert(sizeof(BlockQ5_K) == 176);
static_assert(sizeof(BlockQ6_K) == 210);
static_assert(sizeof(BlockQ8_K) == 292);
static_assert(sizeof(BlockQ3_K) == 110);
static_assert(sizeof(BlockQ2_K) == 84);
static_assert(sizeof(BlockIQ3_S) == 110);
static_assert(sizeof(BlockIQ3_XXS) == 98);
static_assert(sizeof(BlockIQ2_XXS) == 66);
static_assert(sizeof(BlockIQ2_XS) == 74);
static_assert(sizeof(BlockIQ2_S) == 82);
static_assert(sizeof(BlockIQ1_S) == 50);
static_assert(sizeof(BlockIQ1_M) == 56);
static_assert(sizeof(BlockMXFP4) == 17);
static_assert(sizeof(BlockIQ4_XS) == 136);
static_assert(sizeof(BlockQ4_1) == 20);
static_assert(sizeof(BlockQ5_0) == 22);
static_assert(sizeof(BlockQ5_1) == 24);
static_assert(sizeof(BlockIQ4_NL) == 18);
static_assert(sizeof(BlockQ8_1) == 36);

// 6-bit scale and min of sub-block j (0..7) of a Q4_K/Q5_K block.
inline void get_scale_min_k4(int j, const uint8_t* q, uint8_t* sc, uint8_t* m) {
  if (j < 4) {
    *sc = q[j] & 63;
    *m = q[j + 4] & 63;
  } else {
    *sc = static_cast<uint8_t>((q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4));
    *m = static_cast<uint8_t>((q[j + 4] >> 4) | ((q[j] >> 6) << 4));
  }
}

// --- scalar reference -------------------------------------------------------------------------
// Dequantise n elements (n a multiple of the type's block size).
void ref_dequantize(DType t, const void* src, float* dst, int64_t n);
// The codebook types IQ2_XXS/XS/S, IQ3_XXS/S, IQ1_S/M and MXFP4 (ref_iq.cpp), bit-exact with
// ggml's to_float; false for any other type.
bool ref_dequantize_codebook(DType t, const void* src, float* dst, int64_t n);
bool is_codebook_type(DType t);  // the types ref_dequantize_codebook handles
// Quantise n floats (multiple of the block size). Q8_0/Q4_0 round exactly as ggml's
// reference quantisers; Q8_K as ggml's quantize_row_q8_K_ref.
void ref_quantize_q8_0(const float* x, BlockQ8_0* y, int64_t n);
void ref_quantize_q4_0(const float* x, BlockQ4_0* y, int64_t n);
// Activation flavour of Q8_0 (as ggml's SIMD quantize_row_q8_0): id = 127/amax, round half to
// even. Every ISA's activation quantiser produces exactly these bytes.
void ref_quantize_act_q8_0(const float* x, BlockQ8_0* y, int64_t n);
// Q8_1 likewise (as ggml's SIMD quantize_row_q8_1): the Q8_0 bytes plus s = f16(d·Σqs).
void ref_quantize_act_q8_1(const float* x, BlockQ8_1* y, int64_t n);
// Q4_K as ggml's quantize_row_q4_K_ref (no importance matrix): bit-identical to llama-quantize.
void ref_quantize_q4_K(const float* x, BlockQ4_K* y, int64_t n);
void ref_quantize_q8_K(const float* x, BlockQ8_K* y, int64_t n);
// Q5_0 (22-byte blocks) and Q6_K as ggml's quantize_row_q5_0_ref / quantize_row_q6_K_ref: the
// fallback and output types of llama.cpp's 4-bit recipes (models/common/quant_rule.h).
void ref_quantize_q5_0(const float* x, uint8_t* y, int64_t n);
void ref_quantize_q6_K(const float* x, BlockQ6_K* y, int64_t n);
// The rest of llama-quantize's no-imatrix quantisers (ggml's reference path, same bytes): Q5_K,
// Q3_K and IQ4_XS (256-blocks), and the 32-block fallbacks Q4_1 (20 B), Q5_1 (24 B), IQ4_NL (18 B).
void ref_quantize_q5_K(const float* x, BlockQ5_K* y, int64_t n);
void ref_quantize_q3_K(const float* x, BlockQ3_K* y, int64_t n);
void ref_quantize_iq4_xs(const float* x, BlockIQ4_XS* y, int64_t n);
void ref_quantize_q4_1(const float* x, uint8_t* y, int64_t n);
void ref_quantize_q5_1(const float* x, uint8_t* y, int64_t n);
void ref_quantize_iq4_nl(const float* x, uint8_t* y, int64_t n);

// Dot products of one weight row with one prepared activation row (n elements).
float ref_dot_f32(const float* w, const float* x, int64_t n);
// One row of an MLX affine type (DType::MLX_*, f32 activations): Σ (s·q + b)·x, groups in order.
float ref_dot_mlx(DType t, const uint8_t* w, const float* x, int64_t n);
float ref_dot_f16(const uint16_t* w, const uint16_t* x, int64_t n);  // x: f16 activations
float ref_dot_bf16(const uint16_t* w, const uint16_t* x, int64_t n);  // x: bf16 activations
float ref_dot_q8_0(const BlockQ8_0* w, const BlockQ8_0* x, int64_t n);
float ref_dot_q4_0(const BlockQ4_0* w, const BlockQ8_0* x, int64_t n);
float ref_dot_q4_K(const BlockQ4_K* w, const BlockQ8_K* x, int64_t n);
float ref_dot_q5_K(const BlockQ5_K* w, const BlockQ8_K* x, int64_t n);
float ref_dot_q6_K(const BlockQ6_K* w, const BlockQ8_K* x, int64_t n);
float ref_dot_q3_K(const BlockQ3_K* w, const BlockQ8_K* x, int64_t n);
float ref_dot_q2_K(const BlockQ2_K* w, const BlockQ8_K* x, int64_t n);
float ref_dot_iq3_s(const BlockIQ3_S* w, const BlockQ8_K* x, int64_t n);
float ref_dot_iq3_xxs(const BlockIQ3_XXS* w, const BlockQ8_K* x, int64_t n);
float ref_dot_iq4_xs(const BlockIQ4_XS* w, const BlockQ8_K* x, int64_t n);
// The IQ2 / IQ1 types as ggml's vec_dot (integer sums per block, ggml's float expression).
float ref_dot_iq2_xxs(const BlockIQ2_XXS* w, const BlockQ8_K* x, int64_t n);
float ref_dot_iq2_xs(const BlockIQ2_XS* w, const BlockQ8_K* x, int64_t n);
float ref_dot_iq2_s(const BlockIQ2_S* w, const BlockQ8_K* x, int64_t n);
float ref_dot_iq1_s(const BlockIQ1_S* w, const BlockQ8_K* x, int64_t n);
float ref_dot_iq1_m(const BlockIQ1_M* w, const BlockQ8_K* x, int64_t n);
// The 32-element fallback types as ggml's vec_dot: Q5_0 / IQ4_NL × Q8_0 (d_w·d_x·Σ q_w·q_x per
// block), Q4_1 / Q5_1 × Q8_1 (d_w·d_x·Σ q_w·q_x + m_w·s_x per block).
float ref_dot_q5_0(const BlockQ5_0* w, const BlockQ8_0* x, int64_t n);
float ref_dot_iq4_nl(const BlockIQ4_NL* w, const BlockQ8_0* x, int64_t n);
float ref_dot_mxfp4(const BlockMXFP4* w, const BlockQ8_0* x, int64_t n);  // d_w = mxfp4_scale(e)
float ref_dot_q4_1(const BlockQ4_1* w, const BlockQ8_1* x, int64_t n);
float ref_dot_q5_1(const BlockQ5_1* w, const BlockQ8_1* x, int64_t n);

// The activation format a weight type's dot product consumes (ggml's vec_dot_type):
// F32 → F32, F16 → F16, BF16 → BF16, Q8_0/Q4_0/Q5_0/IQ4_NL/MXFP4 → Q8_0, Q4_1/Q5_1 → Q8_1,
// K-quants and the IQ1/IQ2/IQ3/IQ4_XS types → Q8_K.
DType activation_type(DType weight);

}  // namespace oxi::kern
