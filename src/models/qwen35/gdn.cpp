#include "models/qwen35/gdn.h"

#include <algorithm>
#include <cmath>
#include <vector>

namespace oxi::qwen35 {

void gdn_step(int64_t T, int64_t dk, int64_t dv, const GdnHeadIO& io, float* S) {
  std::vector<float> kv(static_cast<size_t>(dv));
  for (int64_t t = 0; t < T; ++t) {
    const float* q = io.q + t * io.qk_stride;
    const float* k = io.k + t * io.qk_stride;
    const float* v = io.v + t * io.v_stride;
    const float alpha = std::exp(io.g[t * io.gb_stride]);
    const float beta = io.beta[t * io.gb_stride];
    float* o = io.o + t * io.o_stride;
    for (int64_t i = 0; i < dk * dv; ++i) S[i] *= alpha;
    std::fill(kv.begin(), kv.end(), 0.0f);
    for (int64_t i = 0; i < dk; ++i) {
      const float ki = k[i];
      const float* row = S + i * dv;
      for (int64_t c = 0; c < dv; ++c) kv[c] += row[c] * ki;
    }
    for (int64_t c = 0; c < dv; ++c) kv[c] = beta * (v[c] - kv[c]);  // δ
    std::fill(o, o + dv, 0.0f);
    for (int64_t i = 0; i < dk; ++i) {
      const float ki = k[i], qi = q[i];
      float* row = S + i * dv;
      for (int64_t c = 0; c < dv; ++c) {
        row[c] += ki * kv[c];
        o[c] += row[c] * qi;
      }
    }
  }
}

void gdn_chunked(int64_t T, int64_t dk, int64_t dv, const GdnHeadIO& io, float* S, int64_t chunk) {
  const int64_t C = std::max<int64_t>(1, chunk);
  std::vector<float> gam(C), A(C * C), U(C * dv), W(C * dk), QK(C * C), SQ(dv);
  for (int64_t t0 = 0; t0 < T; t0 += C) {
    const int64_t n = std::min(C, T - t0);
    auto q = [&](int64_t i) { return io.q + (t0 + i) * io.qk_stride; };
    auto k = [&](int64_t i) { return io.k + (t0 + i) * io.qk_stride; };
    auto v = [&](int64_t i) { return io.v + (t0 + i) * io.v_stride; };
    auto g = [&](int64_t i) { return io.g[(t0 + i) * io.gb_stride]; };
    auto beta = [&](int64_t i) { return io.beta[(t0 + i) * io.gb_stride]; };
    float acc = 0.0f;
    for (int64_t i = 0; i < n; ++i) gam[i] = (acc += g(i));
    // A_ij = β_i (k_i·k_j) exp(γ_i − γ_j), j < i;  QK_ij = (q_i·k_j) exp(γ_i − γ_j), j ≤ i.
    for (int64_t i = 0; i < n; ++i) {
      const float* ki = k(i);
      const float* qi = q(i);
      for (int64_t j = 0; j <= i; ++j) {
        const float* kj = k(j);
        float dkk = 0.0f, dqk = 0.0f;
        for (int64_t e = 0; e < dk; ++e) {
          dkk += ki[e] * kj[e];
          dqk += qi[e] * kj[e];
        }
        const float decay = std::exp(gam[i] - gam[j]);
        A[i * C + j] = j < i ? beta(i) * dkk * decay : 0.0f;
        QK[i * C + j] = dqk * decay;
      }
    }
    // Forward substitution for (I + A) X = B: U (B = β v), W (B = β exp(γ) k).
    for (int64_t i = 0; i < n; ++i) {
      float* u = U.data() + i * dv;
      float* w = W.data() + i * dk;
      const float b = beta(i), eg = std::exp(gam[i]);
      const float* vi = v(i);
      const float* ki = k(i);
      for (int64_t c = 0; c < dv; ++c) u[c] = b * vi[c];
      for (int64_t e = 0; e < dk; ++e) w[e] = b * eg * ki[e];
      for (int64_t j = 0; j < i; ++j) {
        const float a = A[i * C + j];
        if (a == 0.0f) continue;
        const float* uj = U.data() + j * dv;
        const float* wj = W.data() + j * dk;
        for (int64_t c = 0; c < dv; ++c) u[c] -= a * uj[c];
        for (int64_t e = 0; e < dk; ++e) w[e] -= a * wj[e];
      }
    }
    // Vnew = U − W·S0 (in U).
    for (int64_t i = 0; i < n; ++i) {
      float* u = U.data() + i * dv;
      const float* w = W.data() + i * dk;
      for (int64_t e = 0; e < dk; ++e) {
        const float we = w[e];
        const float* row = S + e * dv;
        for (int64_t c = 0; c < dv; ++c) u[c] -= we * row[c];
      }
    }
    // O_i = exp(γ_i) (S0ᵀ q_i) + Σ_{j≤i} QK_ij Vnew_j.
    for (int64_t i = 0; i < n; ++i) {
      float* o = io.o + (t0 + i) * io.o_stride;
      std::fill(SQ.begin(), SQ.end(), 0.0f);
      const float* qi = q(i);
      for (int64_t e = 0; e < dk; ++e) {
        const float qe = qi[e];
        const float* row = S + e * dv;
        for (int64_t c = 0; c < dv; ++c) SQ[c] += row[c] * qe;
      }
      const float eg = std::exp(gam[i]);
      for (int64_t c = 0; c < dv; ++c) o[c] = eg * SQ[c];
      for (int64_t j = 0; j <= i; ++j) {
        const float a = QK[i * C + j];
        const float* uj = U.data() + j * dv;
        for (int64_t c = 0; c < dv; ++c) o[c] += a * uj[c];
      }
    }
    // S = exp(γ_n) S0 + Σ_i exp(γ_n − γ_i) k_i ⊗ Vnew_i.
    const float gn = gam[n - 1];
    const float egn = std::exp(gn);
    for (int64_t e = 0; e < dk * dv; ++e) S[e] *= egn;
    for (int64_t i = 0; i < n; ++i) {
      const float d = std::exp(gn - gam[i]);
      const float* ki = k(i);
      const float* u = U.data() + i * dv;
      for (int64_t e = 0; e < dk; ++e) {
        const float f = d * ki[e];
        float* row = S + e * dv;
        for (int64_t c = 0; c < dv; ++c) row[c] += f * u[c];
      }
    }
  }
}

}  // namespace oxi::qwen35
