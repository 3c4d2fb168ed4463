// Hugging Face Hub: resolving `org/name[:quant][@revision]` to local files in the shared HF cache
// ($HF_HUB_CACHE, else $HF_HOME/hub, else ~/.cache/huggingface/hub; layout
// models--org--name/{blobs,snapshots/<commit>,refs/<branch>}), downloading what is missing.
// See docs/hub.md for the decisions (file selection, quant matching, errors, locking, resume).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace oxi {

struct HubOptions {
  std::string token;     // --hf-token, else $HF_TOKEN, else the token file ($HF_TOKEN_PATH or $HF_HOME/token)
  bool offline = false;  // --offline or HF_HUB_OFFLINE=1: cache only
  bool progress = true;  // progress on stderr (a bar on a terminal, plain lines otherwise)
  std::string endpoint;  // "" → $HF_ENDPOINT, else https://huggingface.co
  std::string cache_dir; // "" → hf_hub_cache_dir()
  // Companion files to fetch beside a GGUF model, by a word in their file name: "mmproj" (the
  // vision tower), "mtp-" (an MTP-only draft head). The best match is picked as llama.cpp's
  // downloader does (select_sidecar in hub_internal.h); none is not an error.
  std::vector<std::string> sidecars;
  // Not the model but a companion is what is asked for (-hfd: "mtp-"): the best top-level GGUF of
  // the repo whose name holds this word. "": the model.
  std::string primary_word;
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

// The model and the companion files HubOptions::sidecars asked for.
struct HubModel {
  std::string path;                                // as hub_resolve_model
  std::vector<std::pair<std::string, std::string>> sidecars;  // (word, local path) for each one found
  std::string sidecar(const std::string& word) const {
    for (const auto& [w, p] : sidecars)
      if (w == word) return p;
    return "";
  }
};
HubModel hub_resolve(const std::string& spec, const HubOptions& options);

// ---- cache management (`oxinfer list` / `oxinfer rm`, docs/hub.md "Listing and removing") ----

// One model in the cache: a GGUF quant of a repo (all its split parts, every snapshot), or a
// repo's safetensors checkpoint.
struct CachedModel {
  std::string repo;       // "org/name"
  std::string quant;      // "Q4_K_M" (upper case); "" for a safetensors checkpoint
  std::string format;     // "gguf" | "safetensors"
  std::string revision;   // the snapshot `path` is in: the one refs/main names when it holds the model
  std::string path;       // the first GGUF part, or the snapshot directory
  std::vector<std::string> files;  // repo-relative paths (any snapshot), sorted, unique
  uint64_t size_bytes = 0;  // the files' blobs inside the cache, each blob counted once
  int64_t last_used = 0;    // Unix seconds: newest atime / mtime of the files' blobs
  std::string name() const { return quant.empty() ? repo : repo + ":" + quant; }
};
// Every model in the cache at `cache_dir`, sorted by name. Folders that are not
// models--org--name, and snapshots holding no model, are skipped; a missing cache is empty.
std::vector<CachedModel> hub_list_cached(const std::string& cache_dir);

struct RemoveResult {
  std::vector<std::string> removed;  // what was deleted, relative to cache_dir
  uint64_t freed_bytes = 0;          // blob bytes freed
};
// Removes "org/name" (the whole models--org--name folder) or "org/name:quant" (that quant's
// snapshot entries and the blobs no other snapshot entry links to; the repo folder too when no
// model is left in it). Never follows a link out of the cache, never deletes outside it.
// Throws oxi::Error: kInvalidArgument (bad spec, unknown model or quant, with the quants there are).
RemoveResult hub_remove_cached(const std::string& cache_dir, const std::string& spec);

}  // namespace oxi
