// Developer entry points for the Gemma 4 e2e script (tests/e2e/gemma4_oracle.test.mjs), used
// until `oxinfer run` / `oxinfer convert` cover Gemma 4. Each test is skipped unless its
// environment variables are set:
//   Gemma4Dev.Convert  OXI_G4_CONVERT_IN=HF_DIR OXI_G4_CONVERT_OUT=OUT.gguf [OXI_G4_TYPE=f32]
//   Gemma4Dev.Run      OXI_G4_MODEL=PATH OXI_G4_TOKENS=2,10,20 OXI_G4_N=32 OXI_G4_OUT=OUT.json
//                      [OXI_G4_TOP_K=5]: greedy decode; writes {generated_tokens, steps[{token,
//                      top[{token, logprob}]}]} with exact (double) log-softmax, ties → smallest id;
//                      OXI_G4_ALL=1 adds prompt_topk[{pos, top}] for every prompt position.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <fstream>
#include <numeric>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "format/dtype.h"
#include "format/model_files.h"
#include "convert/convert.h"
#include "models/model.h"

namespace {

const char* env(const char* k) {
  const char* v = std::getenv(k);
  return (v && *v) ? v : nullptr;
}

TEST(Gemma4Dev, Convert) {
  const char* in = env("OXI_G4_CONVERT_IN");
  const char* out = env("OXI_G4_CONVERT_OUT");
  if (!in || !out) GTEST_SKIP() << "OXI_G4_CONVERT_IN / OXI_G4_CONVERT_OUT not set";
  oxi::ConvertOptions opt;
  if (const char* t = env("OXI_G4_TYPE")) {
    auto d = oxi::dtype_from_name(t);
    ASSERT_TRUE(d.has_value()) << t;
    opt.out_type = *d;
  }
  oxi::HfCheckpoint hf = oxi::read_hf_checkpoint(in);
  oxi::convert_hf_to_gguf(hf, out, opt);
}

TEST(Gemma4Dev, Run) {
  const char* model_path = env("OXI_G4_MODEL");
  const char* tok_s = env("OXI_G4_TOKENS");
  const char* out = env("OXI_G4_OUT");
  if (!model_path || !tok_s || !out) GTEST_SKIP() << "OXI_G4_MODEL / OXI_G4_TOKENS / OXI_G4_OUT not set";
  const int n = env("OXI_G4_N") ? std::atoi(env("OXI_G4_N")) : 32;
  const int top_k = env("OXI_G4_TOP_K") ? std::atoi(env("OXI_G4_TOP_K")) : 5;
  std::vector<int32_t> prompt;
  {
    std::stringstream ss(tok_s);
    std::string item;
    while (std::getline(ss, item, ',')) prompt.push_back(static_cast<int32_t>(std::stol(item)));
  }
  oxi::ModelFiles files = oxi::open_model_files(model_path);
  auto model = oxi::load_model(files, oxi::LoadOptions{});
  const int64_t V = model->info().n_vocab;
  auto state = model->new_state(static_cast<int64_t>(prompt.size()) + n + 1);
  const bool all = env("OXI_G4_ALL") != nullptr;  // also the top-k of every prompt position
  const size_t P = prompt.size();
  std::vector<float> all_logits(static_cast<size_t>(V) * (all ? P : 1));
  model->forward(*state, prompt, all_logits.data(), all);
  std::vector<float> logits(all_logits.end() - V, all_logits.end());
  std::vector<int32_t> idx(static_cast<size_t>(V));
  auto top_of = [&](const float* lg) {
    double mx = -INFINITY;
    for (int64_t i = 0; i < V; ++i) mx = std::max(mx, static_cast<double>(lg[i]));
    double sum = 0;
    for (int64_t i = 0; i < V; ++i) sum += std::exp(static_cast<double>(lg[i]) - mx);
    const double lse = mx + std::log(sum);
    std::iota(idx.begin(), idx.end(), 0);
    std::partial_sort(idx.begin(), idx.begin() + top_k, idx.end(), [&](int32_t a, int32_t b) {
      return lg[a] > lg[b] || (lg[a] == lg[b] && a < b);
    });
    nlohmann::json top = nlohmann::json::array();
    for (int k = 0; k < top_k; ++k)
      top.push_back({{"token", idx[static_cast<size_t>(k)]},
                     {"logit", lg[idx[static_cast<size_t>(k)]]},
                     {"logprob", static_cast<double>(lg[idx[static_cast<size_t>(k)]]) - lse}});
    return top;
  };
  nlohmann::json prompt_top = nlohmann::json::array();
  if (all)
    for (size_t i = 0; i < P; ++i) prompt_top.push_back({{"pos", i}, {"top", top_of(all_logits.data() + i * static_cast<size_t>(V))}});
  nlohmann::json steps = nlohmann::json::array();
  std::vector<int32_t> gen;
  for (int i = 0; i < n; ++i) {
    nlohmann::json top = top_of(logits.data());
    const int32_t tok = idx[0];
    steps.push_back({{"step", i}, {"token", tok}, {"top", top}});
    gen.push_back(tok);
    if (i + 1 < n) {
      const int32_t one[1] = {tok};
      model->forward(*state, one, logits.data(), false);
    }
  }
  nlohmann::json j = {{"prompt_tokens", prompt}, {"generated_tokens", gen}, {"steps", steps}};
  if (all) j["prompt_topk"] = prompt_top;
  std::ofstream(out) << j.dump(1) << "\n";
}

}  // namespace
