// Issue 29 #1: a request body nested 100,000 levels is a 400 from parse_body, before anything
// recursive touches it (it crashed the server in render_chat's json dump).
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

}  // namespace
}  // namespace oxi::server
