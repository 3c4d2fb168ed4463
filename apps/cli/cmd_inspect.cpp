// oxinfer inspect PATH [--json] [--tensors]: what a model file holds — format, architecture,
// parameter count, tensors by type, metadata (GGUF) or configs (HF) — without loading a model.
// Errors: "error: <one line>" on stderr, exit 1.
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <string>

#include <nlohmann/json.hpp>

#include "args.h"
#include "commands.h"
#include "core/error.h"
#include "format/model_files.h"
#include "kernels/isa.h"
#include "kernels/matmul.h"

namespace oxi::cli {

namespace {

using nlohmann::json;

constexpr size_t kInlineArray = 64;   // JSON: numeric arrays up to this many items shown in full
constexpr size_t kInlineStrings = 16; // JSON: string arrays up to this many items shown in full
constexpr size_t kTextInline = 16;    // text: arrays up to this many items shown in full
constexpr size_t kTextMaxString = 80;  // text mode cuts longer strings

const char* kHelp =
    "usage: oxinfer inspect PATH [--json] [--tensors]\n"
    "       oxinfer inspect -m PATH | -hf org/name[:quant] [--json] [--tensors]\n"
    "\n"
    "Shows a model file's format, architecture, parameter count, tensors by type and metadata.\n"
    "PATH is a .gguf file (first part of a split), a Hugging Face checkpoint directory, or one\n"
    ".safetensors file.\n"
    "  --json      one JSON object on stdout (fields: see README, 'oxinfer inspect')\n"
    "  --tensors   also list every tensor (name, type, shape, bytes); always in --json\n";

std::string human_count(uint64_t n) {
  char buf[64];
  if (n >= 1000000000ull) std::snprintf(buf, sizeof buf, "%.2fB", n / 1e9);
  else if (n >= 1000000ull) std::snprintf(buf, sizeof buf, "%.2fM", n / 1e6);
  else if (n >= 1000ull) std::snprintf(buf, sizeof buf, "%.2fK", n / 1e3);
  else std::snprintf(buf, sizeof buf, "%" PRIu64, n);
  return buf;
}

std::string human_bytes(uint64_t n) {
  char buf[64];
  if (n >= (1ull << 30)) std::snprintf(buf, sizeof buf, "%.2f GiB", n / 1073741824.0);
  else if (n >= (1ull << 20)) std::snprintf(buf, sizeof buf, "%.2f MiB", n / 1048576.0);
  else if (n >= (1ull << 10)) std::snprintf(buf, sizeof buf, "%.2f KiB", n / 1024.0);
  else std::snprintf(buf, sizeof buf, "%" PRIu64 " B", n);
  return buf;
}

// FLOAT32 values as the shortest decimal that reads back to the same float (1e-06, not
// 9.999999974752427e-07).
double shortest_f32(double d) {
  const float f = static_cast<float>(d);
  char buf[48];
  for (int prec = 6; prec <= 9; ++prec) {
    std::snprintf(buf, sizeof buf, "%.*g", prec, static_cast<double>(f));
    if (std::strtof(buf, nullptr) == f) break;
  }
  return std::strtod(buf, nullptr);
}

json scalar_json(const GgufValue& v) {
  if (const auto* u = std::get_if<uint64_t>(&v.scalar)) return *u;
  if (const auto* i = std::get_if<int64_t>(&v.scalar)) return *i;
  if (const auto* d = std::get_if<double>(&v.scalar)) return v.type == GgufType::FLOAT32 ? shortest_f32(*d) : *d;
  if (const auto* b = std::get_if<bool>(&v.scalar)) return *b;
  return std::get<std::string>(v.scalar);
}

// A GGUF value as JSON; long arrays become {"type": "array", "elem_type": T, "count": N}.
json value_json(const GgufValue& v) {
  if (!v.is_array()) return scalar_json(v);
  const size_t n = v.array_size();
  const size_t limit = v.elem_type == GgufType::STRING || v.elem_type == GgufType::ARRAY ? kInlineStrings : kInlineArray;
  if (n > limit) return json{{"type", "array"}, {"elem_type", gguf_type_name(v.elem_type)}, {"count", n}};
  json a = json::array();
  for (size_t i = 0; i < n; ++i) a.push_back(value_json(v.element(i)));
  return a;
}

std::string cut(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (c == '\n') out += "\\n";
    else if (c == '\r') out += "\\r";
    else if (c == '\t') out += "\\t";
    else if (static_cast<unsigned char>(c) < 0x20) out += '?';
    else out += c;
  }
  if (out.size() > kTextMaxString) {
    size_t k = kTextMaxString;
    while (k > 0 && (static_cast<unsigned char>(out[k]) & 0xC0) == 0x80) --k;  // keep UTF-8 whole
    out = out.substr(0, k) + "... (" + std::to_string(s.size()) + " bytes)";
  }
  return out;
}

std::string dump(const json& j) { return j.dump(-1, ' ', false, json::error_handler_t::replace); }

// Text for one JSON value (HF config entries and GGUF values rendered through value_json).
std::string text_value(const json& j) {
  if (j.is_string()) return cut(j.get<std::string>());
  if (j.is_object() && j.value("type", "") == "array" && j.contains("count")) {
    return "[" + std::to_string(j["count"].get<size_t>()) + " items]";
  }
  if (j.is_array() && j.size() > kTextInline) return "[" + std::to_string(j.size()) + " items]";
  return cut(dump(j));
}

void flatten(const std::string& prefix, const json& j, std::vector<std::pair<std::string, json>>& out) {
  if (j.is_object() && !j.empty()) {
    for (auto it = j.begin(); it != j.end(); ++it) {
      flatten(prefix.empty() ? it.key() : prefix + "." + it.key(), it.value(), out);
    }
    return;
  }
  out.emplace_back(prefix, j);
}

struct TypeStats {
  uint64_t tensors = 0, bytes = 0, params = 0;
  DType dtype = DType::F32;
};

// One .safetensors file on its own (a shard, or a file outside any checkpoint).
int inspect_safetensors(const std::string& path, bool as_json, bool list_tensors) {
  SafetensorsFile f = read_safetensors(path);
  uint64_t params = 0, bytes = 0;
  std::map<std::string, TypeStats> by_type;
  json tensors = json::array();
  for (const auto& [name, t] : f.tensors.all()) {
    const uint64_t n = static_cast<uint64_t>(t.n_elements());
    params += n;
    bytes += t.nbytes;
    auto& s = by_type[dtype_name(t.dtype)];
    s.tensors += 1;
    s.bytes += t.nbytes;
    s.params += n;
    tensors.push_back({{"name", name}, {"type", dtype_name(t.dtype)}, {"shape", t.shape},
                       {"offset", t.offset}, {"bytes", t.nbytes}, {"file", path}});
  }
  json out;
  out["path"] = path;
  out["format"] = "safetensors";
  out["architecture"] = nullptr;
  out["files"] = json::array({path});
  out["metadata"] = f.metadata;
  out["parameters"] = params;
  out["tensor_count"] = f.tensors.size();
  out["tensor_bytes"] = bytes;
  json types = json::object();
  for (const auto& [tn, s] : by_type) types[tn] = {{"tensors", s.tensors}, {"bytes", s.bytes}, {"parameters", s.params}};
  out["types"] = types;
  out["tensors"] = tensors;
  if (as_json) {
    const std::string s = out.dump(2, ' ', false, json::error_handler_t::replace);
    std::printf("%s\n", s.c_str());
    return 0;
  }
  std::string text;
  text += "file:          " + path + "\n";
  text += "format:        safetensors\n";
  text += "parameters:    " + human_count(params) + " (" + std::to_string(params) + ")\n";
  text += "tensors:       " + std::to_string(f.tensors.size()) + ", " + human_bytes(bytes) + "\n";
  for (const auto& [tn, s] : by_type) {
    char buf[160];
    std::snprintf(buf, sizeof buf, "  %-8s %6" PRIu64 " tensors  %12s  %s params\n", tn.c_str(), s.tensors,
                  human_bytes(s.bytes).c_str(), human_count(s.params).c_str());
    text += buf;
  }
  text += "metadata (" + std::to_string(f.metadata.size()) + " keys):\n";
  for (const auto& [k, v] : f.metadata) text += "  " + cut(k) + " = " + cut(v) + "\n";
  if (list_tensors) {
    text += "tensor list:\n";
    for (const auto& [name, t] : f.tensors.all()) {
      text += "  " + cut(name) + "  " + dtype_name(t.dtype) + "  " + t.shape_string() + "  " + std::to_string(t.nbytes) +
              " bytes\n";
    }
  }
  std::fwrite(text.data(), 1, text.size(), stdout);
  return 0;
}

}  // namespace

int cmd_inspect(int argc, char** argv) {
  try {
    Args args(argc, argv, {"--json", "--tensors", "-h", "--help", "--offline"});
    if (args.flag({"-h", "--help"})) {
      std::fputs(kHelp, stdout);
      return 0;
    }
    args.check_known({"-m", "--model", "-hf", "--hf-repo", "--hf-token"});
    std::vector<std::string> pos(args.positional().begin() + (args.positional().empty() ? 0 : 1),
                                 args.positional().end());
    std::string path;
    if (!pos.empty()) {
      if (pos.size() > 1) throw_error(ErrorCode::kInvalidArgument, "inspect takes one PATH");
      if (args.has("-m") || args.has("--model") || args.has("-hf") || args.has("--hf-repo")) {
        throw_error(ErrorCode::kInvalidArgument, "give either PATH or -m/-hf, not both");
      }
      path = pos[0];
    } else {
      path = resolve_model_path(args);
    }
    const bool as_json = args.flag({"--json"});
    const bool list_tensors = args.flag({"--tensors"});

    if (path.size() > 12 && path.compare(path.size() - 12, 12, ".safetensors") == 0) {
      std::error_code ec;
      if (std::filesystem::is_regular_file(path, ec)) return inspect_safetensors(path, as_json, list_tensors);
    }
    ModelFiles mf = open_model_files(path);
    json out;
    out["path"] = mf.path;
    // A file without any architecture key is still inspectable; a malformed one is an error.
    std::string arch;
    if (!mf.gguf || mf.gguf->metadata.contains("general.architecture")) {
      try {
        arch = mf.architecture();
      } catch (const Error&) {
        if (mf.gguf) throw;
      }
    }
    out["architecture"] = arch.empty() ? json(nullptr) : json(arch);

    const TensorIndex& ti = mf.tensors();
    std::map<std::string, TypeStats> by_type;
    uint64_t params = 0, bytes = 0;
    json tensors = json::array();
    for (const auto& [name, t] : ti.all()) {
      const uint64_t n = static_cast<uint64_t>(t.n_elements());
      params += n;
      bytes += t.nbytes;
      auto& s = by_type[dtype_name(t.dtype)];
      s.tensors += 1;
      s.bytes += t.nbytes;
      s.params += n;
      s.dtype = t.dtype;
      tensors.push_back({{"name", name}, {"type", dtype_name(t.dtype)}, {"shape", t.shape},
                         {"offset", t.offset}, {"bytes", t.nbytes}, {"file", t.source->name()}});
    }
    // "matmul": how this build multiplies such weights on this CPU's kernel set (isa): "kernel",
    // "dequantise" (to f32 first: slower until the type has a kernel) or "none".
    json types = json::object();
    for (const auto& [tn, s] : by_type) {
      types[tn] = {{"tensors", s.tensors}, {"bytes", s.bytes}, {"parameters", s.params}, {"matmul", matmul_path(s.dtype)}};
    }
    out["isa"] = isa_name();

    std::vector<std::pair<std::string, json>> meta;  // flattened, for text output
    json files = json::array();
    if (mf.gguf) {
      const GgufFile& g = *mf.gguf;
      out["format"] = "gguf";
      out["gguf_version"] = g.version;
      out["alignment"] = g.alignment;
      for (const auto& s : g.sources) files.push_back(s->name());
      json md = json::object();
      for (const auto& [k, v] : g.metadata.entries()) {
        md[k] = value_json(v);
        meta.emplace_back(k, md[k]);
      }
      out["metadata"] = md;
    } else {
      const HfCheckpoint& h = *mf.hf;
      out["format"] = "hf";
      for (const auto& s : h.sources) files.push_back(s->name());
      out["config"] = h.config;
      out["generation_config"] = h.generation_config;
      out["tokenizer_json"] = h.tokenizer_json_path.empty() ? json(nullptr) : json(h.tokenizer_json_path);
      out["chat_template_bytes"] = h.chat_template.size();
      flatten("", h.config, meta);
      if (!h.generation_config.empty()) flatten("generation_config", h.generation_config, meta);
    }
    out["files"] = files;
    out["parameters"] = params;
    out["tensor_count"] = ti.size();
    out["tensor_bytes"] = bytes;
    out["types"] = types;
    out["tensors"] = tensors;

    if (as_json) {
      const std::string s = out.dump(2, ' ', false, json::error_handler_t::replace);
      std::fwrite(s.data(), 1, s.size(), stdout);
      std::fputc('\n', stdout);
      return 0;
    }

    std::string text;
    auto line = [&](const std::string& s) { text += s + "\n"; };
    line("file:          " + mf.path);
    if (mf.gguf) {
      line("format:        GGUF v" + std::to_string(mf.gguf->version) + " (alignment " +
           std::to_string(mf.gguf->alignment) + ")" +
           (files.size() > 1 ? ", " + std::to_string(files.size()) + " split files" : ""));
    } else {
      line("format:        Hugging Face checkpoint, " + std::to_string(files.size()) + " safetensors file(s)");
      line("tokenizer:     " + (mf.hf->tokenizer_json_path.empty() ? std::string("(none)") : mf.hf->tokenizer_json_path));
      line("chat template: " + (mf.hf->chat_template.empty() ? std::string("(none)")
                                                            : std::to_string(mf.hf->chat_template.size()) + " bytes"));
    }
    line("architecture:  " + (arch.empty() ? std::string("(none)") : arch));
    line("parameters:    " + human_count(params) + " (" + std::to_string(params) + ")");
    line("tensors:       " + std::to_string(ti.size()) + ", " + human_bytes(bytes) + " (" + std::to_string(bytes) +
         " bytes)");
    for (const auto& [tn, s] : by_type) {
      char buf[200];
      const bool deq = std::string(matmul_path(s.dtype)) == "dequantise";
      std::snprintf(buf, sizeof buf, "  %-8s %6" PRIu64 " tensors  %12s  %s params%s%s%s", tn.c_str(), s.tensors,
                    human_bytes(s.bytes).c_str(), human_count(s.params).c_str(),
                    deq ? "  (no " : "", deq ? isa_name() : "", deq ? " kernel: dequantised to f32, slower)" : "");
      line(buf);
    }
    line(std::string(mf.gguf ? "metadata" : "config") + " (" + std::to_string(meta.size()) + " keys):");
    for (const auto& [k, v] : meta) line("  " + cut(k) + " = " + text_value(v));
    if (list_tensors) {
      line("tensor list:");
      for (const auto& [name, t] : ti.all()) {
        line("  " + cut(name) + "  " + dtype_name(t.dtype) + "  " + t.shape_string() + "  " +
             std::to_string(t.nbytes) + " bytes");
      }
    }
    std::fwrite(text.data(), 1, text.size(), stdout);
    return 0;
  } catch (const std::exception& e) {
    return report_error(e);
  }
}

}  // namespace oxi::cli
