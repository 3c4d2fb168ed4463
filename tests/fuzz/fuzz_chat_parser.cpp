// libFuzzer target: the streaming output parsers (src/chat/parser.cpp) on arbitrary model output.
// Byte 0 picks the family and options, byte 1 the chunk size; the rest is fed in chunks and then
// finished. The parsers must never throw on model output; the deltas must add up to the final
// message, and the message must not depend on the chunking (docs/chat.md: any chunking works).
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "chat/parser.h"

namespace {

// The final message of one run as one string. The deltas must add up to the message.
std::string run(oxi::ChatFormat format, const oxi::ParserOptions& opt, std::string_view text, size_t chunk) {
  auto p = oxi::make_output_parser(format, opt);
  std::string content, reasoning;
  size_t calls = 0;
  auto take = [&](const oxi::ChatDelta& d) {
    content += d.content;
    reasoning += d.reasoning_content;
    calls += d.tool_calls.size();
  };
  for (size_t i = 0; i < text.size() && !p->ended(); i += chunk) take(p->feed(text.substr(i, chunk)));
  take(p->finish());
  const oxi::ChatMessage& m = p->message();
  if (content != m.content || reasoning != m.reasoning_content || calls != m.tool_calls.size()) __builtin_trap();
  std::string all = m.content + "|" + m.reasoning_content;
  for (const auto& c : m.tool_calls) all += "|" + c.name + c.arguments;
  return all;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 2) return 0;
  const oxi::ChatFormat format = static_cast<oxi::ChatFormat>(data[0] % 3);
  oxi::ParserOptions opt;
  opt.start_in_reasoning = (data[0] & 4) != 0;
  if (data[0] & 8) {
    opt.tools = nlohmann::ordered_json::parse(
        R"([{"type":"function","function":{"name":"get_weather","parameters":{"type":"object",)"
        R"("properties":{"city":{"type":"string"},"days":{"type":"integer"},"x":{"type":"number"}}}}}])");
  }
  const size_t chunk = 1 + data[1] % 16;
  const std::string_view text(reinterpret_cast<const char*>(data) + 2, size - 2);
  // The final message does not depend on how the text was chunked.
  if (run(format, opt, text, chunk) != run(format, opt, text, text.size() + 1)) __builtin_trap();
  return 0;
}
