// Prompts with images and audio for `oxinfer run` and `oxinfer chat` (see run_media.h). The text is
// rendered with one `<__media__>` marker per item, split at the markers and tokenized piece by piece
// with special-token text parsed (so the same command line gives the same tokens as
// llama-mtmd-cli). Each image becomes, for Qwen 3.5, `<|vision_start|>` + its embedding rows +
// `<|vision_end|>` at the mRoPE positions of vision::MediaEntries (vision/media_prompt.h, shared
// with the server); for Gemma 4, `<|image>` + its rows + `<image|>` at plain positions (the rows as
// the tower gives them: not scaled by √d); a Gemma 4 audio clip `<|audio>` + its rows + `<audio|>`.
#include "run_media.h"

#include <algorithm>
#include <chrono>
#include <cstdio>

#include "api/api_internal.h"
#include "audio/decode.h"
#include "core/byte_source.h"
#include "core/error.h"
#include "loader/loaded_model.h"
#include "sampling/sampler.h"
#include "server/media.h"

namespace oxi::cli {

namespace {

std::vector<int32_t> tokenize(oxi_model* m, const std::string& s, bool add_special = false) {
  size_t n = 0;
  if (oxi_tokenize(m, s.data(), s.size(), add_special, 1, nullptr, 0, &n) != OXI_OK)
    throw_error(ErrorCode::kInternal, "tokenize: " + std::string(oxi_last_error()));
  std::vector<int32_t> ids(n);
  if (oxi_tokenize(m, s.data(), s.size(), add_special, 1, ids.data(), ids.size(), &n) != OXI_OK)
    throw_error(ErrorCode::kInternal, "tokenize: " + std::string(oxi_last_error()));
  ids.resize(n);
  return ids;
}

int32_t special_id(oxi_model* m, const char* text) {
  const std::vector<int32_t> ids = tokenize(m, text);
  if (ids.size() != 1)
    throw_error(ErrorCode::kUnsupported, std::string("the model's vocabulary has no ") + text + " token (not a vision model)");
  return ids[0];
}

double ms_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace

std::string place_media_markers(const std::string& text, size_t n_media) {
  std::string content = text;
  size_t n_markers = 0;
  for (size_t p = content.find(kMediaMarker); p != std::string::npos; p = content.find(kMediaMarker, p + 1)) ++n_markers;
  if (n_markers == 0) {
    for (size_t i = 0; i < n_media; ++i) content = kMediaMarker + content;
    n_markers = n_media;
  }
  if (n_markers != n_media)
    throw_error(ErrorCode::kInvalidArgument, "the prompt has " + std::to_string(n_markers) + " " + kMediaMarker +
                                                 " markers for " + std::to_string(n_media) + " images and audio clips");
  return content;
}

MediaEncoder::MediaEncoder(oxi_model* m, const std::string& mmproj, bool images, bool audio, bool llama_preproc)
    : m_(m), mmproj_(mmproj), llama_preproc_(llama_preproc) {
  if (images) load_image_tower();
  if (audio) load_audio_tower();
}

// The tower: the mmproj file, else the HF checkpoint's own read in place.
void MediaEncoder::load_image_tower() {
  if (qwen_ || gemma_) return;
  const LoadedModel& lm = loaded_of(m_);
  const ModelInfo& info = lm.model->info();
  const std::string fam = model_family(info.arch);
  if (fam == "qwen35")
    qwen_ = vision::load_vision_tower(info, lm.files, mmproj_);
  else if (fam == "gemma4")
    gemma_ = vision::load_gemma4_vision_tower(info, lm.files, mmproj_);
  else
    throw_error(ErrorCode::kUnsupported, "images: the model (" + info.arch +
                                             ") has no vision support in oxinfer yet (Qwen 3.5 and Gemma 4 have)");
  if (!qwen_ && !gemma_)
    throw_error(ErrorCode::kInvalidArgument,
                "--image needs --mmproj FILE (the model's vision tower); this model has none, a text-only model cannot take images");
  // llama.cpp's mtmd uses the same strings around the rows.
  vs_ = special_id(m_, qwen_ ? "<|vision_start|>" : "<|image>");
  ve_ = special_id(m_, qwen_ ? "<|vision_end|>" : "<image|>");
}

void MediaEncoder::load_audio_tower() {
  if (atower_) return;
  const LoadedModel& lm = loaded_of(m_);
  const ModelInfo& info = lm.model->info();
  if (model_family(info.arch) != "gemma4")
    throw_error(ErrorCode::kUnsupported, "audio: the model (" + info.arch + ") has no audio support in oxinfer (Gemma 4 E2B/E4B have)");
  atower_ = audio::load_gemma4_audio_tower(info, lm.files, mmproj_);
  if (!atower_)
    throw_error(ErrorCode::kInvalidArgument,
                "--audio needs --mmproj FILE (the model's audio tower); this model has none, it cannot take audio");
  as_ = special_id(m_, "<|audio>");
  ae_ = special_id(m_, "<audio|>");
}

MediaEncoder::~MediaEncoder() = default;

const MediaEncoder::Encoded& MediaEncoder::encode(const MediaItem& item) {
  const bool is_audio = item.kind == 'a';
  const std::string bytes = read_text_file(item.path, is_audio ? (256ull << 20) : vision::kMaxImageFileBytes);
  std::vector<int32_t> ids = server::image_row_ids(bytes);
  ids.push_back(is_audio ? 1 : 0);  // the key only; an image and a clip never share rows
  const auto hit = cache_.find(ids);
  if (hit != cache_.end()) return hit->second;
  Encoded e;
  e.ids.assign(ids.begin(), ids.end() - 1);
  const auto t0 = std::chrono::steady_clock::now();
  const auto* p = reinterpret_cast<const uint8_t*>(bytes.data());
  if (is_audio) {
    const std::vector<float> samples = audio::decode_audio(std::span(p, bytes.size()), item.path, 16000);
    audio::AudioEmbedding a = atower_->encode(samples);
    e.chunks = std::move(a.chunk_tokens);
    e.rows = std::move(a.rows);
    audio_ms += ms_since(t0);
    ++n_audio;
  } else {
    const vision::RgbImage img = vision::decode_image(std::span(p, bytes.size()), item.path);
    const vision::PrepOptions po{llama_preproc_ ? vision::ResizeMode::kLlamaCpp : vision::ResizeMode::kHf};
    vision::ImageEmbedding im = qwen_ ? qwen_->encode(img, po) : gemma_->encode(img);
    e.nx = im.nx;
    e.ny = im.ny;
    e.rows = std::move(im.rows);
    image_ms += ms_since(t0);
    ++n_images;
  }
  ++n_encoded;
  return cache_.emplace(std::move(ids), std::move(e)).first->second;
}

MediaPrompt MediaEncoder::prompt(const std::string& full, const std::vector<MediaItem>& media, bool add_bos) {
  for (const MediaItem& item : media) item.kind == 'a' ? load_audio_tower() : load_image_tower();
  const int64_t d = loaded_of(m_).model->info().n_embd;
  const bool bidir = gemma_ && vision::gemma4_image_non_causal(d);
  vision::MediaEntries ent;
  ent.mrope = qwen_ != nullptr;
  MediaPrompt p;
  p.cuts = {0};
  p.cut_non_causal = {false};
  // A media batch [a, z) of the entries: Gemma 4 decodes each apart (Qwen 3.5: one batch).
  auto cut = [&](size_t a, size_t z, bool non_causal) {
    if (!gemma_ && !atower_) return;
    p.cuts.insert(p.cuts.end(), {a, z});
    p.cut_non_causal.insert(p.cut_non_causal.end(), {non_causal, false});
  };
  size_t start = 0;
  for (size_t i = 0; i <= media.size(); ++i) {
    const size_t at = i < media.size() ? full.find(kMediaMarker, start) : std::string::npos;
    if (i < media.size() && at == std::string::npos)
      throw_error(ErrorCode::kInvalidArgument, "the rendered prompt has " + std::to_string(i) + " " + kMediaMarker + " markers for " +
                                                   std::to_string(media.size()) + " images and audio clips (the chat template dropped some)");
    std::vector<int32_t> seg = tokenize(m_, full.substr(start, at == std::string::npos ? std::string::npos : at - start), add_bos && i == 0);
    if (i == media.size()) {
      ent.add_text(seg);
      break;
    }
    const Encoded& e = encode(media[i]);
    const bool is_audio = media[i].kind == 'a';
    if (!is_audio) seg.push_back(vs_);  // audio: add_audio writes <|audio> and <audio|>
    ent.add_text(seg);
    const size_t dz = static_cast<size_t>(d);
    if (is_audio) {
      p.embd.resize((ent.tok.size() + 1) * dz, 0.0f);  // + <|audio>
      p.embd.insert(p.embd.end(), e.rows.begin(), e.rows.end());
      const std::vector<size_t> first = ent.add_audio(as_, e.chunks, e.ids, ae_);
      // each 30-second chunk is its own batch in llama.cpp's mtmd; audio rows decode causally
      for (size_t k = 0; k < first.size(); ++k) cut(first[k], first[k] + static_cast<size_t>(e.chunks[k]), false);
    } else {
      p.embd.resize(ent.tok.size() * dz, 0.0f);
      const size_t a = ent.tok.size();
      ent.add_image(e.nx, e.ny, e.ids);
      cut(a, ent.tok.size(), bidir);
      p.embd.insert(p.embd.end(), e.rows.begin(), e.rows.end());
      ent.add_text(std::span<const int32_t>(&ve_, 1));
    }
    p.text_tail = ent.tok.size() - 1;
    start = at + std::string(kMediaMarker).size();
  }
  p.tok = std::move(ent.tok);
  p.pos3 = std::move(ent.pos3);
  p.embd.resize(p.tok.size() * static_cast<size_t>(d), 0.0f);
  p.cuts.push_back(p.tok.size());
  return p;
}

void prefill_media(Session& s, const MediaPrompt& p, size_t from, size_t to) {
  const size_t d = p.tok.empty() ? 0 : p.embd.size() / p.tok.size();
  for (size_t c = 0; c + 1 < p.cuts.size(); ++c) {
    const size_t a = std::max(p.cuts[c], from), z = std::min(p.cuts[c + 1], to);
    if (z <= a) continue;
    // An image seen whole (non-causal) goes in one pass; a prefix kept from an earlier turn ends
    // at a text entry, never inside one.
    const EntryRows rows{p.embd.data() + a * d, p.pos3.data() + 3 * a, p.cut_non_causal[c] && a == p.cuts[c]};
    s.prefill(std::span<const int32_t>(p.tok.data() + a, z - a), GenerateOptions{}, rows);
  }
}

GenerateResult generate_media(Session& s, oxi_model* m, const MediaPrompt& p, size_t from,
                              const oxi_generate_params& gp, oxi_token_callback on_token, void* user) {
  const LoadedModel& lm = loaded_of(m);
  // Everything up to the last text run (the generate prompt: never empty, it holds at least the
  // token that closes the last media rows).
  const size_t tail = std::max(from, std::min(p.text_tail, p.tok.size() - 1));
  const auto t0 = std::chrono::steady_clock::now();
  prefill_media(s, p, from, tail);
  const double prefill_s = ms_since(t0) / 1000.0;
  const size_t a = std::max(from, tail);
  const EntryRows rows{p.embd.data() + a * (p.embd.size() / p.tok.size()), p.pos3.data() + 3 * a, false};
  // oxi_generate's options, constraint and token events on this session (api_internal.h).
  GenerateResult r = generate_c(s, lm, std::span<const int32_t>(p.tok.data() + a, p.tok.size() - a), gp, on_token, user, rows);
  r.n_prompt += static_cast<int32_t>(tail - from);  // the whole prompt, as oxi_generate counts it
  r.prompt_seconds += prefill_s;
  return r;
}

}  // namespace oxi::cli
