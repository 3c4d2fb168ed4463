// The Vulkan block device: nn::Device (nn/device.h) on a Vulkan compute queue, loaded at run time.
// docs/backends.md ("The Vulkan device") describes its files, shaders and tests.
#pragma once

#include <memory>
#include <string>

#include "nn/device.h"

namespace oxi::backend {

// index < 0: the best device (discrete > integrated > virtual > CPU), else the loader's index.
// nullptr with *why set when there is no loader, no driver, no such device, or this build has no
// shaders (no GLSL compiler at configure time).
std::unique_ptr<nn::Device> make_vulkan_device(int index, std::string* why);

// Whether this build embeds the device's shaders.
bool vulkan_kernels_built();

}  // namespace oxi::backend
