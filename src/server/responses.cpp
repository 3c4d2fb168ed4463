// OpenAI's Responses API (POST /v1/responses) over the OpenAI chat path: the request's `input`
// items become chat messages (parse_responses_request in responses_request.cpp), run through
// prepare_chat / run_chat, and the parsed output (reasoning, text, tool calls) becomes Responses
// output items, streamed as the Responses event sequence (docs/server.md "OpenAI /v1/responses").
// Stateless, as llama-server: nothing is stored, so `previous_response_id` is refused.
#include <string>

#include "server/dialects.h"
#include "server/http_front.h"
#include "server/routes.h"

namespace oxi::server {

using nlohmann::json;

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
