// Anthropic's Messages API (POST /v1/messages, /v1/messages/count_tokens) over the OpenAI chat
// path: the request becomes an OpenAI chat request (parse_anthropic_request in
// anthropic_request.cpp), runs through prepare_chat / run_chat, and the parsed output (thinking,
// text, tool calls) becomes Anthropic content blocks, streamed as Anthropic's event sequence
// (docs/server.md "Anthropic /v1/messages").
#include <cctype>
#include <string>

#include "core/error.h"
#include "server/dialects.h"
#include "server/http_front.h"
#include "server/routes.h"

namespace oxi::server {

using nlohmann::json;

namespace {

const char* stop_reason_of(const ChatRun& run) {
  if (run.finish == "tool_calls") return "tool_use";
  if (!run.stop_matched.empty()) return "stop_sequence";
  if (run.finish == "length") return "max_tokens";
  return "end_turn";
}

json tool_input(const ToolCall& c) {
  json in = json::parse(c.arguments, nullptr, false);
  return in.is_object() ? in : json::object();
}

json usage_of(const GenerationResult& r) {
  // Anthropic counts the cache reads apart: input_tokens + cache_read_input_tokens = the prompt.
  return json{{"input_tokens", r.n_prompt - r.n_cached}, {"cache_creation_input_tokens", 0},
              {"cache_read_input_tokens", r.n_cached}, {"output_tokens", r.n_generated}};
}

// The content blocks of a stream: opens a block when the kind of output changes, closes the open
// one, and gives each block its index.
class BlockStream {
 public:
  explicit BlockStream(StreamWriter& out) : out_(out) {}

  void text(const std::string& kind, const std::string& s) {  // kind: "text" | "thinking"
    if (s.empty()) return;
    if (open_ != kind) {
      close();
      out_.event("content_block_start", {{"type", "content_block_start"}, {"index", index_},
                                         {"content_block", kind == "text" ? json{{"type", "text"}, {"text", ""}}
                                                                          : json{{"type", "thinking"}, {"thinking", ""}, {"signature", ""}}}});
      open_ = kind;
    }
    json delta = kind == "text" ? json{{"type", "text_delta"}, {"text", s}} : json{{"type", "thinking_delta"}, {"thinking", s}};
    out_.event("content_block_delta", {{"type", "content_block_delta"}, {"index", index_}, {"delta", delta}});
  }

  void tool_use(const ToolCall& c) {
    close();
    out_.event("content_block_start", {{"type", "content_block_start"}, {"index", index_},
                                       {"content_block", {{"type", "tool_use"}, {"id", random_id("toolu_")},
                                                          {"name", c.name}, {"input", json::object()}}}});
    out_.event("content_block_delta", {{"type", "content_block_delta"}, {"index", index_},
                                       {"delta", {{"type", "input_json_delta"}, {"partial_json", tool_input(c).dump()}}}});
    open_ = "tool_use";
    close();
  }

  void close() {
    if (open_.empty()) return;
    if (open_ == "thinking") {
      out_.event("content_block_delta", {{"type", "content_block_delta"}, {"index", index_},
                                         {"delta", {{"type", "signature_delta"}, {"signature", ""}}}});
    }
    out_.event("content_block_stop", {{"type", "content_block_stop"}, {"index", index_}});
    open_.clear();
    ++index_;
  }

  void empty_text() {
    close();
    out_.event("content_block_start", {{"type", "content_block_start"}, {"index", index_},
                                       {"content_block", {{"type", "text"}, {"text", ""}}}});
    open_ = "text";
    close();
  }

  int count() const { return index_; }

 private:
  StreamWriter& out_;
  std::string open_;
  int index_ = 0;
};

}  // namespace

void Routes::count_tokens(const std::string& text, httplib::Response& res) {
  AnthropicRequest a = parse_anthropic_request(parse_body(text), limits_, /*count_only=*/true);
  check_model(a.chat, eng_.model_id());
  const ChatJob job = prepare_chat(std::move(a.chat));
  send_json(res, 200, {{"input_tokens", job.ids.size()}});
}

void Routes::messages(const std::string& text, httplib::Response& res) {
  AnthropicRequest a = parse_anthropic_request(parse_body(text), limits_);
  check_model(a.chat, eng_.model_id());
  const bool one_call = a.disable_parallel_tool_use;
  auto job = std::make_shared<ChatJob>(prepare_chat(std::move(a.chat)));
  const std::string id = random_id("msg_");
  const std::string model = eng_.model_id();
  if (!job->req.stream) {
    const ChatRun run = run_single(*job, one_call, [](const ChatDelta&, const TokenOut*) {},
                                   [] { return !client_disconnected(); });
    if (run.error) std::rethrow_exception(run.error);
    json content = json::array();
    const ChatMessage& m = run.message;
    if (!m.reasoning_content.empty()) content.push_back({{"type", "thinking"}, {"thinking", m.reasoning_content}, {"signature", ""}});
    if (!m.content.empty()) content.push_back({{"type", "text"}, {"text", m.content}});
    for (size_t i = 0; i < m.tool_calls.size() && !(one_call && i > 0); ++i) {
      content.push_back({{"type", "tool_use"}, {"id", random_id("toolu_")}, {"name", m.tool_calls[i].name},
                         {"input", tool_input(m.tool_calls[i])}});
    }
    if (content.empty()) content.push_back({{"type", "text"}, {"text", ""}});
    return send_json(res, 200, {{"id", id}, {"type", "message"}, {"role", "assistant"}, {"model", model},
                                {"content", content}, {"stop_reason", stop_reason_of(run)},
                                {"stop_sequence", run.stop_matched.empty() ? json(nullptr) : json(run.stop_matched)},
                                {"usage", usage_of(run.result)}});
  }

  res.set_header("Cache-Control", "no-cache");
  res.set_chunked_content_provider("text/event-stream", [this, job, id, model, one_call](size_t, httplib::DataSink& sink) {
    StreamWriter out(sink);
    out.event("message_start",
              {{"type", "message_start"},
               {"message", {{"id", id}, {"type", "message"}, {"role", "assistant"}, {"model", model},
                            {"content", json::array()}, {"stop_reason", nullptr}, {"stop_sequence", nullptr},
                            {"usage", {{"input_tokens", job->ids.size()}, {"cache_creation_input_tokens", 0},
                                       {"cache_read_input_tokens", 0}, {"output_tokens", 0}}}}}});
    out.event("ping", {{"type", "ping"}});
    BlockStream blocks(out);
    const ChatRun run = run_single(
        *job, one_call,
        [&](const ChatDelta& d, const TokenOut*) {
          blocks.text("thinking", d.reasoning_content);
          blocks.text("text", d.content);
          for (const auto& [index, call] : d.tool_calls) blocks.tool_use(call);
        },
        [&] { return out.alive.load(); });
    if (run.error) {
      // Never a 500 mid-stream: Anthropic's in-band error event ends the stream.
      out.event("error", {{"type", "error"}, {"error", {{"type", "api_error"}, {"message", error_message(run.error)}}}});
      out.done(false);
      return true;
    }
    blocks.close();
    if (blocks.count() == 0) blocks.empty_text();  // a message always has a content block
    out.event("message_delta", {{"type", "message_delta"},
                                {"delta", {{"stop_reason", stop_reason_of(run)},
                                           {"stop_sequence", run.stop_matched.empty() ? json(nullptr) : json(run.stop_matched)}}},
                                {"usage", usage_of(run.result)}});
    out.event("message_stop", {{"type", "message_stop"}});
    out.done(false);
    return true;
  });
}

}  // namespace oxi::server
