// libFuzzer target: an HF checkpoint directory. The input is split at NUL bytes into
// config.json, tokenizer_config.json, model.safetensors.index.json and one safetensors file
// (shard "s.safetensors" when an index part is present, else model.safetensors), written to a
// private temp directory, then opened with open_model_files().
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "core/error.h"
#include "format/model_files.h"

namespace {

const std::string& dir() {
  // Leaked on purpose: the atexit cleanup runs after static destructors would.
  static const std::string* d = [] {
    auto* p = new std::string(std::filesystem::temp_directory_path().string() + "/oxi_fuzz_hf_" +
                              std::to_string(::getpid()));
    std::filesystem::create_directories(*p);
    std::atexit([] {
      std::error_code ec;
      std::filesystem::remove_all(dir(), ec);
    });
    return p;
  }();
  return *d;
}

void put(const std::string& name, const std::string& text, bool present) {
  const std::string p = dir() + "/" + name;
  if (!present) {
    std::remove(p.c_str());
    return;
  }
  std::FILE* f = std::fopen(p.c_str(), "wb");
  if (!f) return;
  std::fwrite(text.data(), 1, text.size(), f);
  std::fclose(f);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::vector<std::string> parts(1);
  for (size_t i = 0; i < size; ++i) {
    if (data[i] == 0 && parts.size() < 4) parts.emplace_back();
    else parts.back().push_back(static_cast<char>(data[i]));
  }
  const bool has_index = parts.size() > 2 && !parts[2].empty();
  put("config.json", parts[0], true);
  put("tokenizer_config.json", parts.size() > 1 ? parts[1] : "", parts.size() > 1 && !parts[1].empty());
  put("model.safetensors.index.json", has_index ? parts[2] : "", has_index);
  const std::string weights = parts.size() > 3 ? parts[3] : "";
  put("s.safetensors", weights, has_index);
  put("model.safetensors", weights, !has_index);
  try {
    oxi::ModelFiles mf = oxi::open_model_files(dir());
    (void)mf.architecture();
    (void)mf.tensors().size();
  } catch (const oxi::Error&) {
  }
  return 0;
}
