// Checks against llama.cpp's own bytes and numbers (tests/kernels/data/ggml_vectors.bin, made by
// gen_ggml_vectors.py from node-llama-cpp's libggml): dequantisation bit-exact, our Q8_0/Q4_0/
// F16/BF16/Q4_K quantisers byte-identical, matmul ≈ ggml's vec_dot on every ISA. The codebook
// types (IQ1/IQ2/IQ3) and MXFP4 have ggml-quantised rows plus random blocks (every grid index and
// sign pattern is valid), which run through their kernels on scalar/x86 and matmul's dequantising
// fallback on the other sets.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include "kernels/dispatch.h"
#include "kernels/isa.h"
#include "kernels/matmul.h"
#include "kernels/thread_pool.h"

using namespace oxi;

namespace {

struct Rec {
  DType type;
  uint32_t rows, cols;
  std::vector<float> w, x, deq, dots;
  std::vector<uint8_t> q;
};

std::vector<Rec> load() {
  std::ifstream f(std::string(OXI_SOURCE_DIR) + "/tests/kernels/data/ggml_vectors.bin", std::ios::binary);
  std::vector<Rec> out;
  if (!f) return out;
  char magic[4];
  uint32_t n = 0;
  f.read(magic, 4);
  f.read(reinterpret_cast<char*>(&n), 4);
  if (std::memcmp(magic, "OXGV", 4) != 0) return out;
  auto rd = [&](void* p, size_t b) { f.read(static_cast<char*>(p), static_cast<std::streamsize>(b)); };
  for (uint32_t i = 0; i < n && f; ++i) {
    Rec r;
    uint32_t t;
    rd(&t, 4);
    rd(&r.rows, 4);
    rd(&r.cols, 4);
    r.type = static_cast<DType>(t);
    const size_t nn = size_t{r.rows} * r.cols;
    r.w.resize(nn);
    r.x.resize(r.cols);
    r.q.resize(*dtype_row_bytes(r.type, r.cols) * r.rows);
    r.deq.resize(nn);
    r.dots.resize(r.rows);
    rd(r.w.data(), nn * 4);
    rd(r.x.data(), r.cols * 4);
    rd(r.q.data(), r.q.size());
    rd(r.deq.data(), nn * 4);
    rd(r.dots.data(), r.rows * 4);
    out.push_back(std::move(r));
  }
  return out;
}

}  // namespace

TEST(GgmlVectors, DequantiseQuantiseAndDot) {
  const auto recs = load();
  ASSERT_GE(recs.size(), 52u) << "missing or old tests/kernels/data/ggml_vectors.bin";
  for (const Rec& r : recs) {
    const std::string tn = dtype_name(r.type);
    const uint64_t rb = *dtype_row_bytes(r.type, r.cols);
    // 1. Dequantisation of ggml's bytes: bit-exact.
    std::vector<float> deq(r.deq.size());
    dequantize(r.type, r.q.data(), deq.data(), static_cast<int64_t>(deq.size()));
    for (size_t i = 0; i < deq.size(); ++i) ASSERT_EQ(deq[i], r.deq[i]) << tn << " element " << i;
    // 2. Our quantisers produce ggml's bytes.
    if (quantize_supports(r.type)) {
      std::vector<uint8_t> q(r.q.size());
      for (uint32_t row = 0; row < r.rows; ++row)
        quantize_row(r.type, r.w.data() + size_t{row} * r.cols, r.cols, q.data() + row * rb);
      EXPECT_EQ(0, std::memcmp(q.data(), r.q.data(), q.size())) << tn << " quantisation differs from ggml";
    }
    // 3. matmul vs ggml's vec_dot (same activation format; only summation order differs), as
    // GEMV (1 token) and through the GEMM paths (the same activation row repeated as 37 tokens).
    MatrixView w{r.type, r.rows, r.cols, r.q.data(), rb};
    for (const auto& isa : available_isas()) {
      set_isa(isa);
      for (int64_t nt : {1, 37}) {
        std::vector<float> xs(static_cast<size_t>(nt) * r.cols);
        for (int64_t t = 0; t < nt; ++t) std::copy(r.x.begin(), r.x.end(), xs.begin() + t * r.cols);
        std::vector<float> y(static_cast<size_t>(nt) * r.rows);
        matmul(w, xs.data(), nt, y.data());
        for (uint32_t row = 0; row < r.rows; ++row) {
          double mag = 0;
          for (uint32_t c = 0; c < r.cols; ++c) mag += std::fabs(r.deq[size_t{row} * r.cols + c] * r.x[c]);
          // Activations are rounded to ggml's vec_dot_type (natively, or quantised and dequantised
          // for the fallback types; Q4_1 / Q5_1 use ggml's Q8_1 sums): only summation order differs.
          const double tol = 2e-6;
          for (int64_t t = 0; t < nt; ++t)
            EXPECT_NEAR(y[static_cast<size_t>(t * r.rows + row)], r.dots[row], tol * mag + 1e-6)
                << isa << " " << tn << " row " << row << " tokens " << nt << " token " << t;
        }
      }
    }
    set_isa("auto");
  }
}
