// oxi-gen FAMILY --out DIR [options]: writes a synthetic HF checkpoint (random weights, real
// topology) for tests. Families register themselves (see gen_common.h, OXI_GEN_FAMILY).
#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

#include "core/error.h"
#include "gen_common.h"

using oxi::gen::gen_families;

static void usage(FILE* f) {
  std::fprintf(f, "usage: oxi-gen FAMILY --out DIR [--seed N] [--dtype bf16|f16|f32] [--shards N]\n"
                  "              [--tokenizer-dir DIR] [--chat-template FILE] [family options]\n"
                  "families:\n");
  auto fams = gen_families();
  std::sort(fams.begin(), fams.end(), [](const auto& a, const auto& b) { return a.name < b.name; });
  for (const auto& f2 : fams) std::fprintf(f, "  %-10s %s\n", f2.name.c_str(), f2.help.c_str());
}

int main(int argc, char** argv) {
  if (argc < 2 || std::string(argv[1]) == "-h" || std::string(argv[1]) == "--help") {
    usage(argc < 2 ? stderr : stdout);
    return argc < 2 ? 2 : 0;
  }
  const std::string family = argv[1];
  for (const auto& f : gen_families()) {
    if (f.name != family) continue;
    try {
      oxi::gen::GenArgs args(std::vector<std::string>(argv + 2, argv + argc));
      return f.fn(args);
    } catch (const std::exception& e) {
      std::fprintf(stderr, "error: %s\n", e.what());
      return 1;
    }
  }
  std::fprintf(stderr, "error: unknown family '%s'\n", family.c_str());
  usage(stderr);
  return 2;
}
