// Gemma 4 text decoder on the CPU: sliding + global attention with per-type head size, KV heads
// and RoPE; per-layer embeddings; KV sharing; dense GeGLU and the MoE block. Weights stay in the
// file mapping (HF safetensors or GGUF) and every matmul goes through oxi::matmul.
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <numeric>

#include "core/error.h"
#include "core/half.h"
#include "kernels/fused.h"
#include "kernels/thread_pool.h"
#include "models/common/weights.h"
#include "models/gemma4/gemma4.h"
#include "models/gemma4/ggml_fa.h"

namespace oxi {

namespace gemma4 {
namespace {

// ---------------------------------------------------------------------------------------------
// numerics

constexpr float kGeluCoefA = 0.044715f;
constexpr float kSqrt2OverPi = 0.79788456080286535587989211986876f;

float gelu_f32(float x) { return 0.5f * x * (1.0f + std::tanh(kSqrt2OverPi * x * (1.0f + kGeluCoefA * x * x))); }

// y = x / sqrt(mean(x^2) + eps) as ggml: squares rounded to f32, summed in double; then the
// optional weight.
void rms_norm(const float* x, int64_t n, float eps, const float* w, float* y) {
  // ggml adds the f32-rounded squares in double one after another; eight running sums (added at
  // the end) give the same double up to its last bits, and so the same f32 mean except when that
  // lies within ~1e-16 of an f32 rounding boundary, without one long latency-bound chain.
  double s8[8] = {};
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    for (int k = 0; k < 8; ++k) s8[k] += static_cast<double>(x[i + k] * x[i + k]);
  double sum = ((s8[0] + s8[1]) + (s8[2] + s8[3])) + ((s8[4] + s8[5]) + (s8[6] + s8[7]));
  for (; i < n; ++i) sum += static_cast<double>(x[i] * x[i]);
  const float mean = static_cast<float>(sum / static_cast<double>(n));
  const float scale = 1.0f / std::sqrt(mean + eps);
  if (w) {
    for (int64_t i = 0; i < n; ++i) y[i] = (x[i] * scale) * w[i];
  } else {
    for (int64_t i = 0; i < n; ++i) y[i] = x[i] * scale;
  }
}

// ---------------------------------------------------------------------------------------------
// weights

struct Expert3D {  // a stack of E matrices [E, rows, cols] in one tensor
  DType dtype = DType::F32;
  int64_t rows = 0, cols = 0;
  const uint8_t* data = nullptr;
  uint64_t row_bytes = 0;
  MatrixView slice(int64_t e, int64_t row0, int64_t nrows) const {
    MatrixView m;
    m.dtype = dtype;
    m.rows = nrows;
    m.cols = cols;
    m.row_bytes = row_bytes;
    m.data = data + (static_cast<uint64_t>(e) * static_cast<uint64_t>(rows) + static_cast<uint64_t>(row0)) * row_bytes;
    return m;
  }
};

struct Layer {
  std::vector<float> attn_norm, q_norm, k_norm, post_attn_norm, ffn_norm, post_ffn_norm;
  MatrixView wq, wk, wv, wo, gate, up, down;
  bool has_v = false;
  bool owns_kv = false;
  // MoE
  bool moe = false;
  std::vector<float> pre_ffn_norm2, post_ffn_norm1, post_ffn_norm2, router_scale, expert_scale;
  MatrixView router;
  Expert3D gate_exps, up_exps, down_exps;
  int64_t gate_row0 = 0, up_row0 = 0;  // row offsets inside the fused gate_up stack
  // per-layer embedding
  MatrixView ple_gate, ple_proj;
  std::vector<float> ple_post_norm;
  float out_scale = 1.0f;
};

class Gemma4Model;

// ---------------------------------------------------------------------------------------------
// per-sequence state

struct LayerCache {
  int64_t width = 0;     // Hkv * hd values per position
  bool ring = false;     // sliding: ring of `cap` slots indexed by pos % cap
  int64_t cap = 0;       // ring: window; full: grown on demand up to n_ctx
  size_t esz = 2;        // bytes per value: 2 (f16, the default) or 4 (f32)
  std::vector<uint8_t> k, v;  // [cap, width] values
  size_t row_bytes() const { return static_cast<size_t>(width) * esz; }
};

class Gemma4State final : public SequenceState {
 public:
  Gemma4State(const Config& c, int64_t n_ctx, bool kv_f32) : n_ctx_(n_ctx), kv_f32_(kv_f32) {
    caches_.resize(static_cast<size_t>(c.n_layer));
    for (int64_t l = 0; l < c.n_layer_kv(); ++l) {
      LayerCache& lc = caches_[static_cast<size_t>(l)];
      lc.width = c.n_head_kv[static_cast<size_t>(l)] * c.head_dim(l);
      lc.ring = c.swa(l);
      lc.esz = kv_f32 ? 4 : 2;
      lc.cap = lc.ring ? std::min(c.window, n_ctx) : 0;
      if (lc.ring) {
        lc.k.assign(static_cast<size_t>(lc.cap) * lc.row_bytes(), 0);
        lc.v.assign(static_cast<size_t>(lc.cap) * lc.row_bytes(), 0);
      }
    }
  }
  int64_t n_past() const override { return n_past_; }
  int64_t n_ctx() const override { return n_ctx_; }
  void clear() override {
    n_past_ = 0;
    for (auto& lc : caches_) {
      if (!lc.ring) {
        lc.k.clear();
        lc.k.shrink_to_fit();
        lc.v.clear();
        lc.v.shrink_to_fit();
        lc.cap = 0;
      } else {
        std::fill(lc.k.begin(), lc.k.end(), uint8_t{0});
        std::fill(lc.v.begin(), lc.v.end(), uint8_t{0});
      }
    }
  }

  std::vector<uint8_t> snapshot() const override {
    std::vector<uint8_t> out;
    auto put = [&](const void* p, size_t n) {
      const uint8_t* b = static_cast<const uint8_t*>(p);
      out.insert(out.end(), b, b + n);
    };
    const uint32_t magic = 0x34474d47u;  // "GMG4"
    put(&magic, 4);
    put(&n_ctx_, 8);
    put(&n_past_, 8);
    const uint8_t kv_f32 = kv_f32_ ? 1 : 0;
    put(&kv_f32, 1);
    const uint64_t nl = caches_.size();
    put(&nl, 8);
    for (const auto& lc : caches_) {
      put(&lc.width, 8);
      const uint8_t ring = lc.ring ? 1 : 0;
      put(&ring, 1);
      const int64_t rows = lc.ring ? lc.cap : n_past_;
      put(&rows, 8);
      put(lc.k.data(), static_cast<size_t>(rows) * lc.row_bytes());
      put(lc.v.data(), static_cast<size_t>(rows) * lc.row_bytes());
    }
    return out;
  }

  void restore(std::span<const uint8_t> bytes) override {
    size_t off = 0;
    auto get = [&](void* p, size_t n) {
      if (bytes.size() - off < n) throw_error(ErrorCode::kInvalidArgument, "gemma4 state: snapshot is truncated");
      std::memcpy(p, bytes.data() + off, n);
      off += n;
    };
    uint32_t magic = 0;
    get(&magic, 4);
    if (magic != 0x34474d47u) throw_error(ErrorCode::kInvalidArgument, "gemma4 state: not a gemma4 snapshot");
    int64_t n_ctx = 0, n_past = 0;
    uint64_t nl = 0;
    uint8_t kv_f32 = 0;
    get(&n_ctx, 8);
    get(&n_past, 8);
    get(&kv_f32, 1);
    get(&nl, 8);
    if (n_ctx != n_ctx_ || nl != caches_.size() || n_past < 0 || n_past > n_ctx_)
      throw_error(ErrorCode::kInvalidArgument, "gemma4 state: snapshot is for a different model or context size");
    if ((kv_f32 != 0) != kv_f32_)
      throw_error(ErrorCode::kInvalidArgument, "gemma4 state: snapshot has another KV cache type (f16 vs f32)");
    std::vector<LayerCache> fresh = caches_;
    for (auto& lc : fresh) {
      int64_t width = 0, rows = 0;
      uint8_t ring = 0;
      get(&width, 8);
      get(&ring, 1);
      get(&rows, 8);
      if (width != lc.width || (ring != 0) != lc.ring || rows != (lc.ring ? lc.cap : n_past))
        throw_error(ErrorCode::kInvalidArgument, "gemma4 state: snapshot layout does not match this model");
      const size_t n = static_cast<size_t>(rows) * lc.row_bytes();
      if (!lc.ring) {
        lc.cap = rows;
        lc.k.resize(n);
        lc.v.resize(n);
      }
      get(lc.k.data(), n);
      get(lc.v.data(), n);
    }
    if (off != bytes.size()) throw_error(ErrorCode::kInvalidArgument, "gemma4 state: trailing bytes in snapshot");
    caches_ = std::move(fresh);
    n_past_ = n_past;
  }

  // Makes room for positions < need in the full caches.
  void reserve_full(int64_t need) {
    for (auto& lc : caches_) {
      if (lc.ring || lc.width == 0 || lc.cap >= need) continue;
      int64_t cap = std::max<int64_t>(need, std::min<int64_t>(n_ctx_, std::max<int64_t>(64, lc.cap * 2)));
      lc.k.resize(static_cast<size_t>(cap) * lc.row_bytes());
      lc.v.resize(static_cast<size_t>(cap) * lc.row_bytes());
      lc.cap = cap;
    }
  }

  int64_t n_ctx_ = 0;
  int64_t n_past_ = 0;
  bool kv_f32_ = false;
  std::vector<LayerCache> caches_;  // indexed by layer; KV-shared layers have width 0
};

// ---------------------------------------------------------------------------------------------
// the model

class Gemma4Model final : public Model {
 public:
  Gemma4Model(const ModelFiles& files, Config cfg, const LoadOptions& opt);
  const ModelInfo& info() const override { return info_; }
  std::unique_ptr<SequenceState> new_state(int64_t n_ctx) const override {
    if (n_ctx <= 0 || n_ctx > (int64_t{1} << 24))
      throw_error(ErrorCode::kInvalidArgument, "gemma4: bad context size " + std::to_string(n_ctx));
    return std::make_unique<Gemma4State>(cfg_, n_ctx, kv_f32_);
  }
  void forward(SequenceState& state, std::span<const int32_t> tokens, float* logits,
               bool all_logits) const override;

 private:
  const TensorInfo* find(const std::string& gguf_name) const;
  const TensorInfo& need(const std::string& gguf_name) const;
  // Matrices and expert stacks, quantised when LoadOptions::quant asks for it (lq_).
  MatrixView matrix(const std::string& name, int64_t rows, int64_t cols);
  std::vector<float> vec(const std::string& name, int64_t n) const;
  Expert3D experts(const std::string& name, int64_t e, int64_t rows, int64_t cols);
  void rope(float* x, int64_t n_heads, int64_t hd, int64_t pos, bool swa) const;
  void ffn_dense(const Layer& ly, const float* x, int64_t T, float* out, int64_t n_ff) const;
  void ffn_moe(const Layer& ly, const float* x_norm, const float* x_resid, int64_t T, float* out) const;
  float gelu(float x) const { return exact_gelu_ ? gelu_f32(x) : gelu_ggml(x); }
  // g[i] = gelu(g[i]) · u[i] (GeGLU), vectorised for ggml's table.
  void geglu(float* g, const float* u, int64_t n) const {
    if (!exact_gelu_) return ggml_geglu(g, u, n);
    for (int64_t i = 0; i < n; ++i) g[i] = gelu_f32(g[i]) * u[i];
  }
  // Products with f32 weights in ggml's summation order (ggml_matmul_f32; `id`: an expert
  // product, ggml's mul_mat_id); other weight types through our kernels as they are.
  void mm(const MatrixView& w, const float* x, int64_t T, float* y, bool id = false) const {
    if (ggml_mm_ && w.dtype == DType::F32)
      ggml_matmul_f32(w, x, T, y, lanes_, id);
    else
      matmul(w, x, T, y);
  }
  // Two products of one input (gate and up): one batched kernel call unless they are emulated.
  void mm2(const MatrixView& w1, float* y1, const MatrixView& w2, float* y2, const float* x, int64_t T,
           bool id = false) const {
    if (ggml_mm_ && (w1.dtype == DType::F32 || w2.dtype == DType::F32)) {
      mm(w1, x, T, y1, id);
      mm(w2, x, T, y2, id);
      return;
    }
    const MatrixView ws[2] = {w1, w2};
    float* const ys[2] = {y1, y2};
    matmul_batch(ws, ys, 2, x, T);
  }

  ModelFiles files_;
  bool is_hf_ = false;
  std::string prefix_;
  Config cfg_;
  ModelInfo info_;
  MatrixView tok_embd_, output_;
  std::vector<float> output_norm_;
  MatrixView ple_tok_, ple_model_proj_;
  std::vector<float> ple_proj_norm_;
  std::vector<Layer> layers_;
  wt::LoadQuant lq_;  // quantisation at load (models/common/quant_rule.h)
  wt::Arena arena_;   // owns the quantised weights
  bool exact_gelu_ = false;
  // Debug / test knobs (environment, read at load): OXI_GEMMA4_EXACT_GELU=1 tanh formula instead
  // of ggml's table; OXI_GEMMA4_LANES=8|16 ggml's vector width (default: the host's ggml build);
  // OXI_GEMMA4_GGML_MM=0 our kernels for every f32 product (one order for every batch size);
  // OXI_KV_F32=1 f32 KV cache (llama.cpp's cache type f32); OXI_GEMMA4_ATTN=1|2 always the
  // vector | tiled flash-attention kernel, OXI_GEMMA4_ATTN=3 llama.cpp's attention without flash
  // attention (-fa off).
  int lanes_ = 16;
  int ggml_threads_ = 0;  // OXI_GEMMA4_GGML_THREADS: llama.cpp's thread count (0: ours)
  bool ggml_mm_ = true;
  bool kv_f32_ = false;
  int attn_mode_ = 0;  // 0: as llama.cpp's flash attention (vector kernel under 64 tokens, tiled from 64)
};

const TensorInfo* Gemma4Model::find(const std::string& g) const {
  if (!is_hf_) return files_.tensors().find(g);
  const std::string h = gguf_to_hf_name(g);
  if (h.empty()) return nullptr;
  return files_.tensors().find(prefix_ + h);
}

const TensorInfo& Gemma4Model::need(const std::string& g) const {
  const TensorInfo* t = find(g);
  if (!t) {
    const std::string shown = is_hf_ ? prefix_ + gguf_to_hf_name(g) : g;
    format_error(files_.path, "missing tensor " + shown);
  }
  return *t;
}

MatrixView Gemma4Model::matrix(const std::string& g, int64_t rows, int64_t cols) {
  const TensorInfo& t = need(g);
  if (t.shape.size() != 2 || t.shape[0] != rows || t.shape[1] != cols)
    format_error(files_.path, "tensor " + t.name + " has shape " + t.shape_string() + ", want [" +
                                  std::to_string(rows) + ", " + std::to_string(cols) + "]");
  if (!matmul_supports(t.dtype))
    throw_error(ErrorCode::kUnsupported, files_.path + ": tensor " + t.name + ": unsupported tensor type " + dtype_name(t.dtype));
  auto rb = dtype_row_bytes(t.dtype, static_cast<uint64_t>(cols));
  if (!rb || *rb * static_cast<uint64_t>(rows) != t.nbytes)
    format_error(files_.path, "tensor " + t.name + ": size does not match its shape");
  return lq_.matrix(t, rows, cols, g, 2, arena_);
}

std::vector<float> Gemma4Model::vec(const std::string& g, int64_t n) const {
  const TensorInfo& t = need(g);
  if (t.n_elements() != n)
    format_error(files_.path, "tensor " + t.name + " has shape " + t.shape_string() + ", want " + std::to_string(n) + " elements");
  if (t.dtype != DType::F32 && t.dtype != DType::F16 && t.dtype != DType::BF16)
    throw_error(ErrorCode::kUnsupported, files_.path + ": tensor " + t.name + ": unsupported type " + dtype_name(t.dtype) + " for a vector");
  std::vector<float> out(static_cast<size_t>(n));
  const uint8_t* p = t.data();
  for (int64_t i = 0; i < n; ++i) {
    if (t.dtype == DType::F32) std::memcpy(&out[static_cast<size_t>(i)], p + 4 * i, 4);
    else {
      uint16_t h;
      std::memcpy(&h, p + 2 * i, 2);
      out[static_cast<size_t>(i)] = t.dtype == DType::F16 ? f16_to_f32(h) : bf16_to_f32(h);
    }
  }
  for (float v : out)
    if (!std::isfinite(v)) format_error(files_.path, "tensor " + t.name + " holds a non-finite value");
  return out;
}

Expert3D Gemma4Model::experts(const std::string& g, int64_t e, int64_t rows, int64_t cols) {
  const TensorInfo& t = need(g);
  if (t.shape.size() != 3 || t.shape[0] != e || t.shape[1] != rows || t.shape[2] != cols)
    format_error(files_.path, "tensor " + t.name + " has shape " + t.shape_string() + ", want [" + std::to_string(e) +
                                  ", " + std::to_string(rows) + ", " + std::to_string(cols) + "]");
  if (!matmul_supports(t.dtype))
    throw_error(ErrorCode::kUnsupported, files_.path + ": tensor " + t.name + ": unsupported tensor type " + dtype_name(t.dtype));
  auto rb = dtype_row_bytes(t.dtype, static_cast<uint64_t>(cols));
  if (!rb || *rb * static_cast<uint64_t>(rows) * static_cast<uint64_t>(e) != t.nbytes)
    format_error(files_.path, "tensor " + t.name + ": size does not match its shape");
  const MatrixView m = lq_.matrix(t, e * rows, cols, g, 3, arena_);
  Expert3D x;
  x.dtype = m.dtype;
  x.rows = rows;
  x.cols = cols;
  x.data = m.data;
  x.row_bytes = m.row_bytes;
  return x;
}

namespace {
// The file set without the GGUF metadata, which the parsed config has replaced. Its vocabulary
// arrays (scores and token types, 1 MiB each for 262144 tokens; the strings are shared, see
// GgufLazyStrings) would be copied for nothing: E2B Q8_0 load 62 → 33–46 ms (2026-12-04, Zen 5).
ModelFiles without_metadata(const ModelFiles& f) {
  ModelFiles out;
  out.kind = f.kind;
  out.path = f.path;
  out.hf = f.hf;
  if (f.gguf) {
    GgufFile g;
    g.version = f.gguf->version;
    g.data_offset = f.gguf->data_offset;
    g.alignment = f.gguf->alignment;
    g.tensors = f.gguf->tensors;
    g.sources = f.gguf->sources;
    out.gguf = std::move(g);
  }
  return out;
}
}  // namespace

Gemma4Model::Gemma4Model(const ModelFiles& files, Config cfg, const LoadOptions& opt)
    : files_(without_metadata(files)), cfg_(std::move(cfg)) {
  is_hf_ = files_.kind == ModelFileKind::kHf;
  if (is_hf_) prefix_ = hf_prefix(*files_.hf);
  const bool untied_hf = is_hf_ && files_.tensors().find("lm_head.weight") &&
                         !files_.hf->text_config.value("tie_word_embeddings", files_.hf->config.value("tie_word_embeddings", true));
  if (!opt.quant.empty())
    lq_.rule = QuantRule{parse_quant_type(opt.quant), cfg_.n_expert, untied_hf || (!is_hf_ && find("output.weight"))};
  if (const char* e = std::getenv("OXI_GEMMA4_EXACT_GELU")) exact_gelu_ = (e[0] == '1');
  if (const char* e = std::getenv("OXI_GEMMA4_ATTN")) attn_mode_ = std::atoi(e);
  lanes_ = ggml_host_lanes();
  if (const char* e = std::getenv("OXI_GEMMA4_LANES")) lanes_ = std::atoi(e) == 8 ? 8 : 16;
  if (const char* e = std::getenv("OXI_GEMMA4_GGML_MM")) ggml_mm_ = (e[0] == '1');
  if (const char* e = std::getenv("OXI_GEMMA4_GGML_THREADS")) ggml_threads_ = std::max(0, std::atoi(e));
  if (const char* e = std::getenv("OXI_KV_F32"); e && *e && std::string(e) != "0") kv_f32_ = true;
  const Config& c = cfg_;
  const int64_t d = c.n_embd;

  tok_embd_ = matrix("token_embd.weight", c.n_vocab, d);
  output_ = tok_embd_;
  if (!is_hf_ && find("output.weight")) output_ = matrix("output.weight", c.n_vocab, d);
  if (untied_hf) {
    // untied head: read it through the GGUF-name mapper's bypass
    const TensorInfo& t = files_.tensors().get("lm_head.weight");
    auto rb = dtype_row_bytes(t.dtype, static_cast<uint64_t>(d));
    if (t.shape.size() != 2 || t.shape[0] != c.n_vocab || t.shape[1] != d || !rb || !matmul_supports(t.dtype))
      format_error(files_.path, "tensor lm_head.weight has shape " + t.shape_string() + " or an unsupported type");
    output_ = lq_.matrix(t, c.n_vocab, d, "output.weight", 2, arena_);
  }
  output_norm_ = vec("output_norm.weight", d);

  const int64_t P = c.n_embd_per_layer, L = c.n_layer;
  if (P > 0) {
    ple_tok_ = matrix("per_layer_token_embd.weight", c.n_vocab, L * P);
    ple_model_proj_ = matrix("per_layer_model_proj.weight", L * P, d);
    ple_proj_norm_ = vec("per_layer_proj_norm.weight", P);
  }

  layers_.resize(static_cast<size_t>(L));
  for (int64_t l = 0; l < L; ++l) {
    Layer& ly = layers_[static_cast<size_t>(l)];
    const std::string b = "blk." + std::to_string(l) + ".";
    const int64_t hd = c.head_dim(l), hkv = c.n_head_kv[static_cast<size_t>(l)];
    ly.owns_kv = l < c.n_layer_kv();
    ly.attn_norm = vec(b + "attn_norm.weight", d);
    ly.wq = matrix(b + "attn_q.weight", c.n_head * hd, d);
    ly.q_norm = vec(b + "attn_q_norm.weight", hd);
    ly.wo = matrix(b + "attn_output.weight", d, c.n_head * hd);
    if (ly.owns_kv) {
      ly.wk = matrix(b + "attn_k.weight", hkv * hd, d);
      ly.k_norm = vec(b + "attn_k_norm.weight", hd);
      const bool skip_v = is_hf_ && c.k_eq_v && !c.swa(l);
      ly.has_v = !skip_v && find(b + "attn_v.weight") != nullptr;
      if (ly.has_v) ly.wv = matrix(b + "attn_v.weight", hkv * hd, d);
      else if (is_hf_ && !(c.k_eq_v && !c.swa(l)))
        format_error(files_.path, "missing tensor " + prefix_ + gguf_to_hf_name(b + "attn_v.weight"));
    }
    ly.post_attn_norm = vec(b + "post_attention_norm.weight", d);
    const int64_t ff = c.n_ff[static_cast<size_t>(l)];
    ly.ffn_norm = vec(b + "ffn_norm.weight", d);
    ly.gate = matrix(b + "ffn_gate.weight", ff, d);
    ly.up = matrix(b + "ffn_up.weight", ff, d);
    ly.down = matrix(b + "ffn_down.weight", d, ff);
    ly.post_ffn_norm = vec(b + "post_ffw_norm.weight", d);
    ly.moe = c.n_expert > 0 && find(b + "ffn_gate_inp.weight") != nullptr;
    if (c.n_expert > 0 && !ly.moe) format_error(files_.path, "missing tensor " + (is_hf_ ? prefix_ + gguf_to_hf_name(b + "ffn_gate_inp.weight") : b + "ffn_gate_inp.weight"));
    if (ly.moe) {
      const int64_t E = c.n_expert, I = c.n_ff_exp;
      ly.router = matrix(b + "ffn_gate_inp.weight", E, d);
      ly.router_scale = vec(b + "ffn_gate_inp.scale", d);
      ly.expert_scale = find(b + "ffn_down_exps.scale") ? vec(b + "ffn_down_exps.scale", E) : std::vector<float>(static_cast<size_t>(E), 1.0f);
      ly.pre_ffn_norm2 = vec(b + "pre_ffw_norm_2.weight", d);
      ly.post_ffn_norm1 = vec(b + "post_ffw_norm_1.weight", d);
      ly.post_ffn_norm2 = vec(b + "post_ffw_norm_2.weight", d);
      if (find(b + "ffn_gate_up_exps.weight")) {
        ly.gate_exps = experts(b + "ffn_gate_up_exps.weight", E, 2 * I, d);
        ly.up_exps = ly.gate_exps;
        ly.gate_row0 = 0;
        ly.up_row0 = I;
      } else if (!is_hf_) {
        ly.gate_exps = experts(b + "ffn_gate_exps.weight", E, I, d);
        ly.up_exps = experts(b + "ffn_up_exps.weight", E, I, d);
      } else {
        need(b + "ffn_gate_up_exps.weight");
      }
      ly.down_exps = experts(b + "ffn_down_exps.weight", E, d, I);
    }
    if (P > 0) {
      ly.ple_gate = matrix(b + "inp_gate.weight", P, d);
      ly.ple_proj = matrix(b + "proj.weight", d, P);
      ly.ple_post_norm = vec(b + "post_norm.weight", d);
    }
    if (find(b + "layer_output_scale.weight")) ly.out_scale = vec(b + "layer_output_scale.weight", 1)[0];
  }

  info_.arch = "gemma4";
  info_.name = c.name;
  if (info_.name.empty()) {
    std::string p = files_.path;
    while (!p.empty() && p.back() == '/') p.pop_back();
    info_.name = p.substr(p.find_last_of('/') + 1);
  }
  info_.n_vocab = c.n_vocab;
  info_.n_embd = d;
  info_.n_layer = L;
  info_.n_ctx_train = c.n_ctx_train;
  for (const auto& [name, t] : files_.tensors().all()) {
    if (is_hf_ && name.compare(0, prefix_.size(), prefix_) != 0) continue;
    info_.n_params += static_cast<uint64_t>(t.n_elements());
    info_.weight_bytes += t.nbytes;
  }
  info_.weight_bytes = lq_.resident(info_.weight_bytes);
}

// NeoX RoPE over `n_heads` heads of size hd at position `pos`, ggml's recurrence for the angles
// (theta_i = pos · base^(-2i/n_dims) / freq_factor_i, built by repeated multiplication in f32).
void Gemma4Model::rope(float* x, int64_t n_heads, int64_t hd, int64_t pos, bool swa) const {
  const float* ff = (!swa && !cfg_.rope_freqs_full.empty()) ? cfg_.rope_freqs_full.data() : nullptr;
  ggml_rope_neox(x, n_heads, hd, pos, swa ? cfg_.n_rot_swa : cfg_.n_rot_full, swa ? cfg_.rope_base_swa : cfg_.rope_base_full, ff);
}

void Gemma4Model::ffn_dense(const Layer& ly, const float* x, int64_t T, float* out, int64_t ff) const {
  // Buffers kept per thread (a fresh 2 × T·ff floats per layer was ~1 GB of page faults per 512-token
  // prompt at E2B's width); GELU·up over the pool in chunks of elements (element-wise, same values;
  // chunks of elements rather than tokens so that a decode step's one row also splits).
  thread_local std::vector<float> tl_g, tl_u;
  std::vector<float>& g = tl_g;
  std::vector<float>& u = tl_u;
  if (g.size() < static_cast<size_t>(T * ff)) {
    g.resize(static_cast<size_t>(T * ff));
    u.resize(static_cast<size_t>(T * ff));
  }
  mm2(ly.gate, g.data(), ly.up, u.data(), x, T);
  parallel_for_chunked(T * ff, 4096, [&](int64_t i0, int64_t i1) { geglu(g.data() + i0, u.data() + i0, i1 - i0); });
  mm(ly.down, g.data(), T, out);
}

void Gemma4Model::ffn_moe(const Layer& ly, const float* xn, const float* xr, int64_t T, float* out) const {
  const int64_t d = cfg_.n_embd, E = cfg_.n_expert, K = cfg_.n_expert_used, I = cfg_.n_ff_exp;
  // router on the residual stream: no-scale RMSNorm, · d^-1/2, · router.scale
  std::vector<float> h(static_cast<size_t>(T * d)), logits(static_cast<size_t>(T * E));
  const float inv_sqrt_d = 1.0f / std::sqrt(static_cast<float>(d));
  for (int64_t t = 0; t < T; ++t) {
    float* ht = h.data() + t * d;
    rms_norm(xr + t * d, d, cfg_.eps, nullptr, ht);
    for (int64_t i = 0; i < d; ++i) ht[i] = (ht[i] * inv_sqrt_d) * ly.router_scale[static_cast<size_t>(i)];
  }
  mm(ly.router, h.data(), T, logits.data());
  // top-k of the softmax, renormalised (as llama.cpp's build_moe_ffn: ggml's softmax, the top-k
  // by descending weight, their sum in double, clamped, divided)
  struct Pick { int64_t t, slot; float w; };
  std::vector<std::vector<Pick>> chosen(static_cast<size_t>(E));  // expert → (token, slot, weight)
  std::vector<float> p(static_cast<size_t>(E));
  std::vector<int64_t> idx(static_cast<size_t>(E));
  for (int64_t t = 0; t < T; ++t) {
    const float* lg = logits.data() + t * E;
    float mx = -INFINITY;
    for (int64_t e = 0; e < E; ++e) mx = lg[e] > mx ? lg[e] : mx;
    std::copy(lg, lg + E, p.begin());
    const float inv = static_cast<float>(1.0 / ggml_soft_max(p.data(), E, mx, lanes_));
    for (float& v : p) v *= inv;
    std::iota(idx.begin(), idx.end(), 0);
    std::partial_sort(idx.begin(), idx.begin() + K, idx.end(), [&](int64_t a, int64_t b) {
      const float pa = p[static_cast<size_t>(a)], pb = p[static_cast<size_t>(b)];
      return pa > pb || (pa == pb && a < b);
    });
    double wsum = 0.0;
    for (int64_t k = 0; k < K; ++k) wsum += static_cast<double>(p[static_cast<size_t>(idx[static_cast<size_t>(k)])]);
    const float ws = std::max(static_cast<float>(wsum), 6.103515625e-5f);
    for (int64_t k = 0; k < K; ++k) {
      const int64_t e = idx[static_cast<size_t>(k)];
      chosen[static_cast<size_t>(e)].push_back({t, k, p[static_cast<size_t>(e)] / ws});
    }
  }
  // each expert's weighted output into its (token, slot); then the slots summed in order
  std::vector<float> slots(static_cast<size_t>(T * K * d));
  std::vector<float> xin, g, u, y;
  for (int64_t e = 0; e < E; ++e) {
    const auto& picks = chosen[static_cast<size_t>(e)];
    if (picks.empty()) continue;
    const int64_t n = static_cast<int64_t>(picks.size());
    xin.resize(static_cast<size_t>(n * d));
    for (int64_t i = 0; i < n; ++i)
      std::memcpy(xin.data() + i * d, xn + picks[static_cast<size_t>(i)].t * d, static_cast<size_t>(d) * sizeof(float));
    g.resize(static_cast<size_t>(n * I));
    u.resize(static_cast<size_t>(n * I));
    y.resize(static_cast<size_t>(n * d));
    mm2(ly.gate_exps.slice(e, ly.gate_row0, I), g.data(), ly.up_exps.slice(e, ly.up_row0, I), u.data(), xin.data(), n, true);
    geglu(g.data(), u.data(), static_cast<int64_t>(g.size()));
    mm(ly.down_exps.slice(e, 0, d), g.data(), n, y.data(), true);
    const float es = ly.expert_scale[static_cast<size_t>(e)];
    for (int64_t i = 0; i < n; ++i) {
      const Pick& pk = picks[static_cast<size_t>(i)];
      float* o = slots.data() + (pk.t * K + pk.slot) * d;
      const float* yi = y.data() + i * d;
      for (int64_t j = 0; j < d; ++j) o[j] = (yi[j] * es) * pk.w;
    }
  }
  for (int64_t t = 0; t < T; ++t) {
    float* o = out + t * d;
    std::memcpy(o, slots.data() + t * K * d, static_cast<size_t>(d) * sizeof(float));
    for (int64_t k = 1; k < K; ++k) {
      const float* sk = slots.data() + (t * K + k) * d;
      for (int64_t j = 0; j < d; ++j) o[j] += sk[j];
    }
  }
}

void Gemma4Model::forward(SequenceState& state_base, std::span<const int32_t> tokens, float* logits,
                          bool all_logits) const {
  auto* st = dynamic_cast<Gemma4State*>(&state_base);
  if (!st) throw_error(ErrorCode::kInvalidArgument, "gemma4: state belongs to another model");
  const Config& c = cfg_;
  const int64_t T = static_cast<int64_t>(tokens.size());
  if (T == 0) return;
  const int64_t n_past = st->n_past_;
  if (T > st->n_ctx_ - n_past)
    throw_error(ErrorCode::kInvalidArgument, "gemma4: context overflow: " + std::to_string(n_past) + " + " +
                                                 std::to_string(T) + " tokens > n_ctx " + std::to_string(st->n_ctx_));
  for (int32_t tok : tokens)
    if (tok < 0 || tok >= c.n_vocab)
      throw_error(ErrorCode::kInvalidArgument, "gemma4: token id " + std::to_string(tok) + " out of range [0, " +
                                                   std::to_string(c.n_vocab) + ")");
  const int64_t d = c.n_embd, L = c.n_layer, P = c.n_embd_per_layer, H = c.n_head;

  // embeddings · sqrt(d)
  std::vector<float> x(static_cast<size_t>(T * d));
  // Per-token work (norms, RoPE, residual adds) over the pool in chunks of tokens: each token's
  // values are computed as before, by one thread.
  auto each_token = [&](auto&& fn) {
    parallel_for_chunked(T, 4, [&](int64_t t0, int64_t t1) {
      for (int64_t t = t0; t < t1; ++t) fn(t);
    });
  };
  const float emb_scale = std::sqrt(static_cast<float>(d));
  each_token([&](int64_t t) {
    float* xt = x.data() + t * d;
    dequantize_row(tok_embd_, tokens[static_cast<size_t>(t)], xt);
    for (int64_t i = 0; i < d; ++i) xt[i] *= emb_scale;
  });

  // per-layer inputs [T, L, P]
  std::vector<float> ple;
  if (P > 0) {
    ple.resize(static_cast<size_t>(T * L * P));
    mm(ple_model_proj_, x.data(), T, ple.data());
    const float proj_scale = 1.0f / std::sqrt(static_cast<float>(d));
    const float tok_scale = std::sqrt(static_cast<float>(P));
    const float in_scale = 1.0f / std::sqrt(2.0f);
    each_token([&](int64_t t) {
      thread_local std::vector<float> tokp;
      tokp.resize(static_cast<size_t>(L * P));
      dequantize_row(ple_tok_, tokens[static_cast<size_t>(t)], tokp.data());
      for (int64_t l = 0; l < L; ++l) {
        float* pr = ple.data() + (t * L + l) * P;
        for (int64_t i = 0; i < P; ++i) pr[i] *= proj_scale;
        rms_norm(pr, P, c.eps, ple_proj_norm_.data(), pr);
        const float* tp = tokp.data() + l * P;
        for (int64_t i = 0; i < P; ++i) pr[i] = (pr[i] + tp[i] * tok_scale) * in_scale;
      }
    });
  }

  st->reserve_full(n_past + T);
  // K/V of this batch per owning layer (f16 or f32, as stored), committed to the caches after the
  // last layer so that KV-shared layers see the same (cache + batch) view as their source layer.
  std::vector<std::vector<uint8_t>> bk(static_cast<size_t>(L)), bv(static_cast<size_t>(L));
  // llama.cpp's CPU flash attention takes its vector kernel for ubatches under 64 tokens and its
  // tiled kernel otherwise; we follow the same split.
  const bool tiled = attn_mode_ == 0 ? T >= 64 : attn_mode_ == 2;
  // a decode step over 512+ cells is split among llama.cpp's threads: assumed to be ours
  const int split_threads = T == 1 ? (ggml_threads_ > 0 ? ggml_threads_ : num_threads()) : 0;

  std::vector<float> u(static_cast<size_t>(T * d)), tmp(static_cast<size_t>(T * d)), f(static_cast<size_t>(T * d));
  std::vector<float> q, kr, vr, att;
  for (int64_t l = 0; l < L; ++l) {
    const Layer& ly = layers_[static_cast<size_t>(l)];
    const bool swa = c.swa(l);
    const int64_t hd = c.head_dim(l);
    const int64_t src = c.kv_source(l);
    const int64_t hkv = c.n_head_kv[static_cast<size_t>(src)];
    const int64_t kvw = hkv * hd;
    each_token([&](int64_t t) { rms_norm(x.data() + t * d, d, c.eps, ly.attn_norm.data(), u.data() + t * d); });

    q.resize(static_cast<size_t>(T * H * hd));
    mm(ly.wq, u.data(), T, q.data());
    each_token([&](int64_t t) {
      float* qt = q.data() + t * H * hd;
      for (int64_t h = 0; h < H; ++h) rms_norm(qt + h * hd, hd, c.eps, ly.q_norm.data(), qt + h * hd);
      rope(qt, H, hd, n_past + t, swa);
    });
    if (ly.owns_kv) {
      kr.resize(static_cast<size_t>(T * kvw));
      vr.resize(static_cast<size_t>(T * kvw));
      mm(ly.wk, u.data(), T, kr.data());
      if (ly.has_v) mm(ly.wv, u.data(), T, vr.data());
      else vr = kr;  // V from the raw K projection
      each_token([&](int64_t t) {
        float* kt = kr.data() + t * kvw;
        float* vt = vr.data() + t * kvw;
        for (int64_t h = 0; h < hkv; ++h) {
          rms_norm(kt + h * hd, hd, c.eps, ly.k_norm.data(), kt + h * hd);
          rms_norm(vt + h * hd, hd, c.eps, nullptr, vt + h * hd);
        }
        rope(kt, hkv, hd, n_past + t, swa);
      });
      auto& K = bk[static_cast<size_t>(l)];
      auto& V = bv[static_cast<size_t>(l)];
      const size_t n = static_cast<size_t>(T * kvw);
      if (kv_f32_) {
        K.resize(n * 4);
        V.resize(n * 4);
        std::memcpy(K.data(), kr.data(), n * 4);
        std::memcpy(V.data(), vr.data(), n * 4);
      } else {
        K.resize(n * 2);
        V.resize(n * 2);
        uint16_t* k16 = reinterpret_cast<uint16_t*>(K.data());
        uint16_t* v16 = reinterpret_cast<uint16_t*>(V.data());
        for (size_t i = 0; i < n; ++i) {
          k16[i] = f32_to_f16(kr[i]);
          v16[i] = f32_to_f16(vr[i]);
        }
      }
    }

    // attention (scale 1.0) over cache positions [lo, n_past) and batch positions ≤ p, as
    // ggml's flash attention (cell = position: llama.cpp fills its caches in order)
    const LayerCache& lc = st->caches_[static_cast<size_t>(src)];
    const std::vector<uint8_t>& K = bk[static_cast<size_t>(src)];
    const std::vector<uint8_t>& V = bv[static_cast<size_t>(src)];
    const int64_t group = H / hkv;
    const size_t esz = lc.esz;
    att.assign(static_cast<size_t>(T * H * hd), 0.0f);
    // Cell j's K/V row of KV head kh: this batch's rows past n_past, else the cache's.
    auto kv_row = [&](int64_t j, int64_t kh, bool is_v) -> const void* {
      if (j >= n_past)
        return (is_v ? V : K).data() + static_cast<size_t>((j - n_past) * kvw + kh * hd) * esz;
      return (is_v ? lc.v : lc.k).data() + static_cast<size_t>((lc.ring ? j % lc.cap : j) * kvw + kh * hd) * esz;
    };
    const int64_t lo_first = swa ? std::max<int64_t>(0, n_past - c.window + 1) : 0;
    const int64_t p_last = n_past + T - 1;
    // The row lists of cells [lo, hi] of KV head kh.
    auto cell_rows = [&](int64_t lo, int64_t hi, int64_t kh, std::vector<const void*>& kr, std::vector<const void*>& vr) {
      kr.resize(static_cast<size_t>(hi - lo + 1));
      vr.resize(kr.size());
      for (int64_t j = lo; j <= hi; ++j) {
        kr[static_cast<size_t>(j - lo)] = kv_row(j, kh, false);
        vr[static_cast<size_t>(j - lo)] = kv_row(j, kh, true);
      }
    };
    if (tiled && attn_mode_ != 3 && ggml_fa_avx512_ok(lanes_, hd)) {
#if defined(OXI_GEMMA4_FA_AVX512)
      // The tiled kernel on AVX-512: every KV head's cells in f32 tiles once, then per token and KV
      // head its group of query heads (K/V read once for up to 8 of them), in parallel.
      constexpr int64_t kTile = 64;
      const int64_t tile0 = lo_first / kTile * kTile, n_cells = p_last - lo_first + 1;
      const size_t per_head = static_cast<size_t>((p_last + 1 - tile0 + kTile - 1) / kTile * kTile * hd);
      thread_local std::vector<float> tl_tiles_k, tl_tiles_v;  // grows; named here, used by the pool
      std::vector<float>& kv_tiles_k = tl_tiles_k;
      std::vector<float>& kv_tiles_v = tl_tiles_v;
      kv_tiles_k.resize(per_head * static_cast<size_t>(hkv));
      kv_tiles_v.resize(per_head * static_cast<size_t>(hkv));
      parallel_for(hkv, [&](int64_t kh) {
        std::vector<const void*> kr, vr;
        cell_rows(lo_first, p_last, kh, kr, vr);
        fa_avx512::prepare(kr.data(), vr.data(), lo_first, n_cells, esz == 2, hd, kv_tiles_k.data() + per_head * static_cast<size_t>(kh),
                           kv_tiles_v.data() + per_head * static_cast<size_t>(kh));
      });
      parallel_for(T * hkv, [&](int64_t u) {
        const int64_t t = u / hkv, kh = u % hkv, p = n_past + t;
        const int64_t lo = swa ? std::max<int64_t>(0, p - c.window + 1) : 0;
        thread_local std::vector<float> acc;
        thread_local std::vector<const float*> qs;
        thread_local std::vector<float*> outs;
        acc.resize(static_cast<size_t>(std::min<int64_t>(group, 8) * hd));
        qs.resize(static_cast<size_t>(group));
        outs.resize(static_cast<size_t>(group));
        for (int64_t g = 0; g < group; ++g) {
          qs[static_cast<size_t>(g)] = q.data() + (t * H + kh * group + g) * hd;
          outs[static_cast<size_t>(g)] = att.data() + (t * H + kh * group + g) * hd;
        }
        fa_avx512::tiled_rows(qs.data(), static_cast<int>(group), hd, kv_tiles_k.data() + per_head * static_cast<size_t>(kh),
                              kv_tiles_v.data() + per_head * static_cast<size_t>(kh), tile0, lo, p - lo + 1, acc.data(),
                              outs.data());
      });
#endif
    } else {
      // One query row (token × head) per work unit; each builds its own row lists.
      parallel_for(T * H, [&](int64_t u) {
        const int64_t t = u / H, h = u % H, kh = h / group, p = n_past + t;
        const int64_t lo = swa ? std::max<int64_t>(0, p - c.window + 1) : 0;
        const int64_t n = p - lo + 1;
        // llama.cpp's cache view: the used cells padded to 256 (its cache holding the sequence)
        const int64_t n_view = std::max<int64_t>(256, (p + 256) / 256 * 256);
        thread_local std::vector<const void*> krows, vrows;
        cell_rows(lo, p, kh, krows, vrows);
        const float* qh = q.data() + (t * H + h) * hd;
        float* oh = att.data() + (t * H + h) * hd;
        if (attn_mode_ == 3)
          ggml_attn_row_noflash(qh, hd, krows.data(), vrows.data(), lo, n, esz == 2, T >= 2, H == 1, lanes_, oh);
        else
          ggml_flash_attn_row(qh, hd, krows.data(), vrows.data(), lo, n, esz == 2, tiled, lanes_, oh, n_view, split_threads);
      });
    }
    mm(ly.wo, att.data(), T, tmp.data());
    each_token([&](int64_t t) {
      float* at = tmp.data() + t * d;
      rms_norm(at, d, c.eps, ly.post_attn_norm.data(), at);
      float* xt = x.data() + t * d;
      for (int64_t i = 0; i < d; ++i) xt[i] = at[i] + xt[i];
    });

    // feed-forward
    const int64_t ff = c.n_ff[static_cast<size_t>(l)];
    each_token([&](int64_t t) { rms_norm(x.data() + t * d, d, c.eps, ly.ffn_norm.data(), u.data() + t * d); });
    ffn_dense(ly, u.data(), T, f.data(), ff);
    if (ly.moe) {
      each_token([&](int64_t t) { rms_norm(f.data() + t * d, d, c.eps, ly.post_ffn_norm1.data(), f.data() + t * d); });
      each_token([&](int64_t t) { rms_norm(x.data() + t * d, d, c.eps, ly.pre_ffn_norm2.data(), u.data() + t * d); });
      ffn_moe(ly, u.data(), x.data(), T, tmp.data());
      each_token([&](int64_t t) {
        float* mt = tmp.data() + t * d;
        rms_norm(mt, d, c.eps, ly.post_ffn_norm2.data(), mt);
        float* ft = f.data() + t * d;
        for (int64_t i = 0; i < d; ++i) ft[i] = ft[i] + mt[i];
      });
    }
    each_token([&](int64_t t) {
      float* ft = f.data() + t * d;
      rms_norm(ft, d, c.eps, ly.post_ffn_norm.data(), ft);
      float* xt = x.data() + t * d;
      for (int64_t i = 0; i < d; ++i) xt[i] = ft[i] + xt[i];
    });

    // per-layer embedding
    if (P > 0) {
      std::vector<float> g(static_cast<size_t>(T * P));
      mm(ly.ple_gate, x.data(), T, g.data());
      each_token([&](int64_t t) {
        const float* pl = ple.data() + (t * L + l) * P;
        float* gt = g.data() + t * P;
        geglu(gt, pl, P);
      });
      mm(ly.ple_proj, g.data(), T, tmp.data());
      each_token([&](int64_t t) {
        float* pt = tmp.data() + t * d;
        rms_norm(pt, d, c.eps, ly.ple_post_norm.data(), pt);
        float* xt = x.data() + t * d;
        for (int64_t i = 0; i < d; ++i) xt[i] = xt[i] + pt[i];
      });
    }
    if (ly.out_scale != 1.0f)
      for (float& v : x) v *= ly.out_scale;
  }

  // commit this batch's K/V
  for (int64_t l = 0; l < c.n_layer_kv(); ++l) {
    LayerCache& lc = st->caches_[static_cast<size_t>(l)];
    const auto& K = bk[static_cast<size_t>(l)];
    const auto& V = bv[static_cast<size_t>(l)];
    const int64_t first = lc.ring ? std::max<int64_t>(0, T - lc.cap) : 0;
    for (int64_t t = first; t < T; ++t) {
      const int64_t pos = n_past + t;
      const int64_t slot = lc.ring ? pos % lc.cap : pos;
      const size_t rb = lc.row_bytes();
      std::memcpy(lc.k.data() + static_cast<size_t>(slot) * rb, K.data() + static_cast<size_t>(t) * rb, rb);
      std::memcpy(lc.v.data() + static_cast<size_t>(slot) * rb, V.data() + static_cast<size_t>(t) * rb, rb);
    }
  }
  st->n_past_ = n_past + T;

  // head
  const int64_t t0 = all_logits ? 0 : T - 1;
  const int64_t nt = T - t0;
  for (int64_t t = t0; t < T; ++t) rms_norm(x.data() + t * d, d, c.eps, output_norm_.data(), u.data() + (t - t0) * d);
  mm(output_, u.data(), nt, logits);
  if (c.final_softcap > 0.0f) {
    // Vector tanh (kernels/fused.h): the per-element libm tanhf over a 262k vocabulary took
    // ~2 ms of one thread per token (5 % of E2B decode) while the other waited.
    softcap(logits, logits, nt * c.n_vocab, c.final_softcap);
  }
}

}  // namespace

float gelu_ggml(float x) { return ggml_gelu(x); }

float gelu_tanh_exact(float x) { return gelu_f32(x); }

}  // namespace gemma4

std::unique_ptr<Model> load_gemma4(const ModelFiles& files, const LoadOptions& options) {
  gemma4::Config cfg = files.kind == ModelFileKind::kHf ? gemma4::config_from_hf(*files.hf)
                                                        : gemma4::config_from_gguf(*files.gguf, files.path);
  return std::make_unique<gemma4::Gemma4Model>(files, std::move(cfg), options);
}

}  // namespace oxi
