// Shared layer helpers for the model implementations (scalar f32; numerics follow llama.cpp's CPU
// backend where it matters: RMS norm sums in double, L2 norm = x / max(||x||, eps)).
// Shared by the families and the CPU device (nn/device.h).
#pragma once

#include <cmath>
#include <cstdint>
#include <vector>

namespace oxi::ops {

inline float sigmoid(float x) { return 1.0f / (1.0f + std::exp(-x)); }
inline float silu(float x) { return x / (1.0f + std::exp(-x)); }
inline float softplus(float x) { return x > 20.0f ? x : std::log1p(std::exp(x)); }
// GELU, tanh approximation, in f32: 0.5·x·(1 + tanh(sqrt(2/π)·x·(1 + 0.044715·x²))).
inline float gelu_tanh(float x) {
  return 0.5f * x * (1.0f + std::tanh(0.79788456080286535587989211986876f * x * (1.0f + 0.044715f * x * x)));
}

// GELU, exact (erf): 0.5·x·(1 + erf(x/√2)) (PyTorch nn.GELU()).
inline float gelu_erf(float x) { return 0.5f * x * (1.0f + std::erf(x * 0.70710678118654752440f)); }

// LayerNorm: y = (x − mean) / sqrt(var + eps) · w + b (w, b may be null); mean and variance in
// double. y may alias x.
void layer_norm(const float* x, const float* w, const float* b, float* y, int64_t n, float eps);

// y = x / sqrt(mean(x²) + eps) * w   (w may be null: no scale). y may alias x. ggml's arithmetic
// (llama.cpp is the reference of both families): squares rounded to f32 and summed in double, the
// mean rounded to f32, scale = 1 / sqrtf(mean + eps), then (x · scale) · w in f32.
void rms_norm(const float* x, const float* w, float* y, int64_t n, float eps);
// The same over `rows` contiguous rows of n, rows split over the thread pool (serial inside a
// pool job).
void rms_norm_rows(const float* x, const float* w, float* y, int64_t rows, int64_t n, float eps);
// x /= max(||x||₂, eps)  (ggml_l2_norm; the squares summed as rms_norm's).
void l2_norm(float* x, int64_t n, float eps);
// In-place softmax over n values (max-subtracted, sum in double).
void softmax(float* x, int64_t n);
// Mixture-of-experts routing of one row of E logits: softmax, the k largest (ties: lower index),
// their weights renormalised to sum 1 (nn::topk_renorm, nn/moe.h). ids, weights: k each.
void moe_route_row(const float* logits, int64_t E, int64_t k, int32_t* ids, float* weights);
// log-softmax of row `x` at index i (helper for tests / top-k reporting).
double log_softmax_at(const float* x, int64_t n, int64_t i);

// NeoX ("rotate half") RoPE on the first n_rot dims of one head: pairs (j, j + n_rot/2).
// cs: cos/sin table for this position, cs[2j] = cos φ_j, cs[2j+1] = sin φ_j, j < n_rot/2.
void rope_neox(float* x, int64_t n_rot, const float* cs);
// cos/sin table for one position: φ_j = pos_j · theta^(−2j/n_rot), pos_j from `slot_pos`
// (size n_rot/2; for plain RoPE all equal the token position).
void rope_table(const float* slot_pos, int64_t n_rot, float theta, float* cs);
// A RoPE base a model file may carry: positive and at most 1e12 (real models use 1e4..1e8; inf or
// NaN, which "1e400" in a config.json parses to, makes every rotation NaN). The configs check it.
inline bool rope_theta_ok(double theta) { return theta > 0 && theta <= 1e12; }

// Causal attention of one query head against cached keys/values of its KV head.
// q [hd], K/V rows [n_kv_pos, stride] starting at offset `kv_off` in each row, scale applied to
// q·k; writes out [hd]. scores: scratch of n_kv_pos floats.
// f16_like: mimic llama.cpp's default CPU path (f16 KV cache, no flash attention): q and the softmax
// weights are rounded to f16 before their products with the (f16-valued) K and V.
void attend_one(const float* q, const float* K, const float* V, int64_t stride, int64_t kv_off,
                int64_t n_kv_pos, int64_t hd, float scale, float* scores, float* out, bool f16_like = false);

}  // namespace oxi::ops
