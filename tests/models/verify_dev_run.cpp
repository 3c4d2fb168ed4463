// Dev path: skipped unless OXI_VERIFY_MODEL is set. Feeds K tokens in one call (all logits) and the
// same K tokens one call each, from a 64-token prefix, and prints max |Δlogit| per position and
// whether the argmax agrees — what speculative decoding's exactness rests on.
//   OXI_VERIFY_MODEL=path [OXI_VERIFY_K=5] oxi_models_tests --gtest_filter=VerifyDev.*
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>

#include "format/model_files.h"
#include "models/model.h"

namespace {

TEST(VerifyDev, MultiTokenVsSingle) {
  const char* path = std::getenv("OXI_VERIFY_MODEL");
  if (!path) GTEST_SKIP() << "OXI_VERIFY_MODEL not set";
  const int64_t K = std::getenv("OXI_VERIFY_K") ? std::atoi(std::getenv("OXI_VERIFY_K")) : 5;
  auto files = oxi::open_model_files(path);
  oxi::LoadOptions o;
  auto m = oxi::load_model(files, o);
  const int64_t V = m->info().n_vocab;
  std::vector<int32_t> pre(64), toks(static_cast<size_t>(K));
  for (size_t i = 0; i < pre.size(); ++i) pre[i] = static_cast<int32_t>((i * 7919 + 13) % static_cast<size_t>(V));
  for (size_t i = 0; i < toks.size(); ++i) toks[i] = static_cast<int32_t>((i * 104729 + 7) % static_cast<size_t>(V));
  auto a = m->new_state(256, K + 1), b = m->new_state(256, 0);
  std::vector<float> la(static_cast<size_t>(V * K)), lb(static_cast<size_t>(V * K)), tmp(static_cast<size_t>(V));
  m->forward(*a, pre, tmp.data(), false);
  m->forward(*b, pre, tmp.data(), false);
  const int rounds = std::getenv("OXI_VERIFY_ROUNDS") ? std::atoi(std::getenv("OXI_VERIFY_ROUNDS")) : 1;
  for (int r = 0; r < rounds; ++r) {
  for (auto& t : toks) t = static_cast<int32_t>((t * 31 + r + 1) % V);
  m->forward(*a, toks, la.data(), true);
  for (int64_t i = 0; i < K; ++i) m->forward(*b, std::vector<int32_t>{toks[static_cast<size_t>(i)]}, lb.data() + i * V, false);
  for (int64_t i = 0; i < K; ++i) {
    const float* x = la.data() + i * V;
    const float* y = lb.data() + i * V;
    double d = 0;
    for (int64_t v = 0; v < V; ++v) d = std::max(d, static_cast<double>(std::fabs(x[v] - y[v])));
    std::printf("pos %lld: max |dlogit| %.3g argmax %lld vs %lld\n", static_cast<long long>(i), d,
                static_cast<long long>(std::max_element(x, x + V) - x), static_cast<long long>(std::max_element(y, y + V) - y));
  }
  }
}

}  // namespace

#include "spec_check.h"
namespace {
TEST(VerifyDev, SpecVsPlain) {
  const char* path = std::getenv("OXI_VERIFY_MODEL");
  if (!path) GTEST_SKIP() << "OXI_VERIFY_MODEL not set";
  auto files = oxi::open_model_files(path);
  oxi::LoadOptions o;
  auto m = oxi::load_model(files, o);
  const int64_t V = m->info().n_vocab;
  std::vector<int32_t> pre(32);
  for (size_t i = 0; i < pre.size(); ++i) pre[i] = static_cast<int32_t>((i * 7919 + 13) % static_cast<size_t>(V));
  const auto plain = spectest::greedy(*m, pre, 64, {});
  for (int32_t k : {1, 2, 4}) {
    oxi::ReplayDrafter d(plain.generated, pre.size(), 0, V);
    oxi::SpecOptions spec;
    spec.mode = oxi::SpecMode::kAuto;
    spec.adaptive = false;
    spec.draft_max = k;
    spec.drafter = &d;
    const auto r = spectest::greedy(*m, pre, 64, spec);
    size_t i = 0;
    while (i < r.generated.size() && r.generated[i] == plain.generated[i]) ++i;
    std::printf("k %d: first difference at %zu, drafted %d accepted %d\n", k, i, r.n_drafted, r.n_accepted);
  }
}
}  // namespace
