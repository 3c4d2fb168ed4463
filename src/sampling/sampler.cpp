#include "sampling/sampler.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "core/error.h"

namespace oxi {

namespace {

// Descending logit, ties → smaller id: a total, deterministic order.
bool better(const Candidate& a, const Candidate& b) {
  return a.logit > b.logit || (a.logit == b.logit && a.id < b.id);
}

bool finite(float x) { return std::isfinite(x); }

float max_logit(const std::vector<Candidate>& c) {
  float m = -std::numeric_limits<float>::infinity();
  for (const auto& x : c) m = std::max(m, x.logit);
  return m;
}

uint64_t random_seed() {
  std::random_device rd;
  return (static_cast<uint64_t>(rd()) << 32) ^ rd();
}

}  // namespace

SamplingParams SamplingParams::greedy() {
  SamplingParams p;
  p.temperature = 0.0f;
  p.top_k = 0;
  p.top_p = 1.0f;
  p.min_p = 0.0f;
  p.penalty_last_n = 0;
  p.seed = 0;
  return p;
}

void SamplingParams::validate() const {
  auto bad = [](const std::string& what) {
    throw_error(ErrorCode::kInvalidArgument, "invalid sampling parameter: " + what);
  };
  if (std::isnan(temperature) || std::isinf(temperature)) bad("temperature must be finite");
  if (std::isnan(top_p) || top_p < 0.0f) bad("top_p must be >= 0");
  if (std::isnan(min_p) || min_p > 1.0f) bad("min_p must be <= 1");
  if (!std::isfinite(repeat_penalty) || repeat_penalty <= 0.0f) bad("repeat_penalty must be > 0");
  if (!std::isfinite(presence_penalty)) bad("presence_penalty must be finite");
  if (!std::isfinite(frequency_penalty)) bad("frequency_penalty must be finite");
  if (penalty_last_n < -1) bad("penalty_last_n must be >= -1");
}

void apply_penalties(std::vector<Candidate>& c, std::span<const int32_t> counts, float repeat,
                     float presence, float frequency) {
  for (auto& x : c) {
    if (x.id < 0 || static_cast<size_t>(x.id) >= counts.size()) continue;
    const int32_t n = counts[static_cast<size_t>(x.id)];
    if (n <= 0) continue;
    if (x.logit <= 0.0f) {
      x.logit *= repeat;
    } else {
      x.logit /= repeat;
    }
    x.logit -= static_cast<float>(n) * frequency + presence;
  }
}

void apply_top_k(std::vector<Candidate>& c, int32_t k) {
  if (k <= 0 || c.empty()) return;
  const size_t kk = std::min(static_cast<size_t>(k), c.size());
  std::partial_sort(c.begin(), c.begin() + static_cast<std::ptrdiff_t>(kk), c.end(), better);
  c.resize(kk);
}

void apply_top_p(std::vector<Candidate>& c, float p) {
  if (!(p < 1.0f) || c.size() <= 1) return;
  const double m = max_logit(c);
  double total = 0.0;
  for (const auto& x : c) total += std::exp(static_cast<double>(x.logit) - m);
  // Sort an expanding prefix until the mass is reached (avoids sorting a whole vocabulary).
  size_t k = std::min<size_t>(c.size(), 256);
  for (;;) {
    std::partial_sort(c.begin(), c.begin() + static_cast<std::ptrdiff_t>(k), c.end(), better);
    double cum = 0.0;
    for (size_t i = 0; i < k; ++i) {
      cum += std::exp(static_cast<double>(c[i].logit) - m) / total;
      if (cum >= static_cast<double>(p)) {
        c.resize(i + 1);
        return;
      }
    }
    if (k == c.size()) return;  // rounding: the whole list is the nucleus
    k = std::min(c.size(), k * 8);
  }
}

void apply_min_p(std::vector<Candidate>& c, float p) {
  if (!(p > 0.0f) || c.size() <= 1) return;
  const float threshold = max_logit(c) + std::log(p);
  size_t out = 0;
  for (size_t i = 0; i < c.size(); ++i) {
    if (c[i].logit >= threshold) c[out++] = c[i];
  }
  if (out == 0) return;  // unreachable (the max always passes), kept for safety
  c.resize(out);
}

void apply_temperature(std::vector<Candidate>& c, float t) {
  if (!(t > 0.0f)) return;
  for (auto& x : c) x.logit /= t;
}

std::vector<double> candidate_probs(const std::vector<Candidate>& c) {
  std::vector<double> p(c.size());
  if (c.empty()) return p;
  const double m = max_logit(c);
  double total = 0.0;
  for (size_t i = 0; i < c.size(); ++i) {
    p[i] = std::exp(static_cast<double>(c[i].logit) - m);
    total += p[i];
  }
  for (auto& x : p) x /= total;
  return p;
}

int32_t argmax(std::span<const float> logits) {
  int64_t best = -1;
  float bv = 0.0f;
  for (size_t i = 0; i < logits.size(); ++i) {
    const float v = logits[i];
    if (!finite(v)) continue;
    if (best < 0 || v > bv) {
      best = static_cast<int64_t>(i);
      bv = v;
    }
  }
  if (best < 0) throw_error(ErrorCode::kInternal, "the model produced no finite logits");
  return static_cast<int32_t>(best);
}

double log_sum_exp(std::span<const float> logits) {
  double m = -std::numeric_limits<double>::infinity();
  for (float v : logits) {
    if (!std::isnan(v)) m = std::max(m, static_cast<double>(v));
  }
  if (!std::isfinite(m)) return m;
  double s = 0.0;
  for (float v : logits) {
    if (!std::isnan(v)) s += std::exp(static_cast<double>(v) - m);
  }
  return m + std::log(s);
}

std::vector<TokenLogprob> top_logprobs(std::span<const float> logits, int32_t k, double lse) {
  std::vector<Candidate> best;
  if (k <= 0) return {};
  const size_t kk = std::min(static_cast<size_t>(k), logits.size());
  best.reserve(kk + 1);
  for (size_t i = 0; i < logits.size(); ++i) {
    const float v = logits[i];
    if (std::isnan(v)) continue;
    if (best.size() == kk && !(v > best.back().logit)) continue;
    // Insert after every entry with logit >= v (ids ascend, so ties keep the smaller id first).
    auto pos = std::upper_bound(best.begin(), best.end(), v,
                                [](float val, const Candidate& c) { return val > c.logit; });
    best.insert(pos, Candidate{static_cast<int32_t>(i), v});
    if (best.size() > kk) best.pop_back();
  }
  std::vector<TokenLogprob> out;
  out.reserve(best.size());
  for (const auto& c : best) {
    out.push_back({c.id, static_cast<float>(static_cast<double>(c.logit) - lse)});
  }
  return out;
}

Sampler::Sampler(const SamplingParams& params, int64_t n_vocab) : params_(params), n_vocab_(n_vocab) {
  params_.validate();
  if (n_vocab <= 0) throw_error(ErrorCode::kInvalidArgument, "sampler: empty vocabulary");
  seed_ = params_.seed == kRandomSeed ? random_seed() : params_.seed;
  rng_.seed(seed_);
  if (params_.penalty_last_n > 0) window_.assign(static_cast<size_t>(params_.penalty_last_n), -1);
  if (params_.has_penalties()) counts_.assign(static_cast<size_t>(n_vocab), 0);
}

void Sampler::reset() {
  rng_.seed(seed_);
  window_head_ = 0;
  window_fill_ = 0;
  if (params_.penalty_last_n > 0) {
    std::fill(window_.begin(), window_.end(), -1);
  } else {
    window_.clear();
  }
  std::fill(counts_.begin(), counts_.end(), 0);
}

void Sampler::count(int32_t id, int delta) {
  if (id >= 0 && id < static_cast<int64_t>(counts_.size())) counts_[static_cast<size_t>(id)] += delta;
}

void Sampler::accept(int32_t id) {
  if (params_.penalty_last_n == 0) return;
  if (params_.penalty_last_n < 0) {
    window_.push_back(id);
    count(id, +1);
    return;
  }
  const size_t cap = window_.size();
  if (window_fill_ == cap) count(window_[window_head_], -1);
  window_[window_head_] = id;
  count(id, +1);
  window_head_ = (window_head_ + 1) % cap;
  window_fill_ = std::min(window_fill_ + 1, cap);
}

std::vector<int32_t> Sampler::history() const {
  if (params_.penalty_last_n < 0) return window_;
  std::vector<int32_t> out;
  const size_t cap = window_.size();
  for (size_t i = 0; i < window_fill_; ++i) {
    out.push_back(window_[(window_head_ + cap - window_fill_ + i) % cap]);
  }
  return out;
}

int32_t Sampler::sample(std::span<const float> logits) {
  if (logits.size() < static_cast<size_t>(n_vocab_)) {
    throw_error(ErrorCode::kInternal, "sampler: logit row shorter than the vocabulary");
  }
  const auto row = logits.first(static_cast<size_t>(n_vocab_));
  const bool penalties = params_.has_penalties();
  if (params_.is_greedy() && !penalties) return argmax(row);

  cands_.clear();
  cands_.reserve(row.size());
  for (size_t i = 0; i < row.size(); ++i) {
    if (finite(row[i])) cands_.push_back({static_cast<int32_t>(i), row[i]});
  }
  if (cands_.empty()) throw_error(ErrorCode::kInternal, "the model produced no finite logits");

  if (penalties) {
    apply_penalties(cands_, counts_, params_.repeat_penalty, params_.presence_penalty,
                    params_.frequency_penalty);
  }
  if (params_.is_greedy()) {
    return std::min_element(cands_.begin(), cands_.end(), better)->id;
  }
  apply_top_k(cands_, params_.top_k);
  apply_top_p(cands_, params_.top_p);
  apply_min_p(cands_, params_.min_p);
  apply_temperature(cands_, params_.temperature);

  const std::vector<double> p = candidate_probs(cands_);
  // 53 random bits → u in [0, 1).
  const double u = static_cast<double>(rng_() >> 11) * (1.0 / 9007199254740992.0);
  double cum = 0.0;
  for (size_t i = 0; i < p.size(); ++i) {
    cum += p[i];
    if (u < cum) return cands_[i].id;
  }
  // Rounding left u just above the total: the last candidate with any mass.
  for (size_t i = p.size(); i-- > 0;) {
    if (p[i] > 0.0) return cands_[i].id;
  }
  return cands_.front().id;
}

}  // namespace oxi
