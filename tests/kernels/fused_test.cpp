// The fused f32 blocks (kernels/fused.h) on every ISA the host runs against straightforward f64
// references written here: the gated delta rule token by token, and softmax attention of one head.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "core/half.h"
#include "kernels/fused.h"
#include "kernels/isa.h"

using namespace oxi;

namespace {

struct IsaGuard {
  ~IsaGuard() { set_isa("auto"); }
};

struct GdnData {
  int64_t T, dk, dv;
  std::vector<float> q, k, v, g, b, S0;
};

GdnData make_gdn(int64_t T, int64_t dk, int64_t dv, uint32_t seed) {
  GdnData d{T, dk, dv, {}, {}, {}, {}, {}, {}};
  std::mt19937 rng(seed);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  std::uniform_real_distribution<float> ud(0.0f, 1.0f);
  d.q.resize(T * dk);
  d.k.resize(T * dk);
  d.v.resize(T * dv);
  for (auto& x : d.q) x = nd(rng);
  for (auto& x : d.k) x = nd(rng);
  for (auto& x : d.v) x = nd(rng);
  for (int64_t t = 0; t < T; ++t) {
    for (float* x : {&d.q[t * dk], &d.k[t * dk]}) {
      double s = 0;
      for (int64_t i = 0; i < dk; ++i) s += x[i] * x[i];
      for (int64_t i = 0; i < dk; ++i) x[i] = static_cast<float>(x[i] / std::sqrt(s));
    }
    d.g.push_back(-1.5f * ud(rng));
    d.b.push_back(ud(rng));
  }
  d.S0.resize(dk * dv);
  for (auto& x : d.S0) x = 0.3f * nd(rng);
  return d;
}

// S ← e^g S; δ = β(v − Sᵀk); S ← S + k⊗δ; o = Sᵀq — in double.
void gdn_ref(const GdnData& d, std::vector<double>& o, std::vector<double>& S) {
  S.assign(d.S0.begin(), d.S0.end());
  o.assign(d.T * d.dv, 0.0);
  std::vector<double> kv(d.dv);
  for (int64_t t = 0; t < d.T; ++t) {
    const double a = std::exp(static_cast<double>(d.g[t]));
    for (auto& x : S) x *= a;
    for (int64_t c = 0; c < d.dv; ++c) {
      double s = 0;
      for (int64_t i = 0; i < d.dk; ++i) s += S[i * d.dv + c] * d.k[t * d.dk + i];
      kv[c] = d.b[t] * (d.v[t * d.dv + c] - s);
    }
    for (int64_t i = 0; i < d.dk; ++i)
      for (int64_t c = 0; c < d.dv; ++c) S[i * d.dv + c] += d.k[t * d.dk + i] * kv[c];
    for (int64_t c = 0; c < d.dv; ++c) {
      double s = 0;
      for (int64_t i = 0; i < d.dk; ++i) s += S[i * d.dv + c] * d.q[t * d.dk + i];
      o[t * d.dv + c] = s;
    }
  }
}

TEST(Fused, GdnEveryIsaMatchesF64Reference) {
  IsaGuard guard;
  struct Case {
    int64_t T, dk, dv;
  };
  for (const Case c : {Case{1, 128, 128}, Case{5, 24, 24}, Case{64, 128, 128}, Case{130, 32, 48}, Case{70, 40, 17}}) {
    const GdnData d = make_gdn(c.T, c.dk, c.dv, static_cast<uint32_t>(c.T * 7 + c.dk));
    std::vector<double> oref, sref;
    gdn_ref(d, oref, sref);
    for (const auto& isa : available_isas()) {
      set_isa(isa);
      for (bool chunked : {false, true}) {
        std::vector<float> S(d.S0), o(c.T * c.dv, 123.0f);
        GdnHeadIO io;
        io.q = d.q.data();
        io.k = d.k.data();
        io.v = d.v.data();
        io.qk_stride = c.dk;
        io.v_stride = c.dv;
        io.g = d.g.data();
        io.beta = d.b.data();
        io.o = o.data();
        io.o_stride = c.dv;
        if (chunked) gdn_chunked(c.T, c.dk, c.dv, io, S.data(), 64);
        else gdn_step(c.T, c.dk, c.dv, io, S.data());
        double eo = 0, es = 0, mag = 0;
        for (size_t i = 0; i < o.size(); ++i) {
          eo = std::max(eo, std::fabs(o[i] - oref[i]));
          mag = std::max(mag, std::fabs(oref[i]));
        }
        for (size_t i = 0; i < S.size(); ++i) es = std::max(es, std::fabs(S[i] - sref[i]));
        const std::string what = isa + (chunked ? " chunked" : " step") + " T=" + std::to_string(c.T) +
                                 " dk=" + std::to_string(c.dk) + " dv=" + std::to_string(c.dv);
        EXPECT_GT(mag, 0.01) << what;
        EXPECT_LT(eo, 2e-5 * std::max(1.0, mag)) << what;
        EXPECT_LT(es, 2e-5) << what;
      }
    }
  }
}

TEST(Fused, AttendOneEveryIsaMatchesF64Reference) {
  IsaGuard guard;
  std::mt19937 rng(5);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  for (int64_t hd : {256, 48, 7}) {
    const int64_t npos = 75, stride = 3 * hd + 5, off = hd + 2;
    std::vector<float> K(npos * stride), V(K.size()), q(hd);
    for (auto& x : K) x = f16_to_f32(f32_to_f16(nd(rng)));  // f16-valued, as the caches hold them
    for (auto& x : V) x = f16_to_f32(f32_to_f16(nd(rng)));
    for (auto& x : q) x = nd(rng);
    const float scale = 1.0f / std::sqrt(static_cast<float>(hd));
    for (bool f16 : {false, true}) {
      // Reference: the same roundings (q and the weights to f16) where f16_like, the rest in double.
      std::vector<double> qd(hd), w(npos), ref(hd, 0.0);
      for (int64_t i = 0; i < hd; ++i) qd[i] = f16 ? f16_to_f32(f32_to_f16(q[i])) : q[i];
      double mx = -INFINITY, sum = 0;
      for (int64_t p = 0; p < npos; ++p) {
        double s = 0;
        for (int64_t i = 0; i < hd; ++i) s += qd[i] * K[p * stride + off + i];
        w[p] = s * scale;
        mx = std::max(mx, w[p]);
      }
      for (auto& x : w) sum += (x = std::exp(x - mx));
      for (auto& x : w) x = f16 ? f16_to_f32(f32_to_f16(static_cast<float>(x / sum))) : x / sum;
      for (int64_t p = 0; p < npos; ++p)
        for (int64_t i = 0; i < hd; ++i) ref[i] += w[p] * V[p * stride + off + i];
      for (const auto& isa : available_isas()) {
        set_isa(isa);
        std::vector<float> scores(npos), out(hd, 99.0f);
        attend_one(q.data(), K.data(), V.data(), stride, off, npos, hd, scale, scores.data(), out.data(), f16);
        double err = 0;
        for (int64_t i = 0; i < hd; ++i) err = std::max(err, std::fabs(out[i] - ref[i]));
        // f16 weights: an f32 softmax value next to an f16 rounding boundary may round the other way.
        EXPECT_LT(err, f16 ? 2e-3 : 2e-5) << isa << " hd=" << hd << " f16=" << f16;
      }
    }
  }
}

}  // namespace
