// The chat web UI of `oxinfer serve` (docs/server.md "Web UI"): the files of src/server/webui/,
// embedded in the binary at build time (webui/embed.cmake writes webui_assets.cpp).
#pragma once

#include <httplib.h>

#include <cstddef>

namespace oxi::server {

struct WebAsset {
  const char* path;           // "/app.js"
  const char* mime;           // Content-Type
  const unsigned char* data;  // size bytes (plus a 0 that is not part of the file)
  size_t size;
  const char* etag;           // quoted, as sent: "\"0123abcd…\""
};
extern const WebAsset kWebAssets[];
extern const size_t kWebAssetCount;

// GET (and HEAD) / → index.html and /NAME → each file: its Content-Type, an ETag (304 to a
// matching If-None-Match), Cache-Control: no-cache (revalidated every time, so a new build's UI is
// seen at once), and a Content-Security-Policy that allows only this origin's files (no inline
// script or style, no other host). No API key is asked for these files.
void install_webui(httplib::Server& svr);

}  // namespace oxi::server
