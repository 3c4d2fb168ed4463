#include "backend/test_device.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/half.h"
#include "kernels/matmul.h"

namespace oxi::backend {
namespace {

using nn::Ref;

// Device memory: doubles, reached only through this device's calls.
class TestBuffer final : public nn::Buffer {
 public:
  explicit TestBuffer(int64_t n) : Buffer(n), v(static_cast<size_t>(n), 0.0) {}
  std::vector<double> v;
};

class TestWeight final : public nn::Weight {
 public:
  std::vector<double> w;  // [rows, cols], dequantised once at upload (the device's own copy)
};

double* at(Ref r, int64_t n, const char* what) {
  auto* b = dynamic_cast<TestBuffer*>(r.buf);
  if (!b) throw_error(ErrorCode::kInvalidArgument, std::string("test device: ") + what + ": not this device's buffer");
  if (r.off < 0 || n < 0 || r.off + n > b->floats())
    throw_error(ErrorCode::kInvalidArgument, std::string("test device: ") + what + ": out of bounds");
  return b->v.data() + r.off;
}

const TestWeight& weight(const nn::Weight& w) {
  const auto* t = dynamic_cast<const TestWeight*>(&w);
  if (!t) throw_error(ErrorCode::kInvalidArgument, "test device: a weight of another device");
  return *t;
}

double rms_scale(const double* x, int64_t n, double eps) {
  double s = 0;
  for (int64_t i = 0; i < n; ++i) s += x[i] * x[i];
  return 1.0 / std::sqrt(s / static_cast<double>(n) + eps);
}

// x rounded to the nearest f16 (core/half.h), when `on`.
double f16ish(double x, bool on) { return on ? f16_to_f32(f32_to_f16(static_cast<float>(x))) : x; }

class TestDevice final : public nn::Device {
 public:
  std::string name() const override { return "test"; }
  std::shared_ptr<nn::Buffer> alloc(int64_t floats) override { return std::make_shared<TestBuffer>(floats); }
  void write(Ref dst, const float* src, int64_t n) override {
    double* d = at(dst, n, "write");
    for (int64_t i = 0; i < n; ++i) d[i] = src[i];
  }
  void read(Ref src, float* dst, int64_t n) override {
    const double* s = at(src, n, "read");
    for (int64_t i = 0; i < n; ++i) dst[i] = static_cast<float>(s[i]);
  }
  void copy(Ref src, Ref dst, int64_t n) override {
    const double* s = at(src, n, "copy");
    std::vector<double> tmp(s, s + n);
    std::copy(tmp.begin(), tmp.end(), at(dst, n, "copy"));
  }
  std::unique_ptr<nn::Weight> upload(const MatrixView& v) override {
    auto w = std::make_unique<TestWeight>();
    w->rows = v.rows;
    w->cols = v.cols;
    w->dtype = v.dtype;
    w->w.resize(static_cast<size_t>(v.rows * v.cols));
    std::vector<float> row(static_cast<size_t>(v.cols));
    for (int64_t r = 0; r < v.rows; ++r) {
      dequantize_row(v, r, row.data());  // the reference dequantisation (kernels/ref)
      std::copy(row.begin(), row.end(), w->w.begin() + r * v.cols);
    }
    return w;
  }

  void embed(const nn::Weight& table, std::span<const int32_t> ids, Ref out) override {
    const TestWeight& t = weight(table);
    double* o = at(out, static_cast<int64_t>(ids.size()) * t.cols, "embed");
    for (size_t i = 0; i < ids.size(); ++i) {
      if (ids[i] < 0 || ids[i] >= t.rows) throw_error(ErrorCode::kInvalidArgument, "test device: embed: row out of range");
      std::copy_n(t.w.begin() + ids[i] * t.cols, t.cols, o + static_cast<int64_t>(i) * t.cols);
    }
  }

  void matmul(std::span<const nn::Weight* const> ws, std::span<const Ref> ys, Ref x, int64_t n) override {
    for (size_t j = 0; j < ws.size(); ++j) {
      const TestWeight& w = weight(*ws[j]);
      const double* xp = at(x, n * w.cols, "matmul in");
      double* yp = at(ys[j], n * w.rows, "matmul out");
      for (int64_t t = 0; t < n; ++t)
        for (int64_t r = 0; r < w.rows; ++r) {
          double s = 0;
          for (int64_t c = 0; c < w.cols; ++c) s += w.w[static_cast<size_t>(r * w.cols + c)] * xp[t * w.cols + c];
          yp[t * w.rows + r] = s;
        }
    }
  }

  void rms_norm(Ref h, Ref add, Ref w, Ref y, int64_t rows, int64_t width, float eps) override {
    double* hp = at(h, rows * width, "rms_norm");
    const double* ap = add ? at(add, rows * width, "rms_norm add") : nullptr;
    const double* wp = w ? at(w, width, "rms_norm weight") : nullptr;
    double* yp = at(y, rows * width, "rms_norm out");
    for (int64_t r = 0; r < rows; ++r) {
      double* hr = hp + r * width;
      if (ap)
        for (int64_t i = 0; i < width; ++i) hr[i] += ap[r * width + i];
      const double s = rms_scale(hr, width, eps);
      for (int64_t i = 0; i < width; ++i) yp[r * width + i] = hr[i] * s * (wp ? wp[i] : 1.0);
    }
  }

  void rope_neox(Ref x, int64_t rows, int64_t row_stride, int64_t heads, int64_t head_stride, int64_t n_rot, float theta,
                 std::span<const int32_t> pos, const int32_t* pos3, std::array<int32_t, 3> sec) override {
    double* xp = at(x, (rows - 1) * row_stride + (heads - 1) * head_stride + n_rot, "rope");
    const int64_t half = n_rot / 2;
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t j = 0; j < half; ++j) {
        double p = pos[static_cast<size_t>(r)];
        if (pos3) p = (j % 3 == 1 && j < 3 * sec[1]) ? pos3[3 * r + 1] : (j % 3 == 2 && j < 3 * sec[2]) ? pos3[3 * r + 2] : pos3[3 * r];
        const double phi = p * std::pow(static_cast<double>(theta), -2.0 * static_cast<double>(j) / static_cast<double>(n_rot));
        for (int64_t hh = 0; hh < heads; ++hh) {
          double* v = xp + r * row_stride + hh * head_stride;
          const double a = v[j], b = v[j + half];
          v[j] = a * std::cos(phi) - b * std::sin(phi);
          v[j + half] = b * std::cos(phi) + a * std::sin(phi);
        }
      }
  }

  void silu_mul(Ref a, Ref b, Ref y, int64_t n) override {
    const double* ap = at(a, n, "silu_mul");
    const double* bp = at(b, n, "silu_mul");
    double* yp = at(y, n, "silu_mul out");
    for (int64_t i = 0; i < n; ++i) yp[i] = ap[i] / (1.0 + std::exp(-ap[i])) * bp[i];
  }

  void gelu_mul(Ref a, Ref b, Ref y, int64_t n) override {
    const double* ap = at(a, n, "gelu_mul");
    const double* bp = at(b, n, "gelu_mul");
    double* yp = at(y, n, "gelu_mul out");
    const double k = std::sqrt(2.0 / 3.14159265358979323846);
    for (int64_t i = 0; i < n; ++i) yp[i] = 0.5 * ap[i] * (1.0 + std::tanh(k * (ap[i] + 0.044715 * ap[i] * ap[i] * ap[i]))) * bp[i];
  }

  void softcap(Ref x, int64_t n, float cap) override {
    double* xp = at(x, n, "softcap");
    for (int64_t i = 0; i < n; ++i) xp[i] = cap * std::tanh(xp[i] / cap);
  }

  void conv_silu(Ref X, Ref wT, int64_t C, int64_t K, int64_t T, Ref y) override {
    const double* xp = at(X, (K - 1 + T) * C, "conv_silu");
    const double* wp = at(wT, K * C, "conv_silu taps");
    double* yp = at(y, T * C, "conv_silu out");
    for (int64_t t = 0; t < T; ++t)
      for (int64_t c = 0; c < C; ++c) {
        double s = 0;
        for (int64_t j = 0; j < K; ++j) s += wp[j * C + c] * xp[(t + j) * C + c];
        yp[t * C + c] = s / (1.0 + std::exp(-s));
      }
  }

  // The delta rule token by token (spec A.3.1), whatever a.chunked says.
  void gdn(const nn::GdnArgs& a) override {
    const int64_t KD = a.Hk * a.dk;
    const double* qkv = at(a.qkv, (a.T - 1) * a.qk_stride + 2 * KD + a.Hv * a.dv, "gdn qkv");
    const double* gb = at(a.gb, (a.T - 1) * a.gb_stride + 2 * a.Hv, "gdn g/beta");
    double* S = at(a.state, a.Hv * a.dk * a.dv, "gdn state");
    double* out = at(a.out, (a.T - 1) * a.out_stride + a.Hv * a.dv, "gdn out");
    std::vector<double> kv(static_cast<size_t>(a.dv));
    for (int64_t h = 0; h < a.Hv; ++h) {
      const int64_t kh = a.tiled ? h % a.Hk : h / (a.Hv / a.Hk);
      double* Sh = S + h * a.dk * a.dv;
      for (int64_t t = 0; t < a.T; ++t) {
        const double* q = qkv + t * a.qk_stride + kh * a.dk;
        const double* k = qkv + t * a.qk_stride + KD + kh * a.dk;
        const double* v = qkv + t * a.qk_stride + 2 * KD + h * a.dv;
        const double alpha = std::exp(gb[t * a.gb_stride + h]), beta = gb[t * a.gb_stride + a.Hv + h];
        for (int64_t i = 0; i < a.dk * a.dv; ++i) Sh[i] *= alpha;
        for (int64_t c = 0; c < a.dv; ++c) {
          double s = 0;
          for (int64_t i = 0; i < a.dk; ++i) s += Sh[i * a.dv + c] * k[i];
          kv[static_cast<size_t>(c)] = beta * (v[c] - s);
        }
        for (int64_t i = 0; i < a.dk; ++i)
          for (int64_t c = 0; c < a.dv; ++c) Sh[i * a.dv + c] += k[i] * kv[static_cast<size_t>(c)];
        double* o = out + t * a.out_stride + h * a.dv;
        for (int64_t c = 0; c < a.dv; ++c) {
          double s = 0;
          for (int64_t i = 0; i < a.dk; ++i) s += Sh[i * a.dv + c] * q[i];
          o[c] = s;
        }
      }
    }
  }

  void attention(const nn::AttnArgs& a) override {
    const int64_t KW = a.Hkv * a.hd, n_kv = a.pos0 + a.T;
    const double* q = at(a.q, (a.T - 1) * a.q_stride + (a.H - 1) * a.q_head_stride + a.hd, "attention q");
    const double* K = at(a.k, n_kv * KW, "attention k");
    const double* V = at(a.v, n_kv * KW, "attention v");
    double* out = at(a.out, (a.T - 1) * a.out_stride + a.H * a.hd, "attention out");
    const int64_t grp = a.H / a.Hkv;
    for (int64_t t = 0; t < a.T; ++t)
      for (int64_t h = 0; h < a.H; ++h) {
        const int64_t p = a.pos0 + t, lo = a.window > 0 ? std::max<int64_t>(0, p - a.window + 1) : 0, off = (h / grp) * a.hd;
        const double* qh = q + t * a.q_stride + h * a.q_head_stride;
        std::vector<double> s(static_cast<size_t>(p - lo + 1));
        double mx = -INFINITY;
        for (int64_t j = lo; j <= p; ++j) {
          double d = 0;
          for (int64_t e = 0; e < a.hd; ++e) d += f16ish(qh[e], a.f16_like) * K[j * KW + off + e];
          s[static_cast<size_t>(j - lo)] = d * a.scale;
          mx = std::max(mx, d * a.scale);
        }
        double sum = 0;
        for (double& x : s) sum += (x = std::exp(x - mx));
        double* o = out + t * a.out_stride + h * a.hd;
        for (int64_t e = 0; e < a.hd; ++e) o[e] = 0;
        for (int64_t j = lo; j <= p; ++j) {
          const double wgt = f16ish(s[static_cast<size_t>(j - lo)] / sum, a.f16_like);
          for (int64_t e = 0; e < a.hd; ++e) o[e] += wgt * V[j * KW + off + e];
        }
      }
  }

  void moe_route(Ref logits, int64_t rows, int64_t E, int64_t k, int32_t* ids, float* weights) override {
    const double* lp = at(logits, rows * E, "moe_route");
    for (int64_t r = 0; r < rows; ++r) {
      const double* l = lp + r * E;
      const double mx = *std::max_element(l, l + E);
      std::vector<double> p(static_cast<size_t>(E));
      double sum = 0;
      for (int64_t e = 0; e < E; ++e) sum += (p[static_cast<size_t>(e)] = std::exp(l[e] - mx));
      std::vector<int32_t> idx(static_cast<size_t>(E));
      std::iota(idx.begin(), idx.end(), 0);
      std::stable_sort(idx.begin(), idx.end(), [&](int32_t x, int32_t y) { return p[static_cast<size_t>(x)] > p[static_cast<size_t>(y)]; });
      double top = 0;
      for (int64_t j = 0; j < k; ++j) top += p[static_cast<size_t>(idx[static_cast<size_t>(j)])] / sum;
      for (int64_t j = 0; j < k; ++j) {
        ids[r * k + j] = idx[static_cast<size_t>(j)];
        weights[r * k + j] = static_cast<float>(p[static_cast<size_t>(idx[static_cast<size_t>(j)])] / sum / top);
      }
    }
  }

  // ---- the small blocks, in double (the base class's host versions are the CPU's f32 ones)
  void rms_norm_heads(nn::Heads x, int64_t rows, int64_t heads, int64_t width, Ref w, float eps) override {
    double* xp = at(x.at, (rows - 1) * x.row_stride + (heads - 1) * x.head_stride + width, "rms_norm_heads");
    const double* wp = w ? at(w, width, "rms_norm_heads weight") : nullptr;
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t h = 0; h < heads; ++h) {
        double* v = xp + r * x.row_stride + h * x.head_stride;
        const double s = rms_scale(v, width, eps);
        for (int64_t e = 0; e < width; ++e) v[e] *= s * (wp ? wp[e] : 1.0);
      }
  }
  void l2_norm_heads(nn::Heads x, int64_t rows, int64_t heads, int64_t width, float eps, float scale) override {
    double* xp = at(x.at, (rows - 1) * x.row_stride + (heads - 1) * x.head_stride + width, "l2_norm_heads");
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t h = 0; h < heads; ++h) {
        double* v = xp + r * x.row_stride + h * x.head_stride;
        double ss = 0;
        for (int64_t e = 0; e < width; ++e) ss += v[e] * v[e];
        const double f = static_cast<double>(scale) / std::max(std::sqrt(ss), static_cast<double>(eps));
        for (int64_t e = 0; e < width; ++e) v[e] *= f;
      }
  }
  void mul_sigmoid_heads(nn::Heads x, nn::Heads gate, int64_t rows, int64_t heads, int64_t width) override {
    double* xp = at(x.at, (rows - 1) * x.row_stride + (heads - 1) * x.head_stride + width, "mul_sigmoid_heads");
    const double* gp = at(gate.at, (rows - 1) * gate.row_stride + (heads - 1) * gate.head_stride + width, "mul_sigmoid_heads gate");
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t h = 0; h < heads; ++h)
        for (int64_t e = 0; e < width; ++e)
          xp[r * x.row_stride + h * x.head_stride + e] *= 1.0 / (1.0 + std::exp(-gp[r * gate.row_stride + h * gate.head_stride + e]));
  }
  void gdn_gates(Ref a, Ref b, Ref ssm_a, Ref dt_bias, int64_t rows, int64_t H, Ref gb) override {
    const double* ap = at(a, rows * H, "gdn_gates a");
    const double* bp = at(b, rows * H, "gdn_gates b");
    const double* sa = at(ssm_a, H, "gdn_gates ssm_a");
    const double* dt = at(dt_bias, H, "gdn_gates dt_bias");
    double* o = at(gb, rows * 2 * H, "gdn_gates out");
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t h = 0; h < H; ++h) {
        const double z = ap[r * H + h] + dt[h];
        o[r * 2 * H + h] = sa[h] * (z > 20 ? z : std::log1p(std::exp(z)));
        o[r * 2 * H + H + h] = 1.0 / (1.0 + std::exp(-bp[r * H + h]));
      }
  }
  void gather_rows(Ref src, std::span<const int32_t> ids, int64_t width, Ref dst) override {
    double* d = at(dst, static_cast<int64_t>(ids.size()) * width, "gather_rows out");
    for (size_t i = 0; i < ids.size(); ++i) {
      const double* s = at(src.at(static_cast<int64_t>(ids[i]) * width), width, "gather_rows");
      std::copy_n(s, width, d + static_cast<int64_t>(i) * width);
    }
  }
  void add_rows_scaled(Ref src, std::span<const int32_t> ids, std::span<const float> w, int64_t width, Ref dst) override {
    if (ids.size() != w.size()) throw_error(ErrorCode::kInvalidArgument, "test device: add_rows_scaled: counts differ");
    const double* s = at(src, static_cast<int64_t>(ids.size()) * width, "add_rows_scaled");
    for (size_t i = 0; i < ids.size(); ++i) {
      double* d = at(dst.at(static_cast<int64_t>(ids[i]) * width), width, "add_rows_scaled out");
      for (int64_t e = 0; e < width; ++e) d[e] += w[i] * s[static_cast<int64_t>(i) * width + e];
    }
  }
  void scale(Ref x, int64_t n, float s) override {
    double* xp = at(x, n, "scale");
    for (int64_t i = 0; i < n; ++i) xp[i] *= s;
  }
  void add(Ref x, Ref y, int64_t n) override {
    double* xp = at(x, n, "add");
    const double* yp = at(y, n, "add y");
    for (int64_t i = 0; i < n; ++i) xp[i] += yp[i];
  }
  void mul_cols(Ref x, Ref w, int64_t rows, int64_t width) override {
    double* xp = at(x, rows * width, "mul_cols");
    const double* wp = at(w, width, "mul_cols w");
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t i = 0; i < width; ++i) xp[r * width + i] *= wp[i];
  }
  void rope_neox_div(Ref x, int64_t rows, int64_t row_stride, int64_t heads, int64_t head_stride, int64_t n_rot, float theta,
                     std::span<const int32_t> pos, std::span<const float> div) override {
    double* xp = at(x, (rows - 1) * row_stride + (heads - 1) * head_stride + n_rot, "rope_neox_div");
    const int64_t half = n_rot / 2;
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t j = 0; j < half; ++j) {
        const double phi = pos[static_cast<size_t>(r)] *
                           std::pow(static_cast<double>(theta), -2.0 * static_cast<double>(j) / static_cast<double>(n_rot)) /
                           div[static_cast<size_t>(j)];
        for (int64_t hh = 0; hh < heads; ++hh) {
          double* v = xp + r * row_stride + hh * head_stride;
          const double a = v[j], b = v[j + half];
          v[j] = a * std::cos(phi) - b * std::sin(phi);
          v[j + half] = b * std::cos(phi) + a * std::sin(phi);
        }
      }
  }
};

}  // namespace

std::unique_ptr<nn::Device> make_test_device() { return std::make_unique<TestDevice>(); }

}  // namespace oxi::backend
