// Fused f32 blocks of the models' non-matmul hot paths (Qwen 3.5 Gated DeltaNet, causal attention
// of one head), compiled once per ISA like the matmul kernels and dispatched with the active set.
// Model code calls these; the generic instance is the scalar build of the same source.
#pragma once

#include <cstdint>

namespace oxi {

// Gated delta rule for one value head, f32. State S[dk][dv] (row i = key index, value index
// contiguous). Per token t:
//   S ← exp(g_t)·S;  δ = β_t (v_t − Sᵀk_t);  S ← S + k_t ⊗ δ;  o_t = Sᵀ q_t
// q and k are already L2-normalised (q also scaled by 1/sqrt(dk)); g_t ≤ 0 is the log decay.
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
  // gdn_step: the dk×dv state this thread steps next, fetched into the caches during the last
  // token's second pass (which works on S in L2 and leaves the memory bus idle); may be null.
  const float* prefetch = nullptr;
};

// Token-by-token recurrence (decode): two passes over S per token.
void gdn_step(int64_t T, int64_t dk, int64_t dv, const GdnHeadIO& io, float* S);
// The equivalent chunked (WY) form for prefill, chunks of `chunk` tokens expressed as small f32
// matrix products; same result up to f32 rounding. Scratch is per thread (no allocation per call
// once warm).
void gdn_chunked(int64_t T, int64_t dk, int64_t dv, const GdnHeadIO& io, float* S, int64_t chunk = 64);

// Causal attention of one query head against cached keys/values of its KV head.
// q [hd]; K/V rows [n_kv_pos, stride] starting at offset `kv_off` in each row; scale applied to
// q·k; writes out [hd]. scores: scratch of n_kv_pos floats.
// f16_like: mimic llama.cpp's default CPU path (f16 KV cache, no flash attention): q and the
// softmax weights are rounded to f16 before their products with the (f16-valued) K and V.
void attend_one(const float* q, const float* K, const float* V, int64_t stride, int64_t kv_off, int64_t n_kv_pos,
                int64_t hd, float scale, float* scores, float* out, bool f16_like = false);

// Causal attention of nq consecutive queries of one head (prefill): query i (at q + i*q_stride,
// hd values) attends to positions [0, n_kv0 + i) of the K/V rows ([pos, stride], head at offset
// kv_off); KT holds the same keys transposed, KT[e * kt_stride + pos] (kt_stride ≥ n_kv0 + nq − 1);
// out row i at out + i*out_stride. Numerics as attend_one per query (q and the softmax weights
// rounded to f16 where f16_like) except the f32 summation order of q·k; scores are computed as
// small GEMMs (no horizontal sums), so it is several times faster per query.
void attend_causal(const float* q, int64_t q_stride, int64_t nq, const float* KT, int64_t kt_stride, const float* V,
                   int64_t stride, int64_t kv_off, int64_t n_kv0, int64_t hd, float scale, float* out,
                   int64_t out_stride, bool f16_like = false);

// The same two with K and V rows stored as IEEE half (uint16_t), llama.cpp's f16 KV cache:
// always f16_like (q and the softmax weights rounded to f16). The rows are converted to f32 as
// they are loaded (exact), so on the same values the results equal attend_one / attend_causal
// with f16_like bit for bit on every ISA, reading half the bytes. attend_causal_f16 still takes
// the keys transposed as f32 (KT).
void attend_one_f16(const float* q, const uint16_t* K, const uint16_t* V, int64_t stride, int64_t kv_off,
                    int64_t n_kv_pos, int64_t hd, float scale, float* scores, float* out);
void attend_causal_f16(const float* q, int64_t q_stride, int64_t nq, const float* KT, int64_t kt_stride,
                       const uint16_t* V, int64_t stride, int64_t kv_off, int64_t n_kv0, int64_t hd, float scale,
                       float* out, int64_t out_stride);

// attend_one_f16 for G query heads that share one KV head (grouped-query attention): head g's
// query at q + g·q_stride, its output at out + g·out_stride; scores: scratch of G · n_kv_pos
// floats. Bit for bit attend_one_f16 per head, reading each K and V row once for the group.
void attend_group_f16(const float* q, int64_t q_stride, int64_t G, const uint16_t* K, const uint16_t* V,
                      int64_t stride, int64_t kv_off, int64_t n_kv_pos, int64_t hd, float scale, float* scores,
                      float* out, int64_t out_stride);

// x ← softmax(x) in place over n values (max subtracted; e^x as the vector polynomial silu_mul
// uses, within 2 ulp; the sum in double). The vision tower's attention rows.
void softmax_row(float* x, int64_t n);

// y[i] = silu(x[i]) · m[i] = x / (1 + e^−x) · m (y may alias x or m). e^x is a vector
// polynomial within 2 ulp (llama.cpp's CPU SiLU is a SIMD approximation too), not libm's.
void silu_mul(const float* x, const float* m, float* y, int64_t n);
// One token of a causal depthwise conv1d + SiLU over C channels and K taps:
// y[c] = silu(Σ_j wT[j*C + c] · X[j*C + c]) (X: the K input rows ending at the token; wT: the
// taps transposed, [K][C]).
void conv_silu(const float* X, const float* wT, int64_t C, int64_t K, float* y);
// y[i] = x[i] rounded to f16 and back (nearest even; y may alias x).
void f16_round(const float* x, float* y, int64_t n);
// IEEE half rows to f32 (exact) and f32 to half (round to nearest even, as f32_to_f16).
void f16_to_f32_row(const uint16_t* x, float* y, int64_t n);
void f32_to_f16_row(const float* x, uint16_t* y, int64_t n);
// y[i] = cap · tanh(x[i] / cap) (Gemma's final logit soft-capping; y may alias x). tanh is a
// vector approximation within 2 ulp of the correctly rounded value (llama.cpp's CPU path calls
// libm tanhf per element; the two differ by an ulp or two).
void softcap(const float* x, float* y, int64_t n, float cap);
// acc[o] = fma(x[i + o], y[i + o], acc[o]) (exact fused multiply-add) for o < w, over each block i
// of w values in [0, n): w independent accumulator chains, as one vector-register FMA per block
// builds them. n is a multiple of w; w ∈ {8, 16, 32, 64}. The same bits on every ISA (the order is
// fixed by w, not by the set's vector width): ggml's summation orders (kernels/ggml.h) run on it.
void fma_chains(const float* x, const float* y, int64_t n, int64_t w, float* acc);
void fma_chains(const uint16_t* x, const float* y, int64_t n, int64_t w, float* acc);  // x IEEE half

namespace kern {
// Per-ISA table of the above (internal; the functions above dispatch through the active one).
struct FusedKernels {
  void (*gdn_step)(int64_t, int64_t, int64_t, const GdnHeadIO&, float*);
  void (*gdn_chunked)(int64_t, int64_t, int64_t, const GdnHeadIO&, float*, int64_t);
  void (*attend_one)(const float*, const float*, const float*, int64_t, int64_t, int64_t, int64_t, float, float*,
                     float*, bool);
  void (*attend_causal)(const float*, int64_t, int64_t, const float*, int64_t, const float*, int64_t, int64_t,
                        int64_t, int64_t, float, float*, int64_t, bool);
  void (*attend_one_f16)(const float*, const uint16_t*, const uint16_t*, int64_t, int64_t, int64_t, int64_t, float,
                         float*, float*);
  void (*attend_causal_f16)(const float*, int64_t, int64_t, const float*, int64_t, const uint16_t*, int64_t, int64_t,
                            int64_t, int64_t, float, float*, int64_t);
  void (*silu_mul)(const float*, const float*, float*, int64_t);
  void (*conv_silu)(const float*, const float*, int64_t, int64_t, float*);
  void (*f16_round)(const float*, float*, int64_t);
  void (*softcap)(const float*, float*, int64_t, float);
  void (*f16_to_f32_row)(const uint16_t*, float*, int64_t);
  void (*f32_to_f16_row)(const float*, uint16_t*, int64_t);
  void (*fma_chains_f32)(const float*, const float*, int64_t, int64_t, float*);
  void (*fma_chains_f16)(const uint16_t*, const float*, int64_t, int64_t, float*);
  void (*softmax)(float*, int64_t);
  void (*attend_group_f16)(const float*, int64_t, int64_t, const uint16_t*, const uint16_t*, int64_t, int64_t, int64_t,
                           int64_t, float, float*, float*, int64_t);
};
// The generic build, and the one matching the active matmul set (generic where none is compiled).
const FusedKernels& generic_fused();
const FusedKernels& active_fused();
}  // namespace kern

}  // namespace oxi
