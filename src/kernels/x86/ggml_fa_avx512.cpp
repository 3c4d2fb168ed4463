// ggml's CPU flash attention (ggml_numerics.cpp) on AVX-512 vectors, bit for bit the scalar
// emulation's values: the vectorisation runs along what is independent in ggml's arithmetic —
// cells for the tiled kernel's scores (each score one FMA chain over the head), the head for the
// accumulators (one FMA chain per output element), ggml's own 16-lane blocks for the dot products
// and v_expf — while every sum keeps its order. Compiled with AVX-512F/VL/BW/DQ + F16C + FMA and
// -ffp-contract=off (no fused operation the scalar code does not have); entered only after
// ggml_fa_avx512_ok() (ggml_fa.h). Checked bitwise against the scalar code and libggml's vectors
// (tests/models/gemma4_ggml_test.cpp).
#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>

#include "kernels/ggml_fa.h"

namespace oxi::fa_avx512 {
namespace {

constexpr int64_t kTile = 64;  // GGML_FA_TILE_KV

// _mm512_reduce_add_ps's order as ggml's build gets it (see reduce_lanes in ggml_numerics.cpp).
float reduce16(__m512 v) {
  alignas(64) float a[16];
  _mm512_store_ps(a, v);
  float t3[8], t6[4];
  for (int j = 0; j < 8; ++j) t3[j] = a[j] + a[j + 8];
  for (int j = 0; j < 4; ++j) t6[j] = t3[j] + t3[j + 4];
  return (t6[0] + t6[2]) + (t6[1] + t6[3]);
}

// ggml_v_expf, AVX-512 form (the scalar ggml_v_expf(x, 16) lane by lane).
__m512 v_expf16(__m512 x) {
  const __m512 r = _mm512_set1_ps(0x1.8p23f);
  const __m512 z = _mm512_fmadd_ps(x, _mm512_set1_ps(0x1.715476p+0f), r);
  const __m512 n = _mm512_sub_ps(z, r);
  const __m512 b = _mm512_fnmadd_ps(n, _mm512_set1_ps(0x1.7f7d1cp-20f),
                                    _mm512_fnmadd_ps(n, _mm512_set1_ps(0x1.62e4p-1f), x));
  const __m512 u = _mm512_mul_ps(b, b);
  const __m512 p = _mm512_fmadd_ps(_mm512_fmadd_ps(_mm512_set1_ps(0x1.0e4020p-7f), b, _mm512_set1_ps(0x1.573e2ep-5f)), u,
                                   _mm512_fmadd_ps(_mm512_set1_ps(0x1.555e66p-3f), b, _mm512_set1_ps(0x1.fffdb6p-2f)));
  const __m512 j = _mm512_fmadd_ps(p, u, _mm512_fmadd_ps(_mm512_set1_ps(0x1.ffffecp-1f), b, _mm512_set1_ps(1.0f)));
  __m512 res = _mm512_scalef_ps(j, n);
  const __mmask16 big = _mm512_cmp_ps_mask(_mm512_abs_ps(n), _mm512_set1_ps(192.0f), _CMP_GT_OQ);
  if (big) {
    const __mmask16 neg = _mm512_cmp_ps_mask(n, _mm512_setzero_ps(), _CMP_LE_OQ);
    res = _mm512_mask_blend_ps(big, res, _mm512_mask_blend_ps(neg, _mm512_set1_ps(INFINITY), _mm512_setzero_ps()));
  }
  const __mmask16 nan = _mm512_cmp_ps_mask(n, n, _CMP_UNORD_Q);
  return _mm512_mask_blend_ps(nan, res, n);
}

inline __m512 load_row(const void* p, int64_t i, bool f16) {
  if (f16) return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(static_cast<const uint16_t*>(p) + i)));
  return _mm512_loadu_ps(static_cast<const float*>(p) + i);
}

inline __m256i to_f16(__m512 v) { return _mm512_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC); }

}  // namespace

void prepare(const void* const* k, const void* const* v, int64_t c0, int64_t n, bool kv_f16, int64_t hd, float* kT,
             float* vf) {
  const int64_t tile0 = c0 / kTile * kTile;
  const int64_t n_tiles = (c0 + n - tile0 + kTile - 1) / kTile;
  std::memset(kT, 0, static_cast<size_t>(n_tiles * kTile * hd) * sizeof(float));
  for (int64_t c = 0; c < n; ++c) {
    const int64_t idx = c0 + c - tile0, lane = idx % kTile;
    float* kt = kT + (idx / kTile) * hd * kTile + lane;
    float* vr = vf + idx * hd;
    for (int64_t i = 0; i < hd; i += 16) {
      alignas(64) float tmp[16];
      _mm512_store_ps(tmp, load_row(k[c], i, kv_f16));
      for (int l = 0; l < 16; ++l) kt[(i + l) * kTile] = tmp[l];
      _mm512_storeu_ps(vr + i, load_row(v[c], i, kv_f16));
    }
  }
}

namespace {

// R query rows that share their cells (heads of one token reading one KV head): each K/V vector
// loaded once serves R rows. Scores in passes of CV vectors (16 cells each) × R rows of
// accumulators; per row its own M, S and accumulator (acc + r·hd), ops exactly as for one row.
template <int R>
void tiled_rows_r(const float* const* q, int64_t hd, const float* kT, const float* vf, int64_t tile0, int64_t c0,
                  int64_t n, float* acc, float* const* out) {
  constexpr int CV = R >= 8 ? 2 : 4;
  float M[R], S[R], ms[R];
  for (int r = 0; r < R; ++r) {
    M[r] = -INFINITY;
    S[r] = 0.0f;
  }
  for (int64_t i = 0; i < R * hd; i += 16) _mm512_storeu_ps(acc + i, _mm512_setzero_ps());
  alignas(64) float kq[R][kTile];
  for (int64_t t0 = c0 / kTile * kTile; t0 < c0 + n; t0 += kTile) {
    // scores of the tile's 64 cells: lane = cell, one FMA chain over the head each
    const float* kt0 = kT + (t0 - tile0) / kTile * hd * kTile;
    for (int pass = 0; pass < 4 / CV; ++pass) {
      __m512 s[R][CV];
      for (int r = 0; r < R; ++r)
        for (int v = 0; v < CV; ++v) s[r][v] = _mm512_setzero_ps();
      const float* kt = kt0 + pass * CV * 16;
      for (int64_t i = 0; i < hd; ++i, kt += kTile) {
        __m512 kv[CV];
        for (int v = 0; v < CV; ++v) kv[v] = _mm512_loadu_ps(kt + 16 * v);
        for (int r = 0; r < R; ++r) {
          const __m512 qi = _mm512_set1_ps(q[r][i]);
          for (int v = 0; v < CV; ++v) s[r][v] = _mm512_fmadd_ps(kv[v], qi, s[r][v]);
        }
      }
      for (int r = 0; r < R; ++r)
        for (int v = 0; v < CV; ++v) _mm512_store_ps(kq[r] + pass * CV * 16 + 16 * v, s[r][v]);
    }
    for (int r = 0; r < R; ++r) {
      float tile_max = -INFINITY;
      for (int64_t tk = 0; tk < kTile; ++tk) {
        const int64_t c = t0 + tk - c0;
        if (c < 0 || c >= n) kq[r][tk] = -INFINITY;
        tile_max = kq[r][tk] > tile_max ? kq[r][tk] : tile_max;
      }
      const float Mnew = std::fmax(M[r], tile_max);
      ms[r] = 1.0f;
      if (Mnew > M[r]) {
        ms[r] = std::exp(M[r] - Mnew);
        S[r] *= ms[r];
      }
      M[r] = Mnew;
      double sum = 0.0;
      const __m512 mv = _mm512_set1_ps(Mnew);
      for (int64_t b = 0; b < kTile; b += 16) {
        const __m512 e = v_expf16(_mm512_sub_ps(_mm512_load_ps(kq[r] + b), mv));
        _mm512_store_ps(kq[r] + b, e);
        sum += static_cast<double>(reduce16(e));
      }
      S[r] = static_cast<float>(static_cast<double>(S[r]) + sum);
    }
    // accumulators: per 16 outputs, the rescale (a multiply, as for one row) then one FMA per cell
    const int64_t tk0 = std::max<int64_t>(0, c0 - t0), tk1 = std::min<int64_t>(kTile, c0 + n - t0);
    for (int64_t i = 0; i < hd; i += 16) {
      __m512 a[R];
      for (int r = 0; r < R; ++r) {
        a[r] = _mm512_loadu_ps(acc + r * hd + i);
        if (ms[r] != 1.0f) a[r] = _mm512_mul_ps(a[r], _mm512_set1_ps(ms[r]));
      }
      const float* vr = vf + (t0 + tk0 - tile0) * hd + i;
      for (int64_t tk = tk0; tk < tk1; ++tk, vr += hd) {
        const __m512 v = _mm512_loadu_ps(vr);
        for (int r = 0; r < R; ++r) a[r] = _mm512_fmadd_ps(v, _mm512_set1_ps(kq[r][tk]), a[r]);
      }
      for (int r = 0; r < R; ++r) _mm512_storeu_ps(acc + r * hd + i, a[r]);
    }
  }
  for (int r = 0; r < R; ++r) {
    const __m512 inv = _mm512_set1_ps(S[r] == 0.0f ? 0.0f : 1.0f / S[r]);
    for (int64_t i = 0; i < hd; i += 16) _mm512_storeu_ps(out[r] + i, _mm512_mul_ps(_mm512_loadu_ps(acc + r * hd + i), inv));
  }
}

}  // namespace

void tiled_rows(const float* const* q, int n_rows, int64_t hd, const float* kT, const float* vf, int64_t tile0,
                int64_t c0, int64_t n, float* acc, float* const* out) {
  while (n_rows > 0) {
    const int r = n_rows >= 8 ? 8 : n_rows >= 4 ? 4 : n_rows >= 2 ? 2 : 1;
    switch (r) {
      case 8: tiled_rows_r<8>(q, hd, kT, vf, tile0, c0, n, acc, out); break;
      case 4: tiled_rows_r<4>(q, hd, kT, vf, tile0, c0, n, acc, out); break;
      case 2: tiled_rows_r<2>(q, hd, kT, vf, tile0, c0, n, acc, out); break;
      default: tiled_rows_r<1>(q, hd, kT, vf, tile0, c0, n, acc, out); break;
    }
    q += r;
    out += r;
    n_rows -= r;
  }
}

void tiled_row(const float* q, int64_t hd, const float* kT, const float* vf, int64_t tile0, int64_t c0, int64_t n,
               float* acc, float* out) {
  tiled_rows(&q, 1, hd, kT, vf, tile0, c0, n, acc, &out);
}

void vector_chunk(const float* q, int64_t hd, const void* const* k, const void* const* v, int64_t b, int64_t e,
                  bool kv_f16, float& M, float& S, uint16_t* a16, float* acc) {
  M = -INFINITY;
  S = 0.0f;
  for (int64_t i = 0; i < hd; i += 16) {
    if (kv_f16) _mm256_storeu_si256(reinterpret_cast<__m256i*>(a16 + i), _mm256_setzero_si256());
    else _mm512_storeu_ps(acc + i, _mm512_setzero_ps());
  }
  for (int64_t c = b; c < e; ++c) {
    // ggml_vec_dot_f16 / _f32: 4 accumulators over blocks of 64, then 0 += 2, 1 += 3, 0 += 1
    __m512 d0 = _mm512_setzero_ps(), d1 = d0, d2 = d0, d3 = d0;
    for (int64_t i = 0; i < hd; i += 64) {
      d0 = _mm512_fmadd_ps(load_row(k[c], i, kv_f16), _mm512_loadu_ps(q + i), d0);
      d1 = _mm512_fmadd_ps(load_row(k[c], i + 16, kv_f16), _mm512_loadu_ps(q + i + 16), d1);
      d2 = _mm512_fmadd_ps(load_row(k[c], i + 32, kv_f16), _mm512_loadu_ps(q + i + 32), d2);
      d3 = _mm512_fmadd_ps(load_row(k[c], i + 48, kv_f16), _mm512_loadu_ps(q + i + 48), d3);
    }
    d0 = _mm512_add_ps(d0, d2);
    d1 = _mm512_add_ps(d1, d3);
    const float s = reduce16(_mm512_add_ps(d0, d1));
    float ms = 1.0f, vs = 1.0f;
    if (s > M) {
      ms = std::exp(M - s);
      M = s;
      const __m512 msv = _mm512_set1_ps(ms);
      for (int64_t i = 0; i < hd; i += 16) {
        if (kv_f16) {
          __m256i* p = reinterpret_cast<__m256i*>(a16 + i);
          _mm256_storeu_si256(p, to_f16(_mm512_mul_ps(_mm512_cvtph_ps(_mm256_loadu_si256(p)), msv)));
        } else {
          _mm512_storeu_ps(acc + i, _mm512_mul_ps(_mm512_loadu_ps(acc + i), msv));
        }
      }
    } else {
      vs = std::exp(s - M);
    }
    const __m512 vsv = _mm512_set1_ps(vs);
    for (int64_t i = 0; i < hd; i += 16) {
      if (kv_f16) {
        __m256i* p = reinterpret_cast<__m256i*>(a16 + i);
        _mm256_storeu_si256(p, to_f16(_mm512_fmadd_ps(load_row(v[c], i, true), vsv, _mm512_cvtph_ps(_mm256_loadu_si256(p)))));
      } else {
        _mm512_storeu_ps(acc + i, _mm512_fmadd_ps(load_row(v[c], i, false), vsv, _mm512_loadu_ps(acc + i)));
      }
    }
    S = S * ms + vs;
  }
  if (kv_f16)
    for (int64_t i = 0; i < hd; i += 16)
      _mm512_storeu_ps(acc + i, _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(a16 + i))));
}

void geglu(const float* table, float* g, const float* u, int64_t n) {
  // ggml_gelu per lane: x ≤ −10 → 0, x ≥ 10 → x, else table[f16(x)] (vcvtps2ph rounds to nearest
  // even, as the scalar f32_to_f16); then · u.
  const __m512 lo = _mm512_set1_ps(-10.0f), hi = _mm512_set1_ps(10.0f);
  for (int64_t i = 0; i < n; i += 16) {
    const __mmask16 m = n - i >= 16 ? static_cast<__mmask16>(0xFFFF) : static_cast<__mmask16>((1u << (n - i)) - 1);
    const __m512 x = _mm512_maskz_loadu_ps(m, g + i);
    const __m512i h = _mm512_cvtepu16_epi32(_mm512_cvtps_ph(x, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
    __m512 y = _mm512_mask_i32gather_ps(_mm512_setzero_ps(), m, h, table, 4);
    y = _mm512_mask_mov_ps(y, _mm512_cmp_ps_mask(x, hi, _CMP_GE_OQ), x);
    y = _mm512_mask_mov_ps(y, _mm512_cmp_ps_mask(x, lo, _CMP_LE_OQ), _mm512_setzero_ps());
    _mm512_mask_storeu_ps(g + i, m, _mm512_mul_ps(y, _mm512_maskz_loadu_ps(m, u + i)));
  }
}

}  // namespace oxi::fa_avx512
