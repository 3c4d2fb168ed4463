// Chat templates by name, for `--chat-template NAME` (docs/cli.md "llama.cpp flags"): llama.cpp's
// built-in template names, each as our own Jinja source written to render exactly what llama.cpp's
// built-in renderer (llama_chat_apply_template) produces for system / user / assistant messages
// with string content (tests/e2e/chat_template_builtin.test.sh compares them byte for byte).
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace oxi {

// The Jinja source of the named template; nullopt for a name we do not ship.
std::optional<std::string> builtin_chat_template(std::string_view name);

// Every name builtin_chat_template knows, sorted.
std::vector<std::string> builtin_chat_template_names();

}  // namespace oxi
