// kernels/fused.h blocks compiled with the AVX-512 flags (this file matches x86/avx512*.cpp).
#include <immintrin.h>

#include "core/half.h"
#include "kernels/dispatch.h"
#include "kernels/fused.h"

namespace oxi::kern {
namespace {
#include "kernels/fused_impl.inc"
}  // namespace
extern const FusedKernels kAvx512Fused;
const FusedKernels kAvx512Fused = kFusedTable;
}  // namespace oxi::kern
