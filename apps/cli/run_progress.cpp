#include "run_progress.h"

#include "args.h"
#include "core/progress.h"

namespace oxi::cli {

namespace {
constexpr size_t kChunk = 512;  // oxi_generate's prefill chunk (oxi_generate_params.prefill_chunk <= 0)
}

PrefillDone prefill_with_progress(oxi_context* ctx, const int32_t* ids, size_t n, const volatile int* cancel) {
  PrefillDone done;
  const size_t whole = n == 0 ? 0 : (n - 1) / kChunk * kChunk;
  ProgressMeter meter("prefill", "tokens", "tok/s");
  while (done.tokens < whole && !(cancel && *cancel)) {
    check_status(oxi_context_prefill(ctx, ids + done.tokens, kChunk));
    done.tokens += kChunk;
    meter.update(static_cast<double>(done.tokens), static_cast<double>(n));
  }
  done.seconds = meter.seconds();
  return done;  // the meter clears its line: the summary line at the end has the rate
}

}  // namespace oxi::cli
