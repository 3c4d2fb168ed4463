// Translation of Anthropic /v1/messages and ollama /api/* requests onto the OpenAI chat request.
#include <gtest/gtest.h>

#include <string>

#include "server/dialects.h"
#include "server/stream_text.h"

namespace oxi::server {
namespace {

using nlohmann::json;

int status_of(const std::function<void()>& f, std::string* param = nullptr) {
  try {
    f();
  } catch (const RequestError& e) {
    if (param) *param = e.param();
    return e.status();
  }
  return 0;
}

TEST(StopMatcher, ReportsWhichStopMatched) {
  StopMatcher m({"BB", "A"});
  EXPECT_EQ(m.feed("xxBB yy A"), "xx");
  EXPECT_EQ(m.matched(), "BB");  // the earliest in the text, not the first in the list
}

TEST(Anthropic, TranslatesAConversationWithToolsAndThinking) {
  Limits lim;
  const json body = json::parse(R"({
    "model": "m", "max_tokens": 2000, "system": [{"type": "text", "text": "Be brief."}],
    "temperature": 0.5, "top_k": 40, "stop_sequences": ["a", "b", "c", "d", "e"],
    "tools": [{"name": "get_weather", "description": "w", "input_schema": {"type": "object", "properties": {"city": {"type": "string"}}}}],
    "tool_choice": {"type": "tool", "name": "get_weather", "disable_parallel_tool_use": true},
    "thinking": {"type": "enabled", "budget_tokens": 1024},
    "messages": [
      {"role": "user", "content": "Weather in Paris?"},
      {"role": "assistant", "content": [{"type": "thinking", "thinking": "need the tool", "signature": "x"},
                                        {"type": "tool_use", "id": "toolu_1", "name": "get_weather", "input": {"city": "Paris"}}]},
      {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": [{"type": "text", "text": "sunny"}]},
                                   {"type": "text", "text": "And tomorrow?", "cache_control": {"type": "ephemeral"}}]}
    ]})");
  const AnthropicRequest a = parse_anthropic_request(body, lim);
  const ChatRequest& r = a.chat;
  EXPECT_TRUE(a.disable_parallel_tool_use);
  EXPECT_EQ(r.max_tokens, 2000);
  EXPECT_FLOAT_EQ(*r.sampling.temperature, 0.5f);
  EXPECT_EQ(*r.sampling.top_k, 40);
  EXPECT_EQ(r.stop.size(), 5u);  // more than OpenAI's 4
  EXPECT_EQ(r.tool_choice, "get_weather");
  EXPECT_EQ(r.tools[0]["function"]["parameters"]["properties"]["city"]["type"], "string");
  EXPECT_TRUE(*r.enable_thinking);
  ASSERT_EQ(r.messages.size(), 5u);
  EXPECT_EQ(r.messages[0], json({{"role", "system"}, {"content", "Be brief."}}));
  EXPECT_EQ(r.messages[2]["reasoning_content"], "need the tool");
  EXPECT_TRUE(r.messages[2]["content"].is_null());
  EXPECT_EQ(r.messages[2]["tool_calls"][0]["function"]["arguments"], R"({"city":"Paris"})");
  EXPECT_EQ(r.messages[3], json({{"role", "tool"}, {"tool_call_id", "toolu_1"}, {"content", "sunny"}}));
  EXPECT_EQ(r.messages[4], json({{"role", "user"}, {"content", "And tomorrow?"}}));
}

TEST(Anthropic, DefaultsAndRefusals) {
  Limits lim;
  auto parse = [&](const char* s) { return parse_anthropic_request(json::parse(s), lim); };
  const auto plain = parse(R"({"max_tokens": 5, "messages": [{"role": "user", "content": "hi"}]})");
  EXPECT_FALSE(*plain.chat.enable_thinking);  // Anthropic: no thinking unless asked
  EXPECT_EQ(plain.chat.tool_choice, "auto");
  std::string param;
  EXPECT_EQ(status_of([&] { parse(R"({"messages": [{"role": "user", "content": "hi"}]})"); }, &param), 400);
  EXPECT_EQ(param, "max_tokens");
  EXPECT_EQ(status_of([&] { parse(R"({"max_tokens": 5, "temperature": 1.5, "messages": [{"role": "user", "content": "hi"}]})"); }, &param), 400);
  EXPECT_EQ(param, "temperature");
  EXPECT_EQ(status_of([&] { parse(R"({"max_tokens": 5, "messages": [{"role": "system", "content": "hi"}]})"); }, &param), 400);
  EXPECT_EQ(param, "messages[0].role");
  EXPECT_EQ(status_of([&] { parse(R"({"max_tokens": 5, "messages": [{"role": "user", "content": [{"type": "image", "source": {}}]}]})"); }, &param), 400);
  EXPECT_EQ(param, "messages[0].content[0].source");
  EXPECT_EQ(status_of([&] { parse(R"({"max_tokens": 5, "mystery": 1, "messages": [{"role": "user", "content": "hi"}]})"); }, &param), 400);
  EXPECT_EQ(param, "mystery");
  // A final assistant message is a prefill: text only, no trailing whitespace, not with thinking.
  const auto pre = parse(R"({"max_tokens": 5, "messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": [{"type": "text", "text": "Sure"}]}]})");
  EXPECT_EQ(pre.chat.assistant_prefill, "Sure");
  EXPECT_EQ(pre.chat.messages.size(), 1u);
  EXPECT_EQ(status_of([&] { parse(R"({"max_tokens": 5, "messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "Sure "}]})"); }), 400);
  EXPECT_EQ(status_of([&] { parse(R"({"max_tokens": 2000, "thinking": {"type": "enabled", "budget_tokens": 1024}, "messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "Sure"}]})"); }, &param), 400);
  EXPECT_EQ(param, "thinking");
  EXPECT_EQ(status_of([&] { parse(R"({"max_tokens": 5, "messages": [{"role": "assistant", "content": "Sure"}]})"); }, &param), 400);
  EXPECT_EQ(status_of([&] { parse(R"({"max_tokens": 5, "thinking": {"type": "enabled", "budget_tokens": 10}, "messages": [{"role": "user", "content": "hi"}]})"); }, &param), 400);
  EXPECT_EQ(param, "thinking.budget_tokens");
  EXPECT_EQ(status_of([&] { parse(R"({"max_tokens": 5, "tools": [{"type": "web_search_20250305", "name": "web_search"}], "messages": [{"role": "user", "content": "hi"}]})"); }, &param), 400);
  EXPECT_EQ(param, "tools[0].type");
  // count_tokens needs no max_tokens
  EXPECT_NO_THROW(parse_anthropic_request(json::parse(R"({"messages": [{"role": "user", "content": "hi"}]})"), lim, true));
}

TEST(Ollama, TranslatesChatOptionsFormatAndTools) {
  Limits lim;
  const json body = json::parse(R"({
    "model": "m:latest", "format": {"type": "object", "properties": {"a": {"type": "integer"}}},
    "options": {"temperature": 0, "top_k": 1, "num_predict": 7, "seed": 3, "stop": ["x"], "repeat_last_n": 32, "num_ctx": 4096},
    "think": false, "keep_alive": "5m",
    "tools": [{"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}],
    "messages": [{"role": "user", "content": "hi"},
                 {"role": "assistant", "content": "", "tool_calls": [{"function": {"name": "f", "arguments": {"k": 1}}}]},
                 {"role": "tool", "content": "42", "tool_name": "f"}]})");
  const OllamaRequest o = parse_ollama_request(body, lim, false);
  const ChatRequest& r = o.chat;
  EXPECT_TRUE(r.stream);  // ollama's default
  EXPECT_EQ(r.model, "m:latest");
  EXPECT_EQ(r.max_tokens, 7);
  EXPECT_EQ(*r.sampling.top_k, 1);
  EXPECT_EQ(*r.sampling.seed, 3u);
  EXPECT_EQ(*r.sampling.penalty_last_n, 32);
  EXPECT_EQ(r.stop, std::vector<std::string>{"x"});
  EXPECT_FALSE(*r.enable_thinking);
  EXPECT_EQ(r.response_format["type"], "json_schema");
  EXPECT_EQ(r.response_format["json_schema"]["schema"]["properties"]["a"]["type"], "integer");
  EXPECT_EQ(r.messages[1]["tool_calls"][0]["function"]["arguments"], R"({"k":1})");
  EXPECT_EQ(r.tools.size(), 1u);
  EXPECT_TRUE(ollama_model_matches("m:latest", "m"));
  EXPECT_TRUE(ollama_model_matches("m", "m"));
  EXPECT_FALSE(ollama_model_matches("other", "m"));
}

TEST(Ollama, GenerateAndRefusals) {
  Limits lim;
  auto gen = [&](const char* s) { return parse_ollama_request(json::parse(s), lim, true); };
  const auto g = gen(R"({"model": "m", "prompt": "hi", "system": "S", "stream": false, "format": "json"})");
  EXPECT_FALSE(g.chat.stream);
  EXPECT_EQ(g.chat.response_format["type"], "json_object");
  ASSERT_EQ(g.chat.messages.size(), 2u);
  EXPECT_EQ(g.chat.messages[0]["role"], "system");
  EXPECT_TRUE(gen(R"({"model": "m"})").load_only);
  const auto raw = gen(R"({"model": "m", "prompt": "abc", "raw": true})");
  EXPECT_TRUE(raw.raw);
  EXPECT_EQ(raw.raw_prompt, "abc");
  std::string param;
  EXPECT_EQ(status_of([&] { gen(R"({"prompt": "hi"})"); }, &param), 400);
  EXPECT_EQ(param, "model");
  EXPECT_EQ(status_of([&] { gen(R"({"model": "m", "prompt": "hi", "suffix": "x"})"); }, &param), 400);
  EXPECT_EQ(param, "suffix");
  EXPECT_EQ(status_of([&] { gen(R"({"model": "m", "prompt": "hi", "options": {"mirostat": 2}})"); }, &param), 400);
  EXPECT_EQ(param, "options.mirostat");
  EXPECT_EQ(status_of([&] { gen(R"({"model": "m", "prompt": "hi", "format": "yaml"})"); }, &param), 400);
  EXPECT_EQ(param, "format");
  EXPECT_EQ(status_of([&] { gen(R"({"model": "m", "prompt": "hi", "options": {"temperature": "hot"}})"); }), 400);
  EXPECT_NO_THROW(gen(R"({"model": "m", "prompt": "hi", "options": {"mirostat": 0, "typical_p": 1.0, "num_thread": 4}})"));
  EXPECT_EQ(status_of([&] { parse_ollama_request(json::parse(R"({"model": "m", "messages": [{"role": "user", "content": "x", "images": [5]}]})"), lim, false); }, &param), 400);
  EXPECT_EQ(param, "messages[0].images");
}

}  // namespace
}  // namespace oxi::server
