// GBNF grammars (issue 31): the parser's errors and limits, the matcher's language (whole strings
// and every byte prefix, UTF-8 at code-point granularity, repetition bounds), and llama.cpp's own
// grammars/ files read from the node-llama-cpp package, with json.gbnf checked against an
// independent JSON parser (nlohmann) on fixed texts and on random walks through the constraint.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <iostream>
#include <filesystem>
#include <map>
#include <fstream>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "core/error.h"
#include "qwen_vocab.h"
#include "sampling/gbnf.h"

namespace oxi {
namespace {

GbnfConstraint make(const std::string& grammar) { return GbnfConstraint(parse_gbnf(grammar)); }

// In the language: every byte prefix accepted one byte at a time, complete only at the end
// (unless the language also holds a shorter prefix, which the caller then allows).
bool in_language(const std::string& grammar, const std::string& text) {
  GbnfConstraint c = make(grammar);
  for (char b : text) {
    if (!c.accepts(std::string(1, b))) return false;
    EXPECT_TRUE(c.advance(std::string(1, b)));
  }
  GbnfConstraint whole = make(grammar);  // the same text as one token
  EXPECT_TRUE(whole.advance(text)) << text;
  EXPECT_EQ(whole.complete(), c.complete());
  return c.complete();
}
bool prefix_ok(const std::string& grammar, const std::string& text) { return make(grammar).accepts(text); }

std::string parse_error(const std::string& grammar) {
  try {
    parse_gbnf(grammar);
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument);
    return e.what();
  }
  return "";
}

TEST(Gbnf, LiteralsAlternationGroups) {
  const std::string g = "root ::= \"ab\" (\"c\" | \"de\") | \"x\"\n";
  EXPECT_TRUE(in_language(g, "abc"));
  EXPECT_TRUE(in_language(g, "abde"));
  EXPECT_TRUE(in_language(g, "x"));
  EXPECT_FALSE(in_language(g, "ab"));
  EXPECT_TRUE(prefix_ok(g, "abd"));
  EXPECT_FALSE(prefix_ok(g, "abx"));
  EXPECT_FALSE(prefix_ok(g, "abcc"));
  EXPECT_FALSE(prefix_ok(g, "y"));
}

TEST(Gbnf, EscapesClassesAndAnyChar) {
  const std::string g = R"(root ::= "\"\\\n\t\x41\u00e9\U0001F600" [a-c\]\x30-\x32] [^"\\] .)" "\n";
  EXPECT_TRUE(in_language(g, "\"\\\n\tA\xc3\xa9\xf0\x9f\x98\x80]1Z"));
  EXPECT_TRUE(in_language(g, "\"\\\n\tA\xc3\xa9\xf0\x9f\x98\x80" "b\xc3\xa9\xe6\x97\xa5"));
  EXPECT_FALSE(prefix_ok(g, "\"\\\n\tA\xc3\xa9\xf0\x9f\x98\x80" "d"));
  EXPECT_FALSE(prefix_ok(g, "\"\\\n\tA\xc3\xa9\xf0\x9f\x98\x80" "a\""));
  EXPECT_FALSE(prefix_ok(g, "\"\\\n\tA\xc3\xa9\xf0\x9f\x98\x80" "a\\"));
}

TEST(Gbnf, RepetitionBounds) {
  const std::string g = "root ::= \"a\"{2,4} \"b\"{3} [0-9]{2,} \"c\"? \"d\"* \"e\"+\n";
  EXPECT_TRUE(in_language(g, "aabbb12e"));
  EXPECT_TRUE(in_language(g, "aaaabbb12345cddddee"));
  EXPECT_FALSE(prefix_ok(g, "a" "bbb"));
  EXPECT_FALSE(prefix_ok(g, "aaaaa"));
  EXPECT_FALSE(prefix_ok(g, "aabbbb"));
  EXPECT_FALSE(prefix_ok(g, "aabbb1e"));
  EXPECT_FALSE(prefix_ok(g, "aabbb12cc"));
  EXPECT_FALSE(in_language(g, "aabbb12"));
  // A repeated literal repeats as a whole; {0} is the empty string.
  EXPECT_TRUE(in_language("root ::= \"ab\"{2} \"x\"{0}\n", "abab"));
  EXPECT_FALSE(prefix_ok("root ::= \"ab\"{2} \"x\"{0}\n", "ababx"));
}

TEST(Gbnf, RulesCommentsAndMultiLineBodies) {
  const std::string g =
      "# a comment\n"
      "root ::= item-list   # trailing comment\n"
      "item-list ::=\n"
      "  item (\",\"\n"
      "    item\n"
      "  )* |\n"
      "  \"none\"\n"
      "item_x ::= \"unused\"\n"
      "item ::= [a-z]+\n";
  EXPECT_TRUE(in_language(g, "abc,de,f"));
  EXPECT_TRUE(in_language(g, "none"));
  EXPECT_FALSE(prefix_ok(g, "abc,,"));
}

TEST(Gbnf, CompleteVersusFinished) {
  GbnfConstraint list = make("root ::= (\"a\" \"\\n\")+\n");
  EXPECT_FALSE(list.complete());
  ASSERT_TRUE(list.advance("a\n"));
  EXPECT_TRUE(list.complete());
  EXPECT_FALSE(list.finished());  // more items may follow
  GbnfConstraint one = make("root ::= \"ab\"\n");
  ASSERT_TRUE(one.advance("ab"));
  EXPECT_TRUE(one.finished());
  EXPECT_FALSE(one.accepts("a"));
  GbnfConstraint empty = make("root ::= \"\"\n");
  EXPECT_TRUE(empty.finished());
}

TEST(Gbnf, Utf8WholeCharacters) {
  const std::string kana = "root ::= [ぁ-ゟ]+\n";  // U+3041..U+309F, as japanese.gbnf writes it
  EXPECT_TRUE(in_language(kana, "こんにちは"));
  GbnfConstraint c = make(kana);
  EXPECT_TRUE(c.accepts("\xe3"));               // could still become ぁ..ゟ
  EXPECT_TRUE(c.accepts("\xe3\x81"));           // U+3040..U+307F: some are kana
  EXPECT_FALSE(c.accepts("\xe3\x80"));          // U+3000..U+303F: none are
  EXPECT_FALSE(c.accepts("\xe4"));              // U+4000..: none
  ASSERT_TRUE(c.advance("\xe3\x81"));           // a token may end mid-character...
  EXPECT_FALSE(c.complete());                   // ...but the text is not complete there
  EXPECT_FALSE(c.accepts("a"));
  EXPECT_FALSE(c.accepts("\x80"));              // U+3040 is not kana
  EXPECT_TRUE(c.accepts("\x81"));
  ASSERT_TRUE(c.advance("\x93"));               // こ
  EXPECT_TRUE(c.complete());

  const std::string any = "root ::= .*\n";
  for (const char* bad : {"\x80", "\xc0\x80", "\xc1", "\xed\xa0\x80", "\xf4\x90", "\xf5", "\xff", "\xe0\x80"}) {
    EXPECT_FALSE(prefix_ok(any, bad)) << "ill-formed UTF-8 must be refused";
  }
  EXPECT_TRUE(in_language(any, "\xf4\x8f\xbf\xbf" "\xed\x9f\xbf" "\xc2\x80" "\x7f"));
  // Negated class excluding one two-byte character: its lead byte alone is still fine.
  const std::string not_e = "root ::= [^é]\n";
  EXPECT_TRUE(prefix_ok(not_e, "\xc3"));
  EXPECT_FALSE(prefix_ok(not_e, "\xc3\xa9"));
  EXPECT_TRUE(in_language(not_e, "\xc3\xa8"));
  // A negated class covering a lead byte's whole range refuses the lead byte.
  EXPECT_FALSE(prefix_ok("root ::= [^\\u0080-\\u07ff]\n", "\xd0"));
}

TEST(Gbnf, ParseErrorsNameLineAndColumn) {
  EXPECT_NE(parse_error("root ::= foo\n").find("undefined rule 'foo'"), std::string::npos);
  EXPECT_NE(parse_error("main ::= \"a\"\n").find("no 'root' rule"), std::string::npos);
  const std::string esc = parse_error("root ::= \"a\"\nx ::= \"\\q\"\n");
  EXPECT_NE(esc.find("line 2, column 8"), std::string::npos) << esc;
  EXPECT_NE(esc.find("bad escape"), std::string::npos) << esc;
  EXPECT_NE(parse_error("root ::= \"\\x4\"\n").find("hex digits"), std::string::npos);
  EXPECT_TRUE(in_language("root ::= [a\\-] \"\\-\"\n", "--"));  // \- as llama.cpp takes it
  EXPECT_NE(parse_error("root ::= \"abc\n").find("unterminated string"), std::string::npos);
  EXPECT_NE(parse_error("root ::= [a-z\n").find("unterminated character class"), std::string::npos);
  EXPECT_NE(parse_error("root ::= (\"a\"\n").find("unclosed '('"), std::string::npos);
  EXPECT_NE(parse_error("root ::= \"a\" )\n").find("unexpected ')'"), std::string::npos);
  EXPECT_NE(parse_error("root ::= * \"a\"\n").find("does not follow"), std::string::npos);
  EXPECT_NE(parse_error("root ::= \"a\"{3,2}\n").find("n < m"), std::string::npos);
  EXPECT_NE(parse_error("root ::= [z-a]\n").find("backwards"), std::string::npos);
  EXPECT_NE(parse_error("root ::= \"a\"\nroot ::= \"b\"\n").find("defined twice"), std::string::npos);
  EXPECT_NE(parse_error("root ::= \"a\"\n| \"b\"\n").find("expected a rule name"), std::string::npos);
  EXPECT_NE(parse_error("root = \"a\"\n").find("expected '::='"), std::string::npos);
  EXPECT_NE(parse_error("root ::= \"\xff\"\n").find("invalid UTF-8"), std::string::npos);
}

TEST(Gbnf, LeftRecursionIsRefused) {
  for (const char* g : {"root ::= expr\nexpr ::= expr \"+\" term | term\nterm ::= [0-9]\n",
                        "root ::= a\na ::= b \"x\"\nb ::= c a | \"y\"\nc ::= \"\" | \"z\"\n",
                        "root ::= x\nx ::= (x \"a\")* \"b\"\n"}) {
    const std::string e = parse_error(g);
    EXPECT_NE(e.find("left recursion"), std::string::npos) << g << " → " << e;
  }
  // A star of something that can be empty is a cycle of tail references: fine (llama.cpp's
  // "segfault" regression grammar), the same language as the inner star.
  for (const char* g : {"root ::= ( [x]* )*\n", "root ::= (\"a\"?)*\n", "root ::= (\"a\"? \"b\"?)+\n"}) {
    EXPECT_TRUE(in_language(g, "")) << g;
    EXPECT_FALSE(prefix_ok(g, "y")) << g;
  }
  EXPECT_TRUE(in_language("root ::= ( [x]* )*\n", "xxx"));
  EXPECT_TRUE(in_language("root ::= (\"a\"? \"b\"?)+\n", "abba"));
  EXPECT_NE(parse_error("root ::= root\n").find("matches nothing"), std::string::npos);
  // Right recursion and recursion behind a character are fine.
  EXPECT_TRUE(in_language("root ::= \"(\" root \")\" | \"x\"\n", "((x))"));
  EXPECT_TRUE(in_language("root ::= \"a\" root | \"\"\n", "aaaa"));
}

TEST(Gbnf, HostileGrammarsFailFastOrStayBounded) {
  auto quick = [](const std::string& g, const char* what) {
    const auto t0 = std::chrono::steady_clock::now();
    const std::string e = parse_error(g);
    EXPECT_NE(e.find(what), std::string::npos) << e;
    EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), 1.0);
  };
  quick("root ::= \"a\"{0,100000}\n", "repetition count exceeds");
  quick("root ::= \"a\"{5000} \"b\"{5001}\n", "copies");
  // Nested repetitions of something that can be empty: exponentially many parses of the start.
  quick("root ::= (((((([^x]*){0,99}){0,99}){0,99}){0,99}){0,99}){0,99}\n", "too ambiguous");  // llama.cpp's
  quick("root ::= ((((\"a\"?){0,50}){0,50}){0,50})\n", "too ambiguous");
  // Nested repetitions share their inner rule: linear in size, not a product.
  EXPECT_NO_THROW(parse_gbnf("root ::= (((\"a\"){30}){30}){30}\n"));
  std::string deep = "root ::= ";
  deep.append(5000, '(').append("\"a\"").append(5000, ')').append("\n");
  quick(deep, "nested deeper");
  std::string big = "root ::= \"a\"\n";
  big.append(300 * 1024, '#');
  quick(big, "larger than");
  std::string many = "root ::= r0\n";
  for (int i = 0; i < 300; ++i) {
    many.append("r").append(std::to_string(i)).append(" ::= r").append(std::to_string(i + 1)).append(" | \"x\"\n");
  }
  GbnfLimits small;
  small.max_rules = 100;
  try {
    parse_gbnf(many, small);
    ADD_FAILURE() << "300 rules passed a limit of 100";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("more than 100 rules"), std::string::npos) << e.what();
  }

  // Nesting grows the parse stack with the input; past the cap the character is refused.
  GbnfConstraint nest = make("root ::= \"(\" root \")\" | \"x\"\n");
  size_t accepted = 0;
  while (accepted < 5000 && nest.advance("(")) ++accepted;
  EXPECT_GT(accepted, 100u);
  EXPECT_LT(accepted, 5000u);
  // A wildly ambiguous grammar keeps a bounded number of stacks.
  GbnfConstraint amb = make("root ::= x*\nx ::= \"a\" | \"a\" \"a\" | \"a\" x\n");
  for (int i = 0; i < 200 && amb.advance("a"); ++i) EXPECT_LE(amb.live_stacks(), GbnfConstraint::kMaxStacks);
}

TEST(Gbnf, PrefixBeforeTheGrammar) {
  GbnfConstraint c(parse_gbnf("root ::= \"ok\"\n"), "</think>\n\n");
  EXPECT_FALSE(c.accepts("ok"));
  EXPECT_TRUE(c.accepts("</think>\n\nok"));
  ASSERT_TRUE(c.advance("</think>\n"));
  EXPECT_FALSE(c.complete());
  ASSERT_TRUE(c.advance("\nok"));
  EXPECT_TRUE(c.finished());
}

// llama.cpp's grammars/ folder as node-llama-cpp ships it (the same files as in its source bundle).
std::filesystem::path llama_grammars() {
  return std::filesystem::path(OXI_SOURCE_DIR) / "tools/node/node_modules/node-llama-cpp/llama/grammars";
}
std::string read(const std::filesystem::path& p) {
  std::ifstream f(p, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

TEST(GbnfLlamaCpp, EveryGrammarFileParsesAndMatchesASample) {
  if (!std::filesystem::exists(llama_grammars())) GTEST_SKIP() << "no " << llama_grammars() << " (scripts/setup.sh)";
  const std::map<std::string, std::pair<std::string, std::string>> samples = {
      // file → (a text in its language, a text not in it)
      {"arithmetic.gbnf", {"1+2*(x -3)= 4\n(a1_b)= 7\n", "1+=2\n"}},
      {"c.gbnf", {"int main(){int x = 1+2;return x;}", "int main("}},
      {"chess.gbnf", {"1. e4 e5\n2. Nf3 Nc6\n3. O-O Bxc3+\n", "1. e9"}},
      {"english.gbnf", {"Hello, world! It's 42.", "Hello  world"}},
      {"japanese.gbnf", {"こんにちは、世界", "こんにちはx"}},
      {"json.gbnf", {"{\"a\": [1, 2.5, -3e5], \"b\": {\"c\": null}}", "{\"a\" 1}"}},
      {"json_arr.gbnf", {"[\n{\"a\": 1},\n\"x\"]", "[1]"}},
      {"list.gbnf", {"- one\n- two three\n", "-one\n"}},
  };
  size_t n = 0;
  for (const auto& entry : std::filesystem::directory_iterator(llama_grammars())) {
    if (entry.path().extension() != ".gbnf") continue;
    const std::string name = entry.path().filename().string();
    const std::string text = read(entry.path());
    ASSERT_NO_THROW(parse_gbnf(text)) << name;
    ++n;
    auto it = samples.find(name);
    if (it == samples.end()) continue;
    EXPECT_TRUE(in_language(text, it->second.first)) << name;
    EXPECT_FALSE(make(text).accepts(it->second.second) && in_language(text, it->second.second)) << name;
  }
  EXPECT_GE(n, 3u);
}

TEST(GbnfLlamaCpp, JsonGrammarAgreesWithAJsonParser) {
  const auto path = llama_grammars() / "json.gbnf";
  if (!std::filesystem::exists(path)) GTEST_SKIP() << "no " << path;
  const std::string g = read(path);
  // Valid JSON objects within json.gbnf's conventions (single-space / newline+indent whitespace,
  // at most 16 integer digits): all in the language.
  for (const char* ok : {"{}", "{\"a\":1}", "{\"k\": \"v\\\"\\\\\\n\\u00e9 ü 日本 😀\"}",
                         "{\n\t\"x\": [true, false, null, {}, [], -0, 0.5, 1e5, -2.25E-3, 123456789]}",
                         "{\"nested\": {\"deep\": [[[\"x\"]]]}} "}) {
    EXPECT_TRUE(nlohmann::json::accept(ok)) << ok;
    EXPECT_TRUE(in_language(g, ok)) << ok;
  }
  // Not JSON (nlohmann refuses), so never a prefix that completes: refused at some byte.
  for (const char* bad : {"{\"a\":}", "{\"a\" 1}", "{a:1}", "{\"a\":01}", "{\"a\":\"\x01\"}", "{\"a\":tru}",
                          "{\"a\":[1,]}", "{\"a\":1,}", "{\"s\":\"\\x\"}", "[1]"}) {
    EXPECT_FALSE(in_language(g, bad)) << bad;
  }
  // Random walks through the constraint: whatever it completes, nlohmann parses as an object.
  std::mt19937 rng(31);
  const std::string alphabet = "{}[],:\" \n\t-0123456789.eEtrufalsn\\xyzé";
  size_t completed = 0;
  for (int walk = 0; walk < 300; ++walk) {
    GbnfConstraint c = make(g);
    std::string out;
    for (int step = 0; step < 400; ++step) {
      if (c.complete() && (step > 40 || rng() % 8 == 0)) break;
      // Past 40 bytes, prefer closing: try the closers first.
      std::vector<std::string> options;
      for (size_t i = 0; i < alphabet.size(); ++i) {
        std::string ch(1, alphabet[i]);
        if (static_cast<unsigned char>(alphabet[i]) >= 0x80) ch = alphabet.substr(i++, 2);
        if (c.accepts(ch)) options.push_back(ch);
      }
      if (options.empty()) break;
      std::string pick = options[rng() % options.size()];
      if (step > 40) {
        for (const char* closer : {"\"", "}", "]", "0"}) {
          if (c.accepts(closer) && rng() % 2) pick = closer;
        }
      }
      ASSERT_TRUE(c.advance(pick));
      out += pick;
    }
    if (!c.complete()) continue;
    ++completed;
    try {
      EXPECT_TRUE(nlohmann::json::parse(out).is_object()) << out;
    } catch (const nlohmann::json::out_of_range&) {
      // 406: a number too large for a double, still valid JSON syntax (the walk makes "1e999").
    } catch (const nlohmann::json::parse_error& e) {
      ADD_FAILURE() << e.what() << "\n" << out;
    }
  }
  EXPECT_GT(completed, 50u);
}

// Token level: a stand-in model (pseudo-random logits, +8 for tokens holding non-ASCII bytes,
// which in Qwen's byte-level vocabulary often split a character) decodes greedily through
// mask_rejected_tokens over the real Qwen 3.5 vocabulary, as the server and the C API do.
struct Walk {
  std::string text;
  bool ended = false;  // by an end-of-generation token
  double ms_per_step = 0;
};
Walk greedy_walk(GbnfConstraint c, const test::QwenVocab& vocab, uint32_t seed, int steps) {
  const auto n = static_cast<size_t>(vocab.size());
  std::vector<float> logits(n);
  uint64_t h = seed * 0x9e3779b97f4a7c15ull;
  Walk w;
  double ms = 0;
  int done = 0;
  for (; done < steps; ++done) {
    for (size_t id = 0; id < n; ++id) {
      h = h * 6364136223846793005ull + 1442695040888963407ull;
      const std::string& p = vocab.piece(static_cast<int32_t>(id));
      const bool high = std::any_of(p.begin(), p.end(), [](char ch) { return static_cast<unsigned char>(ch) >= 0x80; });
      logits[id] = static_cast<float>(h >> 40) / 16777216.0f + (high ? 8.0f : 0.0f);
    }
    const auto t0 = std::chrono::steady_clock::now();
    mask_rejected_tokens(c, vocab, logits);
    ms += std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    const auto best = static_cast<int32_t>(std::max_element(logits.begin(), logits.end()) - logits.begin());
    EXPECT_NE(logits[static_cast<size_t>(best)], -INFINITY) << "nothing allowed after " << w.text;
    if (logits[static_cast<size_t>(best)] == -INFINITY) break;
    if (vocab.is_eog(best)) {
      w.ended = true;
      break;
    }
    EXPECT_TRUE(c.advance(vocab.piece(best)));
    w.text += vocab.piece(best);
  }
  w.ms_per_step = ms / std::max(done, 1);
  return w;
}

// Strict UTF-8 decoding (no overlong forms, surrogates or values past U+10FFFF); an incomplete
// character at the end is dropped when `allow_cut`. False on anything ill-formed.
bool decode_utf8(const std::string& s, std::vector<uint32_t>& out, bool allow_cut) {
  for (size_t i = 0; i < s.size();) {
    const auto b = static_cast<unsigned char>(s[i]);
    const size_t len = b < 0x80 ? 1 : (b >> 5) == 6 ? 2 : (b >> 4) == 14 ? 3 : (b >> 3) == 30 ? 4 : 0;
    if (len == 0) return false;
    if (i + len > s.size()) return allow_cut;
    uint32_t cp = len == 1 ? b : b & (0x7fu >> len);
    for (size_t k = 1; k < len; ++k) {
      const auto c = static_cast<unsigned char>(s[i + k]);
      if ((c & 0xc0) != 0x80) return false;
      cp = (cp << 6) | (c & 0x3fu);
    }
    static constexpr uint32_t kMin[] = {0, 0, 0x80, 0x800, 0x10000};
    if (cp < kMin[len] || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) return false;
    out.push_back(cp);
    i += len;
  }
  return true;
}

TEST(GbnfLlamaCpp, QwenVocabularyJapaneseGrammarGivesOnlyItsCharacters) {
  const auto path = llama_grammars() / "japanese.gbnf";
  if (!std::filesystem::exists(path)) GTEST_SKIP() << "no " << path;
  const test::QwenVocab vocab;
  const auto g = parse_gbnf(read(path));
  // japanese.gbnf: characters from these ranges, single blanks between runs of them.
  auto allowed = [](uint32_t cp) {
    return (cp >= 0x3041 && cp <= 0x309f) || (cp >= 0x30a1 && cp <= 0x30ff) || (cp >= 0x3001 && cp <= 0x303e) ||
           (cp >= 0x4e00 && cp <= 0x9fff);
  };
  for (uint32_t seed = 1; seed <= 4; ++seed) {
    const Walk w = greedy_walk(GbnfConstraint(g), vocab, seed, 40);
    std::vector<uint32_t> cps;
    ASSERT_TRUE(decode_utf8(w.text, cps, !w.ended)) << "ill-formed UTF-8: " << w.text;
    ASSERT_FALSE(cps.empty());
    EXPECT_TRUE(allowed(cps[0])) << w.text;
    for (size_t i = 0; i < cps.size(); ++i) {
      const bool blank = cps[i] == ' ' || cps[i] == '\t' || cps[i] == '\n';
      EXPECT_TRUE(allowed(cps[i]) || (blank && i > 0 && allowed(cps[i - 1]))) << "U+" << std::hex << cps[i] << " in " << w.text;
    }
    std::cout << "japanese.gbnf seed " << seed << ": " << w.text << " (" << w.ms_per_step << " ms per mask)\n";
  }
}

TEST(GbnfLlamaCpp, QwenVocabularyJsonGrammarGivesJson) {
  const auto path = llama_grammars() / "json.gbnf";
  if (!std::filesystem::exists(path)) GTEST_SKIP() << "no " << path;
  const test::QwenVocab vocab;
  const auto g = parse_gbnf(read(path));
  for (uint32_t seed = 1; seed <= 4; ++seed) {
    const Walk w = greedy_walk(GbnfConstraint(g), vocab, seed, 60);
    std::vector<uint32_t> cps;
    EXPECT_TRUE(decode_utf8(w.text, cps, !w.ended)) << "ill-formed UTF-8: " << w.text;
    ASSERT_FALSE(w.text.empty());
    EXPECT_EQ(w.text[0], '{');
    if (w.ended) {
      EXPECT_TRUE(nlohmann::json::accept(w.text)) << w.text;
    }
    std::cout << "json.gbnf seed " << seed << (w.ended ? " (ended): " : ": ") << w.text << " (" << w.ms_per_step
              << " ms per mask)\n";
  }
}

}  // namespace
}  // namespace oxi

namespace oxi {
namespace {

// Token references through mask_rejected_tokens over the real Qwen vocabulary: <|im_start|> is a
// control token (never matched as text) that only the reference <|im_start|> admits; <[13708]>
// admits exactly that id; after the control token only text tokens of [a-z] remain.
TEST(GbnfTokenRefs, MaskAdmitsReferencedTokensOnly) {
  const test::QwenVocab vocab;
  auto g = parse_gbnf("root ::= <|im_start|> [a-z]+ | <[13708]> \"x\"");
  GbnfConstraint c(g);
  const auto n = static_cast<size_t>(vocab.size());
  auto allowed = [&](const GbnfConstraint& cc) {
    std::vector<float> logits(n, 0.0f);
    mask_rejected_tokens(cc, vocab, logits);
    std::vector<int32_t> ids;
    for (size_t i = 0; i < n; ++i)
      if (logits[i] != -INFINITY) ids.push_back(static_cast<int32_t>(i));
    return ids;
  };
  EXPECT_EQ(allowed(c), (std::vector<int32_t>{13708, 151644}));
  ASSERT_TRUE(vocab.is_control(151644));
  EXPECT_TRUE(c.advance_token(151644, vocab.piece(151644), false));
  const auto after = allowed(c);
  ASSERT_FALSE(after.empty());
  for (int32_t id : after) {
    const std::string& p = vocab.piece(id);
    EXPECT_FALSE(vocab.is_control(id));
    EXPECT_TRUE(std::all_of(p.begin(), p.end(), [](char ch) { return ch >= 'a' && ch <= 'z'; })) << p;
  }
  // The same bytes typed as text are not the token.
  GbnfConstraint t(g);
  EXPECT_FALSE(t.advance("<|im_start|>"));
  EXPECT_THROW(parse_gbnf("root ::= <[99999999999]>"), Error);
  EXPECT_THROW(parse_gbnf("root ::= <[12"), Error);
  EXPECT_THROW(parse_gbnf("root ::= <unclosed"), Error);
}

}  // namespace
}  // namespace oxi
