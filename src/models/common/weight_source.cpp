#include "models/common/weight_source.h"

#include <cmath>

#include "core/error.h"

namespace oxi::wt {

const TensorInfo* WeightSource::find(const std::string& g) const {
  if (!map_) return idx_->find(g);
  const std::string f = map_(g);
  return f.empty() ? nullptr : idx_->find(f);
}

void WeightSource::missing(const std::string& g) const {
  const std::string f = file_name(g);
  format_error(path_, "missing tensor " + (f.empty() ? g : f));
}

const TensorInfo& WeightSource::need(const std::string& g) const {
  const TensorInfo* t = find(g);
  if (!t) missing(g);
  return *t;
}

namespace {
const TensorInfo& check_shape(const std::string& path, const TensorInfo& t, const std::vector<int64_t>& shape) {
  bool ok = t.shape.size() == shape.size();
  for (size_t i = 0; ok && i < shape.size(); ++i) ok = shape[i] < 0 || shape[i] == t.shape[i];
  if (!ok) format_error(path, "tensor " + t.name + " has shape " + t.shape_string() + ", want " + shape_str(shape));
  return t;
}
}  // namespace

const TensorInfo& WeightSource::need(const std::string& g, const std::vector<int64_t>& shape) const {
  return check_shape(path_, need(g), shape);
}

const TensorInfo& WeightSource::need_file(const std::string& name, const std::vector<int64_t>& shape) const {
  const TensorInfo* t = idx_->find(name);
  if (!t) format_error(path_, "missing tensor " + name);
  return check_shape(path_, *t, shape);
}

void WeightSource::check_matrix(const TensorInfo& t, int64_t rows, int64_t cols) const {
  if (!matmul_supports(t.dtype))
    throw_error(ErrorCode::kUnsupported, path_ + ": tensor " + t.name + ": unsupported tensor type " + dtype_name(t.dtype));
  auto rb = dtype_row_bytes(t.dtype, static_cast<uint64_t>(cols));
  if (!rb || *rb * static_cast<uint64_t>(rows) != t.nbytes) format_error(path_, "tensor " + t.name + ": size does not match its shape");
}

MatrixView WeightSource::matrix(const TensorInfo& t, const std::string& g, int n_dims, int64_t rows, int64_t cols,
                                LoadQuant& lq, Arena& arena, const std::vector<int64_t>& row_perm,
                                const std::vector<int64_t>& col_perm) const {
  check_matrix(t, rows, cols);
  return lq.matrix(t, rows, cols, g, n_dims, arena, row_perm, col_perm);
}

MatrixView WeightSource::matrix(const std::string& g, int64_t rows, int64_t cols, LoadQuant& lq, Arena& arena,
                                const std::vector<int64_t>& row_perm, const std::vector<int64_t>& col_perm) const {
  return matrix(need(g, {rows, cols}), g, 2, rows, cols, lq, arena, row_perm, col_perm);
}

MatrixView WeightSource::stack(const std::string& g, int64_t e, int64_t rows, int64_t cols, LoadQuant& lq, Arena& arena) const {
  return matrix(need(g, {e, rows, cols}), g, 3, e * rows, cols, lq, arena);
}

std::vector<float> WeightSource::floats(const TensorInfo& t) const {
  if (t.dtype != DType::F32 && t.dtype != DType::F16 && t.dtype != DType::BF16)
    throw_error(ErrorCode::kUnsupported, path_ + ": tensor " + t.name + ": unsupported type " + dtype_name(t.dtype) + " for a vector");
  std::vector<float> out = wt::to_f32(t);
  for (float v : out)
    if (!std::isfinite(v)) format_error(path_, "tensor " + t.name + " holds a non-finite value");
  return out;
}

std::vector<float> WeightSource::vec(const std::string& g, int64_t n) const {
  const TensorInfo& t = need(g);
  if (t.n_elements() != n)
    format_error(path_, "tensor " + t.name + " has shape " + t.shape_string() + ", want " + std::to_string(n) + " elements");
  return floats(t);
}



std::vector<float> WeightSource::to_f32(const std::string& g, const std::vector<int64_t>& shape) const {
  return wt::to_f32(need(g, shape));
}

std::vector<float> WeightSource::to_f32_n(const std::string& g, int64_t n) const {
  const TensorInfo& t = need(g);
  if (t.n_elements() != n)
    format_error(path_, "tensor " + t.name + " has shape " + t.shape_string() + ", want " + std::to_string(n) + " elements");
  return wt::to_f32(t);
}

}  // namespace oxi::wt
