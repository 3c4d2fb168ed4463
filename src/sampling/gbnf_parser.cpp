// GBNF text → GbnfGrammar. Recursive descent over the text (nesting bounded), rules collected as
// alternatives of element sequences, then checked (every referenced rule defined, a root, no left
// recursion) and laid out flat. Semantics follow llama.cpp's grammar format (grammars/README.md
// there); the code is our own.
#include <algorithm>
#include <map>

#include "core/error.h"
#include "sampling/gbnf.h"

namespace oxi {

namespace {
using Kind = GbnfGrammar::Kind;
using Elem = GbnfGrammar::Elem;
using Seq = std::vector<Elem>;
constexpr uint32_t kUnbounded = 0xffffffffu;

struct Rule {
  std::string name;
  std::vector<Seq> alts;
  bool defined = false;
  size_t where = 0;  // definition (or first reference, while undefined): offset in the text
};

class Parser {
 public:
  Parser(std::string_view text, const GbnfLimits& limits) : t_(text), lim_(limits) {}

  std::shared_ptr<const GbnfGrammar> run() {
    if (t_.size() > lim_.max_bytes) fail(0, "grammar is larger than " + std::to_string(lim_.max_bytes) + " bytes");
    size_t p = space(0, true);
    while (p < t_.size()) p = space(rule(p), true);
    for (const Rule& r : rules_) {
      if (!r.defined) fail(r.where, "undefined rule '" + r.name + "'");
    }
    auto root = ids_.find("root");
    if (root == ids_.end()) fail(t_.size(), "no 'root' rule");
    check_left_recursion();
    return layout(root->second);
  }

 private:
  [[noreturn]] void fail(size_t at, const std::string& what) const {
    size_t line = 1, col = 1;
    for (size_t i = 0; i < at && i < t_.size(); ++i) {
      if (t_[i] == '\n') {
        ++line;
        col = 1;
      } else {
        ++col;
      }
    }
    throw_error(ErrorCode::kInvalidArgument,
                "grammar: line " + std::to_string(line) + ", column " + std::to_string(col) + ": " + what);
  }
  char at(size_t p) const { return p < t_.size() ? t_[p] : '\0'; }
  static bool word_char(char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' || c == '_';
  }

  // Skips blanks and comments; newlines too where a rule may go on (`newlines`).
  size_t space(size_t p, bool newlines) const {
    while (p < t_.size()) {
      const char c = t_[p];
      if (c == ' ' || c == '\t' || (newlines && (c == '\n' || c == '\r'))) {
        ++p;
      } else if (c == '#') {
        while (p < t_.size() && t_[p] != '\n') ++p;
      } else {
        break;
      }
    }
    return p;
  }

  uint32_t rule_id(const std::string& name, size_t where) {
    auto [it, added] = ids_.emplace(name, static_cast<uint32_t>(rules_.size()));
    if (added) {
      new_rule_slot(where);
      rules_.back().name = name;
    }
    return it->second;
  }
  void new_rule_slot(size_t where) {
    if (rules_.size() >= lim_.max_rules) fail(where, "more than " + std::to_string(lim_.max_rules) + " rules");
    rules_.push_back(Rule{});
    rules_.back().where = where;
  }
  // A rule for a group or repetition inside `owner`'s body.
  uint32_t generated(std::vector<Seq> alts, size_t where) {
    new_rule_slot(where);
    Rule& r = rules_.back();
    r.name = rules_[owner_].name + "-" + std::to_string(rules_.size());
    r.defined = true;
    for (const Seq& s : alts) count_elems(s.size() + 1, where);
    r.alts = std::move(alts);
    return static_cast<uint32_t>(rules_.size() - 1);
  }
  void count_elems(size_t n, size_t where) {
    n_elems_ += n;
    if (n_elems_ > lim_.max_elems) fail(where, "grammar expands to more than " + std::to_string(lim_.max_elems) + " elements");
  }

  size_t rule(size_t p) {
    const size_t start = p;
    while (word_char(at(p))) ++p;
    if (p == start) fail(p, "expected a rule name");
    const std::string name(t_.substr(start, p - start));
    p = space(p, false);
    if (t_.substr(p, 3) != "::=") fail(p, "expected '::=' after rule name '" + name + "'");
    owner_ = rule_id(name, start);
    if (rules_[owner_].defined) fail(start, "rule '" + name + "' is defined twice");
    rules_[owner_].defined = true;
    rules_[owner_].where = start;
    std::vector<Seq> alts;
    p = alternatives(space(p + 3, true), false, 0, alts);
    for (const Seq& s : alts) count_elems(s.size() + 1, start);
    rules_[owner_].alts = std::move(alts);
    p = space(p, false);
    if (at(p) == '\r') ++p;
    if (p < t_.size() && at(p) != '\n') fail(p, std::string("unexpected '") + at(p) + "'");
    return p;
  }

  // `<[id]>`, `<text>`, and both negated with a leading '!': one whole token.
  size_t token_ref(size_t p, Seq& seq) {
    const size_t here = p;
    const bool neg = at(p) == '!';
    if (neg) ++p;
    ++p;  // '<'
    if (at(p) == '[') {
      uint64_t id = 0;
      size_t q = p + 1;
      while (at(q) >= '0' && at(q) <= '9') {
        id = id * 10 + static_cast<uint64_t>(at(q) - '0');
        if (id > 0x7fffffff) fail(here, "token id out of range");
        ++q;
      }
      if (q == p + 1 || at(q) != ']' || at(q + 1) != '>') fail(here, "expected a token reference <[ID]>");
      seq.push_back({neg ? Kind::kTokenNot : Kind::kToken, static_cast<uint32_t>(id)});
      return q + 2;
    }
    const size_t end = t_.find('>', p);
    const size_t nl = t_.find('\n', p);
    if (end == std::string_view::npos || end == p || (nl != std::string_view::npos && nl < end) || end - p > 256) {
      fail(here, "expected a token reference <TEXT> (one line, at most 256 bytes)");
    }
    // The text includes its angle brackets: it is the token's text, e.g. <think>.
    std::string text(t_.substr(p - 1, end - p + 2));
    auto it = std::find(token_texts_.begin(), token_texts_.end(), text);
    if (it == token_texts_.end()) it = token_texts_.insert(token_texts_.end(), std::move(text));
    seq.push_back({neg ? Kind::kTokenTextNot : Kind::kTokenText, static_cast<uint32_t>(it - token_texts_.begin())});
    return end + 1;
  }

  size_t alternatives(size_t p, bool nested, int depth, std::vector<Seq>& alts) {
    alts.emplace_back();
    p = sequence(p, nested, depth, alts.back());
    while (at(p) == '|') {
      alts.emplace_back();
      p = sequence(space(p + 1, true), nested, depth, alts.back());
    }
    return p;
  }

  size_t sequence(size_t p, bool nested, int depth, Seq& seq) {
    size_t item = kNone;  // where the last item starts in seq (what a repetition repeats)
    while (p < t_.size()) {
      const char c = t_[p];
      const size_t here = p;
      if (c == '"') {
        item = seq.size();
        ++p;
        while (at(p) != '"') {
          if (p >= t_.size()) fail(here, "unterminated string literal");
          uint32_t cp = 0;
          p = character(p, cp);
          seq.push_back({Kind::kChar, cp});
        }
        ++p;
      } else if (c == '[') {
        item = seq.size();
        p = char_class(p, seq);
      } else if (c == '<' || (c == '!' && at(p + 1) == '<')) {
        item = seq.size();
        p = token_ref(p, seq);
      } else if (c == '.') {
        item = seq.size();
        seq.push_back({Kind::kClass, add_class({{0, 0x10ffff}}, false)});
        ++p;
      } else if (word_char(c)) {
        item = seq.size();
        while (word_char(at(p))) ++p;
        seq.push_back({Kind::kRef, rule_id(std::string(t_.substr(here, p - here)), here)});
      } else if (c == '(') {
        if (depth >= lim_.max_nesting) fail(p, "parentheses nested deeper than " + std::to_string(lim_.max_nesting));
        std::vector<Seq> alts;
        p = alternatives(space(p + 1, true), true, depth + 1, alts);
        if (at(p) != ')') fail(here, "unclosed '('");
        ++p;
        item = seq.size();
        seq.push_back({Kind::kRef, generated(std::move(alts), here)});
      } else if (c == '*' || c == '+' || c == '?' || c == '{') {
        if (item == kNone) fail(p, std::string("'") + c + "' does not follow anything to repeat");
        uint32_t lo = 0, hi = kUnbounded;
        if (c == '+') lo = 1;
        if (c == '?') hi = 1;
        p = c == '{' ? bounds(p, lo, hi) : p + 1;
        repeat(seq, item, lo, hi, here);
        item = kNone;
      } else {
        break;
      }
      p = space(p, nested);
    }
    return p;
  }

  // {m} {m,} {m,n} starting at p ('{'); returns the position after '}'.
  size_t bounds(size_t p, uint32_t& lo, uint32_t& hi) {
    const size_t open = p;
    auto number = [&](size_t& q, uint32_t& v) {
      q = space(q, true);
      const size_t s = q;
      uint64_t n = 0;
      while (at(q) >= '0' && at(q) <= '9') {
        n = n * 10 + static_cast<uint64_t>(at(q) - '0');
        if (n > lim_.max_repeat_copies) fail(s, "repetition count exceeds " + std::to_string(lim_.max_repeat_copies));
        ++q;
      }
      if (q == s) return false;
      v = static_cast<uint32_t>(n);
      q = space(q, true);
      return true;
    };
    ++p;
    if (!number(p, lo)) fail(p, "expected a number after '{'");
    if (at(p) == '}') {
      hi = lo;
    } else if (at(p) == ',') {
      ++p;
      if (!number(p, hi)) hi = kUnbounded;
      if (hi < lo) fail(open, "repetition {m,n} with n < m");
    } else {
      fail(p, "expected ',' or '}' in a repetition");
    }
    if (at(p) != '}') fail(open, "unclosed '{'");
    return p + 1;
  }

  // Replaces seq[item..] by lo copies of it then (hi - lo) optional ones, or a star when unbounded.
  void repeat(Seq& seq, size_t item, uint32_t lo, uint32_t hi, size_t where) {
    Seq x(seq.begin() + static_cast<std::ptrdiff_t>(item), seq.end());
    seq.resize(item);
    if (x.empty()) return;  // ""* and the like: the empty string
    const Elem one = x.size() == 1 ? x[0] : Elem{Kind::kRef, generated({x}, where)};
    copies_ += std::max<size_t>(lo, 1) + (hi == kUnbounded ? 0 : hi - lo);
    if (copies_ > lim_.max_repeat_copies) {
      fail(where, "repetitions expand to more than " + std::to_string(lim_.max_repeat_copies) + " copies");
    }
    count_elems(lo, where);
    seq.insert(seq.end(), lo, one);
    if (hi == kUnbounded) {
      // star ::= one star | (empty)
      const uint32_t star = generated({}, where);
      rules_[star].alts = {{one, {Kind::kRef, star}}, {}};
      count_elems(5, where);
      seq.push_back({Kind::kRef, star});
    } else if (hi > lo) {
      // opt_k ::= one opt_{k-1} | (empty), nested so that each count has one parse.
      uint32_t inner = kUnbounded;
      for (uint32_t k = lo; k < hi; ++k) {
        Seq body = {one};
        if (inner != kUnbounded) body.push_back({Kind::kRef, inner});
        inner = generated({body, {}}, where);
      }
      seq.push_back({Kind::kRef, inner});
    }
  }

  // One character of a literal or class at p (an escape or a UTF-8 sequence) into cp.
  size_t character(size_t p, uint32_t& cp) const {
    const auto b = static_cast<unsigned char>(at(p));
    if (b == '\\') {
      const char e = at(p + 1);
      int digits = 0;
      switch (e) {
        case 'n': cp = '\n'; return p + 2;
        case 'r': cp = '\r'; return p + 2;
        case 't': cp = '\t'; return p + 2;
        case '\\': case '"': case '[': case ']': case '-': cp = static_cast<uint32_t>(e); return p + 2;
        case 'x': digits = 2; break;
        case 'u': digits = 4; break;
        case 'U': digits = 8; break;
        default: fail(p, std::string("bad escape '\\") + (e ? std::string(1, e) : std::string()) + "'");
      }
      uint64_t v = 0;
      for (int i = 0; i < digits; ++i) {
        const char h = at(p + 2 + static_cast<size_t>(i));
        int d = -1;
        if (h >= '0' && h <= '9') d = h - '0';
        else if (h >= 'a' && h <= 'f') d = h - 'a' + 10;
        else if (h >= 'A' && h <= 'F') d = h - 'A' + 10;
        if (d < 0) fail(p, std::string("bad escape: \\") + e + " needs " + std::to_string(digits) + " hex digits");
        v = v * 16 + static_cast<uint64_t>(d);
      }
      if (v > 0x10ffff) fail(p, "escape beyond U+10FFFF");
      cp = static_cast<uint32_t>(v);
      return p + 2 + static_cast<size_t>(digits);
    }
    // UTF-8: the lead byte gives the length; continuation bytes must follow, no overlong forms.
    int n = b < 0x80 ? 0 : b >= 0xc2 && b <= 0xdf ? 1 : b >= 0xe0 && b <= 0xef ? 2 : b >= 0xf0 && b <= 0xf4 ? 3 : -1;
    if (n < 0) fail(p, "invalid UTF-8 in the grammar");
    cp = n == 0 ? b : b & (0x3f >> n);
    for (int i = 1; i <= n; ++i) {
      const auto c = static_cast<unsigned char>(at(p + static_cast<size_t>(i)));
      if ((c & 0xc0) != 0x80) fail(p, "invalid UTF-8 in the grammar");
      cp = (cp << 6) | (c & 0x3fu);
    }
    static constexpr uint32_t kMin[] = {0, 0x80, 0x800, 0x10000};
    if (cp < kMin[n] || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) fail(p, "invalid UTF-8 in the grammar");
    return p + 1 + static_cast<size_t>(n);
  }

  size_t char_class(size_t p, Seq& seq) {
    const size_t open = p;
    ++p;
    const bool negated = at(p) == '^';
    if (negated) ++p;
    std::vector<std::pair<uint32_t, uint32_t>> ranges;
    while (at(p) != ']') {
      if (p >= t_.size()) fail(open, "unterminated character class");
      uint32_t lo = 0, hi = 0;
      p = character(p, lo);
      hi = lo;
      if (at(p) == '-' && at(p + 1) != ']' && p + 1 < t_.size()) {
        const size_t r = p;
        p = character(p + 1, hi);
        if (hi < lo) fail(r, "character range is backwards");
      }
      ranges.emplace_back(lo, hi);
    }
    seq.push_back({Kind::kClass, add_class(std::move(ranges), negated)});
    return p + 1;
  }

  uint32_t add_class(std::vector<std::pair<uint32_t, uint32_t>> ranges, bool negated) {
    std::sort(ranges.begin(), ranges.end());
    GbnfGrammar::CharClass cc;
    cc.negated = negated;
    for (const auto& r : ranges) {
      if (!cc.ranges.empty() && r.first <= cc.ranges.back().second + 1) {
        cc.ranges.back().second = std::max(cc.ranges.back().second, r.second);
      } else {
        cc.ranges.push_back(r);
      }
    }
    classes_.push_back(std::move(cc));
    return static_cast<uint32_t>(classes_.size() - 1);
  }

  // Left recursion: a rule that can reach itself as the first thing it matches (through rules
  // that can match the empty string) with something left to match after the inner reference.
  // Expanding it would grow the parse stack forever, so it is an error (as in llama.cpp). A cycle
  // of tail references only (`( [x]* )*`: star ::= X star | "" with X nullable) is fine: its
  // expansion comes back to the same stack, which the matcher's dedupe stops.
  // Nullable rules by a worklist; then the "can begin with" graph's strongly connected
  // components (Kosaraju, iterative); a non-tail edge inside one component is left recursion.
  void check_left_recursion() const {
    const size_t n = rules_.size();
    std::vector<char> nullable(n, 0);
    std::vector<std::vector<std::pair<uint32_t, uint32_t>>> users(n);  // rule → (rule, alt) using it
    std::vector<std::vector<uint32_t>> pending(n);  // refs not yet known nullable, per alternative
    std::vector<uint32_t> queue;
    for (uint32_t r = 0; r < n; ++r) {
      pending[r].resize(rules_[r].alts.size());
      for (uint32_t a = 0; a < rules_[r].alts.size(); ++a) {
        const Seq& s = rules_[r].alts[a];
        if (std::any_of(s.begin(), s.end(), [](const Elem& e) { return e.kind != Kind::kRef; })) {
          pending[r][a] = kUnbounded;
          continue;
        }
        pending[r][a] = static_cast<uint32_t>(s.size());
        for (const Elem& e : s) users[e.arg].emplace_back(r, a);
        if (s.empty() && !nullable[r]) {
          nullable[r] = 1;
          queue.push_back(r);
        }
      }
    }
    while (!queue.empty()) {
      const uint32_t r = queue.back();
      queue.pop_back();
      for (const auto& [u, a] : users[r]) {
        if (--pending[u][a] == 0 && !nullable[u]) {
          nullable[u] = 1;
          queue.push_back(u);
        }
      }
    }
    struct Edge {
      uint32_t to;
      bool tail;  // the reference ends its alternative: nothing is pushed behind it
    };
    std::vector<std::vector<Edge>> begins(n);
    std::vector<std::vector<uint32_t>> reverse(n);
    for (uint32_t r = 0; r < n; ++r) {
      for (const Seq& s : rules_[r].alts) {
        for (size_t i = 0; i < s.size() && s[i].kind == Kind::kRef; ++i) {
          begins[r].push_back({s[i].arg, i + 1 == s.size()});
          reverse[s[i].arg].push_back(r);
          if (!nullable[s[i].arg]) break;
        }
      }
    }
    // Pass 1: finishing order on the graph.
    std::vector<uint32_t> order;
    std::vector<char> seen(n, 0);
    std::vector<std::pair<uint32_t, size_t>> path;
    for (uint32_t s = 0; s < n; ++s) {
      if (seen[s]) continue;
      seen[s] = 1;
      path.emplace_back(s, 0);
      while (!path.empty()) {
        auto& [r, next] = path.back();
        if (next == begins[r].size()) {
          order.push_back(r);
          path.pop_back();
          continue;
        }
        const uint32_t b = begins[r][next++].to;
        if (!seen[b]) {
          seen[b] = 1;
          path.emplace_back(b, 0);
        }
      }
    }
    // Pass 2: components on the reversed graph, in reverse finishing order.
    std::vector<uint32_t> comp(n, kUnbounded);
    std::vector<uint32_t> todo;
    for (size_t i = order.size(); i-- > 0;) {
      if (comp[order[i]] != kUnbounded) continue;
      comp[order[i]] = order[i];
      todo.push_back(order[i]);
      while (!todo.empty()) {
        const uint32_t r = todo.back();
        todo.pop_back();
        for (uint32_t u : reverse[r]) {
          if (comp[u] == kUnbounded) {
            comp[u] = order[i];
            todo.push_back(u);
          }
        }
      }
    }
    for (uint32_t r = 0; r < n; ++r) {
      for (const Edge& e : begins[r]) {
        if (e.tail || comp[e.to] != comp[r]) continue;
        fail(rules_[e.to].where, "left recursion: rule '" + rules_[e.to].name +
                                     "' can reach itself without matching a character, with more to match after");
      }
    }
  }

  std::shared_ptr<const GbnfGrammar> layout(uint32_t root) {
    auto g = std::make_shared<GbnfGrammar>();
    g->root = root;
    g->classes = std::move(classes_);
    g->token_texts = std::move(token_texts_);
    g->elems.reserve(n_elems_);
    for (Rule& r : rules_) {
      g->rule_names.push_back(r.name);
      g->alts.emplace_back();
      for (const Seq& s : r.alts) {
        g->alts.back().push_back(static_cast<uint32_t>(g->elems.size()));
        g->elems.insert(g->elems.end(), s.begin(), s.end());
        g->elems.push_back({Kind::kEnd, 0});
      }
    }
    return g;
  }

  static constexpr size_t kNone = static_cast<size_t>(-1);
  std::string_view t_;
  const GbnfLimits& lim_;
  std::vector<Rule> rules_;
  std::map<std::string, uint32_t> ids_;
  std::vector<GbnfGrammar::CharClass> classes_;
  std::vector<std::string> token_texts_;
  uint32_t owner_ = 0;  // the rule being defined
  size_t n_elems_ = 0;
  size_t copies_ = 0;
};
}  // namespace

std::shared_ptr<const GbnfGrammar> parse_gbnf(std::string_view text, const GbnfLimits& limits) {
  auto g = Parser(text, limits).run();
  (void)GbnfConstraint(g);  // throws if even the start state is past the matcher's bounds
  return g;
}

}  // namespace oxi
