// The block-level device interface: what a compute device (the CPU, a GPU through Vulkan/CUDA/
// WebGPU, a test double) must run for a model's forward pass to stay on it. A device holds its own
// memory — weights uploaded once, activations, KV caches and recurrent states — and runs whole
// layer blocks on it; the host only sends token ids / positions and reads back the rows it asks
// for. Unlike the per-matmul hook (backend/hook.h, kept as a mode), nothing crosses the bus
// between blocks, so decode can run on a device too.
//
// Activations are f32, row-major. A Ref names `floats` of one device buffer from an element
// offset. Shapes are given per call; a device checks that every Ref lies inside its buffer.
// The CPU device (nn/cpu_device.h) is the reference: its blocks are the kernels the models use,
// and every other device is tested block by block against it (tests/nn/device_test.cpp).
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <span>
#include <string>

#include "kernels/matmul.h"

namespace oxi::nn {

// Device memory. Created by Device::alloc, freed when the last owner lets go.
class Buffer {
 public:
  virtual ~Buffer() = default;
  int64_t floats() const { return floats_; }

 protected:
  explicit Buffer(int64_t floats) : floats_(floats) {}

 private:
  int64_t floats_;
};

// floats [off, off + …) of a buffer.
struct Ref {
  Buffer* buf = nullptr;
  int64_t off = 0;
  Ref at(int64_t delta) const { return Ref{buf, off + delta}; }
  explicit operator bool() const { return buf != nullptr; }
};

// A weight matrix as the device keeps it (its own copy and layout). rows × cols as MatrixView.
class Weight {
 public:
  virtual ~Weight() = default;
  int64_t rows = 0, cols = 0;
  DType dtype = DType::F32;
};

// Gated DeltaNet over one sequence's tokens (Qwen 3.5 linear attention; kernels/fused.h gdn_*):
// for value head h (key head kh = tiled ? h % Hk : h / (Hv/Hk)), token t:
//   q, k: rows at qk + t·qk_stride + (kh·dk), k at + key_off; v at v + t·qk_stride + h·dv
//   g, β: gb + t·gb_stride + h (+ beta_off for β); S_h: state + h·dk·dv ([dk, dv], updated)
//   out:  out + t·out_stride + h·dv
struct GdnArgs {
  Ref qkv;                 // conv outputs [T, qk_stride]: q (Hk·dk), k (Hk·dk), v (Hv·dv)
  int64_t qk_stride = 0;
  Ref gb;                  // [T, gb_stride]: g (Hv) then β (Hv)
  int64_t gb_stride = 0;
  Ref state;               // [Hv, dk, dv]
  Ref out;                 // [T, out_stride]
  int64_t out_stride = 0;
  int64_t T = 0, Hk = 0, Hv = 0, dk = 0, dv = 0;
  bool tiled = false;
  bool chunked = false;    // the chunked (WY) form: same result up to f32 rounding
};

// Causal attention of T queries of one sequence against its cache (f32 rows [pos, Hkv·hd], the
// T new positions already stored at pos0 … pos0 + T − 1). Query t (position pos0 + t) attends to
// positions max(0, pos0 + t − window + 1) … pos0 + t (window 0: from 0), scores scaled by
// `scale`. out: [T, out_stride], head h at h·hd. f16_like: q and the softmax weights rounded to
// f16 in their products with K and V (llama.cpp's default CPU path with an f16 cache).
struct AttnArgs {
  Ref q;                   // [T, q_stride], head h at q_head_stride·h
  int64_t q_stride = 0, q_head_stride = 0;
  Ref k, v;                // cache [n_pos, Hkv·hd]
  Ref out;
  int64_t out_stride = 0;
  int64_t T = 0, pos0 = 0, H = 0, Hkv = 0, hd = 0, window = 0;
  float scale = 1.0f;
  bool f16_like = false;
};

// `heads` vectors of `width` floats in each of `rows` rows: vector (r, h) starts at
// at + r·row_stride + h·head_stride (per-head views into projection outputs, e.g. Qwen's query
// heads interleaved with their gates).
struct Heads {
  Ref at;
  int64_t row_stride = 0, head_stride = 0;
};

class Device {
 public:
  virtual ~Device() = default;
  virtual std::string name() const = 0;
  // Times the host has waited for the device to drain its queue so far (a read, moe_route, a
  // weight upload, …): each stalls a GPU's pipeline, so a decode step should need one, for its
  // logits. 0 on devices that run on the calling thread (the CPU, the test device).
  virtual uint64_t waits() const { return 0; }

  // ---- memory
  virtual std::shared_ptr<Buffer> alloc(int64_t floats) = 0;
  virtual void write(Ref dst, const float* src, int64_t n) = 0;  // host → device
  virtual void read(Ref src, float* dst, int64_t n) = 0;         // device → host
  virtual void copy(Ref src, Ref dst, int64_t n) = 0;            // device → device
  // Uploads a weight matrix once; the view's bytes may be released by the caller afterwards
  // only if the device says it copied them (owns_copy).
  virtual std::unique_ptr<Weight> upload(const MatrixView& w) = 0;

  // ---- blocks (f32 activations on the device)
  // out[i] = row ids[i] of `table` (dequantised), ids from the host.
  virtual void embed(const Weight& table, std::span<const int32_t> ids, Ref out) = 0;
  // ys[j] = x · ws[j]ᵀ for all j: x [n, cols], ys[j] [n, ws[j].rows].
  virtual void matmul(std::span<const Weight* const> ws, std::span<const Ref> ys, Ref x, int64_t n) = 0;
  // Per row: h += add (when add is set); y = h / sqrt(mean(h²) + eps) · w (w optional).
  virtual void rms_norm(Ref h, Ref add, Ref w, Ref y, int64_t rows, int64_t width, float eps) = 0;
  // NeoX RoPE on the first n_rot dims of `heads` heads (head_stride apart) of each row (row_stride
  // apart), frequency j = theta^(−2j/n_rot) at the row's position; pos3 (mRoPE, [rows, 3] t/h/w):
  // slot j takes h if j % 3 == 1 and j < 3·sections[1], w if j % 3 == 2 and j < 3·sections[2],
  // else t. Positions come from the host.
  virtual void rope_neox(Ref x, int64_t rows, int64_t row_stride, int64_t heads, int64_t head_stride, int64_t n_rot,
                         float theta, std::span<const int32_t> pos, const int32_t* pos3,
                         std::array<int32_t, 3> sections) = 0;
  // y = silu(a) · b, elementwise over n.
  virtual void silu_mul(Ref a, Ref b, Ref y, int64_t n) = 0;
  // y = gelu_tanh(a) · b, elementwise over n (Gemma's GeGLU).
  virtual void gelu_mul(Ref a, Ref b, Ref y, int64_t n) = 0;
  // x = cap · tanh(x / cap) over n.
  virtual void softcap(Ref x, int64_t n, float cap) = 0;
  // Causal depthwise conv + SiLU over T tokens: X [K − 1 + T, C] (state rows, then the new rows),
  // taps wT [K, C]; y [T, C].
  virtual void conv_silu(Ref X, Ref wT, int64_t C, int64_t K, int64_t T, Ref y) = 0;
  virtual void gdn(const GdnArgs& a) = 0;
  virtual void attention(const AttnArgs& a) = 0;
  // Mixture-of-experts routing: per row of logits [rows, E], softmax, the k largest (ties: lower
  // index), weights renormalised to sum 1. ids / weights: [rows, k] to the host (the expert
  // matmuls are dispatched per expert).
  virtual void moe_route(Ref logits, int64_t rows, int64_t E, int64_t k, int32_t* ids, float* weights) = 0;

  // ---- small blocks with a host implementation (nn/device.cpp: read the range, compute in f32 as
  // the CPU kernels do, write it back). Correct on every device as soon as read/write work; a
  // device overrides them with its own kernels to keep the data where it is (the Vulkan device
  // overrides all of them: a host version waits for the queue once per call).
  // Per vector: x = x / sqrt(mean(x²) + eps) · w (w: `width` floats, optional), in place.
  virtual void rms_norm_heads(Heads x, int64_t rows, int64_t heads, int64_t width, Ref w, float eps);
  // Per vector: x = x / max(‖x‖₂, eps) · scale, in place (Gated DeltaNet q and k).
  virtual void l2_norm_heads(Heads x, int64_t rows, int64_t heads, int64_t width, float eps, float scale);
  // Per vector: x = x · sigmoid(gate) elementwise (gated attention output).
  virtual void mul_sigmoid_heads(Heads x, Heads gate, int64_t rows, int64_t heads, int64_t width);
  // Gated DeltaNet gates of `rows` tokens, H value heads: from the projections a, b [rows, H],
  // gb [rows, 2H] = (g = ssm_a · softplus(a + dt_bias), β = sigmoid(b)) — GdnArgs::gb's layout.
  virtual void gdn_gates(Ref a, Ref b, Ref ssm_a, Ref dt_bias, int64_t rows, int64_t H, Ref gb);
  // dst row i = src row ids[i] (rows of `width` floats).
  virtual void gather_rows(Ref src, std::span<const int32_t> ids, int64_t width, Ref dst);
  // dst row ids[i] += w[i] · src row i (rows of `width` floats; ids may repeat, applied in order).
  virtual void add_rows_scaled(Ref src, std::span<const int32_t> ids, std::span<const float> w, int64_t width, Ref dst);
  // x *= s over n.
  virtual void scale(Ref x, int64_t n, float s);
  // x += y over n.
  virtual void add(Ref x, Ref y, int64_t n);
  // Per row of `width`: x[i] *= w[i].
  virtual void mul_cols(Ref x, Ref w, int64_t rows, int64_t width);
  // rope_neox (plain positions) with frequency j divided by div[j] (div: n_rot/2 values from the
  // host; Gemma 4's proportional RoPE on full layers: 1 rotates, 1e30 leaves the pair as it is).
  virtual void rope_neox_div(Ref x, int64_t rows, int64_t row_stride, int64_t heads, int64_t head_stride, int64_t n_rot, float theta,
                             std::span<const int32_t> pos, std::span<const float> div);
};

// The CPU device: host memory, the process's kernel set (nn/cpu_device.cpp).
std::unique_ptr<Device> make_cpu_device();

}  // namespace oxi::nn
