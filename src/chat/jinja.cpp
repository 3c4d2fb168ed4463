// Public API of the Jinja interpreter: ChatTemplate, render_chat.
#include "chat/jinja.h"

#include <new>

#include "chat/jinja_ast.h"
#include "chat/jinja_eval.h"
#include "core/error.h"
#include "core/json_limits.h"

namespace oxi {

namespace {

using jinja::Body;
using jinja::EK;
using jinja::Expr;
using jinja::Stmt;

// jinja2 rejects unknown filters and tests when compiling, even in branches never taken.
void check_expr(const Expr* e) {
  if (!e) return;
  if (e->k == EK::kFilter && !jinja::is_known_filter(e->name)) {
    throw_error(ErrorCode::kFormat, "chat template: line " + std::to_string(e->line) + ": no filter named '" + e->name + "'");
  }
  if (e->k == EK::kTest && !jinja::is_known_test(e->name)) {
    throw_error(ErrorCode::kFormat, "chat template: line " + std::to_string(e->line) + ": no test named '" + e->name + "'");
  }
  for (const auto& a : e->args) check_expr(a.get());
  for (const auto& kw : e->kwargs) check_expr(kw.second.get());
}

void check_body(const Body& body) {
  for (const auto& s : body) {
    check_expr(s->expr.get());
    check_expr(s->cond.get());
    for (const auto& br : s->branches) {
      check_expr(br.first.get());
      check_body(br.second);
    }
    check_body(s->body);
    check_body(s->else_body);
    for (const auto& d : s->defaults) check_expr(d.get());
    for (const auto& as : s->assigns) check_expr(as.second.get());
  }
}

}  // namespace

ChatTemplate::ChatTemplate(const std::string& source, JinjaLimits limits) : limits_(limits) {
  try {
    prog_ = jinja::parse_template(source, limits.max_depth);
    check_body(prog_->body);
  } catch (const Error&) {
    throw;
  } catch (const std::bad_alloc&) {
    throw_error(ErrorCode::kOutOfMemory, "chat template: out of memory while parsing");
  } catch (const std::exception& e) {
    throw_error(ErrorCode::kFormat, std::string("chat template: ") + e.what());
  }
}

ChatTemplate::~ChatTemplate() = default;
ChatTemplate::ChatTemplate(ChatTemplate&&) noexcept = default;
ChatTemplate& ChatTemplate::operator=(ChatTemplate&&) noexcept = default;

std::string ChatTemplate::render(const nlohmann::ordered_json& context) const {
  if (!context.is_object() && !context.is_null()) {
    throw_error(ErrorCode::kInvalidArgument, "chat template: the render context must be a JSON object");
  }
  jinja::Interp in(limits_);
  jinja::Frame ctx(nullptr);
  std::string out;
  try {
    if (context.is_object()) {
      for (auto it = context.begin(); it != context.end(); ++it) ctx.vars[it.key()] = jinja::from_json(it.value());
    }
    jinja::Frame top(&ctx);
    in.exec(prog_->body, top, out);
  } catch (const Error& e) {
    if (e.code() == ErrorCode::kInvalidArgument && in.line() > 0 &&
        std::string(e.what()).rfind("chat template: line ", 0) != 0) {
      // Add the line of the statement being run.
      std::string msg = e.what();
      const std::string prefix = "chat template: ";
      if (msg.rfind(prefix, 0) == 0) msg = msg.substr(prefix.size());
      throw_error(e.code(), prefix + "line " + std::to_string(in.line()) + ": " + msg);
    }
    throw;
  } catch (const std::bad_alloc&) {
    throw_error(ErrorCode::kOutOfMemory, "chat template: out of memory while rendering");
  } catch (const std::exception& e) {
    throw_error(ErrorCode::kInvalidArgument, std::string("chat template: ") + e.what());
  }
  return out;
}

std::string ChatTemplate::render(const nlohmann::json& context) const {
  return render(nlohmann::ordered_json::parse(context.dump()));
}

std::string render_chat(const ChatTemplate& tmpl, const nlohmann::ordered_json& messages,
                        const ChatRenderOptions& opt) {
  nlohmann::ordered_json ctx = nlohmann::ordered_json::object();
  ctx["messages"] = messages;
  const bool has_tools = !opt.tools.is_null() && !(opt.tools.is_array() && opt.tools.empty());
  ctx["tools"] = has_tools ? opt.tools : nlohmann::ordered_json();
  ctx["documents"] = nullptr;
  ctx["add_generation_prompt"] = opt.add_generation_prompt;
  ctx["bos_token"] = opt.bos_token;
  ctx["eos_token"] = opt.eos_token;
  if (opt.enable_thinking >= 0) ctx["enable_thinking"] = opt.enable_thinking != 0;
  if (opt.extra.is_object()) {
    for (auto it = opt.extra.begin(); it != opt.extra.end(); ++it) ctx[it.key()] = it.value();
  }
  return tmpl.render(ctx);
}

std::string render_chat(const std::string& template_source, const nlohmann::ordered_json& messages,
                        const ChatRenderOptions& opt) {
  ChatTemplate t(template_source);
  return render_chat(t, messages, opt);
}

nlohmann::ordered_json normalize_tool_call_arguments(const nlohmann::ordered_json& messages) {
  nlohmann::ordered_json out = messages;
  if (!out.is_array()) return out;
  for (auto& m : out) {
    if (!m.is_object() || !m.contains("tool_calls") || !m["tool_calls"].is_array()) continue;
    for (auto& tc : m["tool_calls"]) {
      if (!tc.is_object()) continue;
      auto* fn = tc.contains("function") && tc["function"].is_object() ? &tc["function"] : &tc;
      if (!fn->contains("arguments") || !(*fn)["arguments"].is_string()) continue;
      // Too deep to copy and render safely (a request's body passed the depth check with the
      // nesting hidden in this string): left as the string.
      const std::string& text = (*fn)["arguments"].get_ref<const std::string&>();
      if (json_too_deep(text)) continue;
      auto parsed = nlohmann::ordered_json::parse(text, nullptr, false);
      if (!parsed.is_discarded() && parsed.is_object()) (*fn)["arguments"] = std::move(parsed);
    }
  }
  return out;
}

nlohmann::ordered_json map_strings(const nlohmann::ordered_json& v,
                                   const std::function<std::string(std::string_view)>& f) {
  if (v.is_string()) return f(v.get_ref<const std::string&>());
  if (v.is_array()) {
    nlohmann::ordered_json out = nlohmann::ordered_json::array();
    for (const auto& x : v) out.push_back(map_strings(x, f));
    return out;
  }
  if (v.is_object()) {
    nlohmann::ordered_json out = nlohmann::ordered_json::object();
    for (auto it = v.begin(); it != v.end(); ++it) out[f(it.key())] = map_strings(it.value(), f);
    return out;
  }
  return v;
}

}  // namespace oxi
