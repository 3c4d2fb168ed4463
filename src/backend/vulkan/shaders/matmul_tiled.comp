#version 450
// Y[t, r] = Σ_c X[t, c] · W[r, c] for many tokens (prefill): a workgroup computes a 64-row × 64-token
// tile of Y. Per 32-wide step of c, 64 invocations dequantise one weight chunk each (dequant.glsl)
// into shared memory and all 256 load the matching 64 × 32 block of X; then each invocation adds a
// 4 × 4 block of products. So each weight chunk is dequantised once per 64 tokens (the GEMV shader,
// matmul.comp, does it once per 8) and X is read from shared memory. Same push constants as
// matmul.comp; gl_WorkGroupID.z picks the token tile.
#extension GL_GOOGLE_include_directive : require
#extension GL_EXT_control_flow_attributes : require
layout(local_size_x = 16, local_size_y = 16) in;
layout(std430, binding = 0) readonly buffer Wb { uint W[]; };
layout(std430, binding = 1) readonly buffer Xb { float X[]; };
layout(std430, binding = 2) writeonly buffer Yb { float Y[]; };
layout(push_constant) uniform P {
  uint rows, cols, n, row_bytes, w_off;
  uint x_off, y_off, y_stride;
} p;
#include "common.glsl"
#include "dequant.glsl"

const uint BM = 64u, BN = 64u, BK = 32u;
shared float ws[BM][BK + 1u], xs[BN][BK + 1u];  // +1: no bank conflicts on the k loop

void main() {
  uint tx = gl_LocalInvocationID.x, ty = gl_LocalInvocationID.y, tid = ty * 16u + tx;
  uint r0 = group_index() * BM, t0 = gl_WorkGroupID.z * BN;
  float acc[4][4];
  for (uint a = 0u; a < 4u; ++a)
    for (uint b = 0u; b < 4u; ++b) acc[a][b] = 0.0;
  uint chunks = (p.cols + BK - 1u) / BK;
  float v[32];
  for (uint j = 0u; j < chunks; ++j) {
    if (tid < BM) {
      uint r = r0 + tid;
      if (r < p.rows) {
        load_chunk(p.w_off + r * p.row_bytes, j, p.cols, v);
        [[unroll]] for (uint k = 0u; k < BK; ++k) ws[tid][k] = v[k];
      } else {
        for (uint k = 0u; k < BK; ++k) ws[tid][k] = 0.0;
      }
    }
    for (uint i = tid; i < BN * BK; i += 256u) {
      uint t = i / BK, k = i % BK, c = j * BK + k;
      xs[t][k] = (t0 + t < p.n && c < p.cols) ? X[p.x_off + (t0 + t) * p.cols + c] : 0.0;
    }
    barrier();
    for (uint k = 0u; k < BK; ++k) {
      float wr[4], xr[4];
      [[unroll]] for (uint a = 0u; a < 4u; ++a) wr[a] = ws[ty * 4u + a][k];
      [[unroll]] for (uint b = 0u; b < 4u; ++b) xr[b] = xs[tx * 4u + b][k];
      [[unroll]] for (uint a = 0u; a < 4u; ++a)
        [[unroll]] for (uint b = 0u; b < 4u; ++b) acc[a][b] += wr[a] * xr[b];
    }
    barrier();
  }
  for (uint a = 0u; a < 4u; ++a)
    for (uint b = 0u; b < 4u; ++b) {
      uint r = r0 + ty * 4u + a, t = t0 + tx * 4u + b;
      if (r < p.rows && t < p.n) Y[p.y_off + t * p.y_stride + r] = acc[a][b];
    }
}
