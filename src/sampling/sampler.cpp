#include "sampling/sampler.h"

#include <algorithm>
#include <cmath>
#include <cstring>
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
  for (size_t i = 0; i < c.size(); ++i) total += std::exp(static_cast<double>(c[i].logit) - m);
  // Selection instead of a full sort (a 248k vocabulary with a flat distribution would need most of
  // it sorted): narrow [lo, hi) around the token where the mass crosses p, keeping everything
  // better than it. Expected linear time.
  double need = static_cast<double>(p) * total;
  size_t lo = 0, hi = c.size();
  auto mass = [&](size_t a, size_t b) {
    double s = 0.0;
    for (size_t i = a; i < b; ++i) s += std::exp(static_cast<double>(c[i].logit) - m);
    return s;
  };
  while (hi - lo > 32) {
    const size_t mid = lo + (hi - lo) / 2;
    std::nth_element(c.begin() + static_cast<std::ptrdiff_t>(lo), c.begin() + static_cast<std::ptrdiff_t>(mid),
                     c.begin() + static_cast<std::ptrdiff_t>(hi), better);
    const double upper = mass(lo, mid);  // [lo, mid) is better than everything in [mid, hi)
    if (upper >= need) {
      hi = mid;
    } else {
      need -= upper;
      lo = mid;
    }
  }
  std::sort(c.begin() + static_cast<std::ptrdiff_t>(lo), c.begin() + static_cast<std::ptrdiff_t>(hi), better);
  double cum = 0.0;
  for (size_t i = lo; i < hi; ++i) {
    cum += std::exp(static_cast<double>(c[i].logit) - m);
    if (cum >= need) {
      c.resize(i + 1);
      return;
    }
  }
  c.resize(hi);  // rounding: everything up to hi is the nucleus
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

namespace {

// exp(x - m) for 4 floats x <= m at once (GCC/Clang vector extensions, SSE2/NEON width): x - m = n·ln2 + r, |r| <= ln2/2, a degree-6 polynomial for e^r (Cephes
// coefficients, ~2 ulp) and 2^n built in the exponent bits. Inputs below m - 87, and NaN, give 0.
typedef float v4f __attribute__((vector_size(16)));
typedef int32_t v4i __attribute__((vector_size(16)));

inline v4f exp_shifted4(v4f x, float m) {
  x = x - m;
  const v4i keep = x >= -87.0f;  // all ones where kept; false for NaN
  x = keep ? x : v4f{} - 87.0f;
  const float shifter = 12582912.0f;  // 1.5 · 2^23: adding it rounds to an integer
  const v4f t = x * 1.44269504088896341f + shifter;
  const v4f n = t - shifter;
  v4f r = x - n * 0.693359375f;
  r = r - n * -2.12194440e-4f;
  v4f q = v4f{} + 1.9875691500e-4f;
  q = q * r + 1.3981999507e-3f;
  q = q * r + 8.3334519073e-3f;
  q = q * r + 4.1665795894e-2f;
  q = q * r + 1.6666665459e-1f;
  q = q * r + 5.0000001201e-1f;
  const v4f e = q * r * r + r + 1.0f;
  v4i ni;
  std::memcpy(&ni, &t, sizeof ni);
  const v4i bits = ((ni - 0x4B400000) + 127) << 23;  // n from the shifted float's low bits
  v4f scale;
  std::memcpy(&scale, &bits, sizeof scale);
  v4f out = e * scale;
  v4i ob;
  std::memcpy(&ob, &out, sizeof ob);
  ob &= keep;
  std::memcpy(&out, &ob, sizeof out);
  return out;
}

}  // namespace

double log_sum_exp(std::span<const float> logits) {
  const size_t n = logits.size();
  const float* p = logits.data();
  float mx[8];
  for (size_t j = 0; j < 8; ++j) mx[j] = -std::numeric_limits<float>::infinity();
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    for (size_t j = 0; j < 8; ++j) mx[j] = p[i + j] > mx[j] ? p[i + j] : mx[j];  // NaN never wins
  }
  float m = -std::numeric_limits<float>::infinity();
  for (size_t j = 0; j < 8; ++j) m = mx[j] > m ? mx[j] : m;
  for (size_t k = i; k < n; ++k) m = p[k] > m ? p[k] : m;
  if (!std::isfinite(m)) return m;
  // Float lane sums over blocks of 4096, blocks added in double.
  double total = 0.0;
  for (size_t b = 0; b < n; b += 4096) {
    const size_t e = std::min(n, b + 4096);
    v4f acc = {};
    size_t k = b;
    v4f acc2 = {};
    for (; k + 8 <= e; k += 8) {
      v4f x, y;
      std::memcpy(&x, p + k, sizeof x);
      std::memcpy(&y, p + k + 4, sizeof y);
      acc += exp_shifted4(x, m);
      acc2 += exp_shifted4(y, m);
    }
    for (; k < e; k += 4) {
      v4f x;
      for (size_t j = 0; j < 4; ++j) x[j] = k + j < e ? p[k + j] : -std::numeric_limits<float>::infinity();
      acc += exp_shifted4(x, m);
    }
    acc += acc2;
    for (size_t j = 0; j < 4; ++j) total += acc[j];
  }
  return static_cast<double>(m) + std::log(total);
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

int32_t Sampler::verify(std::span<const float> logits, int32_t draft, bool* accepted) {
  // Sample as plain decoding would, then compare. The emitted token is distributed as p; the
  // draft is kept with probability p(draft), the most any rule can for a one-hot draft (the
  // standard min(1, p/q) rule with q one-hot keeps it with the same probability); and each
  // position takes the same one draw from the generator as in plain decoding, so a seeded run
  // gives the same tokens with and without speculation.
  const int32_t y = sample(logits);
  *accepted = y == draft;
  return y;
}

}  // namespace oxi
