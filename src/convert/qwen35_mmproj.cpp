// HF Qwen 3.5 vision tower (model.visual.*, Qwen3-VL style) → the mmproj GGUF llama.cpp's mtmd
// loads (projector type `qwen3vl_merger`). Names and keys as llama.cpp's clip loader reads them:
// the Conv3d patch embedding [h, 3, 2, P, P] is split along time into v.patch_embd.weight (t = 0)
// and v.patch_embd.weight.1 (t = 1); blocks → v.blk.N.{ln1, attn_qkv, attn_out, ln2, ffn_up,
// ffn_down}; merger.norm → v.post_ln; merger.linear_fc1/2 → mm.0 / mm.2. The image mean/std come
// from preprocessor_config.json, the layer-norm epsilon from the text config's rms_norm_eps (as
// llama.cpp's converter does).
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

int64_t vcfg_int(const json& v, const std::string& dir, const char* key) {
  auto it = v.find(key);
  if (it == v.end() || !it->is_number_integer() || it->get<int64_t>() < 1)
    throw_error(ErrorCode::kFormat, dir + "/config.json: vision_config." + key + " missing or not a positive integer");
  return it->get<int64_t>();
}

std::vector<float> mean_std(const json& pp, const std::string& dir, const char* key) {
  auto it = pp.find(key);
  if (it == pp.end() || !it->is_array() || it->size() != 3)
    throw_error(ErrorCode::kFormat, dir + "/preprocessor_config.json: " + key + " must be an array of 3 numbers");
  std::vector<float> v;
  for (const auto& x : *it) {
    if (!x.is_number()) throw_error(ErrorCode::kFormat, dir + "/preprocessor_config.json: " + key + " must hold numbers");
    v.push_back(x.get<float>());
  }
  return v;
}

}  // namespace

void convert_qwen35_mmproj(const HfCheckpoint& hf, const std::string& out_path, const ConvertOptions& opt) {
  const json& vc = hf.config.contains("vision_config") ? hf.config["vision_config"] : json();
  if (!vc.is_object() || !hf.tensors.contains("model.visual.patch_embed.proj.weight"))
    throw_error(ErrorCode::kUnsupported, hf.dir + ": the checkpoint has no vision tower (vision_config / model.visual.*)");
  const int64_t h = vcfg_int(vc, hf.dir, "hidden_size"), depth = vcfg_int(vc, hf.dir, "depth"),
                heads = vcfg_int(vc, hf.dir, "num_heads"), ffn = vcfg_int(vc, hf.dir, "intermediate_size"),
                patch = vcfg_int(vc, hf.dir, "patch_size"), merge = vcfg_int(vc, hf.dir, "spatial_merge_size"),
                tp = vcfg_int(vc, hf.dir, "temporal_patch_size"), n_pos = vcfg_int(vc, hf.dir, "num_position_embeddings"),
                out = vcfg_int(vc, hf.dir, "out_hidden_size");
  if (tp != 2) throw_error(ErrorCode::kUnsupported, hf.dir + ": temporal_patch_size " + std::to_string(tp) + " (llama.cpp takes 2)");
  if (vc.contains("deepstack_visual_indexes") && vc["deepstack_visual_indexes"].is_array() &&
      !vc["deepstack_visual_indexes"].empty())
    throw_error(ErrorCode::kUnsupported, hf.dir + ": deepstack vision layers (Qwen3-VL) are not supported; Qwen 3.5 has none");
  const int64_t d_text = hf.text_config.value("hidden_size", int64_t(0));
  if (out != d_text)
    throw_error(ErrorCode::kFormat, hf.dir + "/config.json: vision out_hidden_size " + std::to_string(out) +
                                        " != text hidden_size " + std::to_string(d_text));
  const std::string pp_path = hf.dir + "/preprocessor_config.json";
  if (!std::filesystem::exists(pp_path)) throw_error(ErrorCode::kIo, pp_path + ": missing (image mean/std)");
  json pp;
  try {
    pp = json::parse(read_text_file(pp_path, 1 << 20));
  } catch (const json::exception& e) {
    throw_error(ErrorCode::kFormat, pp_path + ": " + e.what());
  }
  const std::vector<float> mean = mean_std(pp, hf.dir, "image_mean"), stdv = mean_std(pp, hf.dir, "image_std");
  const float eps = static_cast<float>(hf.text_config.value("rms_norm_eps", 1e-6));
  const auto side = static_cast<int64_t>(std::llround(std::sqrt(static_cast<double>(n_pos))));
  if (side * side != n_pos) throw_error(ErrorCode::kFormat, hf.dir + ": num_position_embeddings is not a square");

  MmprojWriter T(hf, opt.out_type == DType::F32 ? DType::F32 : DType::F16);
  const DType mt = T.matrix_type();
  const std::string v = "model.visual.";
  {
    // Conv3d [h, 3, 2, P, P] → two Conv2d kernels [h, 3, P, P] (time slice 0 and 1).
    const TensorInfo& t = wt::require(hf.tensors, v + "patch_embed.proj.weight", {h, 3, 2, patch, patch});
    T.take(v + "patch_embed.proj.weight");
    const int64_t pp2 = patch * patch;
    auto all = std::make_shared<const std::vector<float>>(wt::to_f32(t));  // [o, c, t, py, px]
    for (int64_t ts = 0; ts < 2; ++ts) {
      T.emit(ts == 0 ? "v.patch_embd.weight" : "v.patch_embd.weight.1", {h, 3, patch, patch}, mt, h * 3, pp2,
           [all, ts, pp2](int64_t r, float* x) {  // row (o, c)
             const float* src = all->data() + (r * 2 + ts) * pp2;
             std::copy(src, src + pp2, x);
           });
    }
  }
  T.copy("v.patch_embd.bias", v + "patch_embed.proj.bias", {h}, false);
  T.copy("v.position_embd.weight", v + "pos_embed.weight", {n_pos, h}, false);
  for (int64_t i = 0; i < depth; ++i) {
    const std::string b = v + "blocks." + std::to_string(i) + ".", o = "v.blk." + std::to_string(i) + ".";
    T.copy(o + "ln1.weight", b + "norm1.weight", {h}, false);
    T.copy(o + "ln1.bias", b + "norm1.bias", {h}, false);
    T.copy(o + "attn_qkv.weight", b + "attn.qkv.weight", {3 * h, h}, true);
    T.copy(o + "attn_qkv.bias", b + "attn.qkv.bias", {3 * h}, false);
    T.copy(o + "attn_out.weight", b + "attn.proj.weight", {h, h}, true);
    T.copy(o + "attn_out.bias", b + "attn.proj.bias", {h}, false);
    T.copy(o + "ln2.weight", b + "norm2.weight", {h}, false);
    T.copy(o + "ln2.bias", b + "norm2.bias", {h}, false);
    T.copy(o + "ffn_up.weight", b + "mlp.linear_fc1.weight", {ffn, h}, true);
    T.copy(o + "ffn_up.bias", b + "mlp.linear_fc1.bias", {ffn}, false);
    T.copy(o + "ffn_down.weight", b + "mlp.linear_fc2.weight", {h, ffn}, true);
    T.copy(o + "ffn_down.bias", b + "mlp.linear_fc2.bias", {h}, false);
  }
  const int64_t mh = h * merge * merge;
  T.copy("v.post_ln.weight", v + "merger.norm.weight", {h}, false);
  T.copy("v.post_ln.bias", v + "merger.norm.bias", {h}, false);
  T.copy("mm.0.weight", v + "merger.linear_fc1.weight", {mh, mh}, true);
  T.copy("mm.0.bias", v + "merger.linear_fc1.bias", {mh}, false);
  T.copy("mm.2.weight", v + "merger.linear_fc2.weight", {out, mh}, true);
  T.copy("mm.2.bias", v + "merger.linear_fc2.bias", {out}, false);
  T.check_all_used({v});

  T.write_header("qwen3vl_merger");
  GgufWriter& w = T.w;
  w.set_bool("clip.use_gelu", true);
  w.set_u32("clip.vision.projection_dim", static_cast<uint32_t>(out));
  w.set_u32("clip.vision.image_size", static_cast<uint32_t>(side * patch));
  w.set_u32("clip.vision.patch_size", static_cast<uint32_t>(patch));
  w.set_u32("clip.vision.embedding_length", static_cast<uint32_t>(h));
  w.set_u32("clip.vision.feed_forward_length", static_cast<uint32_t>(ffn));
  w.set_u32("clip.vision.block_count", static_cast<uint32_t>(depth));
  w.set_u32("clip.vision.attention.head_count", static_cast<uint32_t>(heads));
  w.set_f32("clip.vision.attention.layer_norm_epsilon", eps);
  w.set_u32("clip.vision.spatial_merge_size", static_cast<uint32_t>(merge));
  w.set_array_f32("clip.vision.image_mean", mean);
  w.set_array_f32("clip.vision.image_std", stdv);
  w.write(out_path);
}

}  // namespace oxi
