// ollama's native API over the OpenAI chat path (docs/server.md "ollama /api/*"): /api/chat and
// /api/generate (NDJSON streaming by default, `stream: false` for one object), /api/tags,
// /api/show, /api/version. Requests become OpenAI chat requests (parse_ollama_request in
// ollama_request.cpp) and run through prepare_chat / run_chat; `format` maps onto the JSON
// constraint, `options` onto the sampling fields. /api/embed and the legacy /api/embeddings run
// through the embeddings path (Routes::embed_pooled; docs/server.md "ollama /api/embed").
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <ctime>
#include <string>
#include <vector>

#include "server/dialects.h"
#include "server/embeddings.h"
#include "server/http_front.h"
#include "server/routes.h"

namespace oxi::server {

using nlohmann::json;

// The ollama API version this server speaks (reported by /api/version; clients compare it).
const char* const kOllamaCompatVersion = "0.12.0";

namespace {

// RFC 3339 UTC with microseconds, as ollama's created_at.
std::string rfc3339_now() {
  const auto now = std::chrono::system_clock::now();
  const std::time_t t = std::chrono::system_clock::to_time_t(now);
  const auto us = std::chrono::duration_cast<std::chrono::microseconds>(now.time_since_epoch()).count() % 1000000;
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%04d-%02d-%02dT%02d:%02d:%02d.%06lldZ", tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday,
                tm.tm_hour, tm.tm_min, tm.tm_sec, static_cast<long long>(us));
  return buf;
}

std::string rfc3339(int64_t unix_s) {
  const std::time_t t = static_cast<std::time_t>(unix_s);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%04d-%02d-%02dT%02d:%02d:%02dZ", tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday,
                tm.tm_hour, tm.tm_min, tm.tm_sec);
  return buf;
}

// ollama's tool_calls entries: arguments as an object; index: the call's place in the message.
json ollama_call(size_t index, const ToolCall& c) {
  json args = json::parse(c.arguments, nullptr, false);
  if (!args.is_object()) args = json::object();
  return {{"function", {{"index", index}, {"name", c.name}, {"arguments", args}}}};
}

// The final object's statistics (durations in nanoseconds, as ollama reports them).
void add_stats(json& j, const GenerationResult& r, std::chrono::steady_clock::time_point t0) {
  const auto total = std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - t0).count();
  j["total_duration"] = total;
  j["load_duration"] = 0;
  j["prompt_eval_count"] = r.n_prompt;
  j["prompt_eval_duration"] = static_cast<int64_t>(std::llround(r.prompt_ms * 1e6));
  j["eval_count"] = r.n_generated;
  j["eval_duration"] = static_cast<int64_t>(std::llround(r.gen_ms * 1e6));
}

std::string size_label(uint64_t n) {
  char buf[32];
  if (n >= 1000000000ull) std::snprintf(buf, sizeof(buf), "%.1fB", static_cast<double>(n) / 1e9);
  else std::snprintf(buf, sizeof(buf), "%.1fM", static_cast<double>(n) / 1e6);
  return buf;
}

// prepare_chat with ollama's field name in its errors (`format`, not OpenAI's response_format).
ChatJob prepare_ollama(const std::function<ChatJob()>& prepare) {
  try {
    return prepare();
  } catch (const RequestError& e) {
    if (e.param() == "response_format") throw RequestError(e.status(), "format", e.what());
    throw;
  }
}

}  // namespace

json Routes::ollama_model_entry() const {
  const json mi = eng_.model_info();
  const std::string id = eng_.model_id();
  const std::string name = id.find(':') == std::string::npos ? id + ":latest" : id;
  const std::string arch = mi.value("arch", "");
  const std::string quant = mi.value("quant", "");
  json details = {{"parent_model", ""}, {"format", mi.value("format", "gguf")}, {"family", arch},
                  {"families", json::array({arch})}, {"parameter_size", size_label(mi.value("n_params", uint64_t{0}))},
                  {"quantization_level", quant.empty() ? "unknown" : quant}};
  return json{{"name", name}, {"model", name}, {"modified_at", rfc3339(mi.value("modified", int64_t{0}))},
              {"size", mi.value("file_bytes", uint64_t{0})}, {"digest", ""}, {"details", details}};
}

void Routes::ollama_tags(httplib::Response& res) { send_json(res, 200, {{"models", json::array({ollama_model_entry()})}}); }

void Routes::ollama_show(const std::string& text, httplib::Response& res) {
  const json body = parse_body(text);
  const json* m = present(body, "model");
  if (!m) m = present(body, "name");  // the older spelling
  if (!m || !m->is_string()) bad("model", "model is required");
  if (!ollama_model_matches(m->get<std::string>(), eng_.model_id())) {
    throw RequestError(404, "", "model '" + m->get<std::string>() + "' not found");
  }
  const json mi = eng_.model_info();
  const json entry = ollama_model_entry();
  const std::string arch = mi.value("arch", "");
  const std::string tmpl = mi.value("chat_template", "");
  json caps = json::array({"completion"});
  if (tmpl.find("tools") != std::string::npos) caps.push_back("tools");
  if (eng_.chat_format() != ChatFormat::kPlain) caps.push_back("thinking");
  json info = {{"general.architecture", arch}, {"general.name", mi.value("name", "")},
               {"general.parameter_count", mi.value("n_params", uint64_t{0})},
               {arch + ".context_length", mi.value("n_ctx_train", int64_t{0})},
               {arch + ".embedding_length", mi.value("n_embd", int64_t{0})},
               {arch + ".block_count", mi.value("n_layer", int64_t{0})},
               {"tokenizer.ggml.vocab_size", mi.value("n_vocab", int64_t{0})}};
  send_json(res, 200, {{"license", ""}, {"modelfile", ""}, {"parameters", ""}, {"template", tmpl},
                       {"details", entry["details"]}, {"model_info", info}, {"capabilities", caps},
                       {"modified_at", entry["modified_at"]}});
}

void Routes::ollama_chat(const std::string& text, httplib::Response& res) {
  OllamaRequest r = parse_ollama_request(parse_body(text), limits_, /*generate=*/false);
  if (!ollama_model_matches(r.chat.model, eng_.model_id())) throw RequestError(404, "", "model '" + r.chat.model + "' not found");
  if (r.load_only) {
    return send_json(res, 200, {{"model", r.chat.model}, {"created_at", rfc3339_now()},
                                {"message", {{"role", "assistant"}, {"content", ""}}}, {"done", true}, {"done_reason", "load"}});
  }
  ollama_stream(prepare_ollama([&] { return prepare_chat(std::move(r.chat)); }), /*chat_shape=*/true, res);
}

void Routes::ollama_generate(const std::string& text, httplib::Response& res) {
  OllamaRequest r = parse_ollama_request(parse_body(text), limits_, /*generate=*/true);
  if (!ollama_model_matches(r.chat.model, eng_.model_id())) throw RequestError(404, "", "model '" + r.chat.model + "' not found");
  if (r.load_only) {
    return send_json(res, 200, {{"model", r.chat.model}, {"created_at", rfc3339_now()}, {"response", ""},
                                {"done", true}, {"done_reason", "load"}});
  }
  if (!r.raw) return ollama_stream(prepare_ollama([&] { return prepare_chat(std::move(r.chat)); }), /*chat_shape=*/false, res);
  // raw: the prompt as given, no template; everything generated is the response. (prepare_chat
  // still checks the request, `format` included, before anything is sent.)
  const std::string raw_prompt = r.raw_prompt;
  ChatJob job = prepare_ollama([&] { return prepare_chat(std::move(r.chat)); });
  job.prompt = raw_prompt;
  job.ids = eng_.tokenize(raw_prompt, true, true);
  job.checkpoint_at = 0;
  job.popt = ParserOptions{};
  job.format = ChatFormat::kPlain;
  job.raw_text = true;
  ollama_stream(std::move(job), /*chat_shape=*/false, res);
}

// The pooling of ollama's embeddings routes: the server's (--pooling, else the GGUF's key), and
// where that is none the last token's row, as ollama's llama.cpp runner falls back to (it asks for
// the sequence's pooled vector and takes the last token's output when there is none).
// /api/embed is served without --embeddings: ollama has no such switch, and here it changes no
// model or slot setup.
void Routes::ollama_embed(const std::string& text, httplib::Response& res) { ollama_embed_route(text, res, false); }
void Routes::ollama_embeddings(const std::string& text, httplib::Response& res) { ollama_embed_route(text, res, true); }

void Routes::ollama_embed_route(const std::string& text, httplib::Response& res, bool legacy) {
  const auto t0 = std::chrono::steady_clock::now();
  const OllamaEmbedRequest req = parse_ollama_embed_request(parse_body(text), legacy);
  if (!ollama_model_matches(req.model, eng_.model_id())) throw RequestError(404, "", "model '" + req.model + "' not found");
  const int64_t d = eng_.n_embd();
  if (req.dimensions > d) {
    throw RequestError(400, "dimensions", "'dimensions' " + std::to_string(req.dimensions) + " is more than this model's embedding size, " + std::to_string(d));
  }
  // The context an input may fill: the server's (-c), or options.num_ctx when that is smaller.
  const int64_t limit = std::min<int64_t>(eng_.n_ctx(), req.num_ctx.value_or(INT64_MAX));
  std::vector<std::vector<int32_t>> ids;
  for (size_t i = 0; i < req.inputs.size(); ++i) {
    const std::string param = legacy ? "prompt" : req.inputs.size() > 1 ? "input[" + std::to_string(i) + "]" : "input";
    ids.push_back(eng_.tokenize(req.inputs[i], true, true));
    if (ids.back().empty()) throw RequestError(400, param, "'" + param + "' has no tokens to embed");
    if (static_cast<int64_t>(ids.back().size()) > limit) {
      if (legacy || !req.truncate) {
        throw RequestError(400, param, "'" + param + "' has " + std::to_string(ids.back().size()) +
                                           " tokens, more than the context length " + std::to_string(limit) +
                                           (legacy ? "" : " (truncate is false)"));
      }
      ids.back().resize(static_cast<size_t>(limit));  // ollama's truncate: keep the first tokens
    }
  }
  const Pooling pooling = eng_.pooling() == Pooling::kNone ? Pooling::kLast : eng_.pooling();
  std::vector<Pooler> pools = ids.empty() ? std::vector<Pooler>{} : embed_pooled(ids, pooling);
  if (legacy) {  // {"embedding": [...]}: the pooled vector as it is, not normalised (as ollama)
    return send_json(res, 200, {{"embedding", pools.empty() ? std::vector<float>{} : pools[0].result()}});
  }
  json vectors = json::array();
  size_t total = 0;
  for (size_t i = 0; i < pools.size(); ++i) {
    std::vector<float> v = pools[i].result();
    normalize_embedding(v, 2);
    if (req.dimensions > 0 && req.dimensions < d) {  // the first k values, made unit length again
      v.resize(static_cast<size_t>(req.dimensions));
      normalize_embedding(v, 2);
    }
    vectors.push_back(std::move(v));
    total += ids[i].size();
  }
  const auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - t0).count();
  send_json(res, 200, {{"model", req.model}, {"embeddings", vectors}, {"total_duration", ns}, {"load_duration", 0},
                       {"prompt_eval_count", total}});
}

// Runs a chat job and answers in ollama's shape: /api/chat objects carry `message`, /api/generate
// objects `response` (and `thinking`). Streams NDJSON unless the request said stream: false.
void Routes::ollama_stream(ChatJob job_in, bool chat_shape, httplib::Response& res) {
  auto job = std::make_shared<ChatJob>(std::move(job_in));
  const std::string model = job->req.model;
  const auto t0 = std::chrono::steady_clock::now();
  auto piece = [chat_shape, model](const std::string& content, const std::string& thinking, const json& calls) {
    json j = {{"model", model}, {"created_at", rfc3339_now()}};
    if (chat_shape) {
      json m = {{"role", "assistant"}, {"content", content}};
      if (!thinking.empty()) m["thinking"] = thinking;
      if (!calls.empty()) m["tool_calls"] = calls;
      j["message"] = m;
    } else {
      j["response"] = content;
      if (!thinking.empty()) j["thinking"] = thinking;
    }
    return j;
  };
  auto final_fields = [t0](json& j, const ChatRun& run) {
    j["done"] = true;
    j["done_reason"] = run.finish == "length" ? "length" : "stop";
    add_stats(j, run.result, t0);
  };

  if (!job->req.stream) {
    ChatRun run;
    {
      InFlight guard(metrics_);
      run = run_chat(*job, 0, [](const ChatDelta&, const TokenOut*) { return true; }, [] { return !client_disconnected(); });
    }
    if (run.error) std::rethrow_exception(run.error);
    json calls = json::array();
    for (size_t i = 0; i < run.message.tool_calls.size(); ++i) calls.push_back(ollama_call(i, run.message.tool_calls[i]));
    json j = piece(run.message.content, run.message.reasoning_content, calls);
    final_fields(j, run);
    return send_json(res, 200, j);
  }
  res.set_header("Cache-Control", "no-cache");
  res.set_chunked_content_provider("application/x-ndjson", [this, job, piece, final_fields](size_t, httplib::DataSink& sink) {
    StreamWriter out(sink);
    ChatRun run;
    {
      InFlight guard(metrics_);
      run = run_chat(
          *job, 0,
          [&](const ChatDelta& d, const TokenOut*) {
            json calls = json::array();
            for (const auto& [index, call] : d.tool_calls) calls.push_back(ollama_call(index, call));
            if (!d.content.empty() || !d.reasoning_content.empty() || !calls.empty()) {
              json j = piece(d.content, d.reasoning_content, calls);
              j["done"] = false;
              out.line(j);
            }
            return true;
          },
          [&] { return out.alive.load(); });
    }
    if (run.error) {
      // Never a 500 mid-stream: ollama reports a failure in-band as {"error": …} and ends.
      out.line({{"error", error_message(run.error)}});
      out.done(false);
      return true;
    }
    json j = piece("", "", json::array());
    final_fields(j, run);
    out.line(j);
    out.done(false);
    return true;
  });
}

}  // namespace oxi::server
