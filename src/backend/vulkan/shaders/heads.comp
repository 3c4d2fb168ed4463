#version 450
// Per-vector blocks on strided head views (nn::Heads): vector (r, h) of `width` floats starts at
// x_off + r·x_rs + h·x_hs of X (in place). op 0: x = x / sqrt(mean(x²) + eps) · w (w at g_off in G
// when has_w; rms_norm_heads); op 1: x = x · scale / max(‖x‖₂, eps) (l2_norm_heads); op 2:
// x = x · sigmoid(g), g the vector at g_off + r·g_rs + h·g_hs of G (mul_sigmoid_heads). The norms:
// one workgroup of 64 per vector (head widths are 64..512: a sum over a few strided loads per
// lane); the gate: grid-stride over every element (it may be D heads of width 1, e.g. a row's one
// gate value spread over the row at head stride 0).
#extension GL_GOOGLE_include_directive : require
layout(local_size_x = 64) in;
layout(std430, binding = 0) buffer Xb { float X[]; };
layout(std430, binding = 1) readonly buffer Gb { float G[]; };
layout(push_constant) uniform P { uint x_off, x_rs, x_hs, g_off, g_rs, g_hs, rows, heads, width, op, has_w; float eps, scale; } p;
#include "common.glsl"

shared float part[64];

void main() {
  uint v = group_index(), tid = gl_LocalInvocationID.x;
  if (p.op == 2u) {
    uint step = gl_NumWorkGroups.x * gl_NumWorkGroups.y * 64u, n = p.rows * p.heads * p.width;
    for (uint k = v * 64u + tid; k < n; k += step) {
      uint e = k % p.width, h = (k / p.width) % p.heads, r = k / (p.width * p.heads);
      uint xi = p.x_off + r * p.x_rs + h * p.x_hs + e;
      X[xi] = X[xi] * (1.0 / (1.0 + exp(-G[p.g_off + r * p.g_rs + h * p.g_hs + e])));
    }
    return;
  }
  if (v >= p.rows * p.heads) return;  // uniform over the workgroup
  uint r = v / p.heads, h = v % p.heads, x = p.x_off + r * p.x_rs + h * p.x_hs;
  float ss = 0.0;
  for (uint i = tid; i < p.width; i += 64u) ss += X[x + i] * X[x + i];
  part[tid] = ss;
  barrier();
  for (uint w = 32u; w > 0u; w >>= 1) {
    if (tid < w) part[tid] += part[tid + w];
    barrier();
  }
  if (p.op == 0u) {
    float s = 1.0 / sqrt(part[0] / float(p.width) + p.eps);
    for (uint i = tid; i < p.width; i += 64u) {
      float y = X[x + i] * s;
      X[x + i] = p.has_w != 0u ? y * G[p.g_off + i] : y;
    }
  } else {
    float s = 1.0 / max(sqrt(part[0]), p.eps);
    for (uint i = tid; i < p.width; i += 64u) X[x + i] = X[x + i] * s * p.scale;
  }
}
