// Serves the embedded web UI (webui.h).
#include "server/webui.h"

#include <string>

namespace oxi::server {

namespace {

// Only this origin's files and API; no inline code (the UI has none), no framing, no plugins.
// img-src data: is for the empty favicon (index.html), so the browser asks for no /favicon.ico.
constexpr const char* kCsp =
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; "
    "object-src 'none'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'";

void serve_asset(const WebAsset& a, const httplib::Request& req, httplib::Response& res) {
  res.set_header("ETag", a.etag);
  res.set_header("Cache-Control", "no-cache");
  res.set_header("Content-Security-Policy", kCsp);
  res.set_header("X-Content-Type-Options", "nosniff");
  res.set_header("Referrer-Policy", "no-referrer");
  if (req.get_header_value("If-None-Match") == a.etag) {
    res.status = 304;
    return;
  }
  res.status = 200;
  res.set_content(reinterpret_cast<const char*>(a.data), a.size, a.mime);
}

}  // namespace

void install_webui(httplib::Server& svr) {
  for (size_t i = 0; i < kWebAssetCount; ++i) {
    const WebAsset& a = kWebAssets[i];
    auto handler = [&a](const httplib::Request& req, httplib::Response& res) { serve_asset(a, req, res); };
    std::string pattern;  // the path as a regex (httplib's routes are regexes): '.' escaped
    for (const char* p = a.path; *p; ++p) pattern += *p == '.' ? std::string("\\.") : std::string(1, *p);
    svr.Get(pattern, handler);
    if (std::string(a.path) == "/index.html") svr.Get("/", handler);
  }
}

}  // namespace oxi::server
