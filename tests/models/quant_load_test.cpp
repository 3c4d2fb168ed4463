// Quantisation at load (LoadOptions::quant) and `convert --type q*`: the per-tensor rule against
// llama.cpp's llama_model_quantize rule (the expected types below are what llama-quantize picks,
// read from its src/llama-quant.cpp; the e2e quant_oracle test compares whole files byte for
// byte), and HF --quant == our converted file (same bytes → bit-identical logits), V-head reorder
// and MoE expert stacks included; clear errors for bad names and already quantised files.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>

#include "core/error.h"
#include "format/gguf.h"
#include "format/model_files.h"
#include "models/common/quant_rule.h"
#include "convert/convert.h"
#include "models/model.h"
#include "qwen35_test_util.h"

namespace {

using oxi::DType;

std::optional<DType> T(const oxi::QuantRule& r, const std::string& name, int dims, int64_t cols) {
  return r.target(name, dims, cols);
}

TEST(QuantRule, KeepsWhatLlamaQuantizeKeeps) {
  for (DType base : {DType::Q8_0, DType::Q4_0, DType::Q4_K}) {
    const oxi::QuantRule r{base, 0, true};
    EXPECT_FALSE(T(r, "blk.0.attn_norm.weight", 1, 256));
    EXPECT_FALSE(T(r, "blk.0.attn_q_norm.weight", 2, 256));      // any "_norm.weight"
    EXPECT_FALSE(T(r, "blk.0.ffn_gate_inp.weight", 2, 256));     // MoE router
    EXPECT_FALSE(T(r, "blk.0.ssm_conv1d.weight", 2, 4));
    EXPECT_FALSE(T(r, "per_layer_model_proj.weight", 2, 256));  // Gemma
    EXPECT_FALSE(T(r, "blk.0.ssm_a", 2, 256));                   // not "...weight"
    EXPECT_FALSE(T(r, "blk.0.ffn_gate_inp.scale", 2, 256));
    EXPECT_FALSE(T(r, "blk.0.ffn_down_exps.weight", 1, 256));    // 1-D
    EXPECT_EQ(T(r, "blk.0.ffn_gate_inp_shexp.weight", 2, 256), base);  // only the router itself is kept
  }
}

TEST(QuantRule, OutputTiedEmbeddingsExpertsAndFallbacks) {
  const oxi::QuantRule q8{DType::Q8_0, 0, false}, q4{DType::Q4_0, 0, false}, qk{DType::Q4_K, 0, false};
  // Tied: token_embd (and Gemma's per_layer_token_embd) stand in for the output: Q6_K under 4-bit.
  EXPECT_EQ(T(q8, "token_embd.weight", 2, 256), DType::Q8_0);
  EXPECT_EQ(T(q4, "token_embd.weight", 2, 256), DType::Q6_K);
  EXPECT_EQ(T(qk, "per_layer_token_embd.weight", 2, 512), DType::Q6_K);
  EXPECT_EQ(T(q4, "token_embd.weight", 2, 64), DType::Q8_0);  // 64 % 256: Q8_0
  EXPECT_EQ(T(q4, "token_embd.weight", 2, 40), DType::F16);   // not even 32
  // Untied: token_embd takes the base type, output.weight Q6_K.
  const oxi::QuantRule u4{DType::Q4_0, 0, true};
  EXPECT_EQ(T(u4, "token_embd.weight", 2, 256), DType::Q4_0);
  EXPECT_EQ(T(u4, "output.weight", 2, 256), DType::Q6_K);
  EXPECT_EQ(T(q8, "output.weight", 2, 256), DType::Q8_0);
  // Plain matrices: the base; rows that do not fit fall back Q4_K → Q5_0 → F16.
  EXPECT_EQ(T(qk, "blk.3.ffn_down.weight", 2, 512), DType::Q4_K);
  EXPECT_EQ(T(qk, "blk.3.ffn_down_exps.weight", 3, 704), DType::Q5_0);  // Gemma 4 26B's expert FFN
  EXPECT_EQ(T(qk, "blk.3.ffn_down.weight", 2, 100), DType::F16);
  EXPECT_EQ(T(q4, "blk.3.attn_q.weight", 2, 100), DType::F16);
  // 8 experts: attention K / V / fused QKV at Q8_0 (llama.cpp's Mixtral rule), others untouched.
  const oxi::QuantRule e8{DType::Q4_K, 8, true}, e16{DType::Q4_K, 16, true};
  EXPECT_EQ(T(e8, "blk.0.attn_k.weight", 2, 256), DType::Q8_0);
  EXPECT_EQ(T(e8, "blk.0.attn_v.weight", 2, 256), DType::Q8_0);
  EXPECT_EQ(T(e8, "blk.0.attn_qkv.weight", 2, 256), DType::Q8_0);
  EXPECT_EQ(T(e8, "blk.0.attn_q.weight", 2, 256), DType::Q4_K);
  EXPECT_EQ(T(e16, "blk.0.attn_k.weight", 2, 256), DType::Q4_K);
}

TEST(QuantRule, Names) {
  EXPECT_EQ(oxi::parse_quant_type("q8_0"), DType::Q8_0);
  EXPECT_EQ(oxi::parse_quant_type("Q4_0"), DType::Q4_0);
  EXPECT_EQ(oxi::parse_quant_type("q4_K"), DType::Q4_K);
  EXPECT_THROW(oxi::parse_quant_type("q4_k_m"), oxi::Error);
  EXPECT_THROW(oxi::parse_quant_type("f16"), oxi::Error);
  EXPECT_EQ(oxi::quant_file_type(DType::Q8_0), 7u);
  EXPECT_EQ(oxi::quant_file_type(DType::Q4_0), 2u);
}

std::vector<float> all_logits(const oxi::ModelFiles& files, const std::string& quant, const std::vector<int32_t>& toks, int64_t* vocab) {
  oxi::LoadOptions o;
  o.quant = quant;
  auto m = oxi::load_model(files, o);
  *vocab = m->info().n_vocab;
  std::vector<float> out(toks.size() * static_cast<size_t>(*vocab));
  auto st = m->new_state(256);
  m->forward(*st, toks, out.data(), true);
  return out;
}

class QuantAtLoad : public ::testing::TestWithParam<bool> {};  // param: MoE

// HF + --quant T and convert --type T → load: same bytes, so bit-identical logits. Hv ≠ Hk: the HF
// load must store the GGUF V-head order when it quantises (blocks span heads).
TEST_P(QuantAtLoad, HfEqualsConvertedFile) {
  q35test::Shape s;
  s.moe = GetParam();
  s.hk = 2;
  s.hv = 6;
  s.tied = !s.moe;
  const std::string dir = q35test::tmp_dir(s.moe ? "qload_moe" : "qload_dense");
  q35test::write_model(dir, s);
  const auto hf = oxi::open_model_files(dir);
  std::vector<int32_t> toks;
  for (int i = 0; i < 80; ++i) toks.push_back(static_cast<int32_t>((i * 37 + 11) % s.vocab));
  for (const char* q : {"q8_0", "q4_0", "q4_k"}) {
    SCOPED_TRACE(q);
    const std::string gguf = dir + "/" + q + ".gguf";
    oxi::ConvertOptions opt;
    opt.out_type = oxi::parse_quant_type(q);
    oxi::convert_hf_to_gguf(oxi::read_hf_checkpoint(dir), gguf, opt);
    const auto gf = oxi::open_model_files(gguf);
    // d = 64: Q4_K rows fall back to Q5_0; tied embeddings (64 % 256) to Q8_0 under 4-bit.
    const DType base = opt.out_type == DType::Q4_K ? DType::Q5_0 : opt.out_type;
    EXPECT_EQ(gf.tensors().get("blk.0.attn_qkv.weight").dtype, s.moe && opt.out_type != DType::Q8_0 ? DType::Q8_0 : base);
    EXPECT_EQ(gf.tensors().get("blk.0.ffn_" + std::string(s.moe ? "gate_exps" : "gate") + ".weight").dtype, base);
    EXPECT_EQ(gf.tensors().get("token_embd.weight").dtype, s.tied && opt.out_type != DType::Q8_0 ? DType::Q8_0 : base);
    if (s.moe) EXPECT_EQ(gf.tensors().get("blk.0.ffn_gate_inp.weight").dtype, DType::F32);
    int64_t va = 0, vb = 0;
    const auto a = all_logits(hf, q, toks, &va);
    const auto b = all_logits(gf, "", toks, &vb);
    ASSERT_EQ(va, vb);
    EXPECT_EQ(0, std::memcmp(a.data(), b.data(), a.size() * sizeof(float)));
    // The float path is not the quantised one (the rule did quantise something).
    const auto f = all_logits(hf, "", toks, &va);
    EXPECT_NE(0, std::memcmp(a.data(), f.data(), a.size() * sizeof(float)));
    // Already quantised: refused, naming the types.
    try {
      all_logits(gf, "q8_0", toks, &va);
      ADD_FAILURE() << "--quant on a quantised GGUF was accepted";
    } catch (const oxi::Error& e) {
      EXPECT_NE(std::string(e.what()).find("already quantised"), std::string::npos) << e.what();
    }
  }
  int64_t v = 0;
  EXPECT_THROW(all_logits(hf, "q5_k", toks, &v), oxi::Error);
  std::filesystem::remove_all(dir);
}

INSTANTIATE_TEST_SUITE_P(DenseAndMoe, QuantAtLoad, ::testing::Values(false, true),
                         [](const auto& i) { return i.param ? std::string("Moe") : std::string("Dense"); });

}  // namespace
