// The Vulkan block device (vulkan_device.h): nn::Device's blocks as compute shaders
// (vulkan/shaders/*.comp) recorded into one command buffer; the host waits only when it reads
// (read, moe_route) or uploads a weight — every block, the small per-head ones included, has a
// shader, so a decode step waits once, for its logits (MoE: once more per routed layer). Each call takes the context's mutex, so several threads
// may share the device (one forward at a time is what it is for).
//
// Memory: an nn::Buffer is one device-local VkBuffer of f32; a Ref's offset goes to the shader in
// its push constants (whole buffers are bound). A weight keeps its file layout (GGUF blocks) in
// device memory, split by rows into parts no larger than the device's maxStorageBufferRange
// (128 MiB on lavapipe); the shaders dequantise as they read. Weight types: F32, F16, BF16, Q8_0,
// Q4_0, Q4_1, Q5_0, Q5_1, IQ4_NL, MXFP4, the K-quants Q2_K…Q6_K, IQ4_XS, IQ3_S, IQ3_XXS, IQ2_S,
// IQ2_XS, IQ2_XXS, IQ1_M, IQ1_S, and MLX's 4- and 8-bit groups as loaded (format/dtype.h); others
// (none the CPU kernels run today) are declined at upload with oxi::Error(kUnsupported).
#include "backend/vulkan/vulkan_device.h"

#ifdef OXI_VULKAN_KERNELS

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <vector>

#include "backend/vulkan/context.h"
#include "core/error.h"
#include "kernels/quant.h"
#include "nn/ops.h"

namespace oxi::backend {
namespace {

using nn::Ref;
using vk::Context;
using vk::Mem;
using Lock = std::lock_guard<std::mutex>;

class VkBuf final : public nn::Buffer {
 public:
  VkBuf(std::shared_ptr<Context> c, int64_t n) : Buffer(n), ctx(std::move(c)) { m = ctx->make(static_cast<VkDeviceSize>(n) * 4, false); }
  ~VkBuf() override {
    Lock l(ctx->mu());
    ctx->release(m);
  }
  std::shared_ptr<Context> ctx;
  Mem m;
};

// Rows [r0, r1) of a weight, in one buffer (row r at byte (r − r0)·row_bytes).
struct Part {
  Mem m;
  int64_t r0 = 0, r1 = 0;
};

class VkWeight final : public nn::Weight {
 public:
  ~VkWeight() override {
    Lock l(ctx->mu());
    for (Part& p : parts) ctx->release(p.m);
  }
  std::shared_ptr<Context> ctx;
  std::vector<Part> parts;
  uint32_t row_bytes = 0;
  std::string type;  // shader name suffix: "q4_k", …
};

// The shader suffix of a weight type; nullptr: no kernel.
const char* type_suffix(DType t) {
  switch (t) {
    case DType::F32: return "f32";
    case DType::F16: return "f16";
    case DType::BF16: return "bf16";
    case DType::Q8_0: return "q8_0";
    case DType::Q4_0: return "q4_0";
    case DType::Q4_1: return "q4_1";
    case DType::Q5_0: return "q5_0";
    case DType::Q5_1: return "q5_1";
    case DType::IQ4_NL: return "iq4_nl";
    case DType::Q2_K: return "q2_k";
    case DType::Q3_K: return "q3_k";
    case DType::Q4_K: return "q4_k";
    case DType::Q5_K: return "q5_k";
    case DType::Q6_K: return "q6_k";
    case DType::IQ4_XS: return "iq4_xs";
    case DType::MXFP4: return "mxfp4";
    case DType::IQ2_XXS: return "iq2_xxs";
    case DType::IQ2_XS: return "iq2_xs";
    case DType::IQ2_S: return "iq2_s";
    case DType::IQ3_XXS: return "iq3_xxs";
    case DType::IQ3_S: return "iq3_s";
    case DType::IQ1_S: return "iq1_s";
    case DType::IQ1_M: return "iq1_m";
    case DType::MLX_Q4_G32: return "mlx_q4_g32";
    case DType::MLX_Q4_G64: return "mlx_q4_g64";
    case DType::MLX_Q4_G128: return "mlx_q4_g128";
    case DType::MLX_Q8_G32: return "mlx_q8_g32";
    case DType::MLX_Q8_G64: return "mlx_q8_g64";
    case DType::MLX_Q8_G128: return "mlx_q8_g128";
    default: return nullptr;
  }
}

uint32_t u32(int64_t v) { return static_cast<uint32_t>(v); }
uint32_t ceil_div(int64_t a, int64_t b) { return static_cast<uint32_t>((a + b - 1) / b); }
// A 1-D count of workgroups as gx × gy (each ≤ 65535); the shaders' group_index() undoes it.
void grid(int64_t groups, uint32_t& gx, uint32_t& gy) {
  gx = static_cast<uint32_t>(std::min<int64_t>(std::max<int64_t>(groups, 1), 65535));
  gy = ceil_div(groups, gx);
}
// Workgroups of 256 for a grid-stride loop over n items (the shaders loop past 65535 groups).
uint32_t stride_groups(int64_t n) { return std::max<uint32_t>(1, static_cast<uint32_t>(std::min<int64_t>((n + 255) / 256, 65535))); }

[[noreturn]] void bad(const std::string& what) { throw_error(ErrorCode::kInvalidArgument, "vulkan device: " + what); }

class VulkanDevice final : public nn::Device {
 public:
  explicit VulkanDevice(std::shared_ptr<Context> c) : ctx_(std::move(c)) {
    const char* e = std::getenv("OXI_VULKAN_HOST_BLOCKS");
    host_blocks_ = e && std::string(e) == "1";
    upload_grids();
  }
  ~VulkanDevice() override {
    {
      Lock l(ctx_->mu());
      ctx_->release(grids_);
    }
    if (const char* e = std::getenv("OXI_VULKAN_STATS"); e && std::string(e) == "1")
      std::fprintf(stderr, "vulkan device: %llu host waits, %llu dispatches\n", static_cast<unsigned long long>(ctx_->waits()),
                   static_cast<unsigned long long>(ctx_->dispatches()));
  }
  std::string name() const override { return "vulkan"; }
  uint64_t waits() const override {
    Lock l(ctx_->mu());
    return ctx_->waits();
  }

  std::shared_ptr<nn::Buffer> alloc(int64_t floats) override {
    if (floats < 0) bad("negative allocation");
    if (static_cast<uint64_t>(floats) * 4 > ctx_->max_range())
      throw_error(ErrorCode::kUnsupported, "vulkan device: a buffer of " + std::to_string(floats * 4 >> 20) +
                                               " MiB exceeds what a shader can address here (maxStorageBufferRange " +
                                               std::to_string(ctx_->max_range() >> 20) + " MiB)");
    Lock l(ctx_->mu());
    return std::make_shared<VkBuf>(ctx_, floats);
  }

  void write(Ref dst, const float* src, int64_t n) override {
    Lock l(ctx_->mu());
    VkBuffer b = buf(dst, n, "write");
    if (!n) return;
    if (ctx_->pending_host_bytes() > (256u << 20)) ctx_->finish();  // bound the staging held
    const vk::Slice s = ctx_->host_buffer(src, static_cast<VkDeviceSize>(n) * 4);
    ctx_->copy(s.buf, s.off, b, static_cast<VkDeviceSize>(dst.off) * 4, static_cast<VkDeviceSize>(n) * 4);
  }

  void read(Ref src, float* dst, int64_t n) override {
    Lock l(ctx_->mu());
    VkBuffer b = buf(src, n, "read");
    ctx_->read_back(b, static_cast<VkDeviceSize>(src.off) * 4, dst, static_cast<VkDeviceSize>(n) * 4);
  }

  void copy(Ref src, Ref dst, int64_t n) override {
    Lock l(ctx_->mu());
    VkBuffer s = buf(src, n, "copy"), d = buf(dst, n, "copy");
    const VkDeviceSize bytes = static_cast<VkDeviceSize>(n) * 4;
    if (s == d && src.off < dst.off + n && dst.off < src.off + n) {  // overlapping: through a temporary
      Mem t = ctx_->make(bytes, false);
      ctx_->copy(s, static_cast<VkDeviceSize>(src.off) * 4, t.buf, 0, bytes);
      ctx_->copy(t.buf, 0, d, static_cast<VkDeviceSize>(dst.off) * 4, bytes);
      ctx_->release(t);
    } else {
      ctx_->copy(s, static_cast<VkDeviceSize>(src.off) * 4, d, static_cast<VkDeviceSize>(dst.off) * 4, bytes);
    }
  }

  std::unique_ptr<nn::Weight> upload(const MatrixView& v) override {
    const char* sfx = type_suffix(v.dtype);
    if (!sfx)
      throw_error(ErrorCode::kUnsupported, "vulkan device: no kernel for weight type " + dtype_name(v.dtype) +
                                               " (F32, F16, BF16, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, IQ4_NL, MXFP4, Q2_K…Q6_K, IQ4_XS, IQ3_S, IQ3_XXS, IQ2_S, IQ2_XS, IQ2_XXS, IQ1_M, IQ1_S, MLX 4/8-bit)");
    const auto rb = dtype_row_bytes(v.dtype, static_cast<uint64_t>(v.cols));
    if (!rb || v.rows < 0 || (v.rows > 0 && !v.data)) bad("upload: " + dtype_name(v.dtype) + " rows of " + std::to_string(v.cols) + " elements");
    if (*rb > ctx_->part_limit()) throw_error(ErrorCode::kUnsupported, "vulkan device: a weight row exceeds maxStorageBufferRange");
    auto w = std::make_unique<VkWeight>();
    w->rows = v.rows;
    w->cols = v.cols;
    w->dtype = v.dtype;
    w->ctx = ctx_;
    w->row_bytes = static_cast<uint32_t>(*rb);
    w->type = sfx;
    const int64_t per_part = std::max<int64_t>(1, static_cast<int64_t>(ctx_->part_limit() / *rb));
    Lock l(ctx_->mu());
    // Staged through host memory in pieces of whole rows, ≤ 64 MiB each (a part may be GiBs).
    const int64_t per_piece = std::max<int64_t>(1, static_cast<int64_t>((64u << 20) / *rb));
    for (int64_t r0 = 0; r0 < v.rows; r0 += per_part) {
      Part p;
      p.r0 = r0;
      p.r1 = std::min(v.rows, r0 + per_part);
      p.m = ctx_->make(static_cast<VkDeviceSize>(p.r1 - r0) * *rb, false);
      w->parts.push_back(p);
      for (int64_t q0 = p.r0; q0 < p.r1; q0 += per_piece) {
        const int64_t q1 = std::min(p.r1, q0 + per_piece);
        const VkDeviceSize bytes = static_cast<VkDeviceSize>(q1 - q0) * *rb;
        Mem st = ctx_->make(bytes, true);
        auto* o = static_cast<uint8_t*>(st.map);
        if (v.row_bytes == *rb) std::memcpy(o, v.data + static_cast<uint64_t>(q0) * *rb, bytes);
        else
          for (int64_t r = q0; r < q1; ++r) std::memcpy(o + static_cast<uint64_t>(r - q0) * *rb, v.data + static_cast<uint64_t>(r) * v.row_bytes, *rb);
        ctx_->copy(st.buf, 0, p.m.buf, static_cast<VkDeviceSize>(q0 - p.r0) * *rb, bytes);
        ctx_->release(st);
        ctx_->finish();
      }
    }
    return w;
  }

  void embed(const nn::Weight& table, std::span<const int32_t> ids, Ref out) override {
    const VkWeight& t = weight(table);
    const int64_t n = static_cast<int64_t>(ids.size());
    Lock l(ctx_->mu());
    VkBuffer o = buf(out, n * t.cols, "embed");
    for (int32_t id : ids)
      if (id < 0 || id >= t.rows) bad("embed: row " + std::to_string(id) + " out of range");
    const std::string shader = "embed_" + t.type;
    for (int64_t s0 = 0; s0 < n; s0 += 65535) {  // ids go along the y workgroup dimension
      const int64_t m = std::min<int64_t>(65535, n - s0);
      for (const Part& p : t.parts) {
        std::vector<int32_t> local(static_cast<size_t>(m), -1);  // -1: a row of another part
        bool any = false;
        for (int64_t i = 0; i < m; ++i) {
          const int32_t id = ids[static_cast<size_t>(s0 + i)];
          if (id >= p.r0 && id < p.r1) local[static_cast<size_t>(i)] = static_cast<int32_t>(id - p.r0), any = true;
        }
        if (!any) continue;
        const vk::Slice ib = ctx_->host_buffer(local.data(), local.size() * 4);
        const uint32_t pc[4] = {u32(t.cols), t.row_bytes, 0, u32(out.off + s0 * t.cols)};
        ctx_->dispatch(shader.c_str(), {p.m.buf, ib, o, grids_.buf}, pc, sizeof pc, ceil_div((t.cols + 31) / 32, 64), u32(m));
      }
    }
  }

  void matmul(std::span<const nn::Weight* const> ws, std::span<const Ref> ys, Ref x, int64_t n) override {
    if (ws.size() != ys.size() || ws.empty()) bad("matmul: weights and outputs differ in count");
    if (n > 65535 * 8) bad("matmul: more than 524280 rows of x");
    const int64_t cols = ws[0]->cols;
    Lock l(ctx_->mu());
    VkBuffer xb = buf(x, n * cols, "matmul in");
    for (size_t j = 0; j < ws.size(); ++j) {
      const VkWeight& w = weight(*ws[j]);
      if (w.cols != cols) bad("matmul: weights of different widths share an input");
      VkBuffer yb = buf(ys[j], n * w.rows, "matmul out");
      if (!n) continue;
      // Up to 8 tokens: the GEMV shader (4 rows × 8 tokens a workgroup, weights read once; its
      // one-token build for decode); more: the tiled one (64 rows × 64 tokens a workgroup).
      const bool tiled = n > 8;
      const std::string shader = (tiled ? "matmul_tiled_" : n == 1 ? "matmul1_" : "matmul_") + w.type;
      for (const Part& p : w.parts) {
        // rows, cols, n, row_bytes, w_off, x_off, y_off, y_stride
        const uint32_t pc[8] = {u32(p.r1 - p.r0), u32(cols), u32(n), w.row_bytes, 0, u32(x.off), u32(ys[j].off + p.r0), u32(w.rows)};
        uint32_t gx, gy;
        grid(ceil_div(p.r1 - p.r0, tiled ? 64 : 4), gx, gy);
        ctx_->dispatch(shader.c_str(), {p.m.buf, xb, yb, grids_.buf}, pc, sizeof pc, gx, gy, ceil_div(n, tiled ? 64 : 8));
      }
    }
  }

  void rms_norm(Ref h, Ref add, Ref w, Ref y, int64_t rows, int64_t width, float eps) override {
    Lock l(ctx_->mu());
    VkBuffer hb = buf(h, rows * width, "rms_norm");
    VkBuffer ab = add ? buf(add, rows * width, "rms_norm add") : hb;
    VkBuffer wb = w ? buf(w, width, "rms_norm weight") : hb;
    VkBuffer yb = buf(y, rows * width, "rms_norm out");
    if (rows <= 0 || width <= 0) return;
    struct {
      uint32_t h_off, a_off, w_off, y_off, rows, width, flags;
      float eps;
    } pc{u32(h.off), u32(add.off), u32(w.off), u32(y.off), u32(rows), u32(width), (add ? 1u : 0u) | (w ? 2u : 0u), eps};
    uint32_t gx, gy;
    grid(rows, gx, gy);
    ctx_->dispatch("rms_norm", {hb, ab, wb, yb}, &pc, sizeof pc, gx, gy);
  }

  void rope_neox(Ref x, int64_t rows, int64_t row_stride, int64_t heads, int64_t head_stride, int64_t n_rot, float theta,
                 std::span<const int32_t> pos, const int32_t* pos3, std::array<int32_t, 3> sections) override {
    if (static_cast<int64_t>(pos.size()) < rows) bad("rope: fewer positions than rows");
    if (rows <= 0 || heads <= 0 || n_rot < 2) return;
    const int64_t half = n_rot / 2;
    // The angles' cos/sin, per row and pair, in double on the host (ops::rope_table, as the CPU).
    std::vector<float> cs(static_cast<size_t>(rows * n_rot)), slot(static_cast<size_t>(half));
    for (int64_t r = 0; r < rows; ++r) {
      for (int64_t j = 0; j < half; ++j) {
        int32_t p = pos[static_cast<size_t>(r)];
        if (pos3) {
          const int32_t* p3 = pos3 + 3 * r;
          p = (j % 3 == 1 && j < 3 * sections[1]) ? p3[1] : (j % 3 == 2 && j < 3 * sections[2]) ? p3[2] : p3[0];
        }
        slot[static_cast<size_t>(j)] = static_cast<float>(p);
      }
      ops::rope_table(slot.data(), n_rot, theta, cs.data() + r * 2 * half);
    }
    rope_table_dispatch(x, rows, row_stride, heads, head_stride, n_rot, cs);
  }

  void silu_mul(Ref a, Ref b, Ref y, int64_t n) override { eltwise(a, b, y, n, 0, 0.0f, "silu_mul"); }
  void gelu_mul(Ref a, Ref b, Ref y, int64_t n) override { eltwise(a, b, y, n, 1, 0.0f, "gelu_mul"); }
  void softcap(Ref x, int64_t n, float cap) override { eltwise(x, x, x, n, 2, cap, "softcap"); }
  void add(Ref x, Ref y, int64_t n) override { eltwise(x, y, x, n, 3, 0.0f, "add"); }
  void scale(Ref x, int64_t n, float s) override { eltwise(x, x, x, n, 4, s, "scale"); }
  void mul_cols(Ref x, Ref w, int64_t rows, int64_t width) override {
    if (host_blocks_) return nn::Device::mul_cols(x, w, rows, width);
    if (rows <= 0 || width <= 0) return;
    eltwise(x, w, x, rows * width, 5, 0.0f, "mul_cols", width, width);
  }

  // The per-head blocks (heads.comp): one workgroup per vector, in place on strided views.
  void rms_norm_heads(nn::Heads x, int64_t rows, int64_t heads, int64_t width, Ref w, float eps) override {
    if (host_blocks_) return nn::Device::rms_norm_heads(x, rows, heads, width, w, eps);
    heads_op(x, nn::Heads{w, 0, 0}, rows, heads, width, 0, eps, 1.0f, "rms_norm_heads");
  }
  void l2_norm_heads(nn::Heads x, int64_t rows, int64_t heads, int64_t width, float eps, float scale) override {
    if (host_blocks_) return nn::Device::l2_norm_heads(x, rows, heads, width, eps, scale);
    heads_op(x, nn::Heads{}, rows, heads, width, 1, eps, scale, "l2_norm_heads");
  }
  void mul_sigmoid_heads(nn::Heads x, nn::Heads gate, int64_t rows, int64_t heads, int64_t width) override {
    if (host_blocks_) return nn::Device::mul_sigmoid_heads(x, gate, rows, heads, width);
    if (!gate.at) bad("mul_sigmoid_heads: no gate");
    heads_op(x, gate, rows, heads, width, 2, 0.0f, 1.0f, "mul_sigmoid_heads");
  }

  void gdn_gates(Ref a, Ref b, Ref ssm_a, Ref dt_bias, int64_t rows, int64_t H, Ref gb) override {
    if (host_blocks_) return nn::Device::gdn_gates(a, b, ssm_a, dt_bias, rows, H, gb);
    Lock l(ctx_->mu());
    VkBuffer ab = buf(a, rows * H, "gdn_gates a"), bb = buf(b, rows * H, "gdn_gates b");
    VkBuffer sb = buf(ssm_a, H, "gdn_gates ssm_a"), db = buf(dt_bias, H, "gdn_gates dt_bias"), gbb = buf(gb, rows * 2 * H, "gdn_gates out");
    if (rows <= 0 || H <= 0) return;
    const uint32_t pc[7] = {u32(a.off), u32(b.off), u32(ssm_a.off), u32(dt_bias.off), u32(gb.off), u32(rows), u32(H)};
    ctx_->dispatch("gdn_gates", {ab, bb, sb, db, gbb}, pc, sizeof pc, stride_groups(rows * H));
  }

  void gather_rows(Ref src, std::span<const int32_t> ids, int64_t width, Ref dst) override {
    if (host_blocks_) return nn::Device::gather_rows(src, ids, width, dst);
    const int64_t n = static_cast<int64_t>(ids.size());
    const int64_t hi = row_range(ids, "gather_rows");
    Lock l(ctx_->mu());
    VkBuffer sb = buf(src, (hi + 1) * width, "gather_rows src"), db = buf(dst, n * width, "gather_rows dst");
    if (n == 0 || width <= 0) return;
    const vk::Slice ib = ctx_->host_buffer(ids.data(), ids.size() * 4);
    const uint32_t pc[5] = {u32(src.off), u32(dst.off), u32(n), u32(width), 0};
    ctx_->dispatch("rows", {sb, db, ib, ib}, pc, sizeof pc, stride_groups(n * width));
  }

  void add_rows_scaled(Ref src, std::span<const int32_t> ids, std::span<const float> w, int64_t width, Ref dst) override {
    if (host_blocks_) return nn::Device::add_rows_scaled(src, ids, w, width, dst);
    if (ids.size() != w.size()) bad("add_rows_scaled: ids and weights differ in count");
    const int64_t n = static_cast<int64_t>(ids.size());
    const int64_t hi = row_range(ids, "add_rows_scaled");
    Lock l(ctx_->mu());
    VkBuffer sb = buf(src, n * width, "add_rows_scaled src"), db = buf(dst, (hi + 1) * width, "add_rows_scaled dst");
    if (n == 0 || width <= 0) return;
    const vk::Slice ib = ctx_->host_buffer(ids.data(), ids.size() * 4), wb = ctx_->host_buffer(w.data(), w.size() * 4);
    const uint32_t pc[5] = {u32(src.off), u32(dst.off), u32(n), u32(width), 1};
    ctx_->dispatch("rows", {sb, db, ib, wb}, pc, sizeof pc, stride_groups(width));
  }

  void rope_neox_div(Ref x, int64_t rows, int64_t row_stride, int64_t heads, int64_t head_stride, int64_t n_rot, float theta,
                     std::span<const int32_t> pos, std::span<const float> div) override {
    if (host_blocks_) return nn::Device::rope_neox_div(x, rows, row_stride, heads, head_stride, n_rot, theta, pos, div);
    if (static_cast<int64_t>(div.size()) < n_rot / 2) bad("rope_neox_div: too few divisors");
    if (static_cast<int64_t>(pos.size()) < rows) bad("rope_neox_div: fewer positions than rows");
    if (rows <= 0 || heads <= 0 || n_rot < 2) return;
    // slot j of row r at position pos[r] / div[j] (as the host version: the angle's table in double)
    const int64_t half = n_rot / 2;
    std::vector<float> cs(static_cast<size_t>(rows * 2 * half)), slot(static_cast<size_t>(half));
    for (int64_t r = 0; r < rows; ++r) {
      for (int64_t j = 0; j < half; ++j)
        slot[static_cast<size_t>(j)] = static_cast<float>(pos[static_cast<size_t>(r)]) / div[static_cast<size_t>(j)];
      ops::rope_table(slot.data(), n_rot, theta, cs.data() + r * 2 * half);
    }
    rope_table_dispatch(x, rows, row_stride, heads, head_stride, n_rot, cs);
  }

  void conv_silu(Ref X, Ref wT, int64_t C, int64_t K, int64_t T, Ref y) override {
    Lock l(ctx_->mu());
    VkBuffer xb = buf(X, (K - 1 + T) * C, "conv_silu"), wb = buf(wT, K * C, "conv_silu taps"), yb = buf(y, T * C, "conv_silu out");
    if (T <= 0 || C <= 0) return;
    const uint32_t pc[6] = {u32(X.off), u32(wT.off), u32(y.off), u32(C), u32(K), u32(T)};
    ctx_->dispatch("conv_silu", {xb, wb, yb}, pc, sizeof pc, stride_groups(T * C));
  }

  void gdn(const nn::GdnArgs& a) override {
    if (a.Hk <= 0 || a.Hv % a.Hk != 0) bad("gdn: value heads not a multiple of key heads");
    if (a.dk > 256) throw_error(ErrorCode::kUnsupported, "vulkan device: gdn: key head dim > 256");
    const int64_t KD = a.Hk * a.dk;
    Lock l(ctx_->mu());
    VkBuffer q = buf(a.qkv, (a.T - 1) * a.qk_stride + 2 * KD + a.Hv * a.dv, "gdn qkv");
    VkBuffer g = buf(a.gb, (a.T - 1) * a.gb_stride + 2 * a.Hv, "gdn g/beta");
    VkBuffer s = buf(a.state, a.Hv * a.dk * a.dv, "gdn state");
    VkBuffer o = buf(a.out, (a.T - 1) * a.out_stride + a.Hv * a.dv, "gdn out");
    if (a.T <= 0) return;
    const uint32_t pc[13] = {u32(a.qkv.off), u32(a.qk_stride), u32(a.gb.off), u32(a.gb_stride), u32(a.state.off), u32(a.out.off),
                             u32(a.out_stride), u32(a.T), u32(a.Hk), u32(a.Hv), u32(a.dk), u32(a.dv), a.tiled ? 1u : 0u};
    ctx_->dispatch("gdn", {q, g, s, o}, pc, sizeof pc, ceil_div(a.dv, 64), u32(a.Hv));
  }

  void attention(const nn::AttnArgs& a) override {
    if (a.Hkv <= 0 || a.H % a.Hkv != 0) bad("attention: heads not a multiple of kv heads");
    if (a.hd > 512) throw_error(ErrorCode::kUnsupported, "vulkan device: attention: head dim > 512");
    if (a.T > 65535) bad("attention: more than 65535 queries in one call");
    const int64_t KW = a.Hkv * a.hd, n_kv = a.pos0 + a.T;
    Lock l(ctx_->mu());
    VkBuffer q = buf(a.q, (a.T - 1) * a.q_stride + (a.H - 1) * a.q_head_stride + a.hd, "attention q");
    VkBuffer k = buf(a.k, n_kv * KW, "attention k"), v = buf(a.v, n_kv * KW, "attention v");
    VkBuffer o = buf(a.out, (a.T - 1) * a.out_stride + a.H * a.hd, "attention out");
    if (a.T <= 0 || a.H <= 0) return;
    struct {
      uint32_t q_off, q_stride, q_head_stride, k_off, v_off, o_off, o_stride, pos0, H, Hkv, hd, window;
      float scale;
    } pc{u32(a.q.off), u32(a.q_stride), u32(a.q_head_stride), u32(a.k.off), u32(a.v.off), u32(a.out.off), u32(a.out_stride),
         u32(a.pos0), u32(a.H), u32(a.Hkv), u32(a.hd), u32(a.window), a.scale};
    ctx_->dispatch("attention", {q, k, v, o}, &pc, sizeof pc, u32(a.H), u32(a.T));
  }

  // Routing needs its results on the host anyway: the logits come back and the CPU's routine runs.
  void moe_route(Ref logits, int64_t rows, int64_t E, int64_t k, int32_t* ids, float* weights) override {
    if (k < 1 || k > E) bad("moe_route: k outside 1..E");
    std::vector<float> l(static_cast<size_t>(rows * E));
    read(logits, l.data(), rows * E);
    for (int64_t r = 0; r < rows; ++r) ops::moe_route_row(l.data() + r * E, E, k, ids + r * k, weights + r * k);
  }

 private:
  // The IQ codebooks in one device buffer, bound to binding 3 of the weight-reading shaders (matmul,
  // matmul_tiled, embed: every variant, so their pipelines share one layout); word offsets as
  // dequant.glsl's kGrid* constants: IQ2_XXS 0, IQ2_XS 512, IQ2_S 1536, IQ3_XXS 3584, IQ3_S 3840,
  // IQ1_S 4352 (64-bit entries as two words, low first), 8448 words (33 KiB) in all.
  void upload_grids() {
    std::vector<uint32_t> g(8448);
    std::memcpy(g.data(), kern::kIQ2XXSGrid, 256 * 8);
    std::memcpy(g.data() + 512, kern::kIQ2XSGrid, 512 * 8);
    std::memcpy(g.data() + 1536, kern::kIQ2SGrid, 1024 * 8);
    std::memcpy(g.data() + 3584, kern::kIQ3XXSGrid, 256 * 4);
    std::memcpy(g.data() + 3840, kern::kIQ3SGrid, 512 * 4);
    std::memcpy(g.data() + 4352, kern::kIQ1SGrid, 2048 * 8);
    Lock l(ctx_->mu());
    grids_ = ctx_->make(g.size() * 4, false);
    const vk::Slice s = ctx_->host_buffer(g.data(), g.size() * 4);
    ctx_->copy(s.buf, s.off, grids_.buf, 0, g.size() * 4);
    ctx_->finish();
  }

  // The VkBuffer of r, checked to be this device's and to hold n floats from r.off.
  VkBuffer buf(Ref r, int64_t n, const char* what) const {
    auto* b = dynamic_cast<VkBuf*>(r.buf);
    if (!b || b->ctx != ctx_) bad(std::string(what) + ": not this device's buffer");
    if (r.off < 0 || n < 0 || r.off + n > b->floats())
      bad(std::string(what) + ": [" + std::to_string(r.off) + ", +" + std::to_string(n) + ") outside a buffer of " +
          std::to_string(b->floats()));
    return b->m.buf;
  }
  const VkWeight& weight(const nn::Weight& w) const {
    const auto* t = dynamic_cast<const VkWeight*>(&w);
    if (!t || t->ctx != ctx_) bad("a weight of another device");
    return *t;
  }
  // nb: floats of b read (n, or one row for mul_cols); width: mul_cols' row width.
  // rope.comp over rows × heads with the cos/sin table cs [rows, n_rot/2, 2] from the host.
  void rope_table_dispatch(Ref x, int64_t rows, int64_t row_stride, int64_t heads, int64_t head_stride, int64_t n_rot,
                           const std::vector<float>& cs) {
    Lock l(ctx_->mu());
    VkBuffer xb = buf(x, (rows - 1) * row_stride + (heads - 1) * head_stride + n_rot, "rope");
    const vk::Slice cb = ctx_->host_buffer(cs.data(), cs.size() * 4);
    const uint32_t pc[6] = {u32(x.off), u32(rows), u32(row_stride), u32(heads), u32(head_stride), u32(n_rot)};
    ctx_->dispatch("rope", {xb, cb}, pc, sizeof pc, stride_groups(rows * heads * (n_rot / 2)));
  }
  // The largest id (-1 when none), after checking that none is negative.
  static int64_t row_range(std::span<const int32_t> ids, const char* what) {
    int64_t hi = -1;
    for (int32_t id : ids) {
      if (id < 0) bad(std::string(what) + ": negative row " + std::to_string(id));
      hi = std::max<int64_t>(hi, id);
    }
    return hi;
  }
  // heads.comp: op 0 rms (g: the weight, g.at unset: none), 1 l2, 2 sigmoid gate (g: the gate heads).
  void heads_op(nn::Heads x, nn::Heads g, int64_t rows, int64_t heads, int64_t width, uint32_t op, float eps, float scale,
                const char* what) {
    if (rows <= 0 || heads <= 0 || width <= 0) return;
    if (x.row_stride < 0 || x.head_stride < 0 || g.row_stride < 0 || g.head_stride < 0) bad(std::string(what) + ": negative stride");
    const int64_t nx = (rows - 1) * x.row_stride + (heads - 1) * x.head_stride + width;
    const int64_t ng = op == 2 ? (rows - 1) * g.row_stride + (heads - 1) * g.head_stride + width : width;
    Lock l(ctx_->mu());
    VkBuffer xb = buf(x.at, nx, what);
    VkBuffer gb = g.at ? buf(g.at, ng, what) : xb;
    struct {
      uint32_t x_off, x_rs, x_hs, g_off, g_rs, g_hs, rows, heads, width, op, has_w;
      float eps, scale;
    } pc{u32(x.at.off), u32(x.row_stride), u32(x.head_stride), u32(g.at.off), u32(g.row_stride), u32(g.head_stride),
         u32(rows), u32(heads), u32(width), op, g.at ? 1u : 0u, eps, scale};
    uint32_t gx = 0, gy = 1;
    if (op == 2) gx = std::max<uint32_t>(1, static_cast<uint32_t>(std::min<int64_t>((rows * heads * width + 63) / 64, 65535)));
    else grid(rows * heads, gx, gy);  // a workgroup per vector
    ctx_->dispatch("heads", {xb, gb}, &pc, sizeof pc, gx, gy);
  }
  void eltwise(Ref a, Ref b, Ref y, int64_t n, uint32_t op, float cap, const char* what, int64_t nb = -1, int64_t width = 1) {
    Lock l(ctx_->mu());
    VkBuffer ab = buf(a, n, what), bb = buf(b, nb < 0 ? n : nb, what), yb = buf(y, n, what);
    if (n <= 0) return;
    struct {
      uint32_t a_off, b_off, y_off, n, op;
      float cap;
      uint32_t width;
    } pc{u32(a.off), u32(b.off), u32(y.off), u32(n), op, cap, u32(width)};
    ctx_->dispatch("eltwise", {ab, bb, yb}, &pc, sizeof pc, stride_groups(n));
  }

  std::shared_ptr<Context> ctx_;
  Mem grids_;  // upload_grids
  // OXI_VULKAN_HOST_BLOCKS=1: the small blocks take nn::Device's host versions (a read, the CPU's
  // formula, a write: a queue wait each), as before they had shaders — to measure what that costs.
  bool host_blocks_ = false;
};

}  // namespace

std::unique_ptr<nn::Device> make_vulkan_device(int index, std::string* why) {
  std::string w;
  std::shared_ptr<Context> c = Context::create(index, &w);
  if (!c) {
    if (why) *why = w;
    return nullptr;
  }
  return std::make_unique<VulkanDevice>(std::move(c));
}

bool vulkan_kernels_built() { return true; }

}  // namespace oxi::backend

#else  // no shaders in this build

namespace oxi::backend {
std::unique_ptr<nn::Device> make_vulkan_device(int, std::string* why) {
  if (why) *why = "built without Vulkan shaders (no glslc or glslangValidator, or no Vulkan headers, at configure time)";
  return nullptr;
}
bool vulkan_kernels_built() { return false; }
}  // namespace oxi::backend

#endif
