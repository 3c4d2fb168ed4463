// oxi-gen qwen35: a Qwen 3.5 (dense `qwen3_5` or MoE `qwen3_5_moe`) HF checkpoint with seeded
// random weights in the real layout (multimodal-style config with a nested text_config, tensor
// names under model.language_model., mtp.*). Shapes are what HF transformers expects
// (spec A.8.1). Weight scales keep activations O(1): matrices ~ N(0, 1/fan_in), zero-centred norm
// weights ~ N(0, 0.1), the GDN gated norm ~ 1 + N(0, 0.1), A = exp(A_log) in [0.1, 3], dt_bias the
// inverse softplus of dt in [0.01, 0.3], so decays exp(g) span ~0.2 .. 0.999.
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "core/error.h"
#include "gen_common.h"

namespace oxi::gen {
namespace {

struct Q35 {
  int64_t d, layers, interval, n_head, n_kv, hd, hk, hv, dk, dv, conv_k, ffn, vocab;
  bool moe, tied, mtp, text_only;
  int64_t experts, top_k, expert_ffn, shared_ffn;
  double eps, theta, partial;
};

std::vector<float> mat(Rng& rng, int64_t out, int64_t in, double gain = 1.0) {
  return randn(rng, out * in, gain / std::sqrt(static_cast<double>(in)));
}

void add_attn(Checkpoint& ck, Rng& rng, const Q35& c, const std::string& p) {
  ck.add(p + "self_attn.q_proj.weight", {2 * c.n_head * c.hd, c.d}, mat(rng, 2 * c.n_head * c.hd, c.d));
  ck.add(p + "self_attn.k_proj.weight", {c.n_kv * c.hd, c.d}, mat(rng, c.n_kv * c.hd, c.d));
  ck.add(p + "self_attn.v_proj.weight", {c.n_kv * c.hd, c.d}, mat(rng, c.n_kv * c.hd, c.d));
  ck.add(p + "self_attn.o_proj.weight", {c.d, c.n_head * c.hd}, mat(rng, c.d, c.n_head * c.hd, 0.7));
  ck.add(p + "self_attn.q_norm.weight", {c.hd}, randn(rng, c.hd, 0.1));
  ck.add(p + "self_attn.k_norm.weight", {c.hd}, randn(rng, c.hd, 0.1));
}

void add_ffn(Checkpoint& ck, Rng& rng, const Q35& c, const std::string& p) {
  if (!c.moe) {
    ck.add(p + "mlp.gate_proj.weight", {c.ffn, c.d}, mat(rng, c.ffn, c.d));
    ck.add(p + "mlp.up_proj.weight", {c.ffn, c.d}, mat(rng, c.ffn, c.d));
    ck.add(p + "mlp.down_proj.weight", {c.d, c.ffn}, mat(rng, c.d, c.ffn, 0.7));
    return;
  }
  const int64_t E = c.experts, I = c.expert_ffn, S = c.shared_ffn;
  // A spread-out router so routing is decisive (no near-ties between top-k and the rest).
  ck.add(p + "mlp.gate.weight", {E, c.d}, mat(rng, E, c.d, 2.0));
  ck.add(p + "mlp.experts.gate_up_proj", {E, 2 * I, c.d}, randn(rng, E * 2 * I * c.d, 1.0 / std::sqrt(double(c.d))));
  ck.add(p + "mlp.experts.down_proj", {E, c.d, I}, randn(rng, E * c.d * I, 0.7 / std::sqrt(double(I))));
  ck.add(p + "mlp.shared_expert.gate_proj.weight", {S, c.d}, mat(rng, S, c.d));
  ck.add(p + "mlp.shared_expert.up_proj.weight", {S, c.d}, mat(rng, S, c.d));
  ck.add(p + "mlp.shared_expert.down_proj.weight", {c.d, S}, mat(rng, c.d, S, 0.7));
  ck.add(p + "mlp.shared_expert_gate.weight", {1, c.d}, mat(rng, 1, c.d));
}

void add_gdn(Checkpoint& ck, Rng& rng, const Q35& c, const std::string& p) {
  const int64_t key_dim = c.hk * c.dk, value_dim = c.hv * c.dv, conv_dim = 2 * key_dim + value_dim;
  ck.add(p + "linear_attn.in_proj_qkv.weight", {conv_dim, c.d}, mat(rng, conv_dim, c.d));
  ck.add(p + "linear_attn.in_proj_z.weight", {value_dim, c.d}, mat(rng, value_dim, c.d));
  ck.add(p + "linear_attn.in_proj_b.weight", {c.hv, c.d}, mat(rng, c.hv, c.d));
  ck.add(p + "linear_attn.in_proj_a.weight", {c.hv, c.d}, mat(rng, c.hv, c.d, 0.5));
  ck.add(p + "linear_attn.conv1d.weight", {conv_dim, 1, c.conv_k}, randn(rng, conv_dim * c.conv_k, 0.5));
  std::vector<float> a_log = randu(rng, c.hv, std::log(0.1), std::log(3.0));
  ck.add(p + "linear_attn.A_log", {c.hv}, a_log, DType::F32);
  std::vector<float> dt = randu(rng, c.hv, 0.01, 0.3);
  for (auto& x : dt) x = static_cast<float>(std::log(std::expm1(static_cast<double>(x))));
  ck.add(p + "linear_attn.dt_bias", {c.hv}, dt);
  ck.add(p + "linear_attn.norm.weight", {c.dv}, randn(rng, c.dv, 0.1, 1.0), DType::F32);
  ck.add(p + "linear_attn.out_proj.weight", {c.d, value_dim}, mat(rng, c.d, value_dim, 0.7));
}

// The Qwen3-VL-style vision tower (spec A.7) under model.visual.: Conv3d patch embedding (patch P,
// temporal patch 2), learned position embeddings on a square grid, `depth` pre-norm ViT blocks
// (LayerNorm, fused qkv with bias, GELU-tanh MLP), and the merger (LayerNorm per patch, 2×2 patches
// concatenated, fc1 → GELU → fc2 into the text width). No deepstack layers (Qwen 3.5).
struct Vision {
  int64_t hidden, depth, heads, ffn, n_pos, patch, temporal, merge, out;
};

void add_vision(Checkpoint& ck, Rng& rng, const Vision& v, double out_gain) {
  const std::string p = "model.visual.";
  const int64_t h = v.hidden, kin = 3 * v.temporal * v.patch * v.patch, m = h * v.merge * v.merge;
  ck.add(p + "patch_embed.proj.weight", {h, 3, v.temporal, v.patch, v.patch}, randn(rng, h * kin, 1.0 / std::sqrt(double(kin))));
  ck.add(p + "patch_embed.proj.bias", {h}, randn(rng, h, 0.1));
  ck.add(p + "pos_embed.weight", {v.n_pos, h}, randn(rng, v.n_pos * h, 0.5));
  for (int64_t i = 0; i < v.depth; ++i) {
    const std::string b = p + "blocks." + std::to_string(i) + ".";
    ck.add(b + "norm1.weight", {h}, randn(rng, h, 0.1, 1.0));
    ck.add(b + "norm1.bias", {h}, randn(rng, h, 0.1));
    ck.add(b + "attn.qkv.weight", {3 * h, h}, mat(rng, 3 * h, h));
    ck.add(b + "attn.qkv.bias", {3 * h}, randn(rng, 3 * h, 0.1));
    ck.add(b + "attn.proj.weight", {h, h}, mat(rng, h, h, 0.7));
    ck.add(b + "attn.proj.bias", {h}, randn(rng, h, 0.1));
    ck.add(b + "norm2.weight", {h}, randn(rng, h, 0.1, 1.0));
    ck.add(b + "norm2.bias", {h}, randn(rng, h, 0.1));
    ck.add(b + "mlp.linear_fc1.weight", {v.ffn, h}, mat(rng, v.ffn, h));
    ck.add(b + "mlp.linear_fc1.bias", {v.ffn}, randn(rng, v.ffn, 0.1));
    ck.add(b + "mlp.linear_fc2.weight", {h, v.ffn}, mat(rng, h, v.ffn, 0.7));
    ck.add(b + "mlp.linear_fc2.bias", {h}, randn(rng, h, 0.1));
  }
  ck.add(p + "merger.norm.weight", {h}, randn(rng, h, 0.1, 1.0));
  ck.add(p + "merger.norm.bias", {h}, randn(rng, h, 0.1));
  ck.add(p + "merger.linear_fc1.weight", {m, m}, mat(rng, m, m));
  ck.add(p + "merger.linear_fc1.bias", {m}, randn(rng, m, 0.1));
  ck.add(p + "merger.linear_fc2.weight", {v.out, m}, mat(rng, v.out, m, out_gain));
  ck.add(p + "merger.linear_fc2.bias", {v.out}, randn(rng, v.out, 0.1 * out_gain));
}

bool is_full_attention(const Q35& c, int64_t i) { return (i + 1) % c.interval == 0; }

int gen_qwen35(GenArgs& a) {
  Q35 c{};
  c.d = a.get_int("--hidden", 128);
  c.layers = a.get_int("--layers", 4);
  c.interval = a.get_int("--interval", 4);
  c.n_head = a.get_int("--heads", 4);
  c.n_kv = a.get_int("--kv-heads", 2);
  c.hd = a.get_int("--head-dim", 64);
  c.hk = a.get_int("--hk", 2);
  c.hv = a.get_int("--hv", 4);
  c.dk = a.get_int("--dk", 32);
  c.dv = a.get_int("--dv", 32);
  c.conv_k = a.get_int("--conv-kernel", 4);
  c.ffn = a.get_int("--ffn", 256);
  c.vocab = a.get_int("--vocab", 151936);
  c.moe = a.flag("--moe");
  c.experts = a.get_int("--experts", 8);
  c.top_k = a.get_int("--top-k", 2);
  c.expert_ffn = a.get_int("--expert-ffn", 64);
  c.shared_ffn = a.get_int("--shared-ffn", 64);
  const bool tied = a.flag("--tied"), untied = a.flag("--untied");
  if (tied && untied) throw_error(ErrorCode::kInvalidArgument, "--tied and --untied are exclusive");
  c.tied = tied || (!untied && !c.moe);  // real checkpoints: small dense tied, MoE untied
  c.mtp = a.flag("--mtp");
  c.text_only = a.flag("--text-only");
  c.eps = a.get_float("--eps", 1e-6);
  c.theta = a.get_float("--rope-theta", 1e7);
  c.partial = a.get_float("--partial-rotary", 0.25);
  const double embed_gain = a.get_float("--embed-gain", 2.5);
  const bool vision = a.flag("--vision");
  Vision v{};
  v.hidden = a.get_int("--vision-hidden", 64);
  v.depth = a.get_int("--vision-depth", 2);
  v.heads = a.get_int("--vision-heads", 4);
  v.ffn = a.get_int("--vision-ffn", 128);
  v.n_pos = a.get_int("--vision-pos", 64);  // num_position_embeddings: a square (8×8 grid)
  v.patch = 16;
  v.temporal = 2;
  v.merge = 2;
  a.finish();

  auto bad = [](const std::string& m) { throw_error(ErrorCode::kInvalidArgument, "qwen35: " + m); };
  if (c.d < 1 || c.layers < 1 || c.interval < 1 || c.n_head < 1 || c.n_kv < 1 || c.hd < 2 || c.hk < 1 ||
      c.hv < 1 || c.dk < 1 || c.dv < 1 || c.conv_k < 1 || c.ffn < 1 || c.vocab < 1)
    bad("sizes must be positive");
  if (c.n_head % c.n_kv) bad("--heads must be a multiple of --kv-heads");
  if (c.hv % c.hk) bad("--hv must be a multiple of --hk");
  if (vision) {
    if (c.text_only) bad("--vision needs the multimodal layout (not --text-only)");
    const auto side = static_cast<int64_t>(std::llround(std::sqrt(double(v.n_pos))));
    if (v.hidden < 1 || v.depth < 1 || v.heads < 1 || v.ffn < 1 || side < 2 || side * side != v.n_pos)
      bad("vision sizes must be positive and --vision-pos a square of at least 4");
    if (v.hidden % v.heads || (v.hidden / v.heads) % 4) bad("--vision-hidden / --vision-heads must be a multiple of 4");
  }
  if (c.moe && (c.top_k < 1 || c.top_k > c.experts)) bad("--top-k must be in 1..--experts");
  const int64_t rot = static_cast<int64_t>(std::llround(c.hd * c.partial));
  if (rot < 2 || rot % 2 || rot > c.hd) bad("head_dim * partial_rotary_factor must be even and <= head_dim");
  const int64_t slots = rot / 2;  // frequency slots, split (t, h, w) so interleaving covers all
  const std::vector<int64_t> mrope = {(slots + 2) / 3, (slots + 1) / 3, slots / 3};

  Rng rng(a.seed);
  Checkpoint ck(a.dtype);
  const std::string lm = c.text_only ? "model." : "model.language_model.";
  ck.add_randn(lm + "embed_tokens.weight", {c.vocab, c.d}, rng, embed_gain / std::sqrt(double(c.d)));
  for (int64_t i = 0; i < c.layers; ++i) {
    const std::string p = lm + "layers." + std::to_string(i) + ".";
    ck.add(p + "input_layernorm.weight", {c.d}, randn(rng, c.d, 0.1));
    if (is_full_attention(c, i)) add_attn(ck, rng, c, p);
    else add_gdn(ck, rng, c, p);
    ck.add(p + "post_attention_layernorm.weight", {c.d}, randn(rng, c.d, 0.1));
    add_ffn(ck, rng, c, p);
  }
  ck.add(lm + "norm.weight", {c.d}, randn(rng, c.d, 0.1));
  if (!c.tied) ck.add("lm_head.weight", {c.vocab, c.d}, randn(rng, c.vocab * c.d, embed_gain / std::sqrt(double(c.d))));
  v.out = c.d;
  if (vision) add_vision(ck, rng, v, embed_gain / std::sqrt(double(c.d)));
  if (c.mtp) {
    ck.add("mtp.fc.weight", {c.d, 2 * c.d}, mat(rng, c.d, 2 * c.d));
    ck.add("mtp.pre_fc_norm_embedding.weight", {c.d}, randn(rng, c.d, 0.1));
    ck.add("mtp.pre_fc_norm_hidden.weight", {c.d}, randn(rng, c.d, 0.1));
    ck.add("mtp.norm.weight", {c.d}, randn(rng, c.d, 0.1));
    const std::string p = "mtp.layers.0.";
    ck.add(p + "input_layernorm.weight", {c.d}, randn(rng, c.d, 0.1));
    add_attn(ck, rng, c, p);
    ck.add(p + "post_attention_layernorm.weight", {c.d}, randn(rng, c.d, 0.1));
    add_ffn(ck, rng, c, p);
  }

  // config.json
  using nlohmann::json;
  json layer_types = json::array();
  for (int64_t i = 0; i < c.layers; ++i) layer_types.push_back(is_full_attention(c, i) ? "full_attention" : "linear_attention");
  const char* dtype_str = a.dtype == DType::BF16 ? "bfloat16" : a.dtype == DType::F16 ? "float16" : "float32";
  json tc = {
      {"attention_bias", false},
      {"attention_dropout", 0.0},
      {"attn_output_gate", true},
      {"dtype", dtype_str},
      {"eos_token_id", 151643},
      {"full_attention_interval", c.interval},
      {"head_dim", c.hd},
      {"hidden_act", "silu"},
      {"hidden_size", c.d},
      {"initializer_range", 0.02},
      {"layer_types", layer_types},
      {"linear_conv_kernel_dim", c.conv_k},
      {"linear_key_head_dim", c.dk},
      {"linear_num_key_heads", c.hk},
      {"linear_num_value_heads", c.hv},
      {"linear_value_head_dim", c.dv},
      {"mamba_ssm_dtype", "float32"},
      {"max_position_embeddings", 262144},
      {"model_type", c.moe ? "qwen3_5_moe_text" : "qwen3_5_text"},
      {"mtp_num_hidden_layers", c.mtp ? 1 : 0},
      {"mtp_use_dedicated_embeddings", false},
      {"num_attention_heads", c.n_head},
      {"num_hidden_layers", c.layers},
      {"num_key_value_heads", c.n_kv},
      {"rms_norm_eps", c.eps},
      {"rope_parameters",
       {{"mrope_interleaved", true},
        {"mrope_section", mrope},
        {"partial_rotary_factor", c.partial},
        {"rope_theta", c.theta},
        {"rope_type", "default"}}},
      {"tie_word_embeddings", c.tied},
      {"use_cache", true},
      {"vocab_size", c.vocab},
  };
  if (c.moe) {
    tc["num_experts"] = c.experts;
    tc["num_experts_per_tok"] = c.top_k;
    tc["moe_intermediate_size"] = c.expert_ffn;
    tc["shared_expert_intermediate_size"] = c.shared_ffn;
    tc["router_aux_loss_coef"] = 0.001;
    tc["output_router_logits"] = false;
  } else {
    tc["intermediate_size"] = c.ffn;
  }
  json config;
  if (c.text_only) {
    config = tc;
    config["architectures"] = json::array({c.moe ? "Qwen3_5MoeForCausalLM" : "Qwen3_5ForCausalLM"});
  } else {
    config = {
        {"architectures", json::array({c.moe ? "Qwen3_5MoeForConditionalGeneration" : "Qwen3_5ForConditionalGeneration"})},
        {"image_token_id", 151655},
        {"model_type", c.moe ? "qwen3_5_moe" : "qwen3_5"},
        {"text_config", tc},
        {"tie_word_embeddings", c.tied},
        {"transformers_version", "4.57.0.dev0"},
        {"video_token_id", 151656},
        {"vision_end_token_id", 151653},
        {"vision_start_token_id", 151652},
    };
    if (vision) {
      config["vision_config"] = {
          {"deepstack_visual_indexes", json::array()},
          {"depth", v.depth},
          {"hidden_act", "gelu_pytorch_tanh"},
          {"hidden_size", v.hidden},
          {"in_channels", 3},
          {"initializer_range", 0.02},
          {"intermediate_size", v.ffn},
          {"model_type", "qwen3_5"},
          {"num_heads", v.heads},
          {"num_position_embeddings", v.n_pos},
          {"out_hidden_size", v.out},
          {"patch_size", v.patch},
          {"spatial_merge_size", v.merge},
          {"temporal_patch_size", v.temporal},
      };
    }
  }
  ck.write(a);
  if (vision) {
    // The Qwen2-VL image processor's settings (the real Qwen 3.5 values; pixel limits as in its
    // preprocessor_config.json: 64 .. 16384 merged tokens of 32×32 pixels).
    json pp = {
        {"do_convert_rgb", true},         {"do_normalize", true},
        {"do_rescale", true},             {"do_resize", true},
        {"image_mean", {0.5, 0.5, 0.5}},  {"image_std", {0.5, 0.5, 0.5}},
        {"image_processor_type", "Qwen2VLImageProcessorFast"},
        {"merge_size", v.merge},          {"patch_size", v.patch},
        {"resample", 3},                  {"rescale_factor", 1.0 / 255.0},
        {"size", {{"longest_edge", 16777216}, {"shortest_edge", 65536}}},
        {"temporal_patch_size", v.temporal},
    };
    write_json(a.out_dir, "preprocessor_config.json", pp);
  }
  write_json(a.out_dir, "config.json", config);
  json gen = {{"bos_token_id", 151643}, {"do_sample", true},        {"eos_token_id", json::array({151645, 151643})},
              {"pad_token_id", 151643}, {"temperature", 0.6},        {"top_k", 20},
              {"top_p", 0.95},          {"transformers_version", "4.57.0.dev0"}};
  write_json(a.out_dir, "generation_config.json", gen);
  std::fprintf(stderr, "oxi-gen qwen35: wrote %s (%zu tensors, %s, %s%s)\n", a.out_dir.c_str(), ck.size(),
               c.moe ? "moe" : "dense", c.tied ? "tied" : "untied", c.mtp ? ", mtp" : "");
  return 0;
}

}  // namespace

OXI_GEN_FAMILY(qwen35,
               "[--hidden 128] [--layers 4] [--interval 4] [--heads 4] [--kv-heads 2] [--head-dim 64] "
               "[--hk 2] [--hv 4] [--dk 32] [--dv 32] [--ffn 256] [--moe --experts 8 --top-k 2 "
               "--expert-ffn 64 --shared-ffn 64] [--tied|--untied] [--mtp] [--text-only] [--vocab 151936]",
               gen_qwen35);

}  // namespace oxi::gen
