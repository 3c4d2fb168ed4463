// The backend seam: routing by the size rule, one upload per matrix, declines falling back to the
// CPU with identical results, device (cpu-ref) results against the CPU kernels and a double
// reference, selection by name / env.
#include "backend/backend.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <thread>
#include <vector>

#include "backend/hook.h"
#include "backend/vulkan/vulkan_device.h"
#include "core/error.h"
#include "core/half.h"
#include "format/dtype.h"
#include "kernels/matmul.h"
#include "nn/device.h"

namespace {

using oxi::DType;
using oxi::MatrixView;
namespace be = oxi::backend;

// A quantised matrix the test owns.
struct Mat {
  std::vector<uint8_t> bytes;
  MatrixView view;
};

Mat make_mat(DType t, int64_t rows, int64_t cols, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  std::vector<float> row(static_cast<size_t>(cols));
  Mat m;
  const uint64_t rb = *oxi::dtype_row_bytes(t, static_cast<uint64_t>(cols));
  m.bytes.resize(rb * static_cast<uint64_t>(rows));
  for (int64_t r = 0; r < rows; ++r) {
    for (auto& v : row) v = nd(rng);
    oxi::quantize_row(t, row.data(), cols, m.bytes.data() + rb * static_cast<uint64_t>(r));
  }
  m.view = MatrixView{t, rows, cols, m.bytes.data(), rb};
  return m;
}

std::vector<float> make_x(int64_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  std::vector<float> x(static_cast<size_t>(n));
  for (auto& v : x) v = nd(rng);
  return x;
}

// Independent reference: the dequantised matrix times x in double.
std::vector<double> reference(const MatrixView& w, const std::vector<float>& x, int64_t T) {
  std::vector<float> row(static_cast<size_t>(w.cols));
  std::vector<double> y(static_cast<size_t>(T * w.rows));
  for (int64_t r = 0; r < w.rows; ++r) {
    oxi::dequantize_row(w, r, row.data());
    for (int64_t t = 0; t < T; ++t) {
      double s = 0;
      for (int64_t c = 0; c < w.cols; ++c) s += static_cast<double>(row[c]) * x[t * w.cols + c];
      y[t * w.rows + r] = s;
    }
  }
  return y;
}

// Max |a - ref| relative to the reference's RMS.
double rel_err(const std::vector<float>& a, const std::vector<double>& ref) {
  double m = 0, ss = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    m = std::max(m, std::fabs(a[i] - ref[i]));
    ss += ref[i] * ref[i];
  }
  return m / std::sqrt(ss / static_cast<double>(ref.size()));
}

std::vector<float> run_matmul(const MatrixView& w, const std::vector<float>& x, int64_t T) {
  std::vector<float> y(static_cast<size_t>(T * w.rows), -7.0f);
  oxi::matmul(w, x.data(), T, y.data());
  return y;
}

std::vector<float> cpu_matmul(const MatrixView& w, const std::vector<float>& x, int64_t T) {
  be::activate(nullptr);
  return run_matmul(w, x, T);
}

// Wraps cpu-ref: counts uploads, and declines matrices / batches on request.
struct Spy : be::Backend {
  std::unique_ptr<be::Backend> inner = be::make_cpu_ref();
  int* prepares;
  bool decline_prepare = false, decline_batch = false;
  explicit Spy(int* p) : prepares(p) {}
  std::string name() const override { return "spy"; }
  std::string description() const override { return "test"; }
  std::unique_ptr<be::DeviceMatrix> prepare(const MatrixView& w) override {
    ++*prepares;
    return decline_prepare ? nullptr : inner->prepare(w);
  }
  bool matmul_batch(std::span<const be::Job> jobs, const float* x, int64_t n) override {
    if (decline_batch) {
      for (const auto& j : jobs) j.y[0] = 12345.0f;  // a decline may leave garbage: the CPU overwrites
      return false;
    }
    return inner->matmul_batch(jobs, x, n);
  }
};

class Seam : public ::testing::Test {
 protected:
  void TearDown() override { be::activate(nullptr); }
  int prepares = 0;
  Spy* spy(be::SizeRule rule = {4, 0.0}) {
    auto s = std::make_unique<Spy>(&prepares);
    Spy* p = s.get();
    be::activate(std::move(s), rule);
    be::reset_stats();
    return p;
  }
};

TEST_F(Seam, SizeRuleSendsBigCallsToTheDeviceAndDecodeToTheCpu) {
  Mat m = make_mat(DType::F32, 48, 64, 1);
  const auto x = make_x(16 * 64, 2);
  const auto cpu1 = cpu_matmul(m.view, x, 1);
  const auto cpu16 = cpu_matmul(m.view, x, 16);
  spy({4, 0.0});
  const auto y1 = run_matmul(m.view, x, 1);
  EXPECT_EQ(be::stats().small_batches, 1u);
  EXPECT_EQ(be::stats().device_batches, 0u);
  EXPECT_EQ(prepares, 0);  // nothing uploaded for a call the CPU runs
  EXPECT_EQ(y1, cpu1);     // bit-identical: the CPU kernels ran it
  const auto y16 = run_matmul(m.view, x, 16);
  EXPECT_EQ(be::stats().device_batches, 1u);
  EXPECT_EQ(prepares, 1);
  const auto ref = reference(m.view, x, 16);
  EXPECT_LT(rel_err(y16, ref), 1e-5);
  EXPECT_LT(rel_err(cpu16, ref), 1e-5);
}

TEST_F(Seam, FlopThresholdKeepsSmallMatricesOnTheCpu) {
  Mat m = make_mat(DType::F32, 16, 32, 3);
  const auto x = make_x(8 * 32, 4);
  spy({2, 2.0 * 16 * 32 * 8 + 1});  // one FLOP more than this call
  run_matmul(m.view, x, 8);
  EXPECT_EQ(be::stats().small_batches, 1u);
  be::set_rule({2, 2.0 * 16 * 32 * 8});
  run_matmul(m.view, x, 8);
  EXPECT_EQ(be::stats().device_batches, 1u);
}

TEST_F(Seam, EachMatrixIsUploadedOnce) {
  Mat a = make_mat(DType::Q8_0, 32, 64, 5), b = make_mat(DType::Q4_K, 32, 256, 6);
  const auto xa = make_x(8 * 64, 7), xb = make_x(8 * 256, 8);
  spy();
  for (int i = 0; i < 3; ++i) {
    run_matmul(a.view, xa, 8);
    run_matmul(b.view, xb, 8);
  }
  EXPECT_EQ(prepares, 2);
  EXPECT_EQ(be::stats().prepared, 2u);
  EXPECT_EQ(be::stats().device_batches, 6u);
  // A view of part of a matrix (an expert slice, the first rows) is a matrix of its own.
  MatrixView half = a.view;
  half.rows = 16;
  run_matmul(half, xa, 8);
  EXPECT_EQ(prepares, 3);
}

// Sequences served from several threads share the device copies: each matrix is uploaded once.
TEST_F(Seam, ConcurrentCallersShareOneUploadPerMatrix) {
  Mat a = make_mat(DType::Q8_0, 48, 128, 50), b = make_mat(DType::F16, 40, 128, 51);
  const auto x = make_x(8 * 128, 52);
  const auto ref_a = reference(a.view, x, 8), ref_b = reference(b.view, x, 8);
  spy();
  std::atomic<int> bad{0};
  std::vector<std::thread> ts;
  for (int i = 0; i < 4; ++i)
    ts.emplace_back([&] {
      for (int k = 0; k < 5; ++k)
        if (rel_err(run_matmul(a.view, x, 8), ref_a) > 1e-5 || rel_err(run_matmul(b.view, x, 8), ref_b) > 1e-5) ++bad;
    });
  for (auto& t : ts) t.join();
  EXPECT_EQ(bad.load(), 0);
  EXPECT_EQ(prepares, 2);
  EXPECT_EQ(be::stats().device_batches, 40u);
}

TEST_F(Seam, EagerPrepareUploadsAtLoadNotAtFirstUse) {
  Mat a = make_mat(DType::BF16, 32, 64, 9);
  spy();
  oxi::device::prepare(&a.view, 1);
  EXPECT_EQ(prepares, 1);
  run_matmul(a.view, make_x(8 * 64, 10), 8);
  EXPECT_EQ(prepares, 1);
  EXPECT_EQ(be::stats().device_batches, 1u);
}

TEST_F(Seam, NewContentAtAReusedAddressIsUploadedAgain) {
  Mat a = make_mat(DType::F32, 32, 64, 11);
  const auto x = make_x(8 * 64, 12);
  spy();
  run_matmul(a.view, x, 8);
  // Same pointer and shape, new weights (a freed buffer reused by the next model).
  Mat b = make_mat(DType::F32, 32, 64, 13);
  std::copy(b.bytes.begin(), b.bytes.end(), a.bytes.begin());
  const auto y = run_matmul(a.view, x, 8);
  EXPECT_EQ(prepares, 2);
  EXPECT_LT(rel_err(y, reference(b.view, x, 8)), 1e-5);
  // forget() drops the copy: the next use uploads again.
  oxi::device::forget(a.bytes.data(), a.bytes.data() + a.bytes.size());
  run_matmul(a.view, x, 8);
  EXPECT_EQ(prepares, 3);
}

// The spy declines (a matrix, or the batch): results bit-identical to the CPU's, declines counted.
TEST_F(Seam, ClosingTheLastModelDropsDeviceCopies) {
  Mat a = make_mat(DType::F32, 32, 64, 40);
  const auto x = make_x(8 * 64, 41);
  spy();
  auto first = std::make_unique<be::WeightsLease>();
  {
    be::WeightsLease second;
    run_matmul(a.view, x, 8);
  }  // another model still open: copies kept
  run_matmul(a.view, x, 8);
  EXPECT_EQ(prepares, 1);
  first.reset();  // the last model closed
  run_matmul(a.view, x, 8);
  EXPECT_EQ(prepares, 2);
}

TEST_F(Seam, DeclinesFallBackToTheCpuIdentically) {
  for (const bool whole_batch : {false, true}) {
    SCOPED_TRACE(whole_batch ? "batch declined" : "matrix declined");
    Mat m = make_mat(whole_batch ? DType::Q4_K : DType::Q4_0, 40, 256, 14);
    const auto x = make_x(8 * 256, 15);
    const auto cpu = cpu_matmul(m.view, x, 8);
    prepares = 0;
    Spy* s = spy();
    (whole_batch ? s->decline_batch : s->decline_prepare) = true;
    EXPECT_EQ(run_matmul(m.view, x, 8), cpu);
    EXPECT_EQ(run_matmul(m.view, x, 8), cpu);
    EXPECT_EQ(prepares, 1);  // one upload (or one remembered decline)
    EXPECT_EQ(be::stats().prepare_declined, whole_batch ? 0u : 1u);
    EXPECT_EQ(be::stats().declined_batches, 2u);
    EXPECT_EQ(be::stats().device_batches, 0u);
  }
}

TEST_F(Seam, BatchSharingOneInputRunsAsOneDeviceCall) {
  Mat q = make_mat(DType::F16, 64, 128, 18), k = make_mat(DType::F16, 32, 128, 19),
      v = make_mat(DType::Q8_0, 32, 128, 20);
  const auto x = make_x(8 * 128, 21);
  std::vector<float> yq(8 * 64), yk(8 * 32), yv(8 * 32);
  const MatrixView ws[] = {q.view, k.view, v.view};
  float* const ys[] = {yq.data(), yk.data(), yv.data()};
  spy();
  ASSERT_TRUE(oxi::device::try_matmul(ws, ys, 3, x.data(), 8));
  EXPECT_EQ(be::stats().device_batches, 1u);
  EXPECT_EQ(be::stats().device_jobs, 3u);
  EXPECT_LT(rel_err(yq, reference(q.view, x, 8)), 1e-5);
  EXPECT_LT(rel_err(yv, reference(v.view, x, 8)), 1e-5);
  // One declined matrix sends the whole batch to the CPU.
  spy()->decline_prepare = true;
  EXPECT_FALSE(oxi::device::try_matmul(ws, ys, 3, x.data(), 8));
}

// Device (cpu-ref: dequantised f32 copy, f32 activations) and CPU kernels (activations in the
// weight type's dot format) both against the double reference, every native weight type.
TEST_F(Seam, DeviceAgreesWithCpuKernelsOnEveryType) {
  struct Case {
    DType t;
    double cpu_tol;
  };
  // CPU tolerances: f16/bf16 activation rounding, Q8_0 / Q8_K activation quantisation.
  for (const Case c : {Case{DType::F32, 1e-5}, Case{DType::F16, 2e-2}, Case{DType::BF16, 3e-2}, Case{DType::Q8_0, 5e-2},
                       Case{DType::Q4_0, 5e-2}, Case{DType::Q4_K, 5e-2}}) {
    SCOPED_TRACE(oxi::dtype_name(c.t));
    Mat m = make_mat(c.t, 72, 512, 22);
    const auto x = make_x(20 * 512, 23);
    const auto ref = reference(m.view, x, 20);
    const auto cpu = cpu_matmul(m.view, x, 20);
    spy();
    const auto dev = run_matmul(m.view, x, 20);
    ASSERT_EQ(be::stats().device_batches, 1u);
    EXPECT_LT(rel_err(dev, ref), 1e-5);  // f32 sums of exact dequantised weights
    EXPECT_LT(rel_err(cpu, ref), c.cpu_tol);
  }
}

TEST_F(Seam, SelectionByName) {
  EXPECT_EQ(be::init("none"), "device: none (CPU)");
  EXPECT_EQ(be::active(), nullptr);
  be::init("cpu-ref");
  EXPECT_EQ(be::init("cpu"), "device: none (CPU)");  // llama.cpp's spelling of none
  EXPECT_EQ(be::active(), nullptr);
  for (const char* bad : {"vulkan:", "vulkan:x", "vulkan:-1", "vulkan:99999", "vulkan:9999"}) {
    try {
      be::init(bad);
      FAIL() << bad << ": no throw";
    } catch (const oxi::Error& e) {
      EXPECT_EQ(e.code(), oxi::ErrorCode::kInvalidArgument) << bad;
      EXPECT_NE(std::string(e.what()).find(bad), std::string::npos) << e.what();
    }
  }
  const std::vector<std::string> list = be::list_devices();
  ASSERT_FALSE(list.empty());
  EXPECT_EQ(list[0].rfind("cpu ", 0), 0u) << list[0];
  for (size_t i = 1; i < list.size(); ++i)  // vulkan:i in order, or why there is none
    EXPECT_TRUE(list[i].rfind("vulkan:" + std::to_string(i - 1) + "  ", 0) == 0 || list[i].rfind("(no Vulkan device", 0) == 0) << list[i];
  const std::string line = be::init("cpu-ref");
  EXPECT_EQ(line.rfind("device: cpu-ref (", 0), 0u) << line;
  ASSERT_NE(be::active(), nullptr);
  EXPECT_EQ(be::active()->name(), "cpu-ref");
  EXPECT_EQ(be::active_rule().min_tokens, 2);
  EXPECT_EQ(be::device_line(), line);
  try {
    be::init("no-such-device");
    FAIL() << "no throw";
  } catch (const oxi::Error& e) {
    EXPECT_EQ(e.code(), oxi::ErrorCode::kInvalidArgument);
    EXPECT_NE(std::string(e.what()).find("cpu-ref"), std::string::npos) << e.what();  // lists the known
  }
  // auto never picks a test backend.
  be::init("auto");
  if (be::active()) {
    EXPECT_NE(be::active()->name(), "cpu-ref");
  }
}

TEST_F(Seam, EnvironmentSelectsAndTunesTheRule) {
  setenv("OXI_DEVICE", "cpu-ref", 1);
  setenv("OXI_DEVICE_MIN_TOKENS", "5", 1);
  setenv("OXI_DEVICE_MIN_FLOPS", "1e9", 1);
  be::init("none");
  EXPECT_EQ(be::init(""), "device: none (CPU)");  // a default keeps the choice made
  be::activate(nullptr);                          // back to "nothing chosen yet"
  be::init("");
  ASSERT_NE(be::active(), nullptr);
  EXPECT_EQ(be::active_rule().min_tokens, 5);
  EXPECT_EQ(be::active_rule().min_flops, 1e9);
  setenv("OXI_DEVICE_MIN_TOKENS", "five", 1);
  be::activate(nullptr);
  EXPECT_THROW(be::init(""), oxi::Error);
  unsetenv("OXI_DEVICE");
  unsetenv("OXI_DEVICE_MIN_TOKENS");
  unsetenv("OXI_DEVICE_MIN_FLOPS");
  be::init("none");
}

}  // namespace

namespace {

// The Vulkan backend: where a loader and a driver are installed (CI: lavapipe) it names the device;
// with its shaders built it runs the per-matmul seam on the block device's shaders (f32 activations:
// as close to the double reference as cpu-ref), else it declines every job and the CPU runs them.
TEST_F(Seam, VulkanBackendRunsOrDeclinesTheSeam) {
  const be::ProbeEntry* vulkan = nullptr;
  for (const auto& p : be::probes())
    if (std::string(p.name) == "vulkan") vulkan = &p;
  ASSERT_NE(vulkan, nullptr);
  const auto t0 = std::chrono::steady_clock::now();
  be::ProbeResult r = vulkan->probe();
  const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  if (!r.backend) GTEST_SKIP() << "no Vulkan device: " << r.why;
  std::printf("vulkan probe: %s (%.1f ms)\n", r.backend->description().c_str(), ms);
  EXPECT_EQ(r.score, 0);  // named only: auto must not pick it
  EXPECT_EQ(r.backend->name(), "vulkan");
  EXPECT_FALSE(r.backend->description().empty());

  // u: a matrix the device cannot hold. Every weight type the CPU runs has a shader, so the
  // device's weight part limit is lowered (OXI_VULKAN_MAX_PART, read when the backend makes its
  // device on the first upload) to 512 bytes: m's rows (256 Q8_0 values, 272 bytes) go one to a
  // part, u's (512 values, 544 bytes) cannot go at all.
  Mat m = make_mat(DType::Q8_0, 64, 256, 30), u = make_mat(DType::Q8_0, 64, 512, 32);
  const auto x = make_x(32 * 256, 31), xu = make_x(32 * 512, 33);
  const auto cpu = cpu_matmul(m.view, x, 32), cpu_u = cpu_matmul(u.view, xu, 32);
  be::init("none");
  setenv("OXI_VULKAN_MAX_PART", "512", 1);
  const std::string line = be::init("vulkan");
  EXPECT_EQ(line.rfind("device: vulkan (", 0), 0u) << line;
  be::set_rule({1, 0.0});
  be::reset_stats();
  const auto y = run_matmul(m.view, x, 32);
  EXPECT_EQ(run_matmul(u.view, xu, 32), cpu_u);  // declined: the CPU's result
  unsetenv("OXI_VULKAN_MAX_PART");
  if (be::vulkan_kernels_built() && be::active_block_device()) {
    EXPECT_EQ(be::stats().prepared, 1u);
    EXPECT_EQ(be::stats().device_batches, 1u);
    EXPECT_LT(rel_err(y, reference(m.view, x, 32)), 1e-5);
  } else {
    EXPECT_EQ(y, cpu);
    EXPECT_EQ(be::stats().device_batches, 0u);
  }
  EXPECT_EQ(be::stats().prepare_declined, be::vulkan_kernels_built() ? 1u : 2u);
  be::init("none");
}

// The registry hands out a backend's block device: none without a device or for cpu-ref; the
// vulkan backend's (made once, shared) where a Vulkan driver is present and the shaders were built.
TEST_F(Seam, ActiveBlockDeviceIsTheVulkanDevice) {
  be::init("none");
  EXPECT_EQ(be::active_block_device(), nullptr);
  be::init("cpu-ref");
  EXPECT_EQ(be::active_block_device(), nullptr);
  be::init("none");
  try {
    be::init("vulkan");
  } catch (const oxi::Error& e) {
    GTEST_SKIP() << "no Vulkan device: " << e.what();
  }
  std::shared_ptr<oxi::nn::Device> d = be::active_block_device();
  if (!be::vulkan_kernels_built()) {
    EXPECT_EQ(d, nullptr);
    GTEST_SKIP() << "built without Vulkan shaders";
  }
  ASSERT_NE(d, nullptr);
  EXPECT_EQ(d->name(), "vulkan");
  EXPECT_EQ(be::active_block_device(), d);  // made once
  auto b = d->alloc(3);
  const float in[3] = {1.0f, -2.0f, 0.5f};
  float out[3] = {};
  d->write(oxi::nn::Ref{b.get(), 0}, in, 3);
  d->silu_mul(oxi::nn::Ref{b.get(), 0}, oxi::nn::Ref{b.get(), 0}, oxi::nn::Ref{b.get(), 0}, 3);  // in place: x·silu(x)
  d->read(oxi::nn::Ref{b.get(), 0}, out, 3);
  for (int i = 0; i < 3; ++i) EXPECT_NEAR(out[i], in[i] * in[i] / (1.0f + std::exp(-in[i])), 1e-6f);
  be::init("none");
}

}  // namespace
