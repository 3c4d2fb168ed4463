#include "core/progress.h"

#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace oxi {

namespace {
std::atomic<bool> g_enabled{false};
}

void set_progress_enabled(bool on) { g_enabled.store(on); }
bool progress_enabled() { return g_enabled.load(); }

ProgressMeter::ProgressMeter(std::string label, std::string unit, std::string rate_unit, bool enabled)
    : label_(std::move(label)), unit_(std::move(unit)), rate_unit_(rate_unit.empty() ? unit_ + "/s" : std::move(rate_unit)),
      enabled_(enabled), tty_(isatty(STDERR_FILENO) != 0),
      t0_(std::chrono::steady_clock::now()) {
  const char* off = std::getenv("OXI_PROGRESS");
  if ((off && std::strcmp(off, "0") == 0) || !progress_enabled()) enabled_ = false;
  const char* after = std::getenv("OXI_PROGRESS_AFTER_S");
  after_ = after ? std::atof(after) : 2.0;
}

double ProgressMeter::seconds() const {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0_).count();
}

void ProgressMeter::update(double done, double total) {
  if (!enabled_ || finished_) return;
  const double t = seconds();
  if (t < after_) return;
  // In place: at most ~10 redraws a second; plain lines: one per interval.
  if (last_ >= 0 && t - last_ < (tty_ ? 0.1 : after_)) return;
  const double rate = t > 0 ? done / t : 0.0;
  char tail[96] = "";
  if (total > 0) {
    const double left = rate > 0 ? (total - done) / rate : 0.0;
    std::snprintf(tail, sizeof tail, " (%.0f%%), %.1f %s, %.0f s left", 100.0 * done / total, rate, rate_unit_.c_str(), left);
    std::fprintf(stderr, "%s%s: %.0f/%.0f %s%s%s", tty_ ? "\r" : "", label_.c_str(), done, total, unit_.c_str(), tail,
                 tty_ ? "\x1b[K" : "\n");
  } else {
    std::fprintf(stderr, "%s%s: %.0f %s, %.1f %s%s", tty_ ? "\r" : "", label_.c_str(), done, unit_.c_str(), rate,
                 rate_unit_.c_str(), tty_ ? "\x1b[K" : "\n");
  }
  std::fflush(stderr);
  last_ = t;
  drawn_ = true;
}

void ProgressMeter::finish() {
  if (finished_) return;
  finished_ = true;
  if (drawn_ && tty_) {
    std::fputs("\r\x1b[K", stderr);
    std::fflush(stderr);
  }
}

}  // namespace oxi
