#include "nn/ops.h"

#include <algorithm>
#include <cstring>
#include <numeric>
#include <vector>

#include "core/half.h"
#include "kernels/fused.h"
#include "kernels/thread_pool.h"
#include "nn/moe.h"

namespace oxi::ops {

namespace {
// Σ x[i]² as ggml sums it (rms_norm, l2_norm): each square rounded to f32, the sum in double.
// ggml adds them one after another; eight running sums (added at the end) give the same double up
// to its last bits, and so the same f32 mean except when that lies within ~1e-16 of an f32
// rounding boundary, without one long latency-bound chain.
double sum_sq(const float* x, int64_t n) {
  double s8[8] = {};
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    for (int k = 0; k < 8; ++k) s8[k] += static_cast<double>(x[i + k] * x[i + k]);
  double sum = ((s8[0] + s8[1]) + (s8[2] + s8[3])) + ((s8[4] + s8[5]) + (s8[6] + s8[7]));
  for (; i < n; ++i) sum += static_cast<double>(x[i] * x[i]);
  return sum;
}
}  // namespace

void rms_norm(const float* x, const float* w, float* y, int64_t n, float eps) {
  const double sum = sum_sq(x, n);
  const float mean = static_cast<float>(sum / static_cast<double>(n));
  const float scale = 1.0f / std::sqrt(mean + eps);
  if (w) {
    for (int64_t i = 0; i < n; ++i) y[i] = (x[i] * scale) * w[i];
  } else {
    for (int64_t i = 0; i < n; ++i) y[i] = x[i] * scale;
  }
}

void layer_norm(const float* x, const float* w, const float* b, float* y, int64_t n, float eps) {
  double sum = 0;
  for (int64_t i = 0; i < n; ++i) sum += x[i];
  const double mean = sum / static_cast<double>(n);
  double var = 0;
  for (int64_t i = 0; i < n; ++i) var += (x[i] - mean) * (x[i] - mean);
  const float m = static_cast<float>(mean);
  const float scale = static_cast<float>(1.0 / std::sqrt(var / static_cast<double>(n) + eps));
  for (int64_t i = 0; i < n; ++i) {
    float v = (x[i] - m) * scale;
    if (w) v *= w[i];
    if (b) v += b[i];
    y[i] = v;
  }
}

void rms_norm_rows(const float* x, const float* w, float* y, int64_t rows, int64_t n, float eps) {
  parallel_for_chunked(rows, 8, [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) rms_norm(x + r * n, w, y + r * n, n, eps);
  });
}

void l2_norm(float* x, int64_t n, float eps) {
  const double sum = sum_sq(x, n);
  const float scale = 1.0f / std::max(static_cast<float>(std::sqrt(sum)), eps);
  for (int64_t i = 0; i < n; ++i) x[i] *= scale;
}

void softmax(float* x, int64_t n) {
  float mx = -INFINITY;
  for (int64_t i = 0; i < n; ++i) mx = std::max(mx, x[i]);
  double sum = 0.0;
  for (int64_t i = 0; i < n; ++i) {
    x[i] = std::exp(x[i] - mx);
    sum += x[i];
  }
  const float inv = static_cast<float>(1.0 / sum);
  for (int64_t i = 0; i < n; ++i) x[i] *= inv;
}

void moe_route_row(const float* logits, int64_t E, int64_t k, int32_t* ids, float* weights) {
  thread_local std::vector<float> p;
  p.assign(logits, logits + E);
  softmax(p.data(), E);
  nn::topk_renorm(p.data(), E, k, ids, weights);
}

double log_softmax_at(const float* x, int64_t n, int64_t i) {
  float mx = -INFINITY;
  for (int64_t j = 0; j < n; ++j) mx = std::max(mx, x[j]);
  double sum = 0.0;
  for (int64_t j = 0; j < n; ++j) sum += std::exp(static_cast<double>(x[j]) - mx);
  return static_cast<double>(x[i]) - mx - std::log(sum);
}

void rope_table(const float* slot_pos, int64_t n_rot, float theta, float* cs) {
  const int64_t half = n_rot / 2;
  for (int64_t j = 0; j < half; ++j) {
    const double inv_freq = std::pow(static_cast<double>(theta), -2.0 * static_cast<double>(j) / static_cast<double>(n_rot));
    const double phi = static_cast<double>(slot_pos[j]) * inv_freq;
    cs[2 * j] = static_cast<float>(std::cos(phi));
    cs[2 * j + 1] = static_cast<float>(std::sin(phi));
  }
}

void rope_neox(float* x, int64_t n_rot, const float* cs) {
  const int64_t half = n_rot / 2;
  for (int64_t j = 0; j < half; ++j) {
    const float c = cs[2 * j], s = cs[2 * j + 1];
    const float a = x[j], b = x[j + half];
    x[j] = a * c - b * s;
    x[j + half] = b * c + a * s;
  }
}

void attend_one(const float* q, const float* K, const float* V, int64_t stride, int64_t kv_off,
                int64_t n_kv_pos, int64_t hd, float scale, float* scores, float* out, bool f16_like) {
  oxi::attend_one(q, K, V, stride, kv_off, n_kv_pos, hd, scale, scores, out, f16_like);  // kernels/fused.h
}

}  // namespace oxi::ops
