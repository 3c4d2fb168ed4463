#include "nn/ffn.h"

#include <memory>
#include <string>

#include "core/error.h"
#include "kernels/fused.h"
#include "kernels/ggml.h"
#include "kernels/thread_pool.h"
#include "nn/ops.h"

namespace oxi::nn {

void Products::mm(const MatrixView& w, const float* x, int64_t T, float* y, bool id) const {
  if (ggml_f32 && w.dtype == DType::F32)
    ggml_matmul_f32(w, x, T, y, lanes, id);
  else
    matmul(w, x, T, y);
}

void Products::mm2(const MatrixView& w1, float* y1, const MatrixView& w2, float* y2, const float* x, int64_t T,
                   bool id) const {
  if (ggml_f32 && (w1.dtype == DType::F32 || w2.dtype == DType::F32)) {
    mm(w1, x, T, y1, id);
    mm(w2, x, T, y2, id);
    return;
  }
  const MatrixView ws[2] = {w1, w2};
  float* const ys[2] = {y1, y2};
  matmul_batch(ws, ys, 2, x, T);
}

void gate_act(GateAct act, float* a, const float* b, int64_t n) {
  switch (act) {
    case GateAct::kSilu: silu_mul(a, b, a, n); return;  // kernels/fused.h (in place is allowed)
    case GateAct::kGeluGgml: ggml_geglu(a, b, n); return;
    case GateAct::kGeluTanh:
      for (int64_t i = 0; i < n; ++i) a[i] = ops::gelu_tanh(a[i]) * b[i];
      return;
  }
}

namespace {
// Per-thread grow-only scratch (a fresh 2 × T·width floats per layer was ~1 GB of page faults per
// 512-token prompt at Gemma 4 E2B's width). Every call writes what it reads.
float* scratch(int slot, int64_t n) {
  thread_local std::unique_ptr<float[]> p[2];
  thread_local int64_t cap[2] = {};
  if (cap[slot] < n) {
    p[slot].reset(new float[static_cast<size_t>(n)]);
    cap[slot] = n;
  }
  return p[slot].get();
}
}  // namespace

void gated_ffn(const MatrixView& gate, const MatrixView& up, const MatrixView& down, const float* x, int64_t T,
               float* y, const GatedFfn& o) {
  const int64_t I = gate.rows;
  if (up.rows != I || up.cols != gate.cols || down.cols != I)
    throw_error(ErrorCode::kInvalidArgument, "gated_ffn: gate " + std::to_string(gate.rows) + "x" + std::to_string(gate.cols) +
                                                 ", up " + std::to_string(up.rows) + "x" + std::to_string(up.cols) + ", down " +
                                                 std::to_string(down.rows) + "x" + std::to_string(down.cols) + " do not fit");
  if (T <= 0) return;
  float* a = scratch(0, T * I);
  float* b = scratch(1, T * I);
  o.mm.mm2(gate, a, up, b, x, T, o.expert);
  // act·up (element-wise: the same values for any split). Over the pool in chunks of elements
  // (rather than rows, so that a wide decode row also splits) only from 4 chunks on: an expert's
  // few rows are cheaper on this thread than a pool dispatch and join per expert (measured: Gemma
  // 4 MoE prefill lost ~20 % on a loaded 2-core host when every 2-chunk expert call dispatched).
  constexpr int64_t kGrain = 4096;
  if (T * I < 4 * kGrain)
    gate_act(o.act, a, b, T * I);
  else
    parallel_for_chunked(T * I, kGrain, [&](int64_t i0, int64_t i1) { gate_act(o.act, a + i0, b + i0, i1 - i0); });
  o.mm.mm(down, a, T, y, o.expert);
}

}  // namespace oxi::nn
