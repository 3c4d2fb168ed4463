#include <algorithm>
#include <cmath>

#include "core/error.h"
#include "sampling/json_constraint.h"

namespace oxi {

using nlohmann::json;

namespace {
constexpr uint8_t kObj = 1, kArr = 2, kStr = 4, kNum = 8, kInt = 16, kBool = 32, kNull = 64;
constexpr uint8_t kAny = kObj | kArr | kStr | kNum | kInt | kBool | kNull;
constexpr int kMaxWhitespaceRun = 16;  // stops "infinite whitespace" loops
constexpr uint32_t kMaxNumberChars = 32;  // and endless digit runs
constexpr int kMaxDepth = 64;
const std::vector<std::string> kKeywords = {"true", "false", "null"};

bool is_ws(unsigned char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }
bool is_digit(unsigned char c) { return c >= '0' && c <= '9'; }
bool is_hex(unsigned char c) { return is_digit(c) || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F'); }
// The first byte of a multi-byte UTF-8 character: how many continuation bytes follow and the
// range of the first of them (Unicode's table of well-formed sequences: no overlong forms, no
// surrogates, nothing above U+10FFFF). False for bytes that cannot start a character.
bool utf8_lead(unsigned char c, uint8_t& need, uint8_t& lo, uint8_t& hi) {
  lo = 0x80;
  hi = 0xbf;
  if (c >= 0xc2 && c <= 0xdf) need = 1;
  else if (c >= 0xe0 && c <= 0xef) need = 2;
  else if (c >= 0xf0 && c <= 0xf4) need = 3;
  else return false;
  if (c == 0xe0) lo = 0xa0;
  if (c == 0xed) hi = 0x9f;
  if (c == 0xf0) lo = 0x90;
  if (c == 0xf4) hi = 0x8f;
  return true;
}
[[noreturn]] void unsupported(const std::string& what) {
  throw_error(ErrorCode::kInvalidArgument, "json_schema: " + what);
}
}  // namespace

struct JsonConstraint::Node {
  uint8_t types = kAny;
  std::vector<std::string> literals;   // enum/const as serialized JSON; non-empty → one of these
  std::vector<std::string> keys;       // quoted property names, as they appear in the document
  std::vector<const Node*> props;
  uint64_t required = 0;               // bit i: keys[i] required
  uint32_t max_length = 0xffffffffu;   // strings: maxLength (code points)
  uint32_t min_length = 0;             // strings: minLength (code points)
  uint32_t max_items = 0xffffffffu;    // arrays: maxItems
  uint32_t min_items = 0;              // arrays: minItems
  bool restricted = false;             // only `keys` allowed
  const Node* additional = nullptr;    // value schema of free keys
  const Node* items = nullptr;
};

namespace {
struct Compiler {
  const json& root;
  std::vector<std::unique_ptr<JsonConstraint::Node>>& out;
  const JsonConstraint::Node* any = nullptr;

  const JsonConstraint::Node* make_any() {
    if (!any) {
      out.push_back(std::make_unique<JsonConstraint::Node>());
      any = out.back().get();
      // any's children are any (self-reference is fine: nodes are immutable after compile)
      auto* a = out.back().get();
      a->additional = a;
      a->items = a;
    }
    return any;
  }

  const json& deref(const json& s, int depth) {
    if (s.is_object() && s.contains("$ref")) {
      if (depth > kMaxDepth) unsupported("$ref nesting too deep");
      const std::string ref = s["$ref"].is_string() ? s["$ref"].get<std::string>() : "";
      if (ref.rfind("#/", 0) != 0) unsupported("only local $ref (#/...) is supported");
      json::json_pointer ptr(ref.substr(1));
      if (!root.contains(ptr)) unsupported("unresolved $ref " + ref);
      return deref(root.at(ptr), depth + 1);
    }
    return s;
  }

  const JsonConstraint::Node* compile(const json& schema_in, int depth) {
    if (depth > kMaxDepth) return make_any();
    const json& s = deref(schema_in, depth);
    if (s.is_boolean() || (s.is_object() && s.empty())) return make_any();
    if (!s.is_object()) unsupported("a schema must be an object");
    out.push_back(std::make_unique<JsonConstraint::Node>());
    JsonConstraint::Node* n = out.back().get();
    n->additional = make_any();
    n->items = make_any();
    if (s.contains("enum")) {
      if (!s["enum"].is_array() || s["enum"].empty() || s["enum"].size() > 64) {
        unsupported("'enum' must be an array of 1..64 values");
      }
      for (const auto& v : s["enum"]) n->literals.push_back(v.dump());
      return n;
    }
    if (s.contains("const")) {
      n->literals.push_back(s["const"].dump());
      return n;
    }
    uint8_t types = 0;
    auto type_bit = [](const std::string& t) -> uint8_t {
      if (t == "object") return kObj;
      if (t == "array") return kArr;
      if (t == "string") return kStr;
      if (t == "number") return kNum | kInt;
      if (t == "integer") return kInt;
      if (t == "boolean") return kBool;
      if (t == "null") return kNull;
      unsupported("unknown type '" + t + "'");
    };
    if (s.contains("type")) {
      if (s["type"].is_string()) {
        types = type_bit(s["type"].get<std::string>());
      } else if (s["type"].is_array()) {
        for (const auto& t : s["type"]) {
          if (!t.is_string()) unsupported("'type' entries must be strings");
          types |= type_bit(t.get<std::string>());
        }
      } else {
        unsupported("'type' must be a string or an array");
      }
    }
    for (const char* k : {"anyOf", "oneOf"}) {
      if (s.contains(k) && s[k].is_array()) {
        // Union of simple alternatives: their types. Structured alternatives are not merged,
        // so fall back to "any" for them (still valid JSON, less strict).
        for (const auto& alt : s[k]) {
          const json& a = deref(alt, depth + 1);
          if (a.is_object() && a.contains("type") && a["type"].is_string() && !a.contains("properties") &&
              !a.contains("items") && !a.contains("enum")) {
            types |= type_bit(a["type"].get<std::string>());
          } else {
            types = kAny;
          }
        }
      }
    }
    if (types == 0) {
      if (s.contains("properties")) types = kObj;
      else if (s.contains("items")) types = kArr;
      else types = kAny;
    }
    n->types = types;
    if (s.contains("properties")) {
      if (!s["properties"].is_object()) unsupported("'properties' must be an object");
      if (s["properties"].size() > 64) unsupported("at most 64 properties per object");
      for (auto it = s["properties"].begin(); it != s["properties"].end(); ++it) {
        n->keys.push_back(json(it.key()).dump());
        n->props.push_back(compile(it.value(), depth + 1));
      }
      n->restricted = !(s.contains("additionalProperties") && s["additionalProperties"] == true);
      // `properties: {}` alone leaves the object free; with additionalProperties false it is {}.
      const bool closed = s.contains("additionalProperties") && s["additionalProperties"] == false;
      if (n->restricted && n->keys.empty() && !closed) n->restricted = false;
    }
    if (s.contains("required")) {
      if (!s["required"].is_array()) unsupported("'required' must be an array");
      for (const auto& r : s["required"]) {
        const std::string q = json(r).dump();
        bool found = false;
        for (size_t i = 0; i < n->keys.size(); ++i) {
          if (n->keys[i] == q) {
            n->required |= 1ull << i;
            found = true;
          }
        }
        if (!found) unsupported("required property " + q + " is not in 'properties'");
      }
    }
    if (s.contains("additionalProperties") && s["additionalProperties"].is_object()) {
      n->additional = compile(s["additionalProperties"], depth + 1);
      if (n->keys.empty()) n->restricted = false;
    }
    if (s.contains("items")) n->items = compile(s["items"], depth + 1);
    auto count_field = [&](const char* k, uint32_t& dst) {
      if (!s.contains(k)) return;
      if (!s[k].is_number_unsigned() && !(s[k].is_number_integer() && s[k].get<int64_t>() >= 0)) {
        unsupported(std::string("'") + k + "' must be a non-negative integer");
      }
      dst = static_cast<uint32_t>(std::min<uint64_t>(s[k].get<uint64_t>(), 0xfffffffeu));
    };
    count_field("maxLength", n->max_length);
    count_field("minLength", n->min_length);
    count_field("maxItems", n->max_items);
    count_field("minItems", n->min_items);
    return n;
  }
};
}  // namespace

JsonConstraint::JsonConstraint(const json& schema) {
  auto nodes = std::make_shared<std::vector<std::unique_ptr<Node>>>();
  Compiler c{schema, *nodes};
  if (schema.is_null()) {
    // json_object mode: any JSON object.
    nodes->push_back(std::make_unique<Node>());
    Node* n = nodes->back().get();
    n->types = kObj;
    n->additional = c.make_any();
    n->items = c.make_any();
    root_ = n;
  } else {
    root_ = c.compile(schema, 0);
  }
  nodes_ = nodes;
  stack_.push_back(Frame{Kind::kValue, 0, root_});
}

bool JsonConstraint::complete() const {
  if (stack_.size() == 1 && stack_[0].kind == Kind::kDone) return true;
  // A top-level number ends only when something else follows; accept it in an end state.
  if (stack_.size() == 1 && stack_[0].kind == Kind::kNumber) {
    const uint8_t s = stack_[0].sub;
    return s == 1 || s == 2 || s == 4 || s == 7;
  }
  return false;
}

bool JsonConstraint::accepts(std::string_view bytes) const {
  std::vector<Frame> st = stack_;
  int ws = ws_run_;
  for (unsigned char c : bytes) {
    if (!step(st, c, ws)) return false;
  }
  return true;
}

bool JsonConstraint::advance(std::string_view bytes) {
  std::vector<Frame> st = stack_;
  int ws = ws_run_;
  for (unsigned char c : bytes) {
    if (!step(st, c, ws)) return false;
  }
  stack_ = std::move(st);
  ws_run_ = ws;
  return true;
}

bool JsonConstraint::close_value(std::vector<Frame>& st) const {
  if (st.empty()) {
    st.push_back(Frame{Kind::kDone});
    return true;
  }
  Frame& p = st.back();
  if (p.kind == Kind::kObject) {
    if (p.sub == 3) {  // a property value finished
      p.sub = 4;
      p.count++;
      return true;
    }
    if (p.sub == 5) {  // the key finished
      p.sub = 2;
      return true;
    }
  } else if (p.kind == Kind::kArray) {
    p.sub = 2;
    p.count++;
    return true;
  }
  return false;
}

bool JsonConstraint::start_value(std::vector<Frame>& st, const Node* n, unsigned char c, int& ws) const {
  if (static_cast<int>(st.size()) > kMaxDepth) return false;
  if (!n->literals.empty()) {
    Frame f{Kind::kLiteral, 0, n};
    f.lit = &n->literals;
    f.alts = n->literals.size() >= 64 ? ~0ull : ((1ull << n->literals.size()) - 1);
    st.push_back(f);
    return step(st, c, ws);
  }
  switch (c) {
    case '{':
      if (!(n->types & kObj)) return false;
      st.push_back(Frame{Kind::kObject, 0, n});
      return true;
    case '[':
      if (!(n->types & kArr)) return false;
      st.push_back(Frame{Kind::kArray, 0, n});
      return true;
    case '"':
      if (!(n->types & kStr)) return false;
      st.push_back(Frame{Kind::kString, 0, n});
      return true;
    case 't':
    case 'f':
    case 'n': {
      if (c == 'n' ? !(n->types & kNull) : !(n->types & kBool)) return false;
      Frame f{Kind::kLiteral, 0, n};
      f.lit = &kKeywords;
      f.alts = c == 't' ? 1 : c == 'f' ? 2 : 4;
      f.count = 1;
      st.push_back(f);
      return true;
    }
    default:
      if (c == '-' || is_digit(c)) {
        if (!(n->types & (kNum | kInt))) return false;
        Frame f{Kind::kNumber, 0, n};
        f.sub = c == '-' ? 0 : c == '0' ? 1 : 2;
        st.push_back(f);
        return true;
      }
      return false;
  }
}

bool JsonConstraint::step(std::vector<Frame>& st, unsigned char c, int& ws) const {
  Frame& f = st.back();
  const bool white = is_ws(c);
  if (white && f.kind != Kind::kString && !(f.kind == Kind::kLiteral && f.count > 0)) {
    if (f.kind == Kind::kNumber) {
      // whitespace ends a number
    } else {
      if (++ws > kMaxWhitespaceRun) return false;
      return true;
    }
  }
  if (!white) ws = 0;
  switch (f.kind) {
    case Kind::kDone:
      return false;
    case Kind::kValue: {
      const Node* n = f.node;
      st.pop_back();
      return start_value(st, n, c, ws);
    }
    case Kind::kString: {
      if (f.sub == 0) {
        // Whole characters only: inside a multi-byte one, nothing but its next continuation byte
        // (so a token may end mid-character only where some continuation completes it).
        if (f.u8_need > 0) {
          if (c < f.u8_lo || c > f.u8_hi) return false;
          f.u8_lo = 0x80;
          f.u8_hi = 0xbf;
          --f.u8_need;
          return true;
        }
        if (f.low_due) {  // after a high-surrogate escape: its low half (same character)
          if (c != '\\') return false;
          f.sub = 1;
          return true;
        }
        if (c == '"') {
          if (f.count < f.node->min_length && !f.is_key) return false;
          st.pop_back();
          return close_value(st);
        }
        if (c == '\\') f.sub = 1;
        else if (c < 0x20) return false;
        else if (c >= 0x80 && !utf8_lead(c, f.u8_need, f.u8_lo, f.u8_hi)) return false;
        // counted at its first byte: maxLength / minLength are in characters (code points)
        if (++f.count > f.node->max_length && !f.is_key) return false;
        return true;
      }
      if (f.sub == 1) {
        if (c == 'u') {
          f.sub = 2;
          f.esc = 0;
          return true;
        }
        if (f.low_due) return false;
        if (c == '"' || c == '\\' || c == '/' || c == 'b' || c == 'f' || c == 'n' || c == 'r' || c == 't') {
          f.sub = 0;
          return true;
        }
        return false;
      }
      // \uXXXX, checked digit by digit so that every accepted prefix can be completed: a UTF-16
      // surrogate only as a high half directly followed by a low half (one character), since a
      // lone one decodes to U+FFFD or to ill-formed UTF-8.
      if (!is_hex(c)) return false;
      const uint16_t h = static_cast<uint16_t>(is_digit(c) ? c - '0' : (c | 0x20) - 'a' + 10);
      if (f.sub == 2 && f.low_due && h != 0xd) return false;
      if (f.sub == 3 && f.esc == 0xd && (f.low_due ? h < 0xc : h >= 0xc)) return false;
      f.esc = static_cast<uint16_t>(f.esc << 4 | h);
      if (f.sub < 5) {
        ++f.sub;
        return true;
      }
      f.sub = 0;
      f.low_due = !f.low_due && f.esc >= 0xd800 && f.esc <= 0xdbff;
      return true;
    }
    case Kind::kNumber: {
      const bool integer_only = !(f.node->types & kNum);
      uint8_t next = 255;
      switch (f.sub) {
        case 0: next = c == '0' ? 1 : is_digit(c) ? 2 : 255; break;
        case 1: next = (c == '.' && !integer_only) ? 3 : ((c == 'e' || c == 'E') && !integer_only) ? 5 : 255; break;
        case 2: next = is_digit(c) ? 2 : (c == '.' && !integer_only) ? 3 : ((c == 'e' || c == 'E') && !integer_only) ? 5 : 255; break;
        case 3: next = is_digit(c) ? 4 : 255; break;
        case 4: next = is_digit(c) ? 4 : (c == 'e' || c == 'E') ? 5 : 255; break;
        case 5: next = (c == '+' || c == '-') ? 6 : is_digit(c) ? 7 : 255; break;
        case 6: next = is_digit(c) ? 7 : 255; break;
        case 7: next = is_digit(c) ? 7 : 255; break;
      }
      if (next != 255) {
        if (++f.count > kMaxNumberChars) return false;
        f.sub = next;
        return true;
      }
      if (!(f.sub == 1 || f.sub == 2 || f.sub == 4 || f.sub == 7)) return false;
      st.pop_back();
      if (!close_value(st)) return false;
      return step(st, c, ws);  // the terminating char belongs to the parent
    }
    case Kind::kLiteral: {
      uint64_t alive = 0, ended = 0;
      const auto& lit = *f.lit;
      for (size_t i = 0; i < lit.size() && i < 64; ++i) {
        if (!(f.alts >> i & 1)) continue;
        if (lit[i].size() == f.count) ended |= 1ull << i;
        else if (static_cast<unsigned char>(lit[i][f.count]) == c) alive |= 1ull << i;
      }
      if (alive == 0) {
        // An alternative that already ended (e.g. enum 1 vs 12) lets the parent take c.
        if (ended == 0) return false;
        const bool is_key = f.is_key;
        int idx = -1;
        for (int i = 0; i < 64; ++i) if (ended >> i & 1) { idx = i; break; }
        st.pop_back();
        if (is_key) st.back().key_index = idx;
        if (!close_value(st)) return false;
        return step(st, c, ws);
      }
      f.alts = alive;
      f.count++;
      // Finished and nothing longer alive: close now (keys and quoted strings always end here).
      bool longer = false;
      int done_idx = -1;
      for (size_t i = 0; i < lit.size() && i < 64; ++i) {
        if (!(alive >> i & 1)) continue;
        if (lit[i].size() == f.count) done_idx = static_cast<int>(i);
        else longer = true;
      }
      if (done_idx >= 0 && !longer) {
        const bool is_key = f.is_key;
        st.pop_back();
        if (is_key) st.back().key_index = done_idx;
        return close_value(st);
      }
      return true;
    }
    case Kind::kObject: {
      const Node* n = f.node;
      const uint64_t all_seen_req = n->required & ~f.seen_mask;
      auto can_close = [&] { return all_seen_req == 0; };
      switch (f.sub) {
        case 0:
        case 1:
          if (c == '}' && f.sub == 0 && can_close()) {
            st.pop_back();
            return close_value(st);
          }
          if (c != '"') return false;
          f.sub = 5;
          if (n->restricted) {
            uint64_t avail = 0;
            for (size_t i = 0; i < n->keys.size(); ++i) {
              if (!(f.seen_mask >> i & 1)) avail |= 1ull << i;
            }
            if (avail == 0) return false;
            Frame k{Kind::kLiteral, 0, n};
            k.lit = &n->keys;
            k.alts = avail;
            k.count = 1;  // the opening quote
            k.is_key = true;
            st.push_back(k);
          } else {
            Frame k{Kind::kString, 0, n};
            k.is_key = true;
            f.key_index = -1;
            st.push_back(k);
          }
          return true;
        case 2: {
          if (c != ':') return false;
          f.sub = 3;
          const Node* child = n->additional;
          if (f.key_index >= 0 && f.key_index < static_cast<int>(n->props.size())) {
            child = n->props[f.key_index];
            f.seen_mask |= 1ull << f.key_index;
          }
          st.push_back(Frame{Kind::kValue, 0, child});
          return true;
        }
        case 4:
          if (c == ',') {
            if (n->restricted) {
              bool any_left = false;
              for (size_t i = 0; i < n->keys.size(); ++i) any_left |= !(f.seen_mask >> i & 1);
              if (!any_left) return false;
            }
            f.sub = 1;
            return true;
          }
          if (c == '}' && can_close()) {
            st.pop_back();
            return close_value(st);
          }
          return false;
        default:
          return false;
      }
    }
    case Kind::kArray: {
      const Node* n = f.node;
      if (f.sub == 0 && c == ']' && n->min_items == 0) {
        st.pop_back();
        return close_value(st);
      }
      if (f.sub == 0 || f.sub == 1) {
        if (f.count >= n->max_items) return false;
        f.sub = 3;
        return start_value(st, n->items, c, ws);
      }
      if (f.sub == 2) {
        if (c == ',' && f.count < n->max_items) {
          f.sub = 1;
          return true;
        }
        if (c == ']' && f.count >= n->min_items) {
          st.pop_back();
          return close_value(st);
        }
      }
      return false;
    }
  }
  return false;
}

bool FramedJsonConstraint::run(std::string_view bytes, int& phase, size_t& pos, JsonConstraint& json) const {
  for (size_t i = 0; i < bytes.size(); ++i) {
    const char c = bytes[i];
    if (phase == 0) {
      if (prefix_[pos] != c) return false;
      if (++pos == prefix_.size()) {
        phase = 1;
        pos = 0;
      }
    } else if (phase == 1) {
      // The document ends where the suffix begins; the suffix must not start with a byte a
      // complete document accepts (whitespace), so the switch is unambiguous.
      if (json.complete() && !suffix_.empty() && c == suffix_[0]) {
        phase = 2;
        pos = 1;
        continue;
      }
      if (!json.advance(std::string_view(&c, 1))) return false;
    } else {
      if (pos >= suffix_.size() || suffix_[pos] != c) return false;
      ++pos;
    }
  }
  return true;
}

bool FramedJsonConstraint::accepts(std::string_view bytes) const {
  int phase = phase_;
  size_t pos = pos_;
  JsonConstraint copy = json_;
  return run(bytes, phase, pos, copy);
}

bool FramedJsonConstraint::advance(std::string_view bytes) {
  int phase = phase_;
  size_t pos = pos_;
  JsonConstraint copy = json_;
  if (!run(bytes, phase, pos, copy)) return false;
  phase_ = phase;
  pos_ = pos;
  json_ = std::move(copy);
  return true;
}

void mask_rejected_tokens(const TextConstraint& c, const ConstraintVocab& vocab, std::span<float> logits) {
  constexpr size_t kConstrainTop = 1024, kKeepValid = 64;
  const bool done = c.finished(), may_end = c.complete();
  const size_t n = std::min<size_t>(logits.size(), static_cast<size_t>(std::max<int64_t>(0, vocab.size())));
  auto valid = [&](int32_t id) {
    if (vocab.is_eog(id)) return may_end;
    if (done) return false;
    return c.accepts_token(id, vocab.piece(id), !vocab.is_control(id));  // control: token references only
  };
  std::vector<int32_t> order(n);
  for (size_t i = 0; i < n; ++i) order[i] = static_cast<int32_t>(i);
  const size_t top = std::min(kConstrainTop, n);
  auto by_logit = [&](int32_t a, int32_t b) { return logits[a] > logits[b] || (logits[a] == logits[b] && a < b); };
  std::partial_sort(order.begin(), order.begin() + static_cast<std::ptrdiff_t>(top), order.end(), by_logit);
  std::vector<int32_t> keep;
  for (size_t i = 0; i < top && keep.size() < kKeepValid; ++i) {
    if (logits[order[i]] != -INFINITY && valid(order[i])) keep.push_back(order[i]);
  }
  if (keep.empty()) {
    for (size_t i = top; i < n; ++i) {
      if (logits[order[i]] != -INFINITY && valid(order[i])) keep.push_back(order[i]);
    }
  }
  if (keep.empty()) {
    // A dead end (a grammar past its matcher's bounds): end the generation rather than fail it.
    for (size_t i = 0; i < n; ++i) {
      if (logits[i] != -INFINITY && vocab.is_eog(static_cast<int32_t>(i))) keep.push_back(static_cast<int32_t>(i));
    }
  }
  std::vector<float> kept(keep.size());
  for (size_t i = 0; i < keep.size(); ++i) kept[i] = logits[keep[i]];
  std::fill(logits.begin(), logits.end(), -INFINITY);
  for (size_t i = 0; i < keep.size(); ++i) logits[keep[i]] = kept[i];
}

}  // namespace oxi
