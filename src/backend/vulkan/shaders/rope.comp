#version 450
// NeoX RoPE: pairs (j, j + n_rot/2) of each head rotated by the row's angle φ_j. The cos/sin table
// CS [rows, n_rot/2, 2] is computed on the host in double (exact at large positions and the same
// for plain RoPE and mRoPE, whose per-slot positions only change the table).
#extension GL_GOOGLE_include_directive : require
layout(local_size_x = 256) in;
layout(std430, binding = 0) buffer Xb { float X[]; };
layout(std430, binding = 1) readonly buffer Cb { float CS[]; };
layout(push_constant) uniform P { uint x_off, rows, row_stride, heads, head_stride, n_rot; } p;
#include "common.glsl"

void main() {
  uint half_ = p.n_rot / 2u, total = p.rows * p.heads * half_;
  uint step = gl_NumWorkGroups.x * gl_NumWorkGroups.y * 256u;
  for (uint id = group_index() * 256u + gl_LocalInvocationID.x; id < total; id += step) {
    uint j = id % half_, hh = (id / half_) % p.heads, r = id / (half_ * p.heads);
    float c = CS[2u * (r * half_ + j)], s = CS[2u * (r * half_ + j) + 1u];
    uint o = p.x_off + r * p.row_stride + hh * p.head_stride + j;
    float a = X[o], b = X[o + half_];
    X[o] = a * c - b * s;
    X[o + half_] = b * c + a * s;
  }
}
