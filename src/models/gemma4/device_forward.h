// Gemma 4 on a block-level compute device (nn/device.h): embeddings (· √d), per-layer embeddings,
// sliding and global attention with shared KV, GeGLU FFN, the MoE block, the output head with its
// softcap — all as the device's blocks on its memory; weights uploaded once, each sequence's KV
// caches on the device. The host sends ids and positions and reads back the rows asked for (and,
// for MoE, the router's choices).
//
// Differences from the CPU forward (model.cpp), which follows llama.cpp's CPU arithmetic: GELU is
// the tanh formula (not ggml's f16 table), f32 products in one order for every batch size, f32 KV
// caches, sliding layers keep a full cache (no ring) and attention is the plain per-query block.
// The results agree within f32 rounding (tests/models/device_forward_test.cpp); the CPU forward
// stays the path that matches llama.cpp bit for bit.
#pragma once

#include <memory>
#include <mutex>
#include <span>
#include <vector>

#include "models/gemma4/gemma4.h"
#include "models/gemma4/layers.h"
#include "models/model.h"
#include "nn/device.h"

namespace oxi::gemma4 {

// What the device forward reads of the loaded model (references: the model outlives it).
struct HostWeights {
  const MatrixView& tok_embd;
  const MatrixView& output;
  const std::vector<float>& output_norm;
  const MatrixView& ple_tok;
  const MatrixView& ple_model_proj;
  const std::vector<float>& ple_proj_norm;
  const std::vector<Layer>& layers;
};

class DeviceForward {
 public:
  DeviceForward(std::shared_ptr<nn::Device> dev, const Config& c, const HostWeights& w);
  ~DeviceForward();

  std::unique_ptr<SequenceState> new_state(int64_t n_ctx, int64_t rollback) const;
  void run(std::span<SequenceState* const> states, const Model::Pass& p, const BatchOutput& out) const;

 private:
  struct DevLayer;
  struct Scratch;
  class State;
  void ffn_moe(const DevLayer& L, const Layer& hl, nn::Ref xn, nn::Ref xr, int64_t T, nn::Ref out) const;
  void geglu_ffn(const nn::Weight& g, const nn::Weight& up, const nn::Weight& down, nn::Ref x, int64_t T, nn::Ref y) const;
  std::shared_ptr<nn::Buffer> vec(const std::vector<float>& v);

  std::shared_ptr<nn::Device> dev_;
  const Config& c_;
  const std::vector<Layer>& host_;
  std::unique_ptr<nn::Weight> tok_embd_, output_own_, ple_tok_, ple_proj_;
  const nn::Weight* output_ = nullptr;
  std::shared_ptr<nn::Buffer> output_norm_, ple_proj_norm_;
  std::vector<DevLayer> layers_;
  mutable std::mutex mu_;  // one pass at a time (the scratch buffers)
  std::unique_ptr<Scratch> scratch_;
};

}  // namespace oxi::gemma4
