// Lexer and parser for the Jinja subset used by chat templates (jinja2 3.x syntax, with
// trim_blocks + lstrip_blocks as transformers configures them).
#include <algorithm>
#include <cstring>

#include "chat/jinja_ast.h"
#include "core/error.h"

namespace oxi::jinja {

namespace {

enum class TT { kText, kVarBegin, kBlockBegin, kVarEnd, kBlockEnd, kName, kString, kInt, kFloat, kOp, kEof };

struct Tok {
  TT t;
  std::string s;
  Value num;
  int line;
};

[[noreturn]] void syntax(int line, const std::string& msg) {
  throw_error(ErrorCode::kFormat, "chat template: line " + std::to_string(line) + ": " + msg);
}

bool is_ws(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'; }

// Python str.rstrip() over UTF-8 (only ASCII whitespace plus the common Unicode spaces matter in
// template text; we handle all of str.isspace()).
std::string rstrip_py(const std::string& s) {
  size_t end = s.size();
  while (end > 0) {
    // find start of last code point
    size_t st = end - 1;
    while (st > 0 && (static_cast<unsigned char>(s[st]) & 0xC0) == 0x80 && end - st < 4) --st;
    size_t i = st;
    const uint32_t cp = utf8_next(s, i);
    if (i != end || !is_py_space_cp(cp)) {
      if (i != end) {  // invalid sequence; treat last byte alone
        if (is_ws(s[end - 1])) {
          --end;
          continue;
        }
      }
      break;
    }
    end = st;
  }
  return s.substr(0, end);
}

class Lexer {
 public:
  explicit Lexer(const std::string& src) {
    // Newlines normalised to \n; one trailing newline dropped (keep_trailing_newline=False).
    src_.reserve(src.size());
    for (size_t i = 0; i < src.size(); ++i) {
      if (src[i] == '\r') {
        src_ += '\n';
        if (i + 1 < src.size() && src[i + 1] == '\n') ++i;
      } else {
        src_ += src[i];
      }
    }
    if (!src_.empty() && src_.back() == '\n') src_.pop_back();
  }

  std::vector<Tok> run() {
    size_t pos = 0;
    while (pos < src_.size()) {
      // Find the next tag opening.
      size_t open = pos;
      int kind = 0;  // 1 var, 2 block, 3 comment
      for (;;) {
        open = src_.find('{', open);
        if (open == std::string::npos || open + 1 >= src_.size()) {
          open = std::string::npos;
          break;
        }
        const char c = src_[open + 1];
        if (c == '{') kind = 1;
        else if (c == '%') kind = 2;
        else if (c == '#') kind = 3;
        if (kind) break;
        ++open;
      }
      if (open == std::string::npos) {
        add_text(src_.substr(pos), pos);
        break;
      }
      std::string text = src_.substr(pos, open - pos);
      size_t p = open + 2;
      char sign = 0;
      if (p < src_.size() && (src_[p] == '-' || src_[p] == '+')) sign = src_[p++];
      if (sign == '-') {
        text = rstrip_py(text);
      } else if (sign != '+' && kind != 1) {
        const size_t nl = text.rfind('\n');
        const size_t l_pos = nl == std::string::npos ? 0 : nl + 1;
        const bool line_starting = pos == 0 || src_[pos - 1] == '\n';
        if (l_pos > 0 || line_starting) {
          bool all_ws = l_pos < text.size();
          for (size_t k = l_pos; k < text.size() && all_ws; ++k) {
            if (!(text[k] == ' ' || text[k] == '\t' || text[k] == '\f' || text[k] == '\v')) all_ws = false;
          }
          if (all_ws) text.resize(l_pos);
        }
      }
      add_text(text, pos);
      line_ = line_at(open);
      if (kind == 3) {
        // Comment: up to the first "#}" (with "-#}" stripping what follows).
        const size_t close = src_.find("#}", p);
        if (close == std::string::npos) syntax(line_, "missing end of comment tag");
        pos = close + 2;
        if (close > p && src_[close - 1] == '-') {
          while (pos < src_.size() && is_ws(src_[pos])) ++pos;
        } else if (!(close > p && src_[close - 1] == '+') && pos < src_.size() && src_[pos] == '\n') {
          ++pos;
        }
        continue;
      }
      if (kind == 2 && is_raw_begin(p)) {
        pos = lex_raw(p);
        continue;
      }
      toks_.push_back({kind == 1 ? TT::kVarBegin : TT::kBlockBegin, "", Value(), line_});
      pos = lex_tag(p, kind == 1);
    }
    toks_.push_back({TT::kEof, "", Value(), line_at(src_.size())});
    return std::move(toks_);
  }

 private:
  int line_at(size_t pos) {
    while (line_pos_ < pos && line_pos_ < src_.size()) {
      if (src_[line_pos_] == '\n') ++line_count_;
      ++line_pos_;
    }
    return line_count_;
  }

  void add_text(const std::string& t, size_t pos) {
    if (t.empty()) return;
    if (!toks_.empty() && toks_.back().t == TT::kText) {
      toks_.back().s += t;
    } else {
      toks_.push_back({TT::kText, t, Value(), line_at(pos)});
    }
  }

  // `raw` name directly followed by an optional sign and "%}".
  bool is_raw_begin(size_t p) {
    while (p < src_.size() && is_ws(src_[p])) ++p;
    if (src_.compare(p, 3, "raw") != 0) return false;
    p += 3;
    while (p < src_.size() && is_ws(src_[p])) ++p;
    if (p < src_.size() && (src_[p] == '-' || src_[p] == '+')) ++p;
    return src_.compare(p, 2, "%}") == 0;
  }

  size_t lex_raw(size_t p) {
    while (is_ws(src_[p])) ++p;
    p += 3;
    while (is_ws(src_[p])) ++p;
    char sign = 0;
    if (src_[p] == '-' || src_[p] == '+') sign = src_[p++];
    p += 2;
    if (sign == '-') {
      while (p < src_.size() && is_ws(src_[p])) ++p;
    } else if (sign != '+' && p < src_.size() && src_[p] == '\n') {
      ++p;
    }
    // Find {%[-+]? endraw [-+]?%}
    size_t search = p;
    for (;;) {
      const size_t o = src_.find("{%", search);
      if (o == std::string::npos) syntax(line_, "missing endraw");
      size_t q = o + 2;
      char s1 = 0;
      if (q < src_.size() && (src_[q] == '-' || src_[q] == '+')) s1 = src_[q++];
      while (q < src_.size() && is_ws(src_[q])) ++q;
      if (src_.compare(q, 6, "endraw") != 0) {
        search = o + 2;
        continue;
      }
      q += 6;
      while (q < src_.size() && is_ws(src_[q])) ++q;
      char s2 = 0;
      if (q < src_.size() && (src_[q] == '-' || src_[q] == '+')) s2 = src_[q++];
      if (src_.compare(q, 2, "%}") != 0) {
        search = o + 2;
        continue;
      }
      std::string text = src_.substr(p, o - p);
      if (s1 == '-') {
        text = rstrip_py(text);
      } else if (s1 != '+') {
        const size_t nl = text.rfind('\n');
        const size_t l_pos = nl == std::string::npos ? 0 : nl + 1;
        bool all_ws = l_pos < text.size();
        for (size_t k = l_pos; k < text.size() && all_ws; ++k) all_ws = text[k] == ' ' || text[k] == '\t';
        if (all_ws && (l_pos > 0 || p == 0 || src_[p - 1] == '\n')) text.resize(l_pos);
      }
      add_text(text, p);
      q += 2;
      if (s2 == '-') {
        while (q < src_.size() && is_ws(src_[q])) ++q;
      } else if (s2 != '+' && q < src_.size() && src_[q] == '\n') {
        ++q;
      }
      return q;
    }
  }

  // Lexes the inside of {{ }} / {% %}; returns the position after the closing tag.
  size_t lex_tag(size_t p, bool var) {
    std::vector<char> balance;
    for (;;) {
      while (p < src_.size() && is_ws(src_[p])) ++p;
      if (p >= src_.size()) syntax(line_, var ? "unexpected end of template, expected '}}'" : "unexpected end of template, expected '%}'");
      const int line = line_at(p);
      if (balance.empty()) {
        const char* end = var ? "}}" : "%}";
        if (src_[p] == '-' && src_.compare(p + 1, 2, end) == 0) {
          toks_.push_back({var ? TT::kVarEnd : TT::kBlockEnd, "", Value(), line});
          p += 3;
          while (p < src_.size() && is_ws(src_[p])) ++p;
          return p;
        }
        if (!var && src_[p] == '+' && src_.compare(p + 1, 2, end) == 0) {
          toks_.push_back({TT::kBlockEnd, "", Value(), line});
          return p + 3;
        }
        if (src_.compare(p, 2, end) == 0) {
          toks_.push_back({var ? TT::kVarEnd : TT::kBlockEnd, "", Value(), line});
          p += 2;
          if (!var && p < src_.size() && src_[p] == '\n') ++p;  // trim_blocks
          return p;
        }
      }
      const char c = src_[p];
      if (std::isalpha(static_cast<unsigned char>(c)) || c == '_') {
        size_t q = p;
        while (q < src_.size() && (std::isalnum(static_cast<unsigned char>(src_[q])) || src_[q] == '_')) ++q;
        toks_.push_back({TT::kName, src_.substr(p, q - p), Value(), line});
        p = q;
        continue;
      }
      if (std::isdigit(static_cast<unsigned char>(c))) {
        p = lex_number(p, line);
        continue;
      }
      if (c == '\'' || c == '"') {
        p = lex_string(p, line);
        continue;
      }
      static const char* ops3[] = {"//", "**", "==", "!=", "<=", ">="};
      std::string op;
      for (const char* o : ops3) {
        if (src_.compare(p, 2, o) == 0) {
          op = o;
          break;
        }
      }
      if (op.empty()) {
        if (std::strchr("+-*/%~[](){}<>=.:|,;", c) == nullptr) {
          syntax(line, std::string("unexpected character '") + c + "'");
        }
        op = std::string(1, c);
      }
      if (op == "(" || op == "[" || op == "{") {
        balance.push_back(op == "(" ? ')' : op == "[" ? ']' : '}');
        if (balance.size() > 1000) syntax(line, "brackets nested too deeply");
      } else if (op == ")" || op == "]" || op == "}") {
        if (balance.empty() || balance.back() != op[0]) syntax(line, "unexpected '" + op + "'");
        balance.pop_back();
      }
      toks_.push_back({TT::kOp, op, Value(), line});
      p += op.size();
    }
  }

  size_t lex_number(size_t p, int line) {
    size_t q = p;
    std::string digits;
    auto take_digits = [&]() {
      while (q < src_.size() && (std::isdigit(static_cast<unsigned char>(src_[q])) ||
                                 (src_[q] == '_' && q + 1 < src_.size() && std::isdigit(static_cast<unsigned char>(src_[q + 1]))))) {
        if (src_[q] != '_') digits += src_[q];
        ++q;
      }
    };
    take_digits();
    bool is_float = false;
    if (q + 1 < src_.size() && src_[q] == '.' && std::isdigit(static_cast<unsigned char>(src_[q + 1]))) {
      is_float = true;
      digits += '.';
      ++q;
      take_digits();
    }
    if (q < src_.size() && (src_[q] == 'e' || src_[q] == 'E')) {
      size_t r = q + 1;
      if (r < src_.size() && (src_[r] == '+' || src_[r] == '-')) ++r;
      if (r < src_.size() && std::isdigit(static_cast<unsigned char>(src_[r]))) {
        is_float = true;
        digits += 'e';
        digits.append(src_, q + 1, r - q - 1);
        q = r;
        take_digits();
      }
    }
    if (is_float) {
      toks_.push_back({TT::kFloat, digits, Value(std::strtod(digits.c_str(), nullptr)), line});
    } else {
      errno = 0;
      const long long v = std::strtoll(digits.c_str(), nullptr, 10);
      if (errno == ERANGE) syntax(line, "integer literal too large");
      toks_.push_back({TT::kInt, digits, Value(int64_t(v)), line});
    }
    return q;
  }

  size_t lex_string(size_t p, int line) {
    const char q = src_[p];
    size_t i = p + 1;
    std::string out;
    while (true) {
      if (i >= src_.size()) syntax(line, "unterminated string");
      const char c = src_[i];
      if (c == q) break;
      if (c != '\\') {
        out += c;
        ++i;
        continue;
      }
      if (i + 1 >= src_.size()) syntax(line, "unterminated string");
      const char e = src_[i + 1];
      i += 2;
      auto hex = [&](int n) -> uint32_t {
        uint32_t v = 0;
        for (int k = 0; k < n; ++k) {
          if (i >= src_.size() || !std::isxdigit(static_cast<unsigned char>(src_[i]))) {
            syntax(line, "truncated \\x/\\u escape in string");
          }
          const char h = src_[i++];
          v = v * 16 + uint32_t(std::isdigit(static_cast<unsigned char>(h)) ? h - '0' : (std::tolower(h) - 'a' + 10));
        }
        return v;
      };
      switch (e) {
        case 'n': out += '\n'; break;
        case 't': out += '\t'; break;
        case 'r': out += '\r'; break;
        case '\\': out += '\\'; break;
        case '\'': out += '\''; break;
        case '"': out += '"'; break;
        case 'a': out += '\a'; break;
        case 'b': out += '\b'; break;
        case 'f': out += '\f'; break;
        case 'v': out += '\v'; break;
        case '\n': break;  // line continuation
        case 'x': utf8_append(out, hex(2)); break;
        case 'u': {
          const uint32_t cp = hex(4);
          if (cp >= 0xD800 && cp <= 0xDFFF) syntax(line, "surrogate escape in string");
          utf8_append(out, cp);
          break;
        }
        case 'U': {
          const uint32_t cp = hex(8);
          if (cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) syntax(line, "invalid \\U escape");
          utf8_append(out, cp);
          break;
        }
        default:
          if (e >= '0' && e <= '7') {
            uint32_t v = uint32_t(e - '0');
            for (int k = 0; k < 2 && i < src_.size() && src_[i] >= '0' && src_[i] <= '7'; ++k) v = v * 8 + uint32_t(src_[i++] - '0');
            utf8_append(out, v);
          } else {
            out += '\\';
            out += e;
          }
      }
    }
    toks_.push_back({TT::kString, out, Value(), line});
    return i + 1;
  }

  std::string src_;
  std::vector<Tok> toks_;
  int line_ = 1;
  size_t line_pos_ = 0;
  int line_count_ = 1;
};

class Parser {
 public:
  Parser(std::vector<Tok> toks, size_t max_depth) : t_(std::move(toks)), max_depth_(max_depth) {}

  std::shared_ptr<Program> run() {
    auto prog = std::make_shared<Program>();
    std::string end;
    prog->body = parse_body({}, end);
    return prog;
  }

 private:
  const Tok& cur() const { return t_[p_]; }
  const Tok& peek(size_t n = 1) const { return t_[std::min(p_ + n, t_.size() - 1)]; }
  bool is_op(const char* s) const { return cur().t == TT::kOp && cur().s == s; }
  bool is_name(const char* s) const { return cur().t == TT::kName && cur().s == s; }
  void next() {
    if (p_ + 1 < t_.size()) ++p_;
  }
  void expect_op(const char* s) {
    if (!is_op(s)) syntax(cur().line, std::string("expected '") + s + "', got " + describe(cur()));
    next();
  }
  std::string expect_name() {
    if (cur().t != TT::kName) syntax(cur().line, "expected a name, got " + describe(cur()));
    std::string n = cur().s;
    next();
    return n;
  }
  void expect_block_end() {
    if (cur().t != TT::kBlockEnd) syntax(cur().line, "expected end of statement block, got " + describe(cur()));
    next();
  }
  static std::string describe(const Tok& t) {
    switch (t.t) {
      case TT::kText: return "template text";
      case TT::kVarBegin: return "'{{'";
      case TT::kBlockBegin: return "'{%'";
      case TT::kVarEnd: return "'}}'";
      case TT::kBlockEnd: return "'%}'";
      case TT::kName: return "'" + t.s + "'";
      case TT::kString: return "string";
      case TT::kInt:
      case TT::kFloat: return "number";
      case TT::kOp: return "'" + t.s + "'";
      default: return "end of template";
    }
  }

  struct DepthGuard {
    Parser& p;
    explicit DepthGuard(Parser& pp) : p(pp) {
      if (++p.depth_ > p.max_depth_ * 2) syntax(p.cur().line, "template nested too deeply");
    }
    ~DepthGuard() { --p.depth_; }
  };

  // Parses statements until a block whose first name is in `ends` (consumed up to and including
  // that name; `end` receives it). With no `ends`, parses to the end of the template.
  Body parse_body(const std::vector<std::string>& ends, std::string& end) {
    DepthGuard g(*this);
    Body body;
    for (;;) {
      const Tok& t = cur();
      if (t.t == TT::kEof) {
        if (!ends.empty()) syntax(t.line, "unexpected end of template, expected '" + ends[0] + "'");
        return body;
      }
      if (t.t == TT::kText) {
        auto s = std::make_unique<Stmt>();
        s->k = SK::kText;
        s->line = t.line;
        s->text = t.s;
        body.push_back(std::move(s));
        next();
        continue;
      }
      if (t.t == TT::kVarBegin) {
        next();
        auto s = std::make_unique<Stmt>();
        s->k = SK::kPrint;
        s->line = t.line;
        s->expr = parse_tuple(true);
        if (cur().t != TT::kVarEnd) syntax(cur().line, "expected '}}', got " + describe(cur()));
        next();
        body.push_back(std::move(s));
        continue;
      }
      if (t.t != TT::kBlockBegin) syntax(t.line, "unexpected " + describe(t));
      next();
      if (cur().t != TT::kName) syntax(cur().line, "expected statement name, got " + describe(cur()));
      const std::string kw = cur().s;
      for (const auto& e : ends) {
        if (kw == e) {
          next();
          end = kw;
          return body;
        }
      }
      body.push_back(parse_statement());
    }
  }

  StmtP parse_statement() {
    const int line = cur().line;
    const std::string kw = expect_name();
    auto s = std::make_unique<Stmt>();
    s->line = line;
    std::string end;
    if (kw == "if") {
      s->k = SK::kIf;
      ExprP cond = parse_tuple(true);
      expect_block_end();
      for (;;) {
        Body b = parse_body({"elif", "else", "endif"}, end);
        s->branches.emplace_back(std::move(cond), std::move(b));
        if (end == "elif") {
          cond = parse_tuple(true);
          expect_block_end();
          continue;
        }
        if (end == "else") {
          expect_block_end();
          s->else_body = parse_body({"endif"}, end);
        }
        expect_block_end();
        break;
      }
      return s;
    }
    if (kw == "for") {
      s->k = SK::kFor;
      s->target = parse_target(true);
      if (!is_name("in")) syntax(cur().line, "expected 'in' in for loop");
      next();
      s->expr = parse_tuple(false);
      if (is_name("if")) {
        next();
        s->cond = parse_tuple(true);
      }
      if (is_name("recursive")) {
        next();
        s->recursive = true;
      }
      expect_block_end();
      s->body = parse_body({"endfor", "else"}, end);
      if (end == "else") {
        expect_block_end();
        s->else_body = parse_body({"endfor"}, end);
      }
      expect_block_end();
      return s;
    }
    if (kw == "set") {
      s->target = parse_target(true);
      if (is_op("=")) {
        next();
        s->k = SK::kSet;
        s->expr = parse_tuple(true);
        expect_block_end();
        return s;
      }
      s->k = SK::kSetBlock;
      if (is_op("|")) s->cond = parse_filter_chain();
      expect_block_end();
      s->body = parse_body({"endset"}, end);
      expect_block_end();
      return s;
    }
    if (kw == "macro") {
      s->k = SK::kMacro;
      s->name = expect_name();
      parse_signature(*s);
      expect_block_end();
      s->body = parse_body({"endmacro"}, end);
      if (cur().t == TT::kName) next();  // {% endmacro name %}
      expect_block_end();
      return s;
    }
    if (kw == "call") {
      s->k = SK::kCallBlock;
      if (is_op("(")) parse_signature(*s);
      s->expr = parse_expression(true);
      if (s->expr->k != EK::kCall) syntax(line, "expected a call in 'call' block");
      expect_block_end();
      s->body = parse_body({"endcall"}, end);
      expect_block_end();
      return s;
    }
    if (kw == "filter") {
      s->k = SK::kFilterBlock;
      // Same syntax as a filter chain without the leading pipe.
      s->cond = parse_filter_chain(/*leading_pipe=*/false);
      expect_block_end();
      s->body = parse_body({"endfilter"}, end);
      expect_block_end();
      return s;
    }
    if (kw == "break" || kw == "continue") {
      if (loop_depth_hint_ < 0) {
      }
      s->k = kw == "break" ? SK::kBreak : SK::kContinue;
      expect_block_end();
      return s;
    }
    if (kw == "with") {
      s->k = SK::kWith;
      while (cur().t != TT::kBlockEnd) {
        if (!s->assigns.empty()) expect_op(",");
        Target t = parse_target(false);
        expect_op("=");
        s->assigns.emplace_back(std::move(t), parse_expression(true));
      }
      expect_block_end();
      s->body = parse_body({"endwith"}, end);
      expect_block_end();
      return s;
    }
    if (kw == "generation") {  // transformers' AssistantTracker extension: renders its body
      s->k = SK::kScope;
      expect_block_end();
      s->body = parse_body({"endgeneration"}, end);
      expect_block_end();
      return s;
    }
    syntax(line, "unknown or unsupported tag '" + kw + "'");
  }

  void parse_signature(Stmt& s) {
    expect_op("(");
    while (!is_op(")")) {
      if (!s.params.empty()) expect_op(",");
      if (is_op(")")) break;
      s.params.push_back(expect_name());
      if (is_op("=")) {
        next();
        s.defaults.push_back(parse_expression(true));
      } else {
        s.defaults.push_back(nullptr);
      }
    }
    expect_op(")");
  }

  Target parse_target(bool allow_tuple) {
    Target t;
    const bool paren = is_op("(");
    if (paren) next();
    t.names.push_back(expect_name());
    if (!paren && is_op(".")) {
      next();
      t.attr = expect_name();
      return t;
    }
    while ((allow_tuple || paren) && is_op(",")) {
      next();
      if (cur().t != TT::kName) break;
      t.names.push_back(expect_name());
      t.tuple = true;
    }
    if (paren) {
      expect_op(")");
      t.tuple = true;
    }
    return t;
  }

  // `| f(args) | g` applied to the placeholder kBlockVar.
  ExprP parse_filter_chain(bool leading_pipe = true) {
    auto base = std::make_unique<Expr>();
    base->k = EK::kName;
    base->name = kBlockVar;
    base->line = cur().line;
    ExprP e = std::move(base);
    if (!leading_pipe) e = parse_filter(std::move(e));
    while (is_op("|")) {
      next();
      e = parse_filter(std::move(e));
    }
    return e;
  }

  // Children go through add(): the tree height stays bounded, so evaluating, checking and
  // destroying a tree can never overflow the stack (left-associative chains like a+b+c+… and
  // filter chains are built iteratively, not by parser recursion).
  void add(Expr& e, ExprP c) {
    if (c) {
      e.height = std::max(e.height, c->height + 1);
      if (size_t(e.height) > max_depth_ * 4) syntax(e.line, "expression nested too deeply");
    }
    e.args.push_back(std::move(c));
  }
  void add_kw(Expr& e, std::string k, ExprP c) {
    e.height = std::max(e.height, c->height + 1);
    if (size_t(e.height) > max_depth_ * 4) syntax(e.line, "expression nested too deeply");
    e.kwargs.emplace_back(std::move(k), std::move(c));
  }

  ExprP mk(EK k, int line) {
    auto e = std::make_unique<Expr>();
    e->k = k;
    e->line = line;
    return e;
  }

  // parse_tuple: expression or bare tuple `a, b`.
  ExprP parse_tuple(bool with_condexpr) {
    DepthGuard g(*this);
    const int line = cur().line;
    ExprP first = parse_expression(with_condexpr);
    if (!is_op(",")) return first;
    auto t = mk(EK::kTuple, line);
    add(*t, std::move(first));
    while (is_op(",")) {
      next();
      if (tuple_end()) break;
      add(*t, parse_expression(with_condexpr));
    }
    return t;
  }
  bool tuple_end() const {
    return cur().t == TT::kVarEnd || cur().t == TT::kBlockEnd || is_op(")") || is_name("in") ||
           is_name("if") || is_name("recursive");
  }

  ExprP parse_expression(bool with_condexpr) {
    DepthGuard g(*this);
    return with_condexpr ? parse_condexpr() : parse_or();
  }

  ExprP parse_condexpr() {
    const int line = cur().line;
    ExprP e = parse_or();
    while (is_name("if")) {
      next();
      auto c = mk(EK::kCond, line);
      ExprP cond = parse_or();
      ExprP other;
      if (is_name("else")) {
        next();
        other = parse_condexpr();
      }
      add(*c, std::move(e));
      add(*c, std::move(cond));
      add(*c, std::move(other));
      e = std::move(c);
    }
    return e;
  }

  ExprP parse_or() {
    ExprP l = parse_and();
    while (is_name("or")) {
      auto e = mk(EK::kOr, cur().line);
      next();
      add(*e, std::move(l));
      add(*e, parse_and());
      l = std::move(e);
    }
    return l;
  }
  ExprP parse_and() {
    ExprP l = parse_not();
    while (is_name("and")) {
      auto e = mk(EK::kAnd, cur().line);
      next();
      add(*e, std::move(l));
      add(*e, parse_not());
      l = std::move(e);
    }
    return l;
  }
  ExprP parse_not() {
    DepthGuard g(*this);
    if (is_name("not")) {
      auto e = mk(EK::kNot, cur().line);
      next();
      add(*e, parse_not());
      return e;
    }
    return parse_compare();
  }
  ExprP parse_compare() {
    const int line = cur().line;
    ExprP first = parse_math1();
    ExprP cmp;
    for (;;) {
      std::string op;
      if (cur().t == TT::kOp && (cur().s == "==" || cur().s == "!=" || cur().s == "<" || cur().s == ">" ||
                                 cur().s == "<=" || cur().s == ">=")) {
        op = cur().s;
        next();
      } else if (is_name("in")) {
        op = "in";
        next();
      } else if (is_name("not") && peek().t == TT::kName && peek().s == "in") {
        op = "notin";
        next();
        next();
      } else {
        break;
      }
      if (!cmp) {
        cmp = mk(EK::kCmp, line);
        add(*cmp, std::move(first));
      }
      cmp->ops.push_back(op);
      add(*cmp, parse_math1());
    }
    return cmp ? std::move(cmp) : std::move(first);
  }
  ExprP bin(const std::string& op, ExprP l, ExprP r, int line) {
    auto e = mk(EK::kBin, line);
    e->name = op;
    add(*e, std::move(l));
    add(*e, std::move(r));
    return e;
  }
  ExprP parse_math1() {
    ExprP l = parse_concat();
    while (is_op("+") || is_op("-")) {
      const std::string op = cur().s;
      const int line = cur().line;
      next();
      l = bin(op, std::move(l), parse_concat(), line);
    }
    return l;
  }
  ExprP parse_concat() {
    ExprP l = parse_math2();
    while (is_op("~")) {
      const int line = cur().line;
      next();
      l = bin("~", std::move(l), parse_math2(), line);
    }
    return l;
  }
  ExprP parse_math2() {
    ExprP l = parse_pow();
    while (is_op("*") || is_op("/") || is_op("//") || is_op("%")) {
      const std::string op = cur().s;
      const int line = cur().line;
      next();
      l = bin(op, std::move(l), parse_pow(), line);
    }
    return l;
  }
  ExprP parse_pow() {
    ExprP l = parse_unary(true);
    while (is_op("**")) {
      const int line = cur().line;
      next();
      l = bin("**", std::move(l), parse_unary(true), line);
    }
    return l;
  }
  ExprP parse_unary(bool with_filter) {
    DepthGuard g(*this);
    const int line = cur().line;
    ExprP node;
    if (is_op("-") || is_op("+")) {
      const bool neg = cur().s == "-";
      next();
      node = mk(neg ? EK::kNeg : EK::kPos, line);
      add(*node, parse_unary(false));
    } else {
      node = parse_primary();
    }
    node = parse_postfix(std::move(node));
    if (with_filter) node = parse_filter_expr(std::move(node));
    return node;
  }

  ExprP parse_primary() {
    DepthGuard g(*this);
    const Tok& t = cur();
    const int line = t.line;
    if (t.t == TT::kName) {
      const std::string n = t.s;
      next();
      if (n == "true" || n == "True") return konst(Value(true), line);
      if (n == "false" || n == "False") return konst(Value(false), line);
      if (n == "none" || n == "None") return konst(Value::none(), line);
      auto e = mk(EK::kName, line);
      e->name = n;
      return e;
    }
    if (t.t == TT::kString) {
      std::string s = t.s;
      next();
      while (cur().t == TT::kString) {  // adjacent literals concatenate
        s += cur().s;
        next();
      }
      return konst(Value(std::move(s)), line);
    }
    if (t.t == TT::kInt || t.t == TT::kFloat) {
      Value v = t.num;
      next();
      return konst(std::move(v), line);
    }
    if (is_op("(")) {
      next();
      if (is_op(")")) {
        next();
        return mk(EK::kTuple, line);
      }
      ExprP e = parse_expression(true);
      if (is_op(",")) {
        auto tup = mk(EK::kTuple, line);
        add(*tup, std::move(e));
        while (is_op(",")) {
          next();
          if (is_op(")")) break;
          add(*tup, parse_expression(true));
        }
        e = std::move(tup);
      }
      expect_op(")");
      return e;
    }
    if (is_op("[")) {
      next();
      auto e = mk(EK::kList, line);
      while (!is_op("]")) {
        if (!e->args.empty()) {
          expect_op(",");
          if (is_op("]")) break;
        }
        add(*e, parse_expression(true));
      }
      expect_op("]");
      return e;
    }
    if (is_op("{")) {
      next();
      auto e = mk(EK::kDict, line);
      while (!is_op("}")) {
        if (!e->args.empty()) {
          expect_op(",");
          if (is_op("}")) break;
        }
        add(*e, parse_expression(true));
        expect_op(":");
        add(*e, parse_expression(true));
      }
      expect_op("}");
      return e;
    }
    syntax(line, "unexpected " + describe(t));
  }

  ExprP konst(Value v, int line) {
    auto e = mk(EK::kConst, line);
    e->val = std::move(v);
    return e;
  }

  ExprP parse_postfix(ExprP node) {
    for (;;) {
      DepthGuard g(*this);
      const int line = cur().line;
      if (is_op(".")) {
        next();
        if (cur().t == TT::kName) {
          auto e = mk(EK::kAttr, line);
          e->name = cur().s;
          next();
          add(*e, std::move(node));
          node = std::move(e);
        } else if (cur().t == TT::kInt) {
          auto e = mk(EK::kItem, line);
          add(*e, std::move(node));
          add(*e, konst(cur().num, line));
          next();
          node = std::move(e);
        } else {
          syntax(line, "expected name after '.'");
        }
      } else if (is_op("[")) {
        next();
        node = parse_subscript(std::move(node), line);
      } else if (is_op("(")) {
        node = parse_call(std::move(node));
      } else {
        return node;
      }
    }
  }

  ExprP parse_subscript(ExprP obj, int line) {
    // After '['. Either an index expression, a slice a:b:c, or a tuple index.
    ExprP parts[3];
    bool is_slice = false;
    int idx = 0;
    if (!is_op(":")) parts[0] = parse_expression(true);
    while (is_op(":") && idx < 2) {
      is_slice = true;
      next();
      ++idx;
      if (!is_op(":") && !is_op("]")) parts[idx] = parse_expression(true);
    }
    expect_op("]");
    if (!is_slice) {
      auto e = mk(EK::kItem, line);
      add(*e, std::move(obj));
      add(*e, std::move(parts[0]));
      return e;
    }
    auto e = mk(EK::kSlice, line);
    add(*e, std::move(obj));
    for (auto& p : parts) add(*e, std::move(p));
    return e;
  }

  void parse_call_args(Expr& e) {
    expect_op("(");
    bool first = true;
    while (!is_op(")")) {
      if (!first) {
        expect_op(",");
        if (is_op(")")) break;
      }
      first = false;
      if (cur().t == TT::kName && peek().t == TT::kOp && peek().s == "=") {
        std::string k = cur().s;
        next();
        next();
        add_kw(e, std::move(k), parse_expression(true));
      } else {
        if (!e.kwargs.empty()) syntax(cur().line, "positional argument after keyword argument");
        add(e, parse_expression(true));
      }
    }
    expect_op(")");
  }

  ExprP parse_call(ExprP callee) {
    auto e = mk(EK::kCall, cur().line);
    add(*e, std::move(callee));
    parse_call_args(*e);
    return e;
  }

  ExprP parse_filter(ExprP value) {
    const int line = cur().line;
    std::string name = expect_name();
    while (is_op(".")) {
      next();
      name += "." + expect_name();
    }
    auto e = mk(EK::kFilter, line);
    e->name = name;
    add(*e, std::move(value));
    if (is_op("(")) parse_call_args(*e);
    return e;
  }

  ExprP parse_filter_expr(ExprP node) {
    for (;;) {
      DepthGuard g(*this);
      if (is_op("|")) {
        next();
        node = parse_filter(std::move(node));
      } else if (is_name("is")) {
        const int line = cur().line;
        next();
        auto e = mk(EK::kTest, line);
        if (is_name("not")) {
          next();
          e->negate = true;
        }
        std::string name = expect_name();
        while (is_op(".")) {
          next();
          name += "." + expect_name();
        }
        e->name = name;
        add(*e, std::move(node));
        if (is_op("(")) {
          parse_call_args(*e);
        } else if ((cur().t == TT::kName || cur().t == TT::kString || cur().t == TT::kInt ||
                    cur().t == TT::kFloat || is_op("(") || is_op("[") || is_op("{")) &&
                   !(is_name("else") || is_name("or") || is_name("and"))) {
          ExprP arg = parse_primary();
          arg = parse_postfix(std::move(arg));
          add(*e, std::move(arg));
        }
        node = std::move(e);
      } else if (is_op("(")) {
        node = parse_call(std::move(node));
      } else {
        return node;
      }
    }
  }

  std::vector<Tok> t_;
  size_t p_ = 0;
  size_t max_depth_;
  size_t depth_ = 0;
  int loop_depth_hint_ = 0;
};

}  // namespace

std::shared_ptr<Program> parse_template(const std::string& source, size_t max_depth) {
  Lexer lx(source);
  Parser ps(lx.run(), max_depth);
  return ps.run();
}

}  // namespace oxi::jinja
