// oxi-gen gemma4-assistant --target DIR: a Gemma 4 assistant drafter checkpoint
// (Gemma4AssistantForCausalLM, model_type gemma4_assistant; spec B.5) for the synthetic Gemma 4
// target in DIR (oxi-gen gemma4's output), with seeded random weights in the real layout:
//   model.embed_tokens.weight [V, d_a] (tied lm_head), model.layers.N.* (q/o projections, q_norm,
//   the four norms, GeGLU MLP, layer_scalar; no k/v: every layer reads the target's cache),
//   model.norm.weight, pre_projection.weight [d_a, 2·d_t], post_projection.weight [d_t, d_a], and
//   with --ordered masked_embedding.centroids.weight [C, d_a] + masked_embedding.token_ordering [V]
//   (a permutation, I64).
// The layers' head sizes and RoPE follow the target's (their queries meet the target's keys): the
// layer pattern is `--layers` − 1 sliding then one full, as the E2B assistant's [S, S, S, F].
#include <cmath>
#include <fstream>
#include <numeric>
#include <string>
#include <vector>

#include "core/error.h"
#include "gen_common.h"

namespace oxi::gen {
namespace {

using nlohmann::json;

std::vector<float> mat(Rng& rng, int64_t out, int64_t in, double gain = 1.0) {
  return randn(rng, out * in, gain / std::sqrt(static_cast<double>(in)));
}
std::vector<float> norm_w(Rng& rng, int64_t n) { return randn(rng, n, 0.1, 1.0); }

int gen_gemma4_assistant(GenArgs& a) {
  const std::string target = a.get_str("--target", "");
  const int64_t d = a.get_int("--hidden", 32);
  const int64_t layers = a.get_int("--layers", 4);
  const int64_t ffn = a.get_int("--ffn", 64);
  const bool ordered = a.flag("--ordered");
  const int64_t n_centroids = a.get_int("--centroids", 8);
  const int64_t top_k = a.get_int("--centroid-top-k", 2);
  a.finish();
  if (target.empty()) throw_error(ErrorCode::kInvalidArgument, "gemma4-assistant: --target DIR (the Gemma 4 checkpoint) is required");
  std::ifstream in(target + "/config.json");
  if (!in) throw_error(ErrorCode::kIo, "gemma4-assistant: cannot read " + target + "/config.json");
  const json tcfg = json::parse(in);
  const json tt = tcfg.contains("text_config") ? tcfg["text_config"] : tcfg;
  const int64_t d_t = tt.at("hidden_size"), vocab = tt.at("vocab_size"), heads = tt.at("num_attention_heads");
  const int64_t hd = tt.at("head_dim"), hd_full = tt.value("global_head_dim", hd);
  if (d <= 0 || layers < 2 || ffn <= 0 || (ordered && (n_centroids <= 0 || vocab % n_centroids != 0 || top_k <= 0 || top_k > n_centroids)))
    throw_error(ErrorCode::kInvalidArgument, "gemma4-assistant: inconsistent sizes (--layers ≥ 2; --centroids must divide the vocabulary)");

  Rng rng(a.seed);
  Checkpoint ck(a.dtype);
  // Token embeddings (the tied head) at the target's scale: logits ~ N(0, 1).
  ck.add_randn("model.embed_tokens.weight", {vocab, d}, rng, 1.0 / std::sqrt(static_cast<double>(d)));
  std::vector<bool> swa(static_cast<size_t>(layers), true);
  swa.back() = false;
  for (int64_t l = 0; l < layers; ++l) {
    const std::string b = "model.layers." + std::to_string(l) + ".";
    const int64_t h = swa[static_cast<size_t>(l)] ? hd : hd_full;
    const double qk = std::pow(static_cast<double>(h), -0.25);
    ck.add(b + "input_layernorm.weight", {d}, norm_w(rng, d));
    ck.add(b + "self_attn.q_proj.weight", {heads * h, d}, mat(rng, heads * h, d));
    ck.add(b + "self_attn.q_norm.weight", {h}, randn(rng, h, 0.1 * qk, 1.5 * qk));
    ck.add(b + "self_attn.o_proj.weight", {d, heads * h}, mat(rng, d, heads * h, 0.7));
    ck.add(b + "post_attention_layernorm.weight", {d}, norm_w(rng, d));
    ck.add(b + "pre_feedforward_layernorm.weight", {d}, norm_w(rng, d));
    ck.add(b + "mlp.gate_proj.weight", {ffn, d}, mat(rng, ffn, d));
    ck.add(b + "mlp.up_proj.weight", {ffn, d}, mat(rng, ffn, d));
    ck.add(b + "mlp.down_proj.weight", {d, ffn}, mat(rng, d, ffn, 0.7));
    ck.add(b + "post_feedforward_layernorm.weight", {d}, norm_w(rng, d));
    ck.add(b + "layer_scalar", {1}, randu(rng, 1, 0.5, 1.0));
  }
  ck.add("model.norm.weight", {d}, norm_w(rng, d));
  // concat(e, h): e = E_target[x]·sqrt(d_t) has unit RMS, h (post-norm) ~ the norm weights.
  ck.add("pre_projection.weight", {d, 2 * d_t}, mat(rng, d, 2 * d_t));
  ck.add("post_projection.weight", {d_t, d}, mat(rng, d_t, d));
  if (ordered) {
    ck.add("masked_embedding.centroids.weight", {n_centroids, d}, mat(rng, n_centroids, d));
    // A seeded permutation of the vocabulary (Fisher–Yates), stored as the checkpoints' int64 buffer.
    std::vector<int64_t> perm(static_cast<size_t>(vocab));
    std::iota(perm.begin(), perm.end(), int64_t{0});
    for (int64_t i = vocab - 1; i > 0; --i) std::swap(perm[static_cast<size_t>(i)], perm[rng.next_u64() % static_cast<uint64_t>(i + 1)]);
    ck.add("masked_embedding.token_ordering", {vocab}, std::vector<float>(perm.begin(), perm.end()), DType::I64);
  }
  ck.write(a);

  json layer_types = json::array();
  for (bool s : swa) layer_types.push_back(s ? "sliding_attention" : "full_attention");
  json tc = {
      {"model_type", "gemma4_text"},
      {"vocab_size", vocab},
      {"hidden_size", d},
      {"num_hidden_layers", layers},
      {"layer_types", layer_types},
      {"sliding_window", tt.at("sliding_window")},
      {"num_attention_heads", heads},
      {"num_key_value_heads", tt.at("num_key_value_heads")},
      {"num_global_key_value_heads", tt.value("num_global_key_value_heads", json(nullptr))},
      {"head_dim", hd},
      {"global_head_dim", hd_full},
      {"attention_k_eq_v", tt.value("attention_k_eq_v", false)},
      {"num_kv_shared_layers", layers},  // every layer reads the target's cache
      {"hidden_size_per_layer_input", 0},
      {"intermediate_size", ffn},
      {"use_double_wide_mlp", false},
      {"enable_moe_block", false},
      {"hidden_activation", "gelu_pytorch_tanh"},
      {"rms_norm_eps", tt.value("rms_norm_eps", 1e-6)},
      {"rope_parameters", tt.at("rope_parameters")},
      {"final_logit_softcapping", nullptr},
      {"tie_word_embeddings", true},
      {"max_position_embeddings", tt.value("max_position_embeddings", 131072)},
      {"attention_bias", false},
      {"bos_token_id", 2},
      {"eos_token_id", 1},
      {"pad_token_id", 0},
      {"torch_dtype", "bfloat16"},
  };
  json cfg = {
      {"architectures", {"Gemma4AssistantForCausalLM"}},
      {"model_type", "gemma4_assistant"},
      {"backbone_hidden_size", d_t},
      {"use_ordered_embeddings", ordered},
      {"num_centroids", n_centroids},
      {"centroid_intermediate_top_k", top_k},
      {"text_config", tc},
      {"tie_word_embeddings", true},
      {"torch_dtype", "bfloat16"},
      {"transformers_version", "5.5.0"},
  };
  write_json(a.out_dir, "config.json", cfg);
  return 0;
}

}  // namespace
}  // namespace oxi::gen

OXI_GEN_FAMILY(gemma4_assistant,
               "--target GEMMA4_DIR [--hidden 32] [--layers 4] [--ffn 64] [--ordered [--centroids 8] "
               "[--centroid-top-k 2]]  (a Gemma 4 assistant drafter for that target)",
               oxi::gen::gen_gemma4_assistant);
