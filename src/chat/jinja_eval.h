// Internal: the evaluator of the Jinja interpreter.
#pragma once

#include <string>
#include <unordered_map>
#include <vector>

#include "chat/jinja.h"
#include "chat/jinja_ast.h"
#include "chat/jinja_value.h"

namespace oxi::jinja {

[[noreturn]] void rt_error(const std::string& msg);

struct Frame {
  explicit Frame(Frame* p) : parent(p) {}
  ~Frame() { *alive = false; }
  Frame(const Frame&) = delete;
  Frame& operator=(const Frame&) = delete;
  std::unordered_map<std::string, Value> vars;
  Frame* parent;
  std::shared_ptr<bool> alive = std::make_shared<bool>(true);
};

// Names known at parse time (an unknown filter/test is a template error, as in jinja2).
bool is_known_filter(const std::string& name);
bool is_known_test(const std::string& name);

class Interp {
 public:
  explicit Interp(const JinjaLimits& limits);
  ~Interp();  // breaks reference cycles through namespaces (`set ns.self = ns`)
  void track_namespace(const DictPtr& d) { namespaces_.push_back(d); }

  enum class Flow { kNormal, kBreak, kContinue };
  Flow exec(const Body& body, Frame& f, std::string& out);
  Value eval(const Expr& e, Frame& f);

  Value call(const Value& callee, CallArgs& a);
  Value get_attr(const Value& obj, const std::string& name);
  Value get_item(const Value& obj, const Value& key);
  std::vector<Value> iterate(const Value& v);
  Value method(const Value& obj, const std::string& name);  // built-in methods (or undefined)
  bool contains(const Value& container, const Value& item);
  int order(const Value& l, const Value& r, int depth = 0);
  Value apply_filter(const std::string& name, const Value& v, CallArgs& a);
  bool apply_test(const std::string& name, const Value& v, CallArgs& a);
  Value call_macro(const Stmt& m, Frame& parent, CallArgs& a, const Value& unused);

  void step();
  void check_size(size_t n) const;
  // check_size(n), and n counted against limits().max_alloc_bytes for the whole render.
  void charge(size_t n);
  // Bytes that copying the items of `l` costs (strings are copied by value; lists / dicts shared).
  static size_t copy_bytes(const ListData& l);
  const JinjaLimits& limits() const { return limits_; }
  int line() const { return cur_line_; }
  static const std::unordered_map<std::string, Value>& globals();

  struct DepthGuard {
    explicit DepthGuard(Interp& in);
    ~DepthGuard();
    Interp& in_;
  };

 private:
  Flow exec_stmt(const Stmt& s, Frame& f, std::string& out);
  Flow exec_for(const Stmt& s, Frame& f, std::string& out);
  void emit(std::string& out, const std::string& s);
  Value lookup(const std::string& name, Frame& f);
  void assign(const Target& t, const Value& v, Frame& f);
  Value apply_block_filter(const Expr& chain, const Value& v, Frame& f);
  Value make_macro(const Stmt& s, Frame& def);
  Value make_caller(const Stmt& s, Frame& site);
  Value slice(const Value& obj, const Value* a, const Value* b, const Value* c);
  Value binop(const std::string& op, const Value& l, const Value& r);
  bool compare(const std::string& op, const Value& l, const Value& r);

  JinjaLimits limits_;
  std::vector<DictPtr> namespaces_;
  uint64_t steps_ = 0;
  size_t allocated_ = 0;
  size_t depth_ = 0;
  int loop_depth_ = 0;
  int cur_line_ = 0;
};

}  // namespace oxi::jinja
