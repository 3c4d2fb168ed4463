#include <gtest/gtest.h>

#include "server/json_constraint.h"
#include "server/request.h"
#include "server/stream_text.h"

namespace oxi::server {
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

TEST(JsonConstraint, BadSchemasAre400) {
  EXPECT_THROW(JsonConstraint(json::parse(R"({"type":"widget"})")), RequestError);
  EXPECT_THROW(JsonConstraint(json::parse(R"({"$ref":"http://x"})")), RequestError);
  EXPECT_THROW(JsonConstraint(json::parse(R"({"type":"object","properties":{},"required":["a"]})")), RequestError);
}

TEST(StopMatcher, HoldsBackPossibleStopPrefixes) {
  StopMatcher m({"</end>", "STOP"});
  std::string out;
  out += m.feed("hello </e");
  EXPECT_EQ(out, "hello ");
  out += m.feed("nx ST");
  EXPECT_EQ(out, "hello </enx ");
  out += m.feed("OP tail");
  EXPECT_TRUE(m.stopped());
  EXPECT_EQ(out, "hello </enx ");
  EXPECT_EQ(m.flush(), "");
}

TEST(Request, ValidatesTypesAndRanges) {
  Limits lim;
  EXPECT_THROW(parse_body("{not json"), RequestError);
  EXPECT_THROW(parse_body("[1]"), RequestError);
  EXPECT_THROW(parse_chat_request(json::parse(R"({"messages": "hi"})"), lim), RequestError);
  EXPECT_THROW(parse_chat_request(json::parse(R"({"messages": [{"role":"user","content":"x"}], "temperature": "hot"})"), lim), RequestError);
  EXPECT_THROW(parse_chat_request(json::parse(R"({"messages": [{"role":"wizard","content":"x"}]})"), lim), RequestError);
  EXPECT_THROW(parse_chat_request(json::parse(R"({"messages": [{"role":"user","content":"x"}], "max_tokens": 100000000})"), lim), RequestError);
  auto r = parse_chat_request(json::parse(R"({"messages": [{"role":"user","content":"x"}], "max_tokens": 5,
      "stop": "END", "seed": 7, "stream": true, "stream_options": {"include_usage": true}})"), lim);
  EXPECT_EQ(r.max_tokens, 5);
  EXPECT_EQ(r.stop.size(), 1u);
  EXPECT_EQ(*r.sampling.seed, 7u);
  EXPECT_TRUE(r.include_usage);
  try {
    parse_chat_request(json::parse(R"({"messages": []})"), lim);
    FAIL();
  } catch (const RequestError& e) {
    EXPECT_EQ(e.status(), 400);
    EXPECT_EQ(e.param(), "messages");
  }
}

}  // namespace
}  // namespace oxi::server

namespace oxi::server {
namespace {

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

}  // namespace
}  // namespace oxi::server
