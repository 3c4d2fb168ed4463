// The Gemma 4 vision tower: HF checkpoint in place == the mmproj GGUF our converter writes, the
// mmproj's keys/names as llama.cpp's clip loader reads them, the soft-token grid and budget, the
// clamps of the clippable linears, bad files. Agreement with llama.cpp's own tower is
// tests/e2e/gemma4v_oracle.test.sh.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <random>

#include <unistd.h>

#include <nlohmann/json.hpp>

#include "convert/convert.h"
#include "core/error.h"
#include "format/gguf.h"
#include "format/hf.h"
#include "../models/qwen35_test_util.h"
#include "vision_test_util.h"
#include "vision/gemma4v.h"
#include "vision/qwen3vl.h"

namespace {

using namespace oxi::vision;
using visiontest::noise_image;
namespace fs = std::filesystem;

constexpr int64_t kH = 32, kDepth = 2, kHeads = 2, kFfn = 48, kPos = 48, kOut = 24;

// A vision-only Gemma 4 HF checkpoint. clamp_out: the clippable linears' output bound (large: no
// effect).
std::string write_ckpt(const std::string& name, float clamp_out, uint32_t seed = 3) {
  const fs::path dir = fs::temp_directory_path() / ("oxi_g4v_" + std::to_string(::getpid()) + "_" + name);
  fs::remove_all(dir);
  fs::create_directories(dir);
  q35test::RandomF32Tensors w(seed);
  const std::string v = "model.vision_tower.";
  const int64_t h = kH, hd = kH / kHeads;
  w.add(v + "patch_embedder.input_proj.weight", {h, 768}, 1.0f / std::sqrt(768.0f));
  w.add(v + "patch_embedder.position_embedding_table", {2, kPos, h}, 0.5f);
  auto lin = [&](const std::string& n, int64_t o, int64_t i) {
    w.add(n + ".linear.weight", {o, i}, 1.0f / std::sqrt(float(i)));
    w.add(n + ".input_min", {}, 0.1f, -2.0f);
    w.add(n + ".input_max", {}, 0.1f, 2.0f);
    w.add(n + ".output_min", {}, 0.0f, -clamp_out);
    w.add(n + ".output_max", {}, 0.0f, clamp_out);
  };
  for (int64_t i = 0; i < kDepth; ++i) {
    const std::string b = v + "encoder.layers." + std::to_string(i) + ".";
    w.add(b + "input_layernorm.weight", {h}, 0.1f, 1.0f);
    for (const char* p : {"q_proj", "k_proj", "v_proj", "o_proj"}) lin(b + "self_attn." + p, h, h);
    w.add(b + "self_attn.q_norm.weight", {hd}, 0.1f, 0.7f);
    w.add(b + "self_attn.k_norm.weight", {hd}, 0.1f, 0.7f);
    w.add(b + "post_attention_layernorm.weight", {h}, 0.1f, 1.0f);
    w.add(b + "pre_feedforward_layernorm.weight", {h}, 0.1f, 1.0f);
    lin(b + "mlp.gate_proj", kFfn, h);
    lin(b + "mlp.up_proj", kFfn, h);
    lin(b + "mlp.down_proj", h, kFfn);
    w.add(b + "post_feedforward_layernorm.weight", {h}, 0.1f, 1.0f);
    w.add(b + "layer_scalar", {1}, 0.1f, 0.8f);
  }
  w.add(v + "std_bias", {h}, 0.3f);
  w.add(v + "std_scale", {h}, 0.1f, 1.0f);
  w.add("model.embed_vision.embedding_projection.weight", {kOut, h}, 1.0f / std::sqrt(float(h)));
  w.write((dir / "model.safetensors").string());
  nlohmann::json cfg = {
      {"architectures", {"Gemma4ForConditionalGeneration"}},
      {"model_type", "gemma4"},
      {"text_config", {{"hidden_size", kOut}, {"rms_norm_eps", 1e-6}, {"model_type", "gemma4_text"}}},
      {"vision_config",
       {{"model_type", "gemma4_vision"}, {"hidden_size", h}, {"num_hidden_layers", kDepth}, {"num_attention_heads", kHeads},
        {"num_key_value_heads", kHeads}, {"head_dim", hd}, {"intermediate_size", kFfn}, {"patch_size", 16},
        {"pooling_kernel_size", 3}, {"position_embedding_size", kPos}, {"hidden_activation", "gelu_pytorch_tanh"},
        {"rms_norm_eps", 1e-6}, {"standardize", true}, {"use_clipped_linears", true}}}};
  std::ofstream(dir / "config.json") << cfg.dump(2);
  std::ofstream(dir / "preprocessor_config.json")
      << nlohmann::json{{"do_normalize", false}, {"image_mean", {0, 0, 0}}, {"image_std", {1, 1, 1}}}.dump();
  return dir.string();
}


double nmse(const std::vector<float>& a, const std::vector<float>& b) {
  double num = 0, den = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    num += (a[i] - b[i]) * (a[i] - b[i]);
    den += b[i] * b[i];
  }
  return num / den;
}

TEST(Gemma4V, HfEqualsConvertedMmproj) {
  const std::string dir = write_ckpt("eq", 1e30f);
  const oxi::HfCheckpoint hf = oxi::read_hf_checkpoint(dir);
  const std::string mm = visiontest::convert_mmproj_f32(hf, dir);

  const oxi::GgufFile f = oxi::read_gguf(mm);
  EXPECT_EQ(f.metadata.get_string("general.architecture"), "clip");
  EXPECT_EQ(f.metadata.get_string("clip.projector_type"), "gemma4v");
  EXPECT_TRUE(f.metadata.get_bool("clip.use_gelu"));
  EXPECT_EQ(f.metadata.get_int("clip.vision.projection_dim"), kOut);
  EXPECT_EQ(f.metadata.get_int("clip.vision.block_count"), kDepth);
  for (const char* t : {"v.patch_embd.weight", "v.position_embd.weight", "v.blk.0.ln1.weight", "v.blk.1.attn_q.weight",
                        "v.blk.1.attn_q.input_min", "v.blk.0.ffn_down.output_max", "v.blk.0.attn_q_norm.weight",
                        "v.blk.0.attn_post_norm.weight", "v.blk.0.ln2.weight", "v.blk.0.ffn_post_norm.weight",
                        "v.blk.1.out_scale.weight", "v.std_bias", "v.std_scale", "mm.input_projection.weight"})
    EXPECT_TRUE(f.tensors.contains(t)) << t;
  EXPECT_EQ(f.tensors.get("v.patch_embd.weight").shape, (std::vector<int64_t>{kH, 3, 16, 16}));
  EXPECT_EQ(f.tensors.get("v.position_embd.weight").shape, (std::vector<int64_t>{2, kPos, kH}));
  EXPECT_EQ(f.tensors.get("v.blk.0.attn_k.input_max").shape, (std::vector<int64_t>{1}));

  const auto a = Gemma4VTower::from_hf(hf);
  const auto b = Gemma4VTower::from_mmproj(mm);
  EXPECT_TRUE(b->config().gelu_tanh);
  // 576 × 432: 12 × 9 soft tokens = 108, inside the 70 … 1120 budget: no resize.
  const RgbImage img = noise_image(576, 432, 1);
  EXPECT_EQ(a->target_size({576, 432}), (Size{576, 432}));
  const ImageEmbedding ea = a->encode(img), eb = b->encode(img);
  EXPECT_EQ(ea.nx, 12);
  EXPECT_EQ(ea.ny, 9);
  ASSERT_EQ(ea.rows.size(), static_cast<size_t>(108 * kOut));
  ASSERT_EQ(ea.rows.size(), eb.rows.size());
  for (float x : ea.rows) ASSERT_TRUE(std::isfinite(x));
  EXPECT_LT(nmse(ea.rows, eb.rows), 1e-12);
  // A small image is brought up to the 70-token minimum.
  const Size t = a->target_size({20, 12});
  EXPECT_GE((t.width / 48) * (t.height / 48), 70);
  fs::remove_all(dir);
}

TEST(Gemma4V, ClampsAndPositionsMatter) {
  const std::string d1 = write_ckpt("wide", 1e30f), d2 = write_ckpt("tight", 0.05f);
  const auto a = Gemma4VTower::from_hf(oxi::read_hf_checkpoint(d1));
  const auto b = Gemma4VTower::from_hf(oxi::read_hf_checkpoint(d2));
  const RgbImage img = noise_image(480, 384, 2);
  const ImageEmbedding ea = a->encode(img), eb = b->encode(img);
  EXPECT_GT(nmse(eb.rows, ea.rows), 1e-3);  // the output clamps cut
  // Mirroring the image moves content to other positions: the rows change beyond a permutation.
  RgbImage flip = img;
  for (int64_t y = 0; y < img.height; ++y)
    for (int64_t x = 0; x < img.width; ++x)
      for (int c = 0; c < 3; ++c)
        flip.rgb[static_cast<size_t>((y * img.width + x) * 3 + c)] =
            img.rgb[static_cast<size_t>((y * img.width + (img.width - 1 - x)) * 3 + c)];
  const ImageEmbedding ef = a->encode(flip);
  std::vector<float> unflipped(ef.rows.size());
  for (int64_t r = 0; r < ef.ny; ++r)
    for (int64_t c = 0; c < ef.nx; ++c)
      std::copy_n(ef.rows.begin() + (r * ef.nx + (ef.nx - 1 - c)) * kOut, kOut, unflipped.begin() + (r * ef.nx + c) * kOut);
  EXPECT_GT(nmse(unflipped, ea.rows), 1e-4);
  // An image past the position table (48 patches per side here) is refused with a message.
  try {
    a->encode(noise_image(1600, 48, 3));
    ADD_FAILURE() << "no error";
  } catch (const oxi::Error& e) {
    EXPECT_NE(std::string(e.what()).find("position table"), std::string::npos) << e.what();
  }
  fs::remove_all(d1);
  fs::remove_all(d2);
}

TEST(Gemma4V, BadFiles) {
  const std::string dir = write_ckpt("bad", 1e30f);
  const oxi::HfCheckpoint hf = oxi::read_hf_checkpoint(dir);
  const std::string mm = dir + "/mmproj.gguf";
  oxi::convert_hf_to_mmproj(hf, mm, oxi::ConvertOptions{});  // f16 matrices
  EXPECT_NO_THROW(Gemma4VTower::from_mmproj(mm));
  // The Qwen loader refuses a gemma4v file and names the projector.
  try {
    Qwen3VLTower::from_mmproj(mm);
    ADD_FAILURE() << "no error";
  } catch (const oxi::Error& e) {
    EXPECT_EQ(e.code(), oxi::ErrorCode::kUnsupported);
    EXPECT_NE(std::string(e.what()).find("gemma4v"), std::string::npos);
  }
  // Not an mmproj at all.
  EXPECT_THROW(Gemma4VTower::from_mmproj(dir + "/model.safetensors"), oxi::Error);
  EXPECT_THROW(Gemma4VTower::from_mmproj(dir + "/missing.gguf"), oxi::Error);
  fs::remove_all(dir);
}

}  // namespace
