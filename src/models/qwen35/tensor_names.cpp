#include "models/qwen35/tensor_names.h"

#include <cmath>

namespace oxi::qwen35 {

namespace {

// Block tensors: GGUF suffix (after "blk.N.") → HF suffix (after the layer prefix) + transform.
struct BlockEntry {
  const char* gguf;
  const char* hf;
  Fix fix;
  VHeads vheads;
  HfShape shape;
  bool f32;
};
constexpr BlockEntry kBlock[] = {
    {"attn_norm.weight", "input_layernorm.weight", Fix::kPlusOne, VHeads::kNone, HfShape::kSame, true},
    {"post_attention_norm.weight", "post_attention_layernorm.weight", Fix::kPlusOne, VHeads::kNone, HfShape::kSame, true},
    // Gated DeltaNet (recurrent) layers.
    {"attn_qkv.weight", "linear_attn.in_proj_qkv.weight", Fix::kNone, VHeads::kConvRows, HfShape::kSame, false},
    {"attn_gate.weight", "linear_attn.in_proj_z.weight", Fix::kNone, VHeads::kValueRows, HfShape::kSame, false},
    {"ssm_beta.weight", "linear_attn.in_proj_b.weight", Fix::kNone, VHeads::kHeadRows, HfShape::kSame, false},
    {"ssm_alpha.weight", "linear_attn.in_proj_a.weight", Fix::kNone, VHeads::kHeadRows, HfShape::kSame, false},
    {"ssm_conv1d.weight", "linear_attn.conv1d.weight", Fix::kNone, VHeads::kConvRows, HfShape::kConv, true},
    {"ssm_a", "linear_attn.A_log", Fix::kNegExp, VHeads::kHeadRows, HfShape::kSame, true},
    {"ssm_dt.bias", "linear_attn.dt_bias", Fix::kNone, VHeads::kHeadRows, HfShape::kSame, true},
    {"ssm_norm.weight", "linear_attn.norm.weight", Fix::kNone, VHeads::kNone, HfShape::kSame, true},  // plain weight, no +1
    {"ssm_out.weight", "linear_attn.out_proj.weight", Fix::kNone, VHeads::kValueCols, HfShape::kSame, false},
    // Full-attention layers.
    {"attn_q.weight", "self_attn.q_proj.weight", Fix::kNone, VHeads::kNone, HfShape::kSame, false},
    {"attn_k.weight", "self_attn.k_proj.weight", Fix::kNone, VHeads::kNone, HfShape::kSame, false},
    {"attn_v.weight", "self_attn.v_proj.weight", Fix::kNone, VHeads::kNone, HfShape::kSame, false},
    {"attn_output.weight", "self_attn.o_proj.weight", Fix::kNone, VHeads::kNone, HfShape::kSame, false},
    {"attn_q_norm.weight", "self_attn.q_norm.weight", Fix::kPlusOne, VHeads::kNone, HfShape::kSame, true},
    {"attn_k_norm.weight", "self_attn.k_norm.weight", Fix::kPlusOne, VHeads::kNone, HfShape::kSame, true},
    // Dense FFN.
    {"ffn_gate.weight", "mlp.gate_proj.weight", Fix::kNone, VHeads::kNone, HfShape::kSame, false},
    {"ffn_up.weight", "mlp.up_proj.weight", Fix::kNone, VHeads::kNone, HfShape::kSame, false},
    {"ffn_down.weight", "mlp.down_proj.weight", Fix::kNone, VHeads::kNone, HfShape::kSame, false},
    // MoE: router (f32, as llama.cpp's converter keeps it), fused expert stacks [E, 2I, d] (gate
    // rows then up rows per expert) and [E, d, I], shared expert and its sigmoid gate.
    {"ffn_gate_inp.weight", "mlp.gate.weight", Fix::kNone, VHeads::kNone, HfShape::kSame, true},
    {"ffn_gate_up_exps.weight", "mlp.experts.gate_up_proj", Fix::kNone, VHeads::kNone, HfShape::kSame, false},
    {"ffn_down_exps.weight", "mlp.experts.down_proj", Fix::kNone, VHeads::kNone, HfShape::kSame, false},
    {"ffn_gate_shexp.weight", "mlp.shared_expert.gate_proj.weight", Fix::kNone, VHeads::kNone, HfShape::kSame, false},
    {"ffn_up_shexp.weight", "mlp.shared_expert.up_proj.weight", Fix::kNone, VHeads::kNone, HfShape::kSame, false},
    {"ffn_down_shexp.weight", "mlp.shared_expert.down_proj.weight", Fix::kNone, VHeads::kNone, HfShape::kSame, false},
    {"ffn_gate_inp_shexp.weight", "mlp.shared_expert_gate.weight", Fix::kNone, VHeads::kNone, HfShape::kRow, true},
    // The MTP block's own tensors (block n_layer only; HF names at the top level, not in the layer).
    {"nextn.eh_proj.weight", "mtp.fc.weight", Fix::kNone, VHeads::kNone, HfShape::kSame, false},
    {"nextn.enorm.weight", "mtp.pre_fc_norm_embedding.weight", Fix::kPlusOne, VHeads::kNone, HfShape::kSame, true},
    {"nextn.hnorm.weight", "mtp.pre_fc_norm_hidden.weight", Fix::kPlusOne, VHeads::kNone, HfShape::kSame, true},
    {"nextn.shared_head_norm.weight", "mtp.norm.weight", Fix::kPlusOne, VHeads::kNone, HfShape::kSame, true},
};
// Per-expert HF matrices (older layout): GGUF stack suffix → HF suffix after "mlp.experts.<e>.".
constexpr const char* kExperts[][2] = {
    {"ffn_gate_exps.weight", "gate_proj.weight"},
    {"ffn_up_exps.weight", "up_proj.weight"},
    {"ffn_down_exps.weight", "down_proj.weight"},
};

bool starts(const std::string& s, const std::string& p) { return s.compare(0, p.size(), p) == 0; }

// "blk.N.rest" → N and rest; false for other names.
bool split_blk(const std::string& g, int64_t& n, std::string& rest) {
  if (!starts(g, "blk.")) return false;
  const size_t dot = g.find('.', 4);
  if (dot == std::string::npos || dot == 4) return false;
  n = 0;
  for (size_t i = 4; i < dot; ++i) {
    if (g[i] < '0' || g[i] > '9') return false;
    n = n * 10 + (g[i] - '0');
  }
  rest = g.substr(dot + 1);
  return true;
}

// HF prefix of block n: a trunk layer or the MTP block.
std::string hf_layer(int64_t n, const std::string& lm, int64_t n_layer) {
  return n == n_layer ? std::string("mtp.layers.0.") : lm + "layers." + std::to_string(n) + ".";
}

bool is_nextn(const char* gguf) { return starts(gguf, "nextn."); }

}  // namespace

std::string hf_lm_prefix(const TensorIndex& idx) {
  const std::string lm = "model.language_model.";
  if (!idx.contains(lm + "embed_tokens.weight") && idx.contains("model.embed_tokens.weight")) return "model.";
  return lm;
}

HfTensor hf_tensor(const std::string& g, const std::string& lm, int64_t n_layer) {
  if (g == "token_embd.weight") return {lm + "embed_tokens.weight"};
  if (g == "output_norm.weight") return {lm + "norm.weight", Fix::kPlusOne, VHeads::kNone, HfShape::kSame, true};
  if (g == "output.weight") return {"lm_head.weight"};
  int64_t n = 0;
  std::string rest;
  if (!split_blk(g, n, rest) || n > n_layer) return {};
  for (const BlockEntry& e : kBlock) {
    if (rest != e.gguf) continue;
    if (is_nextn(e.gguf) && n != n_layer) return {};
    return {is_nextn(e.gguf) ? std::string(e.hf) : hf_layer(n, lm, n_layer) + e.hf, e.fix, e.vheads, e.shape, e.f32};
  }
  return {};
}

std::string hf_expert_name(const std::string& g, int64_t e, const std::string& lm, int64_t n_layer) {
  int64_t n = 0;
  std::string rest;
  if (!split_blk(g, n, rest) || n > n_layer) return "";
  for (const auto& x : kExperts)
    if (rest == x[0]) return hf_layer(n, lm, n_layer) + "mlp.experts." + std::to_string(e) + "." + x[1];
  return "";
}

std::string gguf_name(const std::string& h, const std::string& lm, int64_t n_layer) {
  if (h == lm + "embed_tokens.weight") return "token_embd.weight";
  if (h == lm + "norm.weight") return "output_norm.weight";
  if (h == "lm_head.weight") return "output.weight";
  std::string rest;
  int64_t n = -1;
  const std::string mtp = "mtp.layers.0.", layers = lm + "layers.";
  if (starts(h, mtp)) {
    n = n_layer;
    rest = h.substr(mtp.size());
  } else if (starts(h, layers)) {
    const size_t dot = h.find('.', layers.size());
    if (dot == std::string::npos || dot == layers.size()) return "";
    n = 0;
    for (size_t i = layers.size(); i < dot; ++i) {
      if (h[i] < '0' || h[i] > '9') return "";
      n = n * 10 + (h[i] - '0');
    }
    if (n >= n_layer) return "";
    rest = h.substr(dot + 1);
  } else {
    for (const BlockEntry& e : kBlock)
      if (is_nextn(e.gguf) && h == e.hf) return "blk." + std::to_string(n_layer) + "." + e.gguf;
    return "";
  }
  const std::string b = "blk." + std::to_string(n) + ".";
  for (const BlockEntry& e : kBlock)
    if (!is_nextn(e.gguf) && rest == e.hf) return b + e.gguf;
  // Per-expert matrices: mlp.experts.<e>.<x> → the stack.
  const std::string ex = "mlp.experts.";
  if (starts(rest, ex)) {
    const size_t dot = rest.find('.', ex.size());
    if (dot != std::string::npos && dot > ex.size()) {
      for (size_t i = ex.size(); i < dot; ++i)
        if (rest[i] < '0' || rest[i] > '9') return "";
      const std::string x = rest.substr(dot + 1);
      for (const auto& m : kExperts)
        if (x == m[1]) return b + m[0];
    }
  }
  return "";
}

std::vector<int64_t> hf_shape(const HfTensor& h, std::vector<int64_t> shape) {
  if (h.shape == HfShape::kConv && shape.size() == 2) shape.insert(shape.begin() + 1, 1);  // [C, K] ← [C, 1, K]
  if (h.shape == HfShape::kRow) shape.insert(shape.begin(), 1);                            // [d] ← [1, d]
  return shape;
}

std::vector<int64_t> vhead_order(const Config& c, VHeads v) {
  if (v == VHeads::kNone || c.hk == c.hv) return {};
  const std::vector<int64_t> hp = vhead_perm(c.hk, c.hv);
  switch (v) {
    case VHeads::kConvRows: return block_perm(c.conv_dim(), 2 * c.key_dim(), hp, c.dv);
    case VHeads::kValueRows:
    case VHeads::kValueCols: return block_perm(c.value_dim(), 0, hp, c.dv);
    case VHeads::kHeadRows: return hp;
    case VHeads::kNone: break;
  }
  return {};
}

void apply_fix(Fix fix, float* x, int64_t n) {
  if (fix == Fix::kPlusOne)
    for (int64_t i = 0; i < n; ++i) x[i] += 1.0f;
  else if (fix == Fix::kNegExp)
    for (int64_t i = 0; i < n; ++i) x[i] = -std::exp(x[i]);
}

}  // namespace oxi::qwen35
