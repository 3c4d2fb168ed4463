#include "kernels/matmul.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <new>
#include <string>
#include <vector>

#include "backend/hook.h"  // seam: device backend (docs/backends.md)
#include "core/error.h"
#include "core/half.h"
#include "kernels/dispatch.h"
#include "kernels/gemm.h"
#include "kernels/pack.h"
#include "kernels/quant.h"
#include "kernels/thread_pool.h"

namespace oxi {
namespace kern {

int wtype_index(DType t) {
  switch (t) {
    case DType::F32: return kWF32;
    case DType::F16: return kWF16;
    case DType::BF16: return kWBF16;
    case DType::Q8_0: return kWQ8_0;
    case DType::Q4_0: return kWQ4_0;
    case DType::Q4_K: return kWQ4_K;
    case DType::Q5_K: return kWQ5_K;
    case DType::Q6_K: return kWQ6_K;
    case DType::Q3_K: return kWQ3_K;
    case DType::IQ4_XS: return kWIQ4_XS;
    case DType::Q5_0: return kWQ5_0;
    case DType::IQ4_NL: return kWIQ4_NL;
    case DType::Q4_1: return kWQ4_1;
    case DType::Q5_1: return kWQ5_1;
    case DType::Q2_K: return kWQ2_K;
    case DType::IQ3_S: return kWIQ3_S;
    case DType::IQ3_XXS: return kWIQ3_XXS;
    case DType::IQ2_XXS: return kWIQ2_XXS;
    case DType::IQ2_XS: return kWIQ2_XS;
    case DType::IQ2_S: return kWIQ2_S;
    case DType::IQ1_S: return kWIQ1_S;
    case DType::IQ1_M: return kWIQ1_M;
    case DType::MXFP4: return kWMXFP4;
    case DType::MLX_Q4_G32: return kWMLX4_32;
    case DType::MLX_Q4_G64: return kWMLX4_64;
    case DType::MLX_Q4_G128: return kWMLX4_128;
    case DType::MLX_Q8_G32: return kWMLX8_32;
    case DType::MLX_Q8_G64: return kWMLX8_64;
    case DType::MLX_Q8_G128: return kWMLX8_128;
    default: return -1;
  }
}

AType atype_of(int wtype) {
  switch (wtype) {
    case kWF32:
    case kWMLX4_32:
    case kWMLX4_64:
    case kWMLX4_128:
    case kWMLX8_32:
    case kWMLX8_64:
    case kWMLX8_128: return kAF32;
    case kWF16: return kAF16;
    case kWBF16: return kABF16;
    case kWQ8_0:
    case kWQ4_0:
    case kWQ5_0:
    case kWIQ4_NL:
    case kWMXFP4: return kAQ8_0;
    case kWQ4_1:
    case kWQ5_1: return kAQ8_1;
    default: return kAQ8_K;
  }
}

DType wtype_dtype(int wtype) {
  static const DType k[] = {DType::F32,  DType::F16,  DType::BF16, DType::Q8_0, DType::Q4_0,
                            DType::Q4_K, DType::Q5_K, DType::Q6_K, DType::Q3_K, DType::IQ4_XS,
                            DType::Q5_0, DType::IQ4_NL, DType::Q4_1, DType::Q5_1, DType::Q2_K,
                            DType::IQ3_S, DType::IQ3_XXS, DType::IQ2_XXS, DType::IQ2_XS, DType::IQ2_S,
                            DType::IQ1_S, DType::IQ1_M, DType::MXFP4, DType::MLX_Q4_G32, DType::MLX_Q4_G64,
                            DType::MLX_Q4_G128, DType::MLX_Q8_G32, DType::MLX_Q8_G64, DType::MLX_Q8_G128};
  return k[wtype];
}

uint64_t act_row_bytes(AType a, int64_t cols) {
  switch (a) {
    case kAF32: return static_cast<uint64_t>(cols) * 4;
    case kAF16:
    case kABF16: return static_cast<uint64_t>(cols) * 2;
    case kAQ8_0: return static_cast<uint64_t>(cols / QK8_0) * sizeof(BlockQ8_0);
    case kAQ8_K: return static_cast<uint64_t>(cols / QK_K) * sizeof(BlockQ8_K);
    case kAQ8_1: return static_cast<uint64_t>(cols / 32) * sizeof(BlockQ8_1);
    default: return 0;
  }
}

namespace {
struct ScratchSlots {
  void* p[6] = {};
  size_t n[6] = {};
  ~ScratchSlots() {
    for (void* q : p) std::free(q);
  }
};
}  // namespace

void* thread_scratch(int slot, size_t bytes) {
  thread_local ScratchSlots s;
  if (s.n[slot] < bytes) {
    std::free(s.p[slot]);
    const size_t n = (bytes + 63) / 64 * 64;
    s.p[slot] = std::aligned_alloc(64, n);
    if (!s.p[slot]) {
      s.n[slot] = 0;
      throw std::bad_alloc();
    }
    s.n[slot] = n;
  }
  return s.p[slot];
}

uint64_t gemm_packed_bytes(int wtype, int64_t cols, int64_t n_total) {
  const uint64_t n = static_cast<uint64_t>(n_total), c = static_cast<uint64_t>(cols);
  if (wtype == kWQ8_0 || wtype == kWQ4_0 || wtype == kWQ5_0 || wtype == kWIQ4_NL || wtype == kWQ4_1 ||
      wtype == kWQ5_1 || wtype == kWMXFP4)
    return c / 32 * n * 40;  // qs 32 + corr (Q8_1: s) 4 + d 4 per block
  return c / 256 * n * 292;                                          // qs 256 + bsums 32 + d 4
}

const GemmKernels* active_gemm() {
  // OXI_GEMM_OFF=1: same-binary A/B against the per-token tiles (docs/kernels.md).
  static const bool off = std::getenv("OXI_GEMM_OFF") != nullptr;
  if (off) return nullptr;
#if defined(OXI_HAVE_AVX2)
  if (&active_kernels() == &kAvx2Kernels) return &kAvx2Gemm;
#endif
#if defined(OXI_HAVE_AVX512)
  if (&active_kernels() == &kAvx512Kernels) return &kAvx512Gemm;
#endif
#if defined(OXI_HAVE_AMX)
  if (&active_kernels() == &kAvx512AmxKernels) return &kAmxGemm;
#endif
  return nullptr;
}

}  // namespace kern

namespace {

[[noreturn]] void unsupported(DType t, const char* what) {
  throw_error(ErrorCode::kUnsupported, "unsupported tensor type " + dtype_name(t) + " (" + what + ")");
}

void check_view(const MatrixView& w) {
  const auto rb = dtype_row_bytes(w.dtype, static_cast<uint64_t>(w.cols));
  if (!rb || w.rows < 0 || w.cols <= 0)
    throw_error(ErrorCode::kInvalidArgument,
                "matmul: bad matrix " + std::to_string(w.rows) + "x" + std::to_string(w.cols) + " " +
                    dtype_name(w.dtype));
  if (w.row_bytes < *rb)
    throw_error(ErrorCode::kInvalidArgument, "matmul: row_bytes smaller than one row");
}

}  // namespace

namespace {

// Types with a dequantiser but no kernel in every ISA table: matmul dequantises row chunks to f32
// where the active table has none (native_wtype below).
bool is_fallback_type(DType t) {
  switch (t) {
    case DType::Q4_1:
    case DType::Q5_0:
    case DType::Q5_1:
    case DType::IQ4_NL:
    case DType::IQ4_XS:
    case DType::Q2_K:
    case DType::Q3_K: return true;
    default: return is_mlx_dtype(t) || kern::is_codebook_type(t);  // MLX groups, IQ1/IQ2/IQ3, MXFP4: kernels on scalar and x86 only
  }
}

// Q4_1 / Q5_1 where the active set has no kernel for them: ggml's vec_dot against Q8_1
// activations (the scalar reference dot, kernels/quant.h), parallel over rows.
void matmul_with_min(const MatrixView& w, const float* x, int64_t n_tokens, float* y) {
  using namespace kern;
  const int64_t rows = w.rows, cols = w.cols;
  const uint64_t xs = act_row_bytes(kAQ8_1, cols);
  std::vector<uint8_t> xq(static_cast<size_t>(xs * n_tokens));
  for (int64_t t = 0; t < n_tokens; ++t)
    ref_quantize_act_q8_1(x + t * cols, reinterpret_cast<BlockQ8_1*>(xq.data() + t * xs), cols);
  const bool q5 = w.dtype == DType::Q5_1;
  parallel_for_chunked(rows, 16, [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      const uint8_t* row = w.data + static_cast<uint64_t>(r) * w.row_bytes;
      for (int64_t t = 0; t < n_tokens; ++t) {
        const auto* xb = reinterpret_cast<const BlockQ8_1*>(xq.data() + t * xs);
        y[t * rows + r] = q5 ? ref_dot_q5_1(reinterpret_cast<const BlockQ5_1*>(row), xb, cols)
                             : ref_dot_q4_1(reinterpret_cast<const BlockQ4_1*>(row), xb, cols);
      }
    }
  });
}

void matmul_fallback(const MatrixView& w, const float* x, int64_t n_tokens, float* y) {
  if (w.dtype == DType::Q4_1 || w.dtype == DType::Q5_1) return matmul_with_min(w, x, n_tokens, y);
  using namespace kern;
  const Kernels& K = active_kernels();
  const int nth = in_parallel_region() ? 1 : num_threads();
  const int64_t rows = w.rows, cols = w.cols;
  // ggml first rounds the activations to the weight type's vec_dot_type — Q8_0 for the
  // 32-element blocks (MXFP4 too), Q8_K for the K-quants and the IQ types (activation_type) —
  // and then multiplies exactly in integers. Round them the same way here (quantise, dequantise):
  // llama.cpp's Q4_K_M files put Q5_0 where Q4_K rows do not fit (Gemma 4 26B's experts), and
  // f32 activations there would differ from ggml by more than summation order.
  // MLX affine groups multiply f32 activations (as mlx does): no rounding.
  const bool k_blocks = activation_type(w.dtype) == DType::Q8_K;
  const AType at = k_blocks ? kAQ8_K : kAQ8_0;
  std::vector<float> xr(is_mlx_dtype(w.dtype) ? 0 : static_cast<size_t>(n_tokens * cols));
  if (!xr.empty()) parallel_for_chunked(n_tokens, 4, [&](int64_t t0, int64_t t1) {
    std::vector<uint8_t> q(static_cast<size_t>(act_row_bytes(at, cols)));
    for (int64_t t = t0; t < t1; ++t) {
      K.act[at](x + t * cols, q.data(), cols);
      ref_dequantize(k_blocks ? DType::Q8_K : DType::Q8_0, q.data(), xr.data() + t * cols, cols);
    }
  });
  if (!xr.empty()) x = xr.data();
  int64_t row_chunk = std::max<int64_t>(16, std::min<int64_t>(256, (rows + nth * 8 - 1) / (nth * 8)));
  row_chunk = (row_chunk + 15) / 16 * 16;
  constexpr int64_t kTokTile = 64;
  parallel_for_chunked(rows, row_chunk, [&](int64_t r0, int64_t r1) {
    thread_local std::vector<float> buf;
    if (buf.size() < static_cast<size_t>((r1 - r0) * cols)) buf.resize(static_cast<size_t>((r1 - r0) * cols));
    for (int64_t r = r0; r < r1; ++r)
      ref_dequantize(w.dtype, w.data + static_cast<uint64_t>(r) * w.row_bytes, buf.data() + (r - r0) * cols, cols);
    MMArgs a{};
    a.w = reinterpret_cast<const uint8_t*>(buf.data());
    a.w_stride = static_cast<uint64_t>(cols) * 4;
    a.x = reinterpret_cast<const uint8_t*>(x);
    a.x_stride = static_cast<uint64_t>(cols) * 4;
    a.y = y + r0;
    a.ldy = rows;
    a.cols = cols;
    a.r0 = 0;
    a.r1 = r1 - r0;
    for (int64_t t0 = 0; t0 < n_tokens; t0 += kTokTile) {
      a.t0 = t0;
      a.t1 = std::min(n_tokens, t0 + kTokTile);
      K.mm[kWF32](a);
    }
  });
}

}  // namespace

bool matmul_supports(DType t) { return kern::wtype_index(t) >= 0 || is_fallback_type(t); }

namespace {
// Weight types whose kernels are switched off (env OXI_KERNEL_OFF=IQ4_XS,Q3_K: those dequantised
// to f32 instead, as on an ISA without them; same-binary A/B runs, docs/benchmarks.md).
bool kernel_off(int wt) {
  static const uint32_t off = [] {
    uint32_t m = 0;
    const char* e = std::getenv("OXI_KERNEL_OFF");
    for (std::string s = e ? e : ""; !s.empty();) {
      const size_t c = s.find(',');
      const auto t = dtype_from_name(s.substr(0, c));
      const int i = t ? kern::wtype_index(*t) : -1;
      if (i >= 0 && is_fallback_type(*t)) m |= 1u << i;
      s = c == std::string::npos ? "" : s.substr(c + 1);
    }
    return m;
  }();
  return (off >> wt) & 1u;
}

// The table index of t if the active ISA has a kernel for it, else −1 (fallback or unsupported).
int native_wtype(DType t) {
  const int wt = kern::wtype_index(t);
  return wt >= 0 && kern::active_kernels().mm[wt] && !kernel_off(wt) ? wt : -1;
}
}  // namespace

bool matmul_is_native(DType t) { return native_wtype(t) >= 0; }

const char* matmul_path(DType t) {
  if (native_wtype(t) >= 0) return "kernel";
  return is_fallback_type(t) ? "dequantise" : "none";
}

namespace {

// Rows per GEMV work unit, multiples of 16: at least 4 units per thread, and units of at most
// ~256 KiB of weights (env OXI_GEMV_UNIT_KIB) so that the thread finishing last in a job waits little
// (large matrices: the 1 GB-class output head would otherwise end on a 10+ MB unit). Each unit
// restarts its 4 GEMV streams (tile_drive.h), so small units cost bandwidth: 8 units per thread
// made a 2 MB Q4_0 matrix's units 128 KiB, and 4 per thread ran it 24 → 26–27 GB/s and the
// Qwen3.5-0.8B-shaped Q4_0 decode 4–5 % faster (2026-12-03; 2 per thread and one static half
// per thread were no better: docs/kernels.md, "GEMV streams").
int64_t gemv_row_chunk(int64_t rows, uint64_t row_bytes, int nth) {
  static const uint64_t unit_bytes = [] {
    const char* e = std::getenv("OXI_GEMV_UNIT_KIB");
    return (e && std::atoll(e) > 0 ? static_cast<uint64_t>(std::atoll(e)) : 256) << 10;
  }();
  int64_t row_chunk = (rows + nth * 4 - 1) / (nth * 4);
  row_chunk = std::min<int64_t>(row_chunk, static_cast<int64_t>(unit_bytes / std::max<uint64_t>(row_bytes, 1)));
  return std::max<int64_t>(16, (row_chunk + 15) / 16 * 16);
}

// Most tokens per call for the packed kernels (Kernels::mm_packed) on matrices that have a packed
// copy; more use the GEMM (or the file-layout GEMV) on rows unpacked per group. Env
// OXI_PACKED_MT=n (0: single-token only, the earlier routing) for same-binary A/B runs.
int64_t packed_gemv_max_tokens() {
  static const int64_t n = [] {
    const char* e = std::getenv("OXI_PACKED_MT");
    return e ? std::max<int64_t>(1, std::atoll(e)) : kern::kPackedGemvMaxTokens;
  }();
  return n;
}

// Runs a work unit of a packed matrix with more than one token: each 16-row group of its rows
// below a.wp_rows is rebuilt in the file's layout in a thread buffer (cheap next to the multi-
// token product over it) and the ordinary kernel runs on that; rows past it (< 16) read the file.
void run_unpacked(kern::MMFn fn, kern::UnpackFn unpack, const kern::MMArgs& a) {
  thread_local std::vector<uint8_t> rows_buf;
  const uint64_t group_bytes = kern::kPackRows * a.w_stride;
  if (rows_buf.size() < group_bytes) rows_buf.resize(group_bytes);
  for (int64_t r = a.r0; r < a.r1;) {
    const int64_t g0 = r / kern::kPackRows * kern::kPackRows;
    if (g0 + kern::kPackRows > a.wp_rows) {
      kern::MMArgs tail = a;
      tail.r0 = r;
      fn(tail);
      return;
    }
    const int64_t end = std::min(a.r1, g0 + kern::kPackRows);
    unpack(a.wp + static_cast<uint64_t>(g0 / kern::kPackRows) * a.wp_stride, a.cols, rows_buf.data(), a.w_stride);
    kern::MMArgs b = a;
    b.w = rows_buf.data();
    b.y = a.y + g0;  // kernels write y[t·ldy + r]: rows relative to the group
    b.r0 = r - g0;
    b.r1 = end - g0;
    b.wp = nullptr;
    b.wp_rows = 0;
    fn(b);
    r = end;
  }
}

// Matmul of matrices sharing one input with native kernels, once the device has declined
// (fallback types are run by the caller). Activations are converted once per format and, for the
// GEMM path (kernels/gemm.h, 5+ tokens), packed once per weight type; then the work units of all
// matrices (largest first: the small ones fill the tail of the dynamic schedule) run in one pool
// job, so a batch costs one dispatch and one join. GEMV (1–4 tokens): row chunks only, and the
// call's x_id lets kernels cache their rearranged activation per thread.
void matmul_native(const MatrixView* ws, float* const* ys, int n, const float* x, int64_t n_tokens) {
  using namespace kern;
  const Kernels& K = active_kernels();
  const bool gemv = n_tokens <= 4;
  const GemmKernels* G = gemv ? nullptr : active_gemm();
  if (G && n_tokens < G->min_tokens) G = nullptr;
  const int64_t cols = ws[0].cols;

  // 0. Packed copies (kernels/pack.h). Up to packed_gemv_max_tokens() tokens (decode, also of
  // several sequences at once) a matrix with a packed kernel is packed now if it is not yet, and
  // the packed kernel runs all the tokens; more tokens read an existing copy through unpack.
  std::shared_ptr<const PackedMatrix> packs[16];  // held until the job is done
  bool multi[16] = {};  // matrix j runs K.mm_packed for all its tokens
  bool any_multi = false;
  for (int j = 0; j < n; ++j) {
    const int wt = wtype_index(ws[j].dtype);
    if (!K.mm_packed[wt]) continue;
    const bool small = n_tokens <= packed_gemv_max_tokens();
    packs[j] = packed_for(ws[j], small);
    multi[j] = small && packs[j] != nullptr;
    any_multi = any_multi || multi[j];
  }

  // 1. Activations in each weight type's dot format, per token (one buffer per format), and the
  // GEMM packing of them (one buffer per weight type).
  thread_local std::vector<uint8_t> scratch[kNumATypes];
  thread_local std::vector<uint8_t> packed[kNumWTypes];
  const uint8_t* xa[kNumATypes] = {};
  const uint8_t* xp[kNumWTypes] = {};
  for (int j = 0; j < n; ++j) {
    const int wt = wtype_index(ws[j].dtype);
    const AType at = atype_of(wt);
    if (!xa[at]) {
      if (at == kAF32) {
        xa[at] = reinterpret_cast<const uint8_t*>(x);
      } else {
        const uint64_t x_stride = act_row_bytes(at, cols);
        std::vector<uint8_t>& sb = scratch[at];
        const size_t need = static_cast<size_t>(x_stride * n_tokens) + 64;
        if (sb.size() < need) sb.resize(need);
        uint8_t* buf = sb.data();
        const ActFn act = K.act[at];
        auto convert = [&](int64_t t0, int64_t t1) {
          for (int64_t t = t0; t < t1; ++t) act(x + t * cols, buf + t * x_stride, cols);
        };
        if (gemv) {
          convert(0, n_tokens);  // a few tokens: not worth a pool dispatch
        } else {
          parallel_for_chunked(n_tokens, 4, convert);
        }
        xa[at] = buf;
      }
    }
    if (G && G->run[wt] && !xp[wt] && !multi[j]) {
      std::vector<uint8_t>& pb = packed[wt];
      const size_t need = static_cast<size_t>(gemm_packed_bytes(wt, cols, n_tokens)) + 64;
      if (pb.size() < need) pb.resize(need);
      // 64-byte aligned (the +64 above): AMX tile rows of 32 bytes must not straddle cache lines.
      uint8_t* X = reinterpret_cast<uint8_t*>((reinterpret_cast<uintptr_t>(pb.data()) + 63) & ~uintptr_t{63});
      const GemmPackFn pack = G->pack[wt];
      const uint8_t* src = xa[at];
      const uint64_t x_stride = act_row_bytes(at, cols);
      parallel_for_chunked(n_tokens, 16, [&](int64_t t0, int64_t t1) { pack(src, x_stride, t0, t1, n_tokens, cols, X); });
      xp[wt] = X;
    }
  }

  // 2. Work units: per matrix, row chunks × token tiles, all matrices in one dynamic schedule.
  constexpr int kMaxBatch = 16;
  struct Part {
    MMArgs base;
    MMFn fn;
    UnpackFn unpack;  // set: rows [0, base.wp_rows) come from the packed copy, one group at a time
    int64_t rows, row_chunk, n_rc, tok_tile, n_tt, first;  // first: index of the part's first unit
  };
  Part parts[kMaxBatch];
  const int nth = in_parallel_region() ? 1 : num_threads();
  int order[kMaxBatch];
  for (int j = 0; j < n; ++j) order[j] = j;
  std::stable_sort(order, order + n, [&](int a, int b) {
    return ws[a].rows * ws[a].row_bytes > ws[b].rows * ws[b].row_bytes;
  });
  static std::atomic<uint64_t> s_x_id{0};
  const uint64_t x_id = gemv || any_multi ? s_x_id.fetch_add(1, std::memory_order_relaxed) + 1 : 0;
  int64_t total = 0;
  for (int k = 0; k < n; ++k) {
    const MatrixView& w = ws[order[k]];
    const int wt = wtype_index(w.dtype);
    const AType at = atype_of(wt);
    Part& p = parts[k];
    p.unpack = nullptr;
    p.base = MMArgs{};
    p.base.w = w.data;
    p.base.w_stride = w.row_bytes;
    p.base.x_id = x_id;
    const bool mt = multi[order[k]];
    if (xp[wt] && !mt) {
      p.base.x = xp[wt];
      p.base.x_stride = static_cast<uint64_t>(n_tokens);
      p.fn = G->run[wt];
      // Token tiles of up to ~4 MiB of packed activations, split evenly, multiples of 16. Each
      // unit re-reads its tile per 16-row group (from L2, or L3 past 2 MiB) and unpacks each
      // weight group once per tile: with Gemma-4-E2B's 12288-column down projection, 1 MiB tiles
      // (64 tokens) unpacked every weight group 8 times per 512-token prompt; 4 MiB tiles made
      // its pp512 6–10 % faster (1 MiB → 4 MiB, AMX and VNNI; 2026-12-03, docs/kernels.md).
      const int64_t max_tile = std::clamp<int64_t>(
          (int64_t{4} << 20) / static_cast<int64_t>(gemm_packed_bytes(wt, cols, 1)), 64, 512);
      const int64_t n_tt = (n_tokens + max_tile - 1) / max_tile;
      p.tok_tile = ((n_tokens + n_tt - 1) / n_tt + 15) / 16 * 16;
    } else {
      p.base.x = xa[at];
      p.base.x_stride = at == kAF32 ? static_cast<uint64_t>(cols) * 4 : act_row_bytes(at, cols);
      p.fn = K.mm[wt];
      p.tok_tile = gemv || mt ? n_tokens : 64;
    }
    // The ISA's packed copy where it has one (step 0): up to packed_gemv_max_tokens() tokens the
    // packed kernel runs them all (each 16-row group read once per ≤ 8 tokens); more tokens use
    // the copy once made (the file's pages were released), its rows rebuilt in file layout per
    // 16-row group for the ordinary kernel.
    if (const auto& pk = packs[order[k]]) {
      if (mt) {
        p.fn = K.mm_packed[wt];
      } else {
        p.unpack = K.unpack[wt];
      }
      p.base.wp = pk->data;
      p.base.wp_stride = pk->group_bytes;
      p.base.wp_rows = pk->rows;
    }
    p.base.y = ys[order[k]];
    p.base.ldy = w.rows;
    p.base.cols = cols;
    p.rows = w.rows;
    p.n_tt = (n_tokens + p.tok_tile - 1) / p.tok_tile;
    if (gemv || mt) {
      p.row_chunk = gemv_row_chunk(w.rows, w.row_bytes, nth);
    } else if (xp[wt]) {
      // GEMM units are 16-row groups (the kernels' own granularity: smaller units cost nothing
      // extra there and balance the dynamic schedule best when a core is shared).
      p.row_chunk = 16;
    } else {
      p.row_chunk = 64;  // halved while the matrix has fewer than 4 units per thread
      while (p.row_chunk > 16 && ((w.rows + p.row_chunk - 1) / p.row_chunk) * p.n_tt < nth * 4) p.row_chunk /= 2;
    }
    p.n_rc = (w.rows + p.row_chunk - 1) / p.row_chunk;
    p.first = total;
    total += p.n_rc * p.n_tt;
  }
  parallel_for(total, [&](int64_t u) {
    int k = 0;
    while (k + 1 < n && parts[k + 1].first <= u) ++k;
    const Part& p = parts[k];
    MMArgs a = p.base;
    const int64_t v = u - p.first, rc = v / p.n_tt, tt = v % p.n_tt;
    a.r0 = rc * p.row_chunk;
    a.r1 = std::min(p.rows, a.r0 + p.row_chunk);
    a.t0 = tt * p.tok_tile;
    a.t1 = std::min(n_tokens, a.t0 + p.tok_tile);
    if (p.unpack) return run_unpacked(p.fn, p.unpack, a);
    p.fn(a);
  });
}

}  // namespace

int64_t matmul_exact_tokens(DType t) {
  const int wt = kern::wtype_index(t);
  if (wt >= 0 && kern::active_kernels().mm_packed[wt]) return std::max<int64_t>(4, packed_gemv_max_tokens());
  return 4;
}

void matmul(const MatrixView& w, const float* x, int64_t n_tokens, float* y) {
  using namespace kern;
  const int wt = native_wtype(w.dtype);
  if (wt < 0 && !is_fallback_type(w.dtype)) unsupported(w.dtype, "no matmul kernel");
  check_view(w);
  if (n_tokens <= 0 || w.rows == 0) return;
  if (device::try_matmul(&w, &y, 1, x, n_tokens)) return;  // seam: a device backend ran it
  if (wt < 0) return matmul_fallback(w, x, n_tokens, y);
  matmul_native(&w, &y, 1, x, n_tokens);
}

void matmul_batch(const MatrixView* ws, float* const* ys, int n, const float* x, int64_t n_tokens) {
  using namespace kern;
  if (n <= 0) return;
  if (n == 1) return matmul(ws[0], x, n_tokens, ys[0]);
  if (n > 16) {  // more than one pool job's table: split
    matmul_batch(ws, ys, 16, x, n_tokens);
    return matmul_batch(ws + 16, ys + 16, n - 16, x, n_tokens);
  }
  bool all_native = true;
  for (int j = 0; j < n; ++j) {
    const int wt = native_wtype(ws[j].dtype);
    if (wt < 0 && !is_fallback_type(ws[j].dtype)) unsupported(ws[j].dtype, "no matmul kernel");
    check_view(ws[j]);
    if (ws[j].cols != ws[0].cols)
      throw_error(ErrorCode::kInvalidArgument, "matmul_batch: matrices of one batch must have the same column count");
    if (ws[j].rows == 0) all_native = false;
    if (wt < 0) all_native = false;
  }
  if (n_tokens <= 0) return;
  if (device::try_matmul(ws, ys, n, x, n_tokens)) return;  // seam: a device backend ran the batch
  if (all_native) return matmul_native(ws, ys, n, x, n_tokens);
  // A fallback type (or an empty matrix) in the batch: the native ones together, the rest alone.
  MatrixView nw[16];
  float* ny[16];
  int m = 0;
  for (int j = 0; j < n; ++j) {
    if (ws[j].rows == 0) continue;
    if (native_wtype(ws[j].dtype) < 0) {
      matmul_fallback(ws[j], x, n_tokens, ys[j]);
    } else {
      nw[m] = ws[j];
      ny[m++] = ys[j];
    }
  }
  if (m) matmul_native(nw, ny, m, x, n_tokens);
}

void dequantize_row(const MatrixView& w, int64_t row, float* out) {
  if (row < 0 || row >= w.rows)
    throw_error(ErrorCode::kInvalidArgument, "dequantize_row: row " + std::to_string(row) + " out of range");
  check_view(w);
  // A matrix that decode has packed (a tied embedding is also the output head) is read from its
  // copy: the file's pages were released, and one read there maps a whole large folio back (up to
  // 2 MiB on ext4 with Linux 6.18; 0.8B Q4_0 decode re-mapped ~150 MiB of its embedding that way).
  if (const int wt = kern::wtype_index(w.dtype); wt >= 0) {
    const kern::Kernels& K = kern::active_kernels();
    if (K.unpack[wt] != nullptr) {
      if (auto pk = kern::packed_for(w, false); pk && row < pk->rows) {
        thread_local std::vector<uint8_t> group;
        group.resize(static_cast<size_t>(kern::kPackRows * w.row_bytes));
        K.unpack[wt](pk->data + static_cast<uint64_t>(row / kern::kPackRows) * pk->group_bytes, w.cols, group.data(),
                     w.row_bytes);
        return dequantize(w.dtype, group.data() + static_cast<uint64_t>(row % kern::kPackRows) * w.row_bytes, out,
                          w.cols);
      }
    }
  }
  dequantize(w.dtype, w.data + static_cast<uint64_t>(row) * w.row_bytes, out, w.cols);
}

void dequantize(DType t, const void* src, float* dst, int64_t n) {
  kern::ref_dequantize(t, src, dst, n);
}

bool quantize_supports(DType t) {
  return t == DType::F32 || t == DType::F16 || t == DType::BF16 || t == DType::Q8_0 || t == DType::Q4_0 ||
         t == DType::Q4_K || t == DType::Q5_0 || t == DType::Q6_K || t == DType::Q5_K || t == DType::Q3_K ||
         t == DType::IQ4_XS || t == DType::Q4_1 || t == DType::Q5_1 || t == DType::IQ4_NL;
}

void quantize_rows(DType t, int64_t rows, int64_t cols, void* dst,
                   const std::function<void(int64_t r, float* row, float* scratch)>& fill,
                   const std::function<void(int64_t r0, int64_t r1)>& done) {
  const auto rb = dtype_row_bytes(t, static_cast<uint64_t>(cols));
  if (!rb)
    throw_error(ErrorCode::kInvalidArgument, "quantize_rows: " + std::to_string(cols) +
                                                 " elements is not a whole number of " + dtype_name(t) + " blocks");
  auto* out = static_cast<uint8_t*>(dst);
  const int64_t grain = std::max<int64_t>(1, (int64_t{1} << 18) / static_cast<int64_t>(std::max<uint64_t>(*rb, 1)));
  parallel_for_chunked(rows, grain, [&](int64_t r0, int64_t r1) {
    std::vector<float> buf(2 * static_cast<size_t>(cols));
    float* row = buf.data();
    for (int64_t r = r0; r < r1; ++r) {
      fill(r, row, row + cols);
      quantize_row(t, row, cols, out + *rb * static_cast<uint64_t>(r));
    }
    if (done) done(r0, r1);
  });
}

void quantize_row(DType t, const float* x, int64_t n, void* dst) {
  if (!dtype_row_bytes(t, static_cast<uint64_t>(n)))
    throw_error(ErrorCode::kInvalidArgument, "quantize_row: " + std::to_string(n) +
                                                 " elements is not a whole number of " + dtype_name(t) + " blocks");
  switch (t) {
    case DType::F32:
      std::memcpy(dst, x, static_cast<size_t>(n) * 4);
      return;
    case DType::F16: {
      auto* d = static_cast<uint16_t*>(dst);
      for (int64_t i = 0; i < n; ++i) d[i] = f32_to_f16(x[i]);
      return;
    }
    case DType::BF16: {
      auto* d = static_cast<uint16_t*>(dst);
      for (int64_t i = 0; i < n; ++i) d[i] = f32_to_bf16(x[i]);
      return;
    }
    case DType::Q8_0: return kern::ref_quantize_q8_0(x, static_cast<kern::BlockQ8_0*>(dst), n);
    case DType::Q4_0: return kern::ref_quantize_q4_0(x, static_cast<kern::BlockQ4_0*>(dst), n);
    case DType::Q4_K: return kern::ref_quantize_q4_K(x, static_cast<kern::BlockQ4_K*>(dst), n);
    case DType::Q5_0: return kern::ref_quantize_q5_0(x, static_cast<uint8_t*>(dst), n);
    case DType::Q6_K: return kern::ref_quantize_q6_K(x, static_cast<kern::BlockQ6_K*>(dst), n);
    case DType::Q5_K: return kern::ref_quantize_q5_K(x, static_cast<kern::BlockQ5_K*>(dst), n);
    case DType::Q3_K: return kern::ref_quantize_q3_K(x, static_cast<kern::BlockQ3_K*>(dst), n);
    case DType::IQ4_XS: return kern::ref_quantize_iq4_xs(x, static_cast<kern::BlockIQ4_XS*>(dst), n);
    case DType::Q4_1: return kern::ref_quantize_q4_1(x, static_cast<uint8_t*>(dst), n);
    case DType::Q5_1: return kern::ref_quantize_q5_1(x, static_cast<uint8_t*>(dst), n);
    case DType::IQ4_NL: return kern::ref_quantize_iq4_nl(x, static_cast<uint8_t*>(dst), n);
    default: unsupported(t, "no quantiser");
  }
}

}  // namespace oxi
