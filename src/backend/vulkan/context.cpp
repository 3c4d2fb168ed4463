// The Vulkan runtime (context.h): loader, device, memory, pipelines, recording and submission.
#ifdef OXI_VULKAN_KERNELS

#include "backend/vulkan/context.h"

#include <dlfcn.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>

#include "backend/vulkan/shaders.h"
#include "core/error.h"

namespace oxi::backend::vk {
namespace {

constexpr uint32_t kSetsPerPool = 512;   // descriptor sets recorded between two finishes, at most
constexpr uint32_t kMaxBindings = 6;     // storage buffers of one shader, at most
constexpr uint32_t kPushBytes = 128;     // the guaranteed maxPushConstantsSize
constexpr VkDeviceSize kArenaBytes = 8u << 20;  // host_buffer's arena; larger requests get their own

// A Vulkan create-info structure, zeroed, with its sType.
template <class T>
T info(VkStructureType type) {
  T v{};
  v.sType = type;
  return v;
}

[[noreturn]] void fail(const std::string& what, VkResult r) {
  throw_error(ErrorCode::kInternal, "vulkan device: " + what + " failed (VkResult " + std::to_string(r) + ")");
}
void check(VkResult r, const char* what) {
  if (r != VK_SUCCESS) fail(what, r);
}

// Rank of a VkPhysicalDeviceType: discrete > integrated > virtual > CPU > other.
int rank(VkPhysicalDeviceType t) {
  switch (t) {
    case VK_PHYSICAL_DEVICE_TYPE_DISCRETE_GPU: return 4;
    case VK_PHYSICAL_DEVICE_TYPE_INTEGRATED_GPU: return 3;
    case VK_PHYSICAL_DEVICE_TYPE_VIRTUAL_GPU: return 2;
    case VK_PHYSICAL_DEVICE_TYPE_CPU: return 1;
    default: return 0;
  }
}

// The first memory type among `bits` with all of `want`, else the first with all of `fallback`
// (types are listed with the fewest extra properties first, so "device-local" finds plain VRAM).
int pick_memory(const VkPhysicalDeviceMemoryProperties& mp, uint32_t bits, VkMemoryPropertyFlags want,
                VkMemoryPropertyFlags fallback) {
  for (VkMemoryPropertyFlags f : {want, fallback})
    for (uint32_t i = 0; i < mp.memoryTypeCount; ++i)
      if ((bits & (1u << i)) && (mp.memoryTypes[i].propertyFlags & f) == f) return static_cast<int>(i);
  return -1;
}

}  // namespace

std::unique_ptr<Context> Context::create(int index, std::string* why) {
  std::unique_ptr<Context> c(new Context());
  Api& a = c->api_;
  c->lib_ = dlopen("libvulkan.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!c->lib_) return *why = "libvulkan.so.1 not found", nullptr;
  a.vkGetInstanceProcAddr = reinterpret_cast<PFN_vkGetInstanceProcAddr>(dlsym(c->lib_, "vkGetInstanceProcAddr"));
  if (a.vkGetInstanceProcAddr)
    a.vkCreateInstance = reinterpret_cast<PFN_vkCreateInstance>(a.vkGetInstanceProcAddr(nullptr, "vkCreateInstance"));
  if (!a.vkCreateInstance) return *why = "the Vulkan loader lacks vkCreateInstance", nullptr;

  auto app = info<VkApplicationInfo>(VK_STRUCTURE_TYPE_APPLICATION_INFO);
  app.pApplicationName = app.pEngineName = "oxinfer";
  app.apiVersion = VK_API_VERSION_1_1;  // the shaders are SPIR-V 1.3 (Vulkan 1.1)
  auto ici = info<VkInstanceCreateInfo>(VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO);
  ici.pApplicationInfo = &app;
  if (a.vkCreateInstance(&ici, nullptr, &c->inst_) != VK_SUCCESS || !c->inst_)
    return *why = "no Vulkan instance (no driver installed?)", nullptr;
#define OXI_VK_LOAD(f) a.f = reinterpret_cast<PFN_##f>(a.vkGetInstanceProcAddr(c->inst_, #f));
  OXI_VK_INSTANCE_FNS(OXI_VK_LOAD)
#undef OXI_VK_LOAD

  uint32_t n = 0;
  a.vkEnumeratePhysicalDevices(c->inst_, &n, nullptr);
  std::vector<VkPhysicalDevice> devs(n);
  if (n) a.vkEnumeratePhysicalDevices(c->inst_, &n, devs.data());
  devs.resize(n);
  if (devs.empty()) return *why = "the Vulkan loader found no physical device", nullptr;
  if (index >= static_cast<int>(devs.size()))
    return *why = "no Vulkan device " + std::to_string(index) + " (" + std::to_string(devs.size()) + " found)", nullptr;
  VkPhysicalDeviceProperties props{};
  int best = index;
  if (best < 0)
    for (size_t i = 0; i < devs.size(); ++i) {
      VkPhysicalDeviceProperties p{};
      a.vkGetPhysicalDeviceProperties(devs[i], &p);
      if (best < 0 || rank(p.deviceType) > rank(props.deviceType)) best = static_cast<int>(i), props = p;
    }
  c->phys_ = devs[static_cast<size_t>(best)];
  a.vkGetPhysicalDeviceProperties(c->phys_, &props);
  if (props.apiVersion < VK_API_VERSION_1_1) return *why = std::string(props.deviceName) + " supports only Vulkan 1.0", nullptr;
  c->device_type_ = props.deviceType;
  c->max_range_ = props.limits.maxStorageBufferRange;
  c->align_ = std::max<VkDeviceSize>(16, props.limits.minStorageBufferOffsetAlignment);
  c->part_limit_ = c->max_range_;
  // A test knob: a smaller weight part, so that tests split small weights into row parts.
  if (const char* e = std::getenv("OXI_VULKAN_MAX_PART"); e && std::strtoull(e, nullptr, 10) >= 256)
    c->part_limit_ = std::min<VkDeviceSize>(c->max_range_, std::strtoull(e, nullptr, 10) & ~VkDeviceSize{3});

  uint32_t nq = 0;
  a.vkGetPhysicalDeviceQueueFamilyProperties(c->phys_, &nq, nullptr);
  std::vector<VkQueueFamilyProperties> qf(nq);
  a.vkGetPhysicalDeviceQueueFamilyProperties(c->phys_, &nq, qf.data());
  bool found = false;
  for (uint32_t i = 0; i < nq && !found; ++i)
    if (qf[i].queueFlags & VK_QUEUE_COMPUTE_BIT) c->queue_family_ = i, found = true;
  if (!found) return *why = std::string(props.deviceName) + " has no compute queue", nullptr;

  const float prio = 1.0f;
  auto qci = info<VkDeviceQueueCreateInfo>(VK_STRUCTURE_TYPE_DEVICE_QUEUE_CREATE_INFO);
  qci.queueFamilyIndex = c->queue_family_;
  qci.queueCount = 1;
  qci.pQueuePriorities = &prio;
  auto dci = info<VkDeviceCreateInfo>(VK_STRUCTURE_TYPE_DEVICE_CREATE_INFO);
  dci.queueCreateInfoCount = 1;
  dci.pQueueCreateInfos = &qci;
  if (a.vkCreateDevice(c->phys_, &dci, nullptr, &c->dev_) != VK_SUCCESS)
    return *why = std::string("vkCreateDevice failed on ") + props.deviceName, nullptr;
#define OXI_VK_LOAD(f) a.f = reinterpret_cast<PFN_##f>(a.vkGetDeviceProcAddr(c->dev_, #f));
  OXI_VK_DEVICE_FNS(OXI_VK_LOAD)
#undef OXI_VK_LOAD
  a.vkGetDeviceQueue(c->dev_, c->queue_family_, 0, &c->queue_);

  auto pci = info<VkCommandPoolCreateInfo>(VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO);
  pci.flags = VK_COMMAND_POOL_CREATE_RESET_COMMAND_BUFFER_BIT;
  pci.queueFamilyIndex = c->queue_family_;
  check(a.vkCreateCommandPool(c->dev_, &pci, nullptr, &c->cmd_pool_), "vkCreateCommandPool");
  auto cai = info<VkCommandBufferAllocateInfo>(VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO);
  cai.commandPool = c->cmd_pool_;
  cai.level = VK_COMMAND_BUFFER_LEVEL_PRIMARY;
  cai.commandBufferCount = 1;
  check(a.vkAllocateCommandBuffers(c->dev_, &cai, &c->cmd_), "vkAllocateCommandBuffers");
  auto fci = info<VkFenceCreateInfo>(VK_STRUCTURE_TYPE_FENCE_CREATE_INFO);
  check(a.vkCreateFence(c->dev_, &fci, nullptr, &c->fence_), "vkCreateFence");
  c->add_pool();

  a.vkGetPhysicalDeviceMemoryProperties(c->phys_, &c->mem_);
  const VkPhysicalDeviceMemoryProperties& mp = c->mem_;
  try {
    c->arena_ = c->make(kArenaBytes, true);
  } catch (const Error& e) {
    return *why = e.what(), nullptr;
  }
  VkDeviceSize local = 0;
  for (uint32_t h = 0; h < mp.memoryHeapCount; ++h)
    if (mp.memoryHeaps[h].flags & VK_MEMORY_HEAP_DEVICE_LOCAL_BIT) local = std::max(local, mp.memoryHeaps[h].size);

  static const char* kinds[] = {"other", "integrated GPU", "discrete GPU", "virtual GPU", "CPU"};
  const uint32_t v = props.apiVersion;
  c->desc_ = std::string(props.deviceName) + ", " + (props.deviceType <= 4 ? kinds[props.deviceType] : "unknown") +
             ", Vulkan " + std::to_string(VK_API_VERSION_MAJOR(v)) + "." + std::to_string(VK_API_VERSION_MINOR(v)) + "." +
             std::to_string(VK_API_VERSION_PATCH(v)) + ", " + std::to_string(local >> 20) + " MiB";
  return c;
}

Context::~Context() {
  if (dev_) {
    api_.vkDeviceWaitIdle(dev_);
    for (Mem& m : after_finish_) destroy(m);
    destroy(arena_);
    for (auto& [name, p] : pipelines_) {
      api_.vkDestroyPipeline(dev_, p.pipe, nullptr);
      api_.vkDestroyPipelineLayout(dev_, p.layout, nullptr);
      api_.vkDestroyDescriptorSetLayout(dev_, p.dsl, nullptr);
    }
    for (VkDescriptorPool p : pools_) api_.vkDestroyDescriptorPool(dev_, p, nullptr);
    if (fence_) api_.vkDestroyFence(dev_, fence_, nullptr);
    if (cmd_pool_) api_.vkDestroyCommandPool(dev_, cmd_pool_, nullptr);
    api_.vkDestroyDevice(dev_, nullptr);
  }
  if (inst_ && api_.vkDestroyInstance) api_.vkDestroyInstance(inst_, nullptr);
  // The loader stays loaded: drivers may register atexit handlers, unloading them is not safe.
}

Mem Context::make(VkDeviceSize bytes, bool host) {
  Mem m;
  m.bytes = std::max<VkDeviceSize>(16, (bytes + 3) & ~VkDeviceSize{3});
  auto bci = info<VkBufferCreateInfo>(VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO);
  bci.size = m.bytes;
  bci.usage = VK_BUFFER_USAGE_STORAGE_BUFFER_BIT | VK_BUFFER_USAGE_TRANSFER_SRC_BIT | VK_BUFFER_USAGE_TRANSFER_DST_BIT;
  bci.sharingMode = VK_SHARING_MODE_EXCLUSIVE;
  check(api_.vkCreateBuffer(dev_, &bci, nullptr, &m.buf), "vkCreateBuffer");
  VkMemoryRequirements req{};
  api_.vkGetBufferMemoryRequirements(dev_, m.buf, &req);
  auto mai = info<VkMemoryAllocateInfo>(VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO);
  mai.allocationSize = req.size;
  // Device-local for buffers and weights; host-visible coherent (cached if offered) for staging and
  // the arena. On a CPU or integrated device both may be the same type.
  const VkMemoryPropertyFlags hv = VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT | VK_MEMORY_PROPERTY_HOST_COHERENT_BIT;
  const int type = host ? pick_memory(mem_, req.memoryTypeBits, hv | VK_MEMORY_PROPERTY_HOST_CACHED_BIT, hv)
                        : pick_memory(mem_, req.memoryTypeBits, VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT, 0);
  VkResult r = VK_ERROR_OUT_OF_DEVICE_MEMORY;
  if (type >= 0) {
    mai.memoryTypeIndex = static_cast<uint32_t>(type);
    r = api_.vkAllocateMemory(dev_, &mai, nullptr, &m.mem);
  }
  if (r != VK_SUCCESS) {
    api_.vkDestroyBuffer(dev_, m.buf, nullptr);
    throw_error(ErrorCode::kOutOfMemory, "vulkan device: no memory for a buffer of " + std::to_string(bytes) + " bytes (VkResult " +
                                             std::to_string(r) + ")");
  }
  check(api_.vkBindBufferMemory(dev_, m.buf, m.mem, 0), "vkBindBufferMemory");
  if (host) check(api_.vkMapMemory(dev_, m.mem, 0, VK_WHOLE_SIZE, 0, &m.map), "vkMapMemory");
  return m;
}

void Context::destroy(Mem& m) {
  if (m.buf) api_.vkDestroyBuffer(dev_, m.buf, nullptr);
  if (m.mem) api_.vkFreeMemory(dev_, m.mem, nullptr);  // unmaps too
  m = Mem{};
}

void Context::release(Mem m) {
  if (recording_) after_finish_.push_back(m);
  else destroy(m);
}

Slice Context::host_buffer(const void* data, VkDeviceSize bytes) {
  const VkDeviceSize at = (arena_used_ + align_ - 1) / align_ * align_;
  Slice s;
  if (at + bytes <= arena_.bytes) {
    s = Slice(arena_.buf, at, static_cast<uint8_t*>(arena_.map) + at);
    arena_used_ = at + bytes;
  } else {
    Mem m = make(bytes, true);
    after_finish_.push_back(m);
    s = Slice(m.buf, 0, m.map);
  }
  if (data && bytes) std::memcpy(s.map, data, bytes);
  pending_bytes_ += bytes;
  return s;
}

const Context::Pipeline& Context::pipeline(const char* name, uint32_t n_bindings) {
  auto it = pipelines_.find(name);
  if (it != pipelines_.end()) return it->second;
  const ShaderCode* code = find_shader(name);
  if (!code) throw_error(ErrorCode::kInternal, std::string("vulkan device: no shader ") + name);
  Pipeline p;
  p.n_bindings = n_bindings;
  VkDescriptorSetLayoutBinding b[kMaxBindings]{};
  for (uint32_t i = 0; i < n_bindings; ++i) {
    b[i].binding = i;
    b[i].descriptorType = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER;
    b[i].descriptorCount = 1;
    b[i].stageFlags = VK_SHADER_STAGE_COMPUTE_BIT;
  }
  auto dli = info<VkDescriptorSetLayoutCreateInfo>(VK_STRUCTURE_TYPE_DESCRIPTOR_SET_LAYOUT_CREATE_INFO);
  dli.bindingCount = n_bindings;
  dli.pBindings = b;
  check(api_.vkCreateDescriptorSetLayout(dev_, &dli, nullptr, &p.dsl), "vkCreateDescriptorSetLayout");
  VkPushConstantRange pcr{VK_SHADER_STAGE_COMPUTE_BIT, 0, kPushBytes};
  auto pli = info<VkPipelineLayoutCreateInfo>(VK_STRUCTURE_TYPE_PIPELINE_LAYOUT_CREATE_INFO);
  pli.setLayoutCount = 1;
  pli.pSetLayouts = &p.dsl;
  pli.pushConstantRangeCount = 1;
  pli.pPushConstantRanges = &pcr;
  check(api_.vkCreatePipelineLayout(dev_, &pli, nullptr, &p.layout), "vkCreatePipelineLayout");
  auto smi = info<VkShaderModuleCreateInfo>(VK_STRUCTURE_TYPE_SHADER_MODULE_CREATE_INFO);
  smi.codeSize = code->n_words * 4;
  smi.pCode = code->words;
  VkShaderModule mod = VK_NULL_HANDLE;
  check(api_.vkCreateShaderModule(dev_, &smi, nullptr, &mod), "vkCreateShaderModule");
  auto cpi = info<VkComputePipelineCreateInfo>(VK_STRUCTURE_TYPE_COMPUTE_PIPELINE_CREATE_INFO);
  cpi.stage.sType = VK_STRUCTURE_TYPE_PIPELINE_SHADER_STAGE_CREATE_INFO;
  cpi.stage.stage = VK_SHADER_STAGE_COMPUTE_BIT;
  cpi.stage.module = mod;
  cpi.stage.pName = "main";
  cpi.layout = p.layout;
  const VkResult r = api_.vkCreateComputePipelines(dev_, VK_NULL_HANDLE, 1, &cpi, nullptr, &p.pipe);
  api_.vkDestroyShaderModule(dev_, mod, nullptr);
  if (r != VK_SUCCESS) fail(std::string("pipeline ") + name, r);
  return pipelines_.emplace(name, p).first->second;
}

void Context::begin_command() {
  if (!recording_) {
    auto bi = info<VkCommandBufferBeginInfo>(VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO);
    bi.flags = VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT;
    check(api_.vkBeginCommandBuffer(cmd_, &bi), "vkBeginCommandBuffer");
    recording_ = true;
  }
  auto mb = info<VkMemoryBarrier>(VK_STRUCTURE_TYPE_MEMORY_BARRIER);
  mb.srcAccessMask = VK_ACCESS_SHADER_WRITE_BIT | VK_ACCESS_TRANSFER_WRITE_BIT | VK_ACCESS_HOST_WRITE_BIT;
  mb.dstAccessMask = VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT | VK_ACCESS_TRANSFER_READ_BIT |
                     VK_ACCESS_TRANSFER_WRITE_BIT;
  const VkPipelineStageFlags st = VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT | VK_PIPELINE_STAGE_TRANSFER_BIT;
  api_.vkCmdPipelineBarrier(cmd_, st | VK_PIPELINE_STAGE_HOST_BIT, st, 0, 1, &mb, 0, nullptr, 0, nullptr);
}

void Context::dispatch(const char* name, std::initializer_list<Slice> bufs, const void* push, uint32_t push_bytes,
                       uint32_t gx, uint32_t gy, uint32_t gz) {
  if (bufs.size() > kMaxBindings || push_bytes > kPushBytes) throw_error(ErrorCode::kInternal, "vulkan device: dispatch too wide");
  const Pipeline& p = pipeline(name, static_cast<uint32_t>(bufs.size()));
  // A full pool: the next one (made once, kept), not a wait — a decode step of a deep model
  // records more than one pool's sets, and waiting mid-step would stall the queue.
  if (sets_left_ == 0) {
    if (++pool_i_ == pools_.size()) add_pool();
    sets_left_ = kSetsPerPool;
  }
  auto dai = info<VkDescriptorSetAllocateInfo>(VK_STRUCTURE_TYPE_DESCRIPTOR_SET_ALLOCATE_INFO);
  dai.descriptorPool = pools_[pool_i_];
  dai.descriptorSetCount = 1;
  dai.pSetLayouts = &p.dsl;
  VkDescriptorSet set = VK_NULL_HANDLE;
  check(api_.vkAllocateDescriptorSets(dev_, &dai, &set), "vkAllocateDescriptorSets");
  --sets_left_;
  VkDescriptorBufferInfo info[kMaxBindings]{};
  VkWriteDescriptorSet w[kMaxBindings]{};
  uint32_t i = 0;
  for (const Slice& b : bufs) {
    info[i] = {b.buf, b.off, VK_WHOLE_SIZE};
    w[i].sType = VK_STRUCTURE_TYPE_WRITE_DESCRIPTOR_SET;
    w[i].dstSet = set;
    w[i].dstBinding = i;
    w[i].descriptorCount = 1;
    w[i].descriptorType = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER;
    w[i].pBufferInfo = &info[i];
    ++i;
  }
  api_.vkUpdateDescriptorSets(dev_, i, w, 0, nullptr);
  begin_command();
  api_.vkCmdBindPipeline(cmd_, VK_PIPELINE_BIND_POINT_COMPUTE, p.pipe);
  api_.vkCmdBindDescriptorSets(cmd_, VK_PIPELINE_BIND_POINT_COMPUTE, p.layout, 0, 1, &set, 0, nullptr);
  if (push_bytes) api_.vkCmdPushConstants(cmd_, p.layout, VK_SHADER_STAGE_COMPUTE_BIT, 0, push_bytes, push);
  api_.vkCmdDispatch(cmd_, gx, gy, gz);
  ++dispatches_;
}

void Context::copy(VkBuffer src, VkDeviceSize src_off, VkBuffer dst, VkDeviceSize dst_off, VkDeviceSize bytes) {
  if (!bytes) return;
  begin_command();
  const VkBufferCopy region{src_off, dst_off, bytes};
  api_.vkCmdCopyBuffer(cmd_, src, dst, 1, &region);
}

void Context::read_back(VkBuffer src, VkDeviceSize src_off, void* dst, VkDeviceSize bytes) {
  const bool own = bytes > arena_.bytes;  // a staging buffer of its own, freed after the copy out
  Mem m;
  Slice s;
  if (own) {
    m = make(bytes, true);
    s = Slice(m.buf, 0, m.map);
  } else {
    s = host_buffer(nullptr, bytes);
  }
  copy(src, src_off, s.buf, s.off, bytes);
  finish();  // the arena stays mapped, and untouched until the next host_buffer
  std::memcpy(dst, s.map, bytes);
  if (own) destroy(m);
}

void Context::finish() {
  submit_wait();
  for (Mem& m : after_finish_) destroy(m);
  after_finish_.clear();
  pending_bytes_ = 0;
  arena_used_ = 0;
}

void Context::submit_wait() {
  if (recording_) {
    // Make the device's writes visible to the host (read-back through mapped staging).
    auto mb = info<VkMemoryBarrier>(VK_STRUCTURE_TYPE_MEMORY_BARRIER);
    mb.srcAccessMask = VK_ACCESS_SHADER_WRITE_BIT | VK_ACCESS_TRANSFER_WRITE_BIT;
    mb.dstAccessMask = VK_ACCESS_HOST_READ_BIT;
    api_.vkCmdPipelineBarrier(cmd_, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT | VK_PIPELINE_STAGE_TRANSFER_BIT,
                              VK_PIPELINE_STAGE_HOST_BIT, 0, 1, &mb, 0, nullptr, 0, nullptr);
    check(api_.vkEndCommandBuffer(cmd_), "vkEndCommandBuffer");
    recording_ = false;
    auto si = info<VkSubmitInfo>(VK_STRUCTURE_TYPE_SUBMIT_INFO);
    si.commandBufferCount = 1;
    si.pCommandBuffers = &cmd_;
    check(api_.vkQueueSubmit(queue_, 1, &si, fence_), "vkQueueSubmit");
    ++waits_;
    check(api_.vkWaitForFences(dev_, 1, &fence_, VK_TRUE, UINT64_MAX), "vkWaitForFences");
    check(api_.vkResetFences(dev_, 1, &fence_), "vkResetFences");
    check(api_.vkResetCommandBuffer(cmd_, 0), "vkResetCommandBuffer");
  }
  for (size_t i = 0; i <= pool_i_ && i < pools_.size(); ++i) check(api_.vkResetDescriptorPool(dev_, pools_[i], 0), "vkResetDescriptorPool");
  pool_i_ = 0;
  sets_left_ = kSetsPerPool;
}

void Context::add_pool() {
  VkDescriptorPoolSize ps{VK_DESCRIPTOR_TYPE_STORAGE_BUFFER, kSetsPerPool * kMaxBindings};
  auto dpi = info<VkDescriptorPoolCreateInfo>(VK_STRUCTURE_TYPE_DESCRIPTOR_POOL_CREATE_INFO);
  dpi.maxSets = kSetsPerPool;
  dpi.poolSizeCount = 1;
  dpi.pPoolSizes = &ps;
  VkDescriptorPool p = VK_NULL_HANDLE;
  check(api_.vkCreateDescriptorPool(dev_, &dpi, nullptr, &p), "vkCreateDescriptorPool");
  pools_.push_back(p);
  pool_i_ = pools_.size() - 1;
  sets_left_ = kSetsPerPool;
}

}  // namespace oxi::backend::vk

#endif  // OXI_VULKAN_KERNELS
