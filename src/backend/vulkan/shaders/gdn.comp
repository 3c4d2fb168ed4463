#version 450
// Gated DeltaNet, token by token, for value head h = gl_WorkGroupID.y and state columns
// c = 64·gl_WorkGroupID.x + lane. Each column of S_h [dk, dv] evolves on its own:
//   S ← α·S;  kv = β·(v − Sᵀk);  S ← S + k·kvᵀ;  o = Sᵀq      (α = exp(g))
// so an invocation owns one column (two passes over it per token, coalesced across lanes); q and k
// of the head's key head are shared through workgroup memory. The chunked form of the CPU runs the
// same recurrence here: results differ from it only by f32 rounding.
#extension GL_GOOGLE_include_directive : require
layout(local_size_x = 64) in;
layout(std430, binding = 0) readonly buffer Qb { float QKV[]; };
layout(std430, binding = 1) readonly buffer Gb { float GB[]; };
layout(std430, binding = 2) buffer Sb { float S[]; };
layout(std430, binding = 3) writeonly buffer Ob { float O[]; };
layout(push_constant) uniform P {
  uint qkv_off, qk_stride, gb_off, gb_stride, s_off, o_off, o_stride;
  uint T, Hk, Hv, dk, dv, tiled;
} p;

const uint MAX_DK = 256u;
shared float qs[MAX_DK], ks[MAX_DK];

void main() {
  uint h = gl_WorkGroupID.y, lane = gl_LocalInvocationID.x, c = gl_WorkGroupID.x * 64u + lane;
  uint kh = p.tiled != 0u ? h % p.Hk : h / (p.Hv / p.Hk);
  uint KD = p.Hk * p.dk, sb = p.s_off + h * p.dk * p.dv + c;
  for (uint t = 0u; t < p.T; ++t) {
    uint row = p.qkv_off + t * p.qk_stride;
    for (uint i = lane; i < p.dk; i += 64u) {
      qs[i] = QKV[row + kh * p.dk + i];
      ks[i] = QKV[row + KD + kh * p.dk + i];
    }
    barrier();
    if (c < p.dv) {
      float alpha = exp(GB[p.gb_off + t * p.gb_stride + h]), beta = GB[p.gb_off + t * p.gb_stride + p.Hv + h];
      float s = 0.0;
      for (uint i = 0u; i < p.dk; ++i) s += S[sb + i * p.dv] * ks[i];
      float kv = beta * (QKV[row + 2u * KD + h * p.dv + c] - alpha * s);
      float o = 0.0;
      for (uint i = 0u; i < p.dk; ++i) {
        float x = alpha * S[sb + i * p.dv] + ks[i] * kv;
        S[sb + i * p.dv] = x;
        o += x * qs[i];
      }
      O[p.o_off + t * p.o_stride + h * p.dv + c] = o;
    }
    barrier();  // before the next token's q, k overwrite the shared rows
  }
}
