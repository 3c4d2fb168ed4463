// Internal to oxi_backend: registry.cpp selects, router.cpp routes.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "backend/backend.h"

namespace oxi::backend {

// Makes b the active backend (nullptr: none) with the given size rule; drops every device copy.
void router_activate(std::unique_ptr<Backend> b, const SizeRule& rule);

// Probes of the backends this build knows (registry.cpp lists them).
ProbeResult probe_cpu_ref();
ProbeResult probe_vulkan();
// Vulkan device `index` in the loader's order (vulkan:N); null with `why` when there is no such device.
ProbeResult probe_vulkan_index(int index);
// One line per Vulkan device the loader lists ("vulkan:0  NAME (KIND, Vulkan X.Y.Z, N MiB)"); empty
// with `why` set when there is none.
std::vector<std::string> vulkan_device_lines(std::string& why);

}  // namespace oxi::backend
