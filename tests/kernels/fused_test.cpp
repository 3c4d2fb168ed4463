// The fused f32 blocks (kernels/fused.h) on every ISA the host runs against straightforward f64
// references written here: the gated delta rule token by token, and softmax attention of one head.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
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

// A block of causal queries equals attend_one per query (the same numerics up to the f32 order of
// the q·k sums), on every ISA, including blocks that do not start at position 0.
TEST(Fused, AttendCausalEveryIsaMatchesAttendOne) {
  IsaGuard guard;
  std::mt19937 rng(9);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  for (int64_t hd : {256, 40}) {
    const int64_t npos = 90, stride = 2 * hd + 3, off = hd + 1;
    std::vector<float> K(npos * stride), V(K.size()), Q(npos * hd);
    for (auto& x : K) x = f16_to_f32(f32_to_f16(nd(rng)));
    for (auto& x : V) x = f16_to_f32(f32_to_f16(nd(rng)));
    for (auto& x : Q) x = 2.0f * nd(rng);
    const float scale = 1.0f / std::sqrt(static_cast<float>(hd));
    // Keys transposed with a padded stride.
    const int64_t kts = npos + 3;
    std::vector<float> KT(hd * kts, NAN);
    for (int64_t p = 0; p < npos; ++p)
      for (int64_t e = 0; e < hd; ++e) KT[e * kts + p] = K[p * stride + off + e];
    for (bool f16 : {false, true}) {
      for (const auto& isa : available_isas()) {
        set_isa(isa);
        for (int64_t t0 : {0, 13, 57}) {
          const int64_t nq = std::min<int64_t>(33, npos - t0);
          const int64_t ost = hd + 5;
          std::vector<float> out(nq * ost, 77.0f), one(hd), scores(npos);
          attend_causal(Q.data() + t0 * hd, hd, nq, KT.data(), kts, V.data(), stride, off, t0 + 1, hd, scale,
                        out.data(), ost, f16);
          for (int64_t i = 0; i < nq; ++i) {
            attend_one(Q.data() + (t0 + i) * hd, K.data(), V.data(), stride, off, t0 + i + 1, hd, scale,
                       scores.data(), one.data(), f16);
            double err = 0;
            for (int64_t e = 0; e < hd; ++e) err = std::max(err, static_cast<double>(std::fabs(out[i * ost + e] - one[e])));
            // f16 weights: a value next to an f16 rounding boundary may round the other way.
            ASSERT_LT(err, f16 ? 2e-3 : 1e-5) << isa << " hd=" << hd << " t0=" << t0 << " i=" << i;
            EXPECT_EQ(out[i * ost + hd], 77.0f);  // padding between rows untouched
          }
        }
      }
    }
  }
}

// f16 KV storage: attend_one_f16 / attend_causal_f16 on IEEE-half rows give exactly (bit for bit)
// what attend_one / attend_causal with f16_like give on the same values held as floats, on every
// ISA; lengths with vector tails (hd 7, 40), long rows (hd 256), offsets into wider rows, and
// values that exercise f16 subnormals, signed zeros and the largest halves.
TEST(Fused, AttendF16StorageEveryIsaEqualsF32StorageBitForBit) {
  IsaGuard guard;
  std::mt19937 rng(21);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  const float specials[] = {0.0f, -0.0f, 5.9604645e-8f, -5.9604645e-8f, 6.097555e-5f, 6.1035156e-5f,
                            -3.0517578e-5f, 65504.0f, -65504.0f, 1e-6f};
  for (int64_t hd : {256, 128, 40, 7}) {
    const int64_t npos = 83, stride = 2 * hd + 3, off = hd + 1;
    std::vector<uint16_t> K16(npos * stride), V16(K16.size());
    for (size_t i = 0; i < K16.size(); ++i) {
      K16[i] = f32_to_f16(i % 37 == 5 ? specials[i % 10] * 1e-3f : nd(rng));
      V16[i] = f32_to_f16(i % 41 == 3 ? specials[(i / 41) % 10] : 3.0f * nd(rng));
    }
    std::vector<float> K(K16.size()), V(V16.size()), Q(npos * hd);
    for (size_t i = 0; i < K16.size(); ++i) K[i] = f16_to_f32(K16[i]), V[i] = f16_to_f32(V16[i]);
    for (auto& x : Q) x = 2.0f * nd(rng);
    const float scale = 1.0f / std::sqrt(static_cast<float>(hd));
    const int64_t kts = npos + 1;
    std::vector<float> KT(hd * kts, NAN);
    for (int64_t p = 0; p < npos; ++p)
      for (int64_t e = 0; e < hd; ++e) KT[e * kts + p] = K[p * stride + off + e];
    for (const auto& isa : available_isas()) {
      set_isa(isa);
      // Decode rows: every prefix length up to npos (the 2-accumulator, 1-accumulator and tail
      // paths of the dot products).
      for (int64_t n : {int64_t{1}, int64_t{2}, int64_t{31}, npos}) {
        const float* q = Q.data() + (n - 1) * hd;
        std::vector<float> s32(npos), s16(npos), o32(hd, 1.0f), o16(hd, 2.0f);
        attend_one(q, K.data(), V.data(), stride, off, n, hd, scale, s32.data(), o32.data(), true);
        attend_one_f16(q, K16.data(), V16.data(), stride, off, n, hd, scale, s16.data(), o16.data());
        ASSERT_EQ(std::memcmp(o32.data(), o16.data(), sizeof(float) * hd), 0) << isa << " hd=" << hd << " n=" << n;
      }
      for (int64_t t0 : {0, 13, 50}) {
        const int64_t nq = std::min<int64_t>(33, npos - t0), ost = hd + 5;
        std::vector<float> o32(nq * ost, 77.0f), o16(nq * ost, 77.0f);
        attend_causal(Q.data() + t0 * hd, hd, nq, KT.data(), kts, V.data(), stride, off, t0 + 1, hd, scale,
                      o32.data(), ost, true);
        attend_causal_f16(Q.data() + t0 * hd, hd, nq, KT.data(), kts, V16.data(), stride, off, t0 + 1, hd, scale,
                          o16.data(), ost);
        ASSERT_EQ(std::memcmp(o32.data(), o16.data(), sizeof(float) * o32.size()), 0)
            << isa << " hd=" << hd << " t0=" << t0;
      }
    }
  }
}

// attend_group_f16 (the query heads of one KV head together) gives each head exactly (bit for bit)
// what attend_one_f16 gives it, on every ISA: group sizes 1..8 and one past the kernel's limit,
// head sizes with and without its 32-column blocks, queries strided as Qwen's (q, gate) layout.
TEST(Fused, AttendGroupF16EveryIsaEqualsPerHeadBitForBit) {
  IsaGuard guard;
  std::mt19937 rng(33);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  for (int64_t hd : {256, 128, 64, 40}) {
    const int64_t npos = 97, stride = 3 * hd + 5, off = hd + 2;
    std::vector<uint16_t> K(npos * stride), V(K.size());
    for (size_t i = 0; i < K.size(); ++i) K[i] = f32_to_f16(nd(rng)), V[i] = f32_to_f16(3.0f * nd(rng));
    for (int64_t G : {1, 2, 3, 4, 5, 8, 9}) {
      const int64_t qs = 2 * hd + 1, os = hd + 3;
      std::vector<float> Q(G * qs);
      for (auto& x : Q) x = 2.0f * nd(rng);
      for (const auto& isa : available_isas()) {
        set_isa(isa);
        for (int64_t n : {int64_t{1}, int64_t{33}, npos}) {
          std::vector<float> ref(G * os, 5.0f), got(G * os, 5.0f), s1(npos), sg(G * npos);
          for (int64_t g = 0; g < G; ++g)
            attend_one_f16(Q.data() + g * qs, K.data(), V.data(), stride, off, n, hd, 0.125f, s1.data(), ref.data() + g * os);
          attend_group_f16(Q.data(), qs, G, K.data(), V.data(), stride, off, n, hd, 0.125f, sg.data(), got.data(), os);
          ASSERT_EQ(std::memcmp(ref.data(), got.data(), sizeof(float) * ref.size()), 0)
              << isa << " hd=" << hd << " G=" << G << " n=" << n;
        }
      }
    }
  }
}

// Row conversions against the scalar reference (core/half.h) on every ISA: all 65536 halves to
// f32 (NaNs stay NaNs with their sign), and f32 → f16 round to nearest even incl. ties,
// overflow and subnormals.
TEST(Fused, HalfRowConversionsEveryIsaMatchScalar) {
  IsaGuard guard;
  std::vector<uint16_t> h(65536 + 5);
  for (size_t i = 0; i < h.size(); ++i) h[i] = static_cast<uint16_t>(i);
  std::vector<float> x;
  std::mt19937 rng(3);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  for (float v : {0.0f, -0.0f, 65504.0f, 65519.0f, 65520.0f, -65520.0f, 1e9f, INFINITY, -INFINITY, 2.9802322e-8f,
                  2.9802326e-8f, 8.940697e-8f, 1.0004883f, 1.0014648f, 6.1e-5f, -6.1e-5f})
    x.push_back(v);
  for (int i = 0; i < 4000; ++i) x.push_back(std::ldexp(nd(rng), static_cast<int>(rng() % 40) - 28));
  for (const auto& isa : available_isas()) {
    set_isa(isa);
    std::vector<float> f(h.size());
    f16_to_f32_row(h.data(), f.data(), static_cast<int64_t>(h.size()));
    for (size_t i = 0; i < h.size(); ++i) {
      const float r = f16_to_f32(h[i]);
      if (std::isnan(r)) {
        ASSERT_TRUE(std::isnan(f[i])) << isa << " h=" << h[i];
        ASSERT_EQ(std::signbit(f[i]), std::signbit(r)) << isa << " h=" << h[i];
      } else {
        ASSERT_EQ(std::memcmp(&f[i], &r, 4), 0) << isa << " h=" << h[i];
      }
    }
    std::vector<uint16_t> y(x.size());
    f32_to_f16_row(x.data(), y.data(), static_cast<int64_t>(x.size()));
    for (size_t i = 0; i < x.size(); ++i) ASSERT_EQ(y[i], f32_to_f16(x[i])) << isa << " x=" << x[i];
  }
}

// fma_chains: w accumulator chains of exact fused multiply-adds, so the same bits as std::fma in
// order on every ISA and width (the chains of ggml's dot products), f32 and f16 x; values spread
// over many binades so that any reassociation or unfused rounding would show.
TEST(Fused, FmaChainsEveryIsaEqualStdFmaInOrder) {
  IsaGuard guard;
  std::mt19937 rng(11);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  const int64_t n = 64 * 37;
  std::vector<float> x(n), y(n);
  std::vector<uint16_t> xh(n);
  for (int64_t i = 0; i < n; ++i) {
    x[i] = std::ldexp(nd(rng), static_cast<int>(rng() % 24) - 12);
    y[i] = std::ldexp(nd(rng), static_cast<int>(rng() % 24) - 12);
    xh[i] = f32_to_f16(x[i]);
  }
  for (const int64_t w : {8, 16, 32, 64}) {
    std::vector<float> want(w, 0.5f), want_h(w, 0.5f);
    for (int64_t i = 0; i < n; i += w)
      for (int64_t o = 0; o < w; ++o) {
        want[o] = std::fma(x[i + o], y[i + o], want[o]);
        want_h[o] = std::fma(f16_to_f32(xh[i + o]), y[i + o], want_h[o]);
      }
    for (const auto& isa : available_isas()) {
      set_isa(isa);
      std::vector<float> got(w, 0.5f), got_h(w, 0.5f);
      fma_chains(x.data(), y.data(), n, w, got.data());
      fma_chains(xh.data(), y.data(), n, w, got_h.data());
      EXPECT_EQ(std::memcmp(got.data(), want.data(), 4 * w), 0) << isa << " w " << w;
      EXPECT_EQ(std::memcmp(got_h.data(), want_h.data(), 4 * w), 0) << isa << " w " << w << " (f16 x)";
    }
  }
}

// SiLU·m against double, over the whole useful range (including where e^−x overflows or
// underflows), on every ISA; lengths with vector tails.
TEST(Fused, SiluMulEveryIsaMatchesF64) {
  IsaGuard guard;
  std::mt19937 rng(11);
  std::normal_distribution<float> nd(0.0f, 6.0f);
  std::vector<float> x, m;
  for (float v : {0.0f, -0.0f, 1e-30f, -1e-30f, 88.0f, -88.0f, 89.5f, -89.5f, 104.0f, -104.0f, 200.0f, -200.0f,
                  0.34657359f, -0.34657359f, 20.0f, -20.0f, 1.0f, -1.0f}) {
    x.push_back(v);
    m.push_back(1.0f);
  }
  while (x.size() < 4099) {
    x.push_back(nd(rng));
    m.push_back(nd(rng));
  }
  for (const auto& isa : available_isas()) {
    set_isa(isa);
    for (int64_t n : {int64_t{4099}, int64_t{16}, int64_t{5}}) {
      std::vector<float> y(n), ya(x.begin(), x.begin() + n);
      silu_mul(x.data(), m.data(), y.data(), n);
      silu_mul(ya.data(), m.data(), ya.data(), n);  // in place
      for (int64_t i = 0; i < n; ++i) {
        const double xd = x[i], ref = xd / (1.0 + std::exp(-xd)) * m[i];
        // Absolute part: for x < −88.72 e^−x overflows f32 and silu is ±0 instead of |ref| < 2.7e-37.
        ASSERT_NEAR(y[i], ref, 5e-7 * std::fabs(ref) + 3e-37) << isa << " x=" << x[i];
        ASSERT_EQ(y[i], ya[i]) << isa;
      }
    }
  }
}

// softmax_row: within a few ulp of the f64 softmax on every ISA (rows with a tail, a single value,
// large spreads where most weights underflow to 0).
TEST(Fused, SoftmaxRowEveryIsaMatchesF64) {
  IsaGuard guard;
  std::mt19937 rng(15);
  std::normal_distribution<float> nd(0.0f, 8.0f);
  for (const auto& isa : available_isas()) {
    set_isa(isa);
    for (int64_t n : {int64_t{3137}, int64_t{16}, int64_t{5}, int64_t{1}}) {
      std::vector<float> x(static_cast<size_t>(n));
      for (auto& v : x) v = nd(rng);
      if (n > 3) x[2] = 60.0f;  // one dominant value: the rest far below it
      double mx = -INFINITY, sum = 0;
      for (float v : x) mx = std::max(mx, double(v));
      for (float v : x) sum += std::exp(double(v) - mx);
      std::vector<float> y = x;
      softmax_row(y.data(), n);
      for (int64_t i = 0; i < n; ++i) {
        const double ref = std::exp(double(x[i]) - mx) / sum;
        // x − max is rounded to f32 first (as every f32 softmax does): |x − max|·2⁻²⁴ relative more.
        const double tol = (1e-6 + std::fabs(double(x[i]) - mx) * 6e-8) * ref + 1e-38;
        ASSERT_NEAR(y[i], ref, tol) << isa << " n=" << n << " i=" << i;
      }
    }
  }
}

// Soft-capping cap·tanh(x/cap): within 2 ulp of the f64 value on every ISA, across the switch
// between the polynomial and the exp form (|x/cap| = 0.625), near 0, and where tanh saturates.
TEST(Fused, SoftcapEveryIsaMatchesF64) {
  IsaGuard guard;
  const float cap = 30.0f;
  std::mt19937 rng(14);
  std::normal_distribution<float> nd(0.0f, 25.0f);
  std::vector<float> x;
  for (float v : {0.0f, -0.0f, 1e-30f, -1e-30f, 1e-3f, 18.75f, -18.75f, 600.0f, -600.0f, 1e30f, -1e30f, INFINITY,
                  -INFINITY})
    x.push_back(v);
  for (float v = 18.7f; v < 18.8f; v += 0.001f) x.push_back(v);
  while (x.size() < 4099) x.push_back(nd(rng));
  for (const auto& isa : available_isas()) {
    set_isa(isa);
    for (int64_t n : {int64_t{4099}, int64_t{16}, int64_t{5}}) {
      std::vector<float> y(n), ya(x.begin(), x.begin() + n);
      softcap(x.data(), y.data(), n, cap);
      softcap(ya.data(), ya.data(), n, cap);  // in place
      for (int64_t i = 0; i < n; ++i) {
        const double ref = static_cast<double>(cap) * std::tanh(static_cast<double>(x[i] * (1.0f / cap)));
        ASSERT_NEAR(y[i], ref, 2.5e-7 * std::fabs(ref) + 1e-37) << isa << " x=" << x[i];
        ASSERT_EQ(y[i], ya[i]) << isa;
      }
    }
  }
}

TEST(Fused, ConvSiluEveryIsaMatchesF64) {
  IsaGuard guard;
  std::mt19937 rng(12);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  for (int64_t C : {6144, 37}) {
    const int64_t K = 4;
    std::vector<float> X(K * C), wT(K * C);
    for (auto& v : X) v = nd(rng);
    for (auto& v : wT) v = nd(rng);
    for (const auto& isa : available_isas()) {
      set_isa(isa);
      std::vector<float> y(C);
      conv_silu(X.data(), wT.data(), C, K, y.data());
      for (int64_t c = 0; c < C; ++c) {
        double s = 0, a = 0;
        for (int64_t j = 0; j < K; ++j) s += static_cast<double>(wT[j * C + c]) * X[j * C + c], a += std::fabs(wT[j * C + c] * X[j * C + c]);
        const double ref = s / (1.0 + std::exp(-s));
        ASSERT_NEAR(y[c], ref, 5e-7 * std::fabs(ref) + 4e-7 * a) << isa << " C=" << C << " c=" << c;
      }
    }
  }
}

// f16 rounding: bit-identical to the scalar f32_to_f16/f16_to_f32 pair on every ISA, for values
// next to rounding boundaries, subnormals, the overflow threshold and infinities.
TEST(Fused, F16RoundEveryIsaBitExact) {
  IsaGuard guard;
  std::vector<float> x;
  std::mt19937 rng(13);
  for (uint32_t h = 0; h < 0x7c00u; h += 7) {  // midpoints between neighbouring f16 values, ± 1 ulp of f32
    const float a = f16_to_f32(static_cast<uint16_t>(h)), b = f16_to_f32(static_cast<uint16_t>(h + 1));
    const float mid = a + (b - a) / 2;
    for (float v : {mid, std::nextafter(mid, 0.0f), std::nextafter(mid, 1e9f), a}) {
      x.push_back(v);
      x.push_back(-v);
    }
  }
  for (float v : {65504.0f, 65519.99f, 65520.0f, 1e6f, INFINITY, -INFINITY, 1e-10f, 5.96e-8f, 2.98e-8f, 2.99e-8f})
    x.push_back(v);
  for (const auto& isa : available_isas()) {
    set_isa(isa);
    std::vector<float> y(x.size());
    f16_round(x.data(), y.data(), static_cast<int64_t>(x.size()));
    for (size_t i = 0; i < x.size(); ++i) {
      const float ref = f16_to_f32(f32_to_f16(x[i]));
      uint32_t a, b;
      std::memcpy(&a, &y[i], 4);
      std::memcpy(&b, &ref, 4);
      ASSERT_EQ(a, b) << isa << " x=" << x[i];
    }
  }
}

}  // namespace
