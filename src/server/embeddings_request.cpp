// Embeddings without HTTP (embeddings.h): request parsing, pooling names, the Pooler,
// normalisation and base64 encoding. The routes are in embeddings.cpp; tests/fuzz/fuzz_request.cpp
// drives the parser alone.
#include "server/embeddings.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>

#include "server/request.h"

namespace oxi::server {

using nlohmann::json;

const char* const kNoRerankReason =
    "reranking is not offered: it needs a reranker checkpoint (a cross-encoder whose classification "
    "head scores a query-document pair, such as bge-reranker or Qwen3-Reranker), and the model families "
    "oxinfer runs (Qwen 3.5, Gemma 4) have none; use embeddings (--embeddings) and compare vectors instead";

const char* pooling_name(Pooling p) {
  switch (p) {
    case Pooling::kNone: return "none";
    case Pooling::kMean: return "mean";
    case Pooling::kCls: return "cls";
    case Pooling::kLast: return "last";
  }
  return "none";
}

std::optional<Pooling> pooling_from_name(std::string_view name) {
  for (Pooling p : {Pooling::kNone, Pooling::kMean, Pooling::kCls, Pooling::kLast}) {
    if (name == pooling_name(p)) return p;
  }
  return std::nullopt;
}

std::optional<Pooling> pooling_from_gguf(int64_t value) {
  if (value < 0 || value > 3) return std::nullopt;
  return static_cast<Pooling>(value);
}

namespace {

[[noreturn]] void bad(const std::string& param, const std::string& msg) { throw RequestError(400, param, msg); }

bool is_token_id(const json& x) {
  return x.is_number_integer() && x.get<int64_t>() >= 0 && x.get<int64_t>() <= INT32_MAX;
}

// An array of token ids (non-empty arrays whose first element is a number are taken as ids).
EmbeddingInput ids_input(const json& a, const std::string& param) {
  EmbeddingInput in;
  in.is_text = false;
  for (const auto& x : a) {
    if (!is_token_id(x)) bad(param, "'" + param + "': token id arrays must hold non-negative integers only");
    in.ids.push_back(x.get<int32_t>());
  }
  return in;
}

EmbeddingInput text_input(const json& s) {
  EmbeddingInput in;
  in.text = s.get<std::string>();
  return in;
}

}  // namespace

EmbeddingsRequest parse_embeddings_request(const json& body, bool oai) {
  static const char* const kFields[] = {"input", "content", "model", "encoding_format", "dimensions",
                                        "embd_normalize", "user"};
  for (auto it = body.begin(); it != body.end(); ++it) {
    if (it->is_null()) continue;
    const std::string& k = it.key();
    if (std::find(std::begin(kFields), std::end(kFields), k) == std::end(kFields) || (oai && k == "content")) {
      bad(k, "unsupported field '" + k + "' for embeddings");
    }
  }
  EmbeddingsRequest r;
  if (auto m = body.find("model"); m != body.end() && !m->is_null()) {
    if (!m->is_string()) bad("model", "'model' must be a string");
    r.model = m->get<std::string>();
  }
  const char* key = "input";
  auto in = body.find("input");
  if ((in == body.end() || in->is_null()) && !oai) {
    in = body.find("content");
    key = "content";
  }
  if (in == body.end() || in->is_null()) bad("input", oai ? "'input' is required" : "'input' or 'content' is required");
  const std::string param = key;
  r.input_field = param;
  if (in->is_string()) {
    r.inputs.push_back(text_input(*in));
  } else if (in->is_array()) {
    if (in->empty()) bad(param, "'" + param + "' must not be an empty array");
    if ((*in)[0].is_number()) {
      r.inputs.push_back(ids_input(*in, param));
    } else {
      for (size_t i = 0; i < in->size(); ++i) {
        const json& e = (*in)[i];
        const std::string pi = param + "[" + std::to_string(i) + "]";
        if (e.is_string()) r.inputs.push_back(text_input(e));
        else if (e.is_array()) r.inputs.push_back(ids_input(e, pi));
        else bad(pi, "'" + param + "' must be a string, an array of strings, an array of token ids or an array of token id arrays");
      }
    }
  } else {
    bad(param, "'" + param + "' must be a string, an array of strings, an array of token ids or an array of token id arrays");
  }
  if (r.inputs.size() > kMaxEmbeddingInputs) {
    bad(param, "at most " + std::to_string(kMaxEmbeddingInputs) + " inputs per request");
  }
  if (auto f = body.find("encoding_format"); f != body.end() && !f->is_null()) {
    const std::string v = f->is_string() ? f->get<std::string>() : "";
    if (v == "base64") r.base64 = true;
    else if (v != "float") bad("encoding_format", "'encoding_format' must be \"float\" or \"base64\"");
    if (r.base64 && !oai) bad("encoding_format", "encoding_format \"base64\" is only offered by /v1/embeddings");
  }
  if (auto n = body.find("embd_normalize"); n != body.end() && !n->is_null()) {
    if (!n->is_number_integer() || n->get<int64_t>() < -1 || n->get<int64_t>() > 64) {
      bad("embd_normalize", "'embd_normalize' must be an integer from -1 to 64");
    }
    r.normalize = n->get<int>();
  }
  if (auto d = body.find("dimensions"); d != body.end() && !d->is_null()) {
    if (!d->is_number_integer()) bad("dimensions", "'dimensions' must be an integer");
    r.dimensions = d->get<int64_t>();
  }
  return r;
}

void Pooler::add(const float* rows, size_t n) {
  if (n == 0) return;
  switch (p_) {
    case Pooling::kMean:
      sum_.resize(d_, 0.0);
      for (size_t r = 0; r < n; ++r)
        for (size_t i = 0; i < d_; ++i) sum_[i] += rows[r * d_ + i];
      break;
    case Pooling::kCls:
      if (n_ == 0) keep_.assign(rows, rows + d_);
      break;
    case Pooling::kLast:
      keep_.assign(rows + (n - 1) * d_, rows + n * d_);
      break;
    case Pooling::kNone:
      keep_.insert(keep_.end(), rows, rows + n * d_);
      break;
  }
  n_ += n;
}

std::vector<float> Pooler::result() const {
  if (p_ != Pooling::kMean) return keep_.empty() ? std::vector<float>(p_ == Pooling::kNone ? 0 : d_, 0.0f) : keep_;
  std::vector<float> v(d_, 0.0f);
  for (size_t i = 0; i < d_ && n_ > 0; ++i) v[i] = static_cast<float>(sum_[i] / static_cast<double>(n_));
  return v;
}

void normalize_embedding(std::span<float> v, int norm) {
  double s = 0.0;
  switch (norm) {
    case -1:
      return;
    case 0:
      for (float x : v) s = std::max(s, static_cast<double>(std::fabs(x)));
      s /= 32760.0;
      break;
    case 2:
      for (float x : v) s += static_cast<double>(x) * x;
      s = std::sqrt(s);
      break;
    default:  // 1 (taxicab) and p > 2
      for (float x : v) s += std::pow(std::fabs(static_cast<double>(x)), norm);
      s = std::pow(s, 1.0 / norm);
      break;
  }
  const double k = s > 0.0 ? 1.0 / s : 0.0;
  for (float& x : v) x = static_cast<float>(x * k);
}

std::string base64_f32(std::span<const float> v) {
  std::string bytes(v.size() * 4, '\0');
  for (size_t i = 0; i < v.size(); ++i) {
    uint32_t u = std::bit_cast<uint32_t>(v[i]);
    for (int b = 0; b < 4; ++b) bytes[4 * i + static_cast<size_t>(b)] = static_cast<char>((u >> (8 * b)) & 0xFF);
  }
  static const char* kAlphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out;
  out.reserve((bytes.size() + 2) / 3 * 4);
  for (size_t i = 0; i < bytes.size(); i += 3) {
    const size_t n = std::min<size_t>(3, bytes.size() - i);
    uint32_t g = 0;
    for (size_t j = 0; j < 3; ++j) g = (g << 8) | (j < n ? static_cast<uint8_t>(bytes[i + j]) : 0u);
    for (size_t j = 0; j < 4; ++j) out.push_back(j <= n ? kAlphabet[(g >> (18 - 6 * j)) & 63] : '=');
  }
  return out;
}

// ---- routes -------------------------------------------------------------------------------------

}  // namespace oxi::server
