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

bool quant_allowed(const std::string& name, int n_dims) {
  if (n_dims < 2 || name.size() < 6 || name.compare(name.size() - 6, 6, "weight") != 0) return false;
  // Norms, MoE routers (and DeepSeek's routing table), tiny or position-like matrices, conv
  // kernels, and the multimodal / audio pieces llama.cpp keeps as stored.
  for (const char* keep : {"_norm.weight", "ffn_gate_inp.weight", "ffn_gate_tid2eid.weight", "altup", "laurel",
                           "per_layer_model_proj", "ssm_conv1d", "shortconv.conv.weight", "indexer.k_proj.weight",
                           "indexer.q_proj.weight", "time_mix_first.weight", "time_mix_w0.weight", "time_mix_w1.weight",
                           "time_mix_w2.weight", "time_mix_v0.weight", "time_mix_v1.weight", "time_mix_v2.weight",
                           "time_mix_a0.weight", "time_mix_a1.weight", "time_mix_a2.weight", "time_mix_g1.weight",
                           "time_mix_g2.weight", "time_mix_decay_w1.weight", "time_mix_decay_w2.weight",
                           "time_mix_lerp_fused.weight", "attn_rel_b.weight", "position_embd", "token_types.weight",
                           "sam.pos_embd", "sam.neck.", "sam.net_", ".rel_pos", ".patch_embd", ".patch_merger",
                           "a.rvq.codebook", "mm.a.code_embd"})
    if (has(name, keep)) return false;
  return true;
}

DType quant_fallback(DType t, int64_t cols) {
  if (fits(t, cols)) return t;
  DType f = t;
  switch (t) {
    case DType::IQ1_S: case DType::IQ1_M: case DType::IQ2_XXS: case DType::IQ2_XS: case DType::IQ2_S:
    case DType::IQ3_XXS: case DType::IQ3_S: case DType::IQ4_XS: f = DType::IQ4_NL; break;
    case DType::Q2_K: case DType::Q3_K: case DType::TQ1_0: case DType::TQ2_0: f = DType::Q4_0; break;
    case DType::Q4_K: f = DType::Q5_0; break;
    case DType::Q5_K: f = DType::Q5_1; break;
    case DType::Q6_K: f = DType::Q8_0; break;
    default: break;  // 32-blocks have nothing smaller: F16 below
  }
  return fits(f, cols) ? f : DType::F16;
}

DType parse_quant_type(const std::string& name) {
  std::string n = name;
  std::transform(n.begin(), n.end(), n.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  if (n == "q8_0") return DType::Q8_0;
  if (n == "q4_0") return DType::Q4_0;
  if (n == "q4_k") return DType::Q4_K;
  throw_error(ErrorCode::kInvalidArgument, "invalid quantisation type '" + name + "' (expected q8_0, q4_0 or q4_k)");
}

std::optional<DType> QuantRule::target(const std::string& name, int n_dims, int64_t cols) const {
  if (!quant_allowed(name, n_dims)) return std::nullopt;
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
  return quant_fallback(t, cols);
}

uint32_t quant_file_type(DType base) {
  switch (base) {
    case DType::Q8_0: return 7;
    case DType::Q4_0: return 2;
    case DType::Q4_1: return 3;
    case DType::Q4_K: return 14;
    default: throw_error(ErrorCode::kInvalidArgument, "quant_file_type: not a quantisation base type");
  }
}

}  // namespace oxi
