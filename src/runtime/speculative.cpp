#include "runtime/speculative.h"

#include <algorithm>
#include <cmath>

#include "core/error.h"

namespace oxi {

const char* spec_mode_name(SpecMode m) {
  switch (m) {
    case SpecMode::kNone: return "none";
    case SpecMode::kAuto: return "auto";
    case SpecMode::kNgram: return "ngram";
    case SpecMode::kMtp: return "mtp";
    case SpecMode::kDraft: return "draft";
  }
  return "none";
}

SpecMode parse_spec_mode(const std::string& s) {
  for (SpecMode m : {SpecMode::kNone, SpecMode::kAuto, SpecMode::kNgram, SpecMode::kMtp, SpecMode::kDraft}) {
    if (s == spec_mode_name(m)) return m;
  }
  throw_error(ErrorCode::kInvalidArgument, "unknown speculation mode '" + s + "' (auto, none, ngram, mtp, draft)");
}

void NgramDrafter::propose(std::span<const int32_t> h, int32_t k, std::vector<int32_t>& out) {
  out.clear();
  const int64_t H = static_cast<int64_t>(h.size());
  if (k <= 0) return;
  for (int64_t n = std::min<int64_t>(n_max_, H - 1); n >= n_min_; --n) {
    // The suffix h[H-n, H) found earlier at h[j, j+n) with j + n < H (so something follows it);
    // the most recent such occurrence wins (the text being edited or quoted right now).
    const int32_t* suf = h.data() + H - n;
    for (int64_t j = H - n - 1; j >= 0; --j) {
      if (h[static_cast<size_t>(j)] != suf[0] || !std::equal(suf, suf + n, h.data() + j)) continue;
      const int64_t from = j + n, to = std::min<int64_t>(H, from + k);
      out.assign(h.begin() + from, h.begin() + to);
      return;
    }
  }
}

void ReplayDrafter::propose(std::span<const int32_t> h, int32_t k, std::vector<int32_t>& out) {
  out.clear();
  for (size_t j = h.size() - prompt_len_; j < script_.size() && out.size() < static_cast<size_t>(k); ++j) {
    int32_t t = script_[j];
    if (corrupt_ > 0 && j % static_cast<size_t>(corrupt_) == 0) t = static_cast<int32_t>((t + 1) % vocab_);
    out.push_back(t);
  }
}

void DraftTuner::start(const SpecOptions& opt) {
  opt_ = opt;
  acc_ = 1.0;
  rej_ = 1.0;
  since_probe_ = 0;
  failed_probes_ = 0;
  probing_ = false;
  if (t_.size() < static_cast<size_t>(opt.draft_max) + 2) t_.resize(static_cast<size_t>(opt.draft_max) + 2, 0.0);
}

double DraftTuner::acceptance() const { return acc_ / (acc_ + rej_); }

double DraftTuner::cost_ratio(int32_t m) const {
  const auto at = [&](int32_t i) { return static_cast<size_t>(i) < t_.size() ? t_[static_cast<size_t>(i)] : 0.0; };
  if (m <= 1) return 1.0;
  const double prior = 1.0 + 0.3 * (m - 1);
  if (at(1) <= 0.0) return prior;
  if (at(m) > 0.0) return at(m) / at(1);
  // Unmeasured: interpolate from the nearest measured smaller size (costs grow with m).
  for (int32_t i = m - 1; i > 1; --i) {
    if (at(i) > 0.0) return at(i) / at(1) * (1.0 + 0.3 * (m - 1)) / (1.0 + 0.3 * (i - 1));
  }
  return prior;
}

int32_t DraftTuner::choose(int32_t proposed) {
  const int32_t kmax = std::min(proposed, opt_.draft_max);
  if (kmax <= 0 || kmax < opt_.draft_min) return 0;
  if (!opt_.adaptive) return kmax;
  const double a = acceptance();
  const int32_t lo = std::max<int32_t>(1, opt_.draft_min);
  double best = -1.0;  // tokens per t(1); plain decoding makes 1
  int32_t best_k = 0;
  double e = 1.0, ak = 1.0;
  // A draft's own cost in decode steps (t(1) unmeasured: the first verify passes measure it).
  const double draft_ratio = draft_s_ > 0.0 && t_.size() > 1 && t_[1] > 0.0 ? draft_s_ / t_[1] : draft_prior_;
  for (int32_t k = 1; k <= kmax; ++k) {
    ak *= a;
    e += ak;  // E(k) = 1 + a + … + a^k
    const double rate = e / (cost_ratio(k + 1) + k * draft_ratio);
    if (k >= lo && rate > best) {
      best = rate;
      best_k = k;
    }
  }
  probing_ = false;
  if (best_k > 0 && (opt_.draft_min > 0 || best > 1.0)) {
    since_probe_ = 0;
    failed_probes_ = 0;
    return best_k;
  }
  if (++since_probe_ >= kProbeEvery << std::min(failed_probes_, kProbeBackoff)) {
    since_probe_ = 0;
    probing_ = true;
    return 1;
  }
  return 0;
}

void DraftTuner::record_pass(int32_t n_tokens, double seconds) {
  if (n_tokens <= 0 || static_cast<size_t>(n_tokens) >= t_.size() || !(seconds > 0.0)) return;
  double& t = t_[static_cast<size_t>(n_tokens)];
  t = t > 0.0 ? 0.8 * t + 0.2 * seconds : seconds;
}

void DraftTuner::record_draft(int32_t k, double seconds) {
  if (k <= 0 || !(seconds > 0.0)) return;
  const double per = seconds / k;
  draft_s_ = draft_s_ > 0.0 ? 0.8 * draft_s_ + 0.2 * per : per;
}

void DraftTuner::record_verify(int32_t drafted, int32_t accepted) {
  if (drafted <= 0) return;
  // Each verify step is a run of Bernoulli(a) trials stopped by the first rejection: the
  // estimate is accepted / (accepted + rejections), with older steps decayed so that it follows
  // the text (a quoted passage ends, a new one starts).
  constexpr double kDecay = 0.9;
  if (probing_) failed_probes_ = accepted > 0 ? 0 : failed_probes_ + 1;
  acc_ = kDecay * acc_ + accepted;
  rej_ = kDecay * rej_ + (accepted < drafted ? 1.0 : 0.0);
}

}  // namespace oxi
