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
#if defined(OXI_HAVE_AMX)
  if (k == &kAvx512AmxKernels) return kAvx512Fused;
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

void attend_causal(const float* q, int64_t q_stride, int64_t nq, const float* KT, int64_t kt_stride, const float* V,
                   int64_t stride, int64_t kv_off, int64_t n_kv0, int64_t hd, float scale, float* out,
                   int64_t out_stride, bool f16_like) {
  kern::active_fused().attend_causal(q, q_stride, nq, KT, kt_stride, V, stride, kv_off, n_kv0, hd, scale, out,
                                     out_stride, f16_like);
}

void attend_one_f16(const float* q, const uint16_t* K, const uint16_t* V, int64_t stride, int64_t kv_off,
                    int64_t n_kv_pos, int64_t hd, float scale, float* scores, float* out) {
  kern::active_fused().attend_one_f16(q, K, V, stride, kv_off, n_kv_pos, hd, scale, scores, out);
}

void attend_group_f16(const float* q, int64_t q_stride, int64_t G, const uint16_t* K, const uint16_t* V,
                      int64_t stride, int64_t kv_off, int64_t n_kv_pos, int64_t hd, float scale, float* scores,
                      float* out, int64_t out_stride) {
  kern::active_fused().attend_group_f16(q, q_stride, G, K, V, stride, kv_off, n_kv_pos, hd, scale, scores, out,
                                        out_stride);
}

void attend_causal_f16(const float* q, int64_t q_stride, int64_t nq, const float* KT, int64_t kt_stride,
                       const uint16_t* V, int64_t stride, int64_t kv_off, int64_t n_kv0, int64_t hd, float scale,
                       float* out, int64_t out_stride) {
  kern::active_fused().attend_causal_f16(q, q_stride, nq, KT, kt_stride, V, stride, kv_off, n_kv0, hd, scale, out,
                                         out_stride);
}

void silu_mul(const float* x, const float* m, float* y, int64_t n) { kern::active_fused().silu_mul(x, m, y, n); }

void softmax_row(float* x, int64_t n) { kern::active_fused().softmax(x, n); }

void conv_silu(const float* X, const float* wT, int64_t C, int64_t K, float* y) {
  kern::active_fused().conv_silu(X, wT, C, K, y);
}

void f16_round(const float* x, float* y, int64_t n) { kern::active_fused().f16_round(x, y, n); }
void softcap(const float* x, float* y, int64_t n, float cap) { kern::active_fused().softcap(x, y, n, cap); }
void f16_to_f32_row(const uint16_t* x, float* y, int64_t n) { kern::active_fused().f16_to_f32_row(x, y, n); }
void f32_to_f16_row(const float* x, uint16_t* y, int64_t n) { kern::active_fused().f32_to_f16_row(x, y, n); }
void fma_chains(const float* x, const float* y, int64_t n, int64_t w, float* acc) {
  kern::active_fused().fma_chains_f32(x, y, n, w, acc);
}
void fma_chains(const uint16_t* x, const float* y, int64_t n, int64_t w, float* acc) {
  kern::active_fused().fma_chains_f16(x, y, n, w, acc);
}

}  // namespace oxi
