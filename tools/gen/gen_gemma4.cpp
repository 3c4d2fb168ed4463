// oxi-gen gemma4: a Gemma 4 HF checkpoint (Gemma4ForConditionalGeneration, nested text_config
// with model_type gemma4_text, tensors under model.language_model.) with seeded random weights in
// the real layouts (spec B.1, B.8.1). Shapes:
//   e2b  E2B-like: per-layer embeddings, KV sharing (last owning layers are [sliding, full]),
//        double-wide MLP on the shared layers, one KV head, no k_eq_v.
//   26b  26B-A4B-like: every layer has the dense GeGLU branch and the expert block (router with
//        scale and per-expert scale, fused gate_up experts), global layers with K = V (no v_proj)
//        and fewer KV heads.
//   31b  31B-like: dense, global layers with K = V and fewer KV heads.
// Scales: matrices ~ N(0, 1/fan_in); q/k norm weights ~ 1.5·hd^-1/4 (attention scores O(1) under
// Gemma 4's scale 1.0); other norm weights ~ 1 + N(0, 0.1) (Gemma 4 norms are used as
// stored); embeddings with std 1/sqrt(d) (x = E·sqrt(d) has unit RMS; tied-head logits ~ N(0, 1)
// with maxima ~5, so f16 effects in llama.cpp's attention stay below 1e-3 in logprobs); layer_scalar in
// [0.5, 1]. The 262,144-token vocabulary is the real one (tokenizer from --tokenizer-dir).
#include <cmath>
#include <string>
#include <vector>

#include "core/error.h"
#include "gen_common.h"

namespace oxi::gen {
namespace {

using nlohmann::json;

struct G4 {
  int64_t d, layers, n_head, n_kv, n_kv_global, hd, hd_global, window, ffn, vocab, kv_shared, ple;
  int64_t experts, top_k, expert_ffn, full_every;
  bool k_eq_v, moe, double_wide;
  double partial_full, eps, softcap;
};

std::vector<float> mat(Rng& rng, int64_t out, int64_t in, double gain = 1.0) {
  return randn(rng, out * in, gain / std::sqrt(static_cast<double>(in)));
}
std::vector<float> norm_w(Rng& rng, int64_t n) { return randn(rng, n, 0.1, 1.0); }

// The Gemma 4 vision tower (spec B.6; docs/multimodal.md "Gemma 4") under model.vision_tower. and
// its projection model.embed_vision.: a bias-free linear patch embedding over 3·P·P pixels in
// (row, column, channel) order, a learned position table [2, S, h] (x table, y table), `depth`
// blocks (RMS norms used as stored; q/k/v/o and gate/up/down as clippable linears `.linear.weight`
// with scalar input/output bounds; per-head q/k norms; layer_scalar), optional standardisation
// (std_bias / std_scale) and the projection [d_text, h]. Pooling (3×3) has no weights.
struct Vision {
  int64_t hidden, depth, heads, ffn, pos, patch, pool;
  bool clip, standardize;
};

void add_vision(Checkpoint& ck, Rng& rng, const Vision& v, int64_t d_text) {
  const std::string p = "model.vision_tower.";
  const int64_t h = v.hidden, hd = h / v.heads, kin = 3 * v.patch * v.patch;
  ck.add(p + "patch_embedder.input_proj.weight", {h, kin}, mat(rng, h, kin));
  ck.add(p + "patch_embedder.position_embedding_table", {2, v.pos, h}, randn(rng, 2 * v.pos * h, 0.5));
  // A clippable linear: the weight, and (with --vision-clip) bounds that cut the tails of its input
  // and output (the real checkpoints' bounds are calibrated activation ranges).
  auto linear = [&](const std::string& name, int64_t out, int64_t in, double gain) {
    ck.add(name + ".linear.weight", {out, in}, mat(rng, out, in, gain));
    if (!v.clip) return;
    ck.add(name + ".input_min", {}, randu(rng, 1, -2.5, -1.5));
    ck.add(name + ".input_max", {}, randu(rng, 1, 1.5, 2.5));
    ck.add(name + ".output_min", {}, randu(rng, 1, -3.0, -2.0));
    ck.add(name + ".output_max", {}, randu(rng, 1, 2.0, 3.0));
  };
  const double qk = std::pow(static_cast<double>(hd), -0.25);
  for (int64_t i = 0; i < v.depth; ++i) {
    const std::string b = p + "encoder.layers." + std::to_string(i) + ".";
    ck.add(b + "input_layernorm.weight", {h}, norm_w(rng, h));
    linear(b + "self_attn.q_proj", h, h, 1.0);
    linear(b + "self_attn.k_proj", h, h, 1.0);
    linear(b + "self_attn.v_proj", h, h, 1.0);
    linear(b + "self_attn.o_proj", h, h, 0.7);
    ck.add(b + "self_attn.q_norm.weight", {hd}, randn(rng, hd, 0.1 * qk, 1.5 * qk));
    ck.add(b + "self_attn.k_norm.weight", {hd}, randn(rng, hd, 0.1 * qk, 1.5 * qk));
    ck.add(b + "post_attention_layernorm.weight", {h}, norm_w(rng, h));
    ck.add(b + "pre_feedforward_layernorm.weight", {h}, norm_w(rng, h));
    linear(b + "mlp.gate_proj", v.ffn, h, 1.0);
    linear(b + "mlp.up_proj", v.ffn, h, 1.0);
    linear(b + "mlp.down_proj", h, v.ffn, 0.7);
    ck.add(b + "post_feedforward_layernorm.weight", {h}, norm_w(rng, h));
    ck.add(b + "layer_scalar", {1}, randu(rng, 1, 0.5, 1.0));
  }
  if (v.standardize) {
    ck.add(p + "std_bias", {h}, randn(rng, h, 0.5));
    ck.add(p + "std_scale", {h}, randu(rng, h, 0.5, 1.5));
  }
  // The soft tokens enter the text model unscaled: keep them at the RMS of the scaled token
  // embeddings (~1).
  ck.add("model.embed_vision.embedding_projection.weight", {d_text, h}, mat(rng, d_text, h));
}

// The Gemma 4 audio tower (USM-style conformer; docs/multimodal.md "Gemma 4 audio") under
// model.audio_tower. and its projection model.embed_audio.: two 3×3 stride-2 Conv2d subsampling
// layers (bias-free, each with a weight-only LayerNorm over channels) over the [T, 128] log-mel
// input, input_proj_linear [h, 32·c1]; per layer two half-step SiLU FFNs (feed_forward1/2: pre/post
// RMS norms, ffw_layer_1 [4h, h], ffw_layer_2 [h, 4h]), chunked local self-attention (q/k/v/post
// clippable linears, relative_k_proj [h, h], per_dim_scale [hd]) between norm_pre_attn and
// norm_post_attn, the light conv module (lconv1d: pre_layer_norm, linear_start [2h, h] → GLU,
// causal depthwise Conv1d [h, 1, K], conv_norm, SiLU, linear_end [h, h]) and norm_out; then
// output_proj [out, h] with bias and the projection model.embed_audio.embedding_projection [d_text, out].
struct Audio {
  int64_t hidden, depth, heads, out, c0, c1, kernel, mels;
  bool clip;
};

void add_audio(Checkpoint& ck, Rng& rng, const Audio& au, int64_t d_text) {
  const std::string p = "model.audio_tower.";
  const int64_t h = au.hidden, hd = h / au.heads, f1 = au.mels / 4;
  auto linear = [&](const std::string& name, int64_t out, int64_t in, double gain) {
    ck.add(name + ".linear.weight", {out, in}, mat(rng, out, in, gain));
    if (!au.clip) return;
    ck.add(name + ".input_min", {}, randu(rng, 1, -4.0, -3.0));
    ck.add(name + ".input_max", {}, randu(rng, 1, 3.0, 4.0));
    ck.add(name + ".output_min", {}, randu(rng, 1, -5.0, -4.0));
    ck.add(name + ".output_max", {}, randu(rng, 1, 4.0, 5.0));
  };
  const std::string s = p + "subsample_conv_projection.";
  ck.add(s + "layer0.conv.weight", {au.c0, 1, 3, 3}, randn(rng, au.c0 * 9, 1.0 / 3.0));
  ck.add(s + "layer0.norm.weight", {au.c0}, norm_w(rng, au.c0));
  ck.add(s + "layer1.conv.weight", {au.c1, au.c0, 3, 3}, randn(rng, au.c1 * au.c0 * 9, 1.0 / std::sqrt(9.0 * au.c0)));
  ck.add(s + "layer1.norm.weight", {au.c1}, norm_w(rng, au.c1));
  ck.add(s + "input_proj_linear.weight", {h, f1 * au.c1}, mat(rng, h, f1 * au.c1));
  for (int64_t i = 0; i < au.depth; ++i) {
    const std::string b = p + "layers." + std::to_string(i) + ".";
    for (const char* ff : {"feed_forward1.", "feed_forward2."}) {
      ck.add(b + ff + "pre_layer_norm.weight", {h}, norm_w(rng, h));
      linear(b + ff + "ffw_layer_1", 4 * h, h, 1.0);
      linear(b + ff + "ffw_layer_2", h, 4 * h, 1.0);
      ck.add(b + ff + "post_layer_norm.weight", {h}, norm_w(rng, h));
    }
    ck.add(b + "norm_pre_attn.weight", {h}, norm_w(rng, h));
    linear(b + "self_attn.q_proj", h, h, 1.0);
    linear(b + "self_attn.k_proj", h, h, 1.0);
    linear(b + "self_attn.v_proj", h, h, 1.0);
    linear(b + "self_attn.post", h, h, 0.7);
    ck.add(b + "self_attn.relative_k_proj.weight", {h, h}, mat(rng, h, h));
    ck.add(b + "self_attn.per_dim_scale", {hd}, randn(rng, hd, 0.3));
    ck.add(b + "norm_post_attn.weight", {h}, norm_w(rng, h));
    ck.add(b + "lconv1d.pre_layer_norm.weight", {h}, norm_w(rng, h));
    linear(b + "lconv1d.linear_start", 2 * h, h, 1.0);
    ck.add(b + "lconv1d.depthwise_conv1d.weight", {h, 1, au.kernel}, randn(rng, h * au.kernel, 1.0 / std::sqrt(double(au.kernel))));
    ck.add(b + "lconv1d.conv_norm.weight", {h}, norm_w(rng, h));
    linear(b + "lconv1d.linear_end", h, h, 0.7);
    ck.add(b + "norm_out.weight", {h}, norm_w(rng, h));
  }
  ck.add(p + "output_proj.weight", {au.out, h}, mat(rng, au.out, h));
  ck.add(p + "output_proj.bias", {au.out}, randn(rng, au.out, 0.1));
  ck.add("model.embed_audio.embedding_projection.weight", {d_text, au.out}, mat(rng, d_text, au.out));
}

int gen_gemma4(GenArgs& a) {
  const std::string shape = a.get_str("--shape", "e2b");
  G4 c{};
  c.vocab = a.get_int("--vocab", 262144);
  c.window = a.get_int("--window", 16);
  c.eps = a.get_float("--eps", 1e-6);
  c.softcap = a.get_float("--softcap", 30.0);
  c.partial_full = a.get_float("--partial-rotary", 0.25);
  c.full_every = 0;
  if (shape == "e2b") {
    c.d = 64; c.layers = 10; c.n_head = 4; c.n_kv = 1; c.n_kv_global = 0; c.hd = 32; c.hd_global = 64;
    c.ffn = 128; c.kv_shared = 5; c.ple = 8; c.k_eq_v = false; c.moe = false; c.double_wide = true;
    c.full_every = 5;
  } else if (shape == "26b") {
    c.d = 64; c.layers = 6; c.n_head = 4; c.n_kv = 2; c.n_kv_global = 1; c.hd = 32; c.hd_global = 64;
    c.ffn = 64; c.kv_shared = 0; c.ple = 0; c.k_eq_v = true; c.moe = true; c.double_wide = false;
    c.experts = 8; c.top_k = 2; c.expert_ffn = 32; c.full_every = 6;
  } else if (shape == "31b") {
    c.d = 64; c.layers = 6; c.n_head = 4; c.n_kv = 2; c.n_kv_global = 1; c.hd = 32; c.hd_global = 64;
    c.ffn = 128; c.kv_shared = 0; c.ple = 0; c.k_eq_v = true; c.moe = false; c.double_wide = false;
    c.full_every = 6;
  } else {
    throw_error(ErrorCode::kInvalidArgument, "--shape must be e2b, 26b or 31b");
  }
  c.d = a.get_int("--hidden", c.d);
  c.layers = a.get_int("--layers", c.layers);
  c.n_head = a.get_int("--heads", c.n_head);
  c.n_kv = a.get_int("--kv-heads", c.n_kv);
  c.n_kv_global = a.get_int("--global-kv-heads", c.n_kv_global);
  c.hd = a.get_int("--head-dim", c.hd);
  c.hd_global = a.get_int("--global-head-dim", c.hd_global);
  c.ffn = a.get_int("--ffn", c.ffn);
  c.kv_shared = a.get_int("--kv-shared", c.kv_shared);
  c.ple = a.get_int("--ple", c.ple);
  c.full_every = a.get_int("--full-every", c.full_every);
  if (c.moe) {
    c.experts = a.get_int("--experts", c.experts);
    c.top_k = a.get_int("--top-k", c.top_k);
    c.expert_ffn = a.get_int("--expert-ffn", c.expert_ffn);
  }
  const double emb_gain = a.get_float("--emb-gain", 1.0);
  const bool vision = a.flag("--vision");
  Vision v{};
  v.hidden = a.get_int("--vision-hidden", 64);
  v.depth = a.get_int("--vision-depth", 2);
  v.heads = a.get_int("--vision-heads", 4);
  v.ffn = a.get_int("--vision-ffn", 128);
  v.pos = a.get_int("--vision-pos", 64);  // position_embedding_size: patches per side at most
  v.patch = 16;
  v.pool = 3;
  v.clip = !a.flag("--vision-no-clip");
  v.standardize = a.flag("--vision-standardize");
  const bool audio = a.flag("--audio");
  Audio au{};
  au.hidden = a.get_int("--audio-hidden", 64);
  au.depth = a.get_int("--audio-depth", 2);
  au.heads = a.get_int("--audio-heads", 4);
  au.out = a.get_int("--audio-out", 96);  // output_proj_dims (E2B: 1536)
  au.c0 = a.get_int("--audio-conv0", 16);  // subsampling_conv_channels (E2B: 128, 32)
  au.c1 = a.get_int("--audio-conv1", 8);
  au.kernel = 5;
  au.mels = 128;
  au.clip = !a.flag("--audio-no-clip");
  a.finish();
  if (audio && (au.hidden <= 0 || au.depth <= 0 || au.heads <= 0 || au.out <= 0 || au.c0 <= 0 || au.c1 <= 0 ||
                au.hidden % au.heads || (au.hidden / 2) < 2))
    throw_error(ErrorCode::kInvalidArgument, "gemma4: audio sizes must be positive, the hidden size a multiple of the heads");
  if (vision && (v.hidden <= 0 || v.depth <= 0 || v.heads <= 0 || v.ffn <= 0 || v.pos < 4 || v.hidden % v.heads ||
                 (v.hidden / v.heads) % 4))
    throw_error(ErrorCode::kInvalidArgument, "gemma4: vision sizes must be positive, the head dim a multiple of 4");
  if (c.d <= 0 || c.layers <= 0 || c.n_head <= 0 || c.n_kv <= 0 || c.hd <= 0 || c.hd_global <= 0 ||
      c.ffn <= 0 || c.vocab <= 0 || c.window <= 0 || c.full_every <= 0 || c.kv_shared < 0 ||
      c.kv_shared >= c.layers || c.n_head % c.n_kv != 0)
    throw_error(ErrorCode::kInvalidArgument, "gemma4: inconsistent shape options");

  std::vector<bool> swa(static_cast<size_t>(c.layers));
  for (int64_t l = 0; l < c.layers; ++l) swa[static_cast<size_t>(l)] = ((l + 1) % c.full_every != 0);
  swa.back() = false;
  const int64_t first_shared = c.layers - c.kv_shared;
  const int64_t kv_global = c.k_eq_v ? c.n_kv_global : c.n_kv;
  if (c.k_eq_v && (c.n_kv_global <= 0 || c.n_head % c.n_kv_global != 0))
    throw_error(ErrorCode::kInvalidArgument, "gemma4: --global-kv-heads must divide --heads");

  Rng rng(a.seed);
  Checkpoint ck(a.dtype);
  const std::string p = "model.language_model.";
  const double emb_std = emb_gain / std::sqrt(static_cast<double>(c.d));
  ck.add_randn(p + "embed_tokens.weight", {c.vocab, c.d}, rng, emb_std);
  if (c.ple > 0) {
    const int64_t LP = c.layers * c.ple;
    ck.add_randn(p + "embed_tokens_per_layer.weight", {c.vocab, LP}, rng, 1.0);
    ck.add(p + "per_layer_model_projection.weight", {LP, c.d}, mat(rng, LP, c.d));
    ck.add(p + "per_layer_projection_norm.weight", {c.ple}, norm_w(rng, c.ple));
  }
  for (int64_t l = 0; l < c.layers; ++l) {
    const std::string b = p + "layers." + std::to_string(l) + ".";
    const bool s = swa[static_cast<size_t>(l)];
    const int64_t hd = s ? c.hd : c.hd_global;
    const int64_t hkv = s ? c.n_kv : kv_global;
    ck.add(b + "input_layernorm.weight", {c.d}, norm_w(rng, c.d));
    ck.add(b + "self_attn.q_proj.weight", {c.n_head * hd, c.d}, mat(rng, c.n_head * hd, c.d));
    // KV-shared layers carry k/v weights in the HF checkpoints too; nothing reads them.
    ck.add(b + "self_attn.k_proj.weight", {hkv * hd, c.d}, mat(rng, hkv * hd, c.d));
    if (s || !c.k_eq_v) ck.add(b + "self_attn.v_proj.weight", {hkv * hd, c.d}, mat(rng, hkv * hd, c.d));
    ck.add(b + "self_attn.o_proj.weight", {c.d, c.n_head * hd}, mat(rng, c.d, c.n_head * hd, 0.7));
    // Attention scale is 1.0 on RMS-normalised q and k, so the q/k norm weights set the score
    // scale: ~hd^-1/4 each keeps q·k ~ N(0, 1) (trained checkpoints keep scores moderate too).
    const double qk = std::pow(static_cast<double>(hd), -0.25);
    ck.add(b + "self_attn.q_norm.weight", {hd}, randn(rng, hd, 0.1 * qk, 1.5 * qk));
    ck.add(b + "self_attn.k_norm.weight", {hd}, randn(rng, hd, 0.1 * qk, 1.5 * qk));
    ck.add(b + "post_attention_layernorm.weight", {c.d}, norm_w(rng, c.d));
    ck.add(b + "pre_feedforward_layernorm.weight", {c.d}, norm_w(rng, c.d));
    const int64_t ff = (c.double_wide && l >= first_shared) ? 2 * c.ffn : c.ffn;
    ck.add(b + "mlp.gate_proj.weight", {ff, c.d}, mat(rng, ff, c.d));
    ck.add(b + "mlp.up_proj.weight", {ff, c.d}, mat(rng, ff, c.d));
    ck.add(b + "mlp.down_proj.weight", {c.d, ff}, mat(rng, c.d, ff, 0.7));
    ck.add(b + "post_feedforward_layernorm.weight", {c.d}, norm_w(rng, c.d));
    if (c.moe) {
      const int64_t E = c.experts, I = c.expert_ffn;
      // A spread-out router so the top-k choice is decisive.
      ck.add(b + "router.proj.weight", {E, c.d}, mat(rng, E, c.d, 4.0));
      ck.add(b + "router.scale", {c.d}, norm_w(rng, c.d));
      ck.add(b + "router.per_expert_scale", {E}, randu(rng, E, 0.5, 1.5));
      ck.add(b + "experts.gate_up_proj", {E, 2 * I, c.d}, randn(rng, E * 2 * I * c.d, 1.0 / std::sqrt(double(c.d))));
      ck.add(b + "experts.down_proj", {E, c.d, I}, randn(rng, E * c.d * I, 0.7 / std::sqrt(double(I))));
      ck.add(b + "pre_feedforward_layernorm_2.weight", {c.d}, norm_w(rng, c.d));
      ck.add(b + "post_feedforward_layernorm_1.weight", {c.d}, norm_w(rng, c.d));
      ck.add(b + "post_feedforward_layernorm_2.weight", {c.d}, norm_w(rng, c.d));
    }
    if (c.ple > 0) {
      ck.add(b + "per_layer_input_gate.weight", {c.ple, c.d}, mat(rng, c.ple, c.d));
      ck.add(b + "per_layer_projection.weight", {c.d, c.ple}, mat(rng, c.d, c.ple));
      ck.add(b + "post_per_layer_input_norm.weight", {c.d}, norm_w(rng, c.d));
    }
    ck.add(b + "layer_scalar", {1}, randu(rng, 1, 0.5, 1.0));
  }
  ck.add(p + "norm.weight", {c.d}, norm_w(rng, c.d));
  if (vision) add_vision(ck, rng, v, c.d);
  if (audio) add_audio(ck, rng, au, c.d);
  ck.write(a);

  json layer_types = json::array();
  for (bool s : swa) layer_types.push_back(s ? "sliding_attention" : "full_attention");
  json tc = {
      {"model_type", "gemma4_text"},
      {"architectures", {"Gemma4ForCausalLM"}},
      {"vocab_size", c.vocab},
      {"hidden_size", c.d},
      {"num_hidden_layers", c.layers},
      {"layer_types", layer_types},
      {"sliding_window", c.window},
      {"num_attention_heads", c.n_head},
      {"num_key_value_heads", c.n_kv},
      {"num_global_key_value_heads", c.k_eq_v ? json(c.n_kv_global) : json(nullptr)},
      {"head_dim", c.hd},
      {"global_head_dim", c.hd_global},
      {"attention_k_eq_v", c.k_eq_v},
      {"num_kv_shared_layers", c.kv_shared},
      {"hidden_size_per_layer_input", c.ple},
      {"vocab_size_per_layer_input", c.vocab},
      {"intermediate_size", c.ffn},
      {"use_double_wide_mlp", c.double_wide},
      {"enable_moe_block", c.moe},
      {"num_experts", c.moe ? json(c.experts) : json(nullptr)},
      {"top_k_experts", c.moe ? json(c.top_k) : json(nullptr)},
      {"moe_intermediate_size", c.moe ? json(c.expert_ffn) : json(nullptr)},
      {"hidden_activation", "gelu_pytorch_tanh"},
      {"rms_norm_eps", c.eps},
      {"rope_parameters",
       {{"sliding_attention", {{"rope_type", "default"}, {"rope_theta", 10000.0}}},
        {"full_attention",
         {{"rope_type", "proportional"}, {"partial_rotary_factor", c.partial_full}, {"rope_theta", 1000000.0}}}}},
      {"final_logit_softcapping", c.softcap},
      {"attn_logit_softcapping", nullptr},
      {"tie_word_embeddings", true},
      {"max_position_embeddings", 131072},
      {"attention_bias", false},
      {"attention_dropout", 0.0},
      {"use_bidirectional_attention", nullptr},
      {"bos_token_id", 2},
      {"eos_token_id", 1},
      {"pad_token_id", 0},
      {"torch_dtype", "bfloat16"},
  };
  json cfg = {
      {"architectures", {"Gemma4ForConditionalGeneration"}},
      {"model_type", "gemma4"},
      {"text_config", tc},
      {"tie_word_embeddings", true},
      {"boi_token_id", 255999},
      {"eoi_token_id", 258882},
      {"image_token_id", 258880},
      {"audio_token_id", 258881},
      {"torch_dtype", "bfloat16"},
      {"transformers_version", "5.5.0"},
  };
  if (vision) {
    cfg["vision_config"] = {
        {"model_type", "gemma4_vision"},
        {"hidden_size", v.hidden},
        {"intermediate_size", v.ffn},
        {"num_hidden_layers", v.depth},
        {"num_attention_heads", v.heads},
        {"num_key_value_heads", v.heads},
        {"head_dim", v.hidden / v.heads},
        {"hidden_activation", "gelu_pytorch_tanh"},
        {"rms_norm_eps", 1e-6},
        {"patch_size", v.patch},
        {"pooling_kernel_size", v.pool},
        {"position_embedding_size", v.pos},
        {"rope_parameters", {{"rope_type", "default"}, {"rope_theta", 100.0}}},
        {"standardize", v.standardize},
        {"use_clipped_linears", v.clip},
        {"attention_bias", false},
    };
    cfg["vision_soft_tokens_per_image"] = 280;
  }
  if (audio) {
    cfg["audio_config"] = {
        {"model_type", "gemma4_audio"},
        {"hidden_size", au.hidden},
        {"num_hidden_layers", au.depth},
        {"num_attention_heads", au.heads},
        {"hidden_act", "silu"},
        {"subsampling_conv_channels", {au.c0, au.c1}},
        {"conv_kernel_size", au.kernel},
        {"residual_weight", 0.5},
        {"attention_chunk_size", 12},
        {"attention_context_left", 13},
        {"attention_context_right", 0},
        {"attention_logit_cap", 50.0},
        {"attention_invalid_logits_value", -1e9},
        {"use_clipped_linears", au.clip},
        {"rms_norm_eps", 1e-6},
        {"gradient_clipping", 1e10},
        {"output_proj_dims", au.out},
    };
  }
  if (vision) {
    // The Gemma 4 image processor: rescale to [0, 1], no mean/std (the tower maps x → 2x − 1).
    write_json(a.out_dir, "preprocessor_config.json",
               json{{"image_processor_type", "Gemma4ImageProcessor"},
                    {"do_convert_rgb", true},
                    {"do_resize", true},
                    {"resample", 3},
                    {"do_rescale", true},
                    {"rescale_factor", 1.0 / 255.0},
                    {"do_normalize", false},
                    {"image_mean", {0.0, 0.0, 0.0}},
                    {"image_std", {1.0, 1.0, 1.0}},
                    {"patch_size", v.patch},
                    {"pooling_kernel_size", v.pool},
                    {"max_soft_tokens", 280}});
  }
  write_json(a.out_dir, "config.json", cfg);
  write_json(a.out_dir, "generation_config.json",
             json{{"bos_token_id", 2}, {"eos_token_id", {1, 106}}, {"pad_token_id", 0}, {"do_sample", true},
                  {"top_k", 64}, {"top_p", 0.95}, {"temperature", 1.0}});
  return 0;
}

}  // namespace
}  // namespace oxi::gen

OXI_GEN_FAMILY(gemma4,
               "--shape e2b|26b|31b [--window 16] [--hidden N] [--layers N] [--heads N] [--kv-heads N] "
               "[--global-kv-heads N] [--head-dim N] [--global-head-dim N] [--ffn N] [--kv-shared N] [--ple N] "
               "[--experts N] [--top-k N] [--expert-ffn N] [--full-every N] [--vocab N] [--emb-gain 1.0] "
               "[--vision [--vision-hidden 64 --vision-depth 2 --vision-heads 4 --vision-ffn 128 --vision-pos 64 "
               "--vision-no-clip --vision-standardize]] "
               "[--audio [--audio-hidden 64 --audio-depth 2 --audio-heads 4 --audio-out 96 --audio-conv0 16 "
               "--audio-conv1 8 --audio-no-clip]]",
               oxi::gen::gen_gemma4);
