// Same-run comparison of our matmul with ggml's CPU vec_dot (llama.cpp's kernels, loaded from
// node-llama-cpp's libggml at run time), single thread, on the same weight bytes and shapes.
// GEMV cycles through copies totalling > 1 GiB (as decode streams weights); reports GB/s of
// weights for both and the ratio; GEMM (n tokens) reports GFLOP/s.
//   NLC_DIR=tools/node oxi_kernels_vs_ggml [cpu-variant, default: best that loads] [reps]
#include <dlfcn.h>

#include <algorithm>
#include <cmath>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "kernels/isa.h"
#include "kernels/matmul.h"
#include "kernels/thread_pool.h"

using namespace oxi;

namespace {

struct GgmlTraitsCpu {
  void (*from_float)(const float*, void*, int64_t);
  void (*vec_dot)(int, float*, size_t, const void*, size_t, const void*, size_t, int);
  int vec_dot_type;
  int64_t nrows;
};
using QuantizeChunk = size_t (*)(int, const float*, void*, int64_t, int64_t, int64_t, const float*);
using RowSize = size_t (*)(int, int64_t);
using TraitsCpu = const GgmlTraitsCpu* (*)(int);

double now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

}  // namespace

int main(int argc, char** argv) {
  const char* nlc = std::getenv("NLC_DIR");
  const std::string dir = std::string(nlc ? nlc : "tools/node") + "/node_modules/@node-llama-cpp/linux-x64/bins/linux-x64/";
  void* base = dlopen((dir + "libggml-base.so").c_str(), RTLD_NOW | RTLD_GLOBAL);
  if (!base) { std::fprintf(stderr, "dlopen: %s\n", dlerror()); return 1; }
  void* cpu = nullptr;
  std::string variant;
  for (const char* v : {"sapphirerapids", "zen4", "icelake", "cascadelake", "haswell"}) {
    if (argc > 1 && argv[1][0] && std::string(argv[1]) != v) continue;
    cpu = dlopen((dir + "libggml-cpu-" + v + ".so").c_str(), RTLD_NOW | RTLD_GLOBAL);
    if (cpu) { variant = v; break; }
  }
  if (!cpu) { std::fprintf(stderr, "no ggml cpu variant loads\n"); return 1; }
  const int reps = argc > 2 ? std::atoi(argv[2]) : 5;
  reinterpret_cast<void (*)()>(dlsym(cpu, "ggml_cpu_init"))();
  auto qchunk = reinterpret_cast<QuantizeChunk>(dlsym(base, "ggml_quantize_chunk"));
  auto row_size = reinterpret_cast<RowSize>(dlsym(base, "ggml_row_size"));
  auto traits = reinterpret_cast<TraitsCpu>(dlsym(cpu, "ggml_get_type_traits_cpu"));
  set_num_threads(1);
  std::printf("ggml cpu variant %s; ours: %s; 1 thread\n", variant.c_str(), kernels_summary().c_str());
  std::printf("%-6s %-16s %10s %10s %7s\n", "type", "shape", "ggml", "oxi", "oxi/ggml");

  struct Case { DType t; int64_t rows, cols, ntok; };
  const DType types[] = {DType::Q8_0, DType::Q4_0, DType::Q4_K, DType::Q6_K, DType::Q5_K, DType::BF16, DType::F16};
  std::vector<Case> cases;
  for (DType t : types) {
    cases.push_back({t, 1024, 3584, 1});
    cases.push_back({t, 3584, 1024, 1});
    cases.push_back({t, 1024, 3584, 128});
  }
  for (const Case& c : cases) {
    const int tid = static_cast<int>(c.t);
    const size_t rb = row_size(tid, c.cols);
    const size_t one = rb * c.rows;
    const size_t copies = c.ntok == 1 ? std::max<size_t>(1, (1ull << 30) / one) : 1;
    // Quantise a random f32 matrix once with ggml, replicate.
    std::vector<float> wf(c.rows * c.cols);
    uint64_t s = 88172645463325252ull;
    for (auto& v : wf) { s ^= s << 13; s ^= s >> 7; s ^= s << 17; v = static_cast<float>(static_cast<int64_t>(s >> 40) - (1 << 23)) / (1 << 23) * 0.05f; }
    std::vector<uint8_t> wb(one * copies);
    qchunk(tid, wf.data(), wb.data(), 0, c.rows, c.cols, nullptr);
    for (size_t i = 1; i < copies; ++i) std::memcpy(wb.data() + i * one, wb.data(), one);
    std::vector<float> x(c.cols * c.ntok), y0(c.rows * c.ntok), y1(c.rows * c.ntok);
    for (auto& v : x) { s ^= s << 13; s ^= s >> 7; s ^= s << 17; v = static_cast<float>(static_cast<int64_t>(s >> 40) - (1 << 23)) / (1 << 23); }
    const GgmlTraitsCpu* tr = traits(tid);
    const GgmlTraitsCpu* trx = traits(tr->vec_dot_type);
    const size_t xrb = row_size(tr->vec_dot_type, c.cols);
    std::vector<uint8_t> xq(xrb * c.ntok);
    auto run_ggml = [&](size_t k) {
      const uint8_t* w = wb.data() + k * one;
      for (int64_t t = 0; t < c.ntok; ++t) {
        if (trx->from_float) trx->from_float(x.data() + t * c.cols, xq.data() + t * xrb, c.cols);
        else std::memcpy(xq.data() + t * xrb, x.data() + t * c.cols, xrb);
      }
      for (int64_t r = 0; r < c.rows; ++r)
        for (int64_t t = 0; t < c.ntok; ++t)
          tr->vec_dot(static_cast<int>(c.cols), &y0[t * c.rows + r], 0, w + r * rb, 0, xq.data() + t * xrb, 0, 1);
    };
    auto run_oxi = [&](size_t k) {
      MatrixView m{c.t, c.rows, c.cols, wb.data() + k * one, rb};
      matmul(m, x.data(), c.ntok, y1.data());
    };
    double best0 = 1e30, best1 = 1e30;
    const int iters = c.ntok == 1 ? static_cast<int>(std::min<size_t>(copies, 256)) : 1;
    size_t k0 = 0, k1 = 0;
    for (int rep = 0; rep < reps; ++rep) {
      double t0 = now();
      for (int i = 0; i < iters; ++i) run_ggml(k0++ % copies);
      double t1 = now();
      for (int i = 0; i < iters; ++i) run_oxi(k1++ % copies);
      double t2 = now();
      best0 = std::min(best0, (t1 - t0) / iters);
      best1 = std::min(best1, (t2 - t1) / iters);
    }
    double maxdiff = 0, maxref = 0;
    for (size_t i = 0; i < y0.size(); ++i) { maxdiff = std::max(maxdiff, static_cast<double>(std::fabs(y0[i] - y1[i]))); maxref = std::max(maxref, static_cast<double>(std::fabs(y0[i]))); }
    char shape[64];
    std::snprintf(shape, sizeof shape, "%lldx%lldx%lld", static_cast<long long>(c.rows), static_cast<long long>(c.cols), static_cast<long long>(c.ntok));
    const double unit0 = c.ntok == 1 ? one / best0 / 1e9 : 2.0 * c.rows * c.cols * c.ntok / best0 / 1e9;
    const double unit1 = c.ntok == 1 ? one / best1 / 1e9 : 2.0 * c.rows * c.cols * c.ntok / best1 / 1e9;
    std::printf("%-6s %-16s %8.1f%s %8.1f%s %7.2f   (max |diff| %.2g of %.2g)\n", dtype_name(c.t).c_str(), shape, unit0,
                c.ntok == 1 ? "GB/s" : "GF/s", unit1, c.ntok == 1 ? "GB/s" : "GF/s", best0 / best1, maxdiff, maxref);
    std::fflush(stdout);
  }
  return 0;
}
