// Anthropic Messages API requests (POST /v1/messages, /v1/messages/count_tokens) parsed into
// OpenAI chat requests (parse_anthropic_request; dialects.h). No HTTP here: the routes are in
// anthropic.cpp, and tests/fuzz/fuzz_request.cpp drives this file alone.
#include <cctype>
#include <string>

#include "core/error.h"
#include "server/dialects.h"

namespace oxi::server {

using nlohmann::json;

namespace {

// One Anthropic message → OpenAI messages appended to `out` (a user message's tool_result blocks
// become `tool` messages, in order, before the user's text).
void translate_message(const json& m, size_t index, json& out) {
  const std::string where = "messages[" + std::to_string(index) + "]";
  if (!m.is_object()) bad(where, where + " must be an object");
  if (!m.contains("role") || !m["role"].is_string()) bad(where + ".role", where + " needs a string 'role'");
  const std::string role = m["role"].get<std::string>();
  if (role != "user" && role != "assistant") bad(where + ".role", "role must be 'user' or 'assistant', got '" + role + "'");
  if (!m.contains("content")) bad(where + ".content", where + " needs 'content'");
  const json& content = m["content"];
  if (content.is_string()) {
    out.push_back({{"role", role}, {"content", content}});
    return;
  }
  if (!content.is_array()) bad(where + ".content", "'content' must be a string or an array of content blocks");
  std::string text, thinking;
  json tool_calls = json::array();
  json parts = json::array();  // a user message with images: its text and image parts in order
  bool images = false;
  for (size_t i = 0; i < content.size(); ++i) {
    const json& b = content[i];
    const std::string w = where + ".content[" + std::to_string(i) + "]";
    if (!b.is_object() || !b.contains("type") || !b["type"].is_string()) bad(w, "each content block needs a string 'type'");
    const std::string t = b["type"].get<std::string>();
    if (t == "text") {
      if (!b.contains("text") || !b["text"].is_string()) bad(w + ".text", "a text block needs a string 'text'");
      text += b["text"].get<std::string>();
      parts.push_back({{"type", "text"}, {"text", b["text"]}});
    } else if (t == "image" && role == "user") {
      // → an OpenAI image_url part (the engine reads it: data: URLs; http(s) never fetched)
      const json* src = b.contains("source") && b["source"].is_object() ? &b["source"] : nullptr;
      const std::string st = src ? src->value("type", "") : "";
      std::string url;
      if (st == "base64" && (*src).contains("data") && (*src)["data"].is_string()) {
        url = "data:" + src->value("media_type", std::string("image/png")) + ";base64," + (*src)["data"].get<std::string>();
      } else if (st == "url" && (*src).contains("url") && (*src)["url"].is_string()) {
        url = (*src)["url"].get<std::string>();
      } else {
        bad(w + ".source", "an image block needs source {\"type\": \"base64\", \"media_type\", \"data\"} or {\"type\": \"url\", \"url\"}");
      }
      parts.push_back({{"type", "image_url"}, {"image_url", {{"url", url}}}});
      images = true;
    } else if (t == "tool_result" && role == "user") {
      if (!b.contains("tool_use_id") || !b["tool_use_id"].is_string()) bad(w + ".tool_use_id", "a tool_result needs a string 'tool_use_id'");
      std::string result = b.contains("content") && !b["content"].is_null() ? text_of_blocks(b["content"], w + ".content") : "";
      if (b.contains("is_error") && !b["is_error"].is_null() && !b["is_error"].is_boolean()) bad(w + ".is_error", "'is_error' must be a boolean");
      if (b.contains("is_error") && b["is_error"] == true) result = "Error: " + result;
      out.push_back({{"role", "tool"}, {"tool_call_id", b["tool_use_id"]}, {"content", result}});
    } else if (t == "tool_use" && role == "assistant") {
      if (!b.contains("id") || !b["id"].is_string()) bad(w + ".id", "a tool_use block needs a string 'id'");
      if (!b.contains("name") || !b["name"].is_string()) bad(w + ".name", "a tool_use block needs a string 'name'");
      const json input = b.contains("input") && !b["input"].is_null() ? b["input"] : json::object();
      if (!input.is_object()) bad(w + ".input", "'input' must be an object");
      tool_calls.push_back({{"id", b["id"]}, {"type", "function"},
                            {"function", {{"name", b["name"]}, {"arguments", input.dump()}}}});
    } else if (t == "thinking" && role == "assistant") {
      if (!b.contains("thinking") || !b["thinking"].is_string()) bad(w + ".thinking", "a thinking block needs a string 'thinking'");
      thinking += b["thinking"].get<std::string>();
    } else if (t == "redacted_thinking" && role == "assistant") {
      // opaque: nothing to render
    } else {
      bad(w + ".type", "content block type '" + t + "' is not supported in a " + role + " message");
    }
  }
  if (role == "user") {
    if (images) {
      out.push_back({{"role", "user"}, {"content", parts}});
    } else if (!text.empty() || content.empty() || out.empty() || out.back().value("role", "") != "tool") {
      out.push_back({{"role", "user"}, {"content", text}});
    }
    return;
  }
  json a = {{"role", "assistant"}, {"content", text}};
  if (!thinking.empty()) a["reasoning_content"] = thinking;
  if (!tool_calls.empty()) {
    a["tool_calls"] = tool_calls;
    if (text.empty()) a["content"] = nullptr;
  }
  out.push_back(std::move(a));
}

// A client tool {name, description, input_schema} → a chat function.
json tool_function(const json& t, const std::string& w) {
  if (t.contains("type") && !t["type"].is_null() && t["type"] != "custom") {
    bad(w + ".type", "tool type " + t["type"].dump() + " (an Anthropic server tool) is not supported; give client tools with an input_schema");
  }
  if (!t.contains("name") || !t["name"].is_string()) bad(w + ".name", "each tool needs a string 'name'");
  if (!t.contains("input_schema") || !t["input_schema"].is_object()) bad(w + ".input_schema", "each tool needs an 'input_schema' object");
  json f = {{"name", t["name"]}, {"parameters", t["input_schema"]}};
  if (t.contains("description") && t["description"].is_string()) f["description"] = t["description"];
  return f;
}

}  // namespace

AnthropicRequest parse_anthropic_request(const json& body, const Limits& limits, bool count_only) {
  refuse_unknown_fields(body, {"model", "messages", "max_tokens", "system", "temperature", "top_p", "top_k",
                               "stop_sequences", "stream", "tools", "tool_choice", "thinking",
                               // cannot change the output:
                               "metadata", "service_tier"});
  json oa = json::object();
  if (const json* m = present(body, "model")) oa["model"] = *m;
  // max_tokens: required by Anthropic (≥ 1).
  if (const json* mt = present(body, "max_tokens")) {
    if (!mt->is_number_integer() || mt->get<long long>() < 1) bad("max_tokens", "'max_tokens' must be a positive integer");
    oa["max_tokens"] = *mt;
  } else if (!count_only) {
    bad("max_tokens", "'max_tokens' is required");
  }
  // Anthropic's ranges: temperature 0..1, top_p 0..1, top_k ≥ 0.
  if (const json* t = present(body, "temperature")) {
    if (!t->is_number() || !(t->get<double>() >= 0.0 && t->get<double>() <= 1.0)) bad("temperature", "'temperature' must be a number between 0 and 1");
    oa["temperature"] = *t;
  }
  if (const json* t = present(body, "top_p")) oa["top_p"] = *t;
  if (const json* t = present(body, "top_k")) {
    if (!t->is_number_integer() || t->get<long long>() < 0) bad("top_k", "'top_k' must be a non-negative integer");
    oa["top_k"] = *t;
  }
  if (const json* s = present(body, "stop_sequences")) {
    if (!s->is_array()) bad("stop_sequences", "'stop_sequences' must be an array of strings");
    oa["stop"] = *s;
  }
  if (const json* s = present(body, "stream")) oa["stream"] = *s;

  json msgs = json::array();
  if (const json* sys = present(body, "system")) {
    msgs.push_back({{"role", "system"}, {"content", text_of_blocks(*sys, "system")}});
  }
  const json* in = present(body, "messages");
  if (!in) bad("messages", "'messages' is required");
  if (!in->is_array() || in->empty()) bad("messages", "'messages' must be a non-empty array");
  for (size_t i = 0; i < in->size(); ++i) translate_message((*in)[i], i, msgs);
  // A final assistant message is the start of the answer (prefill): text only, no trailing
  // whitespace, not with thinking (Anthropic's rules); the answer continues it.
  std::string prefill;
  if (msgs.back().value("role", "") == "assistant") {
    const json& last = msgs.back();
    const std::string where = "messages[" + std::to_string(in->size() - 1) + "]";
    if (last.contains("tool_calls") || last.contains("reasoning_content")) {
      bad(where + ".content", "a final assistant message (prefill) may hold text only");
    }
    prefill = last["content"].get<std::string>();
    if (!prefill.empty() && std::isspace(static_cast<unsigned char>(prefill.back()))) {
      bad(where + ".content", "final assistant content cannot end with trailing whitespace");
    }
    msgs.erase(msgs.size() - 1);
    if (msgs.empty()) bad("messages", "the messages need a user message before the final assistant message");
  }
  oa["messages"] = std::move(msgs);

  AnthropicRequest r;
  if (const json* tools = present(body, "tools")) oa["tools"] = chat_tools(*tools, tool_function);
  if (const json* tc = present(body, "tool_choice")) {
    if (!tc->is_object() || !tc->contains("type") || !(*tc)["type"].is_string()) {
      bad("tool_choice", "'tool_choice' must be {\"type\": \"auto\" | \"any\" | \"tool\" | \"none\"}");
    }
    const std::string t = (*tc)["type"].get<std::string>();
    if (t == "auto") {
      oa["tool_choice"] = "auto";
    } else if (t == "any") {
      oa["tool_choice"] = "required";
    } else if (t == "none") {
      oa["tool_choice"] = "none";
    } else if (t == "tool") {
      if (!tc->contains("name") || !(*tc)["name"].is_string()) bad("tool_choice.name", "tool_choice type 'tool' needs a string 'name'");
      oa["tool_choice"] = {{"type", "function"}, {"function", {{"name", (*tc)["name"]}}}};
    } else {
      bad("tool_choice.type", "unknown tool_choice type '" + t + "'");
    }
    if (const json* d = present(*tc, "disable_parallel_tool_use")) {
      if (!d->is_boolean()) bad("tool_choice.disable_parallel_tool_use", "'disable_parallel_tool_use' must be a boolean");
      r.disable_parallel_tool_use = d->get<bool>();
    }
  }
  // Thinking is off unless asked for (Anthropic's default); budget_tokens is checked as Anthropic
  // does (≥ 1024, below max_tokens) and bounds nothing beyond max_tokens (docs/server.md).
  bool thinking = false;
  if (const json* th = present(body, "thinking")) {
    if (!th->is_object() || !th->contains("type") || !(*th)["type"].is_string()) {
      bad("thinking", "'thinking' must be {\"type\": \"enabled\", \"budget_tokens\": N} or {\"type\": \"disabled\"}");
    }
    const std::string t = (*th)["type"].get<std::string>();
    if (t == "enabled") {
      const json* bt = present(*th, "budget_tokens");
      if (!bt || !bt->is_number_integer() || bt->get<long long>() < 1024) {
        bad("thinking.budget_tokens", "'thinking.budget_tokens' must be an integer of at least 1024");
      }
      if (oa.contains("max_tokens") && bt->get<long long>() >= oa["max_tokens"].get<long long>()) {
        bad("thinking.budget_tokens", "'thinking.budget_tokens' must be less than max_tokens");
      }
      thinking = true;
      if (!prefill.empty()) bad("thinking", "a final assistant message (prefill) cannot be used with thinking");
    } else if (t != "disabled") {
      bad("thinking.type", "unknown thinking type '" + t + "'");
    }
  }
  oa["chat_template_kwargs"] = {{"enable_thinking", thinking}};

  Limits lim = limits;
  lim.max_stop = 64;  // Anthropic sets no small limit on stop_sequences
  if (count_only) oa.erase("max_tokens");
  r.chat = parse_chat_request(oa, lim);
  r.chat.assistant_prefill = std::move(prefill);
  return r;
}

}  // namespace oxi::server
