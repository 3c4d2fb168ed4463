#include "core/half.h"

#if defined(__x86_64__) && defined(__GNUC__) && defined(__linux__)
#define OXI_HALF_IFUNC 1
#include <cpuid.h>
#include <immintrin.h>
#endif

namespace oxi {
namespace {

float f16_to_f32_soft(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  uint32_t exp = (h >> 10) & 0x1fu;
  uint32_t mant = h & 0x3ffu;
  uint32_t u;
  if (exp == 0) {
    if (mant == 0) {
      u = sign;
    } else {  // subnormal: normalise
      exp = 127 - 15 + 1;
      while ((mant & 0x400u) == 0) {
        mant <<= 1;
        --exp;
      }
      mant &= 0x3ffu;
      u = sign | (exp << 23) | (mant << 13);
    }
  } else if (exp == 31) {
    u = sign | 0x7f800000u | (mant << 13);
  } else {
    u = sign | ((exp + 127 - 15) << 23) | (mant << 13);
  }
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

uint16_t f32_to_f16_soft(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  const uint32_t sign = (u >> 16) & 0x8000u;
  const uint32_t abs = u & 0x7fffffffu;
  if (abs > 0x7f800000u) return static_cast<uint16_t>(sign | 0x7e00u);  // NaN
  if (abs >= 0x477ff000u) return static_cast<uint16_t>(sign | 0x7c00u);  // overflow → inf
  if (abs < 0x38800000u) {  // result is subnormal or zero
    if (abs < 0x33000000u) return static_cast<uint16_t>(sign);
    const uint32_t e = abs >> 23;
    const uint32_t m = (abs & 0x7fffffu) | 0x800000u;
    const uint32_t shift = 126 - e;  // value / 2^-24 == m >> shift, shift in 14..24
    const uint32_t rem = m & ((1u << shift) - 1);
    const uint32_t half = 1u << (shift - 1);
    uint32_t out = m >> shift;
    if (rem > half || (rem == half && (out & 1u))) ++out;
    return static_cast<uint16_t>(sign | out);
  }
  uint32_t out = ((abs - 0x38000000u) >> 13);
  const uint32_t rem = abs & 0x1fffu;
  if (rem > 0x1000u || (rem == 0x1000u && (out & 1u))) ++out;
  return static_cast<uint16_t>(sign | out);
}

#if OXI_HALF_IFUNC
// F16C (every AVX2 CPU): one instruction each; NaNs keep the software path's bit patterns.
__attribute__((target("f16c"))) float f16_to_f32_f16c(uint16_t h) {
  if ((h & 0x7c00u) == 0x7c00u && (h & 0x3ffu)) return f16_to_f32_soft(h);
  return _cvtsh_ss(h);
}
__attribute__((target("f16c"))) uint16_t f32_to_f16_f16c(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  if ((u & 0x7fffffffu) > 0x7f800000u) return f32_to_f16_soft(f);
  return _cvtss_sh(f, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
}
#endif

#if OXI_HALF_IFUNC
// F16C usable: the CPU has it (cpuid leaf 1, ECX bit 29) and, as its instructions are VEX-encoded,
// the OS saves the AVX state (OSXSAVE, ECX bit 27, and XCR0 bits 1-2). Asked by hand rather than
// with __builtin_cpu_supports("f16c"), which Debian's clang 14 (the fuzz build) does not know.
// An ifunc resolver runs while the dynamic loader relocates, before any sanitizer runtime is set
// up: inlined, uninstrumented code calling nothing external.
#define OXI_RESOLVER_CODE __attribute__((no_sanitize("address", "undefined")))
inline __attribute__((always_inline)) OXI_RESOLVER_CODE bool cpu_has_f16c() {
  // The __cpuid macro (inline asm) rather than __get_cpuid, a header function that an unoptimised
  // sanitizer build keeps out of line and instruments (the fuzz build crashed in it). Leaf 1
  // exists on every x86-64 CPU.
  unsigned a = 0, b = 0, c = 0, d = 0;
  __cpuid(1, a, b, c, d);
  if (!(c & (1u << 29)) || !(c & (1u << 27))) return false;
  unsigned lo = 0, hi = 0;
  __asm__("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
  return (lo & 6u) == 6u;
}
#endif

}  // namespace

#if OXI_HALF_IFUNC
// Chosen once by the dynamic loader (GNU ifunc): the conversions are called per element by
// scalar model code (attention over an f16 KV cache, GELU tables).
extern "C" {
using F16ToF32 = float (*)(uint16_t);
using F32ToF16 = uint16_t (*)(float);
OXI_RESOLVER_CODE F16ToF32 oxi_resolve_f16_to_f32() { return cpu_has_f16c() ? f16_to_f32_f16c : f16_to_f32_soft; }
OXI_RESOLVER_CODE F32ToF16 oxi_resolve_f32_to_f16() { return cpu_has_f16c() ? f32_to_f16_f16c : f32_to_f16_soft; }
}
float f16_to_f32(uint16_t h) __attribute__((ifunc("oxi_resolve_f16_to_f32")));
uint16_t f32_to_f16(float f) __attribute__((ifunc("oxi_resolve_f32_to_f16")));
#else
float f16_to_f32(uint16_t h) { return f16_to_f32_soft(h); }
uint16_t f32_to_f16(float f) { return f32_to_f16_soft(f); }
#endif

}  // namespace oxi
