// Embeddings (docs/server.md "Embeddings"): the request shapes of POST /v1/embeddings (OpenAI) and
// llama-server's POST /embeddings (/embedding), the pooling of a sequence's final normed hidden
// states into one vector, and llama.cpp's normalisations (embd_normalize). No model knowledge:
// the engine hands the hidden rows over (Engine::embed), the routes pool and shape them.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

namespace oxi::server {

// llama.cpp's pooling types, with its numbering (LLAMA_POOLING_TYPE_*, the GGUF key
// `<arch>.pooling_type`). kNone: no pooling (per-token rows; /v1/embeddings refuses it).
enum class Pooling : int { kNone = 0, kMean = 1, kCls = 2, kLast = 3 };

// Why reranking (llama.cpp's pooling "rank", POST /rerank, /v1/rerank, --reranking) is not offered
// (docs/server.md "Reranking"): it scores with a reranker checkpoint's classification head, and the
// families oxinfer runs have no reranker checkpoint.
extern const char* const kNoRerankReason;

const char* pooling_name(Pooling p);
// "none" | "mean" | "cls" | "last"; nullopt for anything else (llama.cpp's "rank" included).
std::optional<Pooling> pooling_from_name(std::string_view name);
// The GGUF key's value; nullopt for values we do not pool with (4: rank) or do not know.
std::optional<Pooling> pooling_from_gguf(int64_t value);

// One input: text (the engine tokenizes it as llama-server does: special tokens added and parsed)
// or token ids as given.
struct EmbeddingInput {
  bool is_text = true;
  std::string text;
  std::vector<int32_t> ids;
};

struct EmbeddingsRequest {
  std::string model;
  std::vector<EmbeddingInput> inputs;  // 1 … kMaxEmbeddingInputs
  std::string input_field = "input";   // the field they came in ("input" | "content"), for errors
  std::optional<int64_t> dimensions;   // OpenAI's `dimensions`: only n_embd is served
  bool base64 = false;                 // encoding_format "base64" (/v1/embeddings only)
  int normalize = 2;                   // embd_normalize (llama.cpp): -1 none, 0 max-abs int16, 1 taxicab, 2 L2, >2 p-norm
};

// OpenAI's cap on the inputs of one request.
constexpr size_t kMaxEmbeddingInputs = 2048;

// `input`: a string, an array of strings, an array of token ids or an array of such arrays (an
// empty string or array is refused later, once tokenized, as llama-server does). `oai`: the
// /v1/embeddings form (`input` required); else llama-server's /embeddings, which also takes
// `content` for `input`. encoding_format "float" | "base64"; `dimensions` only as the model's
// own size (n_embd; checked by the caller); unknown fields → 400 (they might change the result).
// RequestError 400 naming the field otherwise.
EmbeddingsRequest parse_embeddings_request(const nlohmann::json& body, bool oai);

// Pools one sequence's hidden rows, fed in order in chunks ([n, n_embd] each): mean of all rows,
// the first row (cls) or the last row (last). kNone keeps every row.
class Pooler {
 public:
  Pooler(Pooling p, size_t n_embd) : p_(p), d_(n_embd) {}
  void add(const float* rows, size_t n);
  size_t rows() const { return n_; }
  // The pooled vector [n_embd] (kNone: every row, [rows(), n_embd]).
  std::vector<float> result() const;

 private:
  Pooling p_;
  size_t d_;
  size_t n_ = 0;
  std::vector<double> sum_;  // kMean: the running sum (double: long inputs lose nothing)
  std::vector<float> keep_;  // kCls: the first row; kLast: the latest row; kNone: every row
};

// In place, as llama.cpp's common_embd_normalize: -1 leaves v; 0 scales the largest |x| to 32760
// (an int16 range); 1 divides by the sum of |x|; 2 by the L2 norm; p > 2 by the p-norm. A zero
// vector stays zero.
void normalize_embedding(std::span<float> v, int norm);

// Standard base64 (RFC 4648 §4, padded) of the vector's bytes as little-endian f32, what OpenAI
// clients decode for encoding_format "base64".
std::string base64_f32(std::span<const float> v);

}  // namespace oxi::server
