// Dispatch of the fused blocks (kernels/fused.h) and their generic instance.
#include "kernels/fused.h"

#include "core/half.h"
#include "kernels/dispatch.h"

namespace oxi {
namespace kern {
namespace {
#include "kernels/fused_impl.inc"
}  // namespace

#if defined(OXI_HAVE_AVX2)
extern const FusedKernels kAvx2Fused;
#endif
#if defined(OXI_HAVE_AVX512)
extern const FusedKernels kAvx512Fused;
#endif

const FusedKernels& generic_fused() { return kFusedTable; }

const FusedKernels& active_fused() {
  [[maybe_unused]] const Kernels* k = &active_kernels();
#if defined(OXI_HAVE_AVX512)
  if (k == &kAvx512Kernels) return kAvx512Fused;
#endif
#if defined(OXI_HAVE_AVX2)
  if (k == &kAvx2Kernels) return kAvx2Fused;
#endif
  return kFusedTable;  // scalar and the sets without a fused build of their own
}

}  // namespace kern

void gdn_step(int64_t T, int64_t dk, int64_t dv, const GdnHeadIO& io, float* S) {
  kern::active_fused().gdn_step(T, dk, dv, io, S);
}

void gdn_chunked(int64_t T, int64_t dk, int64_t dv, const GdnHeadIO& io, float* S, int64_t chunk) {
  kern::active_fused().gdn_chunked(T, dk, dv, io, S, chunk);
}

void attend_one(const float* q, const float* K, const float* V, int64_t stride, int64_t kv_off, int64_t n_kv_pos,
                int64_t hd, float scale, float* scores, float* out, bool f16_like) {
  kern::active_fused().attend_one(q, K, V, stride, kv_off, n_kv_pos, hd, scale, scores, out, f16_like);
}

}  // namespace oxi
