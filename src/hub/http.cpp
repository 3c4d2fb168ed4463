// HTTP(S) through libcurl: small requests into memory, and the Hub's error statuses turned into
// one-line messages.
#include <curl/curl.h>

#include <cctype>
#include <mutex>

#include "hub/hub_internal.h"

namespace oxi::hub {

namespace {

void global_init() {
  static std::once_flag once;
  std::call_once(once, [] { curl_global_init(CURL_GLOBAL_DEFAULT); });
}

struct MemSink {
  HttpResponse* r;
  size_t max;
  bool overflow = false;
};

}  // namespace

size_t curl_header_cb(char* buf, size_t size, size_t n, void* ud) {
  auto* r = static_cast<HttpResponse*>(ud);
  const size_t len = size * n;
  std::string line(buf, len);
  while (!line.empty() && (line.back() == '\r' || line.back() == '\n')) line.pop_back();
  if (line.rfind("HTTP/", 0) == 0) {
    r->headers.clear();  // a new response (after a redirect): keep only the final one's headers
    return len;
  }
  const auto colon = line.find(':');
  if (colon == std::string::npos) return len;
  std::string name = line.substr(0, colon);
  for (auto& c : name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  size_t v = colon + 1;
  while (v < line.size() && (line[v] == ' ' || line[v] == '\t')) ++v;
  r->headers[name] = line.substr(v);
  return len;
}

namespace {

size_t mem_write_cb(char* buf, size_t size, size_t n, void* ud) {
  auto* s = static_cast<MemSink*>(ud);
  const size_t len = size * n;
  if (s->r->body.size() + len > s->max) {
    s->overflow = true;
    return 0;
  }
  s->r->body.append(buf, len);
  return len;
}

}  // namespace

void setup_common(void* handle, const std::string& url, curl_slist** headers, const std::string& token) {
  global_init();
  CURL* c = static_cast<CURL*>(handle);
  curl_easy_setopt(c, CURLOPT_URL, url.c_str());
  curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT, 20L);
  // Abort a stalled transfer: under 1 byte/s for 60 s.
  curl_easy_setopt(c, CURLOPT_LOW_SPEED_LIMIT, 1L);
  curl_easy_setopt(c, CURLOPT_LOW_SPEED_TIME, 60L);
  curl_easy_setopt(c, CURLOPT_MAXREDIRS, 10L);
  curl_easy_setopt(c, CURLOPT_PROTOCOLS_STR, "http,https");
  curl_easy_setopt(c, CURLOPT_REDIR_PROTOCOLS_STR, "http,https");
  const std::string ua = "User-Agent: oxinfer (hf-hub-cache compatible)";
  *headers = curl_slist_append(*headers, ua.c_str());
  if (!token.empty()) {
    // libcurl does not send this header on to another host after a redirect.
    const std::string auth = "Authorization: Bearer " + token;
    *headers = curl_slist_append(*headers, auth.c_str());
  }
  curl_easy_setopt(c, CURLOPT_HTTPHEADER, *headers);
}

HttpResponse http_fetch(const std::string& url, const std::string& token, bool head, bool follow,
                        size_t max_body) {
  CURL* c = curl_easy_init();
  if (!c) throw NetworkError(ErrorCode::kIo, "cannot initialise libcurl");
  HttpResponse r;
  MemSink sink{&r, max_body};
  curl_slist* headers = nullptr;
  char errbuf[CURL_ERROR_SIZE] = {0};
  setup_common(c, url, &headers, token);
  curl_easy_setopt(c, CURLOPT_ERRORBUFFER, errbuf);
  curl_easy_setopt(c, CURLOPT_FOLLOWLOCATION, follow ? 1L : 0L);
  curl_easy_setopt(c, CURLOPT_TIMEOUT, 300L);
  if (head) curl_easy_setopt(c, CURLOPT_NOBODY, 1L);
  curl_easy_setopt(c, CURLOPT_HEADERFUNCTION, curl_header_cb);
  curl_easy_setopt(c, CURLOPT_HEADERDATA, &r);
  curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, mem_write_cb);
  curl_easy_setopt(c, CURLOPT_WRITEDATA, &sink);
  const CURLcode rc = curl_easy_perform(c);
  curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &r.status);
  curl_slist_free_all(headers);
  curl_easy_cleanup(c);
  if (sink.overflow) {
    throw_error(ErrorCode::kIo, url + ": response larger than " + std::to_string(max_body >> 20) + " MiB");
  }
  if (rc != CURLE_OK) {
    throw NetworkError(ErrorCode::kIo, "cannot reach " + url + ": " +
                                           (errbuf[0] ? std::string(errbuf) : curl_easy_strerror(rc)));
  }
  return r;
}

void throw_http_error(const HttpResponse& r, const std::string& url, const ErrorContext& ctx) {
  auto header = [&](const char* n) {
    auto it = r.headers.find(n);
    return it == r.headers.end() ? std::string() : it->second;
  };
  const std::string code = header("x-error-code");
  std::string detail = header("x-error-message");
  const std::string st = "HTTP " + std::to_string(r.status);
  const std::string page = ctx.endpoint + "/" + ctx.repo;
  const std::string token_hint = "pass a token with --hf-token TOKEN or the HF_TOKEN environment variable";
  if (code == "GatedRepo" || (r.status == 403 && code != "RepoNotFound")) {
    if (ctx.has_token) {
      throw_error(ErrorCode::kIo, ctx.repo + " is gated or private and the token given has no access (" + st +
                                      "): request access at " + page + " with the token's account");
    }
    throw_error(ErrorCode::kIo, ctx.repo + " is gated or private (" + st + "): accept its terms at " + page +
                                    ", then " + token_hint);
  }
  if (code == "RepoNotFound" || (r.status == 401 && code.empty())) {
    throw_error(ErrorCode::kIo,
                "repository " + ctx.repo + " not found on " + ctx.endpoint + " (" + st + ")" +
                    (ctx.has_token ? std::string() : "; if it is private or gated, " + token_hint));
  }
  if (code == "RevisionNotFound") {
    throw_error(ErrorCode::kIo, "revision '" + ctx.revision + "' not found in " + ctx.repo + " (" + st + ")");
  }
  if (code == "EntryNotFound" || (r.status == 404 && !ctx.path.empty())) {
    throw_error(ErrorCode::kIo, "file " + ctx.path + " not found in " + ctx.repo + " (" + st + ")");
  }
  if (r.status == 404) {
    throw_error(ErrorCode::kIo, "repository " + ctx.repo + " or its revision '" + ctx.revision +
                                    "' not found on " + ctx.endpoint + " (" + st + ")");
  }
  if (r.status == 429) {
    throw_error(ErrorCode::kIo, "rate limited by " + ctx.endpoint + " (" + st + "); try again later");
  }
  if (detail.empty() && !r.body.empty() && r.body.size() < 300) {
    detail = r.body;
    for (auto& ch : detail) {
      if (static_cast<unsigned char>(ch) < 0x20) ch = ' ';
    }
  }
  throw_error(ErrorCode::kIo, st + " from " + url + (detail.empty() ? "" : ": " + detail));
}

}  // namespace oxi::hub
