// C++-side hooks into the C API for tests and embedders that already hold the pieces (a Model and
// a Tokenizer built in memory). Not part of the public header.
#pragma once

#include <memory>
#include <string>

#include "models/model.h"
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

}  // namespace oxi
