// Gemma 4 forward pass as nn::Device blocks (device_forward.h). Per pass of T entries: x [T, d]
// the residual stream, u [T, d] a normed sub-block input, t/f [T, d] sub-block outputs, ple
// [T, L·P] the per-layer inputs.
#include "models/gemma4/device_forward.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "core/error.h"
#include "core/log.h"
#include "nn/device_util.h"
#include "nn/kv_cache.h"

namespace oxi::gemma4 {

using nn::at;
using nn::Ref;

namespace {
enum Slot : int { kX, kU, kT, kF, kQ, kK, kV, kAtt, kPle, kTokP, kG, kGu, kPl, kH, kLg, kXin, kY, kOut, kLogits };
constexpr uint32_t kDevSnapMagic = 0x44344d47u;  // "GM4D": a device state's snapshot
}  // namespace

struct DeviceForward::DevLayer {
  std::shared_ptr<nn::Buffer> attn_norm, q_norm, k_norm, post_attn_norm, ffn_norm, post_ffn_norm;
  std::unique_ptr<nn::Weight> wq, wk, wv, wo, gate, up, down;
  // MoE: the router and each expert's slices of the stacks
  std::shared_ptr<nn::Buffer> pre_ffn_norm2, post_ffn_norm1, post_ffn_norm2, router_scale;
  std::unique_ptr<nn::Weight> router;
  std::vector<std::unique_ptr<nn::Weight>> eg, eu, ed;
  // per-layer embedding
  std::unique_ptr<nn::Weight> ple_gate, ple_proj;
  std::shared_ptr<nn::Buffer> ple_post_norm;
};

struct DeviceForward::Scratch : nn::Scratch {
  using nn::Scratch::Scratch;
};

std::shared_ptr<nn::Buffer> DeviceForward::vec(const std::vector<float>& v) { return nn::upload_vec(*dev_, v); }

// ---- a sequence's KV caches on the device: full [n_ctx, Hkv·hd] f32 rows per owning layer
// (sliding layers too: attention reads only their window, and truncate() can go back anywhere).

class DeviceForward::State final : public SequenceState {
 public:
  State(std::shared_ptr<nn::Device> dev, const Config& c, int64_t n_ctx) : dev_(std::move(dev)), n_ctx_(n_ctx) {
    for (int64_t l = 0; l < c.n_layer_kv(); ++l) {
      const int64_t w = c.n_head_kv[static_cast<size_t>(l)] * c.head_dim(l);
      width_.push_back(w);
      k_.push_back(dev_->alloc(n_ctx * w));
      v_.push_back(dev_->alloc(n_ctx * w));
    }
  }
  int64_t n_past() const override { return n_past_; }
  int64_t n_ctx() const override { return n_ctx_; }
  void clear() override { n_past_ = 0; }
  void truncate(int64_t n) override {
    if (n < 0 || n > n_past_)
      throw_error(ErrorCode::kInvalidArgument, "gemma4: cannot truncate " + std::to_string(n_past_) + " tokens to " + std::to_string(n));
    n_past_ = n;
  }
  std::vector<uint8_t> snapshot() const override {
    std::vector<uint8_t> out;
    size_t bytes = 20;
    for (int64_t w : width_) bytes += 2 * static_cast<size_t>(n_past_ * w) * 4;
    out.reserve(bytes);  // one allocation for the whole snapshot
    nn::SnapWriter w{out};
    w.val<uint32_t>(kDevSnapMagic);
    w.val<int64_t>(n_past_);
    w.val<uint64_t>(k_.size());
    std::vector<float> tmp;
    for (size_t l = 0; l < k_.size(); ++l)
      for (const auto* b : {&k_[l], &v_[l]}) {
        tmp.resize(static_cast<size_t>(n_past_ * width_[l]));
        if (!tmp.empty()) dev_->read(at(*b), tmp.data(), static_cast<int64_t>(tmp.size()));
        w.put(tmp.data(), tmp.size() * 4);
      }
    return out;
  }
  void restore(std::span<const uint8_t> bytes) override {
    nn::SnapReader r{bytes, "gemma4 state"};
    if (r.val<uint32_t>() != kDevSnapMagic) throw_error(ErrorCode::kInvalidArgument, "gemma4 state: not a snapshot of this model");
    const auto past = r.val<int64_t>();
    const auto nl = r.val<uint64_t>();
    if (nl != k_.size() || past < 0 || past > n_ctx_)
      throw_error(ErrorCode::kInvalidArgument, "gemma4 state: snapshot is for a different model or context size");
    size_t need = 0;
    for (int64_t w : width_) need += 2 * static_cast<size_t>(past * w) * 4;
    if (r.left() != need) throw_error(ErrorCode::kInvalidArgument, "gemma4 state: snapshot has the wrong size");
    std::vector<float> tmp;
    for (size_t l = 0; l < k_.size(); ++l)
      for (auto* b : {&k_[l], &v_[l]}) {
        tmp.resize(static_cast<size_t>(past * width_[l]));
        r.get(tmp.data(), tmp.size() * 4);
        if (!tmp.empty()) dev_->write(at(*b), tmp.data(), static_cast<int64_t>(tmp.size()));
      }
    n_past_ = past;
  }

  std::shared_ptr<nn::Device> dev_;
  int64_t n_ctx_ = 0, n_past_ = 0;
  std::vector<int64_t> width_;
  std::vector<std::shared_ptr<nn::Buffer>> k_, v_;
};

// ---- load

DeviceForward::DeviceForward(std::shared_ptr<nn::Device> dev, const Config& c, const HostWeights& w)
    : dev_(std::move(dev)), c_(c), host_(w.layers) {
  nn::Device& d = *dev_;
  tok_embd_ = d.upload(w.tok_embd);
  if (w.output.data == w.tok_embd.data && w.output.dtype == w.tok_embd.dtype && w.output.rows == w.tok_embd.rows) {
    output_ = tok_embd_.get();
  } else {
    output_own_ = d.upload(w.output);
    output_ = output_own_.get();
  }
  output_norm_ = vec(w.output_norm);
  if (c.n_embd_per_layer > 0) {
    ple_tok_ = d.upload(w.ple_tok);
    ple_proj_ = d.upload(w.ple_model_proj);
    ple_proj_norm_ = vec(w.ple_proj_norm);
  }
  const int64_t d_model = c.n_embd, I = c.n_ff_exp;
  for (const Layer& h : w.layers) {
    DevLayer L;
    L.attn_norm = vec(h.attn_norm);
    L.q_norm = vec(h.q_norm);
    L.post_attn_norm = vec(h.post_attn_norm);
    L.ffn_norm = vec(h.ffn_norm);
    L.post_ffn_norm = vec(h.post_ffn_norm);
    L.wq = d.upload(h.wq);
    L.wo = d.upload(h.wo);
    if (h.owns_kv) {
      L.k_norm = vec(h.k_norm);
      L.wk = d.upload(h.wk);
      if (h.has_v) L.wv = d.upload(h.wv);
    }
    L.gate = d.upload(h.gate);
    L.up = d.upload(h.up);
    L.down = d.upload(h.down);
    if (h.moe) {
      L.pre_ffn_norm2 = vec(h.pre_ffn_norm2);
      L.post_ffn_norm1 = vec(h.post_ffn_norm1);
      L.post_ffn_norm2 = vec(h.post_ffn_norm2);
      L.router_scale = vec(h.router_scale);
      L.router = d.upload(h.router);
      for (int64_t e = 0; e < c.n_expert; ++e) {
        L.eg.push_back(d.upload(h.gate_exps.slice(e, h.gate_row0, I)));
        L.eu.push_back(d.upload(h.up_exps.slice(e, h.up_row0, I)));
        L.ed.push_back(d.upload(h.down_exps.slice(e, 0, d_model)));
      }
    }
    if (c.n_embd_per_layer > 0) {
      L.ple_gate = d.upload(h.ple_gate);
      L.ple_proj = d.upload(h.ple_proj);
      L.ple_post_norm = vec(h.ple_post_norm);
    }
    layers_.push_back(std::move(L));
  }
  scratch_ = std::make_unique<Scratch>(d);
  log_info("gemma4: the whole forward pass runs on device " + d.name());
}

DeviceForward::~DeviceForward() = default;

std::unique_ptr<SequenceState> DeviceForward::new_state(int64_t n_ctx, int64_t rollback) const {
  (void)rollback;  // full caches: truncate() goes back anywhere
  return std::make_unique<State>(dev_, c_, n_ctx);
}

// ---- the pass

void DeviceForward::geglu_ffn(const nn::Weight& g, const nn::Weight& up, const nn::Weight& down, Ref x, int64_t T, Ref y) const {
  nn::gated_ffn(*dev_, g, up, down, x, T, y, scratch_->get(kG, T * g.rows), scratch_->get(kGu, T * g.rows), true);
}

// Router on the residual stream xr (no-scale RMSNorm, · d^−½, · router.scale), the top-k experts
// of its softmax renormalised; each expert's GeGLU on the normed input xn, scaled by its
// per-expert scale and routing weight, summed into out.
void DeviceForward::ffn_moe(const DevLayer& L, const Layer& hl, Ref xn, Ref xr, int64_t T, Ref out) const {
  nn::Device& d = *dev_;
  nn::Scratch& S = *scratch_;
  const int64_t D = c_.n_embd, E = c_.n_expert, K = c_.n_expert_used;
  const Ref h = S.get(kH, T * D), lg = S.get(kLg, T * E);
  d.rms_norm(xr, Ref{}, Ref{}, h, T, D, c_.eps);
  d.scale(h, T * D, 1.0f / std::sqrt(static_cast<float>(D)));
  d.mul_cols(h, at(L.router_scale), T, D);
  nn::matmul1(d, *L.router, h, T, lg);
  nn::ExpertRows r = nn::route_experts(d, lg, T, E, K);
  for (int64_t e = 0; e < E; ++e)
    for (float& w : r.weights[static_cast<size_t>(e)]) w *= hl.expert_scale[static_cast<size_t>(e)];
  nn::run_experts(d, S, kXin, kY, r, xn, T, D, out, [&](size_t e, Ref xin, int64_t m, Ref y) {
    geglu_ffn(*L.eg[e], *L.eu[e], *L.ed[e], xin, m, y);
  });
}

void DeviceForward::run(std::span<SequenceState* const> states, const Model::Pass& p, const BatchOutput& out) const {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<State*> sts(p.segs.size());
  for (size_t i = 0; i < p.segs.size(); ++i) {
    sts[i] = dynamic_cast<State*>(states[static_cast<size_t>(p.segs[i].state)]);
    if (!sts[i]) throw_error(ErrorCode::kInvalidArgument, "gemma4: state belongs to another model or device");
  }
  nn::Device& d = *dev_;
  nn::Scratch& S = *scratch_;
  const Config& c = c_;
  const int64_t T = p.n, D = c.n_embd, NL = c.n_layer, P = c.n_embd_per_layer, H = c.n_head;
  const Ref x = S.get(kX, T * D), u = S.get(kU, T * D), tb = S.get(kT, T * D), f = S.get(kF, T * D);
  // Embeddings · √d for token ids; embedding rows as given.
  for (int64_t t = 0; t < T;) {
    const bool tok = p.token_at(t) >= 0;
    int64_t e = t;
    while (e < T && (p.token_at(e) >= 0) == tok) ++e;
    if (tok) {
      d.embed(*tok_embd_, std::span<const int32_t>(p.token + t, static_cast<size_t>(e - t)), x.at(t * D));
      d.scale(x.at(t * D), (e - t) * D, std::sqrt(static_cast<float>(D)));
    } else {
      d.write(x.at(t * D), p.embd + t * D, (e - t) * D);
    }
    t = e;
  }
  // Per-layer inputs [T, L·P]: (norm(proj(x) · d^−½) + tok_row · √P) · 2^−½; embedding rows take
  // the pad token's (id 0) row, as llama.cpp does for soft tokens.
  Ref ple;
  if (P > 0) {
    ple = S.get(kPle, T * NL * P);
    const Ref tokp = S.get(kTokP, T * NL * P);
    nn::matmul1(d, *ple_proj_, x, T, ple);
    d.scale(ple, T * NL * P, 1.0f / std::sqrt(static_cast<float>(D)));
    d.rms_norm(ple, Ref{}, at(ple_proj_norm_), ple, T * NL, P, c.eps);
    std::vector<int32_t> ids(static_cast<size_t>(T));
    for (int64_t t = 0; t < T; ++t) ids[static_cast<size_t>(t)] = std::max<int32_t>(0, p.token_at(t));
    d.embed(*ple_tok_, ids, tokp);
    d.scale(tokp, T * NL * P, std::sqrt(static_cast<float>(P)));
    d.add(ple, tokp, T * NL * P);
    d.scale(ple, T * NL * P, 1.0f / std::sqrt(2.0f));
  }
  const std::span<const int32_t> pos(p.pos, static_cast<size_t>(T));
  std::vector<float> div_full(static_cast<size_t>(c.n_rot_full / 2), 1.0f), div_swa(static_cast<size_t>(c.n_rot_swa / 2), 1.0f);
  if (!c.rope_freqs_full.empty())
    for (size_t j = 0; j < div_full.size() && j < c.rope_freqs_full.size(); ++j) div_full[j] = c.rope_freqs_full[j];
  for (int64_t l = 0; l < NL; ++l) {
    const DevLayer& L = layers_[static_cast<size_t>(l)];
    const Layer& hl = host_[static_cast<size_t>(l)];
    const bool swa = c.swa(l);
    const int64_t hd = c.head_dim(l), src = c.kv_source(l), hkv = c.n_head_kv[static_cast<size_t>(src)], kvw = hkv * hd;
    const int64_t n_rot = swa ? c.n_rot_swa : c.n_rot_full;
    const float base = swa ? c.rope_base_swa : c.rope_base_full;
    const std::span<const float> div(swa ? div_swa : div_full);
    d.rms_norm(x, Ref{}, at(L.attn_norm), u, T, D, c.eps);
    const Ref q = S.get(kQ, T * H * hd), att = S.get(kAtt, T * H * hd);
    nn::matmul1(d, *L.wq, u, T, q);
    d.rms_norm_heads(nn::Heads{q, H * hd, hd}, T, H, hd, at(L.q_norm), c.eps);
    d.rope_neox_div(q, T, H * hd, H, hd, n_rot, base, pos, div);
    if (hl.owns_kv) {
      const Ref k = S.get(kK, T * kvw), v = S.get(kV, T * kvw);
      {
        const nn::Weight* ws[2] = {L.wk.get(), L.wv.get()};
        const Ref ys[2] = {k, v};
        d.matmul(std::span<const nn::Weight* const>(ws, hl.has_v ? 2 : 1), std::span<const Ref>(ys, hl.has_v ? 2 : 1), u, T);
      }
      if (!hl.has_v) d.copy(k, v, T * kvw);  // V from the raw K projection
      d.rms_norm_heads(nn::Heads{k, kvw, hd}, T, hkv, hd, at(L.k_norm), c.eps);
      d.rms_norm_heads(nn::Heads{v, kvw, hd}, T, hkv, hd, Ref{}, c.eps);
      d.rope_neox_div(k, T, kvw, hkv, hd, n_rot, base, pos, div);
      for (size_t s = 0; s < p.segs.size(); ++s) {
        const Model::Segment& g = p.segs[s];
        d.copy(k.at(g.row0 * kvw), at(sts[s]->k_[static_cast<size_t>(l)], g.pos0 * kvw), g.n * kvw);
        d.copy(v.at(g.row0 * kvw), at(sts[s]->v_[static_cast<size_t>(l)], g.pos0 * kvw), g.n * kvw);
      }
    }
    // Attention, scale 1 (the q/k norms carry it), over the source layer's cache.
    for (size_t s = 0; s < p.segs.size(); ++s) {
      const Model::Segment& g = p.segs[s];
      nn::AttnArgs a;
      a.q = q.at(g.row0 * H * hd);
      a.q_stride = H * hd;
      a.q_head_stride = hd;
      a.k = at(sts[s]->k_[static_cast<size_t>(src)]);
      a.v = at(sts[s]->v_[static_cast<size_t>(src)]);
      a.out = att.at(g.row0 * H * hd);
      a.out_stride = H * hd;
      a.T = g.n;
      a.pos0 = g.pos0;
      a.H = H;
      a.Hkv = hkv;
      a.hd = hd;
      a.window = swa ? c.window : 0;
      a.scale = 1.0f;
      d.attention(a);
    }
    nn::matmul1(d, *L.wo, att, T, tb);
    d.rms_norm(tb, Ref{}, at(L.post_attn_norm), tb, T, D, c.eps);
    d.add(x, tb, T * D);
    // feed-forward (and the MoE block beside it)
    d.rms_norm(x, Ref{}, at(L.ffn_norm), u, T, D, c.eps);
    geglu_ffn(*L.gate, *L.up, *L.down, u, T, f);
    if (hl.moe) {
      d.rms_norm(f, Ref{}, at(L.post_ffn_norm1), f, T, D, c.eps);
      d.rms_norm(x, Ref{}, at(L.pre_ffn_norm2), u, T, D, c.eps);
      ffn_moe(L, hl, u, x, T, tb);
      d.rms_norm(tb, Ref{}, at(L.post_ffn_norm2), tb, T, D, c.eps);
      d.add(f, tb, T * D);
    }
    d.rms_norm(f, Ref{}, at(L.post_ffn_norm), f, T, D, c.eps);
    d.add(x, f, T * D);
    // per-layer embedding: GeGLU of (gate · x, this layer's input), projected back, normed, added
    if (P > 0) {
      const Ref g = S.get(kG, T * P), pl = S.get(kPl, T * P);
      std::vector<int32_t> rows(static_cast<size_t>(T));
      for (int64_t t = 0; t < T; ++t) rows[static_cast<size_t>(t)] = static_cast<int32_t>(t * NL + l);
      d.gather_rows(ple, rows, P, pl);
      nn::matmul1(d, *L.ple_gate, x, T, g);
      d.gelu_mul(g, pl, g, T * P);
      nn::matmul1(d, *L.ple_proj, g, T, tb);
      d.rms_norm(tb, Ref{}, at(L.ple_post_norm), tb, T, D, c.eps);
      d.add(x, tb, T * D);
    }
    if (hl.out_scale != 1.0f) d.scale(x, T * D, hl.out_scale);
  }
  for (size_t s = 0; s < p.segs.size(); ++s) sts[s]->n_past_ = p.segs[s].pos0 + p.segs[s].n;
  if (out.hidden_all) {
    d.rms_norm(x, Ref{}, at(output_norm_), u, T, D, c.eps);
    d.read(u, out.hidden_all, T * D);
  }
  const int64_t rows = static_cast<int64_t>(p.out_rows.size());
  if (rows == 0 || (!out.logits && !out.hidden)) return;
  std::vector<int32_t> ids(p.out_rows.begin(), p.out_rows.end());
  const Ref o = S.get(kOut, rows * D);
  d.gather_rows(x, ids, D, o);
  d.rms_norm(o, Ref{}, at(output_norm_), o, rows, D, c.eps);
  if (out.hidden) d.read(o, out.hidden, rows * D);
  if (!out.logits) return;
  const int64_t V = output_->rows;
  const Ref lg = S.get(kLogits, rows * V);
  nn::matmul1(d, *output_, o, rows, lg);
  if (c.final_softcap > 0.0f) d.softcap(lg, rows * V, c.final_softcap);
  d.read(lg, out.logits, rows * V);
}

}  // namespace oxi::gemma4
