// Grammar-constrained generation for response_format json_object / json_schema: a byte-level
// pushdown automaton that accepts exactly the prefixes of JSON documents valid for a schema
// subset (type incl. unions, properties/required/additionalProperties, items, enum, const,
// anyOf of simple types). Strings are well-formed UTF-8, whole characters at a time, and
// maxLength / minLength count characters. Copyable: the sampler tests a candidate token on a copy.
// Used by the server (response_format, forced tool calls) and the C API (oxi_generate_params
// json_schema); mask_rejected_tokens applies a constraint to a step's logits for both.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

namespace oxi {

// What constrained sampling needs: test bytes against the current state, consume bytes, and
// tell whether the output is complete (end-of-generation may follow) and finished (only
// end-of-generation may follow: a JSON document once complete; a grammar such as `item+` is
// complete after one item but not finished).
class TextConstraint {
 public:
  virtual ~TextConstraint() = default;
  virtual bool accepts(std::string_view bytes) const = 0;
  virtual bool advance(std::string_view bytes) = 0;
  virtual bool complete() const = 0;
  virtual bool finished() const { return complete(); }
  // A whole sampled token: its id, its bytes, and whether those bytes are text (false for control
  // tokens). Byte-level constraints see only text; a GBNF grammar's token references see the id.
  virtual bool accepts_token(int32_t id, std::string_view piece, bool text) const {
    (void)id;
    return text && !piece.empty() && accepts(piece);
  }
  virtual bool advance_token(int32_t id, std::string_view piece, bool text) {
    (void)id;
    return text && advance(piece);
  }
};

class JsonConstraint final : public TextConstraint {
 public:
  // schema: a JSON Schema object, or null for "any JSON object" (json_object mode).
  // Throws oxi::Error(kInvalidArgument) "json_schema: …" for schemas it cannot enforce.
  explicit JsonConstraint(const nlohmann::json& schema);

  // Would these bytes keep the text a valid prefix? (does not change the state)
  bool accepts(std::string_view bytes) const override;
  // Consumes bytes; returns false (state unchanged) if they are not acceptable.
  bool advance(std::string_view bytes) override;
  // A complete document has been produced (only whitespace may follow).
  bool complete() const override;

 public:
  struct Node;  // compiled schema node (defined in the .cpp)

 private:
  enum class Kind : uint8_t {
    kValue, kObject, kArray, kString, kNumber, kLiteral, kDone
  };
  struct Frame {
    Kind kind;
    uint8_t sub = 0;         // sub-state within the frame
    const Node* node = nullptr;
    uint32_t count = 0;      // object: keys seen; array: items seen; string: chars; literal: matched
    uint64_t seen_mask = 0;  // object: properties seen (first 64)
    int32_t key_index = -1;  // object: property being parsed (-1: free key)
    uint64_t alts = 0;       // literal: alternatives still alive (bit i: (*lit)[i])
    const std::vector<std::string>* lit = nullptr;  // literal: the alternatives
    bool is_key = false;     // string/literal frame is an object key
    uint8_t u8_need = 0;     // string: continuation bytes still due for the current character
    uint8_t u8_lo = 0x80, u8_hi = 0xbf;  // string: the range of the next continuation byte
    bool low_due = false;    // string: a \u escape of a high surrogate wants its low half next
    uint16_t esc = 0;        // string: the hex digits of the current \u escape so far
  };
  bool step(std::vector<Frame>& st, unsigned char c, int& ws_run) const;
  bool start_value(std::vector<Frame>& st, const Node* n, unsigned char c, int& ws_run) const;
  bool close_value(std::vector<Frame>& st) const;  // a value frame finished: pop into parent

  std::shared_ptr<const std::vector<std::unique_ptr<Node>>> nodes_;
  const Node* root_ = nullptr;
  std::vector<Frame> stack_;
  int ws_run_ = 0;
};

// A fixed prefix, then a JSON document, then a fixed suffix: forced tool calls in a family's
// syntax (Qwen: "<tool_call>\n" {"name":…,"arguments":{…}} "</tool_call>"). The suffix must not
// start with whitespace (whitespace may follow the document anyway).
class FramedJsonConstraint final : public TextConstraint {
 public:
  FramedJsonConstraint(std::string prefix, const nlohmann::json& schema, std::string suffix)
      : prefix_(std::move(prefix)), json_(schema), suffix_(std::move(suffix)), phase_(prefix_.empty() ? 1 : 0) {}
  bool accepts(std::string_view bytes) const override;
  bool advance(std::string_view bytes) override;
  bool complete() const override {
    return suffix_.empty() ? (phase_ == 1 && json_.complete()) : (phase_ == 2 && pos_ == suffix_.size());
  }

 private:
  // Runs bytes through a copy of the state; false if rejected.
  bool run(std::string_view bytes, int& phase, size_t& pos, JsonConstraint& json) const;
  std::string prefix_;
  JsonConstraint json_;
  std::string suffix_;
  int phase_;       // 0 prefix, 1 json, 2 suffix
  size_t pos_ = 0;  // bytes matched in the prefix/suffix
};

// What constrained sampling needs from a vocabulary (loader/loaded_model.h adapts the tokenizer).
class ConstraintVocab {
 public:
  virtual ~ConstraintVocab() = default;
  virtual int64_t size() const = 0;                       // ids [0, size) may be sampled
  virtual bool is_eog(int32_t id) const = 0;              // end of generation
  virtual bool is_control(int32_t id) const = 0;          // control tokens never match text (only token references)
  virtual const std::string& piece(int32_t id) const = 0;  // the token's bytes
};

// Masks (sets to -inf) the logits of tokens the constraint rejects (accepts_token); end-of-generation
// tokens are allowed only once the document is complete, other tokens only until it is finished. Only the best candidates are tested
// (most of a 150k–260k vocabulary is never sampled): the top 1024 by logit, best first, until 64
// are accepted; everything else is masked. If none of those is valid the whole vocabulary is
// scanned, so a valid token is always found when one exists; when none does, end-of-generation
// tokens are kept (the text ends unfinished rather than the request failing).
void mask_rejected_tokens(const TextConstraint& c, const ConstraintVocab& vocab, std::span<float> logits);

}  // namespace oxi
