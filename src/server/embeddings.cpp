// The embeddings routes: POST /v1/embeddings (OpenAI) and POST /embeddings, /embedding
// (llama-server's own shape), over the parsing and pooling of embeddings_request.cpp; the
// reranking routes, which answer 501 (kNoRerankReason).
#include "server/embeddings.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>

#include "server/http_front.h"
#include "server/routes.h"

namespace oxi::server {

using nlohmann::json;

void Routes::rerank(const std::string&, httplib::Response&) { throw RequestError(501, "", kNoRerankReason, "not_supported_error"); }

void Routes::embeddings_oai(const std::string& text, httplib::Response& res) { embeddings(text, res, true); }
void Routes::embeddings_native(const std::string& text, httplib::Response& res) { embeddings(text, res, false); }

std::vector<Pooler> Routes::embed_pooled(const std::vector<std::vector<int32_t>>& ids, Pooling pooling) {
  std::vector<Pooler> pools(ids.size(), Pooler(pooling, static_cast<size_t>(eng_.n_embd())));
  {
    InFlight guard(metrics_);
    eng_.embed(ids, [&](size_t i, const float* rows, size_t n) { pools[i].add(rows, n); },
               [] { return !client_disconnected(); });
  }
  size_t total = 0;
  for (const auto& v : ids) total += v.size();
  GenerationResult r;
  r.n_prompt = static_cast<int>(std::min<size_t>(total, INT32_MAX));
  account(r);
  metrics_.embedding_inputs += ids.size();
  return pools;
}

// Per-token rows (pooling none on /embeddings) are capped: the JSON would be ~12 bytes a value.
constexpr size_t kMaxTokenRowValues = size_t{8} << 20;

void Routes::embeddings(const std::string& text, httplib::Response& res, bool oai) {
  // llama-server's answers, in its order: the switch, then the pooling, then the body.
  if (!opt_.embeddings) {
    throw RequestError(501, "", "This server does not support embeddings. Start it with `--embeddings`",
                       "not_supported_error");
  }
  const Pooling pooling = eng_.pooling();
  if (oai && pooling == Pooling::kNone) {
    throw RequestError(400, "",
                       "Pooling type 'none' is not OAI compatible. Please use a different pooling type "
                       "(start the server with --pooling mean, cls or last; /embeddings gives per-token rows)");
  }
  const EmbeddingsRequest req = parse_embeddings_request(parse_body(text), oai);
  check_model(req.model, eng_.model_id());
  const size_t d = static_cast<size_t>(eng_.n_embd());
  if (req.dimensions && *req.dimensions != static_cast<int64_t>(d)) {
    throw RequestError(400, "dimensions", "'dimensions' can only be this model's embedding size, " + std::to_string(d));
  }
  std::vector<std::vector<int32_t>> ids;
  size_t total = 0;
  for (size_t i = 0; i < req.inputs.size(); ++i) {
    const EmbeddingInput& in = req.inputs[i];
    ids.push_back(in.is_text ? eng_.tokenize(in.text, true, true) : in.ids);
    if (ids.back().empty()) {
      throw RequestError(400, req.input_field, "Input content cannot be empty");
    }
    total += ids.back().size();
  }
  if (pooling == Pooling::kNone && total * d > kMaxTokenRowValues) {
    throw RequestError(400, "input", "per-token embeddings of " + std::to_string(total) + " tokens x " + std::to_string(d) +
                                         " values exceed the limit of " + std::to_string(kMaxTokenRowValues) +
                                         " values per response; send fewer tokens or start with a pooling");
  }
  std::vector<Pooler> pools = embed_pooled(ids, pooling);

  json data = json::array();
  for (size_t i = 0; i < pools.size(); ++i) {
    std::vector<float> v = pools[i].result();
    if (pooling == Pooling::kNone) {  // unnormalized, one row per token (llama-server's /embeddings)
      json rows_json = json::array();
      for (size_t t = 0; t < pools[i].rows(); ++t) rows_json.push_back(std::vector<float>(v.begin() + t * d, v.begin() + (t + 1) * d));
      data.push_back({{"index", i}, {"embedding", rows_json}});
      continue;
    }
    normalize_embedding(v, req.normalize);
    if (!oai) {
      data.push_back({{"index", i}, {"embedding", json::array({v})}});
    } else if (req.base64) {
      data.push_back({{"object", "embedding"}, {"index", i}, {"embedding", base64_f32(v)}});
    } else {
      data.push_back({{"object", "embedding"}, {"index", i}, {"embedding", v}});
    }
  }
  if (!oai) return send_json(res, 200, data);
  send_json(res, 200,
            {{"object", "list"}, {"data", data}, {"model", eng_.model_id()},
             {"usage", {{"prompt_tokens", total}, {"total_tokens", total}}}});
}

}  // namespace oxi::server
