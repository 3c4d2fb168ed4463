// llama.cpp's own grammar tests as an independent reference, read at test time from the llama.cpp
// source node-llama-cpp bundles (tools/node/.../llama/gitRelease.bundle, cloned without checkout
// into the build tree; nothing of it is kept in this repository):
// - tests/test-grammar-integration.cpp: every test_grammar("desc", R"""(grammar)""", {passing},
//   {failing}) whose strings are plain literals: passing strings are in our language, failing
//   ones are not (refused at some byte, or incomplete at the end) — llama.cpp's test semantics;
//   and every grammar it asserts test_build_grammar_fails(NAME) on (left recursion, …) is an error;
// - tests/test-json-schema-to-grammar.cpp: every expected grammar (llama.cpp's schema converter's
//   output, raw literals holding "::=") parses.
// Skipped with a message when the bundle or git is missing.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/error.h"
#include "sampling/gbnf.h"

namespace oxi {
namespace {

namespace fs = std::filesystem;

std::string run(const std::string& cmd) {
  std::unique_ptr<FILE, int (*)(FILE*)> p(popen(cmd.c_str(), "r"), pclose);
  std::string out;
  if (!p) return out;
  char buf[65536];
  size_t n = 0;
  while ((n = fread(buf, 1, sizeof buf, p.get())) > 0) out.append(buf, n);
  return out;
}

// A file of the bundled llama.cpp source, or nullopt.
std::optional<std::string> llama_source(const std::string& path) {
  const fs::path bundle = fs::path(OXI_SOURCE_DIR) / "tools/node/node_modules/node-llama-cpp/llama/gitRelease.bundle";
  const fs::path repo = fs::path(OXI_BINARY_DIR) / "gbnf-llama-src";
  if (!fs::exists(bundle)) return std::nullopt;
  if (!fs::exists(repo / "HEAD") && !fs::exists(repo / ".git")) {
    run("git clone -q --no-checkout '" + bundle.string() + "' '" + repo.string() + "' 2>&1");
  }
  std::string text = run("git -C '" + repo.string() + "' show HEAD:" + path + " 2>/dev/null");
  if (text.empty()) return std::nullopt;
  return text;
}

// Reads C++ source: string literals (plain with escapes, raw R"d(...)d", adjacent ones joined).
class CppReader {
 public:
  explicit CppReader(const std::string& s) : s_(s) {}
  size_t pos = 0;

  void skip() {
    for (;;) {
      while (pos < s_.size() && std::isspace(static_cast<unsigned char>(s_[pos]))) ++pos;
      if (s_.compare(pos, 2, "//") == 0) {
        while (pos < s_.size() && s_[pos] != '\n') ++pos;
      } else if (s_.compare(pos, 2, "/*") == 0) {
        const size_t e = s_.find("*/", pos + 2);
        pos = e == std::string::npos ? s_.size() : e + 2;
      } else {
        return;
      }
    }
  }
  bool eat(char c) {
    skip();
    if (pos < s_.size() && s_[pos] == c) {
      ++pos;
      return true;
    }
    return false;
  }
  // One literal or several adjacent ones; nullopt if the next token is not a string literal.
  std::optional<std::string> literal() {
    skip();
    std::optional<std::string> out;
    for (;;) {
      skip();
      if (s_.compare(pos, 2, "R\"") == 0) {
        const size_t open = s_.find('(', pos);
        std::string delim = ")";
        delim.append(s_, pos + 2, open - pos - 2).push_back('"');
        const size_t close = s_.find(delim, open);
        out = out.value_or("") + s_.substr(open + 1, close - open - 1);
        pos = close + delim.size();
      } else if (pos < s_.size() && s_[pos] == '"') {
        std::string v;
        for (++pos; pos < s_.size() && s_[pos] != '"'; ++pos) {
          if (s_[pos] != '\\') {
            v += s_[pos];
            continue;
          }
          const char e = s_[++pos];
          if (e == 'n') v += '\n';
          else if (e == 't') v += '\t';
          else if (e == 'r') v += '\r';
          else if (e == '0') v += '\0';
          else if (e == 'x') {
            v += static_cast<char>(std::stoi(s_.substr(pos + 1, 2), nullptr, 16));
            pos += 2;
          } else v += e;  // \\ \" \'
        }
        ++pos;
        out = out.value_or("") + v;
      } else {
        return out;
      }
    }
  }
  // token(N) as llama.cpp's test encodes it: 0xff, then N as 4 bytes big-endian.
  std::optional<std::string> token_call() {
    skip();
    if (s_.compare(pos, 6, "token(") != 0) return std::nullopt;
    const size_t close = s_.find(')', pos);
    const uint32_t id = static_cast<uint32_t>(std::stoul(s_.substr(pos + 6, close - pos - 6)));
    pos = close + 1;
    return std::string{static_cast<char>(0xff), static_cast<char>(id >> 24), static_cast<char>(id >> 16),
                       static_cast<char>(id >> 8), static_cast<char>(id)};
  }
  // {"a", "b" "c", token(10) + "x", } → strings (tokens encoded as token_call does).
  std::optional<std::vector<std::string>> literal_list() {
    if (!eat('{')) return std::nullopt;
    std::vector<std::string> items;
    while (!eat('}')) {
      std::string item;
      for (;;) {
        auto v = literal();
        if (!v) v = token_call();
        if (!v) return std::nullopt;
        item += *v;
        if (!eat('+')) break;
      }
      items.push_back(item);
      if (!eat(',')) {
        if (!eat('}')) return std::nullopt;
        break;
      }
    }
    return items;
  }

 private:
  const std::string& s_;
};

// As llama.cpp's harness feeds a test string: with token references in play (the grammar has
// some, or the string encodes tokens), one token per encoded token (id N, text "<[N]>") and one
// per character (id 0, its text); else the bytes as text.
bool in_language(const std::shared_ptr<const GbnfGrammar>& g, const std::string& text) {
  GbnfConstraint c(g);
  const bool tokens = text.find('\xff') != std::string::npos ||
                      std::any_of(g->elems.begin(), g->elems.end(), [](const auto& e) { return GbnfGrammar::is_token(e.kind); });
  if (!tokens) return c.advance(text) && c.complete();
  for (size_t i = 0; i < text.size();) {
    const auto b = static_cast<unsigned char>(text[i]);
    if (b == 0xff) {
      uint32_t id = 0;
      for (int k = 1; k <= 4; ++k) id = (id << 8) | static_cast<unsigned char>(text[i + k]);
      if (!c.advance_token(static_cast<int32_t>(id), "<[" + std::to_string(id) + "]>", true)) return false;
      i += 5;
      continue;
    }
    const size_t n = b < 0x80 ? 1 : b < 0xe0 ? 2 : b < 0xf0 ? 3 : 4;
    if (!c.advance_token(0, text.substr(i, n), true)) return false;
    i += n;
  }
  return c.complete();
}

TEST(GbnfLlamaCppSuite, IntegrationTestGrammarsAcceptAndRejectAsLlamaCpp) {
  const auto src = llama_source("tests/test-grammar-integration.cpp");
  if (!src) GTEST_SKIP() << "no llama.cpp source bundle (or git) to read tests/test-grammar-integration.cpp from";
  size_t cases = 0, token_cases = 0, strings = 0, skipped = 0;
  for (size_t at = src->find("test_grammar("); at != std::string::npos; at = src->find("test_grammar(", at + 1)) {
    CppReader r(*src);
    r.pos = at + std::string("test_grammar(").size();
    const auto desc = r.literal();
    if (!desc || !r.eat(',')) continue;  // the function's own definition
    const auto grammar = r.literal();
    if (!grammar || !r.eat(',')) continue;
    const auto pass = r.literal_list();
    const bool comma = r.eat(',');
    const auto fail = comma ? r.literal_list() : std::nullopt;
    if (!pass || !fail) {
      ++skipped;  // a list this reader cannot read
      continue;
    }
    std::shared_ptr<const GbnfGrammar> g;
    try {
      g = parse_gbnf(*grammar);
    } catch (const Error& e) {
      ADD_FAILURE() << *desc << ": " << e.what();
      continue;
    }
    ++cases;
    if (std::any_of(g->elems.begin(), g->elems.end(), [](const auto& e) { return GbnfGrammar::is_token(e.kind); })) ++token_cases;
    for (const auto& s : *pass) EXPECT_TRUE(in_language(g, s)) << *desc << ": should accept " << s;
    for (const auto& s : *fail) EXPECT_FALSE(in_language(g, s)) << *desc << ": should reject " << s;
    strings += pass->size() + fail->size();
  }
  std::printf("llama.cpp integration grammars: %zu cases (%zu with tokens), %zu strings checked, %zu skipped\n", cases,
              token_cases, strings, skipped);
  EXPECT_GE(token_cases, 2u);
  EXPECT_EQ(skipped, 0u);
  EXPECT_GE(cases, 8u);
  EXPECT_GE(strings, 100u);
}

TEST(GbnfLlamaCppSuite, GrammarsLlamaCppRefusesAreErrors) {
  const auto src = llama_source("tests/test-grammar-integration.cpp");
  if (!src) GTEST_SKIP() << "no llama.cpp source bundle (or git) to read tests/test-grammar-integration.cpp from";
  const std::string call = "assert(test_build_grammar_fails(";
  size_t n = 0;
  for (size_t at = src->find(call); at != std::string::npos; at = src->find(call, at + 1)) {
    // const std::string NAME = R"""(...)"""; … assert(test_build_grammar_fails(NAME));
    const size_t b = at + call.size(), e = src->find(')', b);
    const std::string name = src->substr(b, e - b);
    const size_t def = src->rfind("std::string " + name + " =", at);
    ASSERT_NE(def, std::string::npos) << name;
    CppReader r(*src);
    r.pos = src->find('=', def) + 1;
    const auto grammar = r.literal();
    ASSERT_TRUE(grammar) << name;
    ++n;
    EXPECT_THROW(parse_gbnf(*grammar), Error) << *grammar;
  }
  EXPECT_GE(n, 4u);
}

TEST(GbnfLlamaCppSuite, SchemaConverterGrammarsParse) {
  const auto src = llama_source("tests/test-json-schema-to-grammar.cpp");
  if (!src) GTEST_SKIP() << "no llama.cpp source bundle (or git) to read tests/test-json-schema-to-grammar.cpp from";
  size_t n = 0;
  for (size_t at = src->find("R\"\"\"("); at != std::string::npos; at = src->find("R\"\"\"(", at + 1)) {
    CppReader r(*src);
    r.pos = at;
    const auto text = r.literal();
    if (!text || text->find("::=") == std::string::npos) continue;
    ++n;
    EXPECT_NO_THROW(parse_gbnf(*text)) << *text;
  }
  std::printf("llama.cpp schema-converter grammars parsed: %zu\n", n);
  EXPECT_GE(n, 30u);
}

}  // namespace
}  // namespace oxi
