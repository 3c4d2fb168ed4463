#include "vision/media_prompt.h"

#include <algorithm>

#include "core/error.h"

namespace oxi::vision {

namespace {
// A tower's rows are the text model's input rows: their widths must agree.
void check_width(int64_t out, const ModelInfo& info, const std::string& file) {
  if (out != info.n_embd)
    throw_error(ErrorCode::kInvalidArgument, file + ": projection width " + std::to_string(out) +
                                                 " does not match the model's embedding width " + std::to_string(info.n_embd));
}
}  // namespace

std::unique_ptr<Qwen3VLTower> load_vision_tower(const ModelInfo& info, const ModelFiles& files,
                                                const std::string& mmproj) {
  const bool hf_tower = files.hf && files.hf->config.contains("vision_config");
  if (mmproj.empty() && !hf_tower) return nullptr;
  if (model_family(info.arch) != "qwen35")
    throw_error(ErrorCode::kUnsupported, "images: the model (" + info.arch + ") has no vision support here" +
                                             (model_family(info.arch) == "gemma4" ? std::string(" (Gemma 4 images: oxinfer run --image)")
                                                                                  : std::string(" (Qwen 3.5 has)")));
  std::unique_ptr<Qwen3VLTower> tower = mmproj.empty() ? Qwen3VLTower::from_hf(*files.hf) : Qwen3VLTower::from_mmproj(mmproj);
  check_width(tower->config().out, info, mmproj.empty() ? files.path : mmproj);
  return tower;
}

std::unique_ptr<Gemma4VTower> load_gemma4_vision_tower(const ModelInfo& info, const ModelFiles& files,
                                                       const std::string& mmproj) {
  const bool hf_tower = files.hf && files.hf->config.contains("vision_config");
  if (mmproj.empty() && !hf_tower) return nullptr;
  if (model_family(info.arch) != "gemma4")
    throw_error(ErrorCode::kUnsupported, "images: the model (" + info.arch + ") is not a Gemma 4 model");
  std::unique_ptr<Gemma4VTower> tower = mmproj.empty() ? Gemma4VTower::from_hf(*files.hf) : Gemma4VTower::from_mmproj(mmproj);
  check_width(tower->config().out, info, mmproj.empty() ? files.path : mmproj);
  return tower;
}

bool gemma4_image_non_causal(int64_t n_embd) { return n_embd != 1536 && n_embd != 2560; }

Size VisionInput::grid(Size in) const {
  const Size t = qwen ? qwen->target_size(in, prep) : gemma->target_size(in);
  const int64_t cell = qwen ? qwen->config().patch * qwen->config().merge : gemma->config().patch * gemma->config().pool;
  return {t.width / cell, t.height / cell};
}

ImageEmbedding VisionInput::encode(const RgbImage& img) const {
  return qwen ? qwen->encode(img, prep) : gemma->encode(img);
}

std::unique_ptr<VisionInput> load_vision_input(const ModelInfo& info, const ModelFiles& files, const std::string& mmproj,
                                               const std::function<int32_t(const char*)>& special, ResizeMode resize) {
  const std::string fam = model_family(info.arch);
  auto v = std::make_unique<VisionInput>();
  if (fam == "gemma4") v->gemma = load_gemma4_vision_tower(info, files, mmproj);
  else v->qwen = load_vision_tower(info, files, mmproj);
  if (!v->qwen && !v->gemma) return nullptr;
  const char* b = v->qwen ? "<|vision_start|>" : "<|image>";
  const char* e = v->qwen ? "<|vision_end|>" : "<image|>";
  v->begin = special(b);
  v->end = special(e);
  if (v->begin < 0 || v->end < 0)
    throw_error(ErrorCode::kUnsupported, std::string("the model's vocabulary has no ") + (v->begin < 0 ? b : e) + " token (not a vision model)");
  v->mrope = v->qwen != nullptr;
  v->non_causal = v->gemma && gemma4_image_non_causal(info.n_embd);
  v->prep.mode = resize;
  return v;
}

void MediaEntries::add_text(std::span<const int32_t> ids) {
  for (int32_t id : ids) {
    const auto p = static_cast<int32_t>(next++);
    tok.push_back(id);
    pos.push_back(p);
    pos3.insert(pos3.end(), {p, p, p});
  }
}

void MediaEntries::add_image(int64_t nx, int64_t ny, std::span<const int32_t> row_ids) {
  if (nx <= 0 || ny <= 0 || row_ids.empty()) throw_error(ErrorCode::kInternal, "add_image: an empty image or no row ids");
  if (!mrope) {
    for (int64_t k = 0; k < nx * ny; ++k) {
      const auto p = static_cast<int32_t>(next++);
      tok.push_back(row_ids[static_cast<size_t>(k) % row_ids.size()]);
      pos.push_back(p);
      pos3.insert(pos3.end(), {p, p, p});
    }
    return;
  }
  const auto p = static_cast<int32_t>(next);
  for (int64_t k = 0; k < nx * ny; ++k) {
    tok.push_back(row_ids[static_cast<size_t>(k) % row_ids.size()]);
    pos.push_back(p);
    pos3.insert(pos3.end(), {p, static_cast<int32_t>(p + k / nx), static_cast<int32_t>(p + k % nx)});
  }
  next += std::max(nx, ny);
}

std::vector<size_t> MediaEntries::add_audio(int32_t begin, std::span<const int64_t> chunk_rows,
                                            std::span<const int32_t> row_ids, int32_t end) {
  if (chunk_rows.empty()) throw_error(ErrorCode::kInternal, "add_audio: no chunks");
  const bool m = mrope;
  mrope = false;  // audio rows take one plain position each (Gemma 4 has no mRoPE)
  std::vector<size_t> first;
  add_text(std::span<const int32_t>(&begin, 1));
  for (int64_t n : chunk_rows) {
    first.push_back(tok.size());
    add_image(n, 1, row_ids);
  }
  add_text(std::span<const int32_t>(&end, 1));
  mrope = m;
  return first;
}

}  // namespace oxi::vision
