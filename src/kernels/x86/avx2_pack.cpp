// AVX2 GEMV (1..kPackedGemvMaxTokens tokens) over Q4_0, Q4_K and Q6_K weights repacked 16 rows
// at a time (kernels/pack.h), in the AVX-512 kernels' layout (x86/pack_layout.h, documented in
// x86/avx512_pack.cpp): each 64-byte column of a 16-row group is read here as two 256-bit
// halves, rows 0-7 and 8-15, so dword lane r of half h is row 8h + r.
//
// Why: the file-layout AVX2 kernels (x86/avx2.cpp) unpack each row's block separately and reduce
// every row horizontally: ~20 GB/s hot on one Zen 5 core for Q4_0 / Q4_K / Q6_K, below the DRAM
// rate of two cores, so `--isa avx2` decoded those files at ~0.4 of the AVX-512 set's speed. With
// rows interleaved, one vpmaddubsw multiplies 4 weight bytes of each of 8 rows by 4 activation
// bytes broadcast to every lane (the pair sums land as two int16 words per row), nibbles are split
// once per 8 rows, and scales, mins and the float tail are applied once per block for 8 rows.
// AVX2 has no vpdpbusd, so the int16 pair sums are accumulated a few at a time (bounds beside
// each kernel) and widened by vpmaddwd, against ones or against the row's sub-block scale.
//
// Several tokens (a decode step of several sequences): each block's weight work (loads, nibble
// split, 6-bit assembly, scale vectors) is shared by a pass of up to kPass tokens, each token with
// its own accumulators. Integer sums are exact (no int16 or int32 overflow), and a token's float
// ops are the same in the same order whatever the pass, so every token's row is bit-identical to
// its single-token call (the mm_packed contract, Matmul.PackedGemvMatchesScalar).
#include <immintrin.h>

#include <algorithm>
#include <cstring>
#include <type_traits>

#include "kernels/dispatch.h"
#include "kernels/pack.h"
#include "kernels/quant.h"
#include "kernels/x86/pack_layout.h"

namespace oxi::kern {
namespace {

inline __m256i bcast4(const void* p) {
  int32_t v;
  std::memcpy(&v, p, 4);
  return _mm256_set1_epi32(v);
}
inline __m256 f16x8(const uint8_t* p) { return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))); }
inline __m256i load256(const uint8_t* p) { return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)); }
inline __m256i lo_nib(__m256i v, __m256i m4) { return _mm256_and_si256(v, m4); }
inline __m256i hi_nib(__m256i v, __m256i m4) { return _mm256_and_si256(_mm256_srli_epi16(v, 4), m4); }
inline void prefetch(const uint8_t* p, uint64_t bytes) {
  for (uint64_t l = 0; l < bytes; l += 64) _mm_prefetch(reinterpret_cast<const char*>(p + l), _MM_HINT_T0);
}
// vpshufb control: each dword lane's byte i as two zero-extended int16 words (i, i).
inline __m256i ctl_pair(int i) {
  const int c = static_cast<int>(0x80008000u) | i | (i << 16);
  const int s = 4 | (4 << 16);
  return _mm256_setr_epi32(c, c + s, c + 2 * s, c + 3 * s, c, c + s, c + 2 * s, c + 3 * s);
}
// vpshufb control: each dword lane's byte i in the high byte of both words (for a sign-extending
// shift right by 8 afterwards).
inline __m256i ctl_pair_hi(int i) {
  const int c = static_cast<int>(0x00800080u) | (i << 8) | (i << 24);
  const int s = (4 << 8) | (4 << 24);
  return _mm256_setr_epi32(c, c + s, c + 2 * s, c + 3 * s, c, c + s, c + 2 * s, c + 3 * s);
}

// Tokens per pass over a group's block (each kernel prefetches two blocks of its packed stream
// ahead, as the AVX-512 ones do).
constexpr int kPass = 4;

// ---- Q4_0 ------------------------------------------------------------------------------------
// Per token and block b: cs = −8·Σx (the −8 offset of the nibbles), dx = the activation's scale.
// Int16 bound per row: 8 vpmaddubsw pair sums of ≤ 2·15·128 each = 30720.
struct Q40Tok {
  const uint8_t* x;  // BlockQ8_0 row
  const int32_t* cs;
  const float* dx;
};

template <int T>
inline void q40_group(const uint8_t* p, int64_t nb, const Q40Tok (&tk)[T], __m256 (&acc)[T][2]) {
  const __m256i m4 = _mm256_set1_epi8(0x0F), ones = _mm256_set1_epi16(1);
  for (int64_t b = 0; b < nb; ++b, p += kPackQ40Block) {
    prefetch(p + 2 * kPackQ40Block, kPackQ40Block);
#pragma GCC unroll 2
    for (int h = 0; h < 2; ++h) {  // rows 8h..8h+7
      __m256i lo[4], hi[4];
#pragma GCC unroll 4
      for (int j = 0; j < 4; ++j) {
        const __m256i v = load256(p + 32 + 64 * j + 32 * h);
        lo[j] = lo_nib(v, m4);
        hi[j] = hi_nib(v, m4);
      }
      const __m256 dw = f16x8(p + 16 * h);
#pragma GCC unroll 4
      for (int t = 0; t < T; ++t) {
        const uint8_t* q = tk[t].x + sizeof(BlockQ8_0) * static_cast<uint64_t>(b) + offsetof(BlockQ8_0, qs);
        __m256i s = _mm256_maddubs_epi16(lo[0], bcast4(q));
        s = _mm256_add_epi16(s, _mm256_maddubs_epi16(hi[0], bcast4(q + 16)));
#pragma GCC unroll 4
        for (int j = 1; j < 4; ++j) {
          s = _mm256_add_epi16(s, _mm256_maddubs_epi16(lo[j], bcast4(q + 4 * j)));
          s = _mm256_add_epi16(s, _mm256_maddubs_epi16(hi[j], bcast4(q + 16 + 4 * j)));
        }
        const __m256i s32 = _mm256_add_epi32(_mm256_madd_epi16(s, ones), _mm256_set1_epi32(tk[t].cs[b]));
        const __m256 d = _mm256_mul_ps(dw, _mm256_set1_ps(tk[t].dx[b]));
        acc[t][h] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(s32), d, acc[t][h]);
      }
    }
  }
}

// ---- Q4_K ------------------------------------------------------------------------------------
// Sub-block pair j (elements 64j..64j+63): the low nibbles of qs vectors 8j..8j+7 are sub-block 2j,
// the high ones 2j + 1. Int16 bound per row and sub-block: 8 pair sums of ≤ 2·15·128 = 30720;
// vpmaddwd against the (scale, scale) words: ≤ 2·30720·63 per sub-block, 8 sub-blocks < 2^31.
template <int T>
inline void q4k_group(const uint8_t* p, int64_t nb, const BlockQ8_K* const (&x)[T], __m256 (&acc)[T][2]) {
  const __m256i m4 = _mm256_set1_epi8(0x0F), k3f = _mm256_set1_epi8(0x3F), k30 = _mm256_set1_epi8(0x30);
  for (int64_t b = 0; b < nb; ++b, p += kPackQ4KBlock) {
    prefetch(p + 2 * kPackQ4KBlock, 256);
    __m256i scp[2][8];  // (scale, scale) words of sub-block s for half h
    __m256i msum[T][2];
    for (int h = 0; h < 2; ++h) {
      const __m256i A = load256(p + 64 + 32 * h), B = load256(p + 128 + 32 * h), C = load256(p + 192 + 32 * h);
      const __m256i sc_lo = _mm256_and_si256(A, k3f), mn_lo = _mm256_and_si256(B, k3f);
      const __m256i sc_hi = _mm256_or_si256(_mm256_and_si256(C, m4), _mm256_and_si256(_mm256_srli_epi32(A, 2), k30));
      const __m256i mn_hi =
          _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi32(C, 4), m4), _mm256_and_si256(_mm256_srli_epi32(B, 2), k30));
      for (int t = 0; t < T; ++t) msum[t][h] = _mm256_setzero_si256();
      for (int s = 0; s < 8; ++s) {
        const __m256i ctl = ctl_pair(s & 3);
        scp[h][s] = _mm256_shuffle_epi8(s < 4 ? sc_lo : sc_hi, ctl);
        // Σ_s m_s · (bsums[2s] + bsums[2s+1]): (m_s, m_s) words against the bsum pair.
        const __m256i mv = _mm256_shuffle_epi8(s < 4 ? mn_lo : mn_hi, ctl);
        for (int t = 0; t < T; ++t) msum[t][h] = _mm256_add_epi32(msum[t][h], _mm256_madd_epi16(mv, bcast4(x[t][b].bsums + 2 * s)));
      }
    }
    __m256i isum[T][2];
    for (int t = 0; t < T; ++t) isum[t][0] = isum[t][1] = _mm256_setzero_si256();
    for (int j = 0; j < 4; ++j) {
      const uint8_t* q = p + 256 + 512 * j;
      prefetch(q + 2 * kPackQ4KBlock, 512);
      __m256i sl[T][2], sh[T][2];
      for (int t = 0; t < T; ++t) sl[t][0] = sl[t][1] = sh[t][0] = sh[t][1] = _mm256_setzero_si256();
      for (int m = 0; m < 8; ++m) {
        __m256i xl[T], xh[T];
        for (int t = 0; t < T; ++t) {
          xl[t] = bcast4(x[t][b].qs + 64 * j + 4 * m);
          xh[t] = bcast4(x[t][b].qs + 64 * j + 32 + 4 * m);
        }
        for (int h = 0; h < 2; ++h) {
          const __m256i v = load256(q + 64 * m + 32 * h);
          const __m256i lo = lo_nib(v, m4), hi = hi_nib(v, m4);
          for (int t = 0; t < T; ++t) {
            sl[t][h] = _mm256_add_epi16(sl[t][h], _mm256_maddubs_epi16(lo, xl[t]));
            sh[t][h] = _mm256_add_epi16(sh[t][h], _mm256_maddubs_epi16(hi, xh[t]));
          }
        }
      }
      for (int t = 0; t < T; ++t) {
        for (int h = 0; h < 2; ++h) {
          isum[t][h] = _mm256_add_epi32(isum[t][h], _mm256_madd_epi16(sl[t][h], scp[h][2 * j]));
          isum[t][h] = _mm256_add_epi32(isum[t][h], _mm256_madd_epi16(sh[t][h], scp[h][2 * j + 1]));
        }
      }
    }
    for (int h = 0; h < 2; ++h) {
      const __m256 dw = f16x8(p + 16 * h), mw = f16x8(p + 32 + 16 * h);
      for (int t = 0; t < T; ++t) {
        const __m256 xd = _mm256_set1_ps(x[t][b].d);
        const __m256 d = _mm256_mul_ps(dw, xd), dm = _mm256_mul_ps(mw, xd);
        acc[t][h] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum[t][h]), d, acc[t][h]);
        acc[t][h] = _mm256_fnmadd_ps(_mm256_cvtepi32_ps(msum[t][h]), dm, acc[t][h]);
      }
    }
  }
}

// ---- Q6_K ------------------------------------------------------------------------------------
// Column m of half hh (vectors L0, L1, H at 288 + 192·(8hh + m)) holds the k-th 6-bit value
// (0..63) of elements 128hh + 32k + 4m.., sub-block s = 8hh + 2k + m/4 (layout in
// x86/avx512_pack.cpp). A sub-block is 4 columns: two pair sums of ≤ 2·63·128 = 16128 added in
// int16 (≤ 32256), then vpmaddwd against the (scale, scale) words: ≤ 2·32256·128 per half-sub-
// block. The −32 offset: Σ_s scale_s·bsums[s], by vpmaddwd of two scales against two bsums, times
// 32 once per super-block (≤ 16·128·2032·32 < 2^31).
template <int T>
inline void q6k_group(const uint8_t* p, int64_t nb, const BlockQ8_K* const (&x)[T], __m256 (&acc)[T][2]) {
  const __m256i k0f = _mm256_set1_epi8(0x0F), k30 = _mm256_set1_epi8(0x30);
  for (int64_t b = 0; b < nb; ++b, p += kPackQ6KBlock) {
    prefetch(p + 2 * kPackQ6KBlock, kPackQ6KBlock);
#pragma GCC unroll 2
    for (int h = 0; h < 2; ++h) {  // rows 8h..8h+7, as Q4_K
      __m256i isum[T], corr[T];
#pragma GCC unroll 8
      for (int t = 0; t < T; ++t) isum[t] = corr[t] = _mm256_setzero_si256();
      // Scales as words: E = (scale 4k, scale 4k+2), O = (4k+1, 4k+3) per lane, for the correction.
#pragma GCC unroll 4
      for (int k = 0; k < 4; ++k) {
        const __m256i S = load256(p + 32 + 64 * k + 32 * h);
        const __m256i E = _mm256_srai_epi16(_mm256_slli_epi16(S, 8), 8), O = _mm256_srai_epi16(S, 8);
#pragma GCC unroll 8
        for (int t = 0; t < T; ++t) {
          const int16_t* bs = x[t][b].bsums + 4 * k;
          const int32_t be = static_cast<int32_t>(static_cast<uint16_t>(bs[0]) | (static_cast<uint32_t>(static_cast<uint16_t>(bs[2])) << 16));
          const int32_t bo = static_cast<int32_t>(static_cast<uint16_t>(bs[1]) | (static_cast<uint32_t>(static_cast<uint16_t>(bs[3])) << 16));
          corr[t] = _mm256_add_epi32(corr[t], _mm256_madd_epi16(E, _mm256_set1_epi32(be)));
          corr[t] = _mm256_add_epi32(corr[t], _mm256_madd_epi16(O, _mm256_set1_epi32(bo)));
        }
      }
#pragma GCC unroll 2
      for (int hh = 0; hh < 2; ++hh) {
#pragma GCC unroll 2
        for (int mh = 0; mh < 2; ++mh) {
          const uint8_t* q0 = p + 288 + 192 * (8 * hh + 4 * mh) + 32 * h;
#pragma GCC unroll 4
          for (int k = 0; k < 4; ++k) {
            const int s = 8 * hh + 2 * k + mh;
            __m256i sa[T], sb[T];
#pragma GCC unroll 8
            for (int t = 0; t < T; ++t) sa[t] = sb[t] = _mm256_setzero_si256();
#pragma GCC unroll 4
            for (int mm = 0; mm < 4; ++mm) {
              const uint8_t* q = q0 + 192 * mm;
              const int off = 128 * hh + 32 * k + 4 * (4 * mh + mm);
              const __m256i H = load256(q + 128);
              __m256i w;
              if (k == 0) {
                w = _mm256_or_si256(_mm256_and_si256(load256(q), k0f), _mm256_and_si256(_mm256_slli_epi16(H, 4), k30));
              } else if (k == 1) {
                w = _mm256_or_si256(_mm256_and_si256(load256(q + 64), k0f), _mm256_and_si256(_mm256_slli_epi16(H, 2), k30));
              } else if (k == 2) {
                w = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(load256(q), 4), k0f), _mm256_and_si256(H, k30));
              } else {
                w = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(load256(q + 64), 4), k0f),
                                    _mm256_and_si256(_mm256_srli_epi16(H, 2), k30));
              }
#pragma GCC unroll 8
              for (int t = 0; t < T; ++t) {
                __m256i& acc16 = mm < 2 ? sa[t] : sb[t];
                acc16 = _mm256_add_epi16(acc16, _mm256_maddubs_epi16(w, bcast4(x[t][b].qs + off)));
              }
            }
            // scales[s]: vector s / 4 of the scale block, byte s % 4, sign-extended into both words.
            const __m256i sc = _mm256_srai_epi16(_mm256_shuffle_epi8(load256(p + 32 + 64 * (s / 4) + 32 * h), ctl_pair_hi(s % 4)), 8);
#pragma GCC unroll 8
            for (int t = 0; t < T; ++t) {
              isum[t] = _mm256_add_epi32(isum[t], _mm256_madd_epi16(sa[t], sc));
              isum[t] = _mm256_add_epi32(isum[t], _mm256_madd_epi16(sb[t], sc));
            }
          }
        }
      }
      const __m256 dw = f16x8(p + 16 * h);
#pragma GCC unroll 8
      for (int t = 0; t < T; ++t) {
        const __m256i tot = _mm256_sub_epi32(isum[t], _mm256_slli_epi32(corr[t], 5));
        const __m256 d = _mm256_mul_ps(dw, _mm256_set1_ps(x[t][b].d));
        acc[t][h] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(tot), d, acc[t][h]);
      }
    }
  }
}

// ---- driver ----------------------------------------------------------------------------------
// Rows [a.r0, rp) of the packed copy (a.r0 a multiple of 16: GEMV units are) for tokens
// [a.t0, a.t1): per 16-row group, passes of ≤ kPass tokens (sizes as even as possible).
// group(ctag, p, t, acc) adds the outputs of T = ctag's value tokens from t to acc.
template <class Group>
inline void packed_run(const MMArgs& a, int64_t rp, Group&& group) {
  auto run = [&](auto tn, const uint8_t* p, int64_t g, int64_t t) {
    constexpr int T = decltype(tn)::value;
    __m256 acc[T][2];
    for (int i = 0; i < T; ++i) acc[i][0] = acc[i][1] = _mm256_setzero_ps();
    group(tn, p, t, acc);
    for (int i = 0; i < T; ++i) {
      _mm256_storeu_ps(a.y + (t + i) * a.ldy + 16 * g, acc[i][0]);
      _mm256_storeu_ps(a.y + (t + i) * a.ldy + 16 * g + 8, acc[i][1]);
    }
  };
  for_group_passes<kPass>(a, rp, run);
}

// The K-quant kernels: rows [r0, r1) of tokens [t0, t1), group(ctag, p, nb, x, acc) on the
// pass's Q8_K rows x.
template <class KGroup>
void mm_k_packed(const MMArgs& a, MMFn file, KGroup&& group) {
  const int64_t nb = a.cols / 256;
  const int64_t rp = std::min(a.r1, a.wp_rows);
  if (a.r0 + 16 <= rp) {
    packed_run(a, rp, [&](auto tn, const uint8_t* p, int64_t t, auto& acc) {
      constexpr int T = decltype(tn)::value;
      const BlockQ8_K* x[T];
      for (int i = 0; i < T; ++i) x[i] = reinterpret_cast<const BlockQ8_K*>(a.x + (t + i) * a.x_stride);
      group(tn, p, nb, x, acc);
    });
  }
  file_rows_per_token(file, a, std::max(a.r0, rp));
}

}  // namespace

OXI_DEFINE_PACKERS(avx2)

// Rows [r0, r1) of tokens [t0, t1): rows below a.wp_rows from the packed copy, the rest with the
// file-layout kernel (`file`, the AVX2 table's) per token.
void mm_q4_0_packed_avx2(const MMArgs& a, MMFn file) {
  const int64_t nb = a.cols / 32, n = a.t1 - a.t0;
  const int64_t rp = std::min(a.r1, a.wp_rows);
  if (a.r0 + 16 <= rp) {
    // −8·Σx and the scale of each token's blocks, once per work unit (cheap next to its rows).
    auto* cs = static_cast<int32_t*>(thread_scratch(3, static_cast<size_t>(n * nb) * (sizeof(int32_t) + sizeof(float))));
    auto* dx = reinterpret_cast<float*>(cs + n * nb);
    const __m256i ones8 = _mm256_set1_epi8(1), ones16 = _mm256_set1_epi16(1);
    for (int64_t t = 0; t < n; ++t) {
      const auto* xb = reinterpret_cast<const BlockQ8_0*>(a.x + (a.t0 + t) * a.x_stride);
      for (int64_t b = 0; b < nb; ++b) {
        const __m256i s = _mm256_madd_epi16(_mm256_maddubs_epi16(ones8, load256(reinterpret_cast<const uint8_t*>(xb[b].qs))), ones16);
        __m128i h = _mm_add_epi32(_mm256_castsi256_si128(s), _mm256_extracti128_si256(s, 1));
        h = _mm_add_epi32(h, _mm_shuffle_epi32(h, 0x4E));
        h = _mm_add_epi32(h, _mm_shuffle_epi32(h, 0xB1));
        cs[t * nb + b] = -8 * _mm_cvtsi128_si32(h);
        dx[t * nb + b] = _cvtsh_ss(xb[b].d);
      }
    }
    packed_run(a, rp, [&](auto tn, const uint8_t* p, int64_t t, auto& acc) {
      constexpr int T = decltype(tn)::value;
      Q40Tok tk[T];
      for (int i = 0; i < T; ++i) {
        const int64_t k = t + i - a.t0;
        tk[i] = {a.x + (t + i) * a.x_stride, cs + k * nb, dx + k * nb};
      }
      q40_group<T>(p, nb, tk, acc);
    });
  }
  file_rows_per_token(file, a, std::max(a.r0, rp));
}

void mm_q4_K_packed_avx2(const MMArgs& a, MMFn file) {
  mm_k_packed(a, file, [](auto tn, const uint8_t* p, int64_t nb, const auto& x, auto& acc) {
    q4k_group<decltype(tn)::value>(p, nb, x, acc);
  });
}

void mm_q6_K_packed_avx2(const MMArgs& a, MMFn file) {
  mm_k_packed(a, file, [](auto tn, const uint8_t* p, int64_t nb, const auto& x, auto& acc) {
    q6k_group<decltype(tn)::value>(p, nb, x, acc);
  });
}

}  // namespace oxi::kern
