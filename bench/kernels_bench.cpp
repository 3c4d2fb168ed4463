// Kernel throughput at Qwen3.5-0.8B-like shapes. GEMV (1 token) cycles through enough copies of
// the matrix to exceed the last-level cache, as decode streams every layer's weights from DRAM;
// reports GB/s of weight bytes. GEMM (prefill) reports GFLOP/s (2·rows·cols·tokens).
//   oxi_kernels_bench [--benchmark_filter=...]   env OXI_ISA=scalar|avx2|avx512, OXI_THREADS=n
#include <benchmark/benchmark.h>

#include <cstdlib>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "core/half.h"
#include "kernels/isa.h"
#include "kernels/matmul.h"
#include "kernels/pack.h"
#include "kernels/thread_pool.h"

using namespace oxi;

namespace {

struct Weights {
  std::vector<uint8_t> bytes;
  std::vector<MatrixView> copies;
};

// Random but valid weights (scale fields set to small normal f16 values).
Weights make_weights(DType t, int64_t rows, int64_t cols, uint64_t min_total) {
  const uint64_t rb = *dtype_row_bytes(t, cols);
  const uint64_t one = rb * rows;
  const uint64_t n = std::max<uint64_t>(1, (min_total + one - 1) / one);
  Weights w;
  w.bytes.resize(one * n);
  uint64_t s = 0x9E3779B97F4A7C15ull;
  for (size_t i = 0; i + 8 <= w.bytes.size(); i += 8) {
    s ^= s << 13; s ^= s >> 7; s ^= s << 17;
    std::memcpy(&w.bytes[i], &s, 8);
  }
  const auto tr = *dtype_traits(t);
  const uint16_t h = f32_to_f16(0.01f), bf = f32_to_bf16(0.01f);
  for (uint64_t off = 0; off + tr.block_bytes <= w.bytes.size(); off += tr.block_bytes) {
    uint8_t* b = &w.bytes[off];
    switch (t) {
      case DType::F32: { float f = 0.01f * static_cast<int8_t>(b[0]); std::memcpy(b, &f, 4); break; }
      case DType::F16: std::memcpy(b, &h, 2); break;
      case DType::BF16: std::memcpy(b, &bf, 2); break;
      case DType::Q8_0: case DType::Q4_0: std::memcpy(b, &h, 2); break;
      case DType::Q4_K: case DType::Q5_K: std::memcpy(b, &h, 2); std::memcpy(b + 2, &h, 2); break;
      case DType::Q6_K: std::memcpy(b + 208, &h, 2); break;
      default: break;
    }
  }
  for (uint64_t i = 0; i < n; ++i) w.copies.push_back({t, rows, cols, w.bytes.data() + i * one, rb});
  return w;
}

void setup_env() {
  static bool done = false;
  if (done) return;
  done = true;
  if (const char* th = std::getenv("OXI_THREADS")) set_num_threads(std::atoi(th));
  // Decode repacks some weight types once (kernels/pack.h) while a model holds a lease; so does
  // this bench (OXI_PACK_OFF=1 measures the file-layout kernels).
  static kern::PackLease lease;
  std::fprintf(stderr, "%s\n", kernels_summary().c_str());
}

void BM_gemv(benchmark::State& st, DType t, int64_t rows, int64_t cols) {
  setup_env();
  Weights w = make_weights(t, rows, cols, 1024ull << 20);
  std::vector<float> x(cols), y(rows);
  std::mt19937 rng(1);
  std::normal_distribution<float> nd;
  for (auto& v : x) v = nd(rng);
  for (const MatrixView& c : w.copies) matmul(c, x.data(), 1, y.data());  // packs, if it does
  size_t i = 0;
  for (auto _ : st) {
    matmul(w.copies[i], x.data(), 1, y.data());
    i = (i + 1) % w.copies.size();
    benchmark::ClobberMemory();
  }
  const double bytes = static_cast<double>(w.copies[0].row_bytes) * rows;
  st.counters["GB/s"] = benchmark::Counter(bytes * st.iterations() / 1e9, benchmark::Counter::kIsRate);
}

// N tokens per call (decode of N sequences at once), from DRAM as BM_gemv: GB/s of weight bytes
// read per call, and "tok GB/s" = that times N (the rate N single-token calls would need).
void BM_gemv_n(benchmark::State& st, DType t, int64_t rows, int64_t cols, int64_t ntok) {
  setup_env();
  Weights w = make_weights(t, rows, cols, 1024ull << 20);
  std::vector<float> x(cols * ntok), y(rows * ntok);
  std::mt19937 rng(1);
  std::normal_distribution<float> nd;
  for (auto& v : x) v = nd(rng);
  for (const MatrixView& c : w.copies) matmul(c, x.data(), 1, y.data());  // packs, if it does
  size_t i = 0;
  for (auto _ : st) {
    matmul(w.copies[i], x.data(), ntok, y.data());
    i = (i + 1) % w.copies.size();
    benchmark::ClobberMemory();
  }
  const double bytes = static_cast<double>(w.copies[0].row_bytes) * rows;
  st.counters["GB/s"] = benchmark::Counter(bytes * st.iterations() / 1e9, benchmark::Counter::kIsRate);
  st.counters["tok GB/s"] = benchmark::Counter(bytes * ntok * st.iterations() / 1e9, benchmark::Counter::kIsRate);
}

// The same GEMV on one copy small enough to stay in L2 (Q8_0 512×1024: 544 KiB): the kernel's
// compute ceiling, to tell a kernel that cannot keep up with DRAM from one that waits on it.
void BM_gemv_hot(benchmark::State& st, DType t, int64_t rows, int64_t cols) {
  setup_env();
  Weights w = make_weights(t, rows, cols, 0);
  std::vector<float> x(cols), y(rows);
  std::mt19937 rng(1);
  std::normal_distribution<float> nd;
  for (auto& v : x) v = nd(rng);
  matmul(w.copies[0], x.data(), 1, y.data());
  for (auto _ : st) {
    matmul(w.copies[0], x.data(), 1, y.data());
    benchmark::ClobberMemory();
  }
  const double bytes = static_cast<double>(w.copies[0].row_bytes) * rows;
  st.counters["GB/s"] = benchmark::Counter(bytes * st.iterations() / 1e9, benchmark::Counter::kIsRate);
}

void BM_gemm(benchmark::State& st, DType t, int64_t rows, int64_t cols, int64_t ntok) {
  setup_env();
  Weights w = make_weights(t, rows, cols, 0);
  std::vector<float> x(cols * ntok), y(rows * ntok);
  std::mt19937 rng(1);
  std::normal_distribution<float> nd;
  for (auto& v : x) v = nd(rng);
  for (auto _ : st) {
    matmul(w.copies[0], x.data(), ntok, y.data());
    benchmark::ClobberMemory();
  }
  st.counters["GFLOP/s"] =
      benchmark::Counter(2.0 * rows * cols * ntok * st.iterations() / 1e9, benchmark::Counter::kIsRate);
}

struct Reg {
  Reg() {
    const DType types[] = {DType::F32, DType::F16, DType::BF16, DType::Q8_0,
                           DType::Q4_0, DType::Q4_K, DType::Q5_K, DType::Q6_K};
    for (DType t : types) {
      const std::string n = dtype_name(t);
      benchmark::RegisterBenchmark(("gemv/" + n + "/1024x3584").c_str(), BM_gemv, t, 1024, 3584)->UseRealTime();
      benchmark::RegisterBenchmark(("gemv/" + n + "/3584x1024").c_str(), BM_gemv, t, 3584, 1024)->UseRealTime();
      if (t != DType::F32 && t != DType::F16)
        benchmark::RegisterBenchmark(("gemv/" + n + "/248320x1024").c_str(), BM_gemv, t, 248320, 1024)->UseRealTime();
      if (t == DType::Q4_0 || t == DType::Q4_K || t == DType::Q6_K) {
        for (int64_t nt : {2, 4, 8, 12, 16}) {
          const std::string g = "gemv" + std::to_string(nt) + "/" + n;
          benchmark::RegisterBenchmark((g + "/1024x3584").c_str(), BM_gemv_n, t, 1024, 3584, nt)->UseRealTime();
          benchmark::RegisterBenchmark((g + "/3584x1024").c_str(), BM_gemv_n, t, 3584, 1024, nt)->UseRealTime();
          if (t == DType::Q6_K)
            benchmark::RegisterBenchmark((g + "/248320x1024").c_str(), BM_gemv_n, t, 248320, 1024, nt)->UseRealTime();
        }
      }
      benchmark::RegisterBenchmark(("gemv_hot/" + n + "/512x1024").c_str(), BM_gemv_hot, t, 512, 1024)->UseRealTime();
      benchmark::RegisterBenchmark(("gemv_hot/" + n + "/128x1024").c_str(), BM_gemv_hot, t, 128, 1024)->UseRealTime();
      benchmark::RegisterBenchmark(("gemm/" + n + "/3584x1024x512").c_str(), BM_gemm, t, 3584, 1024, 512)->UseRealTime();
      benchmark::RegisterBenchmark(("gemm/" + n + "/1024x3584x512").c_str(), BM_gemm, t, 1024, 3584, 512)->UseRealTime();
      // Gemma-4-E2B-shaped: the double-wide FFN of its KV-sharing layers (long rows in down)
      benchmark::RegisterBenchmark(("gemm/" + n + "/12288x1536x512").c_str(), BM_gemm, t, 12288, 1536, 512)->UseRealTime();
      benchmark::RegisterBenchmark(("gemm/" + n + "/1536x12288x512").c_str(), BM_gemm, t, 1536, 12288, 512)->UseRealTime();
    }
  }
} reg;

}  // namespace

BENCHMARK_MAIN();
