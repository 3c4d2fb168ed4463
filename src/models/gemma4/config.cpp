// Gemma 4 hyper-parameters from an HF config.json (text_config) or from GGUF metadata, and the
// HF <-> GGUF tensor-name table (spec B.1, B.8).
#include <cmath>
#include <cstring>
#include <utility>

#include "core/error.h"
#include "nn/ops.h"
#include "models/gemma4/gemma4.h"

namespace oxi::gemma4 {

namespace {

using nlohmann::json;

// Per-layer name table: GGUF "blk.N.<gguf>" <-> HF "layers.N.<hf>".
const std::pair<const char*, const char*> kLayerNames[] = {
    {"attn_norm.weight", "input_layernorm.weight"},
    {"attn_q.weight", "self_attn.q_proj.weight"},
    {"attn_k.weight", "self_attn.k_proj.weight"},
    {"attn_v.weight", "self_attn.v_proj.weight"},
    {"attn_output.weight", "self_attn.o_proj.weight"},
    {"attn_q_norm.weight", "self_attn.q_norm.weight"},
    {"attn_k_norm.weight", "self_attn.k_norm.weight"},
    {"post_attention_norm.weight", "post_attention_layernorm.weight"},
    {"ffn_norm.weight", "pre_feedforward_layernorm.weight"},
    {"ffn_gate.weight", "mlp.gate_proj.weight"},
    {"ffn_up.weight", "mlp.up_proj.weight"},
    {"ffn_down.weight", "mlp.down_proj.weight"},
    {"post_ffw_norm.weight", "post_feedforward_layernorm.weight"},
    {"ffn_gate_inp.weight", "router.proj.weight"},
    {"ffn_gate_inp.scale", "router.scale"},
    {"ffn_down_exps.scale", "router.per_expert_scale"},
    {"ffn_gate_up_exps.weight", "experts.gate_up_proj"},
    {"ffn_down_exps.weight", "experts.down_proj"},
    {"pre_ffw_norm_2.weight", "pre_feedforward_layernorm_2.weight"},
    {"post_ffw_norm_1.weight", "post_feedforward_layernorm_1.weight"},
    {"post_ffw_norm_2.weight", "post_feedforward_layernorm_2.weight"},
    {"inp_gate.weight", "per_layer_input_gate.weight"},
    {"proj.weight", "per_layer_projection.weight"},
    {"post_norm.weight", "post_per_layer_input_norm.weight"},
    {"layer_output_scale.weight", "layer_scalar"},
};

const std::pair<const char*, const char*> kGlobalNames[] = {
    {"token_embd.weight", "embed_tokens.weight"},
    {"output_norm.weight", "norm.weight"},
    {"per_layer_token_embd.weight", "embed_tokens_per_layer.weight"},
    {"per_layer_model_proj.weight", "per_layer_model_projection.weight"},
    {"per_layer_proj_norm.weight", "per_layer_projection_norm.weight"},
};

// "<head>N.<rest>" → (N, rest); false if the name does not have that form.
bool split_layer(const std::string& name, const std::string& head, int64_t* layer,
                 std::string* rest) {
  if (name.compare(0, head.size(), head) != 0) return false;
  size_t p = head.size(), q = p;
  while (q < name.size() && name[q] >= '0' && name[q] <= '9') ++q;
  if (q == p || q >= name.size() || name[q] != '.' || q - p > 6) return false;
  *layer = std::stoll(name.substr(p, q - p));
  *rest = name.substr(q + 1);
  return true;
}

[[noreturn]] void cfg_error(const std::string& where, const std::string& what) {
  format_error(where, what);
}

int64_t jint(const json& j, const char* key, const std::string& where) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) cfg_error(where, std::string("config: missing '") + key + "'");
  if (!it->is_number_integer() && !it->is_number_unsigned())
    cfg_error(where, std::string("config: '") + key + "' is not an integer");
  return it->get<int64_t>();
}

int64_t jint_or(const json& j, const char* key, int64_t def, const std::string& where) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return def;
  if (!it->is_number_integer() && !it->is_number_unsigned())
    cfg_error(where, std::string("config: '") + key + "' is not an integer");
  return it->get<int64_t>();
}

double jnum_or(const json& j, const char* key, double def, const std::string& where) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return def;
  if (!it->is_number()) cfg_error(where, std::string("config: '") + key + "' is not a number");
  return it->get<double>();
}

bool jbool_or(const json& j, const char* key, bool def) {
  auto it = j.find(key);
  if (it == j.end() || !it->is_boolean()) return def;
  return it->get<bool>();
}

}  // namespace

std::string gguf_to_hf_name(const std::string& g) {
  for (const auto& [gn, hn] : kGlobalNames)
    if (g == gn) return hn;
  int64_t l;
  std::string rest;
  if (split_layer(g, "blk.", &l, &rest)) {
    for (const auto& [gn, hn] : kLayerNames)
      if (rest == gn) return "layers." + std::to_string(l) + "." + hn;
  }
  return "";
}

std::string hf_to_gguf_name(const std::string& h) {
  for (const auto& [gn, hn] : kGlobalNames)
    if (h == hn) return gn;
  int64_t l;
  std::string rest;
  if (split_layer(h, "layers.", &l, &rest)) {
    for (const auto& [gn, hn] : kLayerNames)
      if (rest == hn) return "blk." + std::to_string(l) + "." + gn;
  }
  return "";
}

std::string hf_prefix(const HfCheckpoint& hf) {
  for (const char* p : {"model.language_model.", "model.", "language_model.model.", ""}) {
    if (hf.tensors.contains(std::string(p) + "embed_tokens.weight")) return p;
  }
  format_error(hf.dir, "missing tensor model.language_model.embed_tokens.weight");
}

int64_t Config::kv_source(int64_t l) const {
  const int64_t first_shared = n_layer_kv();
  if (l < first_shared) return l;
  for (int64_t j = first_shared - 1; j >= 0; --j)
    if (swa(j) == swa(l)) return j;
  return -1;
}

void Config::validate(const std::string& where) const {
  auto bad = [&](const std::string& what) { format_error(where, "gemma4: " + what); };
  if (n_vocab <= 0 || n_vocab > (1 << 24)) bad("bad vocabulary size " + std::to_string(n_vocab));
  if (n_embd <= 0 || n_embd > (1 << 16)) bad("bad hidden size " + std::to_string(n_embd));
  if (n_layer <= 0 || n_layer > 1024) bad("bad layer count " + std::to_string(n_layer));
  if (n_head <= 0 || n_head > 1024) bad("bad head count " + std::to_string(n_head));
  for (int64_t hd : {head_dim_swa, head_dim_full})
    if (hd <= 0 || hd > 4096 || hd % 2) bad("bad head size " + std::to_string(hd));
  const size_t L = static_cast<size_t>(n_layer);
  if (is_swa.size() != L) bad("sliding pattern has " + std::to_string(is_swa.size()) + " entries, want " + std::to_string(L));
  if (n_head_kv.size() != L || n_ff.size() != L) bad("per-layer arrays do not match the layer count");
  for (size_t l = 0; l < L; ++l) {
    if (n_head_kv[l] <= 0 || n_head % n_head_kv[l] != 0)
      bad("layer " + std::to_string(l) + ": head count " + std::to_string(n_head) +
          " not a multiple of KV heads " + std::to_string(n_head_kv[l]));
    if (n_ff[l] <= 0 || n_ff[l] > (1 << 20)) bad("layer " + std::to_string(l) + ": bad feed-forward size");
  }
  bool any_swa = false;
  for (auto s : is_swa) any_swa |= (s != 0);
  if (any_swa && window <= 0) bad("sliding layers need a positive sliding_window");
  if (assistant) {
    if (n_kv_shared != n_layer) bad("an assistant's layers must all read the target's cache (num_kv_shared_layers " + std::to_string(n_kv_shared) + ", want " + std::to_string(n_layer) + ")");
    if (n_embd_backbone <= 0 || n_embd_backbone > (1 << 16)) bad("bad backbone (target) hidden size " + std::to_string(n_embd_backbone));
    if (n_embd_per_layer != 0 || n_expert != 0) bad("an assistant has no per-layer embeddings and no experts");
  } else if (n_kv_shared < 0 || n_kv_shared >= n_layer) {
    bad("bad num_kv_shared_layers " + std::to_string(n_kv_shared));
  }
  for (int64_t l = n_layer_kv(); l < n_layer && !assistant; ++l)
    if (kv_source(l) < 0)
      bad("KV-shared layer " + std::to_string(l) + " has no earlier layer of its type to read from");
  if (n_embd_per_layer < 0 || n_embd_per_layer > 65536) bad("bad hidden_size_per_layer_input");
  if (n_expert < 0 || n_expert_used < 0 || n_expert_used > n_expert) bad("bad expert counts");
  if (n_expert > 0 && (n_expert_used == 0 || n_ff_exp <= 0)) bad("MoE needs top-k and expert size");
  if (n_rot_swa <= 0 || n_rot_swa > head_dim_swa || n_rot_swa % 2) bad("bad sliding rope dims");
  if (n_rot_full <= 0 || n_rot_full > head_dim_full || n_rot_full % 2) bad("bad full rope dims");
  if (!rope_freqs_full.empty() && static_cast<int64_t>(rope_freqs_full.size()) != n_rot_full / 2)
    bad("rope_freqs has " + std::to_string(rope_freqs_full.size()) + " entries, want " +
        std::to_string(n_rot_full / 2));
  if (!(eps > 0.0f) || !std::isfinite(eps)) bad("bad rms_norm_eps");
  if (!std::isfinite(final_softcap) || final_softcap < 0) bad("bad final_logit_softcapping");
  if (!ops::rope_theta_ok(rope_base_swa) || !ops::rope_theta_ok(rope_base_full)) bad("rope theta not in (0, 1e12]");
}

Config config_from_hf(const HfCheckpoint& hf) {
  const json& t = hf.text_config;
  const std::string& w = hf.dir;
  if (!t.is_object()) cfg_error(w, "config: text_config is not an object");
  Config c;
  c.n_embd = jint(t, "hidden_size", w);
  c.n_layer = jint(t, "num_hidden_layers", w);
  c.n_head = jint(t, "num_attention_heads", w);
  c.head_dim_swa = jint(t, "head_dim", w);
  c.head_dim_full = jint_or(t, "global_head_dim", c.head_dim_swa, w);
  c.n_vocab = jint(t, "vocab_size", w);
  c.window = jint_or(t, "sliding_window", 0, w);
  c.n_kv_shared = jint_or(t, "num_kv_shared_layers", 0, w);
  c.n_embd_per_layer = jint_or(t, "hidden_size_per_layer_input", 0, w);
  c.eps = static_cast<float>(jnum_or(t, "rms_norm_eps", 1e-6, w));
  c.final_softcap = static_cast<float>(jnum_or(t, "final_logit_softcapping", 0.0, w));
  c.n_ctx_train = jint_or(t, "max_position_embeddings", 131072, w);
  c.k_eq_v = jbool_or(t, "attention_k_eq_v", false);
  if (c.n_layer <= 0 || c.n_layer > 1024) cfg_error(w, "config: bad num_hidden_layers");
  const size_t L = static_cast<size_t>(c.n_layer);

  // Layer types: given, else 5:1 sliding:full; the last layer is always full (HF post-init).
  c.is_swa.assign(L, 1);
  auto lt = t.find("layer_types");
  if (lt != t.end() && !lt->is_null()) {
    if (!lt->is_array() || lt->size() != L)
      cfg_error(w, "config: layer_types must be an array of num_hidden_layers strings");
    for (size_t l = 0; l < L; ++l) {
      const json& e = (*lt)[l];
      if (!e.is_string()) cfg_error(w, "config: layer_types[" + std::to_string(l) + "] is not a string");
      const std::string s = e.get<std::string>();
      if (s == "sliding_attention") c.is_swa[l] = 1;
      else if (s == "full_attention") c.is_swa[l] = 0;
      else cfg_error(w, "config: unknown layer type '" + s + "'");
    }
  } else {
    for (size_t l = 0; l < L; ++l) c.is_swa[l] = ((l + 1) % 6 != 0);
  }
  c.is_swa[L - 1] = 0;

  const int64_t hkv = jint_or(t, "num_key_value_heads", c.n_head, w);
  const int64_t hkv_global = jint_or(t, "num_global_key_value_heads", hkv, w);
  c.n_head_kv.resize(L);
  for (size_t l = 0; l < L; ++l) c.n_head_kv[l] = (!c.is_swa[l] && c.k_eq_v) ? hkv_global : hkv;

  const int64_t inter = jint(t, "intermediate_size", w);
  const bool double_wide = jbool_or(t, "use_double_wide_mlp", false);
  c.n_ff.resize(L);
  for (size_t l = 0; l < L; ++l)
    c.n_ff[l] = (double_wide && static_cast<int64_t>(l) >= c.n_layer - c.n_kv_shared) ? 2 * inter : inter;

  if (jbool_or(t, "enable_moe_block", false)) {
    c.n_expert = jint(t, "num_experts", w);
    c.n_expert_used = jint(t, "top_k_experts", w);
    c.n_ff_exp = jint_or(t, "moe_intermediate_size", jint_or(t, "expert_intermediate_size", 0, w), w);
  }

  // RoPE per layer type.
  double theta_swa = 10000.0, theta_full = 1000000.0, partial_swa = 1.0, partial_full = 1.0;
  std::string type_full = "default";
  auto rp = t.find("rope_parameters");
  if (rp != t.end() && rp->is_object()) {
    auto s = rp->find("sliding_attention");
    if (s != rp->end() && s->is_object()) {
      theta_swa = jnum_or(*s, "rope_theta", theta_swa, w);
      partial_swa = jnum_or(*s, "partial_rotary_factor", 1.0, w);
    }
    auto f = rp->find("full_attention");
    if (f != rp->end() && f->is_object()) {
      theta_full = jnum_or(*f, "rope_theta", theta_full, w);
      partial_full = jnum_or(*f, "partial_rotary_factor", 1.0, w);
      auto ty = f->find("rope_type");
      if (ty != f->end() && ty->is_string()) type_full = ty->get<std::string>();
    }
  } else {
    theta_full = jnum_or(t, "rope_theta", theta_full, w);
    theta_swa = jnum_or(t, "rope_local_base_freq", theta_swa, w);
  }
  if (!(partial_swa > 0 && partial_swa <= 1) || !(partial_full > 0 && partial_full <= 1))
    cfg_error(w, "config: partial_rotary_factor must be in (0, 1]");
  c.rope_base_swa = static_cast<float>(theta_swa);
  c.rope_base_full = static_cast<float>(theta_full);
  c.n_rot_swa = static_cast<int64_t>(static_cast<double>(c.head_dim_swa) * partial_swa);
  if (type_full == "proportional") {
    // Rotate pairs (i, i + hd/2) of the whole head with exponent base hd; only the first
    // partial·hd/2 pairs get a non-zero angle (llama.cpp: n_rot = hd + rope_freqs divisors).
    c.n_rot_full = c.head_dim_full;
    const int64_t n_half = c.head_dim_full / 2;
    const int64_t n_rot_pairs = static_cast<int64_t>(static_cast<double>(c.head_dim_full) * partial_full / 2.0);
    c.rope_freqs_full.assign(static_cast<size_t>(n_half), 1e30f);
    for (int64_t i = 0; i < n_rot_pairs && i < n_half; ++i) c.rope_freqs_full[static_cast<size_t>(i)] = 1.0f;
  } else if (type_full == "default") {
    c.n_rot_full = static_cast<int64_t>(static_cast<double>(c.head_dim_full) * partial_full);
  } else {
    throw_error(ErrorCode::kUnsupported, w + ": gemma4: unsupported full-attention rope_type '" + type_full + "'");
  }
  if (c.n_rot_swa % 2) c.n_rot_swa -= 1;
  if (c.n_rot_full % 2) c.n_rot_full -= 1;
  c.name = hf.config.value("_name_or_path", std::string());
  if (hf.config.value("model_type", std::string()) == "gemma4_assistant") {
    c.assistant = true;
    c.n_embd_backbone = jint(hf.config, "backbone_hidden_size", w);
  }
  c.validate(w);
  return c;
}

Config config_from_gguf(const GgufFile& g, const std::string& path) {
  const GgufMetadata& m = g.metadata;
  Config c;
  c.assistant = m.get_string("general.architecture", "gemma4") == kAssistantArch;
  const std::string a = c.assistant ? std::string(kAssistantArch) + "." : "gemma4.";
  c.n_embd = m.get_int(a + "embedding_length");
  c.n_layer = m.get_int(a + "block_count");
  if (c.n_layer <= 0 || c.n_layer > 1024) format_error(path, a + "block_count out of range");
  const size_t L = static_cast<size_t>(c.n_layer);
  auto per_layer = [&](const std::string& key, bool required, int64_t def) {
    std::vector<int64_t> v(L, def);
    const GgufValue* x = m.find(key);
    if (!x) {
      if (required) format_error(path, "missing metadata key " + key);
      return v;
    }
    if (x->is_array()) {
      std::vector<int64_t> arr = x->as_int_array();
      if (arr.size() != L)
        format_error(path, key + " has " + std::to_string(arr.size()) + " entries, want " + std::to_string(L));
      return arr;
    }
    std::fill(v.begin(), v.end(), x->as_int());
    return v;
  };
  std::vector<int64_t> heads = per_layer(a + "attention.head_count", true, 0);
  c.n_head = heads[0];
  for (int64_t h : heads)
    if (h != c.n_head) throw_error(ErrorCode::kUnsupported, path + ": gemma4: per-layer query head counts differ");
  c.n_head_kv = per_layer(a + "attention.head_count_kv", false, c.n_head);
  c.n_ff = per_layer(a + "feed_forward_length", true, 0);
  c.head_dim_full = m.get_int(a + "attention.key_length");
  c.head_dim_swa = m.get_int(a + "attention.key_length_swa", c.head_dim_full);
  if (m.get_int(a + "attention.value_length", c.head_dim_full) != c.head_dim_full ||
      m.get_int(a + "attention.value_length_swa", c.head_dim_swa) != c.head_dim_swa)
    throw_error(ErrorCode::kUnsupported, path + ": gemma4: key and value head sizes differ");
  c.window = m.get_int(a + "attention.sliding_window", 0);
  c.is_swa.assign(L, 0);
  if (const GgufValue* p = m.find(a + "attention.sliding_window_pattern")) {
    if (p->is_array()) {
      const std::vector<int64_t> pat = p->as_int_array();
      if (pat.size() != L) format_error(path, "gemma4.attention.sliding_window_pattern length != block_count");
      for (size_t l = 0; l < L; ++l) c.is_swa[l] = pat[l] != 0 ? 1 : 0;
    } else {
      // scalar period n: every n-th layer is full (llama.cpp's set_swa_pattern convention)
      const int64_t n = p->as_int();
      for (size_t l = 0; l < L; ++l) c.is_swa[l] = (n > 0 && (static_cast<int64_t>(l) % n) < n - 1) ? 1 : 0;
    }
  } else if (c.window > 0) {
    format_error(path, "missing metadata key gemma4.attention.sliding_window_pattern");
  }
  c.n_kv_shared = m.get_int(a + "attention.shared_kv_layers", 0);
  c.n_embd_per_layer = m.get_int(a + "embedding_length_per_layer_input", 0);
  c.n_expert = m.get_int(a + "expert_count", 0);
  c.n_expert_used = m.get_int(a + "expert_used_count", 0);
  c.n_ff_exp = m.get_int(a + "expert_feed_forward_length", 0);
  c.eps = static_cast<float>(m.get_float(a + "attention.layer_norm_rms_epsilon", 1e-6));
  c.rope_base_full = static_cast<float>(m.get_float(a + "rope.freq_base", 1000000.0));
  c.rope_base_swa = static_cast<float>(m.get_float(a + "rope.freq_base_swa", 10000.0));
  c.n_rot_full = m.get_int(a + "rope.dimension_count", c.head_dim_full);
  c.n_rot_swa = m.get_int(a + "rope.dimension_count_swa", c.head_dim_swa);
  c.final_softcap = static_cast<float>(m.get_float(a + "final_logit_softcapping", 0.0));
  c.n_ctx_train = m.get_int(a + "context_length", 0);
  c.name = m.get_string("general.name", "");
  if (c.assistant) {
    c.n_embd_backbone = m.get_int(a + "embedding_length_out", 0);
    if (m.get_int(a + "nextn_predict_layers", 0) != c.n_layer)
      format_error(path, a + "nextn_predict_layers must equal block_count in an assistant file");
  }
  const TensorInfo& emb = g.tensors.get("token_embd.weight");
  if (emb.shape.size() != 2) format_error(path, "token_embd.weight must be 2-D, got " + emb.shape_string());
  c.n_vocab = emb.shape[0];
  if (const TensorInfo* rf = g.tensors.find("rope_freqs.weight")) {
    if (rf->dtype != DType::F32 || rf->shape.size() != 1)
      format_error(path, "rope_freqs.weight must be a 1-D F32 tensor, got " + dtype_name(rf->dtype) + " " + rf->shape_string());
    c.rope_freqs_full.resize(static_cast<size_t>(rf->shape[0]));
    std::memcpy(c.rope_freqs_full.data(), rf->data(), c.rope_freqs_full.size() * sizeof(float));
  }
  c.validate(path);
  return c;
}

}  // namespace oxi::gemma4
