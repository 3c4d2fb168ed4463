// HTTP routes of the OpenAI-compatible server (cpp-httplib); the Anthropic and ollama dialects
// are in anthropic.cpp and ollama.cpp (routes.h). The model loads in the background:
// /health answers 503 until it is ready. Bad requests get OpenAI-style error JSON with a 4xx;
// once a stream has started, failures end it cleanly (never a 500 mid-stream).
#include <httplib.h>

#include <algorithm>
#include <cctype>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <csignal>
#include <cstdio>
#include <exception>
#include <mutex>
#include <random>
#include <thread>
#include <vector>

#include <fcntl.h>
#include <unistd.h>

#include "core/error.h"
#include "sampling/gbnf.h"
#include "server/engine.h"
#include "server/forced_tool.h"
#include "server/http_front.h"
#include "server/routes.h"
#include "server/server.h"
#include "chat/parser.h"
#include "server/stream_text.h"
#include "server/webui.h"

namespace oxi::server {

using nlohmann::json;

std::unique_ptr<Engine> make_engine(const ServerOptions& options);  // engine.cpp

namespace {

// SIGINT/SIGTERM: the handler only counts and wakes the shutdown thread through a pipe (nothing
// else is safe in a signal handler); the second signal exits at once.
std::atomic<int> g_signals{0};
int g_signal_pipe[2] = {-1, -1};

void on_signal(int sig) {
  if (g_signals.fetch_add(1) > 0) _exit(128 + sig);
  (void)!::write(g_signal_pipe[1], "x", 1);
}

// Graceful shutdown (docs/server.md "Shutdown"): waits for the first signal, then stops accepting;
// running requests have `timeout_s` to finish, then they are cut (cancel_all: they end at their
// next token with a normal response); if the process is still not done 2 s after that (a long
// prompt pre-fill is not cut), it exits with status 1. finish() ends the wait from the main thread.
class ShutdownWatch {
 public:
  ShutdownWatch(FrontServer& svr, Engine& eng, double timeout_s) : svr_(svr), eng_(eng), timeout_s_(timeout_s) {
    thread_ = std::thread([this] { watch(); });
  }
  ~ShutdownWatch() { finish(); }

  // No request runs any more (the engine may go away): past the deadline, only the exit is left.
  void requests_ended() {
    std::lock_guard<std::mutex> lk(mu_);
    requests_ended_ = true;
  }

  void finish() {
    {
      std::lock_guard<std::mutex> lk(mu_);
      done_ = true;
    }
    cv_.notify_all();
    (void)!::write(g_signal_pipe[1], "x", 1);  // wakes the wait for a signal
    if (thread_.joinable()) thread_.join();
  }

 private:
  void watch() {
    char c;
    while (::read(g_signal_pipe[0], &c, 1) < 0 && errno == EINTR) {
    }
    std::unique_lock<std::mutex> lk(mu_);
    if (done_) return;
    std::fprintf(stderr, "oxinfer: shutting down: running requests have %g s to finish (signal again to exit now)\n",
                 timeout_s_);
    svr_.stop();
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_s_);
    if (cv_.wait_until(lk, deadline, [&] { return done_; })) return;
    svr_.stop();  // again: a signal that came before the listen loop started was not seen by it
    if (!requests_ended_) {
      std::fprintf(stderr, "oxinfer: shutdown deadline reached: cutting the running requests\n");
      eng_.cancel_all();
    }
    if (cv_.wait_for(lk, std::chrono::seconds(2), [&] { return done_; })) return;
    std::fprintf(stderr, "oxinfer: requests still running 2 s after the shutdown deadline: exiting\n");
    std::fflush(stderr);
    _exit(1);
  }

  FrontServer& svr_;
  Engine& eng_;
  double timeout_s_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool done_ = false;
  bool requests_ended_ = false;
  std::thread thread_;
};


}  // namespace

int64_t now_s() {
  return std::chrono::duration_cast<std::chrono::seconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

std::string random_id(const char* prefix) {
  static thread_local std::mt19937_64 rng{std::random_device{}()};
  static const char* kHex = "0123456789abcdef";
  std::string s = prefix;
  for (int i = 0; i < 24; ++i) s += kHex[rng() & 15];
  return s;
}

void send_json(httplib::Response& res, int status, const json& body) {
  res.status = status;
  res.set_content(body.dump(-1, ' ', false, json::error_handler_t::replace), "application/json");
}

void send_error(httplib::Response& res, ErrorStyle style, int status, const std::string& msg, const std::string& param,
                const std::string& type) {
  switch (style) {
    case ErrorStyle::kOpenAI:
      return send_json(res, status, error_body(msg, type, param, status));
    case ErrorStyle::kAnthropic: {
      // Anthropic's error types by status (its "Errors" page); the message names the field.
      const char* t = status == 401   ? "authentication_error"
                      : status == 403 ? "permission_error"
                      : status == 404 ? "not_found_error"
                      : status == 413 ? "request_too_large"
                      : status == 429 ? "rate_limit_error"
                      : status == 503 ? "overloaded_error"
                      : status >= 500 ? "api_error"
                                      : "invalid_request_error";
      const std::string m = param.empty() || msg.find(param) != std::string::npos ? msg : param + ": " + msg;
      return send_json(res, status, {{"type", "error"}, {"error", {{"type", t}, {"message", m}}}});
    }
    case ErrorStyle::kOllama: {
      const std::string m = param.empty() || msg.find(param) != std::string::npos ? msg : param + ": " + msg;
      return send_json(res, status, {{"error", m}});
    }
  }
}

std::string error_message(const std::exception_ptr& e) {
  try {
    std::rethrow_exception(e);
  } catch (const std::exception& x) {
    return x.what();
  } catch (...) {
    return "generation failed";
  }
}

bool StreamWriter::raw(const std::string& s) {
  std::lock_guard<std::mutex> lk(mu);
  if (!alive) return false;
  if (!sink.write(s.data(), s.size())) alive = false;
  return alive;
}

bool StreamWriter::data(const json& j) {
  return raw("data: " + j.dump(-1, ' ', false, json::error_handler_t::replace) + "\n\n");
}

bool StreamWriter::event(const std::string& name, const json& j) {
  return raw("event: " + name + "\ndata: " + j.dump(-1, ' ', false, json::error_handler_t::replace) + "\n\n");
}

bool StreamWriter::line(const json& j) { return raw(j.dump(-1, ' ', false, json::error_handler_t::replace) + "\n"); }

void StreamWriter::done(bool openai_done_marker) {
  if (openai_done_marker && alive) sink.write("data: [DONE]\n\n", 14);
  sink.done();
}

namespace {

json usage_json(const GenerationResult& r) {
  return json{{"prompt_tokens", r.n_prompt},
              {"completion_tokens", r.n_generated},
              {"total_tokens", r.n_prompt + r.n_generated},
              {"prompt_tokens_details", {{"cached_tokens", r.n_cached}}}};
}

// llama-server's per-response timings (its field names), with the speculative decoding counts.
json timings_json(const GenerationResult& r) {
  auto per_s = [](int n, double ms) { return ms > 0.0 ? n * 1000.0 / ms : 0.0; };
  json t{{"prompt_n", r.n_prompt - r.n_cached}, {"prompt_ms", r.prompt_ms},
              {"prompt_per_second", per_s(r.n_prompt - r.n_cached, r.prompt_ms)},
              {"predicted_n", r.n_generated}, {"predicted_ms", r.gen_ms},
              {"predicted_per_second", per_s(r.n_generated, r.gen_ms)},
              {"draft_n", r.n_drafted}, {"draft_n_accepted", r.n_accepted}};
  if (r.n_images > 0) {  // prompts with images: how many the tower ran on (the rest: prompt or encode cache)
    t["images"] = r.n_images;
    t["images_encoded"] = r.n_images_encoded;
    t["image_encode_ms"] = r.image_encode_ms;
  }
  if (r.n_audio > 0) {  // prompts with audio: likewise for the audio tower
    t["audio"] = r.n_audio;
    t["audio_encoded"] = r.n_audio_encoded;
    t["audio_encode_ms"] = r.audio_encode_ms;
  }
  return t;
}

// Timings of a request's choices: the prompt once, the generated and drafted tokens summed, the
// generation time of the longest choice (they run at once).
json timings_json(const std::vector<GenerationResult>& rs) {
  GenerationResult u = rs.front();
  for (size_t i = 1; i < rs.size(); ++i) {
    u.n_generated += rs[i].n_generated;
    u.n_drafted += rs[i].n_drafted;
    u.n_accepted += rs[i].n_accepted;
    u.gen_ms = std::max(u.gen_ms, rs[i].gen_ms);
  }
  return timings_json(u);
}

// usage of a request's choices: the prompt once (as OpenAI counts it), the completions summed.
json usage_json(const std::vector<GenerationResult>& rs) {
  GenerationResult u = rs.front();
  for (size_t i = 1; i < rs.size(); ++i) {
    u.n_generated += rs[i].n_generated;
    u.n_cached = std::min(u.n_cached, rs[i].n_cached);
  }
  return usage_json(u);
}

// The request as choice i runs it: a given seed becomes seed + i, so that the choices differ
// and each is reproducible (a random seed differs per choice anyway). Only the generation
// fields are copied.
GenerationRequest choice_request(const GenerationRequest& req, int i) {
  GenerationRequest r = req;
  if (r.sampling.seed) r.sampling.seed = *r.sampling.seed + static_cast<uint64_t>(i);
  return r;
}

// Runs fn(i) for the n choices of a request. A single choice runs on this thread; several run at
// once on threads of their own (each takes a slot, and the batcher merges their decode steps)
// while this thread watches the connection — client_disconnected() answers only on the request's
// thread — and sets `gone` once the client has left. Rethrows the first failure after all ended.
// Tokens of the request being handled on this thread, for its log line: account() adds to them
// (from the threads of its choices too, through tl_tally_redirect), log_request() prints and
// clears them.
// The prompt counts once, as in `usage` (choices share it): its cached part is the least any
// choice reused.
struct RequestTally {
  std::mutex mu;
  int64_t prompt = 0, cached = 0, generated = 0;
  int results = 0;
  void add(const GenerationResult& r) {
    std::lock_guard<std::mutex> lk(mu);
    prompt = std::max<int64_t>(prompt, r.n_prompt);
    cached = results == 0 ? r.n_cached : std::min<int64_t>(cached, r.n_cached);
    generated += r.n_generated;
    ++results;
  }
  void take(int64_t& p, int64_t& c, int64_t& g) {
    std::lock_guard<std::mutex> lk(mu);
    p = prompt;
    c = cached;
    g = generated;
    prompt = cached = generated = 0;
    results = 0;
  }
};
thread_local RequestTally tl_tally;
thread_local RequestTally* tl_tally_redirect = nullptr;
RequestTally& tally() { return tl_tally_redirect ? *tl_tally_redirect : tl_tally; }

template <class F>
void run_choices(int n, std::atomic<bool>& gone, F&& fn) {
  if (n == 1) return fn(0);
  RequestTally* parent = &tally();
  std::vector<std::exception_ptr> errors(static_cast<size_t>(n));
  std::atomic<int> running{n};
  std::vector<std::thread> threads;
  for (int i = 0; i < n; ++i) {
    threads.emplace_back([&, i] {
      tl_tally_redirect = parent;
      try {
        fn(i);
      } catch (...) {
        errors[static_cast<size_t>(i)] = std::current_exception();
      }
      running--;
    });
  }
  while (running.load() > 0) {
    if (client_disconnected()) gone = true;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  for (auto& t : threads) t.join();
  for (auto& e : errors)
    if (e) std::rethrow_exception(e);
}

json logprob_entry(Engine& eng, const TokenOut& t, int n_top) {
  auto bytes_of = [](const std::string& s) {
    json b = json::array();
    for (unsigned char c : s) b.push_back(c);
    return b;
  };
  const std::string piece = eng.token_piece(t.id);
  json top = json::array();
  for (int i = 0; i < n_top && i < static_cast<int>(t.top.size()); ++i) {
    const std::string p = eng.token_piece(t.top[i].first);
    top.push_back({{"token", p}, {"logprob", t.top[i].second}, {"bytes", bytes_of(p)}});
  }
  return json{{"token", piece}, {"logprob", t.logprob}, {"bytes", bytes_of(piece)}, {"top_logprobs", top}};
}


// OpenAI tool_calls entries; `index` only in stream deltas.
// The automaton for structured output: response_format, or a forced tool call (tool_choice
// "required" or a named function) in the family's syntax. Null when generation is free.
// A schema the constraint cannot enforce is the request's fault: 400 naming response_format.
std::shared_ptr<TextConstraint> framed_json(std::string prefix, const json& schema, std::string suffix) {
  try {
    return std::make_shared<FramedJsonConstraint>(std::move(prefix), schema, std::move(suffix));
  } catch (const Error& e) {
    throw RequestError(400, "response_format", e.what());
  }
}

// A request's GBNF grammar (parse_common compiled it), one automaton per choice; null without one.
std::shared_ptr<TextConstraint> grammar_constraint(const GenerationRequest& req, std::string prefix = {}) {
  if (!req.grammar) return nullptr;
  return std::make_shared<GbnfConstraint>(req.grammar, std::move(prefix));
}

// The bytes that close a reasoning block the template left open, before constrained text.
std::string reasoning_close(ChatFormat format, bool in_reasoning) {
  if (!in_reasoning) return {};
  return format == ChatFormat::kGemma4 ? "<channel|>" : "</think>\n\n";
}

std::shared_ptr<TextConstraint> make_constraint(const ChatRequest& req, ChatFormat format, bool in_reasoning) {
  const std::string pre = reasoning_close(format, in_reasoning);
  // parse_chat_request refused a grammar beside response_format or a forced tool call.
  if (req.grammar) return grammar_constraint(req, pre);
  const bool force_tool = !req.tools.empty() && req.tool_choice != "auto" && req.tool_choice != "none";
  if (force_tool && format != ChatFormat::kPlain) {
    try {
      return forced_tool_constraint(req.tools, req.tool_choice, format, pre);
    } catch (const Error& e) {
      throw RequestError(400, "tool_choice", e.what());
    }
  }
  const json& rf = req.response_format;
  if (rf.is_object()) {
    const std::string t = rf.value("type", "");
    if (t == "json_object") return framed_json(pre, nullptr, "");
    if (t == "json_schema") {
      const json& js = rf["json_schema"];  // an object (parse_chat_request)
      return framed_json(pre, js.contains("schema") && !js["schema"].is_null() ? js["schema"] : json::object(), "");
    }
  }
  return nullptr;
}

json tool_call_json(const ToolCall& c, const std::string& call_id, long index) {
  json j = {{"id", call_id}, {"type", "function"}, {"function", {{"name", c.name}, {"arguments", c.arguments}}}};
  if (index >= 0) j["index"] = index;
  return j;
}


}  // namespace

Routes::Routes(const ServerOptions& opt, Engine& eng) : opt_(opt), eng_(eng) { limits_.max_tokens_cap = opt.max_tokens_cap; }

void Routes::install(httplib::Server& svr) {
  svr.set_payload_max_length(opt_.max_body_bytes);
  svr.Get("/health", [this](const httplib::Request&, httplib::Response& res) {
    if (!eng_.ready()) return send_json(res, 503, {{"status", "loading model"}});
    send_json(res, 200, {{"status", "ok"}});
  });
  svr.Get("/v1/models", [this](const httplib::Request& req, httplib::Response& res) {
    if (!guard(req, res, ErrorStyle::kOpenAI, false)) return;
    json m = {{"id", eng_.model_id()}, {"object", "model"}, {"created", now_s()}, {"owned_by", "oxinfer"}};
    send_json(res, 200, {{"object", "list"}, {"data", json::array({m})}});
  });
  svr.Get("/metrics", [this](const httplib::Request&, httplib::Response& res) { metrics(res); });
  svr.Get(R"(/v1/models/(.+))", [this](const httplib::Request& req, httplib::Response& res) {
    if (!guard(req, res, ErrorStyle::kOpenAI, false)) return;
    const std::string id = req.matches[1];
    if (id != eng_.model_id()) {
      return send_error(res, ErrorStyle::kOpenAI, 404, "the model '" + id + "' does not exist", "model");
    }
    send_json(res, 200, {{"id", id}, {"object", "model"}, {"created", now_s()}, {"owned_by", "oxinfer"}});
  });
  svr.Get("/props", [this](const httplib::Request& req, httplib::Response& res) {
    if (guard(req, res, ErrorStyle::kOpenAI)) props(res);
  });
  svr.Get("/slots", [this](const httplib::Request& req, httplib::Response& res) {
    if (guard(req, res, ErrorStyle::kOpenAI)) slots(req, res);
  });
  if (opt_.webui) install_webui(svr);  // GET /: the chat page (no API key asked for its files)
  post(svr, "/apply-template", &Routes::apply_template);
  post(svr, "/v1/chat/completions", &Routes::chat);
  post(svr, "/chat/completions", &Routes::chat);
  post(svr, "/v1/completions", &Routes::completion);
  post(svr, "/completions", &Routes::completion);
  post(svr, "/tokenize", &Routes::tokenize);
  post(svr, "/detokenize", &Routes::detokenize);
  // OpenAI Responses (responses.cpp)
  post(svr, "/v1/responses", &Routes::responses);
  // Embeddings (embeddings.cpp): OpenAI's, and llama-server's own shape under both of its names.
  post(svr, "/v1/embeddings", &Routes::embeddings_oai);
  post(svr, "/embeddings", &Routes::embeddings_native);
  post(svr, "/embedding", &Routes::embeddings_native);
  for (const char* p : {"/rerank", "/reranking", "/v1/rerank", "/v1/reranking"}) post(svr, p, &Routes::rerank);
  // Anthropic (anthropic.cpp)
  post(svr, "/v1/messages", &Routes::messages, ErrorStyle::kAnthropic);
  post(svr, "/v1/messages/count_tokens", &Routes::count_tokens, ErrorStyle::kAnthropic);
  // ollama (ollama.cpp)
  post(svr, "/api/chat", &Routes::ollama_chat, ErrorStyle::kOllama);
  post(svr, "/api/generate", &Routes::ollama_generate, ErrorStyle::kOllama);
  post(svr, "/api/show", &Routes::ollama_show, ErrorStyle::kOllama);
  post(svr, "/api/embed", &Routes::ollama_embed, ErrorStyle::kOllama);
  post(svr, "/api/embeddings", &Routes::ollama_embeddings, ErrorStyle::kOllama);
  svr.Get("/api/tags", [this](const httplib::Request& req, httplib::Response& res) {
    if (guard(req, res, ErrorStyle::kOllama)) ollama_tags(res);
  });
  svr.Get("/api/version", [](const httplib::Request&, httplib::Response& res) {
    send_json(res, 200, {{"version", kOllamaCompatVersion}});
  });
  // CORS (docs/server.md "CORS"): only with --cors-origin. A preflight from an allowed origin
  // gets the methods and the headers it asks for; every response to an allowed origin names it.
  if (!opt_.cors_origins.empty()) {
    svr.Options(R"(/.*)", [this](const httplib::Request& req, httplib::Response& res) {
      res.status = 204;
      if (cors_allow(req).empty()) return;
      res.set_header("Access-Control-Allow-Methods", "GET, POST, OPTIONS");
      const std::string asked = req.get_header_value("Access-Control-Request-Headers");
      res.set_header("Access-Control-Allow-Headers",
                     asked.empty() ? "Authorization, Content-Type, x-api-key, anthropic-version" : asked);
      res.set_header("Access-Control-Max-Age", "600");
    });
    svr.set_post_routing_handler([this](const httplib::Request& req, httplib::Response& res) {
      const std::string allow = cors_allow(req);
      if (allow.empty()) return;
      res.set_header("Access-Control-Allow-Origin", allow);
      if (allow != "*") res.set_header("Vary", "Origin");
    });
  }
  svr.set_logger([this](const httplib::Request& req, const httplib::Response& res) { log_request(req, res); });
  svr.set_error_handler([](const httplib::Request& req, httplib::Response& res) {
    if (!res.body.empty()) return;
    const int st = res.status;
    const std::string msg = st == 404 ? "not found" : st == 413 ? "request body too large" : "request failed";
    const ErrorStyle style = req.path.rfind("/v1/messages", 0) == 0 ? ErrorStyle::kAnthropic
                             : req.path.rfind("/api/", 0) == 0      ? ErrorStyle::kOllama
                                                                    : ErrorStyle::kOpenAI;
    send_error(res, style, st, msg);
  });
}

std::string Routes::cors_allow(const httplib::Request& req) const {
  if (opt_.cors_origins.empty() || !req.has_header("Origin")) return "";
  const std::string origin = req.get_header_value("Origin");
  auto lower = [](std::string v) {
    for (char& c : v) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    return v;
  };
  for (const std::string& o : opt_.cors_origins) {
    if (o == "*") return "*";
    if (lower(o) == lower(origin)) return origin;
  }
  return "";
}

// POST handlers read the body themselves (a content reader), so the size limit holds for chunked
// bodies too, counted as they arrive (Content-Length bodies are checked up front by cpp-httplib's
// payload limit).
void Routes::post(httplib::Server& svr, const char* path, PostFn fn, ErrorStyle style) {
  svr.Post(path, [this, fn, style](const httplib::Request& req, httplib::Response& res,
                                   const httplib::ContentReader& reader) {
    handle(req, res, style, [&] {
      check_content_type(req.get_header_value("Content-Type"));  // before reading the body
      const std::string body = read_body(res, reader);
      (this->*fn)(body, res);
    });
  });
}

std::string Routes::read_body(httplib::Response& res, const httplib::ContentReader& reader) {
  std::string body;
  bool too_large = false;
  const size_t cap = opt_.max_body_bytes;
  const bool ok = reader([&](const char* data, size_t n) {
    if (n > cap - body.size()) {
      too_large = true;
      return false;
    }
    body.append(data, n);
    return true;
  });
  if (too_large || res.status == 413) throw RequestError(413, "", "request body too large");
  if (!ok) throw RequestError(400, "", "could not read the request body");
  return body;
}

// Auth + readiness. The key may come as "Authorization: Bearer K" (OpenAI, ollama clients) or
// "x-api-key: K" (Anthropic clients), as llama-server accepts. Returns false after writing the
// error response.
bool Routes::guard(const httplib::Request& req, httplib::Response& res, ErrorStyle style, bool need_ready) {
  if (!opt_.api_key.empty()) {
    const bool ok = req.get_header_value("Authorization") == "Bearer " + opt_.api_key ||
                    (req.has_header("x-api-key") && req.get_header_value("x-api-key") == opt_.api_key);
    if (!ok) {
      send_error(res, style, 401, "invalid or missing API key", "", "authentication_error");
      return false;
    }
  }
  if (need_ready && !eng_.ready()) {
    send_error(res, style, 503, "model is still loading", "", "unavailable_error");
    return false;
  }
  return true;
}

void Routes::handle(const httplib::Request& req, httplib::Response& res, ErrorStyle style,
                    const std::function<void()>& body) {
  metrics_.requests++;
  if (!guard(req, res, style)) return;
  try {
    body();
  } catch (const RequestError& e) {
    metrics_.errors++;
    send_error(res, style, e.status(), e.what(), e.param(), e.type());
  } catch (const oxi::Error& e) {
    metrics_.errors++;
    const bool client = e.code() == ErrorCode::kInvalidArgument;
    send_error(res, style, client ? 400 : 500, e.what(), "", client ? "invalid_request_error" : "server_error");
  } catch (const std::exception& e) {
    metrics_.errors++;
    send_error(res, style, 500, e.what(), "", "server_error");
  }
}

void Routes::log_request(const httplib::Request& req, const httplib::Response& res) {
  int64_t prompt = 0, cached = 0, generated = 0;
  tally().take(prompt, cached, generated);
  // Polling endpoints would drown the log.
  if (req.path == "/health" || req.path == "/metrics") return;
  const double ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - request_accepted()).count();
  std::fprintf(stderr, "oxinfer: %s %s %d prompt=%lld cached=%lld generated=%lld %.1f ms\n", req.method.c_str(),
               req.path.c_str(), res.status, static_cast<long long>(prompt), static_cast<long long>(cached),
               static_cast<long long>(generated), ms);
}

// llama-server's GET /props (read-only: its POST form needs --props there, and is not offered).
void Routes::props(httplib::Response& res) {
  const json mi = eng_.model_info();
  json params = mi.value("defaults", json::object());
  params["n_predict"] = -1;
  params["seed"] = -1;
  send_json(res, 200, {{"default_generation_settings", {{"n_ctx", eng_.n_ctx()}, {"params", params}}},
                       {"total_slots", mi.value("n_slots", 0)}, {"model_path", mi.value("path", "")},
                       {"model_alias", eng_.model_id()}, {"chat_template", mi.value("chat_template", "")},
                       {"bos_token", mi.value("bos_token", "")}, {"eos_token", mi.value("eos_token", "")},
                       {"modalities", {{"vision", mi.value("vision", false)}, {"audio", mi.value("audio", false)}}}, {"build_info", "oxinfer"}});
}

// llama-server's GET /slots (monitoring; its POST /slots/{id} save / restore / erase is not offered).
// ?fail_on_no_slot=1: 503 when every slot is busy, as there.
void Routes::slots(const httplib::Request& req, httplib::Response& res) {
  if (!opt_.slots_endpoint) {
    return send_error(res, ErrorStyle::kOpenAI, 501, "This server does not support slots endpoint (started with --no-slots)",
                      "", "not_supported_error");
  }
  const nlohmann::ordered_json s = eng_.slots();
  const bool any_idle = std::any_of(s.begin(), s.end(), [](const auto& x) { return !x.value("is_processing", false); });
  const std::string fail = req.get_param_value("fail_on_no_slot");
  if (!any_idle && !fail.empty() && fail != "0" && fail != "false") {
    return send_error(res, ErrorStyle::kOpenAI, 503, "no slot available", "", "unavailable_error");
  }
  res.status = 200;
  res.set_content(s.dump(), "application/json");  // keys in llama-server's order
}

// llama-server's POST /apply-template: a chat request's prompt as the template renders it.
void Routes::apply_template(const std::string& text, httplib::Response& res) {
  const ChatRequest req = parse_chat_request(parse_body(text), limits_);
  check_model(req, eng_.model_id());
  send_json(res, 200, {{"prompt", eng_.render_chat(req, nullptr)}});
}

void Routes::tokenize(const std::string& text, httplib::Response& res) {
  const TokenizeRequest r = parse_tokenize_request(parse_body(text));
  auto ids = eng_.tokenize(r.content, r.add_special, r.parse_special);
  if (r.with_pieces) {
    json toks = json::array();
    for (int32_t id : ids) toks.push_back({{"id", id}, {"piece", eng_.token_piece(id)}});
    return send_json(res, 200, {{"tokens", toks}});
  }
  send_json(res, 200, {{"tokens", ids}});
}

void Routes::detokenize(const std::string& text, httplib::Response& res) {
  send_json(res, 200, {{"content", eng_.detokenize(parse_detokenize_request(parse_body(text)))}});
}

void Routes::metrics(httplib::Response& res) {
  std::string out;
  auto line = [&](const char* name, const char* type, const char* help, double v) {
    out += std::string("# HELP oxinfer_") + name + " " + help + "\n# TYPE oxinfer_" + name + " " + type +
           "\noxinfer_" + name + " " + json(v).dump() + "\n";
  };
  line("requests_total", "counter", "HTTP requests to the inference endpoints", double(metrics_.requests));
  line("request_errors_total", "counter", "Requests answered with an error", double(metrics_.errors));
  line("prompt_tokens_total", "counter", "Prompt tokens received", double(metrics_.prompt_tokens));
  line("prompt_tokens_cached_total", "counter", "Prompt tokens served from the prompt cache",
       double(metrics_.cached_tokens));
  line("tokens_predicted_total", "counter", "Tokens generated", double(metrics_.gen_tokens));
  line("draft_tokens_total", "counter", "Draft tokens verified (speculative decoding)", double(metrics_.drafted));
  line("draft_tokens_accepted_total", "counter", "Draft tokens accepted", double(metrics_.accepted));
  line("embedding_inputs_total", "counter", "Inputs embedded (/v1/embeddings, /embeddings, /api/embed, /api/embeddings)", double(metrics_.embedding_inputs));
  line("requests_processing", "gauge", "Requests being processed", double(metrics_.in_flight));
  line("model_ready", "gauge", "1 once the model is loaded", eng_.ready() ? 1.0 : 0.0);
  json st = eng_.ready() ? eng_.stats() : json::object();
  for (auto it = st.begin(); it != st.end(); ++it) {
    if (it.value().is_number()) {
      const std::string n = it.key();
      out += "# TYPE oxinfer_" + n + " gauge\noxinfer_" + n + " " + it.value().dump() + "\n";
    }
  }
  res.set_content(out, "text/plain; version=0.0.4");
}

void Routes::account(const GenerationResult& r) {
  tally().add(r);
  metrics_.prompt_tokens += r.n_prompt;
  metrics_.cached_tokens += r.n_cached;
  metrics_.gen_tokens += r.n_generated;
  metrics_.drafted += static_cast<uint64_t>(r.n_drafted);
  metrics_.accepted += static_cast<uint64_t>(r.n_accepted);
}


// ---- the chat path shared by every dialect ------------------------------------------------------
ChatJob Routes::prepare_chat(ChatRequest req) {
  ChatJob job;
  std::string turn_prefix;
  job.prompt = eng_.render_chat(req, &turn_prefix);
  job.ids = eng_.tokenize_prompt(job.prompt);
  if (!turn_prefix.empty()) {
    auto pre = eng_.tokenize_prompt(turn_prefix);
    job.media = eng_.place_images(req, job.ids, &pre);
    if (pre.size() < job.ids.size() && std::equal(pre.begin(), pre.end(), job.ids.begin())) job.checkpoint_at = pre.size();
  } else {
    job.media = eng_.place_images(req, job.ids, nullptr);
  }
  // A prompt the context cannot hold: 400 here, before a stream starts (generate checks too).
  require_fits_context(job.ids.size(), job.media != nullptr, eng_.n_ctx());
  // Output parsing per family: reasoning and tool calls split from the content.
  job.popt = parser_options_for_prompt(eng_.chat_format(), job.prompt);
  if (!req.tools.empty()) job.popt.tools = nlohmann::ordered_json::parse(req.tools.dump());
  job.format = req.tool_choice == "none" && req.tools.empty() && eng_.chat_format() == ChatFormat::kPlain
                   ? ChatFormat::kPlain
                   : eng_.chat_format();
  (void)make_constraint(req, job.format, job.popt.start_in_reasoning);  // a bad schema: 400 now
  job.req = std::move(req);
  return job;
}

namespace {

// The output as generated, all content (the family parsers also trim leading whitespace).
class RawTextParser final : public OutputParser {
 public:
  ChatDelta feed(std::string_view text) override {
    ChatDelta d;
    d.content = std::string(text);
    msg_.content += d.content;
    return d;
  }
  ChatDelta finish() override { return {}; }
  const ChatMessage& message() const override { return msg_; }
  bool ended() const override { return false; }

 private:
  ChatMessage msg_;
};

}  // namespace

ChatRun Routes::run_chat(const ChatJob& job, int i, const DeltaSink& on_delta, const std::function<bool()>& keep_going) {
  ChatRun run;
  std::unique_ptr<OutputParser> parser =
      job.raw_text ? std::make_unique<RawTextParser>() : make_output_parser(job.format, job.popt);
  StopMatcher stop(job.req.stop);
  try {
    auto constraint = make_constraint(job.req, job.format, job.popt.start_in_reasoning);
    run.result = eng_.generate(job.ids, job.checkpoint_at, choice_request(job.req, i), std::move(constraint),
                               [&](const TokenOut& t) {
                                 const bool more = on_delta(parser->feed(stop.feed(t.text)), &t);
                                 return more && keep_going() && !stop.stopped() && !parser->ended();
                               },
                               job.media.get());
  } catch (...) {
    run.error = std::current_exception();
  }
  on_delta(parser->feed(stop.flush()), nullptr);
  on_delta(parser->finish(), nullptr);
  account(run.result);
  run.message = parser->message();
  run.stop_matched = stop.matched();
  run.finish = stop.stopped() ? "stop" : run.result.finish_reason;
  if (!run.message.tool_calls.empty()) run.finish = "tool_calls";
  return run;
}

ChatRun Routes::run_single(const ChatJob& job, bool one_call,
                           const std::function<void(const ChatDelta&, const TokenOut*)>& on_delta,
                           const std::function<bool()>& keep_going) {
  InFlight guard(metrics_);
  bool called = false;
  return run_chat(
      job, 0,
      [&](const ChatDelta& d, const TokenOut* t) {
        if (one_call && !d.tool_calls.empty() && (called || d.tool_calls.size() > 1)) {
          ChatDelta first = d;
          first.tool_calls.resize(called ? 0 : 1);
          on_delta(first, t);
        } else {
          on_delta(d, t);
        }
        called = called || !d.tool_calls.empty();
        return !(one_call && called);
      },
      keep_going);
}

// ---- OpenAI chat ----------------------------------------------------------------------------------
// Generates choice i of a non-streaming chat request; returns its `choices` entry.
json Routes::chat_choice(const ChatJob& job, int i, GenerationResult& r, const std::atomic<bool>& gone) {
  const ChatRequest& req = job.req;
  json lp = json::array();
  ChatRun run = run_chat(
      job, i,
      [&](const ChatDelta&, const TokenOut* t) {
        if (t && req.logprobs) lp.push_back(logprob_entry(eng_, *t, req.top_logprobs));
        return true;
      },
      // The client left (closed or reset its connection): stop, nobody reads the answer.
      [&] { return !gone && !client_disconnected(); });
  if (run.error) std::rethrow_exception(run.error);
  r = run.result;
  const ChatMessage& msg = run.message;
  json message = {{"role", "assistant"}, {"content", msg.content}};
  if (!msg.reasoning_content.empty()) message["reasoning_content"] = msg.reasoning_content;
  if (!msg.tool_calls.empty()) {
    json calls = json::array();
    for (const auto& c : msg.tool_calls) calls.push_back(tool_call_json(c, random_id("call_"), -1));
    message["tool_calls"] = calls;
    if (msg.content.empty()) message["content"] = nullptr;
  }
  json choice = {{"index", i}, {"message", message}, {"finish_reason", run.finish}};
  choice["logprobs"] = req.logprobs ? json{{"content", lp}} : json(nullptr);
  return choice;
}

void Routes::chat(const std::string& text, httplib::Response& res) {
  ChatRequest parsed = parse_chat_request(parse_body(text), limits_);
  check_model(parsed, eng_.model_id());
  auto job = std::make_shared<ChatJob>(prepare_chat(std::move(parsed)));
  const std::string id = random_id("chatcmpl-");
  const int64_t created = now_s();
  const std::string model = eng_.model_id();  // check_model: the same name or none
  const int n = job->req.n;

  if (!job->req.stream) {
    std::vector<json> choices(static_cast<size_t>(n));
    std::vector<GenerationResult> results(static_cast<size_t>(n));
    std::atomic<bool> gone{false};
    {
      InFlight guard(metrics_);
      run_choices(n, gone, [&](int i) {
        choices[static_cast<size_t>(i)] = chat_choice(*job, i, results[static_cast<size_t>(i)], gone);
      });
    }
    return send_json(res, 200,
                     {{"id", id}, {"object", "chat.completion"}, {"created", created}, {"model", model},
                      {"system_fingerprint", "oxinfer"}, {"choices", choices}, {"usage", usage_json(results)},
                      {"timings", timings_json(results)}});
  }

  // Streaming: the generation runs inside the content provider; a failed write (client gone)
  // stops it at the next token.
  res.set_header("Cache-Control", "no-cache");
  res.set_chunked_content_provider("text/event-stream", [this, job, id, created, model](size_t, httplib::DataSink& sink) {
    const ChatRequest& rq = job->req;
    StreamWriter out(sink);
    std::atomic<bool> gone{false};
    auto chunk = [&](int i, json delta, json finish, json logprobs) {
      return out.data({{"id", id}, {"object", "chat.completion.chunk"}, {"created", created}, {"model", model},
                       {"system_fingerprint", "oxinfer"},
                       {"choices", json::array({{{"index", i}, {"delta", delta}, {"logprobs", logprobs},
                                                 {"finish_reason", finish}}})}});
    };
    for (int i = 0; i < rq.n; ++i) chunk(i, {{"role", "assistant"}, {"content", ""}}, nullptr, nullptr);
    std::vector<GenerationResult> results(static_cast<size_t>(rq.n));
    auto one = [&](int i) {
      ChatRun run = run_chat(
          *job, i,
          [&](const ChatDelta& d, const TokenOut* t) {
            json lp = t && rq.logprobs ? json{{"content", json::array({logprob_entry(eng_, *t, rq.top_logprobs)})}}
                                       : json(nullptr);
            if (!d.reasoning_content.empty()) chunk(i, {{"reasoning_content", d.reasoning_content}}, nullptr, nullptr);
            if (!d.content.empty()) chunk(i, {{"content", d.content}}, nullptr, lp);
            else if (!lp.is_null()) chunk(i, {{"content", ""}}, nullptr, lp);
            for (const auto& [index, call] : d.tool_calls) {
              chunk(i, {{"tool_calls", json::array({tool_call_json(call, random_id("call_"), static_cast<long>(index))})}},
                    nullptr, nullptr);
            }
            return true;
          },
          [&] { return out.alive && !gone; });
      // Never a 500 mid-stream: report in-band and end the stream cleanly.
      if (run.error) out.data(error_body(error_message(run.error), "server_error", "", 500));
      results[static_cast<size_t>(i)] = run.result;
      chunk(i, json::object(), run.finish, nullptr);
    };
    {
      InFlight guard(metrics_);
      run_choices(rq.n, gone, one);  // `one` reports its failures in-band
    }
    if (rq.include_usage) {
      out.data({{"id", id}, {"object", "chat.completion.chunk"}, {"created", created}, {"model", model},
                {"choices", json::array()}, {"usage", usage_json(results)}, {"timings", timings_json(results)}});
    }
    out.done(true);
    return true;
  });
}

// ---- text completion ------------------------------------------------------------------------
void Routes::completion(const std::string& text, httplib::Response& res) {
  CompletionRequest req = parse_completion_request(parse_body(text), limits_);
  check_model(req, eng_.model_id());
  std::vector<int32_t> ids = req.prompt_ids.empty() ? eng_.tokenize(req.prompt, true, true) : req.prompt_ids;
  if (ids.empty()) throw RequestError(400, "prompt", "the prompt is empty");
  const std::string id = random_id("cmpl-");
  const int64_t created = now_s();
  const std::string model = eng_.model_id();  // check_model: the same name or none
  if (!req.stream) {
    std::vector<json> choices(static_cast<size_t>(req.n));
    std::vector<GenerationResult> results(static_cast<size_t>(req.n));
    std::atomic<bool> gone{false};
    {
      InFlight guard(metrics_);
      run_choices(req.n, gone, [&](int i) {
        StopMatcher stop(req.stop);
        std::string out = req.echo ? req.prompt : "";
        std::vector<TokenOut> toks;
        GenerationResult& r = results[static_cast<size_t>(i)];
        r = eng_.generate(ids, 0, choice_request(req, i), grammar_constraint(req), [&](const TokenOut& t) {
          if (req.logprobs) toks.push_back(t);
          out += stop.feed(t.text);
          return !stop.stopped() && !gone && !client_disconnected();
        }, nullptr);
        out += stop.flush();
        json& choice = choices[static_cast<size_t>(i)];
        choice = {{"index", i}, {"text", out}, {"finish_reason", stop.stopped() ? "stop" : r.finish_reason}};
        choice["logprobs"] = req.logprobs ? completion_logprobs(toks, req.top_logprobs) : json(nullptr);
      });
    }
    for (const auto& r : results) account(r);
    return send_json(res, 200, {{"id", id}, {"object", "text_completion"}, {"created", created}, {"model", model},
                                {"choices", choices}, {"usage", usage_json(results)}, {"timings", timings_json(results)}});
  }
  auto shared = std::make_shared<std::pair<CompletionRequest, std::vector<int32_t>>>(std::move(req), std::move(ids));
  res.set_header("Cache-Control", "no-cache");
  res.set_chunked_content_provider("text/event-stream", [this, shared, id, created, model](size_t, httplib::DataSink& sink) {
    const CompletionRequest& rq = shared->first;
    StreamWriter out(sink);
    std::atomic<bool> gone{false};
    auto write = [&](const json& j) { return out.data(j); };
    auto chunk = [&](int i, const std::string& text, json finish, json lp) {
      return write({{"id", id}, {"object", "text_completion"}, {"created", created}, {"model", model},
                    {"choices", json::array({{{"index", i}, {"text", text}, {"logprobs", lp}, {"finish_reason", finish}}})}});
    };
    std::vector<GenerationResult> results(static_cast<size_t>(rq.n));
    auto one = [&](int i) {
      StopMatcher stop(rq.stop);
      GenerationResult& r = results[static_cast<size_t>(i)];
      std::string finish = "stop";
      try {
        r = eng_.generate(shared->second, 0, choice_request(rq, i), grammar_constraint(rq), [&](const TokenOut& t) {
          const std::string piece = stop.feed(t.text);
          json lp = rq.logprobs ? completion_logprobs({t}, rq.top_logprobs) : json(nullptr);
          if (!piece.empty() || !lp.is_null()) chunk(i, piece, nullptr, lp);
          return out.alive && !gone && !stop.stopped();
        }, nullptr);
        finish = r.finish_reason;
      } catch (const std::exception& e) {
        write(error_body(e.what(), "server_error", "", 500));
      }
      account(r);
      const std::string rest = stop.flush();
      if (!rest.empty()) chunk(i, rest, nullptr, nullptr);
      chunk(i, "", stop.stopped() ? "stop" : finish, nullptr);
    };
    {
      InFlight guard(metrics_);
      run_choices(rq.n, gone, one);  // `one` reports its failures in-band
    }
    if (rq.include_usage) {
      write({{"id", id}, {"object", "text_completion"}, {"created", created}, {"model", model},
             {"choices", json::array()}, {"usage", usage_json(results)}, {"timings", timings_json(results)}});
    }
    out.done(true);
    return true;
  });
}

// The legacy completions logprobs object of some tokens.
json Routes::completion_logprobs(const std::vector<TokenOut>& toks, int n_top) {
  json tokens = json::array(), lps = json::array(), tops = json::array();
  for (const auto& t : toks) {
    tokens.push_back(eng_.token_piece(t.id));
    lps.push_back(t.logprob);
    json top = json::object();
    for (int i = 0; i < n_top && i < static_cast<int>(t.top.size()); ++i) {
      top[eng_.token_piece(t.top[i].first)] = t.top[i].second;
    }
    tops.push_back(top);
  }
  return json{{"tokens", tokens}, {"token_logprobs", lps}, {"top_logprobs", tops}};
}

int run_server(const ServerOptions& options) {
  // Connection handling, deadlines and limits: http_front.h (docs/server.md "Hardening limits").
  FrontServer svr;
  std::unique_ptr<Engine> engine = make_engine(options);  // starts loading in the background
  Routes routes(options, *engine);
  routes.install(svr);
  if (!svr.bind(options.host, options.port)) {
    std::fprintf(stderr, "error: cannot listen on %s:%d (in use by another process, or not a local address)\n",
                 options.host.c_str(), options.port);
    return 1;
  }
  if (pipe2(g_signal_pipe, O_CLOEXEC) != 0) {
    std::fprintf(stderr, "error: cannot create a pipe\n");
    return 1;
  }
  ShutdownWatch watch(svr, *engine, options.shutdown_timeout_s);
  std::signal(SIGINT, on_signal);
  std::signal(SIGTERM, on_signal);
  std::signal(SIGPIPE, SIG_IGN);
  std::fprintf(stderr, "oxinfer: listening on http://%s:%d\n", options.host.c_str(), options.port);
  svr.run();  // returns once stopped and every running request has ended
  watch.requests_ended();
  engine.reset();  // waits for a model still loading; the watch's deadline still applies
  watch.finish();
  std::fprintf(stderr, "oxinfer: stopped\n");
  return 0;
}

}  // namespace oxi::server
