// Kernel throughput at Qwen3.5-0.8B-like shapes. GEMV (1 token) cycles through enough copies of
// the matrix to exceed the last-level cache, as decode streams every layer's weights from DRAM;
// reports GB/s of weight bytes. GEMM (prefill) reports GFLOP/s (2·rows·cols·tokens).
//   oxi_kernels_bench [--benchmark_filter=...]   env OXI_ISA=scalar|avx2|avx512, OXI_THREADS=n
#include <benchmark/benchmark.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "core/half.h"
#include "kernels/fused.h"
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
      case DType::Q3_K: std::memcpy(b + 108, &h, 2); break;
      case DType::IQ4_XS: std::memcpy(b, &h, 2); break;
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
// ntok > 1: that many tokens per call (batched decode's compute ceiling; "tok GB/s" as BM_gemv_n).
void BM_gemv_hot(benchmark::State& st, DType t, int64_t rows, int64_t cols, int64_t ntok) {
  setup_env();
  Weights w = make_weights(t, rows, cols, 0);
  std::vector<float> x(cols * ntok), y(rows * ntok);
  std::mt19937 rng(1);
  std::normal_distribution<float> nd;
  for (auto& v : x) v = nd(rng);
  matmul(w.copies[0], x.data(), ntok, y.data());
  for (auto _ : st) {
    matmul(w.copies[0], x.data(), ntok, y.data());
    benchmark::ClobberMemory();
  }
  const double bytes = static_cast<double>(w.copies[0].row_bytes) * rows;
  st.counters["GB/s"] = benchmark::Counter(bytes * st.iterations() / 1e9, benchmark::Counter::kIsRate);
  st.counters["tok GB/s"] = benchmark::Counter(bytes * ntok * st.iterations() / 1e9, benchmark::Counter::kIsRate);
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

// Qwen3.5-0.8B attention (8 query heads of 256 over 2 KV heads, rows of 512 values) against a
// cache of n positions, f32 or f16 storage (f16-valued either way: the same results bit for bit).
// Decode: one token's 8 heads per iteration, cycling through 6 layers' caches as a decode does;
// reports GB/s of K/V bytes read. Prefill: all n queries of one layer in blocks of 32 (the
// model's loop; KT prepared outside), V read as f16 by the kernel or ("f16cvt") converted to an
// f32 copy first.
constexpr int64_t kAH = 8, kAHkv = 2, kAHd = 256, kAKW = kAHkv * kAHd;
struct AttnCache {
  std::vector<float> k32, v32, q;
  std::vector<uint16_t> k16, v16;
  AttnCache(int64_t rows, int64_t queries)
      : k32(rows * kAKW), v32(k32.size()), q(queries * 2 * kAH * kAHd), k16(k32.size()), v16(k32.size()) {
    std::mt19937 rng(7);
    std::normal_distribution<float> nd;
    for (size_t i = 0; i < k32.size(); ++i) {
      k16[i] = f32_to_f16(nd(rng));
      v16[i] = f32_to_f16(nd(rng));
      k32[i] = f16_to_f32(k16[i]);
      v32[i] = f16_to_f32(v16[i]);
    }
    for (auto& x : q) x = nd(rng);
  }
};

void BM_attn_decode(benchmark::State& st, bool f16, int64_t n) {
  setup_env();
  constexpr int64_t kLayers = 6;
  AttnCache c(kLayers * n, 1);
  std::vector<float> scores(n), out(kAH * kAHd);
  const float scale = 0.0625f;
  int64_t l = 0;
  for (auto _ : st) {
    const size_t o = static_cast<size_t>(l * n * kAKW);
    for (int64_t h = 0; h < kAH; ++h) {
      const int64_t off = (h / (kAH / kAHkv)) * kAHd;
      if (f16)
        attend_one_f16(c.q.data() + h * kAHd, c.k16.data() + o, c.v16.data() + o, kAKW, off, n, kAHd, scale,
                       scores.data(), out.data() + h * kAHd);
      else
        attend_one(c.q.data() + h * kAHd, c.k32.data() + o, c.v32.data() + o, kAKW, off, n, kAHd, scale,
                   scores.data(), out.data() + h * kAHd, true);
    }
    l = (l + 1) % kLayers;
    benchmark::ClobberMemory();
  }
  st.counters["GB/s"] = benchmark::Counter(2.0 * n * kAKW * (f16 ? 2 : 4) * st.iterations() / 1e9,
                                           benchmark::Counter::kIsRate);
}

void BM_attn_prefill(benchmark::State& st, int mode, int64_t n) {  // 0 f32, 1 f16, 2 f16cvt
  setup_env();
  AttnCache c(n, n);
  std::vector<float> KT(kAHkv * kAHd * n), vf(mode == 2 ? n * kAKW : 0), out(n * kAH * kAHd);
  for (int64_t g = 0; g < kAHkv; ++g)
    for (int64_t p = 0; p < n; ++p)
      for (int64_t e = 0; e < kAHd; ++e) KT[(g * kAHd + e) * n + p] = c.k32[p * kAKW + g * kAHd + e];
  const float scale = 0.0625f;
  const int64_t QW = 2 * kAH * kAHd;
  for (auto _ : st) {
    if (mode == 2) f16_to_f32_row(c.v16.data(), vf.data(), n * kAKW);
    for (int64_t q0 = 0; q0 < n; q0 += 32) {
      const int64_t nq = std::min<int64_t>(32, n - q0);
      for (int64_t h = 0; h < kAH; ++h) {
        const int64_t g = h / (kAH / kAHkv);
        const float* q = c.q.data() + q0 * QW + h * 2 * kAHd;
        float* o = out.data() + q0 * kAH * kAHd + h * kAHd;
        if (mode == 1)
          attend_causal_f16(q, QW, nq, KT.data() + g * kAHd * n, n, c.v16.data(), kAKW, g * kAHd, q0 + 1, kAHd, scale,
                            o, kAH * kAHd);
        else
          attend_causal(q, QW, nq, KT.data() + g * kAHd * n, n, mode == 2 ? vf.data() : c.v32.data(), kAKW, g * kAHd,
                        q0 + 1, kAHd, scale, o, kAH * kAHd, true);
      }
    }
    benchmark::ClobberMemory();
  }
}

struct Reg {
  Reg() {
    for (int64_t n : {int64_t{64}, int64_t{512}, int64_t{2048}, int64_t{8192}, int64_t{32768}})
      for (bool f16 : {false, true})
        benchmark::RegisterBenchmark(("attn_decode/" + std::string(f16 ? "f16" : "f32") + "/" + std::to_string(n)).c_str(),
                                     BM_attn_decode, f16, n);
    for (int64_t n : {int64_t{512}, int64_t{2048}})
      for (int mode : {0, 1, 2})
        benchmark::RegisterBenchmark(
            ("attn_prefill/" + std::string(mode == 0 ? "f32" : mode == 1 ? "f16" : "f16cvt") + "/" + std::to_string(n)).c_str(),
            BM_attn_prefill, mode, n);
    const DType types[] = {DType::F32,  DType::F16,  DType::BF16, DType::Q8_0, DType::Q4_0,
                           DType::Q4_K, DType::Q5_K, DType::Q6_K, DType::Q3_K, DType::IQ4_XS};
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
      benchmark::RegisterBenchmark(("gemv_hot/" + n + "/512x1024").c_str(), BM_gemv_hot, t, 512, 1024, 1)->UseRealTime();
      benchmark::RegisterBenchmark(("gemv_hot/" + n + "/128x1024").c_str(), BM_gemv_hot, t, 128, 1024, 1)->UseRealTime();
      if (t == DType::Q4_0 || t == DType::Q4_K || t == DType::Q6_K)
        for (int64_t nt : {4, 8, 16})
          benchmark::RegisterBenchmark(("gemv_hot" + std::to_string(nt) + "/" + n + "/512x1024").c_str(), BM_gemv_hot, t,
                                       512, 1024, nt)->UseRealTime();
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
