// Request translation of the Anthropic and ollama dialects onto the OpenAI chat request the engine
// runs (no model knowledge; docs/server.md "Anthropic /v1/messages" and "ollama /api/*"). Each
// translator checks the dialect's own shape (RequestError with the dialect's field names), builds
// the equivalent OpenAI chat body and parses it with parse_chat_request, so the one validation of
// messages, tools and sampling ranges applies to every dialect.
#pragma once

#include <cstdint>
#include <functional>
#include <initializer_list>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "server/request.h"

namespace oxi::server {

// Shared by the translators: a 400 naming the dialect's field, and a member that is present and
// not null (null is the same as absent, as on the OpenAI endpoints).
[[noreturn]] void bad(const std::string& param, const std::string& msg);
const nlohmann::json* present(const nlohmann::json& body, const char* key);

// 400 naming the first field of `body` (not null) that is not in `known`: a field that could change
// the output is refused, never ignored (docs/server.md "Request fields").
void refuse_unknown_fields(const nlohmann::json& body, std::initializer_list<const char*> known);

// A dialect's `tools` array → OpenAI chat tools: each entry must be an object, and becomes
// {"type": "function", "function": to_function(entry, "tools[i]")} (to_function checks the
// dialect's own shape, naming fields under "tools[i]").
nlohmann::json chat_tools(const nlohmann::json& tools,
                          const std::function<nlohmann::json(const nlohmann::json&, const std::string&)>& to_function);

// The text of a `system` value or a tool result: a string, or an array of text blocks whose
// `type` is `text_type` ("text" for Anthropic, "input_text" / "output_text" for OpenAI Responses),
// joined with newlines. Other block types → 400 naming `where`.
std::string text_of_blocks(const nlohmann::json& v, const std::string& where,
                           std::initializer_list<const char*> text_types = {"text"});

struct AnthropicRequest {
  ChatRequest chat;
  bool disable_parallel_tool_use = false;  // tool_choice.disable_parallel_tool_use: at most one call
};

// POST /v1/messages. count_only: /v1/messages/count_tokens (max_tokens not required).
AnthropicRequest parse_anthropic_request(const nlohmann::json& body, const Limits& limits, bool count_only = false);

struct OllamaRequest {
  ChatRequest chat;
  bool load_only = false;   // no messages / empty prompt: ollama's "load the model" request
  bool raw = false;         // /api/generate raw: the prompt is not templated
  std::string raw_prompt;   // the prompt when raw
};

// POST /api/chat (generate = false) or /api/generate (generate = true). `stream` defaults to true.
OllamaRequest parse_ollama_request(const nlohmann::json& body, const Limits& limits, bool generate);

// POST /api/embed and the legacy POST /api/embeddings (docs/server.md "ollama /api/embed").
struct OllamaEmbedRequest {
  std::string model;
  std::vector<std::string> inputs;    // none: nothing to embed (ollama answers with no vectors)
  bool truncate = true;               // /api/embed: cut an input to the context; false → 400
  int64_t dimensions = 0;             // /api/embed: keep the first k values (0: all), renormalised
  std::optional<int64_t> num_ctx;     // options.num_ctx: a smaller context to truncate to
};
// legacy: /api/embeddings (`prompt`, one string; no truncate / dimensions). `options` is checked
// as /api/chat checks it (sampling options cannot change a vector; unknown ones → 400).
OllamaEmbedRequest parse_ollama_embed_request(const nlohmann::json& body, bool legacy);

// POST /v1/responses (OpenAI's Responses API; docs/server.md "OpenAI /v1/responses"). The request's
// own settings are echoed back in the response object.
struct ResponsesRequest {
  ChatRequest chat;
  bool one_call = false;  // parallel_tool_calls: false: at most one function call
  nlohmann::json echo;    // instructions, max_output_tokens, tools, tool_choice, text, reasoning, … as given
};
ResponsesRequest parse_responses_request(const nlohmann::json& body, const Limits& limits);

// Whether the request's `model` names the served model: ollama spells a model NAME or NAME:TAG,
// and NAME means NAME:latest.
bool ollama_model_matches(const std::string& requested, const std::string& served);

}  // namespace oxi::server
