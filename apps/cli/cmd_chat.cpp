// oxinfer chat: not implemented yet. It says so and exits 2 rather than printing anything fake.
#include <cstdio>

#include "commands.h"

namespace oxi::cli {

int cmd_chat(int, char**) {
  std::fprintf(stderr, "error: 'oxinfer chat' is not implemented yet\n");
  return 2;
}

}  // namespace oxi::cli
