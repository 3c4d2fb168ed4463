// The SPIR-V of the Vulkan device's shaders (vulkan/shaders/*.comp), embedded at build time by
// cmake/vulkan_shaders.cmake. Only built when OXI_VULKAN_KERNELS is set.
#pragma once

#include <cstddef>
#include <cstdint>

namespace oxi::backend::vk {

struct ShaderCode {
  const char* name;       // "matmul_q4_k", "rms_norm", …
  const uint32_t* words;  // SPIR-V
  size_t n_words;
};

// nullptr when no shader has that name.
const ShaderCode* find_shader(const char* name);

}  // namespace oxi::backend::vk
