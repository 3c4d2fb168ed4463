#include "models/common/quant_rule.h"

#include <algorithm>
#include <cctype>

#include "core/error.h"

namespace oxi {

namespace {
bool has(const std::string& s, const char* part) { return s.find(part) != std::string::npos; }
bool fits(DType t, int64_t cols) {
  auto tr = dtype_traits(t);
  return tr && cols % tr->block_elems == 0;
}
}  // namespace

DType parse_quant_type(const std::string& name) {
  std::string n = name;
  std::transform(n.begin(), n.end(), n.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  if (n == "q8_0") return DType::Q8_0;
  if (n == "q4_0") return DType::Q4_0;
  if (n == "q4_k") return DType::Q4_K;
  throw_error(ErrorCode::kInvalidArgument, "invalid quantisation type '" + name + "' (expected q8_0, q4_0 or q4_k)");
}

std::optional<DType> QuantRule::target(const std::string& name, int n_dims, int64_t cols) const {
  if (n_dims < 2 || name.size() < 6 || name.compare(name.size() - 6, 6, "weight") != 0) return std::nullopt;
  for (const char* keep : {"_norm.weight", "ffn_gate_inp.weight", "altup", "laurel", "per_layer_model_proj", "ssm_conv1d",
                           "shortconv.conv.weight", "attn_rel_b.weight", "position_embd", "token_types.weight"})
    if (has(name, keep)) return std::nullopt;
  DType t = base;
  const bool is_output = name == "output.weight" ||
                         (!has_output && (name == "token_embd.weight" || name == "per_layer_token_embd.weight"));
  if (is_output) {
    if (!fits(base, cols)) t = DType::Q8_0;
    else if (base != DType::Q8_0) t = DType::Q6_K;
  } else if (n_expert == 8 && (has(name, "attn_qkv.weight") || has(name, "attn_kv_b.weight") || has(name, "attn_v.weight") ||
                               has(name, "attn_k.weight"))) {
    t = DType::Q8_0;
  }
  if (!fits(t, cols)) {
    if (t == DType::Q4_K) t = DType::Q5_0;
    else if (t == DType::Q6_K) t = DType::Q8_0;
    if (!fits(t, cols)) t = DType::F16;
  }
  return t;
}

uint32_t quant_file_type(DType base) {
  switch (base) {
    case DType::Q8_0: return 7;
    case DType::Q4_0: return 2;
    case DType::Q4_K: return 14;
    default: throw_error(ErrorCode::kInvalidArgument, "quant_file_type: not a quantisation base type");
  }
}

}  // namespace oxi
