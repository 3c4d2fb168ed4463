#include "models/qwen35/config.h"

#include <cmath>

#include "core/error.h"
#include "nn/ops.h"

namespace oxi::qwen35 {

namespace {

using nlohmann::json;

struct JsonReader {
  const json& j;
  std::string where;  // "config.json: text_config."

  const json* find(const char* key) const {
    auto it = j.find(key);
    return (it == j.end() || it->is_null()) ? nullptr : &*it;
  }
  int64_t get_int(const char* key) const {
    const json* v = find(key);
    if (!v) throw_error(ErrorCode::kFormat, where + key + " is missing");
    return to_int(*v, key);
  }
  int64_t get_int(const char* key, int64_t def) const {
    const json* v = find(key);
    return v ? to_int(*v, key) : def;
  }
  double get_float(const char* key, double def) const {
    const json* v = find(key);
    if (!v) return def;
    if (!v->is_number()) throw_error(ErrorCode::kFormat, where + key + " must be a number");
    return v->get<double>();
  }
  int64_t to_int(const json& v, const char* key) const {
    if (v.is_number_integer()) return v.get<int64_t>();
    if (v.is_number_float()) {
      double d = v.get<double>();
      if (d == std::floor(d) && std::fabs(d) < 1e15) return static_cast<int64_t>(d);
    }
    throw_error(ErrorCode::kFormat, where + key + " must be an integer");
  }
};

}  // namespace

void Config::validate(const std::string& what) const {
  auto bad = [&](const std::string& m) { throw_error(ErrorCode::kFormat, what + ": " + m); };
  auto pos = [&](int64_t v, const char* name, int64_t max) {
    if (v < 1 || v > max) bad(std::string(name) + " = " + std::to_string(v) + " is out of range");
  };
  pos(n_embd, "hidden size", 1 << 16);
  pos(n_layer, "layer count", 4096);
  pos(n_vocab, "vocab size", 1 << 24);
  pos(n_head, "attention head count", 4096);
  pos(n_head_kv, "attention kv head count", 4096);
  pos(head_dim, "head_dim", 1 << 14);
  pos(hk, "linear_num_key_heads", 4096);
  pos(hv, "linear_num_value_heads", 4096);
  pos(dk, "linear_key_head_dim", 1 << 14);
  pos(dv, "linear_value_head_dim", 1 << 14);
  pos(conv_k, "linear_conv_kernel_dim", 64);
  pos(interval, "full_attention_interval", 4096);
  if (n_head % n_head_kv) bad("attention head count is not a multiple of the kv head count");
  if (hv % hk) bad("linear_num_value_heads is not a multiple of linear_num_key_heads");
  if (n_rot < 2 || n_rot > head_dim || n_rot % 2) bad("rotary dims " + std::to_string(n_rot) + " invalid for head_dim " + std::to_string(head_dim));
  if (!(eps > 0.0f) || !std::isfinite(eps)) bad("rms_norm_eps must be positive");
  if (!ops::rope_theta_ok(rope_theta)) bad("rope_theta " + std::to_string(rope_theta) + " is not in (0, 1e12]");
  // mRoPE sections share the n_rot / 2 frequency slots among t, h, w (and e).
  int64_t sections = 0;
  for (int32_t s : mrope) {
    if (s < 0) bad("negative rope section");
    sections += s;
  }
  if (sections > n_rot / 2) bad("rope sections add up to " + std::to_string(sections) + ", over rotary dims / 2 = " + std::to_string(n_rot / 2));
  if (eos_id < -1 || eos_id >= n_vocab) bad("eos_token_id " + std::to_string(eos_id) + " is not a token id");
  if (static_cast<int64_t>(recurrent.size()) != n_layer) bad("layer type list does not match the layer count");
  if (moe) {
    pos(n_expert, "expert count", 1 << 16);
    pos(n_expert_used, "experts per token", n_expert);
    pos(n_ff_exp, "expert feed-forward size", 1 << 20);
    if (n_ff_shexp < 0 || n_ff_shexp > (1 << 20)) bad("shared expert feed-forward size out of range");
  } else {
    pos(n_ff, "intermediate_size", 1 << 20);
  }
  if (n_ctx_train < 1) bad("context length must be positive");
}

Config config_from_hf(const HfCheckpoint& hf) {
  const json& tcj = hf.text_config;
  if (!tcj.is_object()) throw_error(ErrorCode::kFormat, hf.dir + "/config.json: text_config is not an object");
  const bool nested = hf.config.contains("text_config");
  JsonReader tc{tcj, hf.dir + "/config.json: " + (nested ? "text_config." : "")};
  Config c;
  std::string mt = hf.config.value("model_type", std::string());
  std::string tmt = tcj.value("model_type", std::string());
  c.moe = mt.find("moe") != std::string::npos || tmt.find("moe") != std::string::npos || tc.find("num_experts");
  c.arch = c.moe ? "qwen35moe" : "qwen35";
  c.n_embd = tc.get_int("hidden_size");
  c.n_layer = tc.get_int("num_hidden_layers");
  c.n_vocab = tc.get_int("vocab_size");
  c.n_ctx_train = tc.get_int("max_position_embeddings", 262144);
  c.n_head = tc.get_int("num_attention_heads");
  c.n_head_kv = tc.get_int("num_key_value_heads", c.n_head);
  c.head_dim = tc.get_int("head_dim", c.n_head > 0 ? c.n_embd / c.n_head : 0);
  c.eps = static_cast<float>(tc.get_float("rms_norm_eps", 1e-6));
  // rope: rope_parameters (transformers ≥ 4.57), else legacy top-level keys / rope_scaling.
  double theta = tc.get_float("rope_theta", 1e7), partial = tc.get_float("partial_rotary_factor", 0.25);
  const json* sec = nullptr;
  for (const char* key : {"rope_parameters", "rope_scaling"}) {
    const json* rp = tc.find(key);
    if (!rp) continue;
    if (!rp->is_object()) throw_error(ErrorCode::kFormat, tc.where + key + " must be an object");
    JsonReader r{*rp, tc.where + key + "."};
    theta = r.get_float("rope_theta", theta);
    partial = r.get_float("partial_rotary_factor", partial);
    if (r.find("mrope_section")) sec = r.find("mrope_section");
  }
  c.rope_theta = static_cast<float>(theta);
  c.n_rot = static_cast<int64_t>(std::llround(static_cast<double>(c.head_dim) * partial));
  if (sec) {
    if (!sec->is_array() || sec->size() > 4) throw_error(ErrorCode::kFormat, tc.where + "mrope_section must be an array of up to 4 integers");
    for (size_t i = 0; i < sec->size(); ++i) {
      if (!(*sec)[i].is_number_integer()) throw_error(ErrorCode::kFormat, tc.where + "mrope_section must hold integers");
      const int64_t v = (*sec)[i].get<int64_t>();
      if (v < 0 || v > (1 << 16)) throw_error(ErrorCode::kFormat, tc.where + "mrope_section entry " + std::to_string(v) + " out of range");
      c.mrope[i] = static_cast<int32_t>(v);
    }
  } else {
    const int32_t slots = static_cast<int32_t>(c.n_rot / 2);
    c.mrope = {(slots + 2) / 3, (slots + 1) / 3, slots / 3, 0};
  }
  c.interval = tc.get_int("full_attention_interval", 4);
  if (c.n_layer < 1 || c.n_layer > 4096) throw_error(ErrorCode::kFormat, tc.where + "num_hidden_layers out of range");
  if (const json* lt = tc.find("layer_types")) {
    if (!lt->is_array() || static_cast<int64_t>(lt->size()) != c.n_layer)
      throw_error(ErrorCode::kFormat, tc.where + "layer_types must list num_hidden_layers entries");
    for (const auto& e : *lt) {
      std::string s = e.is_string() ? e.get<std::string>() : "";
      if (s == "linear_attention") c.recurrent.push_back(true);
      else if (s == "full_attention") c.recurrent.push_back(false);
      else throw_error(ErrorCode::kFormat, tc.where + "layer_types has unknown entry " + e.dump());
    }
  } else {
    if (c.interval < 1) throw_error(ErrorCode::kFormat, tc.where + "full_attention_interval must be positive");
    for (int64_t i = 0; i < c.n_layer; ++i) c.recurrent.push_back((i + 1) % c.interval != 0);
  }
  c.hk = tc.get_int("linear_num_key_heads");
  c.hv = tc.get_int("linear_num_value_heads");
  c.dk = tc.get_int("linear_key_head_dim");
  c.dv = tc.get_int("linear_value_head_dim");
  c.conv_k = tc.get_int("linear_conv_kernel_dim", 4);
  if (c.moe) {
    c.n_expert = tc.get_int("num_experts");
    c.n_expert_used = tc.get_int("num_experts_per_tok");
    c.n_ff_exp = tc.get_int("moe_intermediate_size");
    c.n_ff_shexp = tc.get_int("shared_expert_intermediate_size", 0);
  } else {
    c.n_ff = tc.get_int("intermediate_size");
  }
  if (const json* t = tc.find("tie_word_embeddings"); t && t->is_boolean()) {
    c.tied = t->get<bool>();
  } else if (auto it = hf.config.find("tie_word_embeddings"); it != hf.config.end() && it->is_boolean()) {
    c.tied = it->get<bool>();
  } else {
    c.tied = !hf.tensors.contains("lm_head.weight");
  }
  c.n_mtp = tc.get_int("mtp_num_hidden_layers", 0);
  if (const json* e = tc.find("eos_token_id"); e && e->is_number_integer()) {
    c.eos_id = e->is_number_unsigned() && e->get<uint64_t>() > INT64_MAX ? INT64_MAX : e->get<int64_t>();
  }
  c.validate(hf.dir + "/config.json");
  return c;
}

Config config_from_gguf(const GgufFile& g, const std::string& path) {
  const GgufMetadata& m = g.metadata;
  Config c;
  c.arch = m.get_string("general.architecture");
  if (c.arch != "qwen35" && c.arch != "qwen35moe")
    throw_error(ErrorCode::kUnsupported, path + ": unknown architecture '" + c.arch + "' for the qwen35 loader");
  c.moe = c.arch == "qwen35moe";
  const std::string a = c.arch + ".";
  const int64_t blocks = m.get_int(a + "block_count");
  c.n_mtp = m.get_int(a + "nextn_predict_layers", 0);
  if (c.n_mtp < 0 || c.n_mtp >= blocks) throw_error(ErrorCode::kFormat, path + ": " + a + "nextn_predict_layers out of range");
  c.n_layer = blocks - c.n_mtp;
  c.n_embd = m.get_int(a + "embedding_length");
  c.n_ctx_train = m.get_int(a + "context_length", 262144);
  c.n_head = m.get_int(a + "attention.head_count");
  c.n_head_kv = m.get_int(a + "attention.head_count_kv", c.n_head);
  c.head_dim = m.get_int(a + "attention.key_length", c.n_head > 0 ? c.n_embd / c.n_head : 0);
  if (m.get_int(a + "attention.value_length", c.head_dim) != c.head_dim)
    throw_error(ErrorCode::kUnsupported, path + ": " + a + "attention.value_length differs from key_length");
  c.eps = static_cast<float>(m.get_float(a + "attention.layer_norm_rms_epsilon", 1e-6));
  c.rope_theta = static_cast<float>(m.get_float(a + "rope.freq_base", 1e7));
  c.n_rot = m.get_int(a + "rope.dimension_count", c.head_dim);
  if (const GgufValue* s = m.find(a + "rope.dimension_sections")) {
    auto v = s->as_int_array();
    for (size_t i = 0; i < v.size() && i < 4; ++i) {
      if (v[i] < 0 || v[i] > (1 << 16)) throw_error(ErrorCode::kFormat, path + ": " + a + "rope.dimension_sections out of range");
      c.mrope[i] = static_cast<int32_t>(v[i]);
    }
  }
  c.interval = m.get_int(a + "full_attention_interval", 4);
  if (c.interval < 1 || c.n_layer < 1 || c.n_layer > 4096)
    throw_error(ErrorCode::kFormat, path + ": " + a + "full_attention_interval / block_count out of range");
  for (int64_t i = 0; i < c.n_layer; ++i) c.recurrent.push_back((i + 1) % c.interval != 0);
  c.conv_k = m.get_int(a + "ssm.conv_kernel");
  c.dk = m.get_int(a + "ssm.state_size");
  c.hk = m.get_int(a + "ssm.group_count");
  c.hv = m.get_int(a + "ssm.time_step_rank");
  const int64_t inner = m.get_int(a + "ssm.inner_size");
  if (c.hv < 1 || inner % c.hv) throw_error(ErrorCode::kFormat, path + ": " + a + "ssm.inner_size is not a multiple of ssm.time_step_rank");
  c.dv = inner / c.hv;
  if (c.moe) {
    c.n_expert = m.get_int(a + "expert_count");
    c.n_expert_used = m.get_int(a + "expert_used_count");
    c.n_ff_exp = m.get_int(a + "expert_feed_forward_length");
    c.n_ff_shexp = m.get_int(a + "expert_shared_feed_forward_length", 0);
  } else {
    c.n_ff = m.get_int(a + "feed_forward_length");
  }
  const TensorInfo* emb = g.tensors.find("token_embd.weight");
  if (!emb) throw_error(ErrorCode::kFormat, path + ": missing tensor token_embd.weight");
  if (emb->shape.size() != 2) throw_error(ErrorCode::kFormat, path + ": tensor token_embd.weight is not 2-D");
  c.n_vocab = emb->shape[0];
  c.tied = !g.tensors.contains("output.weight");
  c.eos_id = m.get_int("tokenizer.ggml.eos_token_id", -1);
  c.validate(path);
  return c;
}

std::vector<int64_t> vhead_perm(int64_t hk, int64_t hv) {
  std::vector<int64_t> p(static_cast<size_t>(hv));
  const int64_t r = hv / hk;
  for (int64_t n = 0; n < hv; ++n) p[static_cast<size_t>(n)] = (n % hk) * r + n / hk;
  return p;
}

std::vector<int64_t> block_perm(int64_t total, int64_t offset, const std::vector<int64_t>& head_perm, int64_t block) {
  std::vector<int64_t> p(static_cast<size_t>(total));
  for (int64_t i = 0; i < total; ++i) p[static_cast<size_t>(i)] = i;
  for (size_t n = 0; n < head_perm.size(); ++n)
    for (int64_t j = 0; j < block; ++j)
      p[static_cast<size_t>(offset + static_cast<int64_t>(n) * block + j)] = offset + head_perm[n] * block + j;
  return p;
}

}  // namespace oxi::qwen35
