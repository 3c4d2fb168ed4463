// Hostile templates and inputs: every failure must be an oxi::Error (never a crash, hang or other
// exception), within the configured limits.
#include <gtest/gtest.h>

#include <chrono>
#include <fstream>
#include <random>
#include <sstream>

#include "chat/jinja.h"
#include "chat/parser.h"
#include "core/error.h"

namespace oxi {
namespace {

using json = nlohmann::ordered_json;

// Returns "" on success, else the error message; fails the test on non-oxi exceptions.
std::string try_render(const std::string& src, const json& ctx = json::object()) {
  try {
    ChatTemplate t(src);
    t.render(ctx);
    return "";
  } catch (const Error& e) {
    return e.what();
  } catch (const std::exception& e) {
    ADD_FAILURE() << "non-oxi exception: " << e.what() << " for: " << src.substr(0, 200);
    return e.what();
  }
}

TEST(JinjaRobustness, InfiniteRecursion) {
  EXPECT_NE(try_render("{% macro f() %}{{ f() }}{% endmacro %}{{ f() }}"), "");
  EXPECT_NE(try_render("{% macro f(n) %}{{ f(n + 1) ~ f(n + 2) }}{% endmacro %}{{ f(0) }}"), "");
  // Deeply nested statements inside a recursive macro.
  std::string body;
  for (int i = 0; i < 150; ++i) body += "{% if true %}{% for i in [1] %}";
  body += "{{ f() }}";
  for (int i = 0; i < 150; ++i) body += "{% endfor %}{% endif %}";
  EXPECT_NE(try_render("{% macro f() %}" + body + "{% endmacro %}{{ f() }}"), "");
}

TEST(JinjaRobustness, OutputAndStringBlowUp) {
  EXPECT_NE(try_render("{% set ns = namespace(s='xxxxxxxx') %}{% for i in range(100) %}{% set ns.s = ns.s ~ ns.s %}{% endfor %}"), "");
  EXPECT_NE(try_render("{{ 'x' * 10000000000 }}"), "");
  EXPECT_NE(try_render("{{ [1] * 10000000000 }}"), "");
  EXPECT_NE(try_render("{% for i in range(99999) %}{% for j in range(99999) %}xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx{% endfor %}{% endfor %}"), "");
}

TEST(JinjaRobustness, LongLoopsHitStepLimit) {
  const auto t0 = std::chrono::steady_clock::now();
  EXPECT_NE(try_render("{% for i in range(99999) %}{% for j in range(99999) %}{% endfor %}{% endfor %}"), "");
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_LT(s, 30.0);
}

TEST(JinjaRobustness, DeepNesting) {
  EXPECT_NE(try_render("{{ " + std::string(5000, '(') + "1" + std::string(5000, ')') + " }}"), "");
  EXPECT_NE(try_render("{{ " + std::string(5000, '[') + std::string(5000, ']') + " }}"), "");
  std::string ifs;
  for (int i = 0; i < 3000; ++i) ifs += "{% if true %}";
  for (int i = 0; i < 3000; ++i) ifs += "{% endif %}";
  EXPECT_NE(try_render(ifs), "");
  std::string nots = "{{ ";
  for (int i = 0; i < 5000; ++i) nots += "not ";
  EXPECT_NE(try_render(nots + "x }}"), "");
  std::string minus = "{{ ";
  for (int i = 0; i < 5000; ++i) minus += "-";
  EXPECT_NE(try_render(minus + "1 }}"), "");
  std::string filters = "{{ x";
  for (int i = 0; i < 100000; ++i) filters += "|trim";
  EXPECT_NE(try_render(filters + " }}", json{{"x", " a "}}), "");  // too deep a tree
  std::string sum = "{{ 1";
  for (int i = 0; i < 100000; ++i) sum += "+1";
  EXPECT_NE(try_render(sum + " }}"), "");
  std::string attrs = "{{ x";
  for (int i = 0; i < 100000; ++i) attrs += ".a";
  EXPECT_NE(try_render(attrs + " }}"), "");
  std::string short_sum = "{{ 1";
  for (int i = 0; i < 50; ++i) short_sum += "+1";
  EXPECT_EQ(try_render(short_sum + " }}"), "");
  json deep = json::array();
  json* cur = &deep;
  for (int i = 0; i < 2000; ++i) {
    cur->push_back(json::array());
    cur = &(*cur)[0];
  }
  EXPECT_NE(try_render("{{ x }}", json{{"x", deep}}), "");
}

TEST(JinjaRobustness, SyntaxErrors) {
  for (const char* s : {"{{", "{{ x", "{% if x %}", "{% for %}", "{% endfor %}", "{{ 'abc }}", "{# x", "{% raw %}x",
                        "{{ x | }}", "{{ x is }}", "{{ f( }}", "{{ [1, }}", "{{ {1: }}", "{% set %}", "{% macro %}",
                        "{% extends 'x' %}", "{% include 'x' %}", "{{ x. }}", "{{ 1 + }}", "{% if x %}{% else %}{% else %}{% endif %}",
                        "{{ \"\\x\" }}", "{{ \"\\u12\" }}", "{{ ) }}", "{% break %}"}) {
    EXPECT_NE(try_render(s), "") << s;
  }
}

TEST(JinjaRobustness, BadValues) {
  EXPECT_NE(try_render("{{ x.a.b }}"), "");
  EXPECT_NE(try_render("{{ 9223372036854775807 + 1 }}"), "");
  EXPECT_NE(try_render("{{ -9223372036854775807 - 2 }}"), "");
  EXPECT_NE(try_render("{{ 2 ** 100 }}"), "");
  EXPECT_NE(try_render("{{ 1 // 0 }}"), "");
  EXPECT_NE(try_render("{{ 1 % 0 }}"), "");
  EXPECT_NE(try_render("{{ 'a'[::0] }}"), "");
  EXPECT_NE(try_render("{{ range(1, 2, 0) }}"), "");
  EXPECT_NE(try_render("{% set n = namespace() %}{% set n.self = n %}{{ n }}"), "");
  EXPECT_EQ(try_render("{{ '\\xff\\xfe' }}{{ s | length }}{{ s[1:] }}{{ s | tojson }}{{ s.upper() }}",
                       json{{"s", "\xff\xfe\xc3"}}),
            "");
  EXPECT_NE(try_render("{{ x }}", json::array()), "");
}

std::string read_file(const std::string& p) {
  std::ifstream f(p, std::ios::binary);
  std::ostringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

// Random mutations of the real templates: parse + render must only ever throw oxi::Error.
TEST(JinjaRobustness, MutatedRealTemplates) {
  const json cases = json::parse(read_file(std::string(OXI_SOURCE_DIR) + "/tests/chat/data/conversations.json"));
  std::mt19937 rng(1234);
  const char* pieces[] = {"{%", "%}", "{{", "}}", "{#", "#}", "-", "(", ")", "[", "]", "'", "\"", "|", ".", ",", ":",
                          " if ", " for ", " endfor ", " endif ", " macro ", " set ", "loop", "ns", " in ", "~", "*", "\\"};
  for (const char* name : {"Qwen3.5-4B.jinja", "google-gemma-4-31B-it.jinja", "google-gemma-4-31B-it-interleaved.jinja",
                           "Qwen-Qwen3-0.6B.jinja"}) {
    const std::string src = read_file(std::string(OXI_SHARED_DIR) + "/testdata/templates/" + name);
    ASSERT_FALSE(src.empty());
    for (int iter = 0; iter < 400; ++iter) {
      std::string m = src;
      const int edits = 1 + int(rng() % 4);
      for (int e = 0; e < edits; ++e) {
        const size_t pos = rng() % (m.size() + 1);
        switch (rng() % 3) {
          case 0: m.erase(pos, 1 + rng() % 8); break;
          case 1: m.insert(pos, pieces[rng() % (sizeof pieces / sizeof *pieces)]); break;
          default:
            if (pos < m.size()) m[pos] = char(rng() % 256);
        }
      }
      const json& c = cases[size_t(iter) % cases.size()];
      try {
        ChatTemplate t(m);
        ChatRenderOptions opt;
        if (c.contains("tools")) opt.tools = c["tools"];
        render_chat(t, c["messages"], opt);
      } catch (const Error&) {
      } catch (const std::exception& ex) {
        ADD_FAILURE() << name << " iter " << iter << ": non-oxi exception " << ex.what();
      }
    }
  }
}

// Random bytes into the parsers never throw and never lose non-marker text.
TEST(ParserRobustness, RandomText) {
  std::mt19937 rng(99);
  const char* pieces[] = {"<think>", "</think>", "<tool_call>", "</tool_call>", "<function=", "<parameter=", "</parameter>",
                          "</function>", "<|channel>", "<channel|>", "<|tool_call>", "<tool_call|>", "call:", "<|\"|>", "{",
                          "}", "[", "]", ":", ",", "\n", " ", "x", "<", "|", ">", "<turn|>", "<|im_end|>"};
  for (int iter = 0; iter < 3000; ++iter) {
    std::string text;
    const int n = int(rng() % 40);
    for (int k = 0; k < n; ++k) text += pieces[rng() % (sizeof pieces / sizeof *pieces)];
    for (ChatFormat f : {ChatFormat::kQwen35, ChatFormat::kGemma4, ChatFormat::kPlain}) {
      ParserOptions o;
      o.start_in_reasoning = (iter % 2) != 0;
      try {
        auto p = make_output_parser(f, o);
        size_t pos = 0;
        while (pos < text.size()) {
          const size_t len = 1 + rng() % 7;
          p->feed(std::string_view(text).substr(pos, len));
          pos += len;
        }
        p->finish();
        const ChatMessage whole = parse_output(f, text, o);
        EXPECT_EQ(whole.content, p->message().content) << text;
        EXPECT_EQ(whole.reasoning_content, p->message().reasoning_content) << text;
        EXPECT_EQ(whole.tool_calls.size(), p->message().tool_calls.size()) << text;
        if (f == ChatFormat::kPlain) {
          // Plain: everything is content (outer whitespace trimmed).
          std::string t = text;
          while (!t.empty() && (t.back() == ' ' || t.back() == '\n')) t.pop_back();
          size_t b = 0;
          while (b < t.size() && (t[b] == ' ' || t[b] == '\n')) ++b;
          EXPECT_EQ(p->message().content, t.substr(b));
        }
      } catch (const std::exception& e) {
        ADD_FAILURE() << "parser threw: " << e.what();
      }
    }
    if (::testing::Test::HasFailure()) return;
  }
}

}  // namespace
}  // namespace oxi
