// Dev path for oracle comparisons without the CLI: skipped unless OXI_Q35_MODEL is set.
//   OXI_Q35_MODEL=path OXI_Q35_TOKENS=1,2,3 [OXI_Q35_N=32] [OXI_Q35_TOPK=5] [OXI_Q35_OUT=f.json]
//   oxi_models_tests --gtest_filter=Qwen35Dev.*
// Greedy (argmax, ties → smallest id) generation printing the same JSON shape as llama_oracle.mjs:
// {"generated_tokens": [...], "steps": [{"token", "top": [{"token", "logprob"}]}]}.
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

TEST(Qwen35Dev, Run) {
  const char* path = std::getenv("OXI_Q35_MODEL");
  if (!path) GTEST_SKIP() << "OXI_Q35_MODEL not set";
  std::vector<int32_t> toks;
  {
    std::stringstream ss(std::getenv("OXI_Q35_TOKENS") ? std::getenv("OXI_Q35_TOKENS") : "");
    std::string x;
    while (std::getline(ss, x, ',')) toks.push_back(std::stoi(x));
  }
  const int n = std::getenv("OXI_Q35_N") ? std::atoi(std::getenv("OXI_Q35_N")) : 32;
  const int k = std::getenv("OXI_Q35_TOPK") ? std::atoi(std::getenv("OXI_Q35_TOPK")) : 5;
  auto files = oxi::open_model_files(path);
  oxi::LoadOptions opt;
  opt.n_threads = std::getenv("OXI_Q35_THREADS") ? std::atoi(std::getenv("OXI_Q35_THREADS")) : 1;
  auto model = oxi::load_model(files, opt);
  const int64_t V = model->info().n_vocab;
  auto st = model->new_state(static_cast<int64_t>(toks.size()) + n + 8);
  std::vector<float> lg(static_cast<size_t>(V));
  model->forward(*st, toks, lg.data(), false);
  nlohmann::json steps = nlohmann::json::array(), gen = nlohmann::json::array();
  std::vector<int32_t> idx(static_cast<size_t>(V));
  for (int i = 0; i < n; ++i) {
    double mx = -INFINITY;
    for (float x : lg) mx = std::max(mx, static_cast<double>(x));
    double s = 0;
    for (float x : lg) s += std::exp(static_cast<double>(x) - mx);
    const double lse = mx + std::log(s);
    std::iota(idx.begin(), idx.end(), 0);
    std::partial_sort(idx.begin(), idx.begin() + k, idx.end(), [&](int32_t a, int32_t b) {
      return lg[static_cast<size_t>(a)] > lg[static_cast<size_t>(b)] || (lg[static_cast<size_t>(a)] == lg[static_cast<size_t>(b)] && a < b);
    });
    nlohmann::json top = nlohmann::json::array();
    for (int j = 0; j < k; ++j) top.push_back({{"token", idx[static_cast<size_t>(j)]}, {"logprob", lg[static_cast<size_t>(idx[static_cast<size_t>(j)])] - lse}});
    const int32_t tok = idx[0];
    steps.push_back({{"step", i}, {"token", tok}, {"top", top}});
    gen.push_back(tok);
    if (i + 1 < n) model->forward(*st, std::span<const int32_t>(&tok, 1), lg.data(), false);
  }
  nlohmann::json out = {{"generated_tokens", gen}, {"steps", steps}};
  if (const char* o = std::getenv("OXI_Q35_OUT")) {
    std::ofstream(o) << out.dump(1) << "\n";
  } else {
    std::cout << out.dump(1) << "\n";
  }
}

}  // namespace

#include "convert/convert.h"

namespace {
// OXI_Q35_CONVERT=HF_DIR OXI_Q35_GGUF=out.gguf [OXI_Q35_TYPE=f32|f16|bf16|q8_0]
TEST(Qwen35Dev, Convert) {
  const char* in = std::getenv("OXI_Q35_CONVERT");
  const char* out = std::getenv("OXI_Q35_GGUF");
  if (!in || !out) GTEST_SKIP() << "OXI_Q35_CONVERT / OXI_Q35_GGUF not set";
  oxi::ConvertOptions opt;
  if (const char* t = std::getenv("OXI_Q35_TYPE")) opt.out_type = *oxi::dtype_from_name(t);
  oxi::convert_hf_to_gguf(oxi::read_hf_checkpoint(in), out, opt);
}
}  // namespace
