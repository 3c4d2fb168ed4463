// A model's weights looked up by their GGUF tensor name, over either a GGUF file (names as they
// are) or an HF checkpoint read in place (the family's GGUF → HF name map). One loader per family,
// written in GGUF names, then reads both kinds of file; the family applies its per-tensor
// transforms (norm offsets, head orders) to what this hands out.
//
// Every failure is an oxi::Error that names the file and the tensor as the file spells it
// ("<path>: missing tensor model.layers.0.mlp.gate_proj.weight"), so a user can find it in the
// checkpoint. Lives in models/common (not src/nn) because it builds on the format index and the
// quantise-at-load helpers of weights.h, both above the nn library.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "format/tensor_index.h"
#include "kernels/matmul.h"
#include "models/common/weights.h"

namespace oxi::wt {

class WeightSource {
 public:
  // GGUF name → the file's name; "" when the family's file has no such tensor (find gives null).
  using NameMap = std::function<std::string(const std::string& gguf)>;

  WeightSource() = default;
  // `map` empty: a GGUF file (names used as they are).
  WeightSource(const TensorIndex* idx, std::string path, NameMap map = {})
      : idx_(idx), path_(std::move(path)), map_(std::move(map)) {}

  bool mapped() const { return static_cast<bool>(map_); }
  const std::string& path() const { return path_; }
  const TensorIndex& index() const { return *idx_; }
  // The name the file gives GGUF tensor `g` ("" when it has none).
  std::string file_name(const std::string& g) const { return map_ ? map_(g) : g; }

  const TensorInfo* find(const std::string& g) const;
  // The tensor, or "<path>: missing tensor <file name>".
  const TensorInfo& need(const std::string& g) const;
  // need + shape check (an expected dim of -1 accepts any size):
  // "<path>: tensor X has shape [..], want [..]".
  const TensorInfo& need(const std::string& g, const std::vector<int64_t>& shape) const;
  // The same, for a tensor named as the file spells it (layouts with no GGUF counterpart, e.g.
  // an HF checkpoint's per-expert matrices).
  const TensorInfo& need_file(const std::string& file_name, const std::vector<int64_t>& shape) const;
  [[noreturn]] void missing(const std::string& g) const;

  // 2-D matrix [rows, cols] through `lq` (quantised at load when its rule says so for GGUF name
  // `g`, `n_dims` dims as in the GGUF; optional HF → GGUF row / column orders, weights.h).
  MatrixView matrix(const std::string& g, int64_t rows, int64_t cols, LoadQuant& lq, Arena& arena,
                    const std::vector<int64_t>& row_perm = {}, const std::vector<int64_t>& col_perm = {}) const;
  // The same for a tensor already found (t's shape flattens to [rows, cols]).
  MatrixView matrix(const TensorInfo& t, const std::string& g, int n_dims, int64_t rows, int64_t cols, LoadQuant& lq,
                    Arena& arena, const std::vector<int64_t>& row_perm = {},
                    const std::vector<int64_t>& col_perm = {}) const;
  // Expert stack [e, rows, cols] viewed as one [e·rows, cols] matrix (expert k: rows k·rows ..).
  MatrixView stack(const std::string& g, int64_t e, int64_t rows, int64_t cols, LoadQuant& lq, Arena& arena) const;
  // f32 copy of a small float tensor (F32 / F16 / BF16) of n elements; non-finite values refused.
  std::vector<float> vec(const std::string& g, int64_t n) const;
  // f32 copy of any tensor wt::to_f32 reads (float, GGUF block and MLX group types: an MLX
  // checkpoint's quantised MoE router), shape-checked, values as stored (no finiteness check).
  std::vector<float> to_f32(const std::string& g, const std::vector<int64_t>& shape) const;
  // The same with an element-count check (e.g. a [d] vector stored [1, d]). Named apart from
  // to_f32 so that a braced shape ({6}) never picks the count by overload resolution.
  std::vector<float> to_f32_n(const std::string& g, int64_t n) const;

 private:
  std::vector<float> floats(const TensorInfo& t) const;
  void check_matrix(const TensorInfo& t, int64_t rows, int64_t cols) const;

  const TensorIndex* idx_ = nullptr;
  std::string path_;
  NameMap map_;
};

}  // namespace oxi::wt
