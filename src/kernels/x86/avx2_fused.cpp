// kernels/fused.h blocks compiled with the AVX2 flags (this file matches x86/avx2*.cpp).
#include <immintrin.h>

#include "core/half.h"
#include "kernels/dispatch.h"
#include "kernels/fused.h"

namespace oxi::kern {
namespace {
#include "kernels/fused_impl.inc"
}  // namespace
extern const FusedKernels kAvx2Fused;
const FusedKernels kAvx2Fused = kFusedTable;
}  // namespace oxi::kern
