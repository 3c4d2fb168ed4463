// MLX checkpoint → HF names and layouts (format/mlx.h). Only files and names: no model knowledge
// beyond the renames mlx-lm's sanitize makes for the families we run.
#include "format/mlx.h"

#include <cstring>
#include <map>
#include <optional>
#include <set>

#include "core/error.h"
#include "core/half.h"
#include "format/util.h"

namespace oxi {

namespace {

bool starts(const std::string& s, const char* p) { return s.rfind(p, 0) == 0; }
bool ends(const std::string& s, const std::string& p) {
  return s.size() >= p.size() && s.compare(s.size() - p.size(), p.size(), p) == 0;
}

struct Quant {
  int bits = 0, group = 0;
};

std::string shape_of(const std::vector<int64_t>& s) {
  std::string r = "[";
  for (size_t i = 0; i < s.size(); ++i) r += (i ? ", " : "") + std::to_string(s[i]);
  return r + "]";
}

// "quantization" (mlx-lm), else a "quantization_config" that is not another method's (GPTQ, AWQ…
// name a quant_method; MLX's copy does not).
const nlohmann::json* quant_config(const nlohmann::json& config) {
  if (auto q = config.find("quantization"); q != config.end() && q->is_object()) return &*q;
  if (auto q = config.find("quantization_config"); q != config.end() && q->is_object() && !q->contains("quant_method") &&
                                                    q->contains("bits"))
    return &*q;
  return nullptr;
}

int int_field(const nlohmann::json& o, const char* key, int dflt, const std::string& where) {
  auto it = o.find(key);
  if (it == o.end() || it->is_null()) return dflt;
  if (!it->is_number_integer()) throw_error(ErrorCode::kFormat, where + ": quantization \"" + key + "\" is not an integer");
  const int64_t v = it->get<int64_t>();
  if (v < 0 || v > 1024) throw_error(ErrorCode::kUnsupported, where + ": quantization " + key + "=" + std::to_string(v) + " is not supported");
  return static_cast<int>(v);
}

Quant read_quant(const nlohmann::json& o, Quant dflt, const std::string& where) {
  if (auto m = o.find("mode"); m != o.end() && !m->is_null() && !(m->is_string() && m->get<std::string>() == "affine"))
    throw_error(ErrorCode::kUnsupported, where + ": MLX quantization mode " + fmt::printable(m->dump()) +
                                             " is not supported (only \"affine\": scales and biases)");
  Quant q;
  q.bits = int_field(o, "bits", dflt.bits, where);
  q.group = int_field(o, "group_size", dflt.group, where);
  return q;
}

float scalar_f32(DType t, const uint8_t* p) {
  uint16_t h;
  float f;
  switch (t) {
    case DType::F32: std::memcpy(&f, p, 4); return f;
    case DType::F16: std::memcpy(&h, p, 2); return f16_to_f32(h);
    default: std::memcpy(&h, p, 2); return bf16_to_f32(h);
  }
}

TensorInfo memory_tensor(const std::string& name, DType dtype, std::vector<int64_t> shape, std::vector<uint8_t> bytes) {
  TensorInfo t;
  t.name = name;
  t.dtype = dtype;
  t.shape = std::move(shape);
  t.nbytes = bytes.size();
  t.source = memory_source(std::move(bytes), "MLX tensor " + name);
  t.offset = 0;
  return t;
}

// P.weight (U32 codes) + P.scales + P.biases → one tensor of MLX_Q{bits}_G{group} blocks, shape
// [..., out, in] as the float original.
TensorInfo repack(const std::string& dir, const std::string& base, const TensorInfo& w, const TensorInfo& s,
                  const TensorInfo& b, Quant q) {
  const auto dt = mlx_dtype(q.bits, q.group);
  if (!dt)
    throw_error(ErrorCode::kUnsupported, dir + ": " + base + ": MLX quantization with bits=" + std::to_string(q.bits) +
                                             ", group_size=" + std::to_string(q.group) +
                                             " is not supported (bits 4 or 8, group size 32, 64 or 128)");
  auto bad = [&](const std::string& what) { throw_error(ErrorCode::kFormat, dir + ": " + base + ": " + what); };
  if (w.dtype != DType::U32) bad("weight is " + dtype_name(w.dtype) + ", expected U32 codes (it has scales and biases)");
  if (s.dtype != DType::F16 && s.dtype != DType::BF16 && s.dtype != DType::F32) bad("scales are " + dtype_name(s.dtype) + ", expected F16, BF16 or F32");
  if (b.dtype != s.dtype) bad("biases are " + dtype_name(b.dtype) + " but scales " + dtype_name(s.dtype));
  if (w.shape.size() < 2 || w.shape.back() <= 0) bad("weight has shape " + shape_of(w.shape) + ", expected [..., out, in*bits/32]");
  const int64_t in = w.shape.back() * 32 / q.bits;
  std::vector<int64_t> want = w.shape;
  want.back() = in / q.group;
  if (in % q.group != 0 || s.shape != want)
    bad("scales have shape " + shape_of(s.shape) + ", expected " + shape_of(want) + " (weight " + shape_of(w.shape) + " holds " +
        std::to_string(in) + " inputs at " + std::to_string(q.bits) + " bits, groups of " + std::to_string(q.group) + ")");
  if (b.shape != s.shape) bad("biases have shape " + shape_of(b.shape) + ", expected " + shape_of(s.shape) + " (as the scales)");
  const int64_t rows = w.n_elements() / w.shape.back();
  const int64_t groups = in / q.group;
  const uint64_t code_bytes = static_cast<uint64_t>(q.group * q.bits / 8);
  const uint64_t block = 8 + code_bytes;
  const uint64_t sbytes = s.dtype == DType::F32 ? 4 : 2;
  std::vector<uint8_t> out(static_cast<size_t>(static_cast<uint64_t>(rows) * static_cast<uint64_t>(groups) * block));
  // The codes of a group are contiguous bytes of the little-endian words (element 2j in the low
  // nibble of byte j at 4 bits): copied as they are.
  const uint8_t* wc = w.data();
  const uint8_t* sc = s.data();
  const uint8_t* bc = b.data();
  uint8_t* o = out.data();
  for (int64_t g = 0; g < rows * groups; ++g, o += block) {
    const float sv = scalar_f32(s.dtype, sc + static_cast<uint64_t>(g) * sbytes);
    const float bv = scalar_f32(b.dtype, bc + static_cast<uint64_t>(g) * sbytes);
    std::memcpy(o, &sv, 4);
    std::memcpy(o + 4, &bv, 4);
    std::memcpy(o + 8, wc + static_cast<uint64_t>(g) * code_bytes, code_bytes);
  }
  w.source->release(w.offset, w.nbytes);
  s.source->release(s.offset, s.nbytes);
  b.source->release(b.offset, b.nbytes);
  std::vector<int64_t> shape = w.shape;
  shape.back() = in;
  return memory_tensor(base + ".weight", *dt, std::move(shape), std::move(out));
}

// mlx-lm's names → the HF original's.
std::string hf_name(const std::string& n) {
  if (starts(n, "language_model.model.")) return "model.language_model." + n.substr(21);
  if (starts(n, "language_model.lm_head.")) return n.substr(15);
  if (starts(n, "language_model.")) return "model.language_model." + n.substr(15);
  return n;
}

// Rows of a tensor (all dims but the last) and the bytes of one.
uint64_t row_bytes(const TensorInfo& t) { return dtype_row_bytes(t.dtype, static_cast<uint64_t>(t.shape.back())).value_or(0); }

}  // namespace

bool apply_mlx_layout(HfCheckpoint& ck) {
  const nlohmann::json* qc = quant_config(ck.config);
  bool mlx_names = false;
  for (const auto& [name, t] : ck.tensors.all()) mlx_names = mlx_names || starts(name, "language_model.");
  if (!qc && !mlx_names) {
    for (const auto& [name, t] : ck.tensors.all())
      if (ends(name, ".scales") && ck.tensors.contains(name.substr(0, name.size() - 7) + ".biases"))
        throw_error(ErrorCode::kFormat, ck.dir + ": tensor " + name + " looks MLX-quantised but config.json has no \"quantization\"");
    return false;
  }
  const std::string where = ck.dir + "/config.json";
  const Quant dflt = qc ? read_quant(*qc, Quant{}, where) : Quant{};

  // 1. Quantised modules → block tensors; everything else kept.
  std::vector<TensorInfo> out;
  std::set<std::string> used;
  for (const auto& [name, t] : ck.tensors.all()) {
    if (!ends(name, ".scales")) continue;
    const std::string base = name.substr(0, name.size() - 7);
    const TensorInfo* w = ck.tensors.find(base + ".weight");
    const TensorInfo* b = ck.tensors.find(base + ".biases");
    if (!w || !b) throw_error(ErrorCode::kFormat, ck.dir + ": " + name + " has no " + (w ? base + ".biases" : base + ".weight"));
    if (!qc) throw_error(ErrorCode::kFormat, ck.dir + ": tensor " + name + " is MLX-quantised but config.json has no \"quantization\"");
    Quant q = dflt;
    if (auto o = qc->find(base); o != qc->end() && o->is_object()) q = read_quant(*o, dflt, where + " (\"" + fmt::printable(base) + "\")");
    out.push_back(repack(ck.dir, base, *w, t, *b, q));
    used.insert(name);
    used.insert(base + ".weight");
    used.insert(base + ".biases");
  }
  for (const auto& [name, t] : ck.tensors.all()) {
    if (used.count(name)) continue;
    if (t.dtype == DType::U32)
      throw_error(ErrorCode::kFormat, ck.dir + ": tensor " + name + " is U32 but has no .scales/.biases beside it");
    out.push_back(t);
  }

  // 2. Names and layouts of the HF original.
  const std::string arch = ck.config.value("model_type", std::string());
  const bool qwen35 = starts(arch, "qwen3_5");
  bool mlx_conv = false;  // conv1d in mlx's [C, K, 1]: mlx-lm sanitised it, and added 1 to the norms
  for (TensorInfo& t : out) {
    t.name = hf_name(t.name);
    if (qwen35 && ends(t.name, "conv1d.weight") && t.shape.size() == 3 && t.shape[2] == 1 && t.shape[1] > 1) {
      t.shape = {t.shape[0], 1, t.shape[1]};  // same bytes: only the unit axis moves
      mlx_conv = true;
    }
  }
  TensorIndex idx;
  std::map<std::string, std::vector<const TensorInfo*>> ple;  // Gemma 4's per-layer tables
  std::map<std::string, const TensorInfo*> by_name;
  for (const TensorInfo& t : out) by_name[t.name] = &t;
  for (const TensorInfo& t : out) {
    const std::string& n = t.name;
    if (qwen35 && mlx_conv && t.shape.size() == 1 &&
        (ends(n, ".input_layernorm.weight") || ends(n, ".post_attention_layernorm.weight") || n == "model.language_model.norm.weight" ||
         ends(n, ".q_norm.weight") || ends(n, ".k_norm.weight"))) {
      // mlx-lm stored 1 + w for Qwen's (1 + w) RMSNorm: back to w (in f32, exact for bf16/f16 input).
      std::vector<uint8_t> bytes(static_cast<size_t>(t.shape[0]) * 4);
      const uint64_t es = dtype_traits(t.dtype)->block_bytes;
      for (int64_t i = 0; i < t.shape[0]; ++i) {
        const float v = scalar_f32(t.dtype, t.data() + static_cast<uint64_t>(i) * es) - 1.0f;
        std::memcpy(bytes.data() + i * 4, &v, 4);
      }
      idx.add(memory_tensor(n, DType::F32, t.shape, std::move(bytes)), ck.dir);
      continue;
    }
    const std::string sw = ".mlp.switch_mlp.";
    if (const size_t p = n.find(sw); p != std::string::npos && t.shape.size() == 3) {
      const std::string pre = n.substr(0, p) + ".mlp.";
      if (ends(n, "switch_mlp.down_proj.weight")) {
        TensorInfo d = t;
        d.name = pre + "experts.down_proj";
        idx.add(d, ck.dir);
        continue;
      }
      if (ends(n, "switch_mlp.up_proj.weight")) continue;  // merged with gate_proj below
      if (ends(n, "switch_mlp.gate_proj.weight")) {
        auto up = by_name.find(n.substr(0, n.size() - 16) + "up_proj.weight");
        if (up == by_name.end() || up->second->shape != t.shape || up->second->dtype != t.dtype)
          throw_error(ErrorCode::kFormat, ck.dir + ": " + n + " has no matching switch_mlp.up_proj.weight");
        // HF experts.gate_up_proj [E, 2I, d]: per expert the gate rows, then the up rows.
        const int64_t E = t.shape[0], I = t.shape[1];
        const uint64_t rb = row_bytes(t), per = rb * static_cast<uint64_t>(I);
        std::vector<uint8_t> bytes(static_cast<size_t>(per * 2 * static_cast<uint64_t>(E)));
        for (int64_t e = 0; e < E; ++e) {
          std::memcpy(bytes.data() + 2 * per * e, t.data() + per * e, per);
          std::memcpy(bytes.data() + 2 * per * e + per, up->second->data() + per * e, per);
        }
        idx.add(memory_tensor(pre + "experts.gate_up_proj", t.dtype, {E, 2 * I, t.shape[2]}, std::move(bytes)), ck.dir);
        continue;
      }
    }
    const std::string pl = "model.language_model.embed_tokens_per_layer.";
    if (starts(n, pl.c_str()) && ends(n, ".weight") && n.size() > pl.size() + 7 && t.shape.size() == 2) {
      ple[pl + "weight"].push_back(&t);
      continue;
    }
    idx.add(t, ck.dir);
  }
  for (auto& [name, parts] : ple) {
    // mlx-lm splits Gemma 4's [V, L·P] table into L tables [V, P] (ordered by layer): join them.
    std::vector<const TensorInfo*> by_layer(parts.size(), nullptr);
    const std::string pl = "model.language_model.embed_tokens_per_layer.";
    for (const TensorInfo* t : parts) {
      const std::string num = t->name.substr(pl.size(), t->name.size() - pl.size() - 7);
      size_t i = 0;
      try {
        i = static_cast<size_t>(std::stoul(num));
      } catch (...) {
        i = parts.size();
      }
      if (i >= parts.size() || by_layer[i] || t->shape != parts[0]->shape || t->dtype != parts[0]->dtype)
        throw_error(ErrorCode::kFormat, ck.dir + ": per-layer embedding table " + t->name + " does not fit the others");
      by_layer[i] = t;
    }
    const int64_t V = parts[0]->shape[0], P = parts[0]->shape[1], L = static_cast<int64_t>(parts.size());
    const uint64_t rb = row_bytes(*parts[0]);
    std::vector<uint8_t> bytes(static_cast<size_t>(rb * static_cast<uint64_t>(L * V)));
    for (int64_t v = 0; v < V; ++v)
      for (int64_t l = 0; l < L; ++l)
        std::memcpy(bytes.data() + (static_cast<uint64_t>(v) * L + l) * rb, by_layer[static_cast<size_t>(l)]->data() + rb * v, rb);
    idx.add(memory_tensor(name, parts[0]->dtype, {V, L * P}, std::move(bytes)), ck.dir);
  }
  ck.tensors = std::move(idx);
  return true;
}

}  // namespace oxi
