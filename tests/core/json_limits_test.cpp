#include <gtest/gtest.h>

#include <string>

#include "core/error.h"
#include "core/json_limits.h"

namespace oxi {
namespace {

TEST(JsonLimits, NestingDepth) {
  EXPECT_EQ(json_nesting_depth("{}"), 1u);
  EXPECT_EQ(json_nesting_depth(R"({"a":[1,{"b":[]}]})"), 4u);
  EXPECT_EQ(json_nesting_depth(R"(["[[[", "\"[[", {"k\\":"]"}])"), 2u);  // brackets in strings (with escapes)
  EXPECT_EQ(json_nesting_depth("1"), 0u);
  EXPECT_FALSE(json_too_deep(std::string(512, '[') + std::string(512, ']')));
  EXPECT_TRUE(json_too_deep(std::string(513, '[') + std::string(513, ']')));
  // Stops at the limit: unbalanced input of any size is cheap.
  EXPECT_TRUE(json_too_deep(std::string(10'000'000, '[')));
  EXPECT_FALSE(json_too_deep(std::string(10'000'000, ']')));
}

TEST(JsonLimits, CheckThrowsFormatErrorNamingTheFile) {
  try {
    check_json_depth(std::string(100000, '['), "dir/config.json");
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kFormat);
    EXPECT_EQ(std::string(e.what()), "dir/config.json: JSON nested deeper than 512 levels");
  }
  EXPECT_NO_THROW(check_json_depth(R"({"a":1})", "x"));
}

}  // namespace
}  // namespace oxi
