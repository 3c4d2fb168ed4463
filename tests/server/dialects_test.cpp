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
  // A tool_result with "is_error": null is as if absent (was nlohmann's type_error: a 500).
  EXPECT_NO_THROW(parse_anthropic_request(json::parse(R"({"max_tokens": 5, "messages": [
      {"role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": "f", "input": {}}]},
      {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "ok", "is_error": null}]}]})"), lim));
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

// ---- OpenAI Responses (/v1/responses) ----

TEST(Responses, TranslatesAnAgentLoopIntoChatMessages) {
  Limits lim;
  const json body = json::parse(R"({
    "model": "m", "instructions": "Be brief.", "max_output_tokens": 300, "temperature": 0.5, "top_p": 0.9,
    "tools": [{"type": "function", "name": "get_weather", "description": "w", "strict": true,
               "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}],
    "tool_choice": {"type": "function", "name": "get_weather"}, "parallel_tool_calls": false,
    "reasoning": {"effort": "low", "summary": "auto"}, "store": false, "metadata": {"k": "v"},
    "input": [
      {"role": "user", "content": [{"type": "input_text", "text": "Weather in "}, {"type": "input_text", "text": "Paris?"}]},
      {"type": "reasoning", "id": "rs_1", "summary": [], "content": [{"type": "reasoning_text", "text": "need the tool"}]},
      {"type": "function_call", "id": "fc_1", "call_id": "call_1", "name": "get_weather", "arguments": "{\"city\":\"Paris\"}"},
      {"type": "function_call_output", "call_id": "call_1", "output": "sunny"},
      {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "Sunny.", "annotations": []}]},
      {"role": "user", "content": "And tomorrow?"}
    ]})");
  const ResponsesRequest q = parse_responses_request(body, lim);
  const ChatRequest& r = q.chat;
  EXPECT_TRUE(q.one_call);
  EXPECT_EQ(r.max_tokens, 300);
  EXPECT_FLOAT_EQ(*r.sampling.temperature, 0.5f);
  EXPECT_FLOAT_EQ(*r.sampling.top_p, 0.9f);
  EXPECT_EQ(r.tool_choice, "get_weather");
  EXPECT_EQ(r.tools[0]["function"]["name"], "get_weather");
  EXPECT_EQ(r.tools[0]["function"]["parameters"]["properties"]["city"]["type"], "string");
  EXPECT_TRUE(*r.enable_thinking);  // any effort but "none"
  ASSERT_EQ(r.messages.size(), 6u) << r.messages.dump();
  EXPECT_EQ(r.messages[0], json({{"role", "system"}, {"content", "Be brief."}}));
  EXPECT_EQ(r.messages[1], json({{"role", "user"}, {"content", "Weather in Paris?"}}));
  EXPECT_EQ(r.messages[2]["role"], "assistant");
  EXPECT_TRUE(r.messages[2]["content"].is_null());
  EXPECT_EQ(r.messages[2]["reasoning_content"], "need the tool");
  EXPECT_EQ(r.messages[2]["tool_calls"][0]["id"], "call_1");
  EXPECT_EQ(r.messages[2]["tool_calls"][0]["function"]["arguments"], R"({"city":"Paris"})");
  EXPECT_EQ(r.messages[3], json({{"role", "tool"}, {"tool_call_id", "call_1"}, {"content", "sunny"}}));
  EXPECT_EQ(r.messages[4], json({{"role", "assistant"}, {"content", "Sunny."}}));
  EXPECT_EQ(r.messages[5], json({{"role", "user"}, {"content", "And tomorrow?"}}));
  EXPECT_EQ(q.echo["metadata"], json({{"k", "v"}}));
}

TEST(Responses, TextFormatReasoningAndImages) {
  Limits lim;
  ResponsesRequest q = parse_responses_request(json::parse(R"({"input": "hi", "reasoning": {"effort": "none"},
    "text": {"format": {"type": "json_schema", "name": "p", "strict": true, "schema": {"type": "object"}}}})"), lim);
  EXPECT_FALSE(*q.chat.enable_thinking);
  EXPECT_EQ(q.chat.response_format["type"], "json_schema");
  EXPECT_EQ(q.chat.response_format["json_schema"]["schema"], json({{"type", "object"}}));
  q = parse_responses_request(json::parse(R"({"input": "hi", "text": {"format": {"type": "text"}}})"), lim);
  EXPECT_TRUE(q.chat.response_format.is_null());
  EXPECT_FALSE(q.chat.enable_thinking.has_value());  // no `reasoning`: the template's default
  // input_image → an image_url part in place (the engine's image path reads it).
  q = parse_responses_request(json::parse(R"({"input": [{"role": "user", "content": [
    {"type": "input_image", "detail": "auto", "image_url": "data:image/png;base64,AAAA"}, {"type": "input_text", "text": "What?"}]}]})"), lim);
  EXPECT_EQ(q.chat.messages[0]["content"][0]["image_url"]["url"], "data:image/png;base64,AAAA");
  EXPECT_EQ(q.chat.messages[0]["content"][1], json({{"type", "text"}, {"text", "What?"}}));
}

TEST(Responses, RefusesWhatItCannotHonour) {
  Limits lim;
  auto param_of = [&](const char* body) {
    std::string p;
    EXPECT_EQ(status_of([&] { parse_responses_request(json::parse(body), lim); }, &p), 400) << body;
    return p;
  };
  EXPECT_EQ(param_of(R"({"input": 5})"), "input");
  EXPECT_EQ(param_of(R"({"input": []})"), "input");
  EXPECT_EQ(param_of(R"({"max_output_tokens": 5})"), "input");
  EXPECT_EQ(param_of(R"({"input": "x", "previous_response_id": "resp_1"})"), "previous_response_id");
  EXPECT_EQ(param_of(R"({"input": "x", "conversation": "conv_1"})"), "conversation");
  EXPECT_EQ(param_of(R"({"input": "x", "background": true})"), "background");
  EXPECT_EQ(param_of(R"({"input": "x", "truncation": "auto"})"), "truncation");
  EXPECT_EQ(param_of(R"({"input": "x", "top_logprobs": 3})"), "top_logprobs");
  EXPECT_EQ(param_of(R"({"input": "x", "include": ["message.output_text.logprobs"]})"), "include");
  EXPECT_EQ(param_of(R"({"input": "x", "prompt": {"id": "p"}})"), "prompt");
  EXPECT_EQ(param_of(R"({"input": "x", "logit_bias": {"1": 2}})"), "logit_bias");
  EXPECT_EQ(param_of(R"({"input": "x", "max_output_tokens": 0})"), "max_output_tokens");
  EXPECT_EQ(param_of(R"({"input": "x", "tools": [{"type": "web_search"}]})"), "tools[0].type");
  EXPECT_EQ(param_of(R"({"input": "x", "tools": [{"type": "function"}]})"), "tools[0].name");
  EXPECT_EQ(param_of(R"({"input": "x", "tool_choice": {"type": "file_search"}})"), "tool_choice");
  EXPECT_EQ(param_of(R"({"input": "x", "text": {"format": {"type": "json_schema"}}})"), "text.format.schema");
  EXPECT_EQ(param_of(R"({"input": "x", "text": {"verbosity": "low"}})"), "text.verbosity");
  EXPECT_EQ(param_of(R"({"input": "x", "text": {"format": {"type": "json_schema", "name": 5, "schema": {}}}})"), "text.format.name");
  EXPECT_EQ(param_of(R"({"input": "x", "tool_choice": {"type": 5, "name": "f"}})"), "tool_choice");
  EXPECT_EQ(param_of(R"({"input": "x", "text": {"format": 7}})"), "text.format.type");
  EXPECT_EQ(param_of(R"({"input": "x", "reasoning": {"effort": 1}})"), "reasoning.effort");
  EXPECT_EQ(param_of(R"({"input": [{"type": 3}]})"), "input[0].type");
  EXPECT_EQ(param_of(R"({"input": [{"role": "user", "content": [7]}]})"), "input[0].content[0]");
  EXPECT_EQ(param_of(R"({"input": [{"type": "reasoning", "content": [{"type": "summary_text", "text": "x"}]}]})"),
            "input[0].content[0].type");
  EXPECT_EQ(param_of(R"({"input": "x", "reasoning": {"effort": "max"}})"), "reasoning.effort");
  EXPECT_EQ(param_of(R"({"input": [{"type": "item_reference", "id": "x"}]})"), "input[0].type");
  EXPECT_EQ(param_of(R"({"input": [{"role": "tool", "content": "x"}]})"), "input[0].role");
  EXPECT_EQ(param_of(R"({"input": [{"role": "user", "content": [{"type": "input_file", "file_id": "f"}]}]})"),
            "input[0].content[0].type");
  // The Responses input has no audio part: OpenAI's input_audio shape is refused there (docs/server.md "Audio").
  EXPECT_EQ(param_of(R"({"input": [{"role": "user", "content": [{"type": "input_audio", "input_audio": {"data": "AA=="}}]}]})"),
            "input[0].content[0].type");
  EXPECT_EQ(param_of(R"({"input": [{"role": "user", "content": [{"type": "input_image", "file_id": "f"}]}]})"),
            "input[0].content[0].file_id");
  EXPECT_EQ(param_of(R"({"input": [{"role": "system", "content": [{"type": "input_image", "image_url": "x"}]}]})"),
            "input[0].content[0].type");
  EXPECT_EQ(param_of(R"({"input": [{"type": "function_call", "call_id": "c", "name": "f"}]})"), "input[0].arguments");
  EXPECT_EQ(param_of(R"({"input": [{"type": "function_call_output", "call_id": "c"}]})"), "input[0].output");
  // Harmless bookkeeping passes.
  EXPECT_EQ(status_of([&] {
              parse_responses_request(json::parse(R"({"input": "x", "store": true, "user": "u", "metadata": {},
                "safety_identifier": "s", "prompt_cache_key": "k", "service_tier": "auto", "parallel_tool_calls": true,
                "truncation": "disabled", "include": ["reasoning.encrypted_content"], "stream_options": {"include_obfuscation": false}})"), lim);
            }),
            0);
}

}  // namespace
}  // namespace oxi::server
