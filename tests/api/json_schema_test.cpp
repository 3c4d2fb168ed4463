// C API structured output (oxi_generate_params.json_schema and .grammar): a scripted model over the
// real Qwen vocabulary generates under a JSON Schema or a GBNF grammar; the output must parse as
// JSON and obey the schema (checked here field by field, independently of the constraint's
// automaton), or be one of the grammar's strings.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "../runtime/fake_model.h"
#include "api/api_internal.h"
#include "oxinfer.h"
#include "tokenizer/tokenizer.h"

namespace {

using nlohmann::json;

const std::string kVocab = std::string(OXI_SHARED_DIR) + "/testdata/tokenizer/ggml-vocab-qwen35.gguf";

const char* kSchema = R"({
  "type": "object",
  "properties": {
    "name": {"type": "string", "maxLength": 8},
    "age": {"type": "integer"},
    "ok": {"type": "boolean"},
    "tags": {"type": "array", "items": {"enum": ["a", "b"]}, "maxItems": 2}
  },
  "required": ["name", "age", "ok"],
  "additionalProperties": false
})";

// Whether v obeys kSchema (written out by hand).
::testing::AssertionResult obeys_schema(const json& v) {
  if (!v.is_object()) return ::testing::AssertionFailure() << "not an object: " << v.dump();
  for (const char* k : {"name", "age", "ok"}) {
    if (!v.contains(k)) return ::testing::AssertionFailure() << "missing " << k << ": " << v.dump();
  }
  for (auto it = v.begin(); it != v.end(); ++it) {
    const std::string& k = it.key();
    if (k == "name") {
      if (!it->is_string()) return ::testing::AssertionFailure() << "name not a string";
      const std::string s = it->get<std::string>();
      size_t cps = 0;
      for (unsigned char c : s) cps += (c & 0xC0) != 0x80 ? 1 : 0;
      if (cps > 8) return ::testing::AssertionFailure() << "name longer than 8: " << s;
    } else if (k == "age") {
      if (!it->is_number_integer()) return ::testing::AssertionFailure() << "age not an integer";
    } else if (k == "ok") {
      if (!it->is_boolean()) return ::testing::AssertionFailure() << "ok not a boolean";
    } else if (k == "tags") {
      if (!it->is_array() || it->size() > 2) return ::testing::AssertionFailure() << "tags: " << it->dump();
      for (const auto& t : *it) {
        if (t != "a" && t != "b") return ::testing::AssertionFailure() << "tag " << t.dump();
      }
    } else {
      return ::testing::AssertionFailure() << "unexpected key " << k;
    }
  }
  return ::testing::AssertionSuccess();
}

struct Out {
  std::string text;
  std::vector<int> eog;
};

int collect(const oxi_token_event* e, void* u) {
  auto* o = static_cast<Out*>(u);
  o->text.append(e->text, e->text_len);
  o->eog.push_back(e->is_eog);
  return 0;
}

class ApiJsonSchema : public ::testing::Test {
 protected:
  void SetUp() override {
    tok_ = oxi::load_tokenizer(kVocab);
    hello_ = tok_->encode("Hello", false, false);
    ASSERT_EQ(hello_.size(), 1u);
  }
  void TearDown() override { oxi_model_free(model_); }

  // A model that always wants `next(generated so far)`.
  void make_model(std::function<int32_t(size_t)> next) {
    auto fm = std::make_unique<oxi::test::FakeModel>(
        tok_->n_vocab(), [next](const std::vector<int32_t>& q) { return next(q.size() - 1); });
    model_ = oxi::wrap_model(std::move(fm), tok_, "");
  }

  oxi_status generate(const char* schema, Out& out, oxi_generate_result& r, int32_t ignore_eog = 0,
                      const char* grammar = nullptr) {
    oxi_context* c = nullptr;
    EXPECT_EQ(oxi_context_new(model_, 512, &c), OXI_OK);
    oxi_generate_params p = oxi_generate_default_params();
    p.max_tokens = 300;
    p.json_schema = schema;
    p.grammar = grammar;
    p.ignore_eog = ignore_eog;
    const int32_t prompt[1] = {0};
    const oxi_status s = oxi_generate(c, prompt, 1, &p, collect, &out, &r);
    oxi_context_free(c);
    return s;
  }

  oxi::TokenizerPtr tok_;
  std::vector<int32_t> hello_;
  oxi_model* model_ = nullptr;
};

TEST_F(ApiJsonSchema, DefaultParamsLeaveGenerationFree) {
  EXPECT_EQ(oxi_generate_default_params().json_schema, nullptr);
  EXPECT_GE(OXI_API_VERSION, 2);
}

TEST_F(ApiJsonSchema, ModelThatNeverWritesJsonStillProducesAValidDocument) {
  const int32_t h = hello_[0];
  make_model([h](size_t) { return h; });  // "Hello" forever: never valid inside the document
  Out out;
  oxi_generate_result r;
  ASSERT_EQ(generate(kSchema, out, r), OXI_OK) << oxi_last_error();
  const json v = json::parse(out.text, nullptr, /*allow_exceptions=*/false);
  ASSERT_FALSE(v.is_discarded()) << out.text;
  EXPECT_TRUE(obeys_schema(v)) << out.text;
  // The document is complete, then the model's end-of-generation token ends it.
  EXPECT_EQ(r.stop_reason, 0);
  ASSERT_FALSE(out.eog.empty());
  EXPECT_EQ(out.eog.back(), 1);
}

TEST_F(ApiJsonSchema, ValidOutputPassesUnchanged) {
  const std::string doc = R"({"name": "Ann", "age": 31, "ok": true, "tags": ["b"]})";
  const std::vector<int32_t> ids = tok_->encode(doc, false, false);
  const int32_t end = tok_->find_token("<|im_end|>");
  ASSERT_GE(end, 0);
  make_model([ids, end](size_t i) { return i < ids.size() ? ids[i] : end; });
  Out out;
  oxi_generate_result r;
  ASSERT_EQ(generate(kSchema, out, r), OXI_OK) << oxi_last_error();
  EXPECT_EQ(out.text, doc);
  EXPECT_EQ(r.n_generated, static_cast<int32_t>(ids.size()) + 1);
  EXPECT_EQ(r.stop_reason, 0);
  EXPECT_TRUE(obeys_schema(json::parse(out.text)));
}

TEST_F(ApiJsonSchema, NullSchemaMeansAnyJsonObject) {
  // "Hello" first (masked: a document must start with '{', the only single byte that can), then
  // the rest of an object, then the end of the turn.
  const std::vector<int32_t> rest = tok_->encode(R"("x": [1, null]})", false, false);
  const int32_t h = hello_[0], end = tok_->find_token("<|im_end|>");
  make_model([h, rest, end](size_t i) { return i == 0 ? h : i - 1 < rest.size() ? rest[i - 1] : end; });
  Out out;
  oxi_generate_result r;
  ASSERT_EQ(generate("null", out, r), OXI_OK) << oxi_last_error();
  EXPECT_EQ(out.text, R"({"x": [1, null]})");
  EXPECT_EQ(r.stop_reason, 0);
  const json v = json::parse(out.text, nullptr, false);
  ASSERT_FALSE(v.is_discarded()) << out.text;
  EXPECT_TRUE(v.is_object()) << out.text;
}

TEST_F(ApiJsonSchema, BadSchemasAreInvalidArguments) {
  const int32_t h = hello_[0];
  make_model([h](size_t) { return h; });
  Out out;
  oxi_generate_result r;
  EXPECT_EQ(generate(R"({"type": "widget"})", out, r), OXI_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(std::string(oxi_last_error()).rfind("json_schema: ", 0), 0u) << oxi_last_error();
  EXPECT_EQ(generate("{not json", out, r), OXI_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(std::string(oxi_last_error()).rfind("json_schema: invalid JSON", 0), 0u) << oxi_last_error();
  EXPECT_EQ(generate(kSchema, out, r, /*ignore_eog=*/1), OXI_ERR_INVALID_ARGUMENT);
  EXPECT_TRUE(out.text.empty());  // nothing was generated
}

TEST_F(ApiJsonSchema, GrammarConstrainsTheOutput) {
  EXPECT_EQ(oxi_generate_default_params().grammar, nullptr);
  EXPECT_GE(OXI_API_VERSION, 6);
  const int32_t h = hello_[0];
  make_model([h](size_t) { return h; });  // "Hello" is never in the language
  Out out;
  oxi_generate_result r;
  ASSERT_EQ(generate(nullptr, out, r, 0, "root ::= (\"yes\" | \"no\") \"!\"{1,3}\n"), OXI_OK) << oxi_last_error();
  EXPECT_TRUE(out.text == "yes!" || out.text == "no!" || out.text == "yes!!" || out.text == "no!!" ||
              out.text == "yes!!!" || out.text == "no!!!")
      << out.text;
  EXPECT_EQ(r.stop_reason, 0);  // ended by end-of-generation, sampled only where the text is complete
}

TEST_F(ApiJsonSchema, GrammarOutputThatFitsPassesUnchanged) {
  const std::string text = "- ab\n- cd\n";
  const std::vector<int32_t> ids = tok_->encode(text, false, false);
  const int32_t end = tok_->find_token("<|im_end|>");
  make_model([ids, end](size_t i) { return i < ids.size() ? ids[i] : end; });
  Out out;
  oxi_generate_result r;
  ASSERT_EQ(generate(nullptr, out, r, 0, "root ::= (\"- \" [a-z]+ \"\\n\")+\n"), OXI_OK) << oxi_last_error();
  EXPECT_EQ(out.text, text);
  EXPECT_EQ(r.stop_reason, 0);
}

TEST_F(ApiJsonSchema, BadGrammarsAreInvalidArguments) {
  const int32_t h = hello_[0];
  make_model([h](size_t) { return h; });
  Out out;
  oxi_generate_result r;
  EXPECT_EQ(generate(nullptr, out, r, 0, "root ::= \"a\"\nb ::= c\n"), OXI_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(std::string(oxi_last_error()).rfind("grammar: line 2, column 7: undefined rule 'c'", 0), 0u) << oxi_last_error();
  EXPECT_EQ(generate("null", out, r, 0, "root ::= \"a\""), OXI_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(generate(nullptr, out, r, 1, "root ::= \"a\""), OXI_ERR_INVALID_ARGUMENT);
  EXPECT_TRUE(out.text.empty());
}

}  // namespace
