// Internals of the hub library, exposed for its unit tests: SHA-256, file selection and quant
// matching, the cache layout, HTTP through libcurl, and blob downloads.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "core/error.h"
#include "hub/hub.h"

struct curl_slist;

namespace oxi::hub {

// ---- SHA-256 (FIPS 180-4) ----
class Sha256 {
 public:
  Sha256();
  void update(const void* data, size_t n);
  std::string hex_digest();  // finishes; the object must not be updated afterwards

 private:
  void block(const uint8_t* p);
  uint32_t h_[8];
  uint8_t buf_[64];
  size_t buf_len_ = 0;
  uint64_t total_ = 0;
};
std::string sha256_hex(const std::string& data);

// ---- names and validation ----
bool is_hex(const std::string& s, size_t len);  // lowercase or uppercase hex digits, exactly len
// A repo-relative path from the Hub that is safe to place under a snapshot directory: relative,
// no "..", no empty components, no backslashes or control characters.
bool is_safe_repo_path(const std::string& path);
// A blob name (etag / oid) safe as a file name: [0-9A-Za-z_-], 1..128 characters.
bool is_safe_blob_name(const std::string& name);
std::string repo_folder_name(const std::string& repo);  // "org/name" → "models--org--name"
std::string url_encode(const std::string& s, bool keep_slash);
std::string env_or(const char* name, const std::string& def);
bool env_truthy(const char* name);  // "1", "true", "yes", "on" (any case)
std::string upper(std::string s);  // ASCII

// ---- file selection ----
struct Selection {
  std::vector<std::string> files;  // repo-relative paths to fetch / check
  std::string result;              // repo-relative file to return; "" → the snapshot directory
  bool gguf = false;
};
// Picks a model's files from a repo listing. `quant` empty → HF checkpoint if the repo has one,
// else the GGUF for Q4_K_M (or the only GGUF). Throws oxi::Error with the available quants.
Selection select_model_files(const std::vector<std::string>& paths, const std::string& quant,
                             const std::string& repo);
bool quant_matches(const std::string& path, const std::string& quant);
bool is_model_gguf(const std::string& path);  // a .gguf that is not an mmproj (vision tower)
std::string gguf_quant_label(const std::string& path);  // "x-Q4_K_M-00001-of-00002.gguf" → "Q4_K_M"
// "-00001-of-00003.gguf" split suffix: sets part/count and returns true.
bool parse_split_suffix(const std::string& path, int* part, int* count, std::string* prefix);

// The GGUF companion of `model` (a repo-relative GGUF path) whose file name contains `word`
// ("mmproj", "mtp-"), by llama.cpp's downloader's rule: it sits in the model's folder or a folder
// above it, the deepest such folder first; then, with a quant asked for, a name holding
// "-QUANT."; then the nearest bit width (the first number of its quant label: Q4_K_M → 4, F16 →
// 16) to the quant's, else to the model file's. "" when none.
std::string select_sidecar(const std::vector<std::string>& paths, const std::string& model, const std::string& word,
                           const std::string& quant);

// The files to fetch: the model's (select_model_files), or with `primary_word` ("mtp-": -hfd) the
// best GGUF at the repo's top level whose name holds it (select_sidecar's rule), else — a draft
// model's own repo — the model's files as without it.
Selection select_files(const std::vector<std::string>& paths, const HubSpec& spec, const std::string& primary_word);

// ---- cache (offline) ----
// Resolves from the cache only; throws oxi::Error(kIo) naming what is missing. Sidecars found in
// the snapshot are added to `found` (when given).
std::string resolve_in_cache(const std::string& cache_dir, const HubSpec& spec,
                             const std::vector<std::string>& sidecars = {},
                             std::vector<std::pair<std::string, std::string>>* found = nullptr,
                             const std::string& primary_word = "");

// ---- HTTP ----
// A transport failure (no HTTP status): connection refused, DNS, reset, timeout.
class NetworkError : public Error {
 public:
  using Error::Error;
};

struct HttpResponse {
  long status = 0;
  std::map<std::string, std::string> headers;  // lowercase names, final response only
  std::string body;
};
// GET (or HEAD) into memory, following redirects when `follow`. Throws NetworkError on transport
// failure and Error(kIo) if the body exceeds max_body.
HttpResponse http_fetch(const std::string& url, const std::string& token, bool head, bool follow,
                        size_t max_body = 64u << 20);

// Sets URL, timeouts, protocols, User-Agent and the Bearer token on a CURL* handle; the header list
// is returned in *headers for the caller to free with curl_slist_free_all.
void setup_common(void* curl, const std::string& url, curl_slist** headers, const std::string& token);

// CURLOPT_HEADERFUNCTION collecting into an HttpResponse (reset at each new status line).
size_t curl_header_cb(char* buf, size_t size, size_t n, void* http_response);

struct ErrorContext {
  std::string endpoint, repo, revision, path;
  bool has_token = false;
};
// Turns an HTTP error status into a one-line message (gated repo, not found, ...).
[[noreturn]] void throw_http_error(const HttpResponse& r, const std::string& url,
                                   const ErrorContext& ctx);

// ---- downloads ----
struct Progress;
struct BlobRequest {
  std::string url;        // .../resolve/<commit>/<path>
  std::string token;
  std::string blob_path;  // final path in blobs/
  std::string lock_path;  // .locks/models--org--name/<blob>.lock
  std::string label;      // repo-relative path for messages
  int64_t size = -1;      // expected size, -1 unknown
  std::string sha256;     // expected lowercase hex, "" → size check only
  ErrorContext ctx;
};
// Downloads into blob_path + ".incomplete" (resuming from it), verifies size and sha256, renames
// into place. Holds an exclusive flock on lock_path meanwhile. Never leaves a corrupt blob.
void download_blob(const BlobRequest& req, Progress* progress);

// ---- progress ----
struct Progress {
  explicit Progress(bool enabled);
  void begin_file(const std::string& label, int64_t size, int64_t already);
  void update(int64_t file_bytes);  // bytes of the current file present so far
  void end_file(bool ok);
  void set_total(int64_t total_bytes, int files) { total_ = total_bytes; files_ = files; }

  bool enabled, tty;
  int64_t total_ = 0, done_before_ = 0;  // over all files, done_before_ excludes the current one
  int files_ = 0, file_index_ = 0;
  std::string label_;
  int64_t size_ = -1, start_bytes_ = 0, cur_ = 0;
  double t0_ = 0, last_draw_ = -1, session_t0_ = -1;
  int64_t transferred_before_ = 0;  // bytes received over the network for finished attempts
};

}  // namespace oxi::hub
