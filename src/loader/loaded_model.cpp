#include "loader/loaded_model.h"

#include <chrono>

#include "core/byte_source.h"
#include "core/error.h"
#include "kernels/thread_pool.h"

namespace oxi {

namespace {

class TokenizerStream final : public TextStream {
 public:
  TokenizerStream(TokenizerPtr tok, bool skip_special) : dec_(std::move(tok), skip_special) {}
  std::string push(int32_t id) override { return dec_.push(id); }
  std::string flush() override { return dec_.flush(); }

 private:
  StreamDecoder dec_;
};

// tokenizer_config.json special tokens are either a string or {"content": "..."}.
std::string hf_token(const nlohmann::json& cfg, const char* key) {
  if (!cfg.is_object() || !cfg.contains(key)) return "";
  const auto& v = cfg[key];
  if (v.is_string()) return v.get<std::string>();
  if (v.is_object() && v.contains("content") && v["content"].is_string()) return v["content"].get<std::string>();
  return "";
}

std::string gguf_token(const GgufMetadata& md, const char* id_key) {
  const GgufValue* id = md.find(id_key);
  const GgufValue* toks = md.find("tokenizer.ggml.tokens");
  if (!id || !toks || !toks->is_array() || toks->elem_type != GgufType::STRING) return "";
  const int64_t i = id->as_int();
  const auto& arr = toks->as_string_array();
  if (i < 0 || uint64_t(i) >= arr.size()) return "";
  return arr[size_t(i)];
}

// Text, BOS/EOS and output format from the pieces already set (tokenizer, template, model/files).
void finish(LoadedModel& m, bool stream_special_tokens, const std::string& arch) {
  if (m.tokenizer) {
    m.text = std::make_unique<TokenizerText>(m.tokenizer, !stream_special_tokens);
    if (m.tokenizer->bos_id() >= 0) m.bos_text = m.tokenizer->token_to_piece(m.tokenizer->bos_id());
    if (m.tokenizer->eos_id() >= 0) m.eos_text = m.tokenizer->token_to_piece(m.tokenizer->eos_id());
  } else if (m.files.gguf) {
    m.bos_text = gguf_token(m.files.gguf->metadata, "tokenizer.ggml.bos_token_id");
    m.eos_text = gguf_token(m.files.gguf->metadata, "tokenizer.ggml.eos_token_id");
  } else if (m.files.hf) {
    m.bos_text = hf_token(m.files.hf->tokenizer_config, "bos_token");
    m.eos_text = hf_token(m.files.hf->tokenizer_config, "eos_token");
  }
  m.format = chat_format_for(arch, m.chat_template);
}

}  // namespace

TokenizerText::TokenizerText(TokenizerPtr tok, bool skip_special)
    : tok_(std::move(tok)), skip_special_(skip_special) {}

std::unique_ptr<TextStream> TokenizerText::new_stream() const {
  return std::make_unique<TokenizerStream>(tok_, skip_special_);
}

ChatFormat chat_format_for(const std::string& arch, const std::string& chat_template) {
  if (arch.rfind("gemma", 0) == 0) return ChatFormat::kGemma4;
  if (arch.rfind("qwen", 0) == 0) return ChatFormat::kQwen35;
  return detect_chat_format(chat_template);
}

std::unique_ptr<LoadedModel> load_model_bundle(const LoadRequest& req) {
  if (req.weights) {
    // The pool is process-wide and defaults to every hardware thread; only a request changes it.
    if (req.options.n_threads > 0) set_num_threads(req.options.n_threads);
    // The device backend is chosen before the weights load (they may be uploaded at load).
    backend::init(req.device);
  }
  auto m = std::make_unique<LoadedModel>();
  const auto t0 = std::chrono::steady_clock::now();
  m->files = open_model_files(req.path);
  if (req.tokenizer) {
    m->tokenizer = load_tokenizer(m->files);
    if (!m->tokenizer) throw_error(ErrorCode::kFormat, req.path + ": no tokenizer");
  }
  if (req.weights) {
    LoadOptions opt = req.options;
    if (!opt.device && req.gpu_layers != 0) opt.device = backend::active_block_device();
    if (!req.draft_path.empty()) {
      m->draft_file = open_model_files(req.draft_path);
      opt.draft = &*m->draft_file;
      opt.draft_path = req.draft_path;
    }
    m->model = load_model(m->files, opt);
    if (!m->model) throw_error(ErrorCode::kInternal, req.path + ": model loader returned nothing");
  }
  m->load_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();

  if (req.chat_template) {
    m->chat_template = *req.chat_template;
  } else if (!req.chat_template_file.empty()) {
    m->chat_template = read_text_file(req.chat_template_file);
  } else {
    if (m->tokenizer) m->chat_template = m->tokenizer->chat_template();
    if (m->chat_template.empty() && m->files.gguf) {
      m->chat_template = m->files.gguf->metadata.get_string("tokenizer.chat_template", "");
    }
    if (m->chat_template.empty() && m->files.hf) m->chat_template = m->files.hf->chat_template;
  }
  if (req.require_chat_template && m->chat_template.empty()) {
    throw_error(ErrorCode::kFormat, req.path + ": the model has no chat template (use --chat-template-file)");
  }
  std::string arch;
  if (m->model) {
    arch = m->model->info().arch;
  } else {
    try {
      arch = m->files.architecture();
    } catch (const Error&) {
      // files opened only for their template: an unknown architecture leaves the template to tell
    }
  }
  finish(*m, req.stream_special_tokens, arch);
  m->defaults = model_sampling_defaults(m->files, SamplingParams{});
  return m;
}

std::unique_ptr<LoadedModel> assemble_loaded_model(std::unique_ptr<Model> model, TokenizerPtr tokenizer,
                                                   const std::string& chat_template, bool stream_special_tokens) {
  if (!model || !tokenizer) throw_error(ErrorCode::kInvalidArgument, "assemble_loaded_model: missing model or tokenizer");
  auto m = std::make_unique<LoadedModel>();
  m->model = std::move(model);
  m->tokenizer = std::move(tokenizer);
  m->chat_template = chat_template;
  finish(*m, stream_special_tokens, m->model->info().arch);
  m->defaults = SamplingParams{};
  return m;
}

}  // namespace oxi
