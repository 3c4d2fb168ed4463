#include "format/model_files.h"

#include <cstring>
#include <filesystem>

#include "core/error.h"

namespace oxi {

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
