// Gemma 4 internals shared by the model, the converter and the tests (not a public interface).
// Spec: shared/spec/models.md Part B. Numerics follow llama.cpp's CPU path (docs/gemma4.md).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "format/gguf.h"
#include "format/hf.h"
#include "kernels/matmul.h"
#include "models/model.h"

namespace oxi::gemma4 {

// Hyper-parameters in one neutral form, filled from an HF config or from GGUF metadata.
struct Config {
  int64_t n_vocab = 0;
  int64_t n_embd = 0;
  int64_t n_layer = 0;
  int64_t n_head = 0;
  int64_t head_dim_swa = 0;   // sliding layers
  int64_t head_dim_full = 0;  // full (global) layers
  std::vector<uint8_t> is_swa;     // per layer: 1 = sliding
  std::vector<int64_t> n_head_kv;  // per layer
  std::vector<int64_t> n_ff;       // per layer (double-wide on KV-shared layers)
  int64_t window = 0;
  int64_t n_kv_shared = 0;     // last N layers reuse earlier caches
  int64_t n_embd_per_layer = 0;  // P (0: no per-layer embeddings)
  int64_t n_expert = 0, n_expert_used = 0, n_ff_exp = 0;
  float eps = 1e-6f;
  float rope_base_swa = 10000.0f;
  float rope_base_full = 1000000.0f;
  int64_t n_rot_swa = 0;   // rotated dims on sliding layers (ggml n_dims)
  int64_t n_rot_full = 0;  // ggml n_dims on full layers (= head_dim_full, with rope_freqs)
  std::vector<float> rope_freqs_full;  // head_dim_full/2 divisors (1 or 1e30); empty: all 1
  float final_softcap = 0.0f;
  int64_t n_ctx_train = 0;
  bool k_eq_v = false;          // full layers without v_proj (HF flag; GGUF: tensor absence)
  std::string name;
  // An assistant drafter (spec B.5; HF gemma4_assistant, GGUF gemma4-assistant): every layer reads
  // the target's cache (n_kv_shared == n_layer), and its input is concat(target embedding,
  // target hidden) of n_embd_backbone each.
  bool assistant = false;
  int64_t n_embd_backbone = 0;

  bool swa(int64_t l) const { return is_swa[static_cast<size_t>(l)] != 0; }
  int64_t head_dim(int64_t l) const { return swa(l) ? head_dim_swa : head_dim_full; }
  int64_t n_layer_kv() const { return n_layer - n_kv_shared; }  // layers owning a cache
  // The layer whose cache layer l reads: itself when it owns one, else the last owning layer of
  // the same type (the HF rule; equals llama.cpp's for every shipped checkpoint).
  int64_t kv_source(int64_t l) const;
  // Checks internal consistency; throws oxi::Error(kFormat) naming `where`.
  void validate(const std::string& where) const;
};

Config config_from_hf(const HfCheckpoint& hf);
// GGUF architecture "gemma4" or (an assistant drafter) "gemma4-assistant", whose keys carry that
// prefix plus embedding_length_out (the target width) and nextn_predict_layers == block_count.
Config config_from_gguf(const GgufFile& gguf, const std::string& path);
// llama.cpp's architecture string of the assistant drafters.
inline constexpr const char* kAssistantArch = "gemma4-assistant";

// HF text-decoder prefix in use ("model.language_model." or "model.").
std::string hf_prefix(const HfCheckpoint& hf);
// GGUF tensor name → HF tensor name (without prefix); "" when there is no HF counterpart
// (rope_freqs). Per-layer names "blk.N.X" map to "layers.N.Y".
std::string gguf_to_hf_name(const std::string& gguf_name);
// HF name (prefix stripped) → GGUF name; "" when unknown.
std::string hf_to_gguf_name(const std::string& hf_name);

// Numerics helpers (exposed for the unit tests).
float gelu_ggml(float x);       // llama.cpp CPU GELU (f16 table) = ggml_gelu
float gelu_tanh_exact(float x);

}  // namespace oxi::gemma4
