// The batched model interface on Qwen 3.5 (dense and MoE), on every ISA the host runs: several
// sequences in one forward call compute what each computes alone; truncate() after a multi-token
// call equals never having fed the dropped tokens (KV cache and Gated DeltaNet / conv state);
// embedding rows in place of token ids; hidden states out; bad batches refused before any state
// changes. Gemma 4's are in gemma4_test.cpp.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <thread>

#include "batch_check.h"
#include "core/error.h"
#include "format/model_files.h"
#include "kernels/isa.h"
#include "qwen35_test_util.h"
#include "runtime/batcher.h"
#include "spec_check.h"

namespace {

struct IsaReset {
  ~IsaReset() { oxi::set_isa("auto"); }
};

struct Loaded {
  oxi::ModelFiles files;
  std::unique_ptr<oxi::Model> model;
};

Loaded load(const std::string& dir, const std::string& quant = "") {
  Loaded l{oxi::open_model_files(dir), nullptr};
  oxi::LoadOptions opt;
  opt.n_threads = 2;
  opt.quant = quant;
  l.model = oxi::load_model(l.files, opt);
  return l;
}

class Qwen35Batch : public ::testing::TestWithParam<bool> {};  // param: MoE

TEST_P(Qwen35Batch, SequencesTogetherEqualAlone) {
  IsaReset reset;
  q35test::Shape s;
  s.moe = GetParam();
  const std::string dir = q35test::tmp_dir(s.moe ? "batch_moe" : "batch_dense");
  q35test::write_model(dir, s);
  for (const auto& isa : oxi::available_isas()) {
    oxi::set_isa(isa);
    for (const std::string quant : {"", "q8_0", "q4_0", "q4_k"}) {
      Loaded l = load(dir, quant);
      const int64_t V = l.model->info().n_vocab;
      // A prefill long enough for the chunked GDN and the blocked attention, short ones, a single
      // token; then decode steps of 1..8 sequences (single-token GEMV, few-token GEMV, GEMM).
      std::vector<std::vector<int32_t>> prompts = {batchtest::ids(70, V, 1), batchtest::ids(5, V, 2), batchtest::ids(1, V, 3),
                                                   batchtest::ids(12, V, 4)};
      for (uint32_t k = 0; k < 4; ++k) prompts.push_back(batchtest::ids(3 + k, V, 10 + k));
      const batchtest::BatchDiff d = batchtest::batch_vs_alone(*l.model, prompts, 3);
      // Float weights (every set) and the scalar set (every type) compute each row in one order
      // whatever the batch: bit-identical. Quantised weights on SIMD sets take other kernels for
      // other row counts (packed single-token GEMV, few-token GEMV, GEMM) that sum blocks in
      // another f32 order: ~1e-6 apart, which a flipped activation rounding on these random
      // models can amplify to a few tenths; mixing sequences up would be off by the logit scale.
      const bool exact = quant.empty() || isa == "scalar";
      EXPECT_LE(d.prefill, exact ? 0.0 : 0.05 * d.scale) << isa << " " << quant;
      EXPECT_LE(d.decode, exact ? 0.0 : 0.05 * d.scale) << isa << " " << quant;
      EXPECT_GT(d.scale, 0.01) << isa;
      std::printf("qwen35 %s %s %s: together vs alone max |Δlogit| prefill %.3g decode %.3g (max |logit| %.3g)\n",
                  s.moe ? "moe" : "dense", isa.c_str(), quant.empty() ? "f32" : quant.c_str(), d.prefill, d.decode, d.scale);
    }
  }
}

TEST_P(Qwen35Batch, TruncateEqualsNeverFed) {
  IsaReset reset;
  q35test::Shape s;
  s.moe = GetParam();
  const std::string dir = q35test::tmp_dir(s.moe ? "trunc_moe" : "trunc_dense");
  q35test::write_model(dir, s);
  Loaded l = load(dir);
  const int64_t V = l.model->info().n_vocab;
  const auto prompt = batchtest::ids(20, V, 5);
  const auto draft = batchtest::ids(5, V, 6);
  for (int64_t keep : {0, 1, 3, 5}) {
    const double diff = batchtest::truncate_vs_fresh(*l.model, prompt, draft, keep, 17);
    EXPECT_LE(diff, 1e-4) << "keep " << keep;
  }
  // Further back than the last call's tokens: refused, state unchanged.
  auto st = l.model->new_state(256, 4);
  std::vector<float> lg(static_cast<size_t>(V));
  l.model->forward(*st, prompt, lg.data(), false);
  l.model->forward(*st, std::vector<int32_t>{1, 2}, lg.data(), false);
  EXPECT_THROW(st->truncate(static_cast<int64_t>(prompt.size()) - 1), oxi::Error);
  EXPECT_EQ(st->n_past(), static_cast<int64_t>(prompt.size()) + 2);
  // Without rollback room a recurrent model cannot go back at all.
  auto st0 = l.model->new_state(256);
  l.model->forward(*st0, prompt, lg.data(), false);
  EXPECT_THROW(st0->truncate(10), oxi::Error);
  EXPECT_NO_THROW(st0->truncate(static_cast<int64_t>(prompt.size())));
}

TEST_P(Qwen35Batch, EmbeddingRowsAndHiddenStates) {
  q35test::Shape s;
  s.moe = GetParam();
  s.tied = true;
  const std::string dir = q35test::tmp_dir(s.moe ? "embd_moe" : "embd_dense");
  q35test::write_model(dir, s);
  Loaded l = load(dir);
  const int64_t V = l.model->info().n_vocab, d = l.model->info().n_embd;
  const oxi::TensorInfo& e = l.files.tensors().get("model.language_model.embed_tokens.weight");
  ASSERT_EQ(e.dtype, oxi::DType::F32);
  const auto* E = reinterpret_cast<const float*>(e.data());
  const auto toks = batchtest::ids(9, V, 8);
  // token ids vs their embedding rows (the middle entries given as rows)
  std::vector<int32_t> mixed = toks;
  std::vector<float> rows(toks.size() * static_cast<size_t>(d), 0.0f);
  for (size_t i = 3; i < 6; ++i) {
    mixed[i] = -1;
    std::copy(E + toks[i] * d, E + (toks[i] + 1) * d, rows.begin() + static_cast<std::ptrdiff_t>(i) * d);
  }
  std::vector<float> a(static_cast<size_t>(V)), b(static_cast<size_t>(V)), h(static_cast<size_t>(d));
  auto s1 = l.model->new_state(64), s2 = l.model->new_state(64);
  l.model->forward(*s1, toks, a.data(), false);
  oxi::SequenceState* one[1] = {s2.get()};
  oxi::Batch bt;
  bt.n = static_cast<int64_t>(mixed.size());
  bt.token = mixed.data();
  bt.embd = rows.data();
  l.model->forward_batch(one, bt, oxi::BatchOutput{b.data(), h.data()});
  EXPECT_LE(batchtest::max_abs_diff(a.data(), b.data(), a.size()), 1e-5);
  // tied output head: logit v = hidden · E[v]
  double worst = 0;
  for (int64_t v = 0; v < V; ++v) {
    double dot = 0;
    for (int64_t i = 0; i < d; ++i) dot += static_cast<double>(h[static_cast<size_t>(i)]) * E[v * d + i];
    worst = std::max(worst, std::fabs(dot - b[static_cast<size_t>(v)]));
  }
  EXPECT_LE(worst, 1e-3);
}

TEST(Qwen35BatchErrors, BadBatchesLeaveStatesAlone) {
  q35test::Shape s;
  const std::string dir = q35test::tmp_dir("batch_err");
  q35test::write_model(dir, s);
  Loaded l = load(dir);
  const int64_t V = l.model->info().n_vocab;
  auto a = l.model->new_state(16), b = l.model->new_state(16);
  oxi::SequenceState* both[2] = {a.get(), b.get()};
  std::vector<float> lg(2 * static_cast<size_t>(V));
  const int32_t tok[4] = {1, 2, 3, 4};
  const int32_t split[4] = {0, 1, 0, 1};  // sequence 0's entries not contiguous
  oxi::Batch bt;
  bt.n = 4;
  bt.token = tok;
  bt.seq = split;
  EXPECT_THROW(l.model->forward_batch(both, bt, oxi::BatchOutput{lg.data(), nullptr}), oxi::Error);
  const int32_t bad_seq[4] = {0, 0, 2, 2};
  bt.seq = bad_seq;
  EXPECT_THROW(l.model->forward_batch(both, bt, oxi::BatchOutput{lg.data(), nullptr}), oxi::Error);
  const int32_t bad_tok[4] = {1, static_cast<int32_t>(V), 3, 4};
  const int32_t ok_seq[4] = {0, 0, 1, 1};
  bt.seq = ok_seq;
  bt.token = bad_tok;
  EXPECT_THROW(l.model->forward_batch(both, bt, oxi::BatchOutput{lg.data(), nullptr}), oxi::Error);
  bt.token = tok;
  oxi::SequenceState* twice[2] = {a.get(), a.get()};
  EXPECT_THROW(l.model->forward_batch(twice, bt, oxi::BatchOutput{lg.data(), nullptr}), oxi::Error);
  std::vector<int32_t> many(17, 1), seq17(17, 1);
  bt.n = 17;
  bt.token = many.data();
  bt.seq = seq17.data();
  EXPECT_THROW(l.model->forward_batch(both, bt, oxi::BatchOutput{lg.data(), nullptr}), oxi::Error);  // overflows b
  EXPECT_EQ(a->n_past(), 0);
  EXPECT_EQ(b->n_past(), 0);
}

// Model::exact_batch_tokens(): that many tokens of one sequence in one call (a verify step) give
// the logits of one call per token bit for bit, every ISA, float and quantised weights.
TEST_P(Qwen35Batch, ExactBatchTokensAreExact) {
  IsaReset reset;
  q35test::Shape s;
  s.moe = GetParam();
  const std::string dir = q35test::tmp_dir(s.moe ? "exact_moe" : "exact_dense");
  q35test::write_model(dir, s);
  for (const auto& isa : oxi::available_isas()) {
    oxi::set_isa(isa);
    for (const std::string quant : {"", "q8_0", "q4_0", "q4_k"}) {
      Loaded l = load(dir, quant);
      const int64_t V = l.model->info().n_vocab, K = std::min<int64_t>(l.model->exact_batch_tokens(), 17);
      EXPECT_GE(K, 4) << isa << " " << quant;
      EXPECT_EQ(batchtest::multi_vs_single(*l.model, batchtest::ids(70, V, 31), batchtest::ids(K, V, 32)), 0.0)
          << isa << " " << quant << " K " << K;
    }
  }
}

// Speculative decoding (runtime/session.cpp) on the real forward: greedy output equals the plain
// run's with drafts all accepted, all rejected and mixed, prompt lookup and the MTP head's drafts,
// for a prompt longer than the chunked-GDN block (64) — every ISA, float and quantised weights.
TEST_P(Qwen35Batch, SpeculativeGreedyEqualsPlain) {
  IsaReset reset;
  q35test::Shape s;
  s.moe = GetParam();
  s.mtp = true;  // and --spec mtp with the model's MTP head
  const std::string dir = q35test::tmp_dir(s.moe ? "spec_moe" : "spec_dense");
  q35test::write_model(dir, s);
  for (const auto& isa : oxi::available_isas()) {
    oxi::set_isa(isa);
    for (const std::string quant : {"", "q8_0", "q4_0", "q4_k"}) {
      Loaded l = load(dir, quant);
      std::vector<int32_t> prompt = batchtest::ids(70, l.model->info().n_vocab, 21);
      prompt.insert(prompt.end(), prompt.begin() + 10, prompt.begin() + 20);  // something to look up
      EXPECT_EQ(spectest::spec_vs_plain(*l.model, prompt, 24), "") << isa << " " << quant;
    }
  }
}

// The MTP head under continuous batching (the server's configuration): sessions on their own
// threads share a Batcher, which hands each its hidden rows with its logits; every session drafts
// with its own head and keeps the plain greedy tokens of running alone.
TEST_P(Qwen35Batch, MtpUnderTheBatcherEqualsPlain) {
  IsaReset reset;
  q35test::Shape s;
  s.moe = GetParam();
  s.mtp = true;
  const std::string dir = q35test::tmp_dir(s.moe ? "mtp_batcher_moe" : "mtp_batcher_dense");
  q35test::write_model(dir, s);
  for (const std::string quant : {"", "q4_k"}) {
    Loaded l = load(dir, quant);
    const int64_t V = l.model->info().n_vocab;
    constexpr int kSeqs = 3, kTokens = 20;
    std::vector<std::vector<int32_t>> prompts, got(kSeqs);
    std::vector<oxi::GenerateResult> res(kSeqs);
    for (int i = 0; i < kSeqs; ++i) {
      std::vector<int32_t> p = batchtest::ids(30 + 7 * i, V, 40 + i);
      p.insert(p.end(), p.begin() + 3, p.begin() + 12);  // something the trunk may repeat
      prompts.push_back(p);
    }
    oxi::Batcher b(*l.model);
    b.gather_wait = std::chrono::milliseconds(20);
    spectest::IdsOnly text(V);
    std::vector<std::unique_ptr<oxi::Session>> ses;
    for (int i = 0; i < kSeqs; ++i) ses.push_back(std::make_unique<oxi::Session>(*l.model, text, 256, &b, 16));
    {
      std::vector<std::unique_ptr<oxi::Batcher::Participant>> parts;
      for (int i = 0; i < kSeqs; ++i) parts.push_back(std::make_unique<oxi::Batcher::Participant>(&b));
      std::vector<std::thread> th;
      for (int i = 0; i < kSeqs; ++i)
        th.emplace_back([&, i] {
          oxi::GenerateOptions o;
          o.max_tokens = kTokens;
          o.spec.mode = oxi::SpecMode::kMtp;
          o.spec.adaptive = false;  // verify every draft the head makes
          o.spec.draft_max = 1 + i;
          res[static_cast<size_t>(i)] = ses[static_cast<size_t>(i)]->generate(prompts[static_cast<size_t>(i)], o, nullptr);
          parts[static_cast<size_t>(i)].reset();
        });
      for (auto& x : th) x.join();
    }
    for (int i = 0; i < kSeqs; ++i) {
      const auto& r = res[static_cast<size_t>(i)];
      EXPECT_EQ(r.generated, spectest::greedy(*l.model, prompts[static_cast<size_t>(i)], kTokens, {}).generated)
          << quant << " seq " << i;
      if (l.model->exact_batch_tokens() > 1) {
        EXPECT_GT(r.n_drafted, 0) << quant << " seq " << i;
      }
    }
    EXPECT_LT(b.passes(), b.rows()) << "no shared passes";
    // The heads' feeds went through the batcher too, and some shared a pass of the head.
    const oxi::Batcher::Counts n = b.counts();
    EXPECT_GT(n.mtp_feeds, 0u) << quant;
    EXPECT_LT(n.mtp_passes, n.mtp_feeds) << quant << ": no shared head passes";
    std::printf("mtp under the batcher %s: %llu head passes for %llu feeds\n", quant.empty() ? "f32" : quant.c_str(),
                static_cast<unsigned long long>(n.mtp_passes), static_cast<unsigned long long>(n.mtp_feeds));
  }
}

// The MTP head's batched pass (Model::mtp_forward_batch: the server's slots drafting together):
// each job's logits and output hidden state are those of its own mtp_forward call (bit for bit
// with float weights or the scalar set; within the multi-row kernels' float order otherwise), its
// state advances the same (a next step agrees again), and a batch with one bad job is refused
// before any state moves.
TEST_P(Qwen35Batch, MtpBatchEqualsEachAlone) {
  IsaReset reset;
  q35test::Shape s;
  s.moe = GetParam();
  s.mtp = true;
  const std::string dir = q35test::tmp_dir(s.moe ? "mtp_batch_moe" : "mtp_batch_dense");
  q35test::write_model(dir, s);
  for (const auto& isa : oxi::available_isas()) {
    oxi::set_isa(isa);
    for (const std::string quant : {"", "q4_k"}) {
      Loaded l = load(dir, quant);
      const oxi::Model& m = *l.model;
      const int64_t V = m.info().n_vocab, d = m.info().n_embd;
      std::mt19937 rng(7);
      std::normal_distribution<float> nd(0.0f, 1.0f);
      auto rows = [&](int64_t n) {
        std::vector<float> h(static_cast<size_t>(n * d));
        for (float& x : h) x = nd(rng);
        return h;
      };
      // Four heads with histories of 3, 10, 0 and 25 pairs (fed alone, the same into both sets).
      constexpr int kJobs = 4;
      const int64_t hist[kJobs] = {3, 10, 0, 25}, feed[kJobs] = {1, 4, 2, 1};
      std::vector<std::unique_ptr<oxi::SequenceState>> a, b;
      for (int i = 0; i < kJobs; ++i) {
        a.push_back(m.new_mtp_state(64));
        b.push_back(m.new_mtp_state(64));
        if (hist[i] == 0) continue;
        const std::vector<float> h = rows(hist[i]);
        const std::vector<int32_t> t = batchtest::ids(static_cast<uint32_t>(hist[i]), V, 30 + static_cast<uint32_t>(i));
        m.mtp_forward(*a.back(), h.data(), t.data(), hist[i], nullptr, nullptr);
        m.mtp_forward(*b.back(), h.data(), t.data(), hist[i], nullptr, nullptr);
      }
      const bool exact = quant.empty() || isa == "scalar";
      for (int step = 0; step < 2; ++step) {
        std::vector<std::vector<float>> hid(kJobs), lg_a(kJobs), lg_b(kJobs), ho_a(kJobs), ho_b(kJobs);
        std::vector<std::vector<int32_t>> tok(kJobs);
        std::vector<oxi::Model::MtpJob> jobs;
        for (int i = 0; i < kJobs; ++i) {
          const int64_t n = step == 0 ? feed[i] : 1;
          hid[i] = rows(n);
          tok[i] = batchtest::ids(static_cast<uint32_t>(n), V, 50 + static_cast<uint32_t>(10 * step + i));
          // Job 2 wants only its hidden state, job 1 only its logits; the others both.
          lg_a[i].assign(i == 2 ? 0 : static_cast<size_t>(V), 0.0f);
          lg_b[i] = lg_a[i];
          ho_a[i].assign(i == 1 ? 0 : static_cast<size_t>(d), 0.0f);
          ho_b[i] = ho_a[i];
          m.mtp_forward(*a[i], hid[i].data(), tok[i].data(), n, lg_a[i].empty() ? nullptr : lg_a[i].data(),
                        ho_a[i].empty() ? nullptr : ho_a[i].data());
          jobs.push_back({b[static_cast<size_t>(i)].get(), hid[i].data(), tok[i].data(), n,
                          lg_b[i].empty() ? nullptr : lg_b[i].data(), ho_b[i].empty() ? nullptr : ho_b[i].data()});
        }
        m.mtp_forward_batch(jobs);
        double dl = 0, dh = 0, scale = 0;
        for (int i = 0; i < kJobs; ++i) {
          EXPECT_EQ(a[i]->n_past(), b[i]->n_past());
          for (size_t k = 0; k < lg_a[i].size(); ++k) {
            dl = std::max(dl, static_cast<double>(std::fabs(lg_a[i][k] - lg_b[i][k])));
            scale = std::max(scale, static_cast<double>(std::fabs(lg_a[i][k])));
          }
          for (size_t k = 0; k < ho_a[i].size(); ++k) dh = std::max(dh, static_cast<double>(std::fabs(ho_a[i][k] - ho_b[i][k])));
        }
        EXPECT_GT(scale, 0.01);
        EXPECT_LE(dl, exact ? 0.0 : 0.05 * scale) << isa << " " << quant << " step " << step;
        EXPECT_LE(dh, exact ? 0.0 : 0.05) << isa << " " << quant << " step " << step;
        std::printf("mtp batch %s %s %s step %d: max |Δlogit| %.3g, |Δh| %.3g (max |logit| %.3g)\n", s.moe ? "moe" : "dense",
                    isa.c_str(), quant.empty() ? "f32" : quant.c_str(), step, dl, dh, scale);
      }
      // Refused whole: one job past its context, or a state named twice; no state moved.
      auto small = m.new_mtp_state(2);
      const std::vector<float> h3 = rows(3);
      const std::vector<int32_t> t3 = batchtest::ids(3, V, 99);
      std::vector<int64_t> before;
      for (const auto& st : b) before.push_back(st->n_past());
      const oxi::Model::MtpJob over[] = {{b[0].get(), h3.data(), t3.data(), 1, nullptr, nullptr},
                                         {small.get(), h3.data(), t3.data(), 3, nullptr, nullptr}};
      EXPECT_THROW(m.mtp_forward_batch(over), oxi::Error);
      const oxi::Model::MtpJob twice[] = {{b[1].get(), h3.data(), t3.data(), 1, nullptr, nullptr},
                                          {b[1].get(), h3.data(), t3.data(), 1, nullptr, nullptr}};
      EXPECT_THROW(m.mtp_forward_batch(twice), oxi::Error);
      auto trunk = m.new_state(64);
      const oxi::Model::MtpJob wrong[] = {{b[2].get(), h3.data(), t3.data(), 1, nullptr, nullptr},
                                          {trunk.get(), h3.data(), t3.data(), 1, nullptr, nullptr}};
      EXPECT_THROW(m.mtp_forward_batch(wrong), oxi::Error);
      EXPECT_EQ(small->n_past(), 0);
      for (size_t i = 0; i < b.size(); ++i) EXPECT_EQ(b[i]->n_past(), before[i]) << i;
    }
  }
}

// The session keeps trunk hidden rows for the MTP head only until the head has taken them in, and
// feeds a prompt whose rows outgrow the budget to the head straight away: the rows held stay
// small, and the drafts (and the greedy tokens) are those of keeping everything.
TEST_P(Qwen35Batch, MtpHiddenRowsStayBounded) {
  q35test::Shape s;
  s.moe = GetParam();
  s.mtp = true;
  const std::string dir = q35test::tmp_dir(s.moe ? "mtp_rows_moe" : "mtp_rows_dense");
  q35test::write_model(dir, s);
  Loaded l = load(dir);
  const int64_t V = l.model->info().n_vocab, row = l.model->info().n_embd * 4;
  const std::vector<int32_t> prompt = batchtest::ids(200, V, 77);
  spectest::IdsOnly text(V);
  auto run = [&](int64_t budget, int64_t* held) {
    oxi::Session ses(*l.model, text, 512, nullptr, 16);
    if (budget > 0) ses.set_max_hidden_bytes(budget);
    oxi::GenerateOptions o;
    o.max_tokens = 30;
    o.spec.mode = oxi::SpecMode::kMtp;
    o.spec.adaptive = false;
    o.spec.draft_max = 2;
    oxi::GenerateResult r = ses.generate(prompt, o, nullptr);
    *held = ses.hidden_bytes();
    return r;
  };
  int64_t held_all = 0, held_small = 0;
  const oxi::GenerateResult all = run(0, &held_all), small = run(16 * row, &held_small);
  EXPECT_EQ(small.generated, spectest::greedy(*l.model, prompt, 30, {}).generated);
  EXPECT_EQ(small.generated, all.generated);
  EXPECT_GT(small.n_drafted, 0);
  EXPECT_EQ(small.n_accepted, all.n_accepted);  // the same drafts
  EXPECT_LE(held_all, 8 * row) << "rows the head took in were kept";
  EXPECT_LE(held_small, 8 * row);
  // A request that does not draft on a session that may: its rows are fed away past the budget.
  oxi::Session ses(*l.model, text, 512, nullptr, 16);
  ses.set_max_hidden_bytes(16 * row);
  oxi::GenerateOptions o;
  o.max_tokens = 40;
  o.spec.mode = oxi::SpecMode::kNone;
  EXPECT_EQ(ses.generate(prompt, o, nullptr).generated, spectest::greedy(*l.model, prompt, 40, {}).generated);
  EXPECT_LE(ses.hidden_bytes(), 17 * row);
}

// A prompt-cache snapshot carries the MTP head's state and the one hidden row it still needs, so
// a session restored from it (the server's second turn) drafts at once, with the drafts of the
// session that made it; without them it could not draft until reset.
TEST_P(Qwen35Batch, MtpSurvivesASnapshotRestore) {
  q35test::Shape s;
  s.moe = GetParam();
  s.mtp = true;
  const std::string dir = q35test::tmp_dir(s.moe ? "mtp_snap_moe" : "mtp_snap_dense");
  q35test::write_model(dir, s);
  Loaded l = load(dir);
  const int64_t V = l.model->info().n_vocab, d = l.model->info().n_embd;
  std::vector<int32_t> prompt = batchtest::ids(90, V, 91);
  prompt.insert(prompt.end(), prompt.begin() + 5, prompt.begin() + 15);
  const std::span<const int32_t> head(prompt.data(), 70), rest(prompt.data() + 70, prompt.size() - 70);
  spectest::IdsOnly text(V);
  oxi::GenerateOptions o;
  o.max_tokens = 24;
  o.spec.mode = oxi::SpecMode::kMtp;
  o.spec.adaptive = false;
  o.spec.draft_max = 2;
  oxi::Session a(*l.model, text, 512, nullptr, 16);
  a.prefill(head);
  const oxi::Session::Snapshot snap = a.snapshot();
  EXPECT_FALSE(snap.mtp_state.empty());
  EXPECT_EQ(snap.hidden.size(), static_cast<size_t>(d)) << "only the last position's row travels";
  EXPECT_EQ(snap.hidden_base, 69);
  const oxi::GenerateResult ra = a.generate(rest, o, nullptr);
  const std::vector<int32_t> plain = spectest::greedy(*l.model, prompt, 24, {}).generated;
  EXPECT_EQ(ra.generated, plain);
  oxi::Session b(*l.model, text, 512, nullptr, 16);
  b.restore(snap);
  const oxi::GenerateResult rb = b.generate(rest, o, nullptr);
  EXPECT_EQ(rb.generated, plain);
  EXPECT_GT(rb.n_drafted, 0);
  EXPECT_EQ(rb.n_drafted, ra.n_drafted);
  EXPECT_EQ(rb.n_accepted, ra.n_accepted);
  // Without the head's part the restored session cannot draft (the old behaviour).
  oxi::Session::Snapshot bare = snap;
  bare.mtp_state.clear();
  bare.hidden.clear();
  oxi::Session c(*l.model, text, 512, nullptr, 16);
  c.restore(bare);
  const oxi::GenerateResult rc = c.generate(rest, o, nullptr);
  EXPECT_EQ(rc.generated, plain);
  EXPECT_EQ(rc.n_drafted, 0);
}

INSTANTIATE_TEST_SUITE_P(DenseAndMoe, Qwen35Batch, ::testing::Values(false, true));

}  // namespace
