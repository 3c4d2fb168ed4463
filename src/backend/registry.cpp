// Selection of the device backend, once at start-up: OXI_DEVICE / --device = none | auto | NAME.
// Every probe finds its device at run time (dlopen), so one binary runs with or without a GPU.
#include <cstdlib>
#include <mutex>

#include "backend/backend.h"
#include "backend/router.h"
#include "core/error.h"
#include "core/log.h"

namespace oxi::backend {

namespace {

// Ordered for display only; auto picks by score.
const ProbeEntry kProbes[] = {
    {"vulkan", probe_vulkan, true},  // named only until it has kernels: no start-up cost
    {"cpu-ref", probe_cpu_ref, true},
};

struct Selection {
  std::mutex mu;
  std::string spec;  // what the active choice was made from ("" before the first init)
  std::string line = "device: none (CPU)";
};

Selection& S() {
  static Selection s;
  return s;
}

// A non-negative number from the environment, or def when unset; malformed: an error.
double env_number(const char* name, double def) {
  const char* v = std::getenv(name);
  if (!v || !*v) return def;
  char* end = nullptr;
  const double d = std::strtod(v, &end);
  if (*end || !(d >= 0)) throw_error(ErrorCode::kInvalidArgument, std::string("invalid ") + name + "=" + v);
  return d;
}

// The backend's own rule, overridden by OXI_DEVICE_MIN_TOKENS / OXI_DEVICE_MIN_FLOPS.
SizeRule rule_for(const Backend& b) {
  SizeRule r = b.default_rule();
  r.min_tokens = static_cast<int64_t>(env_number("OXI_DEVICE_MIN_TOKENS", static_cast<double>(r.min_tokens)));
  r.min_flops = env_number("OXI_DEVICE_MIN_FLOPS", r.min_flops);
  return r;
}

std::string line_for(const Backend* b) {
  return b ? "device: " + b->name() + " (" + b->description() + ")" : "device: none (CPU)";
}

void set_active(std::unique_ptr<Backend> b, const SizeRule& rule) {
  S().line = line_for(b.get());
  router_activate(std::move(b), rule);
}

std::string known_names() {
  std::string s = "none, cpu, auto";
  for (const auto& p : kProbes) s += std::string(", ") + p.name;
  return s;
}

}  // namespace

std::span<const ProbeEntry> probes() { return kProbes; }

std::vector<std::string> list_devices() {
  std::vector<std::string> out = {"cpu       the CPU kernels (always; --device none / cpu)"};
  std::string why;
  std::vector<std::string> vk = vulkan_device_lines(why);
  if (vk.empty()) out.push_back("(no Vulkan device: " + why + ")");
  for (std::string& l : vk) out.push_back(std::move(l));
  return out;
}

std::string init(const std::string& spec_in) {
  Selection& s = S();
  std::lock_guard<std::mutex> lock(s.mu);
  std::string spec = spec_in;
  if (spec.empty()) {
    if (!s.spec.empty()) return s.line;  // chosen once: a later default keeps the choice
    const char* e = std::getenv("OXI_DEVICE");
    spec = e && *e ? e : "auto";
  }
  if (spec == "cpu") spec = "none";  // llama.cpp's spelling
  if (spec == s.spec) return s.line;
  if (spec == "none") {
    set_active(nullptr, {});
  } else if (spec == "auto") {
    ProbeResult best;
    std::string unused;  // devices found that auto does not use (score 0)
    for (const auto& p : kProbes) {
      if (p.named_only) continue;
      ProbeResult r = p.probe();
      if (!r.backend) {
        log_debug(std::string("device probe ") + p.name + ": " + r.why);
      } else if (r.score > best.score) {
        best = std::move(r);
      } else if (r.score == 0) {
        unused += std::string("; found ") + p.name + ": " + r.backend->description();
      }
    }
    const bool chose = best.backend != nullptr;
    const SizeRule rule = chose ? rule_for(*best.backend) : SizeRule{};
    set_active(std::move(best.backend), rule);
    if (!chose && !unused.empty()) s.line = "device: none (CPU" + unused + ")";
  } else if (spec.rfind("vulkan:", 0) == 0) {  // vulkan:N, the loader's device N (list_devices)
    const std::string n = spec.substr(7);
    if (n.empty() || n.size() > 4 || n.find_first_not_of("0123456789") != std::string::npos)
      throw_error(ErrorCode::kInvalidArgument, "device '" + spec + "': expected vulkan:N with N a device index (--list-devices)");
    ProbeResult r = probe_vulkan_index(std::stoi(n));
    if (!r.backend) throw_error(ErrorCode::kInvalidArgument, "device '" + spec + "' is not available: " + r.why);
    const SizeRule rule = rule_for(*r.backend);
    set_active(std::move(r.backend), rule);
  } else {
    const ProbeEntry* entry = nullptr;
    for (const auto& p : kProbes)
      if (spec == p.name) entry = &p;
    if (!entry)
      throw_error(ErrorCode::kInvalidArgument, "unknown device '" + spec + "' (known: " + known_names() + ")");
    ProbeResult r = entry->probe();
    if (!r.backend) throw_error(ErrorCode::kInvalidArgument, "device '" + spec + "' is not available: " + r.why);
    const SizeRule rule = rule_for(*r.backend);
    set_active(std::move(r.backend), rule);
  }
  s.spec = spec;
  log_info(s.line);
  return s.line;
}

void activate(std::unique_ptr<Backend> b) {
  const SizeRule rule = b ? b->default_rule() : SizeRule{};
  activate(std::move(b), rule);
}

void activate(std::unique_ptr<Backend> b, const SizeRule& rule) {
  std::lock_guard<std::mutex> lock(S().mu);
  S().spec = "";  // a later init() selects again
  set_active(std::move(b), rule);
}

std::string device_line() {
  std::lock_guard<std::mutex> lock(S().mu);
  return S().line;
}

}  // namespace oxi::backend
