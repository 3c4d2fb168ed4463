#include "args.h"

#include <algorithm>
#include <filesystem>
#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include <cerrno>
#include <climits>

#include "backend/backend.h"
#include "core/byte_source.h"
#include <sys/mman.h>
#include "core/error.h"
#include "chat/builtin_templates.h"
#include "backend/backend.h"
#include "nn/device.h"
#include "nn/kv_cache.h"
#include "hub/hub.h"
#include "kernels/isa.h"

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
      if (i + 1 >= argc) {
        // Reported by check_known (an unknown name first: "unknown option X") or by a getter.
        missing_value_ = name;
        order_.push_back(name);
        break;
      }
      value = argv[++i];
    }
    values_.emplace(name, value);
    order_.push_back(name);
  }
}

bool Args::has(const std::string& name) const { return values_.count(name) > 0 || name == missing_value_; }

std::optional<std::string> Args::get(const std::string& name) const {
  if (!missing_value_.empty() && name == missing_value_) usage_error("option " + name + " needs a value");
  std::optional<std::string> out;
  auto [b, e] = values_.equal_range(name);
  for (auto it = b; it != e; ++it) out = it->second;
  return out;
}

std::vector<std::string> Args::get_all(const std::string& name) const {
  if (!missing_value_.empty() && name == missing_value_) usage_error("option " + name + " needs a value");
  std::vector<std::string> out;
  auto [b, e] = values_.equal_range(name);
  for (auto it = b; it != e; ++it) out.push_back(it->second);
  return out;
}

std::vector<std::pair<std::string, std::string>> Args::get_all_in_order(std::initializer_list<const char*> names) const {
  std::vector<std::pair<std::string, std::string>> out;
  std::map<std::string, size_t> seen;  // occurrences consumed per name
  for (const auto& n : order_) {
    if (std::none_of(names.begin(), names.end(), [&](const char* a) { return n == a; })) continue;
    const std::vector<std::string> all = get_all(n);
    const size_t k = seen[n]++;
    if (k < all.size()) out.emplace_back(n, all[k]);
  }
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
    usage_error("invalid integer for " + std::string(*aliases.begin()) + ": '" + *v + "'");
  }
  return x;
}

double Args::get_float(std::initializer_list<const char*> aliases, double def) const {
  auto v = get(aliases);
  if (!v) return def;
  char* end = nullptr;
  const double x = std::strtod(v->c_str(), &end);
  if (v->empty() || *end != '\0') {
    usage_error("invalid number for " + std::string(*aliases.begin()) + ": '" + *v + "'");
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
    if (!ok) usage_error("unknown option " + n);
  }
  if (!missing_value_.empty()) usage_error("option " + missing_value_ + " needs a value");
}

void Args::check_known(const std::vector<std::string>& known) const {
  for (const auto& n : order_) {
    const bool ok = std::find(flag_names_.begin(), flag_names_.end(), n) != flag_names_.end() ||
                    std::find(known.begin(), known.end(), n) != known.end();
    if (!ok) usage_error("unknown option " + n);
  }
  if (!missing_value_.empty()) usage_error("option " + missing_value_ + " needs a value");
}

std::string resolve_model_path(const Args& args) {
  if (auto m = args.get({"-m", "--model"})) return *m;
  if (args.get({"-hf", "--hf-repo"})) return model_paths_from_args(args, false).model;
  usage_error("no model given: pass -m PATH or -hf org/name[:quant]");
}

ModelPaths model_paths_from_args(const Args& args, bool want_mmproj) {
  ModelPaths p;
  p.mmproj = args.get_or({"--mmproj"}, "");
  p.draft = draft_model_from_args(args);
  if (auto m = args.get({"-m", "--model"})) {
    p.model = *m;
    return p;
  }
  const auto hf = args.get({"-hf", "--hf-repo"});
  if (!hf) usage_error("no model given: pass -m PATH or -hf org/name[:quant]");
  HubOptions opt;
  if (auto t = args.get({"--hf-token"})) opt.token = *t;
  opt.offline = args.flag({"--offline"});
  const bool mmproj = want_mmproj && p.mmproj.empty() && !args.flag({"--no-mmproj"});
  const bool mtp = p.draft.empty() && args.get_or({"--spec"}, "") == "mtp";
  if (mmproj) opt.sidecars.push_back("mmproj");
  if (mtp) opt.sidecars.push_back("mtp-");
  const HubModel r = hub_resolve(*hf, opt);
  p.model = r.path;
  if (mmproj) p.mmproj = r.sidecar("mmproj");
  if (mtp) p.draft = r.sidecar("mtp-");
  if (!p.mmproj.empty() && mmproj) std::fprintf(stderr, "oxinfer: mmproj from the repo: %s\n", p.mmproj.c_str());
  if (!p.draft.empty() && mtp) std::fprintf(stderr, "oxinfer: MTP head from the repo: %s\n", p.draft.c_str());
  return p;
}

std::string draft_model_from_args(const Args& args) {
  const auto md = args.get({"-md", "--model-draft"});
  const auto hfd = args.get({"-hfd", "--hf-repo-draft"});
  if (md && hfd) usage_error("give only one of -md and -hfd");
  if (hfd) {
    HubOptions opt;
    if (auto t = args.get({"--hf-token"})) opt.token = *t;
    opt.offline = args.flag({"--offline"});
    opt.primary_word = "mtp-";  // the draft repo's MTP head (llama.cpp's -hfd with draft-mtp)
    return hub_resolve_model(*hfd, opt);
  }
  if (!md) return "";
  if (md->empty()) usage_error("-md needs a file");
  return *md;
}

void usage_error(const std::string& message) { throw UsageError(message); }

int report_error(const std::exception& e) {
  std::fprintf(stderr, "error: %s\n", e.what());
  if (dynamic_cast<const UsageError*>(&e)) return 2;
  if (const auto* oe = dynamic_cast<const Error*>(&e)) {
    if (oe->code() == ErrorCode::kNotImplemented) return 2;
  }
  return 1;
}

std::vector<int32_t> parse_id_list(const std::string& text, const std::string& flag) {
  std::vector<int32_t> ids;
  size_t i = 0;
  auto sep = [](char c) { return c == ',' || c == ' ' || c == '\t' || c == '\n' || c == '\r'; };
  while (i < text.size()) {
    while (i < text.size() && sep(text[i])) ++i;
    if (i >= text.size()) break;
    size_t j = i;
    while (j < text.size() && !sep(text[j])) ++j;
    const std::string tok = text.substr(i, j - i);
    char* end = nullptr;
    errno = 0;
    const long long v = std::strtoll(tok.c_str(), &end, 10);
    if (*end != '\0' || errno != 0 || v < 0 || v > INT32_MAX) {
      usage_error("invalid token id in " + flag + ": '" + tok + "'");
    }
    ids.push_back(static_cast<int32_t>(v));
    i = j;
  }
  if (ids.empty()) usage_error(flag + ": no token ids given");
  return ids;
}

const std::vector<std::string> kSamplingOptions = {
    "--temp", "--temperature", "--top-k", "--top-p", "--min-p", "--repeat-penalty",
    "--repeat-last-n", "--presence-penalty", "--frequency-penalty", "--seed", "-s"};

oxi_sampling_params sampling_from_args(const Args& args, oxi_sampling_params p) {
  auto fval = [&](std::initializer_list<const char*> names, float& dst) {
    if (args.get(names)) dst = static_cast<float>(args.get_float(names, 0.0));
  };
  fval({"--temp", "--temperature"}, p.temperature);
  fval({"--top-p"}, p.top_p);
  fval({"--min-p"}, p.min_p);
  fval({"--repeat-penalty"}, p.repeat_penalty);
  fval({"--presence-penalty"}, p.presence_penalty);
  fval({"--frequency-penalty"}, p.frequency_penalty);
  if (args.get({"--top-k"})) {
    const long long k = args.get_int({"--top-k"}, 0);
    if (k > INT32_MAX || k < INT32_MIN) usage_error("invalid value for --top-k");
    p.top_k = static_cast<int32_t>(k);
  }
  if (args.get({"--repeat-last-n"})) {
    const long long n = args.get_int({"--repeat-last-n"}, 64);
    if (n < -1 || n > INT32_MAX) usage_error("invalid value for --repeat-last-n (>= -1)");
    p.penalty_last_n = static_cast<int32_t>(n);
  }
  if (args.get({"--seed", "-s"})) {
    const long long s = args.get_int({"--seed", "-s"}, -1);
    if (s < -1) usage_error("invalid value for --seed (-1 for random, else >= 0)");
    p.seed = s == -1 ? OXI_SEED_RANDOM : static_cast<uint64_t>(s);
  }
  // Greedy means the argmax of the model's logits: penalties that only came from the model's
  // defaults are dropped (given on the command line, they still apply).
  if (!(p.temperature > 0.0f) &&
      !args.get({"--repeat-penalty", "--presence-penalty", "--frequency-penalty"})) {
    p.repeat_penalty = 1.0f;
    p.presence_penalty = 0.0f;
    p.frequency_penalty = 0.0f;
  }
  auto bad = [](const std::string& m) { usage_error(m); };
  if (!(p.temperature == p.temperature)) bad("invalid value for --temp");
  if (!(p.top_p >= 0.0f)) bad("invalid value for --top-p (>= 0)");
  if (!(p.min_p <= 1.0f)) bad("invalid value for --min-p (<= 1)");
  if (!(p.repeat_penalty > 0.0f)) bad("invalid value for --repeat-penalty (> 0)");
  return p;
}

const std::vector<std::string> kSpecOptions = {"--spec", "--draft-max", "--draft", "--draft-n", "--draft-min", "--draft-n-min"};

SpecArgs spec_from_args(const Args& args) {
  SpecArgs s;
  if (const auto m = args.get({"--spec"})) {
    static const char* kNames[] = {"none", "auto", "ngram", "mtp", "draft"};
    int found = -1;
    for (int i = 0; i < 5; ++i) {
      if (*m == kNames[i]) found = i;
    }
    if (found < 0) usage_error("invalid value for --spec: '" + *m + "' (auto, none, ngram, mtp, draft)");
    s.mode = found;  // the names are in OXI_SPEC_* order
  }
  const long long mx = args.get_int({"--draft-max", "--draft", "--draft-n"}, 16);
  if (mx < 0 || mx > 16) usage_error("invalid value for --draft-max (0..16)");
  const long long mn = args.get_int({"--draft-min", "--draft-n-min"}, 0);
  if (mn < 0 || mn > mx) usage_error("invalid value for --draft-min (0..--draft-max)");
  s.draft_max = static_cast<int32_t>(mx);
  s.draft_min = static_cast<int32_t>(mn);
  return s;
}

const std::vector<std::string> kModelOptions = {"-m", "--model", "-hf", "--hf-repo", "--hf-token",
                                                "-t", "--threads", "--chat-template-file", "--isa",
                                                "--device", "--quant", "-md", "--model-draft", "-hfd",
                                                "--hf-repo-draft"};

const char* const kQuantHelp =
    "  --quant TYPE      quantise the weights at load: q8_0, q4_0 or q4_k, from an HF checkpoint or an\n"
    "                    f32/f16/bf16 GGUF (llama-quantize's per-tensor rule: norms, routers and conv\n"
    "                    kernels stay as stored; tied embeddings / output take Q6_K under 4-bit). A file\n"
    "                    that is already quantised is refused: use it without --quant\n";

std::string quant_from_args(const Args& args) {
  const auto q = args.get({"--quant"});
  if (!q) return "";
  std::string s = *q;
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (s != "q8_0" && s != "q4_0" && s != "q4_k") usage_error("invalid value for --quant: '" + *q + "' (expected q8_0, q4_0 or q4_k)");
  return s;
}

const std::vector<std::string> kCompatFlags = {"--jinja", "--no-mmap", "--mlock", "--list-devices"};
const std::vector<std::string> kCompatOptions = {"-fa", "--flash-attn", "-ngl", "--n-gpu-layers", "--gpu-layers",
                                                 "-ctk", "--cache-type-k", "-ctv", "--cache-type-v",
                                                 "-b", "--batch-size", "-ub", "--ubatch-size", "--chat-template"};

std::vector<std::string> with_compat_flags(std::vector<std::string> flags) {
  flags.insert(flags.end(), kCompatFlags.begin(), kCompatFlags.end());
  return flags;
}

int print_devices() {
  std::printf("Available devices:\n");
  for (const std::string& l : backend::list_devices()) std::printf("  %s\n", l.c_str());
  return 0;
}

bool list_devices_if_asked(const Args& args) {
  if (!args.flag({"--list-devices"})) return false;
  print_devices();
  return true;
}

bool llama_image_preproc_from_args(const Args& args) {
  const std::string preproc = args.get_or({"--image-preproc"}, "hf");
  if (preproc != "hf" && preproc != "llama") usage_error("--image-preproc must be hf or llama");
  return preproc == "llama";
}

int flash_attn_from_args(const Args& args) {
  const auto fa = args.get({"-fa", "--flash-attn"});
  if (!fa) return -1;
  if (*fa == "on" || *fa == "1" || *fa == "true") return 1;
  if (*fa == "off" || *fa == "0" || *fa == "false") return 0;
  if (*fa == "auto") return -1;
  usage_error("invalid value for -fa: '" + *fa + "' (expected on, off or auto)");
}

const char* const kCacheTypeHelp =
    "  -ctk, --cache-type-k T  KV cache type for K: f16 (default), f32 or q8_0 (llama.cpp's spelling)\n"
    "  -ctv, --cache-type-v T  the same for V; q8_0 needs flash attention (refused with -fa off, as\n"
    "                          llama.cpp does). A q8_0 type rotates the heads by a Hadamard matrix\n"
    "                          first, as llama.cpp does (Qwen 3.5; OXI_ATTN_ROT_DISABLE=1: off)\n";

std::pair<std::string, std::string> cache_types_from_args(const Args& args) {
  std::pair<std::string, std::string> out;
  auto one = [&](std::optional<std::string> v, const char* flag, std::string& dst) {
    if (!v) return;
    nn::KvType t;
    if (!nn::parse_kv_type(*v, &t)) usage_error(std::string("invalid value for ") + flag + ": '" + *v + "' (expected f16, f32 or q8_0)");
    dst = *v;
  };
  one(args.get({"-ctk", "--cache-type-k"}), "-ctk", out.first);
  one(args.get({"-ctv", "--cache-type-v"}), "-ctv", out.second);
  if (out.second == "q8_0" && flash_attn_from_args(args) == 0)
    usage_error("-ctv q8_0 needs flash attention (as in llama.cpp): drop -fa off");
  return out;
}

int gpu_layers_from_args(const Args& args) {
  if (!args.get({"-ngl", "--n-gpu-layers", "--gpu-layers"})) return -1;
  const long long n = args.get_int({"-ngl", "--n-gpu-layers", "--gpu-layers"}, 0);
  if (n < -1 || n > 100000) usage_error("invalid value for -ngl: " + std::to_string(n));
  return static_cast<int>(n);
}

std::string apply_compat_options(const Args& args) {
  flash_attn_from_args(args);  // validated here, applied by the loader
  if (args.flag({"--no-mmap"})) set_use_mmap(false);
  gpu_layers_from_args(args);  // validated here, applied by the loader
  cache_types_from_args(args);  // validated here, applied by the loader
  for (auto names : {std::initializer_list<const char*>{"-b", "--batch-size"}, {"-ub", "--ubatch-size"}}) {
    if (!args.get(names)) continue;
    const long long n = args.get_int(names, 0);
    if (n < 1) usage_error(std::string("invalid value for ") + *names.begin() + ": must be at least 1");
    std::fprintf(stderr, "oxinfer: note: %s: accepted; oxinfer sizes its own batches (prefill in 512-token chunks)\n",
                 *names.begin());
  }
  const auto tmpl = args.get({"--chat-template"});
  if (!tmpl) return "";
  return chat_template_source(*tmpl);
}

std::string chat_template_source(const std::string& value) {
  std::string names;
  for (const std::string& n : builtin_chat_template_names()) names += (names.empty() ? "" : ", ") + n;
  if (value.empty()) usage_error("--chat-template needs a template name (" + names + "), a file or Jinja source");
  // A built-in name first, so a stray file named like one in the working directory cannot shadow it.
  if (auto src = builtin_chat_template(value)) return *src;
  std::error_code ec;
  if (std::filesystem::is_regular_file(value, ec)) return read_text_file(value);
  if (value.find("{{") != std::string::npos || value.find("{%") != std::string::npos) return value;
  usage_error("--chat-template '" + value + "': not a built-in template name, a file or Jinja source (built-in names: " +
              names + ")");
}

void lock_memory_if_asked(const Args& args) {
  if (!args.flag({"--mlock"})) return;
  if (::mlockall(MCL_CURRENT | MCL_FUTURE) != 0) {  // what is mapped now and later (the model, caches)
    std::fprintf(stderr, "oxinfer: warning: --mlock: mlockall failed (%s); raise RLIMIT_MEMLOCK (ulimit -l)\n",
                 std::strerror(errno));
  }
}

void apply_isa_from_args(const Args& args) {
  const auto isa = args.get({"--isa"});
  if (!isa) return;
  if (*isa != "auto" && *isa != "scalar" && *isa != "avx2" && *isa != "avx512" && *isa != "avx512-amx") {
    usage_error("invalid value for --isa: '" + *isa + "' (expected scalar, avx2, avx512, avx512-amx or auto)");
  }
  set_isa(*isa);
}

void log_kernels(int gpu_layers) {
  std::fprintf(stderr, "oxinfer: %s\n", kernels_summary().c_str());
  std::fprintf(stderr, "oxinfer: %s\n", backend::device_line().c_str());  // docs/backends.md
  // What runs where (the loader's rule, LoadRequest::gpu_layers): a block device takes the whole
  // model unless -ngl 0; the per-matmul devices only ever take large prefill matmuls.
  if (const auto bd = backend::active_block_device())
    std::fprintf(stderr, "oxinfer: offload: %s\n",
                 gpu_layers == 0 ? "-ngl 0: weights, caches and decode on the CPU; large prefill matmuls on the device"
                                 : ("the whole model on " + bd->name() + " (weights, KV caches, recurrent states; every layer)").c_str());
}

void check_status(oxi_status st) {
  if (st != OXI_OK) throw Error(static_cast<ErrorCode>(st), oxi_last_error());
}

oxi_model* open_model_from_args(const Args& args, const ModelPaths* given) {
  const ModelPaths paths = given ? *given : model_paths_from_args(args, false);
  const std::string& path = paths.model;
  apply_isa_from_args(args);
  oxi_model_params mp = oxi_model_default_params();
  const long long t = args.get_int({"-t", "--threads"}, 0);
  if (t < 0 || t > 1024) usage_error("invalid value for -t (0..1024)");
  mp.n_threads = static_cast<int32_t>(t);
  // --device none|auto|NAME (docs/backends.md); absent: env OXI_DEVICE, else auto.
  const auto device = args.get({"--device"});
  if (device) mp.device = device->c_str();
  const std::string quant = quant_from_args(args);
  if (!quant.empty()) mp.quant = quant.c_str();
  std::string tmpl = apply_compat_options(args);
  if (auto f = args.get({"--chat-template-file"})) tmpl = read_text_file(*f);
  if (!tmpl.empty()) mp.chat_template = tmpl.c_str();
  mp.flash_attn = flash_attn_from_args(args);
  mp.n_gpu_layers = gpu_layers_from_args(args);
  const auto [ctk, ctv] = cache_types_from_args(args);
  if (!ctk.empty()) mp.cache_type_k = ctk.c_str();
  if (!ctv.empty()) mp.cache_type_v = ctv.c_str();
  if (!paths.draft.empty()) mp.draft_model = paths.draft.c_str();
  oxi_model* model = nullptr;
  check_status(oxi_model_open(path.c_str(), &mp, &model));
  lock_memory_if_asked(args);
  return model;
}

namespace {
std::string dump(const nlohmann::ordered_json& j) {
  return j.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace);
}
}  // namespace

std::string chat_text(oxi_model* m, const nlohmann::ordered_json& messages, const nlohmann::ordered_json& options) {
  const std::string mj = dump(messages), oj = dump(options);
  size_t n = 0;
  check_status(oxi_chat_render(m, mj.c_str(), oj.c_str(), nullptr, 0, &n));
  std::string out(n + 1, '\0');
  check_status(oxi_chat_render(m, mj.c_str(), oj.c_str(), out.data(), out.size(), &n));
  out.resize(n);
  return out;
}

std::vector<int32_t> chat_ids(oxi_model* m, const nlohmann::ordered_json& messages, const nlohmann::ordered_json& options) {
  const std::string mj = dump(messages), oj = dump(options);
  size_t n = 0;
  check_status(oxi_chat_tokenize(m, mj.c_str(), oj.c_str(), nullptr, 0, &n));
  std::vector<int32_t> ids(n);
  check_status(oxi_chat_tokenize(m, mj.c_str(), oj.c_str(), ids.data(), ids.size(), &n));
  ids.resize(n);
  return ids;
}

}  // namespace oxi::cli
