// Gated delta rule for one value head (Qwen 3.5 linear-attention layers): the kernels live in
// kernels/fused.h (per-ISA builds); these names keep the model's and tests' spelling.
// `gdn_step` runs the recurrence token by token (decode); `gdn_chunked` the equivalent WY/chunked
// form (prefill, chunk 64): same result up to f32 rounding.
#pragma once

#include "kernels/fused.h"

namespace oxi::qwen35 {

using oxi::GdnHeadIO;
using oxi::gdn_chunked;
using oxi::gdn_step;

}  // namespace oxi::qwen35
