// What a prompt with images needs beyond the tower, shared by `oxinfer run --image`
// (apps/cli/run_media.cpp) and the server (src/server/engine.cpp): the tower that goes with a text
// model, and the entry list (token ids and image rows) with Qwen3-VL's mRoPE positions.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "format/model_files.h"
#include "models/model.h"
#include "vision/qwen3vl.h"

namespace oxi::vision {

// The vision tower of a text model: the mmproj file when given, else the HF checkpoint's own
// (model.visual.* read in place, when config.json has a vision_config); nullptr when neither (a
// text-only model). oxi::Error: kUnsupported for a model family without vision support in oxinfer
// (only Qwen 3.5 has one), kInvalidArgument for a tower whose projection width is not the text
// model's embedding width, and what the tower loaders throw for a bad file.
std::unique_ptr<Qwen3VLTower> load_vision_tower(const ModelInfo& info, const ModelFiles& files,
                                                const std::string& mmproj);

// A prompt as model entries, built in order. Positions (Qwen3-VL get_rope_index; llama.cpp's mtmd
// advances the same way): text at p takes (p, p, p); an image whose first row is at p gives merged
// cell (r, c) the positions (t, h, w) = (p, p + r, p + c), and what follows resumes at
// p + max(rows, cols). The KV cache still takes one slot per entry, so after an image the RoPE
// position runs behind the cache position.
struct MediaEntries {
  std::vector<int32_t> tok;   // [n] token ids; image rows carry the (negative) ids add_image was given
  std::vector<int32_t> pos;   // [n] the t stream (what a model without mRoPE would use)
  std::vector<int32_t> pos3;  // [n, 3] (t, h, w)
  int64_t next = 0;           // the RoPE position of the next entry

  void add_text(std::span<const int32_t> ids);
  // The nx × ny rows of one image (row-major over the merged grid). Row k gets id
  // row_ids[k % row_ids.size()] (all negative: "an embedding row" to Model::forward_batch).
  void add_image(int64_t nx, int64_t ny, std::span<const int32_t> row_ids);
};

}  // namespace oxi::vision
