// `oxinfer chat --template-only`: renders a conversation with a model's chat template (or a
// template file) and prints the prompt exactly, without running the model.
#pragma once

namespace oxi::cli {

// argv[0] is the subcommand name ("chat"); the other arguments are chat's options, including
// --template-only. Returns the process exit code (0 ok, 1 error, 2 usage).
int cmd_chat_template_only(int argc, char** argv);

}  // namespace oxi::cli
