// Progress for long prefills in `oxinfer run` and `oxinfer chat` (issue 31 item 6; docs/cli_compat.md "Prefill
// progress"): prompt tokens done / total and tok/s on stderr once a prefill has taken ~2 s.
#pragma once

#include <cstddef>
#include <cstdint>

#include "oxinfer.h"

namespace oxi::cli {

struct PrefillDone {
  size_t tokens = 0;     // ids[0, tokens) are in the context; pass the rest to oxi_generate
  double seconds = 0.0;  // time they took
};

// Pre-fills the whole 512-token chunks of ids[0, n - 1) (the chunks oxi_generate would run,
// so the result is unchanged), with a progress line on stderr from ~2 s on: redrawn in place on a
// terminal, else one line every 2 s (env OXI_PROGRESS_AFTER_S: another delay and interval). Stops early once *cancel is set. Throws oxi::Error on a failed prefill.
PrefillDone prefill_with_progress(oxi_context* ctx, const int32_t* ids, size_t n, const volatile int* cancel);

}  // namespace oxi::cli
