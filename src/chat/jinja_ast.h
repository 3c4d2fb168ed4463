// Internal: lexer tokens and syntax tree of the Jinja interpreter.
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "chat/jinja_value.h"

namespace oxi::jinja {

enum class EK {
  kConst, kName, kAttr, kItem, kSlice, kCall, kFilter, kTest, kNeg, kPos, kNot, kBin, kAnd, kOr,
  kCmp, kCond, kList, kTuple, kDict
};

struct Expr;
using ExprP = std::unique_ptr<Expr>;

struct Expr {
  EK k = EK::kConst;
  int line = 0;
  Value val;                       // kConst
  std::string name;                // kName, kAttr (attribute), kFilter/kTest name, kBin op
  std::vector<ExprP> args;         // children (see parser for the layout per kind; may hold null)
  std::vector<std::pair<std::string, ExprP>> kwargs;  // kCall/kFilter/kTest keyword args
  std::vector<std::string> ops;    // kCmp operators
  bool negate = false;             // kTest: `is not`
  int height = 1;                  // tree height (bounded by the parser: recursion-safe)
};

// Assignment target: a name, a tuple of names, or `ns.attr`.
struct Target {
  std::vector<std::string> names;
  bool tuple = false;
  std::string attr;  // non-empty: names[0].attr
};

enum class SK { kText, kPrint, kIf, kFor, kSet, kSetBlock, kMacro, kCallBlock, kFilterBlock, kBreak,
                kContinue, kWith, kScope };

struct Stmt;
using StmtP = std::unique_ptr<Stmt>;
using Body = std::vector<StmtP>;

struct Stmt {
  SK k = SK::kText;
  int line = 0;
  std::string text;                                  // kText
  ExprP expr;                                        // kPrint, kSet, kFor (iterable), kCallBlock
  ExprP cond;                                        // kFor filter; kFilterBlock/kSetBlock filter
  std::vector<std::pair<ExprP, Body>> branches;      // kIf (cond, body) pairs
  Body body, else_body;
  Target target;                                     // kFor, kSet, kSetBlock
  bool recursive = false;                            // kFor
  // kMacro / kCallBlock parameters
  std::string name;
  std::vector<std::string> params;
  std::vector<ExprP> defaults;                       // parallel to params (null: required)
  // kWith assignments
  std::vector<std::pair<Target, ExprP>> assigns;
};

struct Program {
  Body body;
};

// The name the block filter placeholder binds (for `{% filter %}` and `{% set x | f %}`).
inline const char* kBlockVar = "\x01block";

std::shared_ptr<Program> parse_template(const std::string& source, size_t max_depth);

}  // namespace oxi::jinja
