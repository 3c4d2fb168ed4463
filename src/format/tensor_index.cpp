#include "format/tensor_index.h"

#include "core/error.h"

namespace oxi {

int64_t TensorInfo::n_elements() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;  // loaders check the product fits before building a TensorInfo
  return n;
}

std::string TensorInfo::shape_string() const {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i) s += ", ";
    s += std::to_string(shape[i]);
  }
  return s + "]";
}

void TensorIndex::add(TensorInfo info, const std::string& file) {
  if (tensors_.count(info.name)) format_error(file, "duplicate tensor '" + info.name + "'");
  std::string key = info.name;
  tensors_.emplace(std::move(key), std::move(info));
}

const TensorInfo* TensorIndex::find(const std::string& name) const {
  auto it = tensors_.find(name);
  return it == tensors_.end() ? nullptr : &it->second;
}

const TensorInfo& TensorIndex::get(const std::string& name) const {
  if (const TensorInfo* t = find(name)) return *t;
  throw_error(ErrorCode::kFormat, "missing tensor " + name);
}

}  // namespace oxi
