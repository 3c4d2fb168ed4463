// Progress of long operations on stderr (issue 31 item 6: model load with --quant, convert,
// quantize, prefill): silent for the first ~2 s, then "LABEL: done/total UNIT (P%), R UNIT/s, S s
// left" — redrawn in place on a terminal, one plain line every ~2 s otherwise (logs, pipes).
// Environment OXI_PROGRESS_AFTER_S sets another delay and interval; OXI_PROGRESS=0 silences it
// (and the CLI reads OXI_PROGRESS=1 as --progress).
#pragma once

#include <chrono>
#include <cstdint>
#include <string>

namespace oxi {

// The process-wide switch (off by default: a library prints nothing unasked; the CLI turns it on
// for a terminal, --progress, and serve's log). A meter prints only while it is on.
void set_progress_enabled(bool on);
bool progress_enabled();

class ProgressMeter {
 public:
  // unit: "tokens", "MiB", "tensors"… — what done/total count; rate_unit: its per-second name
  // ("tok/s"; "" → unit + "/s"). enabled=false: never prints.
  ProgressMeter(std::string label, std::string unit, std::string rate_unit = "", bool enabled = true);
  ~ProgressMeter() { finish(); }
  ProgressMeter(const ProgressMeter&) = delete;
  ProgressMeter& operator=(const ProgressMeter&) = delete;

  // Reports done of total (total ≤ 0: unknown, no percentage or time left). Cheap when nothing
  // is drawn (one clock read).
  void update(double done, double total);
  // Clears a line drawn in place (the caller prints its own summary); idempotent.
  void finish();
  double seconds() const;  // since construction
  bool drawn() const { return drawn_; }

 private:
  std::string label_, unit_, rate_unit_;
  bool enabled_, tty_;
  double after_;  // delay before the first line, and the interval of plain lines
  std::chrono::steady_clock::time_point t0_;
  double last_ = -1.0;  // when the last line was drawn
  bool drawn_ = false, finished_ = false;
};

}  // namespace oxi
