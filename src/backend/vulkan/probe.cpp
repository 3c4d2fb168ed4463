// "vulkan": the probe and the registry's backend. The probe dlopens the Vulkan loader
// (libvulkan.so.1; nothing is linked, and the probe needs no Vulkan headers, so it is built even
// where the shaders are not), creates an instance, enumerates the physical devices and picks the
// best (discrete > integrated > virtual > CPU-emulated). The backend names the device on the
// start-up line and hands out the block device (vulkan/device.cpp, created on first request) through
// block_device(). The per-matmul seam runs on the same device and shaders (prefill offload under
// the size rule): prepare uploads a matrix (declined: a type without a shader, no memory), and
// matmul_batch writes x once, runs the batch and reads the ys back. Without shaders it declines.
// Probing costs ~60 ms (instance creation; lavapipe loads LLVM), so it runs only when named
// (`--device vulkan`): auto skips it and pays nothing.
//
// The few Vulkan declarations below follow the Vulkan 1.0 C ABI (vulkan_core.h): only the
// structures and entry points the probe calls.
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "backend/router.h"
#include "backend/vulkan/vulkan_device.h"
#include "core/error.h"

#if defined(__linux__) && !defined(__EMSCRIPTEN__)
#include <dlfcn.h>
#define OXI_VULKAN_PROBE 1
#endif

namespace oxi::backend {

#ifdef OXI_VULKAN_PROBE
namespace {

namespace vk {
using Result = int32_t;  // VkResult: 0 success, 5 incomplete
using Instance = struct InstanceT*;
using PhysicalDevice = struct PhysicalDeviceT*;
using VoidFn = void (*)();

struct ApplicationInfo {  // VkApplicationInfo
  int32_t s_type = 0;     // VK_STRUCTURE_TYPE_APPLICATION_INFO
  const void* next = nullptr;
  const char* app_name = nullptr;
  uint32_t app_version = 0;
  const char* engine_name = nullptr;
  uint32_t engine_version = 0;
  uint32_t api_version = 1u << 22;  // 1.0
};
struct InstanceCreateInfo {  // VkInstanceCreateInfo
  int32_t s_type = 1;        // VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO
  const void* next = nullptr;
  uint32_t flags = 0;
  const ApplicationInfo* app = nullptr;
  uint32_t n_layers = 0;
  const char* const* layers = nullptr;
  uint32_t n_extensions = 0;
  const char* const* extensions = nullptr;
};
// VkPhysicalDeviceProperties begins with these fields; the rest (limits, sparse properties) is read
// into spare room and ignored.
struct DeviceProperties {
  uint32_t api_version, driver_version, vendor_id, device_id;
  int32_t device_type;  // 0 other, 1 integrated GPU, 2 discrete GPU, 3 virtual GPU, 4 CPU
  char name[256];
  uint8_t uuid[16];
  alignas(8) uint8_t rest[2048];  // VkPhysicalDeviceLimits + VkPhysicalDeviceSparseProperties (~520 B)
};
struct MemoryProperties {  // VkPhysicalDeviceMemoryProperties
  uint32_t n_types;
  struct {
    uint32_t flags, heap;
  } types[32];
  uint32_t n_heaps;
  struct {
    uint64_t size;
    uint32_t flags;  // bit 0: device local
  } heaps[16];
};

using GetInstanceProcAddr = VoidFn (*)(Instance, const char*);
using CreateInstance = Result (*)(const InstanceCreateInfo*, const void*, Instance*);
using DestroyInstance = void (*)(Instance, const void*);
using EnumeratePhysicalDevices = Result (*)(Instance, uint32_t*, PhysicalDevice*);
using GetPhysicalDeviceProperties = void (*)(PhysicalDevice, DeviceProperties*);
using GetPhysicalDeviceMemoryProperties = void (*)(PhysicalDevice, MemoryProperties*);
}  // namespace vk

struct Found {
  std::string name, kind, api;
  int type = 0;
  uint64_t local_bytes = 0;
};

// "NAME, KIND, Vulkan X.Y.Z, N MiB": a device in the start-up line and in --list-devices.
std::string describe(const Found& f) {
  std::string d = f.name + ", " + f.kind + ", Vulkan " + f.api;
  if (f.local_bytes) d += ", " + std::to_string(f.local_bytes >> 20) + " MiB";
  return d;
}

// Rank of a VkPhysicalDeviceType for the choice among several devices.
int rank(int type) {
  static const int k[] = {0, 3, 4, 2, 1};  // other, integrated, discrete, virtual, cpu (as context.cpp)
  return type >= 0 && type <= 4 ? k[type] : 0;
}

class VulkanMatrix final : public DeviceMatrix {
 public:
  std::unique_ptr<nn::Weight> w;
};

class VulkanBackend final : public Backend {
 public:
  // index: the device's place in the loader's list; −1 the best by type (probe_vulkan's choice).
  VulkanBackend(std::string desc, int index) : desc_(std::move(desc)), index_(index) {}
  std::string name() const override { return "vulkan"; }
  std::string description() const override {
    return desc_ + (vulkan_kernels_built() ? "" : "; built without shaders: the CPU runs every matmul");
  }
  std::unique_ptr<DeviceMatrix> prepare(const MatrixView& v) override {
    std::shared_ptr<nn::Device> dev = block_device();
    if (!dev) return nullptr;
    try {
      auto m = std::make_unique<VulkanMatrix>();
      m->w = dev->upload(v);
      return m;
    } catch (const Error&) {
      return nullptr;  // no shader for the type, or no device memory: the CPU keeps the matrix
    }
  }
  bool matmul_batch(std::span<const Job> jobs, const float* x, int64_t n) override {
    std::shared_ptr<nn::Device> dev = block_device();
    if (!dev || jobs.empty()) return false;
    std::lock_guard<std::mutex> lock(mu_);  // the scratch buffers are shared
    try {
      const int64_t cols = jobs[0].view->cols;
      std::vector<const nn::Weight*> ws;
      std::vector<nn::Ref> ys;
      int64_t total = 0;
      for (const Job& j : jobs) ws.push_back(static_cast<const VulkanMatrix*>(j.w)->w.get()), total += n * j.view->rows;
      grow(*dev, x_, n * cols);
      grow(*dev, y_, total);
      dev->write(nn::Ref{x_.get(), 0}, x, n * cols);
      for (int64_t off = 0; const Job& j : jobs) ys.push_back(nn::Ref{y_.get(), off}), off += n * j.view->rows;
      dev->matmul(ws, ys, nn::Ref{x_.get(), 0}, n);
      host_.resize(static_cast<size_t>(total));
      dev->read(nn::Ref{y_.get(), 0}, host_.data(), total);  // one wait for the whole batch
      for (size_t k = 0; k < jobs.size(); ++k)
        std::copy_n(host_.data() + ys[k].off, n * jobs[k].view->rows, jobs[k].y);
      return true;
    } catch (const Error&) {
      return false;  // e.g. a buffer larger than the device addresses: the CPU runs it
    }
  }
  // The same choice of device as the probe's (index −1: best by type), made once.
  std::shared_ptr<nn::Device> block_device() override {
    std::call_once(once_, [this] { dev_ = make_vulkan_device(index_, &why_); });
    return dev_;
  }

 private:
  static void grow(nn::Device& dev, std::shared_ptr<nn::Buffer>& b, int64_t floats) {
    if (!b || b->floats() < floats) b = dev.alloc(floats);
  }
  std::string desc_, why_;
  int index_ = -1;
  std::once_flag once_;
  std::shared_ptr<nn::Device> dev_;
  std::mutex mu_;
  std::shared_ptr<nn::Buffer> x_, y_;
  std::vector<float> host_;
};

// Enumerates the devices through the loader; empty with `why` set when there is none.
std::vector<Found> enumerate(std::string& why) {
  void* lib = dlopen("libvulkan.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!lib) {
    why = "libvulkan.so.1 not found";
    return {};
  }
  std::vector<Found> out;
  auto gipa = reinterpret_cast<vk::GetInstanceProcAddr>(dlsym(lib, "vkGetInstanceProcAddr"));
  auto create = gipa ? reinterpret_cast<vk::CreateInstance>(gipa(nullptr, "vkCreateInstance")) : nullptr;
  vk::Instance inst = nullptr;
  vk::ApplicationInfo app;
  app.app_name = app.engine_name = "oxinfer";
  vk::InstanceCreateInfo ci;
  ci.app = &app;
  if (!create || create(&ci, nullptr, &inst) != 0 || !inst) {
    why = "no Vulkan instance (no driver installed?)";
    dlclose(lib);
    return {};
  }
  auto sym = [&](const char* n) { return gipa(inst, n); };
  auto destroy = reinterpret_cast<vk::DestroyInstance>(sym("vkDestroyInstance"));
  auto enumerate_devs = reinterpret_cast<vk::EnumeratePhysicalDevices>(sym("vkEnumeratePhysicalDevices"));
  auto props = reinterpret_cast<vk::GetPhysicalDeviceProperties>(sym("vkGetPhysicalDeviceProperties"));
  auto mem = reinterpret_cast<vk::GetPhysicalDeviceMemoryProperties>(sym("vkGetPhysicalDeviceMemoryProperties"));
  uint32_t n = 0;
  if (enumerate_devs && props && mem && enumerate_devs(inst, &n, nullptr) == 0 && n > 0) {
    std::vector<vk::PhysicalDevice> devs(n);
    if (enumerate_devs(inst, &n, devs.data()) >= 0) {
      devs.resize(n);
      for (vk::PhysicalDevice d : devs) {
        auto p = std::make_unique<vk::DeviceProperties>();
        auto m = std::make_unique<vk::MemoryProperties>();
        props(d, p.get());
        mem(d, m.get());
        static const char* kinds[] = {"other", "integrated GPU", "discrete GPU", "virtual GPU", "CPU"};
        Found f;
        f.name.assign(p->name, strnlen(p->name, sizeof p->name));
        f.type = p->device_type;
        f.kind = f.type >= 0 && f.type <= 4 ? kinds[f.type] : "unknown";
        const uint32_t v = p->api_version;
        f.api = std::to_string((v >> 22) & 0x7F) + "." + std::to_string((v >> 12) & 0x3FF) + "." +
                std::to_string(v & 0xFFF);
        for (uint32_t h = 0; h < m->n_heaps && h < 16; ++h)
          if (m->heaps[h].flags & 1u) f.local_bytes = std::max(f.local_bytes, m->heaps[h].size);
        out.push_back(f);
      }
    }
  }
  if (out.empty()) why = "Vulkan loader found no physical device";
  if (destroy) destroy(inst, nullptr);
  // The loader stays loaded: drivers may register atexit handlers, unloading them is not safe.
  return out;
}

}  // namespace

ProbeResult probe_vulkan() {
  std::string why;
  const std::vector<Found> devs = enumerate(why);
  if (devs.empty()) return {nullptr, 0, why};
  size_t best = 0;
  for (size_t i = 1; i < devs.size(); ++i)
    if (rank(devs[i].type) > rank(devs[best].type)) best = i;
  std::string desc = describe(devs[best]);
  if (devs.size() > 1) desc += " (" + std::to_string(devs.size()) + " devices)";
  return {std::make_unique<VulkanBackend>(desc, -1), 0, ""};
}

ProbeResult probe_vulkan_index(int index) {
  std::string why;
  const std::vector<Found> devs = enumerate(why);
  if (devs.empty()) return {nullptr, 0, why};
  if (index < 0 || static_cast<size_t>(index) >= devs.size())
    return {nullptr, 0, "no Vulkan device " + std::to_string(index) + " (" + std::to_string(devs.size()) + " found: vulkan:0" +
                            (devs.size() > 1 ? " … vulkan:" + std::to_string(devs.size() - 1) : std::string()) + ")"};
  return {std::make_unique<VulkanBackend>(describe(devs[static_cast<size_t>(index)]), index), 0, ""};
}

std::vector<std::string> vulkan_device_lines(std::string& why) {
  const std::vector<Found> devs = enumerate(why);
  std::vector<std::string> out;
  for (size_t i = 0; i < devs.size(); ++i) out.push_back("vulkan:" + std::to_string(i) + "  " + describe(devs[i]));
  return out;
}

#else

ProbeResult probe_vulkan() { return {nullptr, 0, "not built for this platform"}; }
ProbeResult probe_vulkan_index(int) { return {nullptr, 0, "not built for this platform"}; }
std::vector<std::string> vulkan_device_lines(std::string& why) {
  why = "not built for this platform";
  return {};
}

#endif

}  // namespace oxi::backend
