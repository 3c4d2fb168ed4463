// The Gemma 4 audio tower (llama.cpp projector `gemma4a`; HF Gemma4AudioModel + embed_audio; facts
// in docs/multimodal.md "Gemma 4 audio"): log-mel frames [T, 128] → two 3×3 stride-2 convolutions
// (each: channel LayerNorm with weight, ReLU) → [T/4, 32·c1] → input projection → `depth` conformer
// layers (half-step SiLU FFN; chunked local self-attention over the 12 previous frames and itself
// with sinusoidal relative positions, per-dim query scale and logit cap 50; light conv module:
// GLU, causal depthwise conv of 5, RMS norm, SiLU; half-step FFN; output RMS norm) → output
// projection (bias) → unweighted RMS norm → the projection into the text width. Clippable linears
// clamp their input and output when the file has bounds. Runs on the kernels' thread pool.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "audio/mel.h"
#include "format/hf.h"
#include "format/model_files.h"
#include "models/model.h"

namespace oxi::audio {

struct Gemma4AConfig {
  int64_t hidden = 0, depth = 0, heads = 0, c0 = 0, c1 = 0, mels = 128, kernel = 5;
  int64_t proj = 0;  // output_proj dims
  int64_t out = 0;   // text hidden width
  float eps = 1e-6f;
};

struct AudioEmbedding {
  std::vector<int64_t> chunk_tokens;  // rows per 30-second chunk (llama.cpp encodes each apart)
  std::vector<float> rows;            // [Σ chunk_tokens, out]
  int64_t n_tokens() const;
};

class Gemma4ATower {
 public:
  // Throws oxi::Error naming the file/tensor/key (kUnsupported for a file without a gemma4a tower).
  static std::unique_ptr<Gemma4ATower> from_mmproj(const std::string& path);
  static std::unique_ptr<Gemma4ATower> from_hf(const HfCheckpoint& hf);
  ~Gemma4ATower();

  const Gemma4AConfig& config() const { return c_; }
  // 16 kHz mono samples → rows: the clip in 30-second chunks (480000 samples, as llama.cpp's mtmd
  // splits it), each chunk's log-mel frames through forward().
  AudioEmbedding encode(const std::vector<float>& samples) const;
  // Rows for one chunk's log-mel frames: ⌊(⌊(T−1)/2⌋)/2⌋ + 1 … i.e. T halved twice (rounding up).
  std::vector<float> forward(const LogMel& mel) const;
  static int64_t tokens_for_frames(int64_t frames);
  // The rows encode() makes of n 16 kHz samples, per 30-second chunk, without running anything
  // (to place and bound a clip before encoding it). oxi::Error kInvalidArgument when a chunk is
  // shorter than one log-mel frame (161 samples), as encode() would fail on it.
  static std::vector<int64_t> chunk_rows(int64_t n_samples);

  struct Weights;  // defined in gemma4a.cpp

 private:
  Gemma4ATower() = default;
  Gemma4AConfig c_;
  std::unique_ptr<Weights> w_;
};

// The audio tower of a Gemma 4 text model: the mmproj file's (projector gemma4a) when given,
// else the HF checkpoint's own (model.audio_tower.*, when config.json has an audio_config);
// nullptr when neither. oxi::Error: kUnsupported for a model that is not Gemma 4 or an mmproj
// without an audio tower; kInvalidArgument for a projection width other than the text model's.
std::unique_ptr<Gemma4ATower> load_gemma4_audio_tower(const ModelInfo& info, const ModelFiles& files, const std::string& mmproj);

}  // namespace oxi::audio
