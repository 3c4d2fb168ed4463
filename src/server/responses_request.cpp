// OpenAI Responses API requests (POST /v1/responses) parsed into OpenAI chat requests: the
// `input` items become chat messages (parse_responses_request; dialects.h). No HTTP here: the
// routes are in responses.cpp, and tests/fuzz/fuzz_request.cpp drives this file alone.
#include <string>

#include "server/dialects.h"

namespace oxi::server {

using nlohmann::json;

namespace {

// A user / system / developer message's content: a string, or input_text parts (input_image parts
// too for a user: they become image_url parts, read by the engine's image path — 400 there without
// a vision tower). The texts of a message without images are joined into one string.
json translate_input_content(const json& content, const std::string& role, const std::string& where) {
  if (content.is_string()) return content;
  if (!content.is_array()) bad(where, "'content' must be a string or an array of content parts");
  json parts = json::array();
  std::string text;
  bool images = false;
  for (size_t i = 0; i < content.size(); ++i) {
    const json& p = content[i];
    const std::string w = where + "[" + std::to_string(i) + "]";
    if (!p.is_object() || !p.contains("type") || !p["type"].is_string()) bad(w, "each content part needs a string 'type'");
    const std::string t = p["type"].get<std::string>();
    // An assistant message given back from an earlier response holds output_text (or refusal) parts.
    const bool text_part = t == "input_text" || (role == "assistant" && t == "output_text");
    if (text_part) {
      if (!p.contains("text") || !p["text"].is_string()) bad(w + ".text", "an " + t + " part needs a string 'text'");
      text += p["text"].get<std::string>();
      parts.push_back({{"type", "text"}, {"text", p["text"]}});
    } else if (role == "assistant" && t == "refusal") {
      if (!p.contains("refusal") || !p["refusal"].is_string()) bad(w + ".refusal", "a refusal part needs a string 'refusal'");
      text += p["refusal"].get<std::string>();
      parts.push_back({{"type", "text"}, {"text", p["refusal"]}});
    } else if (t == "input_image" && role == "user") {
      if (present(p, "file_id")) bad(w + ".file_id", "input_image file_id is not supported (this server has no file store): give image_url");
      const json* url = present(p, "image_url");
      if (!url || !url->is_string()) bad(w + ".image_url", "an input_image part needs a string 'image_url' (a data: URL)");
      parts.push_back({{"type", "image_url"}, {"image_url", {{"url", *url}}}});
      images = true;
    } else {
      bad(w + ".type", "content part type '" + t + "' is not supported in a " + role + " message");
    }
  }
  return images ? parts : json(text);
}

// Responses `input` → OpenAI chat messages (after the `instructions` system message, if any).
// function_call items join the assistant message before them (or a new one with null content);
// function_call_output items become `tool` messages; a reasoning item's text becomes the next
// assistant turn's reasoning_content.
void translate_input(const json& input, json& msgs) {
  if (input.is_string()) {
    msgs.push_back({{"role", "user"}, {"content", input}});
    return;
  }
  if (!input.is_array() || input.empty()) bad("input", "'input' must be a string or a non-empty array of input items");
  std::string reasoning;  // from reasoning items, for the next assistant message
  auto assistant = [&]() -> json& {
    // The assistant message function calls attach to: the last message if it is an assistant one
    // (a message item, or calls before), else a new one.
    if (msgs.empty() || msgs.back().value("role", "") != "assistant") {
      msgs.push_back({{"role", "assistant"}, {"content", nullptr}});
    }
    json& a = msgs.back();
    if (!reasoning.empty()) {
      a["reasoning_content"] = a.value("reasoning_content", "") + reasoning;
      reasoning.clear();
    }
    return a;
  };
  for (size_t i = 0; i < input.size(); ++i) {
    const json& it = input[i];
    const std::string where = "input[" + std::to_string(i) + "]";
    if (!it.is_object()) bad(where, where + " must be an object");
    const json* ty = present(it, "type");
    if (ty && !ty->is_string()) bad(where + ".type", "'type' must be a string");
    const std::string type = ty ? ty->get<std::string>() : "message";
    if (type == "message") {
      const json* role = present(it, "role");
      if (!role || !role->is_string()) bad(where + ".role", where + " needs a string 'role'");
      const std::string r = role->get<std::string>();
      if (r != "user" && r != "assistant" && r != "system" && r != "developer") {
        bad(where + ".role", "role must be user, assistant, system or developer, got '" + r + "'");
      }
      const json* content = present(it, "content");
      if (!content) bad(where + ".content", where + " needs 'content'");
      json c = translate_input_content(*content, r, where + ".content");
      if (r == "assistant") {
        // A new assistant turn unless the last message is an assistant turn made of function
        // calls only (content null): then this text is part of it.
        if (msgs.empty() || msgs.back().value("role", "") != "assistant" || !msgs.back()["content"].is_null()) {
          msgs.push_back({{"role", "assistant"}, {"content", ""}});
        }
        json& a = assistant();
        a["content"] = c;
      } else {
        msgs.push_back({{"role", r}, {"content", c}});
      }
    } else if (type == "function_call") {
      const json* id = present(it, "call_id");
      const json* name = present(it, "name");
      const json* args = present(it, "arguments");
      if (!id || !id->is_string()) bad(where + ".call_id", "a function_call item needs a string 'call_id'");
      if (!name || !name->is_string()) bad(where + ".name", "a function_call item needs a string 'name'");
      if (!args || !args->is_string()) bad(where + ".arguments", "a function_call item needs 'arguments' (a JSON string)");
      // The templates render the arguments as an object: anything else fails there, less clearly.
      if (!json::parse(args->get<std::string>(), nullptr, false).is_object()) {
        bad(where + ".arguments", "'arguments' must be a JSON object serialised as a string");
      }
      json& a = assistant();
      if (!a.contains("tool_calls")) a["tool_calls"] = json::array();
      a["tool_calls"].push_back({{"id", *id}, {"type", "function"}, {"function", {{"name", *name}, {"arguments", *args}}}});
    } else if (type == "function_call_output") {
      const json* id = present(it, "call_id");
      const json* out = present(it, "output");
      if (!id || !id->is_string()) bad(where + ".call_id", "a function_call_output item needs a string 'call_id'");
      if (!out) bad(where + ".output", "a function_call_output item needs 'output'");
      msgs.push_back({{"role", "tool"}, {"tool_call_id", *id},
                      {"content", text_of_blocks(*out, where + ".output", {"input_text", "output_text"})}});
    } else if (type == "reasoning") {
      // Given back from an earlier response: its reasoning_text content (raw thinking) goes into
      // the template's reasoning of the next assistant turn; summaries and encrypted_content
      // (which this server never produces) are not model text, and are dropped.
      if (const json* c = present(it, "content")) {
        if (!c->is_array()) bad(where + ".content", "a reasoning item's 'content' must be an array");
        reasoning += text_of_blocks(*c, where + ".content", {"reasoning_text"});
      }
    } else {
      bad(where + ".type", "input item type '" + type + "' is not supported (message, function_call, "
                           "function_call_output, reasoning)");
    }
  }
}

// A Responses function tool {type: "function", name, description, parameters, strict} → a chat
// function; hosted tool types → 400.
json tool_function(const json& t, const std::string& w) {
  const std::string type = t.contains("type") && t["type"].is_string() ? t["type"].get<std::string>() : "";
  if (type != "function") {
    bad(w + ".type", "tool type '" + type + "' is not supported: only function tools ({\"type\": \"function\", "
                     "\"name\", \"parameters\"}) run here (hosted tools need OpenAI's servers)");
  }
  if (!t.contains("name") || !t["name"].is_string()) bad(w + ".name", "a function tool needs a string 'name'");
  json f = {{"name", t["name"]}};
  if (const json* p = present(t, "parameters")) {
    if (!p->is_object()) bad(w + ".parameters", "'parameters' must be a JSON schema object");
    f["parameters"] = *p;
  }
  if (const json* d = present(t, "description")) f["description"] = *d;
  return f;
}

}  // namespace

ResponsesRequest parse_responses_request(const json& body, const Limits& limits) {
  refuse_unknown_fields(body, {"model", "input", "instructions", "tools", "tool_choice", "max_output_tokens",
                               "temperature", "top_p", "stream", "text", "reasoning", "parallel_tool_calls",
                               "previous_response_id", "conversation", "background", "truncation", "include",
                               "top_logprobs", "stream_options",
                               // cannot change the output:
                               "store", "metadata", "user", "safety_identifier", "prompt_cache_key",
                               "prompt_cache_retention", "service_tier"});
  ResponsesRequest r;
  // Stateless (as llama-server): there is no stored response or conversation to continue.
  if (present(body, "previous_response_id")) {
    bad("previous_response_id", "'previous_response_id' is not supported: this server stores no responses; "
                                "send the whole conversation in 'input'");
  }
  if (present(body, "conversation")) bad("conversation", "'conversation' is not supported: this server stores no conversations");
  if (const json* b = present(body, "background")) {
    if (!b->is_boolean() || b->get<bool>()) bad("background", "background responses are not supported ('background' must be false)");
  }
  if (const json* t = present(body, "truncation")) {
    if (*t != "disabled") bad("truncation", "'truncation' must be \"disabled\": an input too long for the context is a 400");
  }
  if (const json* t = present(body, "top_logprobs")) {
    if (*t != 0) bad("top_logprobs", "'top_logprobs' is not supported on /v1/responses (use /v1/chat/completions)");
  }
  if (const json* inc = present(body, "include")) {
    if (!inc->is_array()) bad("include", "'include' must be an array");
    for (const auto& x : *inc) {
      // encrypted reasoning: there is none to give (reasoning items carry encrypted_content null).
      if (x != "reasoning.encrypted_content") bad("include", "include " + x.dump() + " is not supported");
    }
  }
  if (const json* so = present(body, "stream_options")) {
    if (!so->is_object()) bad("stream_options", "'stream_options' must be an object");
    for (auto it = so->begin(); it != so->end(); ++it) {
      if (it.key() != "include_obfuscation") bad("stream_options." + it.key(), "unsupported stream option '" + it.key() + "'");
    }
  }

  json oa = json::object();
  json& echo = r.echo;
  for (const char* k : {"metadata", "user"}) {  // bookkeeping, echoed in the response
    if (const json* v = present(body, k)) echo[k] = *v;
  }
  for (const char* k : {"model", "temperature", "top_p", "stream"}) {
    if (const json* v = present(body, k)) oa[k] = *v;
  }
  if (const json* mt = present(body, "max_output_tokens")) {
    if (!mt->is_number_integer() || mt->get<long long>() < 1 || mt->get<long long>() > limits.max_tokens_cap) {
      bad("max_output_tokens", "'max_output_tokens' must be an integer between 1 and " + std::to_string(limits.max_tokens_cap));
    }
    oa["max_tokens"] = *mt;
    echo["max_output_tokens"] = *mt;
  }

  json msgs = json::array();
  if (const json* ins = present(body, "instructions")) {
    if (!ins->is_string()) bad("instructions", "'instructions' must be a string");
    msgs.push_back({{"role", "system"}, {"content", *ins}});
    echo["instructions"] = *ins;
  }
  const json* input = present(body, "input");
  if (!input) bad("input", "'input' is required");
  translate_input(*input, msgs);
  oa["messages"] = std::move(msgs);

  if (const json* tools = present(body, "tools")) {
    oa["tools"] = chat_tools(*tools, tool_function);
    echo["tools"] = *tools;
  }
  if (const json* tc = present(body, "tool_choice")) {
    if (tc->is_string()) {
      if (*tc != "auto" && *tc != "none" && *tc != "required") bad("tool_choice", "'tool_choice' must be auto, none, required or {\"type\": \"function\", \"name\"}");
      oa["tool_choice"] = *tc;
    } else if (tc->is_object() && tc->contains("type") && (*tc)["type"] == "function" && tc->contains("name") &&
               (*tc)["name"].is_string()) {
      oa["tool_choice"] = {{"type", "function"}, {"function", {{"name", (*tc)["name"]}}}};
    } else {
      bad("tool_choice", "'tool_choice' must be auto, none, required or {\"type\": \"function\", \"name\"} (hosted and "
                         "allowed_tools choices are not supported)");
    }
    echo["tool_choice"] = *tc;
  }
  if (const json* p = present(body, "parallel_tool_calls")) {
    if (!p->is_boolean()) bad("parallel_tool_calls", "'parallel_tool_calls' must be a boolean");
    r.one_call = !p->get<bool>();
  }

  // text.format → response_format: {"type": "text"} is free text; json_schema goes through the
  // json_schema constraint; json_object too.
  if (const json* text = present(body, "text")) {
    if (!text->is_object()) bad("text", "'text' must be an object");
    for (auto it = text->begin(); it != text->end(); ++it) {
      if (it->is_null()) continue;
      if (it.key() == "verbosity") {
        // Only the default: a model here has no verbosity switch, and it changes the output.
        if (*it != "medium") bad("text.verbosity", "'text.verbosity' other than \"medium\" is not supported");
      } else if (it.key() != "format") {
        bad("text." + it.key(), "unsupported field 'text." + it.key() + "'");
      }
    }
    if (const json* f = present(*text, "format")) {
      const std::string t = f->is_object() && f->contains("type") && (*f)["type"].is_string() ? (*f)["type"].get<std::string>() : "";
      if (t == "json_schema") {
        const json* schema = present(*f, "schema");
        if (!schema || !schema->is_object()) bad("text.format.schema", "a json_schema format needs a 'schema' object");
        const json* name = present(*f, "name");
        if (name && !name->is_string()) bad("text.format.name", "'text.format.name' must be a string");
        json js = {{"schema", *schema}, {"name", name ? *name : json("response")}};
        if (const json* s = present(*f, "strict")) js["strict"] = *s;
        oa["response_format"] = {{"type", "json_schema"}, {"json_schema", js}};
      } else if (t == "json_object") {
        oa["response_format"] = {{"type", "json_object"}};
      } else if (t != "text") {
        bad("text.format.type", "'text.format' must be {\"type\": \"text\" | \"json_schema\" | \"json_object\"}");
      }
    }
    echo["text"] = *text;
  }
  // reasoning.effort "none" turns the template's thinking off and any other effort on (Qwen 3.5's
  // enable_thinking); absent, the template's default. The effort level and `summary` change nothing
  // else: there is no budget switch, and no summarizer (the reasoning comes back as reasoning_text).
  if (const json* re = present(body, "reasoning")) {
    if (!re->is_object()) bad("reasoning", "'reasoning' must be an object");
    if (const json* e = present(*re, "effort")) {
      if (!e->is_string()) bad("reasoning.effort", "'reasoning.effort' must be a string");
      const std::string ef = e->get<std::string>();
      if (ef != "none" && ef != "minimal" && ef != "low" && ef != "medium" && ef != "high" && ef != "xhigh") {
        bad("reasoning.effort", "unknown reasoning effort '" + ef + "'");
      }
      oa["chat_template_kwargs"] = {{"enable_thinking", ef != "none"}};
    }
    echo["reasoning"] = *re;
  }

  r.chat = parse_chat_request(oa, limits);
  return r;
}

}  // namespace oxi::server
