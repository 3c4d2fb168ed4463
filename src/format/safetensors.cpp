// safetensors reader/writer. The JSON header is parsed with nlohmann::json; a parser callback
// rejects duplicate top-level keys (nlohmann would keep the last silently) and deep nesting.
#include "format/safetensors.h"

#include <algorithm>
#include <cstring>
#include <set>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "format/util.h"

namespace oxi {

namespace {

constexpr uint64_t kMaxHeader = 100ull << 20;  // 100 MiB, as the reference implementation
constexpr int kMaxJsonDepth = 16;

struct DtypeName {
  const char* name;
  DType type;
};
constexpr DtypeName kDtypes[] = {
    {"F64", DType::F64}, {"F32", DType::F32}, {"F16", DType::F16}, {"BF16", DType::BF16},
    {"I64", DType::I64}, {"I32", DType::I32}, {"I16", DType::I16}, {"I8", DType::I8},
    {"U8", DType::U8},   {"BOOL", DType::BOOL}, {"U32", DType::U32},
};

std::string q(const std::string& s) { return "'" + fmt::printable(s) + "'"; }

}  // namespace

DType safetensors_dtype(const std::string& s, const std::string& file, const std::string& tensor) {
  for (const auto& d : kDtypes) {
    if (s == d.name) return d.type;
  }
  if (s == "F8_E4M3" || s == "F8_E5M2" || s == "U16" || s == "U64" || s == "F8_E8M0" ||
      s == "F4") {
    throw_error(ErrorCode::kUnsupported, file + ": tensor " + q(tensor) + ": dtype " + s + " is not supported");
  }
  format_error(file, "tensor " + q(tensor) + ": unknown dtype " + q(s));
}

const char* safetensors_dtype_name(DType t) {
  for (const auto& d : kDtypes) {
    if (d.type == t) return d.name;
  }
  return nullptr;
}

SafetensorsFile read_safetensors(const std::string& path) { return read_safetensors(open_file_source(path)); }

SafetensorsFile read_safetensors(ByteSourcePtr source) {
  if (!source) throw_error(ErrorCode::kInvalidArgument, "read_safetensors: null source");
  const std::string& file = source->name();
  const uint64_t fsize = source->size();
  if (fsize < 8) format_error(file, "truncated: not a safetensors file (" + std::to_string(fsize) + " bytes)");
  uint64_t n = 0;
  std::memcpy(&n, source->data(), 8);
  if (n > kMaxHeader) format_error(file, "safetensors header length " + std::to_string(n) + " exceeds 100 MiB");
  if (n > fsize - 8) {
    format_error(file, "truncated: safetensors header length " + std::to_string(n) + " exceeds the file size " +
                           std::to_string(fsize));
  }
  if (n < 2) format_error(file, "safetensors header is too short");
  const char* hp = reinterpret_cast<const char*>(source->data() + 8);
  if (hp[0] != '{') format_error(file, "safetensors header does not start with '{'");

  std::set<std::string> top_keys;
  std::string dup;
  nlohmann::json::parser_callback_t cb = [&](int depth, nlohmann::json::parse_event_t ev,
                                             nlohmann::json& parsed) -> bool {
    if (depth > kMaxJsonDepth) throw_error(ErrorCode::kFormat, "safetensors header nested too deeply");
    if (ev == nlohmann::json::parse_event_t::key && depth == 1) {
      const std::string& k = parsed.get_ref<const std::string&>();
      if (!top_keys.insert(k).second && dup.empty()) dup = k;
    }
    return true;
  };
  nlohmann::json header;
  try {
    header = nlohmann::json::parse(hp, hp + n, cb, /*allow_exceptions=*/true);
  } catch (const nlohmann::json::exception& e) {
    // nlohmann messages are one line; keep only the part after the "[json.exception...]" tag.
    std::string m = e.what();
    if (auto p = m.find("] "); p != std::string::npos) m = m.substr(p + 2);
    if (auto p = m.find("; last read"); p != std::string::npos) m = m.substr(0, p);  // echoes raw bytes
    format_error(file, "bad safetensors header JSON: " + m);
  } catch (const Error& e) {
    format_error(file, e.what());
  }
  if (!dup.empty()) format_error(file, "duplicate tensor " + q(dup) + " in the safetensors header");
  if (!header.is_object()) format_error(file, "safetensors header is not a JSON object");

  SafetensorsFile out;
  const uint64_t data_start = 8 + n;
  const uint64_t data_size = fsize - data_start;
  struct Span {
    uint64_t begin, end;
    const std::string* name;
  };
  std::vector<Span> spans;
  std::vector<TensorInfo> infos;
  for (auto it = header.begin(); it != header.end(); ++it) {
    const std::string& name = it.key();
    const nlohmann::json& v = it.value();
    if (name == "__metadata__") {
      if (!v.is_object()) format_error(file, "__metadata__ is not an object");
      for (auto m = v.begin(); m != v.end(); ++m) {
        if (!m.value().is_string()) format_error(file, "__metadata__ value " + q(m.key()) + " is not a string");
        out.metadata[m.key()] = m.value().get<std::string>();
      }
      continue;
    }
    if (name.empty()) format_error(file, "tensor with an empty name");
    if (!v.is_object()) format_error(file, "tensor " + q(name) + ": entry is not an object");
    auto dt = v.find("dtype");
    auto sh = v.find("shape");
    auto of = v.find("data_offsets");
    if (dt == v.end() || !dt->is_string()) format_error(file, "tensor " + q(name) + ": missing or non-string dtype");
    if (sh == v.end() || !sh->is_array()) format_error(file, "tensor " + q(name) + ": missing or non-array shape");
    if (of == v.end() || !of->is_array() || of->size() != 2) {
      format_error(file, "tensor " + q(name) + ": data_offsets must be [begin, end]");
    }
    TensorInfo info;
    info.name = name;
    info.dtype = safetensors_dtype(dt->get<std::string>(), file, name);
    if (sh->size() > 16) format_error(file, "tensor " + q(name) + ": too many dimensions");
    for (const auto& d : *sh) {
      if (!d.is_number_integer() || (!d.is_number_unsigned() && d.get<int64_t>() < 0)) {
        format_error(file, "tensor " + q(name) + ": shape entries must be non-negative integers");
      }
      const uint64_t u = d.get<uint64_t>();
      if (u > static_cast<uint64_t>(INT64_MAX)) format_error(file, "tensor " + q(name) + ": dimension too large");
      info.shape.push_back(static_cast<int64_t>(u));
    }
    for (const auto& o : *of) {
      if (!o.is_number_unsigned() && !(o.is_number_integer() && o.get<int64_t>() >= 0)) {
        format_error(file, "tensor " + q(name) + ": data_offsets must be non-negative integers");
      }
    }
    const uint64_t b = (*of)[0].get<uint64_t>(), e = (*of)[1].get<uint64_t>();
    if (b > e) format_error(file, "tensor " + q(name) + ": data_offsets begin > end");
    if (e > data_size) {
      format_error(file, "tensor " + q(name) + ": data_offsets [" + std::to_string(b) + ", " + std::to_string(e) +
                             ") are outside the data (" + std::to_string(data_size) + " bytes)");
    }
    std::string why;
    auto nb = fmt::tensor_nbytes(info.dtype, info.shape, &why);
    if (!nb) format_error(file, "tensor " + q(name) + " " + info.shape_string() + ": " + why);
    if (*nb != e - b) {
      format_error(file, "tensor " + q(name) + " " + info.shape_string() + " " + dtype_name(info.dtype) + ": needs " +
                             std::to_string(*nb) + " bytes but data_offsets span " + std::to_string(e - b));
    }
    info.source = source;
    info.offset = data_start + b;
    info.nbytes = *nb;
    infos.push_back(std::move(info));
    spans.push_back({b, e, nullptr});
  }
  for (size_t i = 0; i < infos.size(); ++i) spans[i].name = &infos[i].name;
  std::sort(spans.begin(), spans.end(), [](const Span& a, const Span& b) {
    return a.begin != b.begin ? a.begin < b.begin : a.end < b.end;
  });
  for (size_t i = 1; i < spans.size(); ++i) {
    if (spans[i].begin < spans[i - 1].end) {
      format_error(file, "tensor " + q(*spans[i].name) + " overlaps tensor " + q(*spans[i - 1].name));
    }
  }
  for (auto& info : infos) out.tensors.add(std::move(info), file);
  return out;
}

// ---------------------------------------------------------------------------------------------
// Writer

void SafetensorsWriter::add_tensor(const std::string& name, DType dtype, std::vector<int64_t> shape,
                                   std::vector<uint8_t> bytes) {
  const std::string qn = "safetensors tensor " + q(name);
  if (name.empty() || name == "__metadata__" || !fmt::valid_utf8(name)) {
    throw_error(ErrorCode::kInvalidArgument, "invalid " + qn + " name");
  }
  if (!safetensors_dtype_name(dtype)) {
    throw_error(ErrorCode::kInvalidArgument, qn + ": type " + dtype_name(dtype) + " has no safetensors dtype");
  }
  std::string why;
  auto nb = fmt::tensor_nbytes(dtype, shape, &why);
  if (!nb) throw_error(ErrorCode::kInvalidArgument, qn + ": " + why);
  if (*nb != bytes.size()) {
    throw_error(ErrorCode::kInvalidArgument, qn + ": " + std::to_string(bytes.size()) + " bytes given, shape needs " +
                                                 std::to_string(*nb));
  }
  for (const auto& e : entries_) {
    if (e.name == name) throw_error(ErrorCode::kInvalidArgument, "duplicate " + qn);
  }
  entries_.push_back({name, dtype, std::move(shape), std::move(bytes)});
}

void SafetensorsWriter::set_metadata(const std::string& key, const std::string& value) {
  if (!fmt::valid_utf8(key) || !fmt::valid_utf8(value)) {
    throw_error(ErrorCode::kInvalidArgument, "safetensors metadata " + q(key) + " is not valid UTF-8");
  }
  metadata_[key] = value;
}

std::vector<uint8_t> SafetensorsWriter::write_to_memory() const {
  // Header keys are written in nlohmann's (sorted) order; data in insertion order, contiguous.
  nlohmann::json h = nlohmann::json::object();
  if (!metadata_.empty()) {
    nlohmann::json m = nlohmann::json::object();
    for (const auto& [k, v] : metadata_) m[k] = v;
    h["__metadata__"] = m;
  }
  uint64_t off = 0;
  for (const auto& e : entries_) {
    nlohmann::json t;
    t["dtype"] = safetensors_dtype_name(e.dtype);
    t["shape"] = e.shape;
    t["data_offsets"] = {off, off + e.bytes.size()};
    off += e.bytes.size();
    h[e.name] = t;
  }
  std::string js = h.dump();
  while (js.size() % 8 != 0) js += ' ';  // pad so the data starts 8-byte aligned
  std::vector<uint8_t> out(8);
  const uint64_t n = js.size();
  std::memcpy(out.data(), &n, 8);
  out.insert(out.end(), js.begin(), js.end());
  out.reserve(out.size() + off);
  for (const auto& e : entries_) out.insert(out.end(), e.bytes.begin(), e.bytes.end());
  return out;
}

void SafetensorsWriter::write(const std::string& path) const {
  const std::vector<uint8_t> bytes = write_to_memory();
  write_file_atomic(path, bytes.data(), bytes.size());
}

}  // namespace oxi
