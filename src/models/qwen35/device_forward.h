// Qwen 3.5 / 3.6 on a block-level compute device (nn/device.h): the whole forward pass — embedding
// rows, Gated DeltaNet and gated-attention mixers, dense and MoE FFNs, the output head — runs as the
// device's blocks on its memory. Weights are uploaded once at load; each sequence's KV caches and
// recurrent states live on the device; per pass the host sends token ids and positions and reads
// back only the logits / hidden rows asked for (and, for MoE, the router's choices).
//
// The same pass as the CPU forward (model.cpp), written block by block; the CPU device runs it
// with the same kernels, so it is tested against the CPU forward (tests/models/device_forward_test).
// Differences by design: the KV cache is f32 on the device (the CPU forward's default is f16
// storage), attention is the plain per-query block, and the chunked Gated DeltaNet is used for
// every unrecorded multi-token segment.
#pragma once

#include <memory>
#include <mutex>
#include <span>
#include <vector>

#include "models/model.h"
#include "models/qwen35/config.h"
#include "models/qwen35/layers.h"
#include "nn/device.h"

namespace oxi::qwen35 {

class DeviceForward {
 public:
  // Uploads the weights. `layers` must already hold the conv taps as [K, conv_dim].
  DeviceForward(std::shared_ptr<nn::Device> dev, const Config& c, bool tiled, const MatrixView& embd, const MatrixView& output,
                const std::vector<float>& out_norm, const std::vector<Layer>& layers);
  ~DeviceForward();

  std::unique_ptr<SequenceState> new_state(int64_t n_ctx, int64_t rollback) const;
  // Model::run for states made by new_state.
  void run(std::span<SequenceState* const> states, const Model::Pass& p, const BatchOutput& out) const;
  nn::Device& device() const { return *dev_; }

 private:
  struct DevLayer;
  struct Scratch;
  class State;
  void gdn(const DevLayer& L, const Layer& hl, const Model::Pass& p, State* const* sts, nn::Ref u, nn::Ref o) const;
  void attn(const DevLayer& L, const Layer& hl, const Model::Pass& p, State* const* sts, nn::Ref u, nn::Ref o) const;
  void ffn(const DevLayer& L, nn::Ref u, int64_t n, nn::Ref o) const;
  void swiglu(const nn::Weight& g, const nn::Weight& up, const nn::Weight& down, nn::Ref x, int64_t m, nn::Ref y) const;
  std::shared_ptr<nn::Buffer> vec(const std::vector<float>& v);

  std::shared_ptr<nn::Device> dev_;
  const Config& c_;
  bool tiled_;
  const std::vector<Layer>& host_;  // the model's layers (routing and shapes)
  std::unique_ptr<nn::Weight> embd_, output_own_;
  const nn::Weight* output_ = nullptr;
  std::shared_ptr<nn::Buffer> out_norm_;
  std::vector<DevLayer> layers_;
  // One pass at a time: the scratch buffers are the device's working memory of a pass.
  mutable std::mutex mu_;
  std::unique_ptr<Scratch> scratch_;
};

}  // namespace oxi::qwen35
