// Gemma 4 weights of one layer as the model holds them (views into the file mapping or the load
// arena; norms and scales in f32), shared by the CPU forward (model.cpp) and the device forward
// (device_forward.cpp).
#pragma once

#include <vector>

#include "kernels/matmul.h"

namespace oxi::gemma4 {

struct Expert3D {  // a stack of E matrices [E, rows, cols] in one tensor
  DType dtype = DType::F32;
  int64_t rows = 0, cols = 0;
  const uint8_t* data = nullptr;
  uint64_t row_bytes = 0;
  MatrixView slice(int64_t e, int64_t row0, int64_t nrows) const {
    MatrixView m;
    m.dtype = dtype;
    m.rows = nrows;
    m.cols = cols;
    m.row_bytes = row_bytes;
    m.data = data + (static_cast<uint64_t>(e) * static_cast<uint64_t>(rows) + static_cast<uint64_t>(row0)) * row_bytes;
    return m;
  }
};

struct Layer {
  std::vector<float> attn_norm, q_norm, k_norm, post_attn_norm, ffn_norm, post_ffn_norm;
  MatrixView wq, wk, wv, wo, gate, up, down;
  bool has_v = false;
  bool owns_kv = false;
  // MoE
  bool moe = false;
  std::vector<float> pre_ffn_norm2, post_ffn_norm1, post_ffn_norm2, router_scale, expert_scale;
  MatrixView router;
  Expert3D gate_exps, up_exps, down_exps;
  int64_t gate_row0 = 0, up_row0 = 0;  // row offsets inside the fused gate_up stack
  // per-layer embedding
  MatrixView ple_gate, ple_proj;
  std::vector<float> ple_post_norm;
  float out_scale = 1.0f;
};

}  // namespace oxi::gemma4
