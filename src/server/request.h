// OpenAI-compatible request parsing and validation (no model knowledge). Every malformed field is
// reported as a RequestError carrying the HTTP status (4xx), the offending parameter and a message
// that goes into OpenAI's error JSON.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace oxi {
struct GbnfGrammar;
}

namespace oxi::server {

class RequestError : public std::runtime_error {
 public:
  RequestError(int status, std::string param, const std::string& message,
               std::string type = "invalid_request_error")
      : std::runtime_error(message), status_(status), param_(std::move(param)), type_(std::move(type)) {}
  int status() const { return status_; }
  const std::string& param() const { return param_; }
  const std::string& type() const { return type_; }

 private:
  int status_;
  std::string param_;
  std::string type_;
};

// {"error":{"message":…,"type":…,"param":…,"code":…}}
nlohmann::json error_body(const std::string& message, const std::string& type,
                          const std::string& param, int status);

struct SamplingRequest {
  std::optional<float> temperature, top_p, min_p, presence_penalty, frequency_penalty,
      repeat_penalty;
  std::optional<int> top_k;
  std::optional<int> penalty_last_n;  // ollama's repeat_last_n (llama.cpp's penalty window)
  std::optional<uint64_t> seed;
};

struct GenerationRequest {
  std::string model;
  bool stream = false;
  bool include_usage = false;        // stream_options.include_usage
  int max_tokens = -1;               // -1: until end of generation or context
  std::vector<std::string> stop;     // up to 4 strings
  bool logprobs = false;
  int top_logprobs = 0;              // 0..20
  SamplingRequest sampling;
  int n = 1;                         // choices; choice i samples with seed + i
  // logit_bias: (token id, bias added to its logit; -inf for `false`), ids not yet checked
  // against the vocabulary.
  std::vector<std::pair<int32_t, float>> logit_bias;
  // llama-server's per-request draft lengths ("speculative.n_max" / "speculative.n_min").
  std::optional<int> draft_max, draft_min;
  // oxinfer's per-request speculation mode ("speculative.mode": auto | none | ngram | mtp |
  // draft, the names of --spec); checked against the model and the server's --spec by the engine.
  std::optional<std::string> spec_mode;
  // llama-server's `ignore_eos`: the end-of-generation tokens are never chosen (their logits get
  // −inf, the bias llama-server adds), so a generation ends only at max_tokens, a stop string or
  // the context's end.
  bool ignore_eos = false;
  // llama.cpp's `grammar` (GBNF text), compiled; null when the request has none.
  std::shared_ptr<const GbnfGrammar> grammar;
};

struct ChatRequest : GenerationRequest {
  nlohmann::json messages = nlohmann::json::array();  // validated OpenAI messages
  nlohmann::json tools = nlohmann::json::array();
  std::string tool_choice = "auto";     // "auto" | "none" | "required" | function name
  nlohmann::json response_format;       // null, {"type":"json_object"} or json_schema
  std::optional<bool> enable_thinking;  // chat_template_kwargs.enable_thinking / reasoning
  // Text the assistant's answer starts with (Anthropic's final assistant message): appended to
  // the rendered prompt as message text; the output continues it. Not set by the OpenAI parser.
  std::string assistant_prefill;
};

struct CompletionRequest : GenerationRequest {
  std::string prompt;                   // text prompt
  std::vector<int32_t> prompt_ids;      // or token ids
  bool echo = false;
};

struct Limits {
  int max_tokens_cap = 32768;   // requests above are rejected with 400
  size_t max_messages = 4096;
  size_t max_stop = 4;
  int max_choices = 16;         // n
};

// POST /tokenize: {"content": str, "add_special"?, "parse_special"?, "with_pieces"?: bool}.
struct TokenizeRequest {
  std::string content;
  bool add_special = false;
  bool parse_special = true;
  bool with_pieces = false;
};

ChatRequest parse_chat_request(const nlohmann::json& body, const Limits& limits);
TokenizeRequest parse_tokenize_request(const nlohmann::json& body);
// POST /detokenize: {"tokens": [id, ...]}; ids outside 0..2^31-1 → 400 (never wrapped into range;
// the engine checks them against the vocabulary).
std::vector<int32_t> parse_detokenize_request(const nlohmann::json& body);
// 404 (OpenAI's "model_not_found") when the request names a model other than `served`; a request
// without "model" is served.
void check_model(const GenerationRequest& req, const std::string& served);
void check_model(const std::string& model, const std::string& served);
// 415 unless the Content-Type header value is application/json (parameters such as charset
// allowed): a text/plain POST is a CORS "simple" request any web page can send without preflight.
void check_content_type(const std::string& header_value);
CompletionRequest parse_completion_request(const nlohmann::json& body, const Limits& limits);
// Parses the body text: 400 on invalid JSON or a non-object.
nlohmann::json parse_body(const std::string& text);

}  // namespace oxi::server
