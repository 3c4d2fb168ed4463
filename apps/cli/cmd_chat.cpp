// oxinfer chat: interactive conversation with the model's chat template. Replies stream as they
// are generated; reasoning (Qwen <think>, Gemma thought channel) is shown apart from the answer
// (dim on a terminal, on stderr otherwise). Ctrl-C stops a reply, /exit or end of input quits.
// The conversation is re-rendered every turn; the context keeps whatever prefix is unchanged (the
// state after the previous turn, or a checkpoint taken at the end of the previous history).
// `oxinfer chat --template-only …` only renders a template (chat engineer's command).
#include <unistd.h>

#include <algorithm>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <memory>
#include <iostream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "args.h"
#include "chat/parser.h"
#include "chat_template_cmd.h"
#include "commands.h"
#include "core/error.h"
#include "oxinfer.h"
#include "run_media.h"
#include "run_progress.h"
#include "api/api_internal.h"
#include "loader/loaded_model.h"

namespace oxi::cli {

namespace {

const char* kUsage =
    "usage: oxinfer chat (-m MODEL | -hf org/name[:quant]) [-c CTX] [-n N] [-t THREADS]\n"
    "         [--system S] [--no-think] [--chat-template-file F | --chat-template NAME] [--temp T] [--seed S]\n"
    "         [--top-k K] [--top-p P] [--min-p P] [--repeat-penalty R] [--presence-penalty P]\n"
    "         [--frequency-penalty F] [--repeat-last-n N] [--isa scalar|avx2|avx512|avx512-amx|auto]\n"
    "         [--device none|auto|NAME] [--quant q8_0|q4_0|q4_k] [--spec MODE] [--draft-max N]\n"
    "         [--draft-min N] [--mmproj FILE] [--image FILE] [--audio FILE] [--image-preproc hf|llama]\n"
    "       oxinfer chat --template-only ...   (render a conversation; see --template-only --help)\n"
    "\n"
    "Type a message and press Enter (end a line with \\ to continue it on the next).\n"
    "Ctrl-C stops a reply; /exit, /quit or end of input (Ctrl-D) quits; /reset clears the history.\n"
    "/image PATH or /audio PATH on a line of its own attaches that file to your next message (as\n"
    "llama-mtmd-cli's chat mode does; several may be attached, in order, before the message's text).\n"
    "  --image FILE, --audio FILE  (repeatable) attached to the first message, as if given with\n"
    "           /image and /audio; --mmproj FILE the towers (see oxinfer run --help). Images and\n"
    "           audio already in the conversation are not encoded again, and the context keeps\n"
    "           their rows from turn to turn (matched by the files' content hash).\n"
    "  -c CTX   context size (default 4096; 0: the model's training context)\n"
    "  -n N     most tokens per reply (default -1: until the end of the turn)\n"
    "  --progress / --no-progress  a progress line for prefills over ~2 s (default: when stderr is a\n"
    "           terminal; see oxinfer run --help)\n"
    "  --special-in-content  special-token text in messages becomes control tokens (unsafe; by\n"
    "           default it stays text and only the template's markup is special)\n"
    "  (--quant TYPE, --spec MODE: see oxinfer run --help)\n";

volatile int g_cancel = 0;
volatile sig_atomic_t g_generating = 0;

extern "C" void oxi_chat_on_sigint(int) {
  if (g_generating) {
    g_cancel = 1;
    return;
  }
  const char nl = '\n';
  (void)!write(STDERR_FILENO, &nl, 1);
  _exit(130);
}

struct Reply {
  std::unique_ptr<OutputParser> parser;
  bool tty = false;
  bool in_reasoning_style = false;
  bool any_content = false;
  bool stderr_open = false;  // reasoning on stderr not ended by a newline yet
  std::string raw;

  void show(const ChatDelta& d) {
    if (!d.reasoning_content.empty()) {
      if (tty) {
        if (!in_reasoning_style) std::fputs("\x1b[2m", stdout);
        in_reasoning_style = true;
        std::fwrite(d.reasoning_content.data(), 1, d.reasoning_content.size(), stdout);
      } else {
        std::fwrite(d.reasoning_content.data(), 1, d.reasoning_content.size(), stderr);
        stderr_open = d.reasoning_content.back() != '\n';
      }
    }
    std::string content = d.content;
    for (const auto& [i, call] : d.tool_calls) {
      content += "\n[tool call " + call.name + " " + call.arguments + "]\n";
    }
    if (!content.empty()) {
      if (in_reasoning_style) {
        std::fputs("\x1b[0m\n", stdout);
        in_reasoning_style = false;
      }
      if (!any_content) {
        // The answer starts: drop the blank lines a template leaves after the reasoning block.
        const size_t k = content.find_first_not_of("\n");
        content.erase(0, k == std::string::npos ? content.size() : k);
      }
      any_content = any_content || !content.empty();
      std::fwrite(content.data(), 1, content.size(), stdout);
    }
    std::fflush(stdout);
    std::fflush(stderr);
  }
  void end() {
    if (stderr_open) std::fputc('\n', stderr);
    stderr_open = false;
    if (in_reasoning_style) std::fputs("\x1b[0m", stdout);
    in_reasoning_style = false;
    std::fputc('\n', stdout);
    std::fflush(stdout);
  }
};

int on_token(const oxi_token_event* ev, void* user) {
  auto* r = static_cast<Reply*>(user);
  if (ev->text_len > 0) {
    r->raw.append(ev->text, ev->text_len);
    r->show(r->parser->feed(std::string_view(ev->text, ev->text_len)));
  }
  return 0;
}

struct Handles {
  oxi_model* m = nullptr;
  oxi_context* c = nullptr;
  ~Handles() {
    oxi_context_free(c);
    oxi_model_free(m);
  }
};

nlohmann::ordered_json render_options(bool gen_prompt, bool no_think, bool special_in_content) {
  nlohmann::ordered_json opts = {{"add_generation_prompt", gen_prompt}};
  if (no_think) opts["enable_thinking"] = false;
  if (special_in_content) opts["special_in_content"] = true;
  return opts;
}

// Reads one message (lines ending in '\' continue). False at end of input.
bool read_message(std::string& out, bool tty) {
  out.clear();
  if (tty) {
    std::fputs("> ", stdout);
    std::fflush(stdout);
  }
  std::string line;
  for (;;) {
    if (!std::getline(std::cin, line)) return !out.empty();
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (!line.empty() && line.back() == '\\') {
      line.pop_back();
      out += line + "\n";
      continue;
    }
    out += line;
    return true;
  }
}

// A reply about to stream, both paths: its output parser for this prompt; Ctrl-C now stops it.
Reply begin_reply(ChatFormat format, const std::string& prompt, bool tty) {
  Reply reply;
  reply.tty = tty;
  reply.parser = make_output_parser(format, parser_options_for_prompt(format, prompt));
  g_cancel = 0;
  g_generating = 1;
  return reply;
}

// The end of a reply, both paths: the parser's rest, the notes, the turn and the answer into the
// history.
void finish_reply(Reply& reply, bool cancelled, bool context_full, nlohmann::ordered_json& turn,
                  nlohmann::ordered_json& history) {
  reply.show(reply.parser->finish());
  reply.end();
  if (cancelled) std::fprintf(stderr, "(reply stopped)\n");
  if (context_full) std::fprintf(stderr, "(context full: /reset to start over)\n");
  const ChatMessage& cm = reply.parser->message();
  nlohmann::ordered_json a = {{"role", "assistant"}, {"content", cm.content}};
  if (!cm.reasoning_content.empty()) a["reasoning_content"] = cm.reasoning_content;
  history = std::move(turn);
  history.push_back(std::move(a));
}

// The most drafts a speculative verify step may carry (the C API's contexts use the same).
constexpr int32_t kChatMaxDraft = 16;

}  // namespace

int cmd_chat(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--template-only")) return cmd_chat_template_only(argc, argv);
  }
  try {
    Args args(argc - 1, argv + 1, with_compat_flags({"--no-think", "--special-in-content", "-h", "--help", "--offline", "--progress", "--no-progress",
                                 "--no-mmproj"}));
    if (args.flag({"-h", "--help"})) {
      std::fputs(kUsage, stdout);
      std::fputs(kCacheTypeHelp, stdout);
      return 0;
    }
    if (list_devices_if_asked(args)) return 0;
    std::vector<std::string> known = kModelOptions;
    known.insert(known.end(), kSamplingOptions.begin(), kSamplingOptions.end());
    known.insert(known.end(), kSpecOptions.begin(), kSpecOptions.end());
    known.insert(known.end(), kCompatOptions.begin(), kCompatOptions.end());
    for (const char* k : {"-n", "--n-predict", "-c", "--ctx-size", "--system", "-sys", "--system-prompt", "--image",
                          "--audio", "--mmproj", "--image-preproc"}) {
      known.emplace_back(k);
    }
    args.check_known(known);
    if (!args.positional().empty()) usage_error("unexpected argument '" + args.positional()[0] + "'");
    const long long n_predict = args.get_int({"-n", "--n-predict"}, -1);
    if (n_predict < -1 || n_predict > INT32_MAX) usage_error("invalid value for -n (>= -1)");
    const long long n_ctx = args.get_int({"-c", "--ctx-size"}, 4096);
    if (n_ctx < 0 || n_ctx > INT32_MAX) usage_error("invalid value for -c (>= 0)");
    const bool no_think = args.flag({"--no-think"});
    const bool special = args.flag({"--special-in-content"});
    const auto system = args.get({"--system", "-sys", "--system-prompt"});
    (void)sampling_from_args(args, oxi_sampling_default_params());
    const SpecArgs spec = spec_from_args(args);

    // Media given at the start go with the first message (llama-mtmd-cli's chat mode reads only
    // /image lines; its --image files are for -p's single turn).
    std::vector<MediaItem> pending;
    for (const auto& kv : args.get_all_in_order({"--image", "--audio"})) pending.push_back({kv.first == "--audio" ? 'a' : 'i', kv.second});
    const bool llama_preproc = llama_image_preproc_from_args(args);
    const bool want_media = !pending.empty() || args.has("--mmproj") || args.has("--image-preproc");

    Handles h;
    const ModelPaths paths = model_paths_from_args(args, want_media);
    h.m = open_model_from_args(args, &paths);
    oxi_model_desc desc;
    check_status(oxi_model_describe(h.m, &desc));
    if (!desc.has_chat_template) {
      throw_error(ErrorCode::kUnsupported,
                  "the model has no chat template; pass --chat-template-file F (or use oxinfer run "
                  "--no-chat)");
    }
    const ChatFormat format = detect_chat_format(oxi_model_chat_template(h.m));
    check_status(oxi_context_new(h.m, static_cast<int32_t>(n_ctx), &h.c));
    oxi_generate_params gp = oxi_generate_default_params();
    gp.max_tokens = static_cast<int32_t>(n_predict);
    gp.sampling = sampling_from_args(args, oxi_model_sampling_defaults(h.m));
    gp.spec_mode = spec.mode;
    gp.draft_max = spec.draft_max;
    gp.draft_min = spec.draft_min;
    gp.cancel = &g_cancel;

    const bool progress = args.flag({"--progress"}) || (!args.flag({"--no-progress"}) && isatty(STDERR_FILENO));
    const bool tty_in = isatty(STDIN_FILENO) != 0;
    const bool tty_out = isatty(STDOUT_FILENO) != 0;
    std::fprintf(stderr, "%s: %s, context %d tokens. Ctrl-C stops a reply; /exit quits; /reset clears.\n",
                 desc.name && *desc.name ? desc.name : "model", desc.arch, oxi_context_n_ctx(h.c));
    std::signal(SIGINT, oxi_chat_on_sigint);

    // Media mode (from the first image or clip on): the towers, and a session of our own fed model
    // entries (run_media.h); media rows carry content-hash ids, so the kept prefix holds the same
    // images, never another image of the same size. Text-only chats stay on the C API context.
    std::unique_ptr<MediaEncoder> enc;
    std::unique_ptr<Session> ses;
    std::vector<MediaItem> conv_media;  // the conversation's media, in order of their markers
    nlohmann::ordered_json history = nlohmann::ordered_json::array();
    if (system) history.push_back({{"role", "system"}, {"content", *system}});
    const size_t base_len = history.size();
    std::string msg;
    while (read_message(msg, tty_in)) {
      if (msg == "/exit" || msg == "/quit") break;
      if (msg == "/reset") {
        history.erase(history.begin() + static_cast<std::ptrdiff_t>(base_len), history.end());
        if (h.c) check_status(oxi_context_reset(h.c));
        if (ses) ses->reset();
        conv_media.clear();
        pending.clear();
        std::fprintf(stderr, "(history cleared)\n");
        continue;
      }
      // "/image PATH", "/audio PATH" (llama-mtmd-cli's commands; "/imagery" is a message).
      if ((msg.rfind("/image", 0) == 0 || msg.rfind("/audio", 0) == 0) && (msg.size() == 6 || msg[6] == ' ')) {
        const std::string path = msg.size() > 7 ? msg.substr(7) : "";
        if (path.empty()) {
          std::fprintf(stderr, "error: %s needs a file: %s PATH\n", msg.substr(0, 6).c_str(), msg.substr(0, 6).c_str());
        } else if (!std::filesystem::is_regular_file(path)) {
          std::fprintf(stderr, "error: %s: no such file\n", path.c_str());
        } else {
          pending.push_back({msg[1] == 'a' ? 'a' : 'i', path});
          std::fprintf(stderr, "(%s %s attached to the next message)\n", msg[1] == 'a' ? "audio" : "image", path.c_str());
        }
        continue;
      }
      if (msg.empty()) continue;
      if ((enc || !pending.empty()) && msg.find(kMediaMarker) != std::string::npos) {
        // It would take the place of a later file's marker when the conversation is re-rendered.
        std::fprintf(stderr, "error: a message cannot contain %s in a chat with media; attach files with /image or /audio\n", kMediaMarker);
        continue;
      }
      nlohmann::ordered_json turn = history;
      std::string content = msg;
      for (size_t i = 0; i < pending.size(); ++i) content = kMediaMarker + content;
      turn.push_back({{"role", "user"}, {"content", content}});
      try {
        if (!pending.empty() && !enc) {
          enc = std::make_unique<MediaEncoder>(h.m, paths.mmproj, false, false, llama_preproc);
          const LoadedModel& lm = loaded_of(h.m);
          ses = std::make_unique<Session>(*lm.model, *lm.text, oxi_context_n_ctx(h.c), nullptr, kChatMaxDraft);
          oxi_context_free(h.c);  // its KV cache is not used again
          h.c = nullptr;
        }
        if (enc) {
          // As oxinfer run --image renders it (enable_thinking explicit, as llama-mtmd-cli --jinja).
          nlohmann::ordered_json opts = render_options(true, no_think, special), head_opts = render_options(false, no_think, special);
          opts["enable_thinking"] = head_opts["enable_thinking"] = !no_think;
          const std::string prompt = chat_text(h.m, turn, opts);
          std::vector<MediaItem> items = conv_media;
          items.insert(items.end(), pending.begin(), pending.end());
          const int before = enc->n_encoded;
          const double ms0 = enc->image_ms + enc->audio_ms;
          const MediaPrompt mp = enc->prompt(prompt, items);
          // The history without the generation prompt: a checkpoint there is reusable next turn.
          const MediaPrompt head = enc->prompt(chat_text(h.m, turn, head_opts), items);
          size_t split = 0;
          if (head.tok.size() < mp.tok.size() && std::equal(head.tok.begin(), head.tok.end(), mp.tok.begin())) split = head.tok.size();
          if (static_cast<int64_t>(mp.tok.size()) > ses->n_ctx()) {
            throw_error(ErrorCode::kInvalidArgument,
                        "the conversation has " + std::to_string(mp.tok.size()) + " entries (text, image and audio rows) "
                            "but the context holds only " + std::to_string(ses->n_ctx()) + "; /reset to start over or use a larger -c");
          }
          size_t kept = ses->reuse_prefix(mp.tok, mp.tok.size() - 1);
          if (enc->n_encoded > before)
            std::fprintf(stderr, "(encoded %d file%s in %.1f ms)\n", enc->n_encoded - before, enc->n_encoded - before > 1 ? "s" : "",
                         enc->image_ms + enc->audio_ms - ms0);
          if (std::getenv("OXI_CHAT_DEBUG")) {
            std::fprintf(stderr, "[prompt %zu entries, %zu reused, %d files encoded in all]\n", mp.tok.size(), kept, enc->n_encoded);
          }
          if (split > kept) {
            prefill_media(*ses, mp, kept, split);
            ses->checkpoint();
            kept = split;
          }
          Reply reply = begin_reply(format, prompt, tty_out);
          const GenerateResult res = generate_media(*ses, h.m, mp, kept, gp, on_token, &reply);
          g_generating = 0;
          conv_media = std::move(items);
          pending.clear();
          finish_reply(reply, res.stop == StopReason::kCancelled, res.stop == StopReason::kContextFull, turn, history);
          continue;
        }
        const std::string prompt = chat_text(h.m, turn, render_options(true, no_think, special));
        const std::vector<int32_t> full = chat_ids(h.m, turn, render_options(true, no_think, special));
        // The history without the generation prompt: a checkpoint there is reusable next turn.
        std::vector<int32_t> head = chat_ids(h.m, turn, render_options(false, no_think, special));
        size_t split = 0;
        if (head.size() < full.size() && std::equal(head.begin(), head.end(), full.begin())) split = head.size();
        if (static_cast<int64_t>(full.size()) > oxi_context_n_ctx(h.c)) {
          throw_error(ErrorCode::kInvalidArgument,
                      "the conversation has " + std::to_string(full.size()) +
                          " tokens but the context holds only " + std::to_string(oxi_context_n_ctx(h.c)) +
                          "; /reset to start over or use a larger -c");
        }
        size_t kept = 0;
        check_status(oxi_context_reuse_prefix(h.c, full.data(), full.size(), &kept));
        if (std::getenv("OXI_CHAT_DEBUG")) {
          std::fprintf(stderr, "[prompt %zu tokens, %zu reused]\n", full.size(), kept);
        }
        if (split > kept) {
          // With progress, the whole 512-token chunks first (the boundaries one call would use).
          const size_t pre = progress ? prefill_with_progress(h.c, full.data() + kept, split - kept, &g_cancel).tokens : 0;
          check_status(oxi_context_prefill(h.c, full.data() + kept + pre, split - kept - pre));
          check_status(oxi_context_checkpoint(h.c));
          kept = split;
        }
        Reply reply = begin_reply(format, prompt, tty_out);
        if (progress) kept += prefill_with_progress(h.c, full.data() + kept, full.size() - kept, &g_cancel).tokens;
        oxi_generate_result res;
        const oxi_status s =
            oxi_generate(h.c, full.data() + kept, full.size() - kept, &gp, on_token, &reply, &res);
        g_generating = 0;
        if (s != OXI_OK && s != OXI_ERR_CANCELLED) {
          reply.show(reply.parser->finish());
          reply.end();
          check_status(s);
        }
        finish_reply(reply, s == OXI_ERR_CANCELLED, res.stop_reason == 2, turn, history);
      } catch (const Error& e) {
        g_generating = 0;
        pending.clear();  // a file that failed is not retried with every later message
        std::fflush(stdout);
        std::fprintf(stderr, "error: %s\n", e.what());
        if (e.code() != ErrorCode::kInvalidArgument) return 1;
      }
    }
    return 0;
  } catch (const std::exception& e) {
    return report_error(e);
  }
}

}  // namespace oxi::cli
