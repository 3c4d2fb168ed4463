// Qwen 3.5 hyper-parameters, read from an HF config.json (text_config nested or flat) or from GGUF
// metadata (arch qwen35 / qwen35moe). Shared by the model loader and the HF → GGUF converter.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "format/gguf.h"
#include "format/hf.h"

namespace oxi::qwen35 {

struct Config {
  std::string arch;  // "qwen35" | "qwen35moe"
  bool moe = false;
  int64_t n_embd = 0, n_layer = 0, n_vocab = 0, n_ctx_train = 0;
  int64_t n_head = 0, n_head_kv = 0, head_dim = 0, n_rot = 0;
  float rope_theta = 1e7f, eps = 1e-6f;
  std::array<int32_t, 4> mrope{0, 0, 0, 0};
  int64_t interval = 4;
  std::vector<bool> recurrent;  // per main layer: GDN (true) or full attention
  int64_t hk = 0, hv = 0, dk = 0, dv = 0, conv_k = 4;
  int64_t n_ff = 0;                                       // dense
  int64_t n_expert = 0, n_expert_used = 0, n_ff_exp = 0, n_ff_shexp = 0;  // MoE
  bool tied = false;
  int64_t n_mtp = 0;
  int64_t eos_id = -1;

  int64_t key_dim() const { return hk * dk; }
  int64_t value_dim() const { return hv * dv; }
  int64_t conv_dim() const { return 2 * key_dim() + value_dim(); }
  // Throws kFormat "<what>: <field> ..." on inconsistent or absurd values.
  void validate(const std::string& what) const;
};

// `text_config` (or the flat config) of an HF checkpoint. Tied: the flag from text_config, else
// the top level, else "no lm_head.weight tensor". Throws kFormat naming the key.
Config config_from_hf(const HfCheckpoint& hf);
Config config_from_gguf(const GgufFile& g, const std::string& path);

// V-head orders: HF groups the Hv/Hk value heads of each key head together, ggml tiles them
// (value head n uses key head n % Hk). vhead_perm: tiled head n ← HF head (n % Hk)·(Hv/Hk) + n / Hk.
std::vector<int64_t> vhead_perm(int64_t hk, int64_t hv);
// Rows [0, offset) in place, then `heads` blocks of `block` rows permuted by the head order.
std::vector<int64_t> block_perm(int64_t total, int64_t offset, const std::vector<int64_t>& head_perm, int64_t block);

}  // namespace oxi::qwen35
