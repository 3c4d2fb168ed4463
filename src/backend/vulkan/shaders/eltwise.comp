#version 450
// Elementwise over n: op 0 y = silu(a)·b, 1 y = gelu_tanh(a)·b, 2 y = cap·tanh(a / cap) (softcap,
// in place: y is a), 3 y = a + b (add, in place), 4 y = a·cap (scale, in place), 5 y = a·b[i mod width]
// (mul_cols: b one row of `width`, in place). Grid-stride loop
// (the dispatch is capped at 65535 × 256 invocations).
#extension GL_GOOGLE_include_directive : require
layout(local_size_x = 256) in;
layout(std430, binding = 0) readonly buffer Ab { float A[]; };
layout(std430, binding = 1) readonly buffer Bb { float B[]; };
layout(std430, binding = 2) buffer Yb { float Y[]; };
layout(push_constant) uniform P { uint a_off, b_off, y_off, n, op; float cap; uint width; } p;
#include "common.glsl"

void main() {
  uint step = gl_NumWorkGroups.x * gl_NumWorkGroups.y * 256u;
  for (uint i = group_index() * 256u + gl_LocalInvocationID.x; i < p.n; i += step) {
    float a = A[p.a_off + i];
    if (p.op == 0u) {
      Y[p.y_off + i] = a / (1.0 + exp(-a)) * B[p.b_off + i];
    } else if (p.op == 1u) {
      float u = 0.7978845608028654 * (a + 0.044715 * a * a * a);
      Y[p.y_off + i] = 0.5 * a * (1.0 + tanh_safe(u)) * B[p.b_off + i];
    } else if (p.op == 2u) {
      Y[p.y_off + i] = p.cap * tanh_safe(a / p.cap);
    } else if (p.op == 3u) {
      Y[p.y_off + i] = a + B[p.b_off + i];
    } else if (p.op == 4u) {
      Y[p.y_off + i] = a * p.cap;
    } else {
      Y[p.y_off + i] = a * B[p.b_off + i % p.width];
    }
  }
}
