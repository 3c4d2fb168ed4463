// The JSON-schema constraint (sampling/json_constraint.h) and the logit mask both the server and
// the C API apply with it.
#include <gtest/gtest.h>

#include <cmath>

#include "core/error.h"
#include "sampling/json_constraint.h"

namespace oxi {
namespace {

using nlohmann::json;

// Feeds `doc` one byte at a time; returns how many bytes were accepted.
size_t feed(JsonConstraint& c, const std::string& doc) {
  for (size_t i = 0; i < doc.size(); ++i) {
    if (!c.advance(doc.substr(i, 1))) return i;
  }
  return doc.size();
}

const json kPerson = json::parse(R"({
  "type": "object",
  "properties": {
    "name": {"type": "string"},
    "age": {"type": "integer"},
    "tags": {"type": "array", "items": {"type": "string"}},
    "color": {"enum": ["red", "green"]},
    "score": {"type": ["number", "null"]}
  },
  "required": ["name", "age"],
  "additionalProperties": false
})");

TEST(JsonConstraint, AcceptsValidDocumentsCompletely) {
  const std::vector<std::string> docs = {
      R"({"name": "Ann", "age": 31})",
      R"({"age":7,"name":"B\"o\u00e9","tags":["x","y"],"color":"green","score":-1.5e3})",
      "{\n  \"name\": \"\",\n  \"age\": 0,\n  \"score\": null\n}",
  };
  for (const auto& d : docs) {
    ASSERT_TRUE(json::accept(d)) << d;  // independent JSON parser agrees it is JSON
    JsonConstraint c(kPerson);
    EXPECT_EQ(feed(c, d), d.size()) << d;
    EXPECT_TRUE(c.complete()) << d;
  }
}

TEST(JsonConstraint, RejectsSchemaViolations) {
  const std::vector<std::pair<std::string, size_t>> bad = {
      {R"({"name": "Ann"})", 14},               // '}' before required age
      {R"({"nick": 1})", 2},                    // unknown key: rejected at 'n' of nick? (first char)
      {R"({"name": 5})", 9},                    // name must be a string
      {R"({"name":"a","age":1.5})", 19},        // age is an integer
      {R"({"name":"a","age":1,"color":"blue"})", 29},
      {R"({"name":"a","name":"b","age":1})", 13},  // duplicate key
      {"[1]", 0},
  };
  for (const auto& [d, expect_at] : bad) {
    JsonConstraint c(kPerson);
    const size_t at = feed(c, d);
    EXPECT_LT(at, d.size()) << d;
    EXPECT_FALSE(c.complete()) << d;
  }
}

TEST(JsonConstraint, JsonObjectModeAndMultiByteTokens) {
  JsonConstraint c(nullptr);
  EXPECT_FALSE(c.accepts("\"x\""));  // json_object: top level must be an object
  EXPECT_TRUE(c.accepts("{\"a\": [1, true, null, {\"b\": \"\\n\"}]}"));
  EXPECT_TRUE(c.advance("{\"a\""));
  EXPECT_FALSE(c.advance("}"));       // a key needs a value
  EXPECT_TRUE(c.advance(": 12"));
  EXPECT_FALSE(c.complete());
  EXPECT_TRUE(c.advance("}"));
  EXPECT_TRUE(c.complete());
  EXPECT_FALSE(c.accepts("x"));
  EXPECT_TRUE(c.accepts(" \n"));
}

TEST(JsonConstraint, WhitespaceRunsAreBounded) {
  JsonConstraint c(nullptr);
  EXPECT_FALSE(c.accepts(std::string(100, ' ')));
}

TEST(JsonConstraint, BadSchemasAreInvalidArguments) {
  EXPECT_THROW(JsonConstraint(json::parse(R"({"type":"widget"})")), Error);
  EXPECT_THROW(JsonConstraint(json::parse(R"({"$ref":"http://x"})")), Error);
  EXPECT_THROW(JsonConstraint(json::parse(R"({"type":"object","properties":{},"required":["a"]})")), Error);
}

TEST(JsonConstraint, LengthAndItemLimits) {
  const auto schema = nlohmann::json::parse(
      R"({"type":"object","properties":{"s":{"type":"string","maxLength":3},
          "a":{"type":"array","items":{"type":"integer"},"minItems":1,"maxItems":2}},
          "required":["s","a"]})");
  JsonConstraint ok(schema);
  EXPECT_TRUE(ok.advance(R"({"s":"héy","a":[1,2]})"));  // 3 code points, 4 bytes
  EXPECT_TRUE(ok.complete());
  EXPECT_FALSE(JsonConstraint(schema).accepts(R"({"s":"abcd")"));
  EXPECT_FALSE(JsonConstraint(schema).accepts(R"({"s":"a","a":[])"));
  EXPECT_FALSE(JsonConstraint(schema).accepts(R"({"s":"a","a":[1,2,)"));
  EXPECT_FALSE(JsonConstraint(nullptr).accepts("{\"n\": 1" + std::string(40, '0')));
}

// A vocabulary of a few pieces; id 4 ends the generation, id 5 is a control token.
class Vocab final : public ConstraintVocab {
 public:
  int64_t size() const override { return static_cast<int64_t>(pieces_.size()); }
  bool is_eog(int32_t id) const override { return id == 4; }
  bool is_control(int32_t id) const override { return id == 5; }
  const std::string& piece(int32_t id) const override { return pieces_[static_cast<size_t>(id)]; }

 private:
  std::vector<std::string> pieces_ = {"{", "}", "hello", "\"a\":", "<eos>", "<ctl>", " "};
};

TEST(MaskRejectedTokens, KeepsOnlyAcceptedPiecesAndEndsOnlyWhenComplete) {
  const Vocab v;
  JsonConstraint c(nullptr);
  std::vector<float> logits = {1, 2, 9, 3, 8, 7, 0, 5};  // one more logit than the vocabulary
  mask_rejected_tokens(c, v, logits);
  EXPECT_EQ(logits[0], 1.0f);  // "{" starts an object
  EXPECT_EQ(logits[6], 0.0f);  // leading whitespace is fine
  for (int id : {1, 2, 3, 4, 5, 7}) EXPECT_EQ(logits[static_cast<size_t>(id)], -INFINITY) << id;
  ASSERT_TRUE(c.advance("{}"));
  logits = {1, 2, 9, 3, 8, 7, 0, 5};
  mask_rejected_tokens(c, v, logits);
  EXPECT_EQ(logits[4], 8.0f);  // complete: only the end of generation is left
  for (int id : {0, 1, 2, 3, 5, 6, 7}) EXPECT_EQ(logits[static_cast<size_t>(id)], -INFINITY) << id;
}

}  // namespace
}  // namespace oxi
