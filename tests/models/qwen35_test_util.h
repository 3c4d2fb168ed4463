// Tiny Qwen 3.5 HF checkpoints written from the tests (small vocab so they run in milliseconds).
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <random>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/byte_source.h"
#include "core/half.h"
#include "format/safetensors.h"

namespace q35test {

struct Shape {
  int64_t d = 64, layers = 5, n_head = 4, n_kv = 2, hd = 32, hk = 2, hv = 4, dk = 16, dv = 16, ffn = 96, vocab = 300;
  bool moe = false, tied = true, mtp = false;  // mtp: an MTP block (mtp.*, mtp_num_hidden_layers 1)
  int64_t experts = 8, top_k = 2, eff = 32, sff = 32;
};

inline std::vector<uint8_t> f32_bytes(const std::vector<float>& v) {
  std::vector<uint8_t> b(v.size() * 4);
  std::memcpy(b.data(), v.data(), b.size());
  return b;
}

// A safetensors file of f32 tensors ~ N(mean, sd²), seeded (also used by tests/vision).
class RandomF32Tensors {
 public:
  explicit RandomF32Tensors(uint32_t seed) : rng_(seed) {}
  void add(const std::string& name, std::vector<int64_t> shape, float sd, float mean = 0.0f) {
    int64_t n = 1;
    for (auto x : shape) n *= x;
    std::vector<float> v(static_cast<size_t>(n));
    for (auto& x : v) x = mean + sd * nd_(rng_);
    w_.add_tensor(name, oxi::DType::F32, std::move(shape), f32_bytes(v));
  }
  void write(const std::string& path) const { w_.write(path); }

 private:
  std::mt19937 rng_;
  std::normal_distribution<float> nd_{0.0f, 1.0f};
  oxi::SafetensorsWriter w_;
};

// Writes config.json + model.safetensors (f32) + a minimal byte-level tokenizer into dir.
inline void write_model(const std::string& dir, const Shape& s, uint32_t seed = 7) {
  namespace fs = std::filesystem;
  fs::remove_all(dir);
  fs::create_directories(dir);
  RandomF32Tensors w(seed);
  auto add = [&](const std::string& name, std::vector<int64_t> shape, float std_, float mean = 0.0f) {
    w.add(name, std::move(shape), std_, mean);
  };
  auto mat = [&](const std::string& name, int64_t o, int64_t i, float g = 1.0f) {
    add(name, {o, i}, g / std::sqrt(static_cast<float>(i)));
  };
  const std::string lm = "model.language_model.";
  const int64_t KD = s.hk * s.dk, VD = s.hv * s.dv, C = 2 * KD + VD;
  add(lm + "embed_tokens.weight", {s.vocab, s.d}, 2.5f / std::sqrt(static_cast<float>(s.d)));
  nlohmann::json types = nlohmann::json::array();
  auto layer = [&](const std::string& p, bool full) {
    add(p + "input_layernorm.weight", {s.d}, 0.1f);
    add(p + "post_attention_layernorm.weight", {s.d}, 0.1f);
    if (full) {
      mat(p + "self_attn.q_proj.weight", 2 * s.n_head * s.hd, s.d);
      mat(p + "self_attn.k_proj.weight", s.n_kv * s.hd, s.d);
      mat(p + "self_attn.v_proj.weight", s.n_kv * s.hd, s.d);
      mat(p + "self_attn.o_proj.weight", s.d, s.n_head * s.hd, 0.7f);
      add(p + "self_attn.q_norm.weight", {s.hd}, 0.1f);
      add(p + "self_attn.k_norm.weight", {s.hd}, 0.1f);
    } else {
      mat(p + "linear_attn.in_proj_qkv.weight", C, s.d);
      mat(p + "linear_attn.in_proj_z.weight", VD, s.d);
      mat(p + "linear_attn.in_proj_b.weight", s.hv, s.d);
      mat(p + "linear_attn.in_proj_a.weight", s.hv, s.d, 0.5f);
      add(p + "linear_attn.conv1d.weight", {C, 1, 4}, 0.5f);
      add(p + "linear_attn.A_log", {s.hv}, 0.5f, -0.5f);
      add(p + "linear_attn.dt_bias", {s.hv}, 0.5f, -2.0f);
      add(p + "linear_attn.norm.weight", {s.dv}, 0.1f, 1.0f);
      mat(p + "linear_attn.out_proj.weight", s.d, VD, 0.7f);
    }
    if (!s.moe) {
      mat(p + "mlp.gate_proj.weight", s.ffn, s.d);
      mat(p + "mlp.up_proj.weight", s.ffn, s.d);
      mat(p + "mlp.down_proj.weight", s.d, s.ffn, 0.7f);
    } else {
      mat(p + "mlp.gate.weight", s.experts, s.d, 2.0f);
      add(p + "mlp.experts.gate_up_proj", {s.experts, 2 * s.eff, s.d}, 1.0f / std::sqrt(static_cast<float>(s.d)));
      add(p + "mlp.experts.down_proj", {s.experts, s.d, s.eff}, 0.7f / std::sqrt(static_cast<float>(s.eff)));
      mat(p + "mlp.shared_expert.gate_proj.weight", s.sff, s.d);
      mat(p + "mlp.shared_expert.up_proj.weight", s.sff, s.d);
      mat(p + "mlp.shared_expert.down_proj.weight", s.d, s.sff, 0.7f);
      mat(p + "mlp.shared_expert_gate.weight", 1, s.d);
    }
  };
  for (int64_t i = 0; i < s.layers; ++i) {
    const bool full = (i + 1) % 4 == 0;
    types.push_back(full ? "full_attention" : "linear_attention");
    layer(lm + "layers." + std::to_string(i) + ".", full);
  }
  add(lm + "norm.weight", {s.d}, 0.1f);
  if (!s.tied) add("lm_head.weight", {s.vocab, s.d}, 2.5f / std::sqrt(static_cast<float>(s.d)));
  if (s.mtp) {
    mat("mtp.fc.weight", s.d, 2 * s.d);
    add("mtp.pre_fc_norm_embedding.weight", {s.d}, 0.1f);
    add("mtp.pre_fc_norm_hidden.weight", {s.d}, 0.1f);
    add("mtp.norm.weight", {s.d}, 0.1f);
    layer("mtp.layers.0.", true);
  }
  w.write(dir + "/model.safetensors");

  nlohmann::json tc = {{"model_type", s.moe ? "qwen3_5_moe_text" : "qwen3_5_text"},
                       {"hidden_size", s.d},
                       {"num_hidden_layers", s.layers},
                       {"num_attention_heads", s.n_head},
                       {"num_key_value_heads", s.n_kv},
                       {"head_dim", s.hd},
                       {"linear_num_key_heads", s.hk},
                       {"linear_num_value_heads", s.hv},
                       {"linear_key_head_dim", s.dk},
                       {"linear_value_head_dim", s.dv},
                       {"linear_conv_kernel_dim", 4},
                       {"full_attention_interval", 4},
                       {"layer_types", types},
                       {"rms_norm_eps", 1e-6},
                       {"vocab_size", s.vocab},
                       {"max_position_embeddings", 4096},
                       {"tie_word_embeddings", s.tied},
                       {"mtp_num_hidden_layers", s.mtp ? 1 : 0},
                       {"rope_parameters", {{"rope_theta", 1e7}, {"partial_rotary_factor", 0.25}, {"mrope_section", {2, 1, 1}}}}};
  if (s.moe) {
    tc["num_experts"] = s.experts;
    tc["num_experts_per_tok"] = s.top_k;
    tc["moe_intermediate_size"] = s.eff;
    tc["shared_expert_intermediate_size"] = s.sff;
  } else {
    tc["intermediate_size"] = s.ffn;
  }
  nlohmann::json cfg = {{"model_type", s.moe ? "qwen3_5_moe" : "qwen3_5"}, {"text_config", tc}, {"tie_word_embeddings", s.tied}};
  std::string cs = cfg.dump(1);
  oxi::write_file_atomic(dir + "/config.json", cs.data(), cs.size());
  // Byte-level BPE vocabulary: the 256 GPT-2 byte symbols, then "tN" filler tokens, one merge.
  nlohmann::json vocab = nlohmann::json::object();
  auto utf8 = [](uint32_t cp) {
    std::string o;
    if (cp < 0x80) o += static_cast<char>(cp);
    else {
      o += static_cast<char>(0xC0 | (cp >> 6));
      o += static_cast<char>(0x80 | (cp & 0x3F));
    }
    return o;
  };
  int64_t next = 0, extra = 256;
  for (uint32_t b = 0; b < 256; ++b) {
    const bool direct = (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || (b >= 174);
    vocab[utf8(direct ? b : 256 + static_cast<uint32_t>(extra++ - 256))] = next++;
  }
  vocab["t1"] = next++;
  for (int64_t i = 0; next < s.vocab - 40; ++i) vocab["tok" + std::to_string(i)] = next++;
  nlohmann::json tok = {
      {"model", {{"type", "BPE"}, {"vocab", vocab}, {"merges", nlohmann::json::array({nlohmann::json::array({"t", "1"})})}}},
      {"pre_tokenizer",
       {{"type", "Sequence"},
        {"pretokenizers",
         nlohmann::json::array(
             {{{"type", "Split"},
               {"pattern", {{"Regex", "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?[\\p{L}\\p{M}]+|\\p{N}| ?[^\\s\\p{L}\\p{M}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"}}},
               {"behavior", "Isolated"},
               {"invert", false}},
              {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"trim_offsets", false}, {"use_regex", false}}})}}},
      {"decoder", {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"trim_offsets", false}, {"use_regex", true}}},
      {"added_tokens", nlohmann::json::array({{{"id", s.vocab - 40}, {"content", "<|im_end|>"}, {"special", true}}})}};
  std::string ts = tok.dump();
  oxi::write_file_atomic(dir + "/tokenizer.json", ts.data(), ts.size());
  std::string tcs = R"({"eos_token": "<|im_end|>"})";
  oxi::write_file_atomic(dir + "/tokenizer_config.json", tcs.data(), tcs.size());
}

inline std::string tmp_dir(const std::string& name) {
  return (std::filesystem::temp_directory_path() / ("oxi_q35_" + name + "_" + std::to_string(::getpid()))).string();
}

}  // namespace q35test
