// What a prompt with images needs beyond the tower, shared by `oxinfer run --image`
// (apps/cli/run_media.cpp) and the server (src/server/engine.cpp): the tower that goes with a text
// model, and the entry list (token ids and image rows) with Qwen3-VL's mRoPE positions.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "format/model_files.h"
#include "models/model.h"
#include "vision/gemma4v.h"
#include "vision/qwen3vl.h"

namespace oxi::vision {

// The vision tower of a text model: the mmproj file when given, else the HF checkpoint's own
// (model.visual.* read in place, when config.json has a vision_config); nullptr when neither (a
// text-only model). oxi::Error: kUnsupported for a model family without vision support in oxinfer
// (only Qwen 3.5 has one), kInvalidArgument for a tower whose projection width is not the text
// model's embedding width, and what the tower loaders throw for a bad file.
std::unique_ptr<Qwen3VLTower> load_vision_tower(const ModelInfo& info, const ModelFiles& files,
                                                const std::string& mmproj);

// The Gemma 4 vision tower of a text model (family gemma4): the mmproj file (projector gemma4v) when
// given, else the HF checkpoint's own (model.vision_tower.*); nullptr when neither. Errors as above.
std::unique_ptr<Gemma4VTower> load_gemma4_vision_tower(const ModelInfo& info, const ModelFiles& files,
                                                       const std::string& mmproj);

// Whether a Gemma 4 model attends to its image rows bidirectionally (one non-causal batch per
// image), as llama.cpp's mtmd decides it (mtmd_decode_use_non_causal): causal for the E2B / E4B
// widths (1536, 2560), non-causal for every other width (26B-A4B, 31B; HF's
// use_bidirectional_attention = "vision").
bool gemma4_image_non_causal(int64_t n_embd);

// A text model's vision tower with what placing an image needs, whichever the family: Qwen 3.5
// puts an image's rows between <|vision_start|> and <|vision_end|> at mRoPE positions, Gemma 4
// between <|image> and <image|> at plain positions (non-causally where
// gemma4_image_non_causal says so) — the strings llama.cpp's mtmd uses.
struct VisionInput {
  std::unique_ptr<Qwen3VLTower> qwen;
  std::unique_ptr<Gemma4VTower> gemma;
  int32_t begin = -1, end = -1;  // the tokens around an image's rows
  bool mrope = false;            // MediaEntries::mrope for this model
  bool non_causal = false;       // an image's rows see each other (one pass per image)
  // How Qwen 3.5 images are resized (HF's processor by default; llama.cpp's mtmd with
  // ResizeMode::kLlamaCpp). Gemma 4's tower has one arithmetic, llama.cpp's, and ignores it.
  PrepOptions prep;

  // The grid (nx, ny) of rows the tower makes of an image of `in` pixels, resized per `prep`.
  Size grid(Size in) const;
  ImageEmbedding encode(const RgbImage& img) const;
};

// The model's vision input: --mmproj when given, else the HF checkpoint's own tower; nullptr when
// neither. `special` turns a special-token text into its id (−1 when the vocabulary has none).
// oxi::Error as the loaders above, and kUnsupported for a family without images or a vocabulary
// without the image tokens.
// `resize`: VisionInput::prep's mode (--image-preproc; Qwen 3.5 only).
std::unique_ptr<VisionInput> load_vision_input(const ModelInfo& info, const ModelFiles& files, const std::string& mmproj,
                                               const std::function<int32_t(const char*)>& special,
                                               ResizeMode resize = ResizeMode::kHf);

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
  // true: Qwen3-VL's 3-stream positions for image rows (below); false: plain 1-D positions, one
  // per row (Gemma 4, as llama.cpp's mtmd for a model without mRoPE).
  bool mrope = true;

  void add_text(std::span<const int32_t> ids);
  // The nx × ny rows of one image (row-major over the merged grid). Row k gets id
  // row_ids[k % row_ids.size()] (all negative: "an embedding row" to Model::forward_batch).
  void add_image(int64_t nx, int64_t ny, std::span<const int32_t> row_ids);
  // One audio clip as llama.cpp's mtmd writes it for Gemma 4: `begin` (<|audio>), each 30-second
  // chunk's rows at plain positions (chunk_rows[i] rows each, ids as add_image's), `end`
  // (<audio|>). Returns the entry of each chunk's first row (each chunk is its own batch there).
  // Shared by `oxinfer run --audio`, the server and oxi_context_prefill_audio.
  std::vector<size_t> add_audio(int32_t begin, std::span<const int64_t> chunk_rows, std::span<const int32_t> row_ids,
                                int32_t end);
};

}  // namespace oxi::vision
