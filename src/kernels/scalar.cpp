// The portable kernel table: the scalar reference routines, looped over a tile.
#include <cstring>

#include "core/half.h"
#include "kernels/dispatch.h"
#include "kernels/quant.h"

namespace oxi::kern {
namespace {

template <class W, class X, float (*Dot)(const W*, const X*, int64_t)>
void mm_ref(const MMArgs& a) {
  for (int64_t r = a.r0; r < a.r1; ++r) {
    const W* w = reinterpret_cast<const W*>(a.w + r * a.w_stride);
    for (int64_t t = a.t0; t < a.t1; ++t) {
      const X* x = reinterpret_cast<const X*>(a.x + t * a.x_stride);
      a.y[t * a.ldy + r] = Dot(w, x, a.cols);
    }
  }
}

template <DType T>
float dot_mlx(const uint8_t* w, const float* x, int64_t n) {
  return ref_dot_mlx(T, w, x, n);
}

void act_f16(const float* x, void* dst, int64_t n) {
  uint16_t* d = static_cast<uint16_t*>(dst);
  for (int64_t i = 0; i < n; ++i) d[i] = f32_to_f16(x[i]);
}
void act_bf16(const float* x, void* dst, int64_t n) {
  uint16_t* d = static_cast<uint16_t*>(dst);
  for (int64_t i = 0; i < n; ++i) d[i] = f32_to_bf16(x[i]);
}
void act_q8_0(const float* x, void* dst, int64_t n) { ref_quantize_act_q8_0(x, static_cast<BlockQ8_0*>(dst), n); }
void act_q8_K(const float* x, void* dst, int64_t n) { ref_quantize_q8_K(x, static_cast<BlockQ8_K*>(dst), n); }
void act_q8_1(const float* x, void* dst, int64_t n) { ref_quantize_act_q8_1(x, static_cast<BlockQ8_1*>(dst), n); }

}  // namespace

const Kernels kScalarKernels = {
    "scalar",
    {
        mm_ref<float, float, ref_dot_f32>,
        mm_ref<uint16_t, uint16_t, ref_dot_f16>,
        mm_ref<uint16_t, uint16_t, ref_dot_bf16>,
        mm_ref<BlockQ8_0, BlockQ8_0, ref_dot_q8_0>,
        mm_ref<BlockQ4_0, BlockQ8_0, ref_dot_q4_0>,
        mm_ref<BlockQ4_K, BlockQ8_K, ref_dot_q4_K>,
        mm_ref<BlockQ5_K, BlockQ8_K, ref_dot_q5_K>,
        mm_ref<BlockQ6_K, BlockQ8_K, ref_dot_q6_K>,
        mm_ref<BlockQ3_K, BlockQ8_K, ref_dot_q3_K>,
        mm_ref<BlockIQ4_XS, BlockQ8_K, ref_dot_iq4_xs>,
        mm_ref<BlockQ5_0, BlockQ8_0, ref_dot_q5_0>,
        mm_ref<BlockIQ4_NL, BlockQ8_0, ref_dot_iq4_nl>,
        mm_ref<BlockQ4_1, BlockQ8_1, ref_dot_q4_1>,
        mm_ref<BlockQ5_1, BlockQ8_1, ref_dot_q5_1>,
        mm_ref<BlockQ2_K, BlockQ8_K, ref_dot_q2_K>,
        mm_ref<BlockIQ3_S, BlockQ8_K, ref_dot_iq3_s>,
        mm_ref<BlockIQ3_XXS, BlockQ8_K, ref_dot_iq3_xxs>,
        mm_ref<BlockIQ2_XXS, BlockQ8_K, ref_dot_iq2_xxs>,
        mm_ref<BlockIQ2_XS, BlockQ8_K, ref_dot_iq2_xs>,
        mm_ref<BlockIQ2_S, BlockQ8_K, ref_dot_iq2_s>,
        mm_ref<BlockIQ1_S, BlockQ8_K, ref_dot_iq1_s>,
        mm_ref<BlockIQ1_M, BlockQ8_K, ref_dot_iq1_m>,
        mm_ref<BlockMXFP4, BlockQ8_0, ref_dot_mxfp4>,
        mm_ref<uint8_t, float, dot_mlx<DType::MLX_Q4_G32>>,
        mm_ref<uint8_t, float, dot_mlx<DType::MLX_Q4_G64>>,
        mm_ref<uint8_t, float, dot_mlx<DType::MLX_Q4_G128>>,
        mm_ref<uint8_t, float, dot_mlx<DType::MLX_Q8_G32>>,
        mm_ref<uint8_t, float, dot_mlx<DType::MLX_Q8_G64>>,
        mm_ref<uint8_t, float, dot_mlx<DType::MLX_Q8_G128>>,
    },
    {nullptr, act_f16, act_bf16, act_q8_0, act_q8_K, act_q8_1},
};

}  // namespace oxi::kern
