// The Gemma 4 vision tower (see gemma4v.h).
#include "vision/gemma4v.h"

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstring>
#include <filesystem>

#include <nlohmann/json.hpp>

#include "core/byte_source.h"
#include "core/error.h"
#include "format/gguf.h"
#include "kernels/matmul.h"
#include "kernels/thread_pool.h"
#include "models/common/weights.h"
#include "nn/ops.h"
#include "vision/vit_ops.h"

namespace oxi::vision {

namespace {

using Lin = ClipLinear;

}  // namespace

struct Gemma4VTower::Weights {
  std::vector<ByteSourcePtr> sources;  // keep the mapped file(s) alive
  wt::Arena arena;
  MatrixView patch;         // [hidden, 3·P·P], columns in (channel, row, column) order
  std::vector<float> pos;   // [2, S, hidden]: x table, then y table
  struct Block {
    std::vector<float> ln1, q_norm, k_norm, attn_post, ln2, ffn_post;
    Lin q, k, v, o, gate, up, down;
    float out_scale = 1.0f;
  };
  std::vector<Block> blocks;
  std::vector<float> std_bias, std_scale;  // empty: no standardisation
  Lin proj;                                // [out, hidden]
};

namespace {

// Logical names → the file's, per layout. Linears: GGUF `v.blk.N.attn_q` + `.weight` / `.input_min`
// …; HF `model.vision_tower.encoder.layers.N.self_attn.q_proj` + `.linear.weight` / `.input_min` ….
struct Names {
  bool gguf = true;
  std::string blk(int64_t i, const std::string& g, const std::string& h) const {
    return gguf ? "v.blk." + std::to_string(i) + "." + g : "model.vision_tower.encoder.layers." + std::to_string(i) + "." + h;
  }
  std::string weight(const std::string& base) const { return base + (gguf ? ".weight" : ".linear.weight"); }
};

std::vector<float> vec(const TensorIndex& idx, const std::string& name, int64_t n) {
  return wt::to_f32(wt::require(idx, name, {n}));
}

Lin linear(const TensorIndex& idx, const Names& nm, const std::string& base, int64_t rows, int64_t cols) {
  Lin l;
  l.w = wt::matrix(wt::require(idx, nm.weight(base), {rows, cols}), rows, cols);
  l.in_lo = scalar_or(idx, base + ".input_min", -FLT_MAX);
  l.in_hi = scalar_or(idx, base + ".input_max", FLT_MAX);
  l.out_lo = scalar_or(idx, base + ".output_min", -FLT_MAX);
  l.out_hi = scalar_or(idx, base + ".output_max", FLT_MAX);
  return l;
}

void load_weights(Gemma4VTower::Weights& w, const Gemma4VConfig& c, const TensorIndex& idx, const Names& nm) {
  const int64_t h = c.hidden, P = c.patch, hd = h / c.heads, kin = 3 * P * P;
  if (nm.gguf) {
    w.patch = w.arena.own_matrix(wt::to_f32(wt::require(idx, "v.patch_embd.weight", {h, 3, P, P})), h, kin);
  } else {
    // HF: [h, P·P·3] in (row, column, channel) order → (channel, row, column).
    const std::vector<float> a = wt::to_f32(wt::require(idx, "model.vision_tower.patch_embedder.input_proj.weight", {h, kin}));
    std::vector<float> pw(a.size());
    for (int64_t o = 0; o < h; ++o)
      for (int64_t ch = 0; ch < 3; ++ch)
        for (int64_t k = 0; k < P * P; ++k)
          pw[static_cast<size_t>(o * kin + ch * P * P + k)] = a[static_cast<size_t>(o * kin + k * 3 + ch)];
    w.patch = w.arena.own_matrix(std::move(pw), h, kin);
  }
  w.pos = wt::to_f32(wt::require(idx, nm.gguf ? "v.position_embd.weight" : "model.vision_tower.patch_embedder.position_embedding_table",
                                 {2, c.pos_size, h}));
  w.blocks.resize(static_cast<size_t>(c.depth));
  for (int64_t i = 0; i < c.depth; ++i) {
    auto& b = w.blocks[static_cast<size_t>(i)];
    auto n = [&](const char* g, const char* hf) { return nm.blk(i, g, hf); };
    b.ln1 = vec(idx, n("ln1.weight", "input_layernorm.weight"), h);
    b.q = linear(idx, nm, n("attn_q", "self_attn.q_proj"), h, h);
    b.k = linear(idx, nm, n("attn_k", "self_attn.k_proj"), h, h);
    b.v = linear(idx, nm, n("attn_v", "self_attn.v_proj"), h, h);
    b.o = linear(idx, nm, n("attn_out", "self_attn.o_proj"), h, h);
    b.q_norm = vec(idx, n("attn_q_norm.weight", "self_attn.q_norm.weight"), hd);
    b.k_norm = vec(idx, n("attn_k_norm.weight", "self_attn.k_norm.weight"), hd);
    b.attn_post = vec(idx, n("attn_post_norm.weight", "post_attention_layernorm.weight"), h);
    b.ln2 = vec(idx, n("ln2.weight", "pre_feedforward_layernorm.weight"), h);
    b.gate = linear(idx, nm, n("ffn_gate", "mlp.gate_proj"), c.ffn, h);
    b.up = linear(idx, nm, n("ffn_up", "mlp.up_proj"), c.ffn, h);
    b.down = linear(idx, nm, n("ffn_down", "mlp.down_proj"), h, c.ffn);
    b.ffn_post = vec(idx, n("ffn_post_norm.weight", "post_feedforward_layernorm.weight"), h);
    const std::string ls = n("out_scale.weight", "layer_scalar");
    if (idx.find(ls)) b.out_scale = vec(idx, ls, 1)[0];
  }
  const std::string sb = nm.gguf ? "v.std_bias" : "model.vision_tower.std_bias";
  const std::string ss = nm.gguf ? "v.std_scale" : "model.vision_tower.std_scale";
  if (idx.find(sb) && idx.find(ss)) {
    w.std_bias = vec(idx, sb, h);
    w.std_scale = vec(idx, ss, h);
  }
  const std::string pj = nm.gguf ? "mm.input_projection" : "model.embed_vision.embedding_projection";
  w.proj.w = wt::matrix(wt::require(idx, pj + ".weight", {c.out, h}), c.out, h);
}

void check_config(const Gemma4VConfig& c, const std::string& what) {
  auto bad = [&](const std::string& m) { throw_error(ErrorCode::kFormat, what + ": vision tower: " + m); };
  if (c.hidden < 1 || c.depth < 1 || c.heads < 1 || c.ffn < 1 || c.out < 1 || c.pos_size < 1) bad("sizes must be positive");
  if (c.depth > 1024 || c.hidden > 65536 || c.ffn > 262144 || c.out > 262144 || c.pos_size > 1 << 20) bad("sizes out of range");
  if (c.hidden % c.heads || (c.hidden / c.heads) % 4) bad("head dim must be a multiple of 4");
  if (c.patch < 1 || c.patch > 64 || c.pool < 1 || c.pool > 16) bad("patch size 1..64 and pooling 1..16 expected");
  if (!(c.eps > 0 && c.eps < 1)) bad("norm epsilon out of range");
  for (size_t i = 0; i < 3; ++i)
    if (!(c.stdv[i] > 0) || !std::isfinite(c.mean[i])) bad("image mean/std out of range");
}

void lin(const Lin& l, const float* x, int64_t n, int64_t k, float* y, std::vector<float>& scratch) {
  clip_linear(l, x, n, k, y, scratch);
}

}  // namespace

Gemma4VTower::~Gemma4VTower() = default;

std::unique_ptr<Gemma4VTower> Gemma4VTower::from_mmproj(const std::string& path) {
  GgufFile f = read_mmproj(path, "gemma4v", "a Gemma 4 vision tower");
  const GgufMetadata& md = f.metadata;
  std::unique_ptr<Gemma4VTower> t(new Gemma4VTower());
  Gemma4VConfig& c = t->c_;
  c.hidden = md.get_int("clip.vision.embedding_length");
  c.depth = md.get_int("clip.vision.block_count");
  c.heads = md.get_int("clip.vision.attention.head_count");
  c.ffn = md.get_int("clip.vision.feed_forward_length");
  c.patch = md.get_int("clip.vision.patch_size");
  c.pool = md.get_int("clip.vision.projector.scale_factor", 3);
  c.out = md.get_int("clip.vision.projection_dim");
  c.eps = static_cast<float>(md.get_float("clip.vision.attention.layer_norm_epsilon", 1e-6));
  // llama.cpp's loader: use_gelu → GELU (tanh); neither key → gelu_quick.
  if (md.get_bool("clip.use_silu", false)) throw_error(ErrorCode::kUnsupported, path + ": a SiLU vision MLP is not Gemma 4's");
  c.gelu_tanh = md.get_bool("clip.use_gelu", false);
  for (const char* key : {"clip.vision.image_mean", "clip.vision.image_std"}) {
    const GgufValue* v = md.find(key);
    if (!v) continue;
    const std::vector<float> a = v->as_float_array();
    if (a.size() < 3) throw_error(ErrorCode::kFormat, path + ": " + key + " needs 3 values");
    auto& dst = std::string(key).find("mean") != std::string::npos ? c.mean : c.stdv;
    std::copy(a.begin(), a.begin() + 3, dst.begin());
  }
  const TensorInfo* pos = f.tensors.find("v.position_embd.weight");
  if (!pos || pos->shape.size() != 3 || pos->shape[0] != 2)
    throw_error(ErrorCode::kFormat, path + ": missing tensor v.position_embd.weight [2, S, h]");
  c.pos_size = pos->shape[1];
  check_config(c, path);
  t->w_ = std::make_unique<Weights>();
  t->w_->sources = f.sources;
  Names nm{true};
  load_weights(*t->w_, c, f.tensors, nm);
  auto& p = t->w_->proj;
  p.in_lo = scalar_or(f.tensors, "mm.input_projection.input_min", -FLT_MAX);
  p.in_hi = scalar_or(f.tensors, "mm.input_projection.input_max", FLT_MAX);
  p.out_lo = scalar_or(f.tensors, "mm.input_projection.output_min", -FLT_MAX);
  p.out_hi = scalar_or(f.tensors, "mm.input_projection.output_max", FLT_MAX);
  return t;
}

std::unique_ptr<Gemma4VTower> Gemma4VTower::from_hf(const HfCheckpoint& hf) {
  const nlohmann::json& vc = hf.config.contains("vision_config") ? hf.config["vision_config"] : nlohmann::json();
  if (!vc.is_object() || !hf.tensors.contains("model.vision_tower.patch_embedder.input_proj.weight"))
    throw_error(ErrorCode::kInvalidArgument, hf.dir + ": the checkpoint has no vision tower");
  std::unique_ptr<Gemma4VTower> t(new Gemma4VTower());
  Gemma4VConfig& c = t->c_;
  auto geti = [&](const char* k, int64_t def) {
    auto it = vc.find(k);
    if (it == vc.end()) {
      if (def > 0) return def;
      throw_error(ErrorCode::kFormat, hf.dir + "/config.json: vision_config." + k + " missing");
    }
    if (!it->is_number_integer()) throw_error(ErrorCode::kFormat, hf.dir + "/config.json: vision_config." + k + " is not an integer");
    return it->get<int64_t>();
  };
  c.hidden = geti("hidden_size", 0);
  c.depth = geti("num_hidden_layers", 0);
  c.heads = geti("num_attention_heads", 0);
  c.ffn = geti("intermediate_size", 0);
  c.patch = geti("patch_size", 16);
  c.pool = geti("pooling_kernel_size", 3);
  c.pos_size = geti("position_embedding_size", 0);
  c.out = hf.text_config.value("hidden_size", int64_t(0));
  c.eps = static_cast<float>(vc.value("rms_norm_eps", vc.value("layer_norm_eps", 1e-6)));
  if (vc.contains("rope_parameters") && vc["rope_parameters"].is_object())
    c.rope_theta = static_cast<float>(vc["rope_parameters"].value("rope_theta", 100.0));
  const std::string act = vc.value("hidden_activation", std::string("gelu_pytorch_tanh"));
  if (act != "gelu_pytorch_tanh")
    throw_error(ErrorCode::kUnsupported, hf.dir + ": vision hidden_activation '" + act + "' (gelu_pytorch_tanh is supported)");
  const std::string pp_path = hf.dir + "/preprocessor_config.json";
  if (std::filesystem::exists(pp_path)) {
    try {
      const nlohmann::json pp = nlohmann::json::parse(read_text_file(pp_path, 1 << 20));
      if (pp.value("do_normalize", false))
        for (size_t i = 0; i < 3; ++i) {
          c.mean[i] = pp.at("image_mean").at(i).get<float>();
          c.stdv[i] = pp.at("image_std").at(i).get<float>();
        }
    } catch (const nlohmann::json::exception& e) {
      throw_error(ErrorCode::kFormat, pp_path + ": " + e.what());
    }
  }
  check_config(c, hf.dir);
  t->w_ = std::make_unique<Weights>();
  t->w_->sources = hf.sources;
  load_weights(*t->w_, c, hf.tensors, Names{false});
  return t;
}

Size Gemma4VTower::target_size(Size in) const {
  const int64_t f = c_.patch * c_.pool;
  return smart_resize(in, f, c_.min_tokens * f * f, c_.max_tokens * f * f, ResizeMode::kLlamaCpp);
}

ImageEmbedding Gemma4VTower::encode(const RgbImage& img) const {
  const Size target = target_size({img.width, img.height});
  const RgbImage fitted = fit_image(img, target, ResizeMode::kLlamaCpp);
  const int64_t n = fitted.width * fitted.height;
  std::vector<float> planes(static_cast<size_t>(3 * n));
  for (int ch = 0; ch < 3; ++ch) {
    const float mean = c_.mean[static_cast<size_t>(ch)], sd = c_.stdv[static_cast<size_t>(ch)];
    float* dst = planes.data() + ch * n;
    for (int64_t i = 0; i < n; ++i) dst[i] = (static_cast<float>(fitted.rgb[static_cast<size_t>(i * 3 + ch)]) / 255.0f - mean) / sd;
  }
  ImageEmbedding e;
  e.width = target.width;
  e.height = target.height;
  e.nx = target.width / (c_.patch * c_.pool);
  e.ny = target.height / (c_.patch * c_.pool);
  e.rows = forward(planes.data(), target.width, target.height);
  return e;
}

std::vector<float> Gemma4VTower::forward(const float* planes, int64_t width, int64_t height) const {
  const int64_t P = c_.patch, K = c_.pool, h = c_.hidden, H = c_.heads, hd = h / H, kin = 3 * P * P, S = c_.pos_size;
  if (width <= 0 || height <= 0 || width % (P * K) || height % (P * K))
    throw_error(ErrorCode::kInvalidArgument, "vision: image size must be a positive multiple of " + std::to_string(P * K));
  const int64_t gw = width / P, gh = height / P, N = gw * gh;
  if (gw > S || gh > S)
    throw_error(ErrorCode::kInvalidArgument, "vision: " + std::to_string(gw) + " × " + std::to_string(gh) +
                                                 " patches exceed the tower's position table (" + std::to_string(S) + " per side)");
  // Patches row-major (k = y·gw + x), each as (channel, row, column), pixels mapped to 2x − 1.
  std::vector<float> patches(static_cast<size_t>(N * kin));
  parallel_for(N, [&](int64_t k) {
    float* dst = patches.data() + k * kin;
    const int64_t y0 = (k / gw) * P, x0 = (k % gw) * P;
    for (int64_t ch = 0; ch < 3; ++ch)
      for (int64_t yy = 0; yy < P; ++yy) {
        const float* src = planes + ch * width * height + (y0 + yy) * width + x0;
        for (int64_t xx = 0; xx < P; ++xx) dst[(ch * P + yy) * P + xx] = src[xx] * 2.0f - 1.0f;
      }
  });
  std::vector<float> X(static_cast<size_t>(N * h));
  matmul(w_->patch, patches.data(), N, X.data());
  patches = {};
  parallel_for(N, [&](int64_t k) {
    const float* tx = w_->pos.data() + (k % gw) * h;
    const float* ty = w_->pos.data() + (S + k / gw) * h;
    float* x = X.data() + k * h;
    for (int64_t j = 0; j < h; ++j) x[j] += tx[j] + ty[j];
  });
  // RoPE tables: the first hd/2 dims of a head rotate by the column, the rest by the row, each
  // half NeoX-paired (j, j + hd/4) at theta^(−2j/(hd/2)).
  const int64_t half = hd / 2;
  std::vector<float> cs(static_cast<size_t>(N * 2 * half));  // per patch: x table (half), y table (half)
  parallel_for(N, [&](int64_t k) {
    std::vector<float> slot(static_cast<size_t>(half / 2));
    std::fill(slot.begin(), slot.end(), static_cast<float>(k % gw));
    ops::rope_table(slot.data(), half, c_.rope_theta, cs.data() + k * 2 * half);
    std::fill(slot.begin(), slot.end(), static_cast<float>(k / gw));
    ops::rope_table(slot.data(), half, c_.rope_theta, cs.data() + k * 2 * half + half);
  });
  std::vector<float> U(static_cast<size_t>(N * h)), Q(U.size()), Kx(U.size()), V(U.size()), A(U.size()), Y(U.size());
  std::vector<float> G(static_cast<size_t>(N * c_.ffn)), F(G.size()), scratch;
  for (const auto& b : w_->blocks) {
    std::memcpy(U.data(), X.data(), X.size() * 4);
    rms_rows(U.data(), b.ln1.data(), N, h, c_.eps);
    lin(b.q, U.data(), N, h, Q.data(), scratch);
    lin(b.k, U.data(), N, h, Kx.data(), scratch);
    lin(b.v, U.data(), N, h, V.data(), scratch);
    parallel_for(N, [&](int64_t k) {
      for (int64_t hh = 0; hh < H; ++hh) {
        float* q = Q.data() + k * h + hh * hd;
        float* kk = Kx.data() + k * h + hh * hd;
        ops::rms_norm(q, b.q_norm.data(), q, hd, c_.eps);
        ops::rms_norm(kk, b.k_norm.data(), kk, hd, c_.eps);
        ops::rms_norm(V.data() + k * h + hh * hd, nullptr, V.data() + k * h + hh * hd, hd, c_.eps);
        const float* t = cs.data() + k * 2 * half;
        ops::rope_neox(q, half, t);
        ops::rope_neox(q + half, half, t + half);
        ops::rope_neox(kk, half, t);
        ops::rope_neox(kk + half, half, t + half);
      }
    });
    vit_attention(Q.data(), h, Kx.data(), h, V.data(), h, N, H, hd, 1.0f, A.data());
    lin(b.o, A.data(), N, h, Y.data(), scratch);
    parallel_for_chunked(N, 64, [&](int64_t r0, int64_t r1) {
      for (int64_t r = r0; r < r1; ++r) {
        float* y = Y.data() + r * h;
        ops::rms_norm(y, b.attn_post.data(), y, h, c_.eps);
        for (int64_t j = 0; j < h; ++j) X[static_cast<size_t>(r * h + j)] += y[j];
      }
    });
    std::memcpy(U.data(), X.data(), X.size() * 4);
    rms_rows(U.data(), b.ln2.data(), N, h, c_.eps);
    lin(b.gate, U.data(), N, h, G.data(), scratch);
    lin(b.up, U.data(), N, h, F.data(), scratch);
    if (c_.gelu_tanh) {
      gelu_tanh_rows(G.data(), nullptr, N, c_.ffn);
    } else {
      parallel_for_chunked(N, 16, [&](int64_t r0, int64_t r1) {
        for (int64_t i = r0 * c_.ffn; i < r1 * c_.ffn; ++i) G[static_cast<size_t>(i)] *= 1.0f / (1.0f + std::exp(-1.702f * G[static_cast<size_t>(i)]));
      });
    }
    for (size_t i = 0; i < G.size(); ++i) G[i] *= F[i];
    lin(b.down, G.data(), N, c_.ffn, Y.data(), scratch);
    parallel_for_chunked(N, 64, [&](int64_t r0, int64_t r1) {
      for (int64_t r = r0; r < r1; ++r) {
        float* y = Y.data() + r * h;
        ops::rms_norm(y, b.ffn_post.data(), y, h, c_.eps);
        for (int64_t j = 0; j < h; ++j) {
          float& x = X[static_cast<size_t>(r * h + j)];
          x = (x + y[j]) * b.out_scale;
        }
      }
    });
  }
  // K×K average pooling to the (gw/K) × (gh/K) grid, row-major, scaled by √h; standardisation;
  // unweighted RMS norm; projection.
  const int64_t ox = gw / K, oy = gh / K, nt = ox * oy;
  std::vector<float> pooled(static_cast<size_t>(nt * h));
  const float pscale = std::sqrt(static_cast<float>(h)) / static_cast<float>(K * K);
  parallel_for(nt, [&](int64_t t) {
    float* dst = pooled.data() + t * h;
    const int64_t cx = t % ox, cy = t / ox;
    for (int64_t dy = 0; dy < K; ++dy)
      for (int64_t dx = 0; dx < K; ++dx) {
        const float* src = X.data() + ((cy * K + dy) * gw + cx * K + dx) * h;
        for (int64_t j = 0; j < h; ++j) dst[j] += src[j];
      }
    for (int64_t j = 0; j < h; ++j) {
      dst[j] *= pscale;
      if (!w_->std_bias.empty()) dst[j] = (dst[j] - w_->std_bias[static_cast<size_t>(j)]) * w_->std_scale[static_cast<size_t>(j)];
    }
    ops::rms_norm(dst, nullptr, dst, h, c_.eps);
  });
  std::vector<float> out(static_cast<size_t>(nt * c_.out));
  lin(w_->proj, pooled.data(), nt, h, out.data(), scratch);
  return out;
}

}  // namespace oxi::vision
