// GGUF v2/v3 reader and writer. All reads go through a bounds-checked cursor; every count read from
// the file is checked against the bytes left before anything is reserved, so a hostile header can
// never ask for more memory than the file itself could describe.
#include "format/gguf.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>

#include "core/byte_source.h"
#include "core/error.h"
#include "core/progress.h"
#include "format/util.h"

namespace oxi {

namespace {

constexpr uint32_t kMaxDims = 4;            // GGML_MAX_DIMS
constexpr uint64_t kMaxKeyLen = 65535;      // GGUF spec: keys are at most 65535 bytes
constexpr uint64_t kMaxNameLen = 65535;     // tensor names (ggml itself allows 63)
constexpr int kMaxArrayDepth = 8;           // nested arrays of arrays
constexpr uint64_t kMaxAlignment = 1u << 20;

bool valid_type(uint32_t t) { return t <= static_cast<uint32_t>(GgufType::FLOAT64); }

}  // namespace

size_t gguf_type_size(GgufType t) {
  switch (t) {
    case GgufType::UINT8: case GgufType::INT8: case GgufType::BOOL: return 1;
    case GgufType::UINT16: case GgufType::INT16: return 2;
    case GgufType::UINT32: case GgufType::INT32: case GgufType::FLOAT32: return 4;
    case GgufType::UINT64: case GgufType::INT64: case GgufType::FLOAT64: return 8;
    case GgufType::STRING: case GgufType::ARRAY: return 0;
  }
  return 0;
}

const char* gguf_type_name(GgufType t) {
  switch (t) {
    case GgufType::UINT8: return "UINT8";
    case GgufType::INT8: return "INT8";
    case GgufType::UINT16: return "UINT16";
    case GgufType::INT16: return "INT16";
    case GgufType::UINT32: return "UINT32";
    case GgufType::INT32: return "INT32";
    case GgufType::FLOAT32: return "FLOAT32";
    case GgufType::BOOL: return "BOOL";
    case GgufType::STRING: return "STRING";
    case GgufType::ARRAY: return "ARRAY";
    case GgufType::UINT64: return "UINT64";
    case GgufType::INT64: return "INT64";
    case GgufType::FLOAT64: return "FLOAT64";
  }
  return "?";
}

// ---------------------------------------------------------------------------------------------
// GgufValue

namespace {

[[noreturn]] void type_mismatch(const GgufValue& v, const char* want) {
  std::string got = gguf_type_name(v.type);
  if (v.is_array()) got += std::string(" of ") + gguf_type_name(v.elem_type);
  throw_error(ErrorCode::kFormat, "metadata value is " + got + ", expected " + want);
}

bool is_int_type(GgufType t) {
  switch (t) {
    case GgufType::UINT8: case GgufType::INT8: case GgufType::UINT16: case GgufType::INT16:
    case GgufType::UINT32: case GgufType::INT32: case GgufType::UINT64: case GgufType::INT64:
      return true;
    default: return false;
  }
}
bool is_float_type(GgufType t) { return t == GgufType::FLOAT32 || t == GgufType::FLOAT64; }

// Decodes element i of a raw numeric array into a scalar variant.
GgufValue raw_element(GgufType t, const uint8_t* p) {
  GgufValue v;
  v.type = t;
  switch (t) {
    case GgufType::UINT8: v.scalar = uint64_t{p[0]}; break;
    case GgufType::INT8: { int8_t x; std::memcpy(&x, p, 1); v.scalar = int64_t{x}; break; }
    case GgufType::UINT16: { uint16_t x; std::memcpy(&x, p, 2); v.scalar = uint64_t{x}; break; }
    case GgufType::INT16: { int16_t x; std::memcpy(&x, p, 2); v.scalar = int64_t{x}; break; }
    case GgufType::UINT32: { uint32_t x; std::memcpy(&x, p, 4); v.scalar = uint64_t{x}; break; }
    case GgufType::INT32: { int32_t x; std::memcpy(&x, p, 4); v.scalar = int64_t{x}; break; }
    case GgufType::UINT64: { uint64_t x; std::memcpy(&x, p, 8); v.scalar = x; break; }
    case GgufType::INT64: { int64_t x; std::memcpy(&x, p, 8); v.scalar = x; break; }
    case GgufType::FLOAT32: { float x; std::memcpy(&x, p, 4); v.scalar = double{x}; break; }
    case GgufType::FLOAT64: { double x; std::memcpy(&x, p, 8); v.scalar = x; break; }
    case GgufType::BOOL: v.scalar = p[0] != 0; break;
    default: break;
  }
  return v;
}

template <class T>
void put(std::vector<uint8_t>& out, T x) {
  const size_t at = out.size();
  out.resize(at + sizeof(T));
  std::memcpy(out.data() + at, &x, sizeof(T));
}

}  // namespace

int64_t GgufValue::as_int() const {
  if (is_array()) type_mismatch(*this, "an integer");
  if (const auto* u = std::get_if<uint64_t>(&scalar)) {
    if (*u > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
      throw_error(ErrorCode::kFormat, "metadata value " + std::to_string(*u) + " is out of range");
    }
    return static_cast<int64_t>(*u);
  }
  if (const auto* i = std::get_if<int64_t>(&scalar)) return *i;
  type_mismatch(*this, "an integer");
}

uint64_t GgufValue::as_uint() const {
  if (is_array()) type_mismatch(*this, "an unsigned integer");
  if (const auto* u = std::get_if<uint64_t>(&scalar)) return *u;
  if (const auto* i = std::get_if<int64_t>(&scalar)) {
    if (*i < 0) throw_error(ErrorCode::kFormat, "metadata value " + std::to_string(*i) + " is negative");
    return static_cast<uint64_t>(*i);
  }
  type_mismatch(*this, "an unsigned integer");
}

double GgufValue::as_float() const {
  if (is_array()) type_mismatch(*this, "a number");
  if (const auto* d = std::get_if<double>(&scalar)) return *d;
  if (const auto* u = std::get_if<uint64_t>(&scalar)) return static_cast<double>(*u);
  if (const auto* i = std::get_if<int64_t>(&scalar)) return static_cast<double>(*i);
  type_mismatch(*this, "a number");
}

bool GgufValue::as_bool() const {
  if (type != GgufType::BOOL) type_mismatch(*this, "BOOL");
  return std::get<bool>(scalar);
}

const std::string& GgufValue::as_string() const {
  if (type != GgufType::STRING) type_mismatch(*this, "STRING");
  return std::get<std::string>(scalar);
}

size_t GgufValue::array_size() const {
  if (!is_array()) type_mismatch(*this, "an array");
  if (elem_type == GgufType::STRING) return lazy_strings ? lazy_strings->count : owned_strings.size();
  if (elem_type == GgufType::ARRAY) return array.size();
  const size_t sz = gguf_type_size(elem_type);
  return sz ? raw.size() / sz : 0;
}

GgufValue GgufValue::element(size_t i) const {
  const size_t n = array_size();
  if (i >= n) {
    throw_error(ErrorCode::kFormat, "metadata array index " + std::to_string(i) + " out of range (size " +
                                        std::to_string(n) + ")");
  }
  if (elem_type == GgufType::STRING) return string(as_string_array()[i]);
  if (elem_type == GgufType::ARRAY) return array[i];
  return raw_element(elem_type, raw.data() + i * gguf_type_size(elem_type));
}

std::vector<int64_t> GgufValue::as_int_array() const {
  if (!is_array() || !(is_int_type(elem_type) || elem_type == GgufType::BOOL)) {
    type_mismatch(*this, "an integer array");
  }
  const size_t n = array_size();
  const size_t sz = gguf_type_size(elem_type);
  std::vector<int64_t> out;
  out.reserve(n);
  for (size_t i = 0; i < n; ++i) {
    const GgufValue v = raw_element(elem_type, raw.data() + i * sz);
    out.push_back(elem_type == GgufType::BOOL ? (std::get<bool>(v.scalar) ? 1 : 0) : v.as_int());
  }
  return out;
}

std::vector<float> GgufValue::as_float_array() const {
  if (!is_array() || !(is_int_type(elem_type) || is_float_type(elem_type))) {
    type_mismatch(*this, "a numeric array");
  }
  const size_t n = array_size();
  const size_t sz = gguf_type_size(elem_type);
  std::vector<float> out;
  out.reserve(n);
  for (size_t i = 0; i < n; ++i) {
    out.push_back(static_cast<float>(raw_element(elem_type, raw.data() + i * sz).as_float()));
  }
  return out;
}

const std::vector<std::string>& GgufLazyStrings::get() const {
  std::call_once(once_, [&] {
    const uint8_t* p = source->data() + begin;  // bounds checked when the file was opened
    strings_.reserve(count);
    for (uint64_t i = 0; i < count; ++i) {
      uint64_t n;
      std::memcpy(&n, p, 8);
      strings_.emplace_back(reinterpret_cast<const char*>(p + 8), n);
      p += 8 + n;
    }
  });
  return strings_;
}

const std::vector<std::string>& GgufValue::as_string_array() const {
  if (!is_array() || elem_type != GgufType::STRING) type_mismatch(*this, "a string array");
  return lazy_strings ? lazy_strings->get() : owned_strings;
}

GgufValue GgufValue::u8(uint8_t v) { GgufValue r; r.type = GgufType::UINT8; r.scalar = uint64_t{v}; return r; }
GgufValue GgufValue::i8(int8_t v) { GgufValue r; r.type = GgufType::INT8; r.scalar = int64_t{v}; return r; }
GgufValue GgufValue::u16(uint16_t v) { GgufValue r; r.type = GgufType::UINT16; r.scalar = uint64_t{v}; return r; }
GgufValue GgufValue::i16(int16_t v) { GgufValue r; r.type = GgufType::INT16; r.scalar = int64_t{v}; return r; }
GgufValue GgufValue::u32(uint32_t v) { GgufValue r; r.type = GgufType::UINT32; r.scalar = uint64_t{v}; return r; }
GgufValue GgufValue::i32(int32_t v) { GgufValue r; r.type = GgufType::INT32; r.scalar = int64_t{v}; return r; }
GgufValue GgufValue::u64(uint64_t v) { GgufValue r; r.type = GgufType::UINT64; r.scalar = v; return r; }
GgufValue GgufValue::i64(int64_t v) { GgufValue r; r.type = GgufType::INT64; r.scalar = v; return r; }
GgufValue GgufValue::f32(float v) { GgufValue r; r.type = GgufType::FLOAT32; r.scalar = double{v}; return r; }
GgufValue GgufValue::f64(double v) { GgufValue r; r.type = GgufType::FLOAT64; r.scalar = v; return r; }
GgufValue GgufValue::boolean(bool v) { GgufValue r; r.type = GgufType::BOOL; r.scalar = v; return r; }
GgufValue GgufValue::string(std::string v) {
  GgufValue r;
  r.type = GgufType::STRING;
  r.scalar = std::move(v);
  return r;
}

GgufValue GgufValue::int_array(GgufType elem, const std::vector<int64_t>& v) {
  GgufValue r;
  r.type = GgufType::ARRAY;
  r.elem_type = elem;
  r.raw.reserve(v.size() * gguf_type_size(elem));
  for (int64_t x : v) {
    switch (elem) {
      case GgufType::UINT8: put(r.raw, static_cast<uint8_t>(x)); break;
      case GgufType::INT8: put(r.raw, static_cast<int8_t>(x)); break;
      case GgufType::UINT16: put(r.raw, static_cast<uint16_t>(x)); break;
      case GgufType::INT16: put(r.raw, static_cast<int16_t>(x)); break;
      case GgufType::UINT32: put(r.raw, static_cast<uint32_t>(x)); break;
      case GgufType::INT32: put(r.raw, static_cast<int32_t>(x)); break;
      case GgufType::UINT64: put(r.raw, static_cast<uint64_t>(x)); break;
      case GgufType::INT64: put(r.raw, static_cast<int64_t>(x)); break;
      case GgufType::FLOAT32: put(r.raw, static_cast<float>(x)); break;
      case GgufType::FLOAT64: put(r.raw, static_cast<double>(x)); break;
      case GgufType::BOOL: put(r.raw, static_cast<uint8_t>(x != 0)); break;
      default: throw_error(ErrorCode::kInvalidArgument, "int_array: bad element type");
    }
  }
  return r;
}

GgufValue GgufValue::float_array(GgufType elem, const std::vector<double>& v) {
  if (elem != GgufType::FLOAT32 && elem != GgufType::FLOAT64) {
    std::vector<int64_t> iv(v.begin(), v.end());
    return int_array(elem, iv);
  }
  GgufValue r;
  r.type = GgufType::ARRAY;
  r.elem_type = elem;
  r.raw.reserve(v.size() * gguf_type_size(elem));
  for (double x : v) {
    if (elem == GgufType::FLOAT32) put(r.raw, static_cast<float>(x)); else put(r.raw, x);
  }
  return r;
}

GgufValue GgufValue::bool_array(const std::vector<bool>& v) {
  GgufValue r;
  r.type = GgufType::ARRAY;
  r.elem_type = GgufType::BOOL;
  for (bool b : v) r.raw.push_back(b ? 1 : 0);
  return r;
}

GgufValue GgufValue::string_array(std::vector<std::string> v) {
  GgufValue r;
  r.type = GgufType::ARRAY;
  r.elem_type = GgufType::STRING;
  r.owned_strings = std::move(v);
  return r;
}

GgufValue GgufValue::nested_array(GgufType inner_type, std::vector<GgufValue> v) {
  for (const auto& e : v) {
    if (!e.is_array() || e.elem_type != inner_type) {
      throw_error(ErrorCode::kInvalidArgument, "nested_array: elements must be arrays of one type");
    }
  }
  GgufValue r;
  r.type = GgufType::ARRAY;
  r.elem_type = GgufType::ARRAY;
  r.array = std::move(v);
  return r;
}

// ---------------------------------------------------------------------------------------------
// GgufMetadata

const GgufValue* GgufMetadata::find(const std::string& key) const {
  auto it = by_key_.find(key);
  return it == by_key_.end() ? nullptr : &entries_[it->second].second;
}

namespace {
const GgufValue& must_find(const GgufMetadata& m, const std::string& key) {
  if (const GgufValue* v = m.find(key)) return *v;
  throw_error(ErrorCode::kFormat, "missing metadata key " + key);
}
template <class F>
auto with_key(const std::string& key, F&& f) -> decltype(f()) {
  try {
    return f();
  } catch (const Error& e) {
    throw_error(e.code(), "metadata key " + key + ": " + e.what());
  }
}
}  // namespace

int64_t GgufMetadata::get_int(const std::string& key) const {
  const GgufValue& v = must_find(*this, key);
  return with_key(key, [&] { return v.as_int(); });
}
double GgufMetadata::get_float(const std::string& key) const {
  const GgufValue& v = must_find(*this, key);
  return with_key(key, [&] { return v.as_float(); });
}
bool GgufMetadata::get_bool(const std::string& key) const {
  const GgufValue& v = must_find(*this, key);
  return with_key(key, [&] { return v.as_bool(); });
}
const std::string& GgufMetadata::get_string(const std::string& key) const {
  const GgufValue& v = must_find(*this, key);
  return with_key(key, [&]() -> const std::string& { return v.as_string(); });
}
int64_t GgufMetadata::get_int(const std::string& key, int64_t def) const {
  return contains(key) ? get_int(key) : def;
}
double GgufMetadata::get_float(const std::string& key, double def) const {
  return contains(key) ? get_float(key) : def;
}
bool GgufMetadata::get_bool(const std::string& key, bool def) const {
  return contains(key) ? get_bool(key) : def;
}
std::string GgufMetadata::get_string(const std::string& key, const std::string& def) const {
  return contains(key) ? get_string(key) : def;
}

void GgufMetadata::set(const std::string& key, GgufValue v) {
  auto it = by_key_.find(key);
  if (it != by_key_.end()) {
    entries_[it->second].second = std::move(v);
    return;
  }
  by_key_.emplace(key, entries_.size());
  entries_.emplace_back(key, std::move(v));
}

// ---------------------------------------------------------------------------------------------
// Reader

namespace {

class Cursor {
 public:
  explicit Cursor(ByteSourcePtr src) : src_(*src), owner_(std::move(src)), data_(src_.data()), size_(src_.size()) {}

  const ByteSourcePtr& owner() const { return owner_; }

  uint64_t pos() const { return pos_; }
  uint64_t left() const { return size_ - pos_; }
  const std::string& file() const { return src_.name(); }

  [[noreturn]] void fail(const std::string& what) const { format_error(file(), what); }

  const uint8_t* take(uint64_t n, const char* what) {
    if (n > left()) {
      fail(std::string("truncated: ") + what + " at offset " + std::to_string(pos_) + " needs " +
           std::to_string(n) + " bytes, " + std::to_string(left()) + " left");
    }
    const uint8_t* p = data_ + pos_;
    pos_ += n;
    return p;
  }
  template <class T>
  T read(const char* what) {
    T x;
    std::memcpy(&x, take(sizeof(T), what), sizeof(T));
    return x;
  }
  std::string read_string(const char* what, uint64_t max_len) {
    const uint64_t n = skip_string(what, max_len);
    return std::string(reinterpret_cast<const char*>(data_ + pos_ - n), n);
  }
  uint64_t skip_string(const char* what, uint64_t max_len = ~0ull) {  // checked; returns the length
    const uint64_t n = read<uint64_t>(what);
    if (n > left()) {
      fail(std::string(what) + " length " + std::to_string(n) + " at offset " + std::to_string(pos_ - 8) +
           " exceeds the " + std::to_string(left()) + " bytes left");
    }
    if (n > max_len) fail(std::string(what) + " length " + std::to_string(n) + " exceeds the limit");
    take(n, what);
    return n;
  }

 private:
  const ByteSource& src_;
  ByteSourcePtr owner_;
  const uint8_t* data_;
  uint64_t size_;
  uint64_t pos_ = 0;
};

// Minimum bytes one encoded value of type t takes (for count-vs-bytes-left checks).
uint64_t min_encoded(GgufType t) {
  if (t == GgufType::STRING) return 8;
  if (t == GgufType::ARRAY) return 12;
  return gguf_type_size(t);
}

GgufValue read_value(Cursor& c, GgufType type, const std::string& key, int depth);

GgufValue read_array_body(Cursor& c, const std::string& key, int depth) {
  if (depth > kMaxArrayDepth) c.fail("metadata key " + key + ": arrays nested too deeply");
  const uint32_t et = c.read<uint32_t>("array element type");
  if (!valid_type(et)) c.fail("metadata key " + key + ": invalid array element type " + std::to_string(et));
  const GgufType elem = static_cast<GgufType>(et);
  const uint64_t n = c.read<uint64_t>("array length");
  const uint64_t min = min_encoded(elem);
  if (n > c.left() / min) {
    c.fail("metadata key " + key + ": array length " + std::to_string(n) + " exceeds the bytes left");
  }
  GgufValue v;
  v.type = GgufType::ARRAY;
  v.elem_type = elem;
  if (elem == GgufType::STRING) {
    auto lazy = std::make_shared<GgufLazyStrings>();
    lazy->source = c.owner();
    lazy->begin = c.pos();
    lazy->count = n;
    for (uint64_t i = 0; i < n; ++i) c.skip_string("string");
    v.lazy_strings = std::move(lazy);
  } else if (elem == GgufType::ARRAY) {
    v.array.reserve(n);
    for (uint64_t i = 0; i < n; ++i) v.array.push_back(read_array_body(c, key, depth + 1));
  } else {
    const uint64_t bytes = n * min;
    const uint8_t* p = c.take(bytes, "array data");
    v.raw.assign(p, p + bytes);
  }
  return v;
}

GgufValue read_value(Cursor& c, GgufType type, const std::string& key, int depth) {
  switch (type) {
    case GgufType::UINT8: return GgufValue::u8(c.read<uint8_t>("value"));
    case GgufType::INT8: return GgufValue::i8(c.read<int8_t>("value"));
    case GgufType::UINT16: return GgufValue::u16(c.read<uint16_t>("value"));
    case GgufType::INT16: return GgufValue::i16(c.read<int16_t>("value"));
    case GgufType::UINT32: return GgufValue::u32(c.read<uint32_t>("value"));
    case GgufType::INT32: return GgufValue::i32(c.read<int32_t>("value"));
    case GgufType::UINT64: return GgufValue::u64(c.read<uint64_t>("value"));
    case GgufType::INT64: return GgufValue::i64(c.read<int64_t>("value"));
    case GgufType::FLOAT32: return GgufValue::f32(c.read<float>("value"));
    case GgufType::FLOAT64: return GgufValue::f64(c.read<double>("value"));
    case GgufType::BOOL: return GgufValue::boolean(c.read<uint8_t>("value") != 0);
    case GgufType::STRING: return GgufValue::string(c.read_string("string value", ~0ull));
    case GgufType::ARRAY: return read_array_body(c, key, depth + 1);
  }
  c.fail("metadata key " + key + ": invalid value type");
}

std::string quoted(const std::string& s) { return "'" + fmt::printable(s) + "'"; }

}  // namespace

GgufFile read_gguf(ByteSourcePtr source) {
  if (!source) throw_error(ErrorCode::kInvalidArgument, "read_gguf: null source");
  Cursor c(source);
  const std::string& file = source->name();
  GgufFile out;

  if (source->size() < 4 || std::memcmp(source->data(), "GGUF", 4) != 0) {
    c.fail("not a GGUF file (bad magic)");
  }
  c.take(4, "magic");
  out.version = c.read<uint32_t>("version");
  if (out.version == 1) c.fail("GGUF version 1 is not supported (only 2 and 3)");
  if (out.version != 2 && out.version != 3) {
    if ((out.version & 0xFFFF) == 0 && (out.version >> 24) <= 3) {
      c.fail("big-endian GGUF is not supported");
    }
    c.fail("unsupported GGUF version " + std::to_string(out.version));
  }
  const uint64_t n_tensors = c.read<uint64_t>("tensor count");
  const uint64_t n_kv = c.read<uint64_t>("metadata count");
  // Smallest encodings: a kv is key length (8) + ≥1 key byte + type (4) + ≥1 value byte; a tensor
  // info is name length (8) + ≥1 name byte + n_dims (4) + type (4) + offset (8).
  if (n_kv > c.left() / 14) c.fail("metadata count " + std::to_string(n_kv) + " exceeds the file size");
  if (n_tensors > c.left() / 25) {
    c.fail("tensor count " + std::to_string(n_tensors) + " exceeds the file size");
  }

  for (uint64_t i = 0; i < n_kv; ++i) {
    std::string key = c.read_string("metadata key", kMaxKeyLen);
    if (key.empty()) c.fail("metadata key #" + std::to_string(i) + " is empty");
    if (!fmt::valid_utf8(key)) c.fail("metadata key #" + std::to_string(i) + " is not valid UTF-8");
    if (out.metadata.contains(key)) c.fail("duplicate metadata key " + quoted(key));
    const uint32_t t = c.read<uint32_t>("metadata value type");
    if (!valid_type(t)) c.fail("metadata key " + quoted(key) + ": invalid value type " + std::to_string(t));
    GgufValue v = read_value(c, static_cast<GgufType>(t), key, 0);
    out.metadata.set(key, std::move(v));
  }

  if (const GgufValue* a = out.metadata.find("general.alignment")) {
    if (a->type != GgufType::UINT32) {
      c.fail(std::string("general.alignment must be UINT32, not ") + gguf_type_name(a->type));
    }
    const uint64_t al = a->as_uint();
    if (al == 0 || (al & (al - 1)) != 0 || al > kMaxAlignment) {
      c.fail("general.alignment " + std::to_string(al) + " is not a power of two (≤ 1 MiB)");
    }
    out.alignment = al;
  }

  struct Pending {
    TensorInfo info;
    uint64_t rel_offset;
  };
  std::vector<Pending> infos;
  infos.reserve(n_tensors);
  for (uint64_t i = 0; i < n_tensors; ++i) {
    Pending p;
    p.info.name = c.read_string("tensor name", kMaxNameLen);
    const std::string& name = p.info.name;
    if (name.empty()) c.fail("tensor #" + std::to_string(i) + " has an empty name");
    if (!fmt::valid_utf8(name)) c.fail("tensor #" + std::to_string(i) + " name is not valid UTF-8");
    const uint32_t n_dims = c.read<uint32_t>("tensor dims");
    if (n_dims > kMaxDims) {
      c.fail("tensor " + quoted(name) + ": " + std::to_string(n_dims) + " dimensions (max 4)");
    }
    std::vector<int64_t> ne(n_dims);
    for (uint32_t d = 0; d < n_dims; ++d) {
      const uint64_t x = c.read<uint64_t>("tensor shape");
      if (x > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
        c.fail("tensor " + quoted(name) + ": negative or huge dimension");
      }
      ne[d] = static_cast<int64_t>(x);
    }
    p.info.shape.assign(ne.rbegin(), ne.rend());
    const uint32_t type = c.read<uint32_t>("tensor type");
    if (type >= 1000 || !dtype_traits(type)) {
      c.fail("tensor " + quoted(name) + ": unknown ggml type " + std::to_string(type));
    }
    p.info.dtype = static_cast<DType>(type);
    p.rel_offset = c.read<uint64_t>("tensor offset");
    if (p.rel_offset % out.alignment != 0) {
      c.fail("tensor " + quoted(name) + ": offset " + std::to_string(p.rel_offset) +
             " is not a multiple of the alignment " + std::to_string(out.alignment));
    }
    std::string why;
    auto nb = fmt::tensor_nbytes(p.info.dtype, p.info.shape, &why);
    if (!nb) c.fail("tensor " + quoted(name) + " " + p.info.shape_string() + ": " + why);
    p.info.nbytes = *nb;
    infos.push_back(std::move(p));
  }

  // Data section: after the infos, padded to the alignment.
  const uint64_t end_infos = c.pos();
  const uint64_t pad = (out.alignment - end_infos % out.alignment) % out.alignment;
  out.data_offset = end_infos + pad;
  const uint64_t fsize = source->size();
  if (!infos.empty() && out.data_offset > fsize) {
    c.fail("truncated: tensor data section at offset " + std::to_string(out.data_offset) +
           " starts past the end of the file (size " + std::to_string(fsize) + ")");
  }
  const uint64_t data_size = out.data_offset <= fsize ? fsize - out.data_offset : 0;

  std::vector<size_t> order(infos.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  for (const auto& p : infos) {
    if (p.rel_offset > data_size || p.info.nbytes > data_size - p.rel_offset) {
      c.fail("tensor " + quoted(p.info.name) + ": data [" + std::to_string(p.rel_offset) + ", +" +
             std::to_string(p.info.nbytes) + ") is outside the data section (" + std::to_string(data_size) +
             " bytes)");
    }
  }
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    return infos[a].rel_offset < infos[b].rel_offset;
  });
  for (size_t k = 1; k < order.size(); ++k) {
    const Pending& prev = infos[order[k - 1]];
    const Pending& cur = infos[order[k]];
    if (prev.rel_offset + prev.info.nbytes > cur.rel_offset && cur.info.nbytes > 0 && prev.info.nbytes > 0) {
      c.fail("tensor " + quoted(cur.info.name) + " overlaps tensor " + quoted(prev.info.name));
    }
  }
  for (auto& p : infos) {
    p.info.source = source;
    p.info.offset = out.data_offset + p.rel_offset;
    out.tensors.add(std::move(p.info), file);
  }
  out.sources.push_back(std::move(source));
  return out;
}

namespace {

// "<prefix>-00001-of-00003.gguf" → prefix, part number, count.
bool parse_split_name(const std::string& path, std::string* prefix, int* part, int* count) {
  static const std::string kSuffix = ".gguf";
  if (path.size() < 20 || path.compare(path.size() - kSuffix.size(), kSuffix.size(), kSuffix) != 0) return false;
  const std::string stem = path.substr(0, path.size() - kSuffix.size());
  // stem ends with -NNNNN-of-NNNNN
  if (stem.size() < 15) return false;
  const std::string tail = stem.substr(stem.size() - 15);
  if (tail[0] != '-' || tail.compare(6, 4, "-of-") != 0) return false;
  int a = 0, b = 0;
  for (int i = 1; i <= 5; ++i) {
    if (tail[i] < '0' || tail[i] > '9') return false;
    a = a * 10 + (tail[i] - '0');
  }
  for (int i = 10; i <= 14; ++i) {
    if (tail[i] < '0' || tail[i] > '9') return false;
    b = b * 10 + (tail[i] - '0');
  }
  if (a < 1 || b < 1 || a > b) return false;
  if (prefix) *prefix = stem.substr(0, stem.size() - 15);
  if (part) *part = a;
  if (count) *count = b;
  return true;
}

std::string split_name(const std::string& prefix, int part, int count) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "-%05d-of-%05d.gguf", part, count);
  return prefix + buf;
}

}  // namespace

bool gguf_is_split_first(const std::string& path) {
  int part = 0, count = 0;
  return parse_split_name(path, nullptr, &part, &count) && part == 1;
}

GgufFile read_gguf(const std::string& path) {
  GgufFile first = read_gguf(open_file_source(path));
  const GgufValue* sc = first.metadata.find("split.count");
  if (!sc) return first;
  int64_t count = 0, no = 0;
  try {
    count = first.metadata.get_int("split.count");
    no = first.metadata.get_int("split.no", 0);
  } catch (const Error& e) {
    format_error(path, e.what());
  }
  if (count < 1 || count > 99999) format_error(path, "split.count " + std::to_string(count) + " is invalid");
  if (count == 1) return first;
  std::string prefix;
  int part = 0, name_count = 0;
  if (!parse_split_name(path, &prefix, &part, &name_count)) {
    format_error(path, "split.count is " + std::to_string(count) +
                           " but the file name is not of the form PREFIX-00001-of-0000N.gguf");
  }
  if (no != 0 || part != 1) {
    format_error(path, "is split part " + std::to_string(no + 1) + " of " + std::to_string(count) +
                           "; open the first part (" + split_name(prefix, 1, name_count) + ")");
  }
  if (name_count != count) {
    format_error(path, "file name says " + std::to_string(name_count) + " parts but split.count is " +
                           std::to_string(count));
  }
  for (int i = 2; i <= count; ++i) {
    const std::string p = split_name(prefix, i, static_cast<int>(count));
    ByteSourcePtr part_src;
    try {
      part_src = open_file_source(p);
    } catch (const Error& e) {
      throw_error(e.code(), path + ": split part " + std::to_string(i) + " of " + std::to_string(count) +
                                ": " + e.what());
    }
    GgufFile part_file = read_gguf(std::move(part_src));
    int64_t pno = -1, pcount = -1;
    try {
      pno = part_file.metadata.get_int("split.no", -1);
      pcount = part_file.metadata.get_int("split.count", -1);
    } catch (const Error& e) {
      format_error(p, e.what());
    }
    if (pno != i - 1 || pcount != count) {
      format_error(p, "split.no/split.count (" + std::to_string(pno) + "/" + std::to_string(pcount) +
                          ") do not match its place " + std::to_string(i - 1) + "/" + std::to_string(count));
    }
    for (const auto& [name, info] : part_file.tensors.all()) first.tensors.add(info, p);
    for (auto& s : part_file.sources) first.sources.push_back(std::move(s));
  }
  if (const GgufValue* tc = first.metadata.find("split.tensors.count")) {
    int64_t want = -1;
    try {
      want = tc->as_int();
    } catch (const Error& e) {
      format_error(path, e.what());
    }
    if (want != static_cast<int64_t>(first.tensors.size())) {
      format_error(path, "split.tensors.count is " + std::to_string(want) + " but the parts hold " +
                             std::to_string(first.tensors.size()) + " tensors");
    }
  }
  return first;
}

// ---------------------------------------------------------------------------------------------
// Writer

struct GgufWriter::Pending {
  std::string name;
  DType dtype;
  std::vector<int64_t> shape;
  uint64_t nbytes = 0;
  const void* bytes = nullptr;
  Producer produce;
  uint64_t offset = 0;  // relative to the data section, set at write time
};

GgufWriter::GgufWriter(uint64_t alignment) : alignment_(alignment) {
  if (alignment == 0 || (alignment & (alignment - 1)) != 0 || alignment > kMaxAlignment) {
    throw_error(ErrorCode::kInvalidArgument, "GGUF alignment must be a power of two ≤ 1 MiB");
  }
  if (alignment != 32) metadata_.set("general.alignment", GgufValue::u32(static_cast<uint32_t>(alignment)));
}

void GgufWriter::set_metadata(const std::string& key, GgufValue v) {
  if (key.empty() || key.size() > kMaxKeyLen || !fmt::valid_utf8(key)) {
    throw_error(ErrorCode::kInvalidArgument, "invalid GGUF metadata key '" + fmt::printable(key) + "'");
  }
  if (key == "general.alignment") {
    if (v.type != GgufType::UINT32 || v.as_uint() != alignment_) {
      throw_error(ErrorCode::kInvalidArgument, "general.alignment is set by the GgufWriter constructor");
    }
  }
  metadata_.set(key, std::move(v));
}
void GgufWriter::set_u32(const std::string& k, uint32_t v) { set_metadata(k, GgufValue::u32(v)); }
void GgufWriter::set_i32(const std::string& k, int32_t v) { set_metadata(k, GgufValue::i32(v)); }
void GgufWriter::set_u64(const std::string& k, uint64_t v) { set_metadata(k, GgufValue::u64(v)); }
void GgufWriter::set_f32(const std::string& k, float v) { set_metadata(k, GgufValue::f32(v)); }
void GgufWriter::set_bool(const std::string& k, bool v) { set_metadata(k, GgufValue::boolean(v)); }
void GgufWriter::set_string(const std::string& k, const std::string& v) { set_metadata(k, GgufValue::string(v)); }
void GgufWriter::set_array_i32(const std::string& k, const std::vector<int32_t>& v) {
  set_metadata(k, GgufValue::int_array(GgufType::INT32, std::vector<int64_t>(v.begin(), v.end())));
}
void GgufWriter::set_array_u32(const std::string& k, const std::vector<uint32_t>& v) {
  set_metadata(k, GgufValue::int_array(GgufType::UINT32, std::vector<int64_t>(v.begin(), v.end())));
}
void GgufWriter::set_array_f32(const std::string& k, const std::vector<float>& v) {
  set_metadata(k, GgufValue::float_array(GgufType::FLOAT32, std::vector<double>(v.begin(), v.end())));
}
void GgufWriter::set_array_bool(const std::string& k, const std::vector<bool>& v) {
  set_metadata(k, GgufValue::bool_array(v));
}
void GgufWriter::set_array_string(const std::string& k, const std::vector<std::string>& v) {
  set_metadata(k, GgufValue::string_array(v));
}

namespace {
void check_new_tensor(const std::string& name, DType dtype, const std::vector<int64_t>& shape,
                      uint64_t nbytes) {
  const std::string q = "GGUF tensor '" + fmt::printable(name) + "'";
  if (name.empty() || name.size() > kMaxNameLen || !fmt::valid_utf8(name)) {
    throw_error(ErrorCode::kInvalidArgument, "invalid " + q + " name");
  }
  if (static_cast<uint32_t>(dtype) >= 1000 || !dtype_traits(dtype)) {
    throw_error(ErrorCode::kInvalidArgument, q + ": type " + dtype_name(dtype) + " has no GGUF encoding");
  }
  if (shape.size() > kMaxDims) throw_error(ErrorCode::kInvalidArgument, q + ": more than 4 dimensions");
  std::string why;
  auto nb = fmt::tensor_nbytes(dtype, shape, &why);
  if (!nb) throw_error(ErrorCode::kInvalidArgument, q + ": " + why);
  if (*nb != nbytes) {
    throw_error(ErrorCode::kInvalidArgument, q + ": " + std::to_string(nbytes) + " bytes given, shape needs " +
                                                 std::to_string(*nb));
  }
}
}  // namespace

void GgufWriter::add_tensor(const std::string& name, DType dtype, std::vector<int64_t> shape,
                            const void* bytes, uint64_t nbytes) {
  check_new_tensor(name, dtype, shape, nbytes);
  for (const auto& t : tensors_) {
    if (t->name == name) throw_error(ErrorCode::kInvalidArgument, "duplicate GGUF tensor '" + name + "'");
  }
  auto p = std::make_shared<Pending>();
  p->name = name;
  p->dtype = dtype;
  p->shape = std::move(shape);
  p->nbytes = nbytes;
  p->bytes = bytes;
  tensors_.push_back(std::move(p));
}

void GgufWriter::add_tensor(const std::string& name, DType dtype, std::vector<int64_t> shape,
                            uint64_t nbytes, Producer produce) {
  add_tensor(name, dtype, std::move(shape), nullptr, nbytes);
  tensors_.back()->produce = std::move(produce);
}

namespace {

void put_string(std::vector<uint8_t>& out, const std::string& s) {
  put<uint64_t>(out, s.size());
  out.insert(out.end(), s.begin(), s.end());
}

void put_array_body(std::vector<uint8_t>& out, const GgufValue& v);

void put_value(std::vector<uint8_t>& out, const GgufValue& v) {
  switch (v.type) {
    case GgufType::UINT8: put(out, static_cast<uint8_t>(v.as_uint())); break;
    case GgufType::INT8: put(out, static_cast<int8_t>(v.as_int())); break;
    case GgufType::UINT16: put(out, static_cast<uint16_t>(v.as_uint())); break;
    case GgufType::INT16: put(out, static_cast<int16_t>(v.as_int())); break;
    case GgufType::UINT32: put(out, static_cast<uint32_t>(v.as_uint())); break;
    case GgufType::INT32: put(out, static_cast<int32_t>(v.as_int())); break;
    case GgufType::UINT64: put(out, v.as_uint()); break;
    case GgufType::INT64: put(out, v.as_int()); break;
    case GgufType::FLOAT32: put(out, static_cast<float>(v.as_float())); break;
    case GgufType::FLOAT64: put(out, v.as_float()); break;
    case GgufType::BOOL: put(out, static_cast<uint8_t>(v.as_bool() ? 1 : 0)); break;
    case GgufType::STRING: put_string(out, v.as_string()); break;
    case GgufType::ARRAY: put_array_body(out, v); break;
  }
}

void put_array_body(std::vector<uint8_t>& out, const GgufValue& v) {
  put<uint32_t>(out, static_cast<uint32_t>(v.elem_type));
  put<uint64_t>(out, v.array_size());
  if (v.elem_type == GgufType::STRING) {
    for (const auto& s : v.as_string_array()) put_string(out, s);
  } else if (v.elem_type == GgufType::ARRAY) {
    for (const auto& a : v.array) put_array_body(out, a);
  } else {
    if (v.raw.size() % gguf_type_size(v.elem_type) != 0) {
      throw_error(ErrorCode::kInvalidArgument, "GGUF array raw bytes do not match the element type");
    }
    out.insert(out.end(), v.raw.begin(), v.raw.end());
  }
}

}  // namespace

std::vector<uint8_t> GgufWriter::header_bytes() const {
  std::vector<uint8_t> out;
  out.insert(out.end(), {'G', 'G', 'U', 'F'});
  put<uint32_t>(out, 3);
  put<uint64_t>(out, tensors_.size());
  put<uint64_t>(out, metadata_.entries().size());
  for (const auto& [k, v] : metadata_.entries()) {
    put_string(out, k);
    put<uint32_t>(out, static_cast<uint32_t>(v.type));
    put_value(out, v);
  }
  uint64_t off = 0;
  for (const auto& t : tensors_) {
    put_string(out, t->name);
    put<uint32_t>(out, static_cast<uint32_t>(t->shape.size()));
    for (auto it = t->shape.rbegin(); it != t->shape.rend(); ++it) put<uint64_t>(out, static_cast<uint64_t>(*it));
    put<uint32_t>(out, static_cast<uint32_t>(t->dtype));
    put<uint64_t>(out, off);
    t->offset = off;
    off += t->nbytes;
    off += (alignment_ - off % alignment_) % alignment_;
  }
  out.resize(out.size() + (alignment_ - out.size() % alignment_) % alignment_, 0);
  return out;
}

void GgufWriter::emit(const std::function<void(const uint8_t*, uint64_t)>& sink) const {
  const std::vector<uint8_t> header = header_bytes();
  sink(header.data(), header.size());
  std::vector<uint8_t> buf;
  static const uint8_t kZeros[256] = {};
  uint64_t pos = 0;
  for (const auto& t : tensors_) {
    if (pos != t->offset) throw_error(ErrorCode::kInternal, "GGUF writer: tensor layout mismatch");
    const uint8_t* src = static_cast<const uint8_t*>(t->bytes);
    if (t->produce) {
      buf.assign(t->nbytes, 0);
      t->produce(buf.data(), t->nbytes);
      src = buf.data();
    }
    if (t->nbytes) {
      if (!src) throw_error(ErrorCode::kInvalidArgument, "GGUF tensor '" + t->name + "' has no data");
      sink(src, t->nbytes);
    }
    pos += t->nbytes;
    uint64_t pad = (alignment_ - pos % alignment_) % alignment_;
    pos += pad;
    while (pad > 0) {
      const uint64_t k = std::min<uint64_t>(pad, sizeof kZeros);
      sink(kZeros, k);
      pad -= k;
    }
  }
}

std::vector<uint8_t> GgufWriter::write_to_memory() const {
  std::vector<uint8_t> out;
  emit([&](const uint8_t* p, uint64_t n) { out.insert(out.end(), p, p + n); });
  return out;
}

void GgufWriter::write(const std::string& path, bool with_meter) const {
  // Progress (core/progress.h): MiB written of the tensors' total; converting and quantising
  // happen in the producers, so this is the progress of `convert` and `quantize` too.
  double total = 0;
  for (const auto& t : tensors_) total += static_cast<double>(t->nbytes);
  constexpr double kMiB = 1024.0 * 1024.0;
  ProgressMeter meter("writing " + path.substr(path.find_last_of('/') + 1), "MiB", "", with_meter);
  double done = 0;
  write_file_atomic(path, [&](std::FILE* f) {
    emit([&](const uint8_t* p, uint64_t n) {
      if (std::fwrite(p, 1, n, f) != n) throw_error(ErrorCode::kIo, path + ": write failed");
      done += static_cast<double>(n);
      meter.update(std::min(done, total) / kMiB, total / kMiB);  // (the header is not counted)
    });
  });
}

}  // namespace oxi
