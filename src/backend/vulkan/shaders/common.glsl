// Shared by every shader: 2D workgroup indexing (a dispatch is split over x and y when it needs more
// than 65535 groups, the guaranteed maxComputeWorkGroupCount) and a NaN-free tanh.
#ifndef OXI_COMMON_GLSL
#define OXI_COMMON_GLSL

// Linear index of this workgroup over a grid of gl_NumWorkGroups.x × .y groups.
uint group_index() { return gl_WorkGroupID.y * gl_NumWorkGroups.x + gl_WorkGroupID.x; }

// tanh, finite for every input (some drivers' tanh overflows to NaN) and accurate to f32 rounding
// near 0 too: through exp(−2|x|) from |x| = 0.25 up, and its odd series to x¹¹ below (where
// 1 − exp(−2|x|) would cancel; the first term left out is < 6e-11).
float tanh_safe(float x) {
  float a = abs(x);
  if (a < 0.25) {
    float z = x * x;
    return x * (1.0 + z * (-1.0 / 3.0 + z * (2.0 / 15.0 + z * (-17.0 / 315.0 + z * (62.0 / 2835.0 + z * (-1382.0 / 155925.0))))));
  }
  float t = exp(-2.0 * a);
  return sign(x) * (1.0 - t) / (1.0 + t);
}

#endif
