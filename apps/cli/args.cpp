#include "args.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>

#include "core/error.h"
#include "hub/hub.h"

namespace oxi::cli {

Args::Args(int argc, char** argv, std::vector<std::string> flags) : flag_names_(std::move(flags)) {
  bool options_done = false;
  for (int i = 0; i < argc; ++i) {
    std::string a = argv[i];
    if (options_done || a.size() < 2 || a[0] != '-' ||
        (a[1] >= '0' && a[1] <= '9') /* negative number */) {
      positional_.push_back(a);
      continue;
    }
    if (a == "--") {
      options_done = true;
      continue;
    }
    std::string name = a, value;
    bool has_inline = false;
    if (const auto eq = a.find('='); eq != std::string::npos && a.rfind("--", 0) == 0) {
      name = a.substr(0, eq);
      value = a.substr(eq + 1);
      has_inline = true;
    }
    const bool is_flag = std::find(flag_names_.begin(), flag_names_.end(), name) != flag_names_.end();
    if (!is_flag && !has_inline) {
      if (i + 1 >= argc) throw_error(ErrorCode::kInvalidArgument, "option " + name + " needs a value");
      value = argv[++i];
    }
    values_.emplace(name, value);
    order_.push_back(name);
  }
}

bool Args::has(const std::string& name) const { return values_.count(name) > 0; }

std::optional<std::string> Args::get(const std::string& name) const {
  std::optional<std::string> out;
  auto [b, e] = values_.equal_range(name);
  for (auto it = b; it != e; ++it) out = it->second;
  return out;
}

std::optional<std::string> Args::get(std::initializer_list<const char*> aliases) const {
  // The last occurrence across aliases wins, as on a command line.
  std::optional<std::string> out;
  for (const auto& n : order_) {
    for (const char* a : aliases) {
      if (n == a) out = get(n);
    }
  }
  return out;
}

std::string Args::get_or(std::initializer_list<const char*> aliases, const std::string& def) const {
  auto v = get(aliases);
  return v ? *v : def;
}

long long Args::get_int(std::initializer_list<const char*> aliases, long long def) const {
  auto v = get(aliases);
  if (!v) return def;
  char* end = nullptr;
  errno = 0;
  const long long x = std::strtoll(v->c_str(), &end, 10);
  if (v->empty() || *end != '\0' || errno != 0) {
    throw_error(ErrorCode::kInvalidArgument,
                "invalid integer for " + std::string(*aliases.begin()) + ": '" + *v + "'");
  }
  return x;
}

double Args::get_float(std::initializer_list<const char*> aliases, double def) const {
  auto v = get(aliases);
  if (!v) return def;
  char* end = nullptr;
  const double x = std::strtod(v->c_str(), &end);
  if (v->empty() || *end != '\0') {
    throw_error(ErrorCode::kInvalidArgument,
                "invalid number for " + std::string(*aliases.begin()) + ": '" + *v + "'");
  }
  return x;
}

bool Args::flag(std::initializer_list<const char*> aliases) const {
  for (const char* a : aliases) {
    if (has(a)) return true;
  }
  return false;
}

void Args::check_known(std::initializer_list<const char*> known) const {
  for (const auto& n : order_) {
    const bool ok = std::find(flag_names_.begin(), flag_names_.end(), n) != flag_names_.end() ||
                    std::any_of(known.begin(), known.end(), [&](const char* k) { return n == k; });
    if (!ok) throw_error(ErrorCode::kInvalidArgument, "unknown option " + n);
  }
}

std::string resolve_model_path(const Args& args) {
  if (auto m = args.get({"-m", "--model"})) return *m;
  if (auto hf = args.get({"-hf", "--hf-repo"})) {
    HubOptions opt;
    if (auto t = args.get({"--hf-token"})) opt.token = *t;
    opt.offline = args.flag({"--offline"});
    return hub_resolve_model(*hf, opt);
  }
  throw_error(ErrorCode::kInvalidArgument, "no model given: pass -m PATH or -hf org/name[:quant]");
}

int report_error(const std::exception& e) {
  std::fprintf(stderr, "error: %s\n", e.what());
  if (const auto* oe = dynamic_cast<const Error*>(&e)) {
    if (oe->code() == ErrorCode::kNotImplemented) return 2;
  }
  return 1;
}

}  // namespace oxi::cli
