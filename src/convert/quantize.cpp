// `oxinfer quantize`: GGUF → GGUF with one of llama-quantize's recipes (quant_recipe.h).
#include <cmath>
#include <cstdio>
#include <cstring>

#include "convert/quant_recipe.h"
#include "core/error.h"
#include "format/gguf.h"
#include "kernels/matmul.h"

namespace oxi {

namespace {

bool is_float(DType t) { return t == DType::F32 || t == DType::F16 || t == DType::BF16; }

int64_t meta_int0(const GgufMetadata& md, const std::string& key, int64_t def) {
  const GgufValue* v = md.find(key);
  if (!v) return def;
  if (v->is_array()) return v->array_size() ? v->element(0).as_int() : def;
  return v->as_int();
}

bool f16_finite(const uint8_t* p) {
  uint16_t h;
  std::memcpy(&h, p, 2);
  return (h & 0x7C00) != 0x7C00;
}

// ggml_validate_row_data's check, which llama-quantize runs on every tensor it converts: the f16
// scales (and mins) of each block — or every value of a float type — must be finite. Values
// beyond the f16 range (e.g. |x| ≳ 65504·15 for Q4_1's d) fail it. Returns false on the first bad one.
bool quantized_finite(DType t, const uint8_t* p, uint64_t nbytes) {
  switch (t) {
    case DType::F32:
      for (uint64_t i = 0; i + 4 <= nbytes; i += 4) {
        float v;
        std::memcpy(&v, p + i, 4);
        if (!std::isfinite(v)) return false;
      }
      return true;
    case DType::F16:
      for (uint64_t i = 0; i + 2 <= nbytes; i += 2)
        if (!f16_finite(p + i)) return false;
      return true;
    case DType::BF16:
      for (uint64_t i = 0; i + 2 <= nbytes; i += 2) {
        uint16_t h;
        std::memcpy(&h, p + i, 2);
        if ((h & 0x7F80) == 0x7F80) return false;
      }
      return true;
    default: break;
  }
  // (block bytes, offsets of its f16 scale fields)
  struct Fields { uint32_t block; int a, b; };
  Fields f{0, -1, -1};
  switch (t) {
    case DType::Q4_0: f = {18, 0, -1}; break;
    case DType::Q4_1: f = {20, 0, 2}; break;
    case DType::Q5_0: f = {22, 0, -1}; break;
    case DType::Q5_1: f = {24, 0, 2}; break;
    case DType::Q8_0: f = {34, 0, -1}; break;
    case DType::IQ4_NL: f = {18, 0, -1}; break;
    case DType::Q3_K: f = {110, 108, -1}; break;
    case DType::Q4_K: f = {144, 0, 2}; break;
    case DType::Q5_K: f = {176, 0, 2}; break;
    case DType::Q6_K: f = {210, 208, -1}; break;
    case DType::IQ4_XS: f = {136, 0, -1}; break;
    default: return true;
  }
  for (uint64_t o = 0; o + f.block <= nbytes; o += f.block) {
    if (!f16_finite(p + o + f.a)) return false;
    if (f.b >= 0 && !f16_finite(p + o + f.b)) return false;
  }
  return true;
}

}  // namespace

void quantize_gguf(const std::string& in_path, const std::string& out_path, const QuantFileType& ft,
                   const QuantizeOptions& options) {
  const GgufFile in = read_gguf(in_path);
  const std::string arch = in.metadata.get_string("general.architecture", "");
  QuantModelInfo model;
  model.arch = arch;
  model.n_layer_all = meta_int0(in.metadata, arch + ".block_count", 0);
  model.n_expert = meta_int0(in.metadata, arch + ".expert_count", 0);
  if (model.n_expert <= 1) model.n_expert = 0;
  const int64_t n_head = meta_int0(in.metadata, arch + ".attention.head_count", 0);
  const int64_t n_head_kv = meta_int0(in.metadata, arch + ".attention.head_count_kv", n_head);
  model.n_gqa = n_head_kv > 0 ? n_head / n_head_kv : 0;

  // Tensors in llama.cpp's order (the recipe's layer counters run in it; the file follows it too).
  std::vector<const TensorInfo*> src;
  std::vector<std::string> names;
  for (const auto& [name, t] : in.tensors.all()) {
    src.push_back(&t);
    names.push_back(name);
  }
  const std::vector<size_t> order = llama_tensor_order(names);
  std::vector<QuantTensorInfo> infos;
  for (size_t k : order) {
    QuantTensorInfo qi;
    qi.name = src[k]->name;
    qi.ne.assign(src[k]->shape.rbegin(), src[k]->shape.rend());
    qi.type = src[k]->dtype;
    infos.push_back(std::move(qi));
  }
  const std::vector<DType> target = quant_recipe_types(ft, model, infos, options.pure);

  for (size_t i = 0; i < infos.size(); ++i) {
    const DType from = infos[i].type, to = target[i];
    if (from == to) continue;
    if (!is_float(from) && !options.allow_requantize)
      throw_error(ErrorCode::kInvalidArgument, in_path + ": requantizing from type " + dtype_name(from) + " (tensor " +
                                                   infos[i].name + ") is disabled: pass --allow-requantize to dequantise "
                                                   "and quantise it again (quality suffers; prefer the f16/bf16 original)");
    if (!quantize_supports(to))
      throw_error(ErrorCode::kUnsupported, "quantize: no quantiser for " + dtype_name(to) + " (tensor " + infos[i].name + ")");
  }

  GgufWriter w(in.alignment);
  for (const auto& [key, v] : in.metadata.entries()) {
    if (key == "general.file_type" || key == "general.quantization_version" || key == "split.no" ||
        key == "split.count" || key == "split.tensors.count")
      continue;
    w.set_metadata(key, v);
  }
  w.set_u32("general.quantization_version", 2);
  w.set_u32("general.file_type", ft.ftype);

  const size_t n = infos.size();
  for (size_t i = 0; i < n; ++i) {
    const TensorInfo* t = src[order[i]];
    const DType to = target[i];
    const int64_t cols = t->shape.empty() ? 1 : t->shape.back();
    const int64_t rows = cols ? t->n_elements() / cols : 0;
    const auto rb = dtype_row_bytes(to, static_cast<uint64_t>(cols));
    if (!rb) throw_error(ErrorCode::kInternal, "quantize: row size of " + t->name);
    const uint64_t nbytes = *rb * static_cast<uint64_t>(rows);
    const bool progress = options.progress;
    w.add_tensor(t->name, to, t->shape, nbytes, [t, to, rows, cols, i, n, progress](uint8_t* dst, uint64_t nb) {
      if (progress)
        std::fprintf(stderr, "[%4zu/%4zu] %-40s %6s -> %s\n", i + 1, n, t->name.c_str(), dtype_name(t->dtype).c_str(),
                     dtype_name(to).c_str());
      if (t->dtype == to) {
        std::memcpy(dst, t->data(), nb);
        return;
      }
      const auto src_rb = dtype_row_bytes(t->dtype, static_cast<uint64_t>(cols));
      if (!src_rb) throw_error(ErrorCode::kFormat, t->name + ": rows do not fit " + dtype_name(t->dtype) + " blocks");
      const MatrixView m{t->dtype, rows, cols, t->data(), *src_rb};
      quantize_rows(to, rows, cols, dst, [&m](int64_t r, float* row, float*) { dequantize_row(m, r, row); });
      if (!quantized_finite(to, dst, nb))
        throw_error(ErrorCode::kInvalidArgument, "quantize: tensor " + t->name + ": quantized data validation failed (a " +
                                                     dtype_name(to) + " scale is not finite: values beyond the f16 range "
                                                     "or non-finite input), as llama-quantize refuses it");
    });
  }
  w.write(out_path, /*meter=*/!options.progress);  // the per-tensor lines are its progress
}

}  // namespace oxi
