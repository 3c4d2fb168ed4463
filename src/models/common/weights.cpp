#include "models/common/weights.h"

#include <cstring>

#include "core/error.h"

namespace oxi::wt {

namespace {
std::string shape_str(const std::vector<int64_t>& s) {
  std::string r = "[";
  for (size_t i = 0; i < s.size(); ++i) {
    if (i) r += ", ";
    r += s[i] < 0 ? std::string("*") : std::to_string(s[i]);
  }
  return r + "]";
}
}  // namespace

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
  const int64_t cols = t.shape.empty() ? 1 : t.shape.back();
  MatrixView m = matrix(t, n / cols, cols);
  for (int64_t r = 0; r < m.rows; ++r) dequantize_row(m, r, out.data() + r * cols);
  return out;
}

float* Arena::alloc(size_t n) {
  blocks_.push_back(std::make_unique<float[]>(n));
  bytes_ += n * sizeof(float);
  return blocks_.back().get();
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

}  // namespace oxi::wt
