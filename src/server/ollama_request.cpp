// ollama /api/chat, /api/generate and /api/embed(dings) requests parsed (parse_ollama_request,
// parse_ollama_embed_request; dialects.h): chat and generate become OpenAI chat requests, ollama's
// `options` the sampling fields. No HTTP here: the routes are in ollama.cpp, and
// tests/fuzz/fuzz_request.cpp drives this file alone.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "server/dialects.h"
#include "server/embeddings.h"

namespace oxi::server {

using nlohmann::json;

namespace {

bool nonempty(const json* v) {
  return v && !(v->is_string() && v->get<std::string>().empty()) && !(v->is_array() && v->empty());
}

// ollama `options` → OpenAI sampling fields of `oa`; `repeat_last_n` → `penalty_last_n`.
void translate_options(const json& o, json& oa, std::optional<int>& penalty_last_n) {
  if (!o.is_object()) bad("options", "'options' must be an object");
  // Same meaning under the same name.
  static const char* const kSame[] = {"temperature", "top_k", "top_p", "min_p", "seed", "repeat_penalty",
                                      "presence_penalty", "frequency_penalty", "stop"};
  // Load, memory and thread settings: cannot change the output (the server's own apply).
  static const char* const kHarmless[] = {"num_ctx", "num_batch", "num_gpu", "main_gpu", "use_mmap", "use_mlock",
                                          "num_thread", "low_vram", "f16_kv", "vocab_only", "numa", "num_keep",
                                          "logits_all", "embedding_only"};
  for (auto it = o.begin(); it != o.end(); ++it) {
    const std::string& k = it.key();
    const json& v = it.value();
    if (v.is_null()) continue;
    auto in = [&](const auto& list) {
      for (const char* n : list) {
        if (k == n) return true;
      }
      return false;
    };
    if (in(kSame)) {
      oa[k] = v;
    } else if (in(kHarmless)) {
    } else if (k == "num_predict") {
      if (!v.is_number_integer()) bad("options.num_predict", "'num_predict' must be an integer");
      // -1: until the end of generation, -2: until the context is full; both are "no limit" here.
      if (v.get<long long>() >= 0) oa["max_tokens"] = v;
      else if (v.get<long long>() < -2) bad("options.num_predict", "'num_predict' must be -2, -1 or a token count");
    } else if (k == "repeat_last_n") {
      if (!v.is_number_integer() || v.get<long long>() < -1 || v.get<long long>() > 1000000) {
        bad("options.repeat_last_n", "'repeat_last_n' must be an integer, -1 or more");
      }
      penalty_last_n = static_cast<int>(v.get<long long>());
    } else if ((k == "typical_p" || k == "tfs_z") && v.is_number() && v.get<double>() == 1.0) {
      // 1.0: off
    } else if (k == "mirostat" && v.is_number() && v.get<double>() == 0.0) {
      // 0: off
    } else if ((k == "mirostat_tau" || k == "mirostat_eta") && v.is_number()) {
      // only used with mirostat, which is off (else refused above)
    } else if (k == "penalize_newline" && v.is_boolean()) {
      // removed from ollama's sampler: a no-op there too
    } else {
      bad("options." + k, "unsupported option '" + k + "': it could change the output, so it is refused rather than ignored");
    }
  }
}

// A message's `images` (base64 strings) as OpenAI image_url parts before its text, where
// llama-mtmd-cli puts images a prompt does not place (the engine reads them as any data: URL).
json content_with_images(const json& m, const std::string& where, json text) {
  const json* imgs = present(m, "images");
  if (!nonempty(imgs)) return text;
  if (!imgs->is_array()) bad(where + ".images", "'images' must be an array of base64 strings");
  json parts = json::array();
  for (const auto& b64 : *imgs) {
    if (!b64.is_string()) bad(where + ".images", "'images' must be an array of base64 strings");
    parts.push_back({{"type", "image_url"}, {"image_url", {{"url", "data:image/png;base64," + b64.get<std::string>()}}}});
  }
  if (!text.is_string()) bad(where + ".content", "a message with images needs string 'content'");
  parts.push_back({{"type", "text"}, {"text", text}});
  return parts;
}

json translate_chat_message(const json& m, size_t i) {
  const std::string where = "messages[" + std::to_string(i) + "]";
  if (!m.is_object()) bad(where, where + " must be an object");
  json out = {{"role", m.contains("role") ? m["role"] : json(nullptr)},
              {"content", content_with_images(m, where, m.contains("content") && !m["content"].is_null() ? m["content"] : json(""))}};
  if (const json* th = present(m, "thinking")) out["reasoning_content"] = *th;
  if (const json* tcs = present(m, "tool_calls")) {
    if (!tcs->is_array()) bad(where + ".tool_calls", "'tool_calls' must be an array");
    json calls = json::array();
    for (const auto& tc : *tcs) {
      if (!tc.is_object() || !tc.contains("function") || !tc["function"].is_object()) {
        bad(where + ".tool_calls", "each tool call needs a 'function' object");
      }
      json f = tc["function"];
      if (f.contains("arguments") && f["arguments"].is_object()) f["arguments"] = f["arguments"].dump();
      calls.push_back({{"type", "function"}, {"function", f}});
    }
    out["tool_calls"] = calls;
  }
  return out;
}

}  // namespace

bool ollama_model_matches(const std::string& requested, const std::string& served) {
  if (requested == served) return true;
  const bool served_tagged = served.find(':') != std::string::npos;
  return !served_tagged && requested == served + ":latest";
}

OllamaRequest parse_ollama_request(const json& body, const Limits& limits, bool generate) {
  if (generate) {
    refuse_unknown_fields(body, {"model", "prompt", "system", "format", "options", "stream", "keep_alive", "think", "raw",
                                 "suffix", "template", "context", "images"});
  } else {
    refuse_unknown_fields(body, {"model", "messages", "tools", "format", "options", "stream", "keep_alive", "think"});
  }
  const json* model = present(body, "model");
  if (!model || !model->is_string() || model->get<std::string>().empty()) bad("model", "model is required");

  OllamaRequest r;
  json oa = json::object();
  oa["stream"] = true;  // ollama streams unless told not to
  if (const json* s = present(body, "stream")) oa["stream"] = *s;
  std::optional<int> penalty_last_n;
  if (const json* o = present(body, "options")) translate_options(*o, oa, penalty_last_n);
  if (const json* f = present(body, "format")) {
    if (f->is_string() && f->get<std::string>() == "json") {
      oa["response_format"] = {{"type", "json_object"}};
    } else if (f->is_object()) {
      oa["response_format"] = {{"type", "json_schema"}, {"json_schema", {{"name", "format"}, {"schema", *f}}}};
    } else if (!(f->is_string() && f->get<std::string>().empty())) {
      bad("format", "'format' must be \"json\" or a JSON schema object");
    }
  }
  if (const json* t = present(body, "think")) {
    if (t->is_boolean()) {
      oa["chat_template_kwargs"] = {{"enable_thinking", t->get<bool>()}};
    } else if (t->is_string() && (*t == "high" || *t == "medium" || *t == "low")) {
      oa["chat_template_kwargs"] = {{"enable_thinking", true}};
    } else {
      bad("think", "'think' must be a boolean or \"high\", \"medium\", \"low\"");
    }
  }

  json msgs = json::array();
  if (generate) {
    for (const char* k : {"suffix", "template", "context", "images"}) {
      if (nonempty(present(body, k))) {
        bad(k, std::string("'") + k + "' is not supported" +
                   (std::string(k) == "template" ? " (the model's Jinja chat template is used)" : ""));
      }
    }
    const json* p = present(body, "prompt");
    if (p && !p->is_string()) bad("prompt", "'prompt' must be a string");
    const std::string prompt = p ? p->get<std::string>() : "";
    if (const json* raw = present(body, "raw")) {
      if (!raw->is_boolean()) bad("raw", "'raw' must be a boolean");
      r.raw = raw->get<bool>();
    }
    if (prompt.empty()) {
      r.load_only = true;
      msgs.push_back({{"role", "user"}, {"content", ""}});
    } else {
      if (const json* sys = present(body, "system")) {
        if (!sys->is_string()) bad("system", "'system' must be a string");
        if (r.raw) bad("system", "'system' cannot be used with raw (the prompt is not templated)");
        msgs.push_back({{"role", "system"}, {"content", *sys}});
      }
      msgs.push_back({{"role", "user"}, {"content", prompt}});
      r.raw_prompt = prompt;
    }
  } else {
    const json* in = present(body, "messages");
    if (in && !in->is_array()) bad("messages", "'messages' must be an array");
    if (!in || in->empty()) {
      r.load_only = true;
      msgs.push_back({{"role", "user"}, {"content", ""}});
    } else {
      for (size_t i = 0; i < in->size(); ++i) msgs.push_back(translate_chat_message((*in)[i], i));
    }
    if (const json* tools = present(body, "tools")) oa["tools"] = *tools;
  }
  oa["messages"] = std::move(msgs);
  Limits lim = limits;
  lim.max_stop = 64;
  r.chat = parse_chat_request(oa, lim);
  r.chat.model = model->get<std::string>();
  r.chat.sampling.penalty_last_n = penalty_last_n;
  return r;
}

OllamaEmbedRequest parse_ollama_embed_request(const json& body, bool legacy) {
  if (!body.is_object()) bad("", "the request body must be a JSON object");
  if (legacy) refuse_unknown_fields(body, {"model", "prompt", "options", "keep_alive"});
  else refuse_unknown_fields(body, {"model", "input", "truncate", "dimensions", "options", "keep_alive"});
  const json* model = present(body, "model");
  if (!model || !model->is_string() || model->get<std::string>().empty()) bad("model", "model is required");
  OllamaEmbedRequest r;
  r.model = model->get<std::string>();
  if (const json* o = present(body, "options")) {
    json unused = json::object();
    std::optional<int> unused_last_n;
    translate_options(*o, unused, unused_last_n);  // the same checks as /api/chat; no effect on a vector
    if (const json* n = present(*o, "num_ctx")) {
      if (!n->is_number_integer() || n->get<int64_t>() < 1) bad("options.num_ctx", "'num_ctx' must be a positive integer");
      r.num_ctx = n->get<int64_t>();
    }
  }
  if (const json* k = present(body, "keep_alive"); k && !k->is_string() && !k->is_number()) {
    bad("keep_alive", "'keep_alive' must be a duration string or a number of seconds");
  }
  if (legacy) {
    const json* p = present(body, "prompt");
    if (p && !p->is_string()) bad("prompt", "'prompt' must be a string");
    if (p && !p->get<std::string>().empty()) r.inputs.push_back(p->get<std::string>());
    return r;
  }
  if (const json* in = present(body, "input")) {
    if (in->is_string()) {
      if (!in->get<std::string>().empty()) r.inputs.push_back(in->get<std::string>());
    } else if (in->is_array()) {
      if (in->size() > kMaxEmbeddingInputs) bad("input", "at most " + std::to_string(kMaxEmbeddingInputs) + " inputs per request");
      for (size_t i = 0; i < in->size(); ++i) {
        if (!(*in)[i].is_string()) bad("input[" + std::to_string(i) + "]", "'input' must be a string or an array of strings");
        r.inputs.push_back((*in)[i].get<std::string>());
      }
    } else {
      bad("input", "'input' must be a string or an array of strings");
    }
  }
  if (const json* t = present(body, "truncate")) {
    if (!t->is_boolean()) bad("truncate", "'truncate' must be a boolean");
    r.truncate = t->get<bool>();
  }
  if (const json* d = present(body, "dimensions")) {
    if (!d->is_number_integer() || d->get<int64_t>() < 0) bad("dimensions", "'dimensions' must be a non-negative integer");
    r.dimensions = d->get<int64_t>();
  }
  return r;
}

}  // namespace oxi::server
