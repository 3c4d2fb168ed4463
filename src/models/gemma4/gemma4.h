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
Config config_from_gguf(const GgufFile& gguf, const std::string& path);

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

// llama.cpp's CPU arithmetic reproduced bit for bit (ggml_numerics.cpp; docs/gemma4.md). `lanes`:
// the f32 vector width of the ggml build the host gets, 16 (AVX-512) or 8 (AVX2 + FMA).
int ggml_host_lanes();
float ggml_dot_f16(const uint16_t* x, const float* y, int64_t n, int lanes);  // ggml_vec_dot_f16, y f16-valued
float ggml_dot_f32(const float* x, const float* y, int64_t n, int lanes);     // ggml_vec_dot_f32
float ggml_v_expf(float x, int lanes);                                       // ggml_v_expf, one lane
double ggml_soft_max(float* x, int64_t n, float max, int lanes);             // ggml_vec_soft_max_f32
float ggml_gelu(float x);                                                    // ggml_vec_gelu_f32 (f16 table)
void ggml_geglu(float* g, const float* u, int64_t n);  // g[i] = ggml_gelu(g[i]) · u[i]
// ggml_rope_ext, NeoX mode, no scaling: n_heads heads of hd values at position pos, the first
// n_dims rotated; freq_factors (n_dims/2 divisors) may be null.
void ggml_rope_neox(float* x, int64_t n_heads, int64_t hd, int64_t pos, int64_t n_dims, float base, const float* freq_factors);
// One query row of ggml_flash_attn_ext (scale 1, no soft-cap, no sinks) over the consecutive KV
// cells [c0, c0 + n): k[i], v[i] are the rows of cell c0 + i (f16 or f32 values). `tiled`: the
// kernel ggml uses for ubatches of 64+ tokens, else its vector kernel. out: hd floats. A single
// query over a cache view of n_view ≥ 512 cells is split among llama.cpp's n_threads (0: never).
void ggml_flash_attn_row(const float* q, int64_t hd, const void* const* k, const void* const* v, int64_t c0, int64_t n,
                         bool kv_f16, bool tiled, int lanes, float* out, int64_t n_view = 0, int n_threads = 0);
// The same row as llama.cpp computes it with flash attention off: kq = K·q (ggml mul_mat),
// ggml_soft_max_ext over the cache view, kqv = V·softmax (mul_mat over the cells; the f16 cache
// rounds q and the weights to f16). `batch`: the ubatch has 2+ tokens (llamafile's sgemm applies);
// `one_head`: the model has one query head (its permuted q is then contiguous).
void ggml_attn_row_noflash(const float* q, int64_t hd, const void* const* k, const void* const* v, int64_t c0, int64_t n,
                           bool kv_f16, bool batch, bool one_head, int lanes, float* out);
// y = W·x for f32 W as ggml's CPU mul_mat orders it: llamafile's sgemm when T ≥ 2, cols % lanes == 0
// and rows % 4 == 0 (our kernels when their width matches), ggml_vec_dot_f32 otherwise and for
// mul_mat_id (expert) products.
void ggml_matmul_f32(const MatrixView& w, const float* x, int64_t T, float* y, int lanes, bool mul_mat_id);

}  // namespace oxi::gemma4
