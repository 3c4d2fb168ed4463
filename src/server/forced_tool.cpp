// Forced tool calls per family (see forced_tool.h).
#include "server/forced_tool.h"

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <utility>

#include "core/error.h"
#include "sampling/gbnf.h"

namespace oxi {

using json = nlohmann::json;

// ---- UnionConstraint --------------------------------------------------------------------------
bool UnionConstraint::accepts(std::string_view bytes) const {
  return std::any_of(alts_.begin(), alts_.end(), [&](const auto& a) { return a->accepts(bytes); });
}

bool UnionConstraint::advance(std::string_view bytes) {
  // An alternative that rejects the bytes is left unchanged by advance; it is dropped unless none
  // took them (then the union is unchanged too).
  std::vector<bool> ok(alts_.size());
  bool any = false;
  for (size_t i = 0; i < alts_.size(); ++i) any |= (ok[i] = alts_[i]->advance(bytes));
  if (!any) return false;
  size_t k = 0;
  for (size_t i = 0; i < alts_.size(); ++i)
    if (ok[i]) alts_[k++] = std::move(alts_[i]);
  alts_.resize(k);
  return true;
}

bool UnionConstraint::complete() const {
  return std::any_of(alts_.begin(), alts_.end(), [](const auto& a) { return a->complete(); });
}

bool UnionConstraint::finished() const {
  // End-of-generation only once no live alternative could still take more text.
  return !alts_.empty() && std::all_of(alts_.begin(), alts_.end(), [](const auto& a) { return a->finished(); });
}

// ---- Gemma 4 call grammar ---------------------------------------------------------------------
namespace {

// A GBNF string literal for raw bytes (escapes the quote, the backslash and control bytes).
std::string lit(std::string_view s) {
  std::string o = "\"";
  for (unsigned char c : s) {
    if (c == '"' || c == '\\') {
      o += '\\';
      o += static_cast<char>(c);
    } else if (c < 0x20 || c == 0x7f) {
      char b[8];
      std::snprintf(b, sizeof b, "\\x%02X", c);
      o += b;
    } else {
      o += static_cast<char>(c);
    }
  }
  return o + "\"";
}

constexpr std::string_view kQuote = "<|\"|>";

// A bare key as the template writes it (format_argument with escape_keys=False), or a quoted one
// when it holds characters the call parser would stop at.
std::string gemma_key(const std::string& k) {
  const bool bare = !k.empty() && std::all_of(k.begin(), k.end(), [](unsigned char c) {
    return std::isalnum(c) || c == '_' || c == '-' || c == '.' || c >= 0x80;
  });
  return bare ? k : std::string(kQuote) + k + std::string(kQuote);
}

// Jinja's dictsort: keys compared case-insensitively (ties by the exact key, for a total order).
std::vector<std::string> dictsort_keys(const json& obj) {
  std::vector<std::string> keys;
  for (auto it = obj.begin(); it != obj.end(); ++it) keys.push_back(it.key());
  auto lower = [](std::string s) {
    for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    return s;
  };
  std::sort(keys.begin(), keys.end(), [&](const std::string& a, const std::string& b) {
    const std::string la = lower(a), lb = lower(b);
    return la != lb ? la < lb : a < b;
  });
  return keys;
}

// A JSON value written in Gemma's argument syntax (an enum/const member).
std::string gemma_text(const json& v) {
  if (v.is_string()) return std::string(kQuote) + v.get<std::string>() + std::string(kQuote);
  if (v.is_boolean()) return v.get<bool>() ? "true" : "false";
  if (v.is_null()) return "null";
  if (v.is_number()) return v.dump();
  std::string o;
  if (v.is_array()) {
    o = "[";
    for (size_t i = 0; i < v.size(); ++i) o += (i ? "," : "") + gemma_text(v[i]);
    return o + "]";
  }
  o = "{";
  bool first = true;
  for (const auto& k : dictsort_keys(v)) {
    o += (first ? "" : ",") + gemma_key(k) + ":" + gemma_text(v[k]);
    first = false;
  }
  return o + "}";
}

// The rules every grammar shares: any Gemma value, strings, numbers. Integers up to 18 digits and
// exponents up to 2 keep every number inside int64 / double (the call parser reads a number that
// overflows as a string).
constexpr const char* kBaseRules =
    "gstr ::= \"<|\\\"|>\" gchar* \"<\"* \"<|\\\"|>\"\n"
    "gchar ::= [^<] | \"<\"+ [^<|]\n"
    "gint ::= \"-\"? ( \"0\" | [1-9] [0-9]{0,17} )\n"
    "gnum ::= gint ( \".\" [0-9]+ )? ( [eE] [-+]? [0-9]{1,2} )?\n"
    "gbool ::= \"true\" | \"false\"\n"
    "gkey ::= [A-Za-z_] [A-Za-z0-9_]*\n"
    "gobj ::= \"{\" ( gkey \":\" gvalue ( \",\" gkey \":\" gvalue )* )? \"}\"\n"
    "garr ::= \"[\" ( gvalue ( \",\" gvalue )* )? \"]\"\n"
    "gvalue ::= gstr | gnum | gbool | \"null\" | gobj | garr\n";

class GemmaGrammar {
 public:
  std::string rules;

  // A GBNF expression matching the values `s` allows, in Gemma syntax.
  std::string value(const json& s, int depth) {
    // A budget on the walk and the text: type unions and anyOf revisit subschemas, so a hostile
    // schema could otherwise grow the grammar exponentially before parse_gbnf's own limits see it.
    if (++calls_ > kMaxCalls || rules.size() > kMaxText) {
      throw_error(ErrorCode::kInvalidArgument, "the tools' parameter schemas are too large to enforce as a forced call");
    }
    if (!s.is_object() || depth > 24) return "gvalue";
    if (const auto e = s.find("enum"); e != s.end() && e->is_array() && !e->empty()) {
      std::string alts;
      for (const auto& v : *e) alts += (alts.empty() ? "" : " | ") + lit(gemma_text(v));
      return "( " + alts + " )";
    }
    if (const auto c = s.find("const"); c != s.end()) return lit(gemma_text(*c));
    for (const char* k : {"anyOf", "oneOf"}) {
      if (const auto a = s.find(k); a != s.end() && a->is_array() && !a->empty()) {
        std::string alts;
        for (const auto& sub : *a) alts += (alts.empty() ? "" : " | ") + value(sub, depth + 1);
        return "( " + alts + " )";
      }
    }
    const auto t = s.find("type");
    if (t == s.end()) return s.contains("properties") ? object(s, depth) : "gvalue";
    if (t->is_array()) {
      std::string alts;
      for (const auto& one : *t) {
        if (!one.is_string()) return "gvalue";
        json sub = s;
        sub["type"] = one;
        alts += (alts.empty() ? "" : " | ") + value(sub, depth + 1);
      }
      return alts.empty() ? "gvalue" : "( " + alts + " )";
    }
    if (!t->is_string()) return "gvalue";
    const std::string type = t->get<std::string>();
    if (type == "string") return string(s);
    if (type == "integer") return "gint";
    if (type == "number") return "gnum";
    if (type == "boolean") return "gbool";
    if (type == "null") return "\"null\"";
    if (type == "array") {
      const auto it = s.find("items");
      const std::string item = it != s.end() ? value(*it, depth + 1) : "gvalue";
      const std::string more = item + " ( \",\" " + item + " )*";
      const bool nonempty = s.value("minItems", 0) >= 1;
      return "( \"[\" " + (nonempty ? more : "( " + more + " )?") + " \"]\" )";
    }
    if (type == "object") return s.contains("properties") ? object(s, depth) : "gobj";
    return "gvalue";
  }

  // An object with its listed properties in dictsort order; required ones present, optional
  // ones may be left out. rest_i (properties i.. after one already written) is a rule of its own
  // so the grammar stays linear in the number of properties.
  std::string object(const json& s, int depth) {
    const json& props = s["properties"];
    if (!props.is_object() || props.empty()) return "gobj";
    std::vector<std::string> req;
    if (const auto r = s.find("required"); r != s.end() && r->is_array()) {
      for (const auto& x : *r)
        if (x.is_string()) req.push_back(x.get<std::string>());
    }
    const std::vector<std::string> keys = dictsort_keys(props);
    const size_t n = keys.size();
    std::vector<std::string> kv(n);
    std::vector<bool> must(n);
    for (size_t i = 0; i < n; ++i) {
      kv[i] = lit(gemma_key(keys[i]) + ":") + " " + value(props[keys[i]], depth + 1);
      must[i] = std::find(req.begin(), req.end(), keys[i]) != req.end();
    }
    const std::string id = "o" + std::to_string(next_++);
    // rest[i]: the properties from i on, each preceded by a comma.
    std::vector<std::string> rest(n + 1);
    for (size_t i = n; i-- > 0;) {
      const std::string tail = rest[i + 1].empty() ? "" : " " + rest[i + 1];
      const std::string body = must[i] ? "\",\" " + kv[i] + tail : "( \",\" " + kv[i] + " )?" + tail;
      rest[i] = id + "-r" + std::to_string(i);
      rules += rest[i] + " ::= " + body + "\n";
    }
    // The first property written: any optional one up to (and including) the first required one.
    std::string alts;
    bool all_optional = true;
    for (size_t i = 0; i < n; ++i) {
      alts += (alts.empty() ? "" : " | ") + kv[i] + (i + 1 < n ? " " + rest[i + 1] : "");
      if (must[i]) {
        all_optional = false;
        break;
      }
    }
    rules += id + " ::= \"{\" ( " + alts + " )" + (all_optional ? "?" : "") + " \"}\"\n";
    return id;
  }

 private:
  static constexpr int kMaxCalls = 20000;
  static constexpr size_t kMaxText = 256 * 1024;
  int next_ = 0;
  int calls_ = 0;

  static std::string string(const json& s) {
    const int lo = std::max(0, s.value("minLength", 0));
    const int hi = s.contains("maxLength") && s["maxLength"].is_number_integer() ? s["maxLength"].get<int>() : -1;
    if (lo == 0 && hi < 0) return "gstr";
    // Counted strings take no '<' (one character per repetition); a bound over 256 is not enforced.
    std::string rep = "[^<]{" + std::to_string(std::min(lo, 256)) + ",";
    if (hi >= 0 && hi <= 256) rep += std::to_string(std::max(hi, std::min(lo, 256)));
    rep += "}";
    return "( \"<|\\\"|>\" " + rep + " \"<|\\\"|>\" )";
  }
};

}  // namespace

std::string gemma4_call_grammar(const json& tools) {
  GemmaGrammar g;
  std::string root;
  for (const auto& t : tools) {
    const json& fn = t["function"];
    const std::string name = fn["name"].get<std::string>();
    std::string args = "\"{}\"";  // no parameters: an empty argument list
    if (const auto p = fn.find("parameters"); p != fn.end() && p->is_object()) {
      args = p->contains("properties") && (*p)["properties"].is_object() && !(*p)["properties"].empty()
                 ? g.object(*p, 0)
                 : (p->contains("properties") ? "\"{}\"" : "gobj");
    }
    root += (root.empty() ? "" : " | ") + ("( " + lit("<|tool_call>call:" + name) + " " + args + " " + lit("<tool_call|>") + " )");
  }
  return "root ::= " + root + "\n" + g.rules + kBaseRules;
}

namespace {

// A forced call's arguments take only the keys the schema lists, as the Gemma grammar does (the
// JSON automaton already restricts objects with properties; `properties: {}` would be a free
// object without this): objects with `properties` and no `additionalProperties` get it false.
json closed(json s, int depth = 0) {
  if (!s.is_object() || depth > 32) return s;
  if (s.contains("properties") && s["properties"].is_object()) {
    if (!s.contains("additionalProperties")) s["additionalProperties"] = false;
    for (auto& [k, v] : s["properties"].items()) v = closed(v, depth + 1);
  }
  if (s.contains("items")) s["items"] = closed(s["items"], depth + 1);
  for (const char* k : {"anyOf", "oneOf"}) {
    if (s.contains(k) && s[k].is_array())
      for (auto& v : s[k]) v = closed(v, depth + 1);
  }
  return s;
}

}  // namespace

constexpr size_t kMaxForcedTools = 128;

std::shared_ptr<TextConstraint> forced_tool_constraint(const json& tools, const std::string& choice, ChatFormat format,
                                                       const std::string& prefix) {
  if (format == ChatFormat::kPlain) return nullptr;
  json picked = json::array();
  for (const auto& t : tools) {
    if (choice == "required" || t["function"]["name"].get<std::string>() == choice) picked.push_back(t);
  }
  if (picked.empty()) throw_error(ErrorCode::kInvalidArgument, "tool_choice names a function that is not in 'tools'");
  // Each candidate is checked on every sampled byte (Qwen: one automaton each): bounded as OpenAI
  // bounds `tools`.
  if (picked.size() > kMaxForcedTools) {
    throw_error(ErrorCode::kInvalidArgument, "tool_choice 'required' with more than " + std::to_string(kMaxForcedTools) +
                                                 " tools: name one function");
  }
  if (format == ChatFormat::kGemma4) {
    return std::make_shared<GbnfConstraint>(parse_gbnf(gemma4_call_grammar(picked)), prefix);
  }
  // Qwen 3.5: one automaton per candidate, each with its own name and arguments schema.
  std::vector<std::unique_ptr<TextConstraint>> alts;
  for (const auto& t : picked) {
    const json& fn = t["function"];
    json args = {{"type", "object"}};
    if (fn.contains("parameters") && fn["parameters"].is_object()) args = closed(fn["parameters"]);
    const json schema = {{"type", "object"},
                         {"properties", {{"name", {{"const", fn["name"]}}}, {"arguments", args}}},
                         {"required", {"name", "arguments"}}};
    alts.push_back(std::make_unique<FramedJsonConstraint>(prefix + "<tool_call>\n", schema, "</tool_call>"));
  }
  if (alts.size() == 1) return std::shared_ptr<TextConstraint>(std::move(alts[0]));
  return std::make_shared<UnionConstraint>(std::move(alts));
}

}  // namespace oxi
