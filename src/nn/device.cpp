// Host implementations of the small device blocks (nn/device.h): each reads the range it touches
// through the device's read(), computes in f32 with the CPU kernels' formulas (nn/ops.h), and
// writes the result back. Every device runs them as soon as its memory works; a device with its
// own kernels overrides them so that nothing crosses the bus.
#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "core/error.h"
#include "nn/device.h"
#include "nn/ops.h"

namespace oxi::nn {
namespace {

// Floats spanned by `heads` vectors of `width` in `rows` rows of a Heads view.
int64_t extent(const Heads& x, int64_t rows, int64_t heads, int64_t width) {
  if (rows <= 0 || heads <= 0 || width <= 0) return 0;
  return (rows - 1) * x.row_stride + (heads - 1) * x.head_stride + width;
}

std::vector<float> fetch(Device& d, Ref r, int64_t n) {
  std::vector<float> v(static_cast<size_t>(n));
  if (n > 0) d.read(r, v.data(), n);
  return v;
}

template <class F>
void for_heads(const Heads& x, int64_t rows, int64_t heads, F&& fn) {
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t h = 0; h < heads; ++h) fn(r * x.row_stride + h * x.head_stride);
}

}  // namespace

void Device::rms_norm_heads(Heads x, int64_t rows, int64_t heads, int64_t width, Ref w, float eps) {
  const int64_t n = extent(x, rows, heads, width);
  if (n == 0) return;
  // Heads back to back are rows of width: the device's own row norm, no trip through the host.
  if (x.head_stride == width && x.row_stride == heads * width) return rms_norm(x.at, Ref{}, w, x.at, rows * heads, width, eps);
  auto v = fetch(*this, x.at, n);
  const auto wv = w ? fetch(*this, w, width) : std::vector<float>{};
  for_heads(x, rows, heads, [&](int64_t o) { ops::rms_norm(v.data() + o, w ? wv.data() : nullptr, v.data() + o, width, eps); });
  write(x.at, v.data(), n);
}

void Device::l2_norm_heads(Heads x, int64_t rows, int64_t heads, int64_t width, float eps, float scale) {
  const int64_t n = extent(x, rows, heads, width);
  if (n == 0) return;
  auto v = fetch(*this, x.at, n);
  for_heads(x, rows, heads, [&](int64_t o) {
    ops::l2_norm(v.data() + o, width, eps);
    for (int64_t e = 0; e < width; ++e) v[static_cast<size_t>(o + e)] *= scale;
  });
  write(x.at, v.data(), n);
}

void Device::mul_sigmoid_heads(Heads x, Heads gate, int64_t rows, int64_t heads, int64_t width) {
  const int64_t n = extent(x, rows, heads, width), ng = extent(gate, rows, heads, width);
  if (n == 0) return;
  auto v = fetch(*this, x.at, n);
  const auto g = fetch(*this, gate.at, ng);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t h = 0; h < heads; ++h) {
      float* xv = v.data() + r * x.row_stride + h * x.head_stride;
      const float* gv = g.data() + r * gate.row_stride + h * gate.head_stride;
      for (int64_t e = 0; e < width; ++e) xv[e] *= ops::sigmoid(gv[e]);
    }
  write(x.at, v.data(), n);
}

void Device::gdn_gates(Ref a, Ref b, Ref ssm_a, Ref dt_bias, int64_t rows, int64_t H, Ref gb) {
  if (rows <= 0) return;
  const auto av = fetch(*this, a, rows * H), bv = fetch(*this, b, rows * H);
  const auto sa = fetch(*this, ssm_a, H), dt = fetch(*this, dt_bias, H);
  std::vector<float> out(static_cast<size_t>(rows * 2 * H));
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t h = 0; h < H; ++h) {
      const size_t i = static_cast<size_t>(r * H + h);
      out[static_cast<size_t>(r * 2 * H + h)] = sa[static_cast<size_t>(h)] * ops::softplus(av[i] + dt[static_cast<size_t>(h)]);
      out[static_cast<size_t>(r * 2 * H + H + h)] = ops::sigmoid(bv[i]);
    }
  write(gb, out.data(), rows * 2 * H);
}

void Device::gather_rows(Ref src, std::span<const int32_t> ids, int64_t width, Ref dst) {
  for (size_t i = 0; i < ids.size(); ++i) {
    if (ids[i] < 0) throw_error(ErrorCode::kInvalidArgument, "device: gather_rows: negative row " + std::to_string(ids[i]));
    copy(src.at(ids[i] * width), dst.at(static_cast<int64_t>(i) * width), width);
  }
}

void Device::add_rows_scaled(Ref src, std::span<const int32_t> ids, std::span<const float> w, int64_t width, Ref dst) {
  if (ids.size() != w.size()) throw_error(ErrorCode::kInvalidArgument, "device: add_rows_scaled: ids and weights differ in count");
  if (ids.empty()) return;
  const int32_t hi = *std::max_element(ids.begin(), ids.end());
  if (*std::min_element(ids.begin(), ids.end()) < 0) throw_error(ErrorCode::kInvalidArgument, "device: add_rows_scaled: negative row");
  const auto s = fetch(*this, src, static_cast<int64_t>(ids.size()) * width);
  auto d = fetch(*this, dst, (hi + 1) * width);
  for (size_t i = 0; i < ids.size(); ++i) {
    float* y = d.data() + ids[i] * width;
    const float* x = s.data() + static_cast<int64_t>(i) * width;
    for (int64_t e = 0; e < width; ++e) y[e] += w[i] * x[e];
  }
  write(dst, d.data(), (hi + 1) * width);
}

void Device::scale(Ref x, int64_t n, float s) {
  auto v = fetch(*this, x, n);
  for (float& e : v) e *= s;
  if (n > 0) write(x, v.data(), n);
}

void Device::add(Ref x, Ref y, int64_t n) {
  auto v = fetch(*this, x, n);
  const auto w = fetch(*this, y, n);
  for (size_t i = 0; i < v.size(); ++i) v[i] += w[i];
  if (n > 0) write(x, v.data(), n);
}

void Device::mul_cols(Ref x, Ref w, int64_t rows, int64_t width) {
  auto v = fetch(*this, x, rows * width);
  const auto wv = fetch(*this, w, width);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t i = 0; i < width; ++i) v[static_cast<size_t>(r * width + i)] *= wv[static_cast<size_t>(i)];
  if (rows * width > 0) write(x, v.data(), rows * width);
}

void Device::rope_neox_div(Ref x, int64_t rows, int64_t row_stride, int64_t heads, int64_t head_stride, int64_t n_rot, float theta,
                           std::span<const int32_t> pos, std::span<const float> div) {
  if (static_cast<int64_t>(div.size()) < n_rot / 2) throw_error(ErrorCode::kInvalidArgument, "device: rope_neox_div: too few divisors");
  if (static_cast<int64_t>(pos.size()) < rows) throw_error(ErrorCode::kInvalidArgument, "device: rope_neox_div: fewer positions than rows");
  const int64_t n = extent(Heads{x, row_stride, head_stride}, rows, heads, n_rot);
  if (n == 0) return;
  auto v = fetch(*this, x, n);
  std::vector<float> cs(static_cast<size_t>(n_rot));
  for (int64_t r = 0; r < rows; ++r) {
    // cos/sin of pos · theta^(−2j/n_rot) / div[j]: the angle of slot j at position pos / div[j]
    std::vector<float> slot(static_cast<size_t>(n_rot / 2));
    for (int64_t j = 0; j < n_rot / 2; ++j) slot[static_cast<size_t>(j)] = static_cast<float>(pos[static_cast<size_t>(r)]) / div[static_cast<size_t>(j)];
    ops::rope_table(slot.data(), n_rot, theta, cs.data());
    for (int64_t h = 0; h < heads; ++h) ops::rope_neox(v.data() + r * row_stride + h * head_stride, n_rot, cs.data());
  }
  write(x, v.data(), n);
}

}  // namespace oxi::nn
