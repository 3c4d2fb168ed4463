// Issue 31, bug 2: JSON-schema constrained strings came out as ill-formed UTF-8 (U+FFFD runs in
// the text) and longer than maxLength, because the automaton took any byte ≥ 0x80 anywhere in a
// string. It now takes whole characters: a token may end inside a character only where some
// continuation completes it, and maxLength / minLength count characters.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "sampling/json_constraint.h"
#include "qwen_vocab.h"
#include "tokenizer/tokenizer.h"

namespace oxi {
namespace {

using nlohmann::json;

// Characters (code points) of well-formed UTF-8: the bytes that are not continuation bytes.
size_t code_points(const std::string& s) {
  size_t n = 0;
  for (unsigned char c : s) n += (c & 0xc0) != 0x80;
  return n;
}

const json kShort = json::parse(R"({"type":"object","properties":{"s":{"type":"string","minLength":2,"maxLength":4}},
                                     "required":["s"],"additionalProperties":false})");

TEST(JsonConstraintUtf8, TakesOnlyWellFormedCharacters) {
  auto open = [] {
    JsonConstraint c(kShort);
    EXPECT_TRUE(c.advance(R"({"s":")"));
    return c;
  };
  EXPECT_TRUE(open().accepts("\xe6\x97"));          // 日 cut after two of its three bytes: may go on
  EXPECT_FALSE(open().accepts("\xe6\x97\""));       // … but not end the string there
  EXPECT_FALSE(open().accepts("\xe6\x97x"));        // … nor go on with a new character
  EXPECT_FALSE(open().accepts("\x97"));             // a continuation byte with no lead
  EXPECT_FALSE(open().accepts("\xc0\xaf"));         // overlong '/'
  EXPECT_FALSE(open().accepts("\xed\xa0\x80"));     // a UTF-16 surrogate
  EXPECT_FALSE(open().accepts("\xf4\x90\x80\x80")); // above U+10FFFF
  EXPECT_FALSE(open().accepts("\xff"));
  EXPECT_TRUE(open().accepts("\xf0\x9f\x98\x80\xc3\xa9"));  // 😀é
  // \u escapes: UTF-16 surrogates only as a high + low pair
  EXPECT_TRUE(open().accepts(R"(\ud83d\ude00\u00e9")"));
  EXPECT_FALSE(open().accepts(R"(\udc)"));        // a lone low half
  EXPECT_FALSE(open().accepts(R"(\ud83d")"));     // a high half alone
  EXPECT_FALSE(open().accepts(R"(\ud83dx)"));
  EXPECT_FALSE(open().accepts(R"(\ud83d\n)"));
  EXPECT_FALSE(open().accepts(R"(\ud83d\u0)"));  // not a low half
  EXPECT_FALSE(open().accepts(R"(\ud83d\ud8)"));
}

TEST(JsonConstraintUtf8, LengthsCountCharacters) {
  JsonConstraint c(kShort);
  EXPECT_TRUE(c.advance(R"({"s":"日本語)"));  // 3 characters, 9 bytes
  EXPECT_TRUE(c.accepts("\xf0\x9f\x98\x80\"}"));  // a 4th (4 bytes) and the end
  EXPECT_FALSE(c.accepts("ab"));                   // a 5th
  EXPECT_TRUE(c.accepts(R"(\ud83d\ude00"})"));      // a surrogate pair is one character
  JsonConstraint one(kShort);
  EXPECT_TRUE(one.advance(R"({"s":"é)"));
  EXPECT_FALSE(one.accepts("\""));  // minLength 2
  EXPECT_TRUE(one.accepts("x\"}"));
}

// Qwen's byte-level BPE splits most CJK characters and emoji over several tokens that are not
// UTF-8 on their own. A stand-in model that strongly prefers tokens with non-ASCII bytes (pseudo-
// random logits, +8 for those) generates greedily through mask_rejected_tokens: every document
// must be complete, parse as JSON (nlohmann's parser rejects ill-formed UTF-8) and keep `s`
// within 2…4 characters.
TEST(JsonConstraintUtf8, QwenVocabularyGivesWellFormedStringsWithinLength) {
  const test::QwenVocab vocab;
  const int64_t n = vocab.size();
  std::vector<float> boost(static_cast<size_t>(n), 0.0f);
  int64_t split = 0;
  for (int64_t id = 0; id < n; ++id) {
    const std::string& p = vocab.piece(static_cast<int32_t>(id));
    const bool high = std::any_of(p.begin(), p.end(), [](char c) { return static_cast<unsigned char>(c) >= 0x80; });
    if (high) boost[static_cast<size_t>(id)] = 8.0f;
    split += high && !json::accept("\"" + p + "\"");  // a token that is not whole characters
  }
  ASSERT_GT(split, 1000) << "expected Qwen's byte-level pieces that split characters";
  std::vector<float> logits(static_cast<size_t>(n));
  for (uint32_t seed = 1; seed <= 12; ++seed) {
    JsonConstraint c(kShort);
    std::string doc;
    uint64_t h = seed * 0x9e3779b97f4a7c15ull;
    bool ended = false;
    for (int step = 0; step < 80 && !ended; ++step) {
      for (int64_t id = 0; id < n; ++id) {
        h = h * 6364136223846793005ull + 1442695040888963407ull;
        logits[static_cast<size_t>(id)] = static_cast<float>(h >> 40) / 16777216.0f + boost[static_cast<size_t>(id)];
      }
      mask_rejected_tokens(c, vocab, logits);
      int32_t best = 0;
      for (int64_t id = 1; id < n; ++id)
        if (logits[static_cast<size_t>(id)] > logits[static_cast<size_t>(best)]) best = static_cast<int32_t>(id);
      ASSERT_NE(logits[static_cast<size_t>(best)], -INFINITY) << "seed " << seed << ": nothing allowed after " << doc;
      if (vocab.is_eog(best)) {
        ended = true;
        break;
      }
      ASSERT_TRUE(c.advance(vocab.piece(best)));
      doc += vocab.piece(best);
    }
    ASSERT_TRUE(ended && c.complete()) << "seed " << seed << ": " << doc;
    ASSERT_TRUE(json::accept(doc)) << "seed " << seed << ": not JSON / ill-formed UTF-8: " << doc;
    const std::string s = json::parse(doc).at("s").get<std::string>();
    EXPECT_GE(code_points(s), 2u) << doc;
    EXPECT_LE(code_points(s), 4u) << doc;
  }
}

}  // namespace
}  // namespace oxi
