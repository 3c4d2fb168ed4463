// Tokenizers of the supported families, loaded from tokenizer.json (+ tokenizer_config.json) or
// from GGUF `tokenizer.ggml.*` metadata, giving the same ids either way:
//   - byte-level BPE (Qwen 2/3/3.5: GGUF model "gpt2", pre "qwen2"/"qwen35"): NFC, the Qwen split
//     regex (hand-written matcher, see pretokenize.h), GPT-2 byte<->unicode map, merges by rank;
//   - SentencePiece-style BPE (Gemma 3/4: GGUF model "gemma4"/"llama"+merges): ' ' -> U+2581,
//     merges over characters, byte fallback <0xNN>.
// Added/special tokens are matched before pre-tokenisation (leftmost-longest). Thread-safe: a
// loaded Tokenizer is immutable; encode/decode may be called from many threads.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace oxi {

struct ModelFiles;
class GgufMetadata;

// GGUF token types (llama.cpp's values).
enum class TokenType : uint8_t {
  kUndefined = 0, kNormal = 1, kUnknown = 2, kControl = 3, kUserDefined = 4, kUnused = 5,
  kByte = 6,
};

enum class TokenizerModel : uint8_t { kByteLevelBpe, kSentencePieceBpe };
enum class PreTokenizerKind : uint8_t {
  kNone,     // no split (SentencePiece-style: only newline runs are split off, see docs)
  kQwen2,    // Qwen2/Qwen3 regex
  kQwen35,   // Qwen 3.5 regex: letter runs absorb combining marks [\p{L}\p{M}]+
};

class Tokenizer;
using TokenizerPtr = std::shared_ptr<const Tokenizer>;

// Everything a tokenizer is built from; the loaders fill it, the constructor validates it.
struct TokenizerData {
  TokenizerModel model = TokenizerModel::kByteLevelBpe;
  PreTokenizerKind pre = PreTokenizerKind::kQwen2;
  bool nfc = false;             // NFC normaliser
  bool ignore_merges = false;   // a pre-token that is a whole vocab entry is emitted as is
  bool byte_fallback = false;   // SentencePiece-style <0xNN> tokens
  std::vector<std::string> tokens;   // as stored (byte-level: GPT-2 alphabet; SPM: with U+2581)
  std::vector<TokenType> types;      // same size as tokens
  std::vector<float> scores;         // optional (SPM); empty when absent
  std::vector<std::pair<std::string, std::string>> merges;  // rank order
  // Added tokens (tokenizer.json added_tokens or GGUF CONTROL/USER_DEFINED/UNKNOWN tokens).
  struct Added {
    int32_t id = -1;
    bool special = true;
    bool lstrip = false, rstrip = false, normalized = false;
  };
  std::vector<Added> added;
  int32_t bos = -1, eos = -1, pad = -1, unk = -1;
  bool add_bos = false, add_eos = false;
  std::vector<int32_t> eog;          // extra end-of-generation ids (eos is always one)
  std::string chat_template;
  std::string source;                // file name for messages
};

class Tokenizer {
 public:
  explicit Tokenizer(TokenizerData data);  // throws oxi::Error(kFormat) on inconsistent data
  ~Tokenizer();
  Tokenizer(const Tokenizer&) = delete;
  Tokenizer& operator=(const Tokenizer&) = delete;

  // add_special: prepend BOS / append EOS as the tokenizer's config says (Gemma: one <bos>; Qwen:
  // nothing). parse_special: match special (CONTROL) tokens written in the text; non-special added
  // tokens (USER_DEFINED) are always matched, as in llama.cpp and HF tokenizers.
  std::vector<int32_t> encode(std::string_view text, bool add_special = true,
                              bool parse_special = true) const;
  // Chat prompts (issue 29 #11): text from users (message contents, tool definitions) must never
  // become control tokens, or "<|im_end|><|im_start|>system" in a message forges a system turn;
  // only the template's own markup is special. mark_user_text returns `text` with a marker in
  // every special-token string (text without one comes back unchanged); the template renders the
  // marked strings; encode_marked then tokenizes the rendered prompt as encode(text, add_special,
  // true) would, except that no special token is matched across a marked string, which is
  // tokenized as plain text, and the markers are dropped.
  std::string mark_user_text(std::string_view text) const;
  std::vector<int32_t> encode_marked(std::string_view rendered, bool add_special) const;
  // Bytes of the ids concatenated (may be invalid UTF-8 mid-sequence). skip_special drops CONTROL
  // tokens. Out-of-range ids throw oxi::Error(kInvalidArgument).
  std::string decode(const std::vector<int32_t>& ids, bool skip_special = false) const;
  // The bytes one token renders to (special tokens: their text). Throws on an out-of-range id.
  const std::string& token_to_piece(int32_t id) const;
  // The token's text as stored in the vocabulary (GPT-2 alphabet / U+2581 form).
  const std::string& token_text(int32_t id) const;

  int32_t n_vocab() const;
  int32_t bos_id() const;  // -1 when none
  int32_t eos_id() const;
  int32_t pad_id() const;
  int32_t unk_id() const;
  bool add_bos() const;
  bool add_eos() const;
  bool is_eog(int32_t id) const;
  const std::vector<int32_t>& eog_ids() const;
  TokenType token_type(int32_t id) const;  // kUndefined for out-of-range ids
  bool is_control(int32_t id) const { return token_type(id) == TokenType::kControl; }
  // Id of an added/special token or of any vocabulary entry with exactly this stored text;
  // -1 when absent. E.g. find_token("<|im_end|>").
  int32_t find_token(std::string_view text) const;
  const std::string& chat_template() const;
  TokenizerModel model() const;
  PreTokenizerKind pre_tokenizer() const;
  const TokenizerData& data() const;  // as loaded (for export)

  struct Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

// Incremental detokeniser for streaming output: push ids, get text that never ends in the middle
// of a UTF-8 sequence. Invalid byte sequences are emitted as U+FFFD, so output is valid UTF-8.
class StreamDecoder {
 public:
  explicit StreamDecoder(TokenizerPtr tok, bool skip_special = false);
  std::string push(int32_t id);  // text that became complete (possibly empty)
  std::string flush();           // whatever is pending (incomplete tail as U+FFFD)
  void reset();

 private:
  TokenizerPtr tok_;
  bool skip_special_;
  std::string pending_;
};

// Loaders. All throw oxi::Error naming the file on anything malformed, and
// oxi::Error(kUnsupported) for tokenizer kinds/pre-tokenizers not implemented.
TokenizerData tokenizer_data_from_json(const std::string& tokenizer_json_text,
                                       const std::string& tokenizer_config_text,
                                       const std::string& source);
TokenizerData tokenizer_data_from_gguf(const GgufMetadata& md, const std::string& source);

TokenizerPtr load_tokenizer_json(const std::string& tokenizer_json_path,
                                 const std::string& tokenizer_config_path = "");
TokenizerPtr load_tokenizer_gguf(const GgufMetadata& md, const std::string& source);
TokenizerPtr load_tokenizer(const ModelFiles& files);
// PATH: a .gguf, an HF checkpoint directory, or a tokenizer.json (its sibling
// tokenizer_config.json is used when present).
TokenizerPtr load_tokenizer(const std::string& path);

}  // namespace oxi
