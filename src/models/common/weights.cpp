#include "models/common/weights.h"

#include <cstring>

#include "core/error.h"
#include "kernels/thread_pool.h"

namespace oxi::wt {

std::string shape_str(const std::vector<int64_t>& s) {
  std::string r = "[";
  for (size_t i = 0; i < s.size(); ++i) {
    if (i) r += ", ";
    r += s[i] < 0 ? std::string("*") : std::to_string(s[i]);
  }
  return r + "]";
}

const TensorInfo& require(const TensorIndex& idx, const std::string& name, const std::vector<int64_t>& shape) {
  const TensorInfo* t = idx.find(name);
  if (!t) throw_error(ErrorCode::kFormat, "missing tensor " + name);
  bool ok = t->shape.size() == shape.size();
  for (size_t i = 0; ok && i < shape.size(); ++i) ok = shape[i] < 0 || shape[i] == t->shape[i];
  if (!ok) {
    throw_error(ErrorCode::kFormat,
                "tensor " + name + " has shape " + t->shape_string() + ", expected " + shape_str(shape));
  }
  return *t;
}

MatrixView matrix(const TensorInfo& t, int64_t rows, int64_t cols) {
  if (t.shape.empty() || t.shape.back() != cols || t.n_elements() != rows * cols) {
    throw_error(ErrorCode::kFormat, "tensor " + t.name + " has shape " + t.shape_string() + ", expected " +
                                        std::to_string(rows) + " rows of " + std::to_string(cols));
  }
  if (!matmul_supports(t.dtype)) {
    throw_error(ErrorCode::kUnsupported, "tensor " + t.name + ": unsupported tensor type " + dtype_name(t.dtype));
  }
  auto rb = dtype_row_bytes(t.dtype, static_cast<uint64_t>(cols));
  if (!rb || *rb * static_cast<uint64_t>(rows) != t.nbytes) {
    throw_error(ErrorCode::kFormat, "tensor " + t.name + ": row size does not fit type " + dtype_name(t.dtype));
  }
  MatrixView m;
  m.dtype = t.dtype;
  m.rows = rows;
  m.cols = cols;
  m.data = t.data();
  m.row_bytes = *rb;
  return m;
}

MatrixView sub_rows(const MatrixView& m, int64_t row0, int64_t n) {
  MatrixView r = m;
  r.rows = n;
  r.data = m.data + static_cast<uint64_t>(row0) * m.row_bytes;
  return r;
}

std::vector<float> to_f32(const TensorInfo& t) {
  const int64_t n = t.n_elements();
  std::vector<float> out(static_cast<size_t>(n));
  if (n == 0) return out;
  if (t.dtype == DType::F32) {
    std::memcpy(out.data(), t.data(), sizeof(float) * static_cast<size_t>(n));
    return out;
  }
  if (t.shape.empty()) {  // a 0-d scalar (HF Gemma 4's clamp bounds): one value
    const MatrixView one{t.dtype, 1, 1, t.data(), dtype_row_bytes(t.dtype, 1).value_or(0)};
    dequantize_row(one, 0, out.data());
    return out;
  }
  const int64_t cols = t.shape.back();
  MatrixView m = matrix(t, n / cols, cols);
  for (int64_t r = 0; r < m.rows; ++r) dequantize_row(m, r, out.data() + r * cols);
  return out;
}

float* Arena::alloc(size_t n) {
  blocks_.push_back(std::make_unique<float[]>(n));
  bytes_ += n * sizeof(float);
  return blocks_.back().get();
}

uint8_t* Arena::alloc_bytes(size_t n) {
  byte_blocks_.push_back(std::unique_ptr<uint8_t[]>(new uint8_t[n]));
  bytes_ += n;
  return byte_blocks_.back().get();
}

MatrixView Arena::own_matrix(std::vector<float> values, int64_t rows, int64_t cols) {
  float* p = alloc(values.size());
  std::memcpy(p, values.data(), values.size() * sizeof(float));
  MatrixView m;
  m.dtype = DType::F32;
  m.rows = rows;
  m.cols = cols;
  m.data = reinterpret_cast<const uint8_t*>(p);
  m.row_bytes = static_cast<uint64_t>(cols) * sizeof(float);
  return m;
}

MatrixView quantize_tensor(const TensorInfo& t, int64_t rows, int64_t cols, DType to, Arena& arena,
                           const std::vector<int64_t>& row_perm, const std::vector<int64_t>& col_perm) {
  const MatrixView src = matrix(t, rows, cols);
  if (src.dtype != DType::F32 && src.dtype != DType::F16 && src.dtype != DType::BF16)
    throw_error(ErrorCode::kInvalidArgument, "tensor " + t.name + " is " + dtype_name(src.dtype) + ", not a float type: cannot quantise it");
  if (!row_perm.empty() && static_cast<int64_t>(row_perm.size()) != rows)
    throw_error(ErrorCode::kInternal, "quantize_tensor: row order of " + t.name + " has the wrong size");
  if (!col_perm.empty() && static_cast<int64_t>(col_perm.size()) != cols)
    throw_error(ErrorCode::kInternal, "quantize_tensor: column order of " + t.name + " has the wrong size");
  const auto rb = dtype_row_bytes(to, static_cast<uint64_t>(cols));
  if (!rb || !quantize_supports(to))
    throw_error(ErrorCode::kUnsupported, "tensor " + t.name + ": cannot quantise rows of " + std::to_string(cols) + " to " + dtype_name(to));
  uint8_t* dst = arena.alloc_bytes(static_cast<size_t>(*rb * static_cast<uint64_t>(rows)));
  quantize_rows(
      to, rows, cols, dst,
      [&](int64_t r, float* row, float* scratch) {
        const int64_t sr = row_perm.empty() ? r : row_perm[static_cast<size_t>(r)];
        if (col_perm.empty()) return dequantize_row(src, sr, row);
        dequantize_row(src, sr, scratch);
        for (int64_t c = 0; c < cols; ++c) row[c] = scratch[col_perm[static_cast<size_t>(c)]];
      },
      // In source order, a finished chunk's pages can leave the resident set now (a large
      // embedding table would otherwise stay resident beside its quantised copy until the end).
      [&](int64_t r0, int64_t r1) {
        if (row_perm.empty())
          t.source->release(t.offset + static_cast<uint64_t>(r0) * src.row_bytes, static_cast<uint64_t>(r1 - r0) * src.row_bytes);
      });
  t.source->release(t.offset, t.nbytes);
  return MatrixView{to, rows, cols, dst, *rb};
}

DType LoadQuant::type_for(const TensorInfo& t, const std::string& gguf, int n_dims, int64_t cols) const {
  if (!rule || (t.dtype != DType::F32 && t.dtype != DType::F16 && t.dtype != DType::BF16)) return t.dtype;
  return rule->target(gguf, n_dims, cols).value_or(t.dtype);
}

MatrixView LoadQuant::matrix(const TensorInfo& t, int64_t rows, int64_t cols, const std::string& gguf, int n_dims, Arena& arena,
                             const std::vector<int64_t>& row_perm, const std::vector<int64_t>& col_perm) {
  const DType to = type_for(t, gguf, n_dims, cols);
  if (to == t.dtype && row_perm.empty() && col_perm.empty()) return wt::matrix(t, rows, cols);
  MatrixView q = quantize_tensor(t, rows, cols, to, arena, row_perm, col_perm);
  source_bytes += t.nbytes;
  quant_bytes += q.row_bytes * static_cast<uint64_t>(rows);
  if (meter) meter->update(static_cast<double>(++quantised), static_cast<double>(total));
  return q;
}

void LoadQuant::start_progress(const TensorIndex& idx) {
  if (!rule || !progress_enabled()) return;
  // An upper bound: the rule keeps some float matrices (the progress line ends before 100 % then).
  total = 0;
  for (const auto& [name, t] : idx.all()) {
    const bool fl = t.dtype == DType::F32 || t.dtype == DType::F16 || t.dtype == DType::BF16;
    if (fl && t.shape.size() >= 2 && t.shape.back() % 32 == 0) ++total;
  }
  meter = std::make_unique<ProgressMeter>("quantising at load (--quant " + std::string(dtype_name(rule->base)) + ")",
                                          "tensors");
}

}  // namespace oxi::wt
