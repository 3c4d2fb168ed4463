// The Gemma 4 vision tower (llama.cpp projector `gemma4v`; facts in docs/multimodal.md "Gemma 4"):
// pixels x ∈ [0, 1] mapped to 2x − 1, 16×16 patches through a bias-free linear embedding, a learned
// position table per axis (x: column, y: row) added, `depth` ViT blocks (RMS norms used as stored;
// per-head RMS-normed q and k with weights, v without; 2-D NeoX RoPE, the first half of each head
// by column and the second by row, base 100; attention scale 1; post-attention and post-FFN norms;
// GELU-tanh gated MLP; layer scalar), 3×3 average pooling scaled by √h, optional standardisation,
// then an unweighted RMS norm and the projection into the text width. Linears may carry clamp
// bounds (HF Gemma4ClippableLinear). One output row per pooled cell, row-major. Runs on the
// kernels' thread pool.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "format/hf.h"
#include "vision/image.h"

namespace oxi::vision {

struct Gemma4VConfig {
  int64_t hidden = 0, depth = 0, heads = 0, ffn = 0;
  int64_t patch = 16, pool = 3;
  int64_t pos_size = 0;  // position table entries per axis
  int64_t out = 0;       // text hidden width
  float eps = 1e-6f;
  float rope_theta = 100.0f;
  bool gelu_tanh = true;  // false: gelu_quick (what llama.cpp runs for a file without clip.use_gelu)
  std::array<float, 3> mean{0.0f, 0.0f, 0.0f}, stdv{1.0f, 1.0f, 1.0f};
  // Soft-token budget (pooled cells): llama.cpp's defaults for gemma4v.
  int64_t min_tokens = 70, max_tokens = 1120;
};

class Gemma4VTower {
 public:
  // Throws oxi::Error naming the file/tensor/key (kUnsupported for another projector type).
  static std::unique_ptr<Gemma4VTower> from_mmproj(const std::string& path);
  static std::unique_ptr<Gemma4VTower> from_hf(const HfCheckpoint& hf);
  ~Gemma4VTower();

  const Gemma4VConfig& config() const { return c_; }
  // The resized size `encode` uses: llama.cpp mtmd's arithmetic (sides multiples of patch · pool,
  // the pooled-token count within [min_tokens, max_tokens], aspect kept, padding to centre).
  Size target_size(Size in) const;
  ImageEmbedding encode(const RgbImage& img) const;
  // The tower on normalised planes [3, H, W] (after mean/std); H and W multiples of patch · pool.
  std::vector<float> forward(const float* planes, int64_t width, int64_t height) const;

  struct Weights;  // defined in gemma4v.cpp

 private:
  Gemma4VTower() = default;
  Gemma4VConfig c_;
  std::unique_ptr<Weights> w_;
};

}  // namespace oxi::vision
