// oxinfer list / oxinfer rm: the models in the Hugging Face cache (one row per GGUF quant or
// safetensors checkpoint, as `ollama list` shows its models), and removing one. The cache work is
// src/hub/cache_admin.cpp; docs/hub.md "Listing and removing" has the rules and the --json shape.
#include <algorithm>
#include <cstdio>
#include <ctime>
#include <string>

#include <nlohmann/json.hpp>

#include "args.h"
#include "commands.h"
#include "hub/hub.h"

namespace oxi::cli {

namespace {

const char* kListUsage =
    "usage: oxinfer list [--json]\n"
    "\n"
    "The models in the Hugging Face cache ($HF_HUB_CACHE, else $HF_HOME/hub, else\n"
    "~/.cache/huggingface/hub): one row per GGUF quant (NAME org/name:QUANT) or safetensors\n"
    "checkpoint (NAME org/name), each NAME usable as -hf NAME and oxinfer rm NAME.\n"
    "SIZE counts each blob once; LAST USED is the newest access or modification time of the\n"
    "model's files.\n"
    "  --json   a JSON array instead: [{\"name\",\"repo\",\"quant\",\"format\",\"size_bytes\",\n"
    "           \"last_used\",\"revision\",\"path\",\"files\"}] (docs/hub.md)\n";

const char* kRmUsage =
    "usage: oxinfer rm org/name[:quant] [...]\n"
    "\n"
    "Removes models from the Hugging Face cache: org/name deletes the whole repo folder (every\n"
    "revision and quant); org/name:QUANT only that quant's files, and their blobs unless another\n"
    "snapshot still links to them (the repo folder goes too once no model is left in it).\n"
    "Links are never followed out of the cache.\n";

// 1234567 → "1.2 MB" (decimal units, as ollama prints sizes).
std::string human_size(uint64_t bytes) {
  static const char* kUnits[] = {"B", "KB", "MB", "GB", "TB"};
  double v = static_cast<double>(bytes);
  int u = 0;
  while (v >= 1000.0 && u < 4) {
    v /= 1000.0;
    ++u;
  }
  char buf[32];
  std::snprintf(buf, sizeof(buf), u == 0 ? "%.0f %s" : "%.1f %s", v, kUnits[u]);
  return buf;
}

// Seconds ago → "3 minutes ago", as ollama words it.
std::string human_age(int64_t when, int64_t now) {
  const int64_t s = now - when;
  if (when <= 0) return "never";
  if (s < 60) return "less than a minute ago";
  static const struct { int64_t secs; const char* name; } kSteps[] = {
      {365 * 86400, "year"}, {30 * 86400, "month"}, {7 * 86400, "week"}, {86400, "day"}, {3600, "hour"}, {60, "minute"}};
  for (const auto& st : kSteps) {
    if (s >= st.secs) {
      const int64_t n = s / st.secs;
      return std::to_string(n) + " " + st.name + (n == 1 ? "" : "s") + " ago";
    }
  }
  return "less than a minute ago";
}

std::string iso_utc(int64_t t) {
  const std::time_t tt = static_cast<std::time_t>(t);
  std::tm tm{};
  gmtime_r(&tt, &tm);
  char buf[32];
  std::strftime(buf, sizeof(buf), "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

}  // namespace

int cmd_list(int argc, char** argv) {
  try {
    Args args(argc - 1, argv + 1, {"--json", "-h", "--help"});
    if (args.flag({"-h", "--help"})) {
      std::fputs(kListUsage, stdout);
      return 0;
    }
    args.check_known(std::initializer_list<const char*>{});
    if (!args.positional().empty()) usage_error("unexpected argument '" + args.positional()[0] + "'");
    const auto models = hub_list_cached(hf_hub_cache_dir());
    if (args.flag({"--json"})) {
      nlohmann::ordered_json arr = nlohmann::ordered_json::array();
      for (const auto& m : models) {
        arr.push_back({{"name", m.name()}, {"repo", m.repo},
                       {"quant", m.quant.empty() ? nlohmann::ordered_json(nullptr) : nlohmann::ordered_json(m.quant)},
                       {"format", m.format}, {"size_bytes", m.size_bytes}, {"last_used", iso_utc(m.last_used)},
                       {"revision", m.revision}, {"path", m.path}, {"files", m.files}});
      }
      std::printf("%s\n", arr.dump(2, ' ', false, nlohmann::ordered_json::error_handler_t::replace).c_str());
      return 0;
    }
    size_t w = 4;
    for (const auto& m : models) w = std::max(w, m.name().size());
    const int64_t now = static_cast<int64_t>(std::time(nullptr));
    std::printf("%-*s  %-11s  %9s  %s\n", static_cast<int>(w), "NAME", "FORMAT", "SIZE", "LAST USED");
    for (const auto& m : models) {
      std::printf("%-*s  %-11s  %9s  %s\n", static_cast<int>(w), m.name().c_str(), m.format.c_str(),
                  human_size(m.size_bytes).c_str(), human_age(m.last_used, now).c_str());
    }
    return 0;
  } catch (const std::exception& e) {
    return report_error(e);
  }
}

int cmd_rm(int argc, char** argv) {
  try {
    Args args(argc - 1, argv + 1, {"-h", "--help"});
    if (args.flag({"-h", "--help"})) {
      std::fputs(kRmUsage, stdout);
      return 0;
    }
    args.check_known(std::initializer_list<const char*>{});
    if (args.positional().empty()) usage_error("no model given: oxinfer rm org/name[:quant]");
    int rc = 0;
    for (const auto& spec : args.positional()) {
      try {
        const RemoveResult r = hub_remove_cached(hf_hub_cache_dir(), spec);
        std::printf("deleted '%s' (%s freed)\n", spec.c_str(), human_size(r.freed_bytes).c_str());
      } catch (const Error& e) {
        std::fprintf(stderr, "error: %s\n", e.what());
        rc = 1;
      }
    }
    return rc;
  } catch (const std::exception& e) {
    return report_error(e);
  }
}

}  // namespace oxi::cli
