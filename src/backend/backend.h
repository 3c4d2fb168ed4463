// Device backends: the interface a GPU (or test) backend implements, the size rule, and the
// process-wide selection. docs/backends.md explains the design; backend/hook.h is the seam the
// kernels call. Model code never includes this header.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "kernels/matmul.h"

namespace oxi::nn {
class Device;
}

namespace oxi::backend {

// A backend's own copy of one weight matrix (device memory, repacked layout...).
class DeviceMatrix {
 public:
  virtual ~DeviceMatrix() = default;
};

// One job of a batch: y = x · Wᵀ with W's device copy `w` (and its host view, for shapes).
struct Job {
  const DeviceMatrix* w = nullptr;
  const MatrixView* view = nullptr;
  float* y = nullptr;  // [n_tokens, view->rows] f32
};

// When a call is worth the device's dispatch cost: n_tokens >= min_tokens and the batch's
// 2·rows·cols·n_tokens summed over its jobs >= min_flops. The default sends prefill to the device
// and keeps single-token decode (and tiny matrices) on the CPU.
struct SizeRule {
  int64_t min_tokens = 8;
  double min_flops = 16e6;
  bool worth(int64_t n_tokens, double flops) const { return n_tokens >= min_tokens && flops >= min_flops; }
};

class Backend {
 public:
  virtual ~Backend() = default;
  virtual std::string name() const = 0;         // "cpu-ref", "vulkan": what OXI_DEVICE names
  virtual std::string description() const = 0;  // the device, for the start-up line
  // The backend's own estimate of when it is worth it (overridable by env, see registry).
  virtual SizeRule default_rule() const { return {}; }
  // Uploads one weight matrix, once (the caller caches the handle by the matrix's data pointer).
  // nullptr declines (unsupported dtype, out of device memory): the CPU keeps that matrix.
  virtual std::unique_ptr<DeviceMatrix> prepare(const MatrixView& w) = 0;
  // Runs every job on x: [n_tokens, cols] f32, shared by all jobs. Returns false to decline; the
  // CPU then runs the whole batch (overwriting anything written). Called concurrently from several
  // threads: must be thread-safe.
  virtual bool matmul_batch(std::span<const Job> jobs, const float* x, int64_t n_tokens) = 0;
  // The backend's block-level device (nn/device.h: whole layers on the device), made on first
  // call and shared; nullptr when it has none (cpu-ref, a build without shaders, a failed start).
  virtual std::shared_ptr<nn::Device> block_device() { return nullptr; }
};

// Counters since the last reset, for tests and diagnostics.
struct Stats {
  uint64_t prepared = 0;          // matrices uploaded
  uint64_t prepare_declined = 0;  // matrices the backend declined
  uint64_t device_batches = 0;    // batches the device ran
  uint64_t device_jobs = 0;
  uint64_t small_batches = 0;     // batches the size rule kept on the CPU
  uint64_t declined_batches = 0;  // batches the device could not or would not run (CPU ran them)
};

// ---- process-wide selection (registry.cpp) ----

// A probe looks for its device without linking anything device-specific (dlopen). It returns a
// backend or nullptr (with `why` set), and a score: auto picks the highest score > 0; score 0 is
// "available only when named" (CPU-emulated devices, probes without kernels), and auto's start-up
// line mentions it as found.
struct ProbeResult {
  std::unique_ptr<Backend> backend;
  int score = 0;
  std::string why;  // when backend is null: what was missing
};
using ProbeFn = ProbeResult (*)();
struct ProbeEntry {
  const char* name;
  ProbeFn probe;
  bool named_only;  // auto does not even probe it (test backends)
};
std::span<const ProbeEntry> probes();
// What --list-devices prints: the CPU, then each Vulkan device as "vulkan:N  description" (the
// names --device takes), or why there is none. Probes the loader each call; selects nothing.
std::vector<std::string> list_devices();

// spec: "none" (or "cpu") | "auto" | a backend name | "vulkan:N" (the loader's device N); empty: keep the device already chosen, else env
// OXI_DEVICE, else "auto" (so the front end's --device wins over a library's default call).
// Probes, activates the choice and returns the start-up line ("device: NAME (description)" or
// "device: none (CPU)"), also logged at info level; the same spec again is a no-op. Throws
// oxi::Error(kInvalidArgument) for an unknown name or a named device that is absent, or a
// malformed OXI_DEVICE_MIN_*. Selecting another device drops every device copy.
std::string init(const std::string& spec = "");

// Activates a backend directly (tests), with its default rule, or the given one. nullptr: none.
void activate(std::unique_ptr<Backend> b);
void activate(std::unique_ptr<Backend> b, const SizeRule& rule);
Backend* active();
// The active backend's block device; nullptr when no device is selected or it has none.
std::shared_ptr<nn::Device> active_block_device();
SizeRule active_rule();
void set_rule(const SizeRule& rule);
std::string device_line();

Stats stats();
void reset_stats();

// Held by every open model (the C API's oxi_model): when the last one closes, every device copy
// is dropped — the weights they copy are gone, and a GPU's memory is returned.
class WeightsLease {
 public:
  WeightsLease();
  ~WeightsLease();
  WeightsLease(const WeightsLease&) = delete;
  WeightsLease& operator=(const WeightsLease&) = delete;
};

// The CPU-reference test backend (cpu_ref.cpp): an f32 copy of each matrix made at prepare, and a
// plain f32 GEMM. Its default rule sends every call of n_tokens >= 2 to it.
std::unique_ptr<Backend> make_cpu_ref();

}  // namespace oxi::backend
