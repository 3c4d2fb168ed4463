// The HTTP routes of `oxinfer serve` (internal to src/server). One Routes object serves every API
// dialect over the same engine: OpenAI (http_server.cpp; /v1/responses in responses.cpp), Anthropic
// /v1/messages (anthropic.cpp) and ollama's /api/* (ollama.cpp). The dialects are thin
// translations of their request and response shapes: each builds a ChatRequest, runs it through
// prepare_chat / run_chat (the one chat path: template rendering, prompt cache checkpoint, output
// parser, stop strings, structured output) and writes the result in its own shape.
#pragma once

#include <httplib.h>

#include <atomic>
#include <cstdint>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "chat/parser.h"
#include "server/engine.h"
#include "server/request.h"
#include "server/server.h"

namespace oxi::server {

// The ollama version /api/version reports (ollama.cpp; docs/server.md).
extern const char* const kOllamaCompatVersion;

int64_t now_s();
std::string random_id(const char* prefix);
void send_json(httplib::Response& res, int status, const nlohmann::json& body);

// The error shape of each API dialect.
enum class ErrorStyle {
  kOpenAI,     // {"error":{"message","type","param","code"}}
  kAnthropic,  // {"type":"error","error":{"type","message"}}
  kOllama,     // {"error":"message"}
};
void send_error(httplib::Response& res, ErrorStyle style, int status, const std::string& msg,
                const std::string& param = "", const std::string& type = "invalid_request_error");

// Writes one streamed response, from the threads of its choices: each event whole, and nothing
// more once a write has failed (the client is gone).
struct StreamWriter {
  explicit StreamWriter(httplib::DataSink& s) : sink(s) {}
  httplib::DataSink& sink;
  std::mutex mu;
  std::atomic<bool> alive{true};
  bool raw(const std::string& s);
  bool data(const nlohmann::json& j);                           // SSE "data: {…}"
  bool event(const std::string& name, const nlohmann::json& j);  // SSE "event: name\ndata: {…}"
  bool line(const nlohmann::json& j);                           // NDJSON "{…}\n"
  void done(bool openai_done_marker);                           // "data: [DONE]" (OpenAI) and end
};

struct Metrics {
  std::atomic<uint64_t> requests{0}, errors{0}, prompt_tokens{0}, cached_tokens{0}, gen_tokens{0};
  std::atomic<uint64_t> drafted{0}, accepted{0};
  std::atomic<uint64_t> embedding_inputs{0};  // inputs embedded (each entry of an `input` array)
  std::atomic<int> in_flight{0};
};

struct InFlight {
  explicit InFlight(Metrics& m) : m_(m) { m_.in_flight++; }
  ~InFlight() { m_.in_flight--; }
  Metrics& m_;
};

// A chat request made ready to run: rendered, tokenized, its output parser options chosen.
struct ChatJob {
  ChatRequest req;
  std::string prompt;
  std::vector<int32_t> ids;
  size_t checkpoint_at = 0;  // the turn boundary (prompt cache checkpoint), 0: none
  std::shared_ptr<const PromptMedia> media;  // the prompt's images (Engine::place_images), or null
  ParserOptions popt;
  ChatFormat format = ChatFormat::kPlain;
  bool raw_text = false;  // the output is text as generated, unparsed (ollama's raw generate)
};

// One generated chat choice.
struct ChatRun {
  GenerationResult result;
  ChatMessage message;       // reasoning, content and tool calls, parsed
  std::string finish;        // "stop" | "length" | "tool_calls"
  std::string stop_matched;  // the stop string that ended the choice ("" if none did)
  std::exception_ptr error;  // a failure during generation (the deltas before it were delivered)
};

// The message of a failure caught as an exception_ptr (streams report it in-band).
std::string error_message(const std::exception_ptr& e);

// Called with each parsed delta (token: the token it came from; null for the final flushes).
// Return false to stop generating.
using DeltaSink = std::function<bool(const ChatDelta& delta, const TokenOut* token)>;

class Routes {
 public:
  Routes(const ServerOptions& opt, Engine& eng);
  void install(httplib::Server& svr);

 private:
  using PostFn = void (Routes::*)(const std::string& body, httplib::Response& res);

  // ---- shared (http_server.cpp) ----
  void post(httplib::Server& svr, const char* path, PostFn fn, ErrorStyle style = ErrorStyle::kOpenAI);
  std::string read_body(httplib::Response& res, const httplib::ContentReader& reader);
  bool guard(const httplib::Request& req, httplib::Response& res, ErrorStyle style, bool need_ready = true);
  void handle(const httplib::Request& req, httplib::Response& res, ErrorStyle style, const std::function<void()>& body);
  void account(const GenerationResult& r);
  // The Access-Control-Allow-Origin value for the request's Origin ("" when not allowed or no
  // --cors-origin).
  std::string cors_allow(const httplib::Request& req) const;
  // Renders and tokenizes the request and checks its structured-output constraint (400 on a bad
  // schema or an unknown forced tool), before anything is sent.
  ChatJob prepare_chat(ChatRequest req);
  // Generates choice i. `keep_going` is asked after every token (client gone, shutdown…).
  ChatRun run_chat(const ChatJob& job, int i, const DeltaSink& on_delta, const std::function<bool()>& keep_going);
  // The one choice of a dialect request (Anthropic, Responses), counted in flight. one_call: the
  // deltas carry at most one tool call in all, and generation stops once it is complete
  // (disable_parallel_tool_use / parallel_tool_calls: false).
  ChatRun run_single(const ChatJob& job, bool one_call, const std::function<void(const ChatDelta&, const TokenOut*)>& on_delta,
                     const std::function<bool()>& keep_going);

  // ---- OpenAI (http_server.cpp) ----
  void chat(const std::string& text, httplib::Response& res);
  void completion(const std::string& text, httplib::Response& res);
  void tokenize(const std::string& text, httplib::Response& res);
  void detokenize(const std::string& text, httplib::Response& res);
  void metrics(httplib::Response& res);
  void props(httplib::Response& res);
  void slots(const httplib::Request& req, httplib::Response& res);
  void apply_template(const std::string& text, httplib::Response& res);
  // The request log line (docs/server.md "Request log"), written once the response is sent.
  void log_request(const httplib::Request& req, const httplib::Response& res);
  nlohmann::json chat_choice(const ChatJob& job, int i, GenerationResult& r, const std::atomic<bool>& gone);
  nlohmann::json completion_logprobs(const std::vector<TokenOut>& toks, int n_top);

  // ---- embeddings (embeddings.cpp) ----
  void embeddings_oai(const std::string& text, httplib::Response& res);     // /v1/embeddings
  void embeddings_native(const std::string& text, httplib::Response& res);  // /embeddings, /embedding
  void embeddings(const std::string& text, httplib::Response& res, bool oai);
  // Runs the inputs (token ids, each checked by the engine) and pools each one; counted in flight,
  // accounted as prompt tokens and embedded inputs.
  // /rerank, /reranking, /v1/rerank, /v1/reranking (llama-server's names): 501, kNoRerankReason.
  void rerank(const std::string& text, httplib::Response& res);
  std::vector<Pooler> embed_pooled(const std::vector<std::vector<int32_t>>& ids, Pooling pooling);

  // ---- Anthropic (anthropic.cpp) ----
  void messages(const std::string& text, httplib::Response& res);
  void count_tokens(const std::string& text, httplib::Response& res);

  // ---- OpenAI Responses (responses.cpp) ----
  void responses(const std::string& text, httplib::Response& res);

  // ---- ollama (ollama.cpp) ----
  void ollama_chat(const std::string& text, httplib::Response& res);
  void ollama_generate(const std::string& text, httplib::Response& res);
  void ollama_show(const std::string& text, httplib::Response& res);
  void ollama_tags(httplib::Response& res);
  void ollama_embed(const std::string& text, httplib::Response& res);       // /api/embed
  void ollama_embeddings(const std::string& text, httplib::Response& res);  // /api/embeddings (legacy)
  void ollama_embed_route(const std::string& text, httplib::Response& res, bool legacy);
  void ollama_stream(ChatJob job, bool chat_shape, httplib::Response& res);
  nlohmann::json ollama_model_entry() const;

  const ServerOptions& opt_;
  Engine& eng_;
  Limits limits_;
  Metrics metrics_;
};

}  // namespace oxi::server
