// Pieces the dialect translators share (dialects.h).
#include "server/dialects.h"

namespace oxi::server {

using nlohmann::json;

void bad(const std::string& param, const std::string& msg) { throw RequestError(400, param, msg); }

const json* present(const json& body, const char* key) {
  auto it = body.find(key);
  return it == body.end() || it->is_null() ? nullptr : &*it;
}

void refuse_unknown_fields(const json& body, std::initializer_list<const char*> known) {
  for (auto it = body.begin(); it != body.end(); ++it) {
    if (it->is_null()) continue;
    bool ok = false;
    for (const char* k : known) ok = ok || it.key() == k;
    if (!ok) bad(it.key(), "unsupported field '" + it.key() + "': it could change the output, so it is refused rather than ignored");
  }
}

json chat_tools(const json& tools, const std::function<json(const json&, const std::string&)>& to_function) {
  if (!tools.is_array()) bad("tools", "'tools' must be an array");
  json out = json::array();
  for (size_t i = 0; i < tools.size(); ++i) {
    const std::string w = "tools[" + std::to_string(i) + "]";
    if (!tools[i].is_object()) bad(w, w + " must be an object");
    out.push_back({{"type", "function"}, {"function", to_function(tools[i], w)}});
  }
  return out;
}

std::string text_of_blocks(const json& v, const std::string& where, std::initializer_list<const char*> text_types) {
  if (v.is_string()) return v.get<std::string>();
  if (!v.is_array()) bad(where, "'" + where + "' must be a string or an array of text blocks");
  std::string out;
  for (size_t i = 0; i < v.size(); ++i) {
    const json& b = v[i];
    const std::string w = where + "[" + std::to_string(i) + "]";
    if (!b.is_object() || !b.contains("type") || !b["type"].is_string()) bad(w, "each block needs a string 'type'");
    const std::string t = b["type"].get<std::string>();
    bool is_text = false;
    for (const char* tt : text_types) is_text = is_text || t == tt;
    if (!is_text) bad(w + ".type", "content block type '" + t + "' is not supported here (text only)");
    if (!b.contains("text") || !b["text"].is_string()) bad(w + ".text", "a text block needs a string 'text'");
    if (!out.empty()) out += "\n";
    out += b["text"].get<std::string>();
  }
  return out;
}

}  // namespace oxi::server
