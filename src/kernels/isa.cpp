#include "kernels/isa.h"

#include <atomic>
#include <cstdlib>
#include <string>
#include <vector>

#include "core/error.h"
#include "kernels/dispatch.h"
#include "kernels/thread_pool.h"

#if defined(OXI_KERNELS_X86)
#include <cpuid.h>
#endif
#if defined(OXI_HAVE_AMX) && defined(__linux__)
#include <sys/syscall.h>
#include <unistd.h>
#endif
#if defined(OXI_KERNELS_ARM) && defined(__linux__)
#include <sys/auxv.h>
#endif

namespace oxi {
namespace kern {
namespace {

struct HostCaps {
  bool avx2 = false;
  bool avx512 = false;
  bool amx = false;  // AMX-TILE + AMX-INT8, enabled by the OS, permission granted (Linux)
  bool neon = false;
  bool neon_dotprod = false;
  bool neon_i8mm = false;
};

HostCaps detect() {
  HostCaps c;
#if defined(OXI_KERNELS_X86)
  unsigned a, b, cx, d;
  if (!__get_cpuid(1, &a, &b, &cx, &d)) return c;
  const bool osxsave = cx & (1u << 27), avx = cx & (1u << 28), fma = cx & (1u << 12),
             f16c = cx & (1u << 29);
  if (!osxsave || !avx) return c;
  unsigned xlo, xhi;
  __asm__ volatile("xgetbv" : "=a"(xlo), "=d"(xhi) : "c"(0));
  const bool os_avx = (xlo & 0x6) == 0x6;
  const bool os_avx512 = (xlo & 0xE6) == 0xE6;
  if (__get_cpuid_max(0, nullptr) < 7) return c;
  __cpuid_count(7, 0, a, b, cx, d);
  const bool avx2 = b & (1u << 5);
  const bool f = b & (1u << 16), dq = b & (1u << 17), bw = b & (1u << 30), vl = b & (1u << 31);
  const bool vnni = cx & (1u << 11), vbmi = cx & (1u << 1), gfni = cx & (1u << 8);
  __cpuid_count(7, 1, a, b, cx, d);
  const bool bf16 = a & (1u << 5);
  c.avx2 = os_avx && avx2 && fma && f16c;
  // VBMI and GFNI (byte permutes and per-byte bit matrices unpack 4/6-bit quants in GEMV): every
  // CPU with AVX512_BF16 has them except Cooper Lake, which gets avx2.
  c.avx512 = c.avx2 && os_avx512 && f && dq && bw && vl && vnni && bf16 && vbmi && gfni;
#if defined(OXI_HAVE_AMX) && defined(__linux__)
  __cpuid_count(7, 0, a, b, cx, d);
  const bool amx_tile = d & (1u << 24), amx_int8 = d & (1u << 25);
  const bool os_amx = (xlo & 0x60000u) == 0x60000u;  // XCR0 bits 17 (XTILECFG), 18 (XTILEDATA)
  // Linux enables tile data per process on request: arch_prctl(ARCH_REQ_XCOMP_PERM, XTILEDATA).
  if (c.avx512 && amx_tile && amx_int8 && os_amx) c.amx = syscall(SYS_arch_prctl, 0x1023, 18) == 0;
#endif
#endif
#if defined(OXI_KERNELS_ARM)
  c.neon = true;  // AdvSIMD (with f16 conversions) is mandatory on aarch64
#if defined(__linux__)
  // The kernel reports what user space may execute: HWCAP_ASIMDDP (bit 20), HWCAP2_I8MM (bit 13).
  const unsigned long hw = getauxval(AT_HWCAP), hw2 = getauxval(AT_HWCAP2);
  c.neon_dotprod = hw & (1ul << 20);
  c.neon_i8mm = c.neon_dotprod && (hw2 & (1ul << 13));
#endif
#endif
  return c;
}

[[maybe_unused]] const HostCaps& host() {
  static const HostCaps caps = detect();
  return caps;
}

// Every kernel set name any build knows, and the sets compiled into this one, worst first.
constexpr std::string_view kKnown[] = {"scalar",    "avx2",         "avx512",    "avx512-amx",
                                       "neon",      "neon-dotprod", "neon-i8mm", "simd128"};

struct IsaEntry {
  const Kernels* table;
  bool usable;
};

std::vector<IsaEntry> compiled() {
  std::vector<IsaEntry> v{{&kScalarKernels, true}};
#if defined(OXI_HAVE_AVX2)
  v.push_back({&kAvx2Kernels, host().avx2});
#endif
#if defined(OXI_HAVE_AVX512)
  v.push_back({&kAvx512Kernels, host().avx512});
#endif
#if defined(OXI_HAVE_AMX)
  v.push_back({&kAvx512AmxKernels, host().amx});
#endif
#if defined(OXI_HAVE_NEON)
  v.push_back({&kNeonKernels, host().neon});
#endif
#if defined(OXI_HAVE_NEON_DOTPROD)
  v.push_back({&kNeonDotprodKernels, host().neon_dotprod});
#endif
#if defined(OXI_HAVE_NEON_I8MM)
  v.push_back({&kNeonI8mmKernels, host().neon_i8mm});
#endif
#if defined(OXI_HAVE_SIMD128)
  v.push_back({&kSimd128Kernels, true});  // wasm: chosen when this module was built (-msimd128)
#endif
  return v;
}

const Kernels* table_for(std::string_view name) {
  for (const IsaEntry& e : compiled())
    if (e.usable && name == e.table->name) return e.table;
  return nullptr;
}

bool known(std::string_view name) {
  for (std::string_view k : kKnown)
    if (name == k) return true;
  return false;
}

const Kernels* best() {
  const Kernels* k = &kScalarKernels;
  for (const IsaEntry& e : compiled())
    if (e.usable) k = e.table;
  return k;
}

const Kernels* choose_initial() {
  const char* env = std::getenv("OXI_ISA");
  if (env && *env && std::string_view(env) != "auto") {
    if (const Kernels* k = table_for(env)) return k;
    // An unusable override falls back to the best set rather than failing at first matmul.
  }
  return best();
}

std::atomic<const Kernels*> g_active{nullptr};

}  // namespace

const Kernels& active_kernels() {
  const Kernels* k = g_active.load(std::memory_order_acquire);
  if (!k) {
    const Kernels* init = choose_initial();
    if (g_active.compare_exchange_strong(k, init, std::memory_order_acq_rel)) k = init;
  }
  return *k;
}

}  // namespace kern

const char* isa_name() { return kern::active_kernels().name; }

int isa_f32_sgemm_lanes() { return kern::active_kernels().f32_sgemm_lanes; }

std::vector<std::string> available_isas() {
  std::vector<std::string> v;
  for (const kern::IsaEntry& e : kern::compiled())
    if (e.usable) v.emplace_back(e.table->name);
  return v;
}

void set_isa(std::string_view name) {
  if (name.empty() || name == "auto") {
    kern::g_active.store(kern::best(), std::memory_order_release);
    return;
  }
  if (!kern::known(name))
    throw_error(ErrorCode::kInvalidArgument,
                "unknown ISA '" + std::string(name) + "' (expected auto, scalar, avx2, avx512, avx512-amx, neon, neon-dotprod, neon-i8mm or simd128)");
  const kern::Kernels* k = kern::table_for(name);
  if (!k) throw_error(ErrorCode::kUnsupported, "ISA '" + std::string(name) + "' is not supported by this CPU");
  kern::g_active.store(k, std::memory_order_release);
}

std::string kernels_summary() {
  std::string s = std::string("isa ") + isa_name() + " (host:";
  const auto v = available_isas();
  for (auto it = v.rbegin(); it != v.rend(); ++it) s += " " + *it;
  s += "), " + std::to_string(num_threads()) + " threads";
  return s;
}

}  // namespace oxi
