// oxinfer run: one prompt in, generated text out (streamed), or one JSON object per token with
// --json. Built on the C API (include/oxinfer.h) like every other front end.
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <csignal>
#include <random>
#include <cstdio>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "args.h"
#include "commands.h"
#include "core/byte_source.h"
#include "core/error.h"
#include "loader/loaded_model.h"
#include "api/api_internal.h"
#include "oxinfer.h"
#include "run_media.h"
#include "run_progress.h"

namespace oxi::cli {

namespace {

const char* kUsage =
    "usage: oxinfer run (-m MODEL | -hf org/name[:quant]) [-p TEXT | -f FILE | --tokens 1,2,3]\n"
    "         [-n N] [--temp T] [--seed S] [--top-k K] [--top-p P] [--min-p P]\n"
    "         [--repeat-penalty R] [--repeat-last-n N] [--presence-penalty P]\n"
    "         [--frequency-penalty F] [-t THREADS] [-c CTX] [--no-chat] [--json]\n"
    "         [--top-logprobs K] [--chat-template-file F | --chat-template NAME] [--system S] [--no-think]\n"
    "         [--ignore-eos] [--isa scalar|avx2|avx512|avx512-amx|auto] [--device none|auto|NAME]\n"
    "         [--quant q8_0|q4_0|q4_k] [--spec auto|none|ngram|mtp|draft] [--draft-max N]\n"
    "         [--draft-min N] [--mmproj FILE --image FILE --audio FILE ...] [--progress | --no-progress]\n"
    "         [--grammar GBNF | --grammar-file FILE]\n"
    "\n"
    "  -p TEXT           prompt; wrapped in the model's chat template (a user message, generation\n"
    "                    prompt added) unless --no-chat\n"
    "  -f FILE           read the prompt from a file (-f -: from stdin); one trailing newline is\n"
    "                    dropped, as llama.cpp does\n"
    "  (no prompt)       an interactive chat, as oxinfer chat (and ollama run) with the same\n"
    "                    model and options (--image / --audio: attached to its first message)\n"
    "  --tokens IDS      prompt token ids, used exactly (no BOS, no template)\n"
    "  -n N              tokens to generate (default -1: until end of generation / context full)\n"
    "  -c CTX            context size (default 4096; 0: the model's training context)\n"
    "  --temp T          temperature; 0 is greedy (argmax). Sampling defaults come from the\n"
    "                    model (generation_config.json / GGUF general.sampling.*), else llama.cpp's\n"
    "  --json            stdout: one JSON object per generated token\n"
    "                    {\"id\",\"text\",\"logprob\",\"top_logprobs\":[{\"id\",\"logprob\"}]}, then\n"
    "                    {\"prompt_ids\":[...],\"timings\":{\"prompt_tok_s\",\"gen_tok_s\"}}; the same with\n"
    "                    --image / --audio (media rows in prompt_ids: negative ids from the file's hash)\n"
    "  --top-logprobs K  alternatives per token in --json (0..20; log-softmax of raw logits)\n"
    "  --system S        system message (chat template only)\n"
    "  --no-think        render the template with enable_thinking=false\n"
    "  --special-in-content  special-token text in -p/--system (\"<|im_end|>\") becomes control\n"
    "                    tokens (unsafe; by default it stays text and only the template's markup\n"
    "                    is special)\n"
    "  --ignore-eos      keep generating past end-of-generation tokens\n"
    "  --progress        a progress line on stderr (tokens done / total, tok/s) for prefills over ~2 s;\n"
    "                    the default when stderr is a terminal (--no-progress: never)\n"
    "  --grammar GBNF    constrain the output to a GBNF grammar (llama.cpp's syntax, rule root);\n"
    "                    with a chat template the reasoning block is off (as --no-think)\n"
    "  --grammar-file F  the same, read from a file (e.g. llama.cpp's grammars/json.gbnf); both\n"
    "                    also with --image / --audio\n"
    "  --spec MODE       speculative decoding (default auto: drafts from the model's MTP head where\n"
    "                    it has one, else prompt lookup, verified in one pass, used only while they\n"
    "                    pay; greedy output is unchanged); none: off; ngram: prompt lookup; mtp:\n"
    "                    the MTP head (Qwen 3.5/3.6 files that carry one, or -md); draft: the\n"
    "                    draft model of -md (Gemma 4's assistant drafter)\n"
    "  -md, --model-draft FILE  Qwen 3.5/3.6: an MTP-only GGUF (llama.cpp's convert --mtp, our\n"
    "                    convert --mtp) whose head drafts for --spec mtp / auto; Gemma 4: an\n"
    "                    assistant drafter (its GGUF or its HF checkpoint directory) for\n"
    "                    --spec draft / auto; -hfd org/name[:quant] takes it from the Hub\n"
    "  --draft-max N     most drafts per verify step (0..16, default 16); --draft-min N fewest\n"
    "  --image FILE      an image (PNG, JPEG, WebP, GIF, BMP; repeatable): placed at the prompt's\n"
    "                    <__media__> markers in order, else before the prompt text (as\n"
    "                    llama-mtmd-cli); needs --mmproj (Qwen 3.5: the qwen3vl_merger tower;\n"
    "                    Gemma 4: gemma4v) unless -m is an HF checkpoint with its vision tower\n"
    "  --audio FILE      Gemma 4 (E2B/E4B): an audio clip (WAV, FLAC, Ogg, MP3; repeatable; any rate,\n"
    "                    mixed to mono and resampled to 16 kHz), placed at the next <__media__> marker\n"
    "                    in command-line order with the images (as llama-mtmd-cli); needs --mmproj\n"
    "                    with a gemma4a tower unless -m is an HF checkpoint with its audio tower\n"
    "  --mmproj FILE     the model's vision/audio towers, as llama.cpp's mmproj GGUF (with -hf and --image:\n"
    "                    the repo's mmproj file unless --no-mmproj, as llama.cpp picks it)\n"
    "  --image-preproc M Qwen 3.5: hf (default: the HF image processor's resize) or llama (llama.cpp\n"
    "                    mtmd's); Gemma 4 always resizes as llama.cpp (70..1120 soft tokens)\n"
    "  --isa NAME        kernel set (default: env OXI_ISA, else the best this CPU runs)\n"
    "  --device D        device backend: none (= cpu), auto (default; env OXI_DEVICE), vulkan,\n"
    "                    vulkan:N (the N-th device --list-devices shows) or cpu-ref (a test backend)\n"
    "  --list-devices    print the devices --device can name, then exit\n";

// -f FILE / -f - (stdin): the prompt text without its one trailing newline (llama.cpp's -f).
std::string read_prompt_file(const std::string& path) {
  std::string text;
  if (path == "-") {
    char buf[65536];
    for (size_t n; (n = std::fread(buf, 1, sizeof(buf), stdin)) > 0;) {
      text.append(buf, n);
      if (text.size() > (256u << 20)) usage_error("-f -: the prompt on stdin is larger than 256 MiB");
    }
    if (std::ferror(stdin)) throw_error(ErrorCode::kIo, "-f -: cannot read stdin");
  } else {
    text = read_text_file(path);
  }
  if (!text.empty() && text.back() == '\n') text.pop_back();
  if (!text.empty() && text.back() == '\r') text.pop_back();
  return text;
}

// Options of run that need a prompt: without one, run is `oxinfer chat`, which has none of them.
// (--image / --audio without a prompt go with the chat's first message.)
const char* const kPromptOnlyOptions[] = {"--no-chat", "--json", "--top-logprobs", "--ignore-eos", "--grammar",
                                          "--grammar-file"};

volatile int g_cancel = 0;
extern "C" void oxi_run_on_sigint(int) { g_cancel = 1; }

struct RunState {
  bool json = false;
  std::string text_so_far;
};

double rate(int32_t n, double seconds) { return seconds > 0.0 && n > 0 ? n / seconds : 0.0; }

// Floats are printed exactly (nlohmann writes the shortest text that round-trips).
int on_token(const oxi_token_event* ev, void* user) {
  auto* st = static_cast<RunState*>(user);
  if (st->json) {
    nlohmann::ordered_json j;
    j["id"] = ev->id;
    j["text"] = std::string(ev->text, ev->text_len);
    j["logprob"] = std::isfinite(ev->logprob) ? nlohmann::ordered_json(ev->logprob)
                                              : nlohmann::ordered_json(nullptr);
    nlohmann::ordered_json top = nlohmann::ordered_json::array();
    for (int32_t i = 0; i < ev->n_top; ++i) {
      nlohmann::ordered_json t;
      t["id"] = ev->top_ids[i];
      t["logprob"] = std::isfinite(ev->top_logprobs[i]) ? nlohmann::ordered_json(ev->top_logprobs[i])
                                                        : nlohmann::ordered_json(nullptr);
      top.push_back(std::move(t));
    }
    j["top_logprobs"] = std::move(top);
    const std::string line = j.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace);
    std::fwrite(line.data(), 1, line.size(), stdout);
    std::fputc('\n', stdout);
  } else if (ev->text_len > 0) {
    std::fwrite(ev->text, 1, ev->text_len, stdout);
    st->text_so_far.append(ev->text, ev->text_len);
  }
  std::fflush(stdout);
  return 0;
}

// After the last token, both paths: --json's closing object (prompt ids: media rows as their
// negative content-hash ids) or the newline the text lacks, then the stats line on stderr.
void finish_output(const RunState& st, const std::vector<int32_t>& prompt, int32_t n_prompt, double prompt_s,
                   int32_t n_gen, double gen_s, int32_t stop, int32_t n_drafted, int32_t n_accepted, int32_t n_verify) {
  const double pp = rate(n_prompt, prompt_s);
  const double tg = rate(n_gen, gen_s);
  if (st.json) {
    nlohmann::ordered_json last;
    last["prompt_ids"] = prompt;
    last["timings"] = {{"prompt_tok_s", pp}, {"gen_tok_s", tg}};
    const std::string line = last.dump();
    std::fwrite(line.data(), 1, line.size(), stdout);
    std::fputc('\n', stdout);
  } else if (!st.text_so_far.empty() && st.text_so_far.back() != '\n') {
    std::fputc('\n', stdout);
  }
  std::fflush(stdout);
  static const char* kStop[] = {"end of generation", "max tokens", "context full", "interrupted"};
  const int sr = stop >= 0 && stop <= 3 ? stop : 0;
  std::fprintf(stderr, "prompt: %d tokens, %.2f tok/s | generated: %d tokens, %.2f tok/s | stop: %s\n",
               n_prompt, pp, n_gen, tg, kStop[sr]);
  if (n_drafted > 0) std::fprintf(stderr, "speculative: %d of %d drafts accepted in %d verify steps\n", n_accepted, n_drafted, n_verify);
}

// The most drafts a speculative verify step may carry (the C API's contexts use the same).
constexpr int32_t kMediaMaxDraft = 16;

struct ModelHolder {
  oxi_model* m = nullptr;
  oxi_context* c = nullptr;
  ~ModelHolder() {
    oxi_context_free(c);
    oxi_model_free(m);
  }
};

}  // namespace

int cmd_run(int argc, char** argv) {
  try {
    Args args(argc - 1, argv + 1,
              with_compat_flags({"--no-chat", "--json", "--no-think", "--ignore-eos", "--special-in-content", "-h",
                                 "--help", "--offline", "--progress", "--no-progress", "--no-mmproj"}));
    if (args.flag({"-h", "--help"})) {
      std::fputs(kUsage, stdout);
      std::fputs(kQuantHelp, stdout);
      std::fputs(kCacheTypeHelp, stdout);
      return 0;
    }
    if (list_devices_if_asked(args)) return 0;
    std::vector<std::string> known = kModelOptions;
    known.insert(known.end(), kSamplingOptions.begin(), kSamplingOptions.end());
    known.insert(known.end(), kSpecOptions.begin(), kSpecOptions.end());
    known.insert(known.end(), kCompatOptions.begin(), kCompatOptions.end());
    for (const char* k : {"-p", "--prompt", "-f", "--file", "--tokens", "-n", "--n-predict",
                          "-c", "--ctx-size", "--top-logprobs", "--system", "-sys",
                          "--system-prompt", "--image", "--audio", "--mmproj", "--image-preproc", "--grammar",
                          "--grammar-file"}) {
      known.emplace_back(k);
    }
    args.check_known(known);
    if (!args.positional().empty()) usage_error("unexpected argument '" + args.positional()[0] + "'");

    const auto prompt_text = args.get({"-p", "--prompt"});
    const auto prompt_file = args.get({"-f", "--file"});
    const auto tokens_text = args.get({"--tokens"});
    const int n_sources = (prompt_text ? 1 : 0) + (prompt_file ? 1 : 0) + (tokens_text ? 1 : 0);
    if (n_sources > 1) usage_error("give only one of -p, -f and --tokens");
    if (n_sources == 0) {
      // No prompt: the interactive chat with the same model and options (ollama run's behaviour).
      for (const char* o : kPromptOnlyOptions) {
        if (args.has(o)) usage_error(std::string(o) + " needs a prompt (-p TEXT, -f FILE or --tokens); without one, run is an interactive chat");
      }
      if (!args.has("-m") && !args.has("--model") && !args.has("-hf") && !args.has("--hf-repo")) {
        usage_error("no model given: pass -m PATH or -hf org/name[:quant]");
      }
      return cmd_chat(argc, argv);
    }
    // Read now: a missing file is reported before the (slow) model load.
    const std::string file_text = prompt_file ? read_prompt_file(*prompt_file) : std::string();
    std::vector<int32_t> given_ids;
    if (tokens_text) given_ids = parse_id_list(*tokens_text, "--tokens");

    const long long n_predict = args.get_int({"-n", "--n-predict"}, -1);
    if (n_predict < -1 || n_predict > INT32_MAX) usage_error("invalid value for -n (>= -1)");
    const long long n_ctx = args.get_int({"-c", "--ctx-size"}, 4096);
    if (n_ctx < 0 || n_ctx > INT32_MAX) usage_error("invalid value for -c (>= 0)");
    const long long n_top = args.get_int({"--top-logprobs"}, 0);
    if (n_top < 0 || n_top > 20) usage_error("invalid value for --top-logprobs (0..20)");
    const bool json = args.flag({"--json"});
    const bool no_chat = args.flag({"--no-chat"});
    const auto system = args.get({"--system", "-sys", "--system-prompt"});
    if (tokens_text && (system || args.flag({"--no-think"}) || args.get({"--chat-template-file"}))) {
      usage_error("--tokens is used exactly as given: --system, --no-think and --chat-template-file "
                  "do not apply");
    }
    const std::vector<std::string> images = args.get_all("--image");
    const std::vector<std::string> audio = args.get_all("--audio");
    if ((!images.empty() || !audio.empty()) && tokens_text) usage_error("--image / --audio cannot be combined with --tokens");
    std::string media_order;
    for (const auto& kv : args.get_all_in_order({"--image", "--audio"})) media_order += kv.first == "--audio" ? 'a' : 'i';
    const bool media = !images.empty() || !audio.empty();
    const bool llama_preproc = llama_image_preproc_from_args(args);
    // Validate sampling flags before the (slow) model load.
    (void)sampling_from_args(args, oxi_sampling_default_params());
    const SpecArgs spec = spec_from_args(args);
    const auto grammar_text = args.get({"--grammar"});
    const auto grammar_file = args.get({"--grammar-file"});
    if (grammar_text && grammar_file) usage_error("give only one of --grammar and --grammar-file");
    const std::string grammar = grammar_text ? *grammar_text : grammar_file ? read_text_file(*grammar_file) : "";
    if (!grammar.empty() && args.flag({"--ignore-eos"})) usage_error("--grammar cannot be combined with --ignore-eos");

    ModelHolder h;
    const ModelPaths paths = model_paths_from_args(args, media);
    h.m = open_model_from_args(args, &paths);
    log_kernels(gpu_layers_from_args(args));
    oxi_model_desc desc;
    check_status(oxi_model_describe(h.m, &desc));

    oxi_generate_params gp = oxi_generate_default_params();
    gp.max_tokens = static_cast<int32_t>(n_predict);
    gp.n_top_logprobs = static_cast<int32_t>(n_top);
    gp.sampling = sampling_from_args(args, oxi_model_sampling_defaults(h.m));
    gp.spec_mode = spec.mode;
    gp.draft_max = spec.draft_max;
    gp.draft_min = spec.draft_min;
    if (gp.sampling.seed == OXI_SEED_RANDOM && gp.sampling.temperature > 0.0f) {
      // Pick the seed here so it can be reported (and the run repeated with --seed).
      std::random_device rd;
      gp.sampling.seed = ((static_cast<uint64_t>(rd()) << 32) ^ rd()) >> 1;
      std::fprintf(stderr, "seed: %llu\n", static_cast<unsigned long long>(gp.sampling.seed));
    }
    gp.ignore_eog = args.flag({"--ignore-eos"}) ? 1 : 0;
    if (!grammar.empty()) gp.grammar = grammar.c_str();
    gp.cancel = &g_cancel;

    RunState st;
    st.json = json;
    if (media) {
      // The same options, events and output as the text path; the prompt is model entries
      // (tokens and image/audio rows) fed to a session of our own (run_media.h).
      std::vector<MediaItem> items;
      size_t ni = 0, na = 0;
      for (char k : media_order) items.push_back({k, k == 'a' ? audio[na++] : images[ni++]});
      MediaEncoder enc(h.m, paths.mmproj, !images.empty(), !audio.empty(), llama_preproc);
      const std::string content = place_media_markers(prompt_text ? *prompt_text : file_text, items.size());
      std::string full = content;
      if (!no_chat && desc.has_chat_template) {
        nlohmann::ordered_json msgs = nlohmann::ordered_json::array();
        if (system) msgs.push_back({{"role", "system"}, {"content", *system}});
        msgs.push_back({{"role", "user"}, {"content", content}});
        // As llama-mtmd-cli --jinja renders (its enable_thinking is true unless reasoning is off):
        // Gemma 4's template opens a system turn with <|think|> for it; Qwen 3.5's output is the
        // same either way. The grammar covers the whole reply (no reasoning block), as below.
        nlohmann::ordered_json opts = {{"add_generation_prompt", true},
                                       {"enable_thinking", !args.flag({"--no-think"}) && grammar.empty()}};
        full = chat_text(h.m, msgs, opts);  // markup parsed as special tokens, as llama-mtmd-cli does
      } else if (no_chat && system) {
        usage_error("--system needs the chat template (drop --no-chat)");
      }
      const MediaPrompt mp = enc.prompt(full, items, no_chat || !desc.has_chat_template);
      const LoadedModel& lm = loaded_of(h.m);
      const int64_t cap = n_ctx > 0 ? n_ctx : std::max<int64_t>(lm.model->info().n_ctx_train, 4096);
      if (static_cast<int64_t>(mp.tok.size()) > cap)
        throw_error(ErrorCode::kInvalidArgument, "the prompt has " + std::to_string(mp.tok.size()) +
                                                     " entries (text, image and audio rows) but the context holds only " +
                                                     std::to_string(cap) + "; use a larger context (-c)");
      Session ses(*lm.model, *lm.text, cap, nullptr, kMediaMaxDraft);
      auto* old = std::signal(SIGINT, oxi_run_on_sigint);
      const GenerateResult res = generate_media(ses, h.m, mp, 0, gp, on_token, &st);
      std::signal(SIGINT, old);
      finish_output(st, mp.tok, res.n_prompt, res.prompt_seconds, res.n_generated, res.gen_seconds,
                    static_cast<int32_t>(res.stop), res.n_drafted, res.n_accepted, res.n_verify);
      if (enc.n_audio > 0) std::fprintf(stderr, "audio encode: %.1f ms (%d clips, decode + log-mel + tower)\n", enc.audio_ms, enc.n_audio);
      if (enc.n_images > 0) std::fprintf(stderr, "image encode: %.1f ms (%d images)\n", enc.image_ms, enc.n_images);
      return res.stop == StopReason::kCancelled ? 130 : 0;
    }

    // The prompt ids.
    std::vector<int32_t> prompt;
    if (tokens_text) {
      prompt = given_ids;
    } else {
      std::string text = prompt_text ? *prompt_text : file_text;
      if (!no_chat && desc.has_chat_template) {
        nlohmann::ordered_json msgs = nlohmann::ordered_json::array();
        if (system) msgs.push_back({{"role", "system"}, {"content", *system}});
        msgs.push_back({{"role", "user"}, {"content", text}});
        nlohmann::ordered_json opts = {{"add_generation_prompt", true}};
        // The grammar covers the whole reply, so no reasoning block is opened before it.
        if (args.flag({"--no-think"}) || !grammar.empty()) opts["enable_thinking"] = false;
        if (args.flag({"--special-in-content"})) opts["special_in_content"] = true;
        prompt = chat_ids(h.m, msgs, opts);  // the prompt's special-token text stays text
      } else {
        if (!no_chat) std::fprintf(stderr, "warning: the model has no chat template; using the prompt as is\n");
        if (no_chat && system) usage_error("--system needs the chat template (drop --no-chat)");
        size_t n = 0;
        check_status(oxi_tokenize(h.m, text.data(), text.size(), 1, 1, nullptr, 0, &n));
        prompt.resize(n);
        check_status(oxi_tokenize(h.m, text.data(), text.size(), 1, 1, prompt.data(), prompt.size(), &n));
        prompt.resize(n);
      }
      if (prompt.empty()) usage_error("the prompt is empty");
    }
    for (int32_t id : prompt) {
      if (id >= desc.n_vocab) {
        throw_error(ErrorCode::kInvalidArgument, "token id " + std::to_string(id) +
                                                     " is out of range (vocabulary of " +
                                                     std::to_string(desc.n_vocab) + ")");
      }
    }

    check_status(oxi_context_new(h.m, static_cast<int32_t>(n_ctx), &h.c));
    const int32_t cap = oxi_context_n_ctx(h.c);
    if (static_cast<int64_t>(prompt.size()) > cap) {
      throw_error(ErrorCode::kInvalidArgument,
                  "the prompt has " + std::to_string(prompt.size()) +
                      " tokens but the context holds only " + std::to_string(cap) +
                      "; use a larger context (-c)");
    }

    auto* old = std::signal(SIGINT, oxi_run_on_sigint);
    const bool progress = args.flag({"--progress"}) || (!args.flag({"--no-progress"}) && isatty(STDERR_FILENO));
    const PrefillDone pre = progress ? prefill_with_progress(h.c, prompt.data(), prompt.size(), &g_cancel) : PrefillDone{};
    oxi_generate_result res;
    const oxi_status s = oxi_generate(h.c, prompt.data() + pre.tokens, prompt.size() - pre.tokens, &gp, on_token, &st, &res);
    std::signal(SIGINT, old);
    res.n_prompt += static_cast<int32_t>(pre.tokens);
    res.prompt_seconds += pre.seconds;
    if (s != OXI_OK && s != OXI_ERR_CANCELLED) check_status(s);

    int32_t nv = 0, nd = 0, na = 0;
    check_status(oxi_context_spec_stats(h.c, &nv, &nd, &na));
    finish_output(st, prompt, res.n_prompt, res.prompt_seconds, res.n_generated, res.gen_seconds, res.stop_reason, nd, na, nv);
    return s == OXI_ERR_CANCELLED ? 130 : 0;
  } catch (const std::exception& e) {
    std::fflush(stdout);
    return report_error(e);
  }
}

}  // namespace oxi::cli
