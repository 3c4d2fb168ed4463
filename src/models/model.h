// The model interface the runtime, CLI, C API and server share. One implementation per
// architecture (models/qwen35, models/gemma4), chosen by models/registry.cpp from the file's
// architecture. A Model is immutable after load and may be used by several sequences at once;
// everything per-sequence lives in its SequenceState.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "format/model_files.h"
#include "kernels/pack.h"

namespace oxi {

struct ModelInfo {
  std::string arch;       // "qwen35", "qwen35moe", "gemma4"
  std::string name;       // general.name or the directory name
  int64_t n_vocab = 0;    // rows of the output layer (logits per token)
  int64_t n_embd = 0;
  int64_t n_layer = 0;
  int64_t n_ctx_train = 0;
  uint64_t n_params = 0;
  uint64_t weight_bytes = 0;
};

struct LoadOptions {
  int n_threads = 0;        // 0: all hardware threads
  std::string quant;        // "" keep file types; "q8_0" | "q4_0" | "q4_k": quantise at load (HF)
};

// Per-sequence state: KV caches, sliding-window rings, conv and recurrent states.
class SequenceState {
 public:
  virtual ~SequenceState() = default;
  virtual int64_t n_past() const = 0;    // tokens already consumed
  virtual int64_t n_ctx() const = 0;     // capacity
  virtual void clear() = 0;              // back to empty
  // Whole state as bytes, and back; restore(snapshot()) is bit-identical.
  virtual std::vector<uint8_t> snapshot() const = 0;
  virtual void restore(std::span<const uint8_t> bytes) = 0;
};

class Model {
 public:
  virtual ~Model() = default;
  virtual const ModelInfo& info() const = 0;
  virtual std::unique_ptr<SequenceState> new_state(int64_t n_ctx) const = 0;
  // Consumes `tokens` at positions n_past.. and advances the state. Writes logits:
  // all_logits ? [tokens.size(), n_vocab] : [n_vocab] for the last token. Throws oxi::Error
  // (kInvalidArgument) when the context would overflow or a token id is out of range.
  virtual void forward(SequenceState& state, std::span<const int32_t> tokens, float* logits,
                       bool all_logits) const = 0;

 private:
  // While any model is open, single-token decode may use packed weight copies (kernels/pack.h).
  kern::PackLease pack_lease_;
};

// Picks the implementation for files.architecture(); oxi::Error(kUnsupported) "unknown
// architecture X" otherwise.
std::unique_ptr<Model> load_model(const ModelFiles& files, const LoadOptions& options);

}  // namespace oxi
