// ggml's flash attention on AVX-512 (x86/ggml_fa_avx512.cpp): the same values as the scalar
// emulation in ggml_numerics.cpp, 10-20x faster. Callers check ggml_fa_avx512_ok first (stubs
// that are never called stand in on other builds, ggml_numerics.cpp).
#pragma once

#include <cstdint>

namespace oxi {

// True when the host runs AVX-512 (F/VL/BW/DQ) with F16C and FMA, this build has the AVX-512 code,
// ggml's width is 16 lanes and hd is a multiple of 64.
bool ggml_fa_avx512_ok(int lanes, int64_t hd);
// True when the host runs AVX-512 (F/VL/BW/DQ) with F16C and FMA and this build has the code.
bool ggml_avx512_host();

namespace fa_avx512 {
// KV cells [c0, c0 + n) (rows k[i], v[i] of cell c0 + i; f16 or f32) in f32, tiles of 64 cells
// aligned to cell 0 from tile0 = c0 rounded down to 64: kT per tile [hd][64] (cells missing from the
// range zero), vf [cell − tile0][hd]. Sizes: n_tiles·64·hd floats each.
void prepare(const void* const* k, const void* const* v, int64_t c0, int64_t n, bool kv_f16, int64_t hd, float* kT,
             float* vf);
// ggml's tiled kernel for one query row over cells [c0, c0 + n) of prepared tiles starting at
// tile0. acc: hd floats of scratch; out: hd floats.
void tiled_row(const float* q, int64_t hd, const float* kT, const float* vf, int64_t tile0, int64_t c0, int64_t n,
               float* acc, float* out);
// The same for n_rows query rows over the same cells (the heads of one token on one KV head): K and V
// read once for up to 8 rows; each row's values as tiled_row's. acc: min(n_rows, 8)·hd floats.
void tiled_rows(const float* const* q, int n_rows, int64_t hd, const float* kT, const float* vf, int64_t tile0,
                int64_t c0, int64_t n, float* acc, float* const* out);
// ggml's vector kernel over cells b … e−1 (q: the f16-rounded query for an f16 cache). Leaves
// M, S and the unnormalised accumulator in acc (hd floats); a16: hd halves of scratch.
void vector_chunk(const float* q, int64_t hd, const void* const* k, const void* const* v, int64_t b, int64_t e,
                  bool kv_f16, float& M, float& S, uint16_t* a16, float* acc);
// ggml's GEGLU: g[i] = ggml_gelu(g[i]) · u[i] (table: the 65536 f16 GELU values); callers check
// ggml_avx512_host() first.
void geglu(const float* table, float* g, const float* u, int64_t n);
}  // namespace fa_avx512

}  // namespace oxi
