#pragma once
// Walsh–Hadamard rotation of attention heads before a quantised KV cache (llama.cpp's "attention
// rotation", on by default there since 2026). Multiplying q and k by the same orthonormal matrix
// H leaves q·k unchanged in exact arithmetic (Hᵀ·H = I) but spreads an outlier channel over the
// whole block, so the per-32-value q8_0 scales waste less range; V is rotated before it is stored
// and the attention output rotated back by H again (the Sylvester H with 1/√n is symmetric, so
// H·H = I and the inverse is H itself).
//
// H_n (n a power of two ≥ 1): H[i][j] = (−1)^popcount(i & j) / √n, the Sylvester construction
// H_2n = [[H_n, H_n], [H_n, −H_n]] normalised. A head of hd values is rotated as hd / n
// independent blocks of n consecutive values: y_b = H · x_b (llama.cpp reshapes [hd, …] to
// [n, hd·… / n] and multiplies every column by H).
//
// What llama.cpp picks (llama-kv-cache.cpp, llama-graph.cpp), which the models follow:
//  - K rotated when the K cache type is quantised and hd % 64 == 0; n = the largest power of two
//    ≥ 64 that divides hd (hd 128 → 128, 256 → 256, 192 → 64). q is rotated with the same n (after
//    its norm and RoPE, as k), so the scores are unchanged up to rounding.
//  - V rotated when the V cache type is quantised and hd % 64 == 0, always with n = 64; the
//    attention output (per head, before any gate or output projection) is rotated back by H_64.
//  - Off with LLAMA_ATTN_ROT_DISABLE=1 there; OXI_ATTN_ROT_DISABLE=1 here (attn_rot_disabled()).
#include <cstdint>
#include <vector>

namespace oxi::nn {

// H_n as n·n f32 values, row-major (symmetric, so the order does not matter). n: a power of two.
std::vector<float> hadamard_matrix(int64_t n);

// x[0..len) ← blockwise H_n · x, len a multiple of n, n a power of two. The arithmetic is ggml's
// CPU path for its Hadamard-hinted mul_mat (a fast Walsh–Hadamard transform): every value scaled
// by 1/√n (f32) first, then log2(n) butterfly passes (u, v) → (u + v, u − v) with the pair
// distance 1, 2, 4, … n/2 — all in f32, so the result is the same bits as llama.cpp's CPU rotation.
void hadamard_rotate(float* x, int64_t len, int64_t n);

// llama.cpp's block sizes for a head of hd values (0: no rotation, hd not a multiple of 64).
int64_t hadamard_k_block(int64_t hd);
int64_t hadamard_v_block(int64_t hd);

// OXI_ATTN_ROT_DISABLE set to anything but "" or "0" (read on each call; models read it at load).
bool attn_rot_disabled();

}  // namespace oxi::nn
