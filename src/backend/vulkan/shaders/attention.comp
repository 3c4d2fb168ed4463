#version 450
// Causal (optionally windowed) GQA attention for query (t = gl_WorkGroupID.y, head h = .x):
// positions lo … p = pos0 + t of the cache rows K, V [n_pos, Hkv·hd] (kv head h / (H / Hkv)).
// One pass with a running max (online softmax) over blocks of 64 positions: each lane scores one
// position of the block (a dot over hd), then every lane rescales and adds the block's V rows into
// the output dims it owns (e = lane + 64k, hd ≤ 512). f32 throughout; f16_like is not modelled.
#extension GL_GOOGLE_include_directive : require
layout(local_size_x = 64) in;
layout(std430, binding = 0) readonly buffer Qb { float Q[]; };
layout(std430, binding = 1) readonly buffer Kb { float K[]; };
layout(std430, binding = 2) readonly buffer Vb { float V[]; };
layout(std430, binding = 3) writeonly buffer Ob { float O[]; };
layout(push_constant) uniform P {
  uint q_off, q_stride, q_head_stride, k_off, v_off, o_off, o_stride;
  uint pos0, H, Hkv, hd, window;
  float scale;
} p;

const uint MAX_HD = 512u, PER = MAX_HD / 64u;
shared float qs[MAX_HD], sc[64];

void main() {
  uint h = gl_WorkGroupID.x, t = gl_WorkGroupID.y, lane = gl_LocalInvocationID.x;
  uint qo = p.q_off + t * p.q_stride + h * p.q_head_stride;
  for (uint e = lane; e < p.hd; e += 64u) qs[e] = Q[qo + e];
  barrier();
  uint pos = p.pos0 + t, lo = (p.window > 0u && pos + 1u > p.window) ? pos + 1u - p.window : 0u;
  uint KW = p.Hkv * p.hd, off = (h / (p.H / p.Hkv)) * p.hd;
  float m = -1e30, l = 0.0, acc[PER];
  for (uint k = 0u; k < PER; ++k) acc[k] = 0.0;
  for (uint b = lo; b <= pos; b += 64u) {
    uint cnt = min(64u, pos + 1u - b), j = b + lane;
    float s = -1e30;
    if (lane < cnt) {
      uint ko = p.k_off + j * KW + off;
      float d = 0.0;
      for (uint e = 0u; e < p.hd; ++e) d += qs[e] * K[ko + e];
      s = d * p.scale;
    }
    sc[lane] = s;
    barrier();
    float bm = m;
    for (uint i = 0u; i < cnt; ++i) bm = max(bm, sc[i]);
    float corr = exp(m - bm);
    l *= corr;
    for (uint k = 0u; k < PER; ++k) acc[k] *= corr;
    for (uint i = 0u; i < cnt; ++i) {
      float w = exp(sc[i] - bm);
      l += w;
      uint vo = p.v_off + (b + i) * KW + off;
      for (uint k = 0u; k < PER; ++k) {
        uint e = lane + 64u * k;
        if (e < p.hd) acc[k] += w * V[vo + e];
      }
    }
    m = bm;
    barrier();  // sc is rewritten by the next block
  }
  uint oo = p.o_off + t * p.o_stride + h * p.hd;
  for (uint k = 0u; k < PER; ++k) {
    uint e = lane + 64u * k;
    if (e < p.hd) O[oo + e] = acc[k] / l;
  }
}
