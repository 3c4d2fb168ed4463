// `oxinfer run --image FILE` (see run_media.h). The prompt is rendered with the chat template with
// one `<__media__>` marker per image (prepended when the prompt has none, as llama-mtmd-cli does),
// split at the markers and tokenized piece by piece with special-token text parsed (so the same
// command line gives the same tokens as llama-mtmd-cli). Each image becomes, for Qwen 3.5,
// `<|vision_start|>` + its embedding rows + `<|vision_end|>` at the mRoPE positions of
// vision::MediaEntries (vision/media_prompt.h, shared with the server); for Gemma 4, `<|image>` +
// its rows + `<image|>` at plain positions (the rows as the tower gives them: not scaled by √d).
#include "run_media.h"

#include <algorithm>
#include <chrono>
#include <cstdio>

#include <nlohmann/json.hpp>

#include "api/api_internal.h"
#include "audio/decode.h"
#include "audio/gemma4a.h"
#include "core/error.h"
#include "loader/loaded_model.h"
#include "sampling/sampler.h"
#include "vision/media_prompt.h"

namespace oxi::cli {

namespace {

const char* kMarker = "<__media__>";

std::vector<int32_t> tokenize(oxi_model* m, const std::string& s) {
  size_t n = 0;
  if (oxi_tokenize(m, s.data(), s.size(), 0, 1, nullptr, 0, &n) != OXI_OK)
    throw_error(ErrorCode::kInternal, "tokenize: " + std::string(oxi_last_error()));
  std::vector<int32_t> ids(n);
  if (oxi_tokenize(m, s.data(), s.size(), 0, 1, ids.data(), ids.size(), &n) != OXI_OK)
    throw_error(ErrorCode::kInternal, "tokenize: " + std::string(oxi_last_error()));
  ids.resize(n);
  return ids;
}

std::string render(oxi_model* m, const MediaRun& r, const std::string& content) {
  nlohmann::ordered_json msgs = nlohmann::ordered_json::array();
  if (!r.system.empty()) msgs.push_back({{"role", "system"}, {"content", r.system}});
  msgs.push_back({{"role", "user"}, {"content", content}});
  nlohmann::ordered_json opts = {{"add_generation_prompt", true}};
  // As llama-mtmd-cli --jinja renders (its enable_thinking is true unless reasoning is off): Gemma 4's
  // template opens a system turn with <|think|> for it; Qwen 3.5's output is the same either way.
  opts["enable_thinking"] = !r.no_think;
  const std::string mj = msgs.dump(), oj = opts.dump();
  size_t n = 0;
  if (oxi_chat_render(m, mj.c_str(), oj.c_str(), nullptr, 0, &n) != OXI_OK)
    throw_error(ErrorCode::kInvalidArgument, oxi_last_error());
  std::string s(n, '\0');
  if (oxi_chat_render(m, mj.c_str(), oj.c_str(), s.data(), s.size() + 1, &n) != OXI_OK)
    throw_error(ErrorCode::kInvalidArgument, oxi_last_error());
  s.resize(n);
  return s;
}

int32_t special_id(oxi_model* m, const char* text) {
  const std::vector<int32_t> ids = tokenize(m, text);
  if (ids.size() != 1)
    throw_error(ErrorCode::kUnsupported, std::string("the model's vocabulary has no ") + text + " token (not a vision model)");
  return ids[0];
}

}  // namespace

void run_with_images(oxi_model* m, const MediaRun& r) {
  const LoadedModel& lm = loaded_of(m);
  const Model& model = *lm.model;
  const std::string fam = model_family(model.info().arch);
  // The tower: the mmproj file, else the HF checkpoint's own read in place. Qwen 3.5: rows between
  // <|vision_start|> / <|vision_end|> at mRoPE positions; Gemma 4: between <|image> / <image|> at
  // plain positions (llama.cpp's mtmd uses the same strings).
  const std::string order = !r.order.empty() ? r.order : std::string(r.images.size(), 'i') + std::string(r.audio.size(), 'a');
  if (order.size() != r.images.size() + r.audio.size()) throw_error(ErrorCode::kInternal, "media order");
  std::unique_ptr<vision::Qwen3VLTower> qwen;
  std::unique_ptr<vision::Gemma4VTower> gemma;
  std::unique_ptr<audio::Gemma4ATower> atower;
  if (!r.images.empty()) {
    if (fam == "qwen35")
      qwen = vision::load_vision_tower(model.info(), lm.files, r.mmproj);
    else if (fam == "gemma4")
      gemma = vision::load_gemma4_vision_tower(model.info(), lm.files, r.mmproj);
    else
      throw_error(ErrorCode::kUnsupported, "images: the model (" + model.info().arch +
                                               ") has no vision support in oxinfer yet (Qwen 3.5 and Gemma 4 have)");
    if (!qwen && !gemma)
      throw_error(ErrorCode::kInvalidArgument,
                  "--image needs --mmproj FILE (the model's vision tower); this model has none, a text-only model cannot take images");
  }
  if (!r.audio.empty()) {
    if (fam != "gemma4")
      throw_error(ErrorCode::kUnsupported, "audio: the model (" + model.info().arch + ") has no audio support in oxinfer (Gemma 4 E2B/E4B have)");
    atower = audio::load_gemma4_audio_tower(model.info(), lm.files, r.mmproj);
    if (!atower)
      throw_error(ErrorCode::kInvalidArgument,
                  "--audio needs --mmproj FILE (the model's audio tower); this model has none, it cannot take audio");
  }
  const int32_t vs = r.images.empty() ? -1 : special_id(m, qwen ? "<|vision_start|>" : "<|image>");
  const int32_t ve = r.images.empty() ? -1 : special_id(m, qwen ? "<|vision_end|>" : "<image|>");
  // llama.cpp's mtmd wraps Gemma 4 audio rows in <|audio> … <audio|> (all 30-second chunks of one clip).
  const int32_t as = r.audio.empty() ? -1 : special_id(m, "<|audio>"), ae = r.audio.empty() ? -1 : special_id(m, "<audio|>");
  const size_t n_media = order.size();

  // The prompt text with its markers.
  std::string content = r.text;
  size_t n_markers = 0;
  for (size_t p = content.find(kMarker); p != std::string::npos; p = content.find(kMarker, p + 1)) ++n_markers;
  if (n_markers == 0) {
    for (size_t i = 0; i < n_media; ++i) content = kMarker + content;
    n_markers = n_media;
  }
  if (n_markers != n_media)
    throw_error(ErrorCode::kInvalidArgument, "the prompt has " + std::to_string(n_markers) + " " + kMarker +
                                                 " markers for " + std::to_string(n_media) + " images and audio clips");
  const std::string full = r.chat ? render(m, r, content) : content;

  // Entries: tokens, image rows (token −1), positions.
  const vision::PrepOptions po{r.llama_preproc ? vision::ResizeMode::kLlamaCpp : vision::ResizeMode::kHf};
  const int64_t d = model.info().n_embd;
  vision::MediaEntries ent;
  ent.mrope = qwen != nullptr;
  std::vector<size_t> image_at;  // the first row of each media batch (an image, an audio chunk) in ent
  std::vector<bool> batch_is_audio;
  std::vector<float> embd;
  const int32_t image_row[1] = {-1};
  double encode_ms = 0, audio_ms = 0;
  size_t start = 0, next_image = 0, next_audio = 0;
  for (size_t i = 0; i <= n_media; ++i) {
    const size_t at = i < n_media ? full.find(kMarker, start) : std::string::npos;
    std::vector<int32_t> seg = tokenize(m, full.substr(start, at == std::string::npos ? std::string::npos : at - start));
    if (i == n_media) {
      ent.add_text(seg);
      break;
    }
    const bool is_audio = order[i] == 'a';
    if (!is_audio) seg.push_back(vs);  // audio: add_audio writes <|audio>
    ent.add_text(seg);
    const auto t0 = std::chrono::steady_clock::now();
    if (is_audio) {
      const std::vector<float> samples = audio::load_audio(r.audio[next_audio++], 16000);
      const audio::AudioEmbedding e = atower->encode(samples);
      audio_ms += std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
      embd.resize((ent.tok.size() + 1) * static_cast<size_t>(d), 0.0f);  // + <|audio>
      embd.insert(embd.end(), e.rows.begin(), e.rows.end());
      for (size_t f : ent.add_audio(as, e.chunk_tokens, image_row, ae)) {  // each 30-second chunk is its own batch in llama.cpp's mtmd
        image_at.push_back(f);
        batch_is_audio.push_back(true);
      }
    } else {
      const vision::RgbImage img = vision::load_image(r.images[next_image++]);
      const vision::ImageEmbedding e = qwen ? qwen->encode(img, po) : gemma->encode(img);
      encode_ms += std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
      embd.resize(ent.tok.size() * static_cast<size_t>(d), 0.0f);
      image_at.push_back(ent.tok.size());
      batch_is_audio.push_back(false);
      ent.add_image(e.nx, e.ny, image_row);
      embd.insert(embd.end(), e.rows.begin(), e.rows.end());
      ent.add_text(std::span<const int32_t>(&ve, 1));
    }
    start = at + std::string(kMarker).size();
  }
  const std::vector<int32_t>& tok = ent.tok;
  embd.resize(tok.size() * static_cast<size_t>(d), 0.0f);
  int64_t p = ent.next;

  const int64_t n_ctx = r.n_ctx > 0 ? r.n_ctx : std::max<int64_t>(model.info().n_ctx_train, 4096);
  const int64_t n_gen_max = r.n_predict < 0 ? n_ctx - static_cast<int64_t>(tok.size()) : r.n_predict;
  if (static_cast<int64_t>(tok.size()) > n_ctx)
    throw_error(ErrorCode::kInvalidArgument, "the prompt has " + std::to_string(tok.size()) +
                                                 " entries (text, image and audio rows) but the context holds only " +
                                                 std::to_string(n_ctx) + "; use a larger context (-c)");
  auto st = model.new_state(n_ctx);
  std::vector<float> logits(static_cast<size_t>(model.info().n_vocab));
  SamplingParams sp = from_c(r.sampling);
  sp.validate();
  Sampler sampler(sp, lm.text->vocab_size());
  for (int32_t id : tok)
    if (id >= 0) sampler.accept(id);

  const auto t_pp = std::chrono::steady_clock::now();
  SequenceState* states[1] = {st.get()};
  BatchOutput out;
  out.logits = logits.data();
  // Prefill. Qwen 3.5: one batch. Gemma 4: chunk by chunk as llama.cpp's mtmd decodes them (text
  // up to and with <|image>, the image rows, <image|> and the text after, ...), each image as one
  // batch that is non-causal where mtmd makes it so (vision::gemma4_image_non_causal); only the
  // last entry gives logits.
  // Audio rows decode causally (mtmd_decode_use_non_causal is false for gemma4a), one batch per
  // 30-second chunk.
  std::vector<size_t> cuts{0};
  std::vector<bool> cut_bidir{false};
  const bool bidir = gemma && vision::gemma4_image_non_causal(d);
  if (gemma || atower)
    for (size_t i = 0; i < image_at.size(); ++i) {
      size_t e = image_at[i];
      const size_t lim = i + 1 < image_at.size() ? image_at[i + 1] : tok.size();
      while (e < lim && tok[e] < 0) ++e;
      cuts.insert(cuts.end(), {image_at[i], e});
      cut_bidir.insert(cut_bidir.end(), {bidir && !batch_is_audio[i], false});
    }
  cuts.push_back(tok.size());
  std::vector<uint8_t> no_out(tok.size(), 0);
  for (size_t c = 0; c + 1 < cuts.size(); ++c) {
    const size_t a = cuts[c], z = cuts[c + 1];
    if (z == a) continue;
    Batch b;
    b.n = static_cast<int64_t>(z - a);
    b.token = tok.data() + a;
    b.embd = embd.data() + a * static_cast<size_t>(d);
    b.pos = ent.pos.data() + a;
    b.pos3 = ent.pos3.data() + 3 * a;
    if (z != tok.size()) b.output = no_out.data();
    b.non_causal = cut_bidir[c];
    model.forward_batch(states, b, out);
  }
  const double pp_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t_pp).count();

  auto stream = lm.text->new_stream();
  const auto t_tg = std::chrono::steady_clock::now();
  int64_t n_gen = 0;
  std::string text;
  for (; n_gen < n_gen_max && st->n_past() < n_ctx; ++n_gen) {
    const int32_t id = sampler.sample(logits);
    sampler.accept(id);
    if (!r.ignore_eos && lm.text->is_eog(id)) {
      ++n_gen;
      break;
    }
    const std::string piece = stream->push(id);
    std::fwrite(piece.data(), 1, piece.size(), stdout);
    std::fflush(stdout);
    text += piece;
    if (n_gen + 1 >= n_gen_max || st->n_past() >= n_ctx) {
      ++n_gen;
      break;
    }
    const int32_t pp = static_cast<int32_t>(p++);
    const int32_t p3[3] = {pp, pp, pp};
    Batch one;
    one.n = 1;
    one.token = &id;
    one.pos = &pp;
    one.pos3 = p3;
    model.forward_batch(states, one, out);
  }
  const std::string tail = stream->flush();
  std::fwrite(tail.data(), 1, tail.size(), stdout);
  text += tail;
  if (!text.empty() && text.back() != '\n') std::fputc('\n', stdout);
  std::fflush(stdout);
  const double tg_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t_tg).count();
  if (!r.audio.empty()) std::fprintf(stderr, "audio encode: %.1f ms (%zu clips, decode + log-mel + tower)\n", audio_ms, r.audio.size());
  std::fprintf(stderr, "image encode: %.1f ms (%zu images) | prompt: %zu entries, %.2f s | generated: %lld tokens, %.2f tok/s\n",
               encode_ms, r.images.size(), tok.size(), pp_s, static_cast<long long>(n_gen),
               tg_s > 0 ? static_cast<double>(n_gen) / tg_s : 0.0);
}

}  // namespace oxi::cli
