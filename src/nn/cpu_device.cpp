// The CPU device (nn/device.h): buffers are host memory, weights stay where the model's views
// point (the file mapping or the load arena), and every block is the kernel the models use — so
// this device is the reference the other devices are tested against.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "core/error.h"
#include "kernels/fused.h"
#include "kernels/matmul.h"
#include "kernels/thread_pool.h"
#include "nn/device.h"
#include "nn/ops.h"

namespace oxi::nn {
namespace {

class HostBuffer final : public Buffer {
 public:
  explicit HostBuffer(int64_t n) : Buffer(n), data_(new float[static_cast<size_t>(n)]()) {}
  float* data() { return data_.get(); }

 private:
  std::unique_ptr<float[]> data_;
};

class HostWeight final : public Weight {
 public:
  explicit HostWeight(const MatrixView& v) : view(v) {
    rows = v.rows;
    cols = v.cols;
    dtype = v.dtype;
  }
  MatrixView view;
};

// The floats of r, checked to lie inside its buffer.
float* ptr(Ref r, int64_t n, const char* what) {
  if (!r.buf) throw_error(ErrorCode::kInvalidArgument, std::string("cpu device: ") + what + ": no buffer");
  if (r.off < 0 || n < 0 || r.off + n > r.buf->floats())
    throw_error(ErrorCode::kInvalidArgument, std::string("cpu device: ") + what + ": [" + std::to_string(r.off) + ", +" +
                                                 std::to_string(n) + ") outside a buffer of " + std::to_string(r.buf->floats()));
  return static_cast<HostBuffer*>(r.buf)->data() + r.off;
}

class CpuDevice final : public Device {
 public:
  std::string name() const override { return "cpu"; }

  std::shared_ptr<Buffer> alloc(int64_t floats) override {
    if (floats < 0) throw_error(ErrorCode::kInvalidArgument, "cpu device: negative allocation");
    return std::make_shared<HostBuffer>(floats);
  }
  void write(Ref dst, const float* src, int64_t n) override { std::memcpy(ptr(dst, n, "write"), src, static_cast<size_t>(n) * 4); }
  void read(Ref src, float* dst, int64_t n) override { std::memcpy(dst, ptr(src, n, "read"), static_cast<size_t>(n) * 4); }
  void copy(Ref src, Ref dst, int64_t n) override {
    std::memmove(ptr(dst, n, "copy"), ptr(src, n, "copy"), static_cast<size_t>(n) * 4);
  }
  std::unique_ptr<Weight> upload(const MatrixView& w) override { return std::make_unique<HostWeight>(w); }

  void embed(const Weight& table, std::span<const int32_t> ids, Ref out) override {
    const auto& t = static_cast<const HostWeight&>(table);
    const int64_t n = static_cast<int64_t>(ids.size());
    float* o = ptr(out, n * t.cols, "embed");
    for (int64_t i = 0; i < n; ++i) {
      if (ids[static_cast<size_t>(i)] < 0 || ids[static_cast<size_t>(i)] >= t.rows)
        throw_error(ErrorCode::kInvalidArgument, "cpu device: embed: row " + std::to_string(ids[static_cast<size_t>(i)]) + " out of range");
    }
    parallel_for_chunked(n, 8, [&](int64_t i0, int64_t i1) {
      for (int64_t i = i0; i < i1; ++i) dequantize_row(t.view, ids[static_cast<size_t>(i)], o + i * t.cols);
    });
  }

  void matmul(std::span<const Weight* const> ws, std::span<const Ref> ys, Ref x, int64_t n) override {
    if (ws.size() != ys.size() || ws.empty()) throw_error(ErrorCode::kInvalidArgument, "cpu device: matmul: weights and outputs differ in count");
    std::vector<MatrixView> views;
    std::vector<float*> outs;
    const int64_t cols = ws[0]->cols;
    for (size_t j = 0; j < ws.size(); ++j) {
      const auto& w = static_cast<const HostWeight&>(*ws[j]);
      if (w.cols != cols) throw_error(ErrorCode::kInvalidArgument, "cpu device: matmul: weights of different widths share an input");
      views.push_back(w.view);
      outs.push_back(ptr(ys[j], n * w.rows, "matmul out"));
    }
    const float* xp = ptr(x, n * cols, "matmul in");
    matmul_batch(views.data(), outs.data(), static_cast<int>(views.size()), xp, n);
  }

  void rms_norm(Ref h, Ref add, Ref w, Ref y, int64_t rows, int64_t width, float eps) override {
    float* hp = ptr(h, rows * width, "rms_norm");
    const float* ap = add ? ptr(add, rows * width, "rms_norm add") : nullptr;
    const float* wp = w ? ptr(w, width, "rms_norm weight") : nullptr;
    float* yp = ptr(y, rows * width, "rms_norm out");
    parallel_for_chunked(rows, 8, [&](int64_t r0, int64_t r1) {
      for (int64_t r = r0; r < r1; ++r) {
        float* hr = hp + r * width;
        if (ap)
          for (int64_t i = 0; i < width; ++i) hr[i] += ap[r * width + i];
        ops::rms_norm(hr, wp, yp + r * width, width, eps);
      }
    });
  }

  void rope_neox(Ref x, int64_t rows, int64_t row_stride, int64_t heads, int64_t head_stride, int64_t n_rot, float theta,
                 std::span<const int32_t> pos, const int32_t* pos3, std::array<int32_t, 3> sections) override {
    if (static_cast<int64_t>(pos.size()) < rows) throw_error(ErrorCode::kInvalidArgument, "cpu device: rope: fewer positions than rows");
    float* xp = ptr(x, (rows - 1) * row_stride + (heads - 1) * head_stride + n_rot, "rope");
    parallel_for_chunked(rows, 8, [&](int64_t r0, int64_t r1) {
      std::vector<float> slot(static_cast<size_t>(n_rot / 2)), cs(static_cast<size_t>(n_rot));
      for (int64_t r = r0; r < r1; ++r) {
        for (int64_t j = 0; j < n_rot / 2; ++j) {
          int32_t p = pos[static_cast<size_t>(r)];
          if (pos3) {
            const int32_t* p3 = pos3 + 3 * r;
            p = (j % 3 == 1 && j < 3 * sections[1]) ? p3[1] : (j % 3 == 2 && j < 3 * sections[2]) ? p3[2] : p3[0];
          }
          slot[static_cast<size_t>(j)] = static_cast<float>(p);
        }
        ops::rope_table(slot.data(), n_rot, theta, cs.data());
        for (int64_t hh = 0; hh < heads; ++hh) ops::rope_neox(xp + r * row_stride + hh * head_stride, n_rot, cs.data());
      }
    });
  }

  void silu_mul(Ref a, Ref b, Ref y, int64_t n) override {
    const float* ap = ptr(a, n, "silu_mul");
    const float* bp = ptr(b, n, "silu_mul");
    float* yp = ptr(y, n, "silu_mul out");
    parallel_for_chunked(n, 4096, [&](int64_t i0, int64_t i1) { oxi::silu_mul(ap + i0, bp + i0, yp + i0, i1 - i0); });
  }

  void gelu_mul(Ref a, Ref b, Ref y, int64_t n) override {
    const float* ap = ptr(a, n, "gelu_mul");
    const float* bp = ptr(b, n, "gelu_mul");
    float* yp = ptr(y, n, "gelu_mul out");
    parallel_for_chunked(n, 4096, [&](int64_t i0, int64_t i1) {
      for (int64_t i = i0; i < i1; ++i) yp[i] = ops::gelu_tanh(ap[i]) * bp[i];
    });
  }

  void softcap(Ref x, int64_t n, float cap) override {
    float* xp = ptr(x, n, "softcap");
    parallel_for_chunked(n, 16384, [&](int64_t i0, int64_t i1) { oxi::softcap(xp + i0, xp + i0, i1 - i0, cap); });
  }

  void conv_silu(Ref X, Ref wT, int64_t C, int64_t K, int64_t T, Ref y) override {
    const float* xp = ptr(X, (K - 1 + T) * C, "conv_silu");
    const float* wp = ptr(wT, K * C, "conv_silu taps");
    float* yp = ptr(y, T * C, "conv_silu out");
    parallel_for_chunked(T, 8, [&](int64_t t0, int64_t t1) {
      for (int64_t t = t0; t < t1; ++t) oxi::conv_silu(xp + t * C, wp, C, K, yp + t * C);
    });
  }

  void gdn(const GdnArgs& a) override {
    const int64_t KD = a.Hk * a.dk;
    const float* qkv = ptr(a.qkv, (a.T - 1) * a.qk_stride + 2 * KD + a.Hv * a.dv, "gdn qkv");
    const float* gb = ptr(a.gb, (a.T - 1) * a.gb_stride + 2 * a.Hv, "gdn g/beta");
    float* S = ptr(a.state, a.Hv * a.dk * a.dv, "gdn state");
    float* out = ptr(a.out, (a.T - 1) * a.out_stride + a.Hv * a.dv, "gdn out");
    parallel_for(a.Hv, [&](int64_t h) {
      const int64_t kh = a.tiled ? h % a.Hk : h / (a.Hv / a.Hk);
      GdnHeadIO io;
      io.q = qkv + kh * a.dk;
      io.k = qkv + KD + kh * a.dk;
      io.v = qkv + 2 * KD + h * a.dv;
      io.qk_stride = a.qk_stride;
      io.v_stride = a.qk_stride;
      io.g = gb + h;
      io.beta = gb + a.Hv + h;
      io.gb_stride = a.gb_stride;
      io.o = out + h * a.dv;
      io.o_stride = a.out_stride;
      float* Sh = S + h * a.dk * a.dv;
      if (a.chunked) gdn_chunked(a.T, a.dk, a.dv, io, Sh, 64);
      else gdn_step(a.T, a.dk, a.dv, io, Sh);
    });
  }

  void attention(const AttnArgs& a) override {
    const int64_t KW = a.Hkv * a.hd, n_kv = a.pos0 + a.T;
    const float* q = ptr(a.q, (a.T - 1) * a.q_stride + (a.H - 1) * a.q_head_stride + a.hd, "attention q");
    const float* K = ptr(a.k, n_kv * KW, "attention k");
    const float* V = ptr(a.v, n_kv * KW, "attention v");
    float* out = ptr(a.out, (a.T - 1) * a.out_stride + a.H * a.hd, "attention out");
    const int64_t grp = a.H / a.Hkv;
    parallel_for(a.T * a.H, [&](int64_t job) {
      const int64_t t = job / a.H, h = job % a.H, p = a.pos0 + t;
      const int64_t lo = a.window > 0 ? std::max<int64_t>(0, p - a.window + 1) : 0;
      thread_local std::vector<float> scores;
      scores.resize(static_cast<size_t>(p - lo + 1));
      ops::attend_one(q + t * a.q_stride + h * a.q_head_stride, K + lo * KW, V + lo * KW, KW, (h / grp) * a.hd, p - lo + 1, a.hd,
                      a.scale, scores.data(), out + t * a.out_stride + h * a.hd, a.f16_like);
    });
  }

  void moe_route(Ref logits, int64_t rows, int64_t E, int64_t k, int32_t* ids, float* weights) override {
    const float* lp = ptr(logits, rows * E, "moe_route");
    for (int64_t r = 0; r < rows; ++r) ops::moe_route_row(lp + r * E, E, k, ids + r * k, weights + r * k);
  }
};

}  // namespace

std::unique_ptr<Device> make_cpu_device() { return std::make_unique<CpuDevice>(); }

}  // namespace oxi::nn
