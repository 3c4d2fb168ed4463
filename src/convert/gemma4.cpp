// HF Gemma 4 checkpoint → GGUF (arch "gemma4") with llama.cpp's metadata keys, tensor names and
// value transforms (spec B.8): plain norms (no +1 shift), generated rope_freqs for proportional
// RoPE, router scales renamed, fused experts kept fused, per-layer arrays for KV heads / FFN size.
#include <cmath>
#include <cstring>
#include <algorithm>
#include <map>
#include <memory>
#include <optional>
#include <set>

#include "core/byte_source.h"
#include "core/error.h"
#include "core/half.h"
#include "format/gguf.h"
#include "kernels/matmul.h"
#include "kernels/thread_pool.h"
#include "models/common/quant_rule.h"
#include "convert/convert.h"
#include "convert/mlx_q4_1.h"
#include "models/gemma4/gemma4.h"

namespace oxi {

namespace {

using nlohmann::json;

// Writes tensor `t` (F32/F16/BF16, or MLX affine groups: format/mlx.h) as `type`, rows of `row_len`, into dst: a plain copy when the
// types match, else row by row (in parallel) through f32 with the kernels' quantisers.
// MLX 4-bit groups to Q4_1 are copied where exact (convert/mlx_q4_1.h), counted in `stats`.
void encode(const TensorInfo& t, DType type, int64_t row_len, uint8_t* dst, MlxQ4_1Stats& stats) {
  if (t.dtype != DType::F32 && t.dtype != DType::F16 && t.dtype != DType::BF16 && !is_mlx_dtype(t.dtype))
    throw_error(ErrorCode::kUnsupported, "tensor " + t.name + ": cannot convert from " + dtype_name(t.dtype));
  if (type == t.dtype) {
    std::memcpy(dst, t.data(), t.nbytes);
    return;
  }
  const int64_t rows = t.n_elements() / row_len;
  const uint64_t src_rb = *dtype_row_bytes(t.dtype, static_cast<uint64_t>(row_len));
  const uint8_t* src = t.data();
  if (type == DType::Q4_1 && is_mlx_q4(t.dtype)) {
    const MatrixView m{t.dtype, rows, row_len, src, src_rb};
    return mlx_q4_to_q4_1(rows, row_len, dst, [m](int64_t r) { return std::make_pair(m, r); }, {}, stats);
  }
  quantize_rows(type, rows, row_len, dst, [&](int64_t r, float* row, float*) {
    dequantize(t.dtype, src + src_rb * static_cast<uint64_t>(r), row, row_len);
  });
}

uint32_t file_type_of(DType t) {
  switch (t) {
    case DType::F32: return 0;
    case DType::F16: return 1;
    case DType::BF16: return 32;
    default: return quant_file_type(t);
  }
}

// tokenizer.ggml.* for the "gemma4" tokenizer model from tokenizer.json (llama.cpp's converter:
// BPE pieces, merges, scores, token types; the seven chat-syntax tokens stay visible).
void write_tokenizer(const HfCheckpoint& hf, int64_t n_vocab, GgufWriter& w) {
  if (hf.tokenizer_json_path.empty()) format_error(hf.dir, "missing tokenizer.json");
  json tj;
  try {
    tj = json::parse(read_text_file(hf.tokenizer_json_path, 1ull << 30));
  } catch (const json::exception& e) {
    format_error(hf.tokenizer_json_path, std::string("bad JSON: ") + e.what());
  }
  const json* model = tj.contains("model") ? &tj["model"] : nullptr;
  if (!model || !model->is_object() || !model->contains("vocab") || !(*model)["vocab"].is_object())
    format_error(hf.tokenizer_json_path, "model.vocab missing or not an object");
  std::vector<std::string> tokens;
  std::vector<int32_t> types;
  std::vector<uint8_t> seen;
  const json& vocab = (*model)["vocab"];
  int64_t n = 0;
  for (auto it = vocab.begin(); it != vocab.end(); ++it) {
    if (!it.value().is_number_integer()) format_error(hf.tokenizer_json_path, "vocab id of '" + it.key() + "' is not an integer");
    n = std::max<int64_t>(n, it.value().get<int64_t>() + 1);
  }
  std::map<int64_t, std::pair<std::string, bool>> added;
  if (tj.contains("added_tokens") && tj["added_tokens"].is_array()) {
    for (const json& a : tj["added_tokens"]) {
      if (!a.is_object() || !a.contains("id") || !a.contains("content")) continue;
      const int64_t id = a["id"].get<int64_t>();
      added[id] = {a["content"].get<std::string>(), a.value("special", false)};
      n = std::max<int64_t>(n, id + 1);
    }
  }
  if (n <= 0 || n > (1 << 24)) format_error(hf.tokenizer_json_path, "bad vocabulary size");
  n = std::max<int64_t>(n, n_vocab);
  tokens.assign(static_cast<size_t>(n), std::string());
  seen.assign(static_cast<size_t>(n), 0);
  for (auto it = vocab.begin(); it != vocab.end(); ++it) {
    const int64_t id = it.value().get<int64_t>();
    if (id < 0) format_error(hf.tokenizer_json_path, "negative token id");
    tokens[static_cast<size_t>(id)] = it.key();
    seen[static_cast<size_t>(id)] = 1;
  }
  for (const auto& [id, ts] : added) {
    if (id < 0) format_error(hf.tokenizer_json_path, "negative token id");
    tokens[static_cast<size_t>(id)] = ts.first;
    seen[static_cast<size_t>(id)] = 1;
  }
  static const std::set<std::string> kVisible = {"<|channel>", "<channel|>", "<|tool_call>", "<tool_call|>",
                                                 "<|tool_response>", "<tool_response|>", "<|\"|>"};
  types.assign(static_cast<size_t>(n), 1);
  for (int64_t i = 0; i < n; ++i) {
    const std::string& s = tokens[static_cast<size_t>(i)];
    if (!seen[static_cast<size_t>(i)]) {
      tokens[static_cast<size_t>(i)] = "[PAD" + std::to_string(i) + "]";
      types[static_cast<size_t>(i)] = 5;  // UNUSED
      continue;
    }
    auto a = added.find(i);
    if (kVisible.count(s)) types[static_cast<size_t>(i)] = 4;       // USER_DEFINED
    else if (a != added.end() && a->second.second) types[static_cast<size_t>(i)] = 3;  // CONTROL
    else if (s.size() == 6 && s.compare(0, 3, "<0x") == 0 && s[5] == '>') types[static_cast<size_t>(i)] = 6;  // BYTE
  }
  std::vector<std::string> merges;
  if (model->contains("merges") && (*model)["merges"].is_array()) {
    for (const json& m : (*model)["merges"]) {
      if (m.is_string()) merges.push_back(m.get<std::string>());
      else if (m.is_array() && m.size() == 2 && m[0].is_string() && m[1].is_string())
        merges.push_back(m[0].get<std::string>() + " " + m[1].get<std::string>());
      else format_error(hf.tokenizer_json_path, "bad merge entry");
    }
  }
  w.set_string("tokenizer.ggml.model", "gemma4");
  w.set_array_string("tokenizer.ggml.tokens", tokens);
  w.set_array_f32("tokenizer.ggml.scores", std::vector<float>(static_cast<size_t>(n), -1000.0f));
  w.set_array_i32("tokenizer.ggml.token_type", types);
  w.set_array_string("tokenizer.ggml.merges", merges);
  auto id_of = [&](const char* key, int64_t def) -> int64_t {
    const json& tc = hf.tokenizer_config;
    if (tc.is_object() && tc.contains(key)) {
      const json& v = tc[key];
      std::string s = v.is_string() ? v.get<std::string>() : (v.is_object() ? v.value("content", std::string()) : std::string());
      for (int64_t i = 0; i < n; ++i)
        if (!s.empty() && tokens[static_cast<size_t>(i)] == s) return i;
    }
    return def;
  };
  w.set_u32("tokenizer.ggml.bos_token_id", static_cast<uint32_t>(id_of("bos_token", 2)));
  // llama.cpp's converter takes eos from the model config (<eos> = 1); the chat stop token
  // <turn|> comes from the template/EOG list.
  int64_t eos = 1;
  if (hf.text_config.contains("eos_token_id") && hf.text_config["eos_token_id"].is_number_integer())
    eos = hf.text_config["eos_token_id"].get<int64_t>();
  else if (hf.config.contains("eos_token_id") && hf.config["eos_token_id"].is_number_integer())
    eos = hf.config["eos_token_id"].get<int64_t>();
  w.set_u32("tokenizer.ggml.eos_token_id", static_cast<uint32_t>(eos));
  w.set_u32("tokenizer.ggml.unknown_token_id", static_cast<uint32_t>(id_of("unk_token", 3)));
  w.set_u32("tokenizer.ggml.padding_token_id", static_cast<uint32_t>(id_of("pad_token", 0)));
  w.set_u32("tokenizer.ggml.mask_token_id", static_cast<uint32_t>(id_of("mask_token", 4)));
  w.set_bool("tokenizer.ggml.add_space_prefix", false);
  w.set_bool("tokenizer.ggml.add_bos_token", true);
  if (!hf.chat_template.empty()) w.set_string("tokenizer.chat_template", hf.chat_template);
}

}  // namespace

void convert_gemma4(const HfCheckpoint& hf, const std::string& out_path, const ConvertOptions& opt) {
  if (opt.mtp == ConvertOptions::Mtp::kOnly)
    throw_error(ErrorCode::kUnsupported, hf.dir + ": --mtp: Gemma 4 checkpoints have no MTP head (its drafters are separate assistant models)");
  const gemma4::Config c = gemma4::config_from_hf(hf);
  const std::string prefix = gemma4::hf_prefix(hf);
  const DType out = opt.out_type;
  const bool quant = out == DType::Q8_0 || out == DType::Q4_0 || out == DType::Q4_1 || out == DType::Q4_K;
  if (out != DType::F32 && out != DType::F16 && out != DType::BF16 && !quant)
    throw_error(ErrorCode::kInvalidArgument, "convert: --type must be f32, f16, bf16, q8_0, q4_0, q4_1 or q4_k");
  // Quantised types: llama-quantize's rule per tensor (models/common/quant_rule.h); the matrices
  // it keeps are written in the checkpoint's own float type (as a model quantising at load keeps
  // them), so `--quant T` at load and this file hold the same bytes.
  std::optional<QuantRule> rule;
  MlxQ4_1Stats mlx_stats;  // --type q4_1 of an MLX checkpoint: groups copied / requantised
  if (quant) rule = QuantRule{out, c.n_expert, false};  // the converter writes no output.weight (tied)

  GgufWriter w;
  // An assistant drafter (spec B.5) is written as llama.cpp's converter writes it: arch
  // gemma4-assistant, the same keys under that prefix plus embedding_length_out (the target's
  // width) and nextn_predict_layers = block_count, pre/post projections as nextn.*; the
  // ordered-embedding tensors (masked_embedding.*) are left out, as llama.cpp's converter does
  // (drafts then come from the full logits: docs/speculative.md).
  const std::string arch = c.assistant ? gemma4::kAssistantArch : "gemma4";
  const std::string a = arch + ".";
  w.set_string("general.architecture", arch);
  w.set_string("general.type", "model");
  {
    std::string name = c.name;
    if (name.empty()) {
      std::string p = hf.dir;
      while (!p.empty() && p.back() == '/') p.pop_back();
      name = p.substr(p.find_last_of('/') + 1);
    }
    w.set_string("general.name", name);
  }
  w.set_u32("general.file_type", file_type_of(out));
  w.set_u32("general.quantization_version", 2);
  const size_t L = static_cast<size_t>(c.n_layer);
  w.set_u32(a + "block_count", static_cast<uint32_t>(c.n_layer));
  w.set_u32(a + "context_length", static_cast<uint32_t>(c.n_ctx_train));
  w.set_u32(a + "embedding_length", static_cast<uint32_t>(c.n_embd));
  write_st_pooling(w, "gemma4", hf);
  bool ff_same = true, kv_same = true;
  for (size_t l = 0; l < L; ++l) {
    ff_same &= c.n_ff[l] == c.n_ff[0];
    kv_same &= c.n_head_kv[l] == c.n_head_kv[0];
  }
  if (ff_same) w.set_u32(a + "feed_forward_length", static_cast<uint32_t>(c.n_ff[0]));
  else w.set_array_i32(a + "feed_forward_length", std::vector<int32_t>(c.n_ff.begin(), c.n_ff.end()));
  w.set_u32(a + "attention.head_count", static_cast<uint32_t>(c.n_head));
  if (kv_same) w.set_u32(a + "attention.head_count_kv", static_cast<uint32_t>(c.n_head_kv[0]));
  else w.set_array_i32(a + "attention.head_count_kv", std::vector<int32_t>(c.n_head_kv.begin(), c.n_head_kv.end()));
  w.set_f32(a + "attention.layer_norm_rms_epsilon", c.eps);
  w.set_u32(a + "attention.key_length", static_cast<uint32_t>(c.head_dim_full));
  w.set_u32(a + "attention.value_length", static_cast<uint32_t>(c.head_dim_full));
  w.set_u32(a + "attention.sliding_window", static_cast<uint32_t>(c.window));
  w.set_u32(a + "attention.shared_kv_layers", static_cast<uint32_t>(c.n_kv_shared));
  {
    std::vector<bool> pat(L);
    for (size_t l = 0; l < L; ++l) pat[l] = c.is_swa[l] != 0;
    w.set_array_bool(a + "attention.sliding_window_pattern", pat);
  }
  w.set_u32(a + "attention.key_length_swa", static_cast<uint32_t>(c.head_dim_swa));
  w.set_u32(a + "attention.value_length_swa", static_cast<uint32_t>(c.head_dim_swa));
  w.set_f32(a + "rope.freq_base", c.rope_base_full);
  w.set_f32(a + "rope.freq_base_swa", c.rope_base_swa);
  w.set_u32(a + "rope.dimension_count", static_cast<uint32_t>(c.n_rot_full));
  w.set_u32(a + "rope.dimension_count_swa", static_cast<uint32_t>(c.n_rot_swa));
  if (c.n_expert > 0) {
    w.set_u32(a + "expert_count", static_cast<uint32_t>(c.n_expert));
    w.set_u32(a + "expert_used_count", static_cast<uint32_t>(c.n_expert_used));
  }
  if (c.final_softcap > 0) w.set_f32(a + "final_logit_softcapping", c.final_softcap);
  w.set_u32(a + "embedding_length_per_layer_input", static_cast<uint32_t>(c.n_embd_per_layer));
  if (c.n_expert > 0) w.set_u32(a + "expert_feed_forward_length", static_cast<uint32_t>(c.n_ff_exp));
  if (c.assistant) {
    w.set_u32(a + "embedding_length_out", static_cast<uint32_t>(c.n_embd_backbone));
    w.set_u32(a + "nextn_predict_layers", static_cast<uint32_t>(c.n_layer));
  }

  write_tokenizer(hf, c.n_vocab, w);

  // rope_freqs for proportional RoPE (full layers only), f32.
  auto rope_freqs = std::make_shared<std::vector<float>>(c.rope_freqs_full);
  if (!rope_freqs->empty())
    w.add_tensor("rope_freqs.weight", DType::F32, {static_cast<int64_t>(rope_freqs->size())}, rope_freqs->data(),
                 rope_freqs->size() * sizeof(float));

  for (const auto& [name, t] : hf.tensors.all()) {
    std::string g;
    if (c.assistant && (name == "pre_projection.weight" || name == "post_projection.weight")) {
      g = "nextn." + name;
    } else if (c.assistant && name.compare(0, 17, "masked_embedding.") == 0) {
      continue;
    } else if (name.compare(0, prefix.size(), prefix) != 0) {
      if (c.assistant && name != "lm_head.weight") format_error(hf.dir, "convert: unknown gemma4 assistant tensor " + name);
      continue;  // vision / audio towers; an assistant's tied lm_head
    } else {
      g = gemma4::hf_to_gguf_name(name.substr(prefix.size()));
    }
    const std::string rel = name.substr(std::min(prefix.size(), name.size()));
    if (g.empty()) {
      if (rel == "lm_head.weight") continue;
      format_error(hf.dir, "convert: unknown gemma4 tensor " + name);
    }
    const bool mlx = is_mlx_dtype(t.dtype);
    if (t.dtype != DType::F32 && t.dtype != DType::F16 && t.dtype != DType::BF16 && !mlx)
      throw_error(ErrorCode::kUnsupported, hf.dir + ": convert: tensor " + name + " has type " + dtype_name(t.dtype));
    // Matrices (2-D / 3-D) take the requested type; vectors and scalars stay F32.
    const int64_t row_len = t.shape.empty() ? 1 : t.shape.back();
    DType type = DType::F32;
    // (MLX groups have no GGUF type: what the rule keeps is written F32.)
    if (t.shape.size() >= 2) {
      const auto rt = rule ? rule->target(g, static_cast<int>(t.shape.size()), row_len) : std::nullopt;
      type = rule ? rt.value_or(mlx ? DType::F32 : t.dtype) : out;
      // --type q4_1: every MLX 4-bit matrix the rule quantises is Q4_1, its groups copied (also
      // the tied embeddings the rule makes Q6_K: more bits over 4-bit values only add error).
      if (out == DType::Q4_1 && rt && is_mlx_q4(t.dtype)) type = DType::Q4_1;
    }
    std::vector<int64_t> shape = t.shape;
    if (shape.empty()) shape = {1};
    auto nb = dtype_row_bytes(type, static_cast<uint64_t>(row_len));
    if (!nb) format_error(hf.dir, "convert: tensor " + name + " has a bad row size");
    const uint64_t nbytes = *nb * static_cast<uint64_t>(t.n_elements() / std::max<int64_t>(row_len, 1));
    const TensorInfo ti = t;
    MlxQ4_1Stats* st = &mlx_stats;
    w.add_tensor(g, type, shape, nbytes, [ti, type, row_len, st](uint8_t* dst, uint64_t) { encode(ti, type, row_len, dst, *st); });
  }
  w.write(out_path);
  print_mlx_q4_1_stats(mlx_stats);
}

}  // namespace oxi
