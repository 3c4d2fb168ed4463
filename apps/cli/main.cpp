// oxinfer: command-line entry point. Dispatches to one subcommand; exit codes: 0 ok, 1 error,
// 2 usage error or not implemented.
#include <cstdio>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <string>

#include "args.h"
#include "commands.h"
#include "core/progress.h"
#include "oxinfer.h"

namespace {

const char* kUsage =
    "usage: oxinfer <command> [options]\n"
    "\n"
    "commands:\n"
    "  run       generate text from a prompt            (oxinfer run -m MODEL -p TEXT);\n"
    "            with no prompt, an interactive chat    (oxinfer run -hf org/name)\n"
    "  chat      interactive chat with the model's template\n"
    "  serve     OpenAI-compatible HTTP server\n"
    "  bench     llama-bench style speed test (pp512, tg128)\n"
    "  convert   Hugging Face checkpoint -> GGUF\n"
    "  quantize  GGUF or HF checkpoint -> quantised GGUF (llama-quantize recipes)\n"
    "  inspect   show a model file's architecture, tensors and metadata\n"
    "  tokenize  text -> token ids (or --decode ids -> text)\n"
    "  pull      download a model into the Hugging Face cache\n"
    "  list      models in the Hugging Face cache (size, last used)\n"
    "  rm        remove a model (or one quant) from the Hugging Face cache\n"
    "\n"
    "A model is given as -m PATH (a .gguf file or an HF checkpoint directory) or\n"
    "-hf org/name[:quant] (resolved in the Hugging Face cache).\n"
    "Run 'oxinfer <command> --help' for the options of a command.\n"
    "oxinfer --list-devices (or run/chat/serve/bench --list-devices): the devices --device can name.\n";

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2 || !std::strcmp(argv[1], "-h") || !std::strcmp(argv[1], "--help") ||
      !std::strcmp(argv[1], "help")) {
    std::fputs(kUsage, argc < 2 ? stderr : stdout);
    return argc < 2 ? 2 : 0;
  }
  if (!std::strcmp(argv[1], "--version") || !std::strcmp(argv[1], "version")) {
    std::printf("oxinfer %s\n", oxi_version());
    return 0;
  }
  const std::string cmd = argv[1];
  if (cmd == "--list-devices") return oxi::cli::print_devices();
  using namespace oxi::cli;
  int sub_argc = argc - 1;
  char** sub_argv = argv + 1;
  // Progress lines for long steps (model load with --quant, prefill…; core/progress.h): on when
  // stderr is a terminal and always for serve (its log), --progress / --no-progress decide
  // otherwise (commands that do not take them refuse them as unknown options), after the
  // environment's OXI_PROGRESS=0|1.
  bool progress = isatty(STDERR_FILENO) != 0 || cmd == "serve";
  if (const char* e = std::getenv("OXI_PROGRESS"); e && *e) progress = std::strcmp(e, "0") != 0;
  for (int i = 2; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--progress")) progress = true;
    if (!std::strcmp(argv[i], "--no-progress")) progress = false;
  }
  oxi::set_progress_enabled(progress);
  if (cmd == "inspect") return cmd_inspect(sub_argc, sub_argv);
  if (cmd == "tokenize") return cmd_tokenize(sub_argc, sub_argv);
  if (cmd == "run") return cmd_run(sub_argc, sub_argv);
  if (cmd == "chat") return cmd_chat(sub_argc, sub_argv);
  if (cmd == "serve") return cmd_serve(sub_argc, sub_argv);
  if (cmd == "bench") return cmd_bench(sub_argc, sub_argv);
  if (cmd == "convert") return cmd_convert(sub_argc, sub_argv);
  if (cmd == "quantize") return cmd_quantize(sub_argc, sub_argv);
  if (cmd == "pull") return cmd_pull(sub_argc, sub_argv);
  if (cmd == "list" || cmd == "ls") return cmd_list(sub_argc, sub_argv);
  if (cmd == "rm") return cmd_rm(sub_argc, sub_argv);
  std::fprintf(stderr, "error: unknown command '%s'\n\n%s", cmd.c_str(), kUsage);
  return 2;
}
