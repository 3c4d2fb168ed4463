// The inference side of the server: one model, N slots (a Session each), a prompt cache of state
// snapshots shared by the slots, and continuous batching: every slot's request runs its own
// generation loop on its own thread, and their forward steps meet in one Batcher, so the active
// slots decode together in one pass over the weights and a new prompt is pre-filled in chunks
// mixed with the ongoing decodes (runtime/batcher.h; a sequence computes what it would alone).
// Images (a vision tower, loaded once): the template places its image token where a message has an
// image part (Qwen 3.5: `<|image_pad|>` between the vision start/end tokens it writes; Gemma 4:
// `<|image|>`, which becomes `<|image>` rows `<image|>` as llama.cpp's mtmd writes them),
// place_images swaps it for the image's rows (ids keyed by content hash), and generate encodes only
// the images the prompt cache does not already hold. Audio (Gemma 4's audio tower) goes the same
// way: an input_audio part renders as `<|audio|>`, which becomes `<|audio>` rows `<audio|>` (one
// piece per 30-second chunk, causal), keyed and cached by content hash like an image.
#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <filesystem>
#include <limits>
#include <list>
#include <mutex>
#include <thread>

#include "audio/decode.h"
#include "audio/gemma4a.h"
#include "chat/jinja.h"
#include "core/error.h"
#include "format/hf.h"
#include "loader/loaded_model.h"
#include "models/model.h"
#include "runtime/batcher.h"
#include "runtime/session.h"
#include "server/engine.h"
#include "sampling/json_constraint.h"
#include "server/media.h"
#include "server/server.h"
#include "tokenizer/tokenizer.h"
#include "vision/media_prompt.h"

namespace oxi::server {

using nlohmann::json;
using nlohmann::ordered_json;

namespace {

using Clock = std::chrono::steady_clock;

struct Slot {
  std::unique_ptr<Session> session;
  bool busy = false;
  uint64_t last_use = 0;
  // The running task, else the last one (GET /slots); under mu_. id_task: its FIFO ticket.
  int64_t id_task = -1;
  int n_prompt = 0, n_cached = 0, max_tokens = -1;
  // Tokens generated so far: an atomic, so a generated token takes no lock (mu_ is the queue's).
  std::unique_ptr<std::atomic<int>> n_decoded = std::make_unique<std::atomic<int>>(0);
};

struct CacheEntry {
  std::shared_ptr<const Session::Snapshot> snap;  // shared: a slot may restore it while another evicts it
  size_t bytes = 0;
  uint64_t last_use = 0;
};

bool is_prefix(const std::vector<int32_t>& a, const std::vector<int32_t>& of) {
  return a.size() <= of.size() && std::equal(a.begin(), a.end(), of.begin());
}

std::string flatten_content(const json& content) {
  if (!content.is_array()) return content.is_string() ? content.get<std::string>() : std::string();
  std::string out;
  for (const auto& p : content) {
    if (p.value("type", "") == "text") out += p.value("text", "");
  }
  return out;
}

// A content array with media as the chat templates take it: image_url parts become
// {"type": "image"} (Qwen 3.5's template renders <|vision_start|><|image_pad|><|vision_end|>),
// input_audio parts {"type": "audio"} (Gemma 4's renders <|audio|>), text parts stay. A content
// without media is flattened to its text, as before.
json template_content(const json& content) {
  bool media = false;
  for (const auto& p : content) media = media || p.value("type", "") == "image_url" || p.value("type", "") == "input_audio";
  if (!media) return flatten_content(content);
  json parts = json::array();
  for (const auto& p : content) {
    const std::string t = p.value("type", "");
    if (t == "image_url") parts.push_back({{"type", "image"}});
    else if (t == "input_audio") parts.push_back({{"type", "audio"}});
    else if (t == "text") parts.push_back({{"type", "text"}, {"text", p.value("text", "")}});
  }
  return parts;
}

}  // namespace

void require_fits_context(size_t n, bool with_images, int64_t n_ctx) {
  if (static_cast<int64_t>(n) < n_ctx) return;
  throw RequestError(400, "messages", "the prompt has " + std::to_string(n) +
                                          (with_images ? " entries (text tokens and image or audio rows)" : " tokens") +
                                          "; the context holds " + std::to_string(n_ctx));
}

namespace {

class ServerEngine final : public Engine {
 public:
  explicit ServerEngine(const ServerOptions& opt) : opt_(opt) {
    loader_ = std::thread([this] { load(); });
  }
  ~ServerEngine() override {
    if (loader_.joinable()) loader_.join();
  }

  bool ready() const override { return ready_.load(); }
  std::string model_id() const override { return model_id_; }
  int n_ctx() const override { return opt_.n_ctx; }
  int n_embd() const override { return static_cast<int>(model_->info().n_embd); }
  Pooling pooling() const override { return pooling_; }
  ChatFormat chat_format() const override { return format_; }

  std::vector<int32_t> tokenize(const std::string& text, bool add_special, bool parse_special) override {
    return tok_->encode(text, add_special, parse_special);
  }
  std::string detokenize(const std::vector<int32_t>& ids) override {
    for (int32_t id : ids) {
      if (id < 0 || id >= tok_->n_vocab()) {
        throw RequestError(400, "tokens", "token id " + std::to_string(id) + " is out of range");
      }
    }
    return tok_->decode(ids);
  }
  std::string token_piece(int32_t id) override {
    if (id < 0 || id >= tok_->n_vocab()) return "";
    return tok_->token_to_piece(id);
  }

  std::vector<int32_t> tokenize_prompt(const std::string& rendered) override {
    if (opt_.special_in_content) return tok_->encode(rendered, false, true);
    return tok_->encode_marked(rendered, false);
  }

  std::string render_chat(const ChatRequest& req, std::string* turn_prefix) override {
    // Before the template sees an audio part it may not know (only Gemma 4's renders one).
    for (const ImageRef& ref : media_refs(req.messages))
      if (ref.audio) require_audio(ref);
    ordered_json msgs = ordered_json::array();
    for (const auto& m : req.messages) {
      ordered_json om = ordered_json::parse(m.dump());
      if (om.contains("content") && om["content"].is_array()) om["content"] = ordered_json::parse(template_content(m["content"]).dump());
      if (om.contains("content") && om["content"].is_null() && om.value("role", "") != "assistant") om["content"] = "";
      msgs.push_back(std::move(om));
    }
    msgs = normalize_tool_call_arguments(msgs);
    ChatRenderOptions ro;
    ro.add_generation_prompt = true;
    if (req.enable_thinking) ro.enable_thinking = *req.enable_thinking ? 1 : 0;
    if (!req.tools.empty() && req.tool_choice != "none") ro.tools = ordered_json::parse(req.tools.dump());
    if (!opt_.special_in_content) {  // user text stays text (tokenize_prompt)
      auto mark = [this](std::string_view s) { return tok_->mark_user_text(s); };
      msgs = map_strings(msgs, mark);
      if (!ro.tools.is_null()) ro.tools = map_strings(ro.tools, mark);
    }
    ro.bos_token = loaded_->bos_text;
    ro.eos_token = loaded_->eos_text;
    std::string full = oxi::render_chat(*tmpl_, msgs, ro);
    if (!req.assistant_prefill.empty()) {
      full += opt_.special_in_content ? req.assistant_prefill : tok_->mark_user_text(req.assistant_prefill);
    }
    // The turn boundary (the prompt without the generation prompt) is where the prompt cache
    // checkpoints: the next turn's prompt shares exactly that prefix.
    if (turn_prefix) {
      turn_prefix->clear();
      ro.add_generation_prompt = false;
      try {
        std::string base = oxi::render_chat(*tmpl_, msgs, ro);
        if (full.compare(0, base.size(), base) == 0) *turn_prefix = std::move(base);
      } catch (const std::exception&) {
        // e.g. a template that insists on a generation prompt: no checkpoint then
      }
    }
    return full;
  }

  std::shared_ptr<const PromptMedia> place_images(const ChatRequest& req, std::vector<int32_t>& ids,
                                                  std::vector<int32_t>* prefix) override {
    const std::vector<ImageRef> refs = media_refs(req.messages);
    if (refs.empty()) return nullptr;
    auto media = std::make_shared<PromptMedia>();
    size_t decoded = 0;
    int64_t samples = 0;
    for (const ImageRef& ref : refs) {
      if (ref.audio) {
        media->images.push_back(place_audio(ref, samples));
        continue;
      }
      if (!vision_) {
        throw RequestError(400, ref.param, "this model takes no images: the server has no vision tower for it "
                                           "(start it with --mmproj FILE, or serve an HF checkpoint that has one)");
      }
      const std::string bytes = image_url_bytes(ref, opt_.media_dir);
      PromptImage im;
      try {
        im.pixels = vision::decode_image(std::span(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size()),
                                         "the image", kMaxServerImagePixels);
        const vision::Size g = vision_->grid({im.pixels.width, im.pixels.height});
        im.nx = g.width;
        im.ny = g.height;
      } catch (const Error& e) {
        throw RequestError(400, ref.param, e.what());
      }
      // Rows that see each other go in one pass (llama.cpp refuses more than a ubatch the same way).
      if (vision_->non_causal && im.nx * im.ny > Model::kMaxUbatch) {
        throw RequestError(400, ref.param, "the image makes " + std::to_string(im.nx * im.ny) + " rows; this model attends to an image's rows "
                                           "together, in one pass of at most " + std::to_string(Model::kMaxUbatch) + " (send a smaller image)");
      }
      decoded += im.pixels.rgb.size();
      if (decoded > kMaxRequestImageBytes) {
        throw RequestError(400, ref.param, "the request's images decode to more than " +
                                               std::to_string(kMaxRequestImageBytes >> 20) + " MiB");
      }
      im.ids = image_row_ids(bytes);
      media->images.push_back(std::move(im));
    }
    // Each placeholder → the next item's rows (Gemma 4: between <|image> and <image|>, audio
    // between <|audio> and <audio|>), at Qwen3-VL's positions or plain ones (vision::MediaEntries).
    media->non_causal = vision_ && vision_->non_causal;
    const bool gemma_images = vision_ && vision_->gemma;
    auto expand = [&](std::vector<int32_t>& v, bool whole) {
      vision::MediaEntries ent;
      ent.mrope = vision_ && vision_->mrope;
      size_t k = 0, start = 0;
      for (size_t i = 0; i < v.size(); ++i) {
        const bool img = image_pad_ >= 0 && v[i] == image_pad_, aud = audio_pad_ >= 0 && v[i] == audio_pad_;
        if (!img && !aud) continue;
        if (k == media->images.size()) break;
        PromptImage& item = media->images[k];
        if (item.audio != aud) {
          throw RequestError(400, "messages", "the chat template placed an " + std::string(aud ? "audio" : "image") +
                                                  " where the message has an " + (aud ? "image" : "audio") + " part");
        }
        ent.add_text(std::span<const int32_t>(v.data() + start, i - start));
        if (aud) {
          const std::vector<size_t> at = ent.add_audio(audio_begin_, item.chunks, item.ids, audio_end_);
          if (whole) item.first = at[0];
        } else {
          if (gemma_images) ent.add_text(std::span<const int32_t>(&vision_->begin, 1));
          if (whole) item.first = ent.tok.size();
          ent.add_image(item.nx, item.ny, item.ids);
          if (gemma_images) ent.add_text(std::span<const int32_t>(&vision_->end, 1));
        }
        ++k;
        start = i + 1;
      }
      if (whole && k != media->images.size()) {
        throw RequestError(400, "messages", "the chat template placed " + std::to_string(k) + " of the " +
                                                std::to_string(media->images.size()) + " image and audio parts");
      }
      ent.add_text(std::span<const int32_t>(v.data() + start, v.size() - start));
      v = std::move(ent.tok);
      return std::move(ent.pos3);
    };
    media->pos3 = expand(ids, true);
    if (prefix) expand(*prefix, false);
    return media;
  }

  GenerationResult generate(const std::vector<int32_t>& prompt, size_t checkpoint_at,
                            const GenerationRequest& req, std::shared_ptr<TextConstraint> constraint,
                            const TokenSink& sink, const PromptMedia* media) override {
    if (prompt.empty()) throw RequestError(400, "messages", "the prompt is empty");
    require_fits_context(prompt.size(), media != nullptr, opt_.n_ctx);
    if (media && media->pos3.size() != 3 * prompt.size()) throw RequestError(500, "", "image positions do not match the prompt", "server_error");
    for (int32_t id : prompt) {
      if ((id < 0 && !media) || id >= tok_->n_vocab()) {
        throw RequestError(400, "prompt", "token id " + std::to_string(id) + " is out of range");
      }
    }
    GenerateOptions go;
    go.should_stop = [this] { return cancelled_.load(); };
    go.sampling = sampling_for(req);
    go.max_tokens = req.max_tokens;
    go.n_top_logprobs = req.logprobs ? req.top_logprobs : 0;
    go.logprobs = req.logprobs;
    go.spec.mode = req.spec_mode ? request_spec_mode(*req.spec_mode) : static_cast<SpecMode>(opt_.spec_mode);
    go.spec.draft_max = std::min(opt_.draft_max, req.draft_max.value_or(opt_.draft_max));
    go.spec.draft_min = std::min(go.spec.draft_max, req.draft_min.value_or(opt_.draft_min));
    for (const auto& [id, bias] : req.logit_bias) {
      if (id >= tok_->n_vocab()) {
        throw RequestError(400, "logit_bias", "logit_bias: token id " + std::to_string(id) + " is out of range");
      }
    }
    std::vector<std::pair<int32_t, float>> biases = req.logit_bias;
    if (req.ignore_eos) {
      for (int32_t id : tok_->eog_ids()) biases.emplace_back(id, -std::numeric_limits<float>::infinity());
    }
    if (constraint || !biases.empty()) {
      // The bias first (llama.cpp's chain starts with it), so the constraint ranks biased logits.
      const TextConstraint* c = constraint.get();
      const auto* bias = &biases;
      go.logit_filter = [this, c, bias](std::span<float> logits) {
        for (const auto& [id, b] : *bias) logits[static_cast<size_t>(id)] += b;
        if (c) mask_rejected_tokens(*c, *loaded_->text, logits);
      };
    }

    const size_t boundary = checkpoint_at < prompt.size() ? checkpoint_at : 0;

    Slot& slot = acquire(prompt, req.max_tokens);
    struct Release {
      ServerEngine* e;
      Slot* s;
      ~Release() { e->release(*s); }
    } release{this, &slot};

    GenerationResult out;
    out.n_prompt = static_cast<int>(prompt.size());
    // Prompt chunks of 256 tokens: a stream decoding beside a new prompt waits at most one chunk.
    go.prefill_chunk = kPrefillChunk;
    Batcher::Participant participant(batcher_.get());
    {
      Session& ses = *slot.session;
      size_t cached = reuse(ses, prompt);
      // A reuse point inside an image whose rows see each other cannot stand: start over. (Pieces
      // end at image edges below, so a stored snapshot never falls there.)
      if (media && media->non_causal) {
        for (const PromptImage& im : media->images) {
          if (im.audio) continue;  // causal rows: any reuse point stands
          if (cached <= im.first || cached >= im.first + static_cast<size_t>(im.nx * im.ny)) continue;
          ses.reset();
          cached = 0;
          break;
        }
      }
      out.n_cached = static_cast<int>(cached);
      {
        std::lock_guard<std::mutex> lk(mu_);
        slot.n_cached = out.n_cached;
      }
      // Image rows of the prompt past the cached prefix: [prompt.size() − cached, n_embd].
      const std::vector<float> embd = media ? image_rows(*media, cached, prompt.size(), out) : std::vector<float>();
      const size_t d = static_cast<size_t>(model_->info().n_embd);
      auto rows_at = [&](size_t p) {
        return media ? EntryRows{embd.data() + (p - cached) * d, media->pos3.data() + 3 * p} : EntryRows{};
      };
      // Gemma 4's images go in llama.cpp mtmd's chunks (the text before an image, its rows, ...):
      // the pieces end at image edges, and an image whose rows see each other is one piece. Audio
      // likewise, each 30-second chunk its own piece (causal).
      std::vector<size_t> cuts;
      std::vector<std::pair<size_t, size_t>> bidir;  // [first, end) of each image whose rows see each other
      if (media && gemma_family_) {
        for (const PromptImage& im : media->images) {
          if (im.audio) {
            size_t at = im.first;
            for (int64_t n : im.chunks) {
              cuts.push_back(at);
              at += static_cast<size_t>(n);
            }
            cuts.push_back(at);
          } else {
            cuts.insert(cuts.end(), {im.first, im.first + static_cast<size_t>(im.nx * im.ny)});
          }
        }
      }
      if (media && media->non_causal) {
        for (const PromptImage& im : media->images)
          if (!im.audio) bidir.emplace_back(im.first, im.first + static_cast<size_t>(im.nx * im.ny));
      }
      const auto in_bidir = [&](size_t p) {
        for (const auto& b : bidir)
          if (p >= b.first && p < b.second) return true;
        return false;
      };
      const auto next_cut = [&](size_t p) {
        for (size_t c : cuts)
          if (c > p) return c;
        return prompt.size();
      };
      const auto t0 = Clock::now();
      // Pre-fill up to the turn boundary (and past the last image) in pieces, checkpointing up to
      // the boundary.
      size_t pos = cached;
      const size_t stop_at = std::max({boundary, cuts.empty() ? size_t{0} : cuts.back(), pos});
      while (pos < stop_at) {
        const bool image = in_bidir(pos);
        const size_t n = image ? next_cut(pos) - pos : std::min({kCheckpointEvery, stop_at - pos, next_cut(pos) - pos});
        EntryRows rows = rows_at(pos);
        rows.non_causal = image;
        ses.prefill(std::span<const int32_t>(prompt.data() + pos, n), go, rows);
        pos += n;
        if (pos <= boundary) store(ses.snapshot());
      }
      const double pre_ms = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
      auto r = ses.generate(std::span<const int32_t>(prompt.data() + pos, prompt.size() - pos), go,
                            [&](const TokenEvent& ev) {
                              if (ev.eog) return false;
                              slot.n_decoded->fetch_add(1, std::memory_order_relaxed);
                              if (constraint) constraint->advance_token(ev.id, tok_->token_to_piece(ev.id), !tok_->is_control(ev.id));
                              TokenOut t;
                              t.id = ev.id;
                              t.text = std::string(ev.text);
                              t.logprob = ev.logprob;
                              for (const auto& tl : ev.top) t.top.emplace_back(tl.id, tl.logprob);
                              const bool go_on = sink(t);
                              if (constraint && constraint->finished()) return false;
                              return go_on;
                            },
                            rows_at(pos));
      out.n_generated = r.n_generated - (r.stop == StopReason::kEndOfGeneration ? 1 : 0);
      out.prompt_ms = pre_ms + r.prompt_seconds * 1000.0;
      out.gen_ms = r.gen_seconds * 1000.0;
      out.n_drafted = r.n_drafted;
      out.n_accepted = r.n_accepted;
      out.finish_reason = (r.stop == StopReason::kMaxTokens || r.stop == StopReason::kContextFull) ? "length" : "stop";
      std::lock_guard<std::mutex> lk(mu_);
      slot.last_use = ++clock_;
    }
    n_requests_++;
    return out;
  }

  void embed(const std::vector<std::vector<int32_t>>& inputs, const EmbedSink& rows,
             const std::function<bool()>& keep_going) override {
    size_t total = 0;
    for (size_t i = 0; i < inputs.size(); ++i) {
      const std::string param = inputs.size() > 1 ? "input[" + std::to_string(i) + "]" : "input";
      if (inputs[i].empty()) throw RequestError(400, param, "Input content cannot be empty");
      // The whole input is one sequence: it must fit the context a slot has (-c).
      if (inputs[i].size() > static_cast<size_t>(opt_.n_ctx)) {
        throw RequestError(400, param, "the input has " + std::to_string(inputs[i].size()) +
                                           " tokens; the context holds " + std::to_string(opt_.n_ctx));
      }
      for (int32_t id : inputs[i]) {
        if (id < 0 || id >= tok_->n_vocab()) {
          throw RequestError(400, param, "token id " + std::to_string(id) + " is out of range");
        }
      }
      total += inputs[i].size();
    }
    // A slot, for the FIFO order and the bound on concurrent work; its session is not used (an
    // empty prompt makes acquire take the least recently used free slot).
    Slot& slot = acquire({}, 0);
    struct Release {
      ServerEngine* e;
      Slot* s;
      ~Release() { e->release(*s); }
    } release{this, &slot};
    {
      std::lock_guard<std::mutex> lk(mu_);
      slot.n_prompt = static_cast<int>(std::min<size_t>(total, INT32_MAX));
    }
    Batcher::Participant participant(batcher_.get());
    // Passes of at most kEmbedPassTokens entries from at most kEmbedPassSeqs inputs, each input in
    // chunks of kPrefillChunk (as a prompt is pre-filled): a decode running beside waits at most
    // one such pass, and only the inputs of the current pass hold a state (recurrent layers'
    // states are large).
    struct Live {
      size_t input = 0, pos = 0;
      std::unique_ptr<SequenceState> state;
    };
    const size_t d = static_cast<size_t>(model_->info().n_embd);
    std::vector<Live> live;
    std::vector<Batcher::HiddenJob> jobs;
    std::vector<float> hidden;
    size_t next = 0;
    while (next < inputs.size() || !live.empty()) {
      if (cancelled_.load()) throw RequestError(503, "", "the server is shutting down", "unavailable_error");
      if (!keep_going()) throw RequestError(499, "", "the client closed the connection");
      while (live.size() < kEmbedPassSeqs && next < inputs.size()) {
        live.push_back(Live{next, 0, model_->new_state(static_cast<int64_t>(inputs[next].size()))});
        ++next;
      }
      jobs.clear();
      size_t budget = kEmbedPassTokens, used = 0;
      for (const Live& l : live) {
        const size_t n = std::min({static_cast<size_t>(kPrefillChunk), inputs[l.input].size() - l.pos, budget});
        if (n == 0) break;
        jobs.push_back({l.state.get(), std::span<const int32_t>(inputs[l.input].data() + l.pos, n), nullptr});
        budget -= n;
        used += n;
      }
      hidden.resize(used * d);
      for (size_t j = 0, at = 0; j < jobs.size(); at += jobs[j].tokens.size(), ++j) jobs[j].hidden = hidden.data() + at * d;
      batcher_->forward_hidden(jobs);
      for (size_t j = 0, at = 0; j < jobs.size(); at += jobs[j].tokens.size(), ++j) {
        Live& l = live[j];
        rows(l.input, hidden.data() + at * d, jobs[j].tokens.size());
        l.pos += jobs[j].tokens.size();
      }
      std::erase_if(live, [&](const Live& l) { return l.pos == inputs[l.input].size(); });
    }
  }

  void cancel_all() override {
    {
      std::lock_guard<std::mutex> lk(mu_);
      cancelled_.store(true);
    }
    slot_cv_.notify_all();
  }

  json stats() const override {
    std::lock_guard<std::mutex> lk(mu_);
    int busy = 0;
    for (const auto& s : slots_) busy += s.busy ? 1 : 0;
    const Batcher::Counts bc = batcher_ ? batcher_->counts() : Batcher::Counts{};
    return json{{"slots_total", static_cast<int>(slots_.size())}, {"slots_busy", busy},
                {"prompt_cache_entries", static_cast<int>(cache_.size())},
                {"prompt_cache_bytes", static_cast<double>(cache_bytes_)},
                {"batch_passes", static_cast<double>(bc.passes)},
                {"batch_rows", static_cast<double>(bc.rows)},
                // The MTP heads' feeds (one per drafting pass of a slot's head) and the head passes
                // that served them: feeds / passes = slots drafting together.
                {"batch_mtp_feeds", static_cast<double>(bc.mtp_feeds)},
                {"batch_mtp_passes", static_cast<double>(bc.mtp_passes)},
                // llama-server's name: requests holding a ticket, waiting for a slot.
                {"requests_deferred", static_cast<double>(next_ticket_ - serving_)}};
  }

  // llama-server's GET /slots entries, from what each slot records (docs/server.md "/slots").
  ordered_json slots() const override {
    std::lock_guard<std::mutex> lk(mu_);
    ordered_json out = ordered_json::array();
    for (size_t i = 0; i < slots_.size(); ++i) {
      const Slot& s = slots_[i];
      const int decoded = s.n_decoded->load(std::memory_order_relaxed);
      const int remain = s.max_tokens < 0 ? -1 : std::max(0, s.max_tokens - decoded);
      out.push_back({{"id", static_cast<int>(i)}, {"id_task", s.id_task}, {"n_ctx", opt_.n_ctx},
                     {"speculative", opt_.spec_mode != 0}, {"is_processing", s.busy},
                     {"n_prompt_tokens", s.n_prompt}, {"n_prompt_tokens_cache", s.n_cached},
                     {"next_token", {{"has_next_token", s.busy}, {"n_remain", remain}, {"n_decoded", decoded}}}});
    }
    return out;
  }

  json model_info() const override {
    const ModelInfo& mi = model_->info();
    std::error_code ec;
    namespace fs = std::filesystem;
    const fs::path path(opt_.model_path);
    uint64_t file_bytes = 0;
    if (fs::is_directory(path, ec)) {
      for (const auto& e : fs::directory_iterator(path, ec)) {
        if (e.is_regular_file(ec) && e.path().extension() == ".safetensors") file_bytes += e.file_size(ec);
      }
    } else {
      file_bytes = fs::file_size(path, ec);
    }
    int64_t modified = 0;
    const auto mt = fs::last_write_time(path, ec);
    if (!ec) {
      modified = std::chrono::duration_cast<std::chrono::seconds>(
                     std::chrono::file_clock::to_sys(mt).time_since_epoch())
                     .count();
    }
    return json{{"path", opt_.model_path}, {"arch", mi.arch}, {"name", mi.name},
                {"n_params", mi.n_params}, {"weight_bytes", mi.weight_bytes}, {"file_bytes", file_bytes},
                {"n_ctx_train", mi.n_ctx_train}, {"n_embd", mi.n_embd}, {"n_layer", mi.n_layer},
                {"n_vocab", mi.n_vocab}, {"quant", opt_.quant}, {"chat_template", loaded_->chat_template},
                {"format", fs::is_directory(path, ec) ? "safetensors" : "gguf"}, {"modified", modified},
                {"bos_token", loaded_->bos_text}, {"eos_token", loaded_->eos_text},
                {"n_slots", static_cast<int>(slots_.size())}, {"vision", vision_ != nullptr}, {"audio", audio_ != nullptr},
                {"defaults", {{"temperature", defaults_.temperature}, {"top_k", defaults_.top_k},
                              {"top_p", defaults_.top_p}, {"min_p", defaults_.min_p},
                              {"repeat_penalty", defaults_.repeat_penalty}, {"repeat_last_n", defaults_.penalty_last_n},
                              {"presence_penalty", defaults_.presence_penalty},
                              {"frequency_penalty", defaults_.frequency_penalty}}}};
  }

 private:
  static constexpr size_t kCheckpointEvery = 1024;
  static constexpr int32_t kPrefillChunk = 256;
  static constexpr size_t kEmbedPassTokens = 512;  // Model::kMaxUbatch: one internal pass
  static constexpr size_t kEmbedPassSeqs = 16;
  static constexpr size_t kEncodeCacheBytes = 128u << 20;

  // An input_audio part, decoded to 16 kHz samples and measured (rows per 30-second chunk) but not
  // encoded yet; `samples` counts the request's samples so far (kMaxRequestAudioSeconds in all).
  void require_audio(const ImageRef& ref) const {
    if (!audio_) {
      throw RequestError(400, ref.param, "this model takes no audio: the server has no audio tower for it (Gemma 4 E2B / E4B "
                                         "have one: start it with --mmproj FILE, or serve an HF checkpoint that has one)");
    }
  }

  PromptImage place_audio(const ImageRef& ref, int64_t& samples) {
    require_audio(ref);
    const std::string bytes = audio_part_bytes(ref);
    PromptImage a;
    a.audio = true;
    try {
      a.samples = audio::decode_audio(std::span(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size()), "the audio", 16000);
      a.chunks = audio::Gemma4ATower::chunk_rows(static_cast<int64_t>(a.samples.size()));
    } catch (const Error& e) {
      throw RequestError(400, ref.param, e.what());
    }
    samples += static_cast<int64_t>(a.samples.size());
    if (samples > kMaxRequestAudioSeconds * 16000) {
      throw RequestError(400, ref.param, "the request's audio lasts more than " + std::to_string(kMaxRequestAudioSeconds / 60) +
                                             " minutes (send shorter clips)");
    }
    for (int64_t n : a.chunks) a.nx += n;
    a.ny = 1;
    a.ids = image_row_ids(bytes);
    return a;
  }

  // The embedding rows of prompt entries [from, to) ([to − from, n_embd]; zero for text) for
  // each image with a row there (an image wholly inside the cached prefix costs nothing): from the
  // encode cache, else the tower. Counts the images and the encode time into `out`.
  std::vector<float> image_rows(const PromptMedia& media, size_t from, size_t to, GenerationResult& out) {
    const size_t d = static_cast<size_t>(model_->info().n_embd);
    std::vector<float> rows((to - from) * d, 0.0f);
    for (const PromptImage& im : media.images) (im.audio ? out.n_audio : out.n_images)++;
    for (const PromptImage& im : media.images) {
      const size_t n = static_cast<size_t>(im.nx * im.ny);
      if (im.first + n <= from) continue;
      std::shared_ptr<const std::vector<float>> enc = cached_encoding(im.ids);
      if (!enc) {
        const auto t0 = Clock::now();
        std::vector<float> e = im.audio ? audio_->encode(im.samples).rows : vision_->encode(im.pixels).rows;
        (im.audio ? out.audio_encode_ms : out.image_encode_ms) += std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
        (im.audio ? out.n_audio_encoded : out.n_images_encoded)++;
        enc = std::make_shared<const std::vector<float>>(std::move(e));
        keep_encoding(im.ids, enc);
      }
      if (enc->size() != n * d) throw RequestError(500, "", "media encoding changed its size", "server_error");
      for (size_t k = std::max(im.first, from) - im.first; k < n; ++k) {
        std::copy_n(enc->data() + k * d, d, rows.data() + (im.first + k - from) * d);
      }
    }
    if (out.n_images_encoded > 0) {
      std::fprintf(stderr, "oxinfer: image encode %.1f ms (%d of %d images; the rest cached)\n",
                   out.image_encode_ms, out.n_images_encoded, out.n_images);
    }
    if (out.n_audio_encoded > 0) {
      std::fprintf(stderr, "oxinfer: audio encode %.1f ms (%d of %d clips; the rest cached)\n",
                   out.audio_encode_ms, out.n_audio_encoded, out.n_audio);
    }
    return rows;
  }

  void load() {
    try {
      // The device (OXI_DEVICE, default auto; cmd_serve's --device already chose) before the
      // weights load; streamed text keeps special tokens for the output parsers.
      LoadRequest req;
      req.path = opt_.model_path;
      req.options.n_threads = opt_.n_threads;
      req.options.quant = opt_.quant;
      if (opt_.flash_attn == 0) req.options.attention = AttentionPath::kNoFlash;
      if (!opt_.cache_type_k.empty() && !nn::parse_kv_type(opt_.cache_type_k, &req.options.cache_type_k))
        throw_error(ErrorCode::kInvalidArgument, "invalid --cache-type-k '" + opt_.cache_type_k + "'");
      if (!opt_.cache_type_v.empty() && !nn::parse_kv_type(opt_.cache_type_v, &req.options.cache_type_v))
        throw_error(ErrorCode::kInvalidArgument, "invalid --cache-type-v '" + opt_.cache_type_v + "'");
      req.gpu_layers = opt_.gpu_layers;
      req.chat_template_file = opt_.chat_template_file;
      if (opt_.chat_template) req.chat_template = *opt_.chat_template;
      req.require_chat_template = true;
      req.stream_special_tokens = true;
      req.draft_path = opt_.draft_model;
      loaded_ = load_model_bundle(req);
      model_ = loaded_->model.get();
      tok_ = loaded_->tokenizer;
      tmpl_ = std::make_unique<ChatTemplate>(loaded_->chat_template);
      format_ = loaded_->format;
      model_id_ = !opt_.alias.empty() ? opt_.alias : !model_->info().name.empty() ? model_->info().name : opt_.model_path;
      defaults_ = loaded_->defaults;
      pooling_ = resolve_pooling();
      // The vision tower, once per server: --mmproj, else the HF checkpoint's own.
      auto special = [this](const char* text) {
        const std::vector<int32_t> ids = tok_->encode(text, false, true);
        return ids.size() == 1 ? ids[0] : -1;
      };
      gemma_family_ = model_family(model_->info().arch) == "gemma4";
      // Gemma 4's audio tower (E2B / E4B): in the same mmproj as its vision tower (or alone), or
      // the HF checkpoint's own. An mmproj with audio but no vision serves audio only.
      std::string audio_error;
      if (gemma_family_) {
        try {
          audio_ = audio::load_gemma4_audio_tower(model_->info(), loaded_->files, opt_.mmproj);
        } catch (const Error& e) {
          audio_error = e.what();  // an mmproj without audio (a vision-only tower) is no error
        }
        if (audio_) {
          audio_pad_ = special("<|audio|>");
          audio_begin_ = special("<|audio>");
          audio_end_ = special("<audio|>");
          if (audio_pad_ < 0 || audio_begin_ < 0 || audio_end_ < 0)
            throw_error(ErrorCode::kUnsupported, "the model's vocabulary has no <|audio|> / <|audio> / <audio|> tokens (not an audio model)");
          std::fprintf(stderr, "oxinfer: audio tower loaded (%s)\n", opt_.mmproj.empty() ? "from the checkpoint" : opt_.mmproj.c_str());
        }
      }
      try {
        vision_ = vision::load_vision_input(model_->info(), loaded_->files, opt_.mmproj, special,
                                            opt_.llama_image_preproc ? vision::ResizeMode::kLlamaCpp : vision::ResizeMode::kHf);
      } catch (const Error& e) {
        if (audio_ && !opt_.mmproj.empty()) {
          std::fprintf(stderr, "oxinfer: the mmproj has no vision tower (%s): serving audio and text\n", e.what());
          vision_.reset();
        } else {
          // A tower that came from the -hf repo on its own (not asked for by --mmproj) must not
          // keep a text model from serving.
          if (!opt_.mmproj_from_repo) throw;
          std::fprintf(stderr, "oxinfer: warning: the repo's mmproj is not used (%s); serving text only\n", e.what());
          vision_.reset();
          audio_.reset();
        }
      }
      if (!audio_ && !audio_error.empty() && vision_)
        std::fprintf(stderr, "oxinfer: no audio tower (%s): audio parts get 400\n", audio_error.c_str());
      if (vision_) {
        // The template's placeholder for an image part (Qwen 3.5 writes the start / end tokens
        // around it itself; Gemma 4's become vision_->begin / end here).
        const char* pad = vision_->gemma ? "<|image|>" : "<|image_pad|>";
        image_pad_ = special(pad);
        if (image_pad_ < 0) throw_error(ErrorCode::kUnsupported, std::string("the model's vocabulary has no ") + pad + " token (not a vision model)");
        std::fprintf(stderr, "oxinfer: vision tower loaded (%s)\n", opt_.mmproj.empty() ? "from the checkpoint" : opt_.mmproj.c_str());
      }
      const SpecMode spec = static_cast<SpecMode>(opt_.spec_mode);
      if (const std::string why = spec_unavailable(spec); !why.empty())
        throw_error(ErrorCode::kUnsupported, std::string("--spec ") + spec_mode_name(spec) + ": " + why);
      batcher_ = std::make_unique<Batcher>(*model_);
      for (int i = 0; i < std::max(1, opt_.n_slots); ++i) {
        Slot s;
        s.session = std::make_unique<Session>(*model_, *loaded_->text, opt_.n_ctx, batcher_.get(),
                                              opt_.spec_mode != 0 ? opt_.draft_max : 0);
        slots_.push_back(std::move(s));
      }
      ready_.store(true);
      std::fprintf(stderr, "oxinfer: model ready (%s, %d slots, ctx %d)\n", model_id_.c_str(),
                   static_cast<int>(slots_.size()), opt_.n_ctx);
      if (opt_.embeddings) std::fprintf(stderr, "oxinfer: embeddings on (pooling %s)\n", pooling_name(pooling_));
    } catch (const std::exception& e) {
      std::fprintf(stderr, "error: %s\n", e.what());
      std::fflush(stderr);
      std::_Exit(1);  // a server that cannot load its model must not pretend to be up
    }
  }

  // --pooling, else llama.cpp's rule: the GGUF's <arch>.pooling_type, else none (chat models'
  // GGUFs carry no such key). An HF directory: its sentence-transformers pooling config, which is
  // where llama.cpp's converter takes that key from (a broken one is ignored with a warning).
  Pooling resolve_pooling() const {
    if (opt_.pooling >= 0) return static_cast<Pooling>(opt_.pooling);
    const ModelFiles& f = loaded_->files;
    if (f.hf) {
      const StPooling st = read_st_pooling(f.hf->dir);
      if (!st.warning.empty()) {
        std::fprintf(stderr, "oxinfer: warning: ignoring the sentence-transformers pooling config (%s); pooling none, "
                             "choose one with --pooling\n", st.warning.c_str());
      }
      return st.type ? static_cast<Pooling>(*st.type) : Pooling::kNone;
    }
    if (!f.gguf) return Pooling::kNone;
    int64_t v = -1;
    try {
      v = f.gguf->metadata.get_int(f.architecture() + ".pooling_type", 0);
    } catch (const Error&) {
      // not an integer: reported below as a type we do not pool with
    }
    if (auto p = pooling_from_gguf(v)) return *p;
    if (opt_.embeddings && v == 4) {
      std::fprintf(stderr, "oxinfer: note: the model's pooling type is rank (a reranker); using none: %s\n", kNoRerankReason);
    } else if (opt_.embeddings) {
      std::fprintf(stderr, "oxinfer: note: the model's pooling type %lld is not one oxinfer pools with (none|mean|cls|last): "
                           "using none; choose one with --pooling\n", static_cast<long long>(v));
    }
    return Pooling::kNone;
  }

  // A request's "speculative.mode" (the names of --spec). "none" is always allowed; another mode
  // needs slots built for drafting (a server started with --spec other than none) and, for mtp /
  // draft, the model's MTP head or a -md draft model: otherwise a 400 naming the field, before
  // anything is generated.
  SpecMode request_spec_mode(const std::string& name) const {
    const SpecMode m = parse_spec_mode(name);
    if (m == SpecMode::kNone) return m;
    if (opt_.spec_mode == static_cast<int>(SpecMode::kNone)) {
      throw RequestError(400, "speculative.mode", "speculative decoding is off on this server (started with --spec none)");
    }
    if (const std::string why = spec_unavailable(m); !why.empty())
      throw RequestError(400, "speculative.mode", "'speculative.mode' " + name + ": " + why);
    return m;
  }

  // Why this model cannot draft in mode m ("" when it can): mtp needs the model's own MTP head,
  // draft a -md draft model. The same rule refuses --spec at start and a request's mode.
  std::string spec_unavailable(SpecMode m) const {
    if (m == SpecMode::kMtp && (!model_->has_mtp() || model_->mtp_is_draft_model()))
      return "the model has no MTP head (use auto, ngram or none)";
    if (m == SpecMode::kDraft && !model_->mtp_is_draft_model()) return "no draft model (-md: a Gemma 4 assistant drafter)";
    return "";
  }

  SamplingParams sampling_for(const GenerationRequest& req) const {
    SamplingParams p = defaults_;
    const auto& s = req.sampling;
    if (s.temperature) p.temperature = *s.temperature;
    if (s.top_p) p.top_p = *s.top_p;
    if (s.top_k) p.top_k = *s.top_k;
    if (s.min_p) p.min_p = *s.min_p;
    if (s.presence_penalty) p.presence_penalty = *s.presence_penalty;
    if (s.frequency_penalty) p.frequency_penalty = *s.frequency_penalty;
    if (s.repeat_penalty) p.repeat_penalty = *s.repeat_penalty;
    if (s.penalty_last_n) p.penalty_last_n = *s.penalty_last_n;
    if (s.seed) p.seed = *s.seed;
    try {
      p.validate();
    } catch (const Error& e) {
      throw RequestError(400, "", e.what());
    }
    return p;
  }

  // Requests get slots first come, first served: each takes a ticket and waits until it is the
  // oldest waiting one and a slot is free (a condition variable alone lets any waiter, or a request
  // arriving just then, take a freed slot, so one request could wait behind later ones).
  Slot& acquire(const std::vector<int32_t>& prompt, int max_tokens) {
    std::unique_lock<std::mutex> lk(mu_);
    const uint64_t ticket = next_ticket_++;
    slot_cv_.wait(lk, [&] {
      return cancelled_.load() ||
             (ticket == serving_ && std::any_of(slots_.begin(), slots_.end(), [](const Slot& s) { return !s.busy; }));
    });
    if (cancelled_.load()) throw RequestError(503, "", "the server is shutting down", "unavailable_error");
    ++serving_;
    slot_cv_.notify_all();  // the next ticket may take another free slot
    // Prefer the free slot whose live sequence is the longest prefix of the prompt, else the
    // least recently used one.
    Slot* best = nullptr;
    size_t best_len = 0;
    for (auto& s : slots_) {
      if (s.busy) continue;
      const auto& t = s.session->tokens();
      const size_t len = (is_prefix(t, prompt) && t.size() < prompt.size()) ? t.size() : 0;
      if (!best || len > best_len || (len == best_len && s.last_use < best->last_use)) {
        best = &s;
        best_len = len;
      }
    }
    best->busy = true;
    best->id_task = static_cast<int64_t>(ticket);
    best->n_prompt = static_cast<int>(prompt.size());
    best->n_cached = 0;
    best->n_decoded->store(0);
    best->max_tokens = max_tokens;
    return *best;
  }

  void release(Slot& s) {
    {
      std::lock_guard<std::mutex> lk(mu_);
      s.busy = false;
    }
    slot_cv_.notify_all();  // only the oldest waiter may take it: wake them all to find it
  }

  // Brings the session to the longest cached prefix of `prompt` (strictly shorter, so at least
  // one token is computed for fresh logits). Returns the tokens reused.
  size_t reuse(Session& ses, const std::vector<int32_t>& prompt) {
    size_t live = 0;
    if (is_prefix(ses.tokens(), prompt) && ses.tokens().size() < prompt.size()) live = ses.tokens().size();
    std::shared_ptr<const Session::Snapshot> best;
    {
      std::lock_guard<std::mutex> lk(mu_);
      CacheEntry* be = nullptr;
      for (auto& e : cache_) {
        const auto& t = e.snap->tokens;
        if (t.size() > live && t.size() < prompt.size() && is_prefix(t, prompt) && (!be || t.size() > be->snap->tokens.size())) be = &e;
      }
      if (be) {
        be->last_use = ++clock_;
        best = be->snap;  // held by this slot even if the entry is evicted meanwhile
      }
    }
    if (best) {
      ses.restore(*best);
      return ses.tokens().size();
    }
    if (live > 0) return live;
    ses.reset();
    return 0;
  }

  // Encoded images by content (image_row_ids), least recently used first out past
  // kEncodeCacheBytes: an image seen again outside a cached prompt prefix (another conversation,
  // the same image twice, --cache-ram 0) is not encoded again.
  std::shared_ptr<const std::vector<float>> cached_encoding(const std::vector<int32_t>& key) {
    std::lock_guard<std::mutex> lk(mu_);
    for (auto it = encodings_.begin(); it != encodings_.end(); ++it) {
      if (it->first != key) continue;
      encodings_.splice(encodings_.begin(), encodings_, it);  // most recent first
      return it->second;
    }
    return nullptr;
  }
  void keep_encoding(const std::vector<int32_t>& key, std::shared_ptr<const std::vector<float>> rows) {
    std::lock_guard<std::mutex> lk(mu_);
    encodings_.emplace_front(key, std::move(rows));
    size_t bytes = 0;
    for (auto it = encodings_.begin(); it != encodings_.end();) {
      bytes += it->second->size() * sizeof(float);
      if (bytes > kEncodeCacheBytes && it != encodings_.begin()) it = encodings_.erase(it);
      else ++it;
    }
  }

  void store(Session::Snapshot&& snap) {
    const size_t bytes = snap.bytes();
    const size_t budget = static_cast<size_t>(std::max<int64_t>(0, opt_.cache_ram_mib)) << 20;
    if (bytes > budget) return;
    std::lock_guard<std::mutex> lk(mu_);
    for (auto& e : cache_) {
      if (e.snap->tokens == snap.tokens) {
        e.last_use = ++clock_;
        return;
      }
    }
    cache_.push_back(CacheEntry{std::make_shared<const Session::Snapshot>(std::move(snap)), bytes, ++clock_});
    cache_bytes_ += bytes;
    while (cache_bytes_ > budget && !cache_.empty()) {
      auto lru = std::min_element(cache_.begin(), cache_.end(),
                                  [](const CacheEntry& a, const CacheEntry& b) { return a.last_use < b.last_use; });
      cache_bytes_ -= lru->bytes;
      cache_.erase(lru);
    }
  }

  const ServerOptions opt_;
  std::thread loader_;
  std::atomic<bool> ready_{false};
  std::atomic<bool> cancelled_{false};  // cancel_all(): shutting down
  std::unique_ptr<LoadedModel> loaded_;  // files, weights, tokenizer, template, defaults
  const Model* model_ = nullptr;         // loaded_->model
  std::unique_ptr<Batcher> batcher_;
  TokenizerPtr tok_;                     // loaded_->tokenizer
  std::unique_ptr<ChatTemplate> tmpl_;
  ChatFormat format_ = ChatFormat::kPlain;
  std::string model_id_;
  SamplingParams defaults_;
  Pooling pooling_ = Pooling::kNone;  // the embeddings endpoints' (resolve_pooling)
  std::unique_ptr<vision::VisionInput> vision_;  // nullptr: text only
  int32_t image_pad_ = -1;                         // the template's image placeholder token
  bool gemma_family_ = false;                      // a Gemma 4 model (media go in mtmd's pieces)
  std::unique_ptr<audio::Gemma4ATower> audio_;     // nullptr: no audio
  int32_t audio_pad_ = -1, audio_begin_ = -1, audio_end_ = -1;  // <|audio|> (template), <|audio>, <audio|>

  mutable std::mutex mu_;
  std::condition_variable slot_cv_;
  uint64_t next_ticket_ = 0, serving_ = 0;  // FIFO slot assignment (acquire), under mu_
  std::vector<Slot> slots_;
  std::list<CacheEntry> cache_;
  std::list<std::pair<std::vector<int32_t>, std::shared_ptr<const std::vector<float>>>> encodings_;  // under mu_
  size_t cache_bytes_ = 0;
  uint64_t clock_ = 0;
  std::atomic<uint64_t> n_requests_{0};
};

}  // namespace

std::unique_ptr<Engine> make_engine(const ServerOptions& options) {
  return std::make_unique<ServerEngine>(options);
}

}  // namespace oxi::server
