// Evaluator of the Jinja interpreter: statements, expressions, filters, tests, methods, globals.
// Semantics follow Python jinja2 (the engine transformers renders chat templates with).
#include <algorithm>
#include <chrono>
#include <cmath>
#include <ctime>
#include <map>

#include "chat/jinja.h"
#include "chat/jinja_ast.h"
#include "chat/jinja_eval.h"
#include "core/error.h"

namespace oxi::jinja {

[[noreturn]] void rt_error(const std::string& msg) {
  throw_error(ErrorCode::kInvalidArgument, "chat template: " + msg);
}

namespace {

// a * b, saturating at SIZE_MAX (a size that then fails every limit check).
size_t mul_sat(size_t a, uint64_t b) {
  size_t r = 0;
  return __builtin_mul_overflow(a, b, &r) ? SIZE_MAX : r;
}

// ---------------------------------------------------------------------------------------------
// String helpers (Python str semantics over UTF-8).

std::vector<uint32_t> to_cps(const std::string& s) {
  std::vector<uint32_t> cps;
  cps.reserve(s.size());
  size_t i = 0;
  while (i < s.size()) cps.push_back(utf8_next(s, i));
  return cps;
}
std::string from_cps(const std::vector<uint32_t>& cps, size_t b, size_t e) {
  std::string out;
  for (size_t k = b; k < e; ++k) utf8_append(out, cps[k]);
  return out;
}
bool is_ascii(const std::string& s) {
  for (char c : s) {
    if (static_cast<unsigned char>(c) >= 0x80) return false;
  }
  return true;
}
size_t py_len(const std::string& s) {
  if (is_ascii(s)) return s.size();
  size_t n = 0, i = 0;
  while (i < s.size()) {
    utf8_next(s, i);
    ++n;
  }
  return n;
}

std::string strip_chars(const std::string& s, const Value* chars, bool left, bool right) {
  auto cps = to_cps(s);
  std::vector<uint32_t> set;
  const bool ws = !chars || chars->is_none() || chars->is_undefined();
  if (!ws) {
    if (!chars->is_string()) rt_error("strip arg must be None or str");
    set = to_cps(chars->s());
  }
  auto strip_it = [&](uint32_t c) {
    return ws ? is_py_space_cp(c) : std::find(set.begin(), set.end(), c) != set.end();
  };
  size_t b = 0, e = cps.size();
  if (left) {
    while (b < e && strip_it(cps[b])) ++b;
  }
  if (right) {
    while (e > b && strip_it(cps[e - 1])) --e;
  }
  return from_cps(cps, b, e);
}

std::string ascii_upper(std::string s) {
  for (auto& c : s) {
    if (c >= 'a' && c <= 'z') c = char(c - 32);
  }
  return s;
}
std::string ascii_lower(std::string s) {
  for (auto& c : s) {
    if (c >= 'A' && c <= 'Z') c = char(c + 32);
  }
  return s;
}
bool is_alpha_cp(uint32_t c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c >= 0xC0; }

std::string py_title(const std::string& s) {
  std::string out;
  bool prev_cased = false;
  for (char c : s) {
    const bool letter = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
    if (letter) {
      out += prev_cased ? ascii_lower(std::string(1, c)) : ascii_upper(std::string(1, c));
    } else {
      out += c;
    }
    prev_cased = letter;
  }
  return out;
}

std::string py_capitalize(const std::string& s) {
  if (s.empty()) return s;
  return ascii_upper(s.substr(0, 1)) + ascii_lower(s.substr(1));
}

Value py_split(const std::string& s, const Value* sep, int64_t maxsplit, bool from_right) {
  std::vector<Value> parts;
  if (!sep || sep->is_none()) {
    // Whitespace split: runs of whitespace, no empty strings.
    auto cps = to_cps(s);
    std::vector<std::pair<size_t, size_t>> words;
    size_t i = 0;
    while (i < cps.size()) {
      while (i < cps.size() && is_py_space_cp(cps[i])) ++i;
      if (i >= cps.size()) break;
      size_t j = i;
      while (j < cps.size() && !is_py_space_cp(cps[j])) ++j;
      words.emplace_back(i, j);
      i = j;
    }
    if (maxsplit >= 0 && int64_t(words.size()) > maxsplit + 1) {
      if (!from_right) {
        for (int64_t k = 0; k < maxsplit; ++k) parts.emplace_back(from_cps(cps, words[k].first, words[k].second));
        size_t e = cps.size();
        while (e > 0 && is_py_space_cp(cps[e - 1])) --e;
        parts.emplace_back(from_cps(cps, words[maxsplit].first, e));
      } else {
        const size_t first_kept = words.size() - size_t(maxsplit);
        size_t b = 0;
        while (b < cps.size() && is_py_space_cp(cps[b])) ++b;
        parts.emplace_back(from_cps(cps, b, words[first_kept - 1].second));
        for (size_t k = first_kept; k < words.size(); ++k) parts.emplace_back(from_cps(cps, words[k].first, words[k].second));
      }
    } else {
      for (auto& w : words) parts.emplace_back(from_cps(cps, w.first, w.second));
    }
    return Value::list(std::move(parts));
  }
  if (!sep->is_string()) rt_error("must be str or None, not " + type_name(*sep));
  const std::string& d = sep->s();
  if (d.empty()) rt_error("empty separator");
  std::vector<std::string> out;
  if (!from_right) {
    size_t pos = 0;
    int64_t n = 0;
    for (;;) {
      if (maxsplit >= 0 && n >= maxsplit) break;
      const size_t f = s.find(d, pos);
      if (f == std::string::npos) break;
      out.push_back(s.substr(pos, f - pos));
      pos = f + d.size();
      ++n;
    }
    out.push_back(s.substr(pos));
  } else {
    size_t end = s.size();
    int64_t n = 0;
    std::vector<std::string> rev;
    for (;;) {
      if (maxsplit >= 0 && n >= maxsplit) break;
      if (end < d.size()) break;
      const size_t f = s.rfind(d, end - d.size());
      if (f == std::string::npos) break;
      rev.push_back(s.substr(f + d.size(), end - f - d.size()));
      end = f;
      ++n;
    }
    rev.push_back(s.substr(0, end));
    out.assign(rev.rbegin(), rev.rend());
  }
  for (auto& p : out) parts.emplace_back(std::move(p));
  return Value::list(std::move(parts));
}

std::string py_replace(const std::string& s, const std::string& old, const std::string& rep, int64_t count,
                       size_t max_bytes) {
  std::string out;
  if (old.empty()) {
    auto cps = to_cps(s);
    int64_t n = 0;
    for (size_t k = 0; k <= cps.size(); ++k) {
      if (count < 0 || n < count) {
        out += rep;
        ++n;
      }
      if (k < cps.size()) utf8_append(out, cps[k]);
      if (out.size() > max_bytes) rt_error("string too long");
    }
    return out;
  }
  size_t pos = 0;
  int64_t n = 0;
  for (;;) {
    if (count >= 0 && n >= count) break;
    const size_t f = s.find(old, pos);
    if (f == std::string::npos) break;
    out.append(s, pos, f - pos);
    out += rep;
    if (out.size() > max_bytes) rt_error("string too long");
    pos = f + old.size();
    ++n;
  }
  out.append(s, pos, std::string::npos);
  return out;
}

int64_t to_int_arg(const Value& v, const char* what) {
  if (v.is_int()) return v.i();
  if (v.is_bool()) return v.b() ? 1 : 0;
  rt_error(std::string(what) + ": expected an integer, got " + type_name(v));
}

// Python slice index normalisation.
void slice_indices(int64_t len, const Value* a, const Value* b, const Value* c, int64_t& start, int64_t& stop,
                   int64_t& step) {
  step = 1;
  if (c && !c->is_none()) step = to_int_arg(*c, "slice step");
  if (step == 0) rt_error("slice step cannot be zero");
  auto norm = [&](const Value* v, int64_t def, bool is_start) -> int64_t {
    if (!v || v->is_none()) return def;
    int64_t x = to_int_arg(*v, "slice index");
    if (x < 0) {
      x += len;
      if (x < 0) x = step < 0 ? -1 : 0;
    } else if (x >= len) {
      x = step < 0 ? len - 1 : len;
    }
    (void)is_start;
    return x;
  };
  if (step > 0) {
    start = norm(a, 0, true);
    stop = norm(b, len, false);
  } else {
    start = norm(a, len - 1, true);
    stop = norm(b, -1, false);
  }
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// Interp

Interp::Interp(const JinjaLimits& limits) : limits_(limits) {}

Interp::~Interp() {
  for (auto& d : namespaces_) {
    d->items.clear();
    d->index.clear();
  }
}

void Interp::step() {
  if (++steps_ > limits_.max_steps) rt_error("template ran too long (step limit reached)");
}

void Interp::check_size(size_t n) const {
  if (n > limits_.max_output_bytes) rt_error("output or string too long");
}

void Interp::charge(size_t n) {
  check_size(n);
  allocated_ += n;
  if (allocated_ > limits_.max_alloc_bytes) rt_error("template uses too much memory");
}

size_t Interp::copy_bytes(const ListData& l) {
  size_t n = 0;
  for (const Value& v : l.items) n += sizeof(Value) + (v.is_string() ? v.s().size() : 0);
  return n;
}

Interp::DepthGuard::DepthGuard(Interp& in) : in_(in) {
  if (++in_.depth_ > in_.limits_.max_depth) rt_error("recursion too deep");
}
Interp::DepthGuard::~DepthGuard() { --in_.depth_; }

Value Interp::lookup(const std::string& name, Frame& f) {
  for (Frame* p = &f; p; p = p->parent) {
    auto it = p->vars.find(name);
    if (it != p->vars.end()) return it->second;
  }
  auto g = globals().find(name);
  if (g != globals().end()) return g->second;
  return Value();
}

void Interp::assign(const Target& t, const Value& v, Frame& f) {
  if (!t.attr.empty()) {
    Value obj = lookup(t.names[0], f);
    if (!obj.is_dict() || obj.d()->kind != DictData::Kind::kNamespace) {
      rt_error("cannot assign attribute on non-namespace object");
    }
    obj.d()->set(t.attr, v);
    return;
  }
  if (!t.tuple) {
    f.vars[t.names[0]] = v;
    return;
  }
  std::vector<Value> items = iterate(v);
  if (items.size() != t.names.size()) {
    rt_error("cannot unpack " + std::to_string(items.size()) + " values into " + std::to_string(t.names.size()));
  }
  for (size_t k = 0; k < items.size(); ++k) f.vars[t.names[k]] = items[k];
}

std::vector<Value> Interp::iterate(const Value& v) {
  std::vector<Value> out;
  if (v.is_undefined()) return out;
  if (v.is_list()) return v.l()->items;
  if (v.is_dict()) {
    if (v.d()->kind != DictData::Kind::kDict) rt_error("'" + type_name(v) + "' object is not iterable");
    for (auto& kv : v.d()->items) out.emplace_back(kv.first);
    return out;
  }
  if (v.is_string()) {
    const std::string& s = v.s();
    size_t i = 0;
    while (i < s.size()) {
      std::string ch;
      utf8_append(ch, utf8_next(s, i));
      out.emplace_back(std::move(ch));
    }
    return out;
  }
  rt_error("'" + type_name(v) + "' object is not iterable");
}

// --- statements -------------------------------------------------------------------------------

Interp::Flow Interp::exec(const Body& body, Frame& f, std::string& out) {
  DepthGuard g(*this);  // statement nesting counts too (bounds the C++ stack in recursive macros)
  for (const auto& s : body) {
    const Flow fl = exec_stmt(*s, f, out);
    if (fl != Flow::kNormal) return fl;
  }
  return Flow::kNormal;
}

void Interp::emit(std::string& out, const std::string& s) {
  out += s;
  check_size(out.size());
}

Interp::Flow Interp::exec_stmt(const Stmt& s, Frame& f, std::string& out) {
  step();
  cur_line_ = s.line;
  switch (s.k) {
    case SK::kText: emit(out, s.text); return Flow::kNormal;
    case SK::kPrint: emit(out, py_str(eval(*s.expr, f))); return Flow::kNormal;
    case SK::kIf:
      for (const auto& [cond, body] : s.branches) {
        if (eval(*cond, f).truthy()) return exec(body, f, out);
      }
      return exec(s.else_body, f, out);
    case SK::kFor: return exec_for(s, f, out);
    case SK::kSet: assign(s.target, eval(*s.expr, f), f); return Flow::kNormal;
    case SK::kSetBlock: {
      std::string buf;
      Frame inner(&f);
      exec(s.body, inner, buf);
      Value v(std::move(buf));
      if (s.cond) v = apply_block_filter(*s.cond, v, f);
      assign(s.target, v, f);
      return Flow::kNormal;
    }
    case SK::kMacro: f.vars[s.name] = make_macro(s, f); return Flow::kNormal;
    case SK::kCallBlock: {
      Value caller = make_caller(s, f);
      const Expr& ce = *s.expr;
      Value callee = eval(*ce.args[0], f);
      CallArgs a;
      for (size_t k = 1; k < ce.args.size(); ++k) a.pos.push_back(eval(*ce.args[k], f));
      for (auto& [k, v] : ce.kwargs) a.kw.emplace_back(k, eval(*v, f));
      a.kw.emplace_back("caller", caller);
      Value r = call(callee, a);
      *caller.fn()->alive = false;
      emit(out, py_str(r));
      return Flow::kNormal;
    }
    case SK::kFilterBlock: {
      std::string buf;
      Frame inner(&f);
      exec(s.body, inner, buf);
      emit(out, py_str(apply_block_filter(*s.cond, Value(std::move(buf)), f)));
      return Flow::kNormal;
    }
    case SK::kBreak:
      if (loop_depth_ == 0) rt_error("'break' outside of a loop");
      return Flow::kBreak;
    case SK::kContinue:
      if (loop_depth_ == 0) rt_error("'continue' outside of a loop");
      return Flow::kContinue;
    case SK::kWith: {
      Frame inner(&f);
      for (const auto& [t, e] : s.assigns) assign(t, eval(*e, f), inner);
      return exec(s.body, inner, out);
    }
    case SK::kScope: return exec(s.body, f, out);
  }
  return Flow::kNormal;
}

Value Interp::apply_block_filter(const Expr& chain, const Value& v, Frame& f) {
  Frame tmp(&f);
  tmp.vars[kBlockVar] = v;
  return eval(chain, tmp);
}

Interp::Flow Interp::exec_for(const Stmt& s, Frame& f, std::string& out) {
  if (s.recursive) rt_error("recursive for loops are not supported");
  std::vector<Value> items = iterate(eval(*s.expr, f));
  if (s.cond) {
    std::vector<Value> kept;
    for (auto& it : items) {
      step();
      Frame tmp(&f);
      assign(s.target, it, tmp);
      if (eval(*s.cond, tmp).truthy()) kept.push_back(it);
    }
    items = std::move(kept);
  }
  if (items.empty()) return exec(s.else_body, f, out);
  const size_t n = items.size();
  auto loop = std::make_shared<DictData>();
  loop->kind = DictData::Kind::kLoop;
  Value loopv(loop);
  ++loop_depth_;
  struct Dec {
    int& d;
    ~Dec() { --d; }
  } dec{loop_depth_};
  // The loop object is filled once and updated in place (entries by position, see order below).
  static const char* const kKeys[] = {"index0", "index", "revindex0", "revindex", "first", "last", "length",
                                      "depth", "depth0", "previtem", "nextitem", "cycle"};
  for (const char* key : kKeys) loop->set(key, Value());
  auto pos = std::make_shared<int64_t>(0);
  {
    auto fn = std::make_shared<Function>();
    fn->name = "cycle";
    fn->call = [pos](Interp&, CallArgs& a) -> Value {
      if (a.pos.empty()) rt_error("no items for cycling given");
      return a.pos[size_t(*pos % int64_t(a.pos.size()))];
    };
    loop->items[11].second = Value(fn);
  }
  loop->items[6].second = Value(int64_t(n));
  loop->items[7].second = Value(int64_t(1));
  loop->items[8].second = Value(int64_t(0));
  for (size_t k = 0; k < n; ++k) {
    step();
    *pos = int64_t(k);
    auto& it = loop->items;
    it[0].second = Value(int64_t(k));
    it[1].second = Value(int64_t(k + 1));
    it[2].second = Value(int64_t(n - k - 1));
    it[3].second = Value(int64_t(n - k));
    it[4].second = Value(k == 0);
    it[5].second = Value(k + 1 == n);
    it[9].second = k > 0 ? items[k - 1] : Value();
    it[10].second = k + 1 < n ? items[k + 1] : Value();
    Frame inner(&f);
    inner.vars["loop"] = loopv;
    assign(s.target, items[k], inner);
    const Flow fl = exec(s.body, inner, out);
    if (fl == Flow::kBreak) break;
  }
  return Flow::kNormal;
}

Value Interp::make_macro(const Stmt& s, Frame& def) {
  auto fn = std::make_shared<Function>();
  fn->name = s.name;
  fn->alive = def.alive;
  const Stmt* sp = &s;
  Frame* defp = &def;
  std::shared_ptr<bool> alive = def.alive;
  fn->call = [sp, defp, alive](Interp& in, CallArgs& a) -> Value {
    if (!*alive) rt_error("macro '" + sp->name + "' called outside of its scope");
    return in.call_macro(*sp, *defp, a, Value());
  };
  return Value(fn);
}

Value Interp::make_caller(const Stmt& s, Frame& site) {
  auto fn = std::make_shared<Function>();
  fn->name = "caller";
  fn->alive = std::make_shared<bool>(true);
  const Stmt* sp = &s;
  Frame* sitep = &site;
  std::shared_ptr<bool> alive = fn->alive;
  fn->call = [sp, sitep, alive](Interp& in, CallArgs& a) -> Value {
    if (!*alive) rt_error("caller called outside of its call block");
    return in.call_macro(*sp, *sitep, a, Value());
  };
  return Value(fn);
}

Value Interp::call_macro(const Stmt& m, Frame& parent, CallArgs& a, const Value&) {
  DepthGuard g(*this);
  step();
  Frame fr(&parent);
  const size_t np = m.params.size();
  std::vector<Value> extra;
  for (size_t k = 0; k < a.pos.size(); ++k) {
    if (k < np) fr.vars[m.params[k]] = a.pos[k];
    else extra.push_back(a.pos[k]);
  }
  auto kwargs = Value::dict();
  for (auto& [k, v] : a.kw) {
    auto it = std::find(m.params.begin(), m.params.end(), k);
    if (it != m.params.end()) {
      const size_t idx = size_t(it - m.params.begin());
      if (idx < a.pos.size()) rt_error("macro '" + m.name + "' got multiple values for argument '" + k + "'");
      fr.vars[k] = v;
    } else if (k == "caller") {
      fr.vars["caller"] = v;
    } else {
      kwargs.d()->set(k, v);
    }
  }
  for (size_t k = 0; k < np; ++k) {
    if (fr.vars.count(m.params[k])) continue;
    if (m.defaults[k]) fr.vars[m.params[k]] = eval(*m.defaults[k], fr);
    else fr.vars[m.params[k]] = Value();  // jinja2: missing macro args are undefined
  }
  fr.vars["varargs"] = Value::list(std::move(extra), true);
  fr.vars["kwargs"] = kwargs;
  std::string out;
  const int saved_loop = loop_depth_;
  loop_depth_ = 0;
  exec(m.body, fr, out);
  loop_depth_ = saved_loop;
  return Value(std::move(out));
}

// --- expressions ------------------------------------------------------------------------------

Value Interp::eval(const Expr& e, Frame& f) {
  DepthGuard g(*this);
  switch (e.k) {
    case EK::kConst: return e.val;
    case EK::kName: return lookup(e.name, f);
    case EK::kAttr: {
      Value obj = eval(*e.args[0], f);
      return get_attr(obj, e.name);
    }
    case EK::kItem: {
      Value obj = eval(*e.args[0], f);
      Value key = eval(*e.args[1], f);
      return get_item(obj, key);
    }
    case EK::kSlice: {
      Value obj = eval(*e.args[0], f);
      Value a, b, c;
      if (e.args[1]) a = eval(*e.args[1], f);
      if (e.args[2]) b = eval(*e.args[2], f);
      if (e.args[3]) c = eval(*e.args[3], f);
      return slice(obj, e.args[1] ? &a : nullptr, e.args[2] ? &b : nullptr, e.args[3] ? &c : nullptr);
    }
    case EK::kCall: {
      Value callee = eval(*e.args[0], f);
      CallArgs a;
      for (size_t k = 1; k < e.args.size(); ++k) a.pos.push_back(eval(*e.args[k], f));
      for (auto& [k, v] : e.kwargs) a.kw.emplace_back(k, eval(*v, f));
      return call(callee, a);
    }
    case EK::kFilter: {
      Value v = eval(*e.args[0], f);
      CallArgs a;
      for (size_t k = 1; k < e.args.size(); ++k) a.pos.push_back(eval(*e.args[k], f));
      for (auto& [k, v2] : e.kwargs) a.kw.emplace_back(k, eval(*v2, f));
      return apply_filter(e.name, v, a);
    }
    case EK::kTest: {
      Value v = eval(*e.args[0], f);
      CallArgs a;
      for (size_t k = 1; k < e.args.size(); ++k) a.pos.push_back(eval(*e.args[k], f));
      for (auto& [k, v2] : e.kwargs) a.kw.emplace_back(k, eval(*v2, f));
      const bool r = apply_test(e.name, v, a);
      return Value(e.negate ? !r : r);
    }
    case EK::kNeg:
    case EK::kPos: {
      Value v = eval(*e.args[0], f);
      if (v.is_undefined()) rt_error("undefined value in unary operation");
      if (e.k == EK::kPos) {
        if (!v.is_number()) rt_error("bad operand type for unary +: '" + type_name(v) + "'");
        return v.is_bool() ? Value(int64_t(v.b())) : v;
      }
      if (v.is_float()) return Value(-v.f());
      if (v.is_int()) {
        if (v.i() == INT64_MIN) rt_error("integer overflow");
        return Value(-v.i());
      }
      if (v.is_bool()) return Value(-int64_t(v.b()));
      rt_error("bad operand type for unary -: '" + type_name(v) + "'");
    }
    case EK::kNot: return Value(!eval(*e.args[0], f).truthy());
    case EK::kAnd: {
      Value l = eval(*e.args[0], f);
      if (!l.truthy()) return l;
      return eval(*e.args[1], f);
    }
    case EK::kOr: {
      Value l = eval(*e.args[0], f);
      if (l.truthy()) return l;
      return eval(*e.args[1], f);
    }
    case EK::kBin: return binop(e.name, eval(*e.args[0], f), eval(*e.args[1], f));
    case EK::kCmp: {
      Value l = eval(*e.args[0], f);
      for (size_t k = 0; k < e.ops.size(); ++k) {
        Value r = eval(*e.args[k + 1], f);
        if (!compare(e.ops[k], l, r)) return Value(false);
        l = std::move(r);
      }
      return Value(true);
    }
    case EK::kCond: {
      if (eval(*e.args[1], f).truthy()) return eval(*e.args[0], f);
      if (e.args[2]) return eval(*e.args[2], f);
      return Value();
    }
    case EK::kList:
    case EK::kTuple: {
      std::vector<Value> items;
      for (auto& a : e.args) items.push_back(eval(*a, f));
      return Value::list(std::move(items), e.k == EK::kTuple);
    }
    case EK::kDict: {
      Value d = Value::dict();
      for (size_t k = 0; k + 1 < e.args.size(); k += 2) {
        Value key = eval(*e.args[k], f);
        if (!key.is_string()) rt_error("only string keys are supported in dict literals");
        d.d()->set(key.s(), eval(*e.args[k + 1], f));
      }
      return d;
    }
  }
  return Value();
}

Value Interp::call(const Value& callee, CallArgs& a) {
  if (callee.is_undefined()) rt_error("call of an undefined value");
  if (!callee.is_func()) rt_error("'" + type_name(callee) + "' object is not callable");
  DepthGuard g(*this);
  step();
  return callee.fn()->call(*this, a);
}

Value Interp::slice(const Value& obj, const Value* a, const Value* b, const Value* c) {
  if (obj.is_undefined()) rt_error("slice of an undefined value");
  int64_t start, stop, st;
  if (obj.is_list()) {
    const auto& items = obj.l()->items;
    slice_indices(int64_t(items.size()), a, b, c, start, stop, st);
    std::vector<Value> out;
    for (int64_t k = start; st > 0 ? k < stop : k > stop; k += st) out.push_back(items[size_t(k)]);
    return Value::list(std::move(out), obj.l()->tuple);
  }
  if (obj.is_string()) {
    const std::string& s = obj.s();
    if (is_ascii(s)) {
      slice_indices(int64_t(s.size()), a, b, c, start, stop, st);
      std::string out;
      for (int64_t k = start; st > 0 ? k < stop : k > stop; k += st) out += s[size_t(k)];
      return Value(std::move(out));
    }
    auto cps = to_cps(s);
    slice_indices(int64_t(cps.size()), a, b, c, start, stop, st);
    std::string out;
    for (int64_t k = start; st > 0 ? k < stop : k > stop; k += st) utf8_append(out, cps[size_t(k)]);
    return Value(std::move(out));
  }
  rt_error("'" + type_name(obj) + "' object is not subscriptable");
}

Value Interp::get_item(const Value& obj, const Value& key) {
  if (obj.is_undefined()) rt_error("cannot index an undefined value");
  if (obj.is_dict()) {
    if (key.is_string()) {
      if (const Value* v = obj.d()->find(key.s())) return *v;
      if (obj.d()->kind != DictData::Kind::kDict) return Value();
      return method(obj, key.s());
    }
    return Value();
  }
  if (obj.is_list() || obj.is_string()) {
    if (key.is_int() || key.is_bool()) {
      int64_t idx = key.is_bool() ? int64_t(key.b()) : key.i();
      if (obj.is_list()) {
        const auto& items = obj.l()->items;
        if (idx < 0) idx += int64_t(items.size());
        if (idx < 0 || idx >= int64_t(items.size())) return Value();
        return items[size_t(idx)];
      }
      const std::string& s = obj.s();
      if (is_ascii(s)) {
        if (idx < 0) idx += int64_t(s.size());
        if (idx < 0 || idx >= int64_t(s.size())) return Value();
        return Value(std::string(1, s[size_t(idx)]));
      }
      auto cps = to_cps(s);
      if (idx < 0) idx += int64_t(cps.size());
      if (idx < 0 || idx >= int64_t(cps.size())) return Value();
      return Value(from_cps(cps, size_t(idx), size_t(idx) + 1));
    }
    if (key.is_string()) return method(obj, key.s());
    return Value();
  }
  if (key.is_string()) return method(obj, key.s());
  return Value();
}

Value Interp::get_attr(const Value& obj, const std::string& name) {
  if (obj.is_undefined()) rt_error("'" + name + "' of an undefined value");
  if (obj.is_dict()) {
    if (obj.d()->kind == DictData::Kind::kDict) {
      Value m = method(obj, name);
      if (!m.is_undefined()) return m;
    }
    if (const Value* v = obj.d()->find(name)) return *v;
    return Value();
  }
  return method(obj, name);
}

Value Interp::binop(const std::string& op, const Value& l, const Value& r) {
  if (op == "~") {
    std::string s = py_str(l) + py_str(r);
    charge(s.size());
    return Value(std::move(s));
  }
  if (l.is_undefined() || r.is_undefined()) rt_error("undefined value in '" + op + "' operation");
  auto type_err = [&]() -> Value {
    rt_error("unsupported operand type(s) for " + op + ": '" + type_name(l) + "' and '" + type_name(r) + "'");
  };
  if (op == "+") {
    if (l.is_string() && r.is_string()) {
      charge(l.s().size() + r.s().size());
      return Value(l.s() + r.s());
    }
    if (l.is_list() && r.is_list()) {
      if (l.l()->tuple != r.l()->tuple) return type_err();
      charge(copy_bytes(*l.l()) + copy_bytes(*r.l()));
      std::vector<Value> items = l.l()->items;
      items.insert(items.end(), r.l()->items.begin(), r.l()->items.end());
      return Value::list(std::move(items), l.l()->tuple);
    }
  }
  if (op == "*") {
    const Value* seq = nullptr;
    const Value* n = nullptr;
    if ((l.is_string() || l.is_list()) && (r.is_int() || r.is_bool())) {
      seq = &l;
      n = &r;
    } else if ((r.is_string() || r.is_list()) && (l.is_int() || l.is_bool())) {
      seq = &r;
      n = &l;
    }
    if (seq) {
      const int64_t times = std::max<int64_t>(0, to_int_arg(*n, "repeat"));
      if (seq->is_string()) {
        if (times > 0 && seq->s().size() > 0) charge(mul_sat(seq->s().size(), static_cast<uint64_t>(times)));
        std::string out;
        for (int64_t k = 0; k < times; ++k) out += seq->s();
        return Value(std::move(out));
      }
      // Each repetition copies every item (a string item copies its bytes).
      if (times > 0 && !seq->l()->items.empty()) charge(mul_sat(copy_bytes(*seq->l()), static_cast<uint64_t>(times)));
      std::vector<Value> items;
      for (int64_t k = 0; k < times; ++k) items.insert(items.end(), seq->l()->items.begin(), seq->l()->items.end());
      return Value::list(std::move(items), seq->l()->tuple);
    }
  }
  if (op == "%" && l.is_string()) rt_error("printf-style string formatting is not supported");
  if (!l.is_number() || !r.is_number()) return type_err();
  const bool fl = l.is_float() || r.is_float() || op == "/";
  if (op == "/" || fl) {
    const double x = l.as_double(), y = r.as_double();
    if (op == "+") return Value(x + y);
    if (op == "-") return Value(x - y);
    if (op == "*") return Value(x * y);
    if (op == "/") {
      if (y == 0) rt_error("division by zero");
      return Value(x / y);
    }
    if (op == "//") {
      if (y == 0) rt_error("float floor division by zero");
      return Value(std::floor(x / y));
    }
    if (op == "%") {
      if (y == 0) rt_error("float modulo");
      double m = std::fmod(x, y);
      if (m != 0 && ((m < 0) != (y < 0))) m += y;
      return Value(m);
    }
    if (op == "**") return Value(std::pow(x, y));
    return type_err();
  }
  const int64_t x = l.is_bool() ? int64_t(l.b()) : l.i();
  const int64_t y = r.is_bool() ? int64_t(r.b()) : r.i();
  int64_t res = 0;
  auto ovf = []() -> Value { rt_error("integer overflow"); };
  if (op == "+") return __builtin_add_overflow(x, y, &res) ? ovf() : Value(res);
  if (op == "-") return __builtin_sub_overflow(x, y, &res) ? ovf() : Value(res);
  if (op == "*") return __builtin_mul_overflow(x, y, &res) ? ovf() : Value(res);
  if (op == "//" || op == "%") {
    if (y == 0) rt_error("integer division or modulo by zero");
    if (x == INT64_MIN && y == -1) return ovf();
    int64_t q = x / y, m = x % y;
    if (m != 0 && ((m < 0) != (y < 0))) {
      --q;
      m += y;
    }
    return op == "//" ? Value(q) : Value(m);
  }
  if (op == "**") {
    if (y < 0) return Value(std::pow(double(x), double(y)));
    int64_t acc = 1;
    for (int64_t k = 0; k < y; ++k) {
      if (__builtin_mul_overflow(acc, x, &acc)) return ovf();
      if (acc == 0 || acc == 1) break;
      step();
    }
    if (acc == 1 && x == -1) acc = (y % 2) ? -1 : 1;
    return Value(acc);
  }
  return type_err();
}

bool Interp::contains(const Value& container, const Value& item) {
  if (container.is_undefined()) return false;
  if (container.is_string()) {
    if (!item.is_string()) rt_error("'in <string>' requires string as left operand, not " + type_name(item));
    return container.s().find(item.s()) != std::string::npos;
  }
  if (container.is_list()) {
    for (auto& v : container.l()->items) {
      if (py_equal(v, item)) return true;
    }
    return false;
  }
  if (container.is_dict()) {
    if (container.d()->kind != DictData::Kind::kDict) rt_error("argument of type '" + type_name(container) + "' is not iterable");
    return item.is_string() && container.d()->find(item.s()) != nullptr;
  }
  rt_error("argument of type '" + type_name(container) + "' is not iterable");
}

int Interp::order(const Value& l, const Value& r, int depth) {
  if (depth > 256) rt_error("value nested too deeply");
  if (l.is_undefined() || r.is_undefined()) rt_error("undefined value in comparison");
  if (l.is_number() && r.is_number()) {
    if (l.is_float() || r.is_float()) {
      const double x = l.as_double(), y = r.as_double();
      return x < y ? -1 : (x > y ? 1 : 0);
    }
    const int64_t x = l.is_bool() ? int64_t(l.b()) : l.i();
    const int64_t y = r.is_bool() ? int64_t(r.b()) : r.i();
    return x < y ? -1 : (x > y ? 1 : 0);
  }
  if (l.is_string() && r.is_string()) {
    const int c = l.s().compare(r.s());
    return c < 0 ? -1 : (c > 0 ? 1 : 0);
  }
  if (l.is_list() && r.is_list() && l.l()->tuple == r.l()->tuple) {
    const auto& a = l.l()->items;
    const auto& b = r.l()->items;
    for (size_t k = 0; k < a.size() && k < b.size(); ++k) {
      if (py_equal(a[k], b[k])) continue;
      return order(a[k], b[k], depth + 1);
    }
    return a.size() < b.size() ? -1 : (a.size() > b.size() ? 1 : 0);
  }
  rt_error("'<' not supported between instances of '" + type_name(l) + "' and '" + type_name(r) + "'");
}

bool Interp::compare(const std::string& op, const Value& l, const Value& r) {
  if (op == "==") return py_equal(l, r);
  if (op == "!=") return !py_equal(l, r);
  if (op == "in") return contains(r, l);
  if (op == "notin") return !contains(r, l);
  const int c = order(l, r);
  if (op == "<") return c < 0;
  if (op == "<=") return c <= 0;
  if (op == ">") return c > 0;
  return c >= 0;
}

// --- methods of built-in types -----------------------------------------------------------------

namespace {
Value bound(const std::string& name, std::function<Value(Interp&, CallArgs&)> fn) {
  auto f = std::make_shared<Function>();
  f->name = name;
  f->call = std::move(fn);
  return Value(f);
}
const Value* arg(CallArgs& a, size_t pos, const char* kw) {
  if (pos < a.pos.size()) return &a.pos[pos];
  return a.kwarg(kw);
}
}  // namespace

Value Interp::method(const Value& obj, const std::string& name) {
  if (obj.is_string()) {
    const std::string s = obj.s();
    if (name == "strip" || name == "lstrip" || name == "rstrip") {
      const bool left = name != "rstrip", right = name != "lstrip";
      return bound(name, [s, left, right](Interp&, CallArgs& a) {
        return Value(strip_chars(s, arg(a, 0, "chars"), left, right));
      });
    }
    if (name == "split" || name == "rsplit") {
      const bool rev = name == "rsplit";
      return bound(name, [s, rev](Interp&, CallArgs& a) {
        const Value* ms = arg(a, 1, "maxsplit");
        return py_split(s, arg(a, 0, "sep"), ms ? to_int_arg(*ms, "maxsplit") : -1, rev);
      });
    }
    if (name == "startswith" || name == "endswith") {
      const bool start = name == "startswith";
      return bound(name, [s, start](Interp&, CallArgs& a) {
        const Value* p = arg(a, 0, "prefix");
        if (!p) rt_error(std::string(start ? "startswith" : "endswith") + "() takes at least 1 argument");
        std::vector<Value> cands = p->is_list() && p->l()->tuple ? p->l()->items : std::vector<Value>{*p};
        for (auto& c : cands) {
          if (!c.is_string()) rt_error("startswith/endswith first arg must be str or a tuple of str");
          const std::string& x = c.s();
          if (x.size() > s.size()) continue;
          if (start ? s.compare(0, x.size(), x) == 0 : s.compare(s.size() - x.size(), x.size(), x) == 0) return Value(true);
        }
        return Value(false);
      });
    }
    if (name == "upper") return bound(name, [s](Interp&, CallArgs&) { return Value(ascii_upper(s)); });
    if (name == "lower") return bound(name, [s](Interp&, CallArgs&) { return Value(ascii_lower(s)); });
    if (name == "title") return bound(name, [s](Interp&, CallArgs&) { return Value(py_title(s)); });
    if (name == "capitalize") return bound(name, [s](Interp&, CallArgs&) { return Value(py_capitalize(s)); });
    if (name == "replace") {
      return bound(name, [s](Interp& in, CallArgs& a) {
        const Value* o = arg(a, 0, "old");
        const Value* n = arg(a, 1, "new");
        const Value* c = arg(a, 2, "count");
        if (!o || !n || !o->is_string() || !n->is_string()) rt_error("replace() expects two strings");
        return Value(py_replace(s, o->s(), n->s(), c ? to_int_arg(*c, "count") : -1, in.limits().max_output_bytes));
      });
    }
    if (name == "find" || name == "count" || name == "rfind") {
      return bound(name, [s, name](Interp&, CallArgs& a) {
        const Value* x = arg(a, 0, "sub");
        if (!x || !x->is_string()) rt_error(name + "() expects a string");
        if (name == "count") {
          if (x->s().empty()) return Value(int64_t(py_len(s) + 1));
          int64_t n = 0;
          for (size_t p = s.find(x->s()); p != std::string::npos; p = s.find(x->s(), p + x->s().size())) ++n;
          return Value(n);
        }
        const size_t p = name == "find" ? s.find(x->s()) : s.rfind(x->s());
        if (p == std::string::npos) return Value(int64_t(-1));
        return Value(int64_t(py_len(s.substr(0, p))));
      });
    }
    if (name == "join") {
      return bound(name, [s](Interp& in, CallArgs& a) {
        if (a.pos.empty()) rt_error("join() takes exactly one argument");
        std::string out;
        bool first = true;
        for (auto& v : in.iterate(a.pos[0])) {
          if (!v.is_string()) rt_error("sequence item: expected str instance, " + type_name(v) + " found");
          if (!first) out += s;
          first = false;
          out += v.s();
          in.check_size(out.size());
        }
        return Value(std::move(out));
      });
    }
    if (name == "splitlines") {
      return bound(name, [s](Interp&, CallArgs& a) {
        const Value* keep = arg(a, 0, "keepends");
        const bool keepends = keep && keep->truthy();
        std::vector<Value> out;
        size_t b = 0, i = 0;
        while (i < s.size()) {
          if (s[i] == '\n' || s[i] == '\r') {
            size_t e = i + 1;
            if (s[i] == '\r' && e < s.size() && s[e] == '\n') ++e;
            out.emplace_back(s.substr(b, (keepends ? e : i) - b));
            b = i = e;
          } else {
            ++i;
          }
        }
        if (b < s.size()) out.emplace_back(s.substr(b));
        return Value::list(std::move(out));
      });
    }
    if (name == "isdigit" || name == "isspace" || name == "isalpha" || name == "isalnum" || name == "isupper" ||
        name == "islower") {
      return bound(name, [s, name](Interp&, CallArgs&) {
        if (s.empty()) return Value(false);
        auto cps = to_cps(s);
        bool any_cased = false;
        for (uint32_t c : cps) {
          const bool digit = c >= '0' && c <= '9';
          const bool alpha = is_alpha_cp(c);
          if (name == "isdigit" && !digit) return Value(false);
          if (name == "isspace" && !is_py_space_cp(c)) return Value(false);
          if (name == "isalpha" && !alpha) return Value(false);
          if (name == "isalnum" && !alpha && !digit) return Value(false);
          if (name == "isupper") {
            if (c >= 'a' && c <= 'z') return Value(false);
            if (c >= 'A' && c <= 'Z') any_cased = true;
          }
          if (name == "islower") {
            if (c >= 'A' && c <= 'Z') return Value(false);
            if (c >= 'a' && c <= 'z') any_cased = true;
          }
        }
        if (name == "isupper" || name == "islower") return Value(any_cased);
        return Value(true);
      });
    }
    return Value();
  }
  if (obj.is_dict() && obj.d()->kind == DictData::Kind::kDict) {
    const DictPtr d = obj.d();
    if (name == "items") {
      return bound(name, [d](Interp&, CallArgs&) {
        std::vector<Value> out;
        for (auto& [k, v] : d->items) out.push_back(Value::list({Value(k), v}, true));
        return Value::list(std::move(out));
      });
    }
    if (name == "keys") {
      return bound(name, [d](Interp&, CallArgs&) {
        std::vector<Value> out;
        for (auto& kv : d->items) out.emplace_back(kv.first);
        return Value::list(std::move(out));
      });
    }
    if (name == "values") {
      return bound(name, [d](Interp&, CallArgs&) {
        std::vector<Value> out;
        for (auto& kv : d->items) out.push_back(kv.second);
        return Value::list(std::move(out));
      });
    }
    if (name == "get") {
      return bound(name, [d](Interp&, CallArgs& a) {
        if (a.pos.empty()) rt_error("get expected at least 1 argument");
        if (a.pos[0].is_string()) {
          if (const Value* v = d->find(a.pos[0].s())) return *v;
        }
        return a.pos.size() > 1 ? a.pos[1] : Value::none();
      });
    }
    if (name == "copy") {
      return bound(name, [d](Interp&, CallArgs&) {
        auto c = std::make_shared<DictData>(*d);
        return Value(c);
      });
    }
    if (name == "pop" || name == "update" || name == "clear" || name == "setdefault" || name == "popitem") {
      return bound(name, [name](Interp&, CallArgs&) -> Value {
        rt_error("access to attribute '" + name + "' of 'dict' object is unsafe");
      });
    }
    return Value();
  }
  if (obj.is_list()) {
    const ListPtr l = obj.l();
    if (name == "index" || name == "count") {
      return bound(name, [l, name](Interp&, CallArgs& a) {
        if (a.pos.empty()) rt_error(name + "() takes exactly one argument");
        int64_t n = 0;
        for (size_t k = 0; k < l->items.size(); ++k) {
          if (py_equal(l->items[k], a.pos[0])) {
            if (name == "index") return Value(int64_t(k));
            ++n;
          }
        }
        if (name == "index") rt_error("value is not in list");
        return Value(n);
      });
    }
    if (!l->tuple && (name == "append" || name == "pop" || name == "extend" || name == "insert" || name == "remove" ||
                      name == "clear" || name == "sort" || name == "reverse")) {
      return bound(name, [name](Interp&, CallArgs&) -> Value {
        rt_error("access to attribute '" + name + "' of 'list' object is unsafe");
      });
    }
    return Value();
  }
  return Value();
}

}  // namespace oxi::jinja
