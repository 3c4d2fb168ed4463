// Forced tool calls (tool_choice "required" or a named function) as a TextConstraint in the model
// family's own call syntax, with the arguments tied to the chosen tool's `parameters` schema:
//   Qwen 3.5  <tool_call>\n{"name": N, "arguments": {…}}</tool_call>   (JSON form, which its
//             parser accepts beside the XML form); several candidate tools → one JSON automaton
//             per tool run side by side (UnionConstraint), so the arguments obey the schema of the
//             name actually written.
//   Gemma 4   <|tool_call>call:N{key:value,…}<tool_call|>   in Gemma's argument syntax (bare keys in
//             the template's dictsort order, strings between <|"|> marks), as a GBNF grammar built
//             from the schemas (gemma4_call_grammar) and run by GbnfConstraint.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "chat/parser.h"
#include "sampling/json_constraint.h"

namespace oxi {

// Accepts what any of its alternatives accepts; an alternative that rejects a byte is dropped.
// Complete when a live alternative is; finished when every live one that is complete is finished
// and no live one is incomplete.
class UnionConstraint final : public TextConstraint {
 public:
  explicit UnionConstraint(std::vector<std::unique_ptr<TextConstraint>> alts) : alts_(std::move(alts)) {}
  bool accepts(std::string_view bytes) const override;
  bool advance(std::string_view bytes) override;
  bool complete() const override;
  bool finished() const override;

 private:
  std::vector<std::unique_ptr<TextConstraint>> alts_;  // the live alternatives
};

// tools: OpenAI `tools` entries ({type:"function", function:{name, parameters}}); choice:
// "required" (any of them) or one function's name. prefix: bytes forced first (closing a reasoning
// block the template opened). Throws oxi::Error(kInvalidArgument) when choice names no tool or a
// schema cannot be enforced. Null for families without a tool-call syntax (kPlain).
std::shared_ptr<TextConstraint> forced_tool_constraint(const nlohmann::json& tools, const std::string& choice,
                                                       ChatFormat format, const std::string& prefix);

// The GBNF text for a forced Gemma 4 call to one of `tools` (already filtered to the candidates).
// Schema subset: type (incl. unions), properties/required, items/minItems, enum/const,
// anyOf/oneOf, minLength/maxLength on strings (up to 256, characters other than '<'); anything
// else falls back to "any Gemma value". Strings may not contain "<|" (Gemma's string mark starts
// with it). Exposed for tests.
std::string gemma4_call_grammar(const nlohmann::json& tools);

}  // namespace oxi
