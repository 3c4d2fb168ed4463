// The neutral tensor index both loaders produce: name → (dtype, shape, bytes in a ByteSource).
//
// Shape convention: `shape` is row-major, outermost dimension first, exactly as Hugging Face /
// numpy / safetensors write it. GGUF stores ne[] innermost-first; the GGUF reader reverses it, so
// a GGUF tensor with ne = {K, N} (N rows of K) appears here as shape {N, K}. The innermost
// dimension, shape.back(), is the contiguous one (and the one quant blocks run along).
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "core/byte_source.h"
#include "format/dtype.h"

namespace oxi {

struct TensorInfo {
  std::string name;
  DType dtype = DType::F32;
  std::vector<int64_t> shape;  // row-major, outermost first
  ByteSourcePtr source;        // file holding the bytes (keeps the mapping alive)
  uint64_t offset = 0;         // absolute byte offset in `source`
  uint64_t nbytes = 0;

  int64_t n_elements() const;
  const uint8_t* data() const { return source->data() + offset; }
  std::string shape_string() const;  // "[151936, 1024]"
};

class TensorIndex {
 public:
  // Throws a format error naming `file` and the tensor on a duplicate name.
  void add(TensorInfo info, const std::string& file);
  const TensorInfo* find(const std::string& name) const;  // nullptr if absent
  // Throws oxi::Error(kFormat) "missing tensor NAME" if absent.
  const TensorInfo& get(const std::string& name) const;
  bool contains(const std::string& name) const { return find(name) != nullptr; }
  size_t size() const { return tensors_.size(); }
  const std::map<std::string, TensorInfo>& all() const { return tensors_; }

 private:
  std::map<std::string, TensorInfo> tensors_;
};

}  // namespace oxi
