// A test double of a compute device (nn/device.h): its own memory that no host pointer reaches,
// and every block written again, plainly, in double precision from the formulas in
// ../shared/spec/models.md — not the CPU kernels. tests/nn/device_test.cpp runs each block on it
// and on the CPU device and compares (llama.cpp's test-backend-ops idea): a new GPU backend is
// checked the same way.
#pragma once

#include <memory>

#include "nn/device.h"

namespace oxi::backend {

std::unique_ptr<nn::Device> make_test_device();

}  // namespace oxi::backend
