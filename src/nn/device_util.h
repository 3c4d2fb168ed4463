// Small helpers for code that runs a forward pass on an nn::Device: Refs from owned buffers,
// zero fill, and the per-pass working memory (one growing buffer per slot).
#pragma once

#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "core/error.h"

#include "nn/device.h"
#include "nn/moe.h"

namespace oxi::nn {

inline Ref at(const std::shared_ptr<Buffer>& b, int64_t off = 0) { return Ref{b.get(), off}; }

// n zeros into r, written from the host in pieces of at most 1 Mi floats.
inline void zero(Device& d, Ref r, int64_t n) {
  const std::vector<float> z(static_cast<size_t>(std::clamp<int64_t>(n, 1, int64_t{1} << 20)), 0.0f);
  for (int64_t i = 0; i < n; i += static_cast<int64_t>(z.size()))
    d.write(r.at(i), z.data(), std::min<int64_t>(n - i, static_cast<int64_t>(z.size())));
}

// A host vector as a new device buffer of its size.
inline std::shared_ptr<Buffer> upload_vec(Device& d, const std::vector<float>& v) {
  auto b = d.alloc(static_cast<int64_t>(v.size()));
  if (!v.empty()) d.write(at(b), v.data(), static_cast<int64_t>(v.size()));
  return b;
}

// y = x · wᵀ for one weight (Device::matmul takes a batch of weights sharing x).
inline void matmul1(Device& d, const Weight& w, Ref x, int64_t n, Ref y) {
  const Weight* ws[1] = {&w};
  const Ref ys[1] = {y};
  d.matmul(ws, ys, x, n);
}

// A gated FFN over n rows: y = down · (act(gate · x) ⊙ (up · x)), act SiLU (SwiGLU) or tanh-GELU
// (GeGLU); a, b: scratch of n · gate.rows floats each.
inline void gated_ffn(Device& d, const Weight& gate, const Weight& up, const Weight& down, Ref x, int64_t n, Ref y, Ref a, Ref b,
                      bool gelu) {
  const Weight* ws[2] = {&gate, &up};
  const Ref ys[2] = {a, b};
  d.matmul(ws, ys, x, n);
  if (gelu) d.gelu_mul(a, b, a, n * gate.rows);
  else d.silu_mul(a, b, a, n * gate.rows);
  matmul1(d, down, a, n, y);
}

// Working memory of a pass: slot s holds one device buffer, reallocated when a pass needs more.
class Scratch {
 public:
  explicit Scratch(Device& d) : dev_(d) {}
  Ref get(int slot, int64_t floats) {
    if (static_cast<size_t>(slot) >= bufs_.size()) bufs_.resize(static_cast<size_t>(slot) + 1);
    auto& b = bufs_[static_cast<size_t>(slot)];
    if (!b || b->floats() < floats) b = dev_.alloc(std::max<int64_t>(floats, 1));
    return at(b);
  }

 private:
  Device& dev_;
  std::vector<std::shared_ptr<Buffer>> bufs_;
};

// Device::moe_route on logits [rows, E], its choices turned around per expert (nn/moe.h).
inline ExpertRows route_experts(Device& d, Ref logits, int64_t rows, int64_t E, int64_t k) {
  std::vector<int32_t> ids(static_cast<size_t>(rows * k));
  std::vector<float> w(ids.size());
  d.moe_route(logits, rows, E, k, ids.data(), w.data());
  return expert_rows(ids.data(), w.data(), rows, E, k, d.name().c_str());
}

// The routed experts of an MoE layer over n rows of x [n, D]: out [n, D] = Σ over each row's experts
// of weight · ffn_e(row), experts in index order (the CPU forwards' order of additions). For each
// expert with rows, ffn(e, xin, m, y) runs it over its m gathered rows (xin, y: [m, D] scratch in
// slots slot_x and slot_y).
template <class Ffn>
void run_experts(Device& d, Scratch& S, int slot_x, int slot_y, const ExpertRows& r, Ref x, int64_t n, int64_t D, Ref out,
                 Ffn&& ffn) {
  zero(d, out, n * D);
  for (size_t e = 0; e < r.rows.size(); ++e) {
    const auto& rows = r.rows[e];
    if (rows.empty()) continue;
    const int64_t m = static_cast<int64_t>(rows.size());
    const Ref xin = S.get(slot_x, m * D), y = S.get(slot_y, m * D);
    d.gather_rows(x, rows, D, xin);
    ffn(e, xin, m, y);
    d.add_rows_scaled(y, rows, r.weights[e], D, out);
  }
}

}  // namespace oxi::nn
