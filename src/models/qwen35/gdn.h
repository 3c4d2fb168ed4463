// Gated delta rule for one value head (Qwen 3.5 linear-attention layers), f32.
// State S[dk][dv] (row i = key index, value index contiguous). Per token t:
//   S ← exp(g_t)·S;  δ = β_t (v_t − Sᵀk_t);  S ← S + k_t ⊗ δ;  o_t = Sᵀ q_t
// q and k are already L2-normalised (q also scaled by 1/sqrt(dk)); g_t ≤ 0 is the log decay.
// `gdn_step` runs the recurrence token by token (decode); `gdn_chunked` the equivalent WY/chunked
// form (prefill, chunk 64): same result up to f32 rounding.
#pragma once

#include <cstdint>

namespace oxi::qwen35 {

struct GdnHeadIO {
  const float* q = nullptr;  // token t at q + t*q_stride (dk values)
  const float* k = nullptr;
  const float* v = nullptr;  // dv values
  int64_t qk_stride = 0;
  int64_t v_stride = 0;
  const float* g = nullptr;  // token t at g[t*gb_stride]
  const float* beta = nullptr;
  int64_t gb_stride = 1;
  float* o = nullptr;  // dv values at o + t*o_stride
  int64_t o_stride = 0;
};

void gdn_step(int64_t T, int64_t dk, int64_t dv, const GdnHeadIO& io, float* S);
// scratch: caller-owned, resized as needed (avoid per-call allocation across heads).
void gdn_chunked(int64_t T, int64_t dk, int64_t dv, const GdnHeadIO& io, float* S, int64_t chunk = 64);

}  // namespace oxi::qwen35
