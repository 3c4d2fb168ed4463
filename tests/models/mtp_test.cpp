// Qwen 3.5's MTP head (Model::mtp_forward) against a plain double-precision transcription of the
// math in ../shared/spec/models.md A.5 (llama.cpp's qwen35 graph_mtp computes the same), written
// here from the checkpoint's tensors: two pairs (position 0 and 1: the attention over its own
// cache, RoPE, the zero-centred norms, the [embedding, hidden] order of fc). Then the same head
// loaded from our converted GGUF (nextn.* tensors) gives the same logits.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <map>
#include <string>
#include <vector>

#include "convert/convert.h"
#include "format/model_files.h"
#include "models/model.h"
#include "qwen35_test_util.h"

namespace {

using Vec = std::vector<double>;

struct Ref {
  const oxi::ModelFiles& f;
  q35test::Shape s;
  Vec t(const std::string& name) const {
    const oxi::TensorInfo* ti = f.tensors().find(name);
    EXPECT_NE(ti, nullptr) << name;
    Vec v(static_cast<size_t>(ti->n_elements()));
    const float* p = reinterpret_cast<const float*>(ti->data());
    for (size_t i = 0; i < v.size(); ++i) v[i] = p[i];
    return v;
  }
  // y = W x, W [rows, cols] row-major
  static Vec mv(const Vec& W, const Vec& x) {
    const size_t cols = x.size(), rows = W.size() / cols;
    Vec y(rows, 0.0);
    for (size_t r = 0; r < rows; ++r)
      for (size_t c = 0; c < cols; ++c) y[r] += W[r * cols + c] * x[c];
    return y;
  }
  // zero-centred RMSNorm: x / rms(x) · (1 + w), over slices of n
  static Vec zc_norm(const Vec& x, const Vec& w, size_t n) {
    Vec y(x.size());
    for (size_t o = 0; o < x.size(); o += n) {
      double ss = 0;
      for (size_t i = 0; i < n; ++i) ss += x[o + i] * x[o + i];
      const double r = 1.0 / std::sqrt(ss / static_cast<double>(n) + 1e-6);
      for (size_t i = 0; i < n; ++i) y[o + i] = x[o + i] * r * (1.0 + w[i]);
    }
    return y;
  }
  // NeoX RoPE on the first n_rot dims of each head of hd at position pos, base 1e7
  static void rope(Vec& x, size_t hd, size_t n_rot, double pos) {
    for (size_t o = 0; o < x.size(); o += hd)
      for (size_t j = 0; j < n_rot / 2; ++j) {
        const double th = pos * std::pow(1e7, -2.0 * static_cast<double>(j) / static_cast<double>(n_rot));
        const double a = x[o + j], b = x[o + j + n_rot / 2];
        x[o + j] = a * std::cos(th) - b * std::sin(th);
        x[o + j + n_rot / 2] = b * std::cos(th) + a * std::sin(th);
      }
  }
};

TEST(Qwen35Mtp, HeadMatchesTheSpecAndSurvivesConversion) {
  q35test::Shape s;
  s.mtp = true;
  const std::string dir = q35test::tmp_dir("mtp_ref");
  q35test::write_model(dir, s);
  oxi::ModelFiles files = oxi::open_model_files(dir);
  oxi::LoadOptions opt;
  opt.kv_f32 = true;
  auto model = oxi::load_model(files, opt);
  ASSERT_TRUE(model->has_mtp());
  const size_t d = static_cast<size_t>(s.d), V = static_cast<size_t>(s.vocab), H = static_cast<size_t>(s.n_head),
               Hkv = static_cast<size_t>(s.n_kv), hd = static_cast<size_t>(s.hd), n_rot = hd / 4;
  // Two pairs (h_p, x_{p+1}).
  std::vector<float> hid(2 * d);
  for (size_t i = 0; i < hid.size(); ++i) hid[i] = static_cast<float>(std::sin(0.7 * static_cast<double>(i) + 0.3));
  const int32_t toks[2] = {17, 201};

  Ref r{files, s};
  const std::string p = "mtp.layers.0.";
  const Vec E = r.t("model.language_model.embed_tokens.weight"), fc = r.t("mtp.fc.weight");
  const Vec Wq = r.t(p + "self_attn.q_proj.weight"), Wk = r.t(p + "self_attn.k_proj.weight"), Wv = r.t(p + "self_attn.v_proj.weight"),
            Wo = r.t(p + "self_attn.o_proj.weight");
  Vec Kc, Vc;  // the head's cache rows
  std::vector<Vec> want;
  for (size_t t = 0; t < 2; ++t) {
    Vec e(E.begin() + toks[t] * static_cast<std::ptrdiff_t>(d), E.begin() + (toks[t] + 1) * static_cast<std::ptrdiff_t>(d));
    Vec h(hid.begin() + static_cast<std::ptrdiff_t>(t * d), hid.begin() + static_cast<std::ptrdiff_t>((t + 1) * d));
    e = Ref::zc_norm(e, r.t("mtp.pre_fc_norm_embedding.weight"), d);
    h = Ref::zc_norm(h, r.t("mtp.pre_fc_norm_hidden.weight"), d);
    Vec cat = e;
    cat.insert(cat.end(), h.begin(), h.end());  // embedding first, then hidden
    Vec u = Ref::mv(fc, cat);
    const Vec a = Ref::zc_norm(u, r.t(p + "input_layernorm.weight"), d);
    const Vec qg = Ref::mv(Wq, a);
    Vec k = Ref::zc_norm(Ref::mv(Wk, a), r.t(p + "self_attn.k_norm.weight"), hd);
    const Vec v = Ref::mv(Wv, a);
    Ref::rope(k, hd, n_rot, static_cast<double>(t));
    Kc.insert(Kc.end(), k.begin(), k.end());
    Vc.insert(Vc.end(), v.begin(), v.end());
    Vec o(H * hd, 0.0);
    for (size_t hh = 0; hh < H; ++hh) {
      Vec q(qg.begin() + static_cast<std::ptrdiff_t>(hh * 2 * hd), qg.begin() + static_cast<std::ptrdiff_t>(hh * 2 * hd + hd));
      q = Ref::zc_norm(q, r.t(p + "self_attn.q_norm.weight"), hd);
      Ref::rope(q, hd, n_rot, static_cast<double>(t));
      const size_t g = hh / (H / Hkv);
      std::vector<double> sc(t + 1);
      double mx = -1e300, sum = 0;
      for (size_t j = 0; j <= t; ++j) {
        double dot = 0;
        for (size_t i = 0; i < hd; ++i) dot += q[i] * Kc[j * Hkv * hd + g * hd + i];
        sc[j] = dot / std::sqrt(static_cast<double>(hd));
        mx = std::max(mx, sc[j]);
      }
      for (double& x : sc) sum += (x = std::exp(x - mx));
      for (size_t j = 0; j <= t; ++j)
        for (size_t i = 0; i < hd; ++i) o[hh * hd + i] += sc[j] / sum * Vc[j * Hkv * hd + g * hd + i];
      for (size_t i = 0; i < hd; ++i) o[hh * hd + i] *= 1.0 / (1.0 + std::exp(-qg[hh * 2 * hd + hd + i]));
    }
    const Vec ao = Ref::mv(Wo, o);
    for (size_t i = 0; i < d; ++i) u[i] += ao[i];
    const Vec x = Ref::zc_norm(u, r.t(p + "post_attention_layernorm.weight"), d);
    Vec gt = Ref::mv(r.t(p + "mlp.gate_proj.weight"), x);
    const Vec up = Ref::mv(r.t(p + "mlp.up_proj.weight"), x);
    for (size_t i = 0; i < gt.size(); ++i) gt[i] = gt[i] / (1.0 + std::exp(-gt[i])) * up[i];
    const Vec f = Ref::mv(r.t(p + "mlp.down_proj.weight"), gt);
    for (size_t i = 0; i < d; ++i) u[i] += f[i];
    want.push_back(Ref::mv(E, Ref::zc_norm(u, r.t("mtp.norm.weight"), d)));  // tied output head
  }

  auto check = [&](const oxi::Model& m, const char* what) {
    auto st = m.new_mtp_state(64);
    std::vector<float> lg(V);
    double worst = 0, scale = 0;
    for (size_t t = 0; t < 2; ++t) {
      m.mtp_forward(*st, hid.data() + t * d, &toks[t], 1, lg.data(), nullptr);
      for (size_t i = 0; i < V; ++i) {
        worst = std::max(worst, std::fabs(lg[i] - want[t][i]));
        scale = std::max(scale, std::fabs(want[t][i]));
      }
    }
    EXPECT_EQ(st->n_past(), 2);
    std::printf("mtp %s: max |logit − reference| %.3g (max |logit| %.3g)\n", what, worst, scale);
    EXPECT_GT(scale, 0.1);
    EXPECT_LE(worst, 1e-4 * scale) << what;
  };
  check(*model, "hf");
  // Both pairs in one call give the second pair's logits too.
  {
    auto st = model->new_mtp_state(64);
    std::vector<float> lg(V), h2(d);
    model->mtp_forward(*st, hid.data(), toks, 2, lg.data(), h2.data());
    double worst = 0;
    for (size_t i = 0; i < V; ++i) worst = std::max(worst, std::fabs(lg[i] - want[1][i]));
    EXPECT_LE(worst, 1e-4 * 10) << "two pairs in one call";
  }
  // Converted to GGUF (f32): the nextn.* tensors carry the head.
  oxi::ConvertOptions co;
  co.out_type = oxi::DType::F32;
  const std::string gguf = dir + "/m.gguf";
  oxi::convert_hf_to_gguf(*files.hf, gguf, co);
  oxi::ModelFiles gf = oxi::open_model_files(gguf);
  EXPECT_EQ(gf.gguf->metadata.get_int("qwen35.nextn_predict_layers", 0), 1);
  EXPECT_EQ(gf.gguf->metadata.get_int("qwen35.block_count", 0), s.layers + 1);
  auto gm = oxi::load_model(gf, opt);
  ASSERT_TRUE(gm->has_mtp());
  EXPECT_EQ(gm->info().n_layer, s.layers);
  check(*gm, "gguf");
}

}  // namespace
