// Weight lookup helpers shared by the model loaders: find a tensor, check its shape and type, and
// hand out a MatrixView (bytes used in place) or an f32 copy of a small tensor. Every failure is an
// oxi::Error naming the tensor: "missing tensor X", "tensor X has shape [..], expected [..]".
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "format/tensor_index.h"
#include "kernels/matmul.h"

namespace oxi::wt {

// The tensor, checked against `shape` (row-major). An expected dim of -1 accepts any size.
const TensorInfo& require(const TensorIndex& idx, const std::string& name, const std::vector<int64_t>& shape);

// A [rows, cols] matrix view of a tensor whose shape flattens to (rows, cols) with cols the last
// dim (e.g. 3-D expert stacks give rows = E·out). Checks matmul_supports(dtype).
MatrixView matrix(const TensorInfo& t, int64_t rows, int64_t cols);
// Rows [row0, row0 + n) of a matrix view.
MatrixView sub_rows(const MatrixView& m, int64_t row0, int64_t n);
// f32 copy of a whole tensor (any float or supported quant type), n elements expected.
std::vector<float> to_f32(const TensorInfo& t);

// Stable owner of f32 buffers that MatrixViews point into (e.g. weights converted at load).
class Arena {
 public:
  float* alloc(size_t n);
  MatrixView own_matrix(std::vector<float> values, int64_t rows, int64_t cols);
  uint64_t bytes() const { return bytes_; }

 private:
  std::vector<std::unique_ptr<float[]>> blocks_;
  uint64_t bytes_ = 0;
};

}  // namespace oxi::wt
