// MLX affine 4-bit → Q4_1 (convert/mlx_q4_1.h).
#include "convert/mlx_q4_1.h"

#include <algorithm>
#include <cstdio>
#include <cstring>

#include "core/error.h"
#include "core/half.h"
#include "kernels/thread_pool.h"

namespace oxi {

bool is_mlx_q4(DType t) { return t == DType::MLX_Q4_G32 || t == DType::MLX_Q4_G64 || t == DType::MLX_Q4_G128; }

bool f16_exact(float v) { return f16_to_f32(f32_to_f16(v)) == v; }

bool keeps_q4_1_blocks(const std::vector<int64_t>& col_perm) {
  if (col_perm.size() % 32 != 0) return false;
  for (size_t b = 0; b < col_perm.size(); b += 32) {
    if (col_perm[b] % 32 != 0) return false;
    for (size_t j = 1; j < 32; ++j)
      if (col_perm[b + j] != col_perm[b] + static_cast<int64_t>(j)) return false;
  }
  return true;
}

void mlx_q4_row_to_q4_1(DType t, const uint8_t* src, int64_t cols, const std::vector<int64_t>& col_perm, uint8_t* dst,
                        float* scratch, int64_t& exact, int64_t& requantised) {
  const auto tr = dtype_traits(t);
  if (!is_mlx_q4(t) || !tr || cols % tr->block_elems != 0 || (!col_perm.empty() && static_cast<int64_t>(col_perm.size()) != cols))
    throw_error(ErrorCode::kInternal, "mlx_q4_row_to_q4_1: not a whole row of MLX 4-bit groups");
  // MLX block in memory (format/mlx.h): f32 scale, f32 bias, G/2 code bytes (input 2i in the low
  // nibble of byte i). Q4_1 block (20 B): f16 d, f16 m, 16 bytes (input j low nibble of byte j,
  // input j + 16 its high nibble).
  const int64_t G = tr->block_elems, groups = cols / G;
  const uint64_t gb = tr->block_bytes;
  // A group is copied when its scale and bias are f16 values (no per-row buffer: the check is two
  // conversions, repeated per block below rather than stored).
  auto group_ok = [&](int64_t g, float& s, float& b) {
    std::memcpy(&s, src + gb * static_cast<uint64_t>(g), 4);
    std::memcpy(&b, src + gb * static_cast<uint64_t>(g) + 4, 4);
    return f16_exact(s) && f16_exact(b);
  };
  bool any_bad = false;
  for (int64_t g = 0; g < groups; ++g) {
    float s, b;
    const bool ok = group_ok(g, s, b);
    any_bad = any_bad || !ok;
    ++(ok ? exact : requantised);
  }
  if (any_bad) dequantize(t, src, scratch, cols);  // the f32 values the fallback requantises
  for (int64_t o = 0; o < cols; o += 32, dst += 20) {
    const int64_t s0 = col_perm.empty() ? o : col_perm[static_cast<size_t>(o)];
    const int64_t g = s0 / G;
    float s, b;
    if (!group_ok(g, s, b)) {
      quantize_row(DType::Q4_1, scratch + s0, 32, dst);
      continue;
    }
    const uint8_t* blk = src + gb * static_cast<uint64_t>(g);
    const uint16_t d = f32_to_f16(s), m = f32_to_f16(b);
    std::memcpy(dst, &d, 2);
    std::memcpy(dst + 2, &m, 2);
    const uint8_t* codes = blk + 8 + (s0 - g * G) / 2;  // 16 bytes: inputs s0 .. s0 + 31
    auto code = [codes](int i) { return (codes[i / 2] >> (4 * (i % 2))) & 0xF; };
    for (int j = 0; j < 16; ++j) dst[4 + j] = static_cast<uint8_t>(code(j) | (code(j + 16) << 4));
  }
}

void mlx_q4_to_q4_1(int64_t rows, int64_t cols, uint8_t* dst,
                    const std::function<std::pair<MatrixView, int64_t>(int64_t)>& src, const std::vector<int64_t>& col_perm,
                    MlxQ4_1Stats& stats) {
  const uint64_t rb = static_cast<uint64_t>(cols / 32) * 20;
  const int64_t grain = std::max<int64_t>(1, (int64_t{1} << 18) / static_cast<int64_t>(std::max<uint64_t>(rb, 1)));
  parallel_for_chunked(rows, grain, [&](int64_t r0, int64_t r1) {
    std::vector<float> scratch(static_cast<size_t>(cols));
    int64_t exact = 0, requantised = 0;
    for (int64_t r = r0; r < r1; ++r) {
      const auto sr = src(r);
      const MatrixView& m = sr.first;
      mlx_q4_row_to_q4_1(m.dtype, m.data + m.row_bytes * static_cast<uint64_t>(sr.second), cols, col_perm,
                         dst + rb * static_cast<uint64_t>(r), scratch.data(), exact, requantised);
    }
    stats.exact += exact;
    stats.requantised += requantised;
  });
}

void print_mlx_q4_1_stats(const MlxQ4_1Stats& stats) {
  const int64_t e = stats.exact.load(), q = stats.requantised.load();
  if (e + q == 0) return;
  std::fprintf(stderr,
               "convert: Q4_1 from MLX 4-bit groups: %lld exact (codes, scale and bias copied), %lld requantised "
               "(scale or bias not an f16 value)\n",
               static_cast<long long>(e), static_cast<long long>(q));
}

}  // namespace oxi
