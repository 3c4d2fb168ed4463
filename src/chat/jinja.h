// Jinja interpreter for chat templates, written to match Hugging Face transformers' rendering:
// Python jinja2 with trim_blocks=True, lstrip_blocks=True, loopcontrols, a `raise_exception`
// global, `strftime_now`, and a `tojson` filter that keeps non-ASCII characters
// (json.dumps(ensure_ascii=False)). Values print the way Python prints them (True, None, 1.0,
// ['a', 'b']). See docs/chat.md for what is supported and the decisions taken.
//
// Never crashes on hostile templates or context: syntax errors, runtime errors, recursion depth,
// output size and step limits all throw oxi::Error (kFormat for template syntax errors,
// kInvalidArgument for runtime errors such as raise_exception()).
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

namespace oxi {

namespace jinja {
struct Program;  // parsed template (internal)
}

struct JinjaLimits {
  size_t max_output_bytes = 64u << 20;      // rendered text (and any single string value)
  size_t max_depth = 300;                   // nesting of calls, statements and expressions
  uint64_t max_steps = 20'000'000;          // statements + loop iterations + calls
  // Bytes copied by string / list concatenation and repetition over the whole render (never
  // given back): bounds the memory a hostile template can hold, e.g. `[big_string] * 100000`.
  size_t max_alloc_bytes = 256u << 20;
};

class ChatTemplate {
 public:
  // Parses the template; throws oxi::Error(kFormat, "chat template: line N: ...") on syntax
  // errors.
  explicit ChatTemplate(const std::string& source, JinjaLimits limits = {});
  ~ChatTemplate();
  ChatTemplate(ChatTemplate&&) noexcept;
  ChatTemplate& operator=(ChatTemplate&&) noexcept;

  // Renders with the given top-level variables (an object; key order is kept, so pass an
  // ordered_json parsed from the request to keep `tojson` output in the caller's key order).
  // Throws oxi::Error(kInvalidArgument, "chat template: ...") on runtime errors (including the
  // template's own raise_exception("...")).
  std::string render(const nlohmann::ordered_json& context) const;
  std::string render(const nlohmann::json& context) const;

 private:
  std::shared_ptr<jinja::Program> prog_;
  JinjaLimits limits_;
};

struct ChatRenderOptions {
  bool add_generation_prompt = true;
  // Unset: the variable is not defined (the template's own default applies, e.g. Qwen thinks and
  // Gemma does not). Set: passed as `enable_thinking`.
  int enable_thinking = -1;  // -1 unset, 0 false, 1 true
  nlohmann::ordered_json tools;     // null/empty: `tools` is passed as None (as transformers does)
  std::string bos_token;            // passed as bos_token ("" when the model has none)
  std::string eos_token;
  nlohmann::ordered_json extra = nlohmann::ordered_json::object();  // more variables; override
};

// Renders `messages` (a JSON array of {role, content, ...}) with the template source.
std::string render_chat(const std::string& template_source, const nlohmann::ordered_json& messages,
                        const ChatRenderOptions& opt = {});
std::string render_chat(const ChatTemplate& tmpl, const nlohmann::ordered_json& messages,
                        const ChatRenderOptions& opt = {});

// OpenAI requests carry tool-call arguments as a JSON *string*; the Qwen and Gemma templates
// expect an object (they iterate it). Returns a copy of `messages` where every
// tool_calls[i].function.arguments that is a string holding a JSON object is replaced by that
// object (other strings are left as they are). llama.cpp does the same before rendering.
nlohmann::ordered_json normalize_tool_call_arguments(const nlohmann::ordered_json& messages);

// A copy of `v` with every string, object keys included, passed through `f` (callers mark user
// text with Tokenizer::mark_user_text before rendering; issue 29 #11). Recursive: `v` comes from a
// depth-checked parse (core/json_limits.h).
nlohmann::ordered_json map_strings(const nlohmann::ordered_json& v,
                                   const std::function<std::string(std::string_view)>& f);

}  // namespace oxi
