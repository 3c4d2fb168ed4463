#include "tokenizer/gguf_export.h"

#include <algorithm>

#include "core/byte_source.h"
#include "core/error.h"
#include "format/gguf.h"
#include "format/hf.h"
#include "tokenizer/tokenizer.h"

namespace oxi {

namespace {

using json = nlohmann::json;

// Gemma 4 special tokens that llama.cpp's converter writes as USER_DEFINED (rendered in output).
const char* const kGemma4UserDefined[] = {"<|channel>", "<channel|>", "<|tool_call>", "<tool_call|>",
                                          "<|tool_response>", "<tool_response|>", "<|\"|>"};

std::string config_token(const json& cfg, const char* key) {
  if (!cfg.is_object()) return "";
  auto it = cfg.find(key);
  if (it == cfg.end() || it->is_null()) return "";
  if (it->is_string()) return it->get<std::string>();
  if (it->is_object() && it->contains("content") && (*it)["content"].is_string())
    return (*it)["content"].get<std::string>();
  return "";
}

int64_t config_id(const json& cfg, const char* key) {
  if (!cfg.is_object() || !cfg.contains(key)) return -1;
  const json& v = cfg[key];
  if (v.is_number_integer()) return v.get<int64_t>();
  if (v.is_array() && !v.empty() && v[0].is_number_integer()) return v[0].get<int64_t>();
  return -1;
}

// llama.cpp's converter heuristic for added tokens that should be CONTROL although not "special".
bool looks_special(const std::string& t) {
  if (t == "<pad>" || t == "<mask>" || t == "<2mass>" || t == "[@BOS@]") return true;
  auto starts = [&](const char* p) { return t.rfind(p, 0) == 0; };
  auto ends = [&](const char* p) {
    const size_t n = std::char_traits<char>::length(p);
    return t.size() >= n && t.compare(t.size() - n, n, p) == 0;
  };
  if (starts("<|") && ends("|>")) return true;
  if (starts("<\xEF\xBD\x9C") && ends("\xEF\xBD\x9C>")) return true;  // <｜ … ｜>
  if (starts("<unused") && ends(">")) return true;
  return false;
}

}  // namespace

void write_tokenizer_gguf_metadata(const TokenizerData& d, const json& tokenizer_config,
                                   const json& config, GgufWriter& w, const TokenizerGgufOptions& opt) {
  const size_t n0 = d.tokens.size();
  std::vector<std::string> tokens = d.tokens;
  std::vector<int32_t> types(n0);
  std::vector<uint8_t> is_added(n0, 0), is_special(n0, 0);
  for (const auto& a : d.added) {
    is_added[static_cast<size_t>(a.id)] = 1;
    is_special[static_cast<size_t>(a.id)] = a.special;
  }
  const bool gemma = d.model == TokenizerModel::kSentencePieceBpe;
  for (size_t i = 0; i < n0; ++i) {
    TokenType t;
    if (d.types[i] == TokenType::kUnused) {
      t = TokenType::kUnused;
    } else if (gemma) {
      if (is_added[i] && is_special[i]) {
        t = TokenType::kControl;
        for (const char* u : kGemma4UserDefined)
          if (tokens[i] == u) t = TokenType::kUserDefined;
      } else if (d.types[i] == TokenType::kByte) {
        t = TokenType::kByte;
      } else {
        t = TokenType::kNormal;
      }
    } else {
      if (is_added[i]) t = (is_special[i] || looks_special(tokens[i])) ? TokenType::kControl : TokenType::kUserDefined;
      else t = TokenType::kNormal;
    }
    types[i] = static_cast<int32_t>(t);
  }
  if (opt.vocab_size > 0) {
    if (opt.vocab_size > static_cast<int64_t>(n0) + (1 << 20))
      throw_error(ErrorCode::kFormat, d.source + ": vocab_size " + std::to_string(opt.vocab_size) +
                                          " is far above the tokenizer's " + std::to_string(n0) + " tokens");
    for (size_t i = n0; i < static_cast<size_t>(opt.vocab_size); ++i) {
      tokens.push_back("[PAD" + std::to_string(i) + "]");
      types.push_back(static_cast<int32_t>(TokenType::kUnused));
    }
  }
  std::vector<std::string> merges;
  merges.reserve(d.merges.size());
  for (const auto& m : d.merges) {
    if (m.first.find(' ') != std::string::npos || m.second.find(' ') != std::string::npos)
      throw_error(ErrorCode::kUnsupported, d.source + ": merge with a space cannot be written to GGUF");
    merges.push_back(m.first + " " + m.second);
  }

  // Special ids: tokenizer_config names first, then config.json ids (llama.cpp's SpecialVocab).
  auto find_text = [&](const std::string& text) -> int64_t {
    if (text.empty()) return -1;
    for (const auto& a : d.added)
      if (d.tokens[static_cast<size_t>(a.id)] == text) return a.id;
    for (size_t i = 0; i < n0; ++i)
      if (d.tokens[i] == text) return static_cast<int64_t>(i);
    return -1;
  };
  auto special_id = [&](const char* cfg_key, const char* config_key) -> int64_t {
    int64_t id = find_text(config_token(tokenizer_config, cfg_key));
    if (id < 0 && config_key) id = config_id(config, config_key);
    if (id >= static_cast<int64_t>(tokens.size())) id = -1;
    return id;
  };
  const int64_t bos = special_id("bos_token", "bos_token_id");
  const int64_t eos = special_id("eos_token", "eos_token_id");
  const int64_t unk = special_id("unk_token", nullptr);
  const int64_t pad = special_id("pad_token", "pad_token_id");
  const int64_t mask = special_id("mask_token", nullptr);

  std::string tmpl = opt.chat_template.empty() ? d.chat_template : opt.chat_template;

  if (gemma) {
    w.set_string("tokenizer.ggml.model", "gemma4");
    w.set_array_string("tokenizer.ggml.tokens", tokens);
    w.set_array_f32("tokenizer.ggml.scores", std::vector<float>(tokens.size(), -1000.0f));
    w.set_array_i32("tokenizer.ggml.token_type", types);
    w.set_array_string("tokenizer.ggml.merges", merges);
    if (bos >= 0) w.set_u32("tokenizer.ggml.bos_token_id", static_cast<uint32_t>(bos));
    if (eos >= 0) w.set_u32("tokenizer.ggml.eos_token_id", static_cast<uint32_t>(eos));
    if (unk >= 0) w.set_u32("tokenizer.ggml.unknown_token_id", static_cast<uint32_t>(unk));
    if (pad >= 0) w.set_u32("tokenizer.ggml.padding_token_id", static_cast<uint32_t>(pad));
    if (mask >= 0) w.set_u32("tokenizer.ggml.mask_token_id", static_cast<uint32_t>(mask));
    if (!tmpl.empty()) w.set_string("tokenizer.chat_template", tmpl);
    w.set_bool("tokenizer.ggml.add_space_prefix", false);
    w.set_bool("tokenizer.ggml.add_bos_token", true);
    return;
  }
  w.set_string("tokenizer.ggml.model", "gpt2");
  w.set_string("tokenizer.ggml.pre", d.pre == PreTokenizerKind::kQwen35 ? "qwen35" : "qwen2");
  w.set_array_string("tokenizer.ggml.tokens", tokens);
  w.set_array_i32("tokenizer.ggml.token_type", types);
  w.set_array_string("tokenizer.ggml.merges", merges);
  if (eos >= 0) w.set_u32("tokenizer.ggml.eos_token_id", static_cast<uint32_t>(eos));
  if (pad >= 0) w.set_u32("tokenizer.ggml.padding_token_id", static_cast<uint32_t>(pad));
  if (bos >= 0) w.set_u32("tokenizer.ggml.bos_token_id", static_cast<uint32_t>(bos));
  bool add_bos = false;
  if (tokenizer_config.is_object() && tokenizer_config.contains("add_bos_token") &&
      tokenizer_config["add_bos_token"].is_boolean())
    add_bos = tokenizer_config["add_bos_token"].get<bool>();
  w.set_bool("tokenizer.ggml.add_bos_token", add_bos);
  if (tokenizer_config.is_object() && tokenizer_config.contains("add_eos_token") &&
      tokenizer_config["add_eos_token"].is_boolean())
    w.set_bool("tokenizer.ggml.add_eos_token", tokenizer_config["add_eos_token"].get<bool>());
  if (!tmpl.empty()) w.set_string("tokenizer.chat_template", tmpl);
}

void write_tokenizer_gguf_metadata(const HfCheckpoint& hf, GgufWriter& w) {
  if (hf.tokenizer_json_path.empty()) throw_error(ErrorCode::kFormat, hf.dir + ": no tokenizer.json");
  const json& tc = hf.tokenizer_config;
  const TokenizerData d = tokenizer_data_from_json(read_text_file(hf.tokenizer_json_path),
                                                   tc.is_object() ? tc.dump() : "", hf.tokenizer_json_path);
  TokenizerGgufOptions opt;
  opt.chat_template = hf.chat_template;
  const int64_t vs = config_id(hf.text_config, "vocab_size");
  if (vs > static_cast<int64_t>(d.tokens.size())) opt.vocab_size = vs;
  json merged = hf.config.is_object() ? hf.config : json::object();
  if (hf.text_config.is_object())
    for (auto it = hf.text_config.begin(); it != hf.text_config.end(); ++it)
      if (!merged.contains(it.key())) merged[it.key()] = it.value();
  write_tokenizer_gguf_metadata(d, tc, merged, w, opt);
}

}  // namespace oxi
