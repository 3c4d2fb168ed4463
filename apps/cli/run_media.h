// `oxinfer run --image FILE` / `--audio FILE`: a prompt with images (Qwen 3.5, Gemma 4) and audio
// clips (Gemma 4) through an mmproj file or the HF checkpoint's own towers.
#pragma once

#include <string>
#include <vector>

#include "oxinfer.h"

namespace oxi::cli {

struct MediaRun {
  std::string mmproj;                // the vision tower (llama.cpp mmproj GGUF); "": the HF checkpoint's own
  std::vector<std::string> images;   // in order; placed at the prompt's <__media__> markers
  std::vector<std::string> audio;    // audio clips (Gemma 4)
  // The media in command-line order: 'i' (next of images) or 'a' (next of audio); empty: the
  // images, then the audio clips. Markers are filled in this order (llama-mtmd-cli keeps one list).
  std::string order;
  std::string text;                  // the user prompt
  std::string system;                // "" for none
  bool chat = true;                  // wrap in the chat template
  bool no_think = false;
  bool llama_preproc = false;        // llama.cpp mtmd's resize arithmetic instead of HF's
  long long n_predict = -1;
  long long n_ctx = 4096;
  bool ignore_eos = false;
  oxi_sampling_params sampling{};
};

// Loads the tower(s), encodes the images and audio, prefills text and image rows (mRoPE positions as
// Qwen3-VL's get_rope_index / llama.cpp's mtmd), generates and streams text to stdout. Throws
// oxi::Error (a model without vision, a bad image or mmproj, context overflow).
void run_with_images(oxi_model* model, const MediaRun& r);

}  // namespace oxi::cli
