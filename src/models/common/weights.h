// Weight lookup helpers shared by the model loaders: find a tensor, check its shape and type, and
// hand out a MatrixView (bytes used in place) or an f32 copy of a small tensor. Every failure is an
// oxi::Error naming the tensor: "missing tensor X", "tensor X has shape [..], expected [..]".
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/progress.h"
#include "format/tensor_index.h"
#include "kernels/matmul.h"
#include "models/common/quant_rule.h"

namespace oxi::wt {

// An expected shape as error messages show it: "[4, *, 8]" (-1: any size).
std::string shape_str(const std::vector<int64_t>& shape);
// The tensor, checked against `shape` (row-major). An expected dim of -1 accepts any size.
const TensorInfo& require(const TensorIndex& idx, const std::string& name, const std::vector<int64_t>& shape);

// A [rows, cols] matrix view of a tensor whose shape flattens to (rows, cols) with cols the last
// dim (e.g. 3-D expert stacks give rows = E·out). Checks matmul_supports(dtype).
MatrixView matrix(const TensorInfo& t, int64_t rows, int64_t cols);
// Rows [row0, row0 + n) of a matrix view.
MatrixView sub_rows(const MatrixView& m, int64_t row0, int64_t n);
// f32 copy of a whole tensor (any float or supported quant type), n elements expected.
std::vector<float> to_f32(const TensorInfo& t);

// Stable owner of buffers that MatrixViews point into (weights converted or quantised at load).
class Arena {
 public:
  float* alloc(size_t n);
  uint8_t* alloc_bytes(size_t n);  // uninitialised
  MatrixView own_matrix(std::vector<float> values, int64_t rows, int64_t cols);
  uint64_t bytes() const { return bytes_; }

 private:
  std::vector<std::unique_ptr<float[]>> blocks_;
  std::vector<std::unique_ptr<uint8_t[]>> byte_blocks_;
  uint64_t bytes_ = 0;
};

// Quantisation at load (LoadOptions::quant, docs/kernels.md): tensor `t` (F32/F16/BF16, viewed as
// [rows, cols]) → type `to` in memory owned by `arena`. Rows run in parallel on the thread pool
// with one f32 row of scratch per thread (never an f32 copy of the matrix); the source's pages leave
// the resident set as chunks finish (ByteSource::release; the whole tensor at the end when rows are
// reordered), so peak RSS stays near the quantised size. Optional orderings: output row r is source row
// row_perm[r], output column c source column col_perm[c] (HF → GGUF head orders).
MatrixView quantize_tensor(const TensorInfo& t, int64_t rows, int64_t cols, DType to, Arena& arena,
                           const std::vector<int64_t>& row_perm = {}, const std::vector<int64_t>& col_perm = {});

// Per-model quantise-at-load state: the rule (nullopt: keep every stored type) and the bytes it
// replaced, so ModelInfo::weight_bytes can report what is resident.
struct LoadQuant {
  std::optional<QuantRule> rule;
  uint64_t source_bytes = 0;  // bytes of the stored tensors that were replaced
  uint64_t quant_bytes = 0;   // bytes of their quantised copies

  // The view a model uses for matrix `t` ([rows, cols], GGUF name `gguf`, `n_dims` dims as in the
  // GGUF): quantised when the rule says so and `t` is F32/F16/BF16, else the stored bytes. With
  // orderings, a tensor the rule keeps is copied reordered in its stored type.
  MatrixView matrix(const TensorInfo& t, int64_t rows, int64_t cols, const std::string& gguf, int n_dims, Arena& arena,
                    const std::vector<int64_t>& row_perm = {}, const std::vector<int64_t>& col_perm = {});
  // The type `matrix` gives this tensor.
  DType type_for(const TensorInfo& t, const std::string& gguf, int n_dims, int64_t cols) const;
  // ModelInfo::weight_bytes after quantising: file bytes − replaced + quantised.
  uint64_t resident(uint64_t file_bytes) const { return file_bytes - source_bytes + quant_bytes; }

  // Progress of quantising at load (issue 31 item 6; core/progress.h), when a rule is set:
  // matrices quantised of the float matrices in `idx` (F32/F16/BF16, two dims or more).
  // Printed when progress_enabled(). Call before the first `matrix`, and
  // end_progress (clears a line drawn in place) after the last.
  void start_progress(const TensorIndex& idx);
  void end_progress() { meter.reset(); }
  std::unique_ptr<ProgressMeter> meter;
  int64_t quantised = 0, total = 0;
};

}  // namespace oxi::wt
