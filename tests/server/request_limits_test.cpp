// Issue 29 #1: a request body nested 100,000 levels is a 400 from parse_body, before anything
// recursive touches it (it crashed the server in render_chat's json dump). #12: wrong types in
// /tokenize were a 500, token ids past 2^32 wrapped, an unknown model name was served, any
// Content-Type was accepted.
#include <gtest/gtest.h>

#include "server/request.h"

namespace oxi::server {
namespace {

std::string nested(size_t levels) { return std::string(levels, '[') + std::string(levels, ']'); }

int status_of(const std::string& body) {
  try {
    parse_body(body);
    return 200;
  } catch (const RequestError& e) {
    return e.status();
  }
}

TEST(RequestLimits, DeepNestingIsA400) {
  EXPECT_EQ(status_of(R"({"messages":[{"role":"user","content":"hi","x":)" + nested(100000) + "}]}"), 400);
  std::string deep_obj;
  for (int i = 0; i < 100000; ++i) deep_obj += "{\"a\":";
  deep_obj += "1" + std::string(100000, '}');
  EXPECT_EQ(status_of(R"({"tools":[{"type":"function","function":{"name":"f","parameters":)" + deep_obj + "}}]}"), 400);
  // Just over and at the limit (the body object itself is one level).
  EXPECT_EQ(status_of(R"({"x":)" + nested(512) + "}"), 400);
  EXPECT_EQ(status_of(R"({"x":)" + nested(511) + "}"), 200);
  // Brackets inside strings do not count.
  EXPECT_EQ(status_of(R"({"x":")" + std::string(100000, '[') + R"(\"]"})"), 200);
}

template <class F>
int status_of_call(F&& f) {
  try {
    f();
    return 200;
  } catch (const RequestError& e) {
    return e.status();
  }
}

TEST(RequestLimits, TokenizeFieldTypesAre400) {
  using nlohmann::json;
  EXPECT_EQ(status_of_call([] { parse_tokenize_request(json{{"content", "hi"}, {"add_special", "yes"}}); }), 400);
  EXPECT_EQ(status_of_call([] { parse_tokenize_request(json{{"content", "hi"}, {"parse_special", 1}}); }), 400);
  EXPECT_EQ(status_of_call([] { parse_tokenize_request(json{{"content", 5}}); }), 400);
  const TokenizeRequest r = parse_tokenize_request(json{{"content", "hi"}, {"add_special", true}});
  EXPECT_TRUE(r.add_special);
  EXPECT_TRUE(r.parse_special);  // llama-server's default
}

TEST(RequestLimits, DetokenizeIdsAreNeverWrapped) {
  auto ids_of = [](const std::string& body) { return parse_detokenize_request(parse_body(body)); };
  EXPECT_EQ(status_of_call([&] { ids_of(R"({"tokens":[4294967301]})"); }), 400);        // 2^32 + 5
  EXPECT_EQ(status_of_call([&] { ids_of(R"({"tokens":[18446744073709551615]})"); }), 400);
  EXPECT_EQ(status_of_call([&] { ids_of(R"({"tokens":[2147483648]})"); }), 400);        // 2^31
  EXPECT_EQ(status_of_call([&] { ids_of(R"({"tokens":[-1]})"); }), 400);
  EXPECT_EQ(status_of_call([&] { ids_of(R"({"tokens":[1.5]})"); }), 400);
  EXPECT_EQ(ids_of(R"({"tokens":[0,5,2147483647]})"), (std::vector<int32_t>{0, 5, 2147483647}));
}

TEST(RequestLimits, UnknownModelIs404) {
  GenerationRequest r;
  EXPECT_EQ(status_of_call([&] { check_model(r, "qwen"); }), 200);  // no "model": served
  r.model = "qwen";
  EXPECT_EQ(status_of_call([&] { check_model(r, "qwen"); }), 200);
  r.model = "gpt-4o";
  EXPECT_EQ(status_of_call([&] { check_model(r, "qwen"); }), 404);
}

TEST(RequestLimits, ContentTypeMustBeJson) {
  EXPECT_EQ(status_of_call([] { check_content_type("application/json"); }), 200);
  EXPECT_EQ(status_of_call([] { check_content_type("Application/JSON; charset=utf-8"); }), 200);
  for (const char* t : {"", "text/plain", "text/plain;charset=UTF-8", "application/x-www-form-urlencoded",
                        "multipart/form-data; boundary=x", "application/jsonx", "application/json-seq"}) {
    EXPECT_EQ(status_of_call([&] { check_content_type(t); }), 415) << t;
  }
}

}  // namespace
}  // namespace oxi::server
