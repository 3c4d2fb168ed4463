// Dev path for tests/e2e/quant_oracle.test.mjs (skipped unless OXI_QD_MODEL is set): one forward
// pass over a token sequence with logits at every position (teacher forcing), any architecture.
//   OXI_QD_MODEL=path OXI_QD_TOKENS=1,2,3 [OXI_QD_QUANT=q4_0] [OXI_QD_TOPK=2] [OXI_QD_OUT=f.json]
//   [OXI_QD_SPLIT=P: the first P tokens in one forward, then one token per forward — the batches
//   llama_oracle.mjs --all-logits uses for a P-token prompt and its greedy steps; Gemma 4's
//   attention follows llama.cpp's batch-size-dependent path, so the split matters there]
//   oxi_models_tests --gtest_filter=QuantDev.*
// Output: {"weight_bytes", "positions": [{"top": [{"token", "logprob"}]}]}: per position the top-k
// of the full distribution (ties → smallest id), logprob = log-softmax of the raw logits, as
// shared/oracle/llama_oracle.mjs --all-logits prints for llama.cpp.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <numeric>
#include <sstream>

#include <nlohmann/json.hpp>

#include "format/model_files.h"
#include "models/model.h"

namespace {

TEST(QuantDev, Logits) {
  const char* path = std::getenv("OXI_QD_MODEL");
  if (!path) GTEST_SKIP() << "OXI_QD_MODEL not set";
  std::vector<int32_t> toks;
  {
    std::stringstream ss(std::getenv("OXI_QD_TOKENS") ? std::getenv("OXI_QD_TOKENS") : "");
    std::string x;
    while (std::getline(ss, x, ',')) toks.push_back(std::stoi(x));
  }
  ASSERT_FALSE(toks.empty()) << "OXI_QD_TOKENS is empty";
  const int k = std::getenv("OXI_QD_TOPK") ? std::atoi(std::getenv("OXI_QD_TOPK")) : 2;
  auto files = oxi::open_model_files(path);
  oxi::LoadOptions opt;
  if (const char* q = std::getenv("OXI_QD_QUANT")) opt.quant = q;
  auto model = oxi::load_model(files, opt);
  const int64_t V = model->info().n_vocab, T = static_cast<int64_t>(toks.size());
  auto st = model->new_state(T + 8);
  std::vector<float> all(static_cast<size_t>(T * V));
  int64_t split = std::getenv("OXI_QD_SPLIT") ? std::atoll(std::getenv("OXI_QD_SPLIT")) : T;
  split = std::clamp<int64_t>(split, 1, T);
  model->forward(*st, std::span<const int32_t>(toks.data(), static_cast<size_t>(split)), all.data(), true);
  for (int64_t t = split; t < T; ++t)
    model->forward(*st, std::span<const int32_t>(toks.data() + t, 1), all.data() + t * V, true);
  nlohmann::json positions = nlohmann::json::array();
  std::vector<int32_t> idx(static_cast<size_t>(V));
  for (int64_t t = 0; t < T; ++t) {
    const float* lg = all.data() + t * V;
    double mx = -INFINITY;
    for (int64_t i = 0; i < V; ++i) mx = std::max(mx, static_cast<double>(lg[i]));
    double s = 0;
    for (int64_t i = 0; i < V; ++i) s += std::exp(static_cast<double>(lg[i]) - mx);
    const double lse = mx + std::log(s);
    std::iota(idx.begin(), idx.end(), 0);
    std::partial_sort(idx.begin(), idx.begin() + k, idx.end(), [&](int32_t a, int32_t b) { return lg[a] > lg[b] || (lg[a] == lg[b] && a < b); });
    nlohmann::json top = nlohmann::json::array();
    for (int j = 0; j < k; ++j) top.push_back({{"token", idx[static_cast<size_t>(j)]}, {"logprob", lg[idx[static_cast<size_t>(j)]] - lse}});
    positions.push_back({{"top", top}});
  }
  nlohmann::json out = {{"weight_bytes", model->info().weight_bytes}, {"positions", positions}};
  if (const char* o = std::getenv("OXI_QD_OUT")) std::ofstream(o) << out.dump() << "\n";
  else std::cout << out.dump() << "\n";
}

}  // namespace
