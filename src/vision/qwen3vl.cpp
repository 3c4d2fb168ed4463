// The Qwen 3.5 vision tower (see qwen3vl.h).
#include "vision/qwen3vl.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>

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

namespace oxi::vision {

struct Qwen3VLTower::Weights {
  std::vector<ByteSourcePtr> sources;  // keep the mapped file(s) alive
  wt::Arena arena;
  MatrixView patch;                    // [hidden, 3·P·P]: the two time slices summed
  std::vector<float> patch_b, pos;     // [hidden], [side², hidden]
  struct Block {
    std::vector<float> ln1_w, ln1_b, ln2_w, ln2_b, qkv_b, o_b, up_b, down_b;
    MatrixView qkv, o, up, down;
  };
  std::vector<Block> blocks;
  std::vector<float> post_w, post_b, fc1_b, fc2_b;
  MatrixView fc1, fc2;
};

namespace {

// Logical tensor names → the file's names, per layout.
struct Names {
  bool gguf = true;
  std::string blk(int64_t i, const std::string& gguf_part, const std::string& hf_part) const {
    return gguf ? "v.blk." + std::to_string(i) + "." + gguf_part : "model.visual.blocks." + std::to_string(i) + "." + hf_part;
  }
  std::string top(const std::string& gguf_name, const std::string& hf_name) const {
    return gguf ? gguf_name : "model.visual." + hf_name;
  }
};

std::vector<float> vec(const TensorIndex& idx, const std::string& name, int64_t n) {
  return wt::to_f32(wt::require(idx, name, {n}));
}

void load_weights(Qwen3VLTower::Weights& w, const Qwen3VLConfig& c, const TensorIndex& idx, const Names& nm) {
  const int64_t h = c.hidden, P = c.patch, kin = 3 * P * P, m = h * c.merge * c.merge;
  std::vector<float> pw(static_cast<size_t>(h * kin));
  if (nm.gguf) {
    const std::vector<float> a = wt::to_f32(wt::require(idx, "v.patch_embd.weight", {h, 3, P, P}));
    const std::vector<float> b = wt::to_f32(wt::require(idx, "v.patch_embd.weight.1", {h, 3, P, P}));
    for (size_t i = 0; i < pw.size(); ++i) pw[i] = a[i] + b[i];
  } else {
    const std::vector<float> a = wt::to_f32(wt::require(idx, "model.visual.patch_embed.proj.weight", {h, 3, 2, P, P}));
    const int64_t pp = P * P;
    for (int64_t r = 0; r < h * 3; ++r)  // [o, c] rows; source [o, c, t, py, px]
      for (int64_t j = 0; j < pp; ++j) pw[static_cast<size_t>(r * pp + j)] = a[static_cast<size_t>((r * 2) * pp + j)] + a[static_cast<size_t>((r * 2 + 1) * pp + j)];
  }
  w.patch = w.arena.own_matrix(std::move(pw), h, kin);
  w.patch_b = vec(idx, nm.top("v.patch_embd.bias", "patch_embed.proj.bias"), h);
  w.pos = wt::to_f32(wt::require(idx, nm.top("v.position_embd.weight", "pos_embed.weight"), {c.pos_side * c.pos_side, h}));
  auto mat = [&](const std::string& name, int64_t rows, int64_t cols) {
    return wt::matrix(wt::require(idx, name, {rows, cols}), rows, cols);
  };
  w.blocks.resize(static_cast<size_t>(c.depth));
  for (int64_t i = 0; i < c.depth; ++i) {
    auto& b = w.blocks[static_cast<size_t>(i)];
    b.ln1_w = vec(idx, nm.blk(i, "ln1.weight", "norm1.weight"), h);
    b.ln1_b = vec(idx, nm.blk(i, "ln1.bias", "norm1.bias"), h);
    b.ln2_w = vec(idx, nm.blk(i, "ln2.weight", "norm2.weight"), h);
    b.ln2_b = vec(idx, nm.blk(i, "ln2.bias", "norm2.bias"), h);
    b.qkv = mat(nm.blk(i, "attn_qkv.weight", "attn.qkv.weight"), 3 * h, h);
    b.qkv_b = vec(idx, nm.blk(i, "attn_qkv.bias", "attn.qkv.bias"), 3 * h);
    b.o = mat(nm.blk(i, "attn_out.weight", "attn.proj.weight"), h, h);
    b.o_b = vec(idx, nm.blk(i, "attn_out.bias", "attn.proj.bias"), h);
    b.up = mat(nm.blk(i, "ffn_up.weight", "mlp.linear_fc1.weight"), c.ffn, h);
    b.up_b = vec(idx, nm.blk(i, "ffn_up.bias", "mlp.linear_fc1.bias"), c.ffn);
    b.down = mat(nm.blk(i, "ffn_down.weight", "mlp.linear_fc2.weight"), h, c.ffn);
    b.down_b = vec(idx, nm.blk(i, "ffn_down.bias", "mlp.linear_fc2.bias"), h);
  }
  w.post_w = vec(idx, nm.top("v.post_ln.weight", "merger.norm.weight"), h);
  w.post_b = vec(idx, nm.top("v.post_ln.bias", "merger.norm.bias"), h);
  w.fc1 = mat(nm.top("mm.0.weight", "merger.linear_fc1.weight"), m, m);
  w.fc1_b = vec(idx, nm.top("mm.0.bias", "merger.linear_fc1.bias"), m);
  w.fc2 = mat(nm.top("mm.2.weight", "merger.linear_fc2.weight"), c.out, m);
  w.fc2_b = vec(idx, nm.top("mm.2.bias", "merger.linear_fc2.bias"), c.out);
}

void check_config(const Qwen3VLConfig& c, const std::string& what) {
  auto bad = [&](const std::string& m) { throw_error(ErrorCode::kFormat, what + ": vision tower: " + m); };
  if (c.hidden < 1 || c.depth < 1 || c.heads < 1 || c.ffn < 1 || c.out < 1 || c.pos_side < 1) bad("sizes must be positive");
  if (c.depth > 1024 || c.hidden > 65536 || c.ffn > 262144 || c.out > 262144) bad("sizes out of range");
  if (c.hidden % c.heads || (c.hidden / c.heads) % 4) bad("head dim must be a multiple of 4");
  if (c.patch < 1 || c.patch > 64 || c.merge != 2) bad("patch size 1..64 and spatial merge 2 expected");
  if (!(c.eps > 0 && c.eps < 1)) bad("layer norm epsilon out of range");
  for (int i = 0; i < 3; ++i)
    if (!(c.stdv[static_cast<size_t>(i)] > 0) || !std::isfinite(c.mean[static_cast<size_t>(i)])) bad("image mean/std out of range");
}

// y[t] += b for each of n rows of width k.
void add_bias(float* y, const float* b, int64_t n, int64_t k) {
  parallel_for_chunked(n, 64, [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r)
      for (int64_t j = 0; j < k; ++j) y[r * k + j] += b[j];
  });
}

void layer_norm_rows(const float* x, const std::vector<float>& w, const std::vector<float>& b, float* y, int64_t n,
                     int64_t k, float eps) {
  parallel_for_chunked(n, 64, [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) ops::layer_norm(x + r * k, w.data(), b.data(), y + r * k, k, eps);
  });
}

}  // namespace

Qwen3VLTower::~Qwen3VLTower() = default;

std::unique_ptr<Qwen3VLTower> Qwen3VLTower::from_mmproj(const std::string& path) {
  GgufFile f = read_mmproj(path, "qwen3vl_merger", "a Qwen 3.5 vision tower");
  const GgufMetadata& md = f.metadata;
  std::unique_ptr<Qwen3VLTower> t(new Qwen3VLTower());
  Qwen3VLConfig& c = t->c_;
  c.hidden = md.get_int("clip.vision.embedding_length");
  c.depth = md.get_int("clip.vision.block_count");
  c.heads = md.get_int("clip.vision.attention.head_count");
  c.ffn = md.get_int("clip.vision.feed_forward_length");
  c.patch = md.get_int("clip.vision.patch_size");
  c.merge = md.get_int("clip.vision.spatial_merge_size", 2);
  c.out = md.get_int("clip.vision.projection_dim");
  c.eps = static_cast<float>(md.get_float("clip.vision.attention.layer_norm_epsilon"));
  if (!md.get_bool("clip.use_gelu", false))
    throw_error(ErrorCode::kUnsupported, path + ": the tower's activation is not GELU (clip.use_gelu)");
  for (const auto& [name, ti] : f.tensors.all())
    if (name.rfind("v.deepstack.", 0) == 0)
      throw_error(ErrorCode::kUnsupported, path + ": deepstack vision layers (Qwen3-VL) are not supported; Qwen 3.5 has none");
  for (const char* key : {"clip.vision.image_mean", "clip.vision.image_std"}) {
    const GgufValue* v = md.find(key);
    if (!v) throw_error(ErrorCode::kFormat, path + ": missing metadata key " + key);
    const std::vector<float> a = v->as_float_array();
    if (a.size() < 3) throw_error(ErrorCode::kFormat, path + ": " + key + " needs 3 values");
    auto& dst = std::string(key).find("mean") != std::string::npos ? c.mean : c.stdv;
    std::copy(a.begin(), a.begin() + 3, dst.begin());
  }
  const TensorInfo* pos = f.tensors.find("v.position_embd.weight");
  if (!pos || pos->shape.size() != 2) throw_error(ErrorCode::kFormat, path + ": missing tensor v.position_embd.weight");
  c.pos_side = static_cast<int64_t>(std::llround(std::sqrt(static_cast<double>(pos->shape[0]))));
  if (c.pos_side * c.pos_side != pos->shape[0]) throw_error(ErrorCode::kFormat, path + ": v.position_embd.weight is not a square grid");
  check_config(c, path);
  t->w_ = std::make_unique<Weights>();
  t->w_->sources = f.sources;
  load_weights(*t->w_, c, f.tensors, Names{true});
  return t;
}

std::unique_ptr<Qwen3VLTower> Qwen3VLTower::from_hf(const HfCheckpoint& hf) {
  const nlohmann::json& vc = hf.config.contains("vision_config") ? hf.config["vision_config"] : nlohmann::json();
  if (!vc.is_object() || !hf.tensors.contains("model.visual.patch_embed.proj.weight"))
    throw_error(ErrorCode::kInvalidArgument, hf.dir + ": the checkpoint has no vision tower");
  std::unique_ptr<Qwen3VLTower> t(new Qwen3VLTower());
  Qwen3VLConfig& c = t->c_;
  auto geti = [&](const char* k) {
    auto it = vc.find(k);
    if (it == vc.end() || !it->is_number_integer()) throw_error(ErrorCode::kFormat, hf.dir + "/config.json: vision_config." + k + " missing");
    return it->get<int64_t>();
  };
  c.hidden = geti("hidden_size");
  c.depth = geti("depth");
  c.heads = geti("num_heads");
  c.ffn = geti("intermediate_size");
  c.patch = geti("patch_size");
  c.merge = geti("spatial_merge_size");
  c.out = geti("out_hidden_size");
  if (geti("temporal_patch_size") != 2) throw_error(ErrorCode::kUnsupported, hf.dir + ": temporal_patch_size must be 2");
  const std::string act = vc.value("hidden_act", std::string("gelu_pytorch_tanh"));
  if (act != "gelu_pytorch_tanh")
    throw_error(ErrorCode::kUnsupported, hf.dir + ": vision hidden_act '" + act + "' (gelu_pytorch_tanh is supported)");
  if (vc.contains("deepstack_visual_indexes") && vc["deepstack_visual_indexes"].is_array() && !vc["deepstack_visual_indexes"].empty())
    throw_error(ErrorCode::kUnsupported, hf.dir + ": deepstack vision layers (Qwen3-VL) are not supported; Qwen 3.5 has none");
  c.pos_side = static_cast<int64_t>(std::llround(std::sqrt(static_cast<double>(geti("num_position_embeddings")))));
  c.eps = static_cast<float>(hf.text_config.value("rms_norm_eps", 1e-6));
  const std::string pp_path = hf.dir + "/preprocessor_config.json";
  if (std::filesystem::exists(pp_path)) {
    nlohmann::json pp;
    try {
      pp = nlohmann::json::parse(read_text_file(pp_path, 1 << 20));
      for (int i = 0; i < 3; ++i) {
        c.mean[static_cast<size_t>(i)] = pp.at("image_mean").at(static_cast<size_t>(i)).get<float>();
        c.stdv[static_cast<size_t>(i)] = pp.at("image_std").at(static_cast<size_t>(i)).get<float>();
      }
      if (pp.contains("size") && pp["size"].is_object()) {
        c.min_pixels = pp["size"].value("shortest_edge", c.min_pixels);
        c.max_pixels = pp["size"].value("longest_edge", c.max_pixels);
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

Size Qwen3VLTower::target_size(Size in, const PrepOptions& opt) const {
  const int64_t f = c_.patch * c_.merge;
  if (opt.mode == ResizeMode::kLlamaCpp) return smart_resize(in, f, 8 * f * f, 4096 * f * f, opt.mode);
  return smart_resize(in, f, c_.min_pixels, c_.max_pixels, opt.mode);
}

std::vector<float> Qwen3VLTower::preprocess(const RgbImage& img, Size target) const {
  (void)target;
  const int64_t n = img.width * img.height;
  std::vector<float> planes(static_cast<size_t>(3 * n));
  for (int ch = 0; ch < 3; ++ch) {
    const float mean = c_.mean[static_cast<size_t>(ch)], sd = c_.stdv[static_cast<size_t>(ch)];
    float* dst = planes.data() + ch * n;
    for (int64_t i = 0; i < n; ++i) dst[i] = (static_cast<float>(img.rgb[static_cast<size_t>(i * 3 + ch)]) / 255.0f - mean) / sd;
  }
  return planes;
}

ImageEmbedding Qwen3VLTower::encode(const RgbImage& img, const PrepOptions& opt) const {
  const Size target = target_size({img.width, img.height}, opt);
  const RgbImage fitted = fit_image(img, target, opt.mode);
  const std::vector<float> planes = preprocess(fitted, target);
  ImageEmbedding e;
  e.width = target.width;
  e.height = target.height;
  e.nx = target.width / (c_.patch * c_.merge);
  e.ny = target.height / (c_.patch * c_.merge);
  e.rows = forward(planes.data(), target.width, target.height);
  return e;
}

std::vector<float> Qwen3VLTower::forward(const float* planes, int64_t width, int64_t height) const {
  const int64_t P = c_.patch, M = c_.merge, h = c_.hidden, H = c_.heads, hd = h / H, kin = 3 * P * P;
  if (width % (P * M) || height % (P * M) || width <= 0 || height <= 0)
    throw_error(ErrorCode::kInvalidArgument, "vision: image size must be a positive multiple of " + std::to_string(P * M));
  const int64_t gw = width / P, gh = height / P, N = gw * gh;
  // Patches in merge-window order: for each 2×2 window (row-major over the merged grid), its
  // patches row-major. Row k of X is patch (py[k], px[k]).
  std::vector<int32_t> py(static_cast<size_t>(N)), px(static_cast<size_t>(N));
  {
    int64_t k = 0;
    for (int64_t by = 0; by < gh / M; ++by)
      for (int64_t bx = 0; bx < gw / M; ++bx)
        for (int64_t dy = 0; dy < M; ++dy)
          for (int64_t dx = 0; dx < M; ++dx, ++k) {
            py[static_cast<size_t>(k)] = static_cast<int32_t>(by * M + dy);
            px[static_cast<size_t>(k)] = static_cast<int32_t>(bx * M + dx);
          }
  }
  std::vector<float> patches(static_cast<size_t>(N * kin));
  parallel_for(N, [&](int64_t k) {
    float* dst = patches.data() + k * kin;
    const int64_t y0 = py[static_cast<size_t>(k)] * P, x0 = px[static_cast<size_t>(k)] * P;
    for (int64_t ch = 0; ch < 3; ++ch)
      for (int64_t yy = 0; yy < P; ++yy)
        std::memcpy(dst + (ch * P + yy) * P, planes + ch * width * height + (y0 + yy) * width + x0, static_cast<size_t>(P) * 4);
  });
  std::vector<float> X(static_cast<size_t>(N * h));
  matmul(w_->patch, patches.data(), N, X.data());
  patches = {};
  // Patch bias and the learned position embedding, bilinear (align corners) from the side × side grid.
  {
    const int64_t S = c_.pos_side;
    auto coord = [S](int64_t i, int64_t n) {
      return n > 1 ? static_cast<float>(i) * static_cast<float>(S - 1) / static_cast<float>(n - 1) : 0.0f;
    };
    parallel_for(N, [&](int64_t k) {
      const float fy = coord(py[static_cast<size_t>(k)], gh), fx = coord(px[static_cast<size_t>(k)], gw);
      const int64_t y0 = static_cast<int64_t>(std::floor(fy)), x0 = static_cast<int64_t>(std::floor(fx));
      const int64_t y1 = std::min(y0 + 1, S - 1), x1 = std::min(x0 + 1, S - 1);
      const float dy = fy - static_cast<float>(y0), dx = fx - static_cast<float>(x0);
      const float w00 = (1 - dy) * (1 - dx), w01 = (1 - dy) * dx, w10 = dy * (1 - dx), w11 = dy * dx;
      const float* p00 = w_->pos.data() + (y0 * S + x0) * h;
      const float* p01 = w_->pos.data() + (y0 * S + x1) * h;
      const float* p10 = w_->pos.data() + (y1 * S + x0) * h;
      const float* p11 = w_->pos.data() + (y1 * S + x1) * h;
      float* x = X.data() + k * h;
      for (int64_t j = 0; j < h; ++j)
        x[j] += w_->patch_b[static_cast<size_t>(j)] + (w00 * p00[j] + w01 * p01[j] + w10 * p10[j] + w11 * p11[j]);
    });
  }
  // 2-D rotary tables: slots j < hd/4 rotate by the patch row, hd/4 ≤ j < hd/2 by its column,
  // frequency theta^(−4·(j mod hd/4)/hd); pairs (j, j + hd/2).
  const int64_t q4 = hd / 4;
  std::vector<float> cs(static_cast<size_t>(N * hd));
  {
    std::vector<double> inv(static_cast<size_t>(q4));
    for (int64_t j = 0; j < q4; ++j)
      inv[static_cast<size_t>(j)] = std::pow(static_cast<double>(c_.rope_theta), -4.0 * static_cast<double>(j) / static_cast<double>(hd));
    parallel_for(N, [&](int64_t k) {
      float* t = cs.data() + k * hd;
      for (int64_t j = 0; j < hd / 2; ++j) {
        const double p = j < q4 ? py[static_cast<size_t>(k)] : px[static_cast<size_t>(k)];
        const float a = static_cast<float>(p) * static_cast<float>(inv[static_cast<size_t>(j % q4)]);
        t[2 * j] = std::cos(a);
        t[2 * j + 1] = std::sin(a);
      }
    });
  }
  std::vector<float> Y(static_cast<size_t>(N * h)), QKV(static_cast<size_t>(N * 3 * h)), A(static_cast<size_t>(N * h));
  std::vector<float> F(static_cast<size_t>(N * c_.ffn));
  const float scale = 1.0f / std::sqrt(static_cast<float>(hd));
  for (const auto& b : w_->blocks) {
    layer_norm_rows(X.data(), b.ln1_w, b.ln1_b, Y.data(), N, h, c_.eps);
    matmul(b.qkv, Y.data(), N, QKV.data());
    add_bias(QKV.data(), b.qkv_b.data(), N, 3 * h);
    parallel_for(N, [&](int64_t k) {
      for (int64_t hh = 0; hh < H; ++hh) {
        ops::rope_neox(QKV.data() + k * 3 * h + hh * hd, hd, cs.data() + k * hd);
        ops::rope_neox(QKV.data() + k * 3 * h + h + hh * hd, hd, cs.data() + k * hd);
      }
    });
    vit_attention(QKV.data(), 3 * h, QKV.data() + h, 3 * h, QKV.data() + 2 * h, 3 * h, N, H, hd, scale, A.data());
    matmul(b.o, A.data(), N, Y.data());
    parallel_for_chunked(N, 64, [&](int64_t r0, int64_t r1) {
      for (int64_t r = r0; r < r1; ++r)
        for (int64_t j = 0; j < h; ++j) X[static_cast<size_t>(r * h + j)] += Y[static_cast<size_t>(r * h + j)] + b.o_b[static_cast<size_t>(j)];
    });
    layer_norm_rows(X.data(), b.ln2_w, b.ln2_b, Y.data(), N, h, c_.eps);
    matmul(b.up, Y.data(), N, F.data());
    gelu_tanh_rows(F.data(), b.up_b.data(), N, c_.ffn);
    matmul(b.down, F.data(), N, Y.data());
    parallel_for_chunked(N, 64, [&](int64_t r0, int64_t r1) {
      for (int64_t r = r0; r < r1; ++r)
        for (int64_t j = 0; j < h; ++j) X[static_cast<size_t>(r * h + j)] += Y[static_cast<size_t>(r * h + j)] + b.down_b[static_cast<size_t>(j)];
    });
  }
  // Merger: LayerNorm per patch, then each window's M·M patches as one row of M·M·h.
  layer_norm_rows(X.data(), w_->post_w, w_->post_b, X.data(), N, h, c_.eps);
  const int64_t nt = N / (M * M), mh = h * M * M;
  std::vector<float> G(static_cast<size_t>(nt * mh)), out(static_cast<size_t>(nt * c_.out));
  matmul(w_->fc1, X.data(), nt, G.data());
  parallel_for_chunked(nt, 16, [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r)
      for (int64_t j = 0; j < mh; ++j) {
        float& v = G[static_cast<size_t>(r * mh + j)];
        v = ops::gelu_erf(v + w_->fc1_b[static_cast<size_t>(j)]);
      }
  });
  matmul(w_->fc2, G.data(), nt, out.data());
  add_bias(out.data(), w_->fc2_b.data(), nt, c_.out);
  return out;
}

}  // namespace oxi::vision
