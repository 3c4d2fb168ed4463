#version 450
// Y[t, r] = Σ_c X[t, c] · W[r, c]: W [rows, cols] in its file layout (dequant.glsl), X [n, cols]
// and Y [n, y_stride] f32. A workgroup is 4 rows × 32 lanes and a tile of up to NT tokens: the 32
// lanes of a row take its 32-element chunks in turn (so the weight row is read once per token
// tile, and each chunk is dequantised once for all NT tokens), then add their partial sums in
// shared memory. Works for any n; a GEMV for n ≤ NT, and re-reads W per tile of NT tokens beyond
// (the device uses it for n ≤ 8, and the NT = 1 build for n = 1, which needs no token guards).
#extension GL_GOOGLE_include_directive : require
#extension GL_EXT_control_flow_attributes : require
layout(local_size_x = 32, local_size_y = 4) in;
layout(std430, binding = 0) readonly buffer Wb { uint W[]; };
layout(std430, binding = 1) readonly buffer Xb { float X[]; };
layout(std430, binding = 2) writeonly buffer Yb { float Y[]; };
layout(push_constant) uniform P {
  uint rows, cols, n, row_bytes, w_off;  // w_off: byte offset of row 0 in W
  uint x_off, y_off, y_stride;           // in floats
} p;
#include "common.glsl"
#include "dequant.glsl"

#ifndef NT
#define NT 8u  // tokens per workgroup; the decode variant (matmul1_TYPE) is built with NT = 1
#endif
shared float part[4][32][NT];

void main() {
  uint lane = gl_LocalInvocationID.x, ry = gl_LocalInvocationID.y;
  uint r = group_index() * 4u + ry;
  uint t0 = gl_WorkGroupID.z * NT, nt = min(NT, p.n - t0);
  float acc[NT];
  for (uint t = 0u; t < NT; ++t) acc[t] = 0.0;
  if (r < p.rows) {
    uint chunks = (p.cols + 31u) / 32u, row = p.w_off + r * p.row_bytes;
    float v[32];
    for (uint j = lane; j < chunks; j += 32u) {
      load_chunk(row, j, p.cols, v);
      uint base = 32u * j, m = min(32u, p.cols - base);
      // Constant trip counts with guards: v and acc stay in registers (a dynamic index would put
      // them in memory).
      [[unroll]] for (uint t = 0u; t < NT; ++t) {
        if (t < nt) {
          uint xo = p.x_off + (t0 + t) * p.cols + base;
          float s = 0.0;
          if (m == 32u) {
            [[unroll]] for (uint i = 0u; i < 32u; ++i) s += v[i] * X[xo + i];
          } else {
            [[unroll]] for (uint i = 0u; i < 32u; ++i)
              if (i < m) s += v[i] * X[xo + i];
          }
          acc[t] += s;
        }
      }
    }
  }
  [[unroll]] for (uint t = 0u; t < NT; ++t)
    if (t < nt) part[ry][lane][t] = acc[t];
  barrier();
  for (uint w = 16u; w > 0u; w >>= 1) {  // nt is the same for the whole workgroup
    if (lane < w)
      for (uint t = 0u; t < nt; ++t) part[ry][lane][t] += part[ry][lane + w][t];
    barrier();
  }
  if (lane < nt && r < p.rows) Y[p.y_off + (t0 + lane) * p.y_stride + r] = part[ry][0][lane];
}
