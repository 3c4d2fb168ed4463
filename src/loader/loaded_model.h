// The one place that assembles "a loaded model" for a caller (C API, server, bench, CLI): device
// backend and thread pool, model files, weights, tokenizer, chat template and the family's output
// format, sampling defaults. Callers ask for the parts they need (LoadRequest) and keep the
// LoadedModel alive as long as anything uses it.
#pragma once

#include <memory>
#include <optional>
#include <string>

#include "backend/backend.h"
#include "chat/parser.h"
#include "format/model_files.h"
#include "models/model.h"
#include "runtime/session.h"
#include "sampling/json_constraint.h"
#include "sampling/sampler.h"
#include "tokenizer/tokenizer.h"

namespace oxi {

// The tokenizer as the runtime sees it (TokenText: vocabulary size, end of generation, streamed
// text) and as constrained sampling sees it (ConstraintVocab: a token's bytes).
class TokenizerText final : public TokenText, public ConstraintVocab {
 public:
  // skip_special: streamed text leaves special tokens out (the C API) or shows them (the server,
  // whose output parsers read the family's markers).
  TokenizerText(TokenizerPtr tok, bool skip_special);

  int64_t vocab_size() const override { return tok_->n_vocab(); }
  bool is_eog(int32_t id) const override { return tok_->is_eog(id); }
  std::unique_ptr<TextStream> new_stream() const override;

  int64_t size() const override { return tok_->n_vocab(); }
  bool is_control(int32_t id) const override { return tok_->is_control(id); }
  const std::string& piece(int32_t id) const override { return tok_->token_to_piece(id); }

 private:
  TokenizerPtr tok_;
  bool skip_special_;
};

struct LoadRequest {
  std::string path;     // a .gguf file or an HF checkpoint directory
  LoadOptions options;  // threads (> 0 also sizes the process-wide pool), --quant, KV type, attention
  // backend::init spec: "" keeps the device already chosen, else env OXI_DEVICE, else auto.
  std::string device;
  // llama.cpp's -ngl, when the chosen device runs whole blocks (backend::active_block_device):
  // -1 or > 0 the whole model on it (LoadOptions::device), 0 only the per-matmul prefill offload.
  int32_t gpu_layers = -1;
  bool weights = true;    // false: no device, no thread pool change, no weights (model stays null)
  bool tokenizer = true;  // false: no tokenizer (text stays null; BOS/EOS text from the metadata)
  // Chat template: this source when set (even ""), else this file when non-empty, else the
  // model's own (GGUF tokenizer.chat_template, HF chat_template.jinja / tokenizer_config.json).
  std::optional<std::string> chat_template;
  std::string chat_template_file;
  // Throw kFormat "PATH: the model has no chat template (use --chat-template-file)" when none.
  bool require_chat_template = false;
  bool stream_special_tokens = false;  // TokenizerText's text shows special tokens
  // llama.cpp's -md: a draft model's GGUF or HF directory (Qwen 3.5: an MTP-only GGUF; Gemma 4: an
  // assistant drafter; LoadOptions::draft). "": none.
  std::string draft_path;
};

struct LoadedModel {
  // First member, so destroyed last: the last model out drops the device copies of its weights.
  backend::WeightsLease lease;
  ModelFiles files;                 // owns the mapped weights; the model points into them
  std::optional<ModelFiles> draft_file;  // LoadRequest::draft_path, mapped; the model points into it
  std::unique_ptr<Model> model;     // null when not asked for (LoadRequest::weights)
  TokenizerPtr tokenizer;           // null when not asked for
  std::unique_ptr<TokenizerText> text;
  std::string chat_template;        // Jinja source ("" when the model has none)
  ChatFormat format = ChatFormat::kPlain;  // output parser family: by architecture, else by template
  std::string bos_text, eos_text;   // the BOS/EOS token text templates receive ("" when none)
  SamplingParams defaults;          // llama.cpp's defaults overridden by the model's recommended ones
  double load_seconds = 0.0;        // opening the files and loading the weights
};

// Loads what the request asks for, in this order: thread pool and device (weights only), files,
// tokenizer, weights, chat template. Throws oxi::Error naming the file (kIo, kFormat, kUnsupported,
// kInvalidArgument, kInternal "model loader returned nothing").
std::unique_ptr<LoadedModel> load_model_bundle(const LoadRequest& request);

// Assembles a LoadedModel from pieces already in memory (tests, embedders): no files; sampling
// defaults are llama.cpp's.
std::unique_ptr<LoadedModel> assemble_loaded_model(std::unique_ptr<Model> model, TokenizerPtr tokenizer,
                                                   const std::string& chat_template, bool stream_special_tokens);

// The output parser family: Gemma 4 / Qwen 3.5 by architecture prefix, else by the template's
// markers (chat/parser.h detect_chat_format).
ChatFormat chat_format_for(const std::string& arch, const std::string& chat_template);

}  // namespace oxi
