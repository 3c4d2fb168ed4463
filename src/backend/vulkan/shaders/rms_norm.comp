#version 450
// Per row of `width`: h += add (flag 1); y = h / sqrt(mean(h²) + eps) · w (flag 2: w present).
// One workgroup of 256 per row; y may be h itself (each invocation rereads only what it wrote).
#extension GL_GOOGLE_include_directive : require
layout(local_size_x = 256) in;
layout(std430, binding = 0) buffer Hb { float H[]; };
layout(std430, binding = 1) readonly buffer Ab { float A[]; };
layout(std430, binding = 2) readonly buffer Wb { float Wt[]; };
layout(std430, binding = 3) buffer Yb { float Y[]; };
layout(push_constant) uniform P { uint h_off, a_off, w_off, y_off, rows, width, flags; float eps; } p;
#include "common.glsl"

shared float part[256];

void main() {
  uint r = group_index(), tid = gl_LocalInvocationID.x;
  if (r >= p.rows) return;  // uniform over the workgroup
  uint h = p.h_off + r * p.width, a = p.a_off + r * p.width, y = p.y_off + r * p.width;
  float ss = 0.0;
  for (uint i = tid; i < p.width; i += 256u) {
    float x = H[h + i];
    if ((p.flags & 1u) != 0u) {
      x += A[a + i];
      H[h + i] = x;
    }
    ss += x * x;
  }
  part[tid] = ss;
  barrier();
  for (uint w = 128u; w > 0u; w >>= 1) {
    if (tid < w) part[tid] += part[tid + w];
    barrier();
  }
  float s = 1.0 / sqrt(part[0] / float(p.width) + p.eps);
  for (uint i = tid; i < p.width; i += 256u) {
    float x = H[h + i] * s;
    Y[y + i] = (p.flags & 2u) != 0u ? x * Wt[p.w_off + i] : x;
  }
}
