// OpenAI's Responses API (POST /v1/responses) over the OpenAI chat path: the request's `input`
// items become chat messages (parse_responses_request), run through prepare_chat / run_chat, and
// the parsed output (reasoning, text, tool calls) becomes Responses output items, streamed as the
// Responses event sequence (docs/server.md "OpenAI /v1/responses"). Stateless, as llama-server:
// nothing is stored, so `previous_response_id` is refused.
#include <string>

#include "server/dialects.h"
#include "server/http_front.h"
#include "server/routes.h"

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

namespace {

// The output items of one response, built as the output arrives: one item per run of the same
// kind (reasoning, message text), one per function call. With a StreamWriter, each step is also
// written as the Responses events; without one (a non-streaming request) only the items are kept.
class OutputItems {
 public:
  explicit OutputItems(StreamWriter* out) : out_(out) {}

  void event(const char* type, json j) {
    j["type"] = type;
    j["sequence_number"] = seq_++;
    if (out_) out_->event(type, j);
  }

  // kind: "reasoning" | "message"
  void text(const std::string& kind, const std::string& s) {
    if (s.empty()) return;
    if (open_kind_ != kind) open(kind);
    text_ += s;
    event(kind == "message" ? "response.output_text.delta" : "response.reasoning_text.delta",
          with_logprobs(kind, {{"item_id", id_}, {"output_index", index()}, {"content_index", 0}, {"delta", s}}));
  }

  // A function call, whole (the parsers emit calls once complete).
  void call(const ToolCall& c) {
    close("completed");
    const std::string id = random_id("fc_");
    json item = {{"id", id}, {"type", "function_call"}, {"status", "in_progress"}, {"call_id", random_id("call_")},
                 {"name", c.name}, {"arguments", ""}};
    event("response.output_item.added", {{"output_index", index()}, {"item", item}});
    event("response.function_call_arguments.delta", {{"item_id", id}, {"output_index", index()}, {"delta", c.arguments}});
    event("response.function_call_arguments.done",
          {{"item_id", id}, {"output_index", index()}, {"name", c.name}, {"arguments", c.arguments}});
    item["arguments"] = c.arguments;
    item["status"] = "completed";
    event("response.output_item.done", {{"output_index", index()}, {"item", item}});
    items_.push_back(std::move(item));
  }

  // Ends the open item; `status`: "completed" or "incomplete" (max_output_tokens cut it).
  void close(const char* status) {
    if (open_kind_.empty()) return;
    const bool msg = open_kind_ == "message";
    const json part = part_json(text_);
    const json at = {{"item_id", id_}, {"output_index", index()}, {"content_index", 0}};
    json done = at;
    done["text"] = text_;
    event(msg ? "response.output_text.done" : "response.reasoning_text.done", with_logprobs(open_kind_, done));
    json pd = at;
    pd["part"] = part;
    event("response.content_part.done", pd);
    json item = item_json(status);
    item["content"] = json::array({part});
    event("response.output_item.done", {{"output_index", index()}, {"item", item}});
    items_.push_back(std::move(item));
    open_kind_.clear();
    text_.clear();
  }

  // A response always has an output message unless it made calls or was cut in its reasoning.
  void ensure_message(const char* status) {
    for (const auto& it : items_) {
      if (it["type"] != "reasoning") return;
    }
    if (!items_.empty() && std::string(status) == "incomplete") return;
    open("message");
    close(status);
  }

  const json& items() const { return items_; }

 private:
  size_t index() const { return items_.size(); }  // the open item's output_index

  void open(const std::string& kind) {
    close("completed");
    open_kind_ = kind;
    id_ = random_id(kind == "message" ? "msg_" : "rs_");
    event("response.output_item.added", {{"output_index", index()}, {"item", item_json("in_progress")}});
    event("response.content_part.added",
          {{"item_id", id_}, {"output_index", index()}, {"content_index", 0}, {"part", part_json("")}});
  }

  json item_json(const char* status) const {
    if (open_kind_ == "message") {
      return {{"id", id_}, {"type", "message"}, {"status", status}, {"role", "assistant"}, {"content", json::array()}};
    }
    return {{"id", id_}, {"type", "reasoning"}, {"status", status}, {"summary", json::array()},
            {"content", json::array()}, {"encrypted_content", nullptr}};
  }

  json part_json(const std::string& text) const {
    if (open_kind_ == "message") {
      return {{"type", "output_text"}, {"text", text}, {"annotations", json::array()}, {"logprobs", json::array()}};
    }
    return {{"type", "reasoning_text"}, {"text", text}};
  }

  // output_text events carry `logprobs` (none are computed here: always empty).
  static json with_logprobs(const std::string& kind, json j) {
    if (kind == "message") j["logprobs"] = json::array();
    return j;
  }

  StreamWriter* out_;
  json items_ = json::array();
  std::string open_kind_, id_, text_;
  int64_t seq_ = 0;
};

// Counts the tokens spent in reasoning: each token from the first reasoning text up to the first
// answer text or call (tokens that show nothing, such as </think>, count with the side they end).
struct ReasoningCount {
  int n = 0;
  bool answering = false;
  void add(const ChatDelta& d, const TokenOut* t) {
    if (!d.content.empty() || !d.tool_calls.empty()) answering = true;
    if (t && !answering && (n > 0 || !d.reasoning_content.empty())) ++n;
  }
};

}  // namespace

void Routes::responses(const std::string& text, httplib::Response& res) {
  ResponsesRequest rq = parse_responses_request(parse_body(text), limits_);
  check_model(rq.chat, eng_.model_id());
  const bool one_call = rq.one_call;
  std::shared_ptr<ChatJob> job;
  try {
    job = std::make_shared<ChatJob>(prepare_chat(std::move(rq.chat)));
  } catch (const RequestError& e) {
    // A schema the constraint cannot enforce: named by this API's field.
    if (e.param() == "response_format") throw RequestError(e.status(), "text.format.schema", e.what(), e.type());
    throw;
  }
  const std::string model = eng_.model_id();
  // The response object around the output; the request's settings as given (nulls where absent).
  auto base = std::make_shared<json>(json{
      {"id", random_id("resp_")}, {"object", "response"}, {"created_at", now_s()}, {"status", "in_progress"},
      {"error", nullptr}, {"incomplete_details", nullptr}, {"instructions", rq.echo.value("instructions", json())},
      {"max_output_tokens", rq.echo.value("max_output_tokens", json())}, {"model", model}, {"output", json::array()},
      {"parallel_tool_calls", !one_call}, {"previous_response_id", nullptr},
      {"reasoning", rq.echo.value("reasoning", json{{"effort", nullptr}, {"summary", nullptr}})},
      {"store", false}, {"temperature", job->req.sampling.temperature ? json(*job->req.sampling.temperature) : json()},
      {"text", rq.echo.value("text", json{{"format", {{"type", "text"}}}})},
      {"tool_choice", rq.echo.value("tool_choice", json("auto"))}, {"tools", rq.echo.value("tools", json::array())},
      {"top_p", job->req.sampling.top_p ? json(*job->req.sampling.top_p) : json()}, {"truncation", "disabled"},
      {"usage", nullptr}, {"metadata", rq.echo.value("metadata", json::object())}});
  if (rq.echo.contains("user")) (*base)["user"] = rq.echo["user"];
  // The finished response: status, output, usage.
  auto finish = [base](const ChatRun& run, const OutputItems& items, int reasoning_tokens) {
    json r = *base;
    const bool cut = run.finish == "length";
    r["status"] = cut ? "incomplete" : "completed";
    if (cut) r["incomplete_details"] = {{"reason", "max_output_tokens"}};
    r["completed_at"] = cut ? json() : json(now_s());
    r["output"] = items.items();
    const GenerationResult& g = run.result;
    r["usage"] = {{"input_tokens", g.n_prompt}, {"input_tokens_details", {{"cached_tokens", g.n_cached}}},
                  {"output_tokens", g.n_generated}, {"output_tokens_details", {{"reasoning_tokens", reasoning_tokens}}},
                  {"total_tokens", g.n_prompt + g.n_generated}};
    return r;
  };
  if (!job->req.stream) {
    ReasoningCount rc;
    const ChatRun run = run_single(*job, one_call, [&](const ChatDelta& d, const TokenOut* t) { rc.add(d, t); },
                                   [] { return !client_disconnected(); });
    if (run.error) std::rethrow_exception(run.error);
    const char* status = run.finish == "length" ? "incomplete" : "completed";
    OutputItems items(nullptr);
    const ChatMessage& m = run.message;
    items.text("reasoning", m.reasoning_content);
    items.text("message", m.content);
    for (size_t i = 0; i < m.tool_calls.size() && !(one_call && i > 0); ++i) items.call(m.tool_calls[i]);
    items.close(status);
    items.ensure_message(status);
    return send_json(res, 200, finish(run, items, rc.n));
  }

  res.set_header("Cache-Control", "no-cache");
  res.set_chunked_content_provider("text/event-stream", [this, job, base, finish, one_call](size_t, httplib::DataSink& sink) {
    StreamWriter out(sink);
    OutputItems items(&out);
    items.event("response.created", {{"response", *base}});
    items.event("response.in_progress", {{"response", *base}});
    ReasoningCount rc;
    const ChatRun run = run_single(
        *job, one_call,
        [&](const ChatDelta& d, const TokenOut* t) {
          rc.add(d, t);
          items.text("reasoning", d.reasoning_content);
          items.text("message", d.content);
          for (const auto& [index, call] : d.tool_calls) items.call(call);
        },
        [&] { return out.alive.load(); });
    if (run.error) {
      // Never a 500 mid-stream: the in-band error event, then response.failed.
      const std::string msg = error_message(run.error);
      items.event("error", {{"code", "server_error"}, {"message", msg}, {"param", nullptr}});
      json r = *base;
      r["status"] = "failed";
      r["error"] = {{"code", "server_error"}, {"message", msg}};
      items.event("response.failed", {{"response", r}});
      out.done(false);
      return true;
    }
    const char* status = run.finish == "length" ? "incomplete" : "completed";
    items.close(status);
    items.ensure_message(status);
    const json r = finish(run, items, rc.n);
    items.event(r["status"] == "incomplete" ? "response.incomplete" : "response.completed", {{"response", r}});
    out.done(false);
    return true;
  });
}

}  // namespace oxi::server
