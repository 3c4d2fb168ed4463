// The inference side of the server: one model, N slots (a Session each), a prompt cache of state
// snapshots shared by the slots, and continuous batching: every slot's request runs its own
// generation loop on its own thread, and their forward steps meet in one Batcher, so the active
// slots decode together in one pass over the weights and a new prompt is pre-filled in chunks
// mixed with the ongoing decodes (runtime/batcher.h; a sequence computes what it would alone).
#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <filesystem>
#include <list>
#include <mutex>
#include <thread>

#include "chat/jinja.h"
#include "core/error.h"
#include "loader/loaded_model.h"
#include "models/model.h"
#include "runtime/batcher.h"
#include "runtime/session.h"
#include "server/engine.h"
#include "sampling/json_constraint.h"
#include "server/server.h"
#include "tokenizer/tokenizer.h"

namespace oxi::server {

using nlohmann::json;
using nlohmann::ordered_json;

namespace {

using Clock = std::chrono::steady_clock;

struct Slot {
  std::unique_ptr<Session> session;
  bool busy = false;
  uint64_t last_use = 0;
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
    ordered_json msgs = ordered_json::array();
    for (const auto& m : req.messages) {
      ordered_json om = ordered_json::parse(m.dump());
      if (om.contains("content") && om["content"].is_array()) om["content"] = flatten_content(m["content"]);
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

  GenerationResult generate(const std::vector<int32_t>& prompt, size_t checkpoint_at,
                            const GenerationRequest& req, std::shared_ptr<TextConstraint> constraint,
                            const TokenSink& sink) override {
    if (prompt.empty()) throw RequestError(400, "messages", "the prompt is empty");
    if (static_cast<int64_t>(prompt.size()) >= opt_.n_ctx) {
      throw RequestError(400, "messages", "the prompt has " + std::to_string(prompt.size()) +
                                              " tokens; the context holds " + std::to_string(opt_.n_ctx));
    }
    for (int32_t id : prompt) {
      if (id < 0 || id >= tok_->n_vocab()) {
        throw RequestError(400, "prompt", "token id " + std::to_string(id) + " is out of range");
      }
    }
    GenerateOptions go;
    go.should_stop = [this] { return cancelled_.load(); };
    go.sampling = sampling_for(req);
    go.max_tokens = req.max_tokens;
    go.n_top_logprobs = req.logprobs ? req.top_logprobs : 0;
    go.logprobs = req.logprobs;
    go.spec.mode = static_cast<SpecMode>(opt_.spec_mode);
    go.spec.draft_max = std::min(opt_.draft_max, req.draft_max.value_or(opt_.draft_max));
    go.spec.draft_min = std::min(go.spec.draft_max, req.draft_min.value_or(opt_.draft_min));
    for (const auto& [id, bias] : req.logit_bias) {
      if (id >= tok_->n_vocab()) {
        throw RequestError(400, "logit_bias", "logit_bias: token id " + std::to_string(id) + " is out of range");
      }
    }
    if (constraint || !req.logit_bias.empty()) {
      // The bias first (llama.cpp's chain starts with it), so the constraint ranks biased logits.
      const TextConstraint* c = constraint.get();
      const auto* bias = &req.logit_bias;
      go.logit_filter = [this, c, bias](std::span<float> logits) {
        for (const auto& [id, b] : *bias) logits[static_cast<size_t>(id)] += b;
        if (c) mask_rejected_tokens(*c, *loaded_->text, logits);
      };
    }

    const size_t boundary = checkpoint_at < prompt.size() ? checkpoint_at : 0;

    Slot& slot = acquire(prompt);
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
      const size_t cached = reuse(ses, prompt);
      out.n_cached = static_cast<int>(cached);
      const auto t0 = Clock::now();
      // Pre-fill up to the turn boundary in pieces, checkpointing along the way.
      size_t pos = cached;
      const size_t stop_at = boundary > pos ? boundary : pos;
      while (pos < stop_at) {
        const size_t n = std::min(kCheckpointEvery, stop_at - pos);
        ses.prefill(std::span<const int32_t>(prompt.data() + pos, n), go);
        pos += n;
        store(ses.snapshot());
      }
      const double pre_ms = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
      auto r = ses.generate(std::span<const int32_t>(prompt.data() + pos, prompt.size() - pos), go,
                            [&](const TokenEvent& ev) {
                              if (ev.eog) return false;
                              if (constraint) constraint->advance(tok_->token_to_piece(ev.id));
                              TokenOut t;
                              t.id = ev.id;
                              t.text = std::string(ev.text);
                              t.logprob = ev.logprob;
                              for (const auto& tl : ev.top) t.top.emplace_back(tl.id, tl.logprob);
                              const bool go_on = sink(t);
                              if (constraint && constraint->finished()) return false;
                              return go_on;
                            });
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
    return json{{"slots_total", static_cast<int>(slots_.size())}, {"slots_busy", busy},
                {"prompt_cache_entries", static_cast<int>(cache_.size())},
                {"prompt_cache_bytes", static_cast<double>(cache_bytes_)},
                {"batch_passes", batcher_ ? static_cast<double>(batcher_->passes()) : 0.0},
                {"batch_rows", batcher_ ? static_cast<double>(batcher_->rows()) : 0.0}};
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
                {"n_slots", static_cast<int>(slots_.size())},
                {"defaults", {{"temperature", defaults_.temperature}, {"top_k", defaults_.top_k},
                              {"top_p", defaults_.top_p}, {"min_p", defaults_.min_p},
                              {"repeat_penalty", defaults_.repeat_penalty}, {"repeat_last_n", defaults_.penalty_last_n},
                              {"presence_penalty", defaults_.presence_penalty},
                              {"frequency_penalty", defaults_.frequency_penalty}}}};
  }

 private:
  static constexpr size_t kCheckpointEvery = 1024;
  static constexpr int32_t kPrefillChunk = 256;

  void load() {
    try {
      // The device (OXI_DEVICE, default auto; cmd_serve's --device already chose) before the
      // weights load; streamed text keeps special tokens for the output parsers.
      LoadRequest req;
      req.path = opt_.model_path;
      req.options.n_threads = opt_.n_threads;
      req.options.quant = opt_.quant;
      if (opt_.flash_attn == 0) req.options.attention = AttentionPath::kNoFlash;
      req.gpu_layers = opt_.gpu_layers;
      req.chat_template_file = opt_.chat_template_file;
      if (opt_.chat_template) req.chat_template = *opt_.chat_template;
      req.require_chat_template = true;
      req.stream_special_tokens = true;
      loaded_ = load_model_bundle(req);
      model_ = loaded_->model.get();
      tok_ = loaded_->tokenizer;
      tmpl_ = std::make_unique<ChatTemplate>(loaded_->chat_template);
      format_ = loaded_->format;
      model_id_ = !opt_.alias.empty() ? opt_.alias : !model_->info().name.empty() ? model_->info().name : opt_.model_path;
      defaults_ = loaded_->defaults;
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
    } catch (const std::exception& e) {
      std::fprintf(stderr, "error: %s\n", e.what());
      std::fflush(stderr);
      std::_Exit(1);  // a server that cannot load its model must not pretend to be up
    }
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
  Slot& acquire(const std::vector<int32_t>& prompt) {
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

  void store(Session::Snapshot&& snap) {
    const size_t bytes = snap.state.size() + snap.tokens.size() * sizeof(int32_t);
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

  mutable std::mutex mu_;
  std::condition_variable slot_cv_;
  uint64_t next_ticket_ = 0, serving_ = 0;  // FIFO slot assignment (acquire), under mu_
  std::vector<Slot> slots_;
  std::list<CacheEntry> cache_;
  size_t cache_bytes_ = 0;
  uint64_t clock_ = 0;
  std::atomic<uint64_t> n_requests_{0};
};

}  // namespace

std::unique_ptr<Engine> make_engine(const ServerOptions& options) {
  return std::make_unique<ServerEngine>(options);
}

}  // namespace oxi::server
