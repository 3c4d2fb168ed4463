// libFuzzer target: the Jinja interpreter on a hostile chat template. The input is split at the
// first NUL into the template source and a messages JSON (a default conversation when that part
// is empty or not a JSON array). Must return or throw oxi::Error (syntax errors, limits); any
// other exception, crash, ASan report or hang is a finding. Small limits keep runs fast.
#include <cstddef>
#include <cstdint>
#include <string>

#include "chat/jinja.h"
#include "core/error.h"
#include "core/json_limits.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string in(reinterpret_cast<const char*>(data), size);
  const size_t nul = in.find('\0');
  const std::string source = in.substr(0, nul);
  nlohmann::ordered_json messages = nlohmann::ordered_json::array(
      {{{"role", "system"}, {"content", "Be brief."}}, {{"role", "user"}, {"content", "Hi <|im_end|>"}},
       {{"role", "assistant"}, {"content", "Hello"}, {"tool_calls", {{{"function", {{"name", "f"}, {"arguments", {{"a", 1}}}}}}}}},
       {{"role", "tool"}, {"content", "42"}}});
  if (nul != std::string::npos) {
    const std::string m = in.substr(nul + 1);
    if (!oxi::json_too_deep(m)) {
      auto parsed = nlohmann::ordered_json::parse(m, nullptr, false);
      if (!parsed.is_discarded() && parsed.is_array()) messages = std::move(parsed);
    }
  }
  try {
    oxi::JinjaLimits lim;
    lim.max_steps = 200000;
    lim.max_output_bytes = 1 << 20;
    lim.max_alloc_bytes = 16 << 20;
    oxi::ChatTemplate tmpl(source, lim);
    oxi::ChatRenderOptions opt;
    opt.tools = nlohmann::ordered_json::array({{{"type", "function"}, {"function", {{"name", "f"}, {"parameters", {{"type", "object"}}}}}}});
    opt.bos_token = "<s>";
    (void)oxi::render_chat(tmpl, oxi::normalize_tool_call_arguments(messages), opt);
  } catch (const oxi::Error&) {
  }
  return 0;
}
