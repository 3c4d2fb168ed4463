// Images in chat requests (OpenAI `image_url` content parts; the Anthropic and ollama dialects
// translate theirs into those): where the bytes come from, and what a prompt with images carries
// into Engine::generate.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "vision/image.h"

namespace oxi::server {

// Largest image the server decodes (pixels, from the header before any pixel memory) and the most
// decoded RGB bytes one request may hold: 4096 × 4096, 256 MiB.
inline constexpr int64_t kMaxServerImagePixels = 4096ll * 4096ll;
inline constexpr size_t kMaxRequestImageBytes = 256u << 20;

struct PromptImage {
  vision::RgbImage pixels;  // decoded
  std::vector<int32_t> ids; // image_row_ids of its bytes: its key in the prompt and the encode cache
  int64_t nx = 0, ny = 0;   // the merged grid the tower makes of it: nx · ny rows
  size_t first = 0;         // prompt entry of its first row
};

// A prompt's images (in prompt order) and the mRoPE positions of every prompt entry.
struct PromptMedia {
  std::vector<PromptImage> images;
  std::vector<int32_t> pos3;  // [prompt entries, 3]
  bool non_causal = false;    // each image's rows see each other (Gemma 4 26B/31B; one pass per image)
};

// An image_url part of a message, in message order.
struct ImageRef {
  std::string url;
  std::string param;  // "messages[i].content[j].image_url", for errors
};
std::vector<ImageRef> image_refs(const nlohmann::json& messages);

// The bytes behind an image URL. data: URLs (base64) inline; file:// URLs only when they resolve
// (symlinks followed) to a file under media_dir ("" : file URLs refused); http(s):// and other
// schemes never fetched. RequestError 400 naming the reason otherwise.
std::string image_url_bytes(const ImageRef& ref, const std::string& media_dir);

// Standard base64 (RFC 4648 §4, padding optional, ASCII whitespace ignored); false on any other
// character or a bad length.
bool base64_decode(std::string_view in, std::string& out);

// The ids an image's rows carry in the prompt (and so in the prompt cache's keys): 8 negative
// ids from the SHA-256 of its file bytes (31 bits each), so the same image is the same prefix
// and another image is not.
std::vector<int32_t> image_row_ids(std::string_view bytes);

}  // namespace oxi::server
