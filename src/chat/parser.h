// Streaming output parsers: split generated text into content, reasoning_content and tool calls,
// per model family, emitting deltas as text arrives (for SSE streaming) and accumulating the final
// message. Feed decoded text in any chunking (token by token, byte by byte): markers split across
// chunks are held back only while they could still be a marker; nothing is lost. Malformed or
// cut-off output degrades to plain content; the parsers never throw on model output.
//
// Formats:
//   kQwen35  <think>…</think>, tool calls `<tool_call>\n<function=NAME>\n<parameter=P>\nV\n
//            </parameter>\n…</function>\n</tool_call>` (also the Qwen3 JSON form
//            `<tool_call>\n{"name": …, "arguments": {…}}\n</tool_call>`); `<|im_end|>` ends.
//   kGemma4  `<|channel>thought\n…<channel|>` reasoning, `<|tool_call>call:NAME{k:v,…}<tool_call|>`
//            with `<|"|>` string quotes; `<turn|>` (and `<|tool_response>`) end the turn.
//   kPlain   everything is content.
// See docs/chat.md for the exact rules (whitespace trimming, typing of parameter values).
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

namespace oxi {

enum class ChatFormat { kPlain, kQwen35, kGemma4 };

struct ToolCall {
  std::string name;
  std::string arguments;  // a JSON object, serialised compactly ({"city":"Paris"})
  std::string id;         // empty: the caller (server) assigns ids
};

struct ChatMessage {
  std::string content;
  std::string reasoning_content;
  std::vector<ToolCall> tool_calls;
};

// What became certain after one feed()/finish(). Tool calls are emitted whole, once complete, with
// their index in the message's tool_calls.
struct ChatDelta {
  std::string content;
  std::string reasoning_content;
  std::vector<std::pair<size_t, ToolCall>> tool_calls;
  bool empty() const { return content.empty() && reasoning_content.empty() && tool_calls.empty(); }
};

struct ParserOptions {
  // The prompt already opened the reasoning block (Qwen 3.5's generation prompt ends with
  // "<think>\n"): output starts inside reasoning and may only show "</think>".
  bool start_in_reasoning = false;
  // Optional OpenAI `tools` array: a parameter whose schema type is "string" stays a string even
  // when it looks like JSON (Qwen 3.5 parameter values are untyped text).
  nlohmann::ordered_json tools;
};

class OutputParser {
 public:
  virtual ~OutputParser() = default;
  virtual ChatDelta feed(std::string_view text) = 0;
  // End of generation: releases held-back text and resolves an unfinished tool call (kept as a
  // call when its body is complete enough to parse, else returned as content).
  virtual ChatDelta finish() = 0;
  // The message accumulated so far (all deltas applied).
  virtual const ChatMessage& message() const = 0;
  // True once an end-of-turn marker was seen; later text is ignored.
  virtual bool ended() const = 0;
};

std::unique_ptr<OutputParser> make_output_parser(ChatFormat format, const ParserOptions& opt = {});

// Convenience: parse a complete output.
ChatMessage parse_output(ChatFormat format, std::string_view text, const ParserOptions& opt = {});

// Guesses the format from a chat template source (markers it uses); kPlain if unknown.
ChatFormat detect_chat_format(const std::string& template_source);

// Options that follow from the rendered prompt (e.g. the prompt ends inside an open <think>).
ParserOptions parser_options_for_prompt(ChatFormat format, const std::string& prompt);

// Parsers of one tool-call body (exposed for tests). Return false when the text is not a
// well-formed call. `body` is the text between the open and close markers.
bool parse_qwen35_tool_call(std::string_view body, const nlohmann::ordered_json& tools, ToolCall& out);
bool parse_gemma4_tool_call(std::string_view body, ToolCall& out);
// Gemma argument syntax ({key:<|"|>v<|"|>,n:1,l:[…]}) → JSON value. False if malformed.
bool gemma4_args_to_json(std::string_view text, nlohmann::ordered_json& out);

}  // namespace oxi
