// What the HTTP layer needs from the inference side. One Engine per served model; it owns the
// slots (one sequence each), the prompt cache, and the per-family output parser choice.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "chat/parser.h"
#include "sampling/json_constraint.h"
#include "server/embeddings.h"
#include "server/request.h"

namespace oxi::server {

struct TokenOut {
  int32_t id = 0;
  std::string text;  // UTF-8 complete code points (may be empty while a code point is split)
  float logprob = 0;
  std::vector<std::pair<int32_t, float>> top;  // (id, logprob)
};

struct PromptMedia;  // server/media.h

struct GenerationResult {
  int n_prompt = 0;          // prompt entries: tokens and image rows
  int n_cached = 0;  // prompt tokens reused from the prompt cache (not pre-filled)
  int n_generated = 0;
  std::string finish_reason = "stop";  // "stop" | "length" | "tool_calls" (set by the caller)
  double prompt_ms = 0, gen_ms = 0;
  int n_drafted = 0, n_accepted = 0;  // speculative decoding: draft tokens verified / accepted
  int n_images = 0;          // images in the prompt
  int n_images_encoded = 0;  // of those, run through the tower (the rest were in the prompt cache)
  double image_encode_ms = 0;
  int n_audio = 0, n_audio_encoded = 0;  // audio clips in the prompt, run through the audio tower
  double audio_encode_ms = 0;
};

// Called per generated token; return false to stop (client gone, stop string matched).
using TokenSink = std::function<bool(const TokenOut&)>;

// Called with the next hidden rows of input `input`, in order: rows [n, n_embd].
using EmbedSink = std::function<void(size_t input, const float* rows, size_t n)>;

class Engine {
 public:
  virtual ~Engine() = default;
  virtual bool ready() const = 0;
  virtual std::string model_id() const = 0;
  virtual int n_ctx() const = 0;
  virtual std::vector<int32_t> tokenize(const std::string& text, bool add_special, bool parse_special) = 0;
  virtual std::string detokenize(const std::vector<int32_t>& ids) = 0;
  virtual std::string token_piece(int32_t id) = 0;
  // Renders the conversation with the model's template (generation prompt added). turn_prefix:
  // the same conversation without the generation prompt when that is a prefix of the prompt
  // ("" otherwise) — the prompt cache checkpoints there, since the next turn shares it.
  virtual std::string render_chat(const ChatRequest& req, std::string* turn_prefix) = 0;
  // Tokenizes a prompt from render_chat: special-token strings in the messages and tools stay
  // text; only the template's markup becomes control tokens (unless --special-in-content).
  virtual std::vector<int32_t> tokenize_prompt(const std::string& rendered) = 0;
  // A chat request's images (image_url parts, in message order) put into its tokenized prompt:
  // each `<|image_pad|>` the template placed becomes that image's rows (negative ids from its
  // content hash, so the prompt cache tells images apart and reuses the same one); `prefix` (the
  // turn boundary's ids, may be null) likewise for the images it holds. nullptr when the request
  // has no image. RequestError 400: a model without a vision tower, a refused or bad URL, data
  // that is no image or too large an image.
  virtual std::shared_ptr<const PromptMedia> place_images(const ChatRequest& req, std::vector<int32_t>& ids,
                                                          std::vector<int32_t>* prefix) = 0;
  // Output format of the model family (selects the reasoning / tool-call parser).
  virtual ChatFormat chat_format() const = 0;
  // Runs one request on a free slot (blocks while all slots are busy). Throws RequestError for
  // requests that cannot run (prompt longer than the context → 400).
  // checkpoint_at: a prompt position worth a prompt-cache checkpoint (0: none).
  // constraint: optional structured-output automaton (response_format, forced tool calls);
  // generation stops once it is complete. media: the prompt's images (place_images), or nullptr;
  // only images not covered by the prompt cache are encoded.
  virtual GenerationResult generate(const std::vector<int32_t>& prompt, size_t checkpoint_at,
                                    const GenerationRequest& req, std::shared_ptr<TextConstraint> constraint,
                                    const TokenSink& sink, const PromptMedia* media) = 0;
  // Embeddings: every token's final normed hidden state (the output head's input) of each input,
  // handed to `rows` in order, in chunks. Each input runs on a sequence state of its own, made for
  // it and dropped after, so generating slots and the prompt cache are never touched; the request
  // holds one slot meanwhile (first come, first served with the generations: -np bounds the work
  // at once) and its passes go through the batcher with the running decodes. keep_going is asked
  // between passes (false: RequestError 499, the client left). Throws RequestError 400 before any
  // work for an empty input, a token id out of range or an input longer than the context, 503 when
  // shutting down.
  virtual void embed(const std::vector<std::vector<int32_t>>& inputs, const EmbedSink& rows,
                     const std::function<bool()>& keep_going) = 0;
  virtual int n_embd() const = 0;
  // The pooling of the embeddings endpoints: --pooling, else the GGUF's <arch>.pooling_type, else
  // none (llama.cpp's rule).
  virtual Pooling pooling() const = 0;
  virtual nlohmann::json stats() const = 0;  // for /metrics
  // GET /slots: [{"id", "id_task", "n_ctx", "speculative", "is_processing", "n_prompt_tokens",
  // "n_prompt_tokens_cache", "next_token": {"has_next_token", "n_remain", "n_decoded"}}], one per
  // slot; the counts are the running task's, else the last one's (docs/server.md "/slots").
  virtual nlohmann::ordered_json slots() const = 0;
  // What the model is, for ollama's /api/tags and /api/show and /props: {"path", "arch", "name", "n_params",
  // "weight_bytes", "file_bytes", "n_ctx_train", "n_embd", "n_layer", "n_vocab", "quant",
  // "chat_template", "format" ("gguf" | "safetensors"), "modified" (file mtime, Unix seconds),
  // "bos_token", "eos_token", "n_slots", "vision" (a tower is loaded), "defaults" (the sampling defaults: temperature, top_k, …)}.
  virtual nlohmann::json model_info() const = 0;
  // Shutdown past its deadline: running generations stop at their next token (finishing their
  // response normally) and requests waiting for a slot, or arriving later, get a 503.
  virtual void cancel_all() = 0;
};

// Throws RequestError 400 when a prompt of n entries (text tokens, and image rows when
// with_images) leaves no room in a context of n_ctx for the first generated token.
void require_fits_context(size_t n, bool with_images, int64_t n_ctx);

}  // namespace oxi::server
