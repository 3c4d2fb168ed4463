// HF Gemma 4 vision tower (model.vision_tower.*, model.embed_vision.*) → the mmproj GGUF llama.cpp's
// mtmd loads (projector type `gemma4v`). Names and keys as llama.cpp's clip loader reads them (facts
// in docs/multimodal.md "Gemma 4"): the linear patch embedding [h, P·P·3] (pixels in row, column,
// channel order) becomes the conv kernel v.patch_embd.weight [h, 3, P, P]; the position table
// [2, S, h] → v.position_embd.weight (f32); blocks → v.blk.N.{ln1, attn_q/k/v/out, attn_q_norm,
// attn_k_norm, attn_post_norm, ln2, ffn_gate/up/down, ffn_post_norm, out_scale}; the clippable
// linears' scalar bounds → v.blk.N.<linear>.{input_min, input_max, output_min, output_max} ([1],
// f32); std_bias / std_scale → v.std_bias / v.std_scale; the projection → mm.input_projection.weight.
#include <algorithm>
#include <cmath>
#include <filesystem>
#include <functional>
#include <memory>

#include <nlohmann/json.hpp>

#include "convert/convert.h"
#include "convert/mmproj_writer.h"
#include "core/byte_source.h"
#include "core/error.h"
#include "format/gguf.h"
#include "kernels/matmul.h"
#include "models/common/weights.h"

namespace oxi {

namespace {

using nlohmann::json;

int64_t vint(const json& v, const std::string& dir, const char* key) {
  auto it = v.find(key);
  if (it == v.end() || !it->is_number_integer() || it->get<int64_t>() < 1)
    throw_error(ErrorCode::kFormat, dir + "/config.json: vision_config." + key + " missing or not a positive integer");
  return it->get<int64_t>();
}

int64_t aint(const json& a, const std::string& dir, const char* key) {
  auto it = a.find(key);
  if (it == a.end() || !it->is_number_integer() || it->get<int64_t>() < 1)
    throw_error(ErrorCode::kFormat, dir + "/config.json: audio_config." + key + " missing or not a positive integer");
  return it->get<int64_t>();
}

// The audio tower (model.audio_tower.*, model.embed_audio.*) into the same file, projector
// `gemma4a`, names as llama.cpp's converter maps them (docs/multimodal.md "Gemma 4 audio"):
// subsample_conv_projection.layer{0,1}.{conv, norm} → a.conv1d.{0,1}.weight / a.conv1d.{0,1}.norm.weight,
// input_proj_linear → a.input_projection; per layer feed_forward1 → ffn_norm / ffn_up / ffn_down /
// ffn_post_norm, feed_forward2 → the same with _1, norm_pre_attn → attn_pre_norm, self_attn.{q,k,v}_proj
// → attn_q/k/v, self_attn.post → attn_out, relative_k_proj → attn_k_rel, softplus(per_dim_scale) →
// per_dim_scale.weight, norm_post_attn → attn_post_norm, lconv1d.pre_layer_norm → conv_norm,
// linear_start → conv_pw1, depthwise_conv1d [h, 1, K] → conv_dw [h, K], lconv1d.conv_norm → norm_conv,
// linear_end → conv_pw2, norm_out → ln2; output_proj → a.pre_encode.out (weight, bias);
// embed_audio.embedding_projection → mm.a.input_projection. Conv kernels stay f32 (llama.cpp forces
// them: ggml's conv and ssm_conv want f32 kernels).
void add_gemma4_audio(MmprojWriter& T, const HfCheckpoint& hf, const json& ac, int64_t d_text) {
  const std::string a = "model.audio_tower.";
  const int64_t h = aint(ac, hf.dir, "hidden_size"), depth = aint(ac, hf.dir, "num_hidden_layers"),
                heads = aint(ac, hf.dir, "num_attention_heads"), K = aint(ac, hf.dir, "conv_kernel_size"),
                out = aint(ac, hf.dir, "output_proj_dims"), mels = ac.value("input_feat_size", int64_t(128));
  if (h % heads) throw_error(ErrorCode::kFormat, hf.dir + ": audio hidden_size is not a multiple of num_attention_heads");
  // llama.cpp's graph hard-codes chunk 12, 12 frames of past context, no future context, cap 50.
  if (ac.value("attention_chunk_size", 12) != 12 || ac.value("attention_context_left", 13) != 13 ||
      ac.value("attention_context_right", 0) != 0 || ac.value("attention_logit_cap", 50.0) != 50.0 ||
      ac.value("residual_weight", 0.5) != 0.5 || ac.value("hidden_act", std::string("silu")) != "silu")
    throw_error(ErrorCode::kUnsupported, hf.dir + ": audio attention chunking / logit cap / residual weight / activation "
                                                  "other than Gemma 4's (12, 13, 0, 50, 0.5, silu)");
  const auto ch = ac.value("subsampling_conv_channels", std::vector<int64_t>{});
  if (ch.size() != 2 || ch[0] < 1 || ch[1] < 1 || mels % 4)
    throw_error(ErrorCode::kFormat, hf.dir + ": audio_config.subsampling_conv_channels needs two positive sizes");
  const DType mt = T.matrix_type();
  auto linear = [&](const std::string& out, const std::string& in, int64_t rows, int64_t cols) { T.clip_linear(out, in, rows, cols); };
  auto scalar = [&](const std::string& out, const std::string& in) { T.scalar(out, in); };
  auto f32 = [&](const std::string& o, const std::string& in, const std::vector<int64_t>& shape) { T.copy(o, in, shape, false); };
  const std::string s = a + "subsample_conv_projection.";
  f32("a.conv1d.0.weight", s + "layer0.conv.weight", {ch[0], 1, 3, 3});
  f32("a.conv1d.0.norm.weight", s + "layer0.norm.weight", {ch[0]});
  f32("a.conv1d.1.weight", s + "layer1.conv.weight", {ch[1], ch[0], 3, 3});
  f32("a.conv1d.1.norm.weight", s + "layer1.norm.weight", {ch[1]});
  T.copy("a.input_projection.weight", s + "input_proj_linear.weight", {h, (mels / 4) * ch[1]}, true);
  for (int64_t i = 0; i < depth; ++i) {
    const std::string b = a + "layers." + std::to_string(i) + ".", o = "a.blk." + std::to_string(i) + ".";
    const int64_t hd = h / heads;
    for (int f = 0; f < 2; ++f) {
      const std::string ff = b + (f ? "feed_forward2." : "feed_forward1."), sfx = f ? "_1" : "";
      f32(o + "ffn_norm" + sfx + ".weight", ff + "pre_layer_norm.weight", {h});
      linear(o + "ffn_up" + sfx, ff + "ffw_layer_1", 4 * h, h);
      linear(o + "ffn_down" + sfx, ff + "ffw_layer_2", h, 4 * h);
      f32(o + "ffn_post_norm" + sfx + ".weight", ff + "post_layer_norm.weight", {h});
    }
    f32(o + "attn_pre_norm.weight", b + "norm_pre_attn.weight", {h});
    linear(o + "attn_q", b + "self_attn.q_proj", h, h);
    linear(o + "attn_k", b + "self_attn.k_proj", h, h);
    linear(o + "attn_v", b + "self_attn.v_proj", h, h);
    linear(o + "attn_out", b + "self_attn.post", h, h);
    T.copy(o + "attn_k_rel.weight", b + "self_attn.relative_k_proj.weight", {h, h}, true);
    {
      const std::string in = b + "self_attn.per_dim_scale";
      std::vector<float> v = wt::to_f32(wt::require(hf.tensors, in, {hd}));
      T.take(in);
      for (float& x : v) x = x > 20.0f ? x : std::log1p(std::exp(x));  // softplus, as the converter stores it
      auto sp = std::make_shared<const std::vector<float>>(std::move(v));
      T.emit(o + "per_dim_scale.weight", {hd}, DType::F32, 1, hd, [sp](int64_t, float* x) { std::copy(sp->begin(), sp->end(), x); });
    }
    f32(o + "attn_post_norm.weight", b + "norm_post_attn.weight", {h});
    f32(o + "conv_norm.weight", b + "lconv1d.pre_layer_norm.weight", {h});
    linear(o + "conv_pw1", b + "lconv1d.linear_start", 2 * h, h);
    {
      const std::string in = b + "lconv1d.depthwise_conv1d.weight";
      const TensorInfo& t = wt::require(hf.tensors, in, {h, 1, K});
      T.take(in);
      auto all = std::make_shared<const std::vector<float>>(wt::to_f32(t));
      T.emit(o + "conv_dw.weight", {h, K}, DType::F32, h, K, [all, K](int64_t r, float* x) {
        std::copy(all->begin() + r * K, all->begin() + (r + 1) * K, x);
      });
    }
    f32(o + "norm_conv.weight", b + "lconv1d.conv_norm.weight", {h});
    linear(o + "conv_pw2", b + "lconv1d.linear_end", h, h);
    f32(o + "ln2.weight", b + "norm_out.weight", {h});
  }
  T.copy("a.pre_encode.out.weight", a + "output_proj.weight", {out, h}, true);
  if (hf.tensors.contains(a + "output_proj.bias")) f32("a.pre_encode.out.bias", a + "output_proj.bias", {out});
  if (hf.tensors.contains("model.embed_audio.soft_embedding_norm.weight"))
    f32("mm.a.soft_emb_norm.weight", "model.embed_audio.soft_embedding_norm.weight", {out});
  T.copy("mm.a.input_projection.weight", "model.embed_audio.embedding_projection.weight", {d_text, out}, true);
  (void)mt;
  T.check_all_used({a, "model.embed_audio."});
  GgufWriter& w = T.w;
  w.set_u32("clip.audio.projection_dim", static_cast<uint32_t>(d_text));
  w.set_u32("clip.audio.embedding_length", static_cast<uint32_t>(h));
  w.set_u32("clip.audio.feed_forward_length", static_cast<uint32_t>(4 * h));
  w.set_u32("clip.audio.block_count", static_cast<uint32_t>(depth));
  w.set_u32("clip.audio.attention.head_count", static_cast<uint32_t>(heads));
  w.set_u32("clip.audio.num_mel_bins", static_cast<uint32_t>(mels));
  w.set_f32("clip.audio.attention.layer_norm_epsilon", static_cast<float>(ac.value("rms_norm_eps", 1e-6)));
}

}  // namespace

void convert_gemma4_mmproj(const HfCheckpoint& hf, const std::string& out_path, const ConvertOptions& opt) {
  const json& vc = hf.config.contains("vision_config") ? hf.config["vision_config"] : json();
  const std::string v = "model.vision_tower.";
  if (!vc.is_object() || !hf.tensors.contains(v + "patch_embedder.input_proj.weight"))
    throw_error(ErrorCode::kUnsupported, hf.dir + ": the checkpoint has no vision tower (vision_config / model.vision_tower.*)");
  const int64_t h = vint(vc, hf.dir, "hidden_size"), depth = vint(vc, hf.dir, "num_hidden_layers"),
                heads = vint(vc, hf.dir, "num_attention_heads"), ffn = vint(vc, hf.dir, "intermediate_size"),
                P = vint(vc, hf.dir, "patch_size"), S = vint(vc, hf.dir, "position_embedding_size"),
                pool = vc.contains("pooling_kernel_size") ? vint(vc, hf.dir, "pooling_kernel_size") : 3;
  if (h % heads) throw_error(ErrorCode::kFormat, hf.dir + ": vision hidden_size is not a multiple of num_attention_heads");
  if (vc.contains("head_dim") && vc["head_dim"].is_number_integer() && vc["head_dim"].get<int64_t>() != h / heads)
    throw_error(ErrorCode::kUnsupported, hf.dir + ": vision head_dim != hidden_size / num_attention_heads (llama.cpp assumes it)");
  if (vc.contains("num_key_value_heads") && vc["num_key_value_heads"].is_number_integer() &&
      vc["num_key_value_heads"].get<int64_t>() != heads)
    throw_error(ErrorCode::kUnsupported, hf.dir + ": grouped-query vision attention is not supported");
  const std::string act = vc.value("hidden_activation", std::string("gelu_pytorch_tanh"));
  if (act != "gelu_pytorch_tanh")
    throw_error(ErrorCode::kUnsupported, hf.dir + ": vision hidden_activation '" + act + "' (gelu_pytorch_tanh is supported)");
  const int64_t d_text = hf.text_config.value("hidden_size", int64_t(0));
  const float eps = static_cast<float>(vc.value("rms_norm_eps", vc.value("layer_norm_eps", 1e-6)));
  std::vector<float> mean{0, 0, 0}, stdv{1, 1, 1};
  const std::string pp_path = hf.dir + "/preprocessor_config.json";
  if (std::filesystem::exists(pp_path)) {
    try {
      const json pp = json::parse(read_text_file(pp_path, 1 << 20));
      if (pp.contains("image_mean")) mean = pp["image_mean"].get<std::vector<float>>();
      if (pp.contains("image_std")) stdv = pp["image_std"].get<std::vector<float>>();
    } catch (const json::exception& e) {
      throw_error(ErrorCode::kFormat, pp_path + ": " + e.what());
    }
    if (mean.size() != 3 || stdv.size() != 3) throw_error(ErrorCode::kFormat, pp_path + ": image_mean/image_std need 3 values");
  }

  MmprojWriter T(hf, opt.out_type == DType::F32 ? DType::F32 : DType::F16);
  const DType mt = T.matrix_type();
  auto linear = [&](const std::string& out, const std::string& in, int64_t rows, int64_t cols) { T.clip_linear(out, in, rows, cols); };
  auto scalar = [&](const std::string& out, const std::string& in) { T.scalar(out, in); };
  {
    // [h, P·P·3] in (py, px, c) order → conv kernel [h, 3, P, P].
    const TensorInfo& t = wt::require(hf.tensors, v + "patch_embedder.input_proj.weight", {h, P * P * 3});
    T.take(v + "patch_embedder.input_proj.weight");
    auto all = std::make_shared<const std::vector<float>>(wt::to_f32(t));
    T.emit("v.patch_embd.weight", {h, 3, P, P}, mt, h * 3, P * P, [all, P](int64_t r, float* x) {  // row (o, c)
      const int64_t o = r / 3, c = r % 3;
      for (int64_t k = 0; k < P * P; ++k) x[k] = (*all)[static_cast<size_t>(o * P * P * 3 + k * 3 + c)];
    });
  }
  T.copy("v.position_embd.weight", v + "patch_embedder.position_embedding_table", {2, S, h}, false);
  for (int64_t i = 0; i < depth; ++i) {
    const std::string b = v + "encoder.layers." + std::to_string(i) + ".", o = "v.blk." + std::to_string(i) + ".";
    const int64_t hd = h / heads;
    T.copy(o + "ln1.weight", b + "input_layernorm.weight", {h}, false);
    linear(o + "attn_q", b + "self_attn.q_proj", h, h);
    linear(o + "attn_k", b + "self_attn.k_proj", h, h);
    linear(o + "attn_v", b + "self_attn.v_proj", h, h);
    linear(o + "attn_out", b + "self_attn.o_proj", h, h);
    T.copy(o + "attn_q_norm.weight", b + "self_attn.q_norm.weight", {hd}, false);
    T.copy(o + "attn_k_norm.weight", b + "self_attn.k_norm.weight", {hd}, false);
    T.copy(o + "attn_post_norm.weight", b + "post_attention_layernorm.weight", {h}, false);
    T.copy(o + "ln2.weight", b + "pre_feedforward_layernorm.weight", {h}, false);
    linear(o + "ffn_gate", b + "mlp.gate_proj", ffn, h);
    linear(o + "ffn_up", b + "mlp.up_proj", ffn, h);
    linear(o + "ffn_down", b + "mlp.down_proj", h, ffn);
    T.copy(o + "ffn_post_norm.weight", b + "post_feedforward_layernorm.weight", {h}, false);
    if (hf.tensors.contains(b + "layer_scalar")) T.copy(o + "out_scale.weight", b + "layer_scalar", {1}, false);
  }
  if (hf.tensors.contains(v + "std_bias")) {
    T.copy("v.std_bias", v + "std_bias", {h}, false);
    T.copy("v.std_scale", v + "std_scale", {h}, false);
  }
  T.copy("mm.input_projection.weight", "model.embed_vision.embedding_projection.weight", {d_text, h}, true);
  T.check_all_used({v, "model.embed_vision."});
  // The audio tower, when the checkpoint has one, goes into the same file (llama.cpp's converter
  // has no audio-only Gemma 4 mmproj: the vision tower is always there).
  const json& ac = hf.config.contains("audio_config") ? hf.config["audio_config"] : json();
  const bool audio = ac.is_object() && hf.tensors.contains("model.audio_tower.output_proj.weight");
  if (audio) add_gemma4_audio(T, hf, ac, d_text);

  T.write_header("gemma4v", audio ? "gemma4a" : "");
  GgufWriter& w = T.w;
  // llama.cpp's converter writes no activation key for gemma4v, and its loader then takes
  // gelu_quick; the checkpoint says gelu_pytorch_tanh, so we write clip.use_gelu (tanh GELU).
  w.set_bool("clip.use_gelu", true);
  w.set_u32("clip.vision.projection_dim", static_cast<uint32_t>(d_text));
  w.set_u32("clip.vision.image_size", 224);  // unused by gemma4v; llama.cpp's converter writes 224
  w.set_u32("clip.vision.patch_size", static_cast<uint32_t>(P));
  w.set_u32("clip.vision.embedding_length", static_cast<uint32_t>(h));
  w.set_u32("clip.vision.feed_forward_length", static_cast<uint32_t>(ffn));
  w.set_u32("clip.vision.block_count", static_cast<uint32_t>(depth));
  w.set_u32("clip.vision.attention.head_count", static_cast<uint32_t>(heads));
  w.set_f32("clip.vision.attention.layer_norm_epsilon", eps);
  if (pool != 3) w.set_u32("clip.vision.projector.scale_factor", static_cast<uint32_t>(pool));
  w.set_array_f32("clip.vision.image_mean", mean);
  w.set_array_f32("clip.vision.image_std", stdv);
  w.write(out_path);
}

}  // namespace oxi
