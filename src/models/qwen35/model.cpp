// Qwen 3.5 / 3.6 (dense `qwen35`, MoE `qwen35moe`) on the CPU: hybrid Gated DeltaNet + gated full
// attention. Loads HF checkpoints (zero-centred norms → 1 + w, grouped V-head order, A_log) and
// GGUF files (llama.cpp conventions: norms already +1, tiled V-head order, ssm_a = −exp(A_log)).
// See docs/qwen35.md for the decisions and measured agreement with llama.cpp.
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <memory>
#include <numeric>

#include "core/error.h"
#include "core/half.h"
#include "core/log.h"
#include "kernels/fused.h"
#include "kernels/matmul.h"
#include "kernels/quant.h"
#include "kernels/thread_pool.h"
#include "nn/ops.h"
#include "models/common/quant_rule.h"
#include "models/common/weight_source.h"
#include "models/common/weights.h"
#include "models/model.h"
#include "models/qwen35/config.h"
#include "models/qwen35/device_forward.h"
#include "models/qwen35/gdn.h"
#include "models/qwen35/layers.h"
#include "models/qwen35/tensor_names.h"
#include "nn/hadamard.h"
#include "nn/kv_cache.h"
#include "nn/ffn.h"
#include "nn/moe.h"
#include "nn/recurrent_state.h"

namespace oxi {

namespace qwen35 {
namespace {

constexpr uint32_t kSnapMagic = 0x36335158;  // "XQ36" (shared-block layout)

// Per-thread f32 work buffers of one forward pass, reused across layers and calls: no zeroing and
// no fresh pages per batch (every user writes a buffer fully before reading it).
enum Buf : int { kH, kU, kO, kX, kXr, kZ, kB, kA, kCv, kCore, kQg, kK, kV, kAtt, kKT, kNumBufs };
float* buf(Buf slot, int64_t n) {
  thread_local std::unique_ptr<float[]> p[kNumBufs];
  thread_local int64_t cap[kNumBufs] = {};
  if (cap[slot] < n) {
    p[slot].reset(new float[static_cast<size_t>(n)]);
    cap[slot] = n;
  }
  return p[slot].get();
}

// Token-parallel loop for the per-token elementwise parts of prefill (chunks of 8 tokens).
template <class F>
void for_tokens(int64_t n, F&& fn) {
  parallel_for_chunked(n, 8, [&](int64_t t0, int64_t t1) {
    for (int64_t t = t0; t < t1; ++t) fn(t);
  });
}

// The key head of value head hh: GGUF tiles value heads over key heads, HF groups them.
inline int64_t key_head(const Config& c, bool tiled, int64_t hh) { return tiled ? hh % c.hk : hh / (c.hv / c.hk); }

// Recurrence inputs of one token as the model records them for rollback: its conv output row
// (q, k scaled and normed; v) of conv_dim floats, then g and β per value head.
int64_t rec_width(const Config& c) { return c.conv_dim() + 2 * c.hv; }

class State final : public SequenceState {
 public:
  State(const Config& c, bool tiled, nn::KvType kt, nn::KvType vt, int64_t n_ctx, int64_t rollback, int n_gdn, int n_attn)
      : c_(c), tiled_(tiled), n_ctx_(n_ctx), rollback_(rollback) {
    for (int i = 0; i < n_gdn; ++i)
      gdn_.emplace_back((c.conv_k - 1) * c.conv_dim(), c.hv * c.dk * c.dv, rec_width(c), c.conv_dim(), rollback);
    // f16 storage unless LoadOptions::kv_f32 / cache_type_k / cache_type_v (see kt_).
    for (int i = 0; i < n_attn; ++i) kv_.emplace_back(c.n_head_kv * c.head_dim, kt, vt, 0, n_ctx, 0);
  }
  int64_t n_past() const override { return n_past_; }
  int64_t n_ctx() const override { return n_ctx_; }
  void clear() override {
    n_past_ = 0;
    for (auto& g : gdn_) g.clear();
    for (auto& k : kv_) k.clear();
  }
  void truncate(int64_t n) override;
  void reserve(int64_t n_pos) override {
    for (auto& k : kv_) k.reserve(std::min(n_pos, n_ctx_));
  }
  std::vector<uint8_t> snapshot() const override {
    std::vector<uint8_t> out;
    nn::SnapWriter w{out};
    w.val<uint32_t>(kSnapMagic);
    w.val<int64_t>(n_ctx_);
    w.val<int64_t>(n_past_);
    w.val<uint64_t>(gdn_.size());
    w.val<uint64_t>(kv_.size());
    for (const auto& g : gdn_) g.save(w);
    for (const auto& k : kv_) k.save(w, n_past_);
    return out;
  }
  void restore(std::span<const uint8_t> bytes) override {
    nn::SnapReader r{bytes, "qwen35"};
    if (r.val<uint32_t>() != kSnapMagic) throw_error(ErrorCode::kInvalidArgument, "qwen35: snapshot does not belong to this model");
    const auto n_ctx = r.val<int64_t>();
    const auto past = r.val<int64_t>();
    const auto ng = r.val<uint64_t>();
    const auto na = r.val<uint64_t>();
    if (ng != gdn_.size() || na != kv_.size())
      throw_error(ErrorCode::kInvalidArgument, "qwen35: snapshot does not belong to this model");
    if (past < 0 || past > n_ctx_)
      throw_error(ErrorCode::kInvalidArgument, "qwen35: snapshot holds " + std::to_string(past) +
                                                   " tokens, more than this state's context " + std::to_string(n_ctx_));
    (void)n_ctx;
    // Into copies first: a bad snapshot leaves the state as it was.
    std::vector<nn::RecurrentState> g = gdn_;
    std::vector<nn::KvCache> k = kv_;
    for (auto& x : g) x.load(r);
    for (auto& x : k) x.load(r, past);
    if (r.left() != 0) throw_error(ErrorCode::kInvalidArgument, "qwen35: snapshot has the wrong size");
    gdn_ = std::move(g);
    kv_ = std::move(k);
    n_past_ = past;
  }

  const Config& c_;
  bool tiled_;
  int64_t n_ctx_ = 0, n_past_ = 0, rollback_ = 0;
  std::vector<nn::RecurrentState> gdn_;  // per GDN layer
  std::vector<nn::KvCache> kv_;          // per attention layer
};

// Back to n tokens: attention caches just forget the rows past n; each recurrent layer restores
// the state its last call started from and replays that call's first m recorded tokens.
void State::truncate(int64_t n) {
  if (n == n_past_) return;
  if (n < 0 || n > n_past_)
    throw_error(ErrorCode::kInvalidArgument, "qwen35: cannot truncate " + std::to_string(n_past_) + " tokens to " + std::to_string(n));
  const int64_t drop = n_past_ - n;
  if (!gdn_.empty()) {
    const int64_t rec = gdn_[0].recorded();
    if (rec < drop)
      throw_error(ErrorCode::kInvalidArgument,
                  "qwen35: the recurrent state can go back only into the last forward call's tokens (" + std::to_string(rec) +
                      " recorded, rollback " + std::to_string(rollback_) + "); asked to drop " + std::to_string(drop));
    const int64_t m = rec - drop;  // recorded tokens kept
    const int64_t C = c_.conv_dim(), Km1 = c_.conv_k - 1, Hv = c_.hv, dk = c_.dk, dv = c_.dv, KD = c_.key_dim();
    for (auto& g : gdn_) {
      // conv: the last K−1 rows of [base | raw rows 0..m)
      std::vector<float> X(static_cast<size_t>((Km1 + m) * C));
      std::copy(g.base_conv(), g.base_conv() + Km1 * C, X.begin());
      for (int64_t t = 0; t < m; ++t) std::copy(g.raw_row(t), g.raw_row(t) + C, X.begin() + (Km1 + t) * C);
      std::copy(X.begin() + m * C, X.end(), g.conv());
      std::copy(g.base_ssm(), g.base_ssm() + g.ssm_size(), g.ssm());
      if (m > 0) {
        const int64_t W = rec_width(c_);
        parallel_for(Hv, [&](int64_t hh) {
          thread_local std::vector<float> oo;
          oo.resize(static_cast<size_t>(m * dv));
          const float* r0 = g.rec_row(0);
          const int64_t kh = key_head(c_, tiled_, hh);
          GdnHeadIO io;
          io.q = r0 + kh * dk;
          io.k = r0 + KD + kh * dk;
          io.v = r0 + 2 * KD + hh * dv;
          io.qk_stride = W;
          io.v_stride = W;
          io.g = r0 + C + hh;
          io.beta = r0 + C + Hv + hh;
          io.gb_stride = W;
          io.o = oo.data();
          io.o_stride = dv;
          gdn_step(m, dk, dv, io, g.ssm() + hh * dk * dv);
        });
      }
      g.drop_record();
    }
  }
  n_past_ = n;
}

class Qwen35Model final : public Model {
 public:
  Qwen35Model(const ModelFiles& files, const LoadOptions& opt);
  const ModelInfo& info() const override { return info_; }
  std::unique_ptr<SequenceState> new_state(int64_t n_ctx, int64_t rollback) const override;
  bool has_mtp() const override { return has_mtp_; }
  std::unique_ptr<SequenceState> new_mtp_state(int64_t n_ctx) const override;
  void mtp_forward(SequenceState& st, const float* hidden, const int32_t* tokens, int64_t n, float* logits,
                   float* hidden_out) const override;
  void mtp_forward_batch(std::span<const MtpJob> jobs) const override;

 protected:
  void run(std::span<SequenceState* const> states, const Pass& pass, const BatchOutput& out) const override;

 private:
  // One loader in GGUF names over src_ (a GGUF file, or an HF checkpoint through the family's
  // name map, tensor_names.h): the trunk, one decoder block (prefix "blk.N."), the MTP block.
  void load();
  void load_layer(Layer& L, const std::string& prefix);
  void load_mtp();
  void load_draft_mtp(const GgufFile& g, const std::string& path);
  // Matrix g [rows, cols] through the quantise-at-load rule; an HF matrix is reordered into the
  // GGUF's tiled V-head order when tiled_ (quantising at load).
  MatrixView mat(const std::string& g, int64_t rows, int64_t cols);
  // A 3-D expert stack g [E, rows, cols] as one [E·rows, cols] matrix.
  MatrixView stack(const std::string& g, int64_t E, int64_t rows, int64_t cols);
  // Small f32 tensor g of GGUF shape `shape`; from an HF checkpoint with the table's transform
  // (1 + w, −exp, conv [C, 1, K] → [C, K]) and, when tiled_, the tiled V-head order.
  std::vector<float> vec(const std::string& g, const std::vector<int64_t>& shape);
  // Mixers over a pass: sts[i] is the state of pass.segs[i].
  void gdn_forward(const Layer& L, const Pass& p, State* const* sts, const float* u, float* out) const;
  void attn_forward(const Layer& L, const Pass& p, State* const* sts, const float* u, float* out) const;
  void ffn_forward(const Layer& L, const float* u, int64_t n, float* out) const;
  // attn_forward's attention for caches with a q8_0 (or mixed) type, see kt_: every (entry, head)
  // of the pass, gated; qg [n, 2·H·hd] (query, gate), att [n, H·hd].
  void attn_generic(const Layer& L, const Pass& p, State* const* sts, const float* qg, float* att) const;

  Config c_;
  ModelInfo info_;
  // V-head order: GGUF tiled (k head = h % Hk) vs HF grouped (h / (Hv/Hk)). HF loads that quantise
  // store the GGUF order (so their bytes equal a converted file's).
  bool tiled_ = false;
  wt::LoadQuant lq_;  // LoadOptions::quant
  // K and V are stored as f16 (half the memory of f32 rows) and q / softmax weights rounded to
  // f16 in their products, as llama.cpp's default CPU attention does (f16 KV cache); the
  // attention kernels read the f16 rows directly (attend_one_f16 / attend_causal_f16).
  // LoadOptions::kv_f32 (or OXI_KV_F32=1) stores f32 rows and keeps everything f32 (exactness
  // tests).
  bool kv_f16_ = true;
  // Cache types (LoadOptions::cache_type_k / _v). Any q8_0 (or K and V of different types) takes
  // attn_generic: per (token, head) scores by the K type's dot (q8_0: q quantised to Q8_0 and the
  // Q8_0 dot, as ggml scores a q8_0 K; f16: q rounded to f16), an f32 softmax, then V by its
  // type: q8_0 rows dequantised to f32 and accumulated in f32 with f32 weights (llama.cpp's flash
  // attention, which a quantised V needs there), f16 with the weights rounded to f16 (ggml's
  // non-flash f16 product), f32 as is.
  nn::KvType kt_ = nn::KvType::kF16, vt_ = nn::KvType::kF16;
  bool kv_generic_ = false;
  // llama.cpp's attention rotation (nn/hadamard.h), only with a quantised cache type: rot_k_ > 0
  // (the block size, a power of two ≥ 64 dividing hd) rotates q and k after their norm and RoPE
  // when K is q8_0; rot_v_ (64) rotates v before it is stored and each head's attention output
  // back, before the gate, when V is q8_0. 0: off (f16 / f32 caches, hd % 64 ≠ 0, or
  // OXI_ATTN_ROT_DISABLE=1 at load).
  int64_t rot_k_ = 0, rot_v_ = 0;
  wt::Arena arena_;
  wt::WeightSource src_;  // the file being read, by GGUF name (mapped: an HF checkpoint)
  std::string lm_;        // HF language-model prefix (hf_lm_prefix; "" for GGUF files)
  MatrixView embd_, output_;
  std::vector<float> out_norm_;
  std::vector<Layer> layers_;
  int n_gdn_ = 0, n_attn_ = 0;
  // LoadOptions::device: the whole pass on that device (device_forward.h); null: the CPU path here.
  std::unique_ptr<DeviceForward> dev_;
  // The MTP head (loaded when the files have one); it runs on the CPU whatever the device.
  struct Mtp {
    MatrixView fc;  // [d, 2d]: input [norm(E[x]), norm(h)]
    std::vector<float> enorm, hnorm, norm;
    Layer layer;  // full attention (cache 0 of an MTP state) + the trunk's FFN kind
  } mtp_;
  bool has_mtp_ = false;
};

MatrixView Qwen35Model::mat(const std::string& g, int64_t rows, int64_t cols) {
  std::vector<int64_t> row_perm, col_perm;
  if (src_.mapped() && tiled_) {
    const HfTensor h = hf_tensor(g, lm_, c_.n_layer);
    (h.vheads == VHeads::kValueCols ? col_perm : row_perm) = vhead_order(c_, h.vheads);
  }
  return src_.matrix(g, rows, cols, lq_, arena_, row_perm, col_perm);
}

MatrixView Qwen35Model::stack(const std::string& g, int64_t E, int64_t rows, int64_t cols) {
  return src_.stack(g, E, rows, cols, lq_, arena_);
}

std::vector<float> Qwen35Model::vec(const std::string& g, const std::vector<int64_t>& shape) {
  // Any stored type (an MLX checkpoint's router is group-quantised), as wt::to_f32 reads it.
  if (!src_.mapped()) return src_.to_f32(g, shape);
  const HfTensor h = hf_tensor(g, lm_, c_.n_layer);
  std::vector<float> v = src_.to_f32(g, hf_shape(h, shape));
  apply_fix(h.fix, v.data(), static_cast<int64_t>(v.size()));
  const std::vector<int64_t> order = tiled_ ? vhead_order(c_, h.vheads) : std::vector<int64_t>{};
  if (order.empty()) return v;
  // Rows of row_len values (1-D per-head vectors: one value a row) into the GGUF order.
  const int64_t row_len = shape.size() == 1 ? 1 : shape.back();
  std::vector<float> out(v.size());
  for (size_t r = 0; r < order.size(); ++r)
    std::copy_n(v.begin() + order[r] * row_len, row_len, out.begin() + static_cast<std::ptrdiff_t>(r) * row_len);
  return out;
}

Qwen35Model::Qwen35Model(const ModelFiles& files, const LoadOptions& opt) {
  if (opt.n_threads > 0) set_num_threads(opt.n_threads);
  kv_f16_ = !opt.kv_f32;
  if (const char* e = std::getenv("OXI_KV_F32"); e && *e && std::string(e) != "0") kv_f16_ = false;
  kt_ = kv_f16_ ? opt.cache_type_k : nn::KvType::kF32;
  vt_ = kv_f16_ ? opt.cache_type_v : nn::KvType::kF32;
  if (kt_ == nn::KvType::kF32 && vt_ == nn::KvType::kF32) kv_f16_ = false;  // -ctk f32 -ctv f32: the f32 path
  kv_generic_ = kt_ != vt_ || nn::kv_quantised(kt_);
  if (nn::kv_quantised(vt_) && opt.attention == AttentionPath::kNoFlash)
    throw_error(ErrorCode::kInvalidArgument, std::string("cache type ") + nn::kv_type_name(vt_) +
                                                 " for V needs flash attention (as in llama.cpp): drop -fa off");
  if ((kt_ != nn::KvType::kF16 || vt_ != nn::KvType::kF16) && kv_f16_ && opt.device)
    throw_error(ErrorCode::kInvalidArgument, "--cache-type-k / --cache-type-v apply to the CPU path; a device keeps its own cache");
  auto set_rule = [&] {
    if (!opt.quant.empty()) lq_.rule = QuantRule{parse_quant_type(opt.quant), c_.moe ? c_.n_expert : 0, !c_.tied};
    lq_.start_progress(files.tensors());
  };
  if (files.gguf) {
    c_ = config_from_gguf(*files.gguf, files.path);
    tiled_ = true;
    set_rule();
    src_ = wt::WeightSource(&files.gguf->tensors, files.path);
    load();
    info_.name = files.gguf->metadata.get_string("general.name", "");
  } else if (files.hf) {
    c_ = config_from_hf(*files.hf);
    set_rule();
    // HF grouped V-head order as stored, unless quantising: then the GGUF (tiled) order, as the
    // converter writes it, so the quantised rows are the ones a converted file would hold.
    tiled_ = lq_.rule && c_.hk != c_.hv;
    lm_ = hf_lm_prefix(files.hf->tensors);
    src_ = wt::WeightSource(&files.hf->tensors, files.hf->dir,
                            [this](const std::string& g) { return hf_tensor(g, lm_, c_.n_layer).name; });
    load();
  } else {
    throw_error(ErrorCode::kInvalidArgument, files.path + ": no model files");
  }
  if (opt.draft) {
    if (!opt.draft->gguf)
      throw_error(ErrorCode::kInvalidArgument, opt.draft_path + ": a Qwen 3.5 draft (MTP) must be a GGUF file (an HF checkpoint's own mtp.* "
                                                                "tensors are read with the model itself)");
    load_draft_mtp(*opt.draft->gguf, opt.draft_path);
  }
  // Attention rotation (see rot_k_), now that the head size is known.
  if (!nn::attn_rot_disabled()) {
    if (nn::kv_quantised(kt_)) rot_k_ = nn::hadamard_k_block(c_.head_dim);
    if (nn::kv_quantised(vt_)) rot_v_ = nn::hadamard_v_block(c_.head_dim);
  }
  if (info_.name.empty()) info_.name = std::filesystem::path(files.path).filename().string();
  info_.arch = c_.arch;
  info_.n_vocab = output_.rows;
  info_.n_embd = c_.n_embd;
  info_.n_layer = c_.n_layer;
  info_.n_ctx_train = c_.n_ctx_train;
  for (const auto& [name, t] : files.tensors().all()) {
    info_.n_params += static_cast<uint64_t>(t.n_elements());
    info_.weight_bytes += t.nbytes;
  }
  lq_.end_progress();
  info_.weight_bytes = lq_.resident(info_.weight_bytes);
  int g = 0, a = 0;
  for (auto& L : layers_) L.cache = L.recurrent ? g++ : a++;
  // Conv taps [C, K] → [K, C]: the conv runs over channels with vectors (kernels/fused.h).
  for (auto& L : layers_) {
    if (!L.recurrent) continue;
    const int64_t C = c_.conv_dim(), K = c_.conv_k;
    std::vector<float> t(L.gdn.conv.size());
    for (int64_t ch = 0; ch < C; ++ch)
      for (int64_t j = 0; j < K; ++j) t[static_cast<size_t>(j * C + ch)] = L.gdn.conv[static_cast<size_t>(ch * K + j)];
    L.gdn.conv = std::move(t);
  }
  n_gdn_ = g;
  n_attn_ = a;
  if (opt.device) dev_ = std::make_unique<DeviceForward>(opt.device, c_, tiled_, embd_, output_, out_norm_, layers_);
}

void Qwen35Model::load() {
  const int64_t d = c_.n_embd;
  // The vocab is the embedding's row count (config vocab_size is checked against it).
  embd_ = mat("token_embd.weight", c_.n_vocab, d);
  out_norm_ = vec("output_norm.weight", {d});
  output_ = c_.tied ? embd_ : mat("output.weight", c_.n_vocab, d);
  layers_.resize(static_cast<size_t>(c_.n_layer));
  for (int64_t i = 0; i < c_.n_layer; ++i) {
    Layer& L = layers_[static_cast<size_t>(i)];
    L.recurrent = c_.recurrent[static_cast<size_t>(i)];
    load_layer(L, "blk." + std::to_string(i) + ".");
  }
  if (c_.n_mtp > 0) load_mtp();
}

// The MTP block (spec A.5): a full-attention decoder block behind fc · [norm(E[x]), norm(h)];
// block n_layer (nextn_predict_layers = 1), llama.cpp's nextn.* names (HF mtp.*). A file whose
// MTP tensors were left out (llama.cpp converter's --no-mtp, stripped checkpoints) has no head.
void Qwen35Model::load_mtp() {
  const int64_t d = c_.n_embd;
  const std::string b = "blk." + std::to_string(c_.n_layer) + ".";
  if (!src_.find(b + "nextn.eh_proj.weight")) return;
  mtp_.fc = mat(b + "nextn.eh_proj.weight", d, 2 * d);
  mtp_.enorm = vec(b + "nextn.enorm.weight", {d});
  mtp_.hnorm = vec(b + "nextn.hnorm.weight", {d});
  mtp_.norm = src_.find(b + "nextn.shared_head_norm.weight") ? vec(b + "nextn.shared_head_norm.weight", {d}) : out_norm_;
  mtp_.layer = Layer{};
  load_layer(mtp_.layer, b);
  mtp_.layer.cache = 0;
  has_mtp_ = true;
}

// The MTP head from a draft file (LoadOptions::draft): an MTP-only GGUF as llama.cpp's converter
// writes it with --mtp (block_count = n_layer + 1, nextn_predict_layers = 1, only block n_layer
// plus token_embd / output_norm / output). Its trunk shape must be the model's; the embedding and
// output head stay the model's own (the file's copies are the same matrices; keeping one copy
// saves vocab × n_embd twice over).
void Qwen35Model::load_draft_mtp(const GgufFile& g, const std::string& path) {
  const Config dc = config_from_gguf(g, path);
  auto differ = [&](const char* what, int64_t a, int64_t b) {
    if (a != b)
      throw_error(ErrorCode::kFormat, path + ": the draft (MTP) file does not fit the model: " + what + " " + std::to_string(b) +
                                          ", the model has " + std::to_string(a));
  };
  if (dc.arch != c_.arch) throw_error(ErrorCode::kFormat, path + ": the draft (MTP) file is " + dc.arch + ", the model " + c_.arch);
  if (dc.n_mtp <= 0) throw_error(ErrorCode::kFormat, path + ": not an MTP file (no " + dc.arch + ".nextn_predict_layers)");
  differ("block count (without the MTP block)", c_.n_layer, dc.n_layer);
  differ("embedding length", c_.n_embd, dc.n_embd);
  differ("vocabulary", c_.n_vocab, dc.n_vocab);
  differ("attention heads", c_.n_head, dc.n_head);
  differ("KV heads", c_.n_head_kv, dc.n_head_kv);
  differ("head dim", c_.head_dim, dc.head_dim);
  differ("feed-forward length", c_.moe ? c_.n_ff_exp : c_.n_ff, dc.moe ? dc.n_ff_exp : dc.n_ff);
  differ("experts", c_.n_expert, dc.n_expert);
  differ("shared expert length", c_.n_ff_shexp, dc.n_ff_shexp);
  const std::string b = "blk." + std::to_string(c_.n_layer) + ".";
  if (!g.tensors.contains(b + "nextn.eh_proj.weight")) throw_error(ErrorCode::kFormat, path + ": no MTP block (" + b + "nextn.*)");
  const int64_t n_mtp = c_.n_mtp;
  c_.n_mtp = dc.n_mtp;
  // The draft is read through its own source (GGUF names as they are), then the model's again.
  wt::WeightSource model_src = std::move(src_);
  src_ = wt::WeightSource(&g.tensors, path);
  try {
    load_mtp();
  } catch (...) {
    c_.n_mtp = n_mtp;
    src_ = std::move(model_src);
    throw;
  }
  src_ = std::move(model_src);
}

// One decoder block, GGUF prefix p ("blk.N."), from a GGUF file or an HF checkpoint.
void Qwen35Model::load_layer(Layer& L, const std::string& p) {
  const int64_t d = c_.n_embd;
  const int64_t Hv = c_.hv, C = c_.conv_dim(), VD = c_.value_dim();
  const bool hf = src_.mapped();
  L.attn_norm = vec(p + "attn_norm.weight", {d});
  L.post_norm = vec(p + "post_attention_norm.weight", {d});
  if (L.recurrent) {
    L.gdn.qkv = mat(p + "attn_qkv.weight", C, d);
    L.gdn.z = mat(p + "attn_gate.weight", VD, d);
    L.gdn.b = mat(p + "ssm_beta.weight", Hv, d);
    L.gdn.a = mat(p + "ssm_alpha.weight", Hv, d);
    L.gdn.out = mat(p + "ssm_out.weight", d, VD);
    L.gdn.conv = vec(p + "ssm_conv1d.weight", {C, c_.conv_k});  // [C, K]; transposed after load
    L.gdn.ssm_a = vec(p + "ssm_a", {Hv});
    L.gdn.dt_bias = vec(p + "ssm_dt.bias", {Hv});
    L.gdn.norm = vec(p + "ssm_norm.weight", {c_.dv});
  } else {
    const int64_t H = c_.n_head, Hkv = c_.n_head_kv, hd = c_.head_dim;
    L.attn.q = mat(p + "attn_q.weight", 2 * H * hd, d);  // query and gate rows per head
    L.attn.k = mat(p + "attn_k.weight", Hkv * hd, d);
    L.attn.v = mat(p + "attn_v.weight", Hkv * hd, d);
    L.attn.o = mat(p + "attn_output.weight", d, H * hd);
    L.attn.q_norm = vec(p + "attn_q_norm.weight", {hd});
    L.attn.k_norm = vec(p + "attn_k_norm.weight", {hd});
  }
  if (!c_.moe) {
    L.ffn.gate = mat(p + "ffn_gate.weight", c_.n_ff, d);
    L.ffn.up = mat(p + "ffn_up.weight", c_.n_ff, d);
    L.ffn.down = mat(p + "ffn_down.weight", d, c_.n_ff);
    return;
  }
  const int64_t E = c_.n_expert, I = c_.n_ff_exp;
  // Router [E, d]: an HF one in f32, as the converter stores it (HF and GGUF route alike).
  L.ffn.router = hf ? arena_.own_matrix(vec(p + "ffn_gate_inp.weight", {E, d}), E, d) : mat(p + "ffn_gate_inp.weight", E, d);
  // Experts: fused gate_up [E, 2I, d] (HF experts.gate_up_proj; GGUF ffn_gate_up_exps), separate
  // GGUF stacks [E, I, d], or an older HF checkpoint's per-expert matrices; down [E, d, I].
  const bool fused = !src_.find(p + "ffn_gate_exps.weight") && src_.find(p + "ffn_gate_up_exps.weight");
  if (hf && !fused) {
    for (int64_t e = 0; e < E; ++e) {
      auto expert = [&](const char* g, int64_t rows, int64_t cols) {
        const TensorInfo& t = src_.need_file(hf_expert_name(p + g, e, lm_, c_.n_layer), {rows, cols});
        return src_.matrix(t, p + g, 2, rows, cols, lq_, arena_);
      };
      L.ffn.exp_gate.push_back(expert("ffn_gate_exps.weight", I, d));
      L.ffn.exp_up.push_back(expert("ffn_up_exps.weight", I, d));
      L.ffn.exp_down.push_back(expert("ffn_down_exps.weight", d, I));
    }
  } else {
    MatrixView gv, uv;
    if (fused) {
      gv = stack(p + "ffn_gate_up_exps.weight", E, 2 * I, d);
    } else {
      gv = stack(p + "ffn_gate_exps.weight", E, I, d);
      uv = stack(p + "ffn_up_exps.weight", E, I, d);
    }
    MatrixView dv = stack(p + "ffn_down_exps.weight", E, d, I);
    for (int64_t e = 0; e < E; ++e) {
      if (fused) {
        L.ffn.exp_gate.push_back(wt::sub_rows(gv, e * 2 * I, I));
        L.ffn.exp_up.push_back(wt::sub_rows(gv, e * 2 * I + I, I));
      } else {
        L.ffn.exp_gate.push_back(wt::sub_rows(gv, e * I, I));
        L.ffn.exp_up.push_back(wt::sub_rows(uv, e * I, I));
      }
      L.ffn.exp_down.push_back(wt::sub_rows(dv, e * d, d));
    }
  }
  // Shared expert (+ its sigmoid gate [d]; HF [1, d]). A GGUF without the metadata key tells by
  // the tensor, its width from the tensor's rows.
  if (c_.n_ff_shexp > 0 || (!hf && src_.find(p + "ffn_gate_shexp.weight"))) {
    const int64_t S = c_.n_ff_shexp > 0 ? c_.n_ff_shexp : src_.need(p + "ffn_gate_shexp.weight", {-1, d}).shape[0];
    L.ffn.has_shared = true;
    L.ffn.sh_gate = mat(p + "ffn_gate_shexp.weight", S, d);
    L.ffn.sh_up = mat(p + "ffn_up_shexp.weight", S, d);
    L.ffn.sh_down = mat(p + "ffn_down_shexp.weight", d, S);
    L.ffn.sh_inp = arena_.own_matrix(hf ? vec(p + "ffn_gate_inp_shexp.weight", {d}) : src_.to_f32_n(p + "ffn_gate_inp_shexp.weight", d), 1, d);
  }
}

std::unique_ptr<SequenceState> Qwen35Model::new_state(int64_t n_ctx, int64_t rollback) const {
  if (n_ctx <= 0) n_ctx = std::min<int64_t>(c_.n_ctx_train, 4096);
  if (n_ctx > (int64_t{1} << 24)) throw_error(ErrorCode::kInvalidArgument, "context size " + std::to_string(n_ctx) + " is too large");
  if (rollback < 0 || rollback > 64) throw_error(ErrorCode::kInvalidArgument, "rollback " + std::to_string(rollback) + " is out of range [0, 64]");
  if (dev_) return dev_->new_state(n_ctx, rollback);
  return std::make_unique<State>(c_, tiled_, kt_, vt_, n_ctx, rollback, n_gdn_, n_attn_);
}

std::unique_ptr<SequenceState> Qwen35Model::new_mtp_state(int64_t n_ctx) const {
  if (!has_mtp_) return Model::new_mtp_state(n_ctx);
  if (n_ctx <= 0) n_ctx = std::min<int64_t>(c_.n_ctx_train, 4096);
  if (n_ctx > (int64_t{1} << 24)) throw_error(ErrorCode::kInvalidArgument, "context size " + std::to_string(n_ctx) + " is too large");
  return std::make_unique<State>(c_, tiled_, kt_, vt_, n_ctx, 0, 0, 1);
}

// e = norm(E[x]), hh = norm(h); u = fc · [e, hh]; u through the MTP decoder block (its own
// attention cache, the trunk's FFN kind); the last row's output norm → hidden_out, · output head
// → logits (spec A.5; llama.cpp's qwen35 graph_mtp computes the same).
void Qwen35Model::mtp_forward(SequenceState& st, const float* hidden, const int32_t* tokens, int64_t n, float* logits,
                              float* hidden_out) const {
  if (!has_mtp_) return Model::mtp_forward(st, hidden, tokens, n, logits, hidden_out);
  if (n <= 0) return;
  const MtpJob job{&st, hidden, tokens, n, logits, hidden_out};
  mtp_forward_batch(std::span<const MtpJob>(&job, 1));
}

// Every job's pairs are rows of one pass, a segment per job: the matmuls (fc, the block's
// projections and FFN, the output head over the jobs' last rows) see all rows at once; the
// attention runs per segment on its own state, as in run().
void Qwen35Model::mtp_forward_batch(std::span<const MtpJob> jobs) const {
  check_mtp_jobs(jobs);
  std::vector<State*> sts;
  std::vector<const MtpJob*> js;  // the jobs with pairs, in order
  for (const MtpJob& j : jobs) {
    auto* s = dynamic_cast<State*>(j.state);
    if (!s || !s->gdn_.empty() || s->kv_.size() != 1) throw_error(ErrorCode::kInvalidArgument, "qwen35: not an MTP state");
    if (j.n == 0) continue;
    sts.push_back(s);
    js.push_back(&j);
  }
  if (js.empty()) return;
  const int64_t d = c_.n_embd;
  Pass p;
  std::vector<int32_t> pos;
  for (size_t i = 0; i < js.size(); ++i) {
    p.segs.push_back(Segment{static_cast<int32_t>(i), p.n, js[i]->n, sts[i]->n_past_});
    for (int64_t t = 0; t < js[i]->n; ++t) {
      p.seg_of.push_back(static_cast<int32_t>(i));
      pos.push_back(static_cast<int32_t>(sts[i]->n_past_ + t));
    }
    p.n += js[i]->n;
  }
  p.pos = pos.data();
  const int64_t n = p.n;
  // Row r of the pass: job seg_of[r], its pair r − row0.
  auto job_row = [&](int64_t r) {
    const Segment& g = p.segs[static_cast<size_t>(p.seg_of[static_cast<size_t>(r)])];
    return std::pair<const MtpJob*, int64_t>{js[static_cast<size_t>(g.state)], r - g.row0};
  };
  std::vector<float> cat(static_cast<size_t>(n * 2 * d)), h(static_cast<size_t>(n * d)), u(h.size()), o(h.size());
  for_tokens(n, [&](int64_t r) {
    const auto jr = job_row(r);
    float* ct = cat.data() + r * 2 * d;
    dequantize_row(embd_, jr.first->tokens[jr.second], ct);
    ops::rms_norm(ct, mtp_.enorm.data(), ct, d, c_.eps);
    ops::rms_norm(jr.first->hidden + jr.second * d, mtp_.hnorm.data(), ct + d, d, c_.eps);
  });
  matmul(mtp_.fc, cat.data(), n, h.data());
  const Layer& L = mtp_.layer;
  for_tokens(n, [&](int64_t t) { ops::rms_norm(h.data() + t * d, L.attn_norm.data(), u.data() + t * d, d, c_.eps); });
  attn_forward(L, p, sts.data(), u.data(), o.data());
  for_tokens(n, [&](int64_t t) {
    for (int64_t i = 0; i < d; ++i) h[static_cast<size_t>(t * d + i)] += o[static_cast<size_t>(t * d + i)];
    ops::rms_norm(h.data() + t * d, L.post_norm.data(), u.data() + t * d, d, c_.eps);
  });
  ffn_forward(L, u.data(), n, o.data());
  for (size_t i = 0; i < sts.size(); ++i) sts[i]->n_past_ += js[i]->n;
  // Each job's last row: h + FFN out, the head's output norm; the rows that want logits packed
  // (in job order) for one output-head product.
  std::vector<float> hm(js.size() * static_cast<size_t>(d)), hl;
  std::vector<size_t> want;
  for (size_t i = 0; i < js.size(); ++i) {
    const Segment& g = p.segs[i];
    float* last = h.data() + (g.row0 + g.n - 1) * d;
    const float* ol = o.data() + (g.row0 + g.n - 1) * d;
    for (int64_t k = 0; k < d; ++k) last[k] += ol[k];
    float* hi = hm.data() + i * static_cast<size_t>(d);
    ops::rms_norm(last, mtp_.norm.data(), hi, d, c_.eps);
    if (js[i]->hidden_out) std::copy(hi, hi + d, js[i]->hidden_out);
    if (js[i]->logits) {
      want.push_back(i);
      hl.insert(hl.end(), hi, hi + d);
    }
  }
  if (want.empty()) return;
  if (want.size() == 1) return matmul(output_, hl.data(), 1, js[want[0]]->logits);
  const int64_t V = output_.rows;
  std::vector<float> lg(want.size() * static_cast<size_t>(V));
  matmul(output_, hl.data(), static_cast<int64_t>(want.size()), lg.data());
  for (size_t w = 0; w < want.size(); ++w) std::copy_n(lg.data() + w * static_cast<size_t>(V), V, js[want[w]]->logits);
}

void Qwen35Model::run(std::span<SequenceState* const> states, const Pass& p, const BatchOutput& out) const {
  if (dev_) return dev_->run(states, p, out);
  std::vector<State*> sts(p.segs.size());
  for (size_t i = 0; i < p.segs.size(); ++i) {
    sts[i] = dynamic_cast<State*>(states[static_cast<size_t>(p.segs[i].state)]);
    if (!sts[i]) throw_error(ErrorCode::kInvalidArgument, "qwen35: sequence state belongs to another model");
  }
  const int64_t n = p.n, d = c_.n_embd;
  float* h = buf(kH, n * d);
  float* u = buf(kU, n * d);
  float* o = buf(kO, n * d);
  for_tokens(n, [&](int64_t t) {
    const int32_t tok = p.token_at(t);
    if (tok >= 0) dequantize_row(embd_, tok, h + t * d);
    else std::copy(p.embd + t * d, p.embd + (t + 1) * d, h + t * d);
  });
  // OXI_TRACE=1: per-layer sums of squares of the mixer and FFN outputs of the last token (debugging).
  static const bool trace = std::getenv("OXI_TRACE") != nullptr;
  auto ss = [&](const float* v) {
    double s = 0;
    for (int64_t i = (n - 1) * d; i < n * d; ++i) s += static_cast<double>(v[i]) * v[i];
    return s;
  };
  // h += o; u = rms_norm(h) · w, per token.
  auto add_norm = [&](const std::vector<float>& w) {
    for_tokens(n, [&](int64_t t) {
      float* ht = h + t * d;
      const float* ot = o + t * d;
      for (int64_t i = 0; i < d; ++i) ht[i] += ot[i];
      ops::rms_norm(ht, w.data(), u + t * d, d, c_.eps);
    });
  };
  if (!layers_.empty())
    for_tokens(n, [&](int64_t t) { ops::rms_norm(h + t * d, layers_[0].attn_norm.data(), u + t * d, d, c_.eps); });
  for (size_t li = 0; li < layers_.size(); ++li) {
    const Layer& L = layers_[li];
    if (L.recurrent) gdn_forward(L, p, sts.data(), u, o);
    else attn_forward(L, p, sts.data(), u, o);
    if (trace) std::fprintf(stderr, "layer %d %s out %.9g\n", static_cast<int>(li), L.recurrent ? "gdn" : "attn", ss(o));
    add_norm(L.post_norm);
    ffn_forward(L, u, n, o);
    if (trace) std::fprintf(stderr, "layer %d ffn out %.9g\n", static_cast<int>(li), ss(o));
    if (li + 1 < layers_.size()) {
      add_norm(layers_[li + 1].attn_norm);
    } else {
      for_tokens(n, [&](int64_t t) {
        for (int64_t i = 0; i < d; ++i) h[t * d + i] += o[t * d + i];
      });
    }
  }
  for (size_t i = 0; i < p.segs.size(); ++i) sts[i]->n_past_ += p.segs[i].n;
  if (out.hidden_all)
    for_tokens(n, [&](int64_t t) { ops::rms_norm(h + t * d, out_norm_.data(), out.hidden_all + t * d, d, c_.eps); });
  const int64_t rows = static_cast<int64_t>(p.out_rows.size());
  if (rows == 0 || (!out.logits && !out.hidden)) return;
  // The wanted rows, normed, packed into u (rows ascending: row i ≥ its slot, so in place is safe).
  for (int64_t i = 0; i < rows; ++i) ops::rms_norm(h + p.out_rows[static_cast<size_t>(i)] * d, out_norm_.data(), u + i * d, d, c_.eps);
  if (out.hidden) std::copy(u, u + rows * d, out.hidden);
  if (out.logits) matmul(output_, u, rows, out.logits);
}

void Qwen35Model::gdn_forward(const Layer& L, const Pass& p, State* const* sts, const float* u, float* out) const {
  const GdnW& w = L.gdn;
  const int64_t n = p.n, ns = static_cast<int64_t>(p.segs.size());
  const int64_t C = c_.conv_dim(), K = c_.conv_k, Hv = c_.hv, Hk = c_.hk, dk = c_.dk, dv = c_.dv;
  const int64_t KD = c_.key_dim(), VD = c_.value_dim();
  // X: per segment s, its conv state (K−1 rows) then its new rows, at row offset row0 + s·(K−1).
  float* X = buf(kX, (ns * (K - 1) + n) * C);
  float* z = buf(kZ, n * VD);
  float* b = buf(kB, n * Hv);
  float* a = buf(kA, n * Hv);
  float* cv = buf(kCv, n * C);
  float* core = buf(kCore, n * VD);
  auto region = [&](int64_t s) { return X + (p.segs[static_cast<size_t>(s)].row0 + s * (K - 1)) * C; };
  std::vector<uint8_t> rec(static_cast<size_t>(ns));
  for (int64_t s = 0; s < ns; ++s) {
    nn::RecurrentState& rs = sts[s]->gdn_[static_cast<size_t>(L.cache)];
    rec[static_cast<size_t>(s)] = rs.begin_call(p.segs[static_cast<size_t>(s)].n) ? 1 : 0;
    std::copy(rs.conv(), rs.conv() + rs.conv_size(), region(s));
  }
  {
    // One sequence: the projections land straight behind its conv state; several: gathered after.
    float* xr = ns == 1 ? X + (K - 1) * C : buf(kXr, n * C);
    const MatrixView ws[4] = {w.qkv, w.z, w.b, w.a};
    float* const ys[4] = {xr, z, b, a};
    matmul_batch(ws, ys, 4, u, n);
    if (ns > 1)
      for (int64_t s = 0; s < ns; ++s) {
        const Segment& g = p.segs[static_cast<size_t>(s)];
        std::copy(xr + g.row0 * C, xr + (g.row0 + g.n) * C, region(s) + (K - 1) * C);
      }
  }
  // Per token: causal depthwise conv over [state | new rows], then SiLU; q, k: per-head L2 norm
  // (q also scaled); β = sigmoid(b); g = ssm_a · softplus(a + dt_bias).
  const float qscale = 1.0f / std::sqrt(static_cast<float>(dk));
  for_tokens(n, [&](int64_t t) {
    const int64_t s = p.seg_of[static_cast<size_t>(t)];
    float* y = cv + t * C;
    conv_silu(region(s) + (t - p.segs[static_cast<size_t>(s)].row0) * C, w.conv.data(), C, K, y);
    for (int64_t j = 0; j < Hk; ++j) {
      float* q = y + j * dk;
      float* k = y + KD + j * dk;
      ops::l2_norm(q, dk, c_.eps);
      ops::l2_norm(k, dk, c_.eps);
      for (int64_t e = 0; e < dk; ++e) q[e] *= qscale;
    }
    for (int64_t hh = 0; hh < Hv; ++hh) {
      float& bb = b[t * Hv + hh];
      float& aa = a[t * Hv + hh];
      bb = ops::sigmoid(bb);
      aa = w.ssm_a[static_cast<size_t>(hh)] * ops::softplus(aa + w.dt_bias[static_cast<size_t>(hh)]);
    }
  });
  for (int64_t s = 0; s < ns; ++s) {
    const Segment& g = p.segs[static_cast<size_t>(s)];
    nn::RecurrentState& rs = sts[s]->gdn_[static_cast<size_t>(L.cache)];
    const float* reg = region(s);
    std::copy(reg + g.n * C, reg + (K - 1 + g.n) * C, rs.conv());
    if (!rec[static_cast<size_t>(s)]) continue;
    for (int64_t i = 0; i < g.n; ++i) {
      const int64_t t = g.row0 + i;
      std::copy(reg + (K - 1 + i) * C, reg + (K + i) * C, rs.raw_row(i));
      float* r = rs.rec_row(i);
      std::copy(cv + t * C, cv + (t + 1) * C, r);
      std::copy(a + t * Hv, a + (t + 1) * Hv, r + C);
      std::copy(b + t * Hv, b + (t + 1) * Hv, r + C + Hv);
    }
  }
  // One head of one segment. Recorded calls keep the head's starting state and step token by token
  // (a decode's numerics, which a replay after truncate() reproduces); other calls of more than
  // one token use the chunked form.
  auto head = [&](int64_t s, int64_t hh, const float* prefetch) {
    const Segment& g = p.segs[static_cast<size_t>(s)];
    nn::RecurrentState& rs = sts[s]->gdn_[static_cast<size_t>(L.cache)];
    const int64_t kh = key_head(c_, tiled_, hh), r0 = g.row0;
    GdnHeadIO io;
    io.q = cv + r0 * C + kh * dk;
    io.k = cv + r0 * C + KD + kh * dk;
    io.v = cv + r0 * C + 2 * KD + hh * dv;
    io.qk_stride = C;
    io.v_stride = C;
    io.g = a + r0 * Hv + hh;
    io.beta = b + r0 * Hv + hh;
    io.gb_stride = Hv;
    io.o = core + r0 * VD + hh * dv;
    io.o_stride = VD;
    io.prefetch = prefetch;
    float* Sh = rs.ssm() + hh * dk * dv;
    if (rec[static_cast<size_t>(s)]) std::copy(Sh, Sh + dk * dv, rs.base_ssm() + hh * dk * dv);
    if (g.n == 1 || rec[static_cast<size_t>(s)]) gdn_step(g.n, dk, dv, io, Sh);
    else gdn_chunked(g.n, dk, dv, io, Sh, 64);
  };
  bool all_single = true;
  for (const Segment& g : p.segs) all_single = all_single && g.n == 1;
  if (all_single) {
    // Decode: each thread steps a contiguous block of (sequence, head) pairs and fetches the next
    // pair's state (dk·dv floats, from memory: all layers' states are far larger than the caches)
    // while it updates the current one.
    const int64_t jobs = ns * Hv;
    parallel_run([&](int ith, int nth) {
      const int64_t j0 = jobs * ith / nth, j1 = jobs * (ith + 1) / nth;
      for (int64_t j = j0; j < j1; ++j) {
        const float* next = nullptr;
        if (j + 1 < j1) next = sts[(j + 1) / Hv]->gdn_[static_cast<size_t>(L.cache)].ssm() + ((j + 1) % Hv) * dk * dv;
        head(j / Hv, j % Hv, next);
      }
    });
  } else {
    parallel_for(ns * Hv, [&](int64_t j) { head(j / Hv, j % Hv, nullptr); });
  }
  // Gated RMSNorm per head: norm(o) · w · silu(z).
  for_tokens(n, [&](int64_t t) {
    for (int64_t hh = 0; hh < Hv; ++hh) {
      float* o = core + t * VD + hh * dv;
      const float* zz = z + t * VD + hh * dv;
      ops::rms_norm(o, w.norm.data(), o, dv, c_.eps);
      silu_mul(zz, o, o, dv);
    }
  });
  matmul(w.out, core, n, out);
}

void Qwen35Model::attn_forward(const Layer& L, const Pass& p, State* const* sts, const float* u, float* out) const {
  const AttnW& w = L.attn;
  const int64_t n = p.n, ns = static_cast<int64_t>(p.segs.size());
  const int64_t H = c_.n_head, Hkv = c_.n_head_kv, hd = c_.head_dim, R = c_.n_rot;
  const int64_t QW = 2 * H * hd, KW = Hkv * hd;
  float* qg = buf(kQg, n * QW);
  float* k = buf(kK, n * KW);
  float* v = buf(kV, n * KW);
  float* att = buf(kAtt, n * H * hd);
  {
    const MatrixView ws[3] = {w.q, w.k, w.v};
    float* const ys[3] = {qg, k, v};
    matmul_batch(ws, ys, 3, u, n);
  }
  for (int64_t s = 0; s < ns; ++s) {
    const Segment& g = p.segs[static_cast<size_t>(s)];
    sts[s]->kv_[static_cast<size_t>(L.cache)].reserve(g.pos0 + g.n);
  }
  const bool kv_f16 = kv_f16_;
  // Per token: q/k norms and RoPE (mRoPE: each frequency slot takes the t, h or w position of its
  // section; text positions have all three equal), then K and V into the cache.
  for_tokens(n, [&](int64_t t) {
    thread_local std::vector<float> cs_v, slot_v;
    cs_v.resize(static_cast<size_t>(R));
    slot_v.assign(static_cast<size_t>(R / 2), static_cast<float>(p.pos[t]));
    if (p.pos3) {
      const int32_t* p3 = p.pos3 + 3 * t;
      const int64_t sh = c_.mrope[1], sw = c_.mrope[2];
      for (int64_t i = 0; i < R / 2; ++i) {
        if (i % 3 == 1 && i < 3 * sh) slot_v[static_cast<size_t>(i)] = static_cast<float>(p3[1]);
        else if (i % 3 == 2 && i < 3 * sw) slot_v[static_cast<size_t>(i)] = static_cast<float>(p3[2]);
        else slot_v[static_cast<size_t>(i)] = static_cast<float>(p3[0]);
      }
    }
    float* csp = cs_v.data();
    ops::rope_table(slot_v.data(), R, c_.rope_theta, csp);
    for (int64_t hh = 0; hh < H; ++hh) {
      float* q = qg + t * QW + hh * 2 * hd;
      ops::rms_norm(q, w.q_norm.data(), q, hd, c_.eps);
      ops::rope_neox(q, R, csp);
      if (rot_k_) nn::hadamard_rotate(q, hd, rot_k_);  // the query part only; the gate stays
    }
    for (int64_t g = 0; g < Hkv; ++g) {
      float* kk = k + t * KW + g * hd;
      ops::rms_norm(kk, w.k_norm.data(), kk, hd, c_.eps);
      ops::rope_neox(kk, R, csp);
      if (rot_k_) nn::hadamard_rotate(kk, hd, rot_k_);
    }
    if (rot_v_) nn::hadamard_rotate(v + t * KW, KW, rot_v_);  // Hkv heads of hd, hd % 64 == 0
    const int64_t s = p.seg_of[static_cast<size_t>(t)];
    const Segment& sg = p.segs[static_cast<size_t>(s)];
    nn::KvCache& kv = sts[s]->kv_[static_cast<size_t>(L.cache)];
    const int64_t pos = sg.pos0 + (t - sg.row0);
    if (kv_f16 && !kv_generic_) {
      f32_to_f16_row(k + t * KW, reinterpret_cast<uint16_t*>(kv.k_row(pos)), KW);
      f32_to_f16_row(v + t * KW, reinterpret_cast<uint16_t*>(kv.v_row(pos)), KW);
    } else {
      kv.store(pos, k + t * KW, v + t * KW);
    }
  });
  const float scale = 1.0f / std::sqrt(static_cast<float>(hd));
  const int64_t grp = H / Hkv;
  if (kv_generic_) {
    attn_generic(L, p, sts, qg, att);
    matmul(w.o, att, n, out);
    return;
  }
  // Per-token attention (a decode step's numerics) for short segments and for every call a state
  // may roll back (a speculative verify step, which must score each position exactly as decoding
  // would); blocked attention otherwise.
  auto per_token = [&](int64_t s) {
    const Segment& sg = p.segs[static_cast<size_t>(s)];
    return sg.n < 8 || sg.n <= sts[s]->rollback_;
  };
  // out_k ← out_k · sigmoid(gate_k) for n heads or rows: gate k at q + k·q_step + hd (q and gate
  // interleaved per head), out k at o + k·o_step.
  auto gate_rows = [hd](const float* q, int64_t q_step, float* o, int64_t o_step, int64_t n) {
    for (int64_t k = 0; k < n; ++k) {
      const float* gate = q + k * q_step + hd;
      float* ok = o + k * o_step;
      for (int64_t e = 0; e < hd; ++e) ok[e] *= ops::sigmoid(gate[e]);
    }
  };
  // The cache an entry of the pass attends to, and how many of its positions (up to its own).
  auto entry_kv = [&](int64_t t) {
    const int64_t s = p.seg_of[static_cast<size_t>(t)];
    const Segment& sg = p.segs[static_cast<size_t>(s)];
    return std::pair<const nn::KvCache*, int64_t>{&sts[s]->kv_[static_cast<size_t>(L.cache)], sg.pos0 + (t - sg.row0) + 1};
  };
  // Sequences with 8+ entries (prefill): blocks of 32 queries per head against the keys
  // transposed once per KV head.
  for (int64_t s = 0; s < ns; ++s) {
    const Segment& sg = p.segs[static_cast<size_t>(s)];
    if (per_token(s)) continue;
    const nn::KvCache& kv = sts[s]->kv_[static_cast<size_t>(L.cache)];
    const int64_t pos0 = sg.pos0, m = sg.n, nk = pos0 + m;
    float* KT = buf(kKT, Hkv * hd * nk);
    // f16 rows are converted exactly while transposing.
    parallel_for(Hkv * ((hd + 31) / 32), [&](int64_t job) {
      const int64_t g = job / ((hd + 31) / 32), e0 = job % ((hd + 31) / 32) * 32, e1 = std::min(hd, e0 + 32);
      float row[32];
      for (int64_t q = 0; q < nk; ++q) {
        if (kv_f16) f16_to_f32_row(reinterpret_cast<const uint16_t*>(kv.k_row(q)) + g * hd + e0, row, e1 - e0);
        const float* kr = kv_f16 ? row : kv.k_f32() + q * KW + g * hd + e0;
        for (int64_t e = e0; e < e1; ++e) KT[(g * hd + e) * nk + q] = kr[e - e0];
      }
    });
    constexpr int64_t kQB = 32;
    const int64_t nqb = (m + kQB - 1) / kQB;
    parallel_for(nqb * H, [&](int64_t job) {
      const int64_t qb = nqb - 1 - job / H, hh = job % H;  // longest (last) query blocks first
      const int64_t t0 = sg.row0 + qb * kQB, nq = std::min(kQB, m - qb * kQB), g = hh / grp;
      float* o = att + t0 * H * hd + hh * hd;
      const float* q = qg + t0 * QW + hh * 2 * hd;
      if (kv_f16)
        attend_causal_f16(q, QW, nq, KT + g * hd * nk, nk, reinterpret_cast<const uint16_t*>(kv.v_row(0)), KW, g * hd,
                          pos0 + qb * kQB + 1, hd, scale, o, H * hd);
      else
        attend_causal(q, QW, nq, KT + g * hd * nk, nk, kv.v_f32(), KW, g * hd, pos0 + qb * kQB + 1, hd, scale, o,
                      H * hd, false);
      gate_rows(q, QW, o, H * hd, nq);
    });
  }
  // Sequences with fewer entries (decode, short verifies): one (token, head) per job.
  std::vector<int64_t> short_rows;
  for (int64_t s = 0; s < ns; ++s)
    if (const Segment& sg = p.segs[static_cast<size_t>(s)]; per_token(s))
      for (int64_t i = 0; i < sg.n; ++i) short_rows.push_back(sg.row0 + i);
  const int64_t nsr = static_cast<int64_t>(short_rows.size());
  // f16 cache with enough (token, KV head) jobs for the threads: one job per KV head reads its rows
  // once for the grp query heads that share them (attend_group_f16, the same bits as per head).
  if (nsr > 0 && kv_f16 && grp > 1 && nsr * Hkv >= num_threads()) {
    parallel_for(nsr * Hkv, [&](int64_t job) {
      const int64_t t = short_rows[static_cast<size_t>(job / Hkv)], g = job % Hkv;
      const auto [kvp, n_kv] = entry_kv(t);
      const nn::KvCache& kv = *kvp;
      thread_local std::vector<float> scores;
      if (scores.size() < static_cast<size_t>(grp * n_kv)) scores.resize(static_cast<size_t>(grp * (n_kv + 64)));
      const float* q = qg + t * QW + g * grp * 2 * hd;  // the group's first head; heads 2·hd apart (q, gate)
      float* o = att + t * H * hd + g * grp * hd;
      attend_group_f16(q, 2 * hd, grp, reinterpret_cast<const uint16_t*>(kv.k_row(0)),
                       reinterpret_cast<const uint16_t*>(kv.v_row(0)), KW, g * hd, n_kv, hd, scale, scores.data(), o, hd);
      gate_rows(q, 2 * hd, o, hd, grp);
    });
  } else if (nsr > 0) {
    parallel_for(nsr * H, [&](int64_t job) {
      const int64_t t = short_rows[static_cast<size_t>(job / H)], hh = job % H;
      const auto [kvp, n_kv] = entry_kv(t);
      const nn::KvCache& kv = *kvp;
      thread_local std::vector<float> scores;
      if (scores.size() < static_cast<size_t>(n_kv)) scores.resize(static_cast<size_t>(n_kv + 64));
      const float* q = qg + t * QW + hh * 2 * hd;
      float* o = att + t * H * hd + hh * hd;
      if (kv_f16)
        attend_one_f16(q, reinterpret_cast<const uint16_t*>(kv.k_row(0)), reinterpret_cast<const uint16_t*>(kv.v_row(0)),
                       KW, (hh / grp) * hd, n_kv, hd, scale, scores.data(), o);
      else
        ops::attend_one(q, kv.k_f32(), kv.v_f32(), KW, (hh / grp) * hd, n_kv, hd, scale, scores.data(), o, false);
      gate_rows(q, 0, o, 0, 1);
    });
  }
  matmul(w.o, att, n, out);
}

void Qwen35Model::attn_generic(const Layer& L, const Pass& p, State* const* sts, const float* qg, float* att) const {
  const int64_t H = c_.n_head, Hkv = c_.n_head_kv, hd = c_.head_dim;
  const int64_t QW = 2 * H * hd, grp = H / Hkv;
  const float scale = 1.0f / std::sqrt(static_cast<float>(hd));
  const size_t kq8 = static_cast<size_t>(hd / nn::kQ8Values) * nn::kQ8Block;  // q8_0 bytes of one head
  parallel_for(p.n * H, [&](int64_t job) {
    const int64_t t = job / H, hh = job % H, g = hh / grp;
    const int64_t s = p.seg_of[static_cast<size_t>(t)];
    const Segment& sg = p.segs[static_cast<size_t>(s)];
    const nn::KvCache& kv = sts[s]->kv_[static_cast<size_t>(L.cache)];
    const int64_t n_kv = sg.pos0 + (t - sg.row0) + 1;
    thread_local std::vector<float> sc, qh, row;
    if (sc.size() < static_cast<size_t>(n_kv)) sc.resize(static_cast<size_t>(n_kv + 64));
    qh.resize(static_cast<size_t>(hd));
    row.resize(static_cast<size_t>(hd));
    const float* q = qg + t * QW + hh * 2 * hd;
    float* o = att + t * H * hd + hh * hd;
    // Scores by the K type's dot.
    if (kt_ == nn::KvType::kQ8_0) {
      nn::kq_scores_q8_0(q, hd, kv.k_row(0) + static_cast<size_t>(g) * kq8, kv.k_row_bytes(), n_kv, scale, sc.data());
    } else {
      const bool k16 = kt_ == nn::KvType::kF16;
      for (int64_t e = 0; e < hd; ++e) qh[e] = k16 ? f16_to_f32(f32_to_f16(q[e])) : q[e];  // ggml: q to K's type
      for (int64_t i = 0; i < n_kv; ++i) {
        if (k16) f16_to_f32_row(reinterpret_cast<const uint16_t*>(kv.k_row(i)) + g * hd, row.data(), hd);
        const float* kr = k16 ? row.data() : reinterpret_cast<const float*>(kv.k_row(i)) + g * hd;
        float acc = 0;
        for (int64_t e = 0; e < hd; ++e) acc += qh[e] * kr[e];
        sc[i] = acc * scale;
      }
    }
    ops::softmax(sc.data(), n_kv);
    // Σ weight · V row, by the V type.
    std::fill(o, o + hd, 0.0f);
    for (int64_t i = 0; i < n_kv; ++i) {
      const uint8_t* vr = kv.v_row(i);
      if (vt_ == nn::KvType::kQ8_0) {
        // f32 weight × dequantised value (qs · d), the block scale folded into the weight.
        const uint8_t* hb = vr + static_cast<size_t>(g) * kq8;
        for (int64_t b = 0; b < hd / nn::kQ8Values; ++b) {
          const auto* blk = reinterpret_cast<const kern::BlockQ8_0*>(hb + static_cast<size_t>(b) * nn::kQ8Block);
          const float wd = sc[i] * f16_to_f32(blk->d);
          float* ob = o + b * nn::kQ8Values;
          for (int64_t e = 0; e < nn::kQ8Values; ++e) ob[e] += wd * static_cast<float>(blk->qs[e]);
        }
      } else if (vt_ == nn::KvType::kF16) {
        const float wi = f16_to_f32(f32_to_f16(sc[i]));  // ggml's non-flash f16 product: weights to f16
        f16_to_f32_row(reinterpret_cast<const uint16_t*>(vr) + g * hd, row.data(), hd);
        for (int64_t e = 0; e < hd; ++e) o[e] += wi * row[e];
      } else {
        const float* vf = reinterpret_cast<const float*>(vr) + g * hd;
        for (int64_t e = 0; e < hd; ++e) o[e] += sc[i] * vf[e];
      }
    }
    if (rot_v_) nn::hadamard_rotate(o, hd, rot_v_);  // back from the rotated V basis (H·H = I)
    const float* gate = q + hd;
    for (int64_t e = 0; e < hd; ++e) o[e] *= ops::sigmoid(gate[e]);
  });
}

void Qwen35Model::ffn_forward(const Layer& L, const float* u, int64_t n, float* out) const {
  const FfnW& f = L.ffn;
  const int64_t d = c_.n_embd;
  const nn::GatedFfn swiglu;  // SiLU, our kernels (nn/ffn.h): x [m, d] → y [m, d]
  if (!c_.moe) {
    nn::gated_ffn(f.gate, f.up, f.down, u, n, out, swiglu);
    return;
  }
  const int64_t E = c_.n_expert, K = c_.n_expert_used;
  std::vector<float> logits(static_cast<size_t>(n * E));
  std::vector<float> w(static_cast<size_t>(n * K));
  std::vector<int32_t> ids(w.size());
  matmul(f.router, u, n, logits.data());
  for (int64_t t = 0; t < n; ++t) ops::moe_route_row(logits.data() + t * E, E, K, ids.data() + t * K, w.data() + t * K);
  const nn::ExpertRows r = nn::expert_rows(ids.data(), w.data(), n, E, K, "qwen35");
  nn::run_experts_host(r, u, n, d, K, nn::MoeSum::kExpertOrder, out, [&](size_t e, const float* xin, int64_t m, float* y) {
    nn::gated_ffn(f.exp_gate[e], f.exp_up[e], f.exp_down[e], xin, m, y, swiglu);
  });
  if (f.has_shared) {
    std::vector<float> sh(static_cast<size_t>(n * d)), sg(static_cast<size_t>(n));
    nn::gated_ffn(f.sh_gate, f.sh_up, f.sh_down, u, n, sh.data(), swiglu);
    matmul(f.sh_inp, u, n, sg.data());
    for (int64_t t = 0; t < n; ++t) {
      const float s = ops::sigmoid(sg[static_cast<size_t>(t)]);
      for (int64_t j = 0; j < d; ++j) out[t * d + j] += s * sh[static_cast<size_t>(t * d + j)];
    }
  }
}

}  // namespace
}  // namespace qwen35

std::unique_ptr<Model> load_qwen35(const ModelFiles& files, const LoadOptions& options) {
  return std::make_unique<qwen35::Qwen35Model>(files, options);
}

}  // namespace oxi
