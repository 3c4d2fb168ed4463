// HF Gemma 4 vision tower (model.vision_tower.*, model.embed_vision.*) → the mmproj GGUF llama.cpp's
// mtmd loads (projector type `gemma4v`). Names and keys as llama.cpp's clip loader reads them (facts
// in docs/multimodal.md "Gemma 4"): the linear patch embedding [h, P·P·3] (pixels in row, column,
// channel order) becomes the conv kernel v.patch_embd.weight [h, 3, P, P]; the position table
// [2, S, h] → v.position_embd.weight (f32); blocks → v.blk.N.{ln1, attn_q/k/v/out, attn_q_norm,
// attn_k_norm, attn_post_norm, ln2, ffn_gate/up/down, ffn_post_norm, out_scale}; the clippable
// linears' scalar bounds → v.blk.N.<linear>.{input_min, input_max, output_min, output_max} ([1],
// f32); std_bias / std_scale → v.std_bias / v.std_scale; the projection → mm.input_projection.weight.
#include <algorithm>
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
  // A scalar bound (HF: a 0-d tensor) → a one-element f32 tensor.
  auto scalar = [&](const std::string& out_name, const std::string& in) {
    const TensorInfo* t = hf.tensors.find(in);
    if (!t) return;
    if (t->n_elements() != 1) throw_error(ErrorCode::kFormat, hf.dir + ": " + in + " is not a scalar");
    T.take(in);
    const float x = wt::to_f32(*t)[0];
    T.emit(out_name, {1}, DType::F32, 1, 1, [x](int64_t, float* dst) { dst[0] = x; });
  };
  auto linear = [&](const std::string& out, const std::string& in, int64_t rows, int64_t cols) {
    T.copy(out + ".weight", in + ".linear.weight", {rows, cols}, true);
    for (const char* b : {"input_min", "input_max", "output_min", "output_max"})
      scalar(out + "." + b, in + "." + b);
  };
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

  T.write_header("gemma4v");
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
