// C++-side hooks into the C API for tests and embedders that already hold the pieces (a Model and
// a Tokenizer built in memory). Not part of the public header.
#pragma once

#include <memory>
#include <span>
#include <string>

#include "models/model.h"
#include "runtime/session.h"
#include "oxinfer.h"
#include "tokenizer/tokenizer.h"

namespace oxi {

// Wraps an already-loaded model and tokenizer as an oxi_model (free with oxi_model_free).
// chat_template: Jinja source ("" for none).
oxi_model* wrap_model(std::unique_ptr<Model> model, TokenizerPtr tokenizer,
                      const std::string& chat_template);

struct LoadedModel;
// The loaded pieces behind an oxi_model, for bindings that need more than the C API gives (the
// wasm module: special-token text for the chat output parsers, the file's weight type).
const LoadedModel& loaded_of(const oxi_model* model);

struct SamplingParams;
// The C API's sampling parameters as the sampler's (not validated).
SamplingParams from_c(const oxi_sampling_params& c);

// oxi_generate's work on a session the caller holds (the CLI's media prompts): p checked (throws
// oxi::Error kInvalidArgument with oxi_generate's messages), the grammar / JSON-schema constraint,
// speculative options, each token reported to on_token as an oxi_token_event. `rows`: the prompt's
// embedding rows and positions, as Session::generate takes them.
GenerateResult generate_c(Session& session, const LoadedModel& lm, std::span<const int32_t> prompt, const oxi_generate_params& p,
                          oxi_token_callback on_token, void* user_data, const EntryRows& rows = {});

}  // namespace oxi
