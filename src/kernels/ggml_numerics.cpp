// llama.cpp's CPU arithmetic (ggml's x86 builds) reproduced bit for bit where the Gemma 4 decoder
// needs it: the summation order of each product, the f16 roundings and online softmax of its
// flash attention, its vectorised exp, its GELU table, and which of these ggml picks for which
// shape. Why: the e2e models amplify any last-bit difference (docs/gemma4.md, "Numerics").
// Checked against node-llama-cpp's libggml-cpu by tests/models/gemma4_ggml_test.cpp.
//
// `lanes` is ggml's f32 vector width: 16 for its AVX-512 builds, 8 for AVX2 (+FMA). The helpers
// are portable C++ (no ISA code here): the SIMD accumulators are arrays, fused multiply-adds are
// std::fma, and additions happen in ggml's order. The products' FMA chains — the hot loop of f32
// weights — run on the active set's vector kernel (fma_chains, kernels/fused.h), exact like std::fma.
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <type_traits>
#include <vector>

#include "core/half.h"
#include "kernels/fused.h"
#include "kernels/isa.h"
#include "kernels/thread_pool.h"
#include "kernels/ggml.h"
#include "kernels/ggml_fa.h"

namespace oxi {
namespace {

constexpr int64_t kFaTile = 64;  // GGML_FA_TILE_Q = GGML_FA_TILE_KV

// Sum of the `lanes` floats of one vector register as ggml reduces it: _mm512_reduce_add_ps
// (halves 512 → 256 → 128, then [0,1] + [2,3], then 0 + 1) or, for 8 lanes, GGML_F32x8_REDUCE's
// two horizontal adds (hadd: (0+1) + (2+3)).
float reduce_lanes(const float* a, int lanes) {
  if (lanes == 16) {
    float t3[8], t6[4];
    for (int j = 0; j < 8; ++j) t3[j] = a[j] + a[j + 8];
    for (int j = 0; j < 4; ++j) t6[j] = t3[j] + t3[j + 4];
    return (t6[0] + t6[2]) + (t6[1] + t6[3]);
  }
  float t0[4];
  for (int j = 0; j < 4; ++j) t0[j] = a[j] + a[j + 4];
  return (t0[0] + t0[1]) + (t0[2] + t0[3]);
}

// The 8-lane sum with movehl + movehdup ((0+2) + (1+3)): llamafile's hsum(__m256) and the AVX2
// ggml_vec_soft_max_f32.
float reduce_lanes_movehl(const float* a, int lanes) {
  if (lanes == 16) return reduce_lanes(a, 16);
  float t0[4];
  for (int j = 0; j < 4; ++j) t0[j] = a[j] + a[j + 4];
  return (t0[0] + t0[2]) + (t0[1] + t0[3]);
}

// GGML_F32_VEC_REDUCE over ggml's 4 accumulators (acc[j·lanes + l]): 0 += 2, 1 += 3, 0 += 1,
// then the lane sum.
float reduce_accumulators(float* acc, int lanes) {
  float* a[4] = {acc, acc + lanes, acc + 2 * lanes, acc + 3 * lanes};
  for (int l = 0; l < lanes; ++l) {
    a[0][l] += a[2][l];
    a[1][l] += a[3][l];
  }
  for (int l = 0; l < lanes; ++l) a[0][l] += a[1][l];
  return reduce_lanes(a[0], lanes);
}

inline float as_f32(float v) { return v; }
inline float as_f32(uint16_t h) { return f16_to_f32(h); }

// The SIMD part of ggml_vec_dot_{f16,f32} over np (a multiple of 4·lanes) elements: 4
// accumulators of `lanes` FMA chains, block after block (one flat array of 4·lanes chains, run
// by the active set's vector kernel), then GGML_F32_VEC_REDUCE.
template <class X>
float dot_blocks(const X* x, const float* y, int64_t np, int lanes) {
  float acc[64] = {};
  fma_chains(x, y, np, 4 * lanes, acc);
  return reduce_accumulators(acc, lanes);
}

// llamafile's tinyBLAS product of two rows: one FMA chain per lane over the n (a multiple of
// lanes) columns, then hsum.
template <class X>
float sgemm_dot(const X* x, const float* y, int64_t n, int lanes) {
  float acc[16] = {};
  fma_chains(x, y, n, lanes, acc);
  return reduce_lanes_movehl(acc, lanes);
}

// ggml's table entry: its gelu formula as GCC compiles it for the FMA builds (1 + a·x·x contracted
// to fma(a·x, x, 1)); all 65536 entries equal libggml-cpu's table (without the fma, x = −1.999
// differs).
float gelu_table_entry(float x) {
  constexpr float kA = 0.044715f, kS = 0.79788456080286535587989211986876f;
  return 0.5f * x * (1.0f + std::tanh(kS * x * std::fma(kA * x, x, 1.0f)));
}

struct GeluTable {
  std::vector<float> t;
  GeluTable() : t(65536) {
    for (uint32_t h = 0; h < 65536; ++h)
      t[h] = f16_to_f32(f32_to_f16(gelu_table_entry(f16_to_f32(static_cast<uint16_t>(h)))));
  }
};

}  // namespace

bool ggml_avx512_host() {
#if defined(OXI_HAVE_GGML_FA_AVX512)
  static const bool cpu = [] {
    // OXI_GGML_NO_AVX512=1: emulate a host without AVX-512 (what an AVX2-only machine, aarch64 or
    // the wasm build computes; tests compare the wasm module with the native CLI this way).
    if (const char* e = std::getenv("OXI_GGML_NO_AVX512"); e && e[0] == '1') return false;
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512vl") &&
           __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512dq") &&
           __builtin_cpu_supports("fma") && __builtin_cpu_supports("f16c");
  }();
  return cpu;
#else
  return false;
#endif
}

bool ggml_fa_avx512_ok(int lanes, int64_t hd) {
  static const bool off = [] {
    const char* e = std::getenv("OXI_GEMMA4_FA_SCALAR");  // tests / debugging: the scalar emulation
    return e && e[0] == '1';
  }();
  return ggml_avx512_host() && !off && lanes == 16 && hd > 0 && hd % 64 == 0;
}

#if !defined(OXI_HAVE_GGML_FA_AVX512)
// Builds without the AVX-512 code (aarch64, wasm): ggml_fa_avx512_ok() and ggml_avx512_host()
// are false there, so these are never called.
namespace fa_avx512 {
void prepare(const void* const*, const void* const*, int64_t, int64_t, bool, int64_t, float*, float*) { std::abort(); }
void tiled_row(const float*, int64_t, const float*, const float*, int64_t, int64_t, int64_t, float*, float*) { std::abort(); }
void tiled_rows(const float* const*, int, int64_t, const float*, const float*, int64_t, int64_t, int64_t, float*, float* const*) {
  std::abort();
}
void vector_chunk(const float*, int64_t, const void* const*, const void* const*, int64_t, int64_t, bool, float&, float&, uint16_t*,
                  float*) {
  std::abort();
}
void geglu(const float*, float*, const float*, int64_t) { std::abort(); }
}  // namespace fa_avx512
#endif

int ggml_host_lanes() {
#if defined(__x86_64__) || defined(__i386__)
  static const int lanes = [] {
    if (!ggml_avx512_host()) return 8;
    __builtin_cpu_init();
    const bool avx512 = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
                        __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq");
    return avx512 ? 16 : 8;
  }();
  return lanes;
#else
  return 8;
#endif
}

float ggml_dot_f16(const uint16_t* x, const float* y, int64_t n, int lanes) {
  // SIMD blocks of 4·lanes (f16 → f32, FMA into 4 accumulators, reduce), then the leftovers as
  // exact products added in double; y holds f16 values (the converted query).
  const int64_t np = n & ~static_cast<int64_t>(4 * lanes - 1);
  double sum = np > 0 ? static_cast<double>(dot_blocks(x, y, np, lanes)) : 0.0;
  for (int64_t i = np; i < n; ++i) sum += static_cast<double>(f16_to_f32(x[i]) * y[i]);
  return static_cast<float>(sum);
}

float ggml_dot_f32(const float* x, const float* y, int64_t n, int lanes) {
  // The same blocks in f32; the leftovers are added in f32 with a separate multiply (vec.cpp is
  // not contracted in ggml's build: checked against libggml-cpu).
  const int64_t np = n & ~static_cast<int64_t>(4 * lanes - 1);
  float sum = np > 0 ? dot_blocks(x, y, np, lanes) : 0.0f;
  for (int64_t i = np; i < n; ++i) sum += x[i] * y[i];
  return sum;
}

float ggml_v_expf(float x, int lanes) {
  // Cody–Waite reduction x = n·ln2 + b, a degree-5 polynomial in b, times 2^n. AVX-512 scales with
  // scalef (0 / +inf beyond |n| > 192); AVX2 builds 2^n from exponent bits, with a split scale
  // for |n| > 126.
  const float r = 0x1.8p23f;
  const float z = std::fma(x, 0x1.715476p+0f, r);
  const float n = z - r;
  const float b = std::fma(-n, 0x1.7f7d1cp-20f, std::fma(-n, 0x1.62e4p-1f, x));
  const float u = b * b;
  const float p = std::fma(std::fma(0x1.0e4020p-7f, b, 0x1.573e2ep-5f), u, std::fma(0x1.555e66p-3f, b, 0x1.fffdb6p-2f));
  if (lanes == 16) {
    if (std::fabs(n) > 192.0f) return n <= 0.0f ? 0.0f : INFINITY;
    if (std::isnan(n)) return n;
    return std::ldexp(std::fma(p, u, std::fma(0x1.ffffecp-1f, b, 1.0f)), static_cast<int>(n));
  }
  auto bits = [](float f) { uint32_t v; std::memcpy(&v, &f, 4); return v; };
  auto flt = [](uint32_t v) { float f; std::memcpy(&f, &v, 4); return f; };
  const uint32_t e = bits(z) << 23;
  const float k = flt(e + bits(1.0f));
  const float j = std::fma(p, u, 0x1.ffffecp-1f * b);
  if (!(std::fabs(n) > 126.0f)) return std::fma(j, k, k);
  const uint32_t g = n <= 0.0f ? 0x82000000u : 0u;
  const float s1 = flt(g + 0x7f000000u), s2 = flt(e - g);
  if (std::fabs(n) > 192.0f) return s1 * s1;
  return std::fma(s2, j, s2) * s1;
}

double ggml_soft_max(float* x, int64_t n, float max, int lanes) {
  // Blocks of `lanes`: x ← v_expf(x − max), block sums (lane tree) added in double; the tail
  // with expf.
  double sum = 0.0;
  int64_t i = 0;
  for (; i + lanes <= n; i += lanes) {
    float v[16];
    for (int l = 0; l < lanes; ++l) v[l] = x[i + l] = ggml_v_expf(x[i + l] - max, lanes);
    sum += static_cast<double>(reduce_lanes_movehl(v, lanes));
  }
  for (; i < n; ++i) {
    x[i] = std::exp(x[i] - max);
    sum += static_cast<double>(x[i]);
  }
  return sum;
}

static const GeluTable& gelu_table() {
  static const GeluTable table;
  return table;
}

float ggml_gelu(float x) {
  if (x <= -10.0f) return 0.0f;
  if (x >= 10.0f) return x;
  return gelu_table().t[f32_to_f16(x)];
}

void ggml_geglu(float* g, const float* u, int64_t n) {
#if defined(OXI_HAVE_GGML_FA_AVX512)
  if (ggml_avx512_host()) return fa_avx512::geglu(gelu_table().t.data(), g, u, n);
#endif
  for (int64_t i = 0; i < n; ++i) g[i] = ggml_gelu(g[i]) * u[i];
}

void ggml_rope_neox(float* x, int64_t n_heads, int64_t hd, int64_t pos, int64_t n_dims, float base, const float* freq_factors) {
  // angles by ggml's recurrence theta_i = pos·base^(−2i/n_dims) (repeated f32 multiplication),
  // divided by the frequency factor; pairs (i, i + n_dims/2); dims past n_dims untouched
  const float theta_scale = std::pow(base, -2.0f / static_cast<float>(n_dims));
  const int64_t half = n_dims / 2;
  thread_local std::vector<float> cs, sn;
  cs.resize(static_cast<size_t>(half));
  sn.resize(static_cast<size_t>(half));
  float theta = static_cast<float>(pos);
  for (int64_t i = 0; i < half; ++i) {
    const float t = theta / (freq_factors ? freq_factors[i] : 1.0f);
    cs[static_cast<size_t>(i)] = std::cos(t);
    sn[static_cast<size_t>(i)] = std::sin(t);
    theta *= theta_scale;
  }
  for (int64_t h = 0; h < n_heads; ++h) {
    float* v = x + h * hd;
    for (int64_t i = 0; i < half; ++i) {
      const float x0 = v[i], x1 = v[i + half];
      // as GCC contracts ggml's x0·cos − x1·sin and x0·sin + x1·cos
      v[i] = std::fma(x0, cs[static_cast<size_t>(i)], -(x1 * sn[static_cast<size_t>(i)]));
      v[i + half] = std::fma(x0, sn[static_cast<size_t>(i)], x1 * cs[static_cast<size_t>(i)]);
    }
  }
}

namespace {

// ggml's merge of two partial results x·a + y·b as GCC contracts it: the first product fused
// (as in its RoPE; checked against libggml with a later chunk holding the maximum)
inline float merge_mad(float x, float a, float y, float b) { return std::fma(x, a, y * b); }

// ggml's vector kernel (ggml_compute_forward_flash_attn_ext_f16_one_chunk) over cells b … e−1 of
// the row's list: online softmax from M = −inf, S = 0 (S updated without FMA); acc gets the
// unnormalised V·p in f32. f16 cache (E = uint16_t): scores against the f16-converted q (q16),
// V·p accumulated in an f16 buffer — each update one FMA rounded to f16 (ggml_vec_mad_f16), the
// rescale a multiply rounded to f16. f32 cache (E = float): f32 q and accumulator.
template <class E>
void fa_vector_chunk(const float* q, int64_t hd, const void* const* k, const void* const* v, int64_t b, int64_t e,
                     int lanes, float& M, float& S, std::vector<float>& acc) {
  constexpr bool f16 = std::is_same_v<E, uint16_t>;
  thread_local std::vector<E> a;
  auto load = [](E x) { return as_f32(x); };
  auto store = [](float x) -> E {
    if constexpr (f16) return f32_to_f16(x);
    else return x;
  };
  M = -INFINITY;
  S = 0.0f;
  a.assign(static_cast<size_t>(hd), E{});
  for (int64_t c = b; c < e; ++c) {
    const E* kc = static_cast<const E*>(k[c]);
    float s;
    if constexpr (f16) s = ggml_dot_f16(kc, q, hd, lanes);
    else s = ggml_dot_f32(kc, q, hd, lanes);
    float ms = 1.0f, vs = 1.0f;
    if (s > M) {
      ms = std::exp(M - s);
      M = s;
      for (E& x : a) x = store(load(x) * ms);
    } else {
      vs = std::exp(s - M);
    }
    const E* vc = static_cast<const E*>(v[c]);
    for (int64_t i = 0; i < hd; ++i) a[static_cast<size_t>(i)] = store(std::fma(load(vc[i]), vs, load(a[static_cast<size_t>(i)])));
    S = S * ms + vs;
  }
  acc.resize(static_cast<size_t>(hd));
  for (int64_t i = 0; i < hd; ++i) acc[static_cast<size_t>(i)] = load(a[static_cast<size_t>(i)]);
}

void fa_vector_chunk(const float* q, const float* q16, int64_t hd, const void* const* k, const void* const* v, int64_t b,
                     int64_t e, bool kv_f16, int lanes, float& M, float& S, std::vector<float>& acc) {
#if defined(OXI_HAVE_GGML_FA_AVX512)
  if (ggml_fa_avx512_ok(lanes, hd)) {
    thread_local std::vector<uint16_t> a16;
    a16.resize(static_cast<size_t>(hd));
    acc.resize(static_cast<size_t>(hd));
    fa_avx512::vector_chunk(kv_f16 ? q16 : q, hd, k, v, b, e, kv_f16, M, S, a16.data(), acc.data());
    return;
  }
#endif
  if (kv_f16) fa_vector_chunk<uint16_t>(q16, hd, k, v, b, e, lanes, M, S, acc);
  else fa_vector_chunk<float>(q, hd, k, v, b, e, lanes, M, S, acc);
}

}  // namespace

void ggml_flash_attn_row(const float* q, int64_t hd, const void* const* k, const void* const* v, int64_t c0, int64_t n,
                         bool kv_f16, bool tiled, int lanes, float* out, int64_t n_view, int n_threads) {
  thread_local std::vector<float> acc, part, q16;
  float M = -INFINITY, S = 0.0f;
  q16.resize(static_cast<size_t>(hd));
  for (int64_t i = 0; i < hd; ++i) q16[static_cast<size_t>(i)] = f16_to_f32(f32_to_f16(q[i]));
  if (!tiled && n_view >= 512 && n_threads > 0) {
    // one query over a view of 512+ cells: ggml splits the view into n_threads chunks of
    // ceil(n_view / n_threads) cells, runs the vector kernel on each and merges the partial
    // (M, S, VKQ) in chunk order (ggml_flash_attn_ext_reduce_partials)
    const int64_t cs = (n_view + n_threads - 1) / n_threads;
    acc.assign(static_cast<size_t>(hd), 0.0f);
    for (int64_t ch = 0; ch < n_threads; ++ch) {
      const int64_t b = std::max<int64_t>(ch * cs, c0) - c0, e = std::min<int64_t>(std::min((ch + 1) * cs, n_view), c0 + n) - c0;
      if (b >= e) continue;  // no unmasked cell: S = 0, skipped
      float Mc, Sc;
      fa_vector_chunk(q, q16.data(), hd, k, v, b, e, kv_f16, lanes, Mc, Sc, part);
      if (Sc == 0.0f) continue;
      const float Mn = std::fmax(M, Mc);
      const float so = std::exp(M - Mn), sn = std::exp(Mc - Mn);
      for (int64_t i = 0; i < hd; ++i)
        acc[static_cast<size_t>(i)] = merge_mad(acc[static_cast<size_t>(i)], so, part[static_cast<size_t>(i)], sn);
      S = merge_mad(S, so, Sc, sn);
      M = Mn;
    }
    const float inv = S == 0.0f ? 1.0f : 1.0f / S;
    for (int64_t i = 0; i < hd; ++i) out[i] = acc[static_cast<size_t>(i)] * inv;
    return;
  }
  if (!tiled) {
    fa_vector_chunk(q, q16.data(), hd, k, v, 0, n, kv_f16, lanes, M, S, acc);
#if defined(OXI_HAVE_GGML_FA_AVX512)
  } else if (ggml_fa_avx512_ok(lanes, hd)) {
    thread_local std::vector<float> kT, vf;
    const int64_t tile0 = c0 / kFaTile * kFaTile, n_tiles = (c0 + n - tile0 + kFaTile - 1) / kFaTile;
    kT.resize(static_cast<size_t>(n_tiles * kFaTile * hd));
    vf.resize(kT.size());
    acc.resize(static_cast<size_t>(hd));
    fa_avx512::prepare(k, v, c0, n, kv_f16, hd, kT.data(), vf.data());
    fa_avx512::tiled_row(q, hd, kT.data(), vf.data(), tile0, c0, n, acc.data(), out);
    return;
#endif
  } else {
    // Tiles of 64 cells aligned to cell 0: each score one FMA chain over the head (f32 Q), the
    // tile max, rescale of the accumulator on a new max, v_expf softmax with a double tile sum,
    // then V accumulated by one FMA chain per output over the tile's cells (simd_gemm). Cells
    // outside [c0, c0+n) are masked (−inf → weight 0, which leaves the accumulator unchanged).
    auto k16 = [&](int64_t i) { return static_cast<const uint16_t*>(k[i]); };
    auto v16 = [&](int64_t i) { return static_cast<const uint16_t*>(v[i]); };
    auto k32 = [&](int64_t i) { return static_cast<const float*>(k[i]); };
    auto v32 = [&](int64_t i) { return static_cast<const float*>(v[i]); };
    acc.assign(static_cast<size_t>(hd), 0.0f);
    float kq[kFaTile];
    for (int64_t t0 = (c0 / kFaTile) * kFaTile; t0 < c0 + n; t0 += kFaTile) {
      float tile_max = -INFINITY;
      for (int64_t tk = 0; tk < kFaTile; ++tk) {
        const int64_t c = t0 + tk - c0;
        float s = -INFINITY;
        if (c >= 0 && c < n) {
          s = 0.0f;
          if (kv_f16) {
            const uint16_t* kc = k16(c);
            for (int64_t i = 0; i < hd; ++i) s = std::fma(f16_to_f32(kc[i]), q[i], s);
          } else {
            const float* kc = k32(c);
            for (int64_t i = 0; i < hd; ++i) s = std::fma(kc[i], q[i], s);
          }
        }
        kq[tk] = s;
        tile_max = s > tile_max ? s : tile_max;
      }
      const float Mnew = std::fmax(M, tile_max);
      if (Mnew > M) {
        const float ms = std::exp(M - Mnew);
        for (float& a : acc) a *= ms;
        S *= ms;
      }
      M = Mnew;
      S = static_cast<float>(static_cast<double>(S) + ggml_soft_max(kq, kFaTile, Mnew, lanes));
      for (int64_t tk = 0; tk < kFaTile; ++tk) {
        const int64_t c = t0 + tk - c0;
        if (c < 0 || c >= n) continue;
        if (kv_f16) {
          const uint16_t* vc = v16(c);
          for (int64_t i = 0; i < hd; ++i) acc[static_cast<size_t>(i)] = std::fma(f16_to_f32(vc[i]), kq[tk], acc[static_cast<size_t>(i)]);
        } else {
          const float* vc = v32(c);
          for (int64_t i = 0; i < hd; ++i) acc[static_cast<size_t>(i)] = std::fma(vc[i], kq[tk], acc[static_cast<size_t>(i)]);
        }
      }
    }
  }
  const float inv = S == 0.0f ? 0.0f : 1.0f / S;
  for (int64_t i = 0; i < hd; ++i) out[i] = acc[static_cast<size_t>(i)] * inv;
}

void ggml_attn_row_noflash(const float* q, int64_t hd, const void* const* k, const void* const* v, int64_t c0, int64_t n,
                           bool kv_f16, bool batch, bool one_head, int lanes, float* out) {
  // Cells are processed in blocks aligned to 4·lanes (ggml's vec_dot blocks; the cache view is a
  // multiple of 256 cells): outside [c0, c0+n) the mask is −inf, so p = 0 and the products add
  // nothing to ggml's accumulators.
  const int64_t A = 4 * lanes, a0 = c0 - c0 % A, a1 = ((c0 + n + A - 1) / A) * A, m = a1 - a0;
  thread_local std::vector<float> p, qf, col;
  p.assign(static_cast<size_t>(m), -INFINITY);
  qf.resize(static_cast<size_t>(hd));
  col.resize(static_cast<size_t>(m));
  // kq = K·q: llamafile's sgemm for 2+ tokens where it gets a contiguous q — always with the f16
  // cache (q is first converted to f16 into a buffer), with the f32 cache only for a single head
  // (else the permuted q is strided) — else ggml_vec_dot
  for (int64_t i = 0; i < hd; ++i) qf[static_cast<size_t>(i)] = kv_f16 ? f16_to_f32(f32_to_f16(q[i])) : q[i];
  float mx = -INFINITY;
  for (int64_t c = 0; c < n; ++c) {
    float s;
    if (!batch || (!kv_f16 && !one_head)) {
      s = kv_f16 ? ggml_dot_f16(static_cast<const uint16_t*>(k[c]), qf.data(), hd, lanes)
                 : ggml_dot_f32(static_cast<const float*>(k[c]), qf.data(), hd, lanes);
    } else {
      s = kv_f16 ? sgemm_dot(static_cast<const uint16_t*>(k[c]), qf.data(), hd, lanes)
                 : sgemm_dot(static_cast<const float*>(k[c]), qf.data(), hd, lanes);
    }
    p[static_cast<size_t>(c0 + c - a0)] = s;  // · scale 1, + mask 0
    mx = s > mx ? s : mx;
  }
  // ggml_soft_max_ext over the view, normalised by a multiply with (float)(1/sum)
  const float inv = static_cast<float>(1.0 / ggml_soft_max(p.data(), m, mx, lanes));
  for (float& x : p) x *= inv;
  if (kv_f16)
    for (float& x : p) x = f16_to_f32(f32_to_f16(x));  // kq converted to f16 for the f16 V product
  // kqv = V·p over the cells: llamafile's sgemm (lanes FMA chains over the cells, hsum) for 2+
  // tokens, ggml_vec_dot otherwise
  for (int64_t i = 0; i < hd; ++i) {
    std::fill(col.begin(), col.end(), 0.0f);
    for (int64_t c = 0; c < n; ++c)
      col[static_cast<size_t>(c0 + c - a0)] =
          kv_f16 ? f16_to_f32(static_cast<const uint16_t*>(v[c])[i]) : static_cast<const float*>(v[c])[i];
    out[i] = batch ? sgemm_dot(col.data(), p.data(), m, lanes) : dot_blocks(col.data(), p.data(), m, lanes);
  }
}

void ggml_matmul_f32(const MatrixView& w, const float* x, int64_t T, float* y, int lanes, bool mul_mat_id) {
  const bool sgemm = !mul_mat_id && T >= 2 && w.cols % lanes == 0 && w.rows % 4 == 0;
  if (sgemm && isa_f32_sgemm_lanes() == lanes) {
    matmul(w, x, T, y);  // our kernels accumulate exactly as llamafile's tinyBLAS does
    return;
  }
  parallel_for_chunked(w.rows, 256, [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      const float* wr = reinterpret_cast<const float*>(w.data + static_cast<uint64_t>(r) * w.row_bytes);
      for (int64_t t = 0; t < T; ++t) {
        const float* xt = x + t * w.cols;
        float& out = y[t * w.rows + r];
        out = sgemm ? sgemm_dot(wr, xt, w.cols, lanes) : ggml_dot_f32(wr, xt, w.cols, lanes);
      }
    }
  });
}

}  // namespace oxi
