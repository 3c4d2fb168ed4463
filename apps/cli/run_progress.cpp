#include "run_progress.h"

#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>

#include "args.h"

namespace oxi::cli {

namespace {
constexpr size_t kChunk = 512;  // oxi_generate's prefill chunk (oxi_generate_params.prefill_chunk <= 0)
}

PrefillDone prefill_with_progress(oxi_context* ctx, const int32_t* ids, size_t n, const volatile int* cancel) {
  PrefillDone done;
  const size_t whole = n == 0 ? 0 : (n - 1) / kChunk * kChunk;
  const char* after_env = std::getenv("OXI_PROGRESS_AFTER_S");
  const double after = after_env ? std::atof(after_env) : 2.0;  // the delay, and the interval of plain lines
  const bool tty = isatty(STDERR_FILENO) != 0;
  using Clock = std::chrono::steady_clock;
  const auto t0 = Clock::now();
  double last_line = -1.0;
  bool drawn = false;
  while (done.tokens < whole && !(cancel && *cancel)) {
    check_status(oxi_context_prefill(ctx, ids + done.tokens, kChunk));
    done.tokens += kChunk;
    done.seconds = std::chrono::duration<double>(Clock::now() - t0).count();
    if (done.seconds < after || (!tty && last_line >= 0 && done.seconds - last_line < after)) continue;
    const double rate = done.tokens / done.seconds;
    const double eta = static_cast<double>(n - done.tokens) / rate;
    std::fprintf(stderr, "%sprefill: %zu/%zu tokens (%.0f%%), %.1f tok/s, %.0f s left%s", tty ? "\r" : "", done.tokens, n,
                 100.0 * static_cast<double>(done.tokens) / static_cast<double>(n), rate, eta, tty ? "\x1b[K" : "\n");
    std::fflush(stderr);
    last_line = done.seconds;
    drawn = true;
  }
  if (drawn && tty) std::fputs("\r\x1b[K", stderr);  // the summary line at the end has the rate
  return done;
}

}  // namespace oxi::cli
