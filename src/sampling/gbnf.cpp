// Matching a compiled GBNF grammar one byte at a time: the state is the set of parse stacks that
// are still alive (a nondeterministic top-down parse, all alternatives at once) plus the UTF-8
// character being assembled. A character element consumes a whole code point; a token may end in
// the middle of one only if some stack accepts a code point that those bytes can still become.
#include <algorithm>
#include <set>

#include "core/error.h"
#include "sampling/gbnf.h"

namespace oxi {

using Kind = GbnfGrammar::Kind;

bool GbnfGrammar::CharClass::matches(uint32_t cp) const {
  auto it = std::upper_bound(ranges.begin(), ranges.end(), cp,
                             [](uint32_t v, const std::pair<uint32_t, uint32_t>& r) { return v < r.first; });
  const bool in = it != ranges.begin() && cp <= std::prev(it)->second;
  return in != negated;
}

bool GbnfGrammar::CharClass::matches_any(uint32_t lo, uint32_t hi) const {
  for (const auto& [a, b] : ranges) {
    if (!negated && a <= hi && lo <= b) return true;
    if (negated && a <= lo && hi <= b) return false;  // merged ranges: [lo, hi] all excluded
  }
  return negated;
}

GbnfConstraint::GbnfConstraint(std::shared_ptr<const GbnfGrammar> grammar, std::string prefix)
    : g_(std::move(grammar)), prefix_(std::move(prefix)) {
  has_tokens_ = std::any_of(g_->elems.begin(), g_->elems.end(), [](const auto& e) { return GbnfGrammar::is_token(e.kind); });
  size_t work = 0;
  // The start: one stack per alternative of root.
  for (uint32_t start : g_->alts[g_->root]) {
    if (!expand(Stack{start}, state_.stacks, work)) {
      throw_error(ErrorCode::kInvalidArgument, "grammar: the start of 'root' expands to more than " +
                                                   std::to_string(kMaxStacks) + " parse stacks (too ambiguous)");
    }
  }
  if (state_.stacks.empty()) {
    throw_error(ErrorCode::kInvalidArgument, "grammar: 'root' matches nothing (it never reaches a character or its end)");
  }
  std::sort(state_.stacks.begin(), state_.stacks.end());
  state_.stacks.erase(std::unique(state_.stacks.begin(), state_.stacks.end()), state_.stacks.end());
}

bool GbnfConstraint::expand(Stack stack, std::vector<Stack>& out, size_t& work) const {
  std::vector<Stack> todo;
  // Stacks already expanded: a cycle of tail references (a star of something that can be empty)
  // comes back to one of them, and stops there.
  std::set<Stack> expanded;
  todo.push_back(std::move(stack));
  while (!todo.empty()) {
    Stack s = std::move(todo.back());
    todo.pop_back();
    // An alternative's end: back to the rule that referenced it.
    while (!s.empty() && g_->elems[s.back()].kind == Kind::kEnd) s.pop_back();
    if (++work > kMaxExpandWork || s.size() > kMaxStackDepth) return false;
    if (s.empty() || g_->elems[s.back()].kind != Kind::kRef) {
      if (out.size() >= kMaxStacks) return false;
      out.push_back(std::move(s));
      continue;
    }
    if (!expanded.insert(s).second) continue;
    const uint32_t pos = s.back();
    const uint32_t rule = g_->elems[pos].arg;
    // Continue after the reference once the rule has matched; a reference in tail position
    // leaves nothing behind, so right recursion does not grow the stack.
    if (g_->elems[pos + 1].kind == Kind::kEnd) s.pop_back();
    else s.back() = pos + 1;
    for (uint32_t start : g_->alts[rule]) {
      Stack next = s;
      next.push_back(start);
      todo.push_back(std::move(next));
    }
  }
  return true;
}

bool GbnfConstraint::can_match(const State& s, uint32_t lo, uint32_t hi) const {
  for (const Stack& st : s.stacks) {
    if (st.empty()) continue;
    const GbnfGrammar::Elem& e = g_->elems[st.back()];
    if (GbnfGrammar::is_token(e.kind)) continue;  // waits for a whole token, not a character
    if (e.kind == Kind::kChar ? (lo <= e.arg && e.arg <= hi) : g_->classes[e.arg].matches_any(lo, hi)) return true;
  }
  return false;
}

bool GbnfConstraint::advance_char(State& s, uint32_t cp) const {
  std::vector<Stack> next;
  size_t work = 0;
  for (const Stack& st : s.stacks) {
    if (st.empty()) continue;
    const GbnfGrammar::Elem& e = g_->elems[st.back()];
    if (GbnfGrammar::is_token(e.kind)) continue;
    if (e.kind == Kind::kChar ? e.arg != cp : !g_->classes[e.arg].matches(cp)) continue;
    Stack moved = st;
    moved.back() += 1;  // the next element (kEnd is popped by expand)
    if (!expand(std::move(moved), next, work)) return false;
  }
  if (next.empty()) return false;
  std::sort(next.begin(), next.end());
  next.erase(std::unique(next.begin(), next.end()), next.end());
  s.stacks = std::move(next);
  return true;
}

bool GbnfConstraint::step(State& s, unsigned char c) const {
  if (s.prefix_pos < prefix_.size()) {
    if (static_cast<unsigned char>(prefix_[s.prefix_pos]) != c) return false;
    ++s.prefix_pos;
    return true;
  }
  if (s.need == 0) {
    if (c < 0x80) return advance_char(s, c);
    // A lead byte: its length, and the code points it can begin (overlong forms, surrogates and
    // anything above U+10FFFF excluded, so the range stays contiguous).
    uint8_t need = 0;
    if (c >= 0xc2 && c <= 0xdf) need = 1;
    else if (c >= 0xe0 && c <= 0xef) need = 2;
    else if (c >= 0xf0 && c <= 0xf4) need = 3;
    else return false;
    static constexpr uint32_t kMin[] = {0, 0x80, 0x800, 0x10000};
    const uint32_t acc = c & (0x3fu >> need);
    const uint32_t shift = 6u * need;
    const uint32_t lo = std::max(acc << shift, kMin[need]);
    uint32_t hi = (acc << shift) | ((1u << shift) - 1);
    if (c == 0xed) hi = 0xd7ff;
    hi = std::min<uint32_t>(hi, 0x10ffff);
    if (lo > hi || !can_match(s, lo, hi)) return false;
    s.need = need;
    s.acc = acc;
    s.lo = lo;
    s.hi = hi;
    return true;
  }
  if ((c & 0xc0) != 0x80) return false;
  const uint32_t acc = (s.acc << 6) | (c & 0x3fu);
  const uint8_t need = static_cast<uint8_t>(s.need - 1);
  const uint32_t shift = 6u * need;
  const uint32_t lo = std::max(acc << shift, s.lo);
  const uint32_t hi = std::min((acc << shift) | ((1u << shift) - 1), s.hi);
  if (lo > hi) return false;
  if (need == 0) {
    if (!advance_char(s, acc)) return false;
  } else if (!can_match(s, lo, hi)) {
    return false;
  }
  s.need = need;
  s.acc = acc;
  s.lo = lo;
  s.hi = hi;
  return true;
}

bool GbnfConstraint::accepts(std::string_view bytes) const {
  if (bytes.empty()) return true;
  // Most candidates fail on their first character: check it before copying the state.
  const auto c0 = static_cast<unsigned char>(bytes[0]);
  if (state_.prefix_pos >= prefix_.size() && state_.need == 0 && c0 < 0x80 && !can_match(state_, c0, c0)) return false;
  State copy = state_;
  for (char c : bytes) {
    if (!step(copy, static_cast<unsigned char>(c))) return false;
  }
  return true;
}

bool GbnfConstraint::advance(std::string_view bytes) {
  State copy = state_;
  for (char c : bytes) {
    if (!step(copy, static_cast<unsigned char>(c))) return false;
  }
  state_ = std::move(copy);
  return true;
}

bool GbnfConstraint::run_token(State& s, int32_t id, std::string_view piece, bool text) const {
  auto as_text = [&](State& st) {
    for (char c : piece) {
      if (!step(st, static_cast<unsigned char>(c))) return false;
    }
    return true;
  };
  // Inside the forced prefix, or in the middle of a character, only text can go on.
  if (s.prefix_pos < prefix_.size() || s.need != 0) return text && !piece.empty() && as_text(s);
  std::vector<Stack> next;
  size_t work = 0;
  for (const Stack& st : s.stacks) {
    if (st.empty()) continue;
    const GbnfGrammar::Elem& e = g_->elems[st.back()];
    bool match = false;
    switch (e.kind) {
      case Kind::kToken: match = id == static_cast<int32_t>(e.arg); break;
      case Kind::kTokenNot: match = id != static_cast<int32_t>(e.arg); break;
      case Kind::kTokenText: match = piece == g_->token_texts[e.arg]; break;
      case Kind::kTokenTextNot: match = piece != g_->token_texts[e.arg]; break;
      default: continue;
    }
    if (!match) continue;
    Stack moved = st;
    moved.back() += 1;
    if (!expand(std::move(moved), next, work)) return false;
  }
  if (text && !piece.empty()) {
    State t = s;
    if (as_text(t)) {
      // A token that ends inside a character keeps only that reading (the state holds one
      // partial character); otherwise both readings stay alive.
      if (next.empty() || t.need != 0) {
        s = std::move(t);
        return true;
      }
      next.insert(next.end(), t.stacks.begin(), t.stacks.end());
    }
  }
  if (next.empty() || next.size() > kMaxStacks) return false;
  std::sort(next.begin(), next.end());
  next.erase(std::unique(next.begin(), next.end()), next.end());
  s.stacks = std::move(next);
  return true;
}

bool GbnfConstraint::accepts_token(int32_t id, std::string_view piece, bool text) const {
  // Without token references a token is its text: accepts() rejects most candidates on their
  // first character before copying the state (the masking step tries up to 1024 per token).
  if (!has_tokens_) return text && !piece.empty() && accepts(piece);
  State copy = state_;
  return run_token(copy, id, piece, text);
}

bool GbnfConstraint::advance_token(int32_t id, std::string_view piece, bool text) {
  if (!has_tokens_) return text && advance(piece);
  State copy = state_;
  if (!run_token(copy, id, piece, text)) return false;
  state_ = std::move(copy);
  return true;
}

bool GbnfConstraint::complete() const {
  return state_.prefix_pos == prefix_.size() && state_.need == 0 && !state_.stacks.empty() &&
         state_.stacks.front().empty();  // sorted: the empty stack comes first
}

bool GbnfConstraint::finished() const { return complete() && state_.stacks.size() == 1; }

}  // namespace oxi
