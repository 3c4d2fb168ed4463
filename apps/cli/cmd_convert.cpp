// oxinfer convert: not implemented yet. It says so and exits 2 rather than printing anything fake.
#include <cstdio>

#include "commands.h"

namespace oxi::cli {

int cmd_convert(int, char**) {
  std::fprintf(stderr, "error: 'oxinfer convert' is not implemented yet\n");
  return 2;
}

}  // namespace oxi::cli
