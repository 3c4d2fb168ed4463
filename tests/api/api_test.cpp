// C API: error paths (statuses and messages), the capacity protocol, generation through the API
// with a scripted model and a real vocabulary, cancellation, per-thread errors.
#include <gtest/gtest.h>

#include <algorithm>

#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "../runtime/fake_model.h"
#include "api/api_internal.h"
#include "oxinfer.h"
#include "tokenizer/tokenizer.h"

namespace {

const std::string kVocab = std::string(OXI_SHARED_DIR) + "/testdata/tokenizer/ggml-vocab-qwen35.gguf";

std::string temp_path(const std::string& name) {
  return std::string(OXI_BINARY_DIR) + "/api_test_" + name;
}

TEST(Api, StatusNamesAndVersion) {
  EXPECT_STREQ(oxi_status_name(OXI_OK), "ok");
  EXPECT_STREQ(oxi_status_name(OXI_ERR_IO), "I/O error");
  EXPECT_STRNE(oxi_version(), "");
}

TEST(Api, MissingFileIsAnIoErrorNamingThePath) {
  oxi_model* m = reinterpret_cast<oxi_model*>(0x1);
  const std::string path = "/nonexistent/dir/model.gguf";
  EXPECT_EQ(oxi_model_open(path.c_str(), nullptr, &m), OXI_ERR_IO);
  EXPECT_EQ(m, nullptr);
  EXPECT_NE(std::string(oxi_last_error()).find(path), std::string::npos) << oxi_last_error();
}

TEST(Api, GarbageFileIsAFormatError) {
  const std::string path = temp_path("garbage.gguf");
  {
    std::ofstream f(path, std::ios::binary);
    f << "this is not a gguf file at all, just some text bytes";
  }
  oxi_model* m = nullptr;
  const oxi_status s = oxi_model_open(path.c_str(), nullptr, &m);
  EXPECT_EQ(s, OXI_ERR_FORMAT) << oxi_last_error();
  EXPECT_EQ(m, nullptr);
  EXPECT_NE(std::string(oxi_last_error()).find("garbage.gguf"), std::string::npos) << oxi_last_error();
  std::remove(path.c_str());
}

TEST(Api, VocabularyOnlyFileIsUnsupported) {
  // A real GGUF whose architecture (qwen2) is not one of ours.
  oxi_model* m = nullptr;
  const oxi_status s = oxi_model_open(kVocab.c_str(), nullptr, &m);
  EXPECT_EQ(s, OXI_ERR_UNSUPPORTED) << oxi_last_error();
  EXPECT_EQ(m, nullptr);
  EXPECT_NE(std::string(oxi_last_error()).find("architecture"), std::string::npos) << oxi_last_error();
}

TEST(Api, NullArgumentsAreInvalid) {
  oxi_model* m = nullptr;
  EXPECT_EQ(oxi_model_open(nullptr, nullptr, &m), OXI_ERR_INVALID_ARGUMENT);
  EXPECT_STRNE(oxi_last_error(), "");
  EXPECT_EQ(oxi_model_open("x.gguf", nullptr, nullptr), OXI_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(oxi_model_open("", nullptr, &m), OXI_ERR_INVALID_ARGUMENT);
  oxi_model_desc d;
  EXPECT_EQ(oxi_model_describe(nullptr, &d), OXI_ERR_INVALID_ARGUMENT);
  size_t n = 0;
  EXPECT_EQ(oxi_tokenize(nullptr, "a", 1, 1, 1, nullptr, 0, &n), OXI_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(oxi_detokenize(nullptr, nullptr, 0, nullptr, 0, &n), OXI_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(oxi_chat_render(nullptr, "[]", nullptr, nullptr, 0, &n), OXI_ERR_INVALID_ARGUMENT);
  oxi_context* c = nullptr;
  EXPECT_EQ(oxi_context_new(nullptr, 0, &c), OXI_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(oxi_context_reset(nullptr), OXI_ERR_INVALID_ARGUMENT);
  const int32_t ids[1] = {1};
  oxi_generate_result r;
  EXPECT_EQ(oxi_generate(nullptr, ids, 1, nullptr, nullptr, nullptr, &r), OXI_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(oxi_context_n_past(nullptr), 0);
  // Freeing NULL is fine.
  oxi_model_free(nullptr);
  oxi_context_free(nullptr);
  const oxi_sampling_params sp = oxi_model_sampling_defaults(nullptr);
  EXPECT_FLOAT_EQ(sp.temperature, 0.8f);
}

TEST(Api, LastErrorIsPerThread) {
  oxi_model* m = nullptr;
  ASSERT_EQ(oxi_model_open("/nonexistent/a.gguf", nullptr, &m), OXI_ERR_IO);
  std::string other;
  std::thread t([&] {
    other = oxi_last_error();  // nothing failed on this thread
  });
  t.join();
  EXPECT_EQ(other, "");
  EXPECT_NE(std::string(oxi_last_error()).find("/nonexistent/a.gguf"), std::string::npos);
}

TEST(Api, DefaultParams) {
  const oxi_sampling_params g = oxi_sampling_default_params();
  EXPECT_LE(g.temperature, 0.0f);
  const oxi_generate_params p = oxi_generate_default_params();
  EXPECT_EQ(p.max_tokens, -1);
  EXPECT_EQ(p.n_top_logprobs, 0);
  EXPECT_EQ(p.cancel, nullptr);
  const oxi_model_params mp = oxi_model_default_params();
  EXPECT_EQ(mp.n_threads, 0);
  EXPECT_EQ(mp.quant, nullptr);
  EXPECT_EQ(mp.image_preproc, nullptr);
}

// image_preproc is checked before the file is read: an unknown resize is the caller's error.
TEST(Api, UnknownImagePreprocIsInvalid) {
  oxi_model_params mp = oxi_model_default_params();
  mp.image_preproc = "bicubic";
  oxi_model* m = nullptr;
  EXPECT_EQ(oxi_model_open("/nonexistent/a.gguf", &mp, &m), OXI_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(m, nullptr);
  EXPECT_NE(std::string(oxi_last_error()).find("image_preproc must be hf or llama"), std::string::npos);
  mp.image_preproc = "llama";  // valid: the missing file is what fails now
  EXPECT_EQ(oxi_model_open("/nonexistent/a.gguf", &mp, &m), OXI_ERR_IO);
}

// ---- with a scripted model over the real Qwen vocabulary ------------------------------------

class ApiModel : public ::testing::Test {
 protected:
  void SetUp() override {
    tok_ = oxi::load_tokenizer(kVocab);
    im_end_ = tok_->find_token("<|im_end|>");
    ASSERT_GE(im_end_, 0);
    ASSERT_TRUE(tok_->is_eog(im_end_));
    // "Hello" then " world" then end of turn, whatever came before.
    hello_ = tok_->encode("Hello", false, false);
    world_ = tok_->encode(" world", false, false);
    ASSERT_EQ(hello_.size(), 1u);
    ASSERT_EQ(world_.size(), 1u);
    const int32_t h = hello_[0], w = world_[0], e = im_end_;
    auto fm = std::make_unique<oxi::test::FakeModel>(tok_->n_vocab(), [h, w, e](const std::vector<int32_t>& q) {
      if (q.back() == h) return w;
      if (q.back() == w) return e;
      return h;
    });
    fake_ = fm.get();
    model_ = oxi::wrap_model(std::move(fm), tok_,
                             "{% for m in messages %}<{{ m.role }}>{{ m.content }}</{{ m.role }}>"
                             "{% endfor %}{% if add_generation_prompt %}<assistant>{% endif %}");
  }
  void TearDown() override { oxi_model_free(model_); }

  oxi::TokenizerPtr tok_;
  int32_t im_end_ = -1;
  std::vector<int32_t> hello_, world_;
  oxi::test::FakeModel* fake_ = nullptr;
  oxi_model* model_ = nullptr;
};

struct Collected {
  std::vector<int32_t> ids;
  std::string text;
  std::vector<int> eog;
  std::vector<float> lp;
  std::vector<int32_t> n_top;
  int stop_after = -1;  // return non-zero after this many tokens
};

int collect(const oxi_token_event* e, void* u) {
  auto* c = static_cast<Collected*>(u);
  c->ids.push_back(e->id);
  c->text.append(e->text, e->text_len);
  c->eog.push_back(e->is_eog);
  c->lp.push_back(e->logprob);
  c->n_top.push_back(e->n_top);
  return c->stop_after >= 0 && static_cast<int>(c->ids.size()) >= c->stop_after ? 1 : 0;
}

TEST_F(ApiModel, DescribeAndTokenizeCapacityProtocol) {
  oxi_model_desc d;
  ASSERT_EQ(oxi_model_describe(model_, &d), OXI_OK);
  EXPECT_STREQ(d.arch, "fake");
  EXPECT_EQ(d.n_vocab, tok_->n_vocab());
  EXPECT_EQ(d.has_chat_template, 1);
  EXPECT_EQ(std::string(oxi_model_chat_template(model_)).rfind("{% for m in messages %}", 0), 0u);
  EXPECT_STREQ(oxi_model_chat_template(nullptr), "");
  EXPECT_EQ(oxi_token_is_eog(model_, im_end_), 1);
  EXPECT_EQ(oxi_token_is_eog(model_, hello_[0]), 0);

  const std::string text = "Hello world";
  size_t n = 0;
  ASSERT_EQ(oxi_tokenize(model_, text.data(), text.size(), 1, 1, nullptr, 0, &n), OXI_OK);
  EXPECT_EQ(n, 2u);  // "Hello", " world"
  int32_t one[1] = {-7};
  ASSERT_EQ(oxi_tokenize(model_, text.data(), text.size(), 1, 1, one, 1, &n), OXI_OK);
  EXPECT_EQ(n, 2u);
  EXPECT_EQ(one[0], hello_[0]);
  const int32_t ids[2] = {hello_[0], world_[0]};
  char buf[6];
  ASSERT_EQ(oxi_detokenize(model_, ids, 2, buf, sizeof buf, &n), OXI_OK);
  EXPECT_EQ(n, 11u);  // full size reported though only 6 bytes fit
  EXPECT_EQ(std::string(buf, 6), "Hello ");
  char big[32];
  ASSERT_EQ(oxi_detokenize(model_, ids, 2, big, sizeof big, &n), OXI_OK);
  EXPECT_STREQ(big, "Hello world");
  const int32_t bad[1] = {1 << 30};
  EXPECT_EQ(oxi_detokenize(model_, bad, 1, big, sizeof big, &n), OXI_ERR_INVALID_ARGUMENT);
}

TEST_F(ApiModel, ChatRender) {
  const char* msgs = R"([{"role":"user","content":"Hi"}])";
  size_t n = 0;
  char buf[128];
  ASSERT_EQ(oxi_chat_render(model_, msgs, nullptr, buf, sizeof buf, &n), OXI_OK) << oxi_last_error();
  EXPECT_STREQ(buf, "<user>Hi</user><assistant>");
  ASSERT_EQ(oxi_chat_render(model_, msgs, R"({"add_generation_prompt":false})", buf, sizeof buf, &n), OXI_OK);
  EXPECT_STREQ(buf, "<user>Hi</user>");
  EXPECT_EQ(oxi_chat_render(model_, "[{", nullptr, buf, sizeof buf, &n), OXI_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(oxi_chat_render(model_, "{}", nullptr, buf, sizeof buf, &n), OXI_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(oxi_chat_render(model_, msgs, "[1]", buf, sizeof buf, &n), OXI_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(oxi_chat_render(model_, msgs, R"({"add_generation_prompt":3})", buf, sizeof buf, &n),
            OXI_ERR_INVALID_ARGUMENT);
}

// Issue 29 #11: tokenizing oxi_chat_render's text turned "<|im_end|>" in a message into the
// control token; oxi_chat_tokenize keeps it text (special_in_content: the old way).
TEST_F(ApiModel, ChatTokenizeKeepsMessageTextPlain) {
  const char* msgs = R"([{"role":"user","content":"Hi<|im_end|>"}])";
  std::vector<int32_t> want = tok_->encode("<user>Hi<|im_end|></user><assistant>", true, false);
  int32_t ids[64];
  size_t n = 0;
  ASSERT_EQ(oxi_chat_tokenize(model_, msgs, nullptr, ids, 64, &n), OXI_OK) << oxi_last_error();
  EXPECT_EQ(std::vector<int32_t>(ids, ids + n), want);
  EXPECT_EQ(std::count(ids, ids + n, im_end_), 0);
  ASSERT_EQ(oxi_chat_tokenize(model_, msgs, R"({"special_in_content":true})", ids, 64, &n), OXI_OK);
  EXPECT_EQ(std::count(ids, ids + n, im_end_), 1);
  EXPECT_EQ(oxi_chat_tokenize(model_, msgs, R"({"special_in_content":1})", ids, 64, &n), OXI_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(oxi_chat_tokenize(model_, "[{", nullptr, ids, 64, &n), OXI_ERR_INVALID_ARGUMENT);
}

TEST_F(ApiModel, NoTemplateIsUnsupported) {
  oxi_model* bare = oxi::wrap_model(std::make_unique<oxi::test::FakeModel>(
                                        tok_->n_vocab(), [](const std::vector<int32_t>&) { return 0; }),
                                    tok_, "");
  size_t n = 0;
  EXPECT_EQ(oxi_chat_render(bare, "[]", nullptr, nullptr, 0, &n), OXI_ERR_UNSUPPORTED);
  oxi_model_free(bare);
}

TEST_F(ApiModel, GenerateStreamsUntilEndOfGeneration) {
  oxi_context* c = nullptr;
  ASSERT_EQ(oxi_context_new(model_, 64, &c), OXI_OK);
  EXPECT_EQ(oxi_context_n_ctx(c), 64);
  oxi_generate_params p = oxi_generate_default_params();
  p.n_top_logprobs = 2;
  Collected col;
  oxi_generate_result r;
  const int32_t prompt[1] = {0};
  ASSERT_EQ(oxi_generate(c, prompt, 1, &p, collect, &col, &r), OXI_OK) << oxi_last_error();
  EXPECT_EQ(col.ids, (std::vector<int32_t>{hello_[0], world_[0], im_end_}));
  EXPECT_EQ(col.text, "Hello world");
  EXPECT_EQ(col.eog, (std::vector<int>{0, 0, 1}));
  EXPECT_EQ(col.n_top, (std::vector<int32_t>{2, 2, 2}));
  // One logit 10, the rest 0 over the vocabulary V: log p = 10 - log(e^10 + V - 1).
  const double z = std::log(std::exp(10.0) + static_cast<double>(tok_->n_vocab() - 1));
  EXPECT_NEAR(col.lp[0], 10.0 - z, 1e-4);
  EXPECT_EQ(r.n_prompt, 1);
  EXPECT_EQ(r.n_generated, 3);
  EXPECT_EQ(r.stop_reason, 0);
  EXPECT_EQ(oxi_context_n_past(c), 3);  // prompt + 2 fed back; the end token never is
  ASSERT_EQ(oxi_context_reset(c), OXI_OK);
  EXPECT_EQ(oxi_context_n_past(c), 0);
  oxi_context_free(c);
}

// Speculative decoding (API v3): the same tokens with and without it, the counts reported, bad
// settings refused.
TEST_F(ApiModel, SpeculativeDecodingThroughTheApi) {
  EXPECT_EQ(oxi_generate_default_params().spec_mode, OXI_SPEC_AUTO);
  oxi_context* c = nullptr;
  ASSERT_EQ(oxi_context_new(model_, 64, &c), OXI_OK);
  oxi_generate_params p = oxi_generate_default_params();
  p.max_tokens = 20;
  p.ignore_eog = 1;  // Hello world <end> Hello world <end> …: prompt lookup finds the loop
  const int32_t prompt[1] = {0};
  std::vector<int32_t> ids[2];
  for (int spec = 0; spec < 2; ++spec) {
    p.spec_mode = spec ? OXI_SPEC_NGRAM : OXI_SPEC_NONE;
    p.draft_min = spec;  // draft whenever there is a proposal
    Collected col;
    ASSERT_EQ(oxi_context_reset(c), OXI_OK);
    ASSERT_EQ(oxi_generate(c, prompt, 1, &p, collect, &col, nullptr), OXI_OK) << oxi_last_error();
    ids[spec] = col.ids;
    int32_t nv = -1, nd = -1, na = -1;
    ASSERT_EQ(oxi_context_spec_stats(c, &nv, &nd, &na), OXI_OK);
    if (spec) {
      EXPECT_GT(nd, 0);
      EXPECT_EQ(na, nd);
      EXPECT_GT(nv, 0);
    } else {
      EXPECT_EQ(nd, 0);
    }
  }
  EXPECT_EQ(ids[0], ids[1]);
  EXPECT_EQ(ids[0].size(), 20u);
  p.spec_mode = 9;
  EXPECT_EQ(oxi_generate(c, prompt, 1, &p, nullptr, nullptr, nullptr), OXI_ERR_INVALID_ARGUMENT);
  p.spec_mode = OXI_SPEC_AUTO;
  p.draft_max = 17;
  EXPECT_EQ(oxi_generate(c, prompt, 1, &p, nullptr, nullptr, nullptr), OXI_ERR_INVALID_ARGUMENT);
  p.draft_max = 4;
  p.draft_min = 5;
  EXPECT_EQ(oxi_generate(c, prompt, 1, &p, nullptr, nullptr, nullptr), OXI_ERR_INVALID_ARGUMENT);
  p.draft_min = 0;
  p.spec_mode = OXI_SPEC_MTP;
  EXPECT_EQ(oxi_generate(c, prompt, 1, &p, nullptr, nullptr, nullptr), OXI_ERR_UNSUPPORTED);
  EXPECT_NE(std::string(oxi_last_error()).find("mtp"), std::string::npos) << oxi_last_error();
  EXPECT_EQ(oxi_context_spec_stats(nullptr, nullptr, nullptr, nullptr), OXI_ERR_INVALID_ARGUMENT);
  oxi_context_free(c);
}

TEST_F(ApiModel, CallbackCancellation) {
  oxi_context* c = nullptr;
  ASSERT_EQ(oxi_context_new(model_, 64, &c), OXI_OK);
  oxi_generate_params p = oxi_generate_default_params();
  p.ignore_eog = 1;
  Collected col;
  col.stop_after = 2;
  oxi_generate_result r;
  const int32_t prompt[1] = {0};
  EXPECT_EQ(oxi_generate(c, prompt, 1, &p, collect, &col, &r), OXI_ERR_CANCELLED);
  EXPECT_EQ(col.ids.size(), 2u);
  EXPECT_EQ(r.stop_reason, 3);
  EXPECT_EQ(r.n_generated, 2);
  EXPECT_STRNE(oxi_last_error(), "");
  oxi_context_free(c);
}

TEST_F(ApiModel, FlagCancellationFromAnotherThread) {
  oxi_context* c = nullptr;
  ASSERT_EQ(oxi_context_new(model_, 1 << 20, &c), OXI_OK);
  oxi_generate_params p = oxi_generate_default_params();
  p.ignore_eog = 1;  // would run until the (huge) context is full
  volatile int flag = 0;
  p.cancel = &flag;
  std::atomic<int> seen{0};
  auto cb = [](const oxi_token_event*, void* u) {
    static_cast<std::atomic<int>*>(u)->fetch_add(1);
    return 0;
  };
  std::thread stopper([&] {
    while (seen.load() < 5) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    flag = 1;
  });
  oxi_generate_result r;
  const int32_t prompt[1] = {0};
  EXPECT_EQ(oxi_generate(c, prompt, 1, &p, cb, &seen, &r), OXI_ERR_CANCELLED);
  stopper.join();
  EXPECT_EQ(r.stop_reason, 3);
  EXPECT_GE(r.n_generated, 5);
  EXPECT_LT(r.n_generated, 1 << 20);
  oxi_context_free(c);
}

TEST_F(ApiModel, PromptLongerThanContextIsRefused) {
  oxi_context* c = nullptr;
  ASSERT_EQ(oxi_context_new(model_, 4, &c), OXI_OK);
  const int32_t prompt[5] = {1, 2, 3, 4, 5};
  oxi_generate_result r;
  EXPECT_EQ(oxi_generate(c, prompt, 5, nullptr, nullptr, nullptr, &r), OXI_ERR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(oxi_last_error()).find("does not fit"), std::string::npos) << oxi_last_error();
  EXPECT_EQ(oxi_context_n_past(c), 0);
  // Out-of-range ids and bad parameters.
  const int32_t bad[1] = {static_cast<int32_t>(tok_->n_vocab())};
  EXPECT_EQ(oxi_generate(c, bad, 1, nullptr, nullptr, nullptr, &r), OXI_ERR_INVALID_ARGUMENT);
  oxi_generate_params p = oxi_generate_default_params();
  p.n_top_logprobs = 50;
  EXPECT_EQ(oxi_generate(c, prompt, 1, &p, nullptr, nullptr, &r), OXI_ERR_INVALID_ARGUMENT);
  p = oxi_generate_default_params();
  p.sampling.top_p = std::nanf("");
  EXPECT_EQ(oxi_generate(c, prompt, 1, &p, nullptr, nullptr, &r), OXI_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(oxi_generate(c, prompt, 0, nullptr, nullptr, nullptr, &r), OXI_ERR_INVALID_ARGUMENT);
  oxi_context_free(c);
}

TEST_F(ApiModel, PrefixReuseThroughTheApi) {
  oxi_context* c = nullptr;
  ASSERT_EQ(oxi_context_new(model_, 64, &c), OXI_OK);
  const int32_t a[3] = {5, 6, 7};
  ASSERT_EQ(oxi_context_prefill(c, a, 3), OXI_OK);
  ASSERT_EQ(oxi_context_checkpoint(c), OXI_OK);
  const int32_t more[1] = {8};
  ASSERT_EQ(oxi_context_prefill(c, more, 1), OXI_OK);
  EXPECT_EQ(oxi_context_n_past(c), 4);
  size_t kept = 99;
  const int32_t seq[5] = {5, 6, 7, 9, 9};  // diverges after the checkpoint
  ASSERT_EQ(oxi_context_reuse_prefix(c, seq, 5, &kept), OXI_OK);
  EXPECT_EQ(kept, 3u);
  EXPECT_EQ(oxi_context_n_past(c), 3);
  const size_t before = fake_->calls.size();
  oxi_generate_params p = oxi_generate_default_params();
  p.max_tokens = 1;
  oxi_generate_result r;
  ASSERT_EQ(oxi_generate(c, seq + kept, 5 - kept, &p, nullptr, nullptr, &r), OXI_OK);
  EXPECT_EQ(r.n_prompt, 2);
  EXPECT_EQ(fake_->calls.size(), before + 1);  // one prefill batch of the 2 new tokens
  oxi_context_free(c);
}

}  // namespace
