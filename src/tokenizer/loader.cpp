// tokenizer.json / tokenizer_config.json and GGUF tokenizer.ggml.* -> TokenizerData.
#include <algorithm>
#include <cctype>
#include <filesystem>

#include <nlohmann/json.hpp>

#include "core/byte_source.h"
#include "core/error.h"
#include "core/json_limits.h"
#include "format/gguf.h"
#include "format/model_files.h"
#include "tokenizer/pretokenize.h"
#include "tokenizer/tokenizer.h"

namespace oxi {

namespace {

using json = nlohmann::json;

const char* const kEogTexts[] = {"<|im_end|>", "<|endoftext|>", "<turn|>", "<eos>", "<end_of_turn>",
                                 "<|tool_response>"};

bool is_byte_token_text(const std::string& t) {
  return t.size() == 6 && t.compare(0, 3, "<0x") == 0 && t[5] == '>' &&
         std::isxdigit(static_cast<unsigned char>(t[3])) && std::isxdigit(static_cast<unsigned char>(t[4]));
}

// Finds an id by exact token text (linear; used a handful of times at load).
int32_t id_of(const TokenizerData& d, const std::string& text) {
  for (const auto& a : d.added)
    if (d.tokens[static_cast<size_t>(a.id)] == text) return a.id;
  for (size_t i = 0; i < d.tokens.size(); ++i)
    if (d.tokens[i] == text) return static_cast<int32_t>(i);
  return -1;
}

void add_default_eog(TokenizerData& d) {
  for (const char* t : kEogTexts) {
    for (const auto& a : d.added) {
      if (d.tokens[static_cast<size_t>(a.id)] == t) d.eog.push_back(a.id);
    }
  }
}

std::string config_token(const json& cfg, const char* key) {
  auto it = cfg.find(key);
  if (it == cfg.end() || it->is_null()) return "";
  if (it->is_string()) return it->get<std::string>();
  if (it->is_object() && it->contains("content") && (*it)["content"].is_string())
    return (*it)["content"].get<std::string>();
  return "";
}

// Walks a normalizer / pre_tokenizer / decoder tree into a flat list of its leaf objects.
void flatten(const json& j, const char* list_key, std::vector<const json*>& out) {
  if (j.is_null()) return;
  if (!j.is_object()) return;
  if (j.value("type", "") == "Sequence" && j.contains(list_key) && j[list_key].is_array()) {
    for (const auto& e : j[list_key]) flatten(e, list_key, out);
    return;
  }
  out.push_back(&j);
}


// SAX handler: builds a DOM of tokenizer.json except model.vocab and model.merges, which go
// straight into vectors (the 262k-key vocab object and 515k merges dominate the DOM parse).
class TokenizerJsonSax : public nlohmann::json_sax<json> {
 public:
  json root;
  std::vector<std::pair<std::string, int64_t>> vocab;
  std::vector<std::pair<std::string, std::string>> merges;
  bool have_vocab = false, have_merges = false;
  std::string error;

  bool null() override { return value(json()); }
  bool boolean(bool v) override { return value(json(v)); }
  bool number_integer(number_integer_t v) override {
    if (mode_ == kVocab) { vocab.emplace_back(std::move(vkey_), v); return true; }
    return value(json(v));
  }
  bool number_unsigned(number_unsigned_t v) override {
    if (mode_ == kVocab) {
      vocab.emplace_back(std::move(vkey_), v > (1u << 31) ? -1 : static_cast<int64_t>(v));
      return true;
    }
    return value(json(v));
  }
  bool number_float(number_float_t v, const string_t&) override { return value(json(v)); }
  bool string(string_t& v) override {
    if (mode_ == kMerges) {
      const size_t sp = v.find(' ', 1);
      if (sp == std::string::npos) return fail("malformed merge '" + v + "'");
      merges.emplace_back(v.substr(0, sp), v.substr(sp + 1));
      return true;
    }
    if (mode_ == kPair) {
      pair_.push_back(std::move(v));
      return pair_.size() <= 2 || fail("malformed merge entry");
    }
    return value(json(std::move(v)));
  }
  bool binary(binary_t&) override { return fail("unexpected binary value"); }
  bool start_object(std::size_t) override {
    if (mode_ != kDom) return fail(mode_ == kVocab ? "model.vocab: nested object" : "malformed merge entry");
    if (in_model() && key_ == "vocab") {
      mode_ = kVocab;
      have_vocab = true;
      return true;
    }
    return push(json::object());
  }
  bool key(string_t& k) override {
    if (mode_ == kVocab) vkey_ = std::move(k);
    else key_ = std::move(k);
    return true;
  }
  bool end_object() override {
    if (mode_ == kVocab) { mode_ = kDom; return true; }
    stack_.pop_back();
    names_.pop_back();
    return true;
  }
  bool start_array(std::size_t) override {
    if (mode_ == kVocab) return fail("model.vocab: unexpected array");
    if (mode_ == kPair) return fail("malformed merge entry");
    if (mode_ == kMerges) { mode_ = kPair; pair_.clear(); return true; }
    if (in_model() && key_ == "merges") {
      mode_ = kMerges;
      have_merges = true;
      return true;
    }
    return push(json::array());
  }
  bool end_array() override {
    if (mode_ == kPair) {
      if (pair_.size() != 2) return fail("malformed merge entry");
      merges.emplace_back(std::move(pair_[0]), std::move(pair_[1]));
      mode_ = kMerges;
      return true;
    }
    if (mode_ == kMerges) { mode_ = kDom; return true; }
    stack_.pop_back();
    names_.pop_back();
    return true;
  }
  bool parse_error(std::size_t, const std::string&, const nlohmann::detail::exception& e) override {
    return fail(std::string("invalid JSON: ") + e.what());
  }

 private:
  enum Mode { kDom, kVocab, kMerges, kPair };
  Mode mode_ = kDom;
  std::vector<json*> stack_;
  std::vector<std::string> names_;
  std::string key_, vkey_;
  std::vector<std::string> pair_;

  bool fail(const std::string& what) {
    if (error.empty()) error = what;
    return false;
  }
  bool in_model() const { return stack_.size() == 2 && names_[1] == "model" && stack_[1]->is_object(); }
  json* place(json&& v) {
    if (mode_ != kDom) { fail("unexpected value in model.vocab/merges"); return nullptr; }
    if (stack_.empty()) { root = std::move(v); return &root; }
    json& top = *stack_.back();
    if (top.is_array()) { top.push_back(std::move(v)); return &top.back(); }
    json& slot = top[key_];
    slot = std::move(v);
    return &slot;
  }
  bool value(json&& v) { return place(std::move(v)) != nullptr; }
  bool push(json&& v) {
    const std::string name = stack_.empty() || stack_.back()->is_array() ? std::string() : key_;
    json* p = place(std::move(v));
    if (!p) return false;
    stack_.push_back(p);
    names_.push_back(name);
    return true;
  }
};

}  // namespace

TokenizerData tokenizer_data_from_json(const std::string& tokenizer_json_text,
                                       const std::string& tokenizer_config_text,
                                       const std::string& source) {
  json cfg = json::object();
  TokenizerJsonSax sax;
  bool ok = false;
  check_json_depth(tokenizer_json_text, source);
  if (!tokenizer_config_text.empty()) check_json_depth(tokenizer_config_text, source + ": tokenizer_config.json");
  try {
    ok = json::sax_parse(tokenizer_json_text, &sax);
  } catch (const std::exception& e) {
    format_error(source, std::string("invalid JSON: ") + e.what());
  }
  if (!ok) format_error(source, sax.error.empty() ? std::string("invalid JSON") : sax.error);
  json& tj = sax.root;
  if (!tokenizer_config_text.empty()) {
    try {
      cfg = json::parse(tokenizer_config_text);
    } catch (const std::exception& e) {
      format_error(source, std::string("tokenizer_config.json: invalid JSON: ") + e.what());
    }
    if (!cfg.is_object()) cfg = json::object();
  }
  if (!tj.is_object()) format_error(source, "not a JSON object");
  TokenizerData d;
  d.source = source;
  try {
    const json& model = tj.at("model");
    const std::string mtype = model.value("type", "");
    if (mtype != "BPE")
      throw_error(ErrorCode::kUnsupported, source + ": unsupported tokenizer model type '" + mtype + "'");
    // Normalizer.
    std::vector<const json*> norms;
    if (tj.contains("normalizer")) flatten(tj["normalizer"], "normalizers", norms);
    bool replace_space = false;
    for (const json* n : norms) {
      const std::string t = n->value("type", "");
      if (t == "NFC") {
        d.nfc = true;
      } else if (t == "Replace" && n->contains("pattern") && (*n)["pattern"].value("String", "") == " " &&
                 n->value("content", "") == "\xE2\x96\x81") {
        replace_space = true;
      } else {
        throw_error(ErrorCode::kUnsupported, source + ": unsupported normalizer '" + t + "'");
      }
    }
    // Pre-tokenizer.
    std::vector<const json*> pres;
    if (tj.contains("pre_tokenizer")) flatten(tj["pre_tokenizer"], "pretokenizers", pres);
    bool byte_level = false;
    bool have_split = false;
    for (const json* p : pres) {
      const std::string t = p->value("type", "");
      if (t == "ByteLevel") {
        if (p->value("use_regex", true))
          throw_error(ErrorCode::kUnsupported, source + ": unsupported pre-tokenizer ByteLevel with use_regex");
        if (p->value("add_prefix_space", false))
          throw_error(ErrorCode::kUnsupported, source + ": unsupported pre-tokenizer ByteLevel add_prefix_space");
        byte_level = true;
      } else if (t == "Split" && p->contains("pattern") && (*p)["pattern"].contains("Regex")) {
        const std::string re = (*p)["pattern"]["Regex"].get<std::string>();
        if (re == kQwen2SplitRegex) d.pre = PreTokenizerKind::kQwen2;
        else if (re == kQwen35SplitRegex) d.pre = PreTokenizerKind::kQwen35;
        else throw_error(ErrorCode::kUnsupported, source + ": unsupported pre-tokenizer split regex " + re);
        if (p->value("behavior", "") != "Isolated" || p->value("invert", false))
          throw_error(ErrorCode::kUnsupported, source + ": unsupported pre-tokenizer split behaviour");
        have_split = true;
      } else if (t == "Split" && replace_space && p->contains("pattern") &&
                 (*p)["pattern"].value("String", "") == " ") {
        // Splitting on ' ' after all spaces became U+2581 is a no-op (Gemma 3/4).
      } else {
        throw_error(ErrorCode::kUnsupported, source + ": unsupported pre-tokenizer '" + t + "'");
      }
    }
    if (byte_level) {
      if (!have_split)
        throw_error(ErrorCode::kUnsupported, source + ": byte-level tokenizer without a known split regex");
      if (replace_space) throw_error(ErrorCode::kUnsupported, source + ": byte-level tokenizer with U+2581 normalizer");
      d.model = TokenizerModel::kByteLevelBpe;
    } else {
      if (have_split) throw_error(ErrorCode::kUnsupported, source + ": split regex without ByteLevel");
      if (!replace_space && !model.value("byte_fallback", false))
        throw_error(ErrorCode::kUnsupported, source + ": unsupported BPE variant (neither byte-level nor SentencePiece-style)");
      d.model = TokenizerModel::kSentencePieceBpe;
      d.pre = PreTokenizerKind::kNone;
    }
    if (!model.value("continuing_subword_prefix", json()).is_null() &&
        !model["continuing_subword_prefix"].get<std::string>().empty())
      throw_error(ErrorCode::kUnsupported, source + ": continuing_subword_prefix not supported");
    if (!model.value("end_of_word_suffix", json()).is_null() &&
        !model["end_of_word_suffix"].get<std::string>().empty())
      throw_error(ErrorCode::kUnsupported, source + ": end_of_word_suffix not supported");
    d.byte_fallback = model.value("byte_fallback", false);
    d.ignore_merges = model.value("ignore_merges", false);

    // Vocabulary: model.vocab plus added_tokens (which may extend it).
    if (!sax.have_vocab) format_error(source, "model.vocab missing or not an object");
    const auto& vocab = sax.vocab;
    int64_t max_id = -1;
    for (const auto& v : vocab) {
      if (v.second < 0 || v.second >= (1 << 30))
        format_error(source, "token id out of range: " + std::to_string(v.second));
      max_id = std::max(max_id, v.second);
    }
    const json added = tj.value("added_tokens", json::array());
    for (const auto& a : added) {
      const int64_t id = a.at("id").get<int64_t>();
      if (id < 0 || id >= (1 << 30)) format_error(source, "added token id out of range: " + std::to_string(id));
      max_id = std::max(max_id, id);
    }
    // Ids must be (nearly) dense: a hostile file must not make us allocate 2^30 strings.
    if (max_id >= static_cast<int64_t>(vocab.size() + added.size()) + 65536)
      format_error(source, "token ids are sparse (max id " + std::to_string(max_id) + " for " +
                               std::to_string(vocab.size() + added.size()) + " tokens)");
    const size_t n = static_cast<size_t>(max_id + 1);
    d.tokens.assign(n, std::string());
    d.types.assign(n, TokenType::kUndefined);
    std::vector<uint8_t> seen(n, 0);
    for (const auto& v : vocab) {
      const auto id = static_cast<size_t>(v.second);
      d.tokens[id] = v.first;
      seen[id] = 1;
      d.types[id] = (d.model == TokenizerModel::kSentencePieceBpe && d.byte_fallback &&
                     is_byte_token_text(v.first))
                        ? TokenType::kByte
                        : TokenType::kNormal;
    }
    for (const auto& a : added) {
      TokenizerData::Added ad;
      ad.id = static_cast<int32_t>(a.at("id").get<int64_t>());
      ad.special = a.value("special", false);
      ad.lstrip = a.value("lstrip", false);
      ad.rstrip = a.value("rstrip", false);
      ad.normalized = a.value("normalized", false);
      const auto id = static_cast<size_t>(ad.id);
      d.tokens[id] = a.at("content").get<std::string>();
      seen[id] = 1;
      d.types[id] = ad.special ? TokenType::kControl : TokenType::kUserDefined;
      d.added.push_back(ad);
    }
    for (size_t i = 0; i < n; ++i) {
      if (!seen[i]) {
        d.tokens[i] = "[PAD" + std::to_string(i) + "]";
        d.types[i] = TokenType::kUnused;
      }
    }
    // Merges: "a b" strings (older files) or ["a", "b"] pairs.
    if (!sax.have_merges) format_error(source, "model.merges missing or not an array");
    d.merges = std::move(sax.merges);
    if (model.contains("unk_token") && model["unk_token"].is_string())
      d.unk = id_of(d, model["unk_token"].get<std::string>());

    // Special tokens and flags from tokenizer_config.json (fallback: the post-processor).
    auto tok_id = [&](const char* key) {
      const std::string t = config_token(cfg, key);
      return t.empty() ? -1 : id_of(d, t);
    };
    d.bos = tok_id("bos_token");
    d.eos = tok_id("eos_token");
    d.pad = tok_id("pad_token");
    if (d.unk < 0) d.unk = tok_id("unk_token");
    bool post_bos = false;
    if (tj.contains("post_processor") && tj["post_processor"].is_object()) {
      const json& pp = tj["post_processor"];
      if (pp.value("type", "") == "TemplateProcessing" && pp.contains("single") && pp["single"].is_array() &&
          !pp["single"].empty() && pp["single"][0].contains("SpecialToken")) {
        post_bos = true;
        if (d.bos < 0) d.bos = id_of(d, pp["single"][0]["SpecialToken"].value("id", ""));
      }
    }
    d.add_bos = cfg.contains("add_bos_token") && cfg["add_bos_token"].is_boolean()
                    ? cfg["add_bos_token"].get<bool>()
                    : post_bos;
    d.add_eos = cfg.contains("add_eos_token") && cfg["add_eos_token"].is_boolean() &&
                cfg["add_eos_token"].get<bool>();
    if (cfg.contains("chat_template")) {
      const json& ct = cfg["chat_template"];
      if (ct.is_string()) {
        d.chat_template = ct.get<std::string>();
      } else if (ct.is_array()) {
        for (const auto& e : ct)
          if (e.is_object() && e.value("name", "") == "default") d.chat_template = e.value("template", "");
      }
    }
  } catch (const Error&) {
    throw;
  } catch (const std::exception& e) {
    format_error(source, std::string("malformed tokenizer: ") + e.what());
  }
  add_default_eog(d);
  return d;
}

TokenizerData tokenizer_data_from_gguf(const GgufMetadata& md, const std::string& source) {
  TokenizerData d;
  d.source = source;
  const std::string model = md.get_string("tokenizer.ggml.model", "");
  const std::string pre = md.get_string("tokenizer.ggml.pre", "");
  if (model == "gpt2") {
    d.model = TokenizerModel::kByteLevelBpe;
    if (pre == "qwen2") d.pre = PreTokenizerKind::kQwen2;
    else if (pre == "qwen35") d.pre = PreTokenizerKind::kQwen35;
    else throw_error(ErrorCode::kUnsupported, source + ": unsupported pre-tokenizer '" + pre + "' (supported: qwen2, qwen35)");
    // No NFC, as llama.cpp (its test vectors feed decomposed text); tokenizer.json's NFC
    // normaliser applies when loading from JSON. See docs/tokenizer.md.
    d.nfc = false;
  } else if (model == "gemma4") {
    d.model = TokenizerModel::kSentencePieceBpe;
    d.pre = PreTokenizerKind::kNone;
    d.byte_fallback = true;
  } else {
    throw_error(ErrorCode::kUnsupported, source + ": unsupported tokenizer model '" + model + "' (supported: gpt2, gemma4)");
  }
  const GgufValue* toks = md.find("tokenizer.ggml.tokens");
  if (!toks) format_error(source, "missing metadata key tokenizer.ggml.tokens");
  d.tokens = toks->as_string_array();
  const size_t n = d.tokens.size();
  if (const GgufValue* tt = md.find("tokenizer.ggml.token_type")) {
    const std::vector<int64_t> v = tt->as_int_array();
    if (v.size() != n) format_error(source, "tokenizer.ggml.token_type size differs from tokens");
    d.types.resize(n);
    for (size_t i = 0; i < n; ++i) {
      if (v[i] < 0 || v[i] > 6) format_error(source, "invalid token type " + std::to_string(v[i]));
      d.types[i] = static_cast<TokenType>(v[i]);
    }
  } else {
    d.types.assign(n, TokenType::kNormal);
  }
  if (const GgufValue* sc = md.find("tokenizer.ggml.scores")) {
    d.scores = sc->as_float_array();
    if (d.scores.size() != n) format_error(source, "tokenizer.ggml.scores size differs from tokens");
  }
  if (const GgufValue* mg = md.find("tokenizer.ggml.merges")) {
    const auto& ms = mg->as_string_array();
    d.merges.reserve(ms.size());
    for (const auto& s : ms) {
      const size_t sp = s.find(' ', 1);
      if (sp == std::string::npos) format_error(source, "malformed merge '" + s + "'");
      d.merges.emplace_back(s.substr(0, sp), s.substr(sp + 1));
    }
  } else {
    format_error(source, "missing metadata key tokenizer.ggml.merges");
  }
  auto get_id = [&](const char* key) -> int32_t {
    const int64_t v = md.get_int(key, -1);
    if (v < -1 || v >= static_cast<int64_t>(n))
      format_error(source, std::string(key) + " out of range: " + std::to_string(v));
    return static_cast<int32_t>(v);
  };
  d.bos = get_id("tokenizer.ggml.bos_token_id");
  d.eos = get_id("tokenizer.ggml.eos_token_id");
  d.pad = get_id("tokenizer.ggml.padding_token_id");
  d.unk = get_id("tokenizer.ggml.unknown_token_id");
  d.add_bos = md.get_bool("tokenizer.ggml.add_bos_token", model == "gemma4");
  d.add_eos = md.get_bool("tokenizer.ggml.add_eos_token", false);
  d.chat_template = md.get_string("tokenizer.chat_template", "");
  for (size_t i = 0; i < n; ++i) {
    const TokenType t = d.types[i];
    if (t == TokenType::kControl || t == TokenType::kUserDefined || t == TokenType::kUnknown) {
      TokenizerData::Added a;
      a.id = static_cast<int32_t>(i);
      a.special = t != TokenType::kUserDefined;
      d.added.push_back(a);
    }
  }
  if (const GgufValue* eg = md.find("tokenizer.ggml.eog_token_ids")) {
    for (int64_t v : eg->as_int_array())
      if (v >= 0 && v < static_cast<int64_t>(n)) d.eog.push_back(static_cast<int32_t>(v));
  }
  add_default_eog(d);
  return d;
}

TokenizerPtr load_tokenizer_json(const std::string& tokenizer_json_path,
                                 const std::string& tokenizer_config_path) {
  const std::string tj = read_text_file(tokenizer_json_path);
  std::string cfg;
  if (!tokenizer_config_path.empty()) cfg = read_text_file(tokenizer_config_path);
  return std::make_shared<const Tokenizer>(tokenizer_data_from_json(tj, cfg, tokenizer_json_path));
}

TokenizerPtr load_tokenizer_gguf(const GgufMetadata& md, const std::string& source) {
  return std::make_shared<const Tokenizer>(tokenizer_data_from_gguf(md, source));
}

namespace {

// HF checkpoint pieces -> tokenizer: chat template override and config eos ids as extra EOG.
TokenizerPtr load_hf_tokenizer(const std::string& tokenizer_json_path, const json& tokenizer_config,
                               const std::string& chat_template,
                               std::initializer_list<const json*> configs) {
  TokenizerData d = tokenizer_data_from_json(read_text_file(tokenizer_json_path),
                                             tokenizer_config.is_object() ? tokenizer_config.dump() : "",
                                             tokenizer_json_path);
  if (!chat_template.empty()) d.chat_template = chat_template;
  // config.json / generation_config.json eos ids are end-of-generation too.
  for (const json* c : configs) {
    if (!c->is_object() || !c->contains("eos_token_id")) continue;
    const json& e = (*c)["eos_token_id"];
    // An id outside the vocabulary is a broken file, rejected as the GGUF path rejects it
    // (it used to be dropped silently, so 10^15 or -5 loaded as if absent).
    auto add = [&](const json& v) {
      const bool ok = v.is_number_unsigned() && v.get<uint64_t>() < d.tokens.size();
      if (!ok) {
        format_error(std::filesystem::path(tokenizer_json_path).parent_path().string(),
                     "eos_token_id " + v.dump() + " (config.json / generation_config.json) is not a token id");
      }
      d.eog.push_back(static_cast<int32_t>(v.get<uint64_t>()));
    };
    if (e.is_null()) continue;
    if (e.is_array()) for (const auto& v : e) add(v);
    else add(e);
  }
  return std::make_shared<const Tokenizer>(std::move(d));
}

json read_json_if_exists(const std::filesystem::path& p) {
  std::error_code ec;
  if (!std::filesystem::exists(p, ec)) return json::object();
  try {
    const std::string text = read_text_file(p.string());
    check_json_depth(text, p.string());
    return json::parse(text);
  } catch (const Error&) {
    throw;
  } catch (const std::exception& e) {
    format_error(p.string(), std::string("invalid JSON: ") + e.what());
  }
}

}  // namespace

TokenizerPtr load_tokenizer(const ModelFiles& files) {
  if (files.gguf) return load_tokenizer_gguf(files.gguf->metadata, files.path);
  if (!files.hf) throw_error(ErrorCode::kInvalidArgument, files.path + ": no model files");
  const HfCheckpoint& hf = *files.hf;
  if (hf.tokenizer_json_path.empty())
    throw_error(ErrorCode::kFormat, hf.dir + ": no tokenizer.json");
  return load_hf_tokenizer(hf.tokenizer_json_path, hf.tokenizer_config, hf.chat_template,
                           {&hf.generation_config, &hf.text_config, &hf.config});
}

TokenizerPtr load_tokenizer(const std::string& path) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (fs::is_directory(path, ec)) {
    // An HF checkpoint directory (weights not needed) or a bare tokenizer directory.
    const fs::path dir(path);
    const fs::path tj = dir / "tokenizer.json";
    if (!fs::exists(tj, ec)) throw_error(ErrorCode::kIo, path + ": no tokenizer.json in directory");
    const json tcfg = read_json_if_exists(dir / "tokenizer_config.json");
    const json config = read_json_if_exists(dir / "config.json");
    const json gen = read_json_if_exists(dir / "generation_config.json");
    const json text_config = config.is_object() && config.contains("text_config") ? config["text_config"] : json::object();
    std::string tmpl;
    if (fs::exists(dir / "chat_template.jinja", ec)) tmpl = read_text_file((dir / "chat_template.jinja").string());
    return load_hf_tokenizer(tj.string(), tcfg, tmpl, {&gen, &text_config, &config});
  }
  const std::string ext = path.size() >= 5 ? path.substr(path.size() - 5) : "";
  if (ext == ".json") {
    const fs::path tc = fs::path(path).parent_path() / "tokenizer_config.json";
    return load_tokenizer_json(path, fs::exists(tc, ec) ? tc.string() : "");
  }
  const GgufFile g = read_gguf(path);
  return load_tokenizer_gguf(g.metadata, path);
}

}  // namespace oxi
