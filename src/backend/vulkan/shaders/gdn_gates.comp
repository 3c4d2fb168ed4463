#version 450
// Gated DeltaNet gates of `rows` tokens, H value heads (nn::Device::gdn_gates): from a, b [rows, H],
// GB [rows, 2H] = (g = ssm_a · softplus(a + dt_bias), β = sigmoid(b)). Grid-stride over rows·H.
#extension GL_GOOGLE_include_directive : require
layout(local_size_x = 256) in;
layout(std430, binding = 0) readonly buffer Ab { float A[]; };
layout(std430, binding = 1) readonly buffer Bb { float B[]; };
layout(std430, binding = 2) readonly buffer Sb { float SA[]; };
layout(std430, binding = 3) readonly buffer Db { float DT[]; };
layout(std430, binding = 4) writeonly buffer Gb { float GB[]; };
layout(push_constant) uniform P { uint a_off, b_off, sa_off, dt_off, gb_off, rows, H; } p;
#include "common.glsl"

// log(1 + e^x) as the CPU's log1p(exp(x)) (x itself above 20): log1p through log(u)·(e^x)/(u − 1),
// u = 1 + e^x, exact to f32 rounding where e^x is below u's precision (plain log(1 + e^x) → 0).
float softplus(float x) {
  if (x > 20.0) return x;
  precise float e = exp(x), u = 1.0 + e;
  return u == 1.0 ? e : log(u) * (e / (u - 1.0));
}

void main() {
  uint step = gl_NumWorkGroups.x * gl_NumWorkGroups.y * 256u, n = p.rows * p.H;
  for (uint i = group_index() * 256u + gl_LocalInvocationID.x; i < n; i += step) {
    uint r = i / p.H, h = i % p.H, o = p.gb_off + r * 2u * p.H + h;
    GB[o] = SA[p.sa_off + h] * softplus(A[p.a_off + i] + DT[p.dt_off + h]);
    GB[o + p.H] = 1.0 / (1.0 + exp(-B[p.b_off + i]));
  }
}
