// oxinfer chat: interactive chat is not implemented yet (it says so and exits 2 rather than
// printing anything fake). `--template-only` renders the prompt (apps/cli/cmd_chat_template.cpp).
#include <cstdio>
#include <cstring>

#include "chat_template_cmd.h"
#include "commands.h"

namespace oxi::cli {

int cmd_chat(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--template-only")) return cmd_chat_template_only(argc, argv);
  }
  std::fprintf(stderr, "error: 'oxinfer chat' is not implemented yet\n");
  return 2;
}

}  // namespace oxi::cli
