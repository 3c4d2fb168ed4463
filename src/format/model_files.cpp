#include "format/model_files.h"

#include <algorithm>
#include <cstring>
#include <map>
#include <filesystem>

#include "core/error.h"

namespace oxi {

namespace {

// llama_ftype (GGUF general.file_type) → short name, as quantisers spell the recipes.
const char* ftype_name(int64_t t) {
  switch (t) {
    case 0: return "F32";
    case 1: return "F16";
    case 2: return "Q4_0";
    case 3: return "Q4_1";
    case 7: return "Q8_0";
    case 8: return "Q5_0";
    case 9: return "Q5_1";
    case 10: return "Q2_K";
    case 11: return "Q3_K_S";
    case 12: return "Q3_K_M";
    case 13: return "Q3_K_L";
    case 14: return "Q4_K_S";
    case 15: return "Q4_K_M";
    case 16: return "Q5_K_S";
    case 17: return "Q5_K_M";
    case 18: return "Q6_K";
    case 25: return "IQ4_NL";
    case 26: return "IQ3_S";
    case 30: return "IQ4_XS";
    case 32: return "BF16";
    default: return nullptr;
  }
}

}  // namespace

std::string ModelFiles::file_type() const {
  if (gguf) {
    if (const GgufValue* v = gguf->metadata.find("general.file_type")) {
      if (const char* n = ftype_name(v->as_int())) return n;
    }
  }
  std::map<DType, uint64_t> bytes;
  for (const auto& [name, t] : tensors().all()) bytes[t.dtype] += t.nbytes;
  const auto it = std::max_element(bytes.begin(), bytes.end(),
                                   [](const auto& a, const auto& b) { return a.second < b.second; });
  return it == bytes.end() ? "?" : dtype_name(it->first);
}

std::string ModelFiles::architecture() const {
  if (gguf) {
    const GgufValue* v = gguf->metadata.find("general.architecture");
    if (!v) format_error(path, "missing metadata key general.architecture");
    if (v->type != GgufType::STRING) format_error(path, "general.architecture is not a string");
    return v->as_string();
  }
  if (hf) {
    auto str = [](const nlohmann::json& j, const char* k) -> std::string {
      auto it = j.find(k);
      return it != j.end() && it->is_string() ? it->get<std::string>() : std::string();
    };
    std::string mt = str(hf->config, "model_type");
    if (mt.empty()) mt = str(hf->text_config, "model_type");
    if (mt.empty()) {
      auto it = hf->config.find("architectures");
      if (it != hf->config.end() && it->is_array() && !it->empty() && (*it)[0].is_string()) {
        mt = (*it)[0].get<std::string>();
      }
    }
    if (mt.empty()) format_error(path + "/config.json", "no model_type (or architectures) to tell the architecture");
    return mt;
  }
  throw_error(ErrorCode::kInternal, "ModelFiles is empty");
}

ModelFiles open_model_files(const std::string& path) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (path.empty()) throw_error(ErrorCode::kInvalidArgument, "empty model path");
  const fs::file_status st = fs::status(path, ec);
  if (ec || !fs::exists(st)) throw_error(ErrorCode::kIo, path + ": no such file or directory");
  ModelFiles mf;
  mf.path = path;
  if (fs::is_directory(st)) {
    mf.kind = ModelFileKind::kHf;
    mf.hf = read_hf_checkpoint(path);
    return mf;
  }
  if (!fs::is_regular_file(st)) throw_error(ErrorCode::kIo, path + ": not a regular file or directory");
  // A config.json or a .safetensors file: the checkpoint is its directory.
  const std::string fname = fs::path(path).filename().string();
  auto ends_with = [&](const char* suf) {
    const size_t n = std::strlen(suf);
    return fname.size() >= n && fname.compare(fname.size() - n, n, suf) == 0;
  };
  if (fname == "config.json" || ends_with(".safetensors") || ends_with(".safetensors.index.json")) {
    std::string dir = fs::path(path).parent_path().string();
    if (dir.empty()) dir = ".";
    mf.kind = ModelFileKind::kHf;
    mf.path = dir;
    mf.hf = read_hf_checkpoint(dir);
    return mf;
  }
  mf.kind = ModelFileKind::kGguf;
  mf.gguf = read_gguf(path);
  return mf;
}

}  // namespace oxi
