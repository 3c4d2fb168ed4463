// Qwen 3.5 unit tests: chunked GDN == recurrent GDN; prefill + decode == one prefill; snapshot /
// restore bit-identical; HF load == converted GGUF load (V-head reorder, norm offsets, A_log);
// clear errors on bad input. Consistency checks between our own paths; agreement with llama.cpp
// is checked by tests/e2e/qwen35_oracle.test.sh.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <random>

#include "core/error.h"
#include "format/gguf.h"
#include "format/hf.h"
#include "format/model_files.h"
#include "convert/convert.h"
#include "models/model.h"
#include "models/qwen35/config.h"
#include "models/qwen35/gdn.h"
#include "qwen35_test_util.h"

namespace {

using oxi::qwen35::GdnHeadIO;

struct GdnCase {
  int64_t T, dk, dv;
};

void run_gdn_case(const GdnCase& c, bool chunked, std::vector<float>& out, std::vector<float>& S, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  std::uniform_real_distribution<float> ud(0.0f, 1.0f);
  std::vector<float> q(c.T * c.dk), k(c.T * c.dk), v(c.T * c.dv), g(c.T), b(c.T);
  auto l2 = [&](float* x) {
    double s = 0;
    for (int64_t i = 0; i < c.dk; ++i) s += x[i] * x[i];
    for (int64_t i = 0; i < c.dk; ++i) x[i] /= static_cast<float>(std::sqrt(s));
  };
  for (auto& x : q) x = nd(rng);
  for (auto& x : k) x = nd(rng);
  for (auto& x : v) x = nd(rng);
  for (int64_t t = 0; t < c.T; ++t) {
    l2(&q[t * c.dk]);
    l2(&k[t * c.dk]);
    for (int64_t i = 0; i < c.dk; ++i) q[t * c.dk + i] /= std::sqrt(static_cast<float>(c.dk));
    g[t] = -1.5f * ud(rng);  // decays exp(g) in (0.22, 1]
    b[t] = ud(rng);
  }
  S.assign(c.dk * c.dv, 0.0f);
  for (auto& x : S) x = 0.3f * nd(rng);  // non-zero initial state
  out.assign(c.T * c.dv, 0.0f);
  GdnHeadIO io;
  io.q = q.data();
  io.k = k.data();
  io.v = v.data();
  io.qk_stride = c.dk;
  io.v_stride = c.dv;
  io.g = g.data();
  io.beta = b.data();
  io.gb_stride = 1;
  io.o = out.data();
  io.o_stride = c.dv;
  if (chunked) oxi::qwen35::gdn_chunked(c.T, c.dk, c.dv, io, S.data(), 64);
  else oxi::qwen35::gdn_step(c.T, c.dk, c.dv, io, S.data());
}

TEST(Qwen35Gdn, ChunkedMatchesStep) {
  for (int64_t T : {1, 63, 64, 65, 200}) {
    for (auto [dk, dv] : {std::pair<int64_t, int64_t>{128, 128}, {32, 48}}) {
      GdnCase c{T, dk, dv};
      std::vector<float> o1, s1, o2, s2;
      run_gdn_case(c, false, o1, s1, 11 + static_cast<uint32_t>(T));
      run_gdn_case(c, true, o2, s2, 11 + static_cast<uint32_t>(T));
      double max_o = 0, max_s = 0, mag = 0;
      for (size_t i = 0; i < o1.size(); ++i) {
        max_o = std::max(max_o, static_cast<double>(std::fabs(o1[i] - o2[i])));
        mag = std::max(mag, static_cast<double>(std::fabs(o1[i])));
      }
      for (size_t i = 0; i < s1.size(); ++i) max_s = std::max(max_s, static_cast<double>(std::fabs(s1[i] - s2[i])));
      EXPECT_LT(max_o, 2e-5 * std::max(1.0, mag)) << "T=" << T << " dk=" << dk << " dv=" << dv;
      EXPECT_LT(max_s, 2e-5) << "T=" << T << " dk=" << dk << " dv=" << dv;
      EXPECT_GT(mag, 0.01);  // the outputs are not trivially zero
    }
  }
}

struct Loaded {
  oxi::ModelFiles files;
  std::unique_ptr<oxi::Model> model;
};

Loaded load(const std::string& path) {
  Loaded l{oxi::open_model_files(path), nullptr};
  oxi::LoadOptions opt;
  opt.n_threads = 1;  // the shared CI box is oversubscribed; a pool only adds hand-off latency
  l.model = oxi::load_model(l.files, opt);
  return l;
}

std::vector<int32_t> tokens(int64_t n, int64_t vocab, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<int32_t> t(static_cast<size_t>(n));
  for (auto& x : t) x = static_cast<int32_t>(rng() % static_cast<uint32_t>(vocab));
  return t;
}

double max_abs_diff(const float* a, const float* b, size_t n) {
  double m = 0;
  for (size_t i = 0; i < n; ++i) m = std::max(m, static_cast<double>(std::fabs(a[i] - b[i])));
  return m;
}

class Qwen35Model : public ::testing::TestWithParam<bool> {};  // param: MoE

TEST_P(Qwen35Model, PrefillPlusDecodeMatchesOnePrefill) {
  q35test::Shape s;
  s.moe = GetParam();
  s.tied = !s.moe;
  const std::string dir = q35test::tmp_dir(s.moe ? "pd_moe" : "pd_dense");
  q35test::write_model(dir, s);
  Loaded l = load(dir);
  const int64_t V = l.model->info().n_vocab;
  ASSERT_EQ(V, s.vocab);
  const int64_t N = 150, K = 5;
  auto toks = tokens(N + K, V, 3);
  std::vector<float> all(static_cast<size_t>((N + K) * V));
  auto st = l.model->new_state(512);
  l.model->forward(*st, toks, all.data(), true);
  EXPECT_EQ(st->n_past(), N + K);

  auto st2 = l.model->new_state(512);
  std::vector<float> last(static_cast<size_t>(V));
  l.model->forward(*st2, std::span<const int32_t>(toks.data(), N), last.data(), false);
  EXPECT_LT(max_abs_diff(last.data(), all.data() + (N - 1) * V, V), 1e-4);
  for (int64_t i = 0; i < K; ++i) {
    l.model->forward(*st2, std::span<const int32_t>(toks.data() + N + i, 1), last.data(), false);
    EXPECT_LT(max_abs_diff(last.data(), all.data() + (N + i) * V, V), 1e-4) << "decode step " << i;
  }
  std::filesystem::remove_all(dir);
}

TEST_P(Qwen35Model, SnapshotRestoreIsBitIdentical) {
  q35test::Shape s;
  s.moe = GetParam();
  const std::string dir = q35test::tmp_dir(s.moe ? "snap_moe" : "snap_dense");
  q35test::write_model(dir, s);
  Loaded l = load(dir);
  const int64_t V = l.model->info().n_vocab;
  auto toks = tokens(80, V, 5);
  auto st = l.model->new_state(256);
  std::vector<float> a(static_cast<size_t>(V)), b(static_cast<size_t>(V));
  l.model->forward(*st, std::span<const int32_t>(toks.data(), 70), a.data(), false);
  const auto snap = st->snapshot();
  l.model->forward(*st, std::span<const int32_t>(toks.data() + 70, 10), a.data(), false);
  auto st2 = l.model->new_state(256);
  st2->restore(snap);
  EXPECT_EQ(st2->n_past(), 70);
  EXPECT_EQ(st2->snapshot(), snap);
  l.model->forward(*st2, std::span<const int32_t>(toks.data() + 70, 10), b.data(), false);
  EXPECT_EQ(0, std::memcmp(a.data(), b.data(), a.size() * sizeof(float)));
  // Restoring into the same state rewinds it.
  st->restore(snap);
  l.model->forward(*st, std::span<const int32_t>(toks.data() + 70, 10), b.data(), false);
  EXPECT_EQ(0, std::memcmp(a.data(), b.data(), a.size() * sizeof(float)));
  // Garbage is refused.
  std::vector<uint8_t> bad(snap.begin(), snap.begin() + 20);
  EXPECT_THROW(st->restore(bad), oxi::Error);
  std::filesystem::remove_all(dir);
}

TEST_P(Qwen35Model, HfAndConvertedGgufAgree) {
  q35test::Shape s;
  s.moe = GetParam();
  s.hk = 2;
  s.hv = 6;  // Hv ≠ Hk: the converter's V-head reorder must match the loader's head mapping
  s.tied = s.moe;
  const std::string dir = q35test::tmp_dir(s.moe ? "conv_moe" : "conv_dense");
  q35test::write_model(dir, s);
  const std::string gguf = dir + "/out.gguf";
  oxi::ConvertOptions opt;
  opt.out_type = oxi::DType::F32;
  oxi::convert_hf_to_gguf(oxi::read_hf_checkpoint(dir), gguf, opt);
  {
    auto g = oxi::read_gguf(gguf);
    EXPECT_EQ(g.metadata.get_string("general.architecture"), s.moe ? "qwen35moe" : "qwen35");
    EXPECT_EQ(g.metadata.get_string("tokenizer.ggml.pre"), "qwen35");
    EXPECT_EQ(g.metadata.find("tokenizer.ggml.tokens")->array_size(), static_cast<size_t>(s.vocab));
    EXPECT_TRUE(g.tensors.contains("blk.0.ssm_a"));
    EXPECT_EQ(g.tensors.contains("output.weight"), !s.tied);
  }
  // f32 attention so the comparison is tight (f16 rounding amplifies summation-order noise).
  ::setenv("OXI_KV_F32", "1", 1);
  Loaded a = load(dir), b = load(gguf);
  ::unsetenv("OXI_KV_F32");
  const int64_t V = a.model->info().n_vocab;
  ASSERT_EQ(V, b.model->info().n_vocab);
  auto toks = tokens(100, V, 9);
  std::vector<float> la(static_cast<size_t>(100 * V)), lb(la.size());
  auto sa = a.model->new_state(256), sb = b.model->new_state(256);
  a.model->forward(*sa, toks, la.data(), true);
  b.model->forward(*sb, toks, lb.data(), true);
  EXPECT_LT(max_abs_diff(la.data(), lb.data(), la.size()), 1e-4);
  std::filesystem::remove_all(dir);
}

INSTANTIATE_TEST_SUITE_P(DenseAndMoe, Qwen35Model, ::testing::Values(false, true),
                         [](const auto& i) { return i.param ? std::string("Moe") : std::string("Dense"); });

TEST(Qwen35Errors, ContextOverflowAndBadTokens) {
  q35test::Shape s;
  const std::string dir = q35test::tmp_dir("err");
  q35test::write_model(dir, s);
  Loaded l = load(dir);
  auto st = l.model->new_state(16);
  std::vector<float> lg(static_cast<size_t>(s.vocab));
  auto toks = tokens(17, s.vocab, 1);
  try {
    l.model->forward(*st, toks, lg.data(), false);
    FAIL() << "overflow accepted";
  } catch (const oxi::Error& e) {
    EXPECT_EQ(e.code(), oxi::ErrorCode::kInvalidArgument);
    EXPECT_NE(std::string(e.what()).find("context"), std::string::npos);
  }
  EXPECT_EQ(st->n_past(), 0);
  std::vector<int32_t> bad = {1, 2, static_cast<int32_t>(s.vocab)};
  EXPECT_THROW(l.model->forward(*st, bad, lg.data(), false), oxi::Error);
  bad = {-1};
  EXPECT_THROW(l.model->forward(*st, bad, lg.data(), false), oxi::Error);
  std::filesystem::remove_all(dir);
}

void expect_load_error(const std::string& dir, const std::string& needle) {
  try {
    load(dir);
    FAIL() << "loaded despite: " << needle;
  } catch (const oxi::Error& e) {
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
  }
}

// Issue 29 #12: a RoPE base of inf / NaN (a GGUF f32 can hold them; "1e39" in config.json is
// inf as f32), absurd mRoPE sections and an eos id outside the vocabulary were accepted.
TEST(Qwen35Errors, AbsurdRopeAndEosRejected) {
  q35test::Shape s;
  const std::string dir = q35test::tmp_dir("rope");
  q35test::write_model(dir, s);
  const oxi::qwen35::Config good = oxi::qwen35::config_from_hf(oxi::read_hf_checkpoint(dir));
  EXPECT_NO_THROW(good.validate("ok"));
  auto rejects = [&](auto&& change, const char* what) {
    oxi::qwen35::Config c = good;
    change(c);
    EXPECT_THROW(c.validate("x"), oxi::Error) << what;
  };
  rejects([](auto& c) { c.rope_theta = INFINITY; }, "theta inf");
  rejects([](auto& c) { c.rope_theta = NAN; }, "theta nan");
  rejects([](auto& c) { c.rope_theta = 1e30f; }, "theta 1e30");
  rejects([](auto& c) { c.rope_theta = -1e4f; }, "theta negative");
  rejects([](auto& c) { c.mrope = {-1, 0, 0, 0}; }, "negative section");
  rejects([](auto& c) { c.mrope = {INT32_MAX, INT32_MAX, 0, 0}; }, "sections over n_rot / 2");
  rejects([](auto& c) { c.eos_id = c.n_vocab; }, "eos past the vocabulary");
  rejects([](auto& c) { c.eos_id = -5; }, "eos -5");
  std::filesystem::remove_all(dir);
}

TEST(Qwen35Errors, MissingTensorWrongShapeBadConfig) {
  q35test::Shape s;
  const std::string dir = q35test::tmp_dir("err2");
  q35test::write_model(dir, s);
  // Drop one tensor / change one shape by rewriting the safetensors file.
  auto st = oxi::read_safetensors(dir + "/model.safetensors");
  auto rewrite = [&](const std::string& drop, const std::string& reshape) {
    oxi::SafetensorsWriter w;
    for (const auto& [name, t] : st.tensors.all()) {
      if (name == drop) continue;
      std::vector<uint8_t> bytes(t.data(), t.data() + t.nbytes);
      auto shape = t.shape;
      if (name == reshape) {
        shape = {t.n_elements()};
      }
      w.add_tensor(name, t.dtype, shape, std::move(bytes));
    }
    w.write(dir + "/model.safetensors");
  };
  const std::string qkv = "model.language_model.layers.0.linear_attn.in_proj_qkv.weight";
  auto keep = std::vector<uint8_t>();
  rewrite(qkv, "");
  expect_load_error(dir, "missing tensor " + qkv);
  q35test::write_model(dir, s);
  st = oxi::read_safetensors(dir + "/model.safetensors");
  const std::string an = "model.language_model.layers.3.self_attn.k_norm.weight";
  const std::string qp = "model.language_model.layers.3.self_attn.q_proj.weight";
  rewrite("", qp);
  expect_load_error(dir, qp);
  q35test::write_model(dir, s);
  // Unknown architecture in config.json.
  std::string cfg = R"({"model_type": "qwen9_next", "text_config": {"hidden_size": 8}})";
  oxi::write_file_atomic(dir + "/config.json", cfg.data(), cfg.size());
  expect_load_error(dir, "qwen9_next");
  // Inconsistent config (Hv not a multiple of Hk).
  q35test::Shape s2 = s;
  s2.hk = 3;
  s2.hv = 4;
  q35test::write_model(dir, s2);
  expect_load_error(dir, "linear_num_value_heads");
  (void)an;
  std::filesystem::remove_all(dir);
}

}  // namespace
