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
#include "run_progress.h"

namespace oxi::cli {

namespace {

const char* kUsage =
    "usage: oxinfer chat (-m MODEL | -hf org/name[:quant]) [-c CTX] [-n N] [-t THREADS]\n"
    "         [--system S] [--no-think] [--chat-template-file F | --chat-template NAME] [--temp T] [--seed S]\n"
    "         [--top-k K] [--top-p P] [--min-p P] [--repeat-penalty R] [--presence-penalty P]\n"
    "         [--frequency-penalty F] [--repeat-last-n N] [--isa scalar|avx2|avx512|avx512-amx|auto]\n"
    "         [--device none|auto|NAME] [--quant q8_0|q4_0|q4_k] [--spec MODE] [--draft-max N]\n"
    "         [--draft-min N]\n"
    "       oxinfer chat --template-only ...   (render a conversation; see --template-only --help)\n"
    "\n"
    "Type a message and press Enter (end a line with \\ to continue it on the next).\n"
    "Ctrl-C stops a reply; /exit, /quit or end of input (Ctrl-D) quits; /reset clears the history.\n"
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

}  // namespace

int cmd_chat(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--template-only")) return cmd_chat_template_only(argc, argv);
  }
  try {
    Args args(argc - 1, argv + 1, with_compat_flags({"--no-think", "--special-in-content", "-h", "--help", "--offline", "--progress", "--no-progress"}));
    if (args.flag({"-h", "--help"})) {
      std::fputs(kUsage, stdout);
      std::fputs(kCacheTypeHelp, stdout);
      return 0;
    }
    std::vector<std::string> known = kModelOptions;
    known.insert(known.end(), kSamplingOptions.begin(), kSamplingOptions.end());
    known.insert(known.end(), kSpecOptions.begin(), kSpecOptions.end());
    known.insert(known.end(), kCompatOptions.begin(), kCompatOptions.end());
    for (const char* k : {"-n", "--n-predict", "-c", "--ctx-size", "--system", "-sys", "--system-prompt"}) {
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

    Handles h;
    h.m = open_model_from_args(args);
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

    nlohmann::ordered_json history = nlohmann::ordered_json::array();
    if (system) history.push_back({{"role", "system"}, {"content", *system}});
    const size_t base_len = history.size();
    std::string msg;
    while (read_message(msg, tty_in)) {
      if (msg == "/exit" || msg == "/quit") break;
      if (msg == "/reset") {
        history.erase(history.begin() + static_cast<std::ptrdiff_t>(base_len), history.end());
        check_status(oxi_context_reset(h.c));
        std::fprintf(stderr, "(history cleared)\n");
        continue;
      }
      if (msg.empty()) continue;
      nlohmann::ordered_json turn = history;
      turn.push_back({{"role", "user"}, {"content", msg}});
      try {
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
        Reply reply;
        reply.tty = tty_out;
        reply.parser = make_output_parser(format, parser_options_for_prompt(format, prompt));
        g_cancel = 0;
        g_generating = 1;
        if (progress) kept += prefill_with_progress(h.c, full.data() + kept, full.size() - kept, &g_cancel).tokens;
        oxi_generate_result res;
        const oxi_status s =
            oxi_generate(h.c, full.data() + kept, full.size() - kept, &gp, on_token, &reply, &res);
        g_generating = 0;
        reply.show(reply.parser->finish());
        reply.end();
        if (s != OXI_OK && s != OXI_ERR_CANCELLED) check_status(s);
        if (s == OXI_ERR_CANCELLED) std::fprintf(stderr, "(reply stopped)\n");
        if (res.stop_reason == 2) std::fprintf(stderr, "(context full: /reset to start over)\n");
        const ChatMessage& cm = reply.parser->message();
        nlohmann::ordered_json a = {{"role", "assistant"}, {"content", cm.content}};
        if (!cm.reasoning_content.empty()) a["reasoning_content"] = cm.reasoning_content;
        history = std::move(turn);
        history.push_back(std::move(a));
      } catch (const Error& e) {
        g_generating = 0;
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
