// Spec parsing, names, environment, and picking a model's files from a repo listing.
#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <set>

#include "hub/hub_internal.h"

namespace oxi {

namespace {

bool repo_part_ok(const std::string& s) {
  if (s.empty() || s.size() > 96) return false;
  for (char c : s) {
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '-' && c != '_' && c != '.') return false;
  }
  if (s.front() == '-' || s.front() == '.' || s.back() == '-' || s.back() == '.') return false;
  return s.find("--") == std::string::npos && s.find("..") == std::string::npos;
}

bool quant_ok(const std::string& s) {
  if (s.empty() || s.size() > 64) return false;
  for (char c : s) {
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '-' && c != '_' && c != '.') return false;
  }
  return true;
}

bool revision_ok(const std::string& s) {
  if (s.empty() || s.size() > 256 || s.front() == '/' || s.back() == '/') return false;
  for (char c : s) {
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '-' && c != '_' && c != '.' && c != '/')
      return false;
  }
  return s.find("..") == std::string::npos && s.find("//") == std::string::npos;
}

}  // namespace

HubSpec parse_hub_spec(const std::string& spec) {
  const std::string usage = "invalid model spec '" + spec + "': expected org/name[:quant][@revision]";
  HubSpec out;
  std::string rest = spec;
  if (const auto at = rest.find('@'); at != std::string::npos) {
    out.revision = rest.substr(at + 1);
    rest = rest.substr(0, at);
    // Also accept org/name@rev:quant.
    if (const auto colon = out.revision.find(':'); colon != std::string::npos) {
      out.quant = out.revision.substr(colon + 1);
      out.revision = out.revision.substr(0, colon);
      if (rest.find(':') != std::string::npos) throw_error(ErrorCode::kInvalidArgument, usage);
    }
    if (!revision_ok(out.revision)) throw_error(ErrorCode::kInvalidArgument, usage + " (bad revision)");
  }
  if (const auto colon = rest.find(':'); colon != std::string::npos) {
    out.quant = rest.substr(colon + 1);
    rest = rest.substr(0, colon);
  }
  if (spec.find(':') != std::string::npos && !quant_ok(out.quant)) {
    throw_error(ErrorCode::kInvalidArgument, usage + " (bad quant)");
  }
  const auto slash = rest.find('/');
  if (slash == std::string::npos || rest.find('/', slash + 1) != std::string::npos ||
      !repo_part_ok(rest.substr(0, slash)) || !repo_part_ok(rest.substr(slash + 1))) {
    throw_error(ErrorCode::kInvalidArgument, usage);
  }
  out.repo = rest;
  if (out.revision.empty()) out.revision = "main";
  return out;
}

namespace {
// "~/x" → "$HOME/x", as huggingface_hub's expanduser.
std::string expand_home(const std::string& p) {
  const char* home = std::getenv("HOME");
  if (home && *home && (p == "~" || p.rfind("~/", 0) == 0)) return std::string(home) + p.substr(1);
  return p;
}
}  // namespace

std::string hf_hub_cache_dir() {
  if (const char* c = std::getenv("HF_HUB_CACHE"); c && *c) return expand_home(c);
  if (const char* h = std::getenv("HF_HOME"); h && *h) return expand_home(h) + "/hub";
  if (const char* x = std::getenv("XDG_CACHE_HOME"); x && *x) return std::string(x) + "/huggingface/hub";
  const char* home = std::getenv("HOME");
  return std::string(home && *home ? home : ".") + "/.cache/huggingface/hub";
}

namespace hub {

bool is_hex(const std::string& s, size_t len) {
  if (s.size() != len) return false;
  return std::all_of(s.begin(), s.end(), [](char c) { return std::isxdigit(static_cast<unsigned char>(c)) != 0; });
}

bool is_safe_repo_path(const std::string& path) {
  if (path.empty() || path.size() > 1024 || path.front() == '/') return false;
  size_t start = 0;
  while (start <= path.size()) {
    size_t end = path.find('/', start);
    if (end == std::string::npos) end = path.size();
    const std::string part = path.substr(start, end - start);
    if (part.empty() || part == "." || part == "..") return false;
    start = end + 1;
  }
  for (char c : path) {
    if (static_cast<unsigned char>(c) < 0x20 || c == '\\' || c == 0x7f) return false;
  }
  return true;
}

bool is_safe_blob_name(const std::string& name) {
  if (name.empty() || name.size() > 128) return false;
  return std::all_of(name.begin(), name.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_';
  });
}

std::string repo_folder_name(const std::string& repo) {
  std::string out = "models--";
  for (char c : repo) {
    if (c == '/') out += "--";
    else out += c;
  }
  return out;
}

std::string url_encode(const std::string& s, bool keep_slash) {
  static const char* kHex = "0123456789ABCDEF";
  std::string out;
  for (unsigned char c : s) {
    if (std::isalnum(c) || c == '-' || c == '_' || c == '.' || c == '~' || (keep_slash && c == '/')) {
      out += static_cast<char>(c);
    } else {
      out += '%';
      out += kHex[c >> 4];
      out += kHex[c & 15];
    }
  }
  return out;
}

std::string env_or(const char* name, const std::string& def) {
  const char* v = std::getenv(name);
  return (v && *v) ? std::string(v) : def;
}

bool env_truthy(const char* name) {
  std::string v = env_or(name, "");
  for (auto& c : v) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return v == "1" || v == "true" || v == "yes" || v == "on";
}

std::string upper(std::string s) {
  for (auto& c : s) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return s;
}

namespace {

std::string lower(std::string s) {
  for (auto& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}
bool ends_with_ci(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && lower(s.substr(s.size() - suffix.size())) == lower(suffix);
}
std::string basename_of(const std::string& p) {
  const auto s = p.rfind('/');
  return s == std::string::npos ? p : p.substr(s + 1);
}
// File stem without ".gguf" and without the split suffix.
std::string gguf_stem(const std::string& path) {
  std::string prefix;
  int part = 0, count = 0;
  std::string b = basename_of(path);
  if (parse_split_suffix(b, &part, &count, &prefix)) return prefix;
  return b.substr(0, b.size() - 5);
}
}  // namespace

bool is_model_gguf(const std::string& p) {
  if (!ends_with_ci(p, ".gguf")) return false;
  // Companions are never the model (llama.cpp's downloader skips the same names).
  const std::string b = lower(basename_of(p));
  for (const char* w : {"mmproj", "imatrix", "mtp-", "eagle3-", "dflash-", "dspark-"})
    if (b.find(w) != std::string::npos) return false;
  return true;
}

bool parse_split_suffix(const std::string& path, int* part, int* count, std::string* prefix) {
  // <prefix>-NNNNN-of-MMMMM.gguf
  static const size_t kLen = std::string("-00001-of-00002.gguf").size();
  if (path.size() <= kLen || !ends_with_ci(path, ".gguf")) return false;
  const std::string tail = path.substr(path.size() - kLen);
  if (tail[0] != '-' || tail.compare(6, 4, "-of-") != 0) return false;
  const std::string a = tail.substr(1, 5), b = tail.substr(10, 5);
  auto digits = [](const std::string& s) {
    return std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; });
  };
  if (!digits(a) || !digits(b)) return false;
  *part = std::atoi(a.c_str());
  *count = std::atoi(b.c_str());
  if (*part < 1 || *count < 1 || *part > *count) return false;
  *prefix = path.substr(0, path.size() - kLen);
  return true;
}

bool quant_matches(const std::string& path, const std::string& quant) {
  if (quant.empty()) return false;
  const std::string q = lower(quant);
  // A directory named after the quant (e.g. "Q4_K_M/model-00001-of-00002.gguf").
  const std::string lp = lower(path);
  size_t start = 0;
  for (size_t slash; (slash = lp.find('/', start)) != std::string::npos; start = slash + 1) {
    if (lp.substr(start, slash - start) == q) return true;
  }
  // The quant as a delimited token of the stem: each side is the end of the stem or one of "-. "
  // ('_' is not a boundary: Q4_K must not match Q4_K_M, nor K_M match Q4_K_M).
  const std::string stem = lower(gguf_stem(path));
  for (size_t pos = stem.find(q); pos != std::string::npos; pos = stem.find(q, pos + 1)) {
    const bool left = pos == 0 || std::string("-. ").find(stem[pos - 1]) != std::string::npos;
    const size_t end = pos + q.size();
    const bool right = end == stem.size() || std::string("-. ").find(stem[end]) != std::string::npos;
    if (left && right) return true;
  }
  return false;
}

namespace {
// "Q4_K_M", "IQ4_XS", "F16", "BF16", "TQ1_0", "MXFP4": a llama.cpp type name.
bool looks_like_quant(const std::string& s) {
  size_t i = 0;
  for (const char* p : {"MXFP", "BF", "TQ", "IQ", "Q", "F"}) {
    if (s.rfind(p, 0) == 0) {
      i = std::string(p).size();
      break;
    }
  }
  return i > 0 && i < s.size() && std::isdigit(static_cast<unsigned char>(s[i]));
}
}  // namespace

std::string gguf_quant_label(const std::string& path) {
  const std::string stem = gguf_stem(path);
  const auto cut = stem.find_last_of("-.");
  const std::string label = upper(cut == std::string::npos ? stem : stem.substr(cut + 1));
  // Repos that keep each quant in a folder ("BF16/model-00001-of-00002.gguf"): the folder names it.
  const auto slash = path.rfind('/');
  if (looks_like_quant(label) || slash == std::string::npos) return label;
  const size_t prev = slash == 0 ? std::string::npos : path.rfind('/', slash - 1);
  const size_t from = prev == std::string::npos ? 0 : prev + 1;
  return upper(path.substr(from, slash - from));
}

Selection select_model_files(const std::vector<std::string>& paths, const std::string& quant,
                             const std::string& repo) {
  static const char* kSmallFiles[] = {"config.json",           "tokenizer.json",
                                      "tokenizer_config.json", "chat_template.jinja",
                                      "generation_config.json", "special_tokens_map.json",
                                      "model.safetensors.index.json"};
  std::set<std::string> all(paths.begin(), paths.end());
  std::vector<std::string> ggufs, shards, any_st;
  for (const auto& p : all) {
    if (is_model_gguf(p)) ggufs.push_back(p);
    if (p.find('/') == std::string::npos && ends_with_ci(p, ".safetensors")) {
      any_st.push_back(p);
      // model.safetensors or model-00001-of-00002.safetensors
      if (p.rfind("model", 0) == 0) shards.push_back(p);
    }
  }
  // With an index, the split shards are the weights (a stray single model.safetensors beside them
  // is not fetched too).
  if (all.count("model.safetensors.index.json")) {
    std::vector<std::string> split;
    for (const auto& p : shards) {
      if (p.find("-of-") != std::string::npos) split.push_back(p);
    }
    if (!split.empty()) shards = split;
  }
  if (shards.empty()) shards = any_st;

  Selection sel;
  const bool hf_ok = !shards.empty() && all.count("config.json");
  if (quant.empty() && hf_ok) {
    for (const char* f : kSmallFiles) {
      if (all.count(f)) sel.files.push_back(f);
    }
    sel.files.insert(sel.files.end(), shards.begin(), shards.end());
    return sel;
  }
  if (ggufs.empty()) {
    if (!quant.empty() && hf_ok) {
      throw_error(ErrorCode::kInvalidArgument,
                  repo + " has no GGUF files (it is a safetensors checkpoint): drop ':" + quant + "'");
    }
    std::string listing;
    size_t n = 0;
    for (const auto& p : all) {
      if (n++ == 12) {
        listing += ", ...";
        break;
      }
      listing += (listing.empty() ? "" : ", ") + p;
    }
    throw_error(ErrorCode::kUnsupported,
                repo + " has no model files oxinfer can use (no *.safetensors with config.json, no "
                       ".gguf); files: " + (listing.empty() ? "(none)" : listing));
  }
  sel.gguf = true;
  const std::string want = quant.empty() ? "Q4_K_M" : quant;
  // Group GGUFs: a split model is one group keyed by its prefix.
  std::map<std::string, std::vector<std::string>> groups;
  for (const auto& p : ggufs) {
    int part = 0, count = 0;
    std::string prefix;
    groups[parse_split_suffix(p, &part, &count, &prefix) ? prefix : p].push_back(p);
  }
  std::vector<std::string> matching;
  for (const auto& [key, files] : groups) {
    if (quant_matches(files.front(), want)) matching.push_back(key);
  }
  if (matching.empty() && quant.empty() && groups.size() == 1) matching.push_back(groups.begin()->first);
  if (matching.empty()) {
    std::set<std::string> labels;
    for (const auto& [key, files] : groups) labels.insert(gguf_quant_label(files.front()));
    std::string avail;
    for (const auto& l : labels) avail += (avail.empty() ? "" : ", ") + l;
    throw_error(ErrorCode::kInvalidArgument,
                "no GGUF file for quant '" + want + "' in " + repo + "; available: " + avail);
  }
  // Prefer the shortest key (a root-level file over one in a subfolder), then lexicographic.
  std::sort(matching.begin(), matching.end(), [](const std::string& a, const std::string& b) {
    return a.size() != b.size() ? a.size() < b.size() : a < b;
  });
  const auto& files = groups[matching.front()];
  int part = 0, count = 0;
  std::string prefix;
  if (parse_split_suffix(files.front(), &part, &count, &prefix)) {
    std::vector<std::string> parts(static_cast<size_t>(count));
    for (const auto& f : files) {
      int fp = 0, fc = 0;
      std::string pre;
      if (parse_split_suffix(f, &fp, &fc, &pre) && fc == count) parts[static_cast<size_t>(fp - 1)] = f;
    }
    for (int i = 0; i < count; ++i) {
      if (parts[static_cast<size_t>(i)].empty()) {
        throw_error(ErrorCode::kFormat, "split GGUF " + basename_of(prefix) + " in " + repo +
                                            " is incomplete: part " + std::to_string(i + 1) +
                                            " of " + std::to_string(count) + " is missing");
      }
    }
    sel.files = parts;
  } else {
    sel.files = files;
  }
  sel.result = sel.files.front();
  return sel;
}

}  // namespace hub
}  // namespace oxi

namespace oxi::hub {

namespace {
std::string dir_of(const std::string& p) {
  const auto s = p.rfind('/');
  return s == std::string::npos ? "" : p.substr(0, s);
}
// "Q4_K_M" → 4, "F16" → 16, "BF16" → 16; 0 without a digit.
int quant_bits(const std::string& label) {
  const auto pos = label.find_first_of("0123456789");
  if (pos == std::string::npos) return 0;
  int v = 0;
  for (size_t i = pos; i < label.size() && std::isdigit(static_cast<unsigned char>(label[i])) && v < 1000; ++i) v = v * 10 + (label[i] - '0');
  return v;
}
}  // namespace

std::string select_sidecar(const std::vector<std::string>& paths, const std::string& model, const std::string& word,
                           const std::string& quant) {
  const std::string mdir = dir_of(model);
  const std::string q = upper(quant);
  const int want_bits = quant_bits(q.empty() ? gguf_quant_label(model) : q);
  std::string best;
  size_t best_depth = 0;
  bool best_exact = false;
  int best_diff = 0;
  for (const auto& p : paths) {
    if (p == model || !ends_with_ci(p, ".gguf") || lower(basename_of(p)).find(word) == std::string::npos) continue;
    // Its folder must be the model's or one above it.
    const std::string d = dir_of(p);
    if (!(d.empty() || d == mdir || mdir.rfind(d + "/", 0) == 0)) continue;
    const size_t depth = d.empty() ? 0 : 1 + static_cast<size_t>(std::count(d.begin(), d.end(), '/'));
    const bool exact = !q.empty() && upper(p).find("-" + q + ".") != std::string::npos;
    const int diff = std::abs(quant_bits(gguf_quant_label(p)) - want_bits);
    const bool better = best.empty() || depth > best_depth || (depth == best_depth && exact && !best_exact) ||
                        (depth == best_depth && exact == best_exact && diff < best_diff);
    if (better) {
      best = p;
      best_depth = depth;
      best_exact = exact;
      best_diff = diff;
    }
  }
  return best;
}

Selection select_files(const std::vector<std::string>& paths, const HubSpec& spec, const std::string& primary_word) {
  if (primary_word.empty()) return select_model_files(paths, spec.quant, spec.repo);
  const std::string f = select_sidecar(paths, "", primary_word, spec.quant);
  if (!f.empty()) return Selection{{f}, f, true};
  // No such file: the repo is a draft model of its own (Gemma 4's *-it-assistant drafters, as a
  // GGUF or an HF checkpoint), chosen as -hf chooses a model; its loader refuses what does not fit.
  return select_model_files(paths, spec.quant, spec.repo);
}

}  // namespace oxi::hub
