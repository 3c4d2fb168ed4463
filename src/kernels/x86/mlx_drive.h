// The AVX2 and AVX-512 MLX affine-group kernels' tile driver, included inside each ISA file's
// anonymous namespace after its `mlx_row<kBits, G, NT>(row, x, cols, y)` (one weight row against
// NT ≤ 4 tokens), so every instantiation stays local to its ISA's object file.
// MLX affine groups (format/dtype.h: per group of G, f32 scale s and bias b, then the codes),
// f32 activations as mlx multiplies them. Per row, tokens in fours: each 32-code chunk is widened
// to f32 and dequantised in registers (fma(q, s, b), one rounding less than the scalar reference:
// the difference is summation-order sized), then multiplied into two accumulators per token (two
// independent fma chains). The weights are read once per four tokens; no activation conversion.
template <class Rows>
void mlx_drive(const MMArgs& a, const Rows& rows) {
  for (int64_t r = a.r0; r < a.r1; ++r) {
    const uint8_t* row = a.w + r * a.w_stride;
    for (int64_t t0 = a.t0; t0 < a.t1; t0 += 4) {
      const int nt = static_cast<int>(std::min<int64_t>(4, a.t1 - t0));
      const float* x[4];
      float* y[4];
      for (int k = 0; k < nt; ++k) {
        x[k] = reinterpret_cast<const float*>(a.x + (t0 + k) * a.x_stride);
        y[k] = a.y + (t0 + k) * a.ldy + r;
      }
      switch (nt) {
        case 1: rows.template run<1>(row, x, a.cols, y); break;
        case 2: rows.template run<2>(row, x, a.cols, y); break;
        case 3: rows.template run<3>(row, x, a.cols, y); break;
        default: rows.template run<4>(row, x, a.cols, y); break;
      }
    }
  }
}

template <int kBits, int G>
struct MlxRows {
  template <int NT>
  void run(const uint8_t* row, const float* const* x, int64_t cols, float* const* y) const {
    mlx_row<kBits, G, NT>(row, x, cols, y);
  }
};

template <int kBits, int G>
void mm_mlx(const MMArgs& a) {
  mlx_drive(a, MlxRows<kBits, G>{});
}
