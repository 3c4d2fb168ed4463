// The wasm module's entry points: what web/worker.mjs calls. One model and one context per module
// instance (the JS side runs one Worker, hence one module, per loaded model). Requests and results
// are JSON text, so the JS side never depends on C struct layouts; generation goes through the
// public C API (oxi_generate: sampling, JSON constraint, speculative decoding, prompt reuse), and
// only what the C API does not give — token text with special tokens, the family's output parser,
// the file's weight type — comes from the loaded model behind it (api_internal.h).
//
// Per generated token the module calls the JS import oxiw_js_token(json) (EM_JS below), which
// posts the event to the page and answers whether to stop (the page's abort flag).
#include <emscripten/emscripten.h>

#include <cmath>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "api/api_internal.h"
#include "chat/parser.h"
#include "kernels/isa.h"
#include "kernels/thread_pool.h"
#include "loader/loaded_model.h"
#include "oxinfer.h"
#include "server/stream_text.h"

using json = nlohmann::ordered_json;

// Returns non-zero when the page asked to stop. The event is a JSON text of `len` bytes.
EM_JS(int, oxiw_js_token, (const char* ev, int len), { return Module.oxiOnToken(UTF8ToString(ev, len)); });

namespace {

struct Engine {
  oxi_model* model = nullptr;
  oxi_context* ctx = nullptr;
  int n_threads = 1;
  std::string last_json;  // the last returned JSON text (valid until the next call)
  ~Engine() {
    oxi_context_free(ctx);
    oxi_model_free(model);
  }
};

std::unique_ptr<Engine> g_engine;
std::string g_error;

const char* out(std::string s) {
  g_engine->last_json = std::move(s);
  return g_engine->last_json.c_str();
}

[[noreturn]] void bad(const std::string& msg) { throw std::runtime_error(msg); }

void check(oxi_status st) {
  if (st != OXI_OK) bad(oxi_last_error());
}

std::vector<int32_t> tokenize(const std::string& text) {
  size_t n = 0;
  check(oxi_tokenize(g_engine->model, text.data(), text.size(), 1, 1, nullptr, 0, &n));
  std::vector<int32_t> ids(n);
  check(oxi_tokenize(g_engine->model, text.data(), text.size(), 1, 1, ids.data(), ids.size(), &n));
  return ids;
}

std::string chat_options(const json& req) {
  json o = {{"add_generation_prompt", true}};
  if (req.contains("enable_thinking") && req["enable_thinking"].is_boolean()) o["enable_thinking"] = req["enable_thinking"];
  if (req.contains("tools")) o["tools"] = req["tools"];
  return o.dump();
}

std::vector<int32_t> chat_tokens(const std::string& messages, const std::string& options, std::string* rendered) {
  size_t n = 0;
  check(oxi_chat_render(g_engine->model, messages.c_str(), options.c_str(), nullptr, 0, &n));
  rendered->resize(n + 1);
  check(oxi_chat_render(g_engine->model, messages.c_str(), options.c_str(), rendered->data(), rendered->size(), &n));
  rendered->resize(n);
  check(oxi_chat_tokenize(g_engine->model, messages.c_str(), options.c_str(), nullptr, 0, &n));
  std::vector<int32_t> ids(n);
  check(oxi_chat_tokenize(g_engine->model, messages.c_str(), options.c_str(), ids.data(), ids.size(), &n));
  return ids;
}

template <class T>
T num(const json& req, const char* key, T fallback) {
  auto it = req.find(key);
  if (it == req.end() || it->is_null()) return fallback;
  if (!it->is_number()) bad(std::string(key) + " must be a number");
  return it->get<T>();
}

json lp(float v) { return std::isfinite(v) ? json(v) : json(nullptr); }

// State threaded through oxi_generate's callback.
struct Run {
  std::unique_ptr<oxi::TextStream> raw;            // token text with special tokens
  std::optional<oxi::server::StopMatcher> stops;   // stop strings over that text
  std::unique_ptr<oxi::OutputParser> parser;       // chat: content / reasoning / tool calls
  std::string text;                                // visible text (before parsing)
  json tokens = json::array();
  bool stopped_by_string = false;
};

// Emits one event: {id, text, logprob, top_logprobs, content, reasoning}; returns non-zero to stop.
int on_token(const oxi_token_event* e, void* user) {
  Run& r = *static_cast<Run*>(user);
  std::string piece = e->is_eog ? std::string() : r.raw->push(e->id);
  std::string visible = r.stops ? r.stops->feed(piece) : piece;
  if (e->is_eog) visible += r.stops ? r.stops->flush() : r.raw->flush();
  r.text += visible;
  json tok = {{"id", e->id}, {"text", piece}, {"logprob", lp(e->logprob)}};
  json top = json::array();
  for (int i = 0; i < e->n_top; ++i) top.push_back({{"id", e->top_ids[i]}, {"logprob", lp(e->top_logprobs[i])}});
  tok["top_logprobs"] = std::move(top);
  r.tokens.push_back(tok);
  json ev = tok;
  if (r.parser) {
    const oxi::ChatDelta d = r.parser->feed(visible);
    ev["content"] = d.content;
    ev["reasoning"] = d.reasoning_content;
  } else {
    ev["content"] = visible;
    ev["reasoning"] = "";
  }
  ev["eog"] = e->is_eog != 0;
  const std::string s = ev.dump(-1, ' ', false, json::error_handler_t::replace);
  const int stop_asked = oxiw_js_token(s.data(), static_cast<int>(s.size()));
  if (r.stops && r.stops->stopped()) {
    r.stopped_by_string = true;
    return 1;
  }
  return stop_asked;
}

std::string generate(const std::string& request) {
  const json req = json::parse(request);
  if (!req.is_object()) bad("generate: expected an object");
  Run run;
  const oxi::LoadedModel& lm = oxi::loaded_of(g_engine->model);
  oxi::TokenizerText special_text(lm.tokenizer, /*skip_special=*/false);
  run.raw = special_text.new_stream();

  std::vector<int32_t> prompt;
  std::string rendered;
  bool chat = false;
  if (req.contains("messages")) {
    prompt = chat_tokens(req["messages"].dump(), chat_options(req), &rendered);
    chat = true;
  } else if (req.contains("tokens")) {
    if (!req["tokens"].is_array()) bad("tokens must be an array of ids");
    for (const auto& t : req["tokens"]) {
      if (!t.is_number_integer()) bad("tokens must be an array of ids");
      prompt.push_back(t.get<int32_t>());
    }
  } else if (req.contains("prompt") && req["prompt"].is_string()) {
    prompt = tokenize(req["prompt"].get<std::string>());
  } else {
    bad("generate: give prompt (text), tokens (ids) or messages");
  }
  if (prompt.empty()) bad("generate: empty prompt");
  for (int32_t id : prompt) {
    if (id < 0 || id >= lm.tokenizer->n_vocab()) bad("token id " + std::to_string(id) + " is out of range");
  }
  if (chat) {
    const oxi::ParserOptions po = oxi::parser_options_for_prompt(lm.format, rendered);
    run.parser = oxi::make_output_parser(lm.format, po);
  }
  if (req.contains("stop")) {
    std::vector<std::string> stops;
    const json& s = req["stop"];
    if (s.is_string()) stops.push_back(s.get<std::string>());
    else if (s.is_array()) {
      for (const auto& x : s) {
        if (!x.is_string()) bad("stop must be a string or an array of strings");
        if (!x.get<std::string>().empty()) stops.push_back(x.get<std::string>());
      }
    } else if (!s.is_null()) bad("stop must be a string or an array of strings");
    if (!stops.empty()) run.stops.emplace(std::move(stops));
  }

  oxi_generate_params p = oxi_generate_default_params();
  p.max_tokens = num<int32_t>(req, "max_tokens", 256);
  p.n_top_logprobs = num<int32_t>(req, "top_logprobs", 0);
  oxi_sampling_params& s = p.sampling;
  s = oxi_sampling_default_params();
  s.temperature = num<float>(req, "temperature", 0.0f);
  s.top_k = num<int32_t>(req, "top_k", 0);
  s.top_p = num<float>(req, "top_p", 1.0f);
  s.min_p = num<float>(req, "min_p", 0.0f);
  s.repeat_penalty = num<float>(req, "repeat_penalty", 1.0f);
  s.presence_penalty = num<float>(req, "presence_penalty", 0.0f);
  s.frequency_penalty = num<float>(req, "frequency_penalty", 0.0f);
  s.seed = req.contains("seed") && req["seed"].is_number_integer() ? req["seed"].get<uint64_t>() : OXI_SEED_RANDOM;
  std::string schema;
  // json_schema: a schema, or null for any JSON object (the C API's "null").
  if (req.contains("json_schema")) schema = req["json_schema"].dump();
  if (!schema.empty()) p.json_schema = schema.c_str();
  // grammar: GBNF text (llama.cpp's syntax, rule root), as the CLI's --grammar; with messages the
  // template's reasoning block should be off (enableThinking: false), as the CLI does.
  std::string grammar;
  if (req.contains("grammar") && !req["grammar"].is_null()) {
    if (!req["grammar"].is_string()) bad("grammar must be a string (GBNF)");
    grammar = req["grammar"].get<std::string>();
    if (!schema.empty() && !grammar.empty()) bad("give only one of grammar and responseFormat");
    if (!grammar.empty()) p.grammar = grammar.c_str();
  }
  if (req.contains("spec")) {  // "auto" (default) | "none" | "ngram"
    const json& sp = req["spec"];
    if (sp == "none") p.spec_mode = OXI_SPEC_NONE;
    else if (sp == "ngram") p.spec_mode = OXI_SPEC_NGRAM;
    else if (sp != "auto") bad("spec must be auto, none or ngram");
  }
  if (req.contains("ignore_eos") && req["ignore_eos"].is_boolean()) p.ignore_eog = req["ignore_eos"].get<bool>() ? 1 : 0;

  // The context keeps what it can of the previous request's tokens (a chat resends the whole
  // conversation each turn: only the new turn is computed).
  size_t kept = 0;
  check(oxi_context_reuse_prefix(g_engine->ctx, prompt.data(), prompt.size(), &kept));
  oxi_generate_result res{};
  const oxi_status st = oxi_generate(g_engine->ctx, prompt.data() + kept, prompt.size() - kept, &p, on_token, &run, &res);
  if (st != OXI_OK && st != OXI_ERR_CANCELLED) bad(oxi_last_error());
  if (!run.stops || !run.stops->stopped()) {
    const std::string tail = run.stops ? run.stops->flush() : run.raw->flush();
    run.text += tail;
    if (run.parser) run.parser->feed(tail);
  }

  json o;
  if (run.parser) {
    run.parser->finish();
    const oxi::ChatMessage& m = run.parser->message();
    o["text"] = m.content;
    o["reasoning"] = m.reasoning_content;
    json calls = json::array();
    for (const auto& c : m.tool_calls) calls.push_back({{"name", c.name}, {"arguments", c.arguments}});
    o["tool_calls"] = std::move(calls);
  } else {
    o["text"] = run.text;
    o["reasoning"] = "";
    o["tool_calls"] = json::array();
  }
  o["tokens"] = std::move(run.tokens);
  static const char* kReasons[] = {"eos", "max_tokens", "context_full", "aborted"};
  o["stop_reason"] = run.stopped_by_string ? "stop" : kReasons[res.stop_reason & 3];
  o["prompt_tokens"] = static_cast<int64_t>(prompt.size());
  o["cached_tokens"] = static_cast<int64_t>(kept);
  int32_t n_verify = 0, n_drafted = 0, n_accepted = 0;
  oxi_context_spec_stats(g_engine->ctx, &n_verify, &n_drafted, &n_accepted);
  o["timings"] = {{"prompt_ms", res.prompt_seconds * 1e3}, {"gen_ms", res.gen_seconds * 1e3},
                  {"prompt_n", res.n_prompt}, {"gen_n", res.n_generated},
                  {"draft_n", n_drafted}, {"draft_n_accepted", n_accepted}};
  return o.dump(-1, ' ', false, json::error_handler_t::replace);
}

std::string info() {
  oxi_model_desc d{};
  check(oxi_model_describe(g_engine->model, &d));
  const oxi::LoadedModel& lm = oxi::loaded_of(g_engine->model);
  json o = {{"arch", d.arch},
            {"name", d.name},
            {"n_params", d.n_params},
            {"n_vocab", d.n_vocab},
            {"n_ctx", oxi_context_n_ctx(g_engine->ctx)},
            {"n_ctx_train", d.n_ctx_train},
            {"device", "cpu"},
            {"isa", oxi::isa_name()},
            {"threads", oxi::num_threads()},
            {"file_type", lm.files.file_type()},
            {"has_chat_template", d.has_chat_template != 0},
            {"load_ms", lm.load_seconds * 1e3}};
  return o.dump();
}

template <class F>
const char* guarded(F&& f) {
  try {
    return f();
  } catch (const std::exception& e) {
    g_error = e.what();
  } catch (...) {
    g_error = "unknown error";
  }
  return nullptr;
}

}  // namespace

extern "C" {

// Loads a model file (mounted in the module's file system by the worker). options: JSON
// {"threads": N, "n_ctx": N}. Returns the info JSON, or NULL with oxiw_error() set.
EMSCRIPTEN_KEEPALIVE const char* oxiw_load(const char* path, const char* options) {
  return guarded([&]() -> const char* {
    const json o = json::parse(options ? options : "{}");
    g_engine.reset();
    auto e = std::make_unique<Engine>();
    oxi_model_params mp = oxi_model_default_params();
    mp.n_threads = num<int32_t>(o, "threads", 1);
    mp.device = "none";
    check(oxi_model_open(path, &mp, &e->model));
    oxi_model_desc d{};
    check(oxi_model_describe(e->model, &d));
    // A browser tab's memory is short: the context defaults to 4096 tokens, not the training length.
    int32_t n_ctx = num<int32_t>(o, "n_ctx", 4096);
    if (d.n_ctx_train > 0 && n_ctx > d.n_ctx_train) n_ctx = static_cast<int32_t>(d.n_ctx_train);
    check(oxi_context_new(e->model, n_ctx, &e->ctx));
    g_engine = std::move(e);
    return out(info());
  });
}

EMSCRIPTEN_KEEPALIVE const char* oxiw_generate(const char* request) {
  if (!g_engine) {
    g_error = "no model loaded";
    return nullptr;
  }
  return guarded([&]() -> const char* { return out(generate(request)); });
}

EMSCRIPTEN_KEEPALIVE const char* oxiw_error(void) { return g_error.c_str(); }

EMSCRIPTEN_KEEPALIVE void oxiw_free(void) { g_engine.reset(); }

}  // extern "C"
