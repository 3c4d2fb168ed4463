#version 450
// Causal depthwise conv + SiLU: y[t, c] = silu(Σ_j wT[j, c] · X[t + j, c]), X [K − 1 + T, C]
// (the K − 1 state rows, then the new rows), taps wT [K, C].
#extension GL_GOOGLE_include_directive : require
layout(local_size_x = 256) in;
layout(std430, binding = 0) readonly buffer Xb { float X[]; };
layout(std430, binding = 1) readonly buffer Wb { float Wt[]; };
layout(std430, binding = 2) writeonly buffer Yb { float Y[]; };
layout(push_constant) uniform P { uint x_off, w_off, y_off, C, K, T; } p;
#include "common.glsl"

void main() {
  uint total = p.T * p.C, step = gl_NumWorkGroups.x * gl_NumWorkGroups.y * 256u;
  for (uint id = group_index() * 256u + gl_LocalInvocationID.x; id < total; id += step) {
    uint t = id / p.C, c = id % p.C;
    float s = 0.0;
    for (uint j = 0u; j < p.K; ++j) s += Wt[p.w_off + j * p.C + c] * X[p.x_off + (t + j) * p.C + c];
    Y[p.y_off + id] = s / (1.0 + exp(-s));
  }
}
