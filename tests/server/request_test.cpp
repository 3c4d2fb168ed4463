// The server's request parsing and stop-string matching.
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <string>

#include "server/request.h"
#include "server/stream_text.h"

namespace oxi::server {
namespace {

using nlohmann::json;

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
  // A tool whose "type" is not a string: a 400, not nlohmann's type_error (a 500; found by fuzz_request).
  EXPECT_THROW(parse_chat_request(json::parse(R"({"messages": [{"role":"user","content":"x"}],
      "tools": [{"type": {"name": "f"}, "function": {"name": "f"}}]})"), lim), RequestError);
  EXPECT_THROW(parse_chat_request(json::parse(R"({"messages": [{"role":"user","content":"x"}], "max_tokens": 100000000})"), lim), RequestError);
  // input_audio parts: {"data": base64 string, "format": string (a hint)}; the engine decodes them.
  EXPECT_NO_THROW(parse_chat_request(json::parse(R"({"messages": [{"role":"user","content":[
      {"type": "input_audio", "input_audio": {"data": "UklGRg==", "format": "wav"}}, {"type": "text", "text": "x"}]}]})"), lim));
  EXPECT_THROW(parse_chat_request(json::parse(R"({"messages": [{"role":"user","content":[
      {"type": "input_audio", "input_audio": "UklGRg=="}]}]})"), lim), RequestError);
  EXPECT_THROW(parse_chat_request(json::parse(R"({"messages": [{"role":"user","content":[
      {"type": "input_audio", "input_audio": {"data": "UklGRg==", "format": 3}}]}]})"), lim), RequestError);
  EXPECT_THROW(parse_chat_request(json::parse(R"({"messages": [{"role":"user","content":[{"type": "input_video"}]}]})"), lim), RequestError);
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

// Issue 31, bug 4: fields that change the output were dropped silently.
json chat_with(const char* extra) {
  return json::parse(std::string(R"({"messages": [{"role":"user","content":"x"}], )") + extra + "}");
}

std::string refused_param(const json& body, bool completion = false) {
  try {
    if (completion) parse_completion_request(body, Limits{});
    else parse_chat_request(body, Limits{});
  } catch (const RequestError& e) {
    EXPECT_EQ(e.status(), 400);
    return e.param();
  }
  return "(accepted)";
}

TEST(Request, LogitBiasInOpenAiAndLlamaServerForms) {
  auto r = parse_chat_request(chat_with(R"("logit_bias": {"15": 100, "7": -100.0, "3": false})"), Limits{});
  ASSERT_EQ(r.logit_bias.size(), 3u);
  std::map<int32_t, float> m(r.logit_bias.begin(), r.logit_bias.end());
  EXPECT_EQ(m[15], 100.0f);
  EXPECT_EQ(m[7], -100.0f);
  EXPECT_EQ(m[3], -INFINITY);
  r = parse_chat_request(chat_with(R"("logit_bias": [[42, 2.5], [9, false]])"), Limits{});
  ASSERT_EQ(r.logit_bias.size(), 2u);
  EXPECT_EQ(r.logit_bias[0], (std::pair<int32_t, float>{42, 2.5f}));
  EXPECT_EQ(r.logit_bias[1].second, -INFINITY);
  for (const char* bad : {R"("logit_bias": {"x": 1})", R"("logit_bias": {"1": 100.5})", R"("logit_bias": {"-1": 1})",
                          R"("logit_bias": {"1": true})", R"("logit_bias": [[1]])", R"("logit_bias": [["hello", 1]])",
                          R"("logit_bias": 5)"}) {
    EXPECT_EQ(refused_param(chat_with(bad)), "logit_bias") << bad;
  }
}

TEST(Request, GrammarIsCompiledAndExcludesOtherConstraints) {
  EXPECT_TRUE(parse_chat_request(chat_with(R"x("grammar": "root ::= \"a\"")x"), Limits{}).grammar);
  EXPECT_TRUE(parse_completion_request(json::parse(R"x({"prompt": "a", "grammar": "root ::= [a-z]+"})x"), Limits{}).grammar);
  EXPECT_FALSE(parse_chat_request(chat_with(R"("grammar": "")"), Limits{}).grammar);  // llama-server: none
  EXPECT_EQ(refused_param(chat_with(R"("grammar": 5)")), "grammar");
  try {
    parse_chat_request(chat_with(R"x("grammar": "root ::= \"a\"\nx ::= [b-")x"), Limits{});
    ADD_FAILURE() << "a bad grammar passed";
  } catch (const RequestError& e) {
    EXPECT_NE(std::string(e.what()).find("line 2"), std::string::npos) << e.what();
  }
  EXPECT_EQ(refused_param(chat_with(R"x("grammar": "root ::= \"a\"", "response_format": {"type": "json_object"})x")),
            "grammar");
  EXPECT_EQ(refused_param(chat_with(R"x("grammar": "root ::= \"a\"", "tool_choice": "required",
      "tools": [{"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}])x")),
            "grammar");
  // tool_choice auto leaves the grammar in charge.
  EXPECT_EQ(refused_param(chat_with(R"x("grammar": "root ::= \"a\"", "tool_choice": "auto",
      "tools": [{"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}])x")),
            "(accepted)");
}

TEST(Request, ChoicesUpToTheLimit) {
  EXPECT_EQ(parse_chat_request(chat_with(R"("n": 16)"), Limits{}).n, 16);
  EXPECT_EQ(refused_param(chat_with(R"("n": 17)")), "n");
  EXPECT_EQ(refused_param(chat_with(R"("n": 0)")), "n");
  EXPECT_EQ(parse_completion_request(json::parse(R"({"prompt": "a", "n": 3})"), Limits{}).n, 3);
}

TEST(Request, FieldsThatChangeTheOutputAreImplementedOrRefused) {
  EXPECT_EQ(refused_param(chat_with(R"x("grammar": "root ::= a")x")), "grammar");  // undefined rule 'a'
  EXPECT_EQ(refused_param(json::parse(R"({"prompt": "a", "suffix": "b"})"), true), "suffix");
  EXPECT_EQ(refused_param(chat_with(R"("mirostat": 2)")), "mirostat");
  EXPECT_EQ(refused_param(chat_with(R"("parallel_tool_calls": false)")), "parallel_tool_calls");
  EXPECT_EQ(refused_param(json::parse(R"({"prompt": "a", "tools": []})"), true), "tools");  // chat only
  // harmless fields and nulls pass
  EXPECT_EQ(refused_param(chat_with(R"("user": "u", "metadata": {"a": "b"}, "store": false, "grammar": null,
                                      "parallel_tool_calls": true, "cache_prompt": true)")), "(accepted)");
}

// llama-server's speculation fields and oxinfer's per-request mode (docs/speculative.md).
TEST(Request, SpeculationFields) {
  const auto r = parse_chat_request(chat_with(R"("speculative.n_max": 4, "speculative.n_min": 2, "speculative.mode": "ngram")"), Limits{});
  EXPECT_EQ(r.draft_max, 4);
  EXPECT_EQ(r.draft_min, 2);
  EXPECT_EQ(r.spec_mode, "ngram");
  for (const char* m : {"auto", "none", "mtp", "draft"}) {
    EXPECT_EQ(parse_completion_request(json{{"prompt", "a"}, {"speculative.mode", m}}, Limits{}).spec_mode, m);
  }
  EXPECT_FALSE(parse_chat_request(chat_with(R"("speculative.mode": null)"), Limits{}).spec_mode.has_value());
  EXPECT_EQ(refused_param(chat_with(R"("speculative.mode": "eagle")")), "speculative.mode");
  EXPECT_EQ(refused_param(chat_with(R"("speculative.mode": 1)")), "speculative.mode");
  EXPECT_EQ(refused_param(chat_with(R"("speculative.n_max": 17)")), "speculative.n_max");
  // llama-server's draft-confidence floor only shapes drafts, never the output: accepted.
  EXPECT_EQ(refused_param(chat_with(R"("speculative.p_min": 0.75)")), "(accepted)");
}

}  // namespace
}  // namespace oxi::server
