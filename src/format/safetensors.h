// safetensors reader/writer. Layout facts: u64 LE header length N; N bytes of JSON
// {"name": {"dtype": "BF16", "shape": [..], "data_offsets": [begin, end]}, "__metadata__": {..}};
// data offsets are relative to the byte after the header.
#pragma once

#include <functional>
#include <map>
#include <string>
#include <vector>

#include "core/byte_source.h"
#include "format/tensor_index.h"

namespace oxi {

struct SafetensorsFile {
  std::map<std::string, std::string> metadata;  // "__metadata__" (string → string)
  TensorIndex tensors;
};

// Validates: header length limit (100 MiB), JSON well-formed, known dtype, shape × dtype ==
// end − begin, offsets inside the file, no overlaps, no duplicates. Throws oxi::Error(kFormat).
SafetensorsFile read_safetensors(ByteSourcePtr source);
SafetensorsFile read_safetensors(const std::string& path);

// "BF16" → DType::BF16 etc.; throws for unknown dtype strings.
DType safetensors_dtype(const std::string& s, const std::string& file, const std::string& tensor);
const char* safetensors_dtype_name(DType t);  // inverse, for F32/F16/BF16/I8/U8/I16/I32/I64/BOOL/F64

class SafetensorsWriter {
 public:
  void add_tensor(const std::string& name, DType dtype, std::vector<int64_t> shape,
                  std::vector<uint8_t> bytes);
  void set_metadata(const std::string& key, const std::string& value);
  void write(const std::string& path) const;  // temp + rename
  std::vector<uint8_t> write_to_memory() const;

 private:
  struct Entry {
    std::string name;
    DType dtype;
    std::vector<int64_t> shape;
    std::vector<uint8_t> bytes;
  };
  std::vector<Entry> entries_;
  std::map<std::string, std::string> metadata_;
};

}  // namespace oxi
