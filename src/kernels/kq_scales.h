// Sub-block scales of Q3_K and IQ4_XS as packed bytes, computed in general registers (writing
// single bytes to memory and reading them back as a vector stalls on store forwarding), and the
// scale fields of IQ1_M and MXFP4. For the per-ISA files: anonymous namespace, so each file
// compiles its own copy with its own flags (as tile_drive.h); plain integer code.
#pragma once

#include <cstdint>
#include <cstring>

#include "kernels/quant.h"

namespace oxi::kern {
namespace {

// Q3_K: byte j of lo (j < 8) / hi (j ≥ 8) = scale j + 32 (0..63; the bias is left to the caller).
// Low nibbles: bytes 0..7 of scales[] (scales 0..7) and their high nibbles (8..15); high 2 bits:
// bits 2i..2i+1 of scales[8 + j % 4] for scale 4i + j % 4.
inline void q3k_scale_bytes(const uint8_t* s, uint64_t& lo, uint64_t& hi) {
  uint32_t a, b, c;
  std::memcpy(&a, s, 4);
  std::memcpy(&b, s + 4, 4);
  std::memcpy(&c, s + 8, 4);
  const uint32_t w0 = (a & 0x0F0F0F0Fu) | ((c << 4) & 0x30303030u);         // scales 0..3
  const uint32_t w1 = (b & 0x0F0F0F0Fu) | ((c << 2) & 0x30303030u);         // 4..7
  const uint32_t w2 = ((a >> 4) & 0x0F0F0F0Fu) | (c & 0x30303030u);         // 8..11
  const uint32_t w3 = ((b >> 4) & 0x0F0F0F0Fu) | ((c >> 2) & 0x30303030u);  // 12..15
  lo = w0 | (static_cast<uint64_t>(w1) << 32);
  hi = w2 | (static_cast<uint64_t>(w3) << 32);
}

// IQ4_XS: byte ib = scale of sub-block ib + 32 (0..63): nibble ib of scales_l spread to byte ib,
// and the 2-bit field ib of scales_h to bits 4..5 of it.
inline uint64_t iq4xs_scale_bytes(const BlockIQ4_XS& b) {
  uint32_t sl;
  std::memcpy(&sl, b.scales_l, 4);
  uint64_t x = sl;
  x = (x | (x << 16)) & 0x0000FFFF0000FFFFull;
  x = (x | (x << 8)) & 0x00FF00FF00FF00FFull;
  x = (x | (x << 4)) & 0x0F0F0F0F0F0F0F0Full;
  uint64_t h = b.scales_h;
  h = (h | (h << 24)) & 0x000000FF000000FFull;
  h = (h | (h << 12)) & 0x000F000F000F000Full;
  h = (h | (h << 6)) & 0x0303030303030303ull;
  return x | (h << 4);
}

// IQ1_M's f16 super-scale bits: the top nibbles of its four scale u16s.
inline uint16_t iq1m_d_bits(const BlockIQ1_M& b) {
  uint16_t sc[4];
  std::memcpy(sc, b.scales, 8);
  return static_cast<uint16_t>((sc[0] >> 12) | ((sc[1] >> 8) & 0xF0) | ((sc[2] >> 4) & 0xF00) | (sc[3] & 0xF000));
}

// MXFP4's E8M0 exponent e → 2^(e − 128): half the block scale 2^(e − 127), as its values are
// doubled E2M1 values (ggml's E8M0_TO_FP32_HALF); e < 2 gives the subnormals 2^(−127), 2^(−126).
inline float mxfp4_scale(uint8_t e) {
  const uint32_t bits = e < 2 ? 0x00200000u << e : static_cast<uint32_t>(e - 1) << 23;
  float f;  // memcpy, not std::bit_cast: emscripten 3.1.6's libc++ has none
  std::memcpy(&f, &bits, 4);
  return f;
}

// A 32-element block's weight scale: MXFP4 (W::kE8M0) from its exponent byte, the others the f16
// at the block's start (h2f: the ISA's f16 → f32).
template <class W>
constexpr bool kE8M0 = requires { W::kE8M0; };
template <class W, class H>
inline float block_scale(const uint8_t* p, H h2f) {
  if constexpr (kE8M0<W>) return mxfp4_scale(p[0]);
  else return h2f(p);
}

}  // namespace
}  // namespace oxi::kern
