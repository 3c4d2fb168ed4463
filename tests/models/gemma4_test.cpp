// Gemma 4 unit tests on tiny synthetic checkpoints written here (f32 safetensors, vocab 96):
// sliding-window reach, KV-sharing sources, prefill/decode equivalence across the window edge,
// snapshot/restore, HF vs converted-GGUF agreement, converter metadata, bad input.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "backend/test_device.h"
#include "backend/vulkan/vulkan_device.h"
#include "core/error.h"
#include "format/gguf.h"
#include "format/model_files.h"
#include "format/safetensors.h"
#include "convert/convert.h"
#include "models/gemma4/gemma4.h"
#include "models/model.h"
#include "nn/device.h"
#include "batch_check.h"
#include "spec_check.h"

namespace {

namespace fs = std::filesystem;
using nlohmann::json;

struct Spec {
  int64_t vocab = 96, d = 32, layers = 4, heads = 2, kv = 1, kv_global = 1, hd = 16, hd_global = 32;
  int64_t ffn = 48, window = 4, kv_shared = 0, ple = 0, experts = 0, top_k = 0, expert_ffn = 16;
  bool k_eq_v = false, double_wide = false;
  std::vector<std::string> types;  // layer types; empty: [S, F] repeated
  uint32_t seed = 1;
};

std::vector<uint8_t> f32_bytes(const std::vector<float>& v) {
  std::vector<uint8_t> b(v.size() * 4);
  std::memcpy(b.data(), v.data(), b.size());
  return b;
}

// add(name, shape, std, mean): an f32 tensor of N(mean, std²) values into w (tweak may edit them).
auto random_adder(oxi::SafetensorsWriter& w, std::mt19937& rng,
                  const std::function<void(const std::string&, std::vector<float>&)>& tweak = nullptr) {
  // One distribution for all tensors (it keeps a spare draw between calls: the same stream as before).
  auto nd = std::make_shared<std::normal_distribution<float>>(0.0f, 1.0f);
  return [&w, &rng, tweak, nd](const std::string& n, std::vector<int64_t> shape, float std, float mean) {
    int64_t count = 1;
    for (int64_t x : shape) count *= x;
    std::vector<float> v(static_cast<size_t>(count));
    for (auto& x : v) x = mean + std * (*nd)(rng);
    if (tweak) tweak(n, v);
    w.add_tensor(n, oxi::DType::F32, shape, f32_bytes(v));
  };
}

// Writes a tiny HF checkpoint (f32) with a minimal tokenizer.json; returns its directory.
std::string write_checkpoint(const std::string& name, const Spec& s,
                             const std::function<void(const std::string&, std::vector<float>&)>& tweak = nullptr) {
  const std::string dir = (fs::temp_directory_path() / ("oxi_gemma4_" + name + "_" + std::to_string(::getpid()))).string();
  fs::create_directories(dir);
  std::mt19937 rng(s.seed);
  oxi::SafetensorsWriter w;
  auto add = random_adder(w, rng, tweak);
  const std::string p = "model.language_model.";
  std::vector<std::string> types = s.types;
  if (types.empty())
    for (int64_t l = 0; l < s.layers; ++l) types.push_back(l % 2 ? "full_attention" : "sliding_attention");
  const float inv_sqrt_d = 1.0f / std::sqrt(static_cast<float>(s.d));
  add(p + "embed_tokens.weight", {s.vocab, s.d}, inv_sqrt_d, 0);
  add(p + "norm.weight", {s.d}, 0.1f, 1.0f);
  if (s.ple > 0) {
    add(p + "embed_tokens_per_layer.weight", {s.vocab, s.layers * s.ple}, 1.0f, 0);
    add(p + "per_layer_model_projection.weight", {s.layers * s.ple, s.d}, inv_sqrt_d, 0);
    add(p + "per_layer_projection_norm.weight", {s.ple}, 0.1f, 1.0f);
  }
  for (int64_t l = 0; l < s.layers; ++l) {
    const std::string b = p + "layers." + std::to_string(l) + ".";
    const bool swa = types[static_cast<size_t>(l)] == "sliding_attention";
    const int64_t hd = swa ? s.hd : s.hd_global, hkv = (swa || !s.k_eq_v) ? s.kv : s.kv_global;
    const float qk = std::pow(static_cast<float>(hd), -0.25f);
    add(b + "input_layernorm.weight", {s.d}, 0.1f, 1.0f);
    add(b + "self_attn.q_proj.weight", {s.heads * hd, s.d}, inv_sqrt_d, 0);
    add(b + "self_attn.k_proj.weight", {hkv * hd, s.d}, inv_sqrt_d, 0);
    if (swa || !s.k_eq_v) add(b + "self_attn.v_proj.weight", {hkv * hd, s.d}, inv_sqrt_d, 0);
    add(b + "self_attn.o_proj.weight", {s.d, s.heads * hd}, 1.0f / std::sqrt(static_cast<float>(s.heads * hd)), 0);
    add(b + "self_attn.q_norm.weight", {hd}, 0.1f * qk, 1.5f * qk);
    add(b + "self_attn.k_norm.weight", {hd}, 0.1f * qk, 1.5f * qk);
    add(b + "post_attention_layernorm.weight", {s.d}, 0.1f, 1.0f);
    add(b + "pre_feedforward_layernorm.weight", {s.d}, 0.1f, 1.0f);
    const int64_t ff = (s.double_wide && l >= s.layers - s.kv_shared) ? 2 * s.ffn : s.ffn;
    add(b + "mlp.gate_proj.weight", {ff, s.d}, inv_sqrt_d, 0);
    add(b + "mlp.up_proj.weight", {ff, s.d}, inv_sqrt_d, 0);
    add(b + "mlp.down_proj.weight", {s.d, ff}, 1.0f / std::sqrt(static_cast<float>(ff)), 0);
    add(b + "post_feedforward_layernorm.weight", {s.d}, 0.1f, 1.0f);
    if (s.experts > 0) {
      add(b + "router.proj.weight", {s.experts, s.d}, 4.0f * inv_sqrt_d, 0);
      add(b + "router.scale", {s.d}, 0.1f, 1.0f);
      add(b + "router.per_expert_scale", {s.experts}, 0.2f, 1.0f);
      add(b + "experts.gate_up_proj", {s.experts, 2 * s.expert_ffn, s.d}, inv_sqrt_d, 0);
      add(b + "experts.down_proj", {s.experts, s.d, s.expert_ffn}, 1.0f / std::sqrt(static_cast<float>(s.expert_ffn)), 0);
      add(b + "pre_feedforward_layernorm_2.weight", {s.d}, 0.1f, 1.0f);
      add(b + "post_feedforward_layernorm_1.weight", {s.d}, 0.1f, 1.0f);
      add(b + "post_feedforward_layernorm_2.weight", {s.d}, 0.1f, 1.0f);
    }
    if (s.ple > 0) {
      add(b + "per_layer_input_gate.weight", {s.ple, s.d}, inv_sqrt_d, 0);
      add(b + "per_layer_projection.weight", {s.d, s.ple}, 1.0f / std::sqrt(static_cast<float>(s.ple)), 0);
      add(b + "post_per_layer_input_norm.weight", {s.d}, 0.1f, 1.0f);
    }
    add(b + "layer_scalar", {1}, 0.1f, 0.8f);
  }
  w.write(dir + "/model.safetensors");
  json tc = {{"model_type", "gemma4_text"}, {"vocab_size", s.vocab}, {"hidden_size", s.d},
             {"num_hidden_layers", s.layers}, {"layer_types", types}, {"sliding_window", s.window},
             {"num_attention_heads", s.heads}, {"num_key_value_heads", s.kv},
             {"num_global_key_value_heads", s.k_eq_v ? json(s.kv_global) : json(nullptr)},
             {"head_dim", s.hd}, {"global_head_dim", s.hd_global}, {"attention_k_eq_v", s.k_eq_v},
             {"num_kv_shared_layers", s.kv_shared}, {"hidden_size_per_layer_input", s.ple},
             {"intermediate_size", s.ffn}, {"use_double_wide_mlp", s.double_wide},
             {"enable_moe_block", s.experts > 0}, {"num_experts", s.experts}, {"top_k_experts", s.top_k},
             {"moe_intermediate_size", s.expert_ffn}, {"rms_norm_eps", 1e-6},
             {"rope_parameters",
              {{"sliding_attention", {{"rope_type", "default"}, {"rope_theta", 10000.0}}},
               {"full_attention", {{"rope_type", "proportional"}, {"partial_rotary_factor", 0.25}, {"rope_theta", 1000000.0}}}}},
             {"final_logit_softcapping", 30.0}, {"tie_word_embeddings", true}, {"max_position_embeddings", 4096}};
  json cfg = {{"model_type", "gemma4"}, {"architectures", {"Gemma4ForConditionalGeneration"}}, {"text_config", tc}};
  std::ofstream(dir + "/config.json") << cfg.dump(1);
  json vocab = json::object();
  vocab["<pad>"] = 0; vocab["<eos>"] = 1; vocab["<bos>"] = 2; vocab["<unk>"] = 3;
  for (int64_t i = 4; i < s.vocab; ++i) vocab["t" + std::to_string(i)] = i;
  json tok = {{"model", {{"type", "BPE"}, {"vocab", vocab}, {"merges", json::array({"t 4"})}}},
              {"added_tokens", json::array({{{"id", 0}, {"content", "<pad>"}, {"special", true}},
                                            {{"id", 1}, {"content", "<eos>"}, {"special", true}},
                                            {{"id", 2}, {"content", "<bos>"}, {"special", true}}})}};
  std::ofstream(dir + "/tokenizer.json") << tok.dump();
  return dir;
}

std::unique_ptr<oxi::Model> load(const std::string& path) {
  return oxi::load_model(oxi::open_model_files(path), oxi::LoadOptions{});
}

// Like ggml, the model multiplies f32 weights in another summation order for one token than for a
// batch (ggml_vec_dot_f32 vs llamafile's sgemm), so decode and prefill differ in the last bits
// (and these random models amplify that). The tests about which positions are attended load
// with OXI_GEMMA4_GGML_MM=0: one order for every batch size.
std::unique_ptr<oxi::Model> load_batch_invariant(const std::string& path) {
  setenv("OXI_GEMMA4_GGML_MM", "0", 1);
  auto m = load(path);
  unsetenv("OXI_GEMMA4_GGML_MM");
  return m;
}

// Logits of the last token after feeding `toks` in one batch.
std::vector<float> last_logits(const oxi::Model& m, const std::vector<int32_t>& toks) {
  auto st = m.new_state(256);
  std::vector<float> out(static_cast<size_t>(m.info().n_vocab));
  m.forward(*st, toks, out.data(), false);
  return out;
}

double max_abs_diff(const std::vector<float>& a, const std::vector<float>& b) {
  double m = 0;
  for (size_t i = 0; i < a.size(); ++i) m = std::max(m, std::fabs(static_cast<double>(a[i]) - b[i]));
  return m;
}

std::string convert(const std::string& dir, const std::string& name) {
  const std::string out = dir + "/" + name + ".gguf";
  oxi::convert_hf_to_gguf(oxi::read_hf_checkpoint(dir), out, oxi::ConvertOptions{});
  return out;
}

// Copies a GGUF, letting `edit` change the metadata.
std::string rewrite_gguf(const std::string& in, const std::string& out,
                         const std::function<void(oxi::GgufWriter&)>& edit) {
  oxi::GgufFile g = oxi::read_gguf(in);
  oxi::GgufWriter w;
  for (const auto& [k, v] : g.metadata.entries()) w.set_metadata(k, v);
  edit(w);
  for (const auto& [name, t] : g.tensors.all()) w.add_tensor(name, t.dtype, t.shape, t.data(), t.nbytes);
  w.write(out);
  return out;
}

TEST(Gemma4, KvSourceFollowsHfRule) {
  oxi::gemma4::Config c;
  c.n_layer = 35;
  c.is_swa.resize(35);
  for (int l = 0; l < 35; ++l) c.is_swa[static_cast<size_t>(l)] = (l % 5 != 4);
  c.n_kv_shared = 20;
  EXPECT_EQ(c.kv_source(15), 13);  // spec F.6: E2B layer 15 (sliding) reads layer 13
  EXPECT_EQ(c.kv_source(19), 14);  // layer 19 (full) reads layer 14
  EXPECT_EQ(c.kv_source(34), 14);
  EXPECT_EQ(c.kv_source(33), 13);
  EXPECT_EQ(c.kv_source(7), 7);
}

TEST(Gemma4, ProportionalRopeFromHfConfig) {
  Spec s;
  const std::string dir = write_checkpoint("rope", s);
  oxi::gemma4::Config c = oxi::gemma4::config_from_hf(oxi::read_hf_checkpoint(dir));
  EXPECT_EQ(c.n_rot_full, 32);  // the whole global head, angles zeroed by rope_freqs
  ASSERT_EQ(c.rope_freqs_full.size(), 16u);
  for (size_t i = 0; i < 16; ++i) EXPECT_EQ(c.rope_freqs_full[i], i < 4 ? 1.0f : 1e30f) << i;  // 0.25·32/2 = 4
  EXPECT_EQ(c.n_rot_swa, 16);
  EXPECT_TRUE(c.swa(0));
  EXPECT_FALSE(c.swa(3));  // last layer full
  fs::remove_all(dir);
}

// Issue 29 #12: a RoPE base of inf / NaN / 1e30 was accepted.
TEST(Gemma4, AbsurdRopeThetaRejected) {
  Spec s;
  const std::string dir = write_checkpoint("rope_bad", s);
  const oxi::gemma4::Config good = oxi::gemma4::config_from_hf(oxi::read_hf_checkpoint(dir));
  for (float theta : {INFINITY, NAN, 1e30f, 0.0f}) {
    oxi::gemma4::Config c = good;
    c.rope_base_full = theta;
    EXPECT_THROW(c.validate("x"), oxi::Error) << theta;
    c = good;
    c.rope_base_swa = theta;
    EXPECT_THROW(c.validate("x"), oxi::Error) << theta;
  }
  fs::remove_all(dir);
}

// One sliding layer only (GGUF pattern all-sliding): the last position's logits depend on exactly
// the last `window` tokens.
TEST(Gemma4, SlidingLayerSeesExactlyTheWindow) {
  Spec s;
  s.layers = 1;
  s.types = {"sliding_attention"};  // HF forces the last layer full; the GGUF below is all-sliding
  s.window = 4;
  const std::string dir = write_checkpoint("window", s);
  const std::string g = rewrite_gguf(convert(dir, "w"), dir + "/swa.gguf", [](oxi::GgufWriter& w) {
    w.set_array_bool("gemma4.attention.sliding_window_pattern", {true});
  });
  auto m = load_batch_invariant(g);
  std::vector<int32_t> a = {5, 6, 7, 8, 9, 10, 11, 12};  // last position 7 sees positions 4..7
  std::vector<int32_t> b = a, c = a;
  b[3] = 40;  // outside the window: no effect at all
  b[0] = 41;
  c[4] = 40;  // first position inside the window: changes the output
  const auto la = last_logits(*m, a), lb = last_logits(*m, b), lc = last_logits(*m, c);
  EXPECT_EQ(0, std::memcmp(la.data(), lb.data(), la.size() * sizeof(float)));
  EXPECT_GT(max_abs_diff(la, lc), 1e-4);
  // the same through decode steps (ring buffer wrap-around)
  auto st = m->new_state(64);
  std::vector<float> out(static_cast<size_t>(m->info().n_vocab));
  for (int32_t t : b) m->forward(*st, std::vector<int32_t>{t}, out.data(), false);
  EXPECT_EQ(0, std::memcmp(la.data(), out.data(), la.size() * sizeof(float)));
  fs::remove_all(dir);
}

// Layers 2 (sliding) and 3 (full) share the caches of layers 0 and 1: their own k/v weights are
// never read, and the source layer's are.
TEST(Gemma4, SharedKvLayersReadTheirSource) {
  Spec s;
  s.layers = 4;
  s.kv_shared = 2;
  s.ple = 8;
  s.double_wide = true;
  const std::vector<int32_t> toks = {2, 17, 33, 50, 9, 71, 88, 12, 40, 3};
  const std::string d0 = write_checkpoint("kv0", s);
  const auto base = last_logits(*load(d0), toks);
  auto bump = [](const std::string& target) {
    return [target](const std::string& n, std::vector<float>& v) {
      // not a uniform scale: k and v are RMS-normalised, so only a change of direction shows
      if (n.find(target) != std::string::npos)
        for (size_t i = 0; i < v.size(); i += 3) v[i] = -v[i];
    };
  };
  const std::string d1 = write_checkpoint("kv1", s, bump("layers.2.self_attn.k_proj"));
  const std::string d2 = write_checkpoint("kv2", s, bump("layers.3.self_attn.v_proj"));
  const std::string d3 = write_checkpoint("kv3", s, bump("layers.0.self_attn.k_proj"));
  const std::string d4 = write_checkpoint("kv4", s, bump("layers.1.self_attn.v_proj"));
  EXPECT_EQ(0, std::memcmp(base.data(), last_logits(*load(d1), toks).data(), base.size() * 4));
  EXPECT_EQ(0, std::memcmp(base.data(), last_logits(*load(d2), toks).data(), base.size() * 4));
  EXPECT_GT(max_abs_diff(base, last_logits(*load(d3), toks)), 1e-4);
  EXPECT_GT(max_abs_diff(base, last_logits(*load(d4), toks)), 1e-4);
  for (const auto& d : {d0, d1, d2, d3, d4}) fs::remove_all(d);
}

void check_prefill_decode(const Spec& s, const std::string& name) {
  const std::string dir = write_checkpoint(name, s);
  auto m = load_batch_invariant(dir);
  const int64_t V = m->info().n_vocab;
  std::vector<int32_t> toks;
  for (int i = 0; i < 20; ++i) toks.push_back(static_cast<int32_t>((i * 37 + 11) % V));
  // all-logits prefill of everything
  auto st = m->new_state(64);
  std::vector<float> all(toks.size() * static_cast<size_t>(V));
  m->forward(*st, toks, all.data(), true);
  EXPECT_EQ(st->n_past(), 20);
  // prefill 7 (below the window edge of 4·... ) then decode one by one, then a batch of 5
  auto st2 = m->new_state(64);
  std::vector<float> out(static_cast<size_t>(V));
  const std::vector<int32_t> head(toks.begin(), toks.begin() + 7);
  m->forward(*st2, head, out.data(), false);
  double worst = max_abs_diff(out, std::vector<float>(all.begin() + 6 * V, all.begin() + 7 * V));
  for (size_t i = 7; i < 15; ++i) {
    m->forward(*st2, std::vector<int32_t>{toks[i]}, out.data(), false);
    worst = std::max(worst, max_abs_diff(out, std::vector<float>(all.begin() + static_cast<int64_t>(i) * V,
                                                                   all.begin() + static_cast<int64_t>(i + 1) * V)));
  }
  std::vector<float> out5(5 * static_cast<size_t>(V));
  m->forward(*st2, std::vector<int32_t>(toks.begin() + 15, toks.end()), out5.data(), true);
  worst = std::max(worst, max_abs_diff(out5, std::vector<float>(all.begin() + 15 * V, all.end())));
  // Same attention path (vector, < 64 tokens) in both; only matmul batching may differ.
  EXPECT_LT(worst, 1e-4) << name;
  fs::remove_all(dir);
}

TEST(Gemma4, PrefillThenDecodeEqualsOnePrefillAcrossTheWindow) {
  Spec dense;  // window 4: the 20 tokens wrap the sliding rings several times
  check_prefill_decode(dense, "pd_dense");
  Spec e2b;
  e2b.layers = 4; e2b.kv_shared = 2; e2b.ple = 8; e2b.double_wide = true;
  check_prefill_decode(e2b, "pd_e2b");
  Spec moe;
  moe.experts = 4; moe.top_k = 2; moe.k_eq_v = true; moe.kv = 2; moe.kv_global = 1; moe.heads = 2;
  check_prefill_decode(moe, "pd_moe");
}

// Six layers, two of them KV-shared; per-layer embeddings, or the MoE block instead.
Spec six_layer_spec(bool moe) {
  Spec s;
  s.layers = 6;
  s.kv_shared = 2;
  s.ple = moe ? 0 : 8;
  if (moe) {
    s.experts = 4;
    s.top_k = 2;
  }
  return s;
}

// The batched interface: several sequences in one call compute what each computes alone (sliding
// ring wrap, KV-shared layers, per-layer embeddings, the MoE block; tiled attention for the 70-token
// prompt), with one summation order for every batch size (exact) and with ggml's f32 orders (the
// model's default, which like ggml picks the order by batch size: within float rounding).
TEST(Gemma4, SequencesTogetherEqualAlone) {
  for (bool moe : {false, true}) {
    const Spec s = six_layer_spec(moe);
    const std::string dir = write_checkpoint(moe ? "batch_moe" : "batch_ple", s);
    const int64_t V = s.vocab;
    const std::vector<std::vector<int32_t>> prompts = {batchtest::ids(70, V, 1), batchtest::ids(5, V, 2), batchtest::ids(1, V, 3),
                                                       batchtest::ids(9, V, 4), batchtest::ids(3, V, 5)};
    {
      auto m = load_batch_invariant(dir);
      const batchtest::BatchDiff d = batchtest::batch_vs_alone(*m, prompts, 6);
      EXPECT_EQ(d.prefill, 0.0) << (moe ? "moe" : "ple");
      EXPECT_EQ(d.decode, 0.0) << (moe ? "moe" : "ple");
      EXPECT_GT(d.scale, 0.01);
    }
    {
      auto m = load(dir);
      const batchtest::BatchDiff d = batchtest::batch_vs_alone(*m, prompts, 6);
      EXPECT_LE(d.prefill, 0.05 * d.scale) << (moe ? "moe" : "ple");
      EXPECT_LE(d.decode, 0.05 * d.scale) << (moe ? "moe" : "ple");
    }
    fs::remove_all(dir);
  }
}

// truncate(): full caches go back anywhere; sliding rings as far as their rollback room.
TEST(Gemma4, TruncateEqualsNeverFed) {
  Spec s;
  s.layers = 4;
  s.window = 4;
  s.kv_shared = 1;
  const std::string dir = write_checkpoint("trunc", s);
  auto m = load_batch_invariant(dir);
  const int64_t V = s.vocab;
  const auto prompt = batchtest::ids(11, V, 7);
  const auto draft = batchtest::ids(5, V, 8);
  for (int64_t keep : {0, 2, 4, 5}) EXPECT_EQ(batchtest::truncate_vs_fresh(*m, prompt, draft, keep, 9), 0.0) << "keep " << keep;
  // A ring without rollback room cannot go back past its window.
  auto st = m->new_state(64);
  std::vector<float> lg(static_cast<size_t>(V));
  m->forward(*st, prompt, lg.data(), false);
  EXPECT_THROW(st->truncate(5), oxi::Error);
  EXPECT_EQ(st->n_past(), 11);
  fs::remove_all(dir);
}

// Model::exact_batch_tokens(): that many tokens in one call give the logits of one call per token
// bit for bit (default numerics, which pick ggml's orders by batch size, and batch-invariant ones).
TEST(Gemma4, ExactBatchTokensAreExact) {
  for (bool moe : {false, true}) {
    const Spec s = six_layer_spec(moe);
    const std::string dir = write_checkpoint(moe ? "exact_moe" : "exact_ple", s);
    for (bool invariant : {false, true}) {
      auto m = invariant ? load_batch_invariant(dir) : load(dir);
      const int64_t K = std::min<int64_t>(m->exact_batch_tokens(), 17);
      std::printf("gemma4 %s %s: exact_batch_tokens %lld\n", moe ? "moe" : "ple", invariant ? "invariant" : "default",
                  static_cast<long long>(m->exact_batch_tokens()));
      EXPECT_EQ(batchtest::multi_vs_single(*m, batchtest::ids(30, s.vocab, 31), batchtest::ids(K, s.vocab, 32)), 0.0)
          << (moe ? "moe" : "ple") << (invariant ? " invariant" : " default") << " K " << K;
    }
    fs::remove_all(dir);
  }
}

// Speculative decoding on the real forward: greedy output equals the plain run's with drafts all
// accepted, all rejected and mixed, far past the sliding window (4), with KV-shared layers and
// per-layer embeddings, and with the MoE block; default numerics and the batch-invariant ones.
TEST(Gemma4, SpeculativeGreedyEqualsPlain) {
  for (bool moe : {false, true}) {
    const Spec s = six_layer_spec(moe);
    const std::string dir = write_checkpoint(moe ? "spec_moe" : "spec_ple", s);
    std::vector<int32_t> prompt = batchtest::ids(30, s.vocab, 11);
    prompt.insert(prompt.end(), prompt.begin() + 5, prompt.begin() + 12);
    EXPECT_EQ(spectest::spec_vs_plain(*load_batch_invariant(dir), prompt, 24), "") << (moe ? "moe" : "ple");
    // Default numerics: f32 weights in ggml's orders (no exact verify steps: plain decoding), also
    // after quantising at load (these small matrices and the router stay f32).
    EXPECT_EQ(spectest::spec_vs_plain(*load(dir), prompt, 24), "") << (moe ? "moe" : "ple") << " default numerics";
    for (const char* q : {"q8_0", "q4_k"}) {
      oxi::LoadOptions lo;
      lo.quant = q;
      auto m = oxi::load_model(oxi::open_model_files(dir), lo);
      EXPECT_EQ(spectest::spec_vs_plain(*m, prompt, 24), "") << (moe ? "moe " : "ple ") << q;
    }
    fs::remove_all(dir);
  }
}

TEST(Gemma4, SnapshotRestoreIsBitIdentical) {
  Spec s;
  s.kv_shared = 2;
  s.ple = 8;
  const std::string dir = write_checkpoint("snap", s);
  auto m = load(dir);
  const size_t V = static_cast<size_t>(m->info().n_vocab);
  auto st = m->new_state(64);
  std::vector<float> out(V), a(V * 6), b(V * 6);
  m->forward(*st, std::vector<int32_t>{2, 5, 9, 14, 20, 27, 35}, out.data(), false);
  const std::vector<uint8_t> snap = st->snapshot();
  const std::vector<int32_t> cont = {44, 54, 65, 77, 90, 10};
  for (size_t i = 0; i < cont.size(); ++i) m->forward(*st, std::vector<int32_t>{cont[i]}, a.data() + i * V, false);
  auto st2 = m->new_state(64);
  st2->restore(snap);
  EXPECT_EQ(st2->snapshot(), snap);
  for (size_t i = 0; i < cont.size(); ++i) m->forward(*st2, std::vector<int32_t>{cont[i]}, b.data() + i * V, false);
  EXPECT_EQ(0, std::memcmp(a.data(), b.data(), a.size() * sizeof(float)));
  st->restore(snap);
  EXPECT_EQ(st->n_past(), 7);
  // bad snapshots are refused cleanly
  std::vector<uint8_t> cut(snap.begin(), snap.begin() + static_cast<long>(snap.size() / 2));
  EXPECT_THROW(st->restore(cut), oxi::Error);
  EXPECT_THROW(m->new_state(32)->restore(snap), oxi::Error);
  fs::remove_all(dir);
}

// ---- Gemma 4's assistant drafter (spec B.5; -md, --spec draft) ----

// A tiny assistant checkpoint (HF layout, f32) for target spec `t`: d_a = 16, layers [S, S, S, F]
// with the target's head sizes, optionally the ordered-embedding tensors; converted to its GGUF.
std::string write_assistant(const std::string& target_dir, const Spec& t, bool ordered, int64_t heads = 2) {
  const std::string dir = target_dir + "/assistant" + (ordered ? "_ordered" : "");
  fs::create_directories(dir);
  std::mt19937 rng(77);
  oxi::SafetensorsWriter w;
  auto add = random_adder(w, rng);
  const int64_t d = 16, L = 4, ff = 24;
  const std::vector<std::string> types = {"sliding_attention", "sliding_attention", "sliding_attention", "full_attention"};
  add("model.embed_tokens.weight", {t.vocab, d}, 0.25f, 0);
  add("model.norm.weight", {d}, 0.1f, 1.0f);
  for (int64_t l = 0; l < L; ++l) {
    const std::string b = "model.layers." + std::to_string(l) + ".";
    const int64_t hd = l < 3 ? t.hd : t.hd_global;
    const float qk = std::pow(static_cast<float>(hd), -0.25f);
    add(b + "input_layernorm.weight", {d}, 0.1f, 1.0f);
    add(b + "self_attn.q_proj.weight", {heads * hd, d}, 0.25f, 0);
    add(b + "self_attn.q_norm.weight", {hd}, 0.1f * qk, 1.5f * qk);
    add(b + "self_attn.o_proj.weight", {d, heads * hd}, 0.15f, 0);
    add(b + "post_attention_layernorm.weight", {d}, 0.1f, 1.0f);
    add(b + "pre_feedforward_layernorm.weight", {d}, 0.1f, 1.0f);
    add(b + "mlp.gate_proj.weight", {ff, d}, 0.25f, 0);
    add(b + "mlp.up_proj.weight", {ff, d}, 0.25f, 0);
    add(b + "mlp.down_proj.weight", {d, ff}, 0.2f, 0);
    add(b + "post_feedforward_layernorm.weight", {d}, 0.1f, 1.0f);
    add(b + "layer_scalar", {1}, 0.1f, 0.8f);
  }
  add("pre_projection.weight", {d, 2 * t.d}, 0.125f, 0);
  add("post_projection.weight", {t.d, d}, 0.25f, 0);
  if (ordered) {
    add("masked_embedding.centroids.weight", {8, d}, 0.25f, 0);
    std::vector<int64_t> perm(static_cast<size_t>(t.vocab));
    for (size_t i = 0; i < perm.size(); ++i) perm[i] = static_cast<int64_t>(perm.size() - 1 - i);
    std::vector<uint8_t> b(perm.size() * 8);
    std::memcpy(b.data(), perm.data(), b.size());
    w.add_tensor("masked_embedding.token_ordering", oxi::DType::I64, {t.vocab}, b);
  }
  w.write(dir + "/model.safetensors");
  json tc = {{"model_type", "gemma4_text"}, {"vocab_size", t.vocab}, {"hidden_size", d}, {"num_hidden_layers", L},
             {"layer_types", types}, {"sliding_window", t.window}, {"num_attention_heads", heads},
             {"num_key_value_heads", t.kv}, {"head_dim", t.hd}, {"global_head_dim", t.hd_global},
             {"num_kv_shared_layers", L}, {"hidden_size_per_layer_input", 0}, {"intermediate_size", ff},
             {"rms_norm_eps", 1e-6},
             {"rope_parameters",
              {{"sliding_attention", {{"rope_type", "default"}, {"rope_theta", 10000.0}}},
               {"full_attention", {{"rope_type", "proportional"}, {"partial_rotary_factor", 0.25}, {"rope_theta", 1000000.0}}}}},
             {"tie_word_embeddings", true}, {"max_position_embeddings", 4096}};
  json cfg = {{"model_type", "gemma4_assistant"}, {"architectures", {"Gemma4AssistantForCausalLM"}},
              {"backbone_hidden_size", t.d}, {"use_ordered_embeddings", ordered}, {"num_centroids", 8},
              {"centroid_intermediate_top_k", 2}, {"text_config", tc}};
  std::ofstream(dir + "/config.json") << cfg.dump(1);
  fs::copy_file(target_dir + "/tokenizer.json", dir + "/tokenizer.json", fs::copy_options::overwrite_existing);
  return convert(dir, "assistant");
}

std::unique_ptr<oxi::Model> load_with_draft(const std::string& path, const oxi::ModelFiles& draft, bool invariant = true) {
  if (invariant) setenv("OXI_GEMMA4_GGML_MM", "0", 1);
  oxi::LoadOptions lo;
  lo.draft = &draft;
  lo.draft_path = "assistant.gguf";
  auto m = oxi::load_model(oxi::open_model_files(path), lo);
  unsetenv("OXI_GEMMA4_GGML_MM");
  return m;
}

// The converted file carries llama.cpp's arch, keys and names (the e2e test loads it in llama.cpp).
TEST(Gemma4, AssistantConvertsWithLlamaCppNames) {
  Spec s = six_layer_spec(false);
  const std::string dir = write_checkpoint("asst_conv", s);
  for (bool ordered : {false, true}) {
    oxi::GgufFile f = oxi::read_gguf(write_assistant(dir, s, ordered));
    const std::string a = "gemma4-assistant.";
    EXPECT_EQ(f.metadata.get_string("general.architecture"), "gemma4-assistant");
    EXPECT_EQ(f.metadata.get_int(a + "block_count"), 4);
    EXPECT_EQ(f.metadata.get_int(a + "nextn_predict_layers"), 4);
    EXPECT_EQ(f.metadata.get_int(a + "embedding_length"), 16);
    EXPECT_EQ(f.metadata.get_int(a + "embedding_length_out"), s.d);
    EXPECT_EQ(f.metadata.get_int(a + "attention.shared_kv_layers"), 4);
    EXPECT_EQ(f.metadata.find(a + "attention.sliding_window_pattern")->as_int_array(), (std::vector<int64_t>{1, 1, 1, 0}));
    EXPECT_EQ(f.tensors.get("nextn.pre_projection.weight").shape, (std::vector<int64_t>{16, 2 * s.d}));
    EXPECT_EQ(f.tensors.get("nextn.post_projection.weight").shape, (std::vector<int64_t>{s.d, 16}));
    EXPECT_TRUE(f.tensors.find("rope_freqs.weight"));
    EXPECT_FALSE(f.tensors.find("blk.0.attn_k.weight"));
    // llama.cpp's converter drops the ordered-embedding tensors; so do we.
    for (const auto& [name, t] : f.tensors.all()) EXPECT_EQ(name.find("masked"), std::string::npos) << name;
  }
  fs::remove_all(dir);
}

// Greedy output with the drafter verifying is the plain output (drafts k = 1, 3, 8 every step, and
// auto), past the sliding window (4) with KV-shared target layers and per-layer embeddings; a
// mismatched drafter is refused naming the first difference; the drafter alone is no model.
TEST(Gemma4, AssistantDraftsAndGreedyEqualsPlain) {
  for (bool moe : {false, true}) {
    const Spec s = six_layer_spec(moe);
    const std::string dir = write_checkpoint(moe ? "asst_moe" : "asst_ple", s);
    const oxi::ModelFiles draft = oxi::open_model_files(write_assistant(dir, s, !moe));
    auto m = load_with_draft(dir, draft);
    ASSERT_TRUE(m->has_mtp());
    ASSERT_TRUE(m->mtp_is_draft_model());
    std::vector<int32_t> prompt = batchtest::ids(30, s.vocab, 11);
    prompt.insert(prompt.end(), prompt.begin() + 5, prompt.begin() + 12);
    EXPECT_EQ(spectest::spec_vs_plain(*m, prompt, 24), "") << (moe ? "moe" : "ple");
    // Drafts are made and counted (forced: draft_min = draft_max).
    oxi::SpecOptions sp;
    sp.mode = oxi::SpecMode::kDraft;
    sp.draft_max = 3;
    sp.draft_min = 3;
    const oxi::GenerateResult r = spectest::greedy(*m, prompt, 24, sp);
    std::printf("gemma4 assistant (%s): %d of %d drafts accepted in %d verify steps\n", moe ? "moe" : "ple", r.n_accepted,
                r.n_drafted, r.n_verify);
    EXPECT_GT(r.n_drafted, 20);
    // Default numerics (f32 weights in ggml's orders: no exact verify steps) decode plainly.
    auto plain_numerics = load_with_draft(dir, draft, false);
    EXPECT_EQ(spectest::spec_vs_plain(*plain_numerics, prompt, 24), "") << (moe ? "moe" : "ple") << " default numerics";
    // --spec mtp is the model's own head: refused for a draft model.
    oxi::SpecOptions mtp;
    mtp.mode = oxi::SpecMode::kMtp;
    EXPECT_THROW(spectest::greedy(*m, prompt, 4, mtp), oxi::Error);
    fs::remove_all(dir);
  }
  // Refusals: --spec draft without a draft model; a drafter of another width; the drafter as -m.
  Spec s = six_layer_spec(false);
  const std::string dir = write_checkpoint("asst_bad", s);
  const std::string good = write_assistant(dir, s, false);
  oxi::SpecOptions sp;
  sp.mode = oxi::SpecMode::kDraft;
  EXPECT_THROW(spectest::greedy(*load(dir), {2, 5, 9}, 4, sp), oxi::Error);
  Spec wide = s;
  wide.d = 48;
  const std::string other = write_checkpoint("asst_wide", wide);
  const oxi::ModelFiles wrong = oxi::open_model_files(write_assistant(other, wide, false));
  try {
    load_with_draft(dir, wrong);
    ADD_FAILURE() << "a drafter for a 48-wide model loaded beside a 32-wide one";
  } catch (const oxi::Error& e) {
    EXPECT_NE(std::string(e.what()).find("embedding_length_out (the target width) is 48, the model's is 32"), std::string::npos) << e.what();
  }
  EXPECT_THROW(load(good), oxi::Error);
  const oxi::ModelFiles not_asst = oxi::open_model_files(convert(dir, "target"));
  EXPECT_THROW(load_with_draft(dir, not_asst), oxi::Error);
  fs::remove_all(dir);
  fs::remove_all(other);
}

// -md with the assistant's HF directory reads it in place: the first draft step's logits equal
// those of the GGUF the converter writes from it (f32 both ways), and greedy drafting agrees; the
// target's own HF checkpoint as -md is refused by its model_type.
TEST(Gemma4, AssistantReadInPlaceFromHf) {
  const Spec s = six_layer_spec(false);
  const std::string dir = write_checkpoint("asst_hf", s);
  const oxi::ModelFiles gguf = oxi::open_model_files(write_assistant(dir, s, true));
  const oxi::ModelFiles hf = oxi::open_model_files(dir + "/assistant_ordered");
  ASSERT_EQ(hf.kind, oxi::ModelFileKind::kHf);
  auto mg = load_with_draft(dir, gguf);
  auto mh = load_with_draft(dir, hf);
  ASSERT_TRUE(mh->mtp_is_draft_model());
  const std::vector<int32_t> toks = batchtest::ids(12, s.vocab, 5);
  auto first_step = [&](const oxi::Model& m) {
    const int64_t n = static_cast<int64_t>(toks.size()), d = m.info().n_embd, V = m.info().n_vocab;
    auto st = m.new_state(128);
    std::vector<float> logits(static_cast<size_t>(V)), hid(static_cast<size_t>(n * d)), draft(static_cast<size_t>(V));
    m.forward(*st, toks, logits.data(), false, hid.data());
    std::vector<int32_t> next(toks.begin() + 1, toks.end());
    next.push_back(static_cast<int32_t>(std::max_element(logits.begin(), logits.end()) - logits.begin()));
    auto ms = m.new_mtp_state_for(128, *st);
    m.mtp_forward(*ms, hid.data(), next.data(), n, draft.data(), nullptr);
    return draft;
  };
  EXPECT_EQ(first_step(*mg), first_step(*mh));
  oxi::SpecOptions sp;
  sp.mode = oxi::SpecMode::kDraft;
  sp.draft_max = 3;
  sp.draft_min = 3;
  const oxi::GenerateResult rg = spectest::greedy(*mg, toks, 16, sp), rh = spectest::greedy(*mh, toks, 16, sp);
  EXPECT_EQ(rg.generated, rh.generated);
  EXPECT_EQ(rg.n_accepted, rh.n_accepted);
  EXPECT_EQ(rg.n_drafted, rh.n_drafted);
  const oxi::ModelFiles target_hf = oxi::open_model_files(dir);
  EXPECT_THROW(load_with_draft(dir, target_hf), oxi::Error);
  fs::remove_all(dir);
}

// The drafter's batched step (Model::mtp_forward_batch: the server's slots drafting together):
// three sequences of different lengths (one past the sliding window) each get the logits and
// hidden state of their own call — equal up to the multi-row products' f32 order (Gemma's
// ggml-order f32 matmuls pick their order by row count) — and a chained step after it agrees too.
TEST(Gemma4, AssistantBatchEqualsEachAlone) {
  const Spec s = six_layer_spec(false);
  const std::string dir = write_checkpoint("asst_batch", s);
  const oxi::ModelFiles gguf = oxi::open_model_files(write_assistant(dir, s, true));
  auto m = load_with_draft(dir, gguf);
  const int64_t d = m->info().n_embd, V = m->info().n_vocab;
  constexpr int kSeqs = 3;
  const int64_t lens[kSeqs] = {12, 40, 5};
  std::vector<std::unique_ptr<oxi::SequenceState>> trunk, a, b;
  std::vector<std::vector<float>> hid(kSeqs);
  std::vector<std::vector<int32_t>> next(kSeqs);
  for (int i = 0; i < kSeqs; ++i) {
    const std::vector<int32_t> toks = batchtest::ids(static_cast<uint32_t>(lens[i]), s.vocab, 20 + static_cast<uint32_t>(i));
    trunk.push_back(m->new_state(128));
    std::vector<float> logits(static_cast<size_t>(V));
    hid[i].resize(static_cast<size_t>(lens[i] * d));
    m->forward(*trunk.back(), toks, logits.data(), false, hid[i].data());
    next[i].assign(toks.begin() + 1, toks.end());
    next[i].push_back(static_cast<int32_t>(std::max_element(logits.begin(), logits.end()) - logits.begin()));
    a.push_back(m->new_mtp_state_for(128, *trunk.back()));
    b.push_back(m->new_mtp_state_for(128, *trunk.back()));
  }
  std::vector<std::vector<float>> la(kSeqs, std::vector<float>(static_cast<size_t>(V))), lb = la;
  std::vector<std::vector<float>> ha(kSeqs, std::vector<float>(static_cast<size_t>(d))), hb = ha;
  auto compare = [&](const char* what) {
    double dl = 0, dh = 0, scale = 0;
    for (int i = 0; i < kSeqs; ++i) {
      for (int64_t k = 0; k < V; ++k) {
        dl = std::max(dl, static_cast<double>(std::fabs(la[i][k] - lb[i][k])));
        scale = std::max(scale, static_cast<double>(std::fabs(la[i][k])));
      }
      for (int64_t k = 0; k < d; ++k) dh = std::max(dh, static_cast<double>(std::fabs(ha[i][k] - hb[i][k])));
      EXPECT_EQ(a[i]->n_past(), b[i]->n_past()) << what;
    }
    std::printf("gemma4 assistant batch %s: max |Δlogit| %.3g (max |logit| %.3g), |Δh| %.3g\n", what, dl, scale, dh);
    EXPECT_GT(scale, 0.01) << what;
    EXPECT_LE(dl, 1e-4 * scale) << what;
    EXPECT_LE(dh, 1e-4) << what;
  };
  std::vector<oxi::Model::MtpJob> jobs;
  for (int i = 0; i < kSeqs; ++i) {
    m->mtp_forward(*a[i], hid[i].data(), next[i].data(), lens[i], la[i].data(), ha[i].data());
    jobs.push_back({b[static_cast<size_t>(i)].get(), hid[i].data(), next[i].data(), lens[i], lb[i].data(), hb[i].data()});
  }
  m->mtp_forward_batch(jobs);
  compare("first step");
  // Chained: each sequence's own output hidden state and a draft token.
  std::vector<int32_t> drafts(kSeqs);
  std::vector<std::vector<float>> hin = ha;
  jobs.clear();
  for (int i = 0; i < kSeqs; ++i) {
    drafts[static_cast<size_t>(i)] = static_cast<int32_t>(std::max_element(la[i].begin(), la[i].end()) - la[i].begin());
    m->mtp_forward(*a[i], hin[i].data(), &drafts[static_cast<size_t>(i)], 1, la[i].data(), ha[i].data());
    jobs.push_back({b[static_cast<size_t>(i)].get(), hin[i].data(), &drafts[static_cast<size_t>(i)], 1, lb[i].data(), hb[i].data()});
  }
  m->mtp_forward_batch(jobs);
  compare("chained step");
  fs::remove_all(dir);
}

// For the llama.cpp oracle (tests/e2e/gemma4_assistant.test.mjs): with OXI_G4A_TARGET (a GGUF),
// OXI_G4A_DRAFT (the assistant GGUF), OXI_G4A_TOKENS (comma-separated prompt), OXI_G4A_K and
// OXI_G4A_OUT set, writes the drafter's first-step logits and its K chained greedy drafts after
// the prompt (the target's greedy token at the prompt's end as x_n) as JSON. Skipped otherwise.
TEST(Gemma4, AssistantDumpForOracle) {
  const char* tp = std::getenv("OXI_G4A_TARGET");
  if (!tp) GTEST_SKIP() << "OXI_G4A_TARGET not set (run by e2e_gemma4_assistant)";
  const oxi::ModelFiles draft = oxi::open_model_files(std::getenv("OXI_G4A_DRAFT"));
  oxi::LoadOptions lo;
  lo.draft = &draft;
  lo.draft_path = std::getenv("OXI_G4A_DRAFT");
  auto m = oxi::load_model(oxi::open_model_files(tp), lo);
  std::vector<int32_t> toks;
  for (std::string s = std::getenv("OXI_G4A_TOKENS"); !s.empty();) {
    const size_t c = s.find(',');
    toks.push_back(std::stoi(s.substr(0, c)));
    s = c == std::string::npos ? "" : s.substr(c + 1);
  }
  const int K = std::atoi(std::getenv("OXI_G4A_K"));
  const int64_t n = static_cast<int64_t>(toks.size()), d = m->info().n_embd, V = m->info().n_vocab;
  auto st = m->new_state(512);
  std::vector<float> logits(static_cast<size_t>(V)), hid(static_cast<size_t>(n * d));
  m->forward(*st, toks, logits.data(), false, hid.data());
  auto argmax = [](const std::vector<float>& v) { return static_cast<int32_t>(std::max_element(v.begin(), v.end()) - v.begin()); };
  const int32_t x = argmax(logits);
  auto ms = m->new_mtp_state_for(512, *st);
  std::vector<int32_t> next(toks.begin() + 1, toks.end());
  next.push_back(x);  // pairs (h_p, x_{p+1}) for p < n: the last one pairs h_{n-1} with x_n
  std::vector<float> h(static_cast<size_t>(d));
  m->mtp_forward(*ms, hid.data(), next.data(), n, logits.data(), h.data());
  json out = {{"target_token", x}, {"first_logits", logits},
              {"h", std::vector<float>(hid.end() - d, hid.end())}};
  std::vector<int32_t> drafts;
  for (int j = 0; j < K; ++j) {
    drafts.push_back(argmax(logits));
    m->mtp_forward(*ms, h.data(), &drafts.back(), 1, logits.data(), h.data());
  }
  out["drafts"] = drafts;
  std::ofstream(std::getenv("OXI_G4A_OUT")) << out.dump();
}

TEST(Gemma4, HfAndConvertedGgufAgree) {
  Spec s;
  s.kv_shared = 2; s.ple = 8; s.double_wide = true; s.layers = 4;
  const std::string dir = write_checkpoint("conv", s);
  const std::string g = convert(dir, "c");
  const std::vector<int32_t> toks = {2, 17, 33, 50, 9, 71, 88, 12, 40, 3, 60};
  const auto h = last_logits(*load(dir), toks), q = last_logits(*load(g), toks);
  EXPECT_EQ(0, std::memcmp(h.data(), q.data(), h.size() * sizeof(float)));

  oxi::GgufFile f = oxi::read_gguf(g);
  EXPECT_EQ(f.metadata.get_string("general.architecture"), "gemma4");
  EXPECT_EQ(f.metadata.get_int("gemma4.attention.key_length"), 32);
  EXPECT_EQ(f.metadata.get_int("gemma4.attention.key_length_swa"), 16);
  EXPECT_EQ(f.metadata.get_int("gemma4.rope.dimension_count"), 32);
  EXPECT_EQ(f.metadata.get_int("gemma4.attention.shared_kv_layers"), 2);
  EXPECT_EQ(f.metadata.get_int("gemma4.embedding_length_per_layer_input"), 8);
  EXPECT_EQ(f.metadata.find("gemma4.feed_forward_length")->as_int_array(), (std::vector<int64_t>{48, 48, 96, 96}));
  EXPECT_EQ(f.metadata.find("gemma4.attention.sliding_window_pattern")->as_int_array(), (std::vector<int64_t>{1, 0, 1, 0}));
  EXPECT_EQ(f.metadata.get_string("tokenizer.ggml.model"), "gemma4");
  const oxi::TensorInfo& rf = f.tensors.get("rope_freqs.weight");
  EXPECT_EQ(rf.dtype, oxi::DType::F32);
  EXPECT_EQ(rf.shape, (std::vector<int64_t>{16}));
  for (const char* n : {"token_embd.weight", "per_layer_token_embd.weight", "per_layer_model_proj.weight",
                        "per_layer_proj_norm.weight", "blk.0.inp_gate.weight", "blk.0.proj.weight",
                        "blk.0.post_norm.weight", "blk.3.layer_output_scale.weight", "blk.1.attn_q_norm.weight",
                        "blk.0.post_attention_norm.weight", "blk.0.post_ffw_norm.weight", "output_norm.weight"})
    EXPECT_TRUE(f.tensors.contains(n)) << n;
  EXPECT_EQ(f.tensors.get("per_layer_token_embd.weight").shape, (std::vector<int64_t>{96, 32}));
  fs::remove_all(dir);
}

TEST(Gemma4, MoeConvertedNamesAndAgreement) {
  Spec s;
  s.experts = 4; s.top_k = 2; s.k_eq_v = true; s.kv = 2; s.kv_global = 1;
  const std::string dir = write_checkpoint("moe", s);
  const std::string g = convert(dir, "m");
  oxi::GgufFile f = oxi::read_gguf(g);
  EXPECT_EQ(f.tensors.get("blk.0.ffn_gate_up_exps.weight").shape, (std::vector<int64_t>{4, 32, 32}));
  EXPECT_EQ(f.tensors.get("blk.0.ffn_down_exps.weight").shape, (std::vector<int64_t>{4, 32, 16}));
  EXPECT_TRUE(f.tensors.contains("blk.0.ffn_gate_inp.scale"));
  EXPECT_TRUE(f.tensors.contains("blk.0.ffn_down_exps.scale"));
  EXPECT_FALSE(f.tensors.contains("blk.1.attn_v.weight"));  // k_eq_v global layer
  EXPECT_EQ(f.metadata.find("gemma4.attention.head_count_kv")->as_int_array(), (std::vector<int64_t>{2, 1, 2, 1}));
  const std::vector<int32_t> toks = {2, 7, 19, 23, 41, 55};
  const auto h = last_logits(*load(dir), toks), q = last_logits(*load(g), toks);
  EXPECT_EQ(0, std::memcmp(h.data(), q.data(), h.size() * sizeof(float)));
  fs::remove_all(dir);
}

TEST(Gemma4, BadInputIsRefusedCleanly) {
  Spec s;
  const std::string dir = write_checkpoint("bad", s);
  auto m = load(dir);
  auto st = m->new_state(8);
  std::vector<float> out(static_cast<size_t>(m->info().n_vocab) * 9);
  try {
    m->forward(*st, std::vector<int32_t>{2, 96}, out.data(), false);
    FAIL() << "no throw";
  } catch (const oxi::Error& e) {
    EXPECT_EQ(e.code(), oxi::ErrorCode::kInvalidArgument);
  }
  EXPECT_THROW(m->forward(*st, std::vector<int32_t>{2, -1}, out.data(), false), oxi::Error);
  EXPECT_THROW(m->forward(*st, std::vector<int32_t>(9, 5), out.data(), false), oxi::Error);
  EXPECT_EQ(st->n_past(), 0);
  EXPECT_THROW(m->new_state(0), oxi::Error);
  // a config that lies about shapes
  json cfg = json::parse(std::ifstream(dir + "/config.json"));
  cfg["text_config"]["hidden_size"] = 40;
  std::ofstream(dir + "/config.json") << cfg.dump();
  EXPECT_THROW(load(dir), oxi::Error);
  cfg["text_config"]["hidden_size"] = 32;
  cfg["text_config"]["num_kv_shared_layers"] = 4;
  std::ofstream(dir + "/config.json") << cfg.dump();
  EXPECT_THROW(load(dir), oxi::Error);
  cfg["text_config"]["num_kv_shared_layers"] = 0;
  cfg["text_config"]["layer_types"] = json::array({"sliding_attention", "bogus", "sliding_attention", "full_attention"});
  std::ofstream(dir + "/config.json") << cfg.dump();
  EXPECT_THROW(load(dir), oxi::Error);
  fs::remove_all(dir);
}

TEST(Gemma4, GeluMatchesGgmlTable) {
  // ggml rounds the input to f16, looks up gelu, rounds to f16; outside (-10, 10) it clamps.
  EXPECT_EQ(oxi::gemma4::gelu_ggml(-11.0f), 0.0f);
  EXPECT_EQ(oxi::gemma4::gelu_ggml(12.5f), 12.5f);
  for (float x : {-3.0f, -0.5f, 0.0f, 0.25f, 1.0f, 2.7f})
    EXPECT_NEAR(oxi::gemma4::gelu_ggml(x), oxi::gemma4::gelu_tanh_exact(x), 2e-3f * (1.0f + std::fabs(x)));
}

// The whole pass on a block-level device (models/gemma4/device_forward.h) against the CPU forward
// with the same formulas (tanh GELU, one f32 product order, f32 KV cache): sliding window, shared
// KV, per-layer embeddings, the MoE block, softcap; a 23-token prompt (all logits), then greedy
// decode steps. On the CPU device (same kernels) and the test device (double).
TEST(Gemma4, DeviceForwardMatchesTheCpuForward) {
  for (bool moe : {false, true}) {
    Spec s = six_layer_spec(moe);
    s.k_eq_v = moe;  // the 26B-like case: full layers take V from the raw K projection
    const std::string dir = write_checkpoint(moe ? "dev_moe" : "dev_ple", s);
    auto load_with = [&](std::shared_ptr<oxi::nn::Device> dev) {
      setenv("OXI_GEMMA4_GGML_MM", "0", 1);
      setenv("OXI_GEMMA4_EXACT_GELU", "1", 1);
      oxi::LoadOptions opt;
      opt.kv_f32 = true;
      opt.device = std::move(dev);
      auto m = oxi::load_model(oxi::open_model_files(dir), opt);
      unsetenv("OXI_GEMMA4_GGML_MM");
      unsetenv("OXI_GEMMA4_EXACT_GELU");
      return m;
    };
    auto cpu = load_with(nullptr);
    std::string why;
    std::shared_ptr<oxi::nn::Device> vk = oxi::backend::make_vulkan_device(-1, &why);
    if (!vk) std::printf("gemma4 device forward: Vulkan skipped (%s)\n", why.c_str());
    for (int which : {0, 1, 2}) {  // the CPU device, the test device, Vulkan (when present)
      if (which == 2 && !vk) continue;
      const bool test_dev = which == 1;
      auto dev = load_with(which == 2 ? vk : test_dev ? oxi::backend::make_test_device() : oxi::nn::make_cpu_device());
      const int64_t V = s.vocab;
      const auto prompt = batchtest::ids(23, V, 3);
      auto sa = cpu->new_state(64), sb = dev->new_state(64);
      std::vector<float> la(static_cast<size_t>(23 * V)), lb(la.size());
      cpu->forward(*sa, prompt, la.data(), true);
      dev->forward(*sb, prompt, lb.data(), true);
      double worst = max_abs_diff(la, lb), scale = 0;
      for (float x : la) scale = std::max(scale, static_cast<double>(std::fabs(x)));
      int32_t next = static_cast<int32_t>(std::max_element(la.end() - V, la.end()) - la.end() + V);
      int mism = 0;
      for (int k = 0; k < 6; ++k) {
        std::vector<float> a(static_cast<size_t>(V)), b(a.size());
        cpu->forward(*sa, std::vector<int32_t>{next}, a.data(), false);
        const uint64_t w0 = which == 2 ? vk->waits() : 0;
        dev->forward(*sb, std::vector<int32_t>{next}, b.data(), false);
        if (which == 2) {  // host round trips of a decode step: the logits, and (MoE) each layer's routing
          const uint64_t waits = vk->waits() - w0;
          if (k == 0) std::printf("gemma4 %s on vulkan: %llu host waits in a decode step\n", moe ? "moe" : "ple", static_cast<unsigned long long>(waits));
          if (moe) {
            EXPECT_EQ(waits, static_cast<uint64_t>(1 + dev->info().n_layer));  // every layer routes
          } else {
            EXPECT_EQ(waits, 1u);
          }
        }
        worst = std::max(worst, max_abs_diff(a, b));
        const auto ia = std::max_element(a.begin(), a.end()) - a.begin(), ib = std::max_element(b.begin(), b.end()) - b.begin();
        mism += ia != ib;
        next = static_cast<int32_t>(ia);
      }
      std::printf("gemma4 %s on the %s device: max |Δlogit| %.3g (max |logit| %.3g), greedy mismatches %d\n", moe ? "moe" : "ple",
                  which == 2 ? "vulkan" : test_dev ? "test" : "cpu", worst, scale, mism);
      EXPECT_GT(scale, 0.01);
      EXPECT_LE(worst, 1e-4 * scale) << (moe ? "moe" : "ple") << (test_dev ? " test device" : " cpu device");
      EXPECT_EQ(mism, 0);
    }
    // several sequences together = alone; truncate; snapshot round trip, on the CPU device
    auto dev = load_with(oxi::nn::make_cpu_device());
    const batchtest::BatchDiff d = batchtest::batch_vs_alone(
        *dev, {batchtest::ids(30, s.vocab, 1), batchtest::ids(5, s.vocab, 2), batchtest::ids(1, s.vocab, 3)}, 3);
    EXPECT_LE(d.prefill, 1e-5 * d.scale);
    EXPECT_LE(d.decode, 1e-5 * d.scale);
    EXPECT_LE(batchtest::truncate_vs_fresh(*dev, batchtest::ids(12, s.vocab, 5), batchtest::ids(5, s.vocab, 6), 2, 17), 1e-5 * d.scale);
    auto st = dev->new_state(64);
    std::vector<float> a(static_cast<size_t>(s.vocab)), b(a.size());
    dev->forward(*st, batchtest::ids(9, s.vocab, 8), a.data(), false);
    const auto snap = st->snapshot();
    dev->forward(*st, std::vector<int32_t>{11}, a.data(), false);
    st->restore(snap);
    dev->forward(*st, std::vector<int32_t>{11}, b.data(), false);
    EXPECT_EQ(max_abs_diff(a, b), 0.0);
    fs::remove_all(dir);
  }
}

}  // namespace
