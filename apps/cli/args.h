// A small argument parser with llama.cpp's spellings: multi-letter single-dash options such as
// `-hf`, `-np`, `-ngl` are whole names (not bundles of letters), `--x=v` and `--x v` both work.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

namespace oxi::cli {

class Args {
 public:
  // `flags`: names that take no value (e.g. {"--json", "--no-chat"}); every other name starting
  // with '-' takes the next argument (or the part after '='). A lone "-" or anything not starting
  // with '-' is positional; "--" ends options.
  Args(int argc, char** argv, std::vector<std::string> flags);

  bool has(const std::string& name) const;  // flag or option given (any alias via names list)
  std::optional<std::string> get(const std::string& name) const;  // last value given
  std::optional<std::string> get(std::initializer_list<const char*> aliases) const;
  std::string get_or(std::initializer_list<const char*> aliases, const std::string& def) const;
  // Numeric getters throw oxi::Error(kInvalidArgument) "invalid value for -n: 'x'".
  long long get_int(std::initializer_list<const char*> aliases, long long def) const;
  double get_float(std::initializer_list<const char*> aliases, double def) const;
  bool flag(std::initializer_list<const char*> aliases) const;
  const std::vector<std::string>& positional() const { return positional_; }

  // Throws oxi::Error(kInvalidArgument) "unknown option X" for any name not in `known` (flags are
  // always known).
  void check_known(std::initializer_list<const char*> known) const;

 private:
  std::vector<std::string> flag_names_;
  std::multimap<std::string, std::string> values_;  // name → value ("" for flags)
  std::vector<std::string> order_;
  std::vector<std::string> positional_;
};

// -m PATH or -hf org/name[:quant][@rev] → a local path (file or directory). Throws oxi::Error.
std::string resolve_model_path(const Args& args);

// Prints "error: MSG" to stderr and returns the exit code for the error (1, or 2 for not
// implemented / usage errors).
int report_error(const std::exception& e);

}  // namespace oxi::cli
