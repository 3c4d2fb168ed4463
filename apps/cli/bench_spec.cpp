#include "bench_spec.h"

#include <algorithm>
#include <chrono>
#include <cstdlib>

#include "core/error.h"
#include "runtime/session.h"

namespace oxi::cli {

namespace {

using Clock = std::chrono::steady_clock;

// Every id samplable, none ends the generation, no text: the bench compares ids and speed only.
class IdsOnly : public TokenText {
 public:
  explicit IdsOnly(int64_t n) : n_(n) {}
  int64_t vocab_size() const override { return n_; }
  bool is_eog(int32_t) const override { return false; }
  std::unique_ptr<TextStream> new_stream() const override {
    return std::make_unique<Utf8TextStream>([](int32_t) { return std::string(); });
  }

 private:
  int64_t n_;
};

}  // namespace

std::vector<int32_t> token_ids(int64_t n, int64_t n_vocab, uint64_t seed) {
  std::vector<int32_t> ids(static_cast<size_t>(n));
  uint64_t x = seed;
  for (auto& id : ids) {
    x = x * 6364136223846793005ull + 1442695040888963407ull;
    id = static_cast<int32_t>((x >> 33) % static_cast<uint64_t>(n_vocab));
  }
  return ids;
}

double bench_verify_steps(const Model& model, SequenceState& state, int64_t k, int64_t n) {
  const int64_t V = model.info().n_vocab;
  state.clear();
  std::vector<float> logits(static_cast<size_t>(V * std::max<int64_t>(k, 64)));
  model.forward(state, token_ids(64, V, 11), logits.data(), false);
  const std::vector<int32_t> toks = token_ids(k, V, 5);
  const auto t0 = Clock::now();
  for (int64_t i = 0; i < n; ++i) {
    model.forward(state, toks, logits.data(), true);
    if (k > 1 && !std::getenv("OXI_BENCH_KEEP")) state.truncate(state.n_past() - (k - 1));
  }
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

struct SpecBench::Impl {
  const Model& model;
  IdsOnly text;
  Session session;
  int32_t draft_max;
  std::vector<int32_t> prompt;
  std::vector<int32_t> script;  // the plain greedy continuation (for replay)

  Impl(const Model& m, int64_t n_ctx, int32_t dmax)
      : model(m), text(m.info().n_vocab), session(m, text, n_ctx, nullptr, dmax), draft_max(dmax),
        prompt(token_ids(32, m.info().n_vocab, 3)) {}

  GenerateResult generate(SpecMode mode, int64_t n, Drafter* d) {
    GenerateOptions o;
    o.max_tokens = static_cast<int32_t>(n);
    o.spec.mode = mode;
    o.spec.draft_max = draft_max;
    o.spec.drafter = d;
    session.reset();
    return session.generate(prompt, o, nullptr);
  }
};

SpecBench::SpecBench(const Model& model, int64_t n_ctx, int32_t draft_max)
    : impl_(std::make_unique<Impl>(model, n_ctx, draft_max)) {}
SpecBench::~SpecBench() = default;

SpecRun SpecBench::run(const std::string& mode, int64_t n_gen) {
  Impl& m = *impl_;
  GenerateResult r;
  if (mode == "replay") {
    if (static_cast<int64_t>(m.script.size()) < n_gen) m.script = m.generate(SpecMode::kNone, n_gen, nullptr).generated;
    ReplayDrafter d(m.script, m.prompt.size());
    r = m.generate(SpecMode::kAuto, n_gen, &d);
    if (std::vector<int32_t>(m.script.begin(), m.script.begin() + n_gen) != r.generated) {
      size_t i = 0;
      while (i < r.generated.size() && r.generated[i] == m.script[i]) ++i;
      throw_error(ErrorCode::kInternal, "bench: speculative output differs from the plain greedy run at token " +
                                            std::to_string(i) + " of " + std::to_string(r.generated.size()) +
                                            " (drafted " + std::to_string(r.n_drafted) + ", accepted " +
                                            std::to_string(r.n_accepted) + ")");
    }
  } else {
    r = m.generate(parse_spec_mode(mode), n_gen, nullptr);
  }
  return SpecRun{r.gen_seconds, r.n_drafted, r.n_accepted};
}

}  // namespace oxi::cli
