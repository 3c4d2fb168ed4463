// Hugging Face checkpoint directory (or HF cache snapshot dir): config.json (text_config may be
// nested), model.safetensors or shards via model.safetensors.index.json, tokenizer.json,
// tokenizer_config.json, chat_template.jinja, generation_config.json.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "format/safetensors.h"
#include "format/tensor_index.h"

namespace oxi {

struct HfCheckpoint {
  std::string dir;
  nlohmann::json config;             // config.json as is
  nlohmann::json text_config;        // config["text_config"] if present, else config
  nlohmann::json generation_config;  // {} if absent
  nlohmann::json tokenizer_config;   // {} if absent
  std::string tokenizer_json_path;   // "" if absent (parsed lazily by the tokenizer)
  std::string chat_template;         // chat_template.jinja, else tokenizer_config["chat_template"]
  TensorIndex tensors;               // all shards merged; duplicates across shards rejected
  std::vector<ByteSourcePtr> sources;
};

// Throws oxi::Error(kFormat/kIo) naming the file on anything malformed (bad JSON, config not an
// object, index pointing at a missing shard, tensor listed in the index but absent from its shard).
HfCheckpoint read_hf_checkpoint(const std::string& dir);

// The sentence-transformers pooling of a checkpoint directory, read as llama.cpp's converter reads
// it (it writes the result as the GGUF key <arch>.pooling_type): the first modules.json entry of
// type "sentence_transformers.models.Pooling", its "path" + "/config.json", and there
// pooling_mode_mean_tokens → 1 (mean), else pooling_mode_cls_token → 2 (cls), else
// pooling_mode_lasttoken → 3 (last) (GGUF numbering; an absent mode counts as false).
struct StPooling {
  std::optional<int> type;  // nullopt: no modules.json, no Pooling module, or unusable (warning)
  std::string warning;      // why a config that is there was not used ("" when none)
};
// Never throws for what the files hold: bad JSON, wrong types, a module path that leaves the
// directory (absolute, "..", backslashes), a missing config, or only modes we do not pool with
// (max, weighted mean…) give no type and a warning naming the file (docs/server.md "Embeddings").
StPooling read_st_pooling(const std::string& dir);

}  // namespace oxi
