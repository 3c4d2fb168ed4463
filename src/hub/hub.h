// Hugging Face Hub: resolving `org/name[:quant][@revision]` to local files in the shared HF cache
// ($HF_HUB_CACHE, else $HF_HOME/hub, else ~/.cache/huggingface/hub; layout
// models--org--name/{blobs,snapshots/<commit>,refs/<branch>}), downloading what is missing.
// See docs/hub.md for the decisions (file selection, quant matching, errors, locking, resume).
#pragma once

#include <string>

namespace oxi {

struct HubOptions {
  std::string token;     // --hf-token, else $HF_TOKEN, else the token file ($HF_TOKEN_PATH or $HF_HOME/token)
  bool offline = false;  // --offline or HF_HUB_OFFLINE=1: cache only
  bool progress = true;  // progress on stderr (a bar on a terminal, plain lines otherwise)
  std::string endpoint;  // "" → $HF_ENDPOINT, else https://huggingface.co
  std::string cache_dir; // "" → hf_hub_cache_dir()
};

struct HubSpec {
  std::string repo;      // "org/name"
  std::string quant;     // "" or "Q4_K_M"
  std::string revision;  // "" → "main"
};

// Parses "org/name[:quant][@revision]"; throws oxi::Error(kInvalidArgument).
HubSpec parse_hub_spec(const std::string& spec);
// The cache root directory by the environment rules above.
std::string hf_hub_cache_dir();
// Returns a local path: the snapshot directory (HF checkpoint) or the .gguf file (first split).
// Throws oxi::Error: kInvalidArgument (bad spec, quant not in the repo), kIo (network, HTTP
// errors such as 401/404, disk), kFormat (checksum mismatch, malformed Hub answer).
std::string hub_resolve_model(const std::string& spec, const HubOptions& options);

}  // namespace oxi
