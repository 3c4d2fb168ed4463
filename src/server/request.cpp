#include "server/request.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <initializer_list>
#include <iterator>

#include "core/error.h"
#include "core/json_limits.h"
#include "sampling/gbnf.h"

namespace oxi::server {

using nlohmann::json;

json error_body(const std::string& message, const std::string& type, const std::string& param,
                int status) {
  json err = {{"message", message}, {"type", type}, {"code", status}};
  err["param"] = param.empty() ? json(nullptr) : json(param);
  return json{{"error", err}};
}

namespace {

[[noreturn]] void bad(const std::string& param, const std::string& msg) {
  throw RequestError(400, param, msg);
}

const json* field(const json& body, const char* key) {
  auto it = body.find(key);
  if (it == body.end() || it->is_null()) return nullptr;
  return &*it;
}

std::optional<double> number(const json& body, const char* key, double lo, double hi) {
  const json* v = field(body, key);
  if (!v) return std::nullopt;
  if (!v->is_number()) bad(key, std::string("'") + key + "' must be a number");
  const double x = v->get<double>();
  if (!(x >= lo && x <= hi)) {
    bad(key, std::string("'") + key + "' must be between " + json(lo).dump() + " and " + json(hi).dump());
  }
  return x;
}

std::optional<long long> integer(const json& body, const char* key, long long lo, long long hi) {
  const json* v = field(body, key);
  if (!v) return std::nullopt;
  if (!v->is_number_integer() && !(v->is_number_float() && v->get<double>() == static_cast<long long>(v->get<double>()))) {
    bad(key, std::string("'") + key + "' must be an integer");
  }
  const long long x = v->is_number_integer() ? v->get<long long>() : static_cast<long long>(v->get<double>());
  if (x < lo || x > hi) {
    bad(key, std::string("'") + key + "' must be between " + std::to_string(lo) + " and " + std::to_string(hi));
  }
  return x;
}

std::optional<bool> boolean(const json& body, const char* key) {
  const json* v = field(body, key);
  if (!v) return std::nullopt;
  if (!v->is_boolean()) bad(key, std::string("'") + key + "' must be a boolean");
  return v->get<bool>();
}

// One bias: a number in [-100, 100] (OpenAI's range), or false (llama-server: never this token).
float bias_value(const json& v) {
  if (v.is_boolean() && !v.get<bool>()) return -INFINITY;
  if (!v.is_number() || !(v.get<double>() >= -100.0 && v.get<double>() <= 100.0)) {
    bad("logit_bias", "each logit_bias value must be a number between -100 and 100, or false");
  }
  return v.get<float>();
}

int32_t bias_token(const json& v) {
  if (!v.is_number_integer() || v.get<long long>() < 0 || v.get<long long>() > INT32_MAX) {
    bad("logit_bias", "logit_bias keys must be token ids (non-negative integers)");
  }
  return v.get<int32_t>();
}

// OpenAI's {"<token id>": bias, …} or llama-server's [[id, bias], …].
std::vector<std::pair<int32_t, float>> parse_logit_bias(const json& lb) {
  std::vector<std::pair<int32_t, float>> out;
  if (lb.is_object()) {
    for (auto it = lb.begin(); it != lb.end(); ++it) {
      const std::string& k = it.key();
      if (k.empty() || k.size() > 10 || k.find_first_not_of("0123456789") != std::string::npos) {
        bad("logit_bias", "logit_bias keys must be token ids, got '" + k + "'");
      }
      out.emplace_back(bias_token(json(std::stoll(k))), bias_value(it.value()));
    }
  } else if (lb.is_array()) {
    for (const auto& e : lb) {
      if (!e.is_array() || e.size() != 2) bad("logit_bias", "logit_bias entries must be [token id, bias] pairs");
      if (e[0].is_string()) bad("logit_bias", "logit_bias by token text is not supported; give token ids");
      out.emplace_back(bias_token(e[0]), bias_value(e[1]));
    }
  } else {
    bad("logit_bias", "'logit_bias' must be an object {\"token id\": bias} or an array of [token id, bias]");
  }
  return out;
}

// Fields that change what is generated must be honoured or refused, never dropped: every field
// of a request is either one we implement (kCommonFields and the endpoint's own), one that cannot
// change the output (kHarmless: bookkeeping for the caller or for llama-server's cache), or a 400
// naming it (docs/server.md, "Request fields").
const char* const kCommonFields[] = {"model", "stream", "stream_options", "max_tokens", "max_completion_tokens", "stop",
                                     "n", "logit_bias", "temperature", "top_p", "min_p", "presence_penalty",
                                     "frequency_penalty", "repeat_penalty", "top_k", "seed", "speculative.n_max",
                                     "speculative.n_min", "speculative.mode", "grammar", "ignore_eos"};
const char* const kHarmless[] = {"user", "metadata", "store", "service_tier", "cache_prompt", "id_slot",
                                 "prompt_cache_key", "safety_identifier", "timings_per_token",
                                 // llama-server's draft-model confidence floor: drafting only, and
                                 // verification keeps the output exact whatever is drafted.
                                 "speculative.p_min"};

void reject_unknown_fields(const json& body, std::initializer_list<const char*> endpoint_fields) {
  for (auto it = body.begin(); it != body.end(); ++it) {
    const std::string& k = it.key();
    if (it->is_null()) continue;  // null is the same as absent, for every field
    auto is = [&](const char* name) { return k == name; };
    auto in = [&](const auto& list) { return std::any_of(std::begin(list), std::end(list), is); };
    if (in(kCommonFields) || in(endpoint_fields) || in(kHarmless)) continue;
    if (k == "suffix") bad(k, "'suffix' (fill-in-the-middle) is not supported");
    if (k == "parallel_tool_calls" && it->is_boolean() && it->get<bool>()) continue;  // the default
    bad(k, "unsupported field '" + k + "': it could change the output, so it is refused rather than ignored");
  }
}

void parse_common(const json& body, const Limits& limits, GenerationRequest& r) {
  if (const json* m = field(body, "model")) {
    if (!m->is_string()) bad("model", "'model' must be a string");
    r.model = m->get<std::string>();
  }
  r.stream = boolean(body, "stream").value_or(false);
  if (const json* so = field(body, "stream_options")) {
    if (!so->is_object()) bad("stream_options", "'stream_options' must be an object");
    r.include_usage = boolean(*so, "include_usage").value_or(false);
  }
  // max_completion_tokens is the newer spelling; either is accepted.
  auto mt = integer(body, "max_completion_tokens", 0, limits.max_tokens_cap);
  if (!mt) mt = integer(body, "max_tokens", 0, limits.max_tokens_cap);
  if (mt) r.max_tokens = static_cast<int>(*mt);
  if (const json* s = field(body, "stop")) {
    if (s->is_string()) {
      r.stop.push_back(s->get<std::string>());
    } else if (s->is_array()) {
      if (s->size() > limits.max_stop) bad("stop", "at most " + std::to_string(limits.max_stop) + " stop sequences");
      for (const auto& x : *s) {
        if (!x.is_string()) bad("stop", "'stop' must be a string or an array of strings");
        r.stop.push_back(x.get<std::string>());
      }
    } else {
      bad("stop", "'stop' must be a string or an array of strings");
    }
    for (const auto& s2 : r.stop) {
      if (s2.empty()) bad("stop", "stop sequences must not be empty");
    }
  }
  if (auto n = integer(body, "n", 1, limits.max_choices)) r.n = static_cast<int>(*n);
  if (const json* lb = field(body, "logit_bias")) r.logit_bias = parse_logit_bias(*lb);
  r.ignore_eos = boolean(body, "ignore_eos").value_or(false);
  if (const json* g = field(body, "grammar")) {
    if (!g->is_string()) bad("grammar", "'grammar' must be a string (GBNF, llama.cpp's grammar syntax)");
    if (!g->get_ref<const std::string&>().empty()) {  // "" is no grammar, as in llama-server
      try {
        r.grammar = parse_gbnf(g->get_ref<const std::string&>());
      } catch (const Error& e) {
        bad("grammar", e.what());
      }
    }
  }
  auto& s = r.sampling;
  if (auto v = number(body, "temperature", 0.0, 2.0)) s.temperature = static_cast<float>(*v);
  if (auto v = number(body, "top_p", 0.0, 1.0)) s.top_p = static_cast<float>(*v);
  if (auto v = number(body, "min_p", 0.0, 1.0)) s.min_p = static_cast<float>(*v);
  if (auto v = number(body, "presence_penalty", -2.0, 2.0)) s.presence_penalty = static_cast<float>(*v);
  if (auto v = number(body, "frequency_penalty", -2.0, 2.0)) s.frequency_penalty = static_cast<float>(*v);
  if (auto v = number(body, "repeat_penalty", 0.0, 10.0)) s.repeat_penalty = static_cast<float>(*v);
  if (auto v = integer(body, "top_k", -1, 1000000)) s.top_k = static_cast<int>(*v);
  if (const json* seed = field(body, "seed")) {
    if (!seed->is_number_integer()) bad("seed", "'seed' must be an integer");
    s.seed = seed->is_number_unsigned() ? seed->get<uint64_t>() : static_cast<uint64_t>(seed->get<int64_t>());
  }
  if (auto v = integer(body, "speculative.n_max", 0, 16)) r.draft_max = static_cast<int>(*v);
  if (auto v = integer(body, "speculative.n_min", 0, 16)) r.draft_min = static_cast<int>(*v);
  if (const json* m = field(body, "speculative.mode")) {
    static const char* const kModes[] = {"auto", "none", "ngram", "mtp", "draft"};
    if (!m->is_string() || std::none_of(std::begin(kModes), std::end(kModes),
                                        [&](const char* k) { return m->get<std::string>() == k; })) {
      bad("speculative.mode", "'speculative.mode' must be one of \"auto\", \"none\", \"ngram\", \"mtp\", \"draft\"");
    }
    r.spec_mode = m->get<std::string>();
  }
}

void validate_content(const json& content, const std::string& where) {
  if (content.is_string() || content.is_null()) return;
  if (!content.is_array()) bad(where, "'" + where + "' must be a string or an array of content parts");
  for (const auto& part : content) {
    if (!part.is_object() || !part.contains("type") || !part["type"].is_string()) {
      bad(where, "each content part needs a string 'type'");
    }
    const std::string t = part["type"].get<std::string>();
    if (t == "text") {
      if (!part.contains("text") || !part["text"].is_string()) bad(where, "a text part needs a string 'text'");
    } else if (t == "image_url") {  // the URL itself is read by the engine (server/media.h)
      const json* u = part.contains("image_url") ? &part["image_url"] : nullptr;
      if (!u || !(u->is_string() || (u->is_object() && u->contains("url") && (*u)["url"].is_string())))
        bad(where, "an image_url part needs 'image_url': {\"url\": \"data:image/png;base64,...\"}");
    } else if (t == "input_audio") {  // decoded by the engine (server/media.h); the format is sniffed from the bytes
      const json* a = part.contains("input_audio") ? &part["input_audio"] : nullptr;
      if (!a || !a->is_object() || !a->contains("data") || !(*a)["data"].is_string())
        bad(where, "an input_audio part needs 'input_audio': {\"data\": \"<base64>\", \"format\": \"wav\"}");
      if (a->contains("format") && !(*a)["format"].is_string()) bad(where, "input_audio.format must be a string (\"wav\", \"mp3\", ...)");
    } else {
      throw RequestError(400, where, "content part type '" + t + "' is not supported (text, image_url and input_audio only)");
    }
  }
}

}  // namespace

json parse_body(const std::string& text) {
  // Before any recursive processing (parse results are copied, dumped and rendered recursively).
  if (json_too_deep(text)) {
    throw RequestError(400, "", "request body is nested deeper than " + std::to_string(kMaxJsonDepth) + " levels");
  }
  json body = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (body.is_discarded()) throw RequestError(400, "", "request body is not valid JSON");
  if (!body.is_object()) throw RequestError(400, "", "request body must be a JSON object");
  return body;
}

ChatRequest parse_chat_request(const json& body, const Limits& limits) {
  reject_unknown_fields(body, {"messages", "tools", "tool_choice", "response_format", "logprobs", "top_logprobs",
                               "chat_template_kwargs", "reasoning_effort"});
  ChatRequest r;
  parse_common(body, limits, r);
  const json* msgs = field(body, "messages");
  if (!msgs) bad("messages", "'messages' is required");
  if (!msgs->is_array() || msgs->empty()) bad("messages", "'messages' must be a non-empty array");
  if (msgs->size() > limits.max_messages) bad("messages", "too many messages");
  for (size_t i = 0; i < msgs->size(); ++i) {
    const json& m = (*msgs)[i];
    const std::string where = "messages[" + std::to_string(i) + "]";
    if (!m.is_object()) bad(where, where + " must be an object");
    if (!m.contains("role") || !m["role"].is_string()) bad(where + ".role", where + " needs a string 'role'");
    const std::string role = m["role"].get<std::string>();
    if (role != "system" && role != "developer" && role != "user" && role != "assistant" && role != "tool") {
      bad(where + ".role", "unknown role '" + role + "'");
    }
    if (m.contains("content")) validate_content(m["content"], where + ".content");
    if (role != "assistant" && (!m.contains("content") || m["content"].is_null())) {
      bad(where + ".content", where + " needs 'content'");
    }
    if (m.contains("tool_calls") && !m["tool_calls"].is_null()) {
      if (!m["tool_calls"].is_array()) bad(where + ".tool_calls", "'tool_calls' must be an array");
      for (const auto& tc : m["tool_calls"]) {
        if (!tc.is_object() || !tc.contains("function") || !tc["function"].is_object() ||
            !tc["function"].contains("name") || !tc["function"]["name"].is_string()) {
          bad(where + ".tool_calls", "each tool call needs function.name");
        }
      }
    }
    if (m.contains("reasoning_content") && !m["reasoning_content"].is_null() &&
        !m["reasoning_content"].is_string()) {
      bad(where + ".reasoning_content", "'reasoning_content' must be a string");
    }
  }
  r.messages = *msgs;
  if (const json* tools = field(body, "tools")) {
    if (!tools->is_array()) bad("tools", "'tools' must be an array");
    for (const auto& t : *tools) {
      if (!t.is_object() || !t.contains("type") || t["type"] != "function" || !t.contains("function") ||
          !t["function"].is_object() || !t["function"].contains("name") || !t["function"]["name"].is_string()) {
        bad("tools", "each tool must be {\"type\":\"function\",\"function\":{\"name\":…}}");
      }
    }
    r.tools = *tools;
  }
  if (const json* tc = field(body, "tool_choice")) {
    if (tc->is_string()) {
      r.tool_choice = tc->get<std::string>();
      if (r.tool_choice != "auto" && r.tool_choice != "none" && r.tool_choice != "required") {
        bad("tool_choice", "'tool_choice' must be auto, none, required or a function");
      }
    } else if (tc->is_object() && tc->contains("function") && (*tc)["function"].is_object() &&
               (*tc)["function"].contains("name") && (*tc)["function"]["name"].is_string()) {
      r.tool_choice = (*tc)["function"]["name"].get<std::string>();
    } else {
      bad("tool_choice", "'tool_choice' must be auto, none, required or a function");
    }
  }
  if (const json* rf = field(body, "response_format")) {
    if (!rf->is_object() || !rf->contains("type") || !(*rf)["type"].is_string()) {
      bad("response_format", "'response_format' needs a string 'type'");
    }
    const std::string t = (*rf)["type"].get<std::string>();
    if (t == "json_schema") {
      if (!rf->contains("json_schema") || !(*rf)["json_schema"].is_object()) {
        bad("response_format", "json_schema response_format needs a 'json_schema' object");
      }
    } else if (t != "json_object" && t != "text") {
      bad("response_format", "unknown response_format type '" + t + "'");
    }
    if (t != "text") r.response_format = *rf;
  }
  // One constraint per request: a grammar does not combine with a JSON one or a forced tool call.
  if (r.grammar && r.response_format.is_object()) {
    bad("grammar", "'grammar' cannot be combined with response_format " + r.response_format["type"].get<std::string>() +
                       ": give one or the other");
  }
  if (r.grammar && !r.tools.empty() && r.tool_choice != "auto" && r.tool_choice != "none") {
    bad("grammar", "'grammar' cannot be combined with a forced tool call (tool_choice '" + r.tool_choice + "')");
  }
  if (auto lp = boolean(body, "logprobs")) r.logprobs = *lp;
  if (auto tl = integer(body, "top_logprobs", 0, 20)) {
    r.top_logprobs = static_cast<int>(*tl);
  }
  if (const json* kw = field(body, "chat_template_kwargs")) {
    if (!kw->is_object()) bad("chat_template_kwargs", "'chat_template_kwargs' must be an object");
    if (auto et = boolean(*kw, "enable_thinking")) r.enable_thinking = *et;
  }
  if (const json* re = field(body, "reasoning_effort")) {
    if (!re->is_string()) bad("reasoning_effort", "'reasoning_effort' must be a string");
    if (re->get<std::string>() == "none") r.enable_thinking = false;
  }
  return r;
}

TokenizeRequest parse_tokenize_request(const json& body) {
  TokenizeRequest r;
  const json* c = field(body, "content");
  if (!c || !c->is_string()) bad("content", "'content' must be a string");
  r.content = c->get<std::string>();
  r.add_special = boolean(body, "add_special").value_or(r.add_special);
  r.parse_special = boolean(body, "parse_special").value_or(r.parse_special);
  r.with_pieces = boolean(body, "with_pieces").value_or(r.with_pieces);
  return r;
}

std::vector<int32_t> parse_detokenize_request(const json& body) {
  const json* t = field(body, "tokens");
  if (!t || !t->is_array()) bad("tokens", "'tokens' must be an array of token ids");
  std::vector<int32_t> ids;
  ids.reserve(t->size());
  for (const auto& x : *t) {
    if (!x.is_number_integer()) bad("tokens", "'tokens' must be an array of token ids");
    // Unsigned first: 2^32 + 5 read as int32 would wrap to 5.
    const bool in_range = x.is_number_unsigned() ? x.get<uint64_t>() <= INT32_MAX
                                                 : x.get<int64_t>() >= 0 && x.get<int64_t>() <= INT32_MAX;
    if (!in_range) bad("tokens", "token id " + x.dump() + " is out of range");
    ids.push_back(static_cast<int32_t>(x.get<int64_t>()));
  }
  return ids;
}

void check_model(const GenerationRequest& req, const std::string& served) { check_model(req.model, served); }

void check_model(const std::string& model, const std::string& served) {
  if (model.empty() || model == served) return;
  throw RequestError(404, "model", "the model '" + model + "' does not exist (this server serves '" + served + "')");
}

void check_content_type(const std::string& header_value) {
  std::string media = header_value.substr(0, header_value.find(';'));
  while (!media.empty() && std::isspace(static_cast<unsigned char>(media.back()))) media.pop_back();
  for (char& ch : media) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
  if (media != "application/json") {
    throw RequestError(415, "", "Content-Type must be application/json");
  }
}

CompletionRequest parse_completion_request(const json& body, const Limits& limits) {
  reject_unknown_fields(body, {"prompt", "logprobs", "echo"});
  CompletionRequest r;
  parse_common(body, limits, r);
  const json* p = field(body, "prompt");
  if (!p) bad("prompt", "'prompt' is required");
  if (p->is_string()) {
    r.prompt = p->get<std::string>();
  } else if (p->is_array() && !p->empty() && (*p)[0].is_number_integer()) {
    for (const auto& x : *p) {
      if (!x.is_number_integer() || x.get<long long>() < 0 || x.get<long long>() > INT32_MAX) {
        bad("prompt", "token id prompts must be arrays of non-negative integers");
      }
      r.prompt_ids.push_back(x.get<int32_t>());
    }
  } else if (p->is_array() && p->size() == 1 && (*p)[0].is_string()) {
    r.prompt = (*p)[0].get<std::string>();
  } else {
    bad("prompt", "'prompt' must be a string, [string] or an array of token ids");
  }
  if (const json* lp = field(body, "logprobs")) {
    if (!lp->is_number_integer() || lp->get<long long>() < 0 || lp->get<long long>() > 20) {
      bad("logprobs", "'logprobs' must be an integer 0..20");
    }
    r.logprobs = lp->get<int>() > 0;
    r.top_logprobs = lp->get<int>();
  }
  r.echo = boolean(body, "echo").value_or(false);
  return r;
}

}  // namespace oxi::server
