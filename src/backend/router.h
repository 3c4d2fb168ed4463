// Internal to oxi_backend: registry.cpp selects, router.cpp routes.
#pragma once

#include <memory>

#include "backend/backend.h"

namespace oxi::backend {

// Makes b the active backend (nullptr: none) with the given size rule; drops every device copy.
void router_activate(std::unique_ptr<Backend> b, const SizeRule& rule);

// Probes of the backends this build knows (registry.cpp lists them).
ProbeResult probe_cpu_ref();
ProbeResult probe_vulkan();

}  // namespace oxi::backend
