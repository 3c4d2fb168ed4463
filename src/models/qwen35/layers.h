// Qwen 3.5 weights of one layer as the model holds them (views into the file mapping or the load
// arena; small vectors in f32), shared by the CPU forward (model.cpp) and the device forward
// (device_forward.cpp).
#pragma once

#include <vector>

#include "kernels/matmul.h"

namespace oxi::qwen35 {

struct GdnW {
  MatrixView qkv, z, b, a, out;
  std::vector<float> conv;  // as loaded [conv_dim, K], tap 0 = oldest; transposed to [K, conv_dim] after load
  std::vector<float> ssm_a, dt_bias, norm;
};

struct AttnW {
  MatrixView q, k, v, o;
  std::vector<float> q_norm, k_norm;
};

struct FfnW {
  MatrixView gate, up, down;  // dense
  MatrixView router;          // MoE [E, d]
  std::vector<MatrixView> exp_gate, exp_up, exp_down;
  bool has_shared = false;
  MatrixView sh_gate, sh_up, sh_down, sh_inp;  // sh_inp: [1, d]
};

struct Layer {
  bool recurrent = false;
  int cache = -1;  // index into the state's GDN or attention arrays
  std::vector<float> attn_norm, post_norm;
  GdnW gdn;
  AttnW attn;
  FfnW ffn;
};

}  // namespace oxi::qwen35
