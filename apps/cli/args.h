// A small argument parser with llama.cpp's spellings: multi-letter single-dash options such as
// `-hf`, `-np`, `-ngl` are whole names (not bundles of letters), `--x=v` and `--x v` both work.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "oxinfer.h"

namespace oxi::cli {

// A command-line mistake (unknown option, missing or malformed value, missing -m): exit code 2.
class UsageError : public Error {
 public:
  explicit UsageError(const std::string& message) : Error(ErrorCode::kInvalidArgument, message) {}
};
[[noreturn]] void usage_error(const std::string& message);

class Args {
 public:
  // `flags`: names that take no value (e.g. {"--json", "--no-chat"}); every other name starting
  // with '-' takes the next argument (or the part after '='). A lone "-" or anything not starting
  // with '-' is positional; "--" ends options.
  Args(int argc, char** argv, std::vector<std::string> flags);

  bool has(const std::string& name) const;  // flag or option given (any alias via names list)
  std::optional<std::string> get(const std::string& name) const;  // last value given
  std::optional<std::string> get(std::initializer_list<const char*> aliases) const;
  // Every value given for a repeatable option, in command-line order.
  std::vector<std::string> get_all(const std::string& name) const;
  // (name, value) of every occurrence of any of `names`, in command-line order (--image and
  // --audio interleaved as given).
  std::vector<std::pair<std::string, std::string>> get_all_in_order(std::initializer_list<const char*> names) const;
  std::string get_or(std::initializer_list<const char*> aliases, const std::string& def) const;
  // Numeric getters throw oxi::Error(kInvalidArgument) "invalid value for -n: 'x'".
  long long get_int(std::initializer_list<const char*> aliases, long long def) const;
  double get_float(std::initializer_list<const char*> aliases, double def) const;
  bool flag(std::initializer_list<const char*> aliases) const;
  const std::vector<std::string>& positional() const { return positional_; }

  // Throws UsageError "unknown option X" for any name not in `known` (flags are always known).
  void check_known(std::initializer_list<const char*> known) const;
  void check_known(const std::vector<std::string>& known) const;

 private:
  std::vector<std::string> flag_names_;
  std::multimap<std::string, std::string> values_;  // name → value ("" for flags)
  std::vector<std::string> order_;
  std::vector<std::string> positional_;
  std::string missing_value_;  // the last argument was an option that takes a value
};

// -m PATH or -hf org/name[:quant][@rev] → a local path (file or directory). Throws oxi::Error.
std::string resolve_model_path(const Args& args);
// -md / --model-draft FILE, or -hfd / --hf-repo-draft org/name[:quant] resolved through the Hub
// (llama.cpp's spellings); "" when neither is given.
std::string draft_model_from_args(const Args& args);

// The files a command loads: the model, its vision tower (--mmproj), its draft (-md). With -hf
// the companions come from the repo as llama.cpp's downloader picks them (hub.h sidecars): the
// mmproj when `want_mmproj` and neither --mmproj nor --no-mmproj is given; an `mtp-*.gguf` head
// when --spec mtp is given without -md. Explicit paths always win.
struct ModelPaths {
  std::string model, mmproj, draft;
};
ModelPaths model_paths_from_args(const Args& args, bool want_mmproj);

// Prints "error: MSG" to stderr and returns the exit code for the error (1, or 2 for not
// implemented / usage errors).
int report_error(const std::exception& e);

// "1,2,3" (commas and/or spaces) → ids; UsageError naming `flag` on anything else.
std::vector<int32_t> parse_id_list(const std::string& text, const std::string& flag);

// Sampling options shared by run / chat / serve, with llama.cpp's spellings:
//   --temp T  --top-k K  --top-p P  --min-p P  --repeat-penalty R  --repeat-last-n N
//   --presence-penalty P  --frequency-penalty F  --seed S (-1: random)
// Values given on the command line override `base` (the model's defaults); --temp 0 is greedy:
// the argmax of the raw logits, without the model's default penalties (explicit penalty flags
// still apply).
extern const std::vector<std::string> kSamplingOptions;
oxi_sampling_params sampling_from_args(const Args& args, oxi_sampling_params base);

// Speculative decoding options shared by run / chat / serve (docs/speculative.md):
//   --spec auto|none|ngram|mtp|draft (default auto)  --draft-max N (0..16, default 16)
//   --draft-min N (default 0)  — llama.cpp's spellings for the last two.
extern const std::vector<std::string> kSpecOptions;
struct SpecArgs {
  int32_t mode = OXI_SPEC_AUTO;
  int32_t draft_max = 16;
  int32_t draft_min = 0;
};
SpecArgs spec_from_args(const Args& args);

// Model options shared by the commands that load a model: -m/--model, -hf/--hf-repo,
// --hf-token, -t/--threads, --chat-template-file, --isa, --device, --quant.
extern const std::vector<std::string> kModelOptions;

// llama.cpp's flags that users carry over (run / chat / serve), docs/cli_compat.md:
//   --jinja (templates are always Jinja: no-op)  --no-mmap (read the weights into memory)
//   --mlock (lock the process's memory after the load)  --list-devices (list_devices_if_asked)
//   -fa / --flash-attn on|off|auto
//   -ngl / --n-gpu-layers N (a block device such as vulkan: 0 keeps the model on the CPU)  -b / -ub N (accepted,
//   oxinfer sizes its own batches)  --chat-template NAME|FILE|JINJA.
// kCompatFlags take no value (pass them to Args' flag list); kCompatOptions take one.
extern const std::vector<std::string> kCompatFlags;
extern const std::vector<std::string> kCompatOptions;
std::vector<std::string> with_compat_flags(std::vector<std::string> flags);
// Validates and applies them before the model is loaded (one stderr note per flag that does not
// apply); returns the --chat-template source to use ("" when not given). --mlock is applied by
// lock_memory_if_asked() after the load.
std::string apply_compat_options(const Args& args);
// The template a --chat-template value names: a built-in name (chat/builtin_templates.h: llama.cpp's
// names, our own Jinja), else a file's text, else the value itself when it is Jinja source; a usage
// error listing the built-in names otherwise.
std::string chat_template_source(const std::string& value);
int flash_attn_from_args(const Args& args);  // -fa → oxi_model_params.flash_attn (-1, 0, 1)
// --image-preproc hf (default) | llama → whether Qwen 3.5 images are resized as llama.cpp's mtmd
// does (oxi_model_params.image_preproc "llama"); a usage error for anything else.
bool llama_image_preproc_from_args(const Args& args);
// llama.cpp's --list-devices: what --device can name ("Available devices:", then a line each), exit 0.
int print_devices();
// run / chat / serve / bench --list-devices: prints them and returns true (the command then exits 0).
bool list_devices_if_asked(const Args& args);
// -ngl / --n-gpu-layers N → oxi_model_params.n_gpu_layers: -1 when absent (usage error below -1).
int gpu_layers_from_args(const Args& args);
void lock_memory_if_asked(const Args& args);
// Opens the model named by the arguments (resolve_model_path, threads, --chat-template-file).
// Throws oxi::Error with the C API's message on failure. Free with oxi_model_free.
// `paths`: already resolved (model_paths_from_args); nullptr resolves them here (no mmproj).
oxi_model* open_model_from_args(const Args& args, const ModelPaths* paths = nullptr);
// --isa scalar|avx2|avx512|auto: selects the kernel set (kernels/isa.h) before a model loads;
// absent, env OXI_ISA or the best the CPU runs applies. Unknown name: UsageError; a set this CPU
// lacks: oxi::Error(kUnsupported).
void apply_isa_from_args(const Args& args);
// --quant q8_0|q4_0|q4_k (quantise f32/f16/bf16 weights at load, docs/kernels.md): the lower-case
// name, "" when absent; UsageError for any other value.
std::string quant_from_args(const Args& args);
// The help lines for --quant, shared by run / chat / serve / bench.
extern const char* const kQuantHelp;
// -ctk / --cache-type-k and -ctv / --cache-type-v (f16, f32, q8_0; llama.cpp's spelling): the
// values as given ("" when absent); UsageError for another value, or -ctv q8_0 with -fa off.
std::pair<std::string, std::string> cache_types_from_args(const Args& args);
extern const char* const kCacheTypeHelp;  // their help lines
// The start-up line on stderr: "oxinfer: isa avx512 (host: avx512 avx2 scalar), 2 threads".
// The kernels, device and offload lines on stderr (gpu_layers: -ngl, -1 when absent).
void log_kernels(int gpu_layers = -1);
// Throws oxi::Error(code, oxi_last_error()) when st != OXI_OK.
void check_status(oxi_status st);

// The model's chat template over `messages` with `options` (oxi_chat_render's JSON): the text,
// and the prompt ids, tokenized so that special-token text in the messages stays text
// (oxi_chat_tokenize; --special-in-content sets options.special_in_content for the old way).
std::string chat_text(oxi_model* m, const nlohmann::ordered_json& messages, const nlohmann::ordered_json& options);
std::vector<int32_t> chat_ids(oxi_model* m, const nlohmann::ordered_json& messages, const nlohmann::ordered_json& options);

}  // namespace oxi::cli
