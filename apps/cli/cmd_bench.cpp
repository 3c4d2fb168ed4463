// oxinfer bench: llama-bench style speed test on the model API (models/model.h), no tokenizer,
// no sampler. Tests (each from a fresh sequence state, r timed repetitions after one warm-up):
//   ppN  prefill N fixed pseudo-random token ids (chunks of 512, logits of the last token only)
//   tgN  N single-token forward passes from an empty state, each fed the argmax of the previous
//        step's logits (the first gets a fixed pseudo-random id), as llama_bench.mjs does
//   tgN xK  with -npl K[,K..] (llama-batched-bench's spelling: number of parallel sequences),
//        instead of ppN / tgN: K sequences, each first prefilled with its own -p fixed
//        pseudo-random ids (not timed), then N decode steps in which ONE Model::forward_batch call
//        carries one token for each of the K sequences, each fed its own previous argmax
//   vK, tgN MODE  speculative decoding (--verify, --spec): apps/cli/bench_spec.h
// With -d D (llama-bench's --n-depth), ppN and tgN start from a state that already holds D fixed
// pseudo-random ids instead of an empty one ("ppN @ dD"): the depth is prefilled once per depth
// (not timed), snapshotted, and restored before each run (not timed), so every run sees the same
// cache; the timed part is the same as at depth 0.
// t/s = N / seconds per repetition (tgN xK: the aggregate K·N / seconds of the decode steps; vK:
// verify steps per second);
// reported as mean ± sample standard deviation (n - 1).
// Output: a markdown table (rows printed as each test ends) or a JSON array (README: CLI
// reference, `oxinfer bench`).
#include <algorithm>
#include <cctype>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <fstream>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "args.h"
#include "backend/backend.h"
#include "bench_spec.h"
#include "commands.h"
#include "core/error.h"
#include "format/model_files.h"
#include "kernels/isa.h"
#include "kernels/matmul.h"
#include "kernels/thread_pool.h"
#include "loader/loaded_model.h"
#include "models/model.h"
#include "nn/device.h"
#include "oxinfer.h"

namespace oxi::cli {

namespace {

const char* kUsage =
    "usage: oxinfer bench (-m MODEL | -hf org/name[:quant]) [-p 512] [-n 128] [-t N] [-r 5]\n"
    "         [-d D[,D..]] [-npl K[,K..]] [-o md|json] [--isa scalar|avx2|avx512|avx512-amx|auto]\n"
    "         [--quant q8_0|q4_0|q4_k] [--verify K[,K..]] [--spec MODE[,MODE..]] [--draft-max N]\n"
    "         [--device D] [-ngl N] [-ctk f16|f32|q8_0] [-ctv f16|f32|q8_0] [--cold-start]\n"
    "\n"
    "  -p, --n-prompt N[,N..]  prefill tests ppN (0 skips; default 512)\n"
    "  -n, --n-gen N[,N..]     generation tests tgN (0 skips; default 128)\n"
    "  -d, --n-depth D[,D..]   run ppN / tgN after D tokens are already in the context ('ppN @ dD';\n"
    "                          default 0); the depth fill is not timed; D + N must fit the model's\n"
    "                          training context\n"
    "  -npl, --n-parallel K[,K..]\n"
    "                          aggregate generation with K concurrent greedy sequences, one\n"
    "                          batched forward per step: tests 'tgN xK' replace ppN / tgN; -p is\n"
    "                          then the prompt per sequence (one value, default 32)\n"
    "  --verify K[,K..]        speculative verify-step cost tests vK: steps of K positions (all\n"
    "                          logits, then truncate to one), -n steps each; v1 is a decode step\n"
    "  --spec MODE[,MODE..]    tgN through the runtime with speculation none|ngram|mtp|draft|auto|\n"
    "                          replay (replay: drafts the known greedy continuation, the 100 %-\n"
    "                          acceptance ceiling; mtp: the model's MTP head; draft: -md's model);\n"
    "                          acceptance in the test column and JSON; --draft-max N (1..32, 16)\n"
    "  -md, --model-draft F    a draft GGUF: Qwen 3.5 an MTP-only file (--spec mtp / auto), Gemma 4\n"
    "                          an assistant drafter (--spec draft / auto)\n"
    "  -t, --threads N         threads (default 0: all hardware threads)\n"
    "  -r, --repetitions R     timed runs per test after one warm-up (default 5)\n"
    "  -o, --output md|json    markdown table (default) or a JSON array, one object per test\n"
    "  --isa NAME              kernel set (default: env OXI_ISA, else the best this CPU runs)\n"
    "  --device D, -ngl N      device as for run (vulkan: the whole model on it unless -ngl 0); the\n"
    "                          JSON's \"device\" names where the pass ran (\"cpu\" or the device)\n"
    "  --list-devices          print the devices --device can name, then exit\n"
    "  --cold-start            first: the cold start to the first token, as a fresh process meets\n"
    "                          it: the tokenizer's load, then 64 pseudo-random ids prefilled and\n"
    "                          one token decoded on a new state before anything else ran (weight\n"
    "                          packing included); JSON fields cold_* on every result\n"
    "  -ctk, -ctv TYPE         KV cache types (f16 default, f32, q8_0; -ctv q8_0 as llama.cpp needs\n"
    "                          flash attention); the JSON's \"type_k\" / \"type_v\" (llama-bench's names)\n"
    "  --quant TYPE            quantise f32/f16/bf16 weights at load (load time includes it; the\n"
    "                          model column shows e.g. 'Q4_0 (at load)', size the quantised bytes)\n";

constexpr int64_t kPrefillChunk = 512;  // tokens per forward() in ppN, as Session's default

using Clock = std::chrono::steady_clock;
double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

// "512" / "128,512" → sizes; UsageError naming the flag on anything else.
std::vector<int64_t> parse_sizes(const std::string& text, const char* flag) {
  std::vector<int64_t> out;
  size_t i = 0;
  while (i <= text.size()) {
    const size_t j = std::min(text.find(',', i), text.size());
    const std::string tok = text.substr(i, j - i);
    char* end = nullptr;
    errno = 0;
    const long long v = std::strtoll(tok.c_str(), &end, 10);
    if (tok.empty() || *end != '\0' || errno != 0 || v < 0 || v > (1 << 20)) {
      usage_error(std::string("invalid value for ") + flag + ": '" + tok + "' (integers 0.." +
                  std::to_string(1 << 20) + ", comma-separated)");
    }
    out.push_back(v);
    i = j + 1;
  }
  return out;
}

// 0.75e9 → "0.8B", 2.1e7 → "21M" (a size label like the ones model names carry).
std::string params_label(uint64_t n) {
  char buf[32];
  if (n >= 100'000'000) {
    std::snprintf(buf, sizeof buf, "%.1fB", n / 1e9);
  } else {
    std::snprintf(buf, sizeof buf, "%.0fM", n / 1e6);
  }
  return buf;
}

// Peak resident set size of this process (VmHWM), or -1 where /proc is absent.
int64_t peak_rss_bytes() {
  std::ifstream f("/proc/self/status");
  std::string line;
  while (std::getline(f, line)) {
    if (line.rfind("VmHWM:", 0) == 0) return std::atoll(line.c_str() + 6) * 1024;
  }
  return -1;
}

struct Test {
  int64_t n_prompt = 0, n_gen = 0;
  int64_t n_depth = 0;     // tokens already in the context before the timed part (ppN / tgN)
  int64_t n_parallel = 0;  // > 0: tgN xK, K sequences decoding together (n_prompt: per sequence)
  int64_t verify = 0;      // > 0: vK (n_gen steps)
  std::string spec;        // not empty: tgN through the runtime with this speculation mode
  std::string name() const {
    if (verify > 0) return "v" + std::to_string(verify);
    if (!spec.empty()) return "tg" + std::to_string(n_gen) + " " + spec;
    if (n_parallel > 0) return "tg" + std::to_string(n_gen) + " x" + std::to_string(n_parallel);
    const std::string base = n_prompt > 0 ? "pp" + std::to_string(n_prompt) : "tg" + std::to_string(n_gen);
    return n_depth > 0 ? base + " @ d" + std::to_string(n_depth) : base;  // llama-bench's spelling
  }
};

// tgN xK: K sequences (their own states), prompts prefilled one sequence at a time, then decode
// steps of one Model::forward_batch call with one token per sequence (entry i = sequence i).
class ParallelRunner {
 public:
  ParallelRunner(const Model& model, int64_t n_parallel, int64_t n_ctx) : model_(model) {
    const auto k = static_cast<size_t>(n_parallel);
    for (size_t i = 0; i < k; ++i) {
      owned_.push_back(model.new_state(n_ctx));
      states_.push_back(owned_.back().get());
    }
    tokens_.resize(k);
    seq_.resize(k);
    for (size_t i = 0; i < k; ++i) seq_[i] = static_cast<int32_t>(i);
    logits_.resize(k * static_cast<size_t>(model.info().n_vocab));
  }

  // One timed run: prefill (not timed), then `n` decode steps; returns seconds of the steps.
  double run(int64_t n_prompt, int64_t n) {
    const int64_t n_vocab = model_.info().n_vocab;
    const size_t k = states_.size();
    for (size_t i = 0; i < k; ++i) {
      states_[i]->clear();
      const std::vector<int32_t> ids = token_ids(n_prompt, n_vocab, 1000 + i);  // per stream
      Batch b;  // one sequence (seq: all 0), cache positions, logits of the last entry
      b.n = static_cast<int64_t>(ids.size());
      b.token = ids.data();
      BatchOutput out;
      out.logits = logits_.data() + i * static_cast<size_t>(n_vocab);
      SequenceState* one[1] = {states_[i]};
      forward(std::span<SequenceState* const>(one, 1), b, out);
    }
    argmax_all();
    const auto t0 = Clock::now();
    for (int64_t step = 0; step < n; ++step) {
      Batch b;  // entry i: sequence i's next token at its cache position
      b.n = static_cast<int64_t>(k);
      b.token = tokens_.data();
      b.seq = seq_.data();
      BatchOutput out;
      out.logits = logits_.data();  // output == nullptr: the last (only) entry of each sequence
      forward(std::span<SequenceState* const>(states_), b, out);
      argmax_all();
    }
    return seconds_since(t0);
  }

 private:
  void forward(std::span<SequenceState* const> states, const Batch& b, const BatchOutput& out) const {
    model_.forward_batch(states, b, out);
  }

  void argmax_all() {
    const auto n_vocab = static_cast<size_t>(model_.info().n_vocab);
    for (size_t i = 0; i < tokens_.size(); ++i) {
      const float* row = logits_.data() + i * n_vocab;
      tokens_[i] = static_cast<int32_t>(std::max_element(row, row + n_vocab) - row);
    }
  }

  const Model& model_;
  std::vector<std::unique_ptr<SequenceState>> owned_;
  std::vector<SequenceState*> states_;
  std::vector<int32_t> tokens_, seq_;
  std::vector<float> logits_;
};

class Runner {
 public:
  Runner(const Model& model, int64_t n_ctx)
      : model_(model), state_(model.new_state(n_ctx)), logits_(static_cast<size_t>(model.info().n_vocab)) {}

  // One timed run of `t` from an empty state (or one holding t.n_depth ids); returns seconds.
  double run(const Test& t, int64_t n) {
    to_depth(t.n_depth);
    state_->reserve(t.n_depth + n + 1);  // the timed part does not grow the cache
    const int64_t n_vocab = model_.info().n_vocab;
    if (t.n_prompt > 0) {
      const std::vector<int32_t> ids = token_ids(n, n_vocab, 42);
      const auto t0 = Clock::now();
      prefill(ids);
      return seconds_since(t0);
    }
    int32_t tok = token_ids(1, n_vocab, 7)[0];
    const auto t0 = Clock::now();
    for (int64_t i = 0; i < n; ++i) {
      model_.forward(*state_, std::span<const int32_t>(&tok, 1), logits_.data(), false);
      tok = static_cast<int32_t>(std::max_element(logits_.begin(), logits_.end()) - logits_.begin());
    }
    return seconds_since(t0);
  }

 private:
  void prefill(const std::vector<int32_t>& ids) {
    const auto n = static_cast<int64_t>(ids.size());
    for (int64_t i = 0; i < n; i += kPrefillChunk) {
      const size_t len = static_cast<size_t>(std::min(kPrefillChunk, n - i));
      model_.forward(*state_, std::span<const int32_t>(ids.data() + i, len), logits_.data(), false);
    }
  }

  // State with d fixed ids consumed (d = 0: empty). The first visit of a depth prefills it and
  // keeps a snapshot; later visits restore the snapshot (a state without snapshots prefills again).
  // Restoring over the previous run's state keeps that run's cache capacity, so the timed part
  // does not pay for growing the cache back.
  void to_depth(int64_t d) {
    if (d == 0) {
      state_->clear();
      return;
    }
    if (d == snap_depth_ && !snap_.empty()) {
      state_->restore(snap_);
      return;
    }
    state_->clear();
    prefill(token_ids(d, model_.info().n_vocab, 4242));
    snap_depth_ = d;
    try {
      snap_ = state_->snapshot();
    } catch (const Error&) {
      snap_.clear();  // (device states may not snapshot)
    }
  }

  const Model& model_;
  std::unique_ptr<SequenceState> state_;
  std::vector<float> logits_;
  int64_t snap_depth_ = -1;
  std::vector<uint8_t> snap_;
};

struct Stats {
  double avg = 0, sd = 0;
};
Stats stats(const std::vector<double>& v) {
  Stats s;
  for (double x : v) s.avg += x;
  s.avg /= static_cast<double>(v.size());
  if (v.size() > 1) {
    double ss = 0;
    for (double x : v) ss += (x - s.avg) * (x - s.avg);
    s.sd = std::sqrt(ss / static_cast<double>(v.size() - 1));
  }
  return s;
}

std::string utc_now() {
  const std::time_t t = std::time(nullptr);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&t));
  return buf;
}

}  // namespace

int cmd_bench(int argc, char** argv) {
  try {
    Args args(argc - 1, argv + 1, {"-h", "--help", "--offline", "--list-devices", "--cold-start"});
    if (args.flag({"-h", "--help"})) {
      std::fputs(kUsage, stdout);
      return 0;
    }
    if (list_devices_if_asked(args)) return 0;
    args.check_known({"-m", "--model", "-hf", "--hf-repo", "--hf-token", "-p", "--n-prompt", "-n", "-d", "--n-depth",
                      "--n-gen", "-t", "--threads", "-r", "--repetitions", "-o", "--output", "--isa", "--quant",
                      "-npl", "--n-parallel", "--verify", "--spec", "--draft-max", "-md", "--model-draft", "-hfd", "--hf-repo-draft", "--device", "-ngl", "--n-gpu-layers",
                      "--gpu-layers", "-ctk", "--cache-type-k", "-ctv", "--cache-type-v", "--cold-start"});
    if (!args.positional().empty()) usage_error("unexpected argument '" + args.positional()[0] + "'");
    const bool parallel = args.has("-npl") || args.has("--n-parallel");
    const bool cold = args.flag({"--cold-start"});
    const auto pp = parse_sizes(args.get_or({"-p", "--n-prompt"}, parallel ? "32" : "512"), "-p");
    const auto tg = parse_sizes(args.get_or({"-n", "--n-gen"}, "128"), "-n");
    const bool depth_given = args.has("-d") || args.has("--n-depth");
    const auto depths = parse_sizes(args.get_or({"-d", "--n-depth"}, "0"), "-d");
    const long long reps = args.get_int({"-r", "--repetitions"}, 5);
    if (reps < 1 || reps > 1000) usage_error("invalid value for -r (1..1000)");
    const long long threads = args.get_int({"-t", "--threads"}, 0);
    if (threads < 0 || threads > 1024) usage_error("invalid value for -t (0..1024)");
    const std::string out = args.get_or({"-o", "--output"}, "md");
    if (out != "md" && out != "json") usage_error("invalid value for -o: '" + out + "' (md or json)");
    std::vector<Test> tests;
    const auto verify = parse_sizes(args.get_or({"--verify"}, "0"), "--verify");
    std::vector<std::string> spec_modes;
    if (const auto sm = args.get({"--spec"})) {
      for (size_t i = 0; i <= sm->size();) {
        const size_t j = std::min(sm->find(',', i), sm->size());
        const std::string m = sm->substr(i, j - i);
        if (m != "none" && m != "ngram" && m != "replay" && m != "auto" && m != "mtp" && m != "draft")
          usage_error("invalid value for --spec: '" + m + "' (none, ngram, mtp, draft, auto, replay)");
        spec_modes.push_back(m);
        i = j + 1;
      }
    }
    const long long draft_max = args.get_int({"--draft-max"}, 16);
    if (draft_max < 1 || draft_max > 32) usage_error("invalid value for --draft-max (1..32)");
    const bool spec_tests = args.has("--verify") || !spec_modes.empty();
    if (depth_given && (spec_tests || parallel)) usage_error("-d applies to ppN / tgN tests; it does not combine with -npl, --verify or --spec");
    if (spec_tests) {
      if (parallel) usage_error("--verify / --spec do not combine with -npl");
      for (int64_t k : verify) {
        if (k > 33) usage_error("invalid value for --verify: " + std::to_string(k) + " (1..33)");
        for (int64_t n : tg) if (k > 0 && n > 0) tests.push_back({0, n, 0, 0, k, ""});
      }
      for (const auto& m : spec_modes) {
        for (int64_t n : tg) if (n > 0) tests.push_back({0, n, 0, 0, 0, m});
      }
      if (tests.empty()) usage_error("nothing to run: every -n size is 0");
    } else if (parallel) {
      const auto npl = parse_sizes(args.get_or({"-npl", "--n-parallel"}, ""), "-npl");
      if (pp.size() != 1 || pp[0] < 1) usage_error("with -npl, -p is one prompt length per sequence (>= 1)");
      for (int64_t k : npl) {
        if (k < 1 || k > 256) usage_error("invalid value for -npl: " + std::to_string(k) + " (1..256)");
      }
      for (int64_t n : tg) {
        if (n > 0) for (int64_t k : npl) tests.push_back({pp[0], n, 0, k, 0, ""});
      }
      if (tests.empty()) usage_error("nothing to run: every -n size is 0");
    } else {
      // llama-bench's order: for each depth, its pp tests then its tg tests.
      for (int64_t d : depths) {
        for (int64_t n : pp) if (n > 0) tests.push_back({n, 0, d, 0, 0, ""});
        for (int64_t n : tg) if (n > 0) tests.push_back({0, n, d, 0, 0, ""});
      }
      if (tests.empty()) usage_error("nothing to run: every -p and -n size is 0");
    }
    const ModelPaths paths = model_paths_from_args(args, false);
    const std::string& path = paths.model;

    apply_isa_from_args(args);
    // Threads, device (OXI_DEVICE, docs/backends.md) and weights; no tokenizer.
    LoadRequest req;
    req.path = path;
    req.options.n_threads = static_cast<int>(threads);
    req.options.quant = quant_from_args(args);
    const auto [ctk, ctv] = cache_types_from_args(args);
    if (!ctk.empty()) nn::parse_kv_type(ctk, &req.options.cache_type_k);
    if (!ctv.empty()) nn::parse_kv_type(ctv, &req.options.cache_type_v);
    req.tokenizer = false;
    req.device = args.get_or({"--device"}, "");  // "": env OXI_DEVICE, else auto
    req.gpu_layers = gpu_layers_from_args(args);
    req.draft_path = paths.draft;
    const std::unique_ptr<LoadedModel> loaded = load_model_bundle(req);
    const ModelFiles& files = loaded->files;
    const LoadOptions& lo = req.options;
    const std::unique_ptr<Model>& model = loaded->model;
    const double load_ms = loaded->load_seconds * 1e3;
    log_kernels(req.gpu_layers);
    // Where the pass runs: "cpu", or the block device that holds the whole model.
    const std::shared_ptr<nn::Device> block_dev = req.gpu_layers != 0 ? backend::active_block_device() : nullptr;
    const std::string device = block_dev ? block_dev->name() : "cpu";

    // Weight types this kernel set has no kernel for (matmul dequantises their rows to f32 first):
    // named on stderr and in the JSON, so a slow number is not taken for the kernels' speed.
    std::map<DType, std::pair<int, uint64_t>> deq_types;
    for (const auto& [name, t] : files.tensors().all()) {
      if (t.shape.size() < 2 || std::string(matmul_path(t.dtype)) != "dequantise") continue;
      deq_types[t.dtype].first += 1;
      deq_types[t.dtype].second += t.nbytes;
    }
    nlohmann::ordered_json deq_json = nlohmann::ordered_json::array();
    for (const auto& [dt, nb] : deq_types) {
      std::fprintf(stderr, "bench: %s: %d tensors (%.1f MiB) have no %s kernel: dequantised to f32 (slower)\n",
                   dtype_name(dt).c_str(), nb.first, nb.second / 1048576.0, isa_name());
      deq_json.push_back(dtype_name(dt));
    }

    const ModelInfo& info = model->info();
    uint64_t size = info.weight_bytes;
    if (size == 0) {
      for (const auto& [name, t] : files.tensors().all()) size += t.nbytes;
    }
    std::string wtype = files.file_type();
    if (!lo.quant.empty()) {
      wtype = lo.quant;
      for (char& ch : wtype) ch = static_cast<char>(std::toupper(static_cast<unsigned char>(ch)));
      wtype += " (at load)";
    }
    const std::string type = info.arch + " " + params_label(info.n_params) + " " + wtype;
    int64_t n_ctx = 0;
    for (const Test& t : tests) {
      n_ctx = std::max(n_ctx, t.n_depth + t.n_prompt + t.n_gen * std::max<int64_t>(1, t.verify) + 64);
      // A depth test must fit the context the model was trained for (llama-bench's n_ctx is the
      // sum too; past n_ctx_train RoPE positions are out of the trained range).
      if (t.n_depth > 0 && info.n_ctx_train > 0 && t.n_depth + t.n_prompt + t.n_gen > info.n_ctx_train) {
        throw_error(ErrorCode::kInvalidArgument, "bench: " + t.name() + " needs " +
                                                     std::to_string(t.n_depth + t.n_prompt + t.n_gen) +
                                                     " tokens of context, more than the model's " +
                                                     std::to_string(info.n_ctx_train) + " (n_ctx_train)");
      }
    }
    std::unique_ptr<Runner> runner;  // single-sequence tests; tgN xK build their states per test
    if (!parallel) runner = std::make_unique<Runner>(*model, n_ctx);
    std::unique_ptr<SequenceState> vstate;  // vK: rollback room for K - 1 dropped tokens
    std::unique_ptr<SpecBench> spec_bench;
    if (spec_tests) {
      vstate = model->new_state(n_ctx, 34);
      spec_bench = std::make_unique<SpecBench>(*model, n_ctx, static_cast<int32_t>(draft_max));
    }
    const std::string isa = isa_name();
    const int n_threads = num_threads();
    std::fprintf(stderr, "bench: %s, load %.0f ms\n", type.c_str(), load_ms);

    // --cold-start, before any test or warm-up touched the weights: what a fresh `run` or `serve`
    // pays before its first token beyond load_ms — the tokenizer (run and serve load it; bench's
    // load does not), a new state, a 64-token prompt in one chunk and one decode step, with every
    // one-time cost on the way (the decode kernels' weight packing, first-touch page faults).
    // scripts/bench/llama_cbench.c measures the same steps in llama.cpp (docs/benchmarks.md).
    constexpr int64_t kColdPrompt = 64;
    double cold_tok_ms = 0.0, cold_first_ms = 0.0;
    if (cold) {
      auto c0 = Clock::now();
      const TokenizerPtr tok = load_tokenizer(files);
      if (!tok) throw_error(ErrorCode::kFormat, path + ": no tokenizer (--cold-start loads it as run does)");
      cold_tok_ms = seconds_since(c0) * 1e3;
      c0 = Clock::now();
      std::unique_ptr<SequenceState> st = model->new_state(kColdPrompt + 2);
      std::vector<float> lg(static_cast<size_t>(info.n_vocab));
      const std::vector<int32_t> ids = token_ids(kColdPrompt, info.n_vocab, 99);
      model->forward(*st, ids, lg.data(), false);
      const auto next = static_cast<int32_t>(std::max_element(lg.begin(), lg.end()) - lg.begin());
      model->forward(*st, std::span<const int32_t>(&next, 1), lg.data(), false);
      cold_first_ms = seconds_since(c0) * 1e3;
      std::fprintf(stderr, "bench: cold start to the first token %.0f ms (load %.0f + tokenizer %.0f + pp%lld and one token %.0f)\n",
                   load_ms + cold_tok_ms + cold_first_ms, load_ms, cold_tok_ms, static_cast<long long>(kColdPrompt),
                   cold_first_ms);
    }

    if (out == "md") {
      std::printf("| %-30s | %10s | %8s | %-10s | %7s | %10s | %20s |\n", "model", "size", "params", "isa",
                  "threads", "test", "t/s");
      std::printf("| %s | %s: | %s: | %s | %s: | %s: | %s: |\n", std::string(30, '-').c_str(),
                  std::string(9, '-').c_str(), std::string(7, '-').c_str(), std::string(10, '-').c_str(),
                  std::string(6, '-').c_str(), std::string(9, '-').c_str(), std::string(19, '-').c_str());
      std::fflush(stdout);
    }
    nlohmann::ordered_json results = nlohmann::ordered_json::array();
    const std::string when = utc_now();
    for (const Test& t : tests) {
      std::vector<double> ts, ns;
      SpecRun acc;  // tgN MODE: drafts of the timed runs
      if (t.verify > 0) {
        bench_verify_steps(*model, *vstate, t.verify, std::min<int64_t>(t.n_gen, 8));  // warm-up
        for (long long r = 0; r < reps; ++r) {
          const double s = bench_verify_steps(*model, *vstate, t.verify, t.n_gen);
          ts.push_back(static_cast<double>(t.n_gen) / s);
          ns.push_back(s * 1e9);
        }
      } else if (!t.spec.empty()) {
        spec_bench->run(t.spec, std::min<int64_t>(t.n_gen, 8));  // warm-up
        for (long long r = 0; r < reps; ++r) {
          const SpecRun sr = spec_bench->run(t.spec, t.n_gen);
          ts.push_back(static_cast<double>(t.n_gen) / sr.seconds);
          ns.push_back(sr.seconds * 1e9);
          acc.drafted += sr.drafted;
          acc.accepted += sr.accepted;
        }
      } else if (t.n_parallel > 0) {
        ParallelRunner pr(*model, t.n_parallel, t.n_prompt + t.n_gen + 1);
        pr.run(t.n_prompt, std::min<int64_t>(t.n_gen, 8));  // warm-up
        for (long long r = 0; r < reps; ++r) {
          const double s = pr.run(t.n_prompt, t.n_gen);
          ts.push_back(static_cast<double>(t.n_parallel * t.n_gen) / s);
          ns.push_back(s * 1e9);
        }
      } else {
        const int64_t n = t.n_prompt > 0 ? t.n_prompt : t.n_gen;
        runner->run(t, t.n_prompt > 0 ? n : std::min<int64_t>(n, 8));  // warm-up
        for (long long r = 0; r < reps; ++r) {
          const double s = runner->run(t, n);
          ts.push_back(static_cast<double>(n) / s);
          ns.push_back(s * 1e9);
        }
      }
      const Stats st = stats(ts), sn = stats(ns);
      if (out == "md") {
        char tps[64];
        std::snprintf(tps, sizeof tps, "%.2f ± %.2f", st.avg, st.sd);
        // "±" is two bytes but one column: pad by hand.
        const std::string cell = std::string(std::max<int>(0, 21 - static_cast<int>(std::strlen(tps))), ' ') + tps;
        std::printf("| %-30s | %6.2f GiB | %6.2f B | %-10s | %7d | %10s | %s |\n", type.c_str(),
                    size / 1073741824.0, info.n_params / 1e9, isa.c_str(), n_threads, t.name().c_str(), cell.c_str());
        if (acc.drafted > 0) {
          std::fprintf(stderr, "bench: %s: %d of %d drafts accepted (%.1f %%)\n", t.name().c_str(), acc.accepted,
                       acc.drafted, 100.0 * acc.accepted / acc.drafted);
        }
        std::fflush(stdout);
      }
      nlohmann::ordered_json j;
      j["model_filename"] = path;
      j["model_type"] = type;
      j["model_size"] = size;
      j["model_n_params"] = info.n_params;
      j["arch"] = info.arch;
      j["isa"] = isa;
      j["device"] = device;
      j["dequantised_types"] = deq_json;
      j["n_threads"] = n_threads;
      j["n_prompt"] = t.n_prompt;
      j["n_gen"] = t.n_gen;
      j["n_depth"] = t.n_depth;
      j["type_k"] = nn::kv_type_name(lo.cache_type_k);
      j["type_v"] = nn::kv_type_name(lo.cache_type_v);
      j["n_parallel"] = t.n_parallel > 0 ? t.n_parallel : 1;
      j["test"] = t.name();
      if (t.verify > 0) j["n_verify"] = t.verify;
      if (!t.spec.empty()) {
        j["spec"] = t.spec;
        j["n_drafted"] = acc.drafted;
        j["n_accepted"] = acc.accepted;
      }
      j["n_reps"] = reps;
      j["avg_ts"] = st.avg;
      j["stddev_ts"] = st.sd;
      j["samples_ts"] = ts;
      j["avg_ns"] = std::llround(sn.avg);
      std::vector<int64_t> ns_int;
      for (double x : ns) ns_int.push_back(std::llround(x));
      j["samples_ns"] = ns_int;
      j["load_ms"] = load_ms;
      if (cold) {
        j["cold_tokenizer_ms"] = cold_tok_ms;
        j["cold_prompt"] = kColdPrompt;
        j["cold_first_ms"] = cold_first_ms;  // new state + pp64 + one token, the first work after load
        j["cold_first_token_ms"] = load_ms + cold_tok_ms + cold_first_ms;
      }
      j["test_time"] = when;
      j["oxinfer_version"] = oxi_version();
      results.push_back(std::move(j));
    }
    const int64_t rss = peak_rss_bytes();
    for (auto& j : results) j["peak_rss_bytes"] = rss >= 0 ? nlohmann::ordered_json(rss) : nlohmann::ordered_json(nullptr);
    if (out == "json") {
      const std::string s = results.dump(2);
      std::fwrite(s.data(), 1, s.size(), stdout);
      std::fputc('\n', stdout);
    } else {
      std::fprintf(stderr, "bench: peak RSS %.1f MiB\n", rss / 1048576.0);
    }
    return 0;
  } catch (const std::exception& e) {
    std::fflush(stdout);
    return report_error(e);
  }
}

}  // namespace oxi::cli
