// GBNF grammars (llama.cpp's grammar syntax) for constrained generation: `parse_gbnf` compiles a
// grammar's text (gbnf_parser.cpp), `GbnfConstraint` is a TextConstraint accepting exactly the
// byte prefixes of strings in the grammar's language (gbnf.cpp), so `grammar` requests share the
// masking and sampling path of json_schema (mask_rejected_tokens).
//
// Syntax: `name ::= body` rules, `root` is the start; in bodies `|`, `( )`, "literals" with
// escapes \n \r \t \\ \" \[ \] \xHH \uHHHH \UHHHHHHHH, classes [a-z_] and [^"\\], `.` (any
// character), repetition * + ? {m} {m,} {m,n}, `#` comments to the end of the line. A rule ends at
// the end of its line unless inside parentheses or after `|` / `::=`. Token references match one
// whole token: `<[123]>` the token with id 123, `<think>` the token whose text is "<think>",
// `!<[123]>` / `!<think>` any one token but that one (llama.cpp's syntax and meaning).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "sampling/json_constraint.h"

namespace oxi {

// A compiled grammar: every rule's alternatives laid out in one array of elements, each
// alternative ending with kEnd. Groups and repetitions became generated rules; a literal is one
// kChar per code point. Immutable once built, shared by the constraints made from it.
struct GbnfGrammar {
  enum class Kind : uint8_t { kEnd, kChar, kClass, kRef, kToken, kTokenNot, kTokenText, kTokenTextNot };
  struct Elem {
    Kind kind;
    // kChar: the code point; kClass: index into classes; kRef: rule id; kToken(Not): token id;
    // kTokenText(Not): index into token_texts
    uint32_t arg;
  };
  static bool is_token(Kind k) { return k >= Kind::kToken; }
  struct CharClass {
    std::vector<std::pair<uint32_t, uint32_t>> ranges;  // sorted, merged, inclusive
    bool negated = false;
    bool matches(uint32_t cp) const;
    bool matches_any(uint32_t lo, uint32_t hi) const;  // some code point in [lo, hi]
  };
  std::vector<Elem> elems;
  std::vector<CharClass> classes;
  std::vector<std::vector<uint32_t>> alts;  // per rule: where each alternative starts in elems
  std::vector<std::string> rule_names;      // generated rules: "<rule>-<n>"
  std::vector<std::string> token_texts;     // the texts of <text> token references
  uint32_t root = 0;
};

// Bounds on what a grammar from a request may cost; exceeding one is a parse error.
struct GbnfLimits {
  size_t max_bytes = 256 * 1024;
  size_t max_rules = 20000;        // written and generated
  size_t max_elems = 200000;
  size_t max_repeat_copies = 10000;  // the copies {m,n} repetitions expand to, grammar-wide
  int max_nesting = 100;             // parentheses
};

// Throws oxi::Error(kInvalidArgument) "grammar: line L, column C: …" for syntax errors, unknown
// rules, a missing root, left recursion (a rule reaching itself without consuming a character,
// with more to match after it), exceeded limits, and (without a place) a root that matches nothing
// or whose start is past GbnfConstraint's bounds.
std::shared_ptr<const GbnfGrammar> parse_gbnf(std::string_view text, const GbnfLimits& limits = {});

class GbnfConstraint final : public TextConstraint {
 public:
  // prefix: bytes forced before the grammar's text (e.g. "</think>\n\n" when the template opened
  // a reasoning block).
  explicit GbnfConstraint(std::shared_ptr<const GbnfGrammar> grammar, std::string prefix = {});

  bool accepts(std::string_view bytes) const override;
  bool advance(std::string_view bytes) override;  // false (state unchanged) if rejected
  // A whole token: stacks waiting for a token reference match it by id (or text); the others take
  // its bytes as characters when `text` (a control token has none). Both ways may stay alive.
  bool accepts_token(int32_t id, std::string_view piece, bool text) const override;
  bool advance_token(int32_t id, std::string_view piece, bool text) override;
  bool complete() const override;                  // the text so far is in the language
  bool finished() const override;                  // ... and nothing may follow it

  size_t live_stacks() const { return state_.stacks.size(); }

  // Bounds that keep a hostile grammar from exploding: a character that would need more live
  // parse stacks, deeper stacks or more expansion work than these is rejected.
  static constexpr size_t kMaxStacks = 2048;
  static constexpr size_t kMaxStackDepth = 1024;
  static constexpr size_t kMaxExpandWork = 100000;

 private:
  // A parse stack: positions in grammar.elems still to match, the next one last. Stacks kept in
  // the state are empty (the root has ended) or have a kChar/kClass on top.
  using Stack = std::vector<uint32_t>;
  struct State {
    std::vector<Stack> stacks;  // sorted, unique
    size_t prefix_pos = 0;
    uint8_t need = 0;           // continuation bytes due for the current UTF-8 character
    uint32_t acc = 0;           // its bits so far
    uint32_t lo = 0, hi = 0;    // the code points it can still become
  };
  bool step(State& s, unsigned char c) const;
  bool advance_char(State& s, uint32_t cp) const;
  bool can_match(const State& s, uint32_t lo, uint32_t hi) const;
  bool run_token(State& s, int32_t id, std::string_view piece, bool text) const;
  // Rewrites a stack until its top is a character element (or it is empty), into `out`.
  bool expand(Stack stack, std::vector<Stack>& out, size_t& work) const;

  std::shared_ptr<const GbnfGrammar> g_;
  bool has_tokens_ = false;  // any token reference: else a token is just its text (the fast path)
  std::string prefix_;
  State state_;
};

}  // namespace oxi
