// Grammar-constrained generation for response_format json_object / json_schema: a byte-level
// pushdown automaton that accepts exactly the prefixes of JSON documents valid for a schema
// subset (type incl. unions, properties/required/additionalProperties, items, enum, const,
// anyOf of simple types). Copyable: the sampler tests a candidate token on a copy.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

namespace oxi::server {

class JsonConstraint {
 public:
  // schema: a JSON Schema object, or null for "any JSON object" (json_object mode).
  // Throws RequestError(400) for schemas it cannot enforce.
  explicit JsonConstraint(const nlohmann::json& schema);

  // Would these bytes keep the text a valid prefix? (does not change the state)
  bool accepts(std::string_view bytes) const;
  // Consumes bytes; returns false (state unchanged) if they are not acceptable.
  bool advance(std::string_view bytes);
  // A complete document has been produced (only whitespace may follow).
  bool complete() const;

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
  };
  bool step(std::vector<Frame>& st, unsigned char c, int& ws_run) const;
  bool start_value(std::vector<Frame>& st, const Node* n, unsigned char c, int& ws_run) const;
  bool close_value(std::vector<Frame>& st) const;  // a value frame finished: pop into parent

  std::shared_ptr<const std::vector<std::unique_ptr<Node>>> nodes_;
  const Node* root_ = nullptr;
  std::vector<Frame> stack_;
  int ws_run_ = 0;
};

}  // namespace oxi::server
