#include "nn/moe.h"

#include <algorithm>
#include <numeric>
#include <string>

#include "core/error.h"

namespace oxi::nn {

void topk_renorm(const float* p, int64_t E, int64_t k, int32_t* ids, float* weights) {
  thread_local std::vector<int32_t> order;
  order.resize(static_cast<size_t>(E));
  std::iota(order.begin(), order.end(), 0);
  std::partial_sort(order.begin(), order.begin() + k, order.end(), [&](int32_t a, int32_t b) {
    return p[a] > p[b] || (p[a] == p[b] && a < b);
  });
  double sum = 0.0;
  for (int64_t j = 0; j < k; ++j) sum += static_cast<double>(p[order[static_cast<size_t>(j)]]);
  const float s = std::max(static_cast<float>(sum), 6.103515625e-5f);
  for (int64_t j = 0; j < k; ++j) {
    ids[j] = order[static_cast<size_t>(j)];
    weights[j] = p[ids[j]] / s;
  }
}

ExpertRows expert_rows(const int32_t* ids, const float* weights, int64_t rows, int64_t E, int64_t k, const char* who) {
  ExpertRows r;
  r.rows.resize(static_cast<size_t>(E));
  r.slots.resize(static_cast<size_t>(E));
  r.weights.resize(static_cast<size_t>(E));
  for (int64_t t = 0; t < rows; ++t)
    for (int64_t j = 0; j < k; ++j) {
      const int32_t e = ids[t * k + j];
      if (e < 0 || e >= E) throw_error(ErrorCode::kInternal, std::string(who) + ": the router chose expert " + std::to_string(e));
      r.rows[static_cast<size_t>(e)].push_back(static_cast<int32_t>(t));
      r.slots[static_cast<size_t>(e)].push_back(static_cast<int32_t>(j));
      r.weights[static_cast<size_t>(e)].push_back(weights[t * k + j]);
    }
  return r;
}

}  // namespace oxi::nn
