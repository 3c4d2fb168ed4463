// Request translation of the Anthropic and ollama dialects onto the OpenAI chat request the engine
// runs (no model knowledge; docs/server.md "Anthropic /v1/messages" and "ollama /api/*"). Each
// translator checks the dialect's own shape (RequestError with the dialect's field names), builds
// the equivalent OpenAI chat body and parses it with parse_chat_request, so the one validation of
// messages, tools and sampling ranges applies to every dialect.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "server/request.h"

namespace oxi::server {

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

// Whether the request's `model` names the served model: ollama spells a model NAME or NAME:TAG,
// and NAME means NAME:latest.
bool ollama_model_matches(const std::string& requested, const std::string& served);

}  // namespace oxi::server
