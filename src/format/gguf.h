// GGUF v2/v3 reader and writer (no model knowledge). Spec facts: little-endian; magic "GGUF";
// u32 version; u64 tensor count; u64 kv count; kvs; tensor infos; padding to general.alignment
// (default 32); tensor data, each tensor's offset relative to the data section and aligned.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <map>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "core/byte_source.h"
#include "format/tensor_index.h"

namespace oxi {

enum class GgufType : uint32_t {
  UINT8 = 0, INT8 = 1, UINT16 = 2, INT16 = 3, UINT32 = 4, INT32 = 5, FLOAT32 = 6, BOOL = 7,
  STRING = 8, ARRAY = 9, UINT64 = 10, INT64 = 11, FLOAT64 = 12,
};

// A string array as it lies in the file: `count` entries of {u64 length, bytes} from `begin`
// (already bounds checked), materialised once on first use (thread-safe).
struct GgufLazyStrings {
  ByteSourcePtr source;  // keeps the bytes alive
  uint64_t begin = 0;    // offset of the first entry in source
  uint64_t count = 0;
  const std::vector<std::string>& get() const;

 private:
  mutable std::once_flag once_;
  mutable std::vector<std::string> strings_;
};

// One metadata value. Arrays are homogeneous; `elem_type` says what they hold. Storage by element
// type (compact, so a hostile file cannot blow up into per-element objects):
//   ARRAY of STRING  → as_string_array(): `owned_strings` for values built in memory; a parsed
//     file's string array stays in the mapped file (`lazy_strings`: bounds checked at open, turned
//     into std::strings on first use, so a model load that never needs the vocabulary skips it)
//   ARRAY of ARRAY   → `array` (nested arrays are legal GGUF and kept as nested values)
//   ARRAY of numbers / BOOL → `raw`: the elements' little-endian bytes exactly as in the file;
//     read them with element(i) or the as_*_array() accessors.
struct GgufValue {
  GgufType type = GgufType::UINT8;
  GgufType elem_type = GgufType::UINT8;  // for ARRAY
  std::variant<uint64_t, int64_t, double, bool, std::string> scalar;  // integers widen
  std::vector<GgufValue> array;                                    // for ARRAY of ARRAY
  std::vector<std::string> owned_strings;                          // for ARRAY of STRING (built)
  std::shared_ptr<const struct GgufLazyStrings> lazy_strings;      // for ARRAY of STRING (parsed)
  std::vector<uint8_t> raw;                                        // for ARRAY of numbers/BOOL

  bool is_array() const { return type == GgufType::ARRAY; }
  // Typed accessors; throw oxi::Error(kFormat) on a type mismatch (integers convert with range
  // check, floats from any numeric).
  int64_t as_int() const;
  uint64_t as_uint() const;
  double as_float() const;
  bool as_bool() const;
  const std::string& as_string() const;
  std::vector<int64_t> as_int_array() const;
  std::vector<float> as_float_array() const;
  const std::vector<std::string>& as_string_array() const;
  size_t array_size() const;
  // Element i of any array as a scalar value (a copy; nested arrays are returned whole).
  GgufValue element(size_t i) const;

  // Constructors of scalar values.
  static GgufValue u8(uint8_t v);
  static GgufValue i8(int8_t v);
  static GgufValue u16(uint16_t v);
  static GgufValue i16(int16_t v);
  static GgufValue u32(uint32_t v);
  static GgufValue i32(int32_t v);
  static GgufValue u64(uint64_t v);
  static GgufValue i64(int64_t v);
  static GgufValue f32(float v);
  static GgufValue f64(double v);
  static GgufValue boolean(bool v);
  static GgufValue string(std::string v);
  // Arrays. Numeric: elements are converted to `elem` (an integer or float GGUF type).
  static GgufValue int_array(GgufType elem, const std::vector<int64_t>& v);
  static GgufValue float_array(GgufType elem, const std::vector<double>& v);
  static GgufValue bool_array(const std::vector<bool>& v);
  static GgufValue string_array(std::vector<std::string> v);
  static GgufValue nested_array(GgufType inner_type, std::vector<GgufValue> v);
};

// Bytes of one element of a fixed-size GGUF type (0 for STRING / ARRAY).
size_t gguf_type_size(GgufType t);
const char* gguf_type_name(GgufType t);  // "UINT32", …

class GgufMetadata {
 public:
  const GgufValue* find(const std::string& key) const;
  bool contains(const std::string& key) const { return find(key) != nullptr; }
  // Throw "missing metadata key K" / type errors naming the key.
  int64_t get_int(const std::string& key) const;
  double get_float(const std::string& key) const;
  bool get_bool(const std::string& key) const;
  const std::string& get_string(const std::string& key) const;
  // With defaults when absent.
  int64_t get_int(const std::string& key, int64_t def) const;
  double get_float(const std::string& key, double def) const;
  bool get_bool(const std::string& key, bool def) const;
  std::string get_string(const std::string& key, const std::string& def) const;

  void set(const std::string& key, GgufValue v);
  const std::vector<std::pair<std::string, GgufValue>>& entries() const { return entries_; }

 private:
  std::vector<std::pair<std::string, GgufValue>> entries_;  // file order
  std::map<std::string, size_t> by_key_;
};

struct GgufFile {
  uint32_t version = 3;
  uint64_t data_offset = 0;  // start of the tensor data section in the (first) file
  uint64_t alignment = 32;
  GgufMetadata metadata;
  TensorIndex tensors;
  std::vector<ByteSourcePtr> sources;  // one per split
};

// Opens a .gguf (or the first split "*-00001-of-0000N.gguf", pulling in the others); validates
// everything (offsets in file, sizes == shape × dtype, alignment, no overlaps, duplicates, limits).
// Errors: oxi::Error(kFormat or kIo) with a one-line message naming the file (and tensor).
GgufFile read_gguf(const std::string& path);
GgufFile read_gguf(ByteSourcePtr source);  // single in-memory file (wasm, fuzzing)

// True if `path` names the first part of a split GGUF ("…-00001-of-000NN.gguf").
bool gguf_is_split_first(const std::string& path);

// Writer: collects metadata and tensors (data supplied by pointer or by a callback at write time
// so multi-GB conversions stream), then writes to path via a temp file + rename.
class GgufWriter {
 public:
  explicit GgufWriter(uint64_t alignment = 32);
  void set_metadata(const std::string& key, GgufValue v);
  // Convenience setters.
  void set_u32(const std::string& key, uint32_t v);
  void set_i32(const std::string& key, int32_t v);
  void set_u64(const std::string& key, uint64_t v);
  void set_f32(const std::string& key, float v);
  void set_bool(const std::string& key, bool v);
  void set_string(const std::string& key, const std::string& v);
  void set_array_i32(const std::string& key, const std::vector<int32_t>& v);
  void set_array_u32(const std::string& key, const std::vector<uint32_t>& v);
  void set_array_f32(const std::string& key, const std::vector<float>& v);
  void set_array_bool(const std::string& key, const std::vector<bool>& v);
  void set_array_string(const std::string& key, const std::vector<std::string>& v);

  // `shape` row-major outermost-first (as TensorInfo). `bytes` must stay valid until write().
  void add_tensor(const std::string& name, DType dtype, std::vector<int64_t> shape,
                  const void* bytes, uint64_t nbytes);
  // Data produced at write time into `dst` (exactly nbytes).
  using Producer = std::function<void(uint8_t* dst, uint64_t nbytes)>;
  void add_tensor(const std::string& name, DType dtype, std::vector<int64_t> shape, uint64_t nbytes,
                  Producer produce);

  // Temp file + rename. meter: a "writing FILE: MiB done/total" progress line (core/progress.h)
  // when progress is on; false for callers that print their own per-tensor lines.
  void write(const std::string& path, bool meter = true) const;
  std::vector<uint8_t> write_to_memory() const;    // for tests

 private:
  struct Pending;
  std::vector<uint8_t> header_bytes() const;  // header + infos + padding; assigns data offsets
  void emit(const std::function<void(const uint8_t*, uint64_t)>& sink) const;
  uint64_t alignment_;
  GgufMetadata metadata_;
  std::vector<std::shared_ptr<Pending>> tensors_;
};

}  // namespace oxi
