// Built-in filters, tests and global functions of the Jinja interpreter (jinja2 semantics; `tojson`
// as transformers overrides it).
#include <algorithm>
#include <cmath>
#include <ctime>
#include <set>

#include "chat/jinja_eval.h"
#include "core/error.h"

namespace oxi::jinja {

namespace {

const Value* arg(CallArgs& a, size_t pos, const char* kw) {
  if (pos < a.pos.size()) return &a.pos[pos];
  return a.kwarg(kw);
}
bool arg_bool(CallArgs& a, size_t pos, const char* kw, bool def) {
  const Value* v = arg(a, pos, kw);
  return v ? v->truthy() : def;
}

std::string lower_ascii(std::string s) {
  for (auto& c : s) {
    if (c >= 'A' && c <= 'Z') c = char(c + 32);
  }
  return s;
}
std::string upper_ascii(std::string s) {
  for (auto& c : s) {
    if (c >= 'a' && c <= 'z') c = char(c - 32);
  }
  return s;
}

size_t cp_len(const std::string& s) {
  size_t n = 0, i = 0;
  while (i < s.size()) {
    utf8_next(s, i);
    ++n;
  }
  return n;
}

std::string html_escape(const std::string& s) {
  std::string out;
  for (char c : s) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&#34;"; break;
      case '\'': out += "&#39;"; break;
      default: out += c;
    }
  }
  return out;
}

// Ensure-ASCII post-pass: every non-ASCII code point becomes \uXXXX (surrogate pairs above BMP).
std::string ascii_escape_json(const std::string& s) {
  std::string out;
  size_t i = 0;
  while (i < s.size()) {
    if (static_cast<unsigned char>(s[i]) < 0x80) {
      out += s[i++];
      continue;
    }
    uint32_t cp = utf8_next(s, i);
    char buf[16];
    if (cp >= 0x10000) {
      cp -= 0x10000;
      std::snprintf(buf, sizeof buf, "\\u%04x\\u%04x", 0xD800 + (cp >> 10), 0xDC00 + (cp & 0x3FF));
    } else {
      std::snprintf(buf, sizeof buf, "\\u%04x", cp);
    }
    out += buf;
  }
  return out;
}

// jinja2 make_attrgetter: "a.b.0" walks items (integers as indices).
Value attr_path(Interp& in, const Value& v, const std::string& path) {
  Value cur = v;
  size_t pos = 0;
  for (;;) {
    const size_t dot = path.find('.', pos);
    const std::string part = path.substr(pos, dot == std::string::npos ? std::string::npos : dot - pos);
    bool digits = !part.empty() && std::all_of(part.begin(), part.end(), [](char c) { return c >= '0' && c <= '9'; });
    if (digits && part.size() < 18) cur = in.get_item(cur, Value(int64_t(std::stoll(part))));
    else cur = in.get_item(cur, Value(part));
    if (dot == std::string::npos) break;
    pos = dot + 1;
  }
  return cur;
}

Value attribute_of(Interp& in, const Value& v, const Value* attribute) {
  if (!attribute || attribute->is_none()) return v;
  if (attribute->is_int()) return in.get_item(v, *attribute);
  return attr_path(in, v, py_str(*attribute));
}

// sort key used by sort/dictsort/unique/min/max: strings lowered unless case_sensitive.
Value sort_key(const Value& v, bool case_sensitive) {
  if (!case_sensitive && v.is_string()) return Value(lower_ascii(v.s()));
  return v;
}

Value do_sort(Interp& in, std::vector<Value> items, bool reverse, bool case_sensitive, const Value* attribute) {
  std::vector<std::pair<Value, Value>> keyed;
  for (auto& it : items) keyed.emplace_back(sort_key(attribute_of(in, it, attribute), case_sensitive), it);
  std::stable_sort(keyed.begin(), keyed.end(), [&](const auto& a, const auto& b) {
    return reverse ? in.order(b.first, a.first) < 0 : in.order(a.first, b.first) < 0;
  });
  std::vector<Value> out;
  for (auto& kv : keyed) out.push_back(kv.second);
  return Value::list(std::move(out));
}

Value list_of(Interp& in, const Value& v) { return Value::list(in.iterate(v)); }

std::string indent_text(const std::string& s, const std::string& pad, bool first, bool blank) {
  // Python splitlines() semantics is close enough for \n text; jinja2 joins with "\n".
  std::vector<std::string> lines;
  size_t b = 0;
  for (size_t i = 0; i <= s.size(); ++i) {
    if (i == s.size() || s[i] == '\n') {
      lines.push_back(s.substr(b, i - b));
      b = i + 1;
    }
  }
  const bool trailing_nl = !s.empty() && s.back() == '\n';
  if (trailing_nl) lines.pop_back();
  std::string out;
  for (size_t k = 0; k < lines.size(); ++k) {
    if (k) out += "\n";
    const bool do_pad = (k == 0 ? first : true) && (blank || !lines[k].empty() || k == 0);
    if (k == 0 && !first) {
      out += lines[k];
      continue;
    }
    if (do_pad && (blank || !lines[k].empty())) out += pad;
    out += lines[k];
  }
  if (trailing_nl) out += "\n";
  return out;
}

}  // namespace

// ---------------------------------------------------------------------------------------------

static const std::set<std::string>& filter_names() {
  static const std::set<std::string> s = {
      "abs", "attr", "batch", "capitalize", "center", "count", "d", "default", "dictsort", "e", "escape",
      "first", "float", "forceescape", "indent", "int", "items", "join", "last", "length", "list", "lower",
      "map", "max", "min", "reject", "rejectattr", "replace", "reverse", "round", "safe", "select",
      "selectattr", "sort", "string", "sum", "title", "tojson", "trim", "unique", "upper", "wordcount"};
  return s;
}
static const std::set<std::string>& test_names() {
  static const std::set<std::string> s = {
      "boolean", "callable", "defined", "divisibleby", "eq", "equalto", "==", "escaped", "even", "false",
      "filter", "float", "ge", ">=", "gt", "greaterthan", ">", "in", "integer", "iterable", "le", "<=",
      "lower", "lt", "lessthan", "<", "mapping", "ne", "!=", "none", "number", "odd", "sameas", "sequence",
      "string", "test", "true", "undefined", "upper"};
  return s;
}
bool is_known_filter(const std::string& name) { return filter_names().count(name) > 0; }
bool is_known_test(const std::string& name) { return test_names().count(name) > 0; }

Value Interp::apply_filter(const std::string& name, const Value& v, CallArgs& a) {
  step();
  if (name == "safe") return v;
  if (name == "string") return Value(py_str(v));
  if (name == "trim") {
    const Value* chars = arg(a, 0, "chars");
    Value sv(py_str(v));
    CallArgs ca;
    if (chars) ca.pos.push_back(*chars);
    return call(get_attr(sv, "strip"), ca);
  }
  if (name == "upper") return Value(upper_ascii(py_str(v)));
  if (name == "lower") return Value(lower_ascii(py_str(v)));
  if (name == "capitalize" || name == "title") {
    Value sv(py_str(v));
    CallArgs ca;
    return call(get_attr(sv, name), ca);
  }
  if (name == "length" || name == "count") {
    if (v.is_undefined()) return Value(int64_t(0));
    if (v.is_string()) return Value(int64_t(cp_len(v.s())));
    if (v.is_list()) return Value(int64_t(v.l()->items.size()));
    if (v.is_dict() && v.d()->kind == DictData::Kind::kDict) return Value(int64_t(v.d()->items.size()));
    rt_error("object of type '" + type_name(v) + "' has no len()");
  }
  if (name == "default" || name == "d") {
    const Value* dv = arg(a, 0, "default_value");
    const bool boolean = arg_bool(a, 1, "boolean", false);
    if (v.is_undefined() || (boolean && !v.truthy())) return dv ? *dv : Value(std::string());
    return v;
  }
  if (name == "tojson") {
    // transformers: json.dumps(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False)
    const bool ensure_ascii = arg_bool(a, 0, "ensure_ascii", false);
    const Value* ind = arg(a, 1, "indent");
    const Value* seps = arg(a, 2, "separators");
    const bool sort_keys = arg_bool(a, 3, "sort_keys", false);
    int indent = -1;
    std::string indent_str;
    if (ind && !ind->is_none()) {
      if (ind->is_int()) indent = int(std::clamp<int64_t>(ind->i(), 0, 64));
      else rt_error("tojson: indent must be an integer");
    }
    std::string item_sep = indent >= 0 ? "," : ", ", key_sep = ": ";
    if (seps && !seps->is_none()) {
      if (!seps->is_list() || seps->l()->items.size() != 2 || !seps->l()->items[0].is_string() ||
          !seps->l()->items[1].is_string()) {
        rt_error("tojson: separators must be a pair of strings");
      }
      item_sep = seps->l()->items[0].s();
      key_sep = seps->l()->items[1].s();
    }
    std::string out = py_json_dumps(v, indent, item_sep, key_sep, sort_keys);
    check_size(out.size());
    return Value(ensure_ascii ? ascii_escape_json(out) : out);
  }
  if (name == "items") {
    if (v.is_undefined()) return Value::list();
    if (!v.is_mapping()) rt_error("'" + type_name(v) + "' object has no attribute 'items'");
    CallArgs ca;
    return call(get_attr(v, "items"), ca);
  }
  if (name == "dictsort") {
    if (!v.is_mapping()) rt_error("dictsort: expected a mapping, got " + type_name(v));
    const bool cs = arg_bool(a, 0, "case_sensitive", false);
    const Value* by = arg(a, 1, "by");
    const bool reverse = arg_bool(a, 2, "reverse", false);
    const bool by_value = by && by->is_string() && by->s() == "value";
    if (by && !(by->is_string() && (by->s() == "key" || by->s() == "value"))) {
      rt_error("You can only sort by either \"key\" or \"value\"");
    }
    std::vector<std::pair<Value, Value>> keyed;
    for (auto& [k, val] : v.d()->items) {
      keyed.emplace_back(sort_key(by_value ? val : Value(k), cs), Value::list({Value(k), val}, true));
    }
    std::stable_sort(keyed.begin(), keyed.end(), [&](const auto& x, const auto& y) {
      return reverse ? order(y.first, x.first) < 0 : order(x.first, y.first) < 0;
    });
    std::vector<Value> out;
    for (auto& kv : keyed) out.push_back(kv.second);
    return Value::list(std::move(out));
  }
  if (name == "list") return list_of(*this, v);
  if (name == "first" || name == "last") {
    auto items = iterate(v);
    if (items.empty()) return Value();
    return name == "first" ? items.front() : items.back();
  }
  if (name == "reverse") {
    if (v.is_string()) {
      auto items = iterate(v);
      std::string out;
      for (auto it = items.rbegin(); it != items.rend(); ++it) out += it->s();
      return Value(std::move(out));
    }
    auto items = iterate(v);
    std::reverse(items.begin(), items.end());
    return Value::list(std::move(items));
  }
  if (name == "join") {
    const Value* sep = arg(a, 0, "d");
    const Value* attribute = arg(a, 1, "attribute");
    const std::string d = sep ? py_str(*sep) : "";
    std::string out;
    bool first = true;
    for (auto& it : iterate(v)) {
      if (!first) out += d;
      first = false;
      out += py_str(attribute_of(*this, it, attribute));
      check_size(out.size());
    }
    return Value(std::move(out));
  }
  if (name == "replace") {
    const Value* o = arg(a, 0, "old");
    const Value* n = arg(a, 1, "new");
    const Value* c = arg(a, 2, "count");
    if (!o || !n) rt_error("replace: expected old and new");
    Value sv(py_str(v));
    CallArgs ca;
    ca.pos = {Value(py_str(*o)), Value(py_str(*n))};
    if (c && !c->is_none()) ca.pos.push_back(*c);
    return call(get_attr(sv, "replace"), ca);
  }
  if (name == "map") {
    std::vector<Value> out;
    const Value* attribute = a.kwarg("attribute");
    if (attribute) {
      const Value* def = a.kwarg("default");
      for (auto& it : iterate(v)) {
        Value r = attribute_of(*this, it, attribute);
        if (r.is_undefined() && def) r = *def;
        out.push_back(r);
      }
      return Value::list(std::move(out));
    }
    if (a.pos.empty() || !a.pos[0].is_string()) rt_error("map: expected a filter name or attribute=");
    const std::string fname = a.pos[0].s();
    if (!is_known_filter(fname)) rt_error("No filter named '" + fname + "'");
    CallArgs rest;
    rest.pos.assign(a.pos.begin() + 1, a.pos.end());
    rest.kw = a.kw;
    for (auto& it : iterate(v)) {
      CallArgs c2 = rest;
      out.push_back(apply_filter(fname, it, c2));
    }
    return Value::list(std::move(out));
  }
  if (name == "select" || name == "reject" || name == "selectattr" || name == "rejectattr") {
    const bool by_attr = name == "selectattr" || name == "rejectattr";
    const bool want = name == "select" || name == "selectattr";
    size_t k = 0;
    Value attribute;
    if (by_attr) {
      if (a.pos.empty()) rt_error(name + ": missing attribute");
      attribute = a.pos[0];
      k = 1;
    }
    std::string tname;
    CallArgs targs;
    if (a.pos.size() > k) {
      tname = py_str(a.pos[k]);
      if (!is_known_test(tname)) rt_error("No test named '" + tname + "'");
      targs.pos.assign(a.pos.begin() + long(k) + 1, a.pos.end());
      targs.kw = a.kw;
    }
    std::vector<Value> out;
    for (auto& it : iterate(v)) {
      Value x = by_attr ? attribute_of(*this, it, &attribute) : it;
      CallArgs c2 = targs;
      const bool r = tname.empty() ? x.truthy() : apply_test(tname, x, c2);
      if (r == want) out.push_back(it);
    }
    return Value::list(std::move(out));
  }
  if (name == "unique") {
    const bool cs = arg_bool(a, 0, "case_sensitive", false);
    const Value* attribute = arg(a, 1, "attribute");
    std::vector<Value> out, seen;
    for (auto& it : iterate(v)) {
      Value key = sort_key(attribute_of(*this, it, attribute), cs);
      bool dup = false;
      for (auto& s : seen) {
        if (py_equal(s, key)) {
          dup = true;
          break;
        }
      }
      if (!dup) {
        seen.push_back(key);
        out.push_back(it);
      }
    }
    return Value::list(std::move(out));
  }
  if (name == "sort") {
    return do_sort(*this, iterate(v), arg_bool(a, 0, "reverse", false), arg_bool(a, 1, "case_sensitive", false),
                   arg(a, 2, "attribute"));
  }
  if (name == "min" || name == "max") {
    const bool cs = arg_bool(a, 0, "case_sensitive", false);
    const Value* attribute = arg(a, 1, "attribute");
    auto items = iterate(v);
    if (items.empty()) return Value();
    size_t best = 0;
    for (size_t k = 1; k < items.size(); ++k) {
      const int c = order(sort_key(attribute_of(*this, items[k], attribute), cs),
                          sort_key(attribute_of(*this, items[best], attribute), cs));
      if (name == "min" ? c < 0 : c > 0) best = k;
    }
    return items[best];
  }
  if (name == "sum") {
    const Value* attribute = arg(a, 0, "attribute");
    const Value* start = arg(a, 1, "start");
    Value acc = start ? *start : Value(int64_t(0));
    for (auto& it : iterate(v)) {
      Value x = attribute_of(*this, it, attribute);
      if (!acc.is_number() || !x.is_number()) rt_error("sum: unsupported operand types");
      if (acc.is_float() || x.is_float()) acc = Value(acc.as_double() + x.as_double());
      else {
        int64_t r;
        const int64_t xa = acc.is_bool() ? int64_t(acc.b()) : acc.i();
        const int64_t xb = x.is_bool() ? int64_t(x.b()) : x.i();
        if (__builtin_add_overflow(xa, xb, &r)) rt_error("integer overflow");
        acc = Value(r);
      }
    }
    return acc;
  }
  if (name == "abs") {
    if (v.is_int()) {
      if (v.i() == INT64_MIN) rt_error("integer overflow");
      return Value(v.i() < 0 ? -v.i() : v.i());
    }
    if (v.is_float()) return Value(std::fabs(v.f()));
    if (v.is_bool()) return Value(int64_t(v.b()));
    rt_error("bad operand type for abs(): '" + type_name(v) + "'");
  }
  if (name == "int") {
    const Value* def = arg(a, 0, "default");
    const Value dv = def ? *def : Value(int64_t(0));
    if (v.is_int()) return v;
    if (v.is_bool()) return Value(int64_t(v.b()));
    if (v.is_float()) {
      if (!std::isfinite(v.f()) || std::fabs(v.f()) > 9.2e18) return dv;
      return Value(int64_t(v.f()));
    }
    if (v.is_string()) {
      const std::string s = [&] {
        std::string t = v.s();
        while (!t.empty() && std::isspace(static_cast<unsigned char>(t.back()))) t.pop_back();
        size_t b = 0;
        while (b < t.size() && std::isspace(static_cast<unsigned char>(t[b]))) ++b;
        return t.substr(b);
      }();
      char* end = nullptr;
      errno = 0;
      const long long x = std::strtoll(s.c_str(), &end, 10);
      if (!s.empty() && *end == '\0' && errno == 0) return Value(int64_t(x));
      const double d = std::strtod(s.c_str(), &end);
      if (!s.empty() && *end == '\0' && std::isfinite(d) && std::fabs(d) < 9.2e18) return Value(int64_t(d));
    }
    return dv;
  }
  if (name == "float") {
    const Value* def = arg(a, 0, "default");
    const Value dv = def ? *def : Value(0.0);
    if (v.is_number()) return Value(v.as_double());
    if (v.is_string()) {
      char* end = nullptr;
      const double d = std::strtod(v.s().c_str(), &end);
      if (!v.s().empty() && *end == '\0') return Value(d);
    }
    return dv;
  }
  if (name == "round") {
    const Value* prec = arg(a, 0, "precision");
    const Value* method = arg(a, 1, "method");
    const int64_t p = prec ? std::clamp<int64_t>(prec->is_int() ? prec->i() : 0, -300, 300) : 0;
    const std::string m = method ? py_str(*method) : "common";
    if (!v.is_number()) rt_error("round: expected a number");
    const double x = v.as_double();
    const double scale = std::pow(10.0, double(p));
    double r;
    if (m == "common") r = std::nearbyint(x * scale) / scale;  // Python round(): half to even
    else if (m == "ceil") r = std::ceil(x * scale) / scale;
    else if (m == "floor") r = std::floor(x * scale) / scale;
    else rt_error("method must be common, ceil or floor");
    return Value(r);
  }
  if (name == "escape" || name == "e" || name == "forceescape") return Value(html_escape(py_str(v)));
  if (name == "attr") {
    const Value* n = arg(a, 0, "name");
    if (!n) rt_error("attr: missing name");
    if (v.is_undefined()) rt_error("attr of an undefined value");
    if (v.is_dict() && v.d()->kind != DictData::Kind::kDict) return get_attr(v, py_str(*n));
    if (v.is_dict()) return method(v, py_str(*n));  // methods only, never keys
    return get_attr(v, py_str(*n));
  }
  if (name == "indent") {
    const Value* w = arg(a, 0, "width");
    const bool first = arg_bool(a, 1, "first", false);
    const bool blank = arg_bool(a, 2, "blank", false);
    std::string pad = "    ";
    if (w) {
      if (w->is_string()) pad = w->s();
      else pad = std::string(size_t(std::clamp<int64_t>(w->is_int() ? w->i() : 4, 0, 1024)), ' ');
    }
    std::string out = indent_text(py_str(v), pad, first, blank);
    check_size(out.size());
    return Value(std::move(out));
  }
  if (name == "center") {
    const Value* w = arg(a, 0, "width");
    const int64_t width = w && w->is_int() ? std::clamp<int64_t>(w->i(), 0, 1 << 20) : 80;
    std::string s = py_str(v);
    const int64_t len = int64_t(cp_len(s));
    if (len >= width) return Value(s);
    const int64_t total = width - len;
    const int64_t left = total / 2 + (total & width & 1);
    return Value(std::string(size_t(left), ' ') + s + std::string(size_t(total - left), ' '));
  }
  if (name == "wordcount") {
    CallArgs ca;
    Value parts = call(get_attr(Value(py_str(v)), "split"), ca);
    return Value(int64_t(parts.l()->items.size()));
  }
  if (name == "batch") {
    const Value* n = arg(a, 0, "linecount");
    const Value* fill = arg(a, 1, "fill_with");
    if (!n || !n->is_int() || n->i() <= 0) rt_error("batch: linecount must be a positive integer");
    std::vector<Value> out, cur;
    for (auto& it : iterate(v)) {
      cur.push_back(it);
      if (int64_t(cur.size()) == n->i()) {
        out.push_back(Value::list(std::move(cur)));
        cur.clear();
      }
    }
    if (!cur.empty()) {
      if (fill && !fill->is_none()) {
        while (int64_t(cur.size()) < n->i()) cur.push_back(*fill);
      }
      out.push_back(Value::list(std::move(cur)));
    }
    return Value::list(std::move(out));
  }
  rt_error("No filter named '" + name + "'");
}

bool Interp::apply_test(const std::string& name, const Value& v, CallArgs& a) {
  step();
  auto need = [&](size_t n) -> const Value& {
    if (a.pos.size() < n) rt_error("test '" + name + "' needs an argument");
    return a.pos[n - 1];
  };
  if (name == "defined") return !v.is_undefined();
  if (name == "undefined") return v.is_undefined();
  if (name == "none") return v.is_none();
  if (name == "string") return v.is_string();
  if (name == "mapping") return v.is_mapping();
  if (name == "boolean") return v.is_bool();
  if (name == "true") return v.is_bool() && v.b();
  if (name == "false") return v.is_bool() && !v.b();
  if (name == "number") return v.is_number();
  if (name == "integer") return v.is_int();
  if (name == "float") return v.is_float();
  if (name == "callable") return v.is_func();
  if (name == "sequence") return v.is_string() || v.is_list() || v.is_mapping() || v.is_undefined();
  if (name == "iterable") return v.is_string() || v.is_list() || v.is_mapping() || v.is_undefined();
  if (name == "escaped") return false;
  if (name == "lower" || name == "upper") {
    if (!v.is_string()) return false;
    const std::string s = v.s();
    return name == "lower" ? lower_ascii(s) == s : upper_ascii(s) == s;
  }
  if (name == "odd" || name == "even") {
    if (!v.is_int() && !v.is_bool()) rt_error("test '" + name + "' expects an integer");
    const int64_t x = v.is_bool() ? int64_t(v.b()) : v.i();
    return name == "odd" ? (x % 2 != 0) : (x % 2 == 0);
  }
  if (name == "divisibleby") {
    const Value& d = need(1);
    if (!d.is_number() || !v.is_number()) rt_error("divisibleby expects numbers");
    if (d.as_double() == 0) rt_error("integer division or modulo by zero");
    return std::fmod(v.as_double(), d.as_double()) == 0;
  }
  if (name == "eq" || name == "equalto" || name == "==") return py_equal(v, need(1));
  if (name == "ne" || name == "!=") return !py_equal(v, need(1));
  if (name == "lt" || name == "lessthan" || name == "<") return order(v, need(1)) < 0;
  if (name == "le" || name == "<=") return order(v, need(1)) <= 0;
  if (name == "gt" || name == "greaterthan" || name == ">") return order(v, need(1)) > 0;
  if (name == "ge" || name == ">=") return order(v, need(1)) >= 0;
  if (name == "in") return contains(need(1), v);
  if (name == "sameas") {
    const Value& o = need(1);
    if (v.is_none() || v.is_bool() || v.is_undefined()) return v.var().index() == o.var().index() && py_equal(v, o);
    if (v.is_list() && o.is_list()) return v.l() == o.l();
    if (v.is_dict() && o.is_dict()) return v.d() == o.d();
    if (v.is_func() && o.is_func()) return v.fn() == o.fn();
    if (v.is_int() && o.is_int()) return v.i() == o.i() && v.i() >= -5 && v.i() <= 256;  // CPython small ints
    return false;
  }
  if (name == "filter") return v.is_string() && is_known_filter(v.s());
  if (name == "test") return v.is_string() && is_known_test(v.s());
  rt_error("No test named '" + name + "'");
}

const std::unordered_map<std::string, Value>& Interp::globals() {
  static const std::unordered_map<std::string, Value> g = [] {
    std::unordered_map<std::string, Value> m;
    auto def = [&](const std::string& name, std::function<Value(Interp&, CallArgs&)> fn) {
      auto f = std::make_shared<Function>();
      f->name = name;
      f->call = std::move(fn);
      m[name] = Value(f);
    };
    def("range", [](Interp& in, CallArgs& a) {
      int64_t start = 0, stop = 0, st = 1;
      auto num = [](const Value& v) -> int64_t {
        if (v.is_int()) return v.i();
        if (v.is_bool()) return v.b();
        rt_error("range() expects integers, got " + type_name(v));
      };
      if (a.pos.size() == 1) stop = num(a.pos[0]);
      else if (a.pos.size() == 2 || a.pos.size() == 3) {
        start = num(a.pos[0]);
        stop = num(a.pos[1]);
        if (a.pos.size() == 3) st = num(a.pos[2]);
      } else {
        rt_error("range expected 1 to 3 arguments");
      }
      if (st == 0) rt_error("range() arg 3 must not be zero");
      // jinja2's sandbox caps ranges at 100000 items (MAX_RANGE).
      // Exact in 128 bits (int64 differences and -st overflow; long double rounds at 2**64).
      const __int128 span = st > 0 ? static_cast<__int128>(stop) - start : static_cast<__int128>(start) - stop;
      const __int128 step_abs = st > 0 ? static_cast<__int128>(st) : -static_cast<__int128>(st);
      const __int128 count = span <= 0 ? 0 : (span + step_abs - 1) / step_abs;
      if (count > 100000) rt_error("Range too big. The sandbox blocks ranges larger than MAX_RANGE (100000).");
      // Items by index (start + i * step, exact in 128 bits): a running `k += step` overflows
      // int64 near the ends (range(-2**63, 2**63 - 1, 2**63 - 1)).
      const uint64_t n = static_cast<uint64_t>(count);
      std::vector<Value> out;
      out.reserve(n);
      for (uint64_t i = 0; i < n; ++i) {
        const __int128 k = static_cast<__int128>(start) + static_cast<__int128>(i) * st;
        if (st > 0 ? k >= stop : k <= stop) break;
        out.emplace_back(static_cast<int64_t>(k));
        in.step();
      }
      return Value::list(std::move(out));
    });
    auto make_ns = [](Interp& in, CallArgs& a, DictData::Kind kind) {
      auto d = std::make_shared<DictData>();
      d->kind = kind;
      if (kind == DictData::Kind::kNamespace) in.track_namespace(d);
      for (auto& p : a.pos) {
        if (p.is_mapping()) {
          for (auto& [k, v] : p.d()->items) d->set(k, v);
        } else if (p.is_list()) {
          for (auto& kv : p.l()->items) {
            if (!kv.is_list() || kv.l()->items.size() != 2 || !kv.l()->items[0].is_string()) {
              rt_error("dict/namespace: expected (key, value) pairs");
            }
            d->set(kv.l()->items[0].s(), kv.l()->items[1]);
          }
        } else {
          rt_error("dict/namespace: unexpected positional argument");
        }
      }
      for (auto& [k, v] : a.kw) d->set(k, v);
      return Value(d);
    };
    def("namespace", [make_ns](Interp& in, CallArgs& a) { return make_ns(in, a, DictData::Kind::kNamespace); });
    def("dict", [make_ns](Interp& in, CallArgs& a) { return make_ns(in, a, DictData::Kind::kDict); });
    def("raise_exception", [](Interp&, CallArgs& a) -> Value {
      const std::string msg = a.pos.empty() ? std::string("error") : py_str(a.pos[0]);
      throw_error(ErrorCode::kInvalidArgument, "chat template: " + msg);
    });
    def("strftime_now", [](Interp&, CallArgs& a) {
      const std::string fmt = a.pos.empty() ? std::string("%Y-%m-%d") : py_str(a.pos[0]);
      const std::time_t t = std::time(nullptr);
      std::tm tmv{};
#if defined(_WIN32)
      localtime_s(&tmv, &t);
#else
      localtime_r(&t, &tmv);
#endif
      char buf[512];
      const size_t n = fmt.size() < 200 ? std::strftime(buf, sizeof buf, fmt.c_str(), &tmv) : 0;
      return Value(std::string(buf, n));
    });
    return m;
  }();
  return g;
}

}  // namespace oxi::jinja
