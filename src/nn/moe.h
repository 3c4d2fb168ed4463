// Mixture-of-experts on the host: the router's top-k choices turned into per-expert row lists, and
// the routed experts run over their gathered rows and summed into the layer output. Shared by the
// families' CPU forwards (Qwen 3.5 MoE: SwiGLU experts; Gemma 4 26B-A4B: GeGLU experts with a
// per-expert output scale) and, for the row lists, by the device forwards (nn/device_util.h).
#pragma once

#include <cstdint>
#include <cstring>
#include <vector>

namespace oxi::nn {

// Top-k of one row of probabilities p [E] (already a softmax; ties: the lower index first), the
// chosen weights renormalised to sum 1: their sum accumulated in double as ggml_sum_rows does,
// floored at 2^-14. ids, weights: k each, by descending weight (llama.cpp's slot order).
void topk_renorm(const float* p, int64_t E, int64_t k, int32_t* ids, float* weights);

// The router's choices turned around: for each expert, the rows routed to it (ascending), the
// slot each row gave it (0 = that row's heaviest expert) and the routing weight.
struct ExpertRows {
  std::vector<std::vector<int32_t>> rows, slots;
  std::vector<std::vector<float>> weights;
};
// From per-row choices ids/weights [rows, k]; an id outside 0..E-1 throws kInternal naming `who`.
ExpertRows expert_rows(const int32_t* ids, const float* weights, int64_t rows, int64_t E, int64_t k, const char* who);

// In which order a row's k expert outputs are added: experts in index order into a zeroed row
// (Qwen's CPU forward and the device forwards), or llama.cpp's order — each weighted output in its
// slot, then the slots summed 0, 1, … (ggml's build_moe_ffn; Gemma's CPU forward, bit-exact there).
enum class MoeSum { kExpertOrder, kSlotOrder };

// out [n, D] = Σ over each row's experts e of weight · y_e(row), where ffn(e, xin, m, y) computes the
// expert's outputs y [m, D] for its m gathered input rows xin [m, D] (x [n, D]). The weighted
// product is y·w in f32 (so an expert scale belongs inside ffn, applied to y first).
template <class Ffn>
void run_experts_host(const ExpertRows& r, const float* x, int64_t n, int64_t D, int64_t k, MoeSum order, float* out,
                      Ffn&& ffn) {
  thread_local std::vector<float> xin, y, slots;
  const size_t d = static_cast<size_t>(D);
  // Every (row, slot) pair is written exactly once below, so the slots need no zero fill.
  if (order == MoeSum::kSlotOrder) slots.resize(static_cast<size_t>(n * k) * d);
  else std::memset(out, 0, static_cast<size_t>(n) * d * sizeof(float));
  for (size_t e = 0; e < r.rows.size(); ++e) {
    const auto& rows = r.rows[e];
    if (rows.empty()) continue;
    const size_t m = rows.size();
    xin.resize(m * d);
    y.resize(m * d);
    for (size_t i = 0; i < m; ++i) std::memcpy(xin.data() + i * d, x + static_cast<size_t>(rows[i]) * d, d * sizeof(float));
    ffn(e, xin.data(), static_cast<int64_t>(m), y.data());
    for (size_t i = 0; i < m; ++i) {
      const float w = r.weights[e][i];
      const float* yi = y.data() + i * d;
      if (order == MoeSum::kSlotOrder) {
        float* o = slots.data() + (static_cast<size_t>(rows[i]) * static_cast<size_t>(k) + static_cast<size_t>(r.slots[e][i])) * d;
        for (size_t j = 0; j < d; ++j) o[j] = yi[j] * w;
      } else {
        float* o = out + static_cast<size_t>(rows[i]) * d;
        for (size_t j = 0; j < d; ++j) o[j] += w * yi[j];
      }
    }
  }
  if (order == MoeSum::kExpertOrder) return;
  for (int64_t t = 0; t < n; ++t) {
    float* o = out + static_cast<size_t>(t) * d;
    const float* s = slots.data() + static_cast<size_t>(t * k) * d;
    std::memcpy(o, s, d * sizeof(float));
    for (int64_t j = 1; j < k; ++j)
      for (size_t i = 0; i < d; ++i) o[i] += s[static_cast<size_t>(j) * d + i];
  }
}

}  // namespace oxi::nn
