// Tokenizer -> GGUF metadata for the converters, as llama.cpp's converter writes it for these
// families (keys, value types and token types mirror llama.cpp-made files, e.g.
// shared/testdata/tokenizer/ggml-vocab-gemma-4.gguf):
//   Qwen (byte-level BPE): tokenizer.ggml.model "gpt2", .pre "qwen35"/"qwen2", .tokens, .token_type
//     (i32), .merges, .bos/.eos/.padding_token_id (u32, as found), .add_bos_token (false unless the
//     config says otherwise); the vocabulary is padded to `vocab_size` with "[PADn]" UNUSED tokens.
//   Gemma 4 (SentencePiece-style BPE): .model "gemma4" (no .pre), .tokens, .scores (f32, -1000),
//     .token_type (i32: special -> CONTROL except the 7 tool/channel/quote tokens -> USER_DEFINED,
//     <0xNN> -> BYTE, everything else NORMAL), .merges, .bos/.eos/.unknown/.padding/.mask_token_id,
//     .add_space_prefix false, .add_bos_token true.
//   Both: tokenizer.chat_template when a template is known.
#pragma once

#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

namespace oxi {

class GgufWriter;
struct HfCheckpoint;
struct TokenizerData;

struct TokenizerGgufOptions {
  int64_t vocab_size = 0;      // pad the vocabulary to this many tokens (config vocab_size); 0: none
  std::string chat_template;   // written when non-empty; else the tokenizer's own, if any
};

// `d` as loaded by tokenizer_data_from_json; `tokenizer_config` / `config` supply the special-token
// names and ids the way llama.cpp's SpecialVocab reads them (tokenizer_config first, then
// config.json ids). Throws oxi::Error(kFormat/kUnsupported).
void write_tokenizer_gguf_metadata(const TokenizerData& d, const nlohmann::json& tokenizer_config,
                                   const nlohmann::json& config, GgufWriter& w,
                                   const TokenizerGgufOptions& opt = {});

// Convenience for converters: reads hf.tokenizer_json_path (+ tokenizer_config), pads to
// text_config["vocab_size"], uses hf.chat_template.
void write_tokenizer_gguf_metadata(const HfCheckpoint& hf, GgufWriter& w);

}  // namespace oxi
