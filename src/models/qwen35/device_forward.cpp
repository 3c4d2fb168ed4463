// Qwen 3.5 / 3.6 forward pass as nn::Device blocks (device_forward.h). Shapes per pass of n
// entries: h, u, o [n, d] (residual stream, normed input of a sub-block, its output).
#include "models/qwen35/device_forward.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "core/error.h"
#include "core/log.h"
#include "nn/device_util.h"
#include "nn/kv_cache.h"

namespace oxi::qwen35 {

using nn::Ref;

namespace {

using nn::at;
using nn::zero;

constexpr uint32_t kDevSnapMagic = 0x44335158;  // "XQ3D": a device state's snapshot

}  // namespace

// ---- weights on the device

struct DeviceForward::DevLayer {
  std::shared_ptr<nn::Buffer> attn_norm, post_norm;
  // Gated DeltaNet
  std::unique_ptr<nn::Weight> qkv, z, b, a, gdn_out;
  std::shared_ptr<nn::Buffer> conv, ssm_a, dt_bias, gdn_norm;
  // gated attention
  std::unique_ptr<nn::Weight> q, k, v, o;
  std::shared_ptr<nn::Buffer> q_norm, k_norm;
  // FFN (dense) / MoE
  std::unique_ptr<nn::Weight> gate, up, down, router, sh_gate, sh_up, sh_down, sh_inp;
  std::vector<std::unique_ptr<nn::Weight>> eg, eu, ed;
};

std::shared_ptr<nn::Buffer> DeviceForward::vec(const std::vector<float>& v) { return nn::upload_vec(*dev_, v); }

// ---- per-pass working memory: one growing buffer per slot

enum Slot : int { kH, kU, kO, kX, kXr, kZ, kA, kB, kGb, kCv, kCore, kQg, kK, kV, kAtt, kFa, kFb, kXin, kYout, kRt, kSh, kSg, kF, kLg, kNumSlots };

struct DeviceForward::Scratch : nn::Scratch {
  using nn::Scratch::Scratch;
  Ref get(Slot s, int64_t n) { return nn::Scratch::get(s, n); }
};

// ---- a sequence's state on the device

class DeviceForward::State final : public SequenceState {
 public:
  struct Gdn {
    std::shared_ptr<nn::Buffer> conv, ssm;  // [(K−1)·C], [Hv·dk·dv]
    // Rollback record of the last call (1 < n ≤ rollback): the state it started from and each
    // token's raw conv input, conv output and gates, so truncate() can restore and replay.
    std::shared_ptr<nn::Buffer> base_conv, base_ssm, raw, rec_cv, rec_gb;
    int64_t rec_n = 0;
  };
  struct Kv {
    std::shared_ptr<nn::Buffer> k, v;  // [n_ctx, Hkv·hd] f32
  };

  State(std::shared_ptr<nn::Device> dev, const Config& c, bool tiled, int64_t n_ctx, int64_t rollback, int n_gdn, int n_attn)
      : dev_(std::move(dev)), c_(c), tiled_(tiled), n_ctx_(n_ctx), rollback_(rollback) {
    const int64_t C = c.conv_dim();
    for (int i = 0; i < n_gdn; ++i) {
      Gdn g;
      g.conv = dev_->alloc((c.conv_k - 1) * C);
      g.ssm = dev_->alloc(c.hv * c.dk * c.dv);
      gdn_.push_back(std::move(g));
    }
    for (int i = 0; i < n_attn; ++i) kv_.push_back(Kv{dev_->alloc(n_ctx * kw()), dev_->alloc(n_ctx * kw())});
    clear();
  }
  int64_t n_past() const override { return n_past_; }
  int64_t n_ctx() const override { return n_ctx_; }
  void clear() override {
    n_past_ = 0;
    for (auto& g : gdn_) {
      zero(*dev_, at(g.conv), g.conv->floats());
      zero(*dev_, at(g.ssm), g.ssm->floats());
      g.rec_n = 0;
    }
  }
  void truncate(int64_t n) override;
  std::vector<uint8_t> snapshot() const override;
  void restore(std::span<const uint8_t> bytes) override;

  int64_t kw() const { return c_.n_head_kv * c_.head_dim; }
  // Starts a call of n tokens on recurrent layer g: whether it is recorded for rollback.
  bool begin_call(Gdn& g, int64_t n) {
    g.rec_n = 0;
    if (n < 2 || n > rollback_) return false;
    const int64_t C = c_.conv_dim();
    if (!g.base_conv) {
      g.base_conv = dev_->alloc(g.conv->floats());
      g.base_ssm = dev_->alloc(g.ssm->floats());
      g.raw = dev_->alloc(rollback_ * C);
      g.rec_cv = dev_->alloc(rollback_ * C);
      g.rec_gb = dev_->alloc(rollback_ * 2 * c_.hv);
    }
    dev_->copy(at(g.conv), at(g.base_conv), g.conv->floats());
    dev_->copy(at(g.ssm), at(g.base_ssm), g.ssm->floats());
    g.rec_n = n;
    return true;
  }

  std::shared_ptr<nn::Device> dev_;
  const Config& c_;
  bool tiled_;
  int64_t n_ctx_ = 0, n_past_ = 0, rollback_ = 0;
  std::vector<Gdn> gdn_;
  std::vector<Kv> kv_;
};

// Back to n tokens: attention caches forget the rows past n; each recurrent layer restores the state
// its last call started from and replays that call's first m tokens step by step (the numerics the
// call itself used for a recorded call).
void DeviceForward::State::truncate(int64_t n) {
  if (n == n_past_) return;
  if (n < 0 || n > n_past_)
    throw_error(ErrorCode::kInvalidArgument, "qwen35: cannot truncate " + std::to_string(n_past_) + " tokens to " + std::to_string(n));
  const int64_t drop = n_past_ - n;
  if (!gdn_.empty() && gdn_[0].rec_n < drop)
    throw_error(ErrorCode::kInvalidArgument,
                "qwen35: the recurrent state can go back only into the last forward call's tokens (" + std::to_string(gdn_[0].rec_n) +
                    " recorded, rollback " + std::to_string(rollback_) + "); asked to drop " + std::to_string(drop));
  const int64_t C = c_.conv_dim(), Km1 = c_.conv_k - 1;
  for (auto& g : gdn_) {
    const int64_t m = g.rec_n - drop;
    // conv: the last K−1 rows of [base | raw rows 0..m)
    auto X = dev_->alloc((Km1 + m) * C);
    dev_->copy(at(g.base_conv), at(X), Km1 * C);
    if (m > 0) dev_->copy(at(g.raw), at(X, Km1 * C), m * C);
    dev_->copy(at(X, m * C), at(g.conv), Km1 * C);
    dev_->copy(at(g.base_ssm), at(g.ssm), g.ssm->floats());
    if (m > 0) {
      auto o = dev_->alloc(m * c_.value_dim());
      nn::GdnArgs a;
      a.qkv = at(g.rec_cv);
      a.qk_stride = C;
      a.gb = at(g.rec_gb);
      a.gb_stride = 2 * c_.hv;
      a.state = at(g.ssm);
      a.out = at(o);
      a.out_stride = c_.value_dim();
      a.T = m;
      a.Hk = c_.hk;
      a.Hv = c_.hv;
      a.dk = c_.dk;
      a.dv = c_.dv;
      a.tiled = tiled_;
      a.chunked = false;
      dev_->gdn(a);
    }
    g.rec_n = 0;
  }
  n_past_ = n;
}

std::vector<uint8_t> DeviceForward::State::snapshot() const {
  std::vector<uint8_t> out;
  nn::SnapWriter w{out};
  w.val<uint32_t>(kDevSnapMagic);
  w.val<int64_t>(n_past_);
  w.val<uint64_t>(gdn_.size());
  w.val<uint64_t>(kv_.size());
  std::vector<float> tmp;
  auto put = [&](const std::shared_ptr<nn::Buffer>& b, int64_t n) {
    tmp.resize(static_cast<size_t>(n));
    if (n > 0) dev_->read(at(b), tmp.data(), n);
    w.put(tmp.data(), static_cast<size_t>(n) * 4);
  };
  for (const auto& g : gdn_) {
    put(g.conv, g.conv->floats());
    put(g.ssm, g.ssm->floats());
  }
  for (const auto& k : kv_) {
    put(k.k, n_past_ * kw());
    put(k.v, n_past_ * kw());
  }
  return out;
}

void DeviceForward::State::restore(std::span<const uint8_t> bytes) {
  nn::SnapReader r{bytes, "qwen35"};
  if (r.val<uint32_t>() != kDevSnapMagic) throw_error(ErrorCode::kInvalidArgument, "qwen35: snapshot does not belong to this model");
  const auto past = r.val<int64_t>();
  const auto ng = r.val<uint64_t>(), na = r.val<uint64_t>();
  if (ng != gdn_.size() || na != kv_.size()) throw_error(ErrorCode::kInvalidArgument, "qwen35: snapshot does not belong to this model");
  if (past < 0 || past > n_ctx_)
    throw_error(ErrorCode::kInvalidArgument, "qwen35: snapshot holds " + std::to_string(past) + " tokens, more than this state's context " +
                                                 std::to_string(n_ctx_));
  size_t need = 0;
  for (const auto& g : gdn_) need += static_cast<size_t>(g.conv->floats() + g.ssm->floats()) * 4;
  need += kv_.size() * 2 * static_cast<size_t>(past * kw()) * 4;
  if (r.left() != need) throw_error(ErrorCode::kInvalidArgument, "qwen35: snapshot has the wrong size");
  // Sizes checked first: the writes below cannot fail half way on bad input.
  std::vector<float> tmp;
  auto get = [&](const std::shared_ptr<nn::Buffer>& b, int64_t n) {
    tmp.resize(static_cast<size_t>(n));
    r.get(tmp.data(), static_cast<size_t>(n) * 4);
    if (n > 0) dev_->write(at(b), tmp.data(), n);
  };
  for (auto& g : gdn_) {
    get(g.conv, g.conv->floats());
    get(g.ssm, g.ssm->floats());
    g.rec_n = 0;
  }
  for (auto& k : kv_) {
    get(k.k, past * kw());
    get(k.v, past * kw());
  }
  n_past_ = past;
}

// ---- load

DeviceForward::DeviceForward(std::shared_ptr<nn::Device> dev, const Config& c, bool tiled, const MatrixView& embd,
                             const MatrixView& output, const std::vector<float>& out_norm, const std::vector<Layer>& layers)
    : dev_(std::move(dev)), c_(c), tiled_(tiled), host_(layers) {
  nn::Device& d = *dev_;
  embd_ = d.upload(embd);
  if (output.data == embd.data && output.dtype == embd.dtype && output.rows == embd.rows) {
    output_ = embd_.get();
  } else {
    output_own_ = d.upload(output);
    output_ = output_own_.get();
  }
  out_norm_ = vec(out_norm);
  for (const Layer& H : layers) {
    DevLayer L;
    L.attn_norm = vec(H.attn_norm);
    L.post_norm = vec(H.post_norm);
    if (H.recurrent) {
      L.qkv = d.upload(H.gdn.qkv);
      L.z = d.upload(H.gdn.z);
      L.b = d.upload(H.gdn.b);
      L.a = d.upload(H.gdn.a);
      L.gdn_out = d.upload(H.gdn.out);
      L.conv = vec(H.gdn.conv);
      L.ssm_a = vec(H.gdn.ssm_a);
      L.dt_bias = vec(H.gdn.dt_bias);
      L.gdn_norm = vec(H.gdn.norm);
    } else {
      L.q = d.upload(H.attn.q);
      L.k = d.upload(H.attn.k);
      L.v = d.upload(H.attn.v);
      L.o = d.upload(H.attn.o);
      L.q_norm = vec(H.attn.q_norm);
      L.k_norm = vec(H.attn.k_norm);
    }
    const FfnW& f = H.ffn;
    if (!c.moe) {
      L.gate = d.upload(f.gate);
      L.up = d.upload(f.up);
      L.down = d.upload(f.down);
    } else {
      L.router = d.upload(f.router);
      for (size_t e = 0; e < f.exp_gate.size(); ++e) {
        L.eg.push_back(d.upload(f.exp_gate[e]));
        L.eu.push_back(d.upload(f.exp_up[e]));
        L.ed.push_back(d.upload(f.exp_down[e]));
      }
      if (f.has_shared) {
        L.sh_gate = d.upload(f.sh_gate);
        L.sh_up = d.upload(f.sh_up);
        L.sh_down = d.upload(f.sh_down);
        L.sh_inp = d.upload(f.sh_inp);
      }
    }
    layers_.push_back(std::move(L));
  }
  scratch_ = std::make_unique<Scratch>(d);
  log_info("qwen35: the whole forward pass runs on device " + d.name());
}

DeviceForward::~DeviceForward() = default;

std::unique_ptr<SequenceState> DeviceForward::new_state(int64_t n_ctx, int64_t rollback) const {
  int n_gdn = 0, n_attn = 0;
  for (const Layer& L : host_) (L.recurrent ? n_gdn : n_attn)++;
  return std::make_unique<State>(dev_, c_, tiled_, n_ctx, rollback, n_gdn, n_attn);
}

// ---- the pass

void DeviceForward::run(std::span<SequenceState* const> states, const Model::Pass& p, const BatchOutput& out) const {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<State*> sts(p.segs.size());
  for (size_t i = 0; i < p.segs.size(); ++i) {
    sts[i] = dynamic_cast<State*>(states[static_cast<size_t>(p.segs[i].state)]);
    if (!sts[i]) throw_error(ErrorCode::kInvalidArgument, "qwen35: sequence state belongs to another model or device");
  }
  nn::Device& d = *dev_;
  Scratch& S = *scratch_;
  const int64_t n = p.n, D = c_.n_embd;
  const Ref h = S.get(kH, n * D), u = S.get(kU, n * D), o = S.get(kO, n * D);
  // Input rows: runs of token ids through the embedding table, runs of given rows as they are.
  for (int64_t t = 0; t < n;) {
    const bool tok = p.token_at(t) >= 0;
    int64_t e = t;
    while (e < n && (p.token_at(e) >= 0) == tok) ++e;
    if (tok) d.embed(*embd_, std::span<const int32_t>(p.token + t, static_cast<size_t>(e - t)), h.at(t * D));
    else d.write(h.at(t * D), p.embd + t * D, (e - t) * D);
    t = e;
  }
  d.rms_norm(h, Ref{}, at(layers_[0].attn_norm), u, n, D, c_.eps);
  for (size_t li = 0; li < layers_.size(); ++li) {
    const DevLayer& L = layers_[li];
    const Layer& hl = host_[li];
    if (hl.recurrent) gdn(L, hl, p, sts.data(), u, o);
    else attn(L, hl, p, sts.data(), u, o);
    d.rms_norm(h, o, at(L.post_norm), u, n, D, c_.eps);  // h += o; u = norm(h)
    ffn(L, u, n, o);
    // h += o; u = the next layer's normed input, after the last layer the output norm's.
    d.rms_norm(h, o, at(li + 1 < layers_.size() ? layers_[li + 1].attn_norm : out_norm_), u, n, D, c_.eps);
  }
  for (size_t i = 0; i < p.segs.size(); ++i) sts[i]->n_past_ += p.segs[i].n;
  if (out.hidden_all) d.read(u, out.hidden_all, n * D);  // u: every row after the output norm
  const int64_t rows = static_cast<int64_t>(p.out_rows.size());
  if (rows == 0 || (!out.logits && !out.hidden)) return;
  std::vector<int32_t> ids(p.out_rows.begin(), p.out_rows.end());
  const Ref f = S.get(kF, rows * D);
  d.gather_rows(u, ids, D, f);
  if (out.hidden) d.read(f, out.hidden, rows * D);
  if (out.logits) {
    const int64_t V = output_->rows;
    const Ref lg = S.get(kLg, rows * V);
    nn::matmul1(d, *output_, f, rows, lg);
    d.read(lg, out.logits, rows * V);
  }
}

void DeviceForward::gdn(const DevLayer& L, const Layer& hl, const Model::Pass& p, State* const* sts, Ref u, Ref o) const {
  nn::Device& d = *dev_;
  Scratch& S = *scratch_;
  const int64_t n = p.n, ns = static_cast<int64_t>(p.segs.size());
  const int64_t C = c_.conv_dim(), K = c_.conv_k, Hv = c_.hv, Hk = c_.hk, dk = c_.dk, dv = c_.dv;
  const int64_t KD = c_.key_dim(), VD = c_.value_dim();
  // X: per segment s, its conv state (K−1 rows) then its new rows, at row row0 + s·(K−1).
  const Ref X = S.get(kX, (ns * (K - 1) + n) * C);
  const Ref z = S.get(kZ, n * VD), a = S.get(kA, n * Hv), b = S.get(kB, n * Hv), gb = S.get(kGb, n * 2 * Hv);
  const Ref cv = S.get(kCv, n * C), core = S.get(kCore, n * VD);
  auto region = [&](int64_t s) { return X.at((p.segs[static_cast<size_t>(s)].row0 + s * (K - 1)) * C); };
  for (int64_t s = 0; s < ns; ++s) {
    const auto& g = sts[s]->gdn_[static_cast<size_t>(hl.cache)];
    d.copy(at(g.conv), region(s), (K - 1) * C);
  }
  {
    // One sequence: the projections land straight behind its conv state; several: gathered after.
    const Ref xr = ns == 1 ? X.at((K - 1) * C) : S.get(kXr, n * C);
    const nn::Weight* ws[4] = {L.qkv.get(), L.z.get(), L.b.get(), L.a.get()};
    const Ref ys[4] = {xr, z, b, a};
    d.matmul(ws, ys, u, n);
    if (ns > 1)
      for (int64_t s = 0; s < ns; ++s) {
        const Model::Segment& g = p.segs[static_cast<size_t>(s)];
        d.copy(xr.at(g.row0 * C), region(s).at((K - 1) * C), g.n * C);
      }
  }
  // Causal depthwise conv + SiLU; q, k: per-head L2 norm (q also scaled by 1/√dk); the gates.
  for (int64_t s = 0; s < ns; ++s) {
    const Model::Segment& g = p.segs[static_cast<size_t>(s)];
    d.conv_silu(region(s), at(L.conv), C, K, g.n, cv.at(g.row0 * C));
  }
  d.l2_norm_heads(nn::Heads{cv, C, dk}, n, Hk, dk, c_.eps, 1.0f / std::sqrt(static_cast<float>(dk)));
  d.l2_norm_heads(nn::Heads{cv.at(KD), C, dk}, n, Hk, dk, c_.eps, 1.0f);
  d.gdn_gates(a, b, at(L.ssm_a), at(L.dt_bias), n, Hv, gb);
  for (int64_t s = 0; s < ns; ++s) {
    const Model::Segment& g = p.segs[static_cast<size_t>(s)];
    State::Gdn& rs = sts[s]->gdn_[static_cast<size_t>(hl.cache)];
    const bool rec = sts[s]->begin_call(rs, g.n);
    if (rec) {
      d.copy(region(s).at((K - 1) * C), at(rs.raw), g.n * C);
      d.copy(cv.at(g.row0 * C), at(rs.rec_cv), g.n * C);
      d.copy(gb.at(g.row0 * 2 * Hv), at(rs.rec_gb), g.n * 2 * Hv);
    }
    d.copy(region(s).at(g.n * C), at(rs.conv), (K - 1) * C);  // the last K−1 input rows
    nn::GdnArgs ga;
    ga.qkv = cv.at(g.row0 * C);
    ga.qk_stride = C;
    ga.gb = gb.at(g.row0 * 2 * Hv);
    ga.gb_stride = 2 * Hv;
    ga.state = at(rs.ssm);
    ga.out = core.at(g.row0 * VD);
    ga.out_stride = VD;
    ga.T = g.n;
    ga.Hk = Hk;
    ga.Hv = Hv;
    ga.dk = dk;
    ga.dv = dv;
    ga.tiled = tiled_;
    ga.chunked = g.n > 1 && !rec;  // recorded calls step token by token, as their replay does
    d.gdn(ga);
  }
  // Gated RMSNorm per head: norm(o) · w · silu(z).
  d.rms_norm(core, Ref{}, at(L.gdn_norm), core, n * Hv, dv, c_.eps);
  d.silu_mul(z, core, core, n * VD);
  nn::matmul1(d, *L.gdn_out, core, n, o);
}

void DeviceForward::attn(const DevLayer& L, const Layer& hl, const Model::Pass& p, State* const* sts, Ref u, Ref o) const {
  nn::Device& d = *dev_;
  Scratch& S = *scratch_;
  const int64_t n = p.n, ns = static_cast<int64_t>(p.segs.size());
  const int64_t H = c_.n_head, Hkv = c_.n_head_kv, hd = c_.head_dim, R = c_.n_rot;
  const int64_t QW = 2 * H * hd, KW = Hkv * hd;
  const Ref qg = S.get(kQg, n * QW), k = S.get(kK, n * KW), v = S.get(kV, n * KW), att = S.get(kAtt, n * H * hd);
  {
    const nn::Weight* ws[3] = {L.q.get(), L.k.get(), L.v.get()};
    const Ref ys[3] = {qg, k, v};
    d.matmul(ws, ys, u, n);
  }
  // q heads sit at h·2hd of each row, each followed by its output gate.
  d.rms_norm_heads(nn::Heads{qg, QW, 2 * hd}, n, H, hd, at(L.q_norm), c_.eps);
  d.rms_norm_heads(nn::Heads{k, KW, hd}, n, Hkv, hd, at(L.k_norm), c_.eps);
  const std::span<const int32_t> pos(p.pos, static_cast<size_t>(n));
  const std::array<int32_t, 3> sec{c_.mrope[0], c_.mrope[1], c_.mrope[2]};
  d.rope_neox(qg, n, QW, H, 2 * hd, R, c_.rope_theta, pos, p.pos3, sec);
  d.rope_neox(k, n, KW, Hkv, hd, R, c_.rope_theta, pos, p.pos3, sec);
  for (int64_t s = 0; s < ns; ++s) {
    const Model::Segment& g = p.segs[static_cast<size_t>(s)];
    const State::Kv& kv = sts[s]->kv_[static_cast<size_t>(hl.cache)];
    d.copy(k.at(g.row0 * KW), at(kv.k, g.pos0 * KW), g.n * KW);
    d.copy(v.at(g.row0 * KW), at(kv.v, g.pos0 * KW), g.n * KW);
    nn::AttnArgs aa;
    aa.q = qg.at(g.row0 * QW);
    aa.q_stride = QW;
    aa.q_head_stride = 2 * hd;
    aa.k = at(kv.k);
    aa.v = at(kv.v);
    aa.out = att.at(g.row0 * H * hd);
    aa.out_stride = H * hd;
    aa.T = g.n;
    aa.pos0 = g.pos0;
    aa.H = H;
    aa.Hkv = Hkv;
    aa.hd = hd;
    aa.scale = 1.0f / std::sqrt(static_cast<float>(hd));
    d.attention(aa);
  }
  d.mul_sigmoid_heads(nn::Heads{att, H * hd, hd}, nn::Heads{qg.at(hd), QW, 2 * hd}, n, H, hd);
  nn::matmul1(d, *L.o, att, n, o);
}

void DeviceForward::swiglu(const nn::Weight& g, const nn::Weight& up, const nn::Weight& down, Ref x, int64_t m, Ref y) const {
  nn::gated_ffn(*dev_, g, up, down, x, m, y, scratch_->get(kFa, m * g.rows), scratch_->get(kFb, m * g.rows), false);
}

void DeviceForward::ffn(const DevLayer& L, Ref u, int64_t n, Ref o) const {
  nn::Device& d = *dev_;
  Scratch& S = *scratch_;
  const int64_t D = c_.n_embd;
  if (!c_.moe) {
    swiglu(*L.gate, *L.up, *L.down, u, n, o);
    return;
  }
  const int64_t E = c_.n_expert, K = c_.n_expert_used;
  const Ref rt = S.get(kRt, n * E);
  // The router and the shared expert's gate read the same rows: one batched product.
  const Ref sg = L.sh_gate ? S.get(kSg, n) : Ref{};
  if (L.sh_gate) {
    const nn::Weight* ws[2] = {L.router.get(), L.sh_inp.get()};
    const Ref ys[2] = {rt, sg};
    d.matmul(ws, ys, u, n);
  } else {
    nn::matmul1(d, *L.router, u, n, rt);
  }
  const nn::ExpertRows r = nn::route_experts(d, rt, n, E, K);
  nn::run_experts(d, S, kXin, kYout, r, u, n, D, o, [&](size_t e, Ref xin, int64_t m, Ref y) {
    swiglu(*L.eg[e], *L.eu[e], *L.ed[e], xin, m, y);
  });
  if (L.sh_gate) {
    // o += sigmoid(gate_r) · shared expert row r, on the device (no read of the gate): the [n, D]
    // rows as n × D "heads" of width 1, each gated by the row's one value (head stride 0).
    const Ref sh = S.get(kSh, n * D);
    swiglu(*L.sh_gate, *L.sh_up, *L.sh_down, u, n, sh);
    d.mul_sigmoid_heads(nn::Heads{sh, D, 1}, nn::Heads{sg, 1, 0}, n, D, 1);
    d.add(o, sh, n * D);
  }
}

}  // namespace oxi::qwen35
