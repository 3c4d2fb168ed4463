#include "nn/hadamard.h"

#include <cmath>
#include <cstdlib>
#include <string>

#include "core/error.h"

namespace oxi::nn {
namespace {

bool power_of_two(int64_t n) { return n > 0 && (n & (n - 1)) == 0; }

void check_n(int64_t n) {
  if (!power_of_two(n)) throw_error(ErrorCode::kInvalidArgument, "Hadamard size must be a power of two, not " + std::to_string(n));
}

}  // namespace

std::vector<float> hadamard_matrix(int64_t n) {
  check_n(n);
  // Sylvester doubling: the top-left s×s block is copied right, down, and negated down-right.
  std::vector<float> h(static_cast<size_t>(n * n));
  h[0] = 1.0f / std::sqrt(static_cast<float>(n));
  for (int64_t s = 1; s < n; s *= 2)
    for (int64_t i = 0; i < s; ++i)
      for (int64_t j = 0; j < s; ++j) {
        const float v = h[static_cast<size_t>(i * n + j)];
        h[static_cast<size_t>((i + s) * n + j)] = v;
        h[static_cast<size_t>(i * n + j + s)] = v;
        h[static_cast<size_t>((i + s) * n + j + s)] = -v;
      }
  return h;
}

void hadamard_rotate(float* x, int64_t len, int64_t n) {
  check_n(n);
  if (len % n != 0)
    throw_error(ErrorCode::kInvalidArgument, "Hadamard rotation of " + std::to_string(len) + " values in blocks of " + std::to_string(n));
  const float scale = 1.0f / std::sqrt(static_cast<float>(n));
  for (int64_t b = 0; b < len; b += n) {
    float* r = x + b;
    for (int64_t j = 0; j < n; ++j) r[j] *= scale;
    // Butterflies at distance d: pairs (i + j, i + d + j) within each 2d-long run.
    for (int64_t d = 1; d < n; d *= 2)
      for (int64_t i = 0; i < n; i += 2 * d)
        for (int64_t j = 0; j < d; ++j) {
          const float u = r[i + j], v = r[i + d + j];
          r[i + j] = u + v;
          r[i + d + j] = u - v;
        }
  }
}

int64_t hadamard_k_block(int64_t hd) {
  if (hd <= 0 || hd % 64 != 0) return 0;
  int64_t n = 64;
  while (hd % (2 * n) == 0) n *= 2;
  return n;
}

int64_t hadamard_v_block(int64_t hd) { return hd > 0 && hd % 64 == 0 ? 64 : 0; }

bool attn_rot_disabled() {
  const char* e = std::getenv("OXI_ATTN_ROT_DISABLE");
  return e && *e && std::string(e) != "0";
}

}  // namespace oxi::nn
