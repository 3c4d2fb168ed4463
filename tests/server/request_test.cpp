// The server's request parsing and stop-string matching.
#include <gtest/gtest.h>

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
