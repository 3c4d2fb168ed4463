// The Vulkan runtime under the Vulkan device: the loader dlopen'ed (libvulkan.so.1; nothing is
// linked, entry points come from vkGetInstanceProcAddr / vkGetDeviceProcAddr), one physical
// device, one compute queue, buffers with their own memory, compute pipelines built lazily from the
// embedded SPIR-V, and one command buffer that records dispatches until the host needs a result.
//
// Ordering: every recorded command is preceded by a full memory barrier (compute/transfer writes →
// reads and writes), so commands run as if one after the other; `finish` submits what was recorded
// and waits. Host-written data reaches the device through host-visible buffers that live until that
// finish (`host_buffer`). Not thread-safe by itself: the caller holds mu() around every call.
#pragma once

#define VK_NO_PROTOTYPES
#include <vulkan/vulkan_core.h>

#include <cstdint>
#include <initializer_list>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace oxi::backend::vk {

#define OXI_VK_INSTANCE_FNS(X)                                                                       \
  X(vkDestroyInstance) X(vkEnumeratePhysicalDevices) X(vkGetPhysicalDeviceProperties)                \
  X(vkGetPhysicalDeviceMemoryProperties) X(vkGetPhysicalDeviceQueueFamilyProperties) X(vkCreateDevice) \
  X(vkGetDeviceProcAddr)
#define OXI_VK_DEVICE_FNS(X)                                                                           \
  X(vkDestroyDevice) X(vkGetDeviceQueue) X(vkCreateBuffer) X(vkDestroyBuffer)                          \
  X(vkGetBufferMemoryRequirements) X(vkAllocateMemory) X(vkFreeMemory) X(vkBindBufferMemory)          \
  X(vkMapMemory) X(vkCreateShaderModule) X(vkDestroyShaderModule) X(vkCreateDescriptorSetLayout)      \
  X(vkDestroyDescriptorSetLayout) X(vkCreatePipelineLayout) X(vkDestroyPipelineLayout)                 \
  X(vkCreateComputePipelines) X(vkDestroyPipeline) X(vkCreateDescriptorPool) X(vkDestroyDescriptorPool) \
  X(vkResetDescriptorPool) X(vkAllocateDescriptorSets) X(vkUpdateDescriptorSets) X(vkCreateCommandPool) \
  X(vkDestroyCommandPool) X(vkAllocateCommandBuffers) X(vkResetCommandBuffer) X(vkBeginCommandBuffer)  \
  X(vkEndCommandBuffer) X(vkCmdBindPipeline) X(vkCmdBindDescriptorSets) X(vkCmdPushConstants)          \
  X(vkCmdDispatch) X(vkCmdCopyBuffer) X(vkCmdPipelineBarrier) X(vkQueueSubmit) X(vkCreateFence)        \
  X(vkDestroyFence) X(vkWaitForFences) X(vkResetFences) X(vkDeviceWaitIdle)

// The entry points, resolved at run time.
struct Api {
  PFN_vkGetInstanceProcAddr vkGetInstanceProcAddr = nullptr;
  PFN_vkCreateInstance vkCreateInstance = nullptr;
#define OXI_VK_MEMBER(f) PFN_##f f = nullptr;
  OXI_VK_INSTANCE_FNS(OXI_VK_MEMBER)
  OXI_VK_DEVICE_FNS(OXI_VK_MEMBER)
#undef OXI_VK_MEMBER
};

// A buffer and its memory. `map` is set for host-visible buffers (staging, host_buffer).
struct Mem {
  VkBuffer buf = VK_NULL_HANDLE;
  VkDeviceMemory mem = VK_NULL_HANDLE;
  void* map = nullptr;
  VkDeviceSize bytes = 0;
};

// Part of a buffer: what a host_buffer hands out (a slice of the host arena, or a buffer of its own)
// and what a dispatch binds (a VkBuffer converts to its whole range from offset 0).
struct Slice {
  VkBuffer buf = VK_NULL_HANDLE;
  VkDeviceSize off = 0;
  void* map = nullptr;  // host address of byte `off`, for host-visible slices
  Slice(VkBuffer b = VK_NULL_HANDLE, VkDeviceSize o = 0, void* m = nullptr) : buf(b), off(o), map(m) {}  // NOLINT: implicit
};

class Context {
 public:
  // index < 0: the best device by type (discrete > integrated > virtual > CPU). nullptr with *why
  // set when there is no loader, no driver, no such device or no compute queue.
  static std::unique_ptr<Context> create(int index, std::string* why);
  ~Context();
  Context(const Context&) = delete;
  Context& operator=(const Context&) = delete;

  std::mutex& mu() { return mu_; }
  const std::string& description() const { return desc_; }
  VkDeviceSize max_range() const { return max_range_; }  // largest buffer a shader can address
  // Largest weight part: max_range, or less when OXI_VULKAN_MAX_PART (bytes, a test knob) says so.
  VkDeviceSize part_limit() const { return part_limit_; }

  // A buffer of at least `bytes` (rounded up to 4): device-local, or host-visible and mapped.
  // Throws oxi::Error when the device has no memory for it.
  Mem make(VkDeviceSize bytes, bool host);
  // Frees m now, or after the recorded work that may still use it has run.
  void release(Mem m);
  // Host-visible memory holding a copy of `data` (nullptr: left as is), alive until the next finish:
  // how the host hands small per-call arrays (token ids, RoPE tables), staging data and read-backs
  // to recorded commands. Carved from one mapped arena (no allocation per call) when it fits.
  Slice host_buffer(const void* data, VkDeviceSize bytes);
  VkDeviceSize pending_host_bytes() const { return pending_bytes_; }  // held by host_buffer until finish

  // Records a dispatch of shader `name` (vk/shaders.h) with `bufs` bound to bindings 0, 1, … (whole
  // buffers, or a slice from its offset; element offsets go in the push constants) over gx × gy × gz workgroups.
  void dispatch(const char* name, std::initializer_list<Slice> bufs, const void* push, uint32_t push_bytes,
                uint32_t gx, uint32_t gy = 1, uint32_t gz = 1);
  // Records a buffer copy.
  void copy(VkBuffer src, VkDeviceSize src_off, VkBuffer dst, VkDeviceSize dst_off, VkDeviceSize bytes);
  // Copies `bytes` from src at src_off to the host after the recorded work (a finish).
  void read_back(VkBuffer src, VkDeviceSize src_off, void* dst, VkDeviceSize bytes);
  // Submits the recorded work and waits for it; then frees what waited on it.
  void finish();
  // Submit-and-waits so far that had work recorded (each a host round trip: the queue drains).
  uint64_t waits() const { return waits_; }
  uint64_t dispatches() const { return dispatches_; }  // dispatches recorded so far

 private:
  struct Pipeline {
    VkDescriptorSetLayout dsl = VK_NULL_HANDLE;
    VkPipelineLayout layout = VK_NULL_HANDLE;
    VkPipeline pipe = VK_NULL_HANDLE;
    uint32_t n_bindings = 0;
  };
  Context() = default;
  const Pipeline& pipeline(const char* name, uint32_t n_bindings);
  void begin_command();  // opens the command buffer if needed and records the barrier
  void destroy(Mem& m);
  void submit_wait();    // finish without freeing: what the next dispatch uses stays alive
  void add_pool();       // a descriptor pool more, made current

  std::mutex mu_;
  Api api_;
  void* lib_ = nullptr;
  VkInstance inst_ = VK_NULL_HANDLE;
  VkPhysicalDevice phys_ = VK_NULL_HANDLE;
  VkDevice dev_ = VK_NULL_HANDLE;
  VkQueue queue_ = VK_NULL_HANDLE;
  uint32_t queue_family_ = 0;
  VkCommandPool cmd_pool_ = VK_NULL_HANDLE;
  VkCommandBuffer cmd_ = VK_NULL_HANDLE;
  VkFence fence_ = VK_NULL_HANDLE;
  std::vector<VkDescriptorPool> pools_;  // descriptor pools; [0, pool_i_] in use since the last finish
  size_t pool_i_ = 0;
  uint32_t sets_left_ = 0;                // in pools_[pool_i_]
  uint64_t waits_ = 0, dispatches_ = 0;
  VkDeviceSize pending_bytes_ = 0;
  bool recording_ = false;
  uint32_t device_type_ = 4;
  VkPhysicalDeviceMemoryProperties mem_{};
  VkDeviceSize max_range_ = 0, part_limit_ = 0, align_ = 16;  // maxStorageBufferRange, minStorageBufferOffsetAlignment
  Mem arena_;                                 // host-visible, mapped: host_buffer's slices
  VkDeviceSize arena_used_ = 0;
  std::string desc_;
  std::map<std::string, Pipeline> pipelines_;
  std::vector<Mem> after_finish_;  // freed by the next finish
};

}  // namespace oxi::backend::vk
