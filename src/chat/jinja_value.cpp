#include "chat/jinja_value.h"

#include <algorithm>
#include <cstdlib>
#include <cmath>
#include <cstdio>

#include "core/error.h"

namespace oxi::jinja {

namespace {
constexpr int kMaxDepth = 256;
[[noreturn]] void too_deep() {
  throw_error(ErrorCode::kInvalidArgument, "chat template: value nested too deeply");
}
}  // namespace

bool Value::is_mapping() const { return is_dict() && d()->kind == DictData::Kind::kDict; }

double Value::as_double() const {
  if (is_int()) return double(i());
  if (is_float()) return f();
  if (is_bool()) return b() ? 1.0 : 0.0;
  return 0.0;
}

bool Value::truthy() const {
  switch (v_.index()) {
    case 0: return false;
    case 1: return false;
    case 2: return b();
    case 3: return i() != 0;
    case 4: return f() != 0.0;
    case 5: return !s().empty();
    case 6: return !l()->items.empty();
    case 7: return d()->kind != DictData::Kind::kDict || !d()->items.empty();
    default: return true;
  }
}

uint32_t utf8_next(const std::string& s, size_t& i) {
  const auto c = static_cast<unsigned char>(s[i]);
  auto bad = [&]() {
    ++i;
    return 0xDC00u + c;  // surrogate-escape the raw byte (like Python's surrogateescape)
  };
  if (c < 0x80) {
    ++i;
    return c;
  }
  int n = 0;
  uint32_t cp = 0;
  if ((c & 0xE0) == 0xC0) {
    n = 1;
    cp = c & 0x1F;
  } else if ((c & 0xF0) == 0xE0) {
    n = 2;
    cp = c & 0x0F;
  } else if ((c & 0xF8) == 0xF0) {
    n = 3;
    cp = c & 0x07;
  } else {
    return bad();
  }
  if (i + n >= s.size()) return bad();
  for (int k = 1; k <= n; ++k) {
    const auto cc = static_cast<unsigned char>(s[i + k]);
    if ((cc & 0xC0) != 0x80) return bad();
    cp = (cp << 6) | (cc & 0x3F);
  }
  // Reject overlong forms, surrogates and out-of-range values.
  if ((n == 1 && cp < 0x80) || (n == 2 && cp < 0x800) || (n == 3 && cp < 0x10000) ||
      cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) {
    return bad();
  }
  i += n + 1;
  return cp;
}

void utf8_append(std::string& out, uint32_t cp) {
  if (cp >= 0xDC80 && cp <= 0xDCFF) {
    out.push_back(static_cast<char>(cp - 0xDC00));
  } else if (cp < 0x80) {
    out.push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out.push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out.push_back(static_cast<char>(0xE0 | (cp >> 12)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    out.push_back(static_cast<char>(0xF0 | (cp >> 18)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
}

bool is_py_space_cp(uint32_t cp) {
  if (cp == ' ' || (cp >= 0x09 && cp <= 0x0D) || (cp >= 0x1C && cp <= 0x1F)) return true;
  if (cp < 0x85) return false;
  return cp == 0x85 || cp == 0xA0 || cp == 0x1680 || (cp >= 0x2000 && cp <= 0x200A) ||
         cp == 0x2028 || cp == 0x2029 || cp == 0x202F || cp == 0x205F || cp == 0x3000;
}

Value from_json(const nlohmann::ordered_json& j, int depth) {
  if (depth > kMaxDepth) too_deep();
  switch (j.type()) {
    case nlohmann::json::value_t::null: return Value::none();
    case nlohmann::json::value_t::boolean: return Value(j.get<bool>());
    case nlohmann::json::value_t::number_integer: return Value(j.get<int64_t>());
    case nlohmann::json::value_t::number_unsigned: {
      const auto u = j.get<uint64_t>();
      if (u > uint64_t(INT64_MAX)) return Value(double(u));
      return Value(int64_t(u));
    }
    case nlohmann::json::value_t::number_float: return Value(j.get<double>());
    case nlohmann::json::value_t::string: return Value(j.get<std::string>());
    case nlohmann::json::value_t::array: {
      std::vector<Value> items;
      items.reserve(j.size());
      for (const auto& e : j) items.push_back(from_json(e, depth + 1));
      return Value::list(std::move(items));
    }
    case nlohmann::json::value_t::object: {
      Value d = Value::dict();
      for (auto it = j.begin(); it != j.end(); ++it) d.d()->set(it.key(), from_json(it.value(), depth + 1));
      return d;
    }
    default: return Value::none();  // binary / discarded
  }
}

std::string py_float_repr(double d) {
  if (std::isnan(d)) return "nan";
  if (std::isinf(d)) return d < 0 ? "-inf" : "inf";
  if (d == 0) return std::signbit(d) ? "-0.0" : "0.0";
  // Shortest round-trip digits (what Python's repr uses): the fewest significant digits whose
  // correctly rounded value reads back as d. (Portable: libc++ 13 in the wasm build lacks
  // floating-point to_chars.)
  char buf[64];
  for (int prec = 0; prec <= 17; ++prec) {
    std::snprintf(buf, sizeof buf, "%.*e", prec, d);
    if (std::strtod(buf, nullptr) == d) break;
  }
  std::string sci(buf);
  // sci: [-]D[.DDD]e[+-]XX
  bool neg = sci[0] == '-';
  if (neg) sci.erase(0, 1);
  const auto epos = sci.find('e');
  std::string mant = sci.substr(0, epos);
  const int exp = std::stoi(sci.substr(epos + 1));
  std::string digits;
  for (char c : mant) {
    if (c != '.') digits.push_back(c);
  }
  while (digits.size() > 1 && digits.back() == '0') digits.pop_back();
  std::string out = neg ? "-" : "";
  if (exp < -4 || exp >= 16) {
    out += digits[0];
    if (digits.size() > 1) {
      out += '.';
      out += digits.substr(1);
    }
    out += 'e';
    out += exp < 0 ? '-' : '+';
    const int ax = exp < 0 ? -exp : exp;
    if (ax < 10) out += '0';
    out += std::to_string(ax);
  } else if (exp < 0) {
    out += "0.";
    out += std::string(size_t(-exp - 1), '0');
    out += digits;
  } else {
    const size_t ip = size_t(exp) + 1;
    if (digits.size() <= ip) {
      out += digits + std::string(ip - digits.size(), '0') + ".0";
    } else {
      out += digits.substr(0, ip) + "." + digits.substr(ip);
    }
  }
  return out;
}

std::string type_name(const Value& v) {
  switch (v.var().index()) {
    case 0: return "Undefined";
    case 1: return "NoneType";
    case 2: return "bool";
    case 3: return "int";
    case 4: return "float";
    case 5: return "str";
    case 6: return v.l()->tuple ? "tuple" : "list";
    case 7:
      return v.d()->kind == DictData::Kind::kDict        ? "dict"
             : v.d()->kind == DictData::Kind::kNamespace ? "Namespace"
                                                         : "LoopContext";
    default: return "function";
  }
}

static std::string repr_string(const std::string& s) {
  const bool has_sq = s.find('\'') != std::string::npos;
  const bool has_dq = s.find('"') != std::string::npos;
  const char q = (has_sq && !has_dq) ? '"' : '\'';
  std::string out(1, q);
  size_t i = 0;
  while (i < s.size()) {
    const uint32_t cp = utf8_next(s, i);
    char buf[16];
    if (cp == uint32_t(q) || cp == '\\') {
      out += '\\';
      out += char(cp);
    } else if (cp == '\n') {
      out += "\\n";
    } else if (cp == '\r') {
      out += "\\r";
    } else if (cp == '\t') {
      out += "\\t";
    } else if (cp < 0x20 || cp == 0x7F || (cp >= 0x80 && cp <= 0xA0) || cp == 0xAD) {
      std::snprintf(buf, sizeof buf, "\\x%02x", cp);
      out += buf;
    } else if (cp >= 0xDC80 && cp <= 0xDCFF) {
      std::snprintf(buf, sizeof buf, "\\udc%02x", cp - 0xDC00);
      out += buf;
    } else if (cp == 0x2028 || cp == 0x2029 || (cp >= 0x2000 && cp <= 0x200F) || cp == 0xFEFF) {
      std::snprintf(buf, sizeof buf, "\\u%04x", cp);
      out += buf;
    } else {
      utf8_append(out, cp);
    }
  }
  out += q;
  return out;
}

std::string py_repr(const Value& v, int depth) {
  if (depth > kMaxDepth) too_deep();
  switch (v.var().index()) {
    case 0: return "Undefined";
    case 1: return "None";
    case 2: return v.b() ? "True" : "False";
    case 3: return std::to_string(v.i());
    case 4: return py_float_repr(v.f());
    case 5: return repr_string(v.s());
    case 6: {
      const auto& l = *v.l();
      std::string out = l.tuple ? "(" : "[";
      for (size_t k = 0; k < l.items.size(); ++k) {
        if (k) out += ", ";
        out += py_repr(l.items[k], depth + 1);
      }
      if (l.tuple && l.items.size() == 1) out += ",";
      out += l.tuple ? ")" : "]";
      return out;
    }
    case 7: {
      const auto& d = *v.d();
      std::string out = "{";
      for (size_t k = 0; k < d.items.size(); ++k) {
        if (k) out += ", ";
        out += repr_string(d.items[k].first) + ": " + py_repr(d.items[k].second, depth + 1);
      }
      out += "}";
      if (d.kind == DictData::Kind::kNamespace) return "<Namespace " + out + ">";
      if (d.kind == DictData::Kind::kLoop) return "<LoopContext>";
      return out;
    }
    default: return "<function " + v.fn()->name + ">";
  }
}

std::string py_str(const Value& v, int depth) {
  if (v.is_undefined()) return "";
  if (v.is_string()) return v.s();
  return py_repr(v, depth);
}

static void json_string(std::string& out, const std::string& s) {
  out += '"';
  size_t i = 0;
  while (i < s.size()) {
    const auto c = static_cast<unsigned char>(s[i]);
    if (c >= 0x80) {
      const size_t start = i;
      const uint32_t cp = utf8_next(s, i);
      if (cp >= 0xDC80 && cp <= 0xDCFF) {
        char buf[8];
        std::snprintf(buf, sizeof buf, "\\udc%02x", cp - 0xDC00);
        out += buf;
      } else {
        out.append(s, start, i - start);
      }
      continue;
    }
    ++i;
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      case '\b': out += "\\b"; break;
      case '\f': out += "\\f"; break;
      default:
        if (c < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof buf, "\\u%04x", c);
          out += buf;
        } else {
          out += char(c);
        }
    }
  }
  out += '"';
}

std::string py_json_dumps(const Value& v, int indent, const std::string& item_sep,
                          const std::string& key_sep, bool sort_keys, int depth, int level) {
  if (depth > kMaxDepth) too_deep();
  auto newline = [&](int lvl) {
    return indent >= 0 ? "\n" + std::string(size_t(indent) * size_t(lvl), ' ') : std::string();
  };
  switch (v.var().index()) {
    case 0:
      throw_error(ErrorCode::kInvalidArgument, "chat template: Object of type Undefined is not JSON serializable");
    case 1: return "null";
    case 2: return v.b() ? "true" : "false";
    case 3: return std::to_string(v.i());
    case 4: {
      const double d = v.f();
      if (std::isnan(d)) return "NaN";
      if (std::isinf(d)) return d < 0 ? "-Infinity" : "Infinity";
      return py_float_repr(d);
    }
    case 5: {
      std::string out;
      json_string(out, v.s());
      return out;
    }
    case 6: {
      const auto& l = *v.l();
      if (l.items.empty()) return "[]";
      std::string out = "[";
      for (size_t k = 0; k < l.items.size(); ++k) {
        if (k) out += item_sep;
        out += newline(level + 1);
        out += py_json_dumps(l.items[k], indent, item_sep, key_sep, sort_keys, depth + 1, level + 1);
      }
      out += newline(level);
      out += "]";
      return out;
    }
    case 7: {
      const auto& d = *v.d();
      if (d.kind != DictData::Kind::kDict) {
        throw_error(ErrorCode::kInvalidArgument,
                    "chat template: Object of type " + type_name(v) + " is not JSON serializable");
      }
      if (d.items.empty()) return "{}";
      std::vector<size_t> order(d.items.size());
      for (size_t k = 0; k < order.size(); ++k) order[k] = k;
      if (sort_keys) {
        std::stable_sort(order.begin(), order.end(),
                         [&](size_t a, size_t b) { return d.items[a].first < d.items[b].first; });
      }
      std::string out = "{";
      for (size_t k = 0; k < order.size(); ++k) {
        if (k) out += item_sep;
        out += newline(level + 1);
        json_string(out, d.items[order[k]].first);
        out += key_sep;
        out += py_json_dumps(d.items[order[k]].second, indent, item_sep, key_sep, sort_keys, depth + 1,
                             level + 1);
      }
      out += newline(level);
      out += "}";
      return out;
    }
    default:
      throw_error(ErrorCode::kInvalidArgument, "chat template: Object of type function is not JSON serializable");
  }
}

bool py_equal(const Value& a, const Value& b, int depth) {
  if (depth > kMaxDepth) too_deep();
  if (a.is_number() && b.is_number()) {
    if (a.is_float() || b.is_float()) return a.as_double() == b.as_double();
    const int64_t x = a.is_bool() ? int64_t(a.b()) : a.i();
    const int64_t y = b.is_bool() ? int64_t(b.b()) : b.i();
    return x == y;
  }
  if (a.var().index() != b.var().index()) return false;
  switch (a.var().index()) {
    case 0:
    case 1: return true;
    case 5: return a.s() == b.s();
    case 6: {
      const auto& x = *a.l();
      const auto& y = *b.l();
      if (x.tuple != y.tuple || x.items.size() != y.items.size()) return false;
      for (size_t k = 0; k < x.items.size(); ++k) {
        if (!py_equal(x.items[k], y.items[k], depth + 1)) return false;
      }
      return true;
    }
    case 7: {
      if (a.d() == b.d()) return true;
      const auto& x = *a.d();
      const auto& y = *b.d();
      if (x.kind != DictData::Kind::kDict || y.kind != DictData::Kind::kDict) return false;
      if (x.items.size() != y.items.size()) return false;
      for (const auto& [k, v] : x.items) {
        const Value* o = y.find(k);
        if (!o || !py_equal(v, *o, depth + 1)) return false;
      }
      return true;
    }
    case 8: return a.fn() == b.fn();
    default: return false;
  }
}

}  // namespace oxi::jinja
