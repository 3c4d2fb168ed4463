// Internal: the value model of the Jinja interpreter. Python semantics (jinja2 on CPython):
// None/True/False, int (64-bit here; overflow is an error), float, str (UTF-8), list/tuple,
// dict (insertion ordered, string keys), namespace, callables, and Undefined.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <unordered_map>
#include <utility>
#include <variant>
#include <vector>

#include <nlohmann/json.hpp>

namespace oxi::jinja {

class Value;
struct ListData;
struct DictData;
struct Function;
using ListPtr = std::shared_ptr<ListData>;
using DictPtr = std::shared_ptr<DictData>;
using FuncPtr = std::shared_ptr<Function>;

struct Undef {};
struct NoneT {};

class Value {
 public:
  using Var = std::variant<Undef, NoneT, bool, int64_t, double, std::string, ListPtr, DictPtr, FuncPtr>;
  Value() : v_(Undef{}) {}
  Value(NoneT n) : v_(n) {}
  Value(bool b) : v_(b) {}
  Value(int v) : v_(int64_t(v)) {}
  Value(int64_t v) : v_(v) {}
  Value(double v) : v_(v) {}
  Value(std::string s) : v_(std::move(s)) {}
  Value(const char* s) : v_(std::string(s)) {}
  Value(ListPtr l) : v_(std::move(l)) {}
  Value(DictPtr d) : v_(std::move(d)) {}
  Value(FuncPtr f) : v_(std::move(f)) {}

  static Value none() { return Value(NoneT{}); }
  static Value list(std::vector<Value> items = {}, bool tuple = false);
  static Value dict();

  bool is_undefined() const { return std::holds_alternative<Undef>(v_); }
  bool is_none() const { return std::holds_alternative<NoneT>(v_); }
  bool is_bool() const { return std::holds_alternative<bool>(v_); }
  bool is_int() const { return std::holds_alternative<int64_t>(v_); }
  bool is_float() const { return std::holds_alternative<double>(v_); }
  bool is_number() const { return is_int() || is_float() || is_bool(); }
  bool is_string() const { return std::holds_alternative<std::string>(v_); }
  bool is_list() const { return std::holds_alternative<ListPtr>(v_); }
  bool is_dict() const { return std::holds_alternative<DictPtr>(v_); }
  bool is_func() const { return std::holds_alternative<FuncPtr>(v_); }
  bool is_mapping() const;   // a real dict (not a namespace / loop object)

  bool b() const { return std::get<bool>(v_); }
  int64_t i() const { return std::get<int64_t>(v_); }
  double f() const { return std::get<double>(v_); }
  const std::string& s() const { return std::get<std::string>(v_); }
  const ListPtr& l() const { return std::get<ListPtr>(v_); }
  const DictPtr& d() const { return std::get<DictPtr>(v_); }
  const FuncPtr& fn() const { return std::get<FuncPtr>(v_); }
  double as_double() const;  // int/float/bool

  bool truthy() const;
  const Var& var() const { return v_; }

 private:
  Var v_;
};

struct ListData {
  std::vector<Value> items;
  bool tuple = false;
};

struct DictData {
  enum class Kind { kDict, kNamespace, kLoop };
  Kind kind = Kind::kDict;
  std::vector<std::pair<std::string, Value>> items;
  std::unordered_map<std::string, size_t> index;

  const Value* find(const std::string& k) const {
    auto it = index.find(k);
    return it == index.end() ? nullptr : &items[it->second].second;
  }
  void set(const std::string& k, Value v) {
    auto it = index.find(k);
    if (it != index.end()) {
      items[it->second].second = std::move(v);
    } else {
      index.emplace(k, items.size());
      items.emplace_back(k, std::move(v));
    }
  }
};

struct CallArgs {
  std::vector<Value> pos;
  std::vector<std::pair<std::string, Value>> kw;
  const Value* kwarg(const std::string& k) const {
    for (auto& p : kw) {
      if (p.first == k) return &p.second;
    }
    return nullptr;
  }
};

class Interp;
struct Function {
  std::string name;
  std::function<Value(Interp&, CallArgs&)> call;
  std::shared_ptr<bool> alive;  // macros/callers: false once their defining scope is gone
};

inline Value Value::list(std::vector<Value> items, bool tuple) {
  auto l = std::make_shared<ListData>();
  l->items = std::move(items);
  l->tuple = tuple;
  return Value(l);
}
inline Value Value::dict() { return Value(std::make_shared<DictData>()); }

// Conversions and Python-style formatting (jinja_value.cpp).
Value from_json(const nlohmann::ordered_json& j, int depth = 0);
std::string py_str(const Value& v, int depth = 0);    // str(v)
std::string py_repr(const Value& v, int depth = 0);   // repr(v)
std::string py_float_repr(double d);
std::string type_name(const Value& v);
// json.dumps(v, ensure_ascii=False, indent, separators, sort_keys)
std::string py_json_dumps(const Value& v, int indent /* -1: none */, const std::string& item_sep,
                          const std::string& key_sep, bool sort_keys, int depth = 0,
                          int level = 0);
bool py_equal(const Value& a, const Value& b, int depth = 0);
// Python whitespace (str.isspace) over UTF-8.
bool is_py_space_cp(uint32_t cp);
// UTF-8 helpers: decode code point starting at s[i] (advances i). Invalid bytes decode as
// themselves (one byte each), which keeps every operation total.
uint32_t utf8_next(const std::string& s, size_t& i);
void utf8_append(std::string& out, uint32_t cp);

}  // namespace oxi::jinja
