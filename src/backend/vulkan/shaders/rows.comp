#version 450
// Row moves with ids from the host (rows of `width` floats). op 0, gather_rows: D row i = S row
// ids[i] (grid-stride over n·width). op 1, add_rows_scaled: D row ids[i] += w[i] · S row i, in the
// order of i (ids may repeat): one invocation per column walks the n rows, so repeated rows add up
// in the same order as on the host.
#extension GL_GOOGLE_include_directive : require
layout(local_size_x = 256) in;
layout(std430, binding = 0) readonly buffer Sb { float S[]; };
layout(std430, binding = 1) buffer Db { float D[]; };
layout(std430, binding = 2) readonly buffer Ib { int ids[]; };
layout(std430, binding = 3) readonly buffer Wb { float Wt[]; };
layout(push_constant) uniform P { uint s_off, d_off, n, width, op; } p;
#include "common.glsl"

void main() {
  uint step = gl_NumWorkGroups.x * gl_NumWorkGroups.y * 256u, first = group_index() * 256u + gl_LocalInvocationID.x;
  if (p.op == 0u) {
    for (uint k = first; k < p.n * p.width; k += step) {
      uint i = k / p.width, e = k % p.width;
      D[p.d_off + i * p.width + e] = S[p.s_off + uint(ids[i]) * p.width + e];
    }
  } else {
    for (uint e = first; e < p.width; e += step)
      for (uint i = 0u; i < p.n; ++i) {
        uint o = p.d_off + uint(ids[i]) * p.width + e;
        D[o] = D[o] + Wt[i] * S[p.s_off + i * p.width + e];
      }
  }
}
