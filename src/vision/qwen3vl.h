// The Qwen 3.5 vision tower (Qwen3-VL style, no deepstack): Conv3d patch embedding (patch 16,
// temporal patch 2: a still image is its own second frame, so the two time slices of the kernel are
// summed), learned position embeddings interpolated bilinearly (align-corners) from their square
// grid, pre-norm ViT blocks (LayerNorm, fused qkv, 2-D rotary on rows/columns, full attention,
// GELU-tanh MLP), then the merger: LayerNorm per patch, 2×2 neighbouring patches concatenated,
// fc1 → GELU (erf) → fc2 into the text model's width. One output row per 2×2 patches, in row-major
// order of the merged grid. Loads from llama.cpp's mmproj GGUF (projector `qwen3vl_merger`) or from
// the HF checkpoint's model.visual.* in place. Runs on the kernels' thread pool.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "format/hf.h"
#include "vision/image.h"

namespace oxi::vision {

struct Qwen3VLConfig {
  int64_t hidden = 0, depth = 0, heads = 0, ffn = 0;
  int64_t patch = 16, merge = 2;
  int64_t pos_side = 0;  // the learned position grid is pos_side × pos_side
  int64_t out = 0;       // text hidden width
  float eps = 1e-6f;
  float rope_theta = 10000.0f;
  std::array<float, 3> mean{0.5f, 0.5f, 0.5f}, stdv{0.5f, 0.5f, 0.5f};
  // HF preprocessor_config.json size.shortest_edge / longest_edge (pixels of the resized image).
  int64_t min_pixels = 65536, max_pixels = 16777216;
};

class Qwen3VLTower {
 public:
  // Throws oxi::Error naming the file/tensor/key (kUnsupported for another projector type).
  static std::unique_ptr<Qwen3VLTower> from_mmproj(const std::string& path);
  static std::unique_ptr<Qwen3VLTower> from_hf(const HfCheckpoint& hf);
  ~Qwen3VLTower();

  const Qwen3VLConfig& config() const { return c_; }
  // The resized size `encode` would use for an image of `in` pixels.
  Size target_size(Size in, const PrepOptions& opt = {}) const;
  // The normalised pixels ([3, H, W] planes, f32) of the image resized per `opt`.
  std::vector<float> preprocess(const RgbImage& img, Size target) const;
  // Resize, normalise, run the tower.
  ImageEmbedding encode(const RgbImage& img, const PrepOptions& opt = {}) const;
  // The tower on normalised planes [3, H, W]; H and W multiples of patch · merge.
  std::vector<float> forward(const float* planes, int64_t width, int64_t height) const;

  struct Weights;  // defined in qwen3vl.cpp

 private:
  Qwen3VLTower() = default;
  Qwen3VLConfig c_;
  std::unique_ptr<Weights> w_;
};

}  // namespace oxi::vision
