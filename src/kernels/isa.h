// Runtime ISA selection for the kernels. Chosen once, on first use, from CPUID (with an XGETBV
// check that the OS saves the vector registers) on x86, getauxval(AT_HWCAP/AT_HWCAP2) on aarch64
// Linux; the wasm build's "simd128" is fixed when it is compiled. Env OXI_ISA or set_isa()
// overrides it.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace oxi {

// Name of the kernel set in use: "scalar", "avx2" (AVX2+FMA+F16C), "avx512"
// (AVX-512 F/BW/VL/DQ + VNNI + BF16 + VBMI + GFNI), "avx512-amx" (the same plus AMX-INT8 tiles for
// multi-token GEMMs), "neon", "neon-dotprod", "neon-i8mm" or "simd128" (wasm).
const char* isa_name();

// Vector lanes of the active set's F32 matmul tiles when their sums follow llamafile's sgemm
// order for that width (avx2: 8, avx512 / avx512-amx: 16), else 0.
int isa_f32_sgemm_lanes();

// Kernel sets this host can run, best last ("scalar" first).
std::vector<std::string> available_isas();

// Selects a kernel set by name (one of the above, or "auto" / "" for the best).
// Throws oxi::Error(kInvalidArgument) for an unknown name, (kUnsupported) if the host lacks it.
// Not to be called while a matmul runs.
void set_isa(std::string_view name);

// One line for start-up logs: "isa avx512 (host: avx512 avx2 scalar), 2 threads".
std::string kernels_summary();

}  // namespace oxi
