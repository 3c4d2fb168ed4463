// Images and audio in chat requests (OpenAI `image_url` content parts, which the Anthropic, ollama
// and Responses dialects translate theirs into; OpenAI `input_audio` parts for Gemma 4's audio
// tower): where the bytes come from, and what a prompt with media carries into Engine::generate.
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
// Longest audio one request may hold, decoded (all its clips): 10 minutes of 16 kHz samples
// (38 MiB of floats, 20 30-second chunks, ~1500 rows at Gemma 4's 25 rows a second — more than
// the default context holds anyway). docs/server.md "Audio" says why.
inline constexpr int64_t kMaxRequestAudioSeconds = 600;

// One image or audio clip of a prompt.
struct PromptImage {
  vision::RgbImage pixels;  // decoded (an image)
  std::vector<int32_t> ids; // image_row_ids of its bytes: its key in the prompt and the encode cache
  int64_t nx = 0, ny = 0;   // the merged grid the tower makes of it: nx · ny rows (audio: rows × 1)
  size_t first = 0;         // prompt entry of its first row
  // Audio (Gemma 4): 16 kHz mono samples, and the rows of each 30-second chunk (Σ = nx), each
  // chunk pre-filled as its own piece as llama.cpp's mtmd decodes them.
  bool audio = false;
  std::vector<float> samples;
  std::vector<int64_t> chunks;
};

// A prompt's images and audio clips (in prompt order) and the mRoPE positions of every prompt entry.
struct PromptMedia {
  std::vector<PromptImage> images;
  std::vector<int32_t> pos3;  // [prompt entries, 3]
  bool non_causal = false;    // each image's rows see each other (Gemma 4 26B/31B; one pass per image)
};

// An image_url or input_audio part of a message, in message order.
struct ImageRef {
  std::string url;    // an image's URL; audio: the base64 data
  std::string param;  // "messages[i].content[j].image_url" (or ".input_audio"), for errors
  bool audio = false;
};
std::vector<ImageRef> media_refs(const nlohmann::json& messages);

// An input_audio part's file bytes (its base64 data); RequestError 400 for bad or empty base64.
std::string audio_part_bytes(const ImageRef& ref);

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
