// Issue 29 (3): memory bombs in a chat template must fail fast with an oxi::Error, costed by the
// bytes really copied, and range() must not overflow int64.
#include <gtest/gtest.h>

#include <chrono>

#include "chat/jinja.h"
#include "core/error.h"

namespace oxi {
namespace {

using json = nlohmann::ordered_json;

std::string render_or_error(const std::string& src) {
  try {
    return ChatTemplate(src).render(json::object());
  } catch (const Error& e) {
    return std::string("ERROR: ") + e.what();
  }
}

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

TEST(JinjaHardening, ListRepetitionCostsTheStringBytes) {
  // 2,000 copies of a 100 KB string = 200 MB of copies: over the 64 MiB value limit. (Costed at
  // 16 bytes an item it passed and really copied the 200 MB.)
  const std::string r = render_or_error("{% set a = 'x' * 100000 %}{% set b = [a] * 2000 %}{{ b | length }}");
  ASSERT_EQ(r.rfind("ERROR: ", 0), 0u) << r.substr(0, 100);
  // The reproducer (12.5 GB before): refused before anything is copied.
  const auto t0 = std::chrono::steady_clock::now();
  EXPECT_EQ(render_or_error("{% set a='x'*1000000 %}{% set b=[a]*100000 %}").rfind("ERROR: ", 0), 0u);
  EXPECT_LT(seconds_since(t0), 2.0);
  // List concatenation copies the strings too.
  EXPECT_EQ(render_or_error("{% set a = 'x' * 1000000 %}{% set b = [a] * 40 %}{% set c = b + b %}").rfind("ERROR: ", 0), 0u);
  // Small repetitions still work.
  EXPECT_EQ(render_or_error("{% set b = ['ab'] * 3 %}{{ b | join(',') }}"), "ab,ab,ab");
  EXPECT_EQ(render_or_error("{{ ([1, 2] * 2) | length }}"), "4");
}

TEST(JinjaHardening, TotalCopiesAreBounded) {
  // Each value is under the 64 MiB limit, but a loop keeps making more: the per-render budget stops it.
  const auto t0 = std::chrono::steady_clock::now();
  const std::string r = render_or_error(
      "{% set ns = namespace(l=[]) %}{% set a = 'x' * 1000000 %}"
      "{% for i in range(1000) %}{% set ns.l = ns.l + [[a] * 50] %}{% endfor %}{{ ns.l | length }}");
  EXPECT_EQ(r.rfind("ERROR: ", 0), 0u) << r.substr(0, 100);
  EXPECT_NE(r.find("memory"), std::string::npos) << r;
  EXPECT_LT(seconds_since(t0), 10.0);
}

TEST(JinjaHardening, RangeAtTheInt64Limits) {
  const auto t0 = std::chrono::steady_clock::now();
  // Python: [-9223372036854775808, -1, 9223372036854775806].
  EXPECT_EQ(render_or_error("{{ range(-9223372036854775807 - 1, 9223372036854775807, 9223372036854775807) | list }}"),
            "[-9223372036854775808, -1, 9223372036854775806]");
  EXPECT_EQ(render_or_error("{{ range(9223372036854775807, -9223372036854775807 - 1, -9223372036854775807 - 1) | list }}"),
            "[9223372036854775807, -1]");
  EXPECT_EQ(render_or_error("{{ range(9223372036854775800, 9223372036854775807, 3) | list }}"),
            "[9223372036854775800, 9223372036854775803, 9223372036854775806]");
  EXPECT_EQ(render_or_error("{{ range(-9223372036854775800, -9223372036854775807 - 1, -5) | list }}"),
            "[-9223372036854775800, -9223372036854775805]");
  EXPECT_EQ(render_or_error("{{ range(5, 0, -2) | list }}"), "[5, 3, 1]");
  EXPECT_EQ(render_or_error("{{ range(0) | list }}"), "[]");
  EXPECT_LT(seconds_since(t0), 2.0);
}

}  // namespace
}  // namespace oxi
