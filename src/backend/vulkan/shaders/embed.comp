#version 450
// out[i, :] = row ids[i] of the weight table, dequantised: one invocation per 32-element chunk.
#extension GL_GOOGLE_include_directive : require
#extension GL_EXT_control_flow_attributes : require
layout(local_size_x = 64) in;
layout(std430, binding = 0) readonly buffer Wb { uint W[]; };
layout(std430, binding = 1) readonly buffer Ib { int ids[]; };
layout(std430, binding = 2) writeonly buffer Ob { float O[]; };
layout(push_constant) uniform P { uint cols, row_bytes, w_off, out_off; } p;
#include "dequant.glsl"

void main() {
  uint j = gl_GlobalInvocationID.x, i = gl_WorkGroupID.y, chunks = (p.cols + 31u) / 32u;
  if (j >= chunks || ids[i] < 0) return;  // ids of another part of the table: -1
  float v[32];
  load_chunk(p.w_off + uint(ids[i]) * p.row_bytes, j, p.cols, v);
  uint base = 32u * j, m = min(32u, p.cols - base), o = p.out_off + i * p.cols + base;
  [[unroll]] for (uint e = 0u; e < 32u; ++e)
    if (e < m) O[o + e] = v[e];
}
