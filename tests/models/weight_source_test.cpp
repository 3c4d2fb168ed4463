// wt::WeightSource (models/common/weight_source.h) and the Qwen 3.5 HF ↔ GGUF name map
// (models/qwen35/tensor_names.h): names as llama.cpp's converter spells them (written out here,
// not taken from our converter), the map's inverse, the transforms, per-expert HF checkpoints
// reading like fused ones, and errors that name the file's tensor and the file.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>

#include "convert/convert.h"
#include "core/error.h"
#include "format/gguf.h"
#include "format/hf.h"
#include "format/model_files.h"
#include "format/safetensors.h"
#include "models/common/weight_source.h"
#include "models/model.h"
#include "models/qwen35/tensor_names.h"
#include "qwen35_test_util.h"

namespace {

using oxi::qwen35::Fix;
using oxi::qwen35::gguf_name;
using oxi::qwen35::hf_expert_name;
using oxi::qwen35::hf_tensor;
using oxi::qwen35::VHeads;

const std::string kLm = "model.language_model.";

// GGUF name ↔ HF name pairs as the two projects spell them (llama.cpp's qwen35 / qwen35moe
// tensor names; the HF Qwen3.5 checkpoints'), block 3 of a 4-layer trunk, MTP block 4.
const std::vector<std::pair<std::string, std::string>> kPairs = {
    {"token_embd.weight", kLm + "embed_tokens.weight"},
    {"output_norm.weight", kLm + "norm.weight"},
    {"output.weight", "lm_head.weight"},
    {"blk.3.attn_norm.weight", kLm + "layers.3.input_layernorm.weight"},
    {"blk.3.post_attention_norm.weight", kLm + "layers.3.post_attention_layernorm.weight"},
    {"blk.3.attn_qkv.weight", kLm + "layers.3.linear_attn.in_proj_qkv.weight"},
    {"blk.3.attn_gate.weight", kLm + "layers.3.linear_attn.in_proj_z.weight"},
    {"blk.3.ssm_beta.weight", kLm + "layers.3.linear_attn.in_proj_b.weight"},
    {"blk.3.ssm_alpha.weight", kLm + "layers.3.linear_attn.in_proj_a.weight"},
    {"blk.3.ssm_conv1d.weight", kLm + "layers.3.linear_attn.conv1d.weight"},
    {"blk.3.ssm_a", kLm + "layers.3.linear_attn.A_log"},
    {"blk.3.ssm_dt.bias", kLm + "layers.3.linear_attn.dt_bias"},
    {"blk.3.ssm_norm.weight", kLm + "layers.3.linear_attn.norm.weight"},
    {"blk.3.ssm_out.weight", kLm + "layers.3.linear_attn.out_proj.weight"},
    {"blk.3.attn_q.weight", kLm + "layers.3.self_attn.q_proj.weight"},
    {"blk.3.attn_k.weight", kLm + "layers.3.self_attn.k_proj.weight"},
    {"blk.3.attn_v.weight", kLm + "layers.3.self_attn.v_proj.weight"},
    {"blk.3.attn_output.weight", kLm + "layers.3.self_attn.o_proj.weight"},
    {"blk.3.attn_q_norm.weight", kLm + "layers.3.self_attn.q_norm.weight"},
    {"blk.3.attn_k_norm.weight", kLm + "layers.3.self_attn.k_norm.weight"},
    {"blk.3.ffn_gate.weight", kLm + "layers.3.mlp.gate_proj.weight"},
    {"blk.3.ffn_up.weight", kLm + "layers.3.mlp.up_proj.weight"},
    {"blk.3.ffn_down.weight", kLm + "layers.3.mlp.down_proj.weight"},
    {"blk.3.ffn_gate_inp.weight", kLm + "layers.3.mlp.gate.weight"},
    {"blk.3.ffn_gate_up_exps.weight", kLm + "layers.3.mlp.experts.gate_up_proj"},
    {"blk.3.ffn_down_exps.weight", kLm + "layers.3.mlp.experts.down_proj"},
    {"blk.3.ffn_gate_shexp.weight", kLm + "layers.3.mlp.shared_expert.gate_proj.weight"},
    {"blk.3.ffn_up_shexp.weight", kLm + "layers.3.mlp.shared_expert.up_proj.weight"},
    {"blk.3.ffn_down_shexp.weight", kLm + "layers.3.mlp.shared_expert.down_proj.weight"},
    {"blk.3.ffn_gate_inp_shexp.weight", kLm + "layers.3.mlp.shared_expert_gate.weight"},
    {"blk.4.attn_q.weight", "mtp.layers.0.self_attn.q_proj.weight"},
    {"blk.4.ffn_gate_inp.weight", "mtp.layers.0.mlp.gate.weight"},
    {"blk.4.nextn.eh_proj.weight", "mtp.fc.weight"},
    {"blk.4.nextn.enorm.weight", "mtp.pre_fc_norm_embedding.weight"},
    {"blk.4.nextn.hnorm.weight", "mtp.pre_fc_norm_hidden.weight"},
    {"blk.4.nextn.shared_head_norm.weight", "mtp.norm.weight"},
};

TEST(Qwen35TensorNames, EveryGgufNameMapsToHfAndBack) {
  for (const auto& [g, h] : kPairs) {
    EXPECT_EQ(hf_tensor(g, kLm, 4).name, h) << g;
    EXPECT_EQ(gguf_name(h, kLm, 4), g) << h;
  }
  // Text-only checkpoints: "model." instead of "model.language_model.".
  EXPECT_EQ(hf_tensor("blk.0.attn_q.weight", "model.", 4).name, "model.layers.0.self_attn.q_proj.weight");
  EXPECT_EQ(gguf_name("model.layers.0.self_attn.q_proj.weight", "model.", 4), "blk.0.attn_q.weight");
  // Per-expert matrices (older HF layout) belong to the GGUF stacks.
  EXPECT_EQ(hf_expert_name("blk.2.ffn_up_exps.weight", 5, kLm, 4), kLm + "layers.2.mlp.experts.5.up_proj.weight");
  EXPECT_EQ(hf_expert_name("blk.2.ffn_down_exps.weight", 0, kLm, 4), kLm + "layers.2.mlp.experts.0.down_proj.weight");
  EXPECT_EQ(gguf_name(kLm + "layers.2.mlp.experts.5.gate_proj.weight", kLm, 4), "blk.2.ffn_gate_exps.weight");
  // The separate GGUF stacks have no single HF tensor; unknown names and blocks map to nothing.
  EXPECT_EQ(hf_tensor("blk.2.ffn_gate_exps.weight", kLm, 4).name, "");
  EXPECT_EQ(hf_tensor("blk.2.no_such.weight", kLm, 4).name, "");
  EXPECT_EQ(hf_tensor("blk.5.attn_q.weight", kLm, 4).name, "");         // past the MTP block
  EXPECT_EQ(hf_tensor("blk.2.nextn.eh_proj.weight", kLm, 4).name, "");  // nextn.* only in block n_layer
  EXPECT_EQ(gguf_name("model.visual.blocks.0.attn.qkv.weight", kLm, 4), "");
  EXPECT_EQ(gguf_name(kLm + "layers.4.self_attn.q_proj.weight", kLm, 4), "");  // trunk has 4 layers
}

TEST(Qwen35TensorNames, Transforms) {
  EXPECT_EQ(hf_tensor("blk.0.attn_norm.weight", kLm, 4).fix, Fix::kPlusOne);
  EXPECT_EQ(hf_tensor("blk.0.ssm_norm.weight", kLm, 4).fix, Fix::kNone);  // linear_attn.norm has no offset
  EXPECT_EQ(hf_tensor("blk.0.ssm_a", kLm, 4).fix, Fix::kNegExp);
  EXPECT_EQ(hf_tensor("blk.4.nextn.shared_head_norm.weight", kLm, 4).fix, Fix::kPlusOne);
  float x[3] = {0.5f, -1.0f, 0.0f};
  oxi::qwen35::apply_fix(Fix::kPlusOne, x, 3);
  EXPECT_EQ(x[0], 1.5f);
  EXPECT_EQ(x[1], 0.0f);
  oxi::qwen35::apply_fix(Fix::kNegExp, x, 3);
  EXPECT_FLOAT_EQ(x[0], -std::exp(1.5f));
  EXPECT_FLOAT_EQ(x[2], -std::exp(1.0f));
  // V-head orders: Hk = 2, Hv = 4 → tiled head n ← HF head (n % 2)·2 + n / 2 = 0, 2, 1, 3.
  oxi::qwen35::Config c;
  c.hk = 2;
  c.hv = 4;
  c.dk = 1;
  c.dv = 2;
  const std::vector<int64_t> heads = {0, 2, 1, 3};
  EXPECT_EQ(oxi::qwen35::vhead_order(c, VHeads::kHeadRows), heads);
  // Conv rows: q and k (2·key_dim = 4) in place, then value blocks of dv = 2 rows.
  const std::vector<int64_t> conv = {0, 1, 2, 3, 4, 5, 8, 9, 6, 7, 10, 11};
  EXPECT_EQ(oxi::qwen35::vhead_order(c, VHeads::kConvRows), conv);
  const std::vector<int64_t> value = {0, 1, 4, 5, 2, 3, 6, 7};
  EXPECT_EQ(oxi::qwen35::vhead_order(c, VHeads::kValueCols), value);
  c.hv = 2;
  EXPECT_TRUE(oxi::qwen35::vhead_order(c, VHeads::kConvRows).empty());  // Hk = Hv: nothing to reorder
}

TEST(WeightSource, ErrorsNameTheFilesTensorAndTheFile) {
  const std::string dir = q35test::tmp_dir("wsrc_err");
  std::filesystem::create_directories(dir);
  oxi::SafetensorsWriter w;
  const float nan = std::nanf("");
  w.add_tensor("model.a.weight", oxi::DType::F32, {2, 3}, q35test::f32_bytes({1, 2, 3, 4, 5, 6}));
  w.add_tensor("model.bad.weight", oxi::DType::F32, {2}, q35test::f32_bytes({1, nan}));
  w.write(dir + "/m.safetensors");
  const auto st = oxi::read_safetensors(dir + "/m.safetensors");
  const oxi::wt::WeightSource src(&st.tensors, dir, [](const std::string& g) {
    return g == "none" ? std::string() : "model." + g;
  });
  auto error_of = [](auto&& fn) {
    try {
      fn();
    } catch (const oxi::Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_EQ(src.file_name("a.weight"), "model.a.weight");
  ASSERT_NE(src.find("a.weight"), nullptr);
  EXPECT_EQ(src.find("none"), nullptr);
  EXPECT_EQ(error_of([&] { src.need("b.weight"); }), dir + ": missing tensor model.b.weight");
  EXPECT_EQ(error_of([&] { src.need("a.weight", {3, 2}); }), dir + ": tensor model.a.weight has shape [2, 3], want [3, 2]");
  EXPECT_EQ(error_of([&] { src.vec("a.weight", 5); }), dir + ": tensor model.a.weight has shape [2, 3], want 5 elements");
  EXPECT_EQ(error_of([&] { src.vec("bad.weight", 2); }), dir + ": tensor model.bad.weight holds a non-finite value");
  EXPECT_EQ(error_of([&] { src.need_file("x.y", {1}); }), dir + ": missing tensor x.y");
  // to_f32: values as stored (any type wt::to_f32 reads), no finiteness check.
  EXPECT_TRUE(std::isnan(src.to_f32_n("bad.weight", 2)[1]));
  EXPECT_EQ(error_of([&] { src.to_f32("a.weight", {6}); }), dir + ": tensor model.a.weight has shape [2, 3], want [6]");
  const std::vector<float> v = src.to_f32("a.weight", {2, -1});
  EXPECT_EQ(v, (std::vector<float>{1, 2, 3, 4, 5, 6}));
  oxi::wt::LoadQuant lq;
  oxi::wt::Arena arena;
  const oxi::MatrixView m = src.matrix("a.weight", 2, 3, lq, arena);
  EXPECT_EQ(m.rows, 2);
  EXPECT_EQ(m.cols, 3);
  EXPECT_EQ(m.data, st.tensors.find("model.a.weight")->data());  // in place, no copy
  std::filesystem::remove_all(dir);
}

// An older HF MoE checkpoint (one gate / up / down matrix per expert) reads as the fused
// experts.gate_up_proj one: the same logits bit for bit, and the same converted GGUF bytes.
TEST(Qwen35TensorNames, PerExpertCheckpointReadsAsFused) {
  q35test::Shape s;
  s.moe = true;
  s.mtp = true;
  s.tied = false;
  const std::string fused = q35test::tmp_dir("wsrc_fused"), split = q35test::tmp_dir("wsrc_split");
  q35test::write_model(fused, s);
  q35test::write_model(split, s);
  {
    const auto st = oxi::read_safetensors(fused + "/model.safetensors");
    oxi::SafetensorsWriter w;
    const int64_t I = s.eff, d = s.d;
    for (const auto& [name, t] : st.tensors.all()) {
      const size_t gu = name.find("experts.gate_up_proj"), dn = name.find("experts.down_proj");
      if (gu == std::string::npos && dn == std::string::npos) {
        w.add_tensor(name, t.dtype, t.shape, std::vector<uint8_t>(t.data(), t.data() + t.nbytes));
        continue;
      }
      const std::string base = name.substr(0, gu != std::string::npos ? gu : dn) + "experts.";
      const float* f = reinterpret_cast<const float*>(t.data());
      auto part = [&](const float* p, int64_t n) { return q35test::f32_bytes(std::vector<float>(p, p + n)); };
      for (int64_t e = 0; e < s.experts; ++e) {
        const std::string x = base + std::to_string(e) + ".";
        if (gu != std::string::npos) {  // [E, 2I, d]: expert e's gate rows, then its up rows
          w.add_tensor(x + "gate_proj.weight", oxi::DType::F32, {I, d}, part(f + e * 2 * I * d, I * d));
          w.add_tensor(x + "up_proj.weight", oxi::DType::F32, {I, d}, part(f + (e * 2 + 1) * I * d, I * d));
        } else {  // [E, d, I]
          w.add_tensor(x + "down_proj.weight", oxi::DType::F32, {d, I}, part(f + e * d * I, d * I));
        }
      }
    }
    w.write(split + "/model.safetensors");
  }
  auto logits = [](const std::string& dir, const std::string& quant) {
    oxi::ModelFiles files = oxi::open_model_files(dir);
    oxi::LoadOptions opt;
    opt.n_threads = 1;
    opt.quant = quant;
    auto model = oxi::load_model(files, opt);
    const int64_t V = model->info().n_vocab;
    std::vector<int32_t> toks = {1, 5, 9, 200, 33, 7};
    std::vector<float> out(toks.size() * static_cast<size_t>(V));
    auto st = model->new_state(64);
    model->forward(*st, toks, out.data(), true);
    return out;
  };
  for (const std::string q : {"", "q8_0"}) {
    const auto a = logits(fused, q), b = logits(split, q);
    ASSERT_EQ(a.size(), b.size());
    EXPECT_EQ(std::memcmp(a.data(), b.data(), a.size() * sizeof(float)), 0) << "quant '" << q << "'";
  }
  oxi::ConvertOptions opt;
  opt.out_type = oxi::DType::F32;
  oxi::convert_hf_to_gguf(oxi::read_hf_checkpoint(fused), fused + "/out.gguf", opt);
  oxi::convert_hf_to_gguf(oxi::read_hf_checkpoint(split), split + "/out.gguf", opt);
  const auto ga = oxi::read_gguf(fused + "/out.gguf"), gb = oxi::read_gguf(split + "/out.gguf");
  ASSERT_EQ(ga.tensors.all().size(), gb.tensors.all().size());
  for (const auto& [name, t] : ga.tensors.all()) {
    const oxi::TensorInfo* u = gb.tensors.find(name);
    ASSERT_NE(u, nullptr) << name;
    ASSERT_EQ(t.nbytes, u->nbytes) << name;
    EXPECT_EQ(std::memcmp(t.data(), u->data(), t.nbytes), 0) << name;
  }
  std::filesystem::remove_all(fused);
  std::filesystem::remove_all(split);
}

}  // namespace
