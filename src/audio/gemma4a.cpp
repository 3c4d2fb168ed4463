// The Gemma 4 audio tower (see gemma4a.h).
#include "audio/gemma4a.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include <nlohmann/json.hpp>

#include "core/byte_source.h"
#include "core/error.h"
#include "format/gguf.h"
#include "kernels/fused.h"
#include "kernels/matmul.h"
#include "kernels/thread_pool.h"
#include "models/common/weights.h"
#include "nn/ops.h"
#include "vision/vit_ops.h"

namespace oxi::audio {

using vision::ClipLinear;

struct Gemma4ATower::Weights {
  std::vector<ByteSourcePtr> sources;  // keep the mapped file(s) alive
  wt::Arena arena;
  MatrixView conv0, conv1;             // [c0, 9], [c1, c0·9]: columns (in channel, time tap, freq tap)
  std::vector<float> norm0, norm1;     // channel LayerNorm weights
  ClipLinear in_proj;                  // [h, (mels/4)·c1]
  struct Layer {
    std::vector<float> ffn_norm[2], ffn_post[2], attn_pre, attn_post, per_dim, conv_pre, conv_norm, out_norm;
    ClipLinear up[2], down[2], q, k, v, o, pw1, pw2;
    MatrixView k_rel;                  // [h, h]
    std::vector<float> dw;             // [h, K]
  };
  std::vector<Layer> layers;
  ClipLinear out_proj;                 // [proj, h]
  std::vector<float> out_bias;         // [proj] (may be empty)
  std::vector<float> soft_norm;        // [proj] (may be empty: unweighted)
  ClipLinear mm;                       // [out, proj]
};

namespace {

std::vector<float> vec(const TensorIndex& idx, const std::string& name, int64_t n) {
  return wt::to_f32(wt::require(idx, name, {n}));
}

// GGUF: `base.weight` + `base.{input,output}_{min,max}`; HF: `base.linear.weight` + `base.*`.
ClipLinear linear(const TensorIndex& idx, const std::string& base, bool gguf, int64_t rows, int64_t cols) {
  ClipLinear l;
  l.w = wt::matrix(wt::require(idx, base + (gguf ? ".weight" : ".linear.weight"), {rows, cols}), rows, cols);
  l.in_lo = vision::scalar_or(idx, base + ".input_min", -FLT_MAX);
  l.in_hi = vision::scalar_or(idx, base + ".input_max", FLT_MAX);
  l.out_lo = vision::scalar_or(idx, base + ".output_min", -FLT_MAX);
  l.out_hi = vision::scalar_or(idx, base + ".output_max", FLT_MAX);
  return l;
}

void load_weights(Gemma4ATower::Weights& w, const Gemma4AConfig& c, const TensorIndex& idx, bool gguf) {
  const int64_t h = c.hidden, hd = h / c.heads, K = c.kernel;
  const std::string sub = "model.audio_tower.subsample_conv_projection.";
  w.conv0 = w.arena.own_matrix(wt::to_f32(wt::require(idx, gguf ? "a.conv1d.0.weight" : sub + "layer0.conv.weight", {c.c0, 1, 3, 3})), c.c0, 9);
  w.conv1 = w.arena.own_matrix(wt::to_f32(wt::require(idx, gguf ? "a.conv1d.1.weight" : sub + "layer1.conv.weight", {c.c1, c.c0, 3, 3})),
                               c.c1, c.c0 * 9);
  w.norm0 = vec(idx, gguf ? "a.conv1d.0.norm.weight" : sub + "layer0.norm.weight", c.c0);
  w.norm1 = vec(idx, gguf ? "a.conv1d.1.norm.weight" : sub + "layer1.norm.weight", c.c1);
  w.in_proj.w = wt::matrix(wt::require(idx, gguf ? "a.input_projection.weight" : sub + "input_proj_linear.weight", {h, (c.mels / 4) * c.c1}),
                           h, (c.mels / 4) * c.c1);
  w.layers.resize(static_cast<size_t>(c.depth));
  for (int64_t i = 0; i < c.depth; ++i) {
    auto& L = w.layers[static_cast<size_t>(i)];
    const std::string g = "a.blk." + std::to_string(i) + ".", f = "model.audio_tower.layers." + std::to_string(i) + ".";
    for (int k = 0; k < 2; ++k) {
      const std::string gs = k ? "_1" : "", ff = f + (k ? "feed_forward2." : "feed_forward1.");
      L.ffn_norm[k] = vec(idx, gguf ? g + "ffn_norm" + gs + ".weight" : ff + "pre_layer_norm.weight", h);
      L.up[k] = linear(idx, gguf ? g + "ffn_up" + gs : ff + "ffw_layer_1", gguf, 4 * h, h);
      L.down[k] = linear(idx, gguf ? g + "ffn_down" + gs : ff + "ffw_layer_2", gguf, h, 4 * h);
      L.ffn_post[k] = vec(idx, gguf ? g + "ffn_post_norm" + gs + ".weight" : ff + "post_layer_norm.weight", h);
    }
    L.attn_pre = vec(idx, gguf ? g + "attn_pre_norm.weight" : f + "norm_pre_attn.weight", h);
    L.q = linear(idx, gguf ? g + "attn_q" : f + "self_attn.q_proj", gguf, h, h);
    L.k = linear(idx, gguf ? g + "attn_k" : f + "self_attn.k_proj", gguf, h, h);
    L.v = linear(idx, gguf ? g + "attn_v" : f + "self_attn.v_proj", gguf, h, h);
    L.o = linear(idx, gguf ? g + "attn_out" : f + "self_attn.post", gguf, h, h);
    L.k_rel = wt::matrix(wt::require(idx, gguf ? g + "attn_k_rel.weight" : f + "self_attn.relative_k_proj.weight", {h, h}), h, h);
    if (gguf) {
      L.per_dim = vec(idx, g + "per_dim_scale.weight", hd);  // stored after softplus
    } else {
      L.per_dim = vec(idx, f + "self_attn.per_dim_scale", hd);
      for (float& x : L.per_dim) x = static_cast<float>(std::log1p(std::exp(static_cast<double>(x))));  // softplus
    }
    L.attn_post = vec(idx, gguf ? g + "attn_post_norm.weight" : f + "norm_post_attn.weight", h);
    L.conv_pre = vec(idx, gguf ? g + "conv_norm.weight" : f + "lconv1d.pre_layer_norm.weight", h);
    L.pw1 = linear(idx, gguf ? g + "conv_pw1" : f + "lconv1d.linear_start", gguf, 2 * h, h);
    L.dw = gguf ? wt::to_f32(wt::require(idx, g + "conv_dw.weight", {h, K}))
                : wt::to_f32(wt::require(idx, f + "lconv1d.depthwise_conv1d.weight", {h, 1, K}));
    L.conv_norm = vec(idx, gguf ? g + "norm_conv.weight" : f + "lconv1d.conv_norm.weight", h);
    L.pw2 = linear(idx, gguf ? g + "conv_pw2" : f + "lconv1d.linear_end", gguf, h, h);
    L.out_norm = vec(idx, gguf ? g + "ln2.weight" : f + "norm_out.weight", h);
  }
  const std::string op = gguf ? "a.pre_encode.out" : "model.audio_tower.output_proj";
  w.out_proj.w = wt::matrix(wt::require(idx, op + ".weight", {c.proj, h}), c.proj, h);
  if (idx.find(op + ".bias")) w.out_bias = vec(idx, op + ".bias", c.proj);
  const std::string sn = gguf ? "mm.a.soft_emb_norm.weight" : "model.embed_audio.soft_embedding_norm.weight";
  if (idx.find(sn)) w.soft_norm = vec(idx, sn, c.proj);
  w.mm.w = wt::matrix(wt::require(idx, gguf ? "mm.a.input_projection.weight" : "model.embed_audio.embedding_projection.weight",
                                  {c.out, c.proj}),
                      c.out, c.proj);
}

void check_config(const Gemma4AConfig& c, const std::string& what) {
  auto bad = [&](const std::string& m) { throw_error(ErrorCode::kFormat, what + ": audio tower: " + m); };
  if (c.hidden < 2 || c.depth < 1 || c.heads < 1 || c.c0 < 1 || c.c1 < 1 || c.proj < 1 || c.out < 1) bad("sizes must be positive");
  if (c.depth > 1024 || c.hidden > 65536 || c.c0 > 4096 || c.c1 > 4096 || c.proj > 262144 || c.out > 262144) bad("sizes out of range");
  if (c.hidden % c.heads) bad("hidden size must be a multiple of the head count");
  if (c.mels < 4 || c.mels > 1024 || c.mels % 4) bad("mel bins must be a multiple of 4 (128 for Gemma 4)");
  if (!(c.eps > 0 && c.eps < 1)) bad("norm epsilon out of range");
}

// 3×3 stride-2 convolution with padding 1 over x [T, F, Ci] (channel fastest) → [T', F', Co]
// (T' = ⌊(T−1)/2⌋ + 1), then a LayerNorm over the channels with weight `norm`, ReLU. As one
// matmul over im2col rows with columns (ci, time tap, freq tap) = the kernel's layout.
std::vector<float> conv_block(const std::vector<float>& x, int64_t T, int64_t F, int64_t Ci, const MatrixView& w,
                              const std::vector<float>& norm, float eps, int64_t* To, int64_t* Fo) {
  const int64_t T2 = (T - 1) / 2 + 1, F2 = (F - 1) / 2 + 1, Co = w.rows, kin = Ci * 9;
  std::vector<float> cols(static_cast<size_t>(T2 * F2 * kin));
  parallel_for_chunked(T2, 8, [&](int64_t t0, int64_t t1) {
    for (int64_t t = t0; t < t1; ++t)
      for (int64_t f = 0; f < F2; ++f) {
        float* dst = cols.data() + (t * F2 + f) * kin;
        for (int64_t ci = 0; ci < Ci; ++ci)
          for (int64_t kt = 0; kt < 3; ++kt)
            for (int64_t kf = 0; kf < 3; ++kf) {
              const int64_t ti = 2 * t - 1 + kt, fi = 2 * f - 1 + kf;
              dst[ci * 9 + kt * 3 + kf] = ti >= 0 && ti < T && fi >= 0 && fi < F ? x[static_cast<size_t>((ti * F + fi) * Ci + ci)] : 0.0f;
            }
      }
  });
  std::vector<float> y(static_cast<size_t>(T2 * F2 * Co));
  matmul(w, cols.data(), T2 * F2, y.data());
  parallel_for_chunked(T2 * F2, 256, [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      float* row = y.data() + r * Co;
      ops::layer_norm(row, norm.data(), nullptr, row, Co, eps);
      for (int64_t j = 0; j < Co; ++j) row[j] = std::max(row[j], 0.0f);
    }
  });
  *To = T2;
  *Fo = F2;
  return y;
}

// silu in place over n values, with the kernels' vector silu_mul (multiplier 1).
void silu_rows(float* x, int64_t n, int64_t k) {
  parallel_for_chunked(n, 16, [&](int64_t r0, int64_t r1) {
    std::vector<float> one(static_cast<size_t>(k), 1.0f);
    for (int64_t r = r0; r < r1; ++r) silu_mul(x + r * k, one.data(), x + r * k, k);
  });
}

}  // namespace

int64_t AudioEmbedding::n_tokens() const {
  int64_t n = 0;
  for (int64_t t : chunk_tokens) n += t;
  return n;
}

Gemma4ATower::~Gemma4ATower() = default;

std::unique_ptr<Gemma4ATower> Gemma4ATower::from_mmproj(const std::string& path) {
  GgufFile f = vision::read_mmproj(path, "gemma4a", "a Gemma 4 audio tower", "audio");
  const GgufMetadata& md = f.metadata;
  if (!md.get_bool("clip.has_audio_encoder", false))
    throw_error(ErrorCode::kInvalidArgument, path + ": the mmproj has no audio encoder (clip.has_audio_encoder)");
  std::unique_ptr<Gemma4ATower> t(new Gemma4ATower());
  Gemma4AConfig& c = t->c_;
  c.hidden = md.get_int("clip.audio.embedding_length");
  c.depth = md.get_int("clip.audio.block_count");
  c.heads = md.get_int("clip.audio.attention.head_count");
  c.mels = md.get_int("clip.audio.num_mel_bins", 128);
  c.out = md.get_int("clip.audio.projection_dim");
  // llama.cpp uses 1e-6 whatever the file says (its converter wrote a wrong value once).
  c.eps = 1e-6f;
  const TensorInfo* c0 = f.tensors.find("a.conv1d.0.weight");
  const TensorInfo* c1 = f.tensors.find("a.conv1d.1.weight");
  const TensorInfo* op = f.tensors.find("a.pre_encode.out.weight");
  const TensorInfo* dw = f.tensors.find("a.blk.0.conv_dw.weight");
  if (!c0 || !c1 || !op || !dw || c0->shape.size() != 4 || c1->shape.size() != 4 || op->shape.size() != 2 || dw->shape.size() != 2)
    throw_error(ErrorCode::kFormat, path + ": missing audio tensors (a.conv1d.{0,1}.weight, a.pre_encode.out.weight, a.blk.0.conv_dw.weight)");
  c.c0 = c0->shape[0];
  c.c1 = c1->shape[0];
  c.proj = op->shape[0];
  c.kernel = dw->shape[1];
  check_config(c, path);
  t->w_ = std::make_unique<Weights>();
  t->w_->sources = f.sources;
  load_weights(*t->w_, c, f.tensors, true);
  auto& m = t->w_->mm;  // llama.cpp's loader looks for bounds on every weight
  m.in_lo = vision::scalar_or(f.tensors, "mm.a.input_projection.input_min", -FLT_MAX);
  m.in_hi = vision::scalar_or(f.tensors, "mm.a.input_projection.input_max", FLT_MAX);
  m.out_lo = vision::scalar_or(f.tensors, "mm.a.input_projection.output_min", -FLT_MAX);
  m.out_hi = vision::scalar_or(f.tensors, "mm.a.input_projection.output_max", FLT_MAX);
  return t;
}

std::unique_ptr<Gemma4ATower> Gemma4ATower::from_hf(const HfCheckpoint& hf) {
  const nlohmann::json& ac = hf.config.contains("audio_config") ? hf.config["audio_config"] : nlohmann::json();
  if (!ac.is_object() || !hf.tensors.contains("model.audio_tower.output_proj.weight"))
    throw_error(ErrorCode::kInvalidArgument, hf.dir + ": the checkpoint has no audio tower");
  std::unique_ptr<Gemma4ATower> t(new Gemma4ATower());
  Gemma4AConfig& c = t->c_;
  auto geti = [&](const char* k) {
    auto it = ac.find(k);
    if (it == ac.end() || !it->is_number_integer())
      throw_error(ErrorCode::kFormat, hf.dir + "/config.json: audio_config." + k + " missing or not an integer");
    return it->get<int64_t>();
  };
  c.hidden = geti("hidden_size");
  c.depth = geti("num_hidden_layers");
  c.heads = geti("num_attention_heads");
  c.kernel = geti("conv_kernel_size");
  c.proj = geti("output_proj_dims");
  c.mels = ac.value("input_feat_size", int64_t(128));
  c.out = hf.text_config.value("hidden_size", int64_t(0));
  c.eps = static_cast<float>(ac.value("rms_norm_eps", 1e-6));
  try {
    const auto ch = ac.at("subsampling_conv_channels").get<std::vector<int64_t>>();
    if (ch.size() != 2) throw_error(ErrorCode::kFormat, hf.dir + "/config.json: audio_config.subsampling_conv_channels needs 2 sizes");
    c.c0 = ch[0];
    c.c1 = ch[1];
  } catch (const nlohmann::json::exception& e) {
    throw_error(ErrorCode::kFormat, hf.dir + "/config.json: audio_config.subsampling_conv_channels: " + e.what());
  }
  if (ac.value("attention_chunk_size", 12) != 12 || ac.value("attention_context_left", 13) != 13 ||
      ac.value("attention_context_right", 0) != 0 || ac.value("attention_logit_cap", 50.0) != 50.0 ||
      ac.value("residual_weight", 0.5) != 0.5)
    throw_error(ErrorCode::kUnsupported, hf.dir + ": audio attention chunking other than Gemma 4's (12, 13, 0, cap 50, residual 0.5)");
  check_config(c, hf.dir);
  t->w_ = std::make_unique<Weights>();
  t->w_->sources = hf.sources;
  load_weights(*t->w_, c, hf.tensors, false);
  return t;
}

int64_t Gemma4ATower::tokens_for_frames(int64_t frames) {
  int64_t n = frames;
  for (int i = 0; i < 2; ++i) n = (n - 1) / 2 + 1;
  return n;
}

std::vector<int64_t> Gemma4ATower::chunk_rows(int64_t n_samples) {
  const int64_t chunk = 30 * 16000;
  std::vector<int64_t> out;
  for (int64_t off = 0; off < n_samples; off += chunk) {
    const int64_t n = std::min(chunk, n_samples - off);
    // gemma4_log_mel's frame count: ⌊(n + 160 − 321) / 160⌋ + 1 (mel.h)
    if (n < 161)
      throw_error(ErrorCode::kInvalidArgument, "audio: " + std::string(off == 0 ? "the clip" : "its last 30-second chunk") +
                                                   " is too short (" + std::to_string(n) + " samples at 16 kHz; at least 161 needed)");
    out.push_back(tokens_for_frames((n + 160 - 321) / 160 + 1));
  }
  if (out.empty()) throw_error(ErrorCode::kInvalidArgument, "audio: no samples");
  return out;
}

AudioEmbedding Gemma4ATower::encode(const std::vector<float>& samples) const {
  if (samples.empty()) throw_error(ErrorCode::kInvalidArgument, "audio: no samples");
  const int64_t chunk = 30 * 16000;
  AudioEmbedding e;
  for (int64_t off = 0; off < static_cast<int64_t>(samples.size()); off += chunk) {
    const int64_t n = std::min<int64_t>(chunk, static_cast<int64_t>(samples.size()) - off);
    const LogMel mel = gemma4_log_mel(samples.data() + off, n, c_.mels);
    std::vector<float> rows = forward(mel);
    e.chunk_tokens.push_back(static_cast<int64_t>(rows.size()) / c_.out);
    e.rows.insert(e.rows.end(), rows.begin(), rows.end());
  }
  return e;
}

std::vector<float> Gemma4ATower::forward(const LogMel& mel) const {
  if (mel.mels != c_.mels || mel.frames < 1) throw_error(ErrorCode::kInvalidArgument, "audio: log-mel shape does not fit the tower");
  const int64_t h = c_.hidden, H = c_.heads, hd = h / H, K = c_.kernel;
  const float eps = c_.eps;
  std::vector<float> scratch;
  // Subsampling: [T, mels, 1] → [T1, F1, c0] → [N, F2, c1] → [N, F2·c1] → input projection.
  int64_t T1, F1, N, F2;
  const std::vector<float> s0 = conv_block(mel.data, mel.frames, mel.mels, 1, w_->conv0, w_->norm0, eps, &T1, &F1);
  const std::vector<float> s1 = conv_block(s0, T1, F1, c_.c0, w_->conv1, w_->norm1, eps, &N, &F2);
  std::vector<float> X(static_cast<size_t>(N * h));
  vision::clip_linear(w_->in_proj, s1.data(), N, F2 * c_.c1, X.data(), scratch);

  // Relative positions, indexed by the distance d = t − s = 0 … 12 (llama.cpp lists them from 12
  // down to 0): [sin(d·inv_i), cos(d·inv_i)], inv_i = e^(−i·ln(10000)/(h/2 − 1)), projected by
  // attn_k_rel per layer.
  const int64_t kPast = 12;  // keys: the query's frame and the 11 before it
  std::vector<float> pos(static_cast<size_t>((kPast + 1) * h));
  const int64_t nts = h / 2;
  const double inc = std::log(10000.0) / static_cast<double>(std::max<int64_t>(nts - 1, 1));
  for (int64_t d = 0; d <= kPast; ++d)
    for (int64_t i = 0; i < nts; ++i) {
      const float inv = std::exp(-static_cast<float>(i) * static_cast<float>(inc));
      const float s = static_cast<float>(d) * inv;
      pos[static_cast<size_t>(d * h + i)] = std::sin(s);
      pos[static_cast<size_t>(d * h + i + nts)] = std::cos(s);
    }
  std::vector<float> Prel(static_cast<size_t>((kPast + 1) * h));
  const float q_scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(hd)) / std::log(2.0));
  const float k_scale = static_cast<float>(std::log(1.0 + std::exp(1.0)) / std::log(2.0));

  std::vector<float> U(static_cast<size_t>(N * h)), Q(U.size()), Kx(U.size()), V(U.size()), A(U.size()), Y(U.size());
  std::vector<float> G(static_cast<size_t>(N * 4 * h));
  auto ffn = [&](const Weights::Layer& L, int k) {
    std::memcpy(U.data(), X.data(), X.size() * 4);
    vision::rms_rows(U.data(), L.ffn_norm[k].data(), N, h, eps);
    vision::clip_linear(L.up[k], U.data(), N, h, G.data(), scratch);
    silu_rows(G.data(), N, 4 * h);
    vision::clip_linear(L.down[k], G.data(), N, 4 * h, Y.data(), scratch);
    parallel_for_chunked(N, 64, [&](int64_t r0, int64_t r1) {
      for (int64_t r = r0; r < r1; ++r) {
        float* y = Y.data() + r * h;
        ops::rms_norm(y, L.ffn_post[k].data(), y, h, eps);
        for (int64_t j = 0; j < h; ++j) X[static_cast<size_t>(r * h + j)] += 0.5f * y[j];
      }
    });
  };
  for (const auto& L : w_->layers) {
    ffn(L, 0);
    // Chunked local attention: query t sees keys t − 11 … t (llama.cpp's blocked mask and HF's
    // distance < context_left − 1 give the same set); logits q·k + q·P[t − s], capped at 50.
    std::memcpy(U.data(), X.data(), X.size() * 4);
    vision::rms_rows(U.data(), L.attn_pre.data(), N, h, eps);
    vision::clip_linear(L.q, U.data(), N, h, Q.data(), scratch);
    vision::clip_linear(L.k, U.data(), N, h, Kx.data(), scratch);
    vision::clip_linear(L.v, U.data(), N, h, V.data(), scratch);
    matmul(L.k_rel, pos.data(), kPast + 1, Prel.data());
    parallel_for_chunked(N, 32, [&](int64_t r0, int64_t r1) {
      for (int64_t t = r0; t < r1; ++t) {
        float* q = Q.data() + t * h;
        float* k = Kx.data() + t * h;
        for (int64_t j = 0; j < h; ++j) {
          q[j] *= q_scale * L.per_dim[static_cast<size_t>(j % hd)];
          k[j] *= k_scale;
        }
      }
    });
    parallel_for_chunked(N, 32, [&](int64_t r0, int64_t r1) {
      float s[kPast];
      for (int64_t t = r0; t < r1; ++t) {
        const int64_t s0 = std::max<int64_t>(0, t - (kPast - 1)), ns = t - s0 + 1;
        for (int64_t hh = 0; hh < H; ++hh) {
          const float* q = Q.data() + t * h + hh * hd;
          for (int64_t i = 0; i < ns; ++i) {
            const int64_t key = s0 + i;
            const float* k = Kx.data() + key * h + hh * hd;
            const float* p = Prel.data() + (t - key) * h + hh * hd;
            float acc = 0;
            for (int64_t j = 0; j < hd; ++j) acc += q[j] * (k[j] + p[j]);
            s[i] = 50.0f * std::tanh(acc / 50.0f);
          }
          ops::softmax(s, ns);
          float* o = A.data() + t * h + hh * hd;
          std::fill(o, o + hd, 0.0f);
          for (int64_t i = 0; i < ns; ++i) {
            const float* v = V.data() + (s0 + i) * h + hh * hd;
            for (int64_t j = 0; j < hd; ++j) o[j] += s[i] * v[j];
          }
        }
      }
    });
    vision::clip_linear(L.o, A.data(), N, h, Y.data(), scratch);
    parallel_for_chunked(N, 64, [&](int64_t r0, int64_t r1) {
      for (int64_t r = r0; r < r1; ++r) {
        float* y = Y.data() + r * h;
        ops::rms_norm(y, L.attn_post.data(), y, h, eps);
        for (int64_t j = 0; j < h; ++j) X[static_cast<size_t>(r * h + j)] += y[j];
      }
    });
    // Light conv: pw1 → GLU (first half · σ(second half)) → causal depthwise conv (K taps, the
    // last one at the current frame) → RMS norm → SiLU → pw2, added.
    std::memcpy(U.data(), X.data(), X.size() * 4);
    vision::rms_rows(U.data(), L.conv_pre.data(), N, h, eps);
    vision::clip_linear(L.pw1, U.data(), N, h, G.data(), scratch);  // [N, 2h]
    parallel_for_chunked(N, 64, [&](int64_t r0, int64_t r1) {
      for (int64_t r = r0; r < r1; ++r) {
        const float* a = G.data() + r * 2 * h;
        float* g = A.data() + r * h;
        for (int64_t j = 0; j < h; ++j) g[j] = a[j] / (1.0f + std::exp(-a[h + j]));
      }
    });
    parallel_for_chunked(N, 64, [&](int64_t r0, int64_t r1) {
      for (int64_t t = r0; t < r1; ++t) {
        float* y = U.data() + t * h;
        for (int64_t c = 0; c < h; ++c) {
          float acc = 0;
          for (int64_t j = 0; j < K; ++j) {
            const int64_t src = t - (K - 1) + j;
            if (src >= 0) acc += L.dw[static_cast<size_t>(c * K + j)] * A[static_cast<size_t>(src * h + c)];
          }
          y[c] = acc;
        }
        ops::rms_norm(y, L.conv_norm.data(), y, h, eps);
      }
    });
    silu_rows(U.data(), N, h);
    vision::clip_linear(L.pw2, U.data(), N, h, Y.data(), scratch);
    for (size_t i = 0; i < X.size(); ++i) X[i] += Y[i];
    ffn(L, 1);
    vision::rms_rows(X.data(), L.out_norm.data(), N, h, eps);
  }
  // Output projection (+ bias), RMS norm (weight only where the file has one), projection.
  std::vector<float> P(static_cast<size_t>(N * c_.proj));
  vision::clip_linear(w_->out_proj, X.data(), N, h, P.data(), scratch);
  parallel_for_chunked(N, 64, [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      float* p = P.data() + r * c_.proj;
      if (!w_->out_bias.empty())
        for (int64_t j = 0; j < c_.proj; ++j) p[j] += w_->out_bias[static_cast<size_t>(j)];
      ops::rms_norm(p, w_->soft_norm.empty() ? nullptr : w_->soft_norm.data(), p, c_.proj, eps);
    }
  });
  std::vector<float> out(static_cast<size_t>(N * c_.out));
  vision::clip_linear(w_->mm, P.data(), N, c_.proj, out.data(), scratch);
  return out;
}

std::unique_ptr<Gemma4ATower> load_gemma4_audio_tower(const ModelInfo& info, const ModelFiles& files, const std::string& mmproj) {
  const bool hf_tower = files.hf && files.hf->config.contains("audio_config");
  if (mmproj.empty() && !hf_tower) return nullptr;
  if (model_family(info.arch) != "gemma4")
    throw_error(ErrorCode::kUnsupported, "audio: the model (" + info.arch + ") has no audio support in oxinfer (Gemma 4 E2B/E4B have)");
  std::unique_ptr<Gemma4ATower> tower = mmproj.empty() ? Gemma4ATower::from_hf(*files.hf) : Gemma4ATower::from_mmproj(mmproj);
  if (tower->config().out != info.n_embd)
    throw_error(ErrorCode::kInvalidArgument, (mmproj.empty() ? files.path : mmproj) + ": audio projection width " +
                                                 std::to_string(tower->config().out) + " does not match the model's embedding width " +
                                                 std::to_string(info.n_embd));
  return tower;
}

}  // namespace oxi::audio
