#include "vision/vit_ops.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "core/error.h"
#include "kernels/fused.h"
#include "kernels/matmul.h"
#include "kernels/thread_pool.h"
#include "models/common/weights.h"
#include "nn/ops.h"

namespace oxi::vision {

namespace {

MatrixView f32_view(const float* p, int64_t rows, int64_t cols) {
  return MatrixView{DType::F32, rows, cols, reinterpret_cast<const uint8_t*>(p), static_cast<uint64_t>(cols) * 4};
}

}  // namespace

void vit_attention(const float* q, int64_t q_stride, const float* k, int64_t k_stride, const float* v, int64_t v_stride,
                   int64_t N, int64_t H, int64_t hd, float scale, float* out) {
  const int64_t QC = 256;  // queries per chunk
  std::vector<float> Kh(static_cast<size_t>(N * hd)), VTh(static_cast<size_t>(hd * N)), Qc(static_cast<size_t>(QC * hd));
  std::vector<float> Sc(static_cast<size_t>(QC * N)), Oc(static_cast<size_t>(QC * hd));
  for (int64_t hh = 0; hh < H; ++hh) {
    parallel_for_chunked(N, 256, [&](int64_t r0, int64_t r1) {
      for (int64_t r = r0; r < r1; ++r) {
        std::memcpy(Kh.data() + r * hd, k + r * k_stride + hh * hd, static_cast<size_t>(hd) * 4);
        for (int64_t j = 0; j < hd; ++j) VTh[static_cast<size_t>(j * N + r)] = v[r * v_stride + hh * hd + j];
      }
    });
    const MatrixView Kv = f32_view(Kh.data(), N, hd), Vv = f32_view(VTh.data(), hd, N);
    for (int64_t q0 = 0; q0 < N; q0 += QC) {
      const int64_t nq = std::min(QC, N - q0);
      for (int64_t i = 0; i < nq; ++i)
        for (int64_t j = 0; j < hd; ++j) Qc[static_cast<size_t>(i * hd + j)] = q[(q0 + i) * q_stride + hh * hd + j] * scale;
      matmul(Kv, Qc.data(), nq, Sc.data());
      parallel_for(nq, [&](int64_t i) { softmax_row(Sc.data() + i * N, N); });
      matmul(Vv, Sc.data(), nq, Oc.data());
      for (int64_t i = 0; i < nq; ++i)
        std::memcpy(out + (q0 + i) * H * hd + hh * hd, Oc.data() + i * hd, static_cast<size_t>(hd) * 4);
    }
  }
}

void gelu_tanh_rows(float* x, const float* bias, int64_t n, int64_t k) {
  parallel_for_chunked(n, 16, [&](int64_t r0, int64_t r1) {
    std::vector<float> u(static_cast<size_t>(k));
    for (int64_t r = r0; r < r1; ++r) {
      float* row = x + r * k;
      for (int64_t j = 0; j < k; ++j) {
        const float y = row[j] + (bias ? bias[j] : 0.0f);
        row[j] = y;
        u[static_cast<size_t>(j)] = 0.79788456080286535587989211986876f * y * (1.0f + 0.044715f * y * y);
      }
      softcap(u.data(), u.data(), k, 1.0f);
      for (int64_t j = 0; j < k; ++j) row[j] = 0.5f * row[j] * (1.0f + u[static_cast<size_t>(j)]);
    }
  });
}

GgufFile read_mmproj(const std::string& path, const std::string& projector, const std::string& name,
                     const std::string& modality) {
  GgufFile f = read_gguf(path);
  const GgufMetadata& md = f.metadata;
  if (md.get_string("general.architecture", "") != "clip")
    throw_error(ErrorCode::kInvalidArgument, path + ": not an mmproj file (general.architecture is not 'clip')");
  // A file with a vision and an audio tower names each one's type apart.
  std::string proj = md.get_string("clip." + modality + ".projector_type", "");
  if (proj.empty()) proj = md.get_string("clip.projector_type", "");
  if (proj != projector)
    throw_error(ErrorCode::kUnsupported, path + ": projector type '" + proj + "' is not " + name + " (" + projector + ")");
  return f;
}

void clip_linear(const ClipLinear& l, const float* x, int64_t n, int64_t k, float* y, std::vector<float>& scratch) {
  const float* in = x;
  if (l.in_lo > -FLT_MAX || l.in_hi < FLT_MAX) {
    scratch.resize(static_cast<size_t>(n * k));
    parallel_for_chunked(n, 64, [&](int64_t r0, int64_t r1) {
      for (int64_t i = r0 * k; i < r1 * k; ++i) scratch[static_cast<size_t>(i)] = std::clamp(x[i], l.in_lo, l.in_hi);
    });
    in = scratch.data();
  }
  matmul(l.w, in, n, y);
  if (l.out_lo > -FLT_MAX || l.out_hi < FLT_MAX) {
    const int64_t m = l.w.rows;
    parallel_for_chunked(n, 64, [&](int64_t r0, int64_t r1) {
      for (int64_t i = r0 * m; i < r1 * m; ++i) y[i] = std::clamp(y[i], l.out_lo, l.out_hi);
    });
  }
}

float scalar_or(const TensorIndex& idx, const std::string& name, float def) {
  const TensorInfo* t = idx.find(name);
  if (!t) return def;
  if (t->n_elements() != 1) throw_error(ErrorCode::kFormat, "tower: " + name + " is not a scalar");
  return wt::to_f32(*t)[0];
}

void rms_rows(float* x, const float* w, int64_t n, int64_t k, float eps) {
  parallel_for_chunked(n, 64, [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) ops::rms_norm(x + r * k, w, x + r * k, k, eps);
  });
}

}  // namespace oxi::vision
