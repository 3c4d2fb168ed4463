// oxinfer pull org/name[:quant][@revision]: downloads a model into the Hugging Face cache (the
// files `-hf` would use) and prints the local path on stdout.
#include <cstdio>

#include "args.h"
#include "commands.h"
#include "core/error.h"
#include "hub/hub.h"

namespace oxi::cli {

namespace {
const char* kPullUsage =
    "usage: oxinfer pull org/name[:quant][@revision] [--hf-token TOKEN] [--offline] [--quiet]\n"
    "\n"
    "Downloads a model into the Hugging Face cache ($HF_HUB_CACHE, else $HF_HOME/hub, else\n"
    "~/.cache/huggingface/hub) and prints its local path: the snapshot directory of a\n"
    "safetensors checkpoint, or the .gguf file (first part of a split GGUF) for ':quant'\n"
    "(Q4_K_M when the repo only has GGUF files).\n"
    "  --hf-token TOKEN  for gated or private repos (else $HF_TOKEN)\n"
    "  --offline         cache only (also HF_HUB_OFFLINE=1): check the model is there\n"
    "  --quiet           no progress output\n"
    "Environment: HF_ENDPOINT (a mirror), HF_TOKEN, HF_HUB_CACHE, HF_HOME, HF_HUB_OFFLINE.\n";
}  // namespace

int cmd_pull(int argc, char** argv) {
  try {
    Args args(argc - 1, argv + 1, {"--offline", "--quiet", "-q", "--help", "-h"});
    if (args.flag({"--help", "-h"})) {
      std::fputs(kPullUsage, stdout);
      return 0;
    }
    args.check_known({"--hf-token", "-hf", "--hf-repo"});
    std::string spec;
    if (auto hf = args.get({"-hf", "--hf-repo"})) spec = *hf;
    if (args.positional().size() > 1 || (spec.empty() && args.positional().size() != 1) ||
        (!spec.empty() && !args.positional().empty())) {
      std::fputs(kPullUsage, stderr);
      return 2;
    }
    if (spec.empty()) spec = args.positional()[0];
    HubOptions opt;
    if (auto t = args.get({"--hf-token"})) opt.token = *t;
    opt.offline = args.flag({"--offline"});
    opt.progress = !args.flag({"--quiet", "-q"});
    const std::string path = hub_resolve_model(spec, opt);
    std::printf("%s\n", path.c_str());
    return 0;
  } catch (const std::exception& e) {
    return report_error(e);
  }
}

}  // namespace oxi::cli
