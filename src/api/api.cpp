// C API implementation: catches every exception at the boundary, turns it into an oxi_status and
// keeps a per-thread message. All the work is done by the runtime (Session), the tokenizer, the
// chat-template renderer and the models.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <memory>
#include <mutex>
#include <new>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "chat/jinja.h"
#include "core/error.h"
#include "core/json_limits.h"
#include "core/log.h"
#include "api/api_internal.h"
#include "loader/loaded_model.h"
#include "models/model.h"
#include "oxinfer.h"
#include "runtime/session.h"
#include "sampling/gbnf.h"
#include "sampling/json_constraint.h"
#include "sampling/sampler.h"
#include "tokenizer/tokenizer.h"
#if OXI_API_VISION
#include "vision/image.h"
#if OXI_API_VISION
#include "audio/decode.h"
#include "audio/gemma4a.h"
#endif
#include "vision/media_prompt.h"
#endif

namespace {

thread_local std::string g_last_error;

void set_error(const std::string& m) { g_last_error = m; }

oxi_status fail(oxi_status s, const std::string& m) {
  set_error(m);
  return s;
}

// A JSON argument of the C API: depth-checked before parsing (the parse and everything after it
// recurse), errors named after `what` ("what: invalid JSON: …").
template <class Json>
oxi_status parse_json_arg(const char* text, const std::string& what, Json& out) {
  if (oxi::json_too_deep(text)) {
    return fail(OXI_ERR_INVALID_ARGUMENT, what + ": JSON nested deeper than " + std::to_string(oxi::kMaxJsonDepth) + " levels");
  }
  try {
    out = Json::parse(text);
  } catch (const nlohmann::json::exception& e) {
    return fail(OXI_ERR_INVALID_ARGUMENT, what + ": invalid JSON: " + e.what());
  }
  return OXI_OK;
}

// Runs fn, mapping exceptions to statuses; clears the message on success.
template <class F>
oxi_status guarded(F&& fn) {
  try {
    const oxi_status s = fn();
    if (s == OXI_OK) g_last_error.clear();
    return s;
  } catch (const oxi::Error& e) {
    return fail(static_cast<oxi_status>(e.code()), e.what());
  } catch (const std::bad_alloc&) {
    return fail(OXI_ERR_OUT_OF_MEMORY, "out of memory");
  } catch (const nlohmann::json::exception& e) {
    return fail(OXI_ERR_INVALID_ARGUMENT, std::string("invalid JSON: ") + e.what());
  } catch (const std::exception& e) {
    return fail(OXI_ERR_INTERNAL, std::string("internal error: ") + e.what());
  } catch (...) {
    return fail(OXI_ERR_INTERNAL, "internal error: unknown exception");
  }
}

#define OXI_REQUIRE(cond, what)                                          \
  do {                                                                   \
    if (!(cond)) return fail(OXI_ERR_INVALID_ARGUMENT, std::string(what)); \
  } while (0)

// The capacity protocol: copy what fits, always report the full size, terminate when room.
void copy_out(const std::string& s, char* out, size_t cap, size_t* n_out) {
  *n_out = s.size();
  if (out && cap > 0) {
    const size_t n = std::min(cap, s.size());
    std::memcpy(out, s.data(), n);
    if (s.size() < cap) out[s.size()] = '\0';
  }
}

oxi_sampling_params to_c(const oxi::SamplingParams& p) {
  oxi_sampling_params c;
  c.temperature = p.temperature;
  c.top_k = p.top_k;
  c.top_p = p.top_p;
  c.min_p = p.min_p;
  c.repeat_penalty = p.repeat_penalty;
  c.presence_penalty = p.presence_penalty;
  c.frequency_penalty = p.frequency_penalty;
  c.penalty_last_n = p.penalty_last_n;
  c.seed = p.seed;
  return c;
}


// A template that writes the BOS text itself plus the tokenizer's own BOS: keep one (as
// llama.cpp does).
void drop_double_bos(const oxi::Tokenizer& tok, bool add_special, std::vector<int32_t>& v) {
  const int32_t bos = tok.bos_id();
  if (add_special && bos >= 0 && v.size() >= 2 && v[0] == bos && v[1] == bos) v.erase(v.begin());
}

void copy_ids(const std::vector<int32_t>& v, int32_t* ids, size_t cap, size_t* n_out) {
  *n_out = v.size();
  if (ids) std::copy_n(v.begin(), std::min(cap, v.size()), ids);
}

}  // namespace

struct oxi_model {
  std::unique_ptr<oxi::LoadedModel> loaded;  // files, weights, tokenizer, template, defaults

  // A tower loaded on first use, its error kept for every later call (load_once).
  struct Once {
    std::once_flag flag;
    oxi_status status = OXI_OK;
    std::string error;
  };
  // The vision tower (oxi_model_params.mmproj at open; the HF checkpoint's own on the first image).
  std::string mmproj;
  bool llama_image_preproc = false;  // oxi_model_params.image_preproc "llama"
  Once vision_once;
#if OXI_API_VISION
  std::unique_ptr<oxi::vision::VisionInput> vision;
#endif
  // The audio tower (Gemma 4 E2B/E4B: the same mmproj, else the HF checkpoint's own), loaded on
  // the first clip.
  Once audio_once;
#if OXI_API_VISION
  std::unique_ptr<oxi::audio::Gemma4ATower> audio;
#endif

  std::once_flag tmpl_once;
  std::unique_ptr<oxi::ChatTemplate> tmpl;
  std::string tmpl_error;
  oxi_status tmpl_status = OXI_OK;

  const oxi::Model& model() const { return *loaded->model; }
  const oxi::Tokenizer& tok() const { return *loaded->tokenizer; }
};

struct oxi_context {
  oxi_model* model = nullptr;
  std::unique_ptr<oxi::Session> session;
  int32_t n_verify = 0, n_drafted = 0, n_accepted = 0;  // the last oxi_generate's speculation
};

static_assert(OXI_SPEC_NONE == static_cast<int>(oxi::SpecMode::kNone) && OXI_SPEC_AUTO == static_cast<int>(oxi::SpecMode::kAuto) &&
              OXI_SPEC_NGRAM == static_cast<int>(oxi::SpecMode::kNgram) && OXI_SPEC_MTP == static_cast<int>(oxi::SpecMode::kMtp) &&
              OXI_SPEC_DRAFT == static_cast<int>(oxi::SpecMode::kDraft));

// Runs `load` once (guarded); its failure is returned again by every later call.
template <class F>
static oxi_status load_once(oxi_model::Once& o, F&& load) {
  std::call_once(o.flag, [&] {
    o.status = guarded([&] {
      load();
      return OXI_OK;
    });
    if (o.status != OXI_OK) o.error = oxi_last_error();
  });
  return o.status != OXI_OK ? fail(o.status, o.error) : OXI_OK;
}

// The model's vision tower, loaded once.
static oxi_status load_vision(oxi_model& m) {
#if OXI_API_VISION
  return load_once(m.vision_once, [&] {
    const oxi::LoadedModel& lm = *m.loaded;
    m.vision = oxi::vision::load_vision_input(lm.model->info(), lm.files, m.mmproj, [&](const char* text) {
      const std::vector<int32_t> ids = lm.tokenizer->encode(text, false, true);
      return ids.size() == 1 ? ids[0] : -1;
    }, m.llama_image_preproc ? oxi::vision::ResizeMode::kLlamaCpp : oxi::vision::ResizeMode::kHf);
  });
#else
  if (!m.mmproj.empty()) return fail(OXI_ERR_UNSUPPORTED, "mmproj: this build has no image support (the wasm build)");
  return OXI_OK;
#endif
}

// Rollback room every context keeps: oxi_generate_params.draft_max at most this.
constexpr int32_t kContextMaxDraft = 16;

namespace oxi {

SamplingParams from_c(const oxi_sampling_params& c) {
  oxi::SamplingParams p;
  p.temperature = c.temperature;
  p.top_k = c.top_k;
  p.top_p = c.top_p;
  p.min_p = c.min_p;
  p.repeat_penalty = c.repeat_penalty;
  p.presence_penalty = c.presence_penalty;
  p.frequency_penalty = c.frequency_penalty;
  p.penalty_last_n = c.penalty_last_n;
  p.seed = c.seed;
  return p;
}


oxi_model* wrap_model(std::unique_ptr<Model> model, TokenizerPtr tokenizer,
                      const std::string& chat_template) {
  if (!model || !tokenizer) throw_error(ErrorCode::kInvalidArgument, "wrap_model: missing model or tokenizer");
  auto m = std::make_unique<oxi_model>();
  m->loaded = assemble_loaded_model(std::move(model), std::move(tokenizer), chat_template,
                                    /*stream_special_tokens=*/false);
  return m.release();
}

const LoadedModel& loaded_of(const oxi_model* model) { return *model->loaded; }

GenerateResult generate_c(Session& session, const LoadedModel& lm, std::span<const int32_t> prompt, const oxi_generate_params& p,
                          oxi_token_callback on_token, void* user_data, const EntryRows& rows) {
  auto require = [](bool cond, const std::string& what) {
    if (!cond) throw_error(ErrorCode::kInvalidArgument, what);
  };
  require(p.n_top_logprobs >= 0 && p.n_top_logprobs <= 20, "oxi_generate: n_top_logprobs must be between 0 and 20");
  GenerateOptions o;
  o.max_tokens = p.max_tokens;
  o.n_top_logprobs = p.n_top_logprobs;
  o.logprobs = true;
  o.ignore_eog = p.ignore_eog != 0;
  o.sampling = from_c(p.sampling);
  o.prefill_chunk = p.prefill_chunk > 0 ? p.prefill_chunk : 512;
  o.cancel = p.cancel;
  require(p.spec_mode >= OXI_SPEC_NONE && p.spec_mode <= OXI_SPEC_DRAFT, "oxi_generate: unknown spec_mode");
  require(p.draft_max >= 0 && p.draft_max <= kContextMaxDraft, "oxi_generate: draft_max must be between 0 and 16");
  require(p.draft_min >= 0 && p.draft_min <= p.draft_max, "oxi_generate: draft_min must be between 0 and draft_max");
  o.spec.mode = static_cast<SpecMode>(p.spec_mode);
  o.spec.draft_max = p.draft_max;
  o.spec.draft_min = p.draft_min;

  // Structured output: the same automata and mask as the server's response_format / grammar.
  std::unique_ptr<TextConstraint> constraint;
  const bool has_schema = p.json_schema && *p.json_schema, has_grammar = p.grammar && *p.grammar;
  require(!(has_schema && has_grammar), "oxi_generate: give json_schema or grammar, not both");
  if (has_schema) {
    require(!p.ignore_eog, "oxi_generate: json_schema cannot be combined with ignore_eog");
    nlohmann::json schema;
    if (parse_json_arg(p.json_schema, "json_schema", schema) != OXI_OK) throw_error(ErrorCode::kInvalidArgument, g_last_error);
    constraint = std::make_unique<JsonConstraint>(schema);
  }
  if (has_grammar) {
    require(!p.ignore_eog, "oxi_generate: grammar cannot be combined with ignore_eog");
    constraint = std::make_unique<GbnfConstraint>(parse_gbnf(p.grammar));
  }
  if (constraint) {
    o.logit_filter = [&](std::span<float> logits) { mask_rejected_tokens(*constraint, *lm.text, logits); };
  }

  std::vector<int32_t> top_ids;
  std::vector<float> top_lps;
  TokenCallback cb;
  if (on_token || constraint) {
    cb = [&](const TokenEvent& e) {
      if (constraint && !e.eog) constraint->advance_token(e.id, lm.text->piece(e.id), !lm.text->is_control(e.id));
      if (!on_token) return true;
      top_ids.clear();
      top_lps.clear();
      for (const auto& t : e.top) {
        top_ids.push_back(t.id);
        top_lps.push_back(t.logprob);
      }
      const std::string text(e.text);  // NUL-terminated copy for C callers
      oxi_token_event ev;
      ev.id = e.id;
      ev.text = text.c_str();
      ev.text_len = text.size();
      ev.logprob = e.logprob;
      ev.n_top = static_cast<int32_t>(top_ids.size());
      ev.top_ids = top_ids.data();
      ev.top_logprobs = top_lps.data();
      ev.is_eog = e.eog ? 1 : 0;
      return on_token(&ev, user_data) == 0;
    };
  }
  return session.generate(prompt, o, cb, rows);
}

}  // namespace oxi

extern "C" {

const char* oxi_last_error(void) { return g_last_error.c_str(); }

const char* oxi_status_name(oxi_status status) {
  return oxi::error_code_name(static_cast<oxi::ErrorCode>(status));
}

const char* oxi_version(void) { return "0.1.0"; }

oxi_model_params oxi_model_default_params(void) {
  oxi_model_params p;
  p.n_threads = 0;
  p.quant = nullptr;
  p.chat_template = nullptr;
  p.device = nullptr;
  p.flash_attn = -1;
  p.n_gpu_layers = -1;
  p.cache_type_k = nullptr;
  p.cache_type_v = nullptr;
  p.draft_model = nullptr;
  p.mmproj = nullptr;
  p.image_preproc = nullptr;
  return p;
}

oxi_status oxi_model_open(const char* path, const oxi_model_params* params, oxi_model** out) {
  if (out) *out = nullptr;
  OXI_REQUIRE(path && out, "oxi_model_open: path and out must not be NULL");
  OXI_REQUIRE(*path, "oxi_model_open: empty path");
  return guarded([&] {
    const oxi_model_params p = params ? *params : oxi_model_default_params();
    OXI_REQUIRE(p.n_threads >= 0, "oxi_model_open: n_threads must be >= 0");
    oxi::LoadRequest req;
    req.path = path;
    req.options.n_threads = p.n_threads;
    req.options.quant = p.quant ? p.quant : "";
    req.device = p.device ? p.device : "";
    OXI_REQUIRE(p.n_gpu_layers >= -1, "oxi_model_open: n_gpu_layers must be -1 or more");
    req.gpu_layers = p.n_gpu_layers;
    OXI_REQUIRE(p.flash_attn >= -1 && p.flash_attn <= 1, "oxi_model_open: flash_attn must be -1, 0 or 1");
    if (p.flash_attn == 0) req.options.attention = oxi::AttentionPath::kNoFlash;
    OXI_REQUIRE(!p.cache_type_k || !*p.cache_type_k || oxi::nn::parse_kv_type(p.cache_type_k, &req.options.cache_type_k),
                "oxi_model_open: cache_type_k must be f16, f32 or q8_0");
    OXI_REQUIRE(!p.cache_type_v || !*p.cache_type_v || oxi::nn::parse_kv_type(p.cache_type_v, &req.options.cache_type_v),
                "oxi_model_open: cache_type_v must be f16, f32 or q8_0");
    if (p.chat_template) req.chat_template = std::string(p.chat_template);
    if (p.draft_model) req.draft_path = p.draft_model;
    const std::string preproc = p.image_preproc ? p.image_preproc : "";
    OXI_REQUIRE(preproc.empty() || preproc == "hf" || preproc == "llama", "oxi_model_open: image_preproc must be hf or llama");
    auto m = std::make_unique<oxi_model>();
    m->llama_image_preproc = preproc == "llama";
    m->loaded = oxi::load_model_bundle(req);
    if (p.mmproj && *p.mmproj) {  // a named tower: loaded and checked now, as llama.cpp's mtmd_init
      m->mmproj = p.mmproj;
      if (oxi_status st = load_vision(*m); st != OXI_OK) return st;
    }
    *out = m.release();
    return OXI_OK;
  });
}

void oxi_model_free(oxi_model* model) { delete model; }

oxi_status oxi_model_describe(const oxi_model* model, oxi_model_desc* out) {
  OXI_REQUIRE(model && out, "oxi_model_describe: model and out must not be NULL");
  return guarded([&] {
    const oxi::ModelInfo& i = model->model().info();
    out->arch = i.arch.c_str();
    out->name = i.name.c_str();
    out->n_vocab = i.n_vocab;
    out->n_ctx_train = i.n_ctx_train;
    out->n_params = i.n_params;
    out->bos_id = model->tok().bos_id();
    out->eos_id = model->tok().eos_id();
    out->n_tokens = model->tok().n_vocab();
    out->has_chat_template = model->loaded->chat_template.empty() ? 0 : 1;
    return OXI_OK;
  });
}

oxi_status oxi_tokenize(const oxi_model* model, const char* text, size_t text_len, int add_special,
                        int parse_special, int32_t* ids, size_t cap, size_t* n_out) {
  OXI_REQUIRE(model && n_out, "oxi_tokenize: model and n_out must not be NULL");
  OXI_REQUIRE(text || text_len == 0, "oxi_tokenize: text is NULL");
  OXI_REQUIRE(ids || cap == 0, "oxi_tokenize: ids is NULL with a non-zero capacity");
  return guarded([&] {
    std::vector<int32_t> v =
        model->tok().encode(std::string_view(text ? text : "", text_len), add_special != 0, parse_special != 0);
    drop_double_bos(model->tok(), add_special != 0, v);
    copy_ids(v, ids, cap, n_out);
    return OXI_OK;
  });
}

oxi_status oxi_detokenize(const oxi_model* model, const int32_t* ids, size_t n_ids, char* text,
                          size_t cap, size_t* n_out) {
  OXI_REQUIRE(model && n_out, "oxi_detokenize: model and n_out must not be NULL");
  OXI_REQUIRE(ids || n_ids == 0, "oxi_detokenize: ids is NULL");
  OXI_REQUIRE(text || cap == 0, "oxi_detokenize: text is NULL with a non-zero capacity");
  return guarded([&] {
    const std::string s = model->tok().decode(std::vector<int32_t>(ids, ids + n_ids), false);
    copy_out(s, text, cap, n_out);
    return OXI_OK;
  });
}

int oxi_token_is_eog(const oxi_model* model, int32_t id) {
  if (!model) return 0;
  try {
    return model->tok().is_eog(id) ? 1 : 0;
  } catch (...) {
    return 0;
  }
}

const char* oxi_model_chat_template(const oxi_model* model) {
  return model ? model->loaded->chat_template.c_str() : "";
}

namespace {

// The conversation rendered with the model's template (oxi_chat_render's contract). *mark in:
// mark user strings for Tokenizer::encode_marked; out: false when the options say
// "special_in_content": true (the old, unsafe way: user text may hold control tokens).
oxi_status render_conversation(const oxi_model* model, const char* messages_json, const char* options_json,
                               bool* mark, std::string* out) {
  auto* m = const_cast<oxi_model*>(model);
  if (m->loaded->chat_template.empty()) {
    return fail(OXI_ERR_UNSUPPORTED, "the model has no chat template (pass one, or use raw prompts)");
  }
  std::call_once(m->tmpl_once, [&] {
    try {
      m->tmpl = std::make_unique<oxi::ChatTemplate>(m->loaded->chat_template);
    } catch (const oxi::Error& e) {
      m->tmpl_status = static_cast<oxi_status>(e.code());
      m->tmpl_error = e.what();
    }
  });
  if (!m->tmpl) return fail(m->tmpl_status == OXI_OK ? OXI_ERR_FORMAT : m->tmpl_status, m->tmpl_error);

  nlohmann::ordered_json messages;
  if (const oxi_status st = parse_json_arg(messages_json, "messages", messages); st != OXI_OK) return st;
  if (!messages.is_array()) return fail(OXI_ERR_INVALID_ARGUMENT, "messages: expected a JSON array");
  oxi::ChatRenderOptions opt;
  opt.bos_token = m->loaded->bos_text;
  opt.eos_token = m->loaded->eos_text;
  if (options_json && *options_json) {
    nlohmann::ordered_json o;
    if (const oxi_status st = parse_json_arg(options_json, "options", o); st != OXI_OK) return st;
    if (!o.is_object()) return fail(OXI_ERR_INVALID_ARGUMENT, "options: expected a JSON object");
    for (auto it = o.begin(); it != o.end(); ++it) {
      const std::string& k = it.key();
      if (k == "add_generation_prompt") {
        if (!it->is_boolean()) return fail(OXI_ERR_INVALID_ARGUMENT, "options: add_generation_prompt must be a boolean");
        opt.add_generation_prompt = it->get<bool>();
      } else if (k == "enable_thinking") {
        if (!it->is_boolean()) return fail(OXI_ERR_INVALID_ARGUMENT, "options: enable_thinking must be a boolean");
        opt.enable_thinking = it->get<bool>() ? 1 : 0;
      } else if (k == "tools") {
        opt.tools = *it;
      } else if (k == "special_in_content") {
        if (!it->is_boolean()) return fail(OXI_ERR_INVALID_ARGUMENT, "options: special_in_content must be a boolean");
        if (it->get<bool>()) *mark = false;
      } else {
        opt.extra[k] = *it;  // e.g. reasoning_effort, preserve_thinking
      }
    }
  }
  messages = oxi::normalize_tool_call_arguments(messages);
  if (*mark) {
    auto f = [m](std::string_view s) { return m->tok().mark_user_text(s); };
    messages = oxi::map_strings(messages, f);
    if (!opt.tools.is_null()) opt.tools = oxi::map_strings(opt.tools, f);
  }
  *out = oxi::render_chat(*m->tmpl, messages, opt);
  return OXI_OK;
}

}  // namespace

oxi_status oxi_chat_render(const oxi_model* model, const char* messages_json,
                           const char* options_json, char* text, size_t cap, size_t* n_out) {
  OXI_REQUIRE(model && messages_json && n_out,
              "oxi_chat_render: model, messages_json and n_out must not be NULL");
  OXI_REQUIRE(text || cap == 0, "oxi_chat_render: text is NULL with a non-zero capacity");
  return guarded([&] {
    bool mark = false;  // the text as the template writes it
    std::string s;
    const oxi_status st = render_conversation(model, messages_json, options_json, &mark, &s);
    if (st == OXI_OK) copy_out(s, text, cap, n_out);
    return st;
  });
}

oxi_status oxi_chat_tokenize(const oxi_model* model, const char* messages_json, const char* options_json,
                             int32_t* ids, size_t cap, size_t* n_out) {
  OXI_REQUIRE(model && messages_json && n_out,
              "oxi_chat_tokenize: model, messages_json and n_out must not be NULL");
  OXI_REQUIRE(ids || cap == 0, "oxi_chat_tokenize: ids is NULL with a non-zero capacity");
  return guarded([&] {
    bool mark = true;
    std::string s;
    const oxi_status st = render_conversation(model, messages_json, options_json, &mark, &s);
    if (st != OXI_OK) return st;
    std::vector<int32_t> v = mark ? model->tok().encode_marked(s, true) : model->tok().encode(s, true, true);
    drop_double_bos(model->tok(), true, v);
    copy_ids(v, ids, cap, n_out);
    return OXI_OK;
  });
}

oxi_sampling_params oxi_sampling_default_params(void) { return to_c(oxi::SamplingParams::greedy()); }

oxi_sampling_params oxi_model_sampling_defaults(const oxi_model* model) {
  if (!model) return to_c(oxi::SamplingParams{});
  return to_c(model->loaded->defaults);
}

oxi_status oxi_context_new(oxi_model* model, int32_t n_ctx, oxi_context** out) {
  if (out) *out = nullptr;
  OXI_REQUIRE(model && out, "oxi_context_new: model and out must not be NULL");
  return guarded([&] {
    int64_t n = n_ctx;
    if (n <= 0) n = model->model().info().n_ctx_train;
    if (n <= 0) n = 4096;
    auto c = std::make_unique<oxi_context>();
    c->model = model;
    c->session = std::make_unique<oxi::Session>(model->model(), *model->loaded->text, n, nullptr, kContextMaxDraft);
    *out = c.release();
    return OXI_OK;
  });
}

void oxi_context_free(oxi_context* ctx) { delete ctx; }

oxi_status oxi_context_reset(oxi_context* ctx) {
  OXI_REQUIRE(ctx, "oxi_context_reset: ctx must not be NULL");
  return guarded([&] {
    ctx->session->reset();
    return OXI_OK;
  });
}

int32_t oxi_context_n_ctx(const oxi_context* ctx) {
  return ctx ? static_cast<int32_t>(ctx->session->n_ctx()) : 0;
}

int32_t oxi_context_n_past(const oxi_context* ctx) {
  return ctx ? static_cast<int32_t>(ctx->session->n_past()) : 0;
}

oxi_status oxi_context_prefill(oxi_context* ctx, const int32_t* ids, size_t n) {
  OXI_REQUIRE(ctx, "oxi_context_prefill: ctx must not be NULL");
  OXI_REQUIRE(ids || n == 0, "oxi_context_prefill: ids is NULL");
  return guarded([&] {
    ctx->session->prefill(std::span<const int32_t>(ids, n));
    return OXI_OK;
  });
}

oxi_status oxi_context_checkpoint(oxi_context* ctx) {
  OXI_REQUIRE(ctx, "oxi_context_checkpoint: ctx must not be NULL");
  return guarded([&] {
    ctx->session->checkpoint();
    return OXI_OK;
  });
}

oxi_status oxi_context_reuse_prefix(oxi_context* ctx, const int32_t* ids, size_t n, size_t* n_kept) {
  OXI_REQUIRE(ctx && n_kept, "oxi_context_reuse_prefix: ctx and n_kept must not be NULL");
  OXI_REQUIRE(ids || n == 0, "oxi_context_reuse_prefix: ids is NULL");
  return guarded([&] {
    *n_kept = ctx->session->reuse_prefix(std::span<const int32_t>(ids, n), n > 0 ? n - 1 : 0);
    return OXI_OK;
  });
}

oxi_generate_params oxi_generate_default_params(void) {
  oxi_generate_params p;
  p.max_tokens = -1;
  p.n_top_logprobs = 0;
  p.sampling = oxi_sampling_default_params();
  p.cancel = nullptr;
  p.ignore_eog = 0;
  p.prefill_chunk = 512;
  p.json_schema = nullptr;
  p.spec_mode = OXI_SPEC_AUTO;
  p.draft_max = kContextMaxDraft;
  p.draft_min = 0;
  p.grammar = nullptr;
  return p;
}

oxi_status oxi_generate(oxi_context* ctx, const int32_t* prompt, size_t n_prompt,
                        const oxi_generate_params* params, oxi_token_callback on_token,
                        void* user_data, oxi_generate_result* result) {
  if (result) std::memset(result, 0, sizeof(*result));
  OXI_REQUIRE(ctx, "oxi_generate: ctx must not be NULL");
  OXI_REQUIRE(prompt || n_prompt == 0, "oxi_generate: prompt is NULL");
  OXI_REQUIRE(n_prompt > 0, "oxi_generate: empty prompt");
  return guarded([&] {
    const oxi_generate_params p = params ? *params : oxi_generate_default_params();
    ctx->n_verify = ctx->n_drafted = ctx->n_accepted = 0;
    const oxi::GenerateResult r =
        oxi::generate_c(*ctx->session, *ctx->model->loaded, std::span<const int32_t>(prompt, n_prompt), p, on_token, user_data);
    if (result) {
      result->n_prompt = r.n_prompt;
      result->n_generated = r.n_generated;
      result->prompt_seconds = r.prompt_seconds;
      result->gen_seconds = r.gen_seconds;
      result->stop_reason = static_cast<int32_t>(r.stop);
    }
    ctx->n_verify = r.n_verify;
    ctx->n_drafted = r.n_drafted;
    ctx->n_accepted = r.n_accepted;
    if (r.stop == oxi::StopReason::kCancelled) return fail(OXI_ERR_CANCELLED, "generation cancelled");
    return OXI_OK;
  });
}

#if OXI_API_VISION
// A medium's `need` entries must fit what the context has left; refused before its tower runs.
static void require_room(const oxi::Session& ses, int64_t need, const char* what) {
  if (need > ses.n_ctx() - ses.n_past())
    oxi::throw_error(oxi::ErrorCode::kInvalidArgument, std::string(what) + " takes " + std::to_string(need) + " entries; the context has " +
                                                           std::to_string(ses.n_ctx() - ses.n_past()) + " left");
}

// Pre-fills a medium's entries (ent; rows [n, d] in embd, zero for its tokens) in the pieces
// [cut[k], cut[k + 1]) mtmd decodes them in; piece `bidir` (−1: none) non-causally.
static void prefill_pieces(oxi::Session& ses, const oxi::vision::MediaEntries& ent, const std::vector<float>& embd, size_t d,
                           const std::vector<size_t>& cut, int bidir) {
  for (size_t k = 0; k + 1 < cut.size(); ++k) {
    oxi::EntryRows rows{embd.data() + cut[k] * d, ent.pos3.data() + 3 * cut[k], static_cast<int>(k) == bidir};
    ses.prefill(std::span<const int32_t>(ent.tok.data() + cut[k], cut[k + 1] - cut[k]), oxi::GenerateOptions{}, rows);
  }
}
#endif

oxi_status oxi_context_prefill_image(oxi_context* ctx, const void* bytes, size_t n_bytes, int32_t* n_entries) {
  if (n_entries) *n_entries = 0;
  OXI_REQUIRE(ctx, "oxi_context_prefill_image: ctx must not be NULL");
  OXI_REQUIRE(bytes || n_bytes == 0, "oxi_context_prefill_image: bytes is NULL");
#if !OXI_API_VISION
  (void)bytes;
  return fail(OXI_ERR_UNSUPPORTED, "oxi_context_prefill_image: this build has no image support (the wasm build)");
#else
  if (oxi_status st = load_vision(*ctx->model); st != OXI_OK) return st;
  const oxi::vision::VisionInput* v = ctx->model->vision.get();
  OXI_REQUIRE(v, "oxi_context_prefill_image: the model has no vision tower (open it with oxi_model_params.mmproj)");
  return guarded([&] {
    oxi::Session& ses = *ctx->session;
    const oxi::vision::RgbImage img = oxi::vision::decode_image(
        std::span<const uint8_t>(static_cast<const uint8_t*>(bytes), n_bytes), "the image", 4096ll * 4096ll);
    // Refused before the tower runs when the rows cannot fit.
    const oxi::vision::Size g = v->grid({img.width, img.height});
    require_room(ses, g.width * g.height + 2, "the image");
    if (v->non_causal && g.width * g.height > oxi::Model::kMaxUbatch)
      oxi::throw_error(oxi::ErrorCode::kInvalidArgument, "the image makes " + std::to_string(g.width * g.height) +
                                                             " rows; this model attends to an image's rows together, in one pass of at most " +
                                                             std::to_string(oxi::Model::kMaxUbatch));
    const oxi::vision::ImageEmbedding e = v->encode(img);
    oxi::vision::MediaEntries ent;
    ent.mrope = v->mrope;
    ent.next = ses.next_position();
    const int32_t row_id[1] = {-1};
    ent.add_text(std::span<const int32_t>(&v->begin, 1));
    ent.add_image(e.nx, e.ny, row_id);
    ent.add_text(std::span<const int32_t>(&v->end, 1));
    const size_t d = static_cast<size_t>(ctx->model->model().info().n_embd), n = ent.tok.size();
    std::vector<float> embd(n * d, 0.0f);
    std::copy(e.rows.begin(), e.rows.end(), embd.begin() + static_cast<std::ptrdiff_t>(d));
    // Three pieces, as mtmd decodes them: the start token, the rows (one pass when they see each
    // other), the end token.
    prefill_pieces(ses, ent, embd, d, {0, 1, n - 1, n}, v->non_causal ? 1 : -1);
    if (n_entries) *n_entries = static_cast<int32_t>(n);
    return OXI_OK;
  });
#endif
}

#if OXI_API_VISION
// The model's audio tower, loaded once.
static oxi_status load_audio_tower(oxi_model& m) {
  return load_once(m.audio_once, [&] {
    const oxi::LoadedModel& lm = *m.loaded;
    m.audio = oxi::audio::load_gemma4_audio_tower(lm.model->info(), lm.files, m.mmproj);
  });
}
#endif

oxi_status oxi_context_prefill_audio(oxi_context* ctx, const void* bytes, size_t n_bytes, int32_t* n_entries) {
  if (n_entries) *n_entries = 0;
  OXI_REQUIRE(ctx, "oxi_context_prefill_audio: ctx must not be NULL");
  OXI_REQUIRE(bytes || n_bytes == 0, "oxi_context_prefill_audio: bytes is NULL");
#if !OXI_API_VISION
  (void)bytes;
  return fail(OXI_ERR_UNSUPPORTED, "oxi_context_prefill_audio: this build has no audio support (the wasm build)");
#else
  if (oxi_status st = load_audio_tower(*ctx->model); st != OXI_OK) return st;
  const oxi::audio::Gemma4ATower* a = ctx->model->audio.get();
  OXI_REQUIRE(a, "oxi_context_prefill_audio: the model has no audio tower (open it with oxi_model_params.mmproj)");
  return guarded([&] {
    oxi::Session& ses = *ctx->session;
    const oxi::LoadedModel& lm = *ctx->model->loaded;
    auto special = [&](const char* text) {
      const std::vector<int32_t> ids = lm.tokenizer->encode(text, false, true);
      if (ids.size() != 1) oxi::throw_error(oxi::ErrorCode::kUnsupported, std::string("the model's vocabulary has no ") + text + " token");
      return ids[0];
    };
    const int32_t begin = special("<|audio>"), end = special("<audio|>");
    const std::vector<float> samples = oxi::audio::decode_audio(
        std::span<const uint8_t>(static_cast<const uint8_t*>(bytes), n_bytes), "the audio", 16000);
    int64_t need = 2;
    for (int64_t n : oxi::audio::Gemma4ATower::chunk_rows(static_cast<int64_t>(samples.size()))) need += n;
    require_room(ses, need, "the audio");
    const oxi::audio::AudioEmbedding e = a->encode(samples);
    oxi::vision::MediaEntries ent;
    ent.mrope = false;
    ent.next = ses.next_position();
    const int32_t row_id[1] = {-1};
    std::vector<size_t> cut = ent.add_audio(begin, e.chunk_tokens, row_id, end);
    const size_t d = static_cast<size_t>(ctx->model->model().info().n_embd), n = ent.tok.size();
    std::vector<float> embd(n * d, 0.0f);
    std::copy(e.rows.begin(), e.rows.end(), embd.begin() + static_cast<std::ptrdiff_t>(d));
    // Pieces as mtmd decodes them: the start token, each 30-second chunk's rows (causal), the end token.
    cut.insert(cut.begin(), 0);
    cut.insert(cut.end(), {n - 1, n});
    prefill_pieces(ses, ent, embd, d, cut, -1);
    if (n_entries) *n_entries = static_cast<int32_t>(n);
    return OXI_OK;
  });
#endif
}

oxi_status oxi_context_spec_stats(const oxi_context* ctx, int32_t* n_verify, int32_t* n_drafted, int32_t* n_accepted) {
  OXI_REQUIRE(ctx, "oxi_context_spec_stats: ctx must not be NULL");
  if (n_verify) *n_verify = ctx->n_verify;
  if (n_drafted) *n_drafted = ctx->n_drafted;
  if (n_accepted) *n_accepted = ctx->n_accepted;
  return OXI_OK;
}

}  // extern "C"
